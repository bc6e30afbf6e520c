package io.github.txnsession.kafka;

import org.jspecify.annotations.Nullable;

/**
 * The producer id and epoch a live session's producer writes with, as learned from the coordinator while no
 * transaction of it was open. Used to tell the session's own transaction from another producer's (fencing) without
 * reflection into {@code KafkaProducer}.
 */
record ProducerIdentity(long producerId, short epoch) {

    /**
     * @return the identity after one of this producer's transactions that reached the coordinator ended cleanly:
     *         version 2 bumps the epoch; null when the epoch was exhausted (the coordinator moved to a new producer
     *         id, which only a new look can tell)
     */
    @Nullable ProducerIdentity afterEnd(boolean transactionVersion2) {
        if (!transactionVersion2) {
            return this;
        }
        return this.epoch >= TransactionStanding.EXHAUSTED_EPOCH ? null
                : new ProducerIdentity(this.producerId, (short) (this.epoch + 1));
    }

    @Override
    public String toString() {
        return this.producerId + ":" + this.epoch;
    }
}
