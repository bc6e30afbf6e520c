package io.github.txnsession.spring;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.function.Supplier;

import io.github.txnsession.kafka.PreparedTransaction;
import io.github.txnsession.kafka.SessionState;
import io.github.txnsession.kafka.SessionTimeoutException;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.TransactionSessionException;
import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import org.springframework.transaction.HeuristicCompletionException;
import org.springframework.transaction.TransactionSystemException;
import org.springframework.transaction.TransactionTimedOutException;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * Ends an enlisted session's transaction with the Spring transaction of another manager (see
 * {@link SessionEnlistment}).
 *
 * <pre>
 * Spring callback        what happens to the Kafka transaction
 * ---------------------  ------------------------------------------------------------------------------------
 * beforeCommit           a send that passed the transaction's deadline fails the commit (the database rolls back);
 *                        prepare (flush, offsets, check every send); two-phase: write the decision through the
 *                        transaction's own connection (opt-in, with transaction version 2: while the prepare
 *                        runs, see DecisionAlongsidePrepare). A failure here rolls the database back too.
 * (database commits)
 * afterCommit            complete (commit); two-phase: a failure is settled from the decision at once, then the
 *                        decision is cleared in the background (the session returns to the pool after that); with
 *                        completeInBackground, the completion and its settling run in the background too
 * afterCompletion        rolled back: abort (bound consumers rewind). Unknown after a two-phase decision: left
 *                        prepared, the pool settles it from the decision before the id is used again. Then the
 *                        session goes back to the pool.
 * suspend / resume       the session is unbound / bound again with the suspended transaction (REQUIRES_NEW)
 * beforeCompletion       the session is unbound from the thread: completion callbacks cannot reach it
 * </pre>
 */
final class EnlistedSessionSynchronization implements TransactionSynchronization {

    private static final Log logger = LogFactory.getLog(EnlistedSessionSynchronization.class);

    private final TransactionSessionPool pool;
    private final SessionResourceHolder holder;
    private final @Nullable TwoPhaseDecision twoPhase;
    private final List<SessionTransactionObserver> observers;
    private final List<CommitPhaseListener> phaseListeners;
    private final Executor clearExecutor;
    private final boolean completeInBackground;
    private final boolean decisionAlongsidePrepare;
    private @Nullable PreparedTransaction prepared;
    /** the prepared transaction as the two-phase decision names it (without the start time when written ahead) */
    private @Nullable PreparedTransaction recorded;
    /** the decision row being cleared after the Kafka commit; the session goes back to the pool when it is done */
    private @Nullable CompletableFuture<Boolean> clearing;
    private @Nullable List<@Nullable Object> suspended;
    private boolean committed;
    /** a {@link SessionCommitPoint} prepares this session after every other callback; its own beforeCommit waits */
    private boolean preparedByCommitPoint;
    private boolean prepareAttempted;
    /** a savepoint was rolled back (NESTED): the database undid work the Kafka transaction cannot undo */
    private boolean savepointRolledBack;

    EnlistedSessionSynchronization(TransactionSessionPool pool, SessionResourceHolder holder,
            @Nullable TwoPhaseDecision twoPhase, List<SessionTransactionObserver> observers,
            List<CommitPhaseListener> phaseListeners, Executor clearExecutor, boolean completeInBackground,
            boolean decisionAlongsidePrepare) {
        this.pool = pool;
        this.holder = holder;
        this.twoPhase = twoPhase;
        this.observers = observers;
        this.phaseListeners = phaseListeners;
        this.clearExecutor = clearExecutor;
        this.completeInBackground = completeInBackground;
        this.decisionAlongsidePrepare = decisionAlongsidePrepare;
    }

    @Override
    public void suspend() {
        // after beforeCompletion the session is unbound already (a transaction begun from an afterCommit callback)
        List<@Nullable Object> values = new ArrayList<>();
        values.add(TransactionSynchronizationManager.unbindResourceIfPossible(this.pool));
        for (Object key : this.holder.alsoBound()) {
            values.add(TransactionSynchronizationManager.unbindResourceIfPossible(key));
        }
        this.suspended = values;
    }

    @Override
    public void resume() {
        List<@Nullable Object> values = this.suspended;
        if (values == null) {
            return;
        }
        Object session = values.get(0);
        if (session != null) {
            TransactionSynchronizationManager.bindResource(this.pool, session);
        }
        List<Object> keys = this.holder.alsoBound();
        for (int i = 0; i < keys.size(); i++) {
            Object value = values.get(i + 1);
            if (value != null) {
                TransactionSynchronizationManager.bindResource(keys.get(i), value);
            }
        }
        this.suspended = null;
    }

