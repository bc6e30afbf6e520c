package io.github.txnsession.spring;

import io.github.txnsession.kafka.PreparedTransaction;

/**
 * The decision log of a two-phase commit between a resource (a database) and a Kafka session, as
 * {@link SessionEnlistment} uses it: the decision is written inside the resource's own transaction, so it commits if
 * and only if the resource commits; after a crash, recovery completes the Kafka side from it. Implemented for JDBC by
 * {@code io.github.txnsession.spring.jdbc.JdbcTwoPhaseDecision}.
 */
public interface TwoPhaseDecision {

    /**
     * Called before a session is taken for a new enlistment: makes sure what a crash left is settled first (a new
     * session's initialization would abort a prepared transaction whose decision says commit).
     */
    default void ensureReady() {
    }

    /**
     * Writes the decision to commit {@code prepared} into the resource's current transaction.
     *
     * @param transactionalId the transactional id of the session whose transaction was prepared
     * @param prepared what the session's {@code prepareTransaction()} returned; not an empty transaction (it needs no
     *        decision)
     * @throws RuntimeException if it cannot be written; the transaction then rolls back on both sides
     */
    void record(String transactionalId, PreparedTransaction prepared);

    /**
     * @return whether the session's Kafka transaction must be confirmed still open after {@link #record} and before
     *         the resource commits (true for a fleet: a new owner of the id may have settled it while this instance
     *         was paused; holding the decision's key, it could not have done so after the record)
     */
    default boolean confirmOpenAfterRecord() {
        return false;
    }

    /**
     * The decision was written before the prepare answered ({@link SessionEnlistment#setDecisionAlongsidePrepare}),
     * under the producer id and epoch alone, and the prepare confirmed the transaction as {@code confirmed}, start time
     * included. An implementation may keep {@code confirmed} until the decision is cleared or settled, to settle the id
     * with it in this process: the start time tells a transaction the coordinator aborted on its timeout (lost) from a
     * later one of the id (unknown).
     *
     * @param transactionalId the transactional id of the session
     * @param confirmed the prepared transaction as the coordinator confirmed it
     */
    default void confirmed(String transactionalId, PreparedTransaction confirmed) {
    }

    /**
     * The resource committed, but completing the Kafka transaction failed with {@code failure}: settle it now from
     * the decision (commit it from another session if it is still open).
     *
     * @param transactionalId the transactional id of the session whose completion failed
     * @param prepared the prepared transaction the recorded decision names
     * @param failure what completing the Kafka transaction threw
     * @throws RuntimeException (a {@code HeuristicCompletionException}) when the Kafka side is lost or unknown
     */
    void settle(String transactionalId, PreparedTransaction prepared, RuntimeException failure);

    /**
     * Reads, outside the transaction, whether the decision to commit {@code prepared} was committed: asked when the
     * resource reported a failed commit after the decision was written (a COMMIT that failed on the way back, a
     * commit-time flush failure), because only the decision says which way the resource went.
     *
     * @param transactionalId the transactional id of the session whose decision was written
     * @param prepared the prepared transaction the decision names
     * @return whether the decision is committed
     * @throws RuntimeException if the decision cannot be read now; the Kafka transaction is then left prepared and
     *         settled later from the decision
     */
    boolean isRecorded(String transactionalId, PreparedTransaction prepared);

    /**
     * Asked when the resource reported a failed commit and {@link #isRecorded} found no decision: whether the resource
     * surely rolled back (it answered the commit with an error), rather than a commit whose reply was lost and that
     * may still become visible after the read. Only then is the Kafka side aborted at once; otherwise it stays
     * prepared and its id is settled from the decision log a few seconds later.
     *
     * @return whether the missing decision can be trusted now (by default: yes)
     */
    default boolean rollbackIsCertain() {
        return true;
    }

    /**
     * Kafka committed: the decision is no longer needed. Failures are logged, not thrown.
     *
     * @param transactionalId the transactional id of the session whose transaction committed
     * @param prepared the committed transaction, as the decision names it
     * @return false if the decision could not be cleared: it then stays until recovery finds the transaction
     *         committed and clears it, and the session's id must not be used before that
     */
    boolean clear(String transactionalId, PreparedTransaction prepared);
}
