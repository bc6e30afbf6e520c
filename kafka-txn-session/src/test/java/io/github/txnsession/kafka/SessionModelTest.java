package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;
import static org.awaitility.Awaitility.await;

/**
 * A randomized, model-based test of one transactional id: random sequences of sends, prepare, commit, abort,
 * heartbeat, completion from a second (resumed) session, completion of stale prepared states, coordinator
 * timeouts, fencing by a new session and broker restarts (between transactions: a restart takes longer than the
 * model's short transaction timeout), each checked against an oracle of
 * <ul>
 * <li>what every call must report (outcome, exception type, state), and</li>
 * <li>what a {@code read_committed} consumer must see after the step (exactly the committed records, in order).</li>
 * </ul>
 * The seed is printed, and {@code -Dtxnsession.model.seed=N} replays it. The default build runs
 * {@code txnsession.model.steps} steps (300) per transaction version; {@code -Pmodel-full} runs 20,000.
 */
abstract class SessionModelTest {

    private static final Logger log = LoggerFactory.getLogger(SessionModelTest.class);

    static final int TRANSACTION_TIMEOUT_MS = 2500;

    abstract EmbeddedKafkaCluster kafka();

    /** @return whether the cluster runs transaction version 2 */
    abstract boolean transactionVersion2();

    /** The operations, in the order of the figures reported at the end. */
    enum Op {
        BEGIN, SEND, PREPARE, COMMIT, ABORT, COMPLETE_SELF, COMPLETE_OTHER, HEARTBEAT, EXTERNAL_COMMIT,
        EXTERNAL_ABORT, STALE_COMPLETE, COORDINATOR_TIMEOUT, FENCE, BROKER_RESTART
    }

    /** How a prepared transaction ended, as far as the oracle knows. */
    enum Fate { OPEN, COMMITTED, ABORTED, EMPTY }

    /** A prepared identity, its fate, and which coordinator registration it was (for "is it the latest?"). */
    static final class Prepared {
        final PreparedTransaction id;
        final long registration;
        Fate fate = Fate.OPEN;

        Prepared(PreparedTransaction id, long registration) {
            this.id = id;
            this.registration = registration;
        }

        @Override
        public String toString() {
            return this.id + "(" + this.fate + ", registration " + this.registration + ")";
        }
    }

    private final Map<Op, Integer> counts = new EnumMap<>(Op.class);
    private Random random;
    private String txnId;
    private String topic;
    private TransactionSession session;
    private SessionProducer<String, String> producer;
    private KafkaConsumer<String, String> reader;
    private final List<String> visible = new ArrayList<>();
    private final List<String> seen = new ArrayList<>();
    private final List<String> open = new ArrayList<>();
    private final List<Prepared> prepared = new ArrayList<>();
    /** counts what changed the coordinator's latest transaction: registrations of data, and initializations */
    private long registration;
    /** whether the open transaction registered at the coordinator (a flushed send) */
    private boolean registered;
    /** whether records of the open transaction were sent without a flush (they may not have reached the leader) */
    private boolean unflushed;
    private Prepared current;
    private int sequence;
    private long step;

    @Test
    void randomOperationsMatchTheOracle() {
        long seed = Long.getLong("txnsession.model.seed", System.nanoTime());
        int steps = Integer.getInteger("txnsession.model.steps", 300);
        log.info("Session model: seed {} ({} steps); replay with -Dtxnsession.model.seed={}", seed, steps, seed);
        System.out.println("SessionModelTest seed " + seed + " steps " + steps);
        this.random = new Random(seed);
        this.txnId = EmbeddedKafkaCluster.uniqueName("tx-model");
        this.topic = EmbeddedKafkaCluster.uniqueName("model-out");
        kafka().createTopic(this.topic, 1);
        openReader();
        newSession();
        long started = System.nanoTime();
        try {
            for (this.step = 0; this.step < steps; this.step++) {
                Op op = pick();
                this.counts.merge(op, 1, Integer::sum);
                try {
                    apply(op);
                    checkVisible();
                }
                catch (AssertionError | RuntimeException ex) {
                    throw new AssertionError("Step " + this.step + " (" + op + ") failed with seed " + seed + "; state "
                            + this.session.state() + ", current " + this.current + ", prepared " + this.prepared, ex);
                }
            }
        }
        finally {
            this.session.close(Duration.ofSeconds(5));
            this.reader.close();
        }
        log.info("Session model: {} steps in {} ms, seed {}: {}; {} records committed", steps,
                (System.nanoTime() - started) / 1_000_000, seed, this.counts, this.visible.size());
        System.out.println("SessionModelTest " + steps + " steps in " + (System.nanoTime() - started) / 1_000_000
                + " ms: " + this.counts + ", " + this.visible.size() + " records committed");
    }

