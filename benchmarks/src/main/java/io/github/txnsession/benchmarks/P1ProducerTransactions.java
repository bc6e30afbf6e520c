package io.github.txnsession.benchmarks;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

import io.github.txnsession.kafka.SessionProducer;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.TransactionSessionConfig;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.spring.SessionProducerFactory;
import io.github.txnsession.spring.SessionTransactionManager;
import io.github.txnsession.spring.TransactionSessionPool;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.jspecify.annotations.Nullable;

import org.springframework.kafka.core.DefaultKafkaProducerFactory;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.transaction.KafkaTransactionManager;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.TransactionStatus;
import org.springframework.transaction.support.DefaultTransactionDefinition;

/**
 * P1, producer transactions of 1 and 10 records, timed runs. Measures transactions/s and the latency of the commit
 * call (p50/p99).
 * <ul>
 * <li>a) raw {@code KafkaProducer} loop;</li>
 * <li>b) spring-kafka {@code KafkaTransactionManager} + {@code KafkaTemplate}, transaction begun and committed by the
 * manager (what {@code @Transactional} / {@code TransactionTemplate} do);</li>
 * <li>c) this starter's wiring: {@code SessionTransactionManager} + {@code KafkaTemplate} over
 * {@code SessionProducerFactory} and a pool of 4 sessions;</li>
 * <li>d) core {@code TransactionSession} + {@code SessionProducer};</li>
 * <li>e) raw {@code KafkaProducer} rotating over 4 transactional ids on one thread (the reference of what one id
 * could reach at best);</li>
 * <li>f) d) with {@code session.await-transaction-end=false} (c and d run with the default, {@code auto}): what the
 * session's wait for the previous end brings.</li>
 * </ul>
 * One transactional id pays what several ids hide: a transaction that starts while the coordinator still writes the
 * previous one's markers waits for the broker's back-off. So the one-thread cases say which ids each competitor
 * uses. <b>one id, fresh</b>: every competitor is new and only ever used by that one thread, so each uses a single
 * transactional id (spring-kafka's producer cache and the starter's pool hold one producer / session). <b>4-id
 * rotation, warmed</b>: the same competitors after a 4-thread run, as a long-running application has them:
 * spring-kafka's cache and the starter's pool rotate over 4; a) and d) rotate over 4 by hand. The <b>tuned
 * broker</b> case repeats "one id, fresh" on a second broker with {@code add.partitions.to.txn.retry.backoff.ms=1},
 * the <b>transaction version 1</b> case on a third broker at that version (the producer adds partitions itself).
 */
final class P1ProducerTransactions {

    static final String S = "P1";
    private static final int MAX_THREADS = 4;
    private static final List<String> KEYS = List.of("a", "b", "c", "d", "e", "f");
    private static final String[] NAMES = { "raw KafkaProducer", "spring-kafka KafkaTransactionManager + KafkaTemplate",
            "starter SessionTransactionManager + KafkaTemplate", "core TransactionSession + SessionProducer",
            "raw KafkaProducer, 4 ids in rotation (reference)",
            "core TransactionSession + SessionProducer, session.await-transaction-end=false" };

    /**
     * One transaction of {@code records} records on worker {@code worker} of {@code threads}; adds the commit
     * latency.
     */
    interface Competitor extends AutoCloseable {
        void transaction(int worker, int threads, int records, long seq, Latencies commit);

        @Override
        void close();
    }

    private final Bench bench;
    private final String topic = "p1-out";
    private int instances;

    P1ProducerTransactions(Bench bench) {
        this.bench = bench;
    }

