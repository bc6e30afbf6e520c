package io.github.txnsession.kafka.fleet;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;

import io.github.txnsession.kafka.test.ChildJvm;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.HangingTransactions;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;
import org.junit.jupiter.api.extension.RegisterExtension;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

/**
 * {@link TransactionalIdFleet} against a real broker: slots shared without overlap among instances with identical
 * configuration; a fleet of child-JVM workers ({@link FleetWorker}) scaled 1 → 3 → kill -9 one → 2 → 4 → 1 under
 * load with every input turned into output exactly once, a dead instance's open transaction aborted within 20 s,
 * and no more transactional ids than slots; a paused instance (SIGSTOP) fenced by the new owner of its slots.
 *
 * <p>The default build runs one scaling run; {@code -Pfleet-full} runs {@code fleet.runs} (10) with random victims
 * and kill points, and the paused-instance test ({@code fleet.zombie}).
 */
class TransactionalIdFleetTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    private static final int PARTITIONS = 4;
    private static final int SLOTS = 4;

    @Test
    void instancesWithTheSameConfigurationOwnDisjointSlotsAndTakeOverALeaversSlots() {
        EmbeddedKafkaCluster cluster = kafka.cluster();
        String prefix = EmbeddedKafkaCluster.uniqueName("fleet") + "-";
        Map<Integer, String> owner = new ConcurrentHashMap<>();
        List<String> overlaps = Collections.synchronizedList(new ArrayList<>());
        List<TransactionalIdFleet> fleets = new ArrayList<>();
        try {
            for (int i = 0; i < 3; i++) {
                String name = "instance-" + i;
                fleets.add(TransactionalIdFleet.builder(prefix, cluster.clientConfigs()).slots(6).sessionsPerSlot(2)
                        .sessionTimeout(Duration.ofSeconds(6)).listener(new SlotListener() {
                            @Override
                            public void slotAssigned(FleetSlot slot) {
                                String before = owner.putIfAbsent(slot.index(), name);
                                if (before != null) {
                                    overlaps.add("slot " + slot.index() + " given to " + name + " while " + before
                                            + " had it");
                                }
                            }

                            @Override
                            public void slotsRevoked(List<FleetSlot> slots, boolean lost) {
                                slots.forEach(slot -> owner.remove(slot.index(), name));
                            }
                        }).start());
            }
            await().atMost(Duration.ofSeconds(60)).until(() -> owner.size() == 6
                    && fleets.stream().allMatch(f -> !f.ownedSlots().isEmpty()));
            Set<Integer> union = new TreeSet<>();
            int total = 0;
            for (TransactionalIdFleet f : fleets) {
                union.addAll(f.ownedSlots());
                total += f.ownedSlots().size();
            }
            assertThat(union).containsExactly(0, 1, 2, 3, 4, 5);
            assertThat(total).as("no slot owned twice").isEqualTo(6);
            assertThat(fleets.get(0).transactionalIds()).hasSize(12).contains(prefix + "5-1");

            Set<Integer> leaving = fleets.get(1).ownedSlots();
            fleets.get(1).close();
            await().atMost(Duration.ofSeconds(60)).until(() -> {
                Set<Integer> left = new TreeSet<>(fleets.get(0).ownedSlots());
                left.addAll(fleets.get(2).ownedSlots());
                return left.size() == 6;
            });
            assertThat(owner.values()).doesNotContain("instance-1").hasSize(6);
            assertThat(leaving).isNotEmpty();
            assertThat(overlaps).isEmpty();

            assertThatThrownBy(() -> TransactionalIdFleet.builder(prefix, cluster.clientConfigs()).slots(5)
                    .listener(new NoOpListener()).start()).isInstanceOf(IllegalStateException.class)
                            .hasMessageContaining("has 6 partitions").hasMessageContaining("configured with 5 slots");
        }
        finally {
            fleets.forEach(TransactionalIdFleet::close);
        }
    }

    @Test
    void aSlotWhoseSettlementFailsIsRetriedAndNotReportedAsOwned() {
        EmbeddedKafkaCluster cluster = kafka.cluster();
        String prefix = EmbeddedKafkaCluster.uniqueName("fleet") + "-";
        AtomicInteger attempts = new AtomicInteger();
        try (TransactionalIdFleet fleet = TransactionalIdFleet.builder(prefix, cluster.clientConfigs()).slots(1)
                .sessionTimeout(Duration.ofSeconds(6)).retryBackoff(Duration.ofMillis(200))
                .listener(new SlotListener() {
                    @Override
                    public void slotAssigned(FleetSlot slot) {
                        if (attempts.incrementAndGet() < 3) {
                            throw new IllegalStateException("decision log unreachable (test)");
                        }
                    }

                    @Override
                    public void slotsRevoked(List<FleetSlot> slots, boolean lost) {
                    }
                }).start()) {
            await().atMost(Duration.ofSeconds(60)).until(() -> attempts.get() >= 1);
            assertThat(fleet.awaitSlots(Duration.ofSeconds(30))).isTrue();
            assertThat(attempts.get()).isEqualTo(3);
            assertThat(fleet.ownedSlots()).containsExactly(0);
        }
    }

    @Test
    void aScaledFleetUnderLoadTurnsEveryInputIntoOutputExactlyOnce() throws Exception {
        int runs = Integer.getInteger("fleet.runs", 1);
        Random random = new Random(Long.getLong("fleet.seed", System.nanoTime()));
        List<String> report = new ArrayList<>();
        for (int run = 0; run < runs; run++) {
            report.add(scaleRun(run, random));
        }
        System.out.println("Fleet scaling runs:\n  " + String.join("\n  ", report));
    }

    private String scaleRun(int run, Random random) throws Exception {
        EmbeddedKafkaCluster cluster = kafka.cluster();
        String base = EmbeddedKafkaCluster.uniqueName("fleet-run" + run);
        String input = base + "-in";
        String output = base + "-out";
        String prefix = base + "-";
        cluster.createTopics(PARTITIONS, input, output);
        List<ChildJvm> workers = new ArrayList<>();
        try (Load load = new Load(cluster, input)) {
            load.start();
            ChildJvm w1 = worker(workers, cluster, input, output, base, prefix);
            w1.awaitLine("committed", Duration.ofSeconds(60));
            ChildJvm w2 = worker(workers, cluster, input, output, base, prefix);
            ChildJvm w3 = worker(workers, cluster, input, output, base, prefix);
            w2.awaitLine("owns", Duration.ofSeconds(60));
            w3.awaitLine("owns", Duration.ofSeconds(60));

            // kill -9 one of the three: holding an open transaction, or wherever it happens to be (full profile)
            ChildJvm victim = List.of(w1, w2, w3).get(run == 0 ? 1 : random.nextInt(3));
            boolean holding = run == 0 || random.nextBoolean();
            if (holding) {
                victim.send("hold");
                victim.awaitLine("holding", Duration.ofSeconds(60));
            }
            else {
                // a random kill point: after 1 to 3 more of its commits, wherever its next transaction then is
                for (int commits = 1 + random.nextInt(3); commits > 0; commits--) {
                    victim.awaitLine("committed", Duration.ofSeconds(60));
                }
            }
            Map<TopicPartition, Long> highWater = offsets(cluster, output, IsolationLevel.READ_UNCOMMITTED);
            long killedAt = System.nanoTime();
            victim.kill();
            await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(100))
                    .until(() -> stableReached(cluster, output, highWater));
            long unpinnedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killedAt);

            ChildJvm w4 = worker(workers, cluster, input, output, base, prefix);
            ChildJvm w5 = worker(workers, cluster, input, output, base, prefix);
            w4.awaitLine("owns", Duration.ofSeconds(90));
            w5.awaitLine("owns", Duration.ofSeconds(90));
            for (ChildJvm w : List.of(w1, w2, w3, w4)) {
                if (w != victim) {
                    stopCleanly(w);
                }
            }
            w5.awaitLine("committed", Duration.ofSeconds(60));
            int produced = load.stopAndCount();
            await().atMost(Duration.ofSeconds(120)).pollInterval(Duration.ofMillis(500))
                    .until(() -> cluster.readCommitted(output).size() >= produced);
            stopCleanly(w5);

            List<String> out = cluster.readCommitted(output).stream().map(ConsumerRecord::value)
                    .collect(Collectors.toList());
            Set<String> expected = new HashSet<>();
            for (String v : load.sent()) {
                expected.add("out-" + v);
            }
            assertThat(out).as("no duplicate output").doesNotHaveDuplicates();
            assertThat(new HashSet<>(out)).as("output = input").isEqualTo(expected);
            assertOrderKept(cluster.readCommitted(output));

            Set<String> ids = cluster.admin().listTransactions().all().get(30, TimeUnit.SECONDS).stream()
                    .map(TransactionListing::transactionalId).filter(id -> id.startsWith(prefix))
                    .collect(Collectors.toCollection(TreeSet::new));
            assertThat(ids).as("transactional ids ever used").hasSizeLessThanOrEqualTo(SLOTS);
            List<TopicPartition> partitions = new ArrayList<>(highWater.keySet());
            partitions.addAll(HangingTransactions.offsetsTopicPartitions(cluster.admin()));
            HangingTransactions.assertNone(cluster.admin(), base, partitions, Duration.ofSeconds(30));
            return "run " + run + ": " + produced + " records, 5 instances, killed " + (holding ? "holding" : "at random")
                    + ", last stable offset past the dead instance after " + unpinnedMs + " ms, " + ids.size()
                    + " transactional ids, 0 lost, 0 duplicated";
        }
        finally {
            workers.forEach(ChildJvm::close);
        }
    }

    /** In {@code -Pfleet-full} (22 s; keeps the default build's time down): SIGSTOP until the slots move, SIGCONT. */
    @Test
    @EnabledIfSystemProperty(named = "fleet.zombie", matches = "true")
    void aPausedInstanceIsFencedByTheNewOwnerOfItsSlots() throws Exception {
        EmbeddedKafkaCluster cluster = kafka.cluster();
        String base = EmbeddedKafkaCluster.uniqueName("fleet-zombie");
        String input = base + "-in";
        String output = base + "-out";
        String prefix = base + "-";
        cluster.createTopics(PARTITIONS, input, output);
        List<ChildJvm> workers = new ArrayList<>();
        try (Load load = new Load(cluster, input)) {
            load.start();
            ChildJvm zombie = worker(workers, cluster, input, output, base, prefix);
            zombie.awaitLine("committed", Duration.ofSeconds(60));
            ChildJvm survivor = worker(workers, cluster, input, output, base, prefix);
            survivor.awaitLine("owns", Duration.ofSeconds(60));
            zombie.awaitLine("committed", Duration.ofSeconds(60));

            zombie.send("hold");
            zombie.awaitLine("holding", Duration.ofSeconds(60));
            Map<TopicPartition, Long> highWater = offsets(cluster, output, IsolationLevel.READ_UNCOMMITTED);
            zombie.pause();
            // the survivor takes the paused instance's slots and initializes their ids: its open transaction aborts
            // (the workers' transaction timeout is 10 min: nothing else can end it within this test)
            survivor.awaitLine("owned [0, 1, 2, 3]", Duration.ofSeconds(60));
            await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(200))
                    .until(() -> stableReached(cluster, output, highWater));
            survivor.awaitLine("committed", Duration.ofSeconds(60));
            zombie.resume();
            zombie.send("go");
            String learned = zombie.awaitLine("fenced", Duration.ofSeconds(60));
            assertThat(learned).contains("SessionFencedException");

            survivor.awaitLine("committed", Duration.ofSeconds(60));
            int produced = load.stopAndCount();
            await().atMost(Duration.ofSeconds(120)).pollInterval(Duration.ofMillis(500))
                    .until(() -> cluster.readCommitted(output).size() >= produced);
            zombie.send("stop");
            assertThat(zombie.awaitExit(Duration.ofSeconds(90))).isZero();
            stopCleanly(survivor);
            List<String> out = cluster.readCommitted(output).stream().map(ConsumerRecord::value)
                    .collect(Collectors.toList());
            assertThat(out).as("nothing the zombie committed after it was fenced").doesNotHaveDuplicates()
                    .hasSize(produced);
        }
        finally {
            workers.forEach(ChildJvm::close);
        }
    }

    /** Stops a worker and checks that none of its transactions was fenced or failed while it ran. */
    private static void stopCleanly(ChildJvm w) {
        w.send("stop");
        w.awaitLine("stopped", Duration.ofSeconds(90));
        assertThat(w.awaitExit(Duration.ofSeconds(30))).as("clean stop").isZero();
        assertThat(w.output()).as("no transaction of a live instance fenced or failed")
                .noneMatch(l -> l.startsWith("fenced") || l.startsWith("failed"));
    }

    private static ChildJvm worker(List<ChildJvm> workers, EmbeddedKafkaCluster cluster, String input, String output,
            String base, String prefix) {
        ChildJvm w = ChildJvm.start(FleetWorker.class, cluster.bootstrapServers(), input, output, base + "-group",
                prefix, String.valueOf(SLOTS), "20");
        workers.add(w);
        w.awaitLine("ready", Duration.ofSeconds(60));
        return w;
    }

    private static Map<TopicPartition, Long> offsets(EmbeddedKafkaCluster cluster, String topic, IsolationLevel level)
            throws Exception {
        Map<TopicPartition, OffsetSpec> request = new HashMap<>();
        for (int p = 0; p < PARTITIONS; p++) {
            request.put(new TopicPartition(topic, p), OffsetSpec.latest());
        }
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> result = cluster.admin()
                .listOffsets(request, new ListOffsetsOptions(level)).all().get(30, TimeUnit.SECONDS);
        Map<TopicPartition, Long> offsets = new HashMap<>();
        result.forEach((tp, info) -> offsets.put(tp, info.offset()));
        return offsets;
    }

    /** Every partition's last stable offset has reached the given high watermarks. */
    private static boolean stableReached(EmbeddedKafkaCluster cluster, String topic, Map<TopicPartition, Long> marks)
            throws Exception {
        Map<TopicPartition, Long> stable = offsets(cluster, topic, IsolationLevel.READ_COMMITTED);
        return marks.entrySet().stream().allMatch(e -> stable.get(e.getKey()) >= e.getValue());
    }

    /** Within each output partition, each key's values appear in the order the input had them. */
    private static void assertOrderKept(List<ConsumerRecord<String, String>> output) {
        Map<Integer, Long> last = new HashMap<>();
        for (ConsumerRecord<String, String> r : output) {
            long seq = Long.parseLong(r.value().substring(r.value().lastIndexOf('-') + 1));
            Long before = last.put(r.partition(), seq);
            assertThat(before == null || before < seq).as("order in partition %d: %s after %s", r.partition(), seq,
                    before).isTrue();
        }
    }

    /** Produces input records "p-i" (i rising per partition) at a steady pace from a thread of its own. */
    private static final class Load implements AutoCloseable {

        private final KafkaProducer<String, String> producer;
        private final String topic;
        private final List<String> sent = Collections.synchronizedList(new ArrayList<>());
        private final AtomicBoolean running = new AtomicBoolean(true);
        private final java.util.concurrent.ScheduledExecutorService pace = Executors.newSingleThreadScheduledExecutor(
                r -> new Thread(r, "fleet-load"));
        private final AtomicLong round = new AtomicLong();
        private volatile Exception failure;

        Load(EmbeddedKafkaCluster cluster, String topic) {
            Map<String, Object> configs = cluster.clientConfigs();
            configs.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, 1);
            this.producer = new KafkaProducer<>(configs, new StringSerializer(), new StringSerializer());
            this.topic = topic;
        }

        /** One record per partition every 20 ms: a steady trickle of about 200 records a second. */
        void start() {
            this.pace.scheduleAtFixedRate(this::produceRound, 0, 20, TimeUnit.MILLISECONDS);
        }

        private void produceRound() {
            if (!this.running.get() || this.failure != null) {
                return;
            }
            long i = this.round.getAndIncrement();
            try {
                for (int p = 0; p < PARTITIONS; p++) {
                    String value = p + "-" + i;
                    this.producer.send(new ProducerRecord<>(this.topic, p, "k" + p, value)).get(30, TimeUnit.SECONDS);
                    this.sent.add(value);
                }
            }
            catch (Exception ex) {
                this.failure = ex;
            }
        }

        int stopAndCount() throws InterruptedException {
            this.running.set(false);
            this.pace.shutdown();
            assertThat(this.pace.awaitTermination(30, TimeUnit.SECONDS)).as("load stopped").isTrue();
            if (this.failure != null) {
                throw new AssertionError("The load producer failed", this.failure);
            }
            return this.sent.size();
        }

        List<String> sent() {
            return new ArrayList<>(this.sent);
        }

        @Override
        public void close() {
            this.running.set(false);
            this.pace.shutdownNow();
            this.producer.close(Duration.ofSeconds(10));
        }
    }

    private static final class NoOpListener implements SlotListener {

        @Override
        public void slotAssigned(FleetSlot slot) {
        }

        @Override
        public void slotsRevoked(List<FleetSlot> slots, boolean lost) {
        }
    }
}
