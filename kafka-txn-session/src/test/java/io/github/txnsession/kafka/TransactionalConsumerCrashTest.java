package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

import io.github.txnsession.kafka.test.ChildJvm;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static io.github.txnsession.kafka.TestClients.committedOffsets;
import static io.github.txnsession.kafka.TestClients.produceNumbered;
import static io.github.txnsession.kafka.TestClients.readCommitted;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * Exactly-once consume-transform-produce across real crashes: a processor in a child JVM ({@link CtpProcess}) reads
 * 1,000 records in batches of 50 through a bound {@link TransactionalConsumer}, writes one output per input and
 * commits, and is killed three times at random points (twice by {@code Runtime.halt} in the middle of a transaction,
 * once by SIGKILL from the test at a random commit), then restarted to finish. The output read with
 * {@code read_committed} must hold every input exactly once, in order per partition, and the group's committed
 * offsets must be at the end of the input.
 *
 * <p>Repetitions: {@code -Dtxnsession.crash.repetitions=N} (default 1; the {@code crash-full} Maven profile runs 10).
 */
class TransactionalConsumerCrashTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    private static final int PARTITIONS = 4;
    private static final int PER_PARTITION = 250;
    private static final int TOTAL = PARTITIONS * PER_PARTITION;

    @Test
    void everyInputExactlyOnceAcrossThreeKills() {
        int repetitions = Integer.getInteger("txnsession.crash.repetitions", 1);
        long seed = Long.getLong("txnsession.crash.seed", System.nanoTime());
        Random random = new Random(seed);
        for (int run = 1; run <= repetitions; run++) {
            long started = System.nanoTime();
            List<String> kills = oneRun(random);
            System.out.printf("ctp crash run %d/%d (seed %d): kills %s, 1000 inputs exactly once, %d ms%n", run,
                    repetitions, seed, kills, (System.nanoTime() - started) / 1_000_000);
        }
    }

    private List<String> oneRun(Random random) {
        String input = EmbeddedKafkaCluster.uniqueName("crash-in");
        String output = EmbeddedKafkaCluster.uniqueName("crash-out");
        String group = EmbeddedKafkaCluster.uniqueName("crash-group");
        String transactionalId = EmbeddedKafkaCluster.uniqueName("crash-processor");
        kafka.cluster().createTopics(PARTITIONS, input, output);
        produceNumbered(kafka.cluster(), input, PARTITIONS, PER_PARTITION);

        List<String> kills = new ArrayList<>();
        // kill 1 and 3: the child halts itself mid-transaction after a random number of sends of this run
        // kill 2: SIGKILL from here once the child reported a random number of commits
        for (int kill = 1; kill <= 3; kill++) {
            boolean selfHalt = kill != 2;
            int haltAfter = selfHalt ? 1 + random.nextInt(300) : -1;
            try (ChildJvm child = ChildJvm.start(CtpProcess.class, kafka.bootstrapServers(), input, output, group,
                    transactionalId, String.valueOf(haltAfter))) {
                child.awaitLine("ready", Duration.ofSeconds(60));
                if (selfHalt) {
                    String line = child.awaitLine("halting", Duration.ofSeconds(120));
                    assertThat(child.awaitExit(Duration.ofSeconds(30))).isEqualTo(3);
                    kills.add("halt(" + line.substring("halting after ".length(), line.indexOf(" sends")) + " sends)");
                }
                else {
                    int commits = 1 + random.nextInt(5);
                    for (int i = 0; i < commits; i++) {
                        child.awaitLine("committed", Duration.ofSeconds(120));
                    }
                    child.kill();
                    kills.add("kill -9(after " + commits + " commits)");
                }
            }
        }
        try (ChildJvm last = ChildJvm.start(CtpProcess.class, kafka.bootstrapServers(), input, output, group,
                transactionalId, "-1")) {
            last.awaitLine("done", Duration.ofSeconds(180));
            assertThat(last.awaitExit(Duration.ofSeconds(60))).isZero();
        }

        Map<Integer, List<String>> actual = new HashMap<>();
        for (ConsumerRecord<String, String> r : readCommitted(kafka.cluster(), output)) {
            actual.computeIfAbsent(r.partition(), p -> new ArrayList<>()).add(r.value());
        }
        int total = 0;
        Map<TopicPartition, Long> expectedOffsets = new HashMap<>();
        for (int p = 0; p < PARTITIONS; p++) {
            List<String> expected = new ArrayList<>();
            for (int i = 0; i < PER_PARTITION; i++) {
                expected.add("out-p" + p + "-" + i);
            }
            assertThat(actual.getOrDefault(p, List.of())).as("output partition %d after kills %s", p, kills)
                .isEqualTo(expected);
            total += expected.size();
            expectedOffsets.put(new TopicPartition(input, p), (long) PER_PARTITION);
        }
        assertThat(total).isEqualTo(TOTAL);
        await().atMost(Duration.ofSeconds(10))
            .untilAsserted(() -> assertThat(committedOffsets(kafka.cluster(), group)).isEqualTo(expectedOffsets));
        return kills;
    }
}
