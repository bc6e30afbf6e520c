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

    /**
     * The transaction ended, or will end, in a way this process cannot know now (the session was abandoned with its
     * transaction prepared, or a commit's outcome could not be read). By default treated like an abort, which loses
     * nothing but may process records twice; a participant that can learn the truth later (a consumer reading its
     * group's committed offsets) does better.
     */
    default void afterOutcomeUnknown(TransactionSession session) {
        afterAbort(session);
    }
}
