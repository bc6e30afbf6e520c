package io.github.txnsession.kafka;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * One acknowledgement of a share-group record: which record (topic, partition, offset) and how it is acknowledged.
 * The value handed to {@link TransactionSession#addShareAcksToTransaction(String, java.util.Collection)}.
 *
 * <p>Guarantees: immutable, with value equality. Only the final types ({@link AcknowledgeType#ACCEPT},
 * {@link AcknowledgeType#RELEASE}, {@link AcknowledgeType#REJECT}) can be part of a transaction; a
 * {@link AcknowledgeType#RENEW} is rejected here because a lock renewal cannot wait for a commit (use
 * {@link TransactionalShareConsumer#acknowledge(ConsumerRecord, AcknowledgeType)} with RENEW, which sends it at once).
 *
 * <p>Not guaranteed: that the record exists or was delivered to anybody; the session checks that against its bound
 * share consumers when the acknowledgement is added.
 *
 * @param topic the record's topic
 * @param partition the record's partition
 * @param offset the record's offset
 * @param type ACCEPT, RELEASE or REJECT
 */
public record ShareAcknowledgement(String topic, int partition, long offset, AcknowledgeType type) {

    /**
     * Checks the fields; see the class description.
     *
     * @param topic the record's topic; not null
     * @param partition the record's partition; at least 0
     * @param offset the record's offset; at least 0
     * @param type ACCEPT, RELEASE or REJECT; not null
     * @throws IllegalArgumentException for a negative partition or offset, or for {@link AcknowledgeType#RENEW}
     */
    public ShareAcknowledgement {
        Objects.requireNonNull(topic, "topic");
        Objects.requireNonNull(type, "type");
        if (partition < 0 || offset < 0) {
            throw new IllegalArgumentException("A share acknowledgement needs a partition and an offset >= 0, got "
                    + topic + "-" + partition + "@" + offset);
        }
        if (type == AcknowledgeType.RENEW) {
            throw new IllegalArgumentException("RENEW cannot be part of a transaction: it extends an acquisition lock "
                    + "now, not at commit. Call TransactionalShareConsumer.acknowledge(record, RENEW) or heartbeat() "
                    + "instead.");
        }
    }

    /**
     * @param record the delivered record to acknowledge; not null
     * @param type ACCEPT, RELEASE or REJECT; not null
     * @return an acknowledgement of {@code record} with {@code type}
     * @throws IllegalArgumentException for {@link AcknowledgeType#RENEW}
     */
    public static ShareAcknowledgement of(ConsumerRecord<?, ?> record, AcknowledgeType type) {
        Objects.requireNonNull(record, "record");
        return new ShareAcknowledgement(record.topic(), record.partition(), record.offset(), type);
    }

    /**
     * @param records the delivered records to acknowledge; not null, nor any of its elements; may be empty
     * @param type ACCEPT, RELEASE or REJECT, the same for every record; not null
     * @return one acknowledgement with {@code type} per record, in the records' order (an unmodifiable list)
     * @throws IllegalArgumentException for {@link AcknowledgeType#RENEW}, when there is at least one record
     */
    public static List<ShareAcknowledgement> fromRecords(Iterable<? extends ConsumerRecord<?, ?>> records,
            AcknowledgeType type) {
        Objects.requireNonNull(records, "records");
        Objects.requireNonNull(type, "type");
        List<ShareAcknowledgement> acks = new ArrayList<>();
        for (ConsumerRecord<?, ?> record : records) {
            acks.add(of(record, type));
        }
        return List.copyOf(acks);
    }

    /** @return {@code topic-partition@offset}, the record this acknowledgement is for */
    public String recordId() {
        return this.topic + "-" + this.partition + "@" + this.offset;
    }
}
