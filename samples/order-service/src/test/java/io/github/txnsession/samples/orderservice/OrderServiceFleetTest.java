package io.github.txnsession.samples.orderservice;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;

import io.github.txnsession.kafka.test.ChildJvm;
import io.github.txnsession.spring.CommitPhase;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * The unchanged order service run as replicas with identical configuration in fleet mode, with two-phase commit on
 * one PostgreSQL database and one Kafka broker, each replica a child JVM, orders placed over HTTP throughout: scale
 * 1 → 3, kill -9 one (random) → 2 → 4 → 1 (clean stops). The victim dies by kill -9 at a random moment, or at a
 * chosen {@link CommitPhase} of a two-phase commit; the first run's victim dies after its database committed and before
 * Kafka did, so a survivor must commit that transaction from the decision log.
 *
 * <p>Checked at the end: every order row has exactly one committed {@code OrderPlaced} event and every event its row
 * (nothing a kill left half-done, in either direction: a LOST transaction would be a row without its event), every
 * order acknowledged over HTTP is there, no decision row is left, recovery health is UP, the read_committed end of each
 * partition moved past what the dead replica left open within 20 s of the kill, and the transactional ids used are at
 * most slots × sessions per slot.
 *
 * <p>The default build runs this once; {@code -Pfleet-full} runs it {@code fleet.runs} (10) times, the checks covering
 * all runs.
 */
class OrderServiceFleetTest {

    private static final JsonMapper JSON = JsonMapper.shared();
    private static final int SLOTS = 4;
    private static final int SESSIONS_PER_SLOT = 2;
    private static final String PREFIX = "order-service-";

    static EmbeddedKafkaCluster kafka;
    static EmbeddedPostgres postgres;

    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    private final List<Replica> live = new CopyOnWriteArrayList<>();
    private final Set<String> acknowledged = ConcurrentHashMap.newKeySet();
    private final AtomicInteger failedRequests = new AtomicInteger();
    /** every child JVM of the current run, closed at its end whatever happened */
    private final List<ChildJvm> started = new CopyOnWriteArrayList<>();

    record Replica(ChildJvm jvm, int port) {
    }

    @BeforeAll
    static void start() throws IOException {
        kafka = EmbeddedKafkaCluster.builder().brokers(1).start();
        postgres = EmbeddedPostgres.builder().start();
    }

    @AfterAll
    static void stop() throws IOException {
        if (kafka != null) {
            kafka.close();
        }
        if (postgres != null) {
            postgres.close();
        }
    }

    @Test
    void replicasScaleAndSurviveAKillWithEveryOrderAtomic() throws Exception {
        int runs = Integer.getInteger("fleet.runs", 1);
        CommitPhase[] phases = CommitPhase.values();
        for (int run = 1; run <= runs; run++) {
            // the first run dies with its database committed and Kafka prepared: the new owner must commit from the log
            CommitPhase crashAt = run == 1 ? CommitPhase.AFTER_JDBC_COMMIT
                    : ThreadLocalRandom.current().nextBoolean() ? null
                            : phases[ThreadLocalRandom.current().nextInt(phases.length)];
            System.out.printf("fleet-2pc: run %d of %d, the victim dies %s%n", run, runs,
                    crashAt == null ? "by kill -9 at a random moment" : "at " + crashAt);
            boolean settledFromLog = scaleKillAndCheck(crashAt);
            if (crashAt == CommitPhase.AFTER_JDBC_COMMIT) {
                assertThat(settledFromLog).as("a survivor committed the dead replica's decided transaction").isTrue();
            }
            this.live.clear();
            this.acknowledged.clear();
            this.failedRequests.set(0);
        }
    }

    /**
     * One run; the checks cover everything the database and the topic hold, earlier runs included.
     *
     * @param crashAt where the victim dies, null for a kill -9 at a random moment
     * @return whether a survivor's recovery committed a transaction from the decision log
     */
    private boolean scaleKillAndCheck(@Nullable CommitPhase crashAt) throws Exception {
        try {
            return scaleKillAndCheckReplicas(crashAt);
        }
        finally {
            // whatever failed: no replica outlives the run
            this.started.forEach(ChildJvm::close);
            this.started.clear();
        }
    }

