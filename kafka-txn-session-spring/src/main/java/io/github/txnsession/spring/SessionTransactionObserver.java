package io.github.txnsession.spring;

import java.time.Duration;

import io.github.txnsession.kafka.TransactionSessionException;

/**
 * Told by a {@link SessionTransactionManager} how each of its transactions ended; metrics and health checks
 * implement it. Called on the thread that ended the transaction, after the session call returned: keep it quick and
 * do not throw (an exception is logged and ignored).
 */
public interface SessionTransactionObserver {

    /**
     * The transaction committed.
     *
     * @param transactionalId the session's id
     * @param duration from begin to the end of the commit
     * @param commitDuration how long the commit call itself took
     */
    default void committed(String transactionalId, Duration duration, Duration commitDuration) {
    }

    /**
     * The transaction was rolled back (aborted) on purpose: an exception, a rollback rule, rollback-only, a timeout.
     *
     * @param transactionalId the session's id
     * @param duration from begin to the end of the abort
     */
    default void rolledBack(String transactionalId, Duration duration) {
    }

    /**
     * A commit or abort failed, or the session was fenced or its transaction lost. The transaction's outcome is an
     * abort, or unknown when the failure says so.
     *
     * @param transactionalId the session's id
     * @param failure what the session reported
     */
    default void failed(String transactionalId, TransactionSessionException failure) {
    }
}