    void run() throws Exception {
        Results r = this.bench.results;
        r.layout(S, "producer transactions (transactions/s; commit latency ms)", "tx_per_s", "commit_p50_ms",
                "commit_p99_ms");
        this.bench.kafka.createTopic(this.topic, 3);
        // the broker's and the clients' code is cold at first: run every competitor until it is compiled
        try (Competitors warm = competitors(this.bench, false)) {
            long slice = this.bench.profile.brokerWarmup().toNanos() / 8;
            for (int round = 0; round < 2; round++) {
                for (int i : Bench.rotated(List.of(0, 1, 2, 3), round)) {
                    warmUp(warm.get(i), KEYS.get(i), round == 0 ? 1 : 10, MAX_THREADS, Duration.ofNanos(slice));
                }
            }
        }
        Bench.log("P1 warm-up done (%s)", this.bench.profile.brokerWarmup());

        String oneId = "1 rec/tx, 1 thr, one id, fresh";
        try (Competitors fresh = competitors(this.bench, true)) {
            measure(fresh, oneId, 1, 1, List.of(0, 1, 2, 3, 4, 5));
        }
        r.goal(S, oneId, "tx_per_s", "d", "a", 3.0, true);
        r.goal(S, oneId, "tx_per_s", "d", "e", 0.7, true);
        r.goal(S, oneId, "tx_per_s", "c", "b", 1.05, true);
        r.goal(S, oneId, "tx_per_s", "d", "f", 1.0, true);

        try (Competitors warmed = competitors(this.bench, false)) {
            for (int i : List.of(0, 1, 2, 3, 5)) {
                warmUp(warmed.get(i), KEYS.get(i), 1, MAX_THREADS, Duration.ofSeconds(1)); // caches and pools of 4
            }
            String rotation = "1 rec/tx, 1 thr, 4-id rotation, warmed";
            measure(warmed, rotation, 1, 1, List.of(0, 1, 2, 3, 5));
            r.goal(S, rotation, "tx_per_s", "c", "b", 1.05, true);
            r.goal(S, rotation, "tx_per_s", "d", "f", 1.0, true);
            for (int records : new int[] { 1, 10 }) {
                String caseName = records + " rec/tx, " + MAX_THREADS + " thr";
                measure(warmed, caseName, records, MAX_THREADS, List.of(0, 1, 2, 3));
                for (String ours : List.of("c", "d")) {
                    r.goal(S, caseName, "tx_per_s", ours, "b", 1.05, true);
                    r.goal(S, caseName, "tx_per_s", ours, "a", 0.95, true);
                }
            }
        }

        String tuned = "1 rec/tx, 1 thr, one id, fresh, tuned broker";
        oneIdOn(EmbeddedKafkaCluster.builder().brokerProperty("add.partitions.to.txn.retry.backoff.ms", 1), tuned);
        r.goal(S, tuned, "tx_per_s", "d", "a", 1.0, true);
        r.goal(S, tuned, "tx_per_s", "c", "b", 1.05, true);

        String version1 = "1 rec/tx, 1 thr, one id, fresh, transaction version 1";
        oneIdOn(EmbeddedKafkaCluster.builder().feature("transaction.version", 1), version1);
        r.goal(S, version1, "tx_per_s", "d", "a", 1.0, true);
        r.goal(S, version1, "tx_per_s", "c", "b", 1.05, true);
        r.note(S, "One-thread cases: \"one id, fresh\" competitors are new and used by one thread only, so each uses "
                + "one transactional id; \"4-id rotation, warmed\" ones ran on 4 threads first, so spring-kafka's "
                + "producer cache and the starter's pool rotate over 4 ids, and a) and d) rotate by hand. The tuned "
                + "broker case runs on a second broker with add.partitions.to.txn.retry.backoff.ms=1 (a static "
                + "broker setting; default 20 ms); the transaction version 1 case on a third broker. c) and d) run "
                + "with session.await-transaction-end=auto (the default), f) with false.");
    }

    /** The "one id, fresh" case on a broker of its own, started from {@code broker} and stopped after. */
    private void oneIdOn(EmbeddedKafkaCluster.Builder broker, String caseName) throws Exception {
        try (EmbeddedKafkaCluster other = broker.start()) {
            Bench otherBench = new Bench(other, this.bench.profile, this.bench.results);
            other.createTopic(this.topic, 3);
            try (Competitors warm = competitors(otherBench, true)) {
                for (int i = 0; i < KEYS.size(); i++) {
                    warmUp(warm.get(i), KEYS.get(i), 1, 1,
                            Duration.ofNanos(this.bench.profile.brokerWarmup().toNanos() / 16));
                }
            }
            try (Competitors fresh = competitors(otherBench, true)) {
                measure(fresh, caseName, 1, 1, List.of(0, 1, 2, 3, 4, 5));
            }
        }
    }

    private void warmUp(Competitor c, String key, int records, int threads, Duration length) {
        try {
            timedRun(c, records, threads, length);
        }
        catch (Exception ex) {
            Bench.log("P1 warm-up of %s FAILED: %s", key, ex);
            ex.printStackTrace(System.out);
            this.bench.results.note(S, "**warm-up of " + key + ") failed:** " + ex.getMessage() + " "
                    + java.util.Arrays.stream(ex.getSuppressed()).map(Throwable::getMessage).distinct().toList()
                    + ".");
        }
    }

