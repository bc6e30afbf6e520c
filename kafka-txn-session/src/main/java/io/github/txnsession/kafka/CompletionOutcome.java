package io.github.txnsession.kafka;

/**
 * What {@link TransactionSession#completeTransaction} did. Outcomes that are not known for certain are never
 * returned: they are thrown ({@link TransactionLostException}, {@link TransactionSupersededException},
 * {@link SessionFencedException}).
 */
public enum CompletionOutcome {

    /** The prepared transaction was open and is now committed. */
    COMMITTED,

    /** The prepared transaction had already been committed (a retry after a crash or by a second process). */
    ALREADY_COMMITTED,

    /** The given state did not name the open transaction, so the open transaction was aborted. */
    ABORTED
}