    private Op pick() {
        int r = this.random.nextInt(1000);
        switch (this.session.state()) {
            case READY -> {
                if (r < 5) {
                    return Op.BROKER_RESTART;
                }
                if (r < 15) {
                    return Op.FENCE;
                }
                return r < 150 && !this.prepared.isEmpty() ? Op.STALE_COMPLETE : Op.BEGIN;
            }
            case IN_TRANSACTION -> {
                if (r < 8 && this.registered) {
                    return Op.COORDINATOR_TIMEOUT;
                }
                if (r < 18) {
                    return Op.FENCE;
                }
                if (r < 400) {
                    return Op.SEND;
                }
                if (r < 550) {
                    return Op.PREPARE;
                }
                if (r < 700) {
                    return Op.COMMIT;
                }
                if (r < 800) {
                    return Op.ABORT;
                }
                if (r < 900) {
                    return Op.HEARTBEAT;
                }
                return this.prepared.isEmpty() ? Op.HEARTBEAT : Op.STALE_COMPLETE;
            }
            case PREPARED -> {
                // no broker restart here: it takes longer than the short transaction timeout of the model
                if (r < 250) {
                    return Op.COMMIT;
                }
                if (r < 400) {
                    return Op.COMPLETE_SELF;
                }
                if (r < 480) {
                    return Op.COMPLETE_OTHER;
                }
                if (r < 580) {
                    return Op.ABORT;
                }
                if (r < 700) {
                    return Op.HEARTBEAT;
                }
                if (r < 850) {
                    return Op.EXTERNAL_COMMIT;
                }
                if (r < 920) {
                    return Op.EXTERNAL_ABORT;
                }
                return Op.STALE_COMPLETE;
            }
            default -> throw new AssertionError("The model never leaves a session in " + this.session.state());
        }
    }

    private void apply(Op op) {
        if (this.unflushed && op != Op.SEND && op != Op.PREPARE) {
            // only a prepare's own flush carries records sent without one; the oracle stays exact for the rest
            this.producer.flush();
            this.unflushed = false;
            registeredNow();
        }
        switch (op) {
            case BEGIN -> {
                this.session.beginTransaction();
                this.open.clear();
                this.registered = false;
                this.unflushed = false;
                this.current = null;
            }
            case SEND -> {
                int n = 1 + this.random.nextInt(3);
                for (int i = 0; i < n; i++) {
                    String value = "v" + (this.sequence++);
                    this.producer.send(new ProducerRecord<>(this.topic, 0, value, value));
                    this.open.add(value);
                }
                if (this.random.nextBoolean()) {
                    this.unflushed = true; // left for the prepare's (or the commit's) flush
                }
                else {
                    this.producer.flush(); // registered at the coordinator once the leader has the records
                    this.unflushed = false;
                    registeredNow();
                }
            }
            case PREPARE -> {
                // by epoch: with version 2 the coordinator is asked while the flush runs, mostly without a start time
                boolean byEpoch = this.random.nextBoolean();
                PreparedTransaction p = byEpoch ? this.session.prepareTransactionByEpoch()
                        : this.session.prepareTransaction();
                if (this.unflushed) {
                    this.unflushed = false;
                    registeredNow(); // by the prepare's flush
                }
                assertThat(p.isEmpty()).as("empty iff nothing was sent").isEqualTo(!this.registered);
                if (!p.isEmpty() && (!byEpoch || !transactionVersion2())) {
                    assertThat(p.hasStartTime()).isTrue();
                }
                this.current = new Prepared(p, this.registration);
                this.prepared.add(this.current);
                assertThat(this.session.state()).isEqualTo(SessionState.PREPARED);
            }
            case COMMIT -> {
                this.session.commitTransaction();
                committed();
            }
            case ABORT -> {
                this.session.abortTransaction();
                aborted();
            }
            case COMPLETE_SELF -> {
                CompletionOutcome outcome = this.session.completeTransaction(this.current.id);
                assertThat(outcome).isEqualTo(this.current.id.isEmpty() ? CompletionOutcome.EMPTY
                        : CompletionOutcome.COMMITTED);
                committed();
            }
            case COMPLETE_OTHER -> {
                PreparedTransaction other = PreparedTransaction.of(this.current.id.producerId() + 1,
                        this.current.id.epoch(), 1);
                CompletionOutcome outcome = this.session.completeTransaction(other);
                assertThat(outcome).isEqualTo(this.current.id.isEmpty() ? CompletionOutcome.EMPTY
                        : CompletionOutcome.ABORTED);
                aborted();
            }
            case HEARTBEAT -> {
                this.session.heartbeat();
                assertThat(this.session.state()).isIn(SessionState.IN_TRANSACTION, SessionState.PREPARED);
            }
            case EXTERNAL_COMMIT -> externalCommit();
            case EXTERNAL_ABORT -> externalAbort();
            case STALE_COMPLETE -> staleComplete();
            case COORDINATOR_TIMEOUT -> coordinatorTimeout();
            case FENCE -> fence();
            case BROKER_RESTART -> {
                int broker = kafka().brokerIds().iterator().next();
                kafka().stopBroker(broker);
                kafka().restartBroker(broker);
            }
        }
    }