    /**
     * The transaction is about to complete: nothing may join the session any more. Unbinding it now means that a send
     * from an {@code afterCommit} callback (or a {@code REQUIRES_NEW} transaction begun in a completion callback) does
     * not reach this session, whose transaction is being ended, and that nothing stays bound to the thread after the
     * session went back to the pool.
     */
    @Override
    public void beforeCompletion() {
        unbind();
    }

    private void unbind() {
        if (TransactionSynchronizationManager.getResource(this.pool) == this.holder) {
            TransactionSynchronizationManager.unbindResource(this.pool);
        }
        for (Object key : this.holder.alsoBound()) {
            TransactionSynchronizationManager.unbindResourceIfPossible(key);
        }
    }

    @Override
    public void savepointRollback(Object savepoint) {
        this.savepointRolledBack = true;
    }

    /** Leaves the prepare to the transaction's {@link SessionCommitPoint}, which runs after every callback. */
    void prepareAtCommitPoint(SessionCommitPoint point) {
        point.register(this);
        this.preparedByCommitPoint = true;
    }

    @Override
    public void beforeCommit(boolean readOnly) {
        if (!this.preparedByCommitPoint) {
            prepareForCommit();
        }
    }

    /**
     * Prepares the Kafka transaction for the database commit (and writes the two-phase decision): from
     * {@link #beforeCommit}, or from the transaction's {@link SessionCommitPoint} right before the database commits.
     * Runs once.
     */
    void prepareForCommit() {
        if (this.prepareAttempted) {
            return;
        }
        this.prepareAttempted = true;
        TransactionSession session = this.holder.session();
        if (this.savepointRolledBack) {
            throw new IllegalStateException("A nested transaction (savepoint) of this transaction was rolled back "
                    + "after the Kafka session of '" + session.transactionalId() + "' joined it: Kafka transactions "
                    + "have no savepoints, so its records cannot be undone in part. The whole transaction rolls back; "
                    + "use REQUIRES_NEW for work that must fail on its own.");
        }
        // not a Spring TransactionException: AbstractPlatformTransactionManager takes one from here for a failed
        // doCommit and skips the database rollback; any other exception rolls the database back
        String abort = this.holder.abortRequested();
        if (abort != null) {
            throw new IllegalStateException("The Kafka side of this transaction (session '"
                    + session.transactionalId() + "') was aborted: " + abort + ". Kafka cannot undo part of a "
                    + "transaction, so the whole transaction rolls back, database included.");
        }
        if (this.holder.isRollbackOnly()) {
            // a send failed the transaction's deadline: the database must not commit without the Kafka side
            throw new IllegalStateException("The Kafka session '" + session.transactionalId() + "' of this "
                    + "transaction passed the transaction's deadline (" + this.holder.getDeadline() + "); the whole "
                    + "transaction rolls back", new TransactionTimedOutException("deadline passed"));
        }
        phase(CommitPhase.BEFORE_PREPARE, session);
        TwoPhaseDecision decision = this.twoPhase;
        // serial where the overlap would change what happens between the two: consumers bound to the session add
        // their offsets in the prepare (they stay on this thread); a fleet checks its ownership right after the row
        // write, and a new owner may settle the id between the prepare and the write
        PreparedTransaction expected = !this.decisionAlongsidePrepare || decision == null
                || this.holder.hasBoundConsumers() || decision.confirmOpenAfterRecord() ? null
                        : session.expectedPreparedTransaction().orElse(null);
        PreparedTransaction p;
        if (decision != null && expected != null) {
            // transaction version 2: the decision is written while the Kafka side is confirmed (see the class)
            DecisionAlongsidePrepare.Prepared both = DecisionAlongsidePrepare.prepare(session, decision, expected,
                    this.clearExecutor);
            p = both.confirmed();
            this.prepared = p;
            this.recorded = both.recorded();
            if (!both.recorded().hasStartTime()) {
                decision.confirmed(session.transactionalId(), p);
            }
            phase(CommitPhase.AFTER_PREPARE, session);
        }
        else {
            p = session.prepareTransaction();
            this.prepared = p;
            phase(CommitPhase.AFTER_PREPARE, session);
            if (decision != null && !p.isEmpty()) {
                decision.record(session.transactionalId(), p);
                this.recorded = p;
            }
        }
        if (decision != null && !p.isEmpty()) {
            if (decision.confirmOpenAfterRecord()) {
                // fleet: the row's key is held now; if a new owner settled the id before, this finds the transaction
                // aborted or fenced and throws, and the database rolls the row back
                session.heartbeat();
                if (session.state() != io.github.txnsession.kafka.SessionState.PREPARED) {
                    // a background heartbeat found the failure first and moved the session on: still a failure
                    throw new IllegalStateException("The Kafka transaction of session '" + session.transactionalId()
                            + "' is no longer prepared (" + session.state() + ") after its decision was written: a "
                            + "new owner of the id settled it. The whole transaction rolls back.");
                }
            }
            this.holder.markDecisionMayBeCommitted();
            phase(CommitPhase.AFTER_LOG_INSERT, session);
        }
    }

