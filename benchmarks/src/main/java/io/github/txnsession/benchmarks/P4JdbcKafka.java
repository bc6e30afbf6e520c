package io.github.txnsession.benchmarks;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

import javax.sql.DataSource;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import io.github.txnsession.spring.CommitPhase;
import io.github.txnsession.spring.CommitPhaseListener;
import io.github.txnsession.spring.SessionCommitPoint;
import io.github.txnsession.spring.SessionEnlistment;
import io.github.txnsession.spring.SessionProducerFactory;
import io.github.txnsession.spring.TransactionSessionPool;
import io.github.txnsession.spring.jdbc.DecisionLog;
import io.github.txnsession.spring.jdbc.JdbcKafkaTransactionManager;
import io.github.txnsession.spring.jdbc.JdbcTwoPhaseDecision;
import io.github.txnsession.spring.jdbc.TwoPhaseRecovery;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;

import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.kafka.core.DefaultKafkaProducerFactory;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * P4, JDBC + Kafka: one row and one event per transaction, single thread, timed runs, on H2 (in memory) and on a
 * real PostgreSQL (zonky embedded binaries). Both competitors use the same HikariCP pool and the same producer
 * settings. Measures transactions/s and transaction latency (p50/p99).
 * <ul>
 * <li>a) spring-kafka best-effort 1PC: {@code DataSourceTransactionManager}, and a {@code KafkaTemplate} over a
 * transactional producer factory, whose Kafka transaction is synchronized with the JDBC one (committed right after
 * it; a crash in between loses the event);</li>
 * <li>b) our {@code JdbcKafkaTransactionManager}: two-phase commit with a decision log (prepare Kafka, write the
 * decision with the row, commit JDBC, commit Kafka, clear the decision);</li>
 * <li>c) what the starter does by default now: the application's own {@code JdbcTransactionManager}, with the Kafka
 * session enlisted in its transaction ({@code SessionEnlistment} + {@code JdbcTwoPhaseDecision}), the same two-phase
 * protocol.</li>
 * <li>d) c with {@code kafka.txn-session.jdbc.complete-in-background}: the commit returns once the database committed
 * the decision; the Kafka commit and the decision row's clearing follow on the pool's background thread.</li>
 * <li>e) c with {@code kafka.txn-session.jdbc.decision-alongside-prepare}: the decision row is written while the Kafka
 * side is prepared (transaction version 2), so the two round trips overlap.</li>
 * <li>f) c with both of those options: the shortest commit the enlisted path offers.</li>
 * </ul>
 * Besides latency, each run reports the CPU time per transaction of the client's threads (H2 included), of the
 * embedded broker, of the JVM's garbage collection and compilation and, on PostgreSQL, of the database's server
 * processes ({@link CpuMeter}): which extra work each path does, and whose (not, by itself, what sets its latency).
 */
final class P4JdbcKafka {

    static final String S = "P4";
    /**
     * Sessions per pool of b to f: the starter's default {@code kafka.txn-session.pool-size} (runs before 2026-12-04
     * used 2, which had d and f reuse an id while its previous commit was still being completed).
     */
    static final int POOL_SIZE = 8;

    private final Bench bench;
    private final String topic = "p4-out";
    /** where the 2PC commit spends its time: b's and c's, filled by commit phase listeners (a few ns per phase) */
    private final PhaseTimes phasesB = new PhaseTimes();
    private final PhaseTimes phasesC = new PhaseTimes();

    /**
     * Sums the time between consecutive commit phases of one transactional id (the clearing may run on another
     * thread than the commit: the phases of one id follow each other all the same).
     */
    static final class PhaseTimes implements CommitPhaseListener {
        private final LongAdder[] sums =
                new LongAdder[CommitPhase.values().length];
        private final Map<String, Long> last = new ConcurrentHashMap<>();
        private final LongAdder commits = new LongAdder();
        volatile boolean on;

