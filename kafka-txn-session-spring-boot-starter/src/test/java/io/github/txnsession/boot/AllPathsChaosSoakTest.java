package io.github.txnsession.boot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import io.github.txnsession.kafka.ShareOutcomeLedger;
import io.github.txnsession.kafka.TransactionalConsumer;
import io.github.txnsession.kafka.test.ChildJvm;
import io.github.txnsession.kafka.test.HangingTransactions;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.SessionShareListenerContainer;
import io.github.txnsession.spring.SessionTransactionManager;
import io.github.txnsession.spring.TransactionalConsumerFactory;
import io.github.txnsession.spring.jdbc.DecisionLog;
import io.github.txnsession.spring.jdbc.RecoveryReport;
import io.github.txnsession.spring.jdbc.TwoPhaseRecovery;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.SmartLifecycle;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.Environment;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * Chaos soak of the starter's paths all at once (reliability issue, "chaos soak profile"), on one 3-broker cluster
 * (replication 3, {@code min.insync.replicas=2}, no controlled shutdown) under a steady input:
 * <ul>
 * <li><b>listener</b>: a {@code @KafkaListener} consume-transform-produce, Kafka only;</li>
 * <li><b>two-phase</b>: the same listener also inserting a row per record into PostgreSQL, committed by two-phase
 * commit with Boot's JDBC transaction manager;</li>
 * <li><b>loop</b>: a programmatic loop over the core's bound {@code TransactionalConsumer}, one Spring transaction per
 * poll;</li>
 * <li><b>queue</b>: a share group worker ({@code SessionShareListenerContainer}, two threads) with an outcome
 * ledger.</li>
 * </ul>
 * The three applications (listener, two-phase, loop + queue) each run in a JVM of their own. Every 1 to 3 s a fault,
 * half of them broker kills: a broker killed (no controlled shutdown; coordinators included, the broker is chosen at
 * random) and restarted after 0.5 to 2 s; or one application, chosen at random, either closed and started again with
 * the same transactional ids (a clean client bounce), or killed ({@code kill -9}, anywhere in a transaction or a
 * two-phase commit) and started again, or frozen ({@code SIGSTOP}) for 1 to 12 s, sometimes past its consumers'
 * session timeout (the group moves on; the frozen one wakes up as a zombie). The first five faults are chosen: a
 * broker kill, the two-phase and the loop and queue applications killed, the listener frozen for 11 s, the two-phase
 * application closed and started again. After each application fault the soak waits until that application's paths
 * show output again.
 * The applications report what their two-phase recovery found lost or in doubt at each start and clean stop.
 * <p>Checked all along by a concurrent {@code read_committed} reader: the ordered paths' output is, per partition, a
 * prefix of the input in order (nothing duplicated, nothing skipped), the queue's output has no key twice, and no path
 * with input left goes 60 s without output. At the end: every input exactly once on every path, one row per input of
 * the two-phase path and no decision row left, nothing lost or in doubt, no hanging transaction.
 * <p>Duration: {@code txnsession.soak.seconds} (default 12; {@code -Pchaos-full}: 600). Replay:
 * {@code -Dtxnsession.soak.seed=N}.
 */
class AllPathsChaosSoakTest {

    private static final Logger log = LoggerFactory.getLogger(AllPathsChaosSoakTest.class);

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(b -> b.brokers(3)
        .brokerProperty("min.insync.replicas", 2)
        .brokerProperty("controlled.shutdown.enable", false));

    static final int PARTITIONS = 4;
    static final Duration MAX_STALL = Duration.ofSeconds(60);

    /** One path: where its input goes, where its output comes out, and the application carrying it. */
    static final class Path {
        final String name;
        final String in;
        final String out;
        final boolean ordered;
        /** ordered paths: records sent per partition; the queue: records sent in all */
        final AtomicLong[] sent = new AtomicLong[PARTITIONS];
        /** what the concurrent reader saw, per partition (ordered) or per key (queue) */
        final Map<Integer, List<String>> seen = new ConcurrentHashMap<>();
        final Map<String, Integer> seenKeys = new ConcurrentHashMap<>();
        volatile long lastOutputNanos = System.nanoTime();
        volatile long longestGapNanos;