    /** Before the decision: a failing listener fails the commit, as a crash at that point would. */
    private void phase(CommitPhase phase, TransactionSession session) {
        for (CommitPhaseListener listener : this.phaseListeners) {
            listener.reached(phase, session.transactionalId());
        }
    }

    /** After the decision a failing listener must not change the outcome: it is logged only. */
    private void phaseAfterDecision(CommitPhase phase, TransactionSession session) {
        try {
            phase(phase, session);
        }
        catch (RuntimeException ex) {
            logger.warn("Commit phase listener failed at " + phase + " of session '" + session.transactionalId()
                    + "'", ex);
        }
    }

    @Override
    public void afterCommit() {
        this.committed = true;
        TransactionSession session = this.holder.session();
        PreparedTransaction p = this.prepared;
        if (p == null && (this.holder.abortRequested() != null || this.holder.isRollbackOnly())) {
            // enlisted after the commit began (a send from an afterCommit callback) and then aborted or timed out:
            // it never joined the database's decision, so it is aborted on its own
            logger.warn("The Kafka transaction of session '" + session.transactionalId() + "', begun after the "
                    + "database transaction had started to commit, was aborted ("
                    + (this.holder.abortRequested() != null ? this.holder.abortRequested() : "deadline passed") + ")");
            rollBack(session, STATUS_ROLLED_BACK);
            return;
        }
        if (p == null && this.twoPhase != null) {
            // enlisted after beforeCommit ran (the first send came from a beforeCompletion or afterCommit callback;
            // one from a beforeCommit callback is refused by SessionEnlistment): not part of the two-phase decision
            logger.error("The Kafka transaction of session '" + session.transactionalId() + "' joined the transaction "
                    + "while it was completing (a first send from a beforeCompletion or afterCommit callback), after "
                    + "its decision was made: it commits best effort, and a crash now loses it. Send before the "
                    + "commit starts (with SessionCommitPoint.LISTENER on the transaction manager, which the starter "
                    + "adds to every manager bean but JTA ones, sends from beforeCommit callbacks join the decision).");
        }
        phaseAfterDecision(CommitPhase.AFTER_JDBC_COMMIT, session);
        long start = System.nanoTime();
        TwoPhaseDecision decision = this.twoPhase;
        if (this.completeInBackground && decision != null && p != null && !p.isEmpty()
                && !this.holder.hasBoundConsumers()) {
            // (consumers bound to the session are unbound when the transaction completes: it must be complete by then)
            // the decision is durable: the commit is decided, and the caller need not wait for Kafka to carry it out
            this.clearing = inBackground(() -> completeDecided(decision, session, p, start));
            return;
        }
        try {
            if (p != null) {
                session.completeTransaction(p);
            }
            else {
                session.commitTransaction();
            }
        }
        catch (SessionTimeoutException ex) {
            notifyFailed(session, ex);
            if (this.twoPhase != null && p != null && this.holder.isDecisionMayBeCommitted()) {
                this.twoPhase.settle(session.transactionalId(), p, ex); // throws unless recovery committed it
                this.holder.markDecisionCarriedOut();
                return;
            }
            settleTimedOutCommit(session, ex);
        }
        catch (RuntimeException ex) {
            notifyFailed(session, ex);
            if (this.twoPhase != null && p != null && this.holder.isDecisionMayBeCommitted()) {
                this.twoPhase.settle(session.transactionalId(), p, ex); // throws unless recovery committed it
                this.holder.markDecisionCarriedOut();
                return;
            }
            logger.error("The database committed, but the Kafka transaction of session '" + session.transactionalId()
                    + "' failed to commit (best-effort mode: its records are not visible): " + ex.getMessage(), ex);
            throw new HeuristicCompletionException(HeuristicCompletionException.STATE_MIXED,
                    new TransactionSystemException("The database committed, but the Kafka transaction of session '"
                            + session.transactionalId() + "' did not: " + ex.getMessage(), ex));
        }
        this.holder.markDecisionCarriedOut();
        phaseAfterDecision(CommitPhase.AFTER_KAFKA_COMMIT, session);
        if (decision != null && p != null && !p.isEmpty()) {
            this.clearing = inBackground(() -> clear(decision, session, p));
        }
        notifyCommitted(session, start);
    }