    private void committed() {
        assertThat(this.session.state()).isEqualTo(SessionState.READY);
        this.visible.addAll(this.open);
        endCurrent(Fate.COMMITTED);
    }

    private void aborted() {
        assertThat(this.session.state()).isEqualTo(SessionState.READY);
        endCurrent(Fate.ABORTED);
    }

    private void endCurrent(Fate fate) {
        if (this.current != null && this.current.fate == Fate.OPEN) {
            this.current.fate = this.current.id.isEmpty() ? Fate.EMPTY : fate;
        }
        this.open.clear();
        this.current = null;
    }

    private Map<String, Object> resumeConfigs() {
        return Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka().bootstrapServers());
    }

    /** Another process completes the prepared transaction; then the live session finishes in its turn. */
    private void externalCommit() {
        try (TransactionSession other = TransactionSession.resume(this.txnId, this.current.id, resumeConfigs())) {
            CompletionOutcome outcome = other.completeTransaction(this.current.id);
            assertThat(outcome).isEqualTo(this.current.id.isEmpty() ? CompletionOutcome.EMPTY
                    : CompletionOutcome.COMMITTED);
        }
        if (this.current.id.isEmpty() || this.random.nextBoolean()) {
            this.session.commitTransaction(); // the coordinator answers it as a retry of that commit
            committed();
            return;
        }
        this.visible.addAll(this.open);
        try {
            this.session.abortTransaction();
            fail("aborting a transaction another committer committed must fail");
        }
        catch (TransactionSessionException expected) {
            assertThat(expected).hasMessageContaining("committed by another committer");
        }
        assertThat(this.session.state()).isEqualTo(SessionState.FATAL_ERROR);
        endCurrent(Fate.COMMITTED);
        replaceSession();
    }

    /** Another process aborts the prepared transaction; the live session then aborts or fails to commit. */
    private void externalAbort() {
        try (TransactionSession other = TransactionSession.resume(this.txnId, this.current.id, resumeConfigs())) {
            other.abortTransaction();
            assertThat(other.state()).isEqualTo(SessionState.READY);
        }
        if (this.current.id.isEmpty() || this.random.nextBoolean()) {
            this.session.abortTransaction(); // a retry of that abort
            aborted();
            return;
        }
        try {
            this.session.commitTransaction();
            fail("committing a transaction another process aborted must fail");
        }
        catch (TransactionSessionException expected) {
            assertThat(expected).isNotInstanceOf(SessionTimeoutException.class);
        }
        assertThat(this.session.state()).isIn(SessionState.FATAL_ERROR, SessionState.ABORTABLE_ERROR);
        if (this.session.state() == SessionState.ABORTABLE_ERROR) {
            this.session.abortTransaction();
        }
        endCurrent(Fate.ABORTED);
        if (this.session.state() == SessionState.FATAL_ERROR) {
            replaceSession();
        }
    }

    /** An old prepared state is completed again: the outcome must match what the oracle knows, and touch nothing. */
    private void staleComplete() {
        List<Prepared> ended = this.prepared.stream().filter(p -> p.fate != Fate.OPEN).toList();
        if (ended.isEmpty()) {
            return;
        }
        Prepared p = ended.get(this.random.nextInt(ended.size()));
        boolean latest = p.registration == this.registration;
        try (TransactionSession other = TransactionSession.resume(this.txnId, p.id, resumeConfigs())) {
            if (p.fate == Fate.EMPTY) {
                assertThat(other.completeTransaction(p.id)).isEqualTo(CompletionOutcome.EMPTY);
            }
            else if (latest && p.fate == Fate.COMMITTED) {
                assertThat(other.completeTransaction(p.id)).isEqualTo(CompletionOutcome.ALREADY_COMMITTED);
            }
            else if (latest) {
                assertThatThrows(() -> other.completeTransaction(p.id), TransactionLostException.class, p);
            }
            else {
                assertThatThrows(() -> other.completeTransaction(p.id), TransactionSupersededException.class, p);
            }
        }
    }

    private static void assertThatThrows(Runnable call, Class<? extends Throwable> type, Prepared p) {
        try {
            call.run();
            fail("completing " + p + " must throw " + type.getSimpleName());
        }
        catch (RuntimeException ex) {
            assertThat(ex).as("completing " + p).isInstanceOf(type);
        }
    }

    /** The open transaction outlives transaction.timeout.ms: the coordinator aborts it, heartbeat says so. */
    private void coordinatorTimeout() {
        await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(100)).until(() -> {
            try {
                this.session.heartbeat();
                return false;
            }
            catch (TransactionLostException expected) {
                return true;
            }
        });
        assertThat(this.session.state()).isEqualTo(SessionState.ABORTABLE_ERROR);
        if (transactionVersion2()) {
            this.session.abortTransaction();
            aborted();
            return;
        }
        // transaction version 1: the coordinator fenced the epoch to abort, so kafka-clients' abort is fenced
        // (what KIP-890 fixed); the transaction never commits and the session must be replaced
        try {
            this.session.abortTransaction();
            fail("with transaction version 1 the abort after a coordinator timeout is fenced");
        }
        catch (SessionFencedException expected) {
            assertThat(this.session.state()).isEqualTo(SessionState.FATAL_ERROR);
        }
        endCurrent(Fate.ABORTED);
        replaceSession();
    }

    /** Another session initializes the same transactional id: the open transaction (if any) is aborted. */
    private void fence() {
        boolean wasOpen = this.session.state() == SessionState.IN_TRANSACTION;
        try (TransactionSession successor = TransactionSession.open(sessionConfigs())) {
            successor.initialize();
            this.registration++;
        }
        if (wasOpen) {
            try {
                int prepare = this.random.nextInt(3);
                if (prepare == 1) {
                    this.session.prepareTransaction();
                }
                else if (prepare == 2) {
                    this.session.prepareTransactionByEpoch();
                }
                this.session.commitTransaction();
                if (this.registered) {
                    fail("a fenced transaction that wrote records must not commit");
                }
                committed(); // it wrote nothing: it ends locally, nothing to fence
                replaceSession(); // the next transaction would be fenced
                return;
            }
            catch (TransactionSessionException expected) {
                assertThat(expected).isNotInstanceOf(SessionTimeoutException.class);
            }
            if (this.session.state() == SessionState.ABORTABLE_ERROR) {
                try {
                    this.session.abortTransaction();
                }
                catch (TransactionSessionException expected) {
                    // fenced while aborting: the transaction never commits either way
                }
            }
            endCurrent(Fate.ABORTED);
        }
        replaceSession();
    }

    private void registeredNow() {
        if (!this.registered) {
            this.registered = true;
            this.registration++;
        }
    }

    private Map<String, Object> sessionConfigs() {
        Map<String, Object> configs = TestClients.sessionConfigs(kafka(), this.txnId);
        configs.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, TRANSACTION_TIMEOUT_MS);
        configs.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 30_000);
        configs.put(ProducerConfig.LINGER_MS_CONFIG, 200); // unflushed records wait for the next flush
        return configs;
    }

    private void newSession() {
        this.session = TransactionSession.open(sessionConfigs());
        this.session.initialize();
        this.registration++;
        this.producer = new SessionProducer<>(this.session, new StringSerializer(), new StringSerializer());
        this.open.clear();
        this.current = null;
    }

    private void replaceSession() {
        this.session.close(Duration.ofSeconds(5));
        for (Prepared p : this.prepared) {
            if (p.fate == Fate.OPEN) {
                p.fate = p.id.isEmpty() ? Fate.EMPTY : Fate.ABORTED;
            }
        }
        newSession();
    }

    private void openReader() {
        Map<String, Object> configs = kafka().clientConfigs();
        configs.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        configs.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        this.reader = new KafkaConsumer<>(configs, new StringDeserializer(), new StringDeserializer());
        TopicPartition tp = new TopicPartition(this.topic, 0);
        this.reader.assign(List.of(tp));
        this.reader.seekToBeginning(List.of(tp));
    }

    /** What a read_committed consumer sees must become exactly the oracle's committed records, never more. */
    private void checkVisible() {
        long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
        while (true) {
            for (ConsumerRecord<String, String> r : this.reader.poll(Duration.ofMillis(this.seen.size()
                    < this.visible.size() ? 50 : 0))) {
                this.seen.add(r.value());
            }
            if (this.seen.size() > this.visible.size() || !this.visible.subList(0, this.seen.size())
                .equals(this.seen)) {
                fail("read_committed sees " + tail(this.seen) + " but the oracle committed " + tail(this.visible));
            }
            if (this.seen.size() == this.visible.size()) {
                return;
            }
            if (System.nanoTime() > deadline) {
                fail("read_committed sees " + this.seen.size() + " records, the oracle committed "
                        + this.visible.size() + ": missing " + this.visible.subList(this.seen.size(),
                                this.visible.size()));
            }
        }
    }

    private static List<String> tail(List<String> values) {
        return values.subList(Math.max(0, values.size() - 10), values.size());
    }

}
