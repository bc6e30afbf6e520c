package io.github.txnsession.samples.orders;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

import org.springframework.kafka.core.ConsumerFactory;
import org.springframework.stereotype.Component;

/**
 * Reads a topic from the beginning to its last stable offset as a {@code read_committed} consumer: exactly what
 * downstream consumers see. Records of aborted or still-open transactions never appear.
 */
@Component
public class CommittedRecords {

    private final ConsumerFactory<?, ?> consumerFactory;

    public CommittedRecords(ConsumerFactory<?, ?> consumerFactory) {
        this.consumerFactory = consumerFactory;
    }

    /**
     * @param topic the topic to read
     * @return its committed records, in partition order
     */
    public List<CommittedRecord> read(String topic) {
        Map<String, Object> configs = new HashMap<>(this.consumerFactory.getConfigurationProperties());
        configs.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        configs.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        configs.remove(ConsumerConfig.GROUP_ID_CONFIG);
        List<CommittedRecord> result = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(configs, new StringDeserializer(),
                new StringDeserializer())) {
            List<TopicPartition> partitions = consumer.partitionsFor(topic).stream()
                .map(p -> new TopicPartition(topic, p.partition()))
                .toList();
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
            long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
            while (partitions.stream().anyMatch(tp -> consumer.position(tp) < end.get(tp))
                    && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                    result.add(new CommittedRecord(r.partition(), r.offset(), r.key(), r.value()));
                }
            }
        }
        return result;
    }

    /**
     * One committed record.
     *
     * @param partition its partition
     * @param offset its offset
     * @param key the order id
     * @param value the event
     */
    public record CommittedRecord(int partition, long offset, String key, String value) {
    }
}
