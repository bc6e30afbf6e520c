package io.github.txnsession.benchmarks;

import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import io.github.txnsession.kafka.PreparedTransaction;
import io.github.txnsession.kafka.TransactionCommitter;
import io.github.txnsession.kafka.TransactionSession;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * P3, external commit: what it costs another object (in a committer process) to finish a transaction that a
 * producer prepared. Each operation starts from a fresh open transaction with one record (made by a preparer
 * producer that then goes away without ending it, {@code close(Duration.ZERO)}; not measured).
 * <ul>
 * <li>a) build a transactional {@code KafkaProducer} and call {@code initTransactions()}: the least any
 * producer-based committer pays before it could do anything (kafka-clients has no public call that commits another
 * producer's transaction, so this path does not even commit);</li>
 * <li>b) {@code TransactionSession.resume(id, pid, epoch)} + {@code commitTransaction()}: the transaction is
 * committed when it returns;</li>
 * <li>c) one long-lived {@code TransactionCommitter} (created once, before the measured runs) committing every
 * transaction by its {@code pid:epoch:startTimeMs} identity: the Flink/Connect committer shape.</li>
 * </ul>
 * Latency: the operation up to the decision (a: constructed and initialized; b: committed), without {@code close()}.
 * Bytes: allocated by the calling thread (including {@code close()}) plus by every thread the operation started
 * (read before {@code close()} ends them), via {@code com.sun.management.ThreadMXBean}. Threads: threads started
 * during the operation.
 */
final class P3ExternalCommit {

    static final String S = "P3";
    private static final String PREPARER_ID = "p3-preparer";
    private static final String COMMITTER_ID = "p3-committer";

    private final Bench bench;
    private final String topic = "p3-out";
    private final com.sun.management.ThreadMXBean threads;

    P3ExternalCommit(Bench bench) {
        this.bench = bench;
        this.threads = (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean();
        this.threads.setThreadAllocatedMemoryEnabled(true);
    }

    record Prepared(long producerId, short epoch, long startTimeMs) {
    }

    record Op(long latencyNanos, long bytes, long threadsStarted) {
    }

    void run() throws Exception {
        Results r = this.bench.results;
        r.layout(S, "external commit (latency ms; bytes allocated and threads started per operation)",
                "latency_p50_ms", "latency_p99_ms", "bytes_per_op", "threads_per_op");
        this.bench.kafka.createTopic(this.topic, 1);
        String caseName = "commit a prepared 1-record transaction";
        String[] names = { "new KafkaProducer + initTransactions()", "TransactionSession.resume + commitTransaction()",
                "shared TransactionCommitter.commit()" };
        List<String> keys = List.of("a", "b", "c");
        try (TransactionCommitter committer = TransactionCommitter.create(this.bench.kafka.clientConfigs())) {
            measure(committer, caseName, names, keys);
        }
        r.goal(S, caseName, "latency_p50_ms", "b", "a", 0.2, false);
        r.goal(S, caseName, "latency_p99_ms", "b", "a", 0.2, false);
        r.goal(S, caseName, "bytes_per_op", "b", "a", 0.1, false);
        r.goal(S, caseName, "latency_p50_ms", "c", "a", 0.05, false);
        r.goal(S, caseName, "bytes_per_op", "c", "a", 0.02, false);
    }

    private void measure(TransactionCommitter committer, String caseName, String[] names, List<String> keys)
            throws Exception {
        Results r = this.bench.results;
        for (int rep = this.bench.firstRep(); rep < this.bench.profile.repetitions(); rep++) {
            for (int i : Bench.rotated(List.of(0, 1, 2), rep)) {
                Latencies lat = new Latencies();
                long bytes = 0;
                long started = 0;
                int n = this.bench.profile.p3Commits();
                for (int k = 0; k < n; k++) {
                    Prepared p = prepare();
                    Op op = switch (i) {
                        case 0 -> producerPath();
                        case 1 -> resumePath(p);
                        default -> committerPath(committer, p);
                    };
                    lat.add(op.latencyNanos());
                    bytes += op.bytes();
                    started += op.threadsStarted();
                }
                Map<String, Double> m = Map.of("latency_p50_ms", lat.percentileMillis(50), "latency_p99_ms",
                        lat.percentileMillis(99), "bytes_per_op", (double) bytes / n, "threads_per_op",
                        (double) started / n);
                if (rep >= 0) {
                    r.record(S, caseName, keys.get(i), names[i], m);
                }
                Bench.log("P3 %s rep %d: p50 %.2f ms, %.0f bytes/op, %.1f threads/op", keys.get(i), rep,
                        m.get("latency_p50_ms"), m.get("bytes_per_op"), m.get("threads_per_op"));
            }
        }
    }

    private Op committerPath(TransactionCommitter committer, Prepared prepared) {
        Probe probe = new Probe();
        long t0 = System.nanoTime();
        committer.commit(PREPARER_ID, PreparedTransaction.of(prepared.producerId(), prepared.epoch(),
                prepared.startTimeMs()));
        long t1 = System.nanoTime();
        probe.newThreads();
        return probe.finish(t1 - t0);
    }

    /** Leaves an open transaction with one record for {@link #PREPARER_ID}, as a crashed preparer would. */
    private Prepared prepare() throws Exception {
        Map<String, Object> c = this.bench.producerConfigs();
        c.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, PREPARER_ID);
        KafkaProducer<String, String> p = new KafkaProducer<>(c);
        try {
            p.initTransactions(); // also aborts what the previous (producer-path) operation left open
            p.beginTransaction();
            p.send(new ProducerRecord<>(this.topic, "k", Bench.VALUE)).get(30, TimeUnit.SECONDS);
            TransactionDescription d = this.bench.kafka.admin().describeTransactions(List.of(PREPARER_ID))
                .description(PREPARER_ID).get(30, TimeUnit.SECONDS);
            return new Prepared(d.producerId(), (short) d.producerEpoch(), d.transactionStartTimeMs().orElse(-1));
        }
        finally {
            p.close(Duration.ZERO); // does not abort the open transaction
        }
    }

