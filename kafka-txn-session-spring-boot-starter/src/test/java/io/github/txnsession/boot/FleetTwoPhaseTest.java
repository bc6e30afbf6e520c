package io.github.txnsession.boot;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;

import io.github.txnsession.autoconfigure.TransactionalIdsEndpoint;
import io.github.txnsession.kafka.PreparedTransaction;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.CommitPhase;
import io.github.txnsession.spring.CommitPhaseListener;
import io.github.txnsession.spring.TransactionSessionPool;
import io.github.txnsession.spring.jdbc.DecisionLog;
import io.github.txnsession.spring.jdbc.RecoveryReport;
import io.github.txnsession.spring.jdbc.TwoPhaseRecovery;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.transaction.support.TransactionTemplate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

/**
 * Fleet mode with two-phase commit (H2): the paused-former-owner races, played deterministically with a commit-phase
 * hook. The "new owner" is the application's own {@link TwoPhaseRecovery} (what a survivor runs when the slot
 * arrives); the "paused owner" is the application's transaction, stopped at a commit phase.
 * <ul>
 * <li>The new owner settles while the decision row is written but not committed: it must wait for the key, then
 * complete the Kafka transaction the database committed (without the key it would find no row and abort: LOST).</li>
 * <li>The new owner settled (and initialized the id) before the decision was written: the paused owner's check
 * after writing the row finds its transaction aborted, and the database rolls back (without it the database would
 * commit a decision whose Kafka side was aborted: LOST).</li>
 * <li>The new owner's initialization failed in the client (it may still land at the coordinator later): the id's
 * open transaction is aborted and a fence is left in the log, which refuses the paused owner's decision until an
 * owner has initialized the id.</li>
 * </ul>
 */
class FleetTwoPhaseTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    static final String OUT = "fleet-2pc-out";
    static final AtomicReference<CommitPhaseListener> hook = new AtomicReference<>();

    static ConfigurableApplicationContext context;

    @BeforeAll
    static void start() {
        kafka.cluster().createTopics(1, OUT);
        context = new SpringApplicationBuilder(App.class).web(WebApplicationType.NONE)
            .properties("spring.main.banner-mode=off",
                    "spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                    // H2 waits 1 s for a row lock by default; the new owner must be able to wait out the hook's 2 s
                    "spring.datasource.url=jdbc:h2:mem:" + EmbeddedKafkaCluster.uniqueName("fleet2pc")
                            + ";DB_CLOSE_DELAY=-1;LOCK_TIMEOUT=10000",
                    "kafka.txn-session.transactional-id-prefix=f2pc-",
                    "kafka.txn-session.jdbc.enabled=true",
                    "kafka.txn-session.fleet.enabled=true", "kafka.txn-session.fleet.slots=1",
                    "kafka.txn-session.fleet.sessions-per-slot=1", "kafka.txn-session.fleet.session-timeout=6s")
            .run();
        context.getBean(JdbcTemplate.class).execute("CREATE TABLE orders (id VARCHAR(32) PRIMARY KEY)");
        TransactionSessionPool pool = context.getBean(TransactionSessionPool.class);
        await().atMost(Duration.ofSeconds(60)).until(() -> pool.snapshot().initialized() == 1);
    }

    @AfterAll
    static void stop() {
        if (context != null) {
            context.close();
        }
    }

    @BeforeEach
    void noHook() {
        hook.set(null);
    }

    @Test
    void aNewOwnerWaitsForADecisionBeingWrittenAndCompletesIt() throws Exception {
        TwoPhaseRecovery recovery = context.getBean(TwoPhaseRecovery.class);
        CompletableFuture<RecoveryReport> newOwner = new CompletableFuture<>();
        hook.set((phase, id) -> {
            if (phase == CommitPhase.AFTER_LOG_INSERT) {
                hook.set(null);
                Thread t = new Thread(() -> {
                    try {
                        newOwner.complete(recovery.recoverTransactionalId(id));
                    }
                    catch (RuntimeException ex) {
                        newOwner.completeExceptionally(ex);
                    }
                });
                t.start();
                // the new owner must be held back by the row's key while this transaction is not committed
                try {
                    newOwner.get(2, TimeUnit.SECONDS);
                    throw new IllegalStateException("the new owner settled the id while a decision was being written");
                }
                catch (TimeoutException expected) {
                    // held back: let the database commit
                }
                catch (InterruptedException | ExecutionException ex) {
                    throw new IllegalStateException(ex);
                }
            }
        });
        order("a-1");
        RecoveryReport report = newOwner.get(30, TimeUnit.SECONDS);
        assertThat(report.aborted()).as("the new owner never aborts a committed decision").isEmpty();
        assertThat(report.lost()).isEmpty();
        assertThat(rows("a-1")).isEqualTo(1);
        assertThat(committedValues()).contains("a-1");
    }

    @Test
    void aDecisionWrittenAfterTheNewOwnerSettledRollsTheDatabaseBack() {
        TwoPhaseRecovery recovery = context.getBean(TwoPhaseRecovery.class);
        Map<String, Object> configs = context.getBean(TransactionSessionPool.class).sessionConfigs();
        hook.set((phase, id) -> {
            if (phase == CommitPhase.AFTER_PREPARE) {
                hook.set(null);
                // the slot moved while this instance was paused here: the new owner settles and initializes the id
                TransactionSession settled = recovery.settleAndOpen(id, () -> {
                    Map<String, Object> c = new java.util.HashMap<>(configs);
                    c.put("transactional.id", id);
                    TransactionSession s = TransactionSession.open(c);
                    s.initialize();
                    return s;
                });
                settled.close();
            }
        });
        assertThatThrownBy(() -> order("b-1")).hasStackTraceContaining("heartbeat()");
        assertThat(rows("b-1")).as("the database rolled back").isZero();
        assertThat(committedValues()).doesNotContain("b-1");
        // the application goes on: its fenced session is replaced through the fleet
        await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> {
            order("b-2");
            assertThat(committedValues()).contains("b-2");
        });
    }

    @Test
    void aFailedInitializationEndsTheIdsOpenTransactionAndFencesItsDecisionsUnderTheKey() throws Exception {
        TwoPhaseRecovery recovery = context.getBean(TwoPhaseRecovery.class);
        Map<String, Object> configs = new java.util.HashMap<>(
                context.getBean(TransactionSessionPool.class).sessionConfigs());
        configs.put("transactional.id", "f2pc-other-0"); // an id of no slot: nothing else touches it
        try (TransactionSession paused = TransactionSession.open(configs)) {
            paused.initialize();
            paused.beginTransaction();
            new io.github.txnsession.kafka.SessionProducer<>(paused, new org.apache.kafka.common.serialization
                    .StringSerializer(), new org.apache.kafka.common.serialization.StringSerializer())
                    .send(new org.apache.kafka.clients.producer.ProducerRecord<>(OUT, "d-1", "d-1"));
            paused.prepareTransaction();
            // the new owner's initialization fails in the client (and might land later at the coordinator)
            assertThatThrownBy(() -> recovery.settleAndOpen("f2pc-other-0", () -> {
                throw new IllegalStateException("InitProducerId timed out (test)");
            })).hasMessageContaining("timed out (test)");
            // still under the key, the open transaction was aborted: the paused owner's check now finds it so
            assertThatThrownBy(paused::heartbeat).isInstanceOf(io.github.txnsession.kafka.TransactionSessionException.class);
            // and, whatever the coordinator does later, the log refuses the paused owner's decision: the fence
            assertThatThrownBy(() -> writeDecision("f2pc-other-0", PreparedTransaction.of(5, (short) 1, 1L)))
                .hasMessageContaining("fence");
        }
        assertThat(committedValues()).doesNotContain("d-1");
        // settling without initializing (recovery, an operator's resolve) keeps the fence
        recovery.recoverTransactionalId("f2pc-other-0");
        assertThatThrownBy(() -> writeDecision("f2pc-other-0", PreparedTransaction.of(5, (short) 1, 1L)))
            .hasMessageContaining("fence");
        // an owner that initializes the id lifts the fence
        recovery.settleAndOpen("f2pc-other-0", () -> {
            Map<String, Object> c = new java.util.HashMap<>(configs);
            TransactionSession s = TransactionSession.open(c);
            s.initialize();
            return s;
        }).close();
        writeDecision("f2pc-other-0", PreparedTransaction.of(5, (short) 1, 1L));
        assertThat(recovery.decisionOf("f2pc-other-0")).isPresent();
        context.getBean(JdbcTemplate.class).update("DELETE FROM kafka_txn_decision_log WHERE transactional_id = ?",
                "f2pc-other-0");
    }

    private static void writeDecision(String id, PreparedTransaction prepared) throws Exception {
        try (java.sql.Connection con = context.getBean(javax.sql.DataSource.class).getConnection()) {
            con.setAutoCommit(false);
            context.getBean(DecisionLog.class).record(con, id, prepared);
            con.commit();
        }
    }

    /**
     * A stale fence on an id this instance owns and lends (left by a paused instance that lost the slot without
     * noticing): the refused decision rolls the transaction back, and the slot is settled again through the fleet,
     * which initializes the id and lifts the fence, so the application goes on.
     */
    @Test
    void aStaleFenceOnALentIdIsLiftedByTheFleetsResettlement() throws Exception {
        assertThat(context.getBean(TransactionSessionPool.class).ownedFleetTransactionalIds()).contains("f2pc-0-0");
        DecisionLog log = context.getBean(DecisionLog.class);
        javax.sql.DataSource dataSource = context.getBean(javax.sql.DataSource.class);
        // as a paused instance's failed initialization would leave it (package-private in the library: SQL here)
        context.getBean(JdbcTemplate.class).update("INSERT INTO kafka_txn_decision_log (transactional_id, producer_id, "
                + "producer_epoch, txn_start_ms, decided_at) VALUES ('f2pc-0-0', -2, -1, NULL, CURRENT_TIMESTAMP)");
        assertThatThrownBy(() -> order("e-1")).hasStackTraceContaining("fence");
        assertThat(rows("e-1")).as("the database rolled back").isZero();
        // refused (and rolled back) until the fleet has settled the slot again
        await().atMost(Duration.ofSeconds(60)).ignoreExceptions().untilAsserted(() -> {
            order("e-2");
            assertThat(committedValues()).contains("e-2");
        });
        assertThat(log.find(dataSource, "f2pc-0-0")).isEmpty();
        assertThat(context.getBean(JdbcTemplate.class).queryForObject("SELECT COUNT(*) FROM kafka_txn_decision_log "
                + "WHERE transactional_id = 'f2pc-0-0'", Integer.class)).as("the fence is gone").isZero();
        assertThat(committedValues()).doesNotContain("e-1");
    }

    /**
     * A decision set aside as in doubt (by any instance, before a restart too) is reported from the log for the
     * fleet's ids ({@code prefix + slot + "-" + k}), until an operator deletes it.
     */
    @Test
    void inDoubtDecisionsOfFleetIdsAreReportedFromTheLog() {
        TwoPhaseRecovery recovery = context.getBean(TwoPhaseRecovery.class);
        JdbcTemplate jdbc = context.getBean(JdbcTemplate.class);
        jdbc.update("INSERT INTO kafka_txn_decision_log (transactional_id, producer_id, producer_epoch, txn_start_ms, "
                + "decided_at) VALUES (?, 42, 3, 1700000000000, CURRENT_TIMESTAMP)", "f2pc-0-0#in-doubt-3-1700000000000");
        jdbc.update("INSERT INTO kafka_txn_decision_log (transactional_id, producer_id, producer_epoch, txn_start_ms, "
                + "decided_at) VALUES (?, 43, 3, 1700000000000, CURRENT_TIMESTAMP)", "other-0-0#in-doubt-3-1700000000000");
        try {
            recovery.recover();
            assertThat(recovery.inDoubtTransactions()).extracting(t -> t.decision().transactionalId())
                .containsExactly("f2pc-0-0#in-doubt-3-1700000000000");
        }
        finally {
            jdbc.update("DELETE FROM kafka_txn_decision_log WHERE transactional_id LIKE '%#in-doubt-%'");
        }
        recovery.recover();
        assertThat(recovery.inDoubtTransactions()).isEmpty();
    }

    @Test
    @SuppressWarnings("unchecked")
    void theIdsEndpointListsAndResolvesTheFleetsIds() {
        order("c-1");
        TransactionalIdsEndpoint endpoint = new TransactionalIdsEndpoint(context.getBean(TransactionSessionPool.class),
                context.getBean(TwoPhaseRecovery.class));
        Map<String, Object> ids = endpoint.ids();
        assertThat(ids).containsEntry("fleet", true);
        Map<String, Map<String, Object>> entries = (Map<String, Map<String, Object>>) ids.get("ids");
        assertThat(entries).containsOnlyKeys("f2pc-0-0");
        assertThat(entries.get("f2pc-0-0")).containsEntry("ownedHere", true).containsKey("state")
                .containsEntry("decision", null);
        assertThat((String) entries.get("f2pc-0-0").get("state")).isIn("CompleteCommit", "Empty", "CompleteAbort");
        Map<String, Object> resolved = endpoint.resolve("f2pc-0-0");
        assertThat(resolved).containsEntry("resolved", true).containsEntry("committed", false)
                .containsEntry("lost", false);
        assertThatThrownBy(() -> endpoint.resolve("other-0")).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("not a transactional id of this application");
        order("c-2"); // the id still works after the resolution
        assertThat(committedValues()).contains("c-1", "c-2");
    }

    private static void order(String id) {
        TransactionTemplate tx = context.getBean(TransactionTemplate.class);
        @SuppressWarnings("unchecked")
        KafkaTemplate<Object, Object> template = context.getBean(KafkaTemplate.class);
        JdbcTemplate jdbc = context.getBean(JdbcTemplate.class);
        tx.executeWithoutResult(status -> {
            jdbc.update("INSERT INTO orders (id) VALUES (?)", id);
            template.send(OUT, id, id);
        });
    }

    private static int rows(String id) {
        return context.getBean(JdbcTemplate.class).queryForObject("SELECT COUNT(*) FROM orders WHERE id = ?",
                Integer.class, id);
    }

    private static List<String> committedValues() {
        return CommittedReader.readToEnd(kafka.bootstrapServers(), OUT, true).stream().map(ConsumerRecord::value)
            .toList();
    }

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class App {

        @Bean
        CommitPhaseListener testHook() {
            return (phase, id) -> {
                CommitPhaseListener h = hook.get();
                if (h != null) {
                    h.reached(phase, id);
                }
            };
        }
    }
}