    private void measure(Competitors all, String caseName, int records, int threads, List<Integer> which) {
        Results r = this.bench.results;
        for (int rep = this.bench.firstRep(); rep < this.bench.profile.repetitions(); rep++) {
            for (int i : Bench.rotated(which, rep)) {
                Map<String, Double> m;
                try {
                    m = timedRun(all.get(i), records, threads, this.bench.profile.p1Run());
                }
                catch (Exception ex) {
                    // reported, not hidden: the run counts as failed and the table says so
                    Bench.log("P1 %s %s rep %d FAILED: %s", caseName, KEYS.get(i), rep, ex);
                    ex.printStackTrace(System.out);
                    r.note(S, "**" + caseName + ", " + KEYS.get(i) + ") rep " + rep + " failed:** " + ex.getMessage()
                            + " " + java.util.Arrays.stream(ex.getSuppressed()).map(Throwable::getMessage).distinct()
                                .toList() + ".");
                    continue;
                }
                if (rep >= 0) {
                    r.record(S, caseName, KEYS.get(i), NAMES[i], m);
                }
                Bench.log("P1 %s %s rep %d: %.0f tx/s, commit p50 %.2f ms", caseName, KEYS.get(i), rep,
                        m.get("tx_per_s"), m.get("commit_p50_ms"));
            }
        }
    }

    /** The six competitors on {@code bench}'s broker, with transactional ids of their own. */
    private Competitors competitors(Bench on, boolean oneId) {
        String tag = "p1-" + (this.instances++) + "-";
        Competitors all = new Competitors();
        try {
            all.add(raw(on, tag + "raw-", !oneId));
            all.add(springKafka(on, tag + "spring-"));
            all.add(starter(on, tag + "starter-"));
            all.add(core(on, tag + "core-", !oneId, null));
            all.add(raw(on, tag + "rotation-", true));
            all.add(core(on, tag + "core-nowait-", !oneId, false));
        }
        catch (RuntimeException ex) {
            all.close();
            throw ex;
        }
        return all;
    }

    /** The competitors of one case, closed together. */
    private static final class Competitors implements AutoCloseable {
        private final List<Competitor> list = new ArrayList<>();

        void add(Competitor c) {
            this.list.add(c);
        }

        Competitor get(int i) {
            return this.list.get(i);
        }

        @Override
        public void close() {
            this.list.forEach(Competitor::close);
        }
    }

