package io.github.txnsession.spring.jdbc;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import io.github.txnsession.kafka.PreparedTransaction;
import io.github.txnsession.kafka.SessionProducer;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.test.ChildJvm;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.CommitPhase;
import io.github.txnsession.spring.PooledSession;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.TransactionSystemException;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

/** Two-phase commit between PostgreSQL and Kafka: commit, rollback, a failing JDBC commit, lost transactions, prefixes. */
class TwoPhaseCommitTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(b -> b
        .brokerProperty("transaction.abort.timed.out.transaction.cleanup.interval.ms", 300));

    @RegisterExtension
    static final EmbeddedPostgresExtension postgres = new EmbeddedPostgresExtension();

    private static String topic() {
        String topic = EmbeddedKafkaCluster.uniqueName("orders");
        kafka.cluster().createTopic(topic, 1);
        return topic;
    }

    private static OrderFlow flow(String topic, String prefix, LostTransactionHandler handler) {
        OrderFlow flow = new OrderFlow(kafka.bootstrapServers(), postgres.jdbcUrl(), prefix, topic, Map.of(), handler);
        OrderFlow.createSchema(flow.dataSource);
        return flow;
    }

    private static List<String> events(String topic) {
        List<String> keys = new ArrayList<>();
        for (ConsumerRecord<String, String> r : kafka.cluster().readCommitted(topic)) {
            keys.add(r.key());
        }
        return keys;
    }

    @Test
    void commitWritesBothAndRollbackNeither() {
        String topic = topic();
        try (OrderFlow flow = flow(topic, EmbeddedKafkaCluster.uniqueName("ok") + "-", null)) {
            flow.placeOrder("ok-1");
            assertThatThrownBy(() -> flow.tx.executeWithoutResult(status -> {
                flow.jdbc.update("INSERT INTO orders (id, ref) VALUES (?, ?)", "ok-2", "r");
                flow.kafka.send(topic, "ok-2", "OrderPlaced:ok-2");
                throw new IllegalStateException("business failure");
            })).isInstanceOf(IllegalStateException.class);
            assertThat(flow.jdbc.queryForList("SELECT id FROM orders WHERE id LIKE 'ok-%'", String.class))
                .containsExactly("ok-1");
            assertThat(flow.decisionLog.findByPrefix(flow.dataSource, flow.pool.transactionalIdPrefix())).isEmpty();
        }
        assertThat(events(topic)).containsExactly("ok-1");
    }

    @Test
    void aConstraintViolationDeferredToTheJdbcCommitAbortsKafka() {
        String topic = topic();
        try (OrderFlow flow = flow(topic, EmbeddedKafkaCluster.uniqueName("deferred") + "-", null)) {
            JdbcTemplate jdbc = flow.jdbc;
            jdbc.execute("CREATE TABLE IF NOT EXISTS deferred_refs (ref VARCHAR(64), "
                    + "CONSTRAINT deferred_refs_unique UNIQUE (ref) DEFERRABLE INITIALLY DEFERRED)");
            assertThatThrownBy(() -> flow.tx.executeWithoutResult(status -> {
                jdbc.update("INSERT INTO deferred_refs (ref) VALUES ('same')");
                jdbc.update("INSERT INTO deferred_refs (ref) VALUES ('same')"); // fails only at commit
                flow.kafka.send(topic, "deferred-1", "OrderPlaced:deferred-1");
            })).isInstanceOf(TransactionSystemException.class)
                .hasMessageContaining("JDBC commit")
                .hasMessageContaining("aborted");
            assertThat(jdbc.queryForObject("SELECT COUNT(*) FROM deferred_refs", Integer.class)).isZero();
            assertThat(flow.decisionLog.findByPrefix(flow.dataSource, flow.pool.transactionalIdPrefix())).isEmpty();
            // the session is usable again
            flow.placeOrder("deferred-ok");
        }
        assertThat(events(topic)).containsExactly("deferred-ok");
    }

    @Test
    void recoveryOnDemandLeavesTheLiveSessionsAlone() {
        String topic = topic();
        try (OrderFlow flow = flow(topic, EmbeddedKafkaCluster.uniqueName("live") + "-", null)) {
            flow.placeOrder("live-1");
            flow.tx.executeWithoutResult(status -> {
                flow.jdbc.update("INSERT INTO orders (id, ref) VALUES ('live-2', 'r')");
                flow.kafka.send(topic, "live-2", "OrderPlaced:live-2");
                flow.kafka.flush();
                // an operator runs recovery while this transaction is open
                RecoveryReport report = flow.recovery.recover();
                assertThat(report.aborted()).isEmpty();
            });
            assertThat(flow.jdbc.queryForList("SELECT id FROM orders WHERE id LIKE 'live-%' ORDER BY id",
                    String.class)).containsExactly("live-1", "live-2");
        }
        assertThat(events(topic)).containsExactly("live-1", "live-2");
    }

    @Test
    void aTransactionPastItsTimeoutRollsBothBackAtCommit() {
        String topic = topic();
        try (OrderFlow flow = flow(topic, EmbeddedKafkaCluster.uniqueName("timeout") + "-", null)) {
            org.springframework.transaction.support.TransactionTemplate oneSecond =
                    new org.springframework.transaction.support.TransactionTemplate(flow.transactionManager);
            oneSecond.setTimeout(1);
            assertThatThrownBy(() -> oneSecond.executeWithoutResult(status -> {
                flow.jdbc.update("INSERT INTO orders (id, ref) VALUES ('slow-1', 'r')");
                flow.kafka.send(topic, "slow-1", "OrderPlaced:slow-1");
                // slow database work (server side) until the transaction's timeout has passed
                flow.jdbc.queryForList("SELECT pg_sleep(0.6)");
                flow.jdbc.queryForList("SELECT pg_sleep(0.6)");
            })).isInstanceOf(org.springframework.transaction.TransactionTimedOutException.class);
            assertThat(flow.jdbc.queryForList("SELECT id FROM orders WHERE id = 'slow-1'", String.class)).isEmpty();
        }
        assertThat(events(topic)).isEmpty();
    }

    @Test
    void recoveryAfterTheKafkaTimeoutReportsLostAndCallsTheHook() {
        String topic = topic();
        String prefix = EmbeddedKafkaCluster.uniqueName("lost") + "-";
        OrderFlow.createSchema(OrderFlow.dataSource(postgres.jdbcUrl()));
        crash(prefix, topic, CommitPhase.AFTER_JDBC_COMMIT, 0, 100, "1500");
        await().atMost(Duration.ofSeconds(30)).until(() -> kafka.cluster().admin()
            .describeTransactions(List.of(prefix + "0")).description(prefix + "0").get()
            .state() != TransactionState.ONGOING);
        List<LostTransaction> handled = new ArrayList<>();
        try (OrderFlow flow = flow(topic, prefix, handled::addAll)) {
            RecoveryReport report = flow.recovery.recover();
            assertThat(report.lost()).extracting(LostTransaction::transactionalId).containsExactly(prefix + "0");
            assertThat(report.lost().get(0).reason()).contains("LOST");
            assertThat(handled).extracting(LostTransaction::transactionalId).containsExactly(prefix + "0");
            assertThat(flow.recovery.lostTransactions()).hasSize(1);
            assertThat(flow.recovery.lostCount()).isEqualTo(1);
            // the database has the order, Kafka has not: that is what the hook must compensate
            assertThat(flow.jdbc.queryForList("SELECT id FROM orders WHERE id = 'order-100'", String.class))
                .hasSize(1);
            assertThat(flow.decisionLog.findByPrefix(flow.dataSource, prefix)).isEmpty();
        }
        assertThat(events(topic)).isEmpty();
    }

    @Test
    void twoInstancesWithDifferentPrefixesRecoverOnlyTheirOwnRows() {
        String topic = topic();
        String prefixA = EmbeddedKafkaCluster.uniqueName("app-a") + "-";
        String prefixB = EmbeddedKafkaCluster.uniqueName("app-b") + "-";
        OrderFlow.createSchema(OrderFlow.dataSource(postgres.jdbcUrl()));
        crash(prefixA, topic, CommitPhase.AFTER_JDBC_COMMIT, 1, 200, null);
        crash(prefixB, topic, CommitPhase.AFTER_JDBC_COMMIT, 0, 300, null);
        try (OrderFlow a = flow(topic, prefixA, null); OrderFlow b = flow(topic, prefixB, null)) {
            RecoveryReport reportA = a.recovery.recover();
            // sessions are reused: both orders of instance A ran on its first slot
            assertThat(reportA.committed()).containsExactly(prefixA + "0");
            assertThat(a.decisionLog.findByPrefix(a.dataSource, prefixB)).hasSize(1);
            assertThat(events(topic)).containsExactlyInAnyOrder("order-200", "order-201");

            RecoveryReport reportB = b.recovery.recover();
            assertThat(reportB.committed()).containsExactly(prefixB + "0");
            assertThat(b.decisionLog.findByPrefix(b.dataSource, prefixB)).isEmpty();
            assertThat(events(topic)).containsExactlyInAnyOrder("order-200", "order-201", "order-300");
            // a second run settles nothing twice
            assertThat(a.recovery.recover().isEmpty()).isTrue();
        }
    }

    @Test
    void aTransactionThatWroteNothingToKafkaCommitsTheDatabaseWithoutADecision() {
        String topic = topic();
        try (OrderFlow flow = flow(topic, EmbeddedKafkaCluster.uniqueName("jdbc-only") + "-", null)) {
            List<CommitPhase> phases = new java.util.concurrent.CopyOnWriteArrayList<>();
            flow.transactionManager.setCommitPhaseListeners(List.of((phase, id) -> phases.add(phase)));
            flow.tx.executeWithoutResult(status -> flow.jdbc.update(
                    "INSERT INTO orders (id, ref) VALUES ('jdbc-only-1', 'r')"));
            // prepared as empty: no decision row, no Kafka commit, nothing for recovery
            assertThat(phases).containsExactly(CommitPhase.BEFORE_PREPARE, CommitPhase.AFTER_PREPARE);
            assertThat(flow.jdbc.queryForList("SELECT id FROM orders WHERE id = 'jdbc-only-1'", String.class))
                .hasSize(1);
            assertThat(flow.decisionLog.findByPrefix(flow.dataSource, flow.pool.transactionalIdPrefix())).isEmpty();
            assertThat(flow.recovery.recover().isEmpty()).isTrue();
            flow.placeOrder("jdbc-only-2"); // and the session goes on
        }
        assertThat(events(topic)).containsExactly("jdbc-only-2");
    }

    @Test
    void recoveryKeepsADecisionWhoseKafkaOutcomeIsUnknownAndNeverCompensatesIt() {
        String topic = topic();
        String prefix = EmbeddedKafkaCluster.uniqueName("unknown") + "-";
        OrderFlow.createSchema(OrderFlow.dataSource(postgres.jdbcUrl()));
        // the decided transaction committed, then a later transaction of the same id aborted: the coordinator no
        // longer says how the decided one ended
        PreparedTransaction decided;
        Map<String, Object> configs = kafka.cluster().clientConfigs();
        configs.put("transactional.id", prefix + "0");
        try (TransactionSession session = TransactionSession.open(configs)) {
            session.initialize();
            SessionProducer<String, String> producer = new SessionProducer<>(session,
                    new org.apache.kafka.common.serialization.StringSerializer(),
                    new org.apache.kafka.common.serialization.StringSerializer());
            session.beginTransaction();
            producer.send(new ProducerRecord<>(topic, "order-1", "OrderPlaced:order-1"));
            decided = session.prepareTransaction();
            session.commitTransaction();
            session.beginTransaction();
            producer.send(new ProducerRecord<>(topic, "order-2", "OrderPlaced:order-2"));
            session.abortTransaction();
        }
        List<LostTransaction> compensated = new ArrayList<>();
        try (OrderFlow flow = flow(topic, prefix, compensated::addAll)) {
            recordDecision(flow, prefix + "0", decided);
            RecoveryReport report = flow.recovery.recover();
            assertThat(report.inDoubt()).extracting(LostTransaction::transactionalId).containsExactly(prefix + "0");
            assertThat(report.lost()).isEmpty();
            assertThat(compensated).isEmpty();
            assertThat(flow.recovery.inDoubtTransactions()).hasSize(1);
            // the row stays for an operator, set aside so that the id can take new decisions; it is still in doubt
            // at the next run (and after a restart) until someone deletes it
            assertThat(flow.decisionLog.findByPrefix(flow.dataSource, prefix)).isEmpty();
            assertThat(flow.decisionLog.findSetAside(flow.dataSource, prefix)).extracting(
                    DecisionRecord::preparedTransaction).containsExactly(decided);
            flow.placeOrder("order-3");
            assertThat(flow.recovery.recover().isEmpty()).isTrue();
            assertThat(flow.recovery.inDoubtTransactions()).hasSize(1);
            assertThat(compensated).isEmpty();
        }
        assertThat(events(topic)).containsExactly("order-1", "order-3");
    }

    @Test
    void aSessionReleasedWithItsTransactionPreparedIsSettledFromTheLogBeforeItsIdIsReused() throws Exception {
        String topic = topic();
        String prefix = EmbeddedKafkaCluster.uniqueName("in-doubt") + "-";
        try (OrderFlow flow = flow(topic, prefix, null)) {
            flow.recovery.ensureRecovered();
            PooledSession lease = flow.pool.acquire();
            assertThat(lease.index()).isZero();
            TransactionSession session = lease.session();
            session.beginTransaction();
            new SessionProducer<>(session, new org.apache.kafka.common.serialization.StringSerializer(),
                    new org.apache.kafka.common.serialization.StringSerializer())
                .send(new ProducerRecord<>(topic, "order-1", "OrderPlaced:order-1"));
            PreparedTransaction prepared = session.prepareTransaction();
            recordDecision(flow, prefix + "0", prepared); // the database decided; completing Kafka never happened
            lease.release();
            // not aborted on release: the decision says commit
            assertThat(kafka.cluster().admin().describeTransactions(List.of(prefix + "0")).description(prefix + "0")
                .get().state()).isEqualTo(TransactionState.ONGOING);
            flow.placeOrder("order-2"); // reuses slot 0: settled from the log first
            assertThat(flow.decisionLog.findByPrefix(flow.dataSource, prefix)).isEmpty();
        }
        assertThat(events(topic)).containsExactly("order-1", "order-2");
    }

    @Test
    void aListenerFailingAfterTheDecisionDoesNotAbortTheCommittedTransaction() {
        String topic = topic();
        try (OrderFlow flow = flow(topic, EmbeddedKafkaCluster.uniqueName("listener") + "-", null)) {
            flow.transactionManager.setCommitPhaseListeners(List.of((phase, id) -> {
                if (phase == CommitPhase.AFTER_JDBC_COMMIT) {
                    throw new IllegalStateException("a listener that fails after the database committed");
                }
            }));
            flow.placeOrder("after-decision-1");
            assertThat(flow.orderIds()).contains("after-decision-1");
            assertThat(flow.decisionLog.findByPrefix(flow.dataSource, flow.pool.transactionalIdPrefix())).isEmpty();
        }
        assertThat(events(topic)).containsExactly("after-decision-1");
    }

    /**
     * Another producer takes the id over between the database commit and the Kafka commit. Its initialization aborts
     * the transaction and then moves the id on, so the coordinator no longer says how the decided transaction ended:
     * it is settled at once as UNKNOWN (in doubt, row set aside, never compensated), not left for a later run and
     * never reported as committed.
     */
    @Test
    void aKafkaTransactionTakenOverAfterTheDatabaseCommittedIsSettledAtOnceAndNeverCompensated() {
        String topic = topic();
        String prefix = EmbeddedKafkaCluster.uniqueName("taken-over") + "-";
        List<LostTransaction> compensated = new java.util.concurrent.CopyOnWriteArrayList<>();
        try (OrderFlow flow = flow(topic, prefix, compensated::addAll)) {
            flow.transactionManager.setCommitPhaseListeners(List.of((phase, id) -> {
                if (phase == CommitPhase.AFTER_JDBC_COMMIT) {
                    Map<String, Object> configs = kafka.cluster().clientConfigs();
                    configs.put("transactional.id", id);
                    try (TransactionSession successor = TransactionSession.open(configs)) {
                        successor.initialize();
                    }
                }
            }));
            assertThatThrownBy(() -> flow.placeOrder("taken-1"))
                .isInstanceOf(org.springframework.transaction.HeuristicCompletionException.class)
                .hasStackTraceContaining("its outcome is UNKNOWN");
            assertThat(flow.orderIds()).contains("taken-1");
            assertThat(compensated).isEmpty();
            assertThat(flow.recovery.inDoubtTransactions()).extracting(LostTransaction::transactionalId)
                .containsExactly(prefix + "0");
            assertThat(flow.decisionLog.findByPrefix(flow.dataSource, prefix)).isEmpty();
            assertThat(flow.decisionLog.findSetAside(flow.dataSource, prefix)).hasSize(1);
            flow.transactionManager.setCommitPhaseListeners(List.of());
            flow.placeOrder("taken-2"); // the id is usable again
        }
        assertThat(events(topic)).containsExactly("taken-2");
    }

    @Test
    void aDecisionLogTableFromBeforeTheStartTimeColumnIsMigrated() throws Exception {
        DecisionLog log = new DecisionLog(EmbeddedKafkaCluster.uniqueName("old_log").replace('-', '_'));
        javax.sql.DataSource dataSource = OrderFlow.dataSource(postgres.jdbcUrl());
        JdbcTemplate jdbc = new JdbcTemplate(dataSource);
        jdbc.execute("CREATE TABLE " + log.table() + " (transactional_id VARCHAR(512) NOT NULL PRIMARY KEY, "
                + "producer_id BIGINT NOT NULL, producer_epoch SMALLINT NOT NULL, decided_at TIMESTAMP NOT NULL)");
        jdbc.update("INSERT INTO " + log.table() + " VALUES ('old-0', 7, 3, CURRENT_TIMESTAMP)");
        log.createTableIfMissing(dataSource);
        log.createTableIfMissing(dataSource); // idempotent
        try (java.sql.Connection con = dataSource.getConnection()) {
            log.record(con, "old-1", PreparedTransaction.of(8, (short) 4, 1_700_000_000_123L));
        }
        assertThat(log.findByPrefix(dataSource, "old-")).extracting(DecisionRecord::preparedTransaction)
            .containsExactly(PreparedTransaction.of(7, (short) 3, -1), PreparedTransaction.of(8, (short) 4,
                    1_700_000_000_123L));
    }

    private static void recordDecision(OrderFlow flow, String transactionalId, PreparedTransaction prepared) {
        try (java.sql.Connection con = flow.dataSource.getConnection()) {
            flow.decisionLog.record(con, transactionalId, prepared);
        }
        catch (java.sql.SQLException ex) {
            throw new AssertionError(ex);
        }
    }

    private static void crash(String prefix, String topic, CommitPhase phase, int okCount, int firstId,
            String transactionTimeoutMs) {
        List<String> args = new ArrayList<>(List.of(kafka.bootstrapServers(), postgres.jdbcUrl(), prefix, topic,
                phase.name(), String.valueOf(okCount), String.valueOf(firstId)));
        if (transactionTimeoutMs != null) {
            args.add(transactionTimeoutMs);
        }
        try (ChildJvm child = ChildJvm.start(TwoPhaseCrashChild.class, args.toArray(String[]::new))) {
            child.awaitLine("CRASH", Duration.ofSeconds(120));
            child.awaitExit(Duration.ofSeconds(60));
        }
    }
}
