package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.HangingTransactions;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static io.github.txnsession.kafka.TestClients.readCommitted;
import static io.github.txnsession.kafka.TestClients.sessionConfigs;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * A resumed session racing the live session of the same transaction (reliability issue R3): the live session prepares
 * a transaction, another session resumes it, and both finish it at the same moment with randomly chosen operations
 * (live: commit, abort, or complete with the prepared identity; resumed: complete or abort). Then the live session
 * tries one more transaction. The oracle is what a {@code read_committed} reader sees at the end:
 * <ul>
 * <li>an operation that committed and returned normally: the records are visible; one that aborted and returned
 * normally, or a commit that threw {@link TransactionLostException}: they are not;</li>
 * <li>every failure is a typed {@link TransactionSessionException} (no raw Kafka or state exception), and two
 * operations that returned normally never disagree;</li>
 * <li>the live session's next transaction is visible exactly when its commit returned normally; a session the race
 * fenced learns it at that next call ({@link SessionFencedException}) and nothing it sent becomes visible;</li>
 * <li>no transaction of the race is left open.</li>
 * </ul>
 * Runs {@code txnsession.resume.race.runs} rounds (default 8; {@code -Pbounce-full}: 100) with a random seed, printed.
 */
class ResumeRaceTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    enum Op {
        LIVE_COMMIT, LIVE_ABORT, LIVE_COMPLETE, RESUMED_COMPLETE, RESUMED_ABORT;

