package io.github.txnsession.spring.jdbc;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;

import javax.sql.DataSource;

import io.github.txnsession.kafka.PreparedTransaction;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.CommitPhase;
import io.github.txnsession.spring.SessionCommitPoint;
import io.github.txnsession.spring.SessionEnlistment;
import io.github.txnsession.spring.SessionProducerFactory;
import io.github.txnsession.spring.TransactionSessionPool;
import io.github.txnsession.spring.TwoPhaseDecision;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.aop.framework.ProxyFactory;
import org.springframework.dao.DataAccessResourceFailureException;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.SimpleDriverDataSource;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.TransactionManager;
import org.springframework.transaction.TransactionSystemException;
import org.springframework.transaction.interceptor.NameMatchTransactionAttributeSource;
import org.springframework.transaction.interceptor.RuleBasedTransactionAttribute;
import org.springframework.transaction.interceptor.TransactionInterceptor;
import org.springframework.transaction.support.DefaultTransactionStatus;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.transaction.support.TransactionTemplate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

/**
 * Failure paths of a session enlisted in the application's own JDBC manager, found by an adversarial review: sends
 * from completion callbacks, a database COMMIT whose reply is lost after the decision was written, an in-doubt slot
 * that must not wait for its next use, and an {@code executeInTransaction} whose callback fails inside a transaction.
 */
class EnlistmentFailurePathsTest {

    @RegisterExtension
    static final KafkaClusterExtension broker = KafkaClusterExtension.with(b -> b
        .brokerProperty("transaction.abort.timed.out.transaction.cleanup.interval.ms", 500));

    /** A JDBC manager whose COMMIT reaches the database but whose acknowledgement is lost (connection reset). */
    static final class LostAckManager extends JdbcTransactionManager {
        volatile boolean loseAck;
        volatile boolean rollbackFailsToo;
        /** the COMMIT never reaches the database, and the client cannot tell (the transaction is rolled back) */
        volatile boolean commitNeverReaches;

        LostAckManager(DataSource ds) {
            super(ds);
        }

        @Override
        protected void doCommit(DefaultTransactionStatus status) {
            if (this.commitNeverReaches) {
                // the server rolls back a transaction whose connection dropped (done here: the cleanup's
                // setAutoCommit(true) would otherwise commit it)
                org.springframework.jdbc.datasource.ConnectionHolder holder =
                        (org.springframework.jdbc.datasource.ConnectionHolder) org.springframework.transaction.support
                            .TransactionSynchronizationManager.getResource(obtainDataSource());
                try {
                    holder.getConnection().rollback();
                }
                catch (java.sql.SQLException ex) {
                    throw new IllegalStateException(ex);
                }
                throw new DataAccessResourceFailureException("connection reset while sending COMMIT");
            }
            super.doCommit(status); // the database HAS committed (data + decision row)
            if (this.loseAck) {
                throw new DataAccessResourceFailureException("I/O error reading the COMMIT reply");
            }
        }

        @Override
        protected void doRollback(DefaultTransactionStatus status) {
            if ((this.loseAck || this.commitNeverReaches) && this.rollbackFailsToo) {
                throw new TransactionSystemException("connection is closed"); // -> STATUS_UNKNOWN
            }
            super.doRollback(status); // a no-op ROLLBACK after the commit went through -> STATUS_ROLLED_BACK
        }
    }

    private static final class App implements AutoCloseable {
        final DataSource dataSource;
        final JdbcTemplate jdbc;
        final TransactionSessionPool pool;
        final SessionProducerFactory<Object, Object> factory;
        final KafkaTemplate<Object, Object> kafka;
        final LostAckManager transactionManager;
        final TransactionTemplate tx;
        final String topic;
        final DecisionLog decisionLog = new DecisionLog();
        final List<CommitPhase> phases = new CopyOnWriteArrayList<>();
        final SessionEnlistment enlistment;
        TwoPhaseRecovery recovery;

