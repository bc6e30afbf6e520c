package io.github.txnsession.spring;

import java.time.Duration;
import java.util.List;
import java.util.Objects;

import io.github.txnsession.kafka.SessionState;
import io.github.txnsession.kafka.SessionTimeoutException;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.TransactionSessionException;
import org.jspecify.annotations.Nullable;

import org.springframework.kafka.core.KafkaResourceHolder;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.kafka.transaction.KafkaAwareTransactionManager;
import org.springframework.transaction.CannotCreateTransactionException;
import org.springframework.transaction.HeuristicCompletionException;
import org.springframework.transaction.InvalidIsolationLevelException;
import org.springframework.transaction.NestedTransactionNotSupportedException;
import org.springframework.transaction.SavepointManager;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.TransactionSystemException;
import org.springframework.transaction.TransactionTimedOutException;
import org.springframework.transaction.support.AbstractPlatformTransactionManager;
import org.springframework.transaction.support.DefaultTransactionStatus;
import org.springframework.transaction.support.ResourceTransactionManager;
import org.springframework.transaction.support.SmartTransactionObject;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * A Spring transaction manager whose transactions are {@link TransactionSession} transactions. Each Spring
 * transaction takes a session from a {@link TransactionSessionPool}, binds it to the thread, and commits or aborts
 * it at the end. Because it is a spring-kafka {@link KafkaAwareTransactionManager} and binds a
 * {@link KafkaResourceHolder} for its {@link SessionProducerFactory}, unchanged {@code KafkaTemplate} code sends into
 * the session, and listener containers given this manager add the consumed offsets to the session's transaction
 * (exactly-once consume-process-produce).
 *
 * <h2>Propagation</h2>
 * <ul>
 * <li>{@code REQUIRED} joins the thread's session transaction or starts one; {@code REQUIRES_NEW} suspends it and
 * runs on another session of the pool, committing independently (the pool must have a free session for it);</li>
 * <li>{@code SUPPORTS} joins one if present, else runs without a session; {@code NOT_SUPPORTED} suspends it;
 * {@code MANDATORY} and {@code NEVER} behave as Spring defines them;</li>
 * <li>{@code NESTED} is rejected with {@link NestedTransactionNotSupportedException}: a Kafka transaction has no
 * savepoints, so part of it cannot be rolled back alone.</li>
 * </ul>
 * Rollback rules ({@code rollbackFor}, {@code noRollbackFor}) are applied by Spring's interceptor as usual. A
 * transaction timeout is checked at every send, at every offset commit and before the commit: once passed, the
 * transaction is marked rollback-only and ends with {@link TransactionTimedOutException}, having aborted. Isolation
 * levels other than the default are rejected: Kafka readers choose {@code isolation.level} themselves.
 *
 * <h2>Not guaranteed</h2>
 * Kafka transactions cannot be rolled back to a point, and a timeout longer than the sessions'
 * {@code transaction.timeout.ms} cannot hold: the broker aborts first, and the commit then fails. A commit that
 * fails with an unknown outcome (timeout) is reported as {@link TransactionSystemException}; the session is then
 * aborted and replaced by the pool as needed.
 */
