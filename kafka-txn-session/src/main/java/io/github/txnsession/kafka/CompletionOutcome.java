package io.github.txnsession.kafka;

/**
 * What {@link TransactionSession#completeTransaction} (or a resumed session's commit or abort) did. Outcomes that are
 * not known for certain are never returned: they are thrown ({@link TransactionLostException} when the transaction was
 * certainly aborted, {@link TransactionSupersededException} when its outcome cannot be known,
 * {@link SessionFencedException}).
 */
public enum CompletionOutcome {

    /**
     * The prepared transaction is committed: this call ended it, or a concurrent committer of the same prepared
     * transaction did while this call ran (both calls report COMMITTED; the coordinator cannot tell them apart).
     */
    COMMITTED,

    /**
     * The prepared transaction had already been committed when this call looked (a retry after a crash, or another
     * process), or its commit was already decided at the coordinator (PrepareCommit) and its markers were being
     * written. Nothing was committed twice.
     */
    ALREADY_COMMITTED,

    /** The transaction is aborted: this call aborted it, or it had already been aborted when an abort was asked. */
    ABORTED,

    /**
     * The prepared transaction wrote nothing (see {@link PreparedTransaction#isEmpty()}): there was nothing to commit or
     * abort, and no other transaction was touched.
     */
    EMPTY
}