    private Op producerPath() {
        Map<String, Object> c = this.bench.producerConfigs();
        c.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, COMMITTER_ID);
        Probe probe = new Probe();
        long t0 = System.nanoTime();
        KafkaProducer<String, String> p = new KafkaProducer<>(c);
        p.initTransactions();
        long t1 = System.nanoTime();
        probe.newThreads();
        p.close();
        return probe.finish(t1 - t0);
    }

    private Op resumePath(Prepared prepared) {
        Map<String, Object> c = this.bench.kafka.clientConfigs();
        Probe probe = new Probe();
        long t0 = System.nanoTime();
        TransactionSession s = TransactionSession.resume(PREPARER_ID, prepared.producerId(), prepared.epoch(), c);
        s.commitTransaction();
        long t1 = System.nanoTime();
        probe.newThreads();
        s.close();
        return probe.finish(t1 - t0);
    }

    /** Allocation and thread accounting around one operation on the calling thread. */
    private final class Probe {
        private final Set<Long> before = new HashSet<>();
        private final long callerBefore;
        private final long startedBefore;
        private long newThreadBytes;
        private long probeBytes;

        Probe() {
            for (long id : P3ExternalCommit.this.threads.getAllThreadIds()) {
                this.before.add(id);
            }
            this.startedBefore = P3ExternalCommit.this.threads.getTotalStartedThreadCount();
            this.callerBefore = P3ExternalCommit.this.threads.getCurrentThreadAllocatedBytes();
        }

        /**
         * Adds what the threads started since the probe began have allocated (call before they end). What this
         * accounting itself allocates on the calling thread is left out.
         */
        void newThreads() {
            long own = P3ExternalCommit.this.threads.getCurrentThreadAllocatedBytes();
            long self = Thread.currentThread().getId();
            for (long id : P3ExternalCommit.this.threads.getAllThreadIds()) {
                if (id != self && !this.before.contains(id)) {
                    long b = P3ExternalCommit.this.threads.getThreadAllocatedBytes(id);
                    if (b > 0) {
                        this.newThreadBytes += b;
                    }
                }
            }
            this.probeBytes += P3ExternalCommit.this.threads.getCurrentThreadAllocatedBytes() - own;
        }

        Op finish(long latencyNanos) {
            long caller = P3ExternalCommit.this.threads.getCurrentThreadAllocatedBytes() - this.callerBefore;
            long started = P3ExternalCommit.this.threads.getTotalStartedThreadCount() - this.startedBefore;
            return new Op(latencyNanos, caller - this.probeBytes + this.newThreadBytes, started);
        }
    }
}
