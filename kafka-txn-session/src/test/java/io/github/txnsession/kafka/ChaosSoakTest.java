package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The chaos soak of the core path (issue R2, R3, R6 at once): consume-transform-produce through bound
 * {@link TransactionalConsumer}s and sessions on a 3-broker cluster (replication 3, {@code min.insync.replicas=2}),
 * while one random fault after another hits it, every 1 to 3 seconds:
 * <ul>
 * <li>a broker stops without a controlled shutdown and restarts: the transaction coordinator of a processor's id, the
 * group coordinator, or any broker;</li>
 * <li>a processor crashes between its sends and its commit: its session and consumer close without ending the
 * transaction, and it starts over with a new session of the same transactional id, as a restarted process would;</li>
 * <li>a processor pauses between its sends and its commit for longer than {@code max.poll.interval.ms} (a long GC
 * pause): the group moves its partitions on, and the transaction it commits afterwards read from partitions it lost;</li>
 * <li>a processor joins or leaves the group.</li>
 * </ul>
 * Checked all along: what a concurrent {@code read_committed} reader has seen is, per partition, the input's prefix in
 * order (no duplicate, no gap, no reordering, at every moment), and no stall over 60 s. At the end: every input
 * exactly once and in order, the reader saw the same, no hanging transaction.
 *
 * <p>Duration: {@code -Dtxnsession.chaos.seconds=S} of load at 40 records a second (default 20; the {@code chaos-full}
 * profile runs 600). The test prints the counts: transactions, aborts, faults of each kind.
 */
class ChaosSoakTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(b -> b.brokers(3)
        .brokerProperty("min.insync.replicas", 2)
        .brokerProperty("controlled.shutdown.enable", false));

    private static final int PARTITIONS = 6;
    private static final int RATE = 40;
    private static final Duration MAX_STALL = Duration.ofSeconds(60);

    @Test
    void everyInputExactlyOnceThroughRandomFaults() throws Exception {
        int seconds = Integer.getInteger("txnsession.chaos.seconds", 20);
        long seed = Long.getLong("txnsession.chaos.seed", System.nanoTime());
        Random random = new Random(seed);
        String input = EmbeddedKafkaCluster.uniqueName("chaos-in");
        String output = EmbeddedKafkaCluster.uniqueName("chaos-out");
        String group = EmbeddedKafkaCluster.uniqueName("chaos-group");
        String idPrefix = EmbeddedKafkaCluster.uniqueName("chaos-processor");
        kafka.cluster().admin().createTopics(List.of(new NewTopic(input, PARTITIONS, (short) 3),
                new NewTopic(output, PARTITIONS, (short) 3))).all().get();
        // a paused processor loses its partitions after 3 s without a poll
        Map<String, Object> consumer = Map.of(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, 3_000,
                ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 20);

        CtpLoad load = new CtpLoad(kafka.cluster(), input, output, PARTITIONS, seconds * RATE / PARTITIONS);
        List<CtpLoad.Processor> running = new ArrayList<>();
        List<CtpLoad.Processor> all = new ArrayList<>();
        Map<String, Integer> faults = new TreeMap<>();
        List<String> history = new ArrayList<>();
        int started = 0;
        try {
            Future<?> feeding = load.feed(RATE);
            CtpLoad.Reader reader = load.startReader();
            for (int i = 0; i < 2; i++) {
                running.add(load.startProcessor(group, idPrefix + "-" + started++, consumer));
            }
            all.addAll(running);
            org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(60)).until(() -> load.committed.get() > 0);
            while (!load.done()) {
                load.assertNoneFailed(feeding);
                assertThat(load.sinceLastProgress()).as("no progress for too long; faults so far %s (seed %d)",
                        history, seed).isLessThan(MAX_STALL);
                assertPrefixesInOrder(reader, load, "seed " + seed + ", faults " + history);
                // the first three are one of each of the faults that hit a transaction or a coordinator, then at random
                int pick = history.size() < 3 ? new int[] { 2, 3, 0 }[history.size()] : random.nextInt(6);
                String fault = switch (pick) {
                    case 0, 1 -> bounce(random, running, group, load);
                    case 2 -> {
                        target(running, random, history.size() < 3).injectFault(Duration.ZERO);
                        yield "crash";
                    }
                    case 3 -> {
                        target(running, random, history.size() < 3).injectFault(
                                Duration.ofMillis(3_500 + random.nextInt(2_000)));
                        yield "pause";
                    }
                    default -> {
                        if (running.size() == 1 || (running.size() < 4 && random.nextBoolean())) {
                            CtpLoad.Processor joining = load.startProcessor(group, idPrefix + "-" + started++,
                                    consumer);
                            running.add(joining);
                            all.add(joining);
                            yield "join";
                        }
                        running.remove(random.nextInt(running.size())).stop();
                        yield "leave";
                    }
                };
                faults.merge(fault.contains(":") ? "bounce" : fault, 1, Integer::sum);
                history.add(fault + "@" + load.committed.get());
                pauseUnlessDone(load, 1_000 + random.nextInt(2_000));
            }
            for (CtpLoad.Processor p : running) {
                p.stop();
            }
            feeding.get(1, TimeUnit.MINUTES);
            if (!kafka.cluster().stoppedBrokers().isEmpty()) {
                kafka.cluster().restartBrokers(kafka.cluster().stoppedBrokers());
            }
            assertPrefixesInOrder(reader, load, "seed " + seed);
            load.assertExactlyOnce(reader, idPrefix, "seed " + seed + ", faults " + history);
        }
        finally {
            load.shutdown();
            if (!kafka.cluster().stoppedBrokers().isEmpty()) {
                kafka.cluster().restartBrokers(kafka.cluster().stoppedBrokers());
            }
        }
        int transactions = all.stream().mapToInt(p -> p.transactions.get()).sum();
        int aborts = all.stream().mapToInt(p -> p.aborts.get()).sum();
        int crashes = all.stream().mapToInt(p -> p.crashes.get()).sum();
        int pauses = all.stream().mapToInt(p -> p.pauses.get()).sum();
        System.out.printf("chaos soak: %d records exactly once in %d s, %d transactions, %d aborted; faults %s "
                + "(crashes and pauses that hit a transaction: %d, %d), %d processors, longest gap between commits "
                + "%d ms, violations 0 (seed %d)%n", load.total(), seconds, transactions, aborts, faults, crashes,
                pauses, started, load.longestGapMs.get(), seed);
        assertThat(faults).as("faults injected").containsKey("bounce");
        assertThat(crashes).as("crashes that hit a transaction").isPositive();
        assertThat(pauses).as("pauses that hit a transaction").isPositive();
    }

    /**
     * @param busiest true to pick the processor that has committed most so far (the first faults must hit a
     *        transaction: a processor without partitions runs none)
     * @return the processor a crash or pause goes to
     */
    private static CtpLoad.Processor target(List<CtpLoad.Processor> running, Random random, boolean busiest) {
        if (busiest) {
            return running.stream().max(java.util.Comparator.comparingInt(p -> p.transactions.get())).orElseThrow();
        }
        return running.get(random.nextInt(running.size()));
    }

    /** Stops and restarts one broker: a processor's transaction coordinator, the group coordinator, or any. */
    private static String bounce(Random random, List<CtpLoad.Processor> running, String group, CtpLoad load)
            throws Exception {
        Bounces.awaitFullyReplicated(kafka.cluster(), load.input, load.output);
        int role = random.nextInt(3);
        String id = running.get(random.nextInt(running.size())).transactionalId();
        Integer broker = Bounces.coordinator(kafka.cluster(), role, id, group);
        if (broker == null) {
            role = 2;
            broker = kafka.cluster().brokerIds().stream().skip(random.nextInt(3)).findFirst().orElseThrow();
        }
        kafka.cluster().stopBroker(broker);
        pauseUnlessDone(load, 500 + random.nextInt(1_500));
        kafka.cluster().restartBroker(broker);
        return (role == 0 ? "txn" : role == 1 ? "group" : "any") + ":" + broker;
    }

    /**
     * The invariant a {@code read_committed} reader must see at every moment: per partition, a prefix of the input in
     * order, without duplicates or gaps.
     */
    private static void assertPrefixesInOrder(CtpLoad.Reader reader, CtpLoad load, String context) {
        reader.seen().forEach((partition, values) -> {
            for (int i = 0; i < values.size(); i++) {
                assertThat(values.get(i)).as("record %d of partition %d seen by the concurrent reader (%s)", i,
                        partition, context).isEqualTo("out-p" + partition + "-" + i);
            }
        });
        assertThat(reader.seen().values().stream().mapToInt(List::size).sum()).as("seen <= input (%s)", context)
            .isLessThanOrEqualTo(load.total());
    }

    private static void pauseUnlessDone(CtpLoad load, long millis) {
        long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        while (!load.done() && System.nanoTime() < until) {
            java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(50)); // pacing the faults
        }
    }
}
