package io.github.txnsession.kafka;

/**
 * Something bound to a session that takes part in its transaction end: a bound consumer adds its offsets before
 * commit and rewinds after abort. Called by the session with its lifecycle lock held, on the thread that drives the
 * lifecycle call.
 */
interface SessionParticipant {

    /** Before prepare or commit, while the session is still IN_TRANSACTION: add offsets or acknowledgements. */
    default void beforeCommit(TransactionSession session) {
    }

    /** After the transaction committed. */
    default void afterCommit(TransactionSession session) {
    }

    /** After the transaction aborted (by the application, by close, or because it was lost). */
    default void afterAbort(TransactionSession session) {
    }
}
