package io.github.txnsession.samples.paymentservice;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import tools.jackson.databind.json.JsonMapper;

import org.springframework.kafka.core.ConsumerFactory;
import org.springframework.stereotype.Component;

/**
 * Lists the {@link PaymentCaptured} events that a downstream {@code read_committed} consumer sees: the topic from the
 * beginning up to each partition's last stable offset. Events of rolled-back payments never appear; events of a
 * transaction still being committed appear once its commit markers are written (milliseconds later).
 * A fresh, group-less consumer per call: fine for a sample, not for a large topic.
 */
@Component
public class PaymentCapturedEvents {

    private static final Duration READ_LIMIT = Duration.ofSeconds(10);

    private final ConsumerFactory<?, ?> consumerFactory;
    private final JsonMapper json;

    public PaymentCapturedEvents(ConsumerFactory<?, ?> consumerFactory, JsonMapper json) {
        this.consumerFactory = consumerFactory;
        this.json = json;
    }

    /** @return the committed events, partition by partition in offset order */
    public List<PublishedEvent> committed() {
        return read(IsolationLevel.READ_COMMITTED);
    }

    /**
     * @param isolation {@code READ_COMMITTED}: what downstream consumers see; {@code READ_UNCOMMITTED}: everything in
     *        the log, the events of aborted and still open transactions included
     * @return the events up to the end offsets the consumer reports for {@code isolation}, partition by partition
     */
    List<PublishedEvent> read(IsolationLevel isolation) {
        Map<String, Object> configs = new HashMap<>(this.consumerFactory.getConfigurationProperties());
        configs.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation.toString().toLowerCase(Locale.ROOT));
        configs.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        configs.remove(ConsumerConfig.GROUP_ID_CONFIG);
        List<PublishedEvent> events = new ArrayList<>();
        try (Consumer<String, String> consumer = new KafkaConsumer<>(configs, new StringDeserializer(),
                new StringDeserializer())) {
            List<TopicPartition> partitions = consumer.partitionsFor(PaymentServiceApplication.PAYMENT_CAPTURED)
                .stream()
                .map(info -> new TopicPartition(info.topic(), info.partition()))
                .toList();
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            // for a read_committed consumer the end offsets are the last stable offsets
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
            long deadline = System.nanoTime() + READ_LIMIT.toNanos();
            while (partitions.stream().anyMatch(tp -> consumer.position(tp) < end.get(tp))) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("Could not read " + PaymentServiceApplication.PAYMENT_CAPTURED
                            + " up to its end offsets " + end + " (" + isolation + ") within " + READ_LIMIT);
                }
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                    events.add(new PublishedEvent(r.partition(), r.offset(), r.key(),
                            this.json.readValue(r.value(), PaymentCaptured.class)));
                }
            }
        }
        return events;
    }

    /**
     * One event and where it is.
     *
     * @param partition its partition
     * @param offset its offset
     * @param key the order id
     * @param event the event
     */
    public record PublishedEvent(int partition, long offset, String key, PaymentCaptured event) {
    }
}