    private boolean scaleKillAndCheckReplicas(@Nullable CommitPhase crashAt) throws Exception {
        List<Replica> all = new ArrayList<>();
        ExecutorService load = Executors.newFixedThreadPool(4);
        AtomicBoolean running = new AtomicBoolean(true);
        try {
            all.add(startReplica());
            for (int i = 0; i < 4; i++) {
                load.execute(() -> placeOrders(running));
            }
            awaitMoreOrders(20);
            all.add(startReplica());
            all.add(startReplica());
            awaitMoreOrders(40);

            // kill -9 one replica while orders flow through all three
            // (still taking requests when it dies: its transactions in flight are cut at any step), at a chosen
            // phase of a two-phase commit or at a random moment
            Replica victim = this.live.get(ThreadLocalRandom.current().nextInt(this.live.size()));
            if (crashAt == null) {
                victim.jvm().kill();
            }
            else {
                victim.jvm().send("halt-at " + crashAt);
                victim.jvm().awaitExit(Duration.ofSeconds(60));
            }
            long killedAt = System.nanoTime();
            this.live.remove(victim);
            Map<TopicPartition, Long> endsAtKill = endOffsets(IsolationLevel.READ_UNCOMMITTED);
            await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(100)).until(() -> {
                Map<TopicPartition, Long> lso = endOffsets(IsolationLevel.READ_COMMITTED);
                return endsAtKill.entrySet().stream().allMatch(e -> lso.get(e.getKey()) >= e.getValue());
            });
            System.out.printf("fleet-2pc: last stable offsets past the killed replica after %d ms%n",
                    TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killedAt));
            awaitMoreOrders(30);

