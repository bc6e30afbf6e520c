package io.github.txnsession.spring.jdbc;

import java.time.Instant;

import org.apache.kafka.clients.producer.PreparedTxnState;

/**
 * One row of the decision log: the database committed the decision to commit the Kafka transaction
 * {@code producerId:producerEpoch} of {@code transactionalId}.
 *
 * @param transactionalId the session's transactional id
 * @param producerId the prepared transaction's producer id
 * @param producerEpoch the prepared transaction's epoch
 * @param decidedAt when the row was written
 */
public record DecisionRecord(String transactionalId, long producerId, short producerEpoch, Instant decidedAt) {

    /** @return the prepared state to complete the transaction with */
    public PreparedTxnState preparedState() {
        return new PreparedTxnState(this.producerId + ":" + this.producerEpoch);
    }
}
