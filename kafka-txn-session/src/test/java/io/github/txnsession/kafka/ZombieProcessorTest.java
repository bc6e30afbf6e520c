package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import io.github.txnsession.kafka.test.ChildJvm;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.HangingTransactions;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static io.github.txnsession.kafka.TestClients.produce;
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
        List<ProducerRecord<String, String>> records = new ArrayList<>();
        for (int i = 0; i < PER_PARTITION; i++) {
            for (int p = 0; p < PARTITIONS; p++) {
                records.add(new ProducerRecord<>(input, p, "k" + p, "p" + p + "-" + i));
            }
        }
        produce(kafka.cluster(), records);

        try (ChildJvm zombie = ChildJvm.start(CtpProcess.class, kafka.bootstrapServers(), input, output, group,
                transactionalId, "-1", "200")) {
            zombie.awaitLine("ready", Duration.ofSeconds(60));
            zombie.awaitLine("mid-transaction", Duration.ofSeconds(60));
            zombie.pause(); // its sends are flushed and acknowledged; its commit has not been sent
            try (ChildJvm successor = ChildJvm.start(CtpProcess.class, kafka.bootstrapServers(), input, output,
                    group, transactionalId, "-1")) {
                successor.awaitLine("done", Duration.ofSeconds(120));
                assertThat(successor.awaitExit(Duration.ofSeconds(30))).isZero();
            }
            zombie.resume();
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
        List<TopicPartition> partitions = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            partitions.add(new TopicPartition(input, p));
            partitions.add(new TopicPartition(output, p));
        }
        HangingTransactions.assertNone(kafka.cluster().admin(), transactionalId, partitions, Duration.ofSeconds(30));
    }
}
