package io.github.txnsession.spring.jdbc;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

import javax.sql.DataSource;

import io.github.txnsession.spring.SessionProducerFactory;
import io.github.txnsession.spring.TransactionSessionPool;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.serialization.StringSerializer;

import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.SimpleDriverDataSource;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * The order flow of the two-phase-commit tests, wired by hand (no Boot): an orders table and an OrderPlaced event,
 * written in one {@link JdbcKafkaTransactionManager} transaction. Used in-process and by the crash child JVM.
 */
final class OrderFlow implements AutoCloseable {

    final DataSource dataSource;
    final DecisionLog decisionLog = new DecisionLog();
    final TransactionSessionPool pool;
    final SessionProducerFactory<Object, Object> producerFactory;
    final TwoPhaseRecovery recovery;
    final JdbcKafkaTransactionManager transactionManager;
    final JdbcTemplate jdbc;
    final KafkaTemplate<Object, Object> kafka;
    final TransactionTemplate tx;
    final String topic;

    OrderFlow(String bootstrap, String jdbcUrl, String prefix, String topic, Map<String, Object> sessionOverrides,
            LostTransactionHandler lostHandler) {
        this.dataSource = dataSource(jdbcUrl);
        this.topic = topic;
        Map<String, Object> configs = new HashMap<>();
        configs.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        configs.put(ProducerConfig.LINGER_MS_CONFIG, 1);
        configs.putAll(sessionOverrides);
        this.pool = new TransactionSessionPool(prefix, 2, Duration.ofSeconds(30), configs, List.of());
        this.producerFactory = new SessionProducerFactory<>(this.pool, stringSerializer(), stringSerializer(), configs);
        this.recovery = new TwoPhaseRecovery(this.dataSource, this.decisionLog, this.pool, lostHandler);
        this.transactionManager = new JdbcKafkaTransactionManager(this.pool, this.producerFactory, this.dataSource,
                this.decisionLog, this.recovery);
        this.jdbc = new JdbcTemplate(this.dataSource);
        this.kafka = new KafkaTemplate<>(this.producerFactory);
        this.tx = new TransactionTemplate(this.transactionManager);
    }

    static DataSource dataSource(String jdbcUrl) {
        try {
            java.sql.Driver driver = java.sql.DriverManager.getDriver(jdbcUrl);
            String user = jdbcUrl.startsWith("jdbc:postgresql") ? "postgres" : "sa";
            String password = jdbcUrl.startsWith("jdbc:postgresql") ? "postgres" : "";
            return new SimpleDriverDataSource(driver, jdbcUrl, user, password);
        }
        catch (java.sql.SQLException ex) {
            throw new IllegalStateException("No JDBC driver for " + jdbcUrl, ex);
        }
    }

    @SuppressWarnings({ "unchecked", "rawtypes" })
    private static Supplier<Serializer<Object>> stringSerializer() {
        return () -> (Serializer) new StringSerializer();
    }

    static void createSchema(DataSource dataSource) {
        new DecisionLog().createTableIfMissing(dataSource);
        new JdbcTemplate(dataSource).execute(
                "CREATE TABLE IF NOT EXISTS orders (id VARCHAR(64) PRIMARY KEY, ref VARCHAR(64))");
    }

    /** Inserts the order row and sends its OrderPlaced event, atomically. */
    void placeOrder(String id) {
        this.tx.executeWithoutResult(status -> {
            this.jdbc.update("INSERT INTO orders (id, ref) VALUES (?, ?)", id, "ref-" + id);
            this.kafka.send(this.topic, id, "OrderPlaced:" + id);
        });
    }

    List<String> orderIds() {
        return this.jdbc.queryForList("SELECT id FROM orders", String.class);
    }

    @Override
    public void close() {
        this.pool.close();
    }
}