        App(boolean twoPhase, int poolSize, long kafkaTxTimeoutMs) {
            this.dataSource = new SimpleDriverDataSource(new org.h2.Driver(), "jdbc:h2:mem:"
                    + EmbeddedKafkaCluster.uniqueName("adv") + ";DB_CLOSE_DELAY=-1", "sa", "");
            this.jdbc = new JdbcTemplate(this.dataSource);
            this.jdbc.execute("CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY)");
            this.topic = EmbeddedKafkaCluster.uniqueName("adv");
            broker.cluster().createTopic(this.topic, 1);
            Map<String, Object> configs = new HashMap<>(broker.cluster().clientConfigs());
            configs.put(ProducerConfig.LINGER_MS_CONFIG, 1);
            configs.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, (int) kafkaTxTimeoutMs);
            this.pool = new TransactionSessionPool(EmbeddedKafkaCluster.uniqueName("adv") + "-", poolSize,
                    Duration.ofSeconds(5), configs, List.of());
            this.factory = new SessionProducerFactory<>(this.pool, serializer(), serializer(), configs);
            JdbcTwoPhaseDecision decision = null;
            if (twoPhase) {
                this.decisionLog.createTableIfMissing(this.dataSource);
                this.recovery = new TwoPhaseRecovery(this.dataSource, this.decisionLog, this.pool, null);
                this.pool.setInDoubtResolver(this.recovery::recoverTransactionalId);
                decision = new JdbcTwoPhaseDecision(this.dataSource, this.decisionLog, this.recovery);
            }
            this.enlistment = new SessionEnlistment(this.pool, decision);
            this.enlistment.setCommitPhaseListeners(List.of((phase, id) -> this.phases.add(phase)));
            this.factory.setEnlistment(this.enlistment);
            this.kafka = new KafkaTemplate<>(this.factory);
            this.transactionManager = new LostAckManager(this.dataSource);
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

