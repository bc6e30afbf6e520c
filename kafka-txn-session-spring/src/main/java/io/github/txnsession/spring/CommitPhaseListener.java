package io.github.txnsession.spring;

/**
 * Told as a commit passes each {@link CommitPhase}, on the committing thread (except
 * {@link CommitPhase#AFTER_LOG_CLEAR} of an enlisted session: the row is cleared in the background) (by
 * {@code io.github.txnsession.spring.jdbc.JdbcKafkaTransactionManager} and by {@link SessionEnlistment}). For tracing
 * and for failure tests. An exception thrown before the decision (up to {@link CommitPhase#AFTER_LOG_INSERT}) fails
 * the commit at that point, as a crash would; after the decision it is logged and the commit goes on.
 */
@FunctionalInterface
public interface CommitPhaseListener {

    /**
     * @param phase the phase just reached
     * @param transactionalId the session committing
     */
    void reached(CommitPhase phase, String transactionalId);
}