            // scale up to 4 (one slot each), then down to 1: the leaving ones hand their slots over cleanly
            all.add(startReplica());
            all.add(startReplica());
            awaitMoreOrders(30);
            while (this.live.size() > 1) {
                Replica leaving = this.live.get(0);
                this.live.remove(leaving);
                leaving.jvm().send("stop");
                leaving.jvm().awaitLine("replica-stopped", Duration.ofSeconds(90));
            }
            awaitMoreOrders(30);
        }
        finally {
            running.set(false);
            load.shutdown();
        }
        assertThat(load.awaitTermination(60, TimeUnit.SECONDS)).as("the load stopped").isTrue();
        Replica last = this.live.get(0);
        try {
            // every decision row settled (completed by its writer or, for the killed replica, by the slot's new owner),
            // none set aside in doubt, no fence left
            await().atMost(Duration.ofSeconds(60)).until(() -> decisionRows() == 0);
            JsonNode health = JSON.readTree(get(last.port(), "/actuator/health"));
            assertThat(health.path("components").path("kafkaTxnRecovery").path("status").asString())
                .as(health.toString()).isEqualTo("UP");

            Set<String> rows = orderRows();
            List<String> events = kafka.readCommitted(OrderServiceApplication.ORDER_PLACED).stream()
                .map(ConsumerRecord::key).toList();
            assertThat(events).as("no order published twice").doesNotHaveDuplicates();
            assertThat(new HashSet<>(events)).as("each row has its event, each event its row")
                .isEqualTo(rows);
            assertThat(rows).as("every acknowledged order").containsAll(this.acknowledged);
            {
                Admin admin = kafka.admin(); // shared, closed with the cluster
                Set<String> ids = admin.listTransactions().all().get(30, TimeUnit.SECONDS).stream()
                    .map(TransactionListing::transactionalId).filter(id -> id.startsWith(PREFIX))
                    .collect(Collectors.toSet());
                assertThat(ids).as("ids used, whatever the scaling: fleet ids only").isNotEmpty()
                    .allMatch(id -> id.matches(java.util.regex.Pattern.quote(PREFIX) + "\\d+-\\d+"))
                    .hasSizeLessThanOrEqualTo(SLOTS * SESSIONS_PER_SLOT);
            }
            System.out.printf("fleet-2pc: %d orders acknowledged, %d rows = %d events, %d requests failed "
                    + "(replica killed or rebalancing)%n", this.acknowledged.size(), rows.size(), events.size(),
                    this.failedRequests.get());
        }
        finally {
            last.jvm().send("stop");
            last.jvm().awaitLine("replica-stopped", Duration.ofSeconds(90));
            for (Replica r : all) {
                r.jvm().close();
            }
        }
        List<String> settlements = all.stream().flatMap(r -> r.jvm().output().stream())
            .filter(l -> l.contains("Two-phase recovery of prefix") && !l.endsWith("nothing to do"))
            .map(l -> l.substring(l.indexOf("Two-phase"))).toList();
        settlements.forEach(l -> System.out.println("fleet-2pc recovery: " + l));
        return settlements.stream().anyMatch(l -> l.contains("': committed [" + PREFIX));
    }

    private Replica startReplica() {
        ChildJvm jvm = ChildJvm.start(OrderServiceReplica.class, "--server.port=0",
                "--spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                "--spring.datasource.url=" + postgres.getJdbcUrl("postgres", "postgres"),
                "--spring.datasource.username=postgres", "--spring.datasource.password=postgres",
                "--kafka.txn-session.fleet.enabled=true", "--kafka.txn-session.fleet.slots=" + SLOTS,
                "--kafka.txn-session.fleet.sessions-per-slot=" + SESSIONS_PER_SLOT,
                "--kafka.txn-session.fleet.session-timeout=6s", "--spring.main.banner-mode=off");
        this.started.add(jvm);
        int port = Integer.parseInt(jvm.awaitValue("replica-port", Duration.ofSeconds(120)));
        Replica replica = new Replica(jvm, port);
        // health is OUT_OF_SERVICE (503) until the replica owns a slot: only then does it take orders
        await().atMost(Duration.ofSeconds(90)).ignoreExceptions()
            .until(() -> this.http.send(HttpRequest.newBuilder(URI.create("http://localhost:" + port
                    + "/actuator/health")).build(), HttpResponse.BodyHandlers.discarding()).statusCode() == 200);
        this.live.add(replica);
        return replica;
    }

    private void placeOrders(AtomicBoolean running) {
        while (running.get()) {
            List<Replica> targets = this.live;
            if (targets.isEmpty()) {
                Thread.onSpinWait();
                continue;
            }
            Replica target = targets.get(ThreadLocalRandom.current().nextInt(targets.size()));
            try {
                HttpResponse<String> placed = this.http.send(HttpRequest.newBuilder(URI.create("http://localhost:"
                        + target.port() + "/orders")).timeout(Duration.ofSeconds(30))
                    .header("Content-Type", "application/json")
                    .POST(HttpRequest.BodyPublishers.ofString("{\"item\":\"book\",\"quantity\":1}")).build(),
                        HttpResponse.BodyHandlers.ofString());
                if (placed.statusCode() == 201) {
                    this.acknowledged.add(JSON.readTree(placed.body()).path("orderId").asString());
                }
                else {
                    this.failedRequests.incrementAndGet();
                }
            }
            catch (IOException | RuntimeException ex) {
                this.failedRequests.incrementAndGet(); // the replica was killed or stopped under the request
            }
            catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    private void awaitMoreOrders(int more) {
        int target = this.acknowledged.size() + more;
        await().atMost(Duration.ofSeconds(120)).until(() -> this.acknowledged.size() >= target);
    }

    private String get(int port, String path) throws IOException, InterruptedException {
        return this.http.send(HttpRequest.newBuilder(URI.create("http://localhost:" + port + path)).build(),
                HttpResponse.BodyHandlers.ofString()).body();
    }

    private static Map<TopicPartition, Long> endOffsets(IsolationLevel isolation) throws Exception {
        Admin admin = kafka.admin(); // shared, closed with the cluster
        {
            Map<TopicPartition, OffsetSpec> request = new HashMap<>();
            for (int p = 0; p < 3; p++) {
                request.put(new TopicPartition(OrderServiceApplication.ORDER_PLACED, p), OffsetSpec.latest());
            }
            Map<TopicPartition, Long> ends = new HashMap<>();
            admin.listOffsets(request, new ListOffsetsOptions(isolation)).all().get(30, TimeUnit.SECONDS)
                .forEach((tp, info) -> ends.put(tp, info.offset()));
            return ends;
        }
    }

    private static Set<String> orderRows() throws SQLException {
        Set<String> ids = new HashSet<>();
        try (Connection con = connection(); Statement st = con.createStatement();
                ResultSet rs = st.executeQuery("SELECT id FROM orders")) {
            while (rs.next()) {
                ids.add(rs.getString(1));
            }
        }
        return ids;
    }

    private static int decisionRows() throws SQLException {
        try (Connection con = connection(); Statement st = con.createStatement();
                ResultSet rs = st.executeQuery("SELECT COUNT(*) FROM kafka_txn_decision_log")) {
            rs.next();
            return rs.getInt(1);
        }
    }

    private static Connection connection() throws SQLException {
        return DriverManager.getConnection(postgres.getJdbcUrl("postgres", "postgres"), "postgres", "postgres");
    }
}
