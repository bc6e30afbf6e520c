package io.github.txnsession.boot;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/** Reads topics from the beginning as a read_committed (or read_uncommitted) consumer, for assertions. */
public final class CommittedReader {

    /**
     * For the tests of an application without a database: this module's test classpath has JDBC and JPA (for the
     * tests of applications with one), which Boot would otherwise configure.
     */
    static final String KAFKA_ONLY = "spring.autoconfigure.exclude="
            + "org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration,"
            + "org.springframework.boot.hibernate.autoconfigure.HibernateJpaAutoConfiguration";

    private CommittedReader() {
    }

    /**
     * Reads {@code topic} from the start until {@code done} holds for everything read so far (or 30 s pass).
     *
     * @return every record read
     */
    static List<ConsumerRecord<String, String>> readUntil(String bootstrap, String topic, boolean committedOnly,
            Predicate<List<ConsumerRecord<String, String>>> done) {
        List<ConsumerRecord<String, String>> all = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = openAtBeginning(bootstrap, topic, committedOnly)) {
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (!done.test(all)) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("Gave up reading " + topic + " after 30 s; read " + all.size()
                            + " record(s): " + all);
                }
                consumer.poll(Duration.ofMillis(100)).forEach(all::add);
            }
        }
        return all;
    }

    /**
     * Reads {@code topic} from the start to its end as this isolation level sees it now (the last stable offset for
     * read_committed, the high watermark otherwise).
     */
    public static List<ConsumerRecord<String, String>> readToEnd(String bootstrap, String topic, boolean committedOnly) {
        List<ConsumerRecord<String, String>> all = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = openAtBeginning(bootstrap, topic, committedOnly)) {
            List<TopicPartition> partitions = List.copyOf(consumer.assignment());
            Map<TopicPartition, Long> end = committedOnly ? settledEnd(bootstrap, consumer, partitions)
                    : consumer.endOffsets(partitions);
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (partitions.stream().anyMatch(tp -> consumer.position(tp) < end.get(tp))) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("Gave up reading " + topic + " to " + end + " after 30 s");
                }
                consumer.poll(Duration.ofMillis(100)).forEach(all::add);
            }
        }
        return all;
    }

    /**
     * The last stable offsets, after giving a transaction that has just committed up to 1 s for its markers: a commit
     * returns once the coordinator accepted it, and the markers that move the last stable offset follow (read right
     * after a commit, a read_committed reader could otherwise stop before the committed records). A transaction left
     * open on purpose keeps its partition's last stable offset where it is, and the read ends there.
     */
    private static Map<TopicPartition, Long> settledEnd(String bootstrap, KafkaConsumer<String, String> consumer,
            List<TopicPartition> partitions) {
        Map<TopicPartition, Long> highWatermarks;
        try (KafkaConsumer<String, String> uncommitted = new KafkaConsumer<>(Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted"), new StringDeserializer(),
                new StringDeserializer())) {
            highWatermarks = uncommitted.endOffsets(partitions);
        }
        java.util.concurrent.atomic.AtomicReference<Map<TopicPartition, Long>> stable =
                new java.util.concurrent.atomic.AtomicReference<>(consumer.endOffsets(partitions));
        try {
            org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(1)).pollInterval(Duration.ofMillis(20))
                .until(() -> {
                    stable.set(consumer.endOffsets(partitions));
                    // at or past: a marker written after the high watermarks were read moves the stable end past them
                    return partitions.stream().allMatch(tp -> stable.get().get(tp) >= highWatermarks.get(tp));
                });
        }
        catch (org.awaitility.core.ConditionTimeoutException openOnPurpose) {
            // a transaction is still open: read to its last stable offset
        }
        return stable.get();
    }

    /** A consumer of every partition of {@code topic}, positioned at the beginning, with the isolation level asked. */
    private static KafkaConsumer<String, String> openAtBeginning(String bootstrap, String topic,
            boolean committedOnly) {
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                ConsumerConfig.ISOLATION_LEVEL_CONFIG, committedOnly ? "read_committed" : "read_uncommitted",
                ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false,
                // a fetch at the end of a partition waits this long for new data (500 ms by default)
                ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 20), new StringDeserializer(), new StringDeserializer());
        List<TopicPartition> partitions = consumer.partitionsFor(topic).stream()
            .map(p -> new TopicPartition(topic, p.partition()))
            .toList();
        consumer.assign(partitions);
        consumer.seekToBeginning(partitions);
        return consumer;
    }

    /** Reads committed records until one with key {@code markerKey} has been read. */
    static List<ConsumerRecord<String, String>> readThroughMarker(String bootstrap, String topic, String markerKey) {
        return readUntil(bootstrap, topic, true, records -> records.stream().anyMatch(r -> markerKey.equals(r.key())));
    }

    static List<String> valuesOfKey(List<ConsumerRecord<String, String>> records, String key) {
        return records.stream().filter(r -> key.equals(r.key())).map(ConsumerRecord::value).toList();
    }
}