        PhaseTimes() {
            for (int i = 0; i < this.sums.length; i++) {
                this.sums[i] = new LongAdder();
            }
        }

        @Override
        public void reached(CommitPhase phase, String transactionalId) {
            long now = System.nanoTime();
            Long before = this.last.put(transactionalId, now);
            if (this.on && phase != CommitPhase.BEFORE_PREPARE && before != null) {
                this.sums[phase.ordinal()].add(now - before);
            }
            if (this.on && phase == CommitPhase.AFTER_KAFKA_COMMIT) {
                this.commits.increment();
            }
        }

        void reset() {
            for (LongAdder sum : this.sums) {
                sum.reset();
            }
            this.last.clear();
            this.commits.reset();
        }

        String describe() {
            StringBuilder b = new StringBuilder();
            for (CommitPhase p : CommitPhase.values()) {
                if (p != CommitPhase.BEFORE_PREPARE) {
                    b.append(b.length() == 0 ? "" : ", ").append("until ").append(p).append(' ')
                        .append(Results.fmt(this.sums[p.ordinal()].sum() / 1e6 / Math.max(1, this.commits.sum())))
                        .append(" ms");
                }
            }
            return b.toString();
        }
    }

    P4JdbcKafka(Bench bench) {
        this.bench = bench;
    }

    interface Competitor extends AutoCloseable {
        void transaction(String id);

        @Override
        void close();
    }

    void run() throws Exception {
        this.bench.results.layout(S, "JDBC + Kafka, one row + one event per transaction (transactions/s; latency ms)",
                "tx_per_s", "latency_p50_ms", "latency_p99_ms", "client_cpu_us_per_tx", "broker_cpu_us_per_tx",
                "vm_cpu_us_per_tx", "db_cpu_us_per_tx");
        this.bench.kafka.createTopic(this.topic, 1);
        try (HikariDataSource h2 = pool("jdbc:h2:mem:p4bench;DB_CLOSE_DELAY=-1", "sa", "")) {
            runOn("H2", h2);
        }
        try (EmbeddedPostgres pg = EmbeddedPostgres.builder().start();
                HikariDataSource ds = pool(pg.getJdbcUrl("postgres", "postgres"), "postgres", "postgres")) {
            runOn("PostgreSQL", ds);
        }
    }

    private static HikariDataSource pool(String url, String user, String password) {
        HikariConfig config = new HikariConfig();
        config.setJdbcUrl(url);
        config.setUsername(user);
        config.setPassword(password);
        config.setMaximumPoolSize(4);
        return new HikariDataSource(config);
    }

