package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import io.github.txnsession.kafka.test.ChildJvm;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.HangingTransactions;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static io.github.txnsession.kafka.TestClients.produceNumbered;
import static io.github.txnsession.kafka.TestClients.readCommitted;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * A zombie processor (issue R3): a consume-transform-produce process ({@link CtpProcess}) is frozen with SIGSTOP in
 * the middle of a transaction whose sends the brokers have already acknowledged. A successor with the same
 * transactional id and the same static group member id takes over and processes everything. Then the zombie runs on:
 * its next call must fail with {@link SessionFencedException} (the process prints which exception ended it), and
 * nothing it wrote is ever visible to a {@code read_committed} reader: every input exactly once, in order.
 */
class ZombieProcessorTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    private static final int PARTITIONS = 2;
    private static final int PER_PARTITION = 300;

    @Test
    void aFrozenProcessorThatWakesUpAfterItsSuccessorIsFencedAndInvisible() {
        String input = EmbeddedKafkaCluster.uniqueName("zombie-in");
        String output = EmbeddedKafkaCluster.uniqueName("zombie-out");
        String group = EmbeddedKafkaCluster.uniqueName("zombie-group");
        String transactionalId = EmbeddedKafkaCluster.uniqueName("zombie-processor");
        kafka.cluster().createTopics(PARTITIONS, input, output);
        produceNumbered(kafka.cluster(), input, PARTITIONS, PER_PARTITION);

        try (ChildJvm zombie = ChildJvm.start(CtpProcess.class, kafka.bootstrapServers(), input, output, group,
                transactionalId, "-1", "200")) {
            zombie.awaitLine("ready", Duration.ofSeconds(60));
            zombie.awaitLine("mid-transaction", Duration.ofSeconds(60));
            zombie.pause(); // its sends are flushed and acknowledged; it waits for our line before committing
            try (ChildJvm successor = ChildJvm.start(CtpProcess.class, kafka.bootstrapServers(), input, output,
                    group, transactionalId, "-1")) {
                successor.awaitLine("done", Duration.ofSeconds(120));
                assertThat(successor.awaitExit(Duration.ofSeconds(30))).isZero();
            }
            zombie.resume();
            zombie.send("go"); // commit now
            String failure = zombie.awaitLine("failed", Duration.ofSeconds(60));
            assertThat(failure).as("how the zombie learned it lost its id").startsWith(
                    "failed " + SessionFencedException.class.getSimpleName());
            assertThat(zombie.awaitExit(Duration.ofSeconds(30))).isEqualTo(2);
            List<String> lines = zombie.output();
            assertThat(lines.subList(lines.indexOf("mid-transaction"), lines.size()))
                .as("the zombie committed nothing after waking up").noneMatch(line -> line.startsWith("committed"));
        }

        Map<Integer, List<String>> perPartition = new LinkedHashMap<>();
        for (ConsumerRecord<String, String> r : readCommitted(kafka.cluster(), output)) {
            perPartition.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.value());
        }
        for (int p = 0; p < PARTITIONS; p++) {
            List<String> expected = new ArrayList<>();
            for (int i = 0; i < PER_PARTITION; i++) {
                expected.add("out-p" + p + "-" + i);
            }
            assertThat(perPartition.get(p)).as("partition %d: every input once, in order", p)
                .containsExactlyElementsOf(expected);
        }
        assertThat(dataRecordsInTheLog(output)).as("the zombie's flushed records are in the log, aborted")
            .isGreaterThan(PARTITIONS * PER_PARTITION);
        List<TopicPartition> partitions = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            partitions.add(new TopicPartition(output, p));
        }
        partitions.addAll(HangingTransactions.offsetsTopicPartitions(kafka.cluster().admin()));
        HangingTransactions.assertNone(kafka.cluster().admin(), transactionalId, partitions, Duration.ofSeconds(30));
    }

    /** @return how many data records the topic holds, aborted ones included (read_uncommitted up to the end) */
    private static int dataRecordsInTheLog(String topic) {
        Map<String, Object> configs = kafka.cluster().clientConfigs();
        configs.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted");
        int count = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(configs, new StringDeserializer(),
                new StringDeserializer())) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < PARTITIONS; p++) {
                tps.add(new TopicPartition(topic, p));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (tps.stream().anyMatch(tp -> consumer.position(tp) < end.get(tp)) && System.nanoTime() < deadline) {
                count += consumer.poll(Duration.ofMillis(200)).count();
            }
        }
        return count;
    }
}
