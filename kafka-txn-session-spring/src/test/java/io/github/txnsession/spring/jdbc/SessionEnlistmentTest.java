package io.github.txnsession.spring.jdbc;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

import javax.sql.DataSource;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.SessionEnlistment;
import io.github.txnsession.spring.SessionProducerFactory;
import io.github.txnsession.spring.TransactionSessionPool;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.SimpleDriverDataSource;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.transaction.support.TransactionTemplate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

/**
 * A Kafka session enlisted in the application's own transaction manager (Spring's {@link JdbcTransactionManager}, as
 * Boot creates it): unchanged {@code JdbcTemplate} and {@code KafkaTemplate} code commits both or neither, with
 * rollback-only, {@code REQUIRES_NEW} and exceptions, in best-effort and in two-phase mode.
 */
class SessionEnlistmentTest {

    @RegisterExtension
    static final KafkaClusterExtension broker = KafkaClusterExtension.withBrokers(1);

    /** One application wired by hand: its own JDBC transaction manager, a pool, templates, maybe a decision log. */
    private static final class App implements AutoCloseable {

        final DataSource dataSource;
        final JdbcTemplate jdbc;
        final TransactionSessionPool pool;
        final KafkaTemplate<Object, Object> kafka;
        final JdbcTransactionManager transactionManager;
        final TransactionTemplate tx;
        final String topic;
        final DecisionLog decisionLog = new DecisionLog();

        App(boolean twoPhase) {
            this.dataSource = new SimpleDriverDataSource(new org.h2.Driver(), "jdbc:h2:mem:"
                    + EmbeddedKafkaCluster.uniqueName("enlist") + ";DB_CLOSE_DELAY=-1", "sa", "");
            this.jdbc = new JdbcTemplate(this.dataSource);
            this.jdbc.execute("CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY)");
            this.topic = EmbeddedKafkaCluster.uniqueName("enlisted");
            broker.cluster().createTopic(this.topic, 1);
            Map<String, Object> configs = new HashMap<>(broker.cluster().clientConfigs());
            configs.put(ProducerConfig.LINGER_MS_CONFIG, 1);
            this.pool = new TransactionSessionPool(EmbeddedKafkaCluster.uniqueName("enlist") + "-", 2,
                    Duration.ofSeconds(30), configs, List.of());
            SessionProducerFactory<Object, Object> factory = new SessionProducerFactory<>(this.pool, serializer(),
                    serializer(), configs);
            JdbcTwoPhaseDecision decision = null;
            if (twoPhase) {
                this.decisionLog.createTableIfMissing(this.dataSource);
                TwoPhaseRecovery recovery = new TwoPhaseRecovery(this.dataSource, this.decisionLog, this.pool, null);
                this.pool.setInDoubtResolver(recovery::recoverTransactionalId);
                decision = new JdbcTwoPhaseDecision(this.dataSource, this.decisionLog, recovery);
            }
            factory.setEnlistment(new SessionEnlistment(this.pool, decision));
            this.kafka = new KafkaTemplate<>(factory);
            this.transactionManager = new JdbcTransactionManager(this.dataSource);
            this.tx = new TransactionTemplate(this.transactionManager);
        }

        @SuppressWarnings({ "unchecked", "rawtypes" })
        private static Supplier<Serializer<Object>> serializer() {
            return () -> (Serializer) new StringSerializer();
        }

        void placeOrder(String id) {
            this.jdbc.update("INSERT INTO orders (id) VALUES (?)", id);
            this.kafka.send(this.topic, id, "placed " + id);
        }

        List<String> rows() {
            return this.jdbc.queryForList("SELECT id FROM orders ORDER BY id", String.class);
        }

        List<String> events() {
            List<String> keys = new ArrayList<>();
            for (ConsumerRecord<String, String> r : broker.cluster().readCommitted(this.topic)) {
                keys.add(r.key());
            }
            return keys;
        }

        @Override
        public void close() {
            this.pool.close();
        }
    }

    @Test
    void bestEffortCommitsBothOrNeitherWithTheApplicationsOwnTransactionManager() {
        try (App app = new App(false)) {
            runTheScenarios(app);
        }
    }

    @Test
    void twoPhaseCommitsBothOrNeitherAndLeavesNoDecisionBehind() {
        try (App app = new App(true)) {
            runTheScenarios(app);
            // cleared in the background after each Kafka commit
            await().atMost(Duration.ofSeconds(10)).until(() -> app.decisionLog.findByPrefix(app.dataSource,
                    app.pool.transactionalIdPrefix()).isEmpty());
        }
    }

