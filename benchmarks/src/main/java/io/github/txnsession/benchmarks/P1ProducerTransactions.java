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
 * P1, producer transactions: 1- and 10-record transactions on 1 and 4 threads, timed runs. Measures transactions/s
 * and the latency of the commit call (p50/p99).
 * <ul>
 * <li>a) raw {@code KafkaProducer} loop, one producer per thread;</li>
 * <li>b) spring-kafka {@code KafkaTransactionManager} + {@code KafkaTemplate}, transaction begun and committed by the
 * manager (what {@code @Transactional} / {@code TransactionTemplate} do);</li>
 * <li>c) this starter's wiring: {@code SessionTransactionManager} + {@code KafkaTemplate} over
 * {@code SessionProducerFactory} and a pool of 4 sessions;</li>
 * <li>d) core {@code TransactionSession} + {@code SessionProducer}, one session per thread.</li>
 * </ul>
 */
final class P1ProducerTransactions {

    static final String S = "P1";
    private static final int MAX_THREADS = 4;

    /** One transaction of {@code records} records on worker {@code worker}; adds the commit latency. */
    interface Competitor extends AutoCloseable {
        void transaction(int worker, int records, long seq, Latencies commit);

        @Override
        void close();
    }

    private final Bench bench;
    private final String topic = "p1-out";

    P1ProducerTransactions(Bench bench) {
        this.bench = bench;
    }

