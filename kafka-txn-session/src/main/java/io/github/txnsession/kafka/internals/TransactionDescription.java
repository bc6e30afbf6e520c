package io.github.txnsession.kafka.internals;

/**
 * What the transaction coordinator says about a transactional id at one moment.
 *
 * @param transactionalId the id described
 * @param state the coordinator's state name (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit,
 *        CompleteAbort, PrepareEpochFence, Dead)
 * @param producerId the producer id the coordinator holds for this transactional id
 * @param producerEpoch the producer epoch the coordinator holds (with transaction version 2 it is bumped at the
 *        end of every transaction)
 * @param timeoutMs the transaction timeout the producer registered
 * @param startTimeMs when the open transaction started, or -1
 */
public record TransactionDescription(String transactionalId, String state, long producerId, short producerEpoch,
        int timeoutMs, long startTimeMs) {

    /** @return true while a transaction is open: data may still be added and it may be committed or aborted */
    public boolean isOngoing() {
        return "Ongoing".equals(this.state);
    }

    /** @return true while the coordinator is writing commit markers */
    public boolean isCommitting() {
        return "PrepareCommit".equals(this.state);
    }

    /** @return true while the coordinator is aborting (including the abort that fences an old producer) */
    public boolean isAborting() {
        return "PrepareAbort".equals(this.state) || "PrepareEpochFence".equals(this.state);
    }

    /** @return true when the last transaction of this id ended in a commit */
    public boolean isCompleteCommit() {
        return "CompleteCommit".equals(this.state);
    }

    /** @return true when the last transaction of this id ended in an abort */
    public boolean isCompleteAbort() {
        return "CompleteAbort".equals(this.state);
    }

    /** @return true when the id has a producer but no transaction was started since it was initialized */
    public boolean isEmpty() {
        return "Empty".equals(this.state);
    }
}