    private void runOn(String db, DataSource ds) throws Exception {
        JdbcTemplate jdbc = new JdbcTemplate(ds);
        jdbc.execute("CREATE TABLE IF NOT EXISTS p4_events (id VARCHAR(64) PRIMARY KEY, payload VARCHAR(200))");
        new DecisionLog().createTableIfMissing(ds);
        String caseName = db;
        String[] names = { "spring-kafka best-effort 1PC (DataSourceTransactionManager + synchronized KafkaTemplate)",
                "JdbcKafkaTransactionManager 2PC",
                "JdbcTransactionManager + enlisted session 2PC (the starter's path)",
                "c, Kafka side completed in the background (complete-in-background)",
                "c, decision written while Kafka prepares (decision-alongside-prepare)",
                "c with both options of d and e" };
        List<String> keys = List.of("a", "b", "c", "d", "e", "f");
        Competitor[] all = { bestEffort(db, ds, jdbc), twoPhase(db, ds, jdbc), enlisted(db, ds, jdbc, false, false),
            enlisted(db, ds, jdbc, true, false), enlisted(db, ds, jdbc, false, true),
            enlisted(db, ds, jdbc, true, true) };
        long seq = 0;
        this.phasesB.reset();
        this.phasesC.reset();
        try {
            for (int rep = this.bench.firstRep(); rep < this.bench.profile.repetitions(); rep++) {
                for (int i : Bench.rotated(List.of(0, 1, 2, 3, 4, 5), rep)) {
                    Latencies lat = new Latencies();
                    this.phasesB.on = rep >= 0;
                    this.phasesC.on = rep >= 0;
                    long n = 0;
                    CpuMeter cpu = CpuMeter.start(db.equals("PostgreSQL") ? "postgres" : null);
                    long t0 = System.nanoTime();
                    long deadline = t0 + this.bench.profile.p4Run().toNanos();
                    long now = t0;
                    while (now < deadline) {
                        long s = System.nanoTime();
                        all[i].transaction(db + "-" + keys.get(i) + "-" + seq++);
                        now = System.nanoTime();
                        lat.add(now - s);
                        n++;
                    }
                    cpu.stop();
                    Map<String, Double> m = Map.of("tx_per_s", n / ((now - t0) / 1e9), "latency_p50_ms",
                            lat.percentileMillis(50), "latency_p99_ms", lat.percentileMillis(99),
                            "client_cpu_us_per_tx", cpu.clientMicrosPer(n), "broker_cpu_us_per_tx",
                            cpu.brokerMicrosPer(n), "vm_cpu_us_per_tx", cpu.vmMicrosPer(n), "db_cpu_us_per_tx",
                            cpu.otherMicrosPer(n));
                    if (rep >= 0) {
                        this.bench.results.record(S, caseName, keys.get(i), names[i], m);
                    }
                    Bench.log("P4 %s %s rep %d: %.0f tx/s, p50 %.2f ms", db, keys.get(i), rep, m.get("tx_per_s"),
                            m.get("latency_p50_ms"));
                }
            }
        }
        finally {
            for (Competitor c : all) {
                c.close();
            }
        }
        this.bench.results.note(S, db + ": the 2PC commit's phases, mean per transaction, b: " + this.phasesB.describe()
                + "; c: " + this.phasesC.describe() + " (c's clearing runs after the caller returned).");
        long rows = jdbc.queryForObject("SELECT COUNT(*) FROM p4_events", Long.class);
        Bench.log("P4 %s: %d rows written", db, rows);
        this.bench.results.goal(S, caseName, "latency_p50_ms", "b", "a", 1.3, false);
        this.bench.results.goal(S, caseName, "latency_p99_ms", "b", "a", 1.3, false);
        this.bench.results.goal(S, caseName, "latency_p50_ms", "c", "a", 1.3, false);
        this.bench.results.goal(S, caseName, "latency_p99_ms", "c", "a", 1.3, false);
        this.bench.results.goal(S, caseName, "latency_p50_ms", "d", "a", 1.3, false);
        this.bench.results.goal(S, caseName, "latency_p99_ms", "d", "a", 1.3, false);
        this.bench.results.goal(S, caseName, "latency_p50_ms", "e", "a", 1.3, false);
        this.bench.results.goal(S, caseName, "latency_p99_ms", "e", "a", 1.3, false);
        this.bench.results.goal(S, caseName, "latency_p50_ms", "f", "a", 1.3, false);
        this.bench.results.goal(S, caseName, "latency_p99_ms", "f", "a", 1.3, false);
    }

    private Competitor bestEffort(String db, DataSource ds, JdbcTemplate jdbc) {
        DefaultKafkaProducerFactory<String, String> pf = new DefaultKafkaProducerFactory<>(
                this.bench.producerConfigs());
        pf.setTransactionIdPrefix("p4-be-" + db + "-");
        KafkaTemplate<String, String> kafka = new KafkaTemplate<>(pf);
        TransactionTemplate tx = new TransactionTemplate(new DataSourceTransactionManager(ds));
        return new Competitor() {
            @Override
            public void transaction(String id) {
                tx.executeWithoutResult(status -> {
                    jdbc.update("INSERT INTO p4_events (id, payload) VALUES (?, ?)", id, Bench.VALUE);
                    kafka.send(P4JdbcKafka.this.topic, id, Bench.VALUE);
                });
            }

            @Override
            public void close() {
                pf.destroy();
            }
        };
    }