        Path(String name, String in, String out, boolean ordered) {
            this.name = name;
            this.in = in;
            this.out = out;
            this.ordered = ordered;
            for (int p = 0; p < PARTITIONS; p++) {
                this.sent[p] = new AtomicLong();
            }
        }

        long sentTotal() {
            long n = 0;
            for (AtomicLong s : this.sent) {
                n += s.get();
            }
            return n;
        }

        long seenTotal() {
            return this.ordered ? this.seen.values().stream().mapToLong(List::size).sum() : this.seenKeys.size();
        }
    }

    /**
     * An application of the soak, run in a JVM of its own ({@link SoakApplicationMain}) so that it can be killed or
     * frozen: how to start it, and the one running now.
     */
    static final class App {
        final String name;
        final String prefix;
        final List<String> properties;
        final Class<?> configuration;
        /** the paths the application carries */
        final List<Path> paths;
        @Nullable ChildJvm jvm;
        /** counted when the application is closed (a killed one's counts are lost) */
        long commits;
        long rollbacks;
        /** what its two-phase recovery reported lost or in doubt, at a start or a clean stop */
        final List<String> problems = new CopyOnWriteArrayList<>();

        App(String name, String prefix, Class<?> configuration, List<String> properties, List<Path> paths) {
            this.name = name;
            this.prefix = prefix;
            this.configuration = configuration;
            this.properties = properties;
            this.paths = paths;
        }

        void start() {
            launch();
            awaitReady();
        }

        /** Starts the application's JVM without waiting for it (the soak starts all three at once). */
        void launch() {
            List<String> args = new ArrayList<>();
            args.add(this.configuration.getName());
            args.addAll(this.properties);
            args.addAll(List.of("spring.main.banner-mode=off",
                    "spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                    "spring.kafka.consumer.auto-offset-reset=earliest",
                    "spring.kafka.consumer.isolation-level=read-committed",
                    // a consumer closed while its group coordinator is down leaves its partitions for this long
                    "spring.kafka.consumer.properties.session.timeout.ms=10000",
                    "spring.kafka.producer.properties.delivery.timeout.ms=20000",
                    "spring.kafka.producer.properties.request.timeout.ms=8000",
                    "spring.kafka.producer.properties.max.block.ms=10000",
                    "spring.kafka.listener.concurrency=2",
                    "kafka.txn-session.transactional-id-prefix=" + this.prefix,
                    "kafka.txn-session.pool-size=4"));
            this.jvm = ChildJvm.start(SoakApplicationMain.class, args.toArray(String[]::new));
        }

        void awaitReady() {
            String[] counts = Objects.requireNonNull(this.jvm, "launched")
                .awaitValue("READY", Duration.ofSeconds(180)).split(" ");
            recordProblems("at a start", counts[0], counts[1]);
        }

        /** Closes the application (a clean client bounce when it is started again). */
        void stop() {
            ChildJvm running = this.jvm;
            if (running == null) {
                return;
            }
            this.jvm = null;
            try {
                if (!running.isAlive()) {
                    throw new AssertionError(this.name + " had exited on its own with code "
                            + running.awaitExit(Duration.ofSeconds(1)) + " before it was stopped");
                }
                running.send("stop");
                String[] counts = running.awaitValue("STOPPED", Duration.ofSeconds(120)).split(" ");
                this.commits += Long.parseLong(counts[0]);
                this.rollbacks += Long.parseLong(counts[1]);
                recordProblems("at a clean stop", counts[2], counts[3]);
                running.awaitExit(Duration.ofSeconds(30));
            }
            finally {
                running.close(); // (kills it if it is still there)
            }
        }

