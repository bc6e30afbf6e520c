package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.HangingTransactions;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static io.github.txnsession.kafka.TestClients.consumerConfigs;
import static io.github.txnsession.kafka.TestClients.sessionConfigs;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Consume-transform-produce through a bound {@link TransactionalConsumer} and a session while brokers bounce (issue
 * R2, path a): 3 brokers, every topic and the transaction and offsets logs replicated 3 times with
 * {@code min.insync.replicas=2}; one broker at a time is stopped and restarted every few seconds, in turn the
 * transaction coordinator of the processor's id, the group coordinator, and the others. The processor is written as the
 * core usage guide says: abort on {@link SessionAbortableException} or {@link TransactionLostException}, retry a commit
 * that timed out, start over with a new session after fencing or a fatal error.
 *
 * <p>Checked: every input exactly once in the output read with {@code read_committed} (nothing lost, nothing
 * duplicated), in input order per partition; a concurrent {@code read_committed} reader saw exactly the same; no gap
 * between commits longer than 30 s; at the end no hanging transaction ({@link HangingTransactions}).
 *
 * <p>Brokers stop without a controlled shutdown ({@code controlled.shutdown.enable=false}): their partition
 * leaderships and coordinators vanish without being handed over, and move only once the controller stops hearing from
 * the broker, as after a crash (unlike {@code kill -9}, the embedded broker still flushes its log on the way down; the
 * test kit has no harder stop in-process). The input is
 * produced while the brokers bounce, so the processor works through all of them. Records:
 * {@code -Dtxnsession.bounce.records=N} at {@code -Dtxnsession.bounce.rate=R} a second (default 2,000 at 40, about 50 s;
 * the {@code bounce-full} Maven profile runs 10,000 at 40, about 4 minutes).
 */
class BrokerBounceTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(b -> b.brokers(3)
        .brokerProperty("min.insync.replicas", 2)
        .brokerProperty("controlled.shutdown.enable", false)); // a stopped broker hands nothing over, as in a crash

    private static final int PARTITIONS = 4;
    private static final Duration MAX_STALL = Duration.ofSeconds(30);

    @Test
    void everyInputExactlyOnceWhileBrokersBounce() throws Exception {
        int total = Integer.getInteger("txnsession.bounce.records", 2_000);
        long seed = Long.getLong("txnsession.bounce.seed", System.nanoTime());
        Random random = new Random(seed);
        String input = EmbeddedKafkaCluster.uniqueName("bounce-in");
        String output = EmbeddedKafkaCluster.uniqueName("bounce-out");
        String group = EmbeddedKafkaCluster.uniqueName("bounce-group");
        String transactionalId = EmbeddedKafkaCluster.uniqueName("bounce-processor");
        kafka.cluster().admin().createTopics(List.of(new NewTopic(input, PARTITIONS, (short) 3),
                new NewTopic(output, PARTITIONS, (short) 3))).all().get();
        List<ProducerRecord<String, String>> records = new ArrayList<>();
        for (int i = 0; i < total / PARTITIONS; i++) {
            for (int p = 0; p < PARTITIONS; p++) {
                records.add(new ProducerRecord<>(input, p, "k" + p, "p" + p + "-" + i));
            }
        }
        int rate = Integer.getInteger("txnsession.bounce.rate", 40);
        ExecutorService threads = Executors.newFixedThreadPool(3, r -> { // feeder, processor, reader: all block
            Thread t = new Thread(r, "bounce-test-worker");
            t.setDaemon(true); // a failed run leaves none behind
            return t;
        });
        CompletableFuture<Void> feeding = CompletableFuture.runAsync(() -> feed(records, rate), threads);

        Processor processor = new Processor(input, output, group, transactionalId, records.size());
        ConcurrentReader reader = new ConcurrentReader(output);
        CompletableFuture<Void> processing = CompletableFuture.runAsync(processor, threads);
        CompletableFuture<Void> reading = CompletableFuture.runAsync(reader, threads);
        List<String> bounces = new ArrayList<>();
        try {
            int turn = 0;
            while (!processing.isDone()) {
                assertThat(processor.sinceLastProgress()).as("no progress for too long; bounces so far %s (seed %d)",
                        bounces, seed).isLessThan(MAX_STALL);
                int broker = pickBroker(turn++, transactionalId, group, random);
                kafka.cluster().stopBroker(broker);
                bounces.add(broker + "@" + processor.committed.get());
                sleepUnlessDone(processing, 500 + random.nextInt(1500));
                kafka.cluster().restartBroker(broker);
                sleepUnlessDone(processing, 1000 + random.nextInt(2000));
            }
            processing.get(5, TimeUnit.MINUTES);
            feeding.get(1, TimeUnit.MINUTES);
        }
        finally {
            processor.stop.set(true);
            threads.shutdown();
            if (!kafka.cluster().stoppedBrokers().isEmpty()) {
                kafka.cluster().restartBrokers(kafka.cluster().stoppedBrokers());
            }
        }

        List<ConsumerRecord<String, String>> out = kafka.cluster().readCommitted(output);
        Map<Integer, List<String>> perPartition = byPartition(out);
        for (int p = 0; p < PARTITIONS; p++) {
            List<String> expected = new ArrayList<>();
            for (int i = 0; i < total / PARTITIONS; i++) {
                expected.add("out-p" + p + "-" + i);
            }
            assertThat(perPartition.getOrDefault(p, List.of())).as("partition %d: every input once, in order (seed "
                    + "%d, bounces %s)", p, seed, bounces).containsExactlyElementsOf(expected);
        }
        reader.await(out.size());
        reader.stop.set(true);
        reading.get(30, TimeUnit.SECONDS);
        assertThat(reader.seen()).as("what a concurrent read_committed reader saw").isEqualTo(perPartition);
        List<TopicPartition> partitions = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            partitions.add(new TopicPartition(input, p));
            partitions.add(new TopicPartition(output, p));
        }
        HangingTransactions.assertNone(kafka.cluster().admin(), transactionalId, partitions, Duration.ofSeconds(30));
        System.out.printf("broker bounces: %d records exactly once through %d bounces %s, %d transactions, %d aborted, "
                + "%d sessions, longest gap between commits %d ms (seed %d)%n", out.size(), bounces.size(), bounces,
                processor.transactions.get(), processor.aborts.get(), processor.sessions.get(),
                processor.longestGapMs.get(), seed);
        assertThat(bounces).as("brokers bounced during the run").hasSizeGreaterThanOrEqualTo(2);
        assertThat(processor.longestGapMs.get()).as("longest gap between commits, ms").isLessThan(MAX_STALL.toMillis());
    }

    /**
     * Produces the input while the brokers bounce, at about {@code perSecond} records a second (idempotent, acks=all,
     * retried through the bounces), so that the processor works through many bounces.
     */
    private static void feed(List<ProducerRecord<String, String>> records, int perSecond) {
        Map<String, Object> configs = kafka.cluster().clientConfigs();
        configs.put(ProducerConfig.ACKS_CONFIG, "all");
        configs.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        configs.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 120_000);
        long interval = TimeUnit.SECONDS.toNanos(1) / perSecond;
        long next = System.nanoTime();
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(configs, new StringSerializer(),
                new StringSerializer())) {
            for (ProducerRecord<String, String> r : records) {
                LockSupport.parkNanos(next - System.nanoTime()); // pacing the load, not waiting for a condition
                next += interval;
                sent.add(producer.send(r));
            }
            for (Future<RecordMetadata> f : sent) {
                f.get();
            }
        }
        catch (Exception ex) {
            throw new AssertionError("Producing the input failed", ex);
        }
    }

    /** In turn: the processor's transaction coordinator, the group coordinator, then any broker. */
    private static int pickBroker(int turn, String transactionalId, String group, Random random) throws Exception {
        List<Integer> ids = new ArrayList<>(kafka.cluster().brokerIds());
        try {
            return switch (turn % 3) {
                case 0 -> kafka.cluster().admin().describeTransactions(List.of(transactionalId))
                    .description(transactionalId).get(10, TimeUnit.SECONDS).coordinatorId();
                case 1 -> kafka.cluster().admin().describeConsumerGroups(List.of(group)).describedGroups().get(group)
                    .get(10, TimeUnit.SECONDS).coordinator().id();
                default -> ids.get(random.nextInt(ids.size()));
            };
        }
        catch (Exception notYetKnown) {
            return ids.get(random.nextInt(ids.size()));
        }
    }

    private static void sleepUnlessDone(CompletableFuture<?> done, long millis) throws Exception {
        try {
            done.get(millis, TimeUnit.MILLISECONDS);
        }
        catch (java.util.concurrent.TimeoutException stillRunning) {
            // the pause between bounces
        }
    }

    private static Map<Integer, List<String>> byPartition(List<ConsumerRecord<String, String>> records) {
        Map<Integer, List<String>> m = new LinkedHashMap<>();
        records.forEach(r -> m.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.value()));
        return m;
    }

    /** The consume-transform-produce loop, as the core usage guide says to write it. */
    private static final class Processor implements Runnable {

        private final String input;
        private final String output;
        private final String group;
        private final String transactionalId;
        private final int total;
        final AtomicBoolean stop = new AtomicBoolean();
        final AtomicInteger committed = new AtomicInteger();
        final AtomicInteger transactions = new AtomicInteger();
        final AtomicInteger aborts = new AtomicInteger();
        final AtomicInteger sessions = new AtomicInteger();
        final AtomicLong longestGapMs = new AtomicLong();
        private volatile long lastProgressNanos = System.nanoTime();

        Processor(String input, String output, String group, String transactionalId, int total) {
            this.input = input;
            this.output = output;
            this.group = group;
            this.transactionalId = transactionalId;
            this.total = total;
        }

        Duration sinceLastProgress() {
            return Duration.ofNanos(System.nanoTime() - this.lastProgressNanos);
        }

        @Override
        public void run() {
            while (!this.stop.get() && this.committed.get() < this.total) {
                this.sessions.incrementAndGet();
                Map<String, Object> configs = sessionConfigs(kafka.cluster(), this.transactionalId);
                configs.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30_000);
                configs.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
                configs.put(TransactionSessionConfig.COORDINATOR_TIMEOUT_MS, 20_000);
                configs.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 20_000);
                Map<String, Object> consumerConfigs = consumerConfigs(kafka.cluster(), this.group);
                consumerConfigs.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 50);
                try (TransactionSession session = TransactionSession.open(configs);
                        TransactionalConsumer<String, String> consumer = new TransactionalConsumer<>(
                                new KafkaConsumer<>(consumerConfigs, new StringDeserializer(),
                                        new StringDeserializer()))) {
                    initialize(session);
                    consumer.subscribe(List.of(this.input));
                    consumer.bindTransactionSession(session);
                    SessionProducer<String, String> out = new SessionProducer<>(session, new StringSerializer(),
                            new StringSerializer());
                    while (!this.stop.get() && this.committed.get() < this.total) {
                        if (!oneTransaction(session, consumer, out)) {
                            break; // the session is done for: start over with a new one
                        }
                    }
                }
                catch (RuntimeException ex) {
                    System.out.println("processor: session " + this.sessions.get() + " ended: " + ex);
                }
            }
        }

        private static void initialize(TransactionSession session) {
            while (true) {
                try {
                    session.initialize();
                    return;
                }
                catch (SessionTimeoutException ex) {
                    // a coordinator moving: initialize() may be called again
                }
            }
        }

        /** @return false when the session cannot go on (fenced, fatal) */
        private boolean oneTransaction(TransactionSession session, TransactionalConsumer<String, String> consumer,
                SessionProducer<String, String> out) {
            ConsumerRecords<String, String> records;
            try {
                records = consumer.poll(Duration.ofMillis(200));
            }
            catch (RuntimeException ex) {
                System.out.println("processor: poll failed: " + ex);
                return true;
            }
            if (records.isEmpty()) {
                return true;
            }
            try {
                session.beginTransaction();
                for (ConsumerRecord<String, String> r : records) {
                    out.send(new ProducerRecord<>(this.output, r.partition(), r.key(), "out-" + r.value()));
                }
                commit(session);
                this.transactions.incrementAndGet();
                this.committed.addAndGet(records.count());
                progressed();
                return true;
            }
            catch (SessionFencedException ex) {
                throw new AssertionError("nothing else uses " + this.transactionalId + ", yet it was fenced", ex);
            }
            catch (RuntimeException ex) {
                return endFailed(session, ex);
            }
        }

        /** A commit that timed out is retried (it may already have gone through: the retry says so). */
        private static void commit(TransactionSession session) {
            for (int attempt = 1;; attempt++) {
                try {
                    session.commitTransaction();
                    return;
                }
                catch (SessionTimeoutException ex) {
                    SessionState state = session.state();
                    if (attempt >= 5 || !(state == SessionState.IN_TRANSACTION || state == SessionState.PREPARED)) {
                        throw ex;
                    }
                }
            }
        }

        private boolean endFailed(TransactionSession session, RuntimeException failure) {
            SessionState state = session.state();
            if (state == SessionState.FATAL_ERROR || state == SessionState.CLOSED) {
                System.out.println("processor: session lost (" + state + "): " + failure);
                return false;
            }
            if (state == SessionState.READY) {
                return true; // the transaction ended already (an abort, or the commit went through)
            }
            for (int attempt = 1; attempt <= 5; attempt++) {
                try {
                    session.abortTransaction();
                    this.aborts.incrementAndGet();
                    progressed();
                    return true;
                }
                catch (SessionTimeoutException ex) {
                    // the abort may be called again
                }
                catch (RuntimeException ex) {
                    System.out.println("processor: abort failed after " + failure + ": " + ex);
                    return false;
                }
            }
            return false;
        }

        private void progressed() {
            long now = System.nanoTime();
            long gapMs = (now - this.lastProgressNanos) / 1_000_000;
            this.longestGapMs.accumulateAndGet(gapMs, Math::max);
            this.lastProgressNanos = now;
        }
    }

    /** Reads the output with read_committed while the processor runs, and keeps everything it saw. */
    private static final class ConcurrentReader implements Runnable {

        private final String topic;
        final AtomicBoolean stop = new AtomicBoolean();
        private final Map<Integer, List<String>> seen = new ConcurrentHashMap<>();
        private final AtomicInteger count = new AtomicInteger();

        ConcurrentReader(String topic) {
            this.topic = topic;
        }

        @Override
        public void run() {
            Map<String, Object> configs = kafka.cluster().clientConfigs();
            configs.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            configs.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(configs, new StringDeserializer(),
                    new StringDeserializer())) {
                List<TopicPartition> partitions = new ArrayList<>();
                for (int p = 0; p < PARTITIONS; p++) {
                    partitions.add(new TopicPartition(this.topic, p));
                }
                consumer.assign(partitions);
                consumer.seekToBeginning(partitions);
                while (!this.stop.get()) {
                    try {
                        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                            this.seen.computeIfAbsent(r.partition(), k -> Collections.synchronizedList(
                                    new ArrayList<>())).add(r.value());
                            this.count.incrementAndGet();
                        }
                    }
                    catch (RuntimeException ex) {
                        System.out.println("reader: poll failed (retrying): " + ex);
                    }
                }
            }
        }

        void await(int records) {
            org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(60))
                .until(() -> this.count.get() >= records);
        }

        Map<Integer, List<String>> seen() {
            Map<Integer, List<String>> copy = new HashMap<>();
            this.seen.forEach((p, values) -> {
                synchronized (values) {
                    copy.put(p, List.copyOf(values));
                }
            });
            return copy;
        }
    }
}
