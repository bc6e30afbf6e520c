package io.github.txnsession.spring.jdbc;

import java.time.Instant;

import io.github.txnsession.kafka.PreparedTransaction;
import org.jspecify.annotations.Nullable;

/**
 * One row of the decision log: the database committed the decision to commit the prepared Kafka transaction
 * {@code producerId:producerEpoch:txnStartMs} of {@code transactionalId}.
 *
 * @param transactionalId the session's transactional id
 * @param producerId the prepared transaction's producer id
 * @param producerEpoch the prepared transaction's epoch
 * @param txnStartMs the coordinator's start time of the prepared transaction; {@value #NAMED_BY_EPOCH} for a
 *        transaction named by its epoch ({@link PreparedTransaction#isNamedByEpoch()}); or -1 for a row written
 *        before the decision log had that column (such a row completes by epoch arithmetic, see
 *        {@link PreparedTransaction})
 * @param decidedAt when the row was written
 */
public record DecisionRecord(String transactionalId, long producerId, short producerEpoch, long txnStartMs,
        Instant decidedAt) {

    /**
     * The {@code txn_start_ms} of a transaction named by its epoch ({@code pid:epoch:tv2}): it wrote and was prepared
     * under transaction version 2, so the row needs no start time.
     */
    public static final long NAMED_BY_EPOCH = -2;

    /**
     * @param transactionalId the session's transactional id
     * @param prepared the prepared transaction the decision names (not empty)
     * @param decidedAt when the decision was taken
     * @return the row naming {@code prepared}
     */
    public static DecisionRecord of(String transactionalId, PreparedTransaction prepared, Instant decidedAt) {
        return new DecisionRecord(transactionalId, prepared.producerId(), prepared.epoch(),
                prepared.isNamedByEpoch() ? NAMED_BY_EPOCH : prepared.startTimeMs(), decidedAt);
    }

    /** @return the prepared transaction to complete */
    public PreparedTransaction preparedTransaction() {
        return this.txnStartMs == NAMED_BY_EPOCH
                ? PreparedTransaction.writtenUnderVersion2(this.producerId, this.producerEpoch)
                : PreparedTransaction.of(this.producerId, this.producerEpoch, this.txnStartMs);
    }

    /** @return the value of the {@code txn_start_ms} column, or null for a legacy identity (no start time) */
    @Nullable Long startColumn() {
        return this.txnStartMs == NAMED_BY_EPOCH || this.txnStartMs >= 0 ? this.txnStartMs : null;
    }
}