        private void recordProblems(String when, String lost, String inDoubt) {
            if (!lost.equals("0") || !inDoubt.equals("0")) {
                this.problems.add(this.name + " " + when + ": its two-phase recovery reported " + lost
                        + " lost and " + inDoubt + " in-doubt transactions");
            }
        }

        /** @return why the application is gone although nobody stopped it, or null while it runs */
        @Nullable String diedOnItsOwn() {
            ChildJvm running = this.jvm;
            return running == null || running.isAlive() ? null
                    : this.name + " exited on its own with code " + running.awaitExit(Duration.ofSeconds(1));
        }

        /** Kills the application (SIGKILL): whatever it was doing stops between any two steps. */
        void kill() {
            ChildJvm running = Objects.requireNonNull(this.jvm, "running");
            this.jvm = null;
            running.kill();
        }

        /** Freezes the application (SIGSTOP) for {@code millis}, as a long GC pause would, then lets it go on. */
        void freeze(long millis) {
            ChildJvm running = Objects.requireNonNull(this.jvm, "running");
            running.pause();
            try {
                pause(millis); // how long it stays frozen, not waiting for a condition
            }
            finally {
                running.resume();
            }
        }
    }

    @Test
    void everyPathExactlyOnceThroughRandomFaults() throws Exception {
        long seed = Long.getLong("txnsession.soak.seed", System.nanoTime());
        Duration soak = Duration.ofSeconds(Integer.getInteger("txnsession.soak.seconds", 12));
        Random random = new Random(seed);
        Admin admin = kafka.cluster().admin();
        Path listener = new Path("listener", "soak-l-in", "soak-l-out", true);
        Path twoPhase = new Path("two-phase", "soak-j-in", "soak-j-out", true);
        Path loop = new Path("loop", "soak-c-in", "soak-c-out", true);
        Path queue = new Path("queue", "soak-q-in", "soak-q-out", false);
        List<Path> paths = List.of(listener, twoPhase, loop, queue);
        for (Path path : paths) {
            kafka.cluster().createTopics(PARTITIONS, path.in, path.out);
        }
        admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, "soak-q-group"),
                List.of(new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"),
                        AlterConfigOp.OpType.SET))))
            .all().get(30, TimeUnit.SECONDS);
        List<String> violations = new CopyOnWriteArrayList<>();
        Map<String, Integer> faults = new LinkedHashMap<>();
        List<TopicPartition> outputs = new ArrayList<>();
        for (Path path : paths) {
            for (int p = 0; p < PARTITIONS; p++) {
                outputs.add(new TopicPartition(path.out, p));
            }
        }
        Deliveries.reset();
        try (EmbeddedPostgres postgres = EmbeddedPostgres.builder().start()) {
            String url = postgres.getJdbcUrl("postgres", "postgres");
            execute(url, "CREATE TABLE copies (id VARCHAR(64) PRIMARY KEY)");
            List<App> apps = List.of(
                    new App("listener", "soak-l-", ListenerBrokerBounceTest.App.class,
                            List.of(CommittedReader.KAFKA_ONLY, "listener.in=" + listener.in,
                                    "listener.out=" + listener.out, "listener.group=soak-l-group"), List.of(listener)),
                    new App("two-phase", "soak-j-", ListenerBrokerBounceTest.App.class,
                            List.of("listener.in=" + twoPhase.in, "listener.out=" + twoPhase.out,
                                    "listener.group=soak-j-group", "spring.datasource.url=" + url,
                                    "spring.datasource.username=postgres", "spring.datasource.password=postgres",
                                    "kafka.txn-session.jdbc.enabled=true"), List.of(twoPhase)),
                    new App("loop+queue", "soak-q-", QueueApp.class,
                            List.of(CommittedReader.KAFKA_ONLY, "loop.in=" + loop.in, "loop.out=" + loop.out,
                                    "loop.group=soak-c-group", "queue.in=" + queue.in, "queue.out=" + queue.out,
                                    "queue.group=soak-q-group", "queue.ledger=soak-q-ledger",
                                    "queue.deliveries=" + Deliveries.FILE,
                                    // well below the ledger's lookup timeout (30 s): a killed worker's open entry
                                    // holds up the lookups of its records until the coordinator aborts its
                                    // transaction (its abort scan runs every 10 s)
                                    "kafka.txn-session.transaction-timeout=10s"), List.of(loop, queue)));
            AtomicBoolean feeding = new AtomicBoolean(true);
            AtomicBoolean reading = new AtomicBoolean(true);
            List<String> stopFailures = new ArrayList<>();
            Thread reader = new Thread(() -> read(paths, outputs, reading, violations), "soak-reader");
            Thread feeder = new Thread(() -> feed(paths, feeding), "soak-feeder");
            try {
                apps.forEach(App::launch);
                apps.forEach(App::awaitReady);
                reader.start();
                feeder.start();
                long end = System.nanoTime() + soak.toNanos();
                // at least one fault of each kind, however slow the machine (on CI the first broker kill alone has
                // taken longer than the default soak): a broker kill, the two-phase application and the loop and queue
                // killed, the listener frozen past its consumers' session timeout, the two-phase application closed and
                // started again under load; then at random, half of them broker kills
                int[][] first = {{0, 0}, {1, 1}, {1, 2}, {3, 0}, {2, 1}}; // {kind, application}
                for (int fault = 0; (fault < first.length || System.nanoTime() < end) && violations.isEmpty();
                        fault++) {
                    pause(1000 + random.nextInt(2000)); // the time between faults, not waiting for a condition
                    check(paths, violations);
                    for (App app : apps) {
                        String died = app.diedOnItsOwn();
                        if (died != null) {
                            violations.add(died);
                        }
                        violations.addAll(app.problems);
                    }
                    if (!violations.isEmpty()) {
                        break;
                    }
                    boolean chosen = fault < first.length;
                    int kind = chosen ? first[fault][0] : random.nextBoolean() ? 0 : 1 + random.nextInt(3);
                    if (kind == 0) {
                        int broker = new ArrayList<>(kafka.cluster().brokerIds()).get(random.nextInt(3));
                        awaitFullyReplicated(admin, paths);
                        kafka.cluster().stopBroker(broker);
                        faults.merge("broker kills", 1, Integer::sum);
                        pause(500 + random.nextInt(1500)); // the broker stays down a while, load keeps coming
                        kafka.cluster().restartBroker(broker);
                        continue;
                    }
                    App app = apps.get(chosen ? first[fault][1] : random.nextInt(apps.size()));
                    switch (kind) {
                        case 1 -> {
                            app.kill();
                            app.start();
                            faults.merge("kills of " + app.name, 1, Integer::sum);
                        }
                        case 2 -> {
                            app.stop();
                            app.start();
                            faults.merge("restarts of " + app.name, 1, Integer::sum);
                        }
                        default -> {
                            // sometimes past the consumers' session timeout (10 s): the group moves on without it
                            app.freeze(chosen ? 11_000 : 1000 + random.nextInt(11_000));
                            faults.merge("pauses of " + app.name, 1, Integer::sum);
                        }
                    }
                    // the application's paths show output again before the next fault (faults do not pile up on one
                    // application beyond what the stall check allows)
                    awaitProgress(app, violations);
                }
                feeding.set(false);
                feeder.join();
                if (!kafka.cluster().stoppedBrokers().isEmpty()) {
                    kafka.cluster().restartBrokers(kafka.cluster().stoppedBrokers());
                }
                await().atMost(Duration.ofSeconds(240)).pollInterval(Duration.ofMillis(500)).until(() -> {
                    check(paths, violations);
                    for (App app : apps) {
                        String died = app.diedOnItsOwn();
                        if (died != null && !violations.contains(died)) {
                            violations.add(died);
                        }
                    }
                    return !violations.isEmpty() || paths.stream().allMatch(p -> p.seenTotal() >= p.sentTotal());
                });
                assertThat(violations).as("violations seen while the soak ran (seed %d)", seed).isEmpty();
                // each decision row is cleared after its Kafka commit; nothing lost or left in doubt
                await().atMost(Duration.ofSeconds(60)).until(() -> count(url, "kafka_txn_decision_log") == 0);
            }
            finally {
                feeding.set(false);
                reading.set(false);
                try {
                    feeder.join();
                    reader.join();
                    if (!kafka.cluster().stoppedBrokers().isEmpty()) {
                        kafka.cluster().restartBrokers(kafka.cluster().stoppedBrokers());
                    }
                }
                catch (InterruptedException | RuntimeException ex) {
                    log.error("Ending the soak's input, reader or broker outage failed", ex);
                    stopFailures.add("ending the soak: " + ex);
                }
                for (App app : apps) {
                    try {
                        app.stop(); // every application is stopped, whatever failed before
                    }
                    catch (RuntimeException | AssertionError ex) {
                        log.error("Stopping {} failed", app.name, ex);
                        stopFailures.add(app.name + ": " + ex);
                    }
                }
            }
            assertThat(stopFailures).as("applications that did not stop cleanly").isEmpty();
            List<TopicPartition> partitions = new ArrayList<>(outputs);
            partitions.addAll(HangingTransactions.offsetsTopicPartitions(admin));
            partitions.add(new TopicPartition("soak-q-ledger", 0));
            for (App app : apps) {
                // before any recovery below could end what an application left open
                HangingTransactions.assertNone(admin, app.prefix.substring(0, app.prefix.length() - 1), partitions,
                        Duration.ofSeconds(30));
                assertThat(app.problems).as("what %s's two-phase recovery reported", app.name).isEmpty();
            }
            assertThat(count(url, "kafka_txn_decision_log")).as("decision rows left").isZero();
            // a restart of the two-phase application would find nothing to settle
            RecoveryReport report = new TwoPhaseRecovery(new DriverManagerDataSource(url, "postgres", "postgres"),
                    new DecisionLog(), "soak-j-", 4, kafka.cluster().clientConfigs(), null).recover();
            assertThat(report.isEmpty()).as("recovery after the soak: %s", report).isTrue();
            assertExactlyOnce(paths, seed);
            assertThat(count(url, "copies")).as("one row per input of the two-phase path")
                .isEqualTo(twoPhase.sentTotal());
            long commits = apps.stream().mapToLong(a -> a.commits).sum();
            long rollbacks = apps.stream().mapToLong(a -> a.rollbacks).sum();
            StringBuilder summary = new StringBuilder();
            for (Path path : paths) {
                summary.append(summary.length() == 0 ? "" : ", ").append(path.name).append(' ')
                    .append(path.sentTotal()).append(" (longest gap ")
                    .append(TimeUnit.NANOSECONDS.toMillis(path.longestGapNanos)).append(" ms)");
            }
            System.out.printf("all-paths chaos soak: %d s; records exactly once: %s; transactions committed %d, "
                    + "rolled back %d (counted at clean stops); faults %s; violations 0 (seed %d)%n",
                    soak.toSeconds(), summary, commits, rollbacks, faults, seed);
            assertThat(faults).containsKeys("broker kills", "kills of two-phase", "kills of loop+queue",
                    "pauses of listener", "restarts of two-phase");
        }
    }

    /** A steady input on every path: a record per partition of each ordered path and one task, every 100 ms. */
    private static void feed(List<Path> paths, AtomicBoolean feeding) {
        Map<String, Object> configs = new HashMap<>(kafka.cluster().clientConfigs());
        configs.put(ProducerConfig.ACKS_CONFIG, "all");
        configs.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 120_000);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(configs, new StringSerializer(),
                new StringSerializer())) {
            while (feeding.get()) {
                for (Path path : paths) {
                    if (path.ordered) {
                        for (int p = 0; p < PARTITIONS; p++) {
                            long i = path.sent[p].getAndIncrement();
                            producer.send(new ProducerRecord<>(path.in, p, "k" + p, "p" + p + "-" + i));
                        }
                    }
                    else {
                        long i = path.sent[0].getAndIncrement();
                        producer.send(new ProducerRecord<>(path.in, (int) (i % PARTITIONS), "t-" + i, "task-" + i));
                    }
                }
                pause(100); // pacing the input, not waiting for a condition
            }
            producer.flush();
        }
    }

    /** The concurrent read_committed reader: records what each path's output shows, and every break of the rules. */
    private static void read(List<Path> paths, List<TopicPartition> outputs, AtomicBoolean reading,
            List<String> violations) {
        Map<String, Path> byOutput = new HashMap<>();
        for (Path path : paths) {
            byOutput.put(path.out, path);
        }
        Map<String, Object> configs = new HashMap<>(kafka.cluster().clientConfigs());
        configs.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        configs.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(configs, new StringDeserializer(),
                new StringDeserializer())) {
            consumer.assign(outputs);
            consumer.seekToBeginning(outputs);
            while (reading.get()) {
                check(paths, violations); // continuously, not only between faults (a fault may take a while)
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    Path path = byOutput.get(r.topic());
                    long now = System.nanoTime();
                    path.longestGapNanos = Math.max(path.longestGapNanos, now - path.lastOutputNanos);
                    path.lastOutputNanos = now;
                    if (path.ordered) {
                        List<String> seen = path.seen.computeIfAbsent(r.partition(),
                                k -> Collections.synchronizedList(new ArrayList<>()));
                        String expected = "out-p" + r.partition() + "-" + seen.size();
                        if (!expected.equals(r.value())) {
                            violations.add(path.name + ": partition " + r.partition() + " showed " + r.value()
                                    + " where " + expected + " was due (offset " + r.offset() + ")");
                        }
                        seen.add(r.value());
                    }
                    else if (path.seenKeys.merge(r.key(), 1, Integer::sum) > 1) {
                        violations.add(path.name + ": " + r.key() + " produced twice (offset " + r.offset()
                                + "; the listener ran on it: " + Deliveries.of(r.key()) + ")");
                    }
                }
            }
        }
        catch (RuntimeException ex) {
            violations.add("the reader failed: " + ex);
        }
    }

    /** No path with input left may go longer than {@link #MAX_STALL} without output. */
    private static synchronized void check(List<Path> paths, List<String> violations) {
        long now = System.nanoTime();
        for (Path path : paths) {
            if (path.seenTotal() < path.sentTotal() && now - path.lastOutputNanos > MAX_STALL.toNanos()) {
                violations.add(path.name + ": no output for " + MAX_STALL.toSeconds() + " s with "
                        + (path.sentTotal() - path.seenTotal()) + " inputs waiting");
                path.lastOutputNanos = now; // one report per stall
            }
        }
    }

    /** What a fresh read_committed reader finds at the end: every input once, in order per partition. */
    private static void assertExactlyOnce(List<Path> paths, long seed) {
        for (Path path : paths) {
            List<ConsumerRecord<String, String>> out = CommittedReader.readToEnd(kafka.bootstrapServers(), path.out,
                    true);
            if (path.ordered) {
                for (int p = 0; p < PARTITIONS; p++) {
                    int partition = p;
                    List<String> expected = new ArrayList<>();
                    for (long i = 0; i < path.sent[p].get(); i++) {
                        expected.add("out-p" + p + "-" + i);
                    }
                    assertThat(out.stream().filter(r -> r.partition() == partition).map(ConsumerRecord::value))
                        .as("%s, partition %d: every input once, in order (seed %d)", path.name, p, seed)
                        .containsExactlyElementsOf(expected);
                }
            }
            else {
                List<String> expected = new ArrayList<>();
                for (long i = 0; i < path.sentTotal(); i++) {
                    expected.add("t-" + i);
                }
                assertThat(out).extracting(ConsumerRecord::key)
                    .as("%s: every task once (seed %d)", path.name, seed)
                    .doesNotHaveDuplicates().containsExactlyInAnyOrderElementsOf(expected);
            }
        }
    }

    /** Waits until each path of {@code app} shows new output, at most {@link #MAX_STALL}; a violation otherwise. */
    private static void awaitProgress(App app, List<String> violations) {
        Map<Path, Long> before = new HashMap<>();
        app.paths.forEach(p -> before.put(p, p.seenTotal()));
        try {
            await().atMost(MAX_STALL).pollInterval(Duration.ofMillis(200))
                .until(() -> {
                    String died = app.diedOnItsOwn();
                    if (died != null) {
                        violations.add(died);
                    }
                    return !violations.isEmpty() || app.paths.stream().allMatch(p -> p.seenTotal() > before.get(p));
                });
        }
        catch (org.awaitility.core.ConditionTimeoutException ex) {
            violations.add(app.name + ": no new output within " + MAX_STALL.toSeconds() + " s after its fault");
        }
    }

    private static void awaitFullyReplicated(Admin admin, List<Path> paths) {
        List<String> topics = new ArrayList<>(List.of("__transaction_state", "__consumer_offsets"));
        paths.forEach(p -> topics.addAll(List.of(p.in, p.out)));
        await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200)).until(() -> {
            try {
                return admin.describeTopics(topics).allTopicNames().get(10, TimeUnit.SECONDS).values().stream()
                    .flatMap(d -> d.partitions().stream()).allMatch(p -> p.isr().size() == p.replicas().size());
            }
            catch (Exception notNow) {
                return false;
            }
        });
    }

    private static void pause(long millis) {
        try {
            Thread.sleep(millis);
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(ex);
        }
    }

    private static void execute(String url, String sql) throws SQLException {
        try (Connection con = DriverManager.getConnection(url, "postgres", "postgres");
                Statement st = con.createStatement()) {
            st.execute(sql);
        }
    }

    private static long count(String url, String table) throws SQLException {
        try (Connection con = DriverManager.getConnection(url, "postgres", "postgres");
                Statement st = con.createStatement(); ResultSet rs = st.executeQuery("SELECT COUNT(*) FROM " + table)) {
            rs.next();
            return rs.getLong(1);
        }
    }

    /**
     * Each queue task's runs of the listener (process, thread, delivery count, time), written by the worker
     * applications to a file under {@code target/}: a duplicate's report names them, and the file stays after a failed
     * run.
     */
    static final class Deliveries {

        static final java.nio.file.Path FILE = java.nio.file.Path.of("target", "soak-deliveries.log").toAbsolutePath();

        private Deliveries() {
        }

        /** Starts the file of a run anew. */
        static void reset() throws java.io.IOException {
            java.nio.file.Files.createDirectories(FILE.getParent());
            java.nio.file.Files.writeString(FILE, "");
        }

        static List<String> of(String key) {
            try (java.util.stream.Stream<String> lines = java.nio.file.Files.lines(FILE)) {
                return lines.filter(l -> l.startsWith(key + " ")).toList();
            }
            catch (java.io.IOException ex) {
                return List.of("(unreadable: " + ex + ")");
            }
        }
    }

    /** Appends a task's run to the soak's deliveries file (in the worker application's JVM). */
    static synchronized void recordDelivery(String file, String key, String run) {
        try {
            java.nio.file.Files.writeString(java.nio.file.Path.of(file), key + " " + run + "\n",
                    java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.APPEND);
        }
        catch (java.io.IOException ex) {
            throw new java.io.UncheckedIOException(ex);
        }
    }

    /** The loop and the queue: a programmatic loop over a bound consumer, and a share worker with a ledger. */
    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class QueueApp {

        @Bean
        CopyLoop copyLoop(TransactionalConsumerFactory consumers, SessionTransactionManager transactionManager,
                KafkaTemplate<Object, Object> template, Environment env) {
            return new CopyLoop(consumers, new TransactionTemplate(transactionManager), template,
                    env.getRequiredProperty("loop.in"), env.getRequiredProperty("loop.out"),
                    env.getRequiredProperty("loop.group"));
        }

        @Bean(destroyMethod = "close")
        ShareOutcomeLedger soakLedger(Environment env) {
            return new ShareOutcomeLedger(Map.of("bootstrap.servers", env.getRequiredProperty(
                    "spring.kafka.bootstrap-servers")), env.getRequiredProperty("queue.ledger"), Duration.ofSeconds(30));
        }

        @Bean
        SessionShareListenerContainer<String, String> soakWorkers(TransactionalConsumerFactory consumers,
                SessionTransactionManager transactionManager, KafkaTemplate<Object, Object> template,
                ShareOutcomeLedger ledger, Environment env) {
            String out = env.getRequiredProperty("queue.out");
            SessionShareListenerContainer<String, String> container = new SessionShareListenerContainer<>(
                    "soak-workers", consumers, transactionManager, env.getRequiredProperty("queue.group"),
                    List.of(env.getRequiredProperty("queue.in")), StringDeserializer::new, StringDeserializer::new,
                    task -> {
                        recordDelivery(env.getRequiredProperty("queue.deliveries"), task.key(),
                                ProcessHandle.current().pid() + "/" + Thread.currentThread().getName() + " delivery "
                                        + task.deliveryCount().orElse((short) 0) + " at " + java.time.LocalTime.now());
                        template.send(out, task.key(), "done-" + task.value());
                        return AcknowledgeType.ACCEPT;
                    });
            container.setConcurrency(2);
            container.setPollTimeout(Duration.ofMillis(200));
            container.setOutcomeLedger(ledger);
            return container;
        }
    }

    /**
     * The application's own consume-transform-produce loop: one Spring transaction per poll with the consumer bound
     * to it. After a failure it starts over with a new consumer (the failed transaction's records come again).
     */
    static final class CopyLoop implements SmartLifecycle {

        private final TransactionalConsumerFactory consumers;
        private final TransactionTemplate transactions;
        private final KafkaTemplate<Object, Object> template;
        private final String in;
        private final String out;
        private final String group;
        private volatile boolean running;
        private @Nullable Thread thread;

        CopyLoop(TransactionalConsumerFactory consumers, TransactionTemplate transactions,
                KafkaTemplate<Object, Object> template, String in, String out, String group) {
            this.consumers = consumers;
            this.transactions = transactions;
            this.template = template;
            this.in = in;
            this.out = out;
            this.group = group;
        }

        @Override
        public void start() {
            this.running = true;
            Thread t = new Thread(this::run, "soak-loop");
            this.thread = t;
            t.start();
        }

        private void run() {
            while (this.running) {
                try (TransactionalConsumer<String, String> consumer = this.consumers.createConsumer(this.group,
                        new StringDeserializer(), new StringDeserializer())) {
                    consumer.subscribe(List.of(this.in));
                    int failuresInARow = 0;
                    while (this.running) {
                        try {
                            this.transactions.executeWithoutResult(status -> {
                                this.consumers.bindToCurrentTransaction(consumer);
                                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                                    this.template.send(this.out, r.partition(), r.key(), "out-" + r.value());
                                }
                            });
                            failuresInARow = 0;
                        }
                        catch (RuntimeException ex) {
                            // the bound consumer rewound to where the transaction began: the same consumer goes on
                            if (++failuresInARow >= 20) {
                                throw ex;
                            }
                            log.info("The soak's copy loop runs again after: {}", ex.toString());
                            pause(200); // a back-off, as an application would
                        }
                    }
                }
                catch (RuntimeException ex) {
                    if (this.running) {
                        log.info("The soak's copy loop starts over with a new consumer after: {}", ex.toString());
                        pause(200); // a back-off before the new consumer, as an application would
                    }
                }
            }
        }

        @Override
        public void stop() {
            this.running = false;
            Thread t = this.thread;
            if (t != null) {
                try {
                    t.join(TimeUnit.SECONDS.toMillis(60));
                }
                catch (InterruptedException ex) {
                    Thread.currentThread().interrupt();
                }
            }
        }

        @Override
        public boolean isRunning() {
            return this.running;
        }
    }
}
