package io.github.txnsession.kafka;

import org.jspecify.annotations.Nullable;

/**
 * The producer id and epoch a live session's producer writes with, as learned from the coordinator while no
 * transaction of it was open. Used to tell the session's own transaction from another producer's (fencing) without
 * reflection into {@code KafkaProducer}.
 *
 * @param producerId the producer id
 * @param epoch the producer epoch
 * @param certain whether the epoch is known for certain: read from the coordinator, and moved on since only by commits
 *        of transactions that reached it (each bumps the epoch exactly once with transaction version 2). An abort of
 *        a transaction that wrote leaves it uncertain: whether its records reached the coordinator, and so whether
 *        the abort bumped the epoch, is not known to the client.
 */
record ProducerIdentity(long producerId, short epoch, boolean certain) {

    /** An identity just read from the coordinator. */
    ProducerIdentity(long producerId, short epoch) {
        this(producerId, epoch, true);
    }

    /**
     * @param transactionVersion2 whether the coordinator bumps the epoch at every transaction end
     * @param committed whether the transaction committed (an abort leaves the identity uncertain)
     * @return the identity after one of this producer's transactions that wrote ended cleanly: version 2 bumps the
     *         epoch; null when the epoch was exhausted (the coordinator moved to a new producer id, which only a new
     *         look can tell)
     */
    @Nullable ProducerIdentity afterEnd(boolean transactionVersion2, boolean committed) {
        if (!transactionVersion2) {
            return new ProducerIdentity(this.producerId, this.epoch, this.certain && committed);
        }
        return this.epoch >= TransactionStanding.EXHAUSTED_EPOCH ? null
                : new ProducerIdentity(this.producerId, (short) (this.epoch + 1), this.certain && committed);
    }

    @Override
    public String toString() {
        return this.producerId + ":" + this.epoch;
    }
}
