package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** Test helpers: session configs and read_committed reads of whole topics. */
final class TestClients {

    private TestClients() {
    }

    static Map<String, Object> sessionConfigs(EmbeddedKafkaCluster kafka, String transactionalId) {
        Map<String, Object> configs = kafka.clientConfigs();
        configs.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        configs.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        return configs;
    }

    /**
     * Produces {@code perPartition} records to each partition of {@code topic}: key {@code k<p>}, value
     * {@code p<p>-<i>}, in order.
     */
    static void produceNumbered(EmbeddedKafkaCluster kafka, String topic, int partitions, int perPartition) {
        List<ProducerRecord<String, String>> records = new ArrayList<>();
        for (int i = 0; i < perPartition; i++) {
            for (int p = 0; p < partitions; p++) {
                records.add(new ProducerRecord<>(topic, p, "k" + p, "p" + p + "-" + i));
            }
        }
        produce(kafka, records);
    }

    /** Reads every committed record of the topics from the beginning up to the last stable offset. */
    static List<ConsumerRecord<String, String>> readCommitted(EmbeddedKafkaCluster kafka, String... topics) {
        return kafka.readCommitted(topics);
    }

    /** Consumer configs for exactly-once reading: group, read_committed, no auto commit, from the beginning. */
    static Map<String, Object> consumerConfigs(EmbeddedKafkaCluster kafka, String group) {
        Map<String, Object> configs = kafka.clientConfigs();
        configs.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        configs.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        configs.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        configs.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        configs.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        configs.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        return configs;
    }

    /** Share consumer configs (String keys and values); the acknowledgement mode is left to the caller. */
    static Map<String, Object> shareConsumerConfigs(EmbeddedKafkaCluster kafka, String group) {
        Map<String, Object> configs = kafka.clientConfigs();
        configs.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        configs.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        configs.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        return configs;
    }

    /** Whether the share group acknowledged (or archived) every record of {@code topic}. */
    static boolean everyRecordAcknowledged(EmbeddedKafkaCluster kafka, String group, String topic) throws Exception {
        var starts = kafka.admin()
            .listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
            .partitionsToOffsetInfo(group).get();
        Map<TopicPartition, Long> next = new HashMap<>();
        for (ConsumerRecord<String, String> r : readCommitted(kafka, topic)) {
            next.merge(new TopicPartition(r.topic(), r.partition()), r.offset() + 1, Math::max);
        }
        return next.entrySet().stream().allMatch(e -> {
            var info = starts.get(e.getKey());
            // the persisted start offset may lag behind the last acknowledgements; the lag does not
            return info != null && (info.startOffset() >= e.getValue() || info.lag().orElse(-1L) == 0);
        });
    }

    /** Sets share-group configs with Admin (e.g. share.auto.offset.reset=earliest, which DESIGN §5 needs). */
    static void setGroupConfigs(EmbeddedKafkaCluster kafka, String group, Map<String, String> groupConfigs) {
        List<AlterConfigOp> ops = new ArrayList<>();
        groupConfigs.forEach((k, v) -> ops.add(new AlterConfigOp(new ConfigEntry(k, v), AlterConfigOp.OpType.SET)));
        try {
            kafka.admin().incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, group), ops))
                .all().get(30, java.util.concurrent.TimeUnit.SECONDS);
        }
        catch (Exception ex) {
            throw new IllegalStateException("Could not set group configs " + groupConfigs + " of " + group, ex);
        }
    }

    /** Sends the records with a plain idempotent producer and waits until all are acknowledged. */
    static void produce(EmbeddedKafkaCluster kafka, List<ProducerRecord<String, String>> records) {
        Map<String, Object> configs = kafka.clientConfigs();
        configs.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        configs.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 10_000);
        // one request in flight: with more, a first request refused as NOT_LEADER_OR_FOLLOWER by a just-created
        // partition can be overtaken by the next one and then fail forever with OUT_OF_ORDER_SEQUENCE_NUMBER
        // (KAFKA-15591, seen here on 4.2.2)
        configs.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, 1);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(configs, new StringSerializer(),
                new StringSerializer())) {
            List<java.util.concurrent.Future<?>> sent = new ArrayList<>();
            records.forEach(r -> sent.add(producer.send(r)));
            producer.flush();
            for (java.util.concurrent.Future<?> f : sent) {
                f.get(30, java.util.concurrent.TimeUnit.SECONDS);
            }
        }
        catch (Exception ex) {
            throw new IllegalStateException("Could not produce the test input", ex);
        }
    }

    /** @return the group's committed offsets, as Admin reports them */
    static Map<TopicPartition, Long> committedOffsets(EmbeddedKafkaCluster kafka, String group) {
        try {
            Map<TopicPartition, OffsetAndMetadata> offsets = kafka.admin().listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get(30, java.util.concurrent.TimeUnit.SECONDS);
            Map<TopicPartition, Long> out = new HashMap<>();
            offsets.forEach((tp, om) -> {
                if (om != null) {
                    out.put(tp, om.offset());
                }
            });
            return out;
        }
        catch (Exception ex) {
            throw new IllegalStateException("Could not read the offsets of group " + group, ex);
        }
    }

    static List<String> values(Collection<ConsumerRecord<String, String>> records) {
        return records.stream().map(ConsumerRecord::value).collect(Collectors.toList());
    }
}