    /** Exactly where Spring runs @TransactionalEventListener(AFTER_COMMIT): afterCompletion(STATUS_COMMITTED). */
    private static void afterCommitListener(Runnable body, List<Throwable> failures) {
        TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
            @Override
            public void afterCompletion(int status) {
                if (status == STATUS_COMMITTED) {
                    try {
                        body.run();
                    }
                    catch (RuntimeException ex) {
                        failures.add(ex); // Spring would only log it (TransactionSynchronizationUtils)
                    }
                }
            }
        });
    }

    /**
     * A send from an AFTER_COMMIT listener registered before the first send: refused with a message (nothing can join
     * a completing transaction), and nothing of the finished transaction stays bound to the thread, so a later send
     * outside any transaction is refused instead of landing in another thread's transaction on the pooled session.
     */
    @Test
    void afterCommitListenerSendNeitherLostNorLeavesTheThreadBoundToAPooledSession() throws Exception {
        try (App app = new App(false, 1, 60_000)) {
            List<Throwable> failures = new CopyOnWriteArrayList<>();
            app.tx.executeWithoutResult(status -> {
                afterCommitListener(() -> app.kafka.send(app.topic, "n-notified", "after commit"), failures);
                app.placeOrder("m-order");
            });
            // consequence first: this thread now carries a KafkaResourceHolder over the released session
            ExecutorService other = Executors.newSingleThreadExecutor();
            CountDownLatch otherInTx = new CountDownLatch(1);
            CountDownLatch release = new CountDownLatch(1);
            Future<?> otherTx = other.submit(() -> app.tx.executeWithoutResult(s -> {
                app.placeOrder("o-other"); // takes the pool's only session
                otherInTx.countDown();
                try {
                    release.await(30, TimeUnit.SECONDS);
                }
                catch (InterruptedException ex) {
                    Thread.currentThread().interrupt();
                }
            }));
            assertThat(otherInTx.await(30, TimeUnit.SECONDS)).isTrue();
            Throwable refused = null;
            try {
                // this thread runs no transaction: KafkaTemplate must refuse ("No transaction is in process")
                app.kafka.send(app.topic, "p-ghost", "no transaction here");
            }
            catch (RuntimeException ex) {
                refused = ex;
            }
            release.countDown();
            otherTx.get(30, TimeUnit.SECONDS);
            other.shutdown();
            assertThat(refused).as("send outside a transaction refused").isNotNull();
            assertThat(app.events()).containsExactlyInAnyOrder("m-order", "o-other");
            assertThat(TransactionSynchronizationManager.getResource(app.factory))
                .as("nothing of the finished transaction stays bound to the thread").isNull();
            assertThat(TransactionSynchronizationManager.getResource(app.pool)).isNull();
            // a send from afterCompletion (where Spring runs AFTER_COMMIT listeners) is refused, loudly
            assertThat(failures).singleElement().asInstanceOf(
                    org.assertj.core.api.InstanceOfAssertFactories.THROWABLE)
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("while the Spring transaction is completing");
        }
    }

    /**
     * JpaTransactionManager and JdbcTransactionManager report a failed COMMIT as rolled back when the ROLLBACK after
     * it succeeds, although the database may have committed: the decision log says, and Kafka follows it.
     */
    @Test
    void aCommitWhoseReplyIsLostNeverAbortsADecidedKafkaTransaction() {
        try (App app = new App(true, 2, 60_000)) {
            app.transactionManager.loseAck = true;
            assertThatThrownBy(() -> app.tx.executeWithoutResult(s -> app.placeOrder("q-committed")))
                .isInstanceOf(DataAccessResourceFailureException.class);
            app.transactionManager.loseAck = false;
            assertThat(app.rows()).containsExactly("q-committed"); // the database committed, decision row too
            // two-phase: the decision is in the log, so Kafka must commit (JdbcKafkaTransactionManager reads it back)
            await().atMost(Duration.ofSeconds(20)).untilAsserted(
                    () -> assertThat(app.events()).containsExactly("q-committed"));
        }
    }

    /**
     * By default the decision names the transaction with the coordinator's start time (recovery after a crash tells
     * LOST from UNKNOWN with it); written alongside the prepare (opt-in) it names producer id and epoch only.
     */
    @Test
    void theDecisionCarriesTheStartTimeUnlessWrittenAlongsideThePrepare() {
        for (boolean alongside : new boolean[] { false, true }) {
            try (App app = new App(true, 1, 60_000)) {
                app.enlistment.setDecisionAlongsidePrepare(alongside);
                List<DecisionRecord> committedRows = new CopyOnWriteArrayList<>();
                app.enlistment.setCommitPhaseListeners(List.of((phase, id) -> {
                    if (phase == CommitPhase.AFTER_JDBC_COMMIT) {
                        app.decisionLog.find(app.dataSource, id).ifPresent(committedRows::add);
                    }
                }));
                app.tx.executeWithoutResult(s -> app.placeOrder("s-" + alongside));
                assertThat(committedRows).as("alongside=" + alongside).singleElement()
                    .satisfies(r -> assertThat(r.preparedTransaction().hasStartTime()).isEqualTo(!alongside));
                assertThat(app.events()).containsExactly("s-" + alongside);
                await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> assertThat(
                        app.decisionLog.findByPrefix(app.dataSource, app.pool.transactionalIdPrefix())).isEmpty());
            }
        }
    }

    /** A lost COMMIT reply after a decision written alongside the prepare: the row is found, and Kafka commits. */
    @Test
    void aLostCommitReplyAfterADecisionWrittenAlongsideThePrepareStillCommitsKafka() {
        try (App app = new App(true, 2, 60_000)) {
            app.enlistment.setDecisionAlongsidePrepare(true);
            app.transactionManager.loseAck = true;
            assertThatThrownBy(() -> app.tx.executeWithoutResult(s -> app.placeOrder("t-committed")))
                .isInstanceOf(DataAccessResourceFailureException.class);
            app.transactionManager.loseAck = false;
            assertThat(app.rows()).containsExactly("t-committed");
            await().atMost(Duration.ofSeconds(20)).untilAsserted(
                    () -> assertThat(app.events()).containsExactly("t-committed"));
            app.tx.executeWithoutResult(s -> app.placeOrder("u-next")); // and the pool goes on
            assertThat(app.events()).containsExactly("t-committed", "u-next");
        }
    }

    /**
     * An unknown database outcome leaves the Kafka transaction prepared; its slot is settled in the background (not
     * when the pool happens to reuse it), before the broker's timeout would abort it and while it holds back the last
     * stable offset.
     */
    @Test
    void anInDoubtSlotIsSettledPromptlyNotWhenThePoolHappensToReuseIt() {
        try (App app = new App(true, 2, 40_000)) {
            TransactionTemplate requiresNew = new TransactionTemplate(app.transactionManager);
            requiresNew.setPropagationBehavior(org.springframework.transaction.TransactionDefinition
                .PROPAGATION_REQUIRES_NEW);
            app.tx.executeWithoutResult(s -> { // two sessions at once: both slots initialized afterwards
                app.placeOrder("r-warmup");
                requiresNew.executeWithoutResult(i -> app.placeOrder("r-warmup-2"));
            });
            app.transactionManager.loseAck = true;
            app.transactionManager.rollbackFailsToo = true;
            assertThatThrownBy(() -> app.tx.executeWithoutResult(s -> app.placeOrder("s-in-doubt")));
            app.transactionManager.loseAck = false;
            app.tx.executeWithoutResult(s -> app.placeOrder("t-later")); // uses the other, initialized slot
            await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> assertThat(app.events())
                .contains("s-in-doubt", "t-later"));
            assertThat(app.rows()).contains("s-in-doubt", "t-later");
        }
    }

    /**
     * An unknown database outcome where the database in fact rolled back (no decision row): the slot's background
     * settlement finds no row and aborts the prepared Kafka transaction at once, so it does not hold back the last
     * stable offset until the broker's timeout (40 s here, more than the wait).
     */
    @Test
    void anInDoubtSlotWithoutADecisionIsAbortedPromptly() {
        try (App app = new App(true, 2, 40_000)) {
            TransactionTemplate requiresNew = new TransactionTemplate(app.transactionManager);
            requiresNew.setPropagationBehavior(org.springframework.transaction.TransactionDefinition
                .PROPAGATION_REQUIRES_NEW);
            app.tx.executeWithoutResult(s -> { // two sessions at once: both slots initialized afterwards, so the
                app.placeOrder("r-warmup"); // later transaction does not reuse (and so settle) the in-doubt slot
                requiresNew.executeWithoutResult(i -> app.placeOrder("r-warmup-2"));
            });
            app.transactionManager.commitNeverReaches = true;
            app.transactionManager.rollbackFailsToo = true;
            assertThatThrownBy(() -> app.tx.executeWithoutResult(s -> app.placeOrder("s-unknown")));
            app.transactionManager.commitNeverReaches = false;
            app.tx.executeWithoutResult(s -> app.placeOrder("t-later"));
            await().atMost(Duration.ofSeconds(20)).untilAsserted(() -> assertThat(app.events())
                .contains("r-warmup", "t-later"));
            assertThat(app.events()).doesNotContain("s-unknown");
            assertThat(app.rows()).doesNotContain("s-unknown");
        }
    }

    /**
     * An executeInTransaction whose callback fails inside a running transaction: its records cannot be undone alone,
     * so the whole transaction rolls back rather than publishing them after the caller caught the failure.
     */
    @Test
    void aFailedExecuteInTransactionCallbackNeverPublishesItsRecords() {
        try (App app = new App(false, 2, 60_000)) {
            assertThatThrownBy(() -> app.tx.executeWithoutResult(s -> {
                app.placeOrder("u-order");
                try {
                    app.kafka.executeInTransaction(t -> {
                        t.send(app.topic, "v-discarded", "the callback fails after this");
                        throw new IllegalStateException("callback fails");
                    });
                }
                catch (IllegalStateException handled) {
                    // the application handles it and goes on, as it would with an independent Kafka transaction
                }
            })).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("executeInTransaction");
            assertThat(app.rows()).isEmpty();
            assertThat(app.events()).isEmpty();
        }
    }

    /**
     * Sends from beforeCommit callbacks (where Spring runs {@code @TransactionalEventListener(BEFORE_COMMIT)}), one
     * registered before the first send and sending first, one registered after it: with {@link SessionCommitPoint}
     * on the manager, both join the transaction and the two-phase decision covers them.
     */
    @Test
    void sendsFromBeforeCommitCallbacksJoinTheTwoPhaseDecision() {
        try (App app = new App(true, 2, 60_000)) {
            app.transactionManager.addListener(SessionCommitPoint.LISTENER);
            app.tx.executeWithoutResult(s -> {
                app.jdbc.update("INSERT INTO orders (id) VALUES (?)", "x-first");
                beforeCommit(() -> app.kafka.send(app.topic, "x-first", "the first send, from beforeCommit"));
            });
            assertThat(app.phases).contains(CommitPhase.AFTER_LOG_INSERT);
            app.phases.clear();
            app.tx.executeWithoutResult(s -> {
                app.placeOrder("y-main");
                beforeCommit(() -> app.kafka.send(app.topic, "y-late", "from a callback registered after"));
            });
            assertThat(app.phases).containsSubsequence(CommitPhase.BEFORE_PREPARE, CommitPhase.AFTER_LOG_INSERT,
                    CommitPhase.AFTER_JDBC_COMMIT, CommitPhase.AFTER_KAFKA_COMMIT);
            assertThat(app.events()).containsExactly("x-first", "y-main", "y-late");
        }
    }

    /**
     * The database committed the decision, then completing the Kafka side failed (the session's producer went away)
     * and settling it from the decision log failed too (the database was unreachable for a moment). The session must
     * not go back to the pool as an ordinary one, which would close it and let the next use initialize the id (an
     * abort of the decided transaction, with nothing reported): its slot goes back in doubt, and the pool settles it
     * from the decision log, which commits the event.
     */
    @Test
    void aDecidedTransactionWhoseCompletionAndSettlingFailIsCommittedLaterNeverAborted() {
        try (App app = new App(true, 1, 60_000)) {
            Map<String, TransactionSession> sessions = new ConcurrentHashMap<>();
            app.pool.addLifecycleListener(new TransactionSessionPool.SessionLifecycleListener() {
                @Override
                public void sessionOpened(TransactionSession session) {
                    sessions.put(session.transactionalId(), session);
                }
            });
            JdbcTwoPhaseDecision real = new JdbcTwoPhaseDecision(app.dataSource, app.decisionLog, app.recovery);
            AtomicBoolean settleFails = new AtomicBoolean(true);
            TwoPhaseDecision flaky = new TwoPhaseDecision() {
                @Override
                public void record(String transactionalId, PreparedTransaction prepared) {
                    real.record(transactionalId, prepared);
                }

                @Override
                public void settle(String transactionalId, PreparedTransaction prepared, RuntimeException failure) {
                    if (settleFails.getAndSet(false)) {
                        throw new DataAccessResourceFailureException("the database is unreachable for a moment");
                    }
                    real.settle(transactionalId, prepared, failure);
                }

                @Override
                public boolean isRecorded(String transactionalId, PreparedTransaction prepared) {
                    return real.isRecorded(transactionalId, prepared);
                }

                @Override
                public boolean clear(String transactionalId, PreparedTransaction prepared) {
                    return real.clear(transactionalId, prepared);
                }
            };
            SessionEnlistment enlistment = new SessionEnlistment(app.pool, flaky);
            AtomicBoolean breakCompletion = new AtomicBoolean(true);
            enlistment.setCommitPhaseListeners(List.of((phase, id) -> {
                if (phase == CommitPhase.AFTER_JDBC_COMMIT && breakCompletion.getAndSet(false)) {
                    sessions.get(id).abandon(); // its producer goes away, the transaction stays prepared
                }
            }));
            app.factory.setEnlistment(enlistment);
            assertThatThrownBy(() -> app.tx.executeWithoutResult(s -> app.placeOrder("d-decided")))
                .isInstanceOf(DataAccessResourceFailureException.class);
            assertThat(app.rows()).containsExactly("d-decided");
            // the pool settles the slot in the background a few seconds later: the decision says commit
            await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> assertThat(app.events())
                .containsExactly("d-decided"));
            await().atMost(Duration.ofSeconds(10)).until(() -> app.decisionLog.findByPrefix(app.dataSource,
                    app.pool.transactionalIdPrefix()).isEmpty());
            // and the id works again
            app.tx.executeWithoutResult(s -> app.placeOrder("d-next"));
            assertThat(app.events()).containsExactly("d-decided", "d-next");
        }
    }

    /**
     * Two-phase, and the manager lacks {@link SessionCommitPoint#LISTENER} (a JTA manager, or one built outside the
     * context): a first send from a beforeCommit callback would join after the decision and commit best effort. It is
     * refused, and the whole transaction rolls back; sends in the body still commit.
     */
    @Test
    void withoutTheCommitPointALateFirstSendIsRefusedAndBothSidesRollBack() {
        try (App app = new App(true, 2, 60_000)) {
            assertThatThrownBy(() -> app.tx.executeWithoutResult(s -> {
                app.jdbc.update("INSERT INTO orders (id) VALUES (?)", "l-before-commit");
                beforeCommit(() -> app.kafka.send(app.topic, "l-before-commit", "first send from beforeCommit"));
            })).isInstanceOf(IllegalStateException.class).hasMessageContaining("SessionCommitPoint.LISTENER");
            // Spring swallows what beforeCompletion throws, so refusing there would not roll anything back: such a
            // send still commits after the database, best effort (logged at ERROR)
            app.tx.executeWithoutResult(s -> {
                app.jdbc.update("INSERT INTO orders (id) VALUES (?)", "l-before-completion");
                TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
                    @Override
                    public void beforeCompletion() {
                        app.kafka.send(app.topic, "l-before-completion", "first send from beforeCompletion");
                    }
                });
            });
            app.tx.executeWithoutResult(s -> app.placeOrder("l-in-body"));
            // a transaction of its own begun from the callback (REQUIRES_NEW) has its own commit: not refused
            TransactionTemplate requiresNew = new TransactionTemplate(app.transactionManager);
            requiresNew.setPropagationBehavior(TransactionDefinition.PROPAGATION_REQUIRES_NEW);
            app.tx.executeWithoutResult(s -> {
                app.jdbc.update("INSERT INTO orders (id) VALUES (?)", "l-outer");
                beforeCommit(() -> requiresNew.executeWithoutResult(inner -> app.placeOrder("l-requires-new")));
            });
            // the same through @Transactional: REQUIRES_NEW commits on its own; REQUIRED joins the committing
            // transaction, so its first send is refused and both sides roll back
            Runnable declarativeNew = declarative(app, TransactionDefinition.PROPAGATION_REQUIRES_NEW,
                    () -> app.placeOrder("l-declarative-new"));
            app.tx.executeWithoutResult(s -> beforeCommit(declarativeNew));
            Runnable declarativeJoining = declarative(app, TransactionDefinition.PROPAGATION_REQUIRED,
                    () -> app.placeOrder("l-declarative-joining"));
            assertThatThrownBy(() -> app.tx.executeWithoutResult(s -> {
                app.jdbc.update("INSERT INTO orders (id) VALUES (?)", "l-declarative-outer");
                beforeCommit(declarativeJoining);
            })).isInstanceOf(IllegalStateException.class).hasMessageContaining("SessionCommitPoint.LISTENER");
            // two participating calls deep (a service calling a repository, both @Transactional): refused too
            Runnable nested = declarative(app, TransactionDefinition.PROPAGATION_REQUIRED, declarative(app,
                    TransactionDefinition.PROPAGATION_REQUIRED, () -> app.placeOrder("l-nested")));
            assertThatThrownBy(() -> app.tx.executeWithoutResult(s -> {
                app.jdbc.update("INSERT INTO orders (id) VALUES (?)", "l-nested-outer");
                beforeCommit(nested);
            })).isInstanceOf(IllegalStateException.class).hasMessageContaining("SessionCommitPoint.LISTENER");
            assertThat(app.rows()).containsExactly("l-before-completion", "l-declarative-new", "l-in-body", "l-outer",
                    "l-requires-new");
            assertThat(app.events()).containsExactly("l-before-completion", "l-in-body", "l-requires-new",
                    "l-declarative-new");
            await().atMost(Duration.ofSeconds(10)).until(() -> app.pool.snapshot().inUse() == 0);
        }
    }

    /**
     * With the commit point, a first send from a transaction listener notified after it (the sessions are prepared
     * by then) is refused too, and both sides roll back.
     */
    @Test
    void aFirstSendAfterTheCommitPointPreparedIsRefusedAndBothSidesRollBack() {
        try (App app = new App(true, 2, 60_000)) {
            app.transactionManager.addListener(SessionCommitPoint.LISTENER);
            app.transactionManager.addListener(new org.springframework.transaction.TransactionExecutionListener() {
                @Override
                public void beforeCommit(org.springframework.transaction.TransactionExecution transaction) {
                    app.kafka.send(app.topic, "p-late", "first send after the commit point");
                }
            });
            assertThatThrownBy(() -> app.tx.executeWithoutResult(s -> app.jdbc.update(
                    "INSERT INTO orders (id) VALUES (?)", "p-late")))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("SessionCommitPoint.LISTENER");
            assertThat(app.rows()).isEmpty();
            assertThat(app.events()).isEmpty();
            await().atMost(Duration.ofSeconds(10)).until(() -> app.pool.snapshot().inUse() == 0);
        }
    }

    /**
     * A Spring TransactionException thrown from a beforeCommit callback by code outside the library (a JdbcTemplate
     * statement after the deadline, say): Spring takes it for a failed database commit and does not roll back, and
     * the JDBC manager's clean-up would commit the connection. With a session enlisted, the database is rolled back
     * with the Kafka side.
     */
    @Test
    void aTransactionExceptionFromABeforeCommitCallbackRollsBothSidesBack() {
        try (App app = new App(true, 2, 60_000)) {
            app.transactionManager.addListener(SessionCommitPoint.LISTENER);
            assertThatThrownBy(() -> app.tx.executeWithoutResult(s -> {
                app.placeOrder("z-unwrapped");
                beforeCommit(() -> {
                    throw new org.springframework.transaction.TransactionTimedOutException("from a callback");
                });
            })).isInstanceOf(org.springframework.transaction.TransactionTimedOutException.class);
            assertThat(app.rows()).isEmpty();
            assertThat(app.events()).isEmpty();
        }
    }

    /**
     * A beforeCommit callback calls a participating transaction that fails, and catches the failure: the transaction
     * becomes rollback-only while it commits. The JDBC manager would commit the database and then report a rollback,
     * which aborts the Kafka side; the commit point fails the commit instead, so both roll back.
     */
    @Test
    void rollbackOnlyMarkedWhileCommittingRollsBothSidesBack() {
        try (App app = new App(false, 2, 60_000)) {
            app.transactionManager.addListener(SessionCommitPoint.LISTENER);
            assertThatThrownBy(() -> app.tx.executeWithoutResult(status -> {
                app.placeOrder("r-marked");
                beforeCommit(() -> {
                    try {
                        app.tx.executeWithoutResult(inner -> {
                            throw new IllegalArgumentException("a participating call fails");
                        });
                    }
                    catch (IllegalArgumentException caught) {
                        // handled by the callback; the transaction is rollback-only now
                    }
                });
            })).isInstanceOf(IllegalStateException.class).hasMessageContaining("rollback-only");
            assertThat(app.rows()).isEmpty();
            assertThat(app.events()).isEmpty();
        }
    }

    @Test
    void randomSequencesBestEffortMatchTheOracle() {
        randomSequences(false, false);
    }

    @Test
    void randomSequencesTwoPhaseMatchTheOracle() {
        randomSequences(true, false);
    }

    /** The same with the Kafka side of two-phase commits completed in the background. */
    @Test
    void randomSequencesTwoPhaseCompletedInTheBackgroundMatchTheOracle() {
        randomSequences(true, true);
    }

    /**
     * A model-based test of the enlisted session: random transactions (commit, throw, rollback-only, REQUIRES_NEW
     * inside, executeInTransaction inside and outside, sends from beforeCommit callbacks, a Spring TransactionException
     * from one, row-only and event-only work) against an oracle of which rows the table must hold and which events a
     * read_committed reader must see, checked every 25 steps. Steps: {@code enlistment.model.steps} (default 120).
     */
    private void randomSequences(boolean twoPhase, boolean completeInBackground) {
        int steps = Integer.getInteger("enlistment.model.steps", 120);
        long seed = System.nanoTime();
        Random random = new Random(seed);
        try (App app = new App(twoPhase, 2, 60_000)) {
            app.enlistment.setCompleteInBackground(completeInBackground);
            app.transactionManager.addListener(SessionCommitPoint.LISTENER);
            TransactionTemplate requiresNew = new TransactionTemplate(app.transactionManager);
            requiresNew.setPropagationBehavior(TransactionDefinition.PROPAGATION_REQUIRES_NEW);
            Set<String> rows = new HashSet<>();
            List<String> events = new ArrayList<>();
            for (int step = 0; step < steps; step++) {
                String id = "m" + step;
                int op = random.nextInt(9);
                String what = switch (op) {
                    case 0 -> {
                        app.tx.executeWithoutResult(s -> app.placeOrder(id));
                        rows.add(id);
                        events.add(id);
                        yield "commit";
                    }
                    case 1 -> {
                        assertThatThrownBy(() -> app.tx.executeWithoutResult(s -> {
                            app.placeOrder(id);
                            throw new IllegalStateException("throws");
                        })).isInstanceOf(IllegalStateException.class);
                        yield "throw";
                    }
                    case 2 -> {
                        app.tx.executeWithoutResult(s -> {
                            app.placeOrder(id);
                            s.setRollbackOnly();
                        });
                        yield "rollback-only";
                    }
                    case 3 -> {
                        boolean outerFails = random.nextBoolean();
                        Runnable body = () -> app.tx.executeWithoutResult(s -> {
                            app.placeOrder(id);
                            requiresNew.executeWithoutResult(inner -> app.placeOrder(id + "-inner"));
                            if (outerFails) {
                                throw new IllegalStateException("outer fails");
                            }
                        });
                        if (outerFails) {
                            assertThatThrownBy(body::run).isInstanceOf(IllegalStateException.class);
                        }
                        else {
                            body.run();
                            rows.add(id);
                            events.add(id);
                        }
                        rows.add(id + "-inner");
                        events.add(id + "-inner");
                        yield "requires-new, outer " + (outerFails ? "fails" : "commits");
                    }
                    case 4 -> {
                        app.tx.executeWithoutResult(s -> {
                            app.jdbc.update("INSERT INTO orders (id) VALUES (?)", id);
                            app.kafka.executeInTransaction(t -> t.send(app.topic, id, "placed " + id));
                        });
                        rows.add(id);
                        events.add(id);
                        yield "executeInTransaction inside";
                    }
                    case 5 -> {
                        app.tx.executeWithoutResult(s -> {
                            app.jdbc.update("INSERT INTO orders (id) VALUES (?)", id);
                            beforeCommit(() -> app.kafka.send(app.topic, id, "placed " + id));
                        });
                        rows.add(id);
                        events.add(id);
                        yield "send from beforeCommit";
                    }
                    case 6 -> {
                        assertThatThrownBy(() -> app.tx.executeWithoutResult(s -> {
                            app.placeOrder(id);
                            beforeCommit(() -> {
                                throw new org.springframework.transaction.TransactionTimedOutException("callback");
                            });
                        })).isInstanceOf(org.springframework.transaction.TransactionTimedOutException.class);
                        yield "TransactionException from beforeCommit";
                    }
                    case 7 -> {
                        app.kafka.executeInTransaction(t -> t.send(app.topic, id, "event only"));
                        events.add(id);
                        yield "executeInTransaction outside";
                    }
                    default -> {
                        app.tx.executeWithoutResult(s -> app.jdbc.update("INSERT INTO orders (id) VALUES (?)", id));
                        rows.add(id);
                        yield "row only";
                    }
                };
                if (step % 25 == 24 || step == steps - 1) {
                    int at = step;
                    // what the last commits left to do in the background (Kafka completion, decision rows) is done
                    // once every session is back in the pool
                    await().atMost(Duration.ofSeconds(10)).until(() -> app.pool.snapshot().inUse() == 0);
                    assertThat(new HashSet<>(app.rows())).as("rows after step %d (%s), seed %d", at, what, seed)
                        .isEqualTo(rows);
                    assertThat(app.events()).as("read_committed events after step %d (%s), seed %d", at, what, seed)
                        .containsExactlyInAnyOrderElementsOf(events);
                }
            }
            if (twoPhase) {
                await().atMost(Duration.ofSeconds(10)).until(() -> app.decisionLog.findByPrefix(app.dataSource,
                        app.pool.transactionalIdPrefix()).isEmpty());
            }
            System.out.printf("ENLISTMENT-MODEL %s: %d steps, %d rows, %d events, seed %d%n",
                    twoPhase ? (completeInBackground ? "two-phase, completed in background" : "two-phase")
                            : "best effort", steps, rows.size(), events.size(), seed);
        }
    }

    /** @return {@code body} behind a transaction interceptor, as a {@code @Transactional} bean method would run */
    private static Runnable declarative(App app, int propagation, Runnable body) {
        NameMatchTransactionAttributeSource attributes = new NameMatchTransactionAttributeSource();
        RuleBasedTransactionAttribute attribute = new RuleBasedTransactionAttribute();
        attribute.setPropagationBehavior(propagation);
        attributes.addTransactionalMethod("run", attribute);
        ProxyFactory proxy = new ProxyFactory(body);
        proxy.addInterface(Runnable.class);
        proxy.addAdvice(new TransactionInterceptor((TransactionManager) app.transactionManager, attributes));
        return (Runnable) proxy.getProxy();
    }

    private static void beforeCommit(Runnable body) {
        TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
            @Override
            public void beforeCommit(boolean readOnly) {
                body.run();
            }
        });
    }

    /**
     * A transaction of the application's primary manager inside a transaction of another manager: Spring suspends
     * the outer synchronization when the primary manager begins its own transaction, so the Kafka session enlists in
     * the primary transaction and commits with its row, whatever the outer transaction does afterwards.
     */
    @Test
    void aPrimaryTransactionInsideAnotherManagersTransactionKeepsItsEvent() {
        try (App app = new App(false, 2, 60_000)) {
            DataSource auditDs = new SimpleDriverDataSource(new org.h2.Driver(), "jdbc:h2:mem:"
                    + EmbeddedKafkaCluster.uniqueName("audit") + ";DB_CLOSE_DELAY=-1", "sa", "");
            new JdbcTemplate(auditDs).execute("CREATE TABLE audit (id VARCHAR(64))");
            TransactionTemplate auditTx = new TransactionTemplate(new JdbcTransactionManager(auditDs));
            assertThatThrownBy(() -> auditTx.executeWithoutResult(s -> {
                new JdbcTemplate(auditDs).update("INSERT INTO audit VALUES ('w')");
                app.tx.executeWithoutResult(inner -> app.placeOrder("w-order")); // primary: commits here
                throw new IllegalStateException("audit step fails afterwards");
            })).isInstanceOf(IllegalStateException.class);
            assertThat(app.rows()).containsExactly("w-order"); // Spring semantics: the primary tx committed
            assertThat(app.events()).containsExactly("w-order");
        }
    }

    /**
     * An afterCommit callback of a transaction that used Kafka begins a REQUIRES_NEW transaction that sends: the
     * session of the completing transaction is already unbound, and suspending it must not fail the commit.
     */
    @Test
    void aNewTransactionBegunFromAfterCommitSendsOnItsOwn() {
        try (App app = new App(true, 2, 60_000)) {
            TransactionTemplate requiresNew = new TransactionTemplate(app.transactionManager);
            requiresNew.setPropagationBehavior(TransactionDefinition.PROPAGATION_REQUIRES_NEW);
            app.tx.executeWithoutResult(s -> {
                app.placeOrder("a-outer");
                TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
                    @Override
                    public void afterCommit() {
                        requiresNew.executeWithoutResult(inner -> app.placeOrder("a-after-commit"));
                    }
                });
            });
            assertThat(app.rows()).containsExactlyInAnyOrder("a-outer", "a-after-commit");
            assertThat(app.events()).containsExactlyInAnyOrder("a-outer", "a-after-commit");
        }
    }
}
