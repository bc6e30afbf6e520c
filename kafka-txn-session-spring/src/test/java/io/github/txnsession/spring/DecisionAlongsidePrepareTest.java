package io.github.txnsession.spring;

import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;

import io.github.txnsession.kafka.PreparedTransaction;
import io.github.txnsession.kafka.SessionAbortableException;
import io.github.txnsession.kafka.SessionProducer;
import io.github.txnsession.kafka.SessionState;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * {@link DecisionAlongsidePrepare} against a real broker (transaction version 2): the decision is written under the
 * identity the prepare confirms, a wrong prediction is written over, a failed write or prepare throws only once the
 * other side has ended, and a busy executor leaves the prepare to the committing thread.
 */
class DecisionAlongsidePrepareTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    private static final String TOPIC = EmbeddedKafkaCluster.uniqueName("alongside");
    private static ExecutorService executor;

    @BeforeAll
    static void topicAndExecutor() {
        kafka.cluster().createTopic(TOPIC, 1);
        executor = Executors.newSingleThreadExecutor();
    }

    @AfterAll
    static void stopExecutor() {
        executor.shutdownNow();
    }

    /** Records the decisions written, on which thread; optionally fails. */
    private static class RecordingDecision implements TwoPhaseDecision {
        final List<PreparedTransaction> written = new CopyOnWriteArrayList<>();
        final List<Thread> threads = new CopyOnWriteArrayList<>();
        volatile RuntimeException failWith;

        @Override
        public void record(String transactionalId, PreparedTransaction prepared) {
            this.threads.add(Thread.currentThread());
            if (this.failWith != null) {
                throw this.failWith;
            }
            this.written.add(prepared);
        }

        @Override
        public void settle(String transactionalId, PreparedTransaction prepared, RuntimeException failure) {
            throw new UnsupportedOperationException("these tests complete no transaction through the decision");
        }

        @Override
        public boolean isRecorded(String transactionalId, PreparedTransaction prepared) {
            return this.written.contains(prepared);
        }

        @Override
        public boolean clear(String transactionalId, PreparedTransaction prepared) {
            return true;
        }
    }

    private static TransactionSession sessionWithOneSend(String value) {
        Map<String, Object> configs = new java.util.HashMap<>(kafka.cluster().clientConfigs());
        configs.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, EmbeddedKafkaCluster.uniqueName("alongside-id"));
        configs.put(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, 4096);
        TransactionSession session = TransactionSession.open(configs);
        session.initialize();
        session.beginTransaction();
        new SessionProducer<>(session, new StringSerializer(), new StringSerializer())
            .send(new ProducerRecord<>(TOPIC, value, value));
        return session;
    }

    @Test
    void theDecisionNamesTheTransactionThePrepareConfirmsAndCommitsWithIt() {
        RecordingDecision decision = new RecordingDecision();
        try (TransactionSession session = sessionWithOneSend("confirmed")) {
            PreparedTransaction expected = session.expectedPreparedTransaction().orElseThrow();
            assertThat(expected.hasStartTime()).as("version 2 names a transaction by producer id and epoch").isFalse();
            DecisionAlongsidePrepare.Prepared prepared = DecisionAlongsidePrepare.prepare(session, decision, expected,
                    executor);
            assertThat(prepared.recorded()).isEqualTo(expected);
            assertThat(decision.written).containsExactly(expected);
            assertThat(decision.threads).containsExactly(Thread.currentThread());
            assertThat(session.state()).isEqualTo(SessionState.PREPARED);
            PreparedTransaction confirmed = prepared.confirmed();
            assertThat(confirmed).isEqualTo(session.currentTransaction().orElseThrow());
            // asked while the flush ran (prepareTransactionByEpoch): a start time only if it was registered by then
            assertThat(confirmed.producerId()).isEqualTo(expected.producerId());
            assertThat(confirmed.epoch()).isEqualTo(expected.epoch());
            session.completeTransaction(confirmed);
        }
        assertThat(kafka.cluster().readCommitted(TOPIC)).extracting(r -> r.key()).contains("confirmed");
    }

    @Test
    void aWrongPredictionIsWrittenOverWithTheConfirmedIdentity() {
        RecordingDecision decision = new RecordingDecision();
        try (TransactionSession session = sessionWithOneSend("mispredicted")) {
            PreparedTransaction right = session.expectedPreparedTransaction().orElseThrow();
            PreparedTransaction wrong = PreparedTransaction.of(right.producerId(), (short) (right.epoch() + 1), -1);
            DecisionAlongsidePrepare.Prepared prepared = DecisionAlongsidePrepare.prepare(session, decision, wrong,
                    executor);
            assertThat(prepared.confirmed().epoch()).isEqualTo(right.epoch());
            assertThat(prepared.confirmed().producerId()).as("the session's own identity")
                .isEqualTo(right.producerId());
            assertThat(prepared.recorded()).isEqualTo(prepared.confirmed());
            assertThat(decision.written).containsExactly(wrong, prepared.confirmed());
            session.abortTransaction();
        }
    }

    @Test
    void anExecutorThatDoesNotRunTheTaskLeavesThePrepareToTheCommittingThread() {
        RecordingDecision decision = new RecordingDecision();
        ConcurrentLinkedQueue<Runnable> neverRun = new ConcurrentLinkedQueue<>();
        try (TransactionSession session = sessionWithOneSend("stolen")) {
            PreparedTransaction expected = session.expectedPreparedTransaction().orElseThrow();
            DecisionAlongsidePrepare.Prepared prepared = DecisionAlongsidePrepare.prepare(session, decision, expected,
                    neverRun::add);
            assertThat(prepared.recorded()).isEqualTo(expected);
            assertThat(session.state()).isEqualTo(SessionState.PREPARED);
            assertThat(neverRun).hasSize(1);
            neverRun.poll().run(); // run late: it must not prepare a second time
            assertThat(session.state()).isEqualTo(SessionState.PREPARED);
            session.completeTransaction(prepared.confirmed());
            assertThat(session.state()).isEqualTo(SessionState.READY);
        }
    }

    @Test
    void aRejectingExecutorPreparesOnTheCommittingThread() {
        RecordingDecision decision = new RecordingDecision();
        try (TransactionSession session = sessionWithOneSend("rejected")) {
            PreparedTransaction expected = session.expectedPreparedTransaction().orElseThrow();
            DecisionAlongsidePrepare.Prepared prepared = DecisionAlongsidePrepare.prepare(session, decision, expected,
                    task -> {
                        throw new RejectedExecutionException("full");
                    });
            assertThat(prepared.recorded()).isEqualTo(expected);
            assertThat(session.state()).isEqualTo(SessionState.PREPARED);
            session.abortTransaction();
        }
    }

    @Test
    void aFailedDecisionWriteThrowsOnlyOnceThePrepareHasEnded() {
        RecordingDecision decision = new RecordingDecision();
        decision.failWith = new IllegalStateException("decision table unreachable");
        try (TransactionSession session = sessionWithOneSend("write-failed")) {
            PreparedTransaction expected = session.expectedPreparedTransaction().orElseThrow();
            assertThatThrownBy(() -> DecisionAlongsidePrepare.prepare(session, decision, expected, executor))
                .isSameAs(decision.failWith);
            // the prepare ran to its end (not still running on the executor): the rollback can abort at once
            assertThat(session.state()).isEqualTo(SessionState.PREPARED);
            session.abortTransaction();
            assertThat(session.state()).isEqualTo(SessionState.READY);
        }
        assertThat(kafka.cluster().readCommitted(TOPIC)).extracting(r -> r.key()).doesNotContain("write-failed");
    }

    @Test
    void aFailedPrepareThrowsEvenThoughTheDecisionWasWritten() {
        RecordingDecision decision = new RecordingDecision();
        try (TransactionSession session = sessionWithOneSend("sent")) {
            // a record over max.request.size fails its send: the prepare finds it and refuses
            new SessionProducer<>(session, new StringSerializer(), new StringSerializer())
                .send(new ProducerRecord<>(TOPIC, "too-large", "x".repeat(10_000)));
            PreparedTransaction expected = session.expectedPreparedTransaction().orElseThrow();
            assertThatThrownBy(() -> DecisionAlongsidePrepare.prepare(session, decision, expected, executor))
                .isInstanceOf(SessionAbortableException.class);
            assertThat(decision.written).as("written, and rolled back by the caller's database").hasSize(1);
            assertThat(session.state()).isEqualTo(SessionState.ABORTABLE_ERROR);
            session.abortTransaction();
        }
        assertThat(kafka.cluster().readCommitted(TOPIC)).extracting(r -> r.key()).doesNotContain("sent", "too-large");
    }

    @Test
    void anErrorInTheDecisionWriteLeavesNoPrepareRunningBehind() {
        RecordingDecision decision = new RecordingDecision();
        ConcurrentLinkedQueue<Runnable> notYetRun = new ConcurrentLinkedQueue<>();
        try (TransactionSession session = sessionWithOneSend("error")) {
            PreparedTransaction expected = session.expectedPreparedTransaction().orElseThrow();
            TwoPhaseDecision failing = new TwoPhaseDecision() {
                @Override
                public void record(String transactionalId, PreparedTransaction prepared) {
                    throw new StackOverflowError("deep");
                }

                @Override
                public void settle(String transactionalId, PreparedTransaction prepared, RuntimeException failure) {
                    decision.settle(transactionalId, prepared, failure);
                }

                @Override
                public boolean isRecorded(String transactionalId, PreparedTransaction prepared) {
                    return false;
                }

                @Override
                public boolean clear(String transactionalId, PreparedTransaction prepared) {
                    return true;
                }
            };
            assertThatThrownBy(() -> DecisionAlongsidePrepare.prepare(session, failing, expected, notYetRun::add))
                .isInstanceOf(StackOverflowError.class);
            // the prepare was claimed before the error went up: the task that runs later does nothing
            assertThat(session.state()).isEqualTo(SessionState.PREPARED);
            session.abortTransaction();
            session.beginTransaction();
            notYetRun.poll().run();
            assertThat(session.state()).as("the next transaction is not prepared by a task left behind")
                .isEqualTo(SessionState.IN_TRANSACTION);
            session.abortTransaction();
        }
    }

    @Test
    void anInterruptedCommittingThreadRollsBackThoughThePrepareRanElsewhere() {
        try (TransactionSession session = sessionWithOneSend("interrupted")) {
            RecordingDecision decision = new RecordingDecision() {
                @Override
                public void record(String transactionalId, PreparedTransaction prepared) {
                    super.record(transactionalId, prepared);
                    // the executor prepares; the committing thread is interrupted meanwhile
                    org.awaitility.Awaitility.await().atMost(java.time.Duration.ofSeconds(30))
                        .until(() -> session.state() == SessionState.PREPARED);
                    Thread.currentThread().interrupt();
                }
            };
            PreparedTransaction expected = session.expectedPreparedTransaction().orElseThrow();
            try {
                assertThatThrownBy(() -> DecisionAlongsidePrepare.prepare(session, decision, expected, executor))
                    .isInstanceOf(org.apache.kafka.common.errors.InterruptException.class)
                    .hasMessageContainingAll(session.transactionalId(), "rolls back");
            }
            finally {
                assertThat(Thread.interrupted()).as("the interrupt is kept for the caller").isTrue();
            }
            session.abortTransaction();
        }
        assertThat(kafka.cluster().readCommitted(TOPIC)).extracting(r -> r.key()).doesNotContain("interrupted");
    }
}
