package io.github.txnsession.spring;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import io.github.txnsession.kafka.TransactionSession;
import org.jspecify.annotations.Nullable;
import org.springframework.transaction.TransactionTimedOutException;
import org.springframework.transaction.support.ResourceHolderSupport;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * The session of the current Spring transaction, bound by {@link SessionTransactionManager} to the thread with its
 * {@link TransactionSessionPool} as key ({@code TransactionSynchronizationManager.getResource(pool)}). It carries
 * the transaction's deadline (when the transaction definition has a timeout) and its rollback-only flag.
 */
public final class SessionResourceHolder extends ResourceHolderSupport {

    private final PooledSession lease;
    private final long beganNanos;
    private volatile boolean decisionMayBeCommitted;
    private volatile boolean decisionCarriedOut;
    /** why the Kafka side asked for a rollback (an aborted executeInTransaction), or null */
    private volatile @Nullable String abortRequested;
    /** the transaction ended and the session went back to the pool: producers bound to this holder must not send */
    private volatile boolean ended;
    private volatile boolean consumersBound;
    /** other resources bound for this transaction (a producer factory's holder), unbound with it */
    private final List<Object> alsoBound = new CopyOnWriteArrayList<>();

    SessionResourceHolder(PooledSession lease, long beganNanos) {
        this.lease = lease;
        this.beganNanos = beganNanos;
    }

    /** @return the session of this transaction */
    public TransactionSession session() {
        return this.lease.session();
    }

    PooledSession lease() {
        return this.lease;
    }

    long beganNanos() {
        return this.beganNanos;
    }

    /**
     * Marks that a two-phase commit has (or may have) committed its decision to commit this transaction: from now on
     * a rollback must not abort the session's transaction; it is left prepared for recovery to complete.
     */
    public void markDecisionMayBeCommitted() {
        this.decisionMayBeCommitted = true;
    }

    /** A consumer was bound to this transaction's session: it is unbound when the transaction completes. */
    void markConsumersBound() {
        this.consumersBound = true;
    }

    /** @return whether {@link #markConsumersBound()} was called */
    boolean hasBoundConsumers() {
        return this.consumersBound;
    }

    void unbindWithTransaction(Object key) {
        this.alsoBound.add(key);
    }

    List<Object> alsoBound() {
        return this.alsoBound;
    }

    /**
     * Marks the two-phase decision as carried out: Kafka completed the transaction, recovery did, or the decision is
     * known not to be committed. Until then a session whose decision may be committed goes back to the pool in doubt.
     */
    public void markDecisionCarriedOut() {
        this.decisionCarriedOut = true;
    }

    /**
     * @return whether a two-phase decision may be committed and nothing has carried it out: the session must go back
     *         to the pool in doubt (never aborted, nor its id initialized, before the decision log is read)
     */
    public boolean isDecisionInDoubt() {
        return this.decisionMayBeCommitted && !this.decisionCarriedOut;
    }

    /** @return whether {@link #markDecisionMayBeCommitted()} was called */
    public boolean isDecisionMayBeCommitted() {
        return this.decisionMayBeCommitted;
    }

    /**
     * The Kafka side of this transaction must not commit (a {@code KafkaTemplate.executeInTransaction} callback
     * failed and aborted its producer, which cannot undo only its own records): the whole transaction rolls back.
     */
    void requestAbort(String reason) {
        this.abortRequested = reason;
        setRollbackOnly();
    }

    /** @return why a rollback was requested by {@link #requestAbort}, or null */
    @Nullable String abortRequested() {
        return this.abortRequested;
    }

    /** The transaction ended: its session is back in the pool (and may serve another thread's transaction). */
    void markEnded() {
        this.ended = true;
    }

    /**
     * Fails if the transaction has ended: a producer kept past its transaction (or found through a stale binding)
     * would otherwise write into whatever transaction the pooled session serves next.
     *
     * @throws IllegalStateException naming the session
     */
    void checkNotEnded() {
        if (this.ended) {
            throw new IllegalStateException("The transaction of Kafka session '" + this.lease.session().transactionalId()
                    + "' has ended; a producer of that transaction cannot send any more. Send from a transaction "
                    + "that is running (a new one, REQUIRES_NEW, from a completion callback).");
        }
    }

    /**
     * Fails when the transaction's timeout has passed, marking it rollback-only (so it aborts).
     *
     * @throws TransactionTimedOutException naming the deadline
     */
    void checkDeadline() {
        checkNotEnded();
        if (hasTimeout()) {
            getTimeToLiveInMillis();
        }
    }

    /**
     * @param pool the pool whose session is wanted
     * @return the holder bound to the calling thread for that pool, or null outside a session transaction
     */
    static @Nullable SessionResourceHolder current(TransactionSessionPool pool) {
        Object bound = TransactionSynchronizationManager.getResource(pool);
        return bound instanceof SessionResourceHolder h ? h : null;
    }
}
