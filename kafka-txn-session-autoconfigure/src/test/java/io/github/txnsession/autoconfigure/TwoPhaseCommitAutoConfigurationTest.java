package io.github.txnsession.autoconfigure;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import io.github.txnsession.kafka.PreparedTransaction;
import io.github.txnsession.kafka.SessionProducer;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.jdbc.DecisionLog;
import io.github.txnsession.spring.jdbc.LostTransaction;
import io.github.txnsession.spring.jdbc.LostTransactionHandler;
import io.github.txnsession.spring.jdbc.TwoPhaseRecovery;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.health.contributor.Status;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.boot.jdbc.autoconfigure.DataSourceTransactionManagerAutoConfiguration;
import org.springframework.boot.kafka.autoconfigure.KafkaAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.transaction.autoconfigure.TransactionAutoConfiguration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/** {@code kafka.txn-session.jdbc.enabled=true}: one transaction manager for H2 and Kafka, recovery at startup. */
class TwoPhaseCommitAutoConfigurationTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(b -> b
        .brokerProperty("transaction.abort.timed.out.transaction.cleanup.interval.ms", 300));

    private static ApplicationContextRunner runner(String prefix, String db) {
        return defaultSettings(prefix, db).withPropertyValues("kafka.txn-session.jdbc.enabled=true");
    }

    /** An application with a DataSource and the starter, nothing else configured. */
    private static ApplicationContextRunner defaultSettings(String prefix, String db) {
        return new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(TwoPhaseCommitAutoConfiguration.class,
                    TransactionSessionAutoConfiguration.class, SessionTransactionManagerAutoConfiguration.class,
                    KafkaAutoConfiguration.class, DataSourceAutoConfiguration.class,
                    DataSourceTransactionManagerAutoConfiguration.class, TransactionAutoConfiguration.class))
            .withPropertyValues("spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                    "spring.datasource.url=jdbc:h2:mem:" + db + ";DB_CLOSE_DELAY=-1",
                    "kafka.txn-session.transactional-id-prefix=" + prefix, "kafka.txn-session.pool-size=2");
    }

    @Test
    void defaultSettingsKeepBootsTransactionManagerAndRollBackTheDatabaseAndKafkaTogether() {
        String topic = EmbeddedKafkaCluster.uniqueName("auto-default");
        kafka.cluster().createTopic(topic, 1);
        defaultSettings(EmbeddedKafkaCluster.uniqueName("dflt") + "-", EmbeddedKafkaCluster.uniqueName("db"))
            .run(context -> {
                assertThat(context).hasNotFailed();
                // Boot's JDBC transaction manager stays the transaction manager; the sessions join it
                assertThat(context.getBean(PlatformTransactionManager.class))
                    .isInstanceOf(org.springframework.jdbc.support.JdbcTransactionManager.class);
                assertThat(context).hasSingleBean(io.github.txnsession.spring.SessionEnlistment.class)
                    .doesNotHaveBean(io.github.txnsession.spring.SessionTransactionManager.class);
                assertThat(context.getBean("kafkaListenerTransactionManager"))
                    .isInstanceOf(io.github.txnsession.spring.DatabaseSessionTransactionManager.class);
                placeOneOrderAndRollBackAnother(context, topic);
            });
        assertThat(kafka.cluster().readCommitted(topic)).extracting(ConsumerRecord::key).containsExactly("a-1");
    }

    /** The @Transactional shape with a plain TransactionTemplate on the context's transaction manager. */
    private static void placeOneOrderAndRollBackAnother(
            org.springframework.boot.test.context.assertj.AssertableApplicationContext context, String topic) {
        JdbcTemplate jdbc = new JdbcTemplate(context.getBean(javax.sql.DataSource.class));
        jdbc.execute("CREATE TABLE orders (id VARCHAR(32) PRIMARY KEY)");
        @SuppressWarnings("unchecked")
        KafkaTemplate<Object, Object> template = context.getBean(KafkaTemplate.class);
        TransactionTemplate tx = new TransactionTemplate(context.getBean(PlatformTransactionManager.class));
        tx.executeWithoutResult(s -> {
            jdbc.update("INSERT INTO orders (id) VALUES ('a-1')");
            template.send(topic, "a-1", "OrderPlaced");
        });
        try {
            tx.executeWithoutResult(s -> {
                jdbc.update("INSERT INTO orders (id) VALUES ('a-2')");
                template.send(topic, "a-2", "OrderPlaced");
                throw new IllegalStateException("rolled back");
            });
        }
        catch (IllegalStateException expected) {
            // both sides roll back
        }
        tx.executeWithoutResult(s -> {
            jdbc.update("INSERT INTO orders (id) VALUES ('a-3')");
            template.send(topic, "a-3", "OrderPlaced");
            s.setRollbackOnly();
        });
        assertThat(jdbc.queryForList("SELECT id FROM orders", String.class)).containsExactly("a-1");
    }

    @Test
    void transactionalTemplateSpansTheDatabaseAndKafka() {
        String topic = EmbeddedKafkaCluster.uniqueName("auto-2pc");
        kafka.cluster().createTopic(topic, 1);
        runner(EmbeddedKafkaCluster.uniqueName("auto") + "-", EmbeddedKafkaCluster.uniqueName("db")).run(context -> {
            assertThat(context).hasNotFailed();
            // Boot's JDBC manager stays; the sessions join it in two-phase mode
            assertThat(context.getBean(PlatformTransactionManager.class))
                .isInstanceOf(org.springframework.jdbc.support.JdbcTransactionManager.class);
            assertThat(context).hasSingleBean(io.github.txnsession.spring.jdbc.JdbcTwoPhaseDecision.class);
            // 2PC mode: sessions ask for the broker's transaction.max.timeout.ms (15 minutes by default)
            assertThat(context.getBean(io.github.txnsession.spring.TransactionSessionPool.class).sessionConfigs())
                .containsEntry("transaction.timeout.ms", "900000");
            placeOneOrderAndRollBackAnother(context, topic);
            JdbcTemplate jdbc = new JdbcTemplate(context.getBean(javax.sql.DataSource.class));
            // cleared in the background after the Kafka commit
            await().atMost(Duration.ofSeconds(10)).until(() -> jdbc.queryForObject(
                    "SELECT COUNT(*) FROM kafka_txn_decision_log", Integer.class) == 0);
        });
        assertThat(kafka.cluster().readCommitted(topic)).extracting(ConsumerRecord::key).containsExactly("a-1");
    }

    @Test
    void startupRecoveryCommitsADecidedTransactionAndReportsALostOne() throws Exception {
        String topic = EmbeddedKafkaCluster.uniqueName("auto-recover");
        kafka.cluster().createTopic(topic, 1);
        String prefix = EmbeddedKafkaCluster.uniqueName("rec") + "-";
        String db = EmbeddedKafkaCluster.uniqueName("db");
        // what a crash after the JDBC commit leaves: a prepared transaction and its decision row, for two slots;
        // slot 1's transaction times out before the application comes back
        PreparedTransaction decided = prepareAndAbandon(prefix + "0", topic, "decided", 120_000);
        PreparedTransaction lost = prepareAndAbandon(prefix + "1", topic, "lost", 1_000);
        await().atMost(Duration.ofSeconds(30)).until(() -> kafka.cluster().admin()
            .describeTransactions(List.of(prefix + "1")).description(prefix + "1").get()
            .state() != TransactionState.ONGOING);
        // the decision rows were committed before the crash: they are in the database when the application starts
        DecisionLog log = new DecisionLog();
        try (java.sql.Connection con = java.sql.DriverManager.getConnection("jdbc:h2:mem:" + db + ";DB_CLOSE_DELAY=-1",
                "sa", "")) {
            log.createTableIfMissing(new org.springframework.jdbc.datasource.SingleConnectionDataSource(con, true));
            con.setAutoCommit(false);
            log.record(con, prefix + "0", decided);
            log.record(con, prefix + "1", lost);
            con.commit();
        }
        List<LostTransaction> compensated = new ArrayList<>();
        runner(prefix, db).withBean(LostTransactionHandler.class, () -> compensated::addAll)
            // the endpoint is registered only when exposed (@ConditionalOnAvailableEndpoint, like Boot's own)
            .withPropertyValues("management.endpoints.web.exposure.include=health,txnsessionrecovery")
            .run(context -> {
                assertThat(context).hasNotFailed();
                TwoPhaseRecovery recovery = context.getBean(TwoPhaseRecovery.class);
                assertThat(recovery.committedCount()).isEqualTo(1);
                assertThat(recovery.lostTransactions()).extracting(LostTransaction::transactionalId)
                    .containsExactly(prefix + "1");
                assertThat(compensated).extracting(LostTransaction::transactionalId).containsExactly(prefix + "1");
                TwoPhaseRecoveryHealthIndicator health = context.getBean(TwoPhaseRecoveryHealthIndicator.class);
                assertThat(health.health().getStatus()).isEqualTo(Status.DOWN);
                assertThat(health.health().getDetails()).containsEntry("lostTransactionalIds", List.of(prefix + "1"));
                Map<String, Object> status = context.getBean(TwoPhaseRecoveryEndpoint.class).status();
                assertThat(status.get("lost")).isEqualTo(List.of(prefix + "1"));
                recovery.clearLost();
                assertThat(health.health().getStatus()).isEqualTo(Status.UP);
                assertThat(context.getBean(TwoPhaseRecoveryEndpoint.class).recover()).containsEntry("committed",
                        List.of());
            });
        assertThat(kafka.cluster().readCommitted(topic)).extracting(ConsumerRecord::value)
            .containsExactly("decided");
    }

    private static PreparedTransaction prepareAndAbandon(String txnId, String topic, String value, int timeoutMs) {
        Map<String, Object> configs = kafka.cluster().clientConfigs();
        configs.put("transactional.id", txnId);
        configs.put("transaction.timeout.ms", timeoutMs);
        TransactionSession session = TransactionSession.open(configs);
        session.initialize();
        session.beginTransaction();
        new SessionProducer<>(session, new StringSerializer(), new StringSerializer())
            .send(new ProducerRecord<>(topic, txnId, value));
        PreparedTransaction state = session.prepareTransaction();
        // a crash: the process is gone without abort (the session object is simply dropped)
        return state;
    }
}
