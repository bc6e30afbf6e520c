package io.github.txnsession.spring.jdbc;

import java.time.Instant;

import io.github.txnsession.kafka.PreparedTransaction;

/**
 * One row of the decision log: the database committed the decision to commit the prepared Kafka transaction
 * {@code producerId:producerEpoch:txnStartMs} of {@code transactionalId}.
 *
 * @param transactionalId the session's transactional id
 * @param producerId the prepared transaction's producer id
 * @param producerEpoch the prepared transaction's epoch
 * @param txnStartMs the coordinator's start time of the prepared transaction, or -1 for a row written before the
 *        decision log had that column (such a row completes by epoch arithmetic, see {@link PreparedTransaction})
 * @param decidedAt when the row was written
 */
public record DecisionRecord(String transactionalId, long producerId, short producerEpoch, long txnStartMs,
        Instant decidedAt) {

    /** @return the prepared transaction to complete */
    public PreparedTransaction preparedTransaction() {
        return PreparedTransaction.of(this.producerId, this.producerEpoch, this.txnStartMs);
    }
}