    private static void runTheScenarios(App app) {
        app.tx.executeWithoutResult(status -> app.placeOrder("a-committed"));
        assertThatThrownBy(() -> app.tx.executeWithoutResult(status -> {
            app.placeOrder("b-thrown");
            throw new IllegalStateException("business failure");
        })).isInstanceOf(IllegalStateException.class);
        app.tx.executeWithoutResult(status -> {
            app.placeOrder("c-rollback-only");
            status.setRollbackOnly();
        });
        // an inner REQUIRES_NEW commits on its own; the outer transaction fails
        TransactionTemplate requiresNew = new TransactionTemplate(app.transactionManager);
        requiresNew.setPropagationBehavior(TransactionDefinition.PROPAGATION_REQUIRES_NEW);
        assertThatThrownBy(() -> app.tx.executeWithoutResult(status -> {
            app.placeOrder("d-outer");
            requiresNew.executeWithoutResult(inner -> app.placeOrder("e-inner"));
            throw new IllegalStateException("outer fails after the inner committed");
        })).isInstanceOf(IllegalStateException.class);
        // a transaction that never touches Kafka takes no session (two-phase: the sessions above come back to the
        // pool once their decision rows are cleared in the background)
        await().atMost(Duration.ofSeconds(10)).until(() -> app.pool.snapshot().inUse() == 0);
        app.tx.executeWithoutResult(status -> {
            app.jdbc.update("INSERT INTO orders (id) VALUES ('f-jdbc-only')");
            assertThat(app.pool.snapshot().inUse()).isZero();
        });
        assertThat(app.rows()).containsExactly("a-committed", "e-inner", "f-jdbc-only");
        assertThat(app.events()).containsExactlyInAnyOrder("a-committed", "e-inner");
        await().atMost(Duration.ofSeconds(10)).until(() -> app.pool.snapshot().inUse() == 0);
    }

    @Test
    void sendsFromCommitCallbacksAndNestedRollbacksNeverGoAroundTheTransaction() {
        try (App app = new App(true)) {
            // the first send of a transaction comes from an afterCommit callback: it still commits (best effort)
            app.tx.executeWithoutResult(status -> {
                app.jdbc.update("INSERT INTO orders (id) VALUES ('g-after-commit')");
                TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
                    @Override
                    public void afterCommit() {
                        app.kafka.send(app.topic, "g-after-commit", "sent after the commit");
                    }
                });
            });
            // a send while the transaction completes can join nothing: refused, no session leaks
            List<Throwable> refused = new java.util.concurrent.CopyOnWriteArrayList<>();
            app.tx.executeWithoutResult(status -> {
                app.jdbc.update("INSERT INTO orders (id) VALUES ('h-after-completion')");
                TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
                    @Override
                    public void afterCompletion(int completion) {
                        try {
                            app.kafka.send(app.topic, "h-after-completion", "too late");
                        }
                        catch (RuntimeException ex) {
                            refused.add(ex);
                        }
                    }
                });
            });
            assertThat(refused).singleElement().satisfies(ex -> assertThat(ex).hasStackTraceContaining(
                    "while the Spring transaction is completing"));
            // a nested (savepoint) rollback after Kafka joined: Kafka cannot undo part of it, so all rolls back
            TransactionTemplate nested = new TransactionTemplate(app.transactionManager);
            nested.setPropagationBehavior(TransactionDefinition.PROPAGATION_NESTED);
            assertThatThrownBy(() -> app.tx.executeWithoutResult(status -> {
                app.placeOrder("i-outer");
                try {
                    nested.executeWithoutResult(inner -> {
                        app.placeOrder("j-nested");
                        throw new IllegalStateException("nested part fails");
                    });
                }
                catch (IllegalStateException expected) {
                    // the application goes on with the outer transaction
                }
            })).hasMessageContaining("no savepoints");
            assertThat(app.rows()).containsExactly("g-after-commit", "h-after-completion");
            assertThat(app.events()).containsExactly("g-after-commit");
            await().atMost(Duration.ofSeconds(10)).until(() -> app.pool.snapshot().inUse() == 0);
        }
    }

    @Test
    void aTwoPhaseDecisionOutsideTheDatabaseTransactionIsRefusedAndBothRollBack() {
        try (App app = new App(true)) {
            DataSource other = new SimpleDriverDataSource(new org.h2.Driver(), "jdbc:h2:mem:"
                    + EmbeddedKafkaCluster.uniqueName("other") + ";DB_CLOSE_DELAY=-1", "sa", "");
            TransactionTemplate wrongManager = new TransactionTemplate(new JdbcTransactionManager(other));
            assertThatThrownBy(() -> wrongManager.executeWithoutResult(status -> app.kafka.send(app.topic, "x",
                    "sent in a transaction of another database"))).hasMessageContaining("must write its decision in "
                            + "the database transaction");
            assertThat(app.events()).isEmpty();
            assertThat(app.pool.snapshot().inUse()).isZero();
        }
    }
}
