package io.github.txnsession.kafka;

import org.apache.kafka.clients.consumer.ConsumerRecord;

/** A share-group record's coordinates: topic, partition, offset. */
record ShareRecordId(String topic, int partition, long offset) {

    static ShareRecordId of(ConsumerRecord<?, ?> record) {
        return new ShareRecordId(record.topic(), record.partition(), record.offset());
    }

    @Override
    public String toString() {
        return this.topic + "-" + this.partition + "@" + this.offset;
    }
}