    private Map<String, Double> timedRun(Competitor c, int records, int threads, Duration length) throws Exception {
        CyclicBarrier start = new CyclicBarrier(threads + 1);
        Latencies[] lat = new Latencies[threads];
        long[] counts = new long[threads];
        AtomicReference<@Nullable Throwable> failure = new AtomicReference<>();
        long[] window = new long[2];
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int worker = t;
            lat[t] = new Latencies();
            Thread th = new Thread(() -> {
                try {
                    start.await();
                    long deadline = window[0] + length.toNanos();
                    long n = 0;
                    while (System.nanoTime() < deadline) {
                        c.transaction(worker, threads, records, n, lat[worker]);
                        n++;
                    }
                    counts[worker] = n;
                }
                catch (Throwable ex) {
                    if (!failure.compareAndSet(null, ex)) {
                        failure.get().addSuppressed(ex);
                    }
                }
            }, "p1-worker-" + t);
            workers.add(th);
            th.start();
        }
        window[0] = System.nanoTime();
        start.await();
        for (Thread th : workers) {
            th.join();
        }
        window[1] = System.nanoTime();
        if (failure.get() != null) {
            throw new IllegalStateException("P1 run failed", failure.get());
        }
        long total = 0;
        Latencies all = new Latencies();
        for (int t = 0; t < threads; t++) {
            total += counts[t];
            all.addAll(lat[t]);
        }
        double seconds = (window[1] - window[0]) / 1e9;
        return Map.of("tx_per_s", total / seconds, "commit_p50_ms", all.percentileMillis(50), "commit_p99_ms",
                all.percentileMillis(99));
    }

    private ProducerRecord<String, String> record(long seq, int i) {
        return new ProducerRecord<>(this.topic, "k" + ((seq * 10 + i) % 64), Bench.VALUE);
    }

    /**
     * On one thread with {@code rotate}, transaction {@code seq} uses producer {@code seq % 4}; otherwise worker
     * {@code w} uses producer {@code w}.
     */
    private static int pick(int worker, int threads, long seq, boolean rotate) {
        return rotate && threads == 1 ? (int) (seq % MAX_THREADS) : worker;
    }

    // ------------------------------------------------------------------ a) and e) raw

    private Competitor raw(Bench on, String prefix, boolean rotate) {
        List<KafkaProducer<String, String>> producers = new ArrayList<>();
        return new Competitor() {
            @Override
            public void transaction(int worker, int threads, int records, long seq, Latencies commit) {
                KafkaProducer<String, String> p = producer(pick(worker, threads, seq, rotate));
                p.beginTransaction();
                for (int i = 0; i < records; i++) {
                    p.send(record(seq, i));
                }
                long t0 = System.nanoTime();
                p.commitTransaction();
                commit.add(System.nanoTime() - t0);
            }

            /** Created on first use, like the caches of b) and c): a one-thread run uses one id. */
            private synchronized KafkaProducer<String, String> producer(int index) {
                while (producers.size() <= index) {
                    Map<String, Object> c = on.producerConfigs();
                    c.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, prefix + producers.size());
                    KafkaProducer<String, String> p = new KafkaProducer<>(c);
                    p.initTransactions();
                    producers.add(p);
                }
                return producers.get(index);
            }

            @Override
            public void close() {
                producers.forEach(KafkaProducer::close);
            }
        };
    }

    // ------------------------------------------------------------------ b) spring-kafka

    private Competitor springKafka(Bench on, String prefix) {
        DefaultKafkaProducerFactory<String, String> pf = new DefaultKafkaProducerFactory<>(on.producerConfigs());
        pf.setTransactionIdPrefix(prefix);
        KafkaTemplate<String, String> template = new KafkaTemplate<>(pf);
        KafkaTransactionManager<String, String> tm = new KafkaTransactionManager<>(pf);
        return new SpringCompetitor(tm, (seq, i) -> template.send(record(seq, i)), pf::destroy);
    }

    // ------------------------------------------------------------------ c) starter wiring

    private Competitor starter(Bench on, String prefix) {
        Map<String, Object> configs = on.producerConfigs();
        TransactionSessionPool pool = new TransactionSessionPool(prefix, MAX_THREADS, Duration.ofSeconds(30),
                configs, List.of());
        SessionProducerFactory<Object, Object> pf = new SessionProducerFactory<>(pool, stringSerializer(),
                stringSerializer(), configs);
        SessionTransactionManager tm = new SessionTransactionManager(pool, pf);
        KafkaTemplate<Object, Object> template = new KafkaTemplate<>(pf);
        return new SpringCompetitor(tm, (seq, i) -> {
            ProducerRecord<String, String> rec = record(seq, i);
            template.send(rec.topic(), rec.key(), rec.value());
        }, () -> {
            pf.destroy();
            pool.close();
        });
    }

    @SuppressWarnings({ "unchecked", "rawtypes" })
    static Supplier<Serializer<Object>> stringSerializer() {
        return () -> (Serializer) new StringSerializer();
    }

    /** b) and c): the same code against either transaction manager, as an application would write it. */
    private static final class SpringCompetitor implements Competitor {
        interface Send {
            void send(long seq, int i);
        }

        private final PlatformTransactionManager tm;
        private final Send send;
        private final Runnable closer;
        private final TransactionDefinition definition = new DefaultTransactionDefinition();

        SpringCompetitor(PlatformTransactionManager tm, Send send, Runnable closer) {
            this.tm = tm;
            this.send = send;
            this.closer = closer;
        }

        @Override
        public void transaction(int worker, int threads, int records, long seq, Latencies commit) {
            TransactionStatus status = this.tm.getTransaction(this.definition);
            try {
                for (int i = 0; i < records; i++) {
                    this.send.send(seq, i);
                }
            }
            catch (RuntimeException ex) {
                this.tm.rollback(status);
                throw ex;
            }
            long t0 = System.nanoTime();
            this.tm.commit(status);
            commit.add(System.nanoTime() - t0);
        }

        @Override
        public void close() {
            this.closer.run();
        }
    }

    // ------------------------------------------------------------------ d) core

    private Competitor core(Bench on, String prefix, boolean rotate, @Nullable Boolean awaitEnd) {
        List<TransactionSession> sessions = new ArrayList<>();
        List<SessionProducer<String, String>> producers = new ArrayList<>();
        return new Competitor() {
            @Override
            public void transaction(int worker, int threads, int records, long seq, Latencies commit) {
                int index = pick(worker, threads, seq, rotate);
                TransactionSession s = session(index);
                SessionProducer<String, String> p = producers.get(index);
                s.beginTransaction();
                for (int i = 0; i < records; i++) {
                    p.send(record(seq, i));
                }
                long t0 = System.nanoTime();
                s.commitTransaction();
                commit.add(System.nanoTime() - t0);
            }

            private synchronized TransactionSession session(int index) {
                while (sessions.size() <= index) {
                    Map<String, Object> c = on.producerConfigs();
                    c.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, prefix + sessions.size());
                    if (awaitEnd != null) {
                        c.put(TransactionSessionConfig.AWAIT_TRANSACTION_END, awaitEnd);
                    }
                    TransactionSession s = TransactionSession.open(c);
                    s.initialize();
                    sessions.add(s);
                    producers.add(new SessionProducer<>(s, new StringSerializer(), new StringSerializer()));
                }
                return sessions.get(index);
            }

            @Override
            public void close() {
                sessions.forEach(TransactionSession::close);
            }
        };
    }
}
