package io.github.txnsession.spring.jdbc;

/**
 * A transaction whose database side committed but whose Kafka side did not, and cannot any more: the coordinator
 * aborted it (usually {@code transaction.timeout.ms} passed before recovery ran; LOST), or its outcome is unknown (in
 * doubt: {@link TwoPhaseRecovery#inDoubtTransactions()}, never compensated automatically). The
 * application must compensate (re-publish from the database, for example).
 *
 * @param decision the decision row recovery found
 * @param reason what the coordinator reported
 */
public record LostTransaction(DecisionRecord decision, String reason) {

    /** @return the transactional id of the lost transaction */
    public String transactionalId() {
        return this.decision.transactionalId();
    }
}