    /**
     * Completes a two-phase commit whose decision the database committed, off the committing thread
     * ({@link SessionEnlistment#setCompleteInBackground}): Kafka commit, then the decision row cleared. A failed
     * completion is settled from the decision; if that fails too, it is logged, and the session goes back to the pool
     * in doubt, so the pool settles its slot from the decision before the id is used again.
     *
     * @return whether the session may go back to the pool as it is (false: in doubt)
     */
    private boolean completeDecided(TwoPhaseDecision decision, TransactionSession session, PreparedTransaction p,
            long start) {
        try {
            session.completeTransaction(p);
        }
        catch (RuntimeException ex) {
            notifyFailed(session, ex);
            try {
                decision.settle(session.transactionalId(), p, ex);
                return true;
            }
            catch (RuntimeException settleFailure) {
                // what the caller would have been told in the foreground (lost, unknown, or not settled yet): the
                // slot goes back in doubt, so that nothing initializes its id before the decision is settled
                logger.error("Completing the Kafka side of session '" + session.transactionalId() + "' in the "
                        + "background failed: " + settleFailure.getMessage(), settleFailure);
                return false;
            }
        }
        phaseAfterDecision(CommitPhase.AFTER_KAFKA_COMMIT, session);
        boolean cleared = clear(decision, session, p);
        notifyCommitted(session, start);
        return cleared;
    }

    private void notifyCommitted(TransactionSession session, long start) {
        long end = System.nanoTime();
        for (SessionTransactionObserver o : this.observers) {
            try {
                o.committed(session.transactionalId(), Duration.ofNanos(end - this.holder.beganNanos()),
                        Duration.ofNanos(end - start));
            }
            catch (RuntimeException ex) {
                logger.warn("Session transaction observer " + o + " failed", ex);
            }
        }
    }

    /**
     * The decision row is cleared off the committing thread: the caller does not wait for it, and it needs a second
     * database connection, which a thread still holding its transaction's connection must not wait for (with every
     * pooled connection held by committing threads, they would wait on each other). The session stays lent until the
     * row is gone, so its transactional id cannot start a transaction that would leave the row describing an older
     * one; a row that could not be cleared sends the session back in doubt, and recovery clears it.
     */
    private boolean clear(TwoPhaseDecision decision, TransactionSession session, PreparedTransaction p) {
        boolean cleared = decision.clear(session.transactionalId(), p);
        if (cleared) {
            phaseAfterDecision(CommitPhase.AFTER_LOG_CLEAR, session);
        }
        return cleared;
    }

    /** @return the outcome of {@code work} on the background executor (run here once the pool is closed) */
    private CompletableFuture<Boolean> inBackground(Supplier<Boolean> work) {
        try {
            return CompletableFuture.supplyAsync(work, this.clearExecutor);
        }
        catch (RejectedExecutionException ex) {
            return CompletableFuture.completedFuture(work.get());
        }
    }

    /**
     * Best effort, the commit timed out: kafka-clients still sends it. An abort waits for that commit and says how
     * it ended; what stays unknown is reported as unknown, never as lost.
     */
    private void settleTimedOutCommit(TransactionSession session, SessionTimeoutException timeout) {
        try {
            session.abortTransaction();
        }
        catch (SessionTimeoutException again) {
            throw new HeuristicCompletionException(HeuristicCompletionException.STATE_UNKNOWN,
                    new TransactionSystemException("The database committed; the Kafka commit of session '"
                            + session.transactionalId() + "' timed out and its outcome is still unknown", again));
        }
        catch (TransactionSessionException ex) {
            if (session.state() == SessionState.READY) {
                return; // the commit that timed out went through
            }
            throw new HeuristicCompletionException(HeuristicCompletionException.STATE_UNKNOWN,
                    new TransactionSystemException("The database committed; the Kafka commit of session '"
                            + session.transactionalId() + "' timed out and could not be settled", ex));
        }
        logger.error("The database committed, but the Kafka commit of session '" + session.transactionalId()
                + "' timed out and was aborted (best-effort mode: its records are not visible)");
        throw new HeuristicCompletionException(HeuristicCompletionException.STATE_MIXED,
                new TransactionSystemException("The database committed, but the Kafka transaction of session '"
                        + session.transactionalId() + "' timed out and was aborted", timeout));
    }

