package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/** Test helpers: session configs and read_committed reads of whole topics. */
final class TestClients {

    private TestClients() {
    }

    static Map<String, Object> sessionConfigs(EmbeddedKafkaCluster kafka, String transactionalId) {
        Map<String, Object> configs = new HashMap<>();
        configs.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
        configs.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        configs.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        return configs;
    }

    /** Reads every committed record of the topics from the beginning up to the last stable offset. */
    static List<ConsumerRecord<String, String>> readCommitted(EmbeddedKafkaCluster kafka, String... topics) {
        Map<String, Object> configs = new HashMap<>();
        configs.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
        configs.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        configs.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(configs, new StringDeserializer(),
                new StringDeserializer())) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (String topic : topics) {
                consumer.partitionsFor(topic).forEach(p -> partitions.add(new TopicPartition(topic, p.partition())));
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
            long deadline = System.currentTimeMillis() + 30_000;
            while (!reached(consumer, end)) {
                if (System.currentTimeMillis() > deadline) {
                    throw new AssertionError("Could not read up to " + end + " within 30 s");
                }
                consumer.poll(Duration.ofMillis(100)).forEach(out::add);
            }
        }
        return out;
    }

    static List<String> values(Collection<ConsumerRecord<String, String>> records) {
        return records.stream().map(ConsumerRecord::value).collect(Collectors.toList());
    }

    private static boolean reached(KafkaConsumer<?, ?> consumer, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
            if (consumer.position(e.getKey()) < e.getValue()) {
                return false;
            }
        }
        return true;
    }
}
