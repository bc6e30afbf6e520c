package io.github.txnsession.kafka;

/**
 * The states of a {@link TransactionSession}. The legal moves between them are in {@link SessionStateMachine}.
 */
public enum SessionState {

    /** Created; {@link TransactionSession#initialize()} has not run yet. */
    UNINITIALIZED,

    /** Initialized, no transaction open: {@link TransactionSession#beginTransaction()} may be called. */
    READY,

    /** A transaction is open: bound producers may send and offsets may be added. */
    IN_TRANSACTION,

    /**
     * The transaction is prepared (flushed, offsets sent, identity handed out), was resumed from another process, or
     * its commit timed out while kafka-clients still holds the commit request: only commit, abort or complete may
     * follow.
     */
    PREPARED,

    /** A commit is in progress; sends and polls wait for its outcome. */
    COMMITTING,

    /** An abort is in progress; sends and polls wait for its outcome. */
    ABORTING,

    /** The transaction failed in a way that leaves it open but doomed: only an abort may follow. */
    ABORTABLE_ERROR,

    /**
     * The session can no longer be used, usually because another session with the same {@code transactional.id}
     * fenced it, or because its transaction was lost; only close may follow.
     */
    FATAL_ERROR,

    /** Closed; every call but close fails. */
    CLOSED
}