    @Override
    public void afterCompletion(int status) {
        TransactionSession session = this.holder.session();
        try {
            if (status == STATUS_COMMITTED && !this.committed) {
                // enlisted after afterCommit ran (a send from an afterCommit callback): commit it now, best effort
                afterCommit();
            }
            if (status != STATUS_COMMITTED) {
                rollBack(session, status);
            }
        }
        catch (RuntimeException ex) {
            logger.error("Ending the Kafka transaction of session '" + session.transactionalId() + "' failed", ex);
        }
        finally {
            unbind();
            this.holder.markEnded();
            this.holder.clear();
            PooledSession lease = this.holder.lease();
            CompletableFuture<Boolean> pending = this.clearing;
            if (pending == null && this.holder.isDecisionInDoubt()) {
                // the decision may be committed and nothing here carried it out (a completion and its settling
                // failed, an unknown database outcome): whatever state the session is in, nothing may initialize the
                // id (which aborts) before the decision log is read
                lease.releaseInDoubt();
            }
            else if (pending == null) {
                lease.release();
            }
            else {
                pending.whenComplete((cleared, failure) -> {
                    if (Boolean.TRUE.equals(cleared)) {
                        lease.release();
                    }
                    else {
                        lease.releaseInDoubt();
                    }
                });
            }
        }
    }

    private void rollBack(TransactionSession session, int status) {
        if (this.holder.isDecisionMayBeCommitted()) {
            if (status == STATUS_UNKNOWN) {
                logger.warn("The outcome of the database commit of session '" + session.transactionalId() + "' is "
                        + "unknown; its Kafka transaction stays prepared and is settled from the decision log");
                return;
            }
            if (decisionCommittedAnyway(session)) {
                return;
            }
        }
        SessionState state = session.state();
        if (state == SessionState.IN_TRANSACTION || state == SessionState.PREPARED
                || state == SessionState.ABORTABLE_ERROR) {
            try {
                session.abortTransaction();
            }
            catch (RuntimeException ex) {
                notifyFailed(session, ex);
                logger.warn("Aborting the Kafka transaction of session '" + session.transactionalId() + "' failed: "
                        + ex.getMessage());
                return;
            }
        }
        Duration took = Duration.ofNanos(System.nanoTime() - this.holder.beganNanos());
        for (SessionTransactionObserver o : this.observers) {
            try {
                o.rolledBack(session.transactionalId(), took);
            }
            catch (RuntimeException ex) {
                logger.warn("Session transaction observer " + o + " failed", ex);
            }
        }
    }

    /**
     * The decision was written and the manager reports a rollback: usually the database did roll back (another
     * {@code beforeCommit} failed, or Hibernate's flush at commit was refused), but a manager reports a COMMIT that
     * failed on its way back as rolled back too. The decision log says which: a committed decision completes the
     * Kafka side (the database did commit); an unreadable one leaves it prepared for the pool to settle.
     *
     * @return true if nothing is left to do (completed, or left prepared); false to abort
     */
    private boolean decisionCommittedAnyway(TransactionSession session) {
        PreparedTransaction p = this.recorded;
        TwoPhaseDecision decision = this.twoPhase;
        if (p == null || decision == null) {
            return false;
        }
        boolean recorded;
        try {
            recorded = decision.isRecorded(session.transactionalId(), p);
        }
        catch (RuntimeException ex) {
            logger.warn("The database reported a failed commit of session '" + session.transactionalId() + "' and "
                    + "its decision cannot be read (" + ex + "); its Kafka transaction stays prepared and is settled "
                    + "from the decision log");
            return true;
        }
        if (!recorded) {
            if (!decision.rollbackIsCertain()) {
                // the commit's reply may have been lost while the commit itself still lands: decide later
                logger.warn("The database reported a failed commit of session '" + session.transactionalId() + "' "
                        + "over a broken connection and its decision is not (yet) in the log; its Kafka transaction "
                        + "stays prepared and is settled from the decision log in a few seconds");
                return true;
            }
            this.holder.markDecisionCarriedOut(); // the decision did not commit: aborting is what it says
            return false;
        }
        logger.warn("The database reported a failed commit of session '" + session.transactionalId() + "', but its "
                + "decision to commit is in the decision log: the database committed, so Kafka commits too");
        afterCommit();
        return true;
    }

    private void notifyFailed(TransactionSession session, RuntimeException failure) {
        if (!(failure instanceof TransactionSessionException tse)) {
            return;
        }
        for (SessionTransactionObserver o : this.observers) {
            try {
                o.failed(session.transactionalId(), tse);
            }
            catch (RuntimeException ex) {
                logger.warn("Session transaction observer " + o + " failed", ex);
            }
        }
    }
}
