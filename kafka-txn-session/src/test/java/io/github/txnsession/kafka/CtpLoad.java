package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
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

import static io.github.txnsession.kafka.TestClients.consumerConfigs;
import static io.github.txnsession.kafka.TestClients.sessionConfigs;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The load of the reliability tests: an input fed at a steady rate while faults run, consume-transform-produce
 * processors (a bound {@link TransactionalConsumer} and a session each, written as the core usage guide says), a
 * concurrent {@code read_committed} reader of the output, and the checks at the end: every input exactly once and in
 * order per partition, the reader saw the same, no hanging transaction.
 */
final class CtpLoad {

    private final EmbeddedKafkaCluster kafka;
    final String input;
    final String output;
    final int partitions;
    final int perPartition;
    /** records committed by every processor together */
    final AtomicInteger committed = new AtomicInteger();
    final AtomicLong longestGapMs = new AtomicLong();
    private volatile long lastProgressNanos = System.nanoTime();
    private final List<Processor> processors = new java.util.concurrent.CopyOnWriteArrayList<>();
    private final List<Reader> readers = new java.util.concurrent.CopyOnWriteArrayList<>();
    private final ExecutorService threads = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "ctp-load-worker");
        t.setDaemon(true); // a failed run leaves none behind
        return t;
    });

    CtpLoad(EmbeddedKafkaCluster kafka, String input, String output, int partitions, int perPartition) {
        this.kafka = kafka;
        this.input = input;
        this.output = output;
        this.partitions = partitions;
        this.perPartition = perPartition;
    }

    int total() {
        return this.partitions * this.perPartition;
    }

    boolean done() {
        return this.committed.get() >= total();
    }

    Duration sinceLastProgress() {
        return Duration.ofNanos(System.nanoTime() - this.lastProgressNanos);
    }

    private void progressed(int records) {
        this.committed.addAndGet(records);
        long now = System.nanoTime();
        this.longestGapMs.accumulateAndGet((now - this.lastProgressNanos) / 1_000_000, Math::max);
        this.lastProgressNanos = now;
    }

    <T> Future<T> run(java.util.concurrent.Callable<T> task) {
        return this.threads.submit(task);
    }

    /** Stops every processor and reader (also after a failure) and waits a little for them to end. */
    void shutdown() throws InterruptedException {
        this.processors.forEach(p -> p.stop.set(true));
        this.readers.forEach(r -> r.stop.set(true));
        this.threads.shutdown();
        if (!this.threads.awaitTermination(60, TimeUnit.SECONDS)) {
            this.threads.shutdownNow();
        }
    }

    /** Fails at once when a processor or the feeder ended with an error, instead of waiting for a stall. */
    void assertNoneFailed(Future<?> feeding) throws Exception {
        if (feeding.isDone()) {
            feeding.get();
        }
        for (Processor p : this.processors) {
            if (p.future.isDone()) {
                p.future.get();
            }
        }
    }

    /**
     * Produces the input ({@code "p<partition>-<i>"}) at about {@code perSecond} records a second (idempotent,
     * acks=all, retried through faults), in the background.
     */
    Future<?> feed(int perSecond) {
        return run(() -> {
            Map<String, Object> configs = this.kafka.clientConfigs();
            configs.put(ProducerConfig.ACKS_CONFIG, "all");
            configs.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
            configs.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 120_000);
            long interval = TimeUnit.SECONDS.toNanos(1) / perSecond;
            long next = System.nanoTime();
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(configs, new StringSerializer(),
                    new StringSerializer())) {
                for (int i = 0; i < this.perPartition; i++) {
                    for (int p = 0; p < this.partitions; p++) {
                        LockSupport.parkNanos(next - System.nanoTime()); // pacing the load, not waiting for a condition
                        next += interval;
                        sent.add(producer.send(new ProducerRecord<>(this.input, p, "k" + p, "p" + p + "-" + i)));
                    }
                }
                for (Future<RecordMetadata> f : sent) {
                    f.get();
                }
            }
            return null;
        });
    }

    /** Starts a processor in the background; stop it with {@link Processor#stop()}. */
    Processor startProcessor(String group, String transactionalId, Map<String, Object> consumerOverrides) {
        Processor p = new Processor(group, transactionalId, consumerOverrides);
        this.processors.add(p);
        p.future = run(() -> {
            p.run();
            return null;
        });
        return p;
    }

    /** Starts the concurrent read_committed reader of the output. */
    Reader startReader() {
        Reader r = new Reader();
        this.readers.add(r);
        r.future = run(() -> {
            r.run();
            return null;
        });
        return r;
    }

    /**
     * The checks at the end: every input exactly once and in order per partition in the output read with
     * read_committed; the concurrent reader saw the same; no transaction of {@code transactionalIdPrefix} hangs.
     *
     * @param context what to print with a failure (seed, faults)
     */
    void assertExactlyOnce(Reader reader, String transactionalIdPrefix, String context) throws Exception {
        List<ConsumerRecord<String, String>> out = this.kafka.readCommitted(this.output);
        Map<Integer, List<String>> perPartition = new HashMap<>();
        out.forEach(r -> perPartition.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.value()));
        for (int p = 0; p < this.partitions; p++) {
            List<String> expected = new ArrayList<>();
            for (int i = 0; i < this.perPartition; i++) {
                expected.add("out-p" + p + "-" + i);
            }
            assertThat(perPartition.getOrDefault(p, List.of())).as("partition %d: every input once, in order (%s)", p,
                    context).containsExactlyElementsOf(expected);
        }
        reader.awaitCount(out.size());
        reader.stop.set(true);
        reader.future.get(30, TimeUnit.SECONDS);
        assertThat(reader.seen()).as("what a concurrent read_committed reader saw (%s)", context)
            .isEqualTo(perPartition);
        List<TopicPartition> all = new ArrayList<>();
        for (int p = 0; p < this.partitions; p++) {
            all.add(new TopicPartition(this.output, p)); // written by the processors' transactions
        }
        all.addAll(HangingTransactions.offsetsTopicPartitions(this.kafka.admin())); // their offset commits
        HangingTransactions.assertNone(this.kafka.admin(), transactionalIdPrefix, all, Duration.ofSeconds(30));
    }

    /** An injected crash of a processor, between a transaction's sends and its commit. */
    static final class Crash extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Crash() {
            super("injected crash before the commit");
        }
    }

    /** A consume-transform-produce loop with its own session and bound consumer, as the core usage guide says. */
    final class Processor {

        private final String group;
        private final String transactionalId;
        private final Map<String, Object> consumerOverrides;
        private final AtomicBoolean stop = new AtomicBoolean();
        final AtomicInteger transactions = new AtomicInteger();
        final AtomicInteger aborts = new AtomicInteger();
        final AtomicInteger sessions = new AtomicInteger();
        final AtomicInteger crashes = new AtomicInteger();
        final AtomicInteger pauses = new AtomicInteger();
        private final java.util.concurrent.atomic.AtomicReference<Duration> nextFault =
                new java.util.concurrent.atomic.AtomicReference<>();
        private volatile Future<?> future;

        Processor(String group, String transactionalId, Map<String, Object> consumerOverrides) {
            this.group = group;
            this.transactionalId = transactionalId;
            this.consumerOverrides = consumerOverrides;
        }

        /** Asks the loop to end after its transaction and waits until it has closed its session and consumer. */
        void stop() throws Exception {
            this.stop.set(true);
            this.future.get(2, TimeUnit.MINUTES);
        }

        Future<?> future() {
            return this.future;
        }

        String transactionalId() {
            return this.transactionalId;
        }

        /**
         * Injects a fault into the next transaction, between its sends and its commit: {@code Duration.ZERO} crashes
         * the processor there (its session and consumer are closed without ending the transaction, and it starts
         * over with a new session of the same transactional id, as a restarted process would); a positive duration
         * pauses it there for that long (a long GC pause: the group moves its partitions on meanwhile).
         */
        void injectFault(Duration fault) {
            this.nextFault.set(fault);
        }

        private boolean running() {
            return !this.stop.get() && !done() && !Thread.currentThread().isInterrupted();
        }

        void run() {
            while (running()) {
                this.sessions.incrementAndGet();
                Map<String, Object> configs = sessionConfigs(CtpLoad.this.kafka, this.transactionalId);
                configs.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 20_000);
                configs.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 8_000);
                configs.put(TransactionSessionConfig.COORDINATOR_TIMEOUT_MS, 10_000);
                configs.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 10_000);
                Map<String, Object> consumerConfigs = consumerConfigs(CtpLoad.this.kafka, this.group);
                consumerConfigs.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 50);
                consumerConfigs.putAll(this.consumerOverrides);
                try (TransactionSession session = TransactionSession.open(configs);
                        TransactionalConsumer<String, String> consumer = new TransactionalConsumer<>(
                                new KafkaConsumer<>(consumerConfigs, new StringDeserializer(),
                                        new StringDeserializer()))) {
                    initialize(session);
                    consumer.subscribe(List.of(CtpLoad.this.input));
                    consumer.bindTransactionSession(session);
                    SessionProducer<String, String> out = new SessionProducer<>(session, new StringSerializer(),
                            new StringSerializer());
                    while (running()) {
                        if (!oneTransaction(session, consumer, out)) {
                            break; // the session is done for: start over with a new one
                        }
                    }
                }
                catch (RuntimeException ex) {
                    System.out.println("processor " + this.transactionalId + ": session " + this.sessions.get()
                            + " ended: " + ex);
                }
            }
        }

        private void initialize(TransactionSession session) {
            for (int attempt = 1;; attempt++) {
                try {
                    session.initialize();
                    return;
                }
                catch (SessionTimeoutException ex) {
                    // a coordinator moving: initialize() may be called again
                    if (attempt >= 6 || !running()) {
                        throw ex;
                    }
                }
            }
        }

        /** @return false when the session cannot go on (fatal) */
        private boolean oneTransaction(TransactionSession session, TransactionalConsumer<String, String> consumer,
                SessionProducer<String, String> out) {
            ConsumerRecords<String, String> records;
            try {
                records = consumer.poll(Duration.ofMillis(200));
            }
            catch (IllegalStateException | SessionFencedException ex) {
                throw new AssertionError("poll refused: a bug in the processor loop or the library", ex);
            }
            catch (org.apache.kafka.common.errors.InterruptException ex) {
                return false;
            }
            catch (RuntimeException ex) {
                System.out.println("processor " + this.transactionalId + ": poll failed (retrying): " + ex);
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(100)); // back-off before polling again
                return true;
            }
            if (records.isEmpty()) {
                return true;
            }
            try {
                session.beginTransaction();
                for (ConsumerRecord<String, String> r : records) {
                    out.send(new ProducerRecord<>(CtpLoad.this.output, r.partition(), r.key(), "out-" + r.value()));
                }
                Duration fault = this.nextFault.getAndSet(null);
                if (fault != null && fault.isZero()) {
                    this.crashes.incrementAndGet();
                    throw new Crash();
                }
                if (fault != null) {
                    this.pauses.incrementAndGet();
                    LockSupport.parkNanos(fault.toNanos()); // the injected pause itself
                }
                commit(session);
                this.transactions.incrementAndGet();
                progressed(records.count());
                return true;
            }
            catch (SessionFencedException ex) {
                throw new AssertionError("nothing else uses " + this.transactionalId + ", yet it was fenced", ex);
            }
            catch (Crash ex) {
                throw ex;
            }
            catch (RuntimeException ex) {
                return endFailed(session, ex, records.count());
            }
        }

        /** A commit that timed out is retried (it may already have gone through: the retry says so). */
        private void commit(TransactionSession session) {
            for (int attempt = 1;; attempt++) {
                try {
                    session.commitTransaction();
                    return;
                }
                catch (SessionTimeoutException ex) {
                    SessionState state = session.state();
                    if (attempt >= 3 || !(state == SessionState.IN_TRANSACTION || state == SessionState.PREPARED)) {
                        throw ex;
                    }
                }
            }
        }

        /**
         * After a failed send or commit: abort, retrying an abort that timed out. An abort that finds that the commit
         * which timed out went through after all fails and leaves the session READY (its only way to end READY):
         * those records are committed.
         */
        private boolean endFailed(TransactionSession session, RuntimeException failure, int records) {
            SessionState state = session.state();
            if (state == SessionState.FATAL_ERROR || state == SessionState.CLOSED) {
                System.out.println("processor " + this.transactionalId + ": session lost (" + state + "): " + failure);
                return false;
            }
            if (state == SessionState.READY) {
                throw new AssertionError("a failed call left the session READY without saying how the transaction "
                        + "ended", failure);
            }
            for (int attempt = 1; attempt <= 3; attempt++) {
                try {
                    session.abortTransaction();
                    this.aborts.incrementAndGet();
                    return true;
                }
                catch (SessionTimeoutException ex) {
                    // the abort may be called again
                }
                catch (TransactionSessionException ex) {
                    if (session.state() == SessionState.READY) {
                        this.transactions.incrementAndGet();
                        progressed(records); // the commit that timed out went through
                        return true;
                    }
                    System.out.println("processor " + this.transactionalId + ": abort failed after " + failure + ": "
                            + ex);
                    return false;
                }
            }
            return false;
        }
    }

    /** Reads the output with read_committed while the processors run, and keeps everything it saw. */
    final class Reader {

        private final AtomicBoolean stop = new AtomicBoolean();
        private final Map<Integer, List<String>> seen = new ConcurrentHashMap<>();
        private final AtomicInteger count = new AtomicInteger();
        private volatile Future<?> future;

        void run() {
            Map<String, Object> configs = CtpLoad.this.kafka.clientConfigs();
            configs.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            configs.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(configs, new StringDeserializer(),
                    new StringDeserializer())) {
                List<TopicPartition> assigned = new ArrayList<>();
                for (int p = 0; p < CtpLoad.this.partitions; p++) {
                    assigned.add(new TopicPartition(CtpLoad.this.output, p));
                }
                consumer.assign(assigned);
                consumer.seekToBeginning(assigned);
                while (!this.stop.get() && !Thread.currentThread().isInterrupted()) {
                    try {
                        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                            this.seen.computeIfAbsent(r.partition(), k -> Collections.synchronizedList(
                                    new ArrayList<>())).add(r.value());
                            this.count.incrementAndGet();
                        }
                    }
                    catch (org.apache.kafka.common.errors.InterruptException ex) {
                        return;
                    }
                    catch (RuntimeException ex) {
                        System.out.println("reader: poll failed (retrying): " + ex);
                        LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(100)); // back-off before polling again
                    }
                }
            }
        }

        void awaitCount(int records) {
            org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(60))
                .until(() -> this.count.get() >= records);
        }

        Map<Integer, List<String>> seen() {
            Map<Integer, List<String>> copy = new LinkedHashMap<>();
            this.seen.forEach((p, values) -> {
                synchronized (values) {
                    copy.put(p, List.copyOf(values));
                }
            });
            return copy;
        }
    }
}
