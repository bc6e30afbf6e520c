package io.github.txnsession.spring.jdbc;

/**
 * Told by {@link JdbcKafkaTransactionManager} as its commit passes each {@link CommitPhase}, on the committing
 * thread. For tracing and for failure tests; an exception thrown here fails the commit at that point, as a crash
 * would.
 */
@FunctionalInterface
public interface CommitPhaseListener {

    /**
     * @param phase the phase just reached
     * @param transactionalId the session committing
     */
    void reached(CommitPhase phase, String transactionalId);
}
