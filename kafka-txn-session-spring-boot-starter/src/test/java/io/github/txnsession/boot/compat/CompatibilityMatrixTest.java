package io.github.txnsession.boot.compat;

import java.io.IOException;
import java.time.Duration;
import java.util.Date;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import javax.sql.DataSource;

import io.github.txnsession.autoconfigure.ForeignProducerFactoryException;
import io.github.txnsession.boot.CommittedReader;
import io.github.txnsession.boot.compat.CompatApp.Access;
import io.github.txnsession.boot.compat.CompatApp.Listener;
import io.github.txnsession.boot.compat.CompatApp.NewOrders;
import io.github.txnsession.boot.compat.CompatApp.Orders;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.SessionTransactionCounters;
import io.github.txnsession.spring.TransactionSessionPool;
import io.github.txnsession.spring.jdbc.DecisionLog;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicContainer;
import org.junit.jupiter.api.DynamicNode;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.function.Executable;

import org.springframework.boot.WebApplicationType;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.kafka.core.DefaultKafkaProducerFactory;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.orm.jpa.JpaTransactionManager;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.TransactionTimedOutException;
import org.springframework.transaction.support.ResourceHolderSupport;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.transaction.support.TransactionTemplate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.DynamicContainer.dynamicContainer;
import static org.junit.jupiter.api.DynamicTest.dynamicTest;

/**
 * The compatibility matrix of the starter in real Spring Boot contexts: {JdbcTemplate, JdbcClient, Spring Data JPA}
 * × {H2, PostgreSQL} × {default settings, {@code spring.kafka.producer.transaction-id-prefix} set, two-phase mode}
 * × {a {@code @Transactional} method that commits, one that throws, {@code TransactionTemplate} rollback-only and
 * timeout, {@code REQUIRES_NEW}, {@code executeInTransaction}, a {@code @KafkaListener} consume-process-produce with a
 * record that fails once}. Every cell keeps the database and Kafka atomic, checked by reading the table and a
 * {@code read_committed} consumer. A fourth setting, an application {@code ProducerFactory} of its own, fails at
 * startup with a message saying what to change.
 *
 * <p>One broker and one PostgreSQL server for the whole matrix; one application context per cell.
 */
class CompatibilityMatrixTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    static EmbeddedPostgres postgres;

    static final List<ConfigurableApplicationContext> open = new ArrayList<>();

    enum Database {
        H2, POSTGRESQL
    }

    enum Settings {
        /** nothing but the bootstrap servers and a database */
        DEFAULTS,
        /** how transactional spring-kafka applications are configured today */
        TRANSACTION_ID_PREFIX,
        /** kafka.txn-session.jdbc.enabled=true: decision row with the database commit, recovery */
        TWO_PHASE
    }

    @BeforeAll
    static void startPostgres() throws IOException {
        postgres = EmbeddedPostgres.builder().start();
    }

    @AfterAll
    static void stopAll() throws IOException {
        open.forEach(ConfigurableApplicationContext::close);
        if (postgres != null) {
            postgres.close();
        }
    }

    @TestFactory
    Stream<DynamicNode> matrix() {
        List<DynamicNode> nodes = new ArrayList<>();
        for (Access access : Access.values()) {
            for (Database database : Database.values()) {
                for (Settings settings : Settings.values()) {
                    nodes.add(cell(new Cell(access, database, settings)));
                }
                nodes.add(dynamicTest(access + " on " + database + ", own ProducerFactory: fails at startup",
                        () -> ownProducerFactoryFailsAtStartup(access, database)));
            }
        }
        return nodes.stream();
    }

    private static DynamicContainer cell(Cell cell) {
        List<DynamicNode> tests = new ArrayList<>();
        tests.add(dynamicTest("starts with the application's own transaction manager", cell::start));
        tests.add(scenario(cell, "@Transactional method commits row and event", () -> {
            cell.orders().place(cell.id("commit"));
            cell.assertCommitted(cell.id("commit"));
        }));
        tests.add(scenario(cell, "@Transactional method throws: neither row nor event", () -> {
            assertThatThrownBy(() -> cell.orders().placeThenFail(cell.id("throws")))
                .isInstanceOf(IllegalStateException.class);
            cell.assertRolledBack(cell.id("throws"));
        }));
        tests.add(scenario(cell, "@TransactionalEventListener(BEFORE_COMMIT) sends: with the row, or neither", () -> {
            String kept = cell.id("event-kept");
            String failed = cell.id("event-failed");
            cell.orders().placeViaEvent(kept, false, cell.context);
            assertThatThrownBy(() -> cell.orders().placeViaEvent(failed, true, cell.context))
                .isInstanceOf(IllegalStateException.class);
            cell.assertCommitted(kept);
            cell.assertRolledBack(failed);
        }));
        tests.add(scenario(cell, "TransactionTemplate setRollbackOnly: neither", () -> {
            cell.transactionTemplate().executeWithoutResult(status -> {
                cell.orders().write(cell.id("rollback-only"));
                status.setRollbackOnly();
            });
            cell.assertRolledBack(cell.id("rollback-only"));
        }));
        tests.add(scenario(cell, "TransactionTemplate timeout passed before a send: neither", () -> {
            TransactionTemplate tx = cell.transactionTemplate();
            tx.setTimeout(1);
            String id = cell.id("timeout");
            assertThatThrownBy(() -> tx.executeWithoutResult(status -> {
                cell.orders().write(id);
                cell.awaitDeadlineOfCurrentTransaction(); // the transaction's own 1 s timeout is what is tested
                cell.template().send(cell.topic, id + "-late", "too late");
            })).isInstanceOf(TransactionTimedOutException.class);
            cell.assertRolledBack(id);
            cell.assertNoEvent(id + "-late");
        }));
        tests.add(scenario(cell, "REQUIRES_NEW commits on its own, the failing outer rolls back", () -> {
            String outer = cell.id("outer");
            String inner = cell.id("inner");
            assertThatThrownBy(() -> cell.orders().placeAroundNewThenFail(outer, inner,
                    cell.context.getBean(NewOrders.class))).isInstanceOf(IllegalStateException.class);
            cell.assertCommitted(inner);
            cell.assertRolledBack(outer);
        }));
        tests.add(scenario(cell, "executeInTransaction commits its sends together, or none", () -> {
            String both = cell.id("execute");
            cell.template().executeInTransaction(t -> {
                t.send(cell.topic, both, "first");
                return t.send(cell.topic, both, "second");
            });
            assertThatThrownBy(() -> cell.template().executeInTransaction(t -> {
                t.send(cell.topic, cell.id("execute-fails"), "first");
                throw new IllegalStateException("the callback fails");
            })).isInstanceOf(IllegalStateException.class);
            Map<String, Long> perKey = cell.committedEventsPerKey();
            assertThat(perKey.get(both)).isEqualTo(2L);
            assertThat(perKey).doesNotContainKey(cell.id("execute-fails"));
        }));
        tests.add(scenario(cell, "executeInTransaction inside a failing @Transactional joins it: neither", () -> {
            String id = cell.id("execute-joined");
            assertThatThrownBy(() -> cell.orders().placeWithExecuteInTransactionThenFail(id))
                .isInstanceOf(IllegalStateException.class);
            cell.assertRolledBack(id);
        }));
        tests.add(scenario(cell, "send outside a transaction: refused, or plain with allowNonTransactional", () -> {
            assertThatThrownBy(() -> cell.template().send(cell.topic, cell.id("outside"), "no transaction"))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("No transaction is in process");
            cell.assertNoEvent(cell.id("outside"));
            KafkaTemplate<Object, Object> lenient = new KafkaTemplate<>(cell.template().getProducerFactory());
            lenient.setAllowNonTransactional(true);
            lenient.send(cell.topic, cell.id("non-transactional"), "allowed").get();
            assertThat(cell.committedEventsPerKey().get(cell.id("non-transactional"))).isEqualTo(1L);
        }));
        tests.add(scenario(cell, "@KafkaListener consume-process-produce, a record failing once: each once", () -> {
            cell.assertListenerProcessedEachRecordOnce();
        }));
        tests.add(dynamicTest("closes", cell::close));
        return dynamicContainer(cell.toString(), tests);
    }

    private static DynamicNode scenario(Cell cell, String name, Executable body) {
        return dynamicTest(name, () -> {
            cell.requireStarted();
            body.execute();
        });
    }

    private static void ownProducerFactoryFailsAtStartup(Access access, Database database) {
        Cell cell = new Cell(access, database, Settings.DEFAULTS);
        assertThatThrownBy(() -> cell.builder(OwnProducerFactory.class).run())
            .hasRootCauseInstanceOf(ForeignProducerFactoryException.class)
            .rootCause()
            .hasMessageContaining("applicationProducerFactory")
            .hasMessageContaining("bypass every transaction");
    }

    /** One cell: an application context and the topics it writes. */
    static final class Cell {

        static final int LISTENER_RECORDS = 6;

        final Access access;
        final Database database;
        final Settings settings;
        final String name;
        final String topic;
        final String in;
        final String out;
        final String group;
        ConfigurableApplicationContext context;

        Cell(Access access, Database database, Settings settings) {
            this.access = access;
            this.database = database;
            this.settings = settings;
            this.name = EmbeddedKafkaCluster.uniqueName(access.name().toLowerCase() + "-"
                    + database.name().toLowerCase() + "-" + settings.name().toLowerCase()).replace('_', '-');
            this.topic = this.name + "-events";
            this.in = this.name + "-in";
            this.out = this.name + "-out";
            this.group = this.name + "-group";
        }

        String id(String scenario) {
            return this.name + "/" + scenario;
        }

        SpringApplicationBuilder builder(Class<?>... extra) {
            List<String> properties = new ArrayList<>(List.of("spring.main.banner-mode=off",
                    "spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                    "spring.kafka.consumer.auto-offset-reset=earliest",
                    "spring.kafka.consumer.isolation-level=read-committed",
                    "spring.jpa.hibernate.ddl-auto=none",
                    "compat.access=" + this.access, "compat.topic=" + this.topic, "compat.in=" + this.in,
                    "compat.out=" + this.out, "compat.group=" + this.group));
            properties.add("spring.datasource.url=" + switch (this.database) {
                case H2 -> "jdbc:h2:mem:" + this.name + ";DB_CLOSE_DELAY=-1";
                case POSTGRESQL -> postgres.getJdbcUrl("postgres", "postgres");
            });
            if (this.database == Database.POSTGRESQL) {
                properties.add("spring.datasource.username=postgres");
            }
            if (this.access != Access.JPA) {
                // a plain JDBC application: Boot's JdbcTransactionManager, no JPA
                properties.add("spring.autoconfigure.exclude="
                        + "org.springframework.boot.hibernate.autoconfigure.HibernateJpaAutoConfiguration,"
                        + "org.springframework.boot.data.jpa.autoconfigure.DataJpaRepositoriesAutoConfiguration");
            }
            switch (this.settings) {
                case DEFAULTS -> { }
                case TRANSACTION_ID_PREFIX -> properties.add("spring.kafka.producer.transaction-id-prefix="
                        + this.name + "-tx-");
                case TWO_PHASE -> properties.add("kafka.txn-session.jdbc.enabled=true");
            }
            List<Class<?>> sources = new ArrayList<>(List.of(CompatApp.class));
            sources.addAll(List.of(extra));
            return new SpringApplicationBuilder(sources.toArray(Class<?>[]::new))
                .web(WebApplicationType.NONE)
                .properties(properties.toArray(String[]::new));
        }

        void start() throws Exception {
            kafka.cluster().createTopics(1, this.topic, this.out);
            kafka.cluster().createTopic(this.in, 2);
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(kafka.cluster().clientConfigs(),
                    new StringSerializer(), new StringSerializer())) {
                for (int i = 0; i < LISTENER_RECORDS; i++) {
                    producer.send(new ProducerRecord<>(this.in, id("listened-" + i), i % 3 == 1 ? "poison" : "ok"))
                        .get();
                }
            }
            this.context = builder().run();
            open.add(this.context);
            // one manager for @Transactional (the listener containers' own is not an injection candidate)
            PlatformTransactionManager manager = this.context.getBean(PlatformTransactionManager.class);
            assertThat(this.context.getBean("transactionManager")).isSameAs(manager);
            assertThat(this.context.containsBean("kafkaTransactionManager")).isFalse();
            assertThat(manager).isInstanceOf(this.access == Access.JPA ? JpaTransactionManager.class
                    : JdbcTransactionManager.class);
            if (this.settings == Settings.TRANSACTION_ID_PREFIX) {
                assertThat(this.context.getBean(TransactionSessionPool.class).transactionalIdPrefix())
                    .isEqualTo(this.name + "-tx-");
            }
        }

        /** Awaits the deadline the database transaction manager set for the calling thread's transaction. */
        void awaitDeadlineOfCurrentTransaction() {
            Object bound = TransactionSynchronizationManager.getResource(this.context.getBean(DataSource.class));
            assertThat(bound).as("the transaction's connection holder").isInstanceOf(ResourceHolderSupport.class);
            Date deadline = ((ResourceHolderSupport) bound).getDeadline();
            assertThat(deadline).as("the transaction's deadline").isNotNull();
            await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(20))
                .until(() -> new Date().after(deadline));
        }

        void requireStarted() {
            assertThat(this.context).as("the cell's application context (see its first test)").isNotNull();
        }

        void close() {
            if (this.context != null) {
                // the observers are wired in every mode: health and metrics see the enlisted transactions
                SessionTransactionCounters counters = this.context.getBean(SessionTransactionCounters.class);
                assertThat(counters.commits()).as("commits counted").isPositive();
                assertThat(counters.rollbacks()).as("rollbacks counted").isPositive();
                if (this.settings == Settings.TWO_PHASE) {
                    // cleared in the background after each Kafka commit
                    await().atMost(Duration.ofSeconds(10)).until(() -> jdbc().queryForObject("SELECT COUNT(*) FROM "
                            + DecisionLog.DEFAULT_TABLE, Integer.class) == 0);
                }
                this.context.close();
                open.remove(this.context);
            }
        }

        Orders orders() {
            return this.context.getBean(Orders.class);
        }

        @SuppressWarnings("unchecked")
        KafkaTemplate<Object, Object> template() {
            return this.context.getBean(KafkaTemplate.class);
        }

        TransactionTemplate transactionTemplate() {
            return new TransactionTemplate(this.context.getBean(PlatformTransactionManager.class));
        }

        JdbcTemplate jdbc() {
            return new JdbcTemplate(this.context.getBean(DataSource.class));
        }

        boolean rowExists(String id) {
            return jdbc().queryForObject("SELECT COUNT(*) FROM compat_order WHERE id = ?", Integer.class, id) == 1;
        }

        Map<String, Long> committedEventsPerKey() {
            return eventsPerKey(this.topic);
        }

        Map<String, Long> eventsPerKey(String topic) {
            return CommittedReader.readToEnd(kafka.bootstrapServers(), topic, true).stream()
                .collect(Collectors.groupingBy(ConsumerRecord::key, Collectors.counting()));
        }

        void assertCommitted(String id) {
            assertThat(rowExists(id)).as("row " + id).isTrue();
            assertThat(committedEventsPerKey().get(id)).as("committed events of " + id).isEqualTo(1L);
        }

        void assertRolledBack(String id) {
            assertThat(rowExists(id)).as("row " + id).isFalse();
            assertNoEvent(id);
        }

        void assertNoEvent(String id) {
            assertThat(committedEventsPerKey()).as("committed events").doesNotContainKey(id);
        }

        void assertListenerProcessedEachRecordOnce() {
            await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(100)).until(() -> kafka.cluster()
                .admin().listConsumerGroupOffsets(this.group).partitionsToOffsetAndMetadata().get().values()
                .stream().mapToLong(OffsetAndMetadata::offset).sum() == LISTENER_RECORDS);
            List<String> keys = Stream.iterate(0, i -> i + 1).limit(LISTENER_RECORDS)
                .map(i -> id("listened-" + i)).toList();
            assertThat(keys).allMatch(this::rowExists);
            Map<String, Long> perKey = eventsPerKey(this.out);
            assertThat(perKey).containsOnlyKeys(keys);
            assertThat(perKey.values()).allMatch(n -> n == 1L);
            assertThat(this.context.getBean(Listener.class).failedRecords()).isEqualTo(LISTENER_RECORDS / 3);
        }

        @Override
        public String toString() {
            return this.access + " on " + this.database + ", " + this.settings;
        }
    }

    /** An application that defines its own, non-transactional producer factory. */
    @Configuration(proxyBeanMethods = false)
    static class OwnProducerFactory {

        @Bean
        ProducerFactory<Object, Object> applicationProducerFactory() {
            return new DefaultKafkaProducerFactory<>(Map.of("bootstrap.servers", kafka.bootstrapServers(),
                    "key.serializer", StringSerializer.class, "value.serializer", StringSerializer.class));
        }
    }
}
