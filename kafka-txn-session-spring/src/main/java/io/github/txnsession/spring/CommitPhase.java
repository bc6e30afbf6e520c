package io.github.txnsession.spring;

/**
 * The steps of a two-phase commit between a database and Kafka, in order, as both
 * {@code io.github.txnsession.spring.jdbc.JdbcKafkaTransactionManager} and a session enlisted in the application's
 * own manager ({@link SessionEnlistment} with a {@link TwoPhaseDecision}) run it. A {@link CommitPhaseListener} is
 * told after each; the crash tests stop the process at each of them. A best-effort enlistment (no decision) passes
 * the same phases except {@link #AFTER_LOG_INSERT} and {@link #AFTER_LOG_CLEAR}.
 */
public enum CommitPhase {

    /** About to prepare the Kafka transaction. A crash here: both sides roll back. */
    BEFORE_PREPARE,
    /**
     * Kafka transaction prepared (flushed, offsets added). A crash here: both roll back (recovery aborts Kafka). When an
     * enlisted session writes its decision while the prepare runs (transaction version 2, see
     * {@link io.github.txnsession.kafka.TransactionSession#expectedPreparedTransaction()}), the row is already written,
     * uncommitted, when this is told.
     */
    AFTER_PREPARE,
    /** Decision row written in the database transaction, not committed. A crash here: both roll back. */
    AFTER_LOG_INSERT,
    /** Database committed (JDBC or JPA): this is the decision. A crash here: recovery commits Kafka from the row. */
    AFTER_JDBC_COMMIT,
    /** Kafka committed. A crash here: recovery finds it already committed and clears the row. */
    AFTER_KAFKA_COMMIT,
    /** Row cleared: nothing is left for recovery. */
    AFTER_LOG_CLEAR
}