    void run() throws Exception {
        Results r = this.bench.results;
        r.layout(S, "producer transactions (transactions/s; commit latency ms)", "tx_per_s", "commit_p50_ms",
                "commit_p99_ms");
        this.bench.kafka.createTopic(this.topic, 3);
        List<String> keys = List.of("a", "b", "c", "d");
        List<Competitor> all = new ArrayList<>();
        try {
            all.add(raw());
            all.add(springKafka());
            all.add(starter());
            all.add(core());
            String[] names = { "raw KafkaProducer", "spring-kafka KafkaTransactionManager + KafkaTemplate",
                    "starter SessionTransactionManager + KafkaTemplate", "core TransactionSession + SessionProducer" };
            // the broker's and the clients' code is cold at first: run every competitor until it is compiled
            long warm = this.bench.profile.brokerWarmup().toNanos() / 8;
            for (int round = 0; round < 2; round++) {
                for (int i : Bench.rotated(List.of(0, 1, 2, 3), round)) {
                    try {
                        timedRun(all.get(i), round == 0 ? 1 : 10, MAX_THREADS, Duration.ofNanos(warm));
                    }
                    catch (Exception ex) {
                        Bench.log("P1 warm-up of %s FAILED: %s", keys.get(i), ex);
                        ex.printStackTrace(System.out);
                        r.note(S, "**warm-up of " + keys.get(i) + ") failed:** " + ex.getMessage() + " "
                                + java.util.Arrays.stream(ex.getSuppressed()).map(Throwable::getMessage).distinct()
                                    .toList() + ".");
                    }
                }
            }
            Bench.log("P1 warm-up done (%s)", this.bench.profile.brokerWarmup());
            for (int records : new int[] { 1, 10 }) {
                for (int threads : new int[] { 1, MAX_THREADS }) {
                    String caseName = records + " rec/tx, " + threads + " thr";
                    for (int rep = this.bench.firstRep(); rep < this.bench.profile.repetitions(); rep++) {
                        for (int i : Bench.rotated(List.of(0, 1, 2, 3), rep)) {
                            Map<String, Double> m;
                            try {
                                m = timedRun(all.get(i), records, threads, this.bench.profile.p1Run());
                            }
                            catch (Exception ex) {
                                // reported, not hidden: the run counts as failed and the table says so
                                Bench.log("P1 %s %s rep %d FAILED: %s", caseName, keys.get(i), rep, ex);
                                ex.printStackTrace(System.out);
                                r.note(S, "**" + caseName + ", " + keys.get(i) + ") rep " + rep + " failed:** "
                                        + ex.getMessage() + " " + java.util.Arrays.stream(ex.getSuppressed())
                                            .map(Throwable::getMessage).distinct().toList() + ".");
                                continue;
                            }
                            if (rep >= 0) {
                                r.record(S, caseName, keys.get(i), names[i], m);
                            }
                            Bench.log("P1 %s %s rep %d: %.0f tx/s, commit p50 %.2f ms", caseName, keys.get(i), rep,
                                    m.get("tx_per_s"), m.get("commit_p50_ms"));
                        }
                    }
                    for (String ours : List.of("c", "d")) {
                        r.goal(S, caseName, "tx_per_s", ours, "b", 1.05, true);
                        r.goal(S, caseName, "tx_per_s", ours, "a", 0.95, true);
                    }
                }
            }
        }
        finally {
            all.forEach(Competitor::close);
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
                        c.transaction(worker, records, n, lat[worker]);
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

    // ------------------------------------------------------------------ a) raw

    private Competitor raw() {
        List<KafkaProducer<String, String>> producers = new ArrayList<>();
        for (int t = 0; t < MAX_THREADS; t++) {
            Map<String, Object> c = this.bench.producerConfigs();
            c.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "p1-raw-" + t);
            KafkaProducer<String, String> p = new KafkaProducer<>(c);
            p.initTransactions();
            producers.add(p);
        }
        return new Competitor() {
            @Override
            public void transaction(int worker, int records, long seq, Latencies commit) {
                KafkaProducer<String, String> p = producers.get(worker);
                p.beginTransaction();
                for (int i = 0; i < records; i++) {
                    p.send(record(seq, i));
                }
                long t0 = System.nanoTime();
                p.commitTransaction();
                commit.add(System.nanoTime() - t0);
            }

            @Override
            public void close() {
                producers.forEach(KafkaProducer::close);
            }
        };
    }

    // ------------------------------------------------------------------ b) spring-kafka

    private Competitor springKafka() {
        DefaultKafkaProducerFactory<String, String> pf = new DefaultKafkaProducerFactory<>(
                this.bench.producerConfigs());
        pf.setTransactionIdPrefix("p1-spring-");
        KafkaTemplate<String, String> template = new KafkaTemplate<>(pf);
        KafkaTransactionManager<String, String> tm = new KafkaTransactionManager<>(pf);
        return new SpringCompetitor(tm, (seq, i) -> template.send(record(seq, i)), pf::destroy);
    }

    // ------------------------------------------------------------------ c) starter wiring

    private Competitor starter() {
        Map<String, Object> configs = this.bench.producerConfigs();
        TransactionSessionPool pool = new TransactionSessionPool("p1-starter-", MAX_THREADS, Duration.ofSeconds(30),
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
        public void transaction(int worker, int records, long seq, Latencies commit) {
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

    private Competitor core() {
        List<TransactionSession> sessions = new ArrayList<>();
        List<SessionProducer<String, String>> producers = new ArrayList<>();
        for (int t = 0; t < MAX_THREADS; t++) {
            Map<String, Object> c = this.bench.producerConfigs();
            c.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "p1-core-" + t);
            TransactionSession s = TransactionSession.open(c);
            s.initialize();
            sessions.add(s);
            producers.add(new SessionProducer<>(s, new StringSerializer(), new StringSerializer()));
        }
        return new Competitor() {
            @Override
            public void transaction(int worker, int records, long seq, Latencies commit) {
                TransactionSession s = sessions.get(worker);
                SessionProducer<String, String> p = producers.get(worker);
                s.beginTransaction();
                for (int i = 0; i < records; i++) {
                    p.send(record(seq, i));
                }
                long t0 = System.nanoTime();
                s.commitTransaction();
                commit.add(System.nanoTime() - t0);
            }

            @Override
            public void close() {
                sessions.forEach(TransactionSession::close);
            }
        };
    }
}
