package io.github.txnsession.spring;

import java.nio.charset.StandardCharsets;
import java.util.Objects;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;

import org.springframework.kafka.core.KafkaOperations;

/**
 * What a {@link SessionShareListenerContainer} does with a record that failed on its last allowed delivery. It runs
 * inside a transaction of its own, in which the record is then REJECTed: whatever the handler writes through the
 * session (a dead-letter record sent with the starter's {@code KafkaTemplate}, a row through an enlisted database)
 * commits together with the rejection, or neither happens and the record is released.
 *
 * <p>Not guaranteed: the handler runs once per attempt; if its transaction fails, the record is released and the
 * broker may archive it after {@code group.share.delivery.count.limit} deliveries without the handler's output.
 *
 * @param <K> key type
 * @param <V> value type
 */
@FunctionalInterface
public interface ShareDeadLetterHandler<K, V> {

    /** Header naming the topic of the record that failed. */
    String ORIGINAL_TOPIC = "txn-session-dlt-original-topic";
    /** Header naming its partition. */
    String ORIGINAL_PARTITION = "txn-session-dlt-original-partition";
    /** Header naming its offset. */
    String ORIGINAL_OFFSET = "txn-session-dlt-original-offset";
    /** Header with its delivery count when it was dead-lettered. */
    String DELIVERY_COUNT = "txn-session-dlt-delivery-count";
    /** Header with the class of the failure. */
    String EXCEPTION = "txn-session-dlt-exception";
    /** Header with the message of the failure. */
    String EXCEPTION_MESSAGE = "txn-session-dlt-exception-message";

    /**
     * @param record the record that failed on its last allowed delivery
     * @param failure why its last attempt failed
     * @throws Exception to roll the dead-letter transaction back (the record is then released)
     */
    void deadLetter(ConsumerRecord<K, V> record, Exception failure) throws Exception;

    /**
     * Sends the failed record, key, value and headers unchanged, to {@code <topic>-dlt} with {@code template}, plus
     * headers naming where it came from and why it failed. Use a template whose producer factory is session-backed
     * (the starter's {@code KafkaTemplate}), so that the send joins the dead-letter transaction.
     *
     * @param <K> key type
     * @param <V> value type
     * @param template the template to send with; its serializers must accept the record's key and value
     * @return the handler
     */
    static <K, V> ShareDeadLetterHandler<K, V> toTopic(KafkaOperations<Object, Object> template) {
        Objects.requireNonNull(template, "template");
        return (record, failure) -> {
            ProducerRecord<Object, Object> out = new ProducerRecord<>(record.topic() + "-dlt", null, record.key(),
                    record.value());
            for (Header h : record.headers()) {
                out.headers().add(h);
            }
            out.headers()
                .add(ORIGINAL_TOPIC, bytes(record.topic()))
                .add(ORIGINAL_PARTITION, bytes(Integer.toString(record.partition())))
                .add(ORIGINAL_OFFSET, bytes(Long.toString(record.offset())))
                .add(DELIVERY_COUNT, bytes(record.deliveryCount().map(String::valueOf).orElse("?")))
                .add(EXCEPTION, bytes(failure.getClass().getName()))
                .add(EXCEPTION_MESSAGE, bytes(String.valueOf(failure.getMessage())));
            template.send(out);
        };
    }

    private static byte[] bytes(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }
}
