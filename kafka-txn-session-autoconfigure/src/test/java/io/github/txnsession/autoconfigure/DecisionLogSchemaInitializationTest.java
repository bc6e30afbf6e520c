package io.github.txnsession.autoconfigure;

import java.io.IOException;
import java.lang.reflect.Array;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;

import javax.sql.DataSource;

import io.github.txnsession.kafka.PreparedTransaction;
import io.github.txnsession.kafka.SessionProducer;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.jdbc.DecisionLog;
import io.github.txnsession.spring.jdbc.DecisionRecord;
import io.github.txnsession.spring.jdbc.TwoPhaseRecovery;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import org.springframework.beans.factory.InitializingBean;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.boot.jdbc.autoconfigure.DataSourceTransactionManagerAutoConfiguration;
import org.springframework.boot.kafka.autoconfigure.KafkaAutoConfiguration;
import org.springframework.boot.sql.init.dependency.AbstractBeansOfTypeDatabaseInitializerDetector;
import org.springframework.boot.test.context.assertj.AssertableApplicationContext;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.transaction.autoconfigure.TransactionAutoConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.io.DefaultResourceLoader;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The decision log table initialized the Spring Boot way ({@link DecisionLogDataSourceScriptDatabaseInitializer},
 * {@code kafka.txn-session.jdbc.initialize-schema}), in real application contexts on H2 (embedded) and PostgreSQL (a
 * real server from zonky's embedded binaries, not embedded for Boot): the shipped script creates the table with the
 * expected columns, two-phase commit and recovery work on it, a second start runs the script again on the existing
 * table, a table of an earlier version gets its new column, the modes, the fallbacks and the order after a migration
 * tool.
 *
 * <p>Not tested here: the shipped MySQL/MariaDB, Oracle and SQL Server scripts
 * ({@code io/github/txnsession/spring/jdbc/schema-{mysql,oracle,sqlserver}.sql}). No server of those databases can
 * run in this build (no embedded binaries from Maven Central, no containers); they are written from each database's
 * documented DDL, and the Oracle script's separator handling is the only part of them that this class's code path
 * decides.
 */
class DecisionLogSchemaInitializationTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    private static final AtomicInteger DATABASES = new AtomicInteger();

    private static final String TABLE = DecisionLog.DEFAULT_TABLE;

    /** The columns of the shipped scripts, as JDBC reports them on H2 and PostgreSQL. */
    private static final Map<String, Column> SHIPPED_COLUMNS = Map.of("transactional_id",
            new Column(Types.VARCHAR, false), "producer_id", new Column(Types.BIGINT, false), "producer_epoch",
            new Column(Types.SMALLINT, false), "txn_start_ms", new Column(Types.BIGINT, true), "decided_at",
            new Column(Types.TIMESTAMP, false));

    static EmbeddedPostgres postgres;

    enum Database {
        H2, POSTGRESQL
    }

    @BeforeAll
    static void startPostgres() throws IOException {
        postgres = EmbeddedPostgres.builder().start();
    }

    @AfterAll
    static void stopPostgres() throws IOException {
        if (postgres != null) {
            postgres.close();
        }
    }

    @ParameterizedTest
    @EnumSource(Database.class)
    void theShippedScriptCreatesTheTableTwoPhaseCommitAndRecoveryWorkOnItAndTheNextStartRunsItAgain(Database type)
            throws Exception {
        Db db = Db.create(type);
        String prefix = EmbeddedKafkaCluster.uniqueName("schema") + "-";
        String topic = EmbeddedKafkaCluster.uniqueName("schema-orders");
        kafka.cluster().createTopic(topic, 1);
        runner(db, prefix).run(context -> {
            assertThat(context).hasNotFailed().hasSingleBean(DecisionLogDataSourceScriptDatabaseInitializer.class);
            assertThat(db.columns(TABLE)).isEqualTo(SHIPPED_COLUMNS);
            assertThat(db.primaryKey(TABLE)).containsExactly("transactional_id");
            placeOneOrderAndRollBackAnother(context, topic);
            assertThat(db.count(TABLE)).isZero(); // the commit wrote its decision row and cleared it
        });
        // what a crash after the database commit leaves: a prepared Kafka transaction and its decision row
        PreparedTransaction decided = prepareAndAbandon(prefix + "0", topic, "decided");
        try (Connection con = db.connect()) {
            con.setAutoCommit(false);
            new DecisionLog().record(con, prefix + "0", decided);
            con.commit();
        }
        runner(db, prefix).run(context -> {
            // the script ran again on the existing table, and recovery completed the transaction from its row
            assertThat(context).hasNotFailed();
            assertThat(context.getBean(TwoPhaseRecovery.class).committedCount()).isEqualTo(1);
            assertThat(db.columns(TABLE)).isEqualTo(SHIPPED_COLUMNS);
            assertThat(db.count(TABLE)).isZero();
        });
        assertThat(kafka.cluster().readCommitted(topic)).extracting(ConsumerRecord::value)
            .containsExactly("OrderPlaced", "decided");
    }

    @ParameterizedTest
    @EnumSource(Database.class)
    void aTableOfAnEarlierVersionGetsTheStartTimeColumnAndKeepsItsRows(Database type) throws Exception {
        Db db = Db.create(type);
        db.execute("CREATE TABLE " + TABLE + " (transactional_id VARCHAR(512) NOT NULL PRIMARY KEY, producer_id "
                + "BIGINT NOT NULL, producer_epoch SMALLINT NOT NULL, decided_at TIMESTAMP NOT NULL)");
        // rows of other applications; one prefix has a LIKE wildcard character, which the log escapes
        db.execute("INSERT INTO " + TABLE + " (transactional_id, producer_id, producer_epoch, decided_at) VALUES "
                + "('other_app-0', 7, 1, CURRENT_TIMESTAMP)");
        db.execute("INSERT INTO " + TABLE + " (transactional_id, producer_id, producer_epoch, decided_at) VALUES "
                + "('otherXapp-0', 8, 1, CURRENT_TIMESTAMP)");
        runner(db, EmbeddedKafkaCluster.uniqueName("schema") + "-").run(context -> {
            assertThat(context).hasNotFailed();
            assertThat(db.columns(TABLE)).isEqualTo(SHIPPED_COLUMNS);
            List<DecisionRecord> rows = new DecisionLog().findByPrefix(context.getBean(DataSource.class),
                    "other_app-");
            assertThat(rows).singleElement().satisfies(row -> {
                assertThat(row.producerId()).isEqualTo(7);
                assertThat(row.txnStartMs()).isEqualTo(-1); // written before the column existed
            });
            assertThat(new DecisionLog().findByPrefix(context.getBean(DataSource.class), "otherXapp-"))
                .extracting(DecisionRecord::producerId).containsExactly(8L);
        });
    }

    @Test
    void runsAfterAMigrationToolAndBeforeTheBeansThatUseTheTable() throws Exception {
        Db db = Db.create(Database.H2);
        runner(db, EmbeddedKafkaCluster.uniqueName("schema") + "-")
            .withUserConfiguration(MigrationToolConfiguration.class)
            .run(context -> {
                // the migration tool created a table of an earlier version (plain CREATE TABLE: it would have failed
                // had the table existed), then the shipped script added the column
                assertThat(context).hasNotFailed();
                assertThat(db.columns(TABLE)).isEqualTo(SHIPPED_COLUMNS);
                ConfigurableListableBeanFactory beans = context.getBeanFactory();
                String initializer = "decisionLogDataSourceScriptDatabaseInitializer";
                assertThat(beans.getBeanDefinition(initializer).getDependsOn()).contains("migrationTool");
                assertThat(beans.getBeanDefinition("twoPhaseRecovery").getDependsOn()).contains(initializer,
                        "migrationTool");
                assertThat(beans.getBeanDefinition("jdbcTwoPhaseDecision").getDependsOn()).contains(initializer,
                        "migrationTool");
            });
    }

    @Test
    void embeddedModeInitializesAnEmbeddedDatabaseOnly() throws Exception {
        Db h2 = Db.create(Database.H2);
        runner(h2, EmbeddedKafkaCluster.uniqueName("schema") + "-")
            .withPropertyValues("kafka.txn-session.jdbc.initialize-schema=embedded")
            .run(context -> {
                assertThat(context).hasNotFailed();
                assertThat(h2.columns(TABLE)).isEqualTo(SHIPPED_COLUMNS);
            });
        Db pg = Db.create(Database.POSTGRESQL);
        runner(pg, EmbeddedKafkaCluster.uniqueName("schema") + "-")
            .withPropertyValues("kafka.txn-session.jdbc.initialize-schema=embedded",
                    "kafka.txn-session.jdbc.recover-on-startup=false")
            .run(context -> {
                assertThat(context).hasNotFailed().hasSingleBean(DecisionLogDataSourceScriptDatabaseInitializer.class);
                assertThat(pg.columns(TABLE)).isEmpty();
            });
    }

    @Test
    void neverRunsNothingAndRecoveryAtStartupThenSaysWhatIsMissing() throws Exception {
        Db db = Db.create(Database.H2);
        runner(db, EmbeddedKafkaCluster.uniqueName("schema") + "-")
            .withPropertyValues("kafka.txn-session.jdbc.initialize-schema=never",
                    "kafka.txn-session.jdbc.recover-on-startup=false")
            .run(context -> {
                assertThat(context).hasNotFailed()
                    .doesNotHaveBean(DecisionLogDataSourceScriptDatabaseInitializer.class);
                assertThat(db.columns(TABLE)).isEmpty();
            });
        runner(db, EmbeddedKafkaCluster.uniqueName("schema") + "-")
            .withPropertyValues("kafka.txn-session.jdbc.initialize-schema=never")
            .run(context -> assertFailureSays(context, "Could not read the decision log " + TABLE,
                    "does the table exist", "kafka.txn-session.jdbc.initialize-schema"));
    }

    @Test
    void theBooleanOfEarlierVersionsFailsNamingThePropertyAndTheModes() throws Exception {
        Db db = Db.create(Database.H2);
        runner(db, EmbeddedKafkaCluster.uniqueName("schema") + "-")
            .withPropertyValues("kafka.txn-session.jdbc.initialize-schema=true")
            .run(context -> assertFailureSays(context, "kafka.txn-session.jdbc.initialize-schema",
                    "DatabaseInitializationMode"));
    }

    @ParameterizedTest
    @EnumSource(Database.class)
    void anotherTableNameIsCreatedWithThePortableDdlAndTwoPhaseCommitWorksOnIt(Database type) throws Exception {
        Db db = Db.create(type);
        String topic = EmbeddedKafkaCluster.uniqueName("schema-orders");
        kafka.cluster().createTopic(topic, 1);
        runner(db, EmbeddedKafkaCluster.uniqueName("schema") + "-")
            .withPropertyValues("kafka.txn-session.jdbc.table=custom_decisions")
            .run(context -> {
                assertThat(context).hasNotFailed();
                assertThat(db.columns("custom_decisions")).isEqualTo(SHIPPED_COLUMNS);
                assertThat(db.columns(TABLE)).isEmpty();
                placeOneOrderAndRollBackAnother(context, topic);
                assertThat(db.count("custom_decisions")).isZero();
            });
        assertThat(kafka.cluster().readCommitted(topic)).extracting(ConsumerRecord::key).containsExactly("a-1");
    }

    @Test
    void aPlatformWithoutAShippedScriptFallsBackToThePortableDdl() throws Exception {
        Db db = Db.create(Database.H2);
        runner(db, EmbeddedKafkaCluster.uniqueName("schema") + "-")
            .withPropertyValues("kafka.txn-session.jdbc.platform=hsqldb")
            .run(context -> {
                assertThat(context).hasNotFailed();
                assertThat(db.columns(TABLE)).isEqualTo(SHIPPED_COLUMNS);
            });
    }

    @Test
    void aScriptOfTheApplicationsOwnRunsInsteadOfTheShippedOnes() throws Exception {
        Db db = Db.create(Database.H2);
        runner(db, EmbeddedKafkaCluster.uniqueName("schema") + "-")
            .withPropertyValues("kafka.txn-session.jdbc.table=own_decisions",
                    "kafka.txn-session.jdbc.schema=classpath:io/github/txnsession/autoconfigure/own-decision-log.sql")
            .run(context -> {
                assertThat(context).hasNotFailed();
                assertThat(db.columns("own_decisions")).containsKeys("note").containsAllEntriesOf(SHIPPED_COLUMNS);
                assertThat(db.columns(TABLE)).isEmpty();
            });
    }

    /**
     * What the databases that cannot run here would receive: the initializer picks the script of the detected
     * platform (MariaDB the MySQL one) and splits it into these statements (the Oracle script with its {@code /}
     * separator, into whole PL/SQL blocks). A stand-in {@code DataSource} reports the product name and records the
     * statements; nothing is executed.
     */
    @Test
    void theScriptsOfTheOtherDatabasesAreChosenByPlatformAndSplitIntoTheirStatements() throws Exception {
        List<String> oracle = statementsFor("Oracle");
        assertThat(oracle).hasSize(2).allSatisfy(statement -> assertThat(statement.strip()).startsWith("BEGIN "
                + "EXECUTE IMMEDIATE '").endsWith(" END;"));
        assertThat(oracle.get(0)).contains("'CREATE TABLE " + TABLE + " (' || 'transactional_id VARCHAR2(512 CHAR) "
                + "NOT NULL PRIMARY KEY, ' ||").contains("IF SQLCODE != -955 THEN RAISE; END IF;");
        assertThat(oracle.get(1)).contains("'ALTER TABLE " + TABLE + " ADD (txn_start_ms NUMBER(19))'")
            .contains("IF SQLCODE != -1430 THEN RAISE; END IF;");
        List<String> mysql = statementsFor("MySQL");
        assertThat(mysql).hasSize(5);
        assertThat(mysql.get(0)).startsWith("CREATE TABLE IF NOT EXISTS " + TABLE + " (").contains("ENGINE=InnoDB");
        assertThat(mysql.get(1)).startsWith("SET @kafka_txn_session_ddl = (SELECT IF(COUNT(*) = 0, 'ALTER TABLE "
                + TABLE + " ADD COLUMN txn_start_ms BIGINT NULL', 'SELECT 1')");
        assertThat(mysql.subList(2, 5)).containsExactly(
                "PREPARE kafka_txn_session_stmt FROM @kafka_txn_session_ddl", "EXECUTE kafka_txn_session_stmt",
                "DEALLOCATE PREPARE kafka_txn_session_stmt");
        assertThat(statementsFor("MariaDB")).isEqualTo(mysql);
        List<String> sqlServer = statementsFor("Microsoft SQL Server");
        assertThat(sqlServer).hasSize(2);
        assertThat(sqlServer.get(0)).startsWith("IF OBJECT_ID(N'" + TABLE + "', N'U') IS NULL CREATE TABLE " + TABLE)
            .contains("decided_at DATETIME2 NOT NULL");
        assertThat(sqlServer.get(1)).isEqualTo("IF COL_LENGTH(N'" + TABLE + "', N'txn_start_ms') IS NULL ALTER TABLE "
                + TABLE + " ADD txn_start_ms BIGINT NULL");
        assertThat(oracle).noneMatch(statement -> statement.contains("--"));
    }

    private static List<String> statementsFor(String productName) throws Exception {
        List<String> executed = new ArrayList<>();
        DecisionLogDataSourceScriptDatabaseInitializer initializer = new DecisionLogDataSourceScriptDatabaseInitializer(
                recording(productName, executed), new TwoPhaseCommitProperties());
        initializer.setResourceLoader(new DefaultResourceLoader());
        initializer.afterPropertiesSet();
        return executed.stream().map(String::strip).toList();
    }

    /** A {@code DataSource} of a database that is not here: reports its product name, records statements. */
    private static DataSource recording(String productName, List<String> executed) {
        InvocationHandler metaData = (proxy, method, args) -> "getDatabaseProductName".equals(method.getName())
                ? productName : standIn(proxy, method, args);
        InvocationHandler statement = (proxy, method, args) -> switch (method.getName()) {
            case "execute" -> {
                executed.add((String) args[0]);
                yield false; // no result set
            }
            case "getUpdateCount" -> -1;
            default -> standIn(proxy, method, args);
        };
        InvocationHandler connection = (proxy, method, args) -> switch (method.getName()) {
            case "getMetaData" -> proxy(DatabaseMetaData.class, metaData);
            case "createStatement" -> proxy(Statement.class, statement);
            case "getAutoCommit" -> true;
            default -> standIn(proxy, method, args);
        };
        return proxy(DataSource.class, (proxy, method, args) -> "getConnection".equals(method.getName())
                ? proxy(Connection.class, connection) : standIn(proxy, method, args));
    }

    private static <T> T proxy(Class<T> type, InvocationHandler handler) {
        return type.cast(Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] { type }, handler));
    }

    /** Object's methods, and nothing (false, 0, null) for everything else. */
    private static Object standIn(Object proxy, Method method, Object[] args) {
        return switch (method.getName()) {
            case "equals" -> proxy == args[0];
            case "hashCode" -> System.identityHashCode(proxy);
            case "toString" -> "stand-in " + method.getDeclaringClass().getSimpleName();
            default -> {
                Class<?> type = method.getReturnType();
                yield type.isPrimitive() && type != void.class ? Array.get(Array.newInstance(type, 1), 0) : null;
            }
        };
    }

    private static ApplicationContextRunner runner(Db db, String prefix) {
        return new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(TwoPhaseCommitAutoConfiguration.class,
                    TransactionSessionAutoConfiguration.class, SessionTransactionManagerAutoConfiguration.class,
                    KafkaAutoConfiguration.class, DataSourceAutoConfiguration.class,
                    DataSourceTransactionManagerAutoConfiguration.class, TransactionAutoConfiguration.class))
            .withPropertyValues("spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                    "spring.datasource.url=" + db.url(), "spring.datasource.username=" + db.user(),
                    "spring.datasource.password=", "kafka.txn-session.jdbc.enabled=true",
                    "kafka.txn-session.transactional-id-prefix=" + prefix, "kafka.txn-session.pool-size=2");
    }

    /** Through the context's transaction manager: one order commits, one rolls back; each wrote a row and a record. */
    private static void placeOneOrderAndRollBackAnother(AssertableApplicationContext context, String topic) {
        JdbcTemplate jdbc = new JdbcTemplate(context.getBean(DataSource.class));
        jdbc.execute("CREATE TABLE orders (id VARCHAR(32) PRIMARY KEY)");
        @SuppressWarnings("unchecked")
        KafkaTemplate<Object, Object> template = context.getBean(KafkaTemplate.class);
        TransactionTemplate tx = new TransactionTemplate(context.getBean(PlatformTransactionManager.class));
        tx.executeWithoutResult(s -> {
            jdbc.update("INSERT INTO orders (id) VALUES ('a-1')");
            template.send(topic, "a-1", "OrderPlaced");
        });
        tx.executeWithoutResult(s -> {
            jdbc.update("INSERT INTO orders (id) VALUES ('a-2')");
            template.send(topic, "a-2", "OrderPlaced");
            s.setRollbackOnly();
        });
        assertThat(jdbc.queryForList("SELECT id FROM orders", String.class)).containsExactly("a-1");
    }

    /** A transaction prepared and left behind, as by a process that crashed after the database commit. */
    private static PreparedTransaction prepareAndAbandon(String transactionalId, String topic, String value) {
        Map<String, Object> configs = kafka.cluster().clientConfigs();
        configs.put("transactional.id", transactionalId);
        configs.put("transaction.timeout.ms", 120_000);
        TransactionSession session = TransactionSession.open(configs);
        session.initialize();
        session.beginTransaction();
        new SessionProducer<>(session, new StringSerializer(), new StringSerializer())
            .send(new ProducerRecord<>(topic, transactionalId, value));
        return session.prepareTransaction();
    }

    private static void assertFailureSays(AssertableApplicationContext context, String... parts) {
        assertThat(context).hasFailed();
        StringBuilder messages = new StringBuilder();
        for (Throwable t = context.getStartupFailure(); t != null; t = t.getCause()) {
            messages.append(t.getMessage()).append('\n');
        }
        assertThat(messages.toString()).contains(parts);
    }

    /** A column as JDBC metadata reports it. */
    record Column(int jdbcType, boolean nullable) {
    }

    /** A fresh database, its connection settings, and plain JDBC to look into it. */
    record Db(String url, String user) {

        /** @return a new, empty H2 in-memory database, or a new database on the PostgreSQL server */
        static Db create(Database type) throws SQLException {
            String name = "decisions" + DATABASES.incrementAndGet();
            if (type == Database.H2) {
                return new Db("jdbc:h2:mem:" + name + ";DB_CLOSE_DELAY=-1", "sa");
            }
            try (Connection con = DriverManager.getConnection(postgres.getJdbcUrl("postgres", "postgres"),
                    "postgres", ""); Statement st = con.createStatement()) {
                st.execute("CREATE DATABASE " + name);
            }
            return new Db(postgres.getJdbcUrl("postgres", name), "postgres");
        }

        Connection connect() throws SQLException {
            return DriverManager.getConnection(this.url, this.user, "");
        }

        void execute(String sql) throws SQLException {
            try (Connection con = connect(); Statement st = con.createStatement()) {
                st.execute(sql);
            }
        }

        int count(String table) throws SQLException {
            try (Connection con = connect(); Statement st = con.createStatement();
                    ResultSet rs = st.executeQuery("SELECT COUNT(*) FROM " + table)) {
                rs.next();
                return rs.getInt(1);
            }
        }

        /** @return the table's columns by lower-case name; empty if there is no such table */
        Map<String, Column> columns(String table) throws SQLException {
            Map<String, Column> columns = new LinkedHashMap<>();
            try (Connection con = connect()) {
                DatabaseMetaData meta = con.getMetaData();
                try (ResultSet rs = meta.getColumns(null, null, pattern(meta, table), null)) {
                    while (rs.next()) {
                        columns.put(rs.getString("COLUMN_NAME").toLowerCase(Locale.ROOT), new Column(
                                rs.getInt("DATA_TYPE"), rs.getInt("NULLABLE") == DatabaseMetaData.columnNullable));
                    }
                }
            }
            return columns;
        }

        List<String> primaryKey(String table) throws SQLException {
            List<String> columns = new ArrayList<>();
            try (Connection con = connect()) {
                DatabaseMetaData meta = con.getMetaData();
                String name = meta.storesUpperCaseIdentifiers() ? table.toUpperCase(Locale.ROOT) : table;
                try (ResultSet rs = meta.getPrimaryKeys(null, null, name)) {
                    while (rs.next()) {
                        columns.add(rs.getString("COLUMN_NAME").toLowerCase(Locale.ROOT));
                    }
                }
            }
            return columns;
        }

        /** The table name as the database stores an unquoted identifier, its LIKE wildcards escaped. */
        private static String pattern(DatabaseMetaData meta, String table) throws SQLException {
            String name = meta.storesUpperCaseIdentifiers() ? table.toUpperCase(Locale.ROOT) : table;
            String escape = meta.getSearchStringEscape();
            return name.replace(escape, escape + escape).replace("_", escape + "_").replace("%", escape + "%");
        }
    }

    /** The application's migration tool as a bean named {@code migrationTool}. */
    @Configuration(proxyBeanMethods = false)
    static class MigrationToolConfiguration {

        @Bean
        MigrationTool migrationTool(DataSource dataSource) {
            return new MigrationTool(dataSource);
        }
    }

    /**
     * A migration tool of the application (a stand-in for Flyway or Liquibase, detected as a database initializer by
     * {@link MigrationToolDetector}): creates the decision log table as an earlier version did, without
     * {@code txn_start_ms}, with plain {@code CREATE TABLE}, which fails if the table exists.
     */
    static final class MigrationTool implements InitializingBean {

        private final DataSource dataSource;

        MigrationTool(DataSource dataSource) {
            this.dataSource = dataSource;
        }

        @Override
        public void afterPropertiesSet() {
            new JdbcTemplate(this.dataSource).execute("CREATE TABLE " + TABLE + " (transactional_id VARCHAR(512) NOT "
                    + "NULL PRIMARY KEY, producer_id BIGINT NOT NULL, producer_epoch SMALLINT NOT NULL, decided_at "
                    + "TIMESTAMP NOT NULL)");
        }
    }

    /**
     * Detects {@link MigrationTool} beans as database initializers, in the order of Boot's Flyway detector
     * (registered in this module's test {@code META-INF/spring.factories}).
     */
    static final class MigrationToolDetector extends AbstractBeansOfTypeDatabaseInitializerDetector {

        @Override
        protected Set<Class<?>> getDatabaseInitializerBeanTypes() {
            return Set.of(MigrationTool.class);
        }

        @Override
        public int getOrder() {
            return 1;
        }
    }
}