public class SessionTransactionManager extends AbstractPlatformTransactionManager
        implements KafkaAwareTransactionManager<Object, Object>, ResourceTransactionManager {

    private static final long serialVersionUID = 1L;

    private static final String NESTED_MESSAGE = "Propagation NESTED is not supported by SessionTransactionManager: a "
            + "Kafka transaction has no savepoints, so part of it cannot be rolled back alone. Use REQUIRED to join "
            + "the current transaction or REQUIRES_NEW for an independent one.";

    private final transient TransactionSessionPool pool;
    private final transient SessionProducerFactory<Object, Object> producerFactory;
    private transient List<SessionTransactionObserver> observers = List.of();

    /**
     * @param pool the sessions to run transactions on
     * @param producerFactory the factory whose templates and listener containers take part: the manager binds a
     *        producer for it at begin; it must write into the same pool
     */
    public SessionTransactionManager(TransactionSessionPool pool, SessionProducerFactory<Object, Object> producerFactory) {
        this.pool = Objects.requireNonNull(pool, "pool");
        this.producerFactory = Objects.requireNonNull(producerFactory, "producerFactory");
        if (producerFactory.getPool() != pool) {
            throw new IllegalArgumentException("The producer factory writes into pool " + producerFactory.getPool()
                    + ", not into " + pool + ": give the transaction manager the factory of its own pool");
        }
        // NESTED reaches our savepoint manager, which rejects it with a message that says why
        setNestedTransactionAllowed(true);
    }

    /** @param observers told how each transaction ended (metrics, health) */
    public void setObservers(List<? extends SessionTransactionObserver> observers) {
        this.observers = List.copyOf(observers);
    }

    /** @return the pool whose sessions run this manager's transactions */
    public TransactionSessionPool getPool() {
        return this.pool;
    }

    @Override
    public ProducerFactory<Object, Object> getProducerFactory() {
        return this.producerFactory;
    }

    /** @return the pool: the key under which the current session is bound to the thread */
    @Override
    public Object getResourceFactory() {
        return this.pool;
    }

    @Override
    protected Object doGetTransaction() {
        SessionTransactionObject tx = new SessionTransactionObject();
        tx.holder = SessionResourceHolder.current(this.pool);
        return tx;
    }

    @Override
    protected boolean isExistingTransaction(Object transaction) {
        return ((SessionTransactionObject) transaction).holder != null;
    }

    @Override
    protected boolean useSavepointForNestedTransaction() {
        return true;
    }

    @Override
    protected void doBegin(Object transaction, TransactionDefinition definition) {
        if (definition.getPropagationBehavior() == TransactionDefinition.PROPAGATION_NESTED) {
            throw new NestedTransactionNotSupportedException(NESTED_MESSAGE);
        }
        if (definition.getIsolationLevel() != TransactionDefinition.ISOLATION_DEFAULT) {
            throw new InvalidIsolationLevelException("SessionTransactionManager does not support isolation levels: "
                    + "Kafka readers choose theirs with isolation.level=read_committed. Remove the isolation "
                    + "attribute of transaction '" + definition.getName() + "'.");
        }
        SessionTransactionObject tx = (SessionTransactionObject) transaction;
        long began = System.nanoTime();
        PooledSession lease = this.pool.acquire();
        try {
            lease.session().beginTransaction();
        }
        catch (RuntimeException ex) {
            lease.release();
            throw new CannotCreateTransactionException("Could not begin a transaction on session '"
                    + lease.session().transactionalId() + "': " + ex.getMessage(), ex);
        }
        SessionResourceHolder holder = new SessionResourceHolder(lease, began);
        int timeout = determineTimeout(definition);
        if (timeout != TransactionDefinition.TIMEOUT_DEFAULT) {
            holder.setTimeoutInSeconds(timeout);
        }
        holder.setSynchronizedWithTransaction(true);
        KafkaResourceHolder<Object, Object> kafkaHolder = new KafkaResourceHolder<>(
                this.producerFactory.boundProducer(holder), Duration.ZERO);
        kafkaHolder.setSynchronizedWithTransaction(true);
        TransactionSynchronizationManager.bindResource(this.pool, holder);
        TransactionSynchronizationManager.bindResource(this.producerFactory, kafkaHolder);
        tx.holder = holder;
        if (logger.isDebugEnabled()) {
            logger.debug("Began transaction on session '" + lease.session().transactionalId() + "'");
        }
    }

    @Override
    protected Object doSuspend(Object transaction) {
        ((SessionTransactionObject) transaction).holder = null;
        Object session = TransactionSynchronizationManager.unbindResource(this.pool);
        Object kafka = TransactionSynchronizationManager.unbindResourceIfPossible(this.producerFactory);
        return new Suspended(session, kafka);
    }

    @Override
    protected void doResume(@Nullable Object transaction, Object suspendedResources) {
        Suspended suspended = (Suspended) suspendedResources;
        TransactionSynchronizationManager.bindResource(this.pool, suspended.session());
        if (suspended.kafka() != null) {
            TransactionSynchronizationManager.bindResource(this.producerFactory, suspended.kafka());
        }
    }

    @Override
    protected void doCommit(DefaultTransactionStatus status) {
        SessionResourceHolder holder = holderOf(status);
        TransactionSession session = holder.session();
        try {
            holder.checkDeadline();
        }
        catch (TransactionTimedOutException ex) {
            abortQuietly(session, ex);
            notifyRolledBack(holder);
            throw ex;
        }
        long start = System.nanoTime();
        try {
            session.commitTransaction();
        }
        catch (SessionTimeoutException ex) {
            if (!settleTimedOutCommit(holder, ex)) {
                return; // it committed after all
            }
        }
        catch (TransactionSessionException ex) {
            notifyFailed(session, ex);
            boolean aborted = false;
            if (session.state() == SessionState.ABORTABLE_ERROR) {
                // Spring does not roll back after a failed commit: abort here, so that the participants (bound
                // consumers rewind, share consumers release) hear of it before the transaction's afterCompletion
                abortQuietly(session, ex);
                aborted = session.state() == SessionState.READY;
            }
            throw new TransactionSystemException("Commit of transaction session '" + session.transactionalId()
                    + "' failed: " + ex.getMessage() + (aborted ? " The transaction was aborted." : ""), ex);
        }
        catch (RuntimeException ex) {
            throw new TransactionSystemException("Commit of transaction session '" + session.transactionalId()
                    + "' failed: " + ex, ex);
        }
        long end = System.nanoTime();
        for (SessionTransactionObserver o : this.observers) {
            try {
                o.committed(session.transactionalId(), Duration.ofNanos(end - holder.beganNanos()),
                        Duration.ofNanos(end - start));
            }
            catch (RuntimeException ex) {
                logger.warn("Session transaction observer " + o + " failed", ex);
            }
        }
    }

    @Override
    protected void doRollback(DefaultTransactionStatus status) {
        SessionResourceHolder holder = holderOf(status);
        TransactionSession session = holder.session();
        SessionState state = session.state();
        if (holder.isDecisionMayBeCommitted()) {
            logger.warn("Rollback: the decision to commit the transaction of session '" + session.transactionalId()
                    + "' may be committed; leaving it prepared for recovery instead of aborting it");
            return;
        }
        if (state != SessionState.IN_TRANSACTION && state != SessionState.PREPARED
                && state != SessionState.ABORTABLE_ERROR) {
            logger.debug("Rollback: session '" + session.transactionalId() + "' is " + state + ", nothing to abort");
            return;
        }
        try {
            session.abortTransaction();
        }
        catch (TransactionSessionException ex) {
            notifyFailed(session, ex);
            throw new TransactionSystemException("Abort of transaction session '" + session.transactionalId()
                    + "' failed: " + ex.getMessage(), ex);
        }
        notifyRolledBack(holder);
    }

    @Override
    protected void doSetRollbackOnly(DefaultTransactionStatus status) {
        holderOf(status).setRollbackOnly();
    }

    @Override
    protected void doCleanupAfterCompletion(Object transaction) {
        SessionTransactionObject tx = (SessionTransactionObject) transaction;
        TransactionSynchronizationManager.unbindResourceIfPossible(this.pool);
        TransactionSynchronizationManager.unbindResourceIfPossible(this.producerFactory);
        SessionResourceHolder holder = tx.holder;
        if (holder != null) {
            holder.markEnded();
            holder.clear();
            if (holder.isDecisionInDoubt()) {
                // a two-phase decision may be committed and was not carried out here: never abort it on release
                holder.lease().releaseInDoubt();
            }
            else {
                holder.lease().release();
            }
            tx.holder = null;
        }
    }

    /**
     * The commit timed out, so its outcome is unknown: kafka-clients keeps sending it. An abort waits for that commit
     * and says how it ended, instead of leaving the caller (and the pool, which would initialize the id and abort
     * it) guessing.
     *
     * @return false if it committed (the caller reports success); otherwise throws
     */
    private boolean settleTimedOutCommit(SessionResourceHolder holder, SessionTimeoutException timeout) {
        TransactionSession session = holder.session();
        try {
            session.abortTransaction();
        }
        catch (SessionTimeoutException again) {
            again.addSuppressed(timeout);
            notifyFailed(session, again);
            throw new HeuristicCompletionException(HeuristicCompletionException.STATE_UNKNOWN,
                    new TransactionSystemException("The commit of transaction session '" + session.transactionalId()
                            + "' timed out and its outcome is still unknown: " + again.getMessage(), again));
        }
        catch (TransactionSessionException ex) {
            if (session.state() == SessionState.READY) {
                logger.info("The commit of session '" + session.transactionalId() + "' timed out but went through");
                return false;
            }
            ex.addSuppressed(timeout);
            notifyFailed(session, ex);
            throw new TransactionSystemException("Commit of transaction session '" + session.transactionalId()
                    + "' timed out, and settling it failed: " + ex.getMessage(), ex);
        }
        notifyRolledBack(holder);
        throw new TransactionSystemException("Commit of transaction session '" + session.transactionalId()
                + "' timed out (" + timeout.getMessage() + "); the transaction was aborted, nothing of it is visible",
                timeout);
    }

    private void abortQuietly(TransactionSession session, Exception cause) {
        try {
            session.abortTransaction();
        }
        catch (RuntimeException ex) {
            cause.addSuppressed(ex);
        }
    }

    private void notifyRolledBack(SessionResourceHolder holder) {
        Duration took = Duration.ofNanos(System.nanoTime() - holder.beganNanos());
        for (SessionTransactionObserver o : this.observers) {
            try {
                o.rolledBack(holder.session().transactionalId(), took);
            }
            catch (RuntimeException ex) {
                logger.warn("Session transaction observer " + o + " failed", ex);
            }
        }
    }

    private void notifyFailed(TransactionSession session, TransactionSessionException failure) {
        for (SessionTransactionObserver o : this.observers) {
            try {
                o.failed(session.transactionalId(), failure);
            }
            catch (RuntimeException ex) {
                logger.warn("Session transaction observer " + o + " failed", ex);
            }
        }
    }

    private static SessionResourceHolder holderOf(DefaultTransactionStatus status) {
        SessionResourceHolder holder = ((SessionTransactionObject) status.getTransaction()).holder;
        if (holder == null) {
            throw new IllegalStateException("No session is bound to this transaction");
        }
        return holder;
    }

    @Override
    public String toString() {
        return "SessionTransactionManager[" + this.pool + "]";
    }

    /** Spring's transaction object: the holder of the session, or null before begin / when suspended. */
    private static final class SessionTransactionObject implements SmartTransactionObject, SavepointManager {

        @Nullable SessionResourceHolder holder;

        @Override
        public boolean isRollbackOnly() {
            SessionResourceHolder h = this.holder;
            return h != null && h.isRollbackOnly();
        }

        @Override
        public void flush() {
            // sends are flushed by the commit
        }

        @Override
        public Object createSavepoint() {
            throw new NestedTransactionNotSupportedException(NESTED_MESSAGE);
        }

        @Override
        public void rollbackToSavepoint(Object savepoint) {
            throw new NestedTransactionNotSupportedException(NESTED_MESSAGE);
        }

        @Override
        public void releaseSavepoint(Object savepoint) {
            throw new NestedTransactionNotSupportedException(NESTED_MESSAGE);
        }
    }

    private record Suspended(Object session, @Nullable Object kafka) {
    }
}