        boolean commits() {
            return this == LIVE_COMMIT || this == LIVE_COMPLETE || this == RESUMED_COMPLETE;
        }
    }

    /** What one side of the race did: its operation, and what it returned or threw. */
    record Result(Op op, @Nullable Object returned, @Nullable Throwable thrown) {

        /** @return whether the records must be visible (TRUE), invisible (FALSE), or this says nothing (null) */
        @Nullable Boolean impliesVisible() {
            if (this.thrown != null) {
                return this.thrown instanceof TransactionLostException && this.op.commits() ? Boolean.FALSE : null;
            }
            if (this.returned == CompletionOutcome.ABORTED) {
                return Boolean.FALSE;
            }
            if (this.returned == CompletionOutcome.EMPTY) {
                return null;
            }
            return this.op.commits();
        }

        @Override
        public String toString() {
            return this.op + " -> " + (this.thrown != null ? this.thrown.getClass().getSimpleName() + ": "
                    + this.thrown.getMessage() : this.returned);
        }
    }

    @Test
    void theOutcomesBothSidesReportAgreeWithWhatReadersSee() throws Exception {
        int runs = Integer.getInteger("txnsession.resume.race.runs", 8);
        long seed = Long.getLong("txnsession.resume.race.seed", System.nanoTime());
        Random random = new Random(seed);
        String topic = EmbeddedKafkaCluster.uniqueName("resume-race");
        kafka.cluster().createTopic(topic, 2);
        String idBase = EmbeddedKafkaCluster.uniqueName("resume-race");
        Map<String, Boolean> expectedVisible = new java.util.LinkedHashMap<>();
        List<String> report = new ArrayList<>();
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            for (int run = 0; run < runs; run++) {
                String id = idBase + "-" + (run % 3); // ids are reused: later rounds meet what earlier ones left
                String value = "v" + run;
                int partition = run % 2;
                Map<String, Object> configs = sessionConfigs(kafka.cluster(), id);
                // a transaction a failed round leaves open ends within the hanging-transaction check's wait
                configs.put(org.apache.kafka.clients.producer.ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 10_000);
                try (TransactionSession live = TransactionSession.open(configs)) {
                    live.initialize();
                    SessionProducer<String, String> producer = new SessionProducer<>(live, new StringSerializer(),
                            new StringSerializer());
                    live.beginTransaction();
                    producer.send(new ProducerRecord<>(topic, partition, value, value));
                    PreparedTransaction prepared = live.prepareTransaction();
                    Op liveOp = List.of(Op.LIVE_COMMIT, Op.LIVE_ABORT, Op.LIVE_COMPLETE).get(random.nextInt(3));
                    Op resumedOp = random.nextBoolean() ? Op.RESUMED_COMPLETE : Op.RESUMED_ABORT;
                    List<Result> results;
                    try (TransactionSession resumed = TransactionSession.resume(id, prepared,
                            kafka.cluster().clientConfigs())) {
                        CountDownLatch go = new CountDownLatch(1);
                        // the live side needs one round trip, the resumed side two: a head start of 0 to 3 ms for
                        // the resumed side lets either win
                        long headStart = random.nextInt(4);
                        Future<Result> a = pool.submit(side(go, liveOp, () -> switch (liveOp) {
                            case LIVE_COMMIT -> { pause(headStart); live.commitTransaction(); yield "ok"; }
                            case LIVE_ABORT -> { pause(headStart); live.abortTransaction(); yield "ok"; }
                            default -> { pause(headStart); yield live.completeTransaction(prepared); }
                        }));
                        Future<Result> b = pool.submit(side(go, resumedOp, () -> {
                            if (resumedOp == Op.RESUMED_COMPLETE) {
                                return resumed.completeTransaction(prepared);
                            }
                            resumed.abortTransaction();
                            return "ok";
                        }));
                        go.countDown();
                        results = List.of(a.get(60, TimeUnit.SECONDS), b.get(60, TimeUnit.SECONDS));
                    }
                    Set<Boolean> implied = results.stream().map(Result::impliesVisible)
                        .filter(java.util.Objects::nonNull).collect(Collectors.toSet());
                    assertThat(implied).as("round %d (seed %d): the two sides disagree: %s", run, seed, results)
                        .hasSizeLessThanOrEqualTo(1);
                    for (Result r : results) {
                        if (r.thrown() != null) {
                            assertThat(r.thrown()).as("round %d (seed %d): %s", run, seed, r)
                                .isInstanceOf(TransactionSessionException.class);
                        }
                    }
                    if (!implied.isEmpty()) {
                        expectedVisible.put(value, implied.iterator().next());
                    }
                    // the live session's next transaction: visible exactly when its commit returns
                    String next = "w" + run;
                    Result follow = side(null, Op.LIVE_COMMIT, () -> {
                        if (live.state() == SessionState.PREPARED) {
                            live.abortTransaction(); // the race's failure left it prepared: end it first
                        }
                        live.beginTransaction();
                        producer.send(new ProducerRecord<>(topic, partition, next, next));
                        live.commitTransaction();
                        return "ok";
                    }).call();
                    if (follow.thrown() != null) {
                        if (results.get(0).thrown() instanceof TransactionSessionException) {
                            // it learned in the race (typed); the state machine now allows only close()
                            assertThat(follow.thrown()).as("round %d (seed %d): %s", run, seed, follow)
                                .isInstanceOfAny(TransactionSessionException.class, IllegalStateException.class);
                        }
                        else {
                            assertThat(follow.thrown()).as("round %d (seed %d): %s after %s", run, seed, follow,
                                    results.get(0)).isInstanceOf(TransactionSessionException.class);
                        }
                    }
                    if (!(follow.thrown() instanceof SessionTimeoutException)) { // a timed-out commit may land
                        expectedVisible.put(next, follow.thrown() == null);
                    }
                    report.add("round " + run + ": " + results + "; next -> " + (follow.thrown() == null ? "ok"
                            : follow.thrown().getClass().getSimpleName()));
                }
            }
        }
        finally {
            pool.shutdownNow();
        }
        report.forEach(System.out::println);
        HangingTransactions.assertNone(kafka.cluster().admin(), idBase,
                List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1)), Duration.ofSeconds(30));
        Set<String> visible = readCommitted(kafka.cluster(), topic).stream().map(ConsumerRecord::value)
            .collect(Collectors.toSet());
        expectedVisible.forEach((value, shouldBe) -> assertThat(visible.contains(value))
            .as("%s visible (seed %d): %s", value, seed, report).isEqualTo(shouldBe));
        assertThat(readCommitted(kafka.cluster(), topic)).as("nothing twice").extracting(ConsumerRecord::value)
            .doesNotHaveDuplicates();
    }

    /** Holds one side of the race back (the other side's head start), in whole milliseconds. */
    private static void pause(long millis) throws InterruptedException {
        if (millis > 0) {
            TimeUnit.MILLISECONDS.sleep(millis); // the race's timing itself, not a wait for a condition
        }
    }

    private static Callable<Result> side(@Nullable CountDownLatch go, Op op, Callable<Object> action) {
        return () -> {
            if (go != null) {
                go.await();
            }
            try {
                return new Result(op, action.call(), null);
            }
            catch (Exception ex) {
                return new Result(op, null, ex);
            }
        };
    }
}