    private Competitor twoPhase(String db, DataSource ds, JdbcTemplate jdbc) {
        Map<String, Object> configs = this.bench.producerConfigs();
        String prefix = "p4-2pc-" + db + "-";
        TransactionSessionPool pool = new TransactionSessionPool(prefix, POOL_SIZE, Duration.ofSeconds(30), configs,
                List.of());
        SessionProducerFactory<Object, Object> pf = new SessionProducerFactory<>(pool,
                P1ProducerTransactions.stringSerializer(), P1ProducerTransactions.stringSerializer(), configs);
        DecisionLog log = new DecisionLog();
        TwoPhaseRecovery recovery = new TwoPhaseRecovery(ds, log, prefix, 2, configs, null);
        JdbcKafkaTransactionManager tm = new JdbcKafkaTransactionManager(pool, pf, ds, log, recovery);
        tm.setCommitPhaseListeners(List.of(this.phasesB));
        KafkaTemplate<Object, Object> kafka = new KafkaTemplate<>(pf);
        TransactionTemplate tx = new TransactionTemplate(tm);
        return new Competitor() {
            @Override
            public void transaction(String id) {
                tx.executeWithoutResult(status -> {
                    jdbc.update("INSERT INTO p4_events (id, payload) VALUES (?, ?)", id, Bench.VALUE);
                    kafka.send(P4JdbcKafka.this.topic, id, Bench.VALUE);
                });
            }

            @Override
            public void close() {
                pf.destroy();
                pool.close();
            }
        };
    }

    private Competitor enlisted(String db, DataSource ds, JdbcTemplate jdbc, boolean completeInBackground,
            boolean decisionAlongsidePrepare) {
        Map<String, Object> configs = this.bench.producerConfigs();
        String prefix = "p4-enlisted-" + (completeInBackground ? "bg-" : "") + (decisionAlongsidePrepare ? "al-" : "")
                + db + "-";
        TransactionSessionPool pool = new TransactionSessionPool(prefix, POOL_SIZE, Duration.ofSeconds(30), configs,
                List.of());
        SessionProducerFactory<Object, Object> pf = new SessionProducerFactory<>(pool,
                P1ProducerTransactions.stringSerializer(), P1ProducerTransactions.stringSerializer(), configs);
        DecisionLog log = new DecisionLog();
        TwoPhaseRecovery recovery = new TwoPhaseRecovery(ds, log, pool, null);
        SessionEnlistment enlistment = new SessionEnlistment(pool, new JdbcTwoPhaseDecision(ds, log, recovery));
        enlistment.setCompleteInBackground(completeInBackground);
        enlistment.setDecisionAlongsidePrepare(decisionAlongsidePrepare);
        if (!completeInBackground && !decisionAlongsidePrepare) {
            enlistment.setCommitPhaseListeners(List.of(this.phasesC));
        }
        pf.setEnlistment(enlistment);
        KafkaTemplate<Object, Object> kafka = new KafkaTemplate<>(pf);
        JdbcTransactionManager manager = new JdbcTransactionManager(ds);
        manager.addListener(SessionCommitPoint.LISTENER); // as the starter does
        TransactionTemplate tx = new TransactionTemplate(manager);
        return new Competitor() {
            @Override
            public void transaction(String id) {
                tx.executeWithoutResult(status -> {
                    jdbc.update("INSERT INTO p4_events (id, payload) VALUES (?, ?)", id, Bench.VALUE);
                    kafka.send(P4JdbcKafka.this.topic, id, Bench.VALUE);
                });
            }

            @Override
            public void close() {
                pf.destroy();
                pool.close();
            }
        };
    }
}
