package io.github.txnsession.spring;

import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import org.springframework.jdbc.datasource.ConnectionHolder;
import org.springframework.transaction.NoTransactionException;
import org.springframework.transaction.TransactionException;
import org.springframework.transaction.TransactionExecution;
import org.springframework.transaction.TransactionExecutionListener;
import org.springframework.transaction.interceptor.TransactionAspectSupport;
import org.springframework.transaction.support.DefaultTransactionStatus;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * Prepares the Kafka sessions enlisted in a transaction at the last moment of its commit: after every
 * {@code beforeCommit} and {@code beforeCompletion} callback (a {@code @TransactionalEventListener(BEFORE_COMMIT)}
 * that sends included), right before the database commits.
 *
 * <p>Why: a session enlisted through a {@link TransactionSynchronization} alone prepares in its own
 * {@code beforeCommit}, in the order the callbacks were registered. A callback registered after it that sends fails
 * the transaction (the session is already prepared), and a first send from a callback that runs after the
 * synchronizations were collected would join after the two-phase decision was taken: it is refused (from
 * {@code beforeCommit}, which rolls the transaction back) or commits best effort (from {@code beforeCompletion},
 * whose exceptions Spring swallows). Added to the application's transaction manager
 * ({@code ConfigurableTransactionManager#addListener}; the starter adds it to every manager in the context), this
 * listener opens a commit point when a transaction begins, sessions enlisted in that transaction register with it,
 * and it prepares them in the manager's {@code beforeCommit} notification, which Spring calls after all callbacks and
 * before {@code doCommit}. An exception there rolls the database back.
 *
 * <p>Without the listener on the manager that runs a transaction, its sessions prepare in their own
 * {@code beforeCommit}, as before. Not for JTA managers (they release JDBC connections in {@code beforeCompletion},
 * before this listener runs): the starter leaves them alone.
 */
public final class SessionCommitPoint implements TransactionSynchronization {

    /** The listener to add to the application's transaction managers. Stateless; one for all pools. */
    public static final TransactionExecutionListener LISTENER = new TransactionExecutionListener() {

        @Override
        public void afterBegin(TransactionExecution transaction, @Nullable Throwable beginFailure) {
            // only a transaction with synchronization of its own (not a JTA-style nested one sharing its outer's)
            if (beginFailure == null && transaction.isNewTransaction()
                    && transaction instanceof DefaultTransactionStatus status && status.isNewSynchronization()
                    && TransactionSynchronizationManager.isSynchronizationActive()) {
                open(transaction);
            }
        }

        @Override
        public void beforeCommit(TransactionExecution transaction) {
            SessionCommitPoint point = current();
            if (point == null || point.owner != transaction) {
                return;
            }
            point.reached = true;
            if (!point.sessions.isEmpty() && transaction.isRollbackOnly()) {
                // marked rollback-only during the commit (a beforeCommit callback caught a failure): the manager
                // would still commit the database and then report a rollback; fail here so that it rolls back
                throw new IllegalStateException("The transaction was marked rollback-only while it was committing; "
                        + "it rolls back, Kafka included");
            }
            point.prepareAll();
        }

        @Override
        public String toString() {
            return "SessionCommitPoint.LISTENER";
        }
    };

    private static final Log log = LogFactory.getLog(SessionCommitPoint.class);

    /** the thread-bound resource key of the current transaction's commit point */
    private static final Object KEY = new Object() {
        @Override
        public String toString() {
            return "SessionCommitPoint.KEY";
        }
    };

    private final List<EnlistedSessionSynchronization> sessions = new ArrayList<>(1);
    /** the transaction this point was opened for */
    private final TransactionExecution owner;
    /** the transaction's beforeCommit callbacks have started, and the commit has not finished */
    private volatile boolean committing;
    /** the manager's beforeCommit notification came: after it, only the database commit itself can fail */
    private volatile boolean reached;

    private SessionCommitPoint(TransactionExecution owner) {
        this.owner = owner;
    }

    private static void open(TransactionExecution owner) {
        SessionCommitPoint point = new SessionCommitPoint(owner);
        // a point left bound by a transaction that did not complete normally must not block this one
        TransactionSynchronizationManager.unbindResourceIfPossible(KEY);
        TransactionSynchronizationManager.bindResource(KEY, point);
        TransactionSynchronizationManager.registerSynchronization(point);
    }

    /** @return the commit point of the calling thread's transaction, if its manager has the listener */
    static @Nullable SessionCommitPoint current() {
        return TransactionSynchronizationManager.getResource(KEY) instanceof SessionCommitPoint p ? p : null;
    }

    /**
     * @return whether the manager's beforeCommit notification came and the database commit has not finished: a
     *         session enlisted now would not be prepared
     */
    boolean isPastPrepare() {
        return this.reached && this.committing;
    }

    /**
     * @return whether the calling thread runs inside a {@code beforeCommit} callback of <em>its current</em>
     *         transaction, where an exception rolls the transaction back (a JTA synchronization's
     *         {@code beforeCompletion}, which runs them, included). Spring does not expose the phase; the stack shows
     *         it: a frame of Spring's {@code triggerBeforeCommit}. Whether the callback belongs to the current
     *         transaction, or a new one began inside it ({@code REQUIRES_NEW}, which has a commit of its own), is told
     *         by the current transaction's synchronizations: they include the running callback (an instance of the
     *         class that declares its {@code beforeCommit}) only in the first case; and an innermost
     *         {@code @Transactional} boundary inside the callback that began a transaction with synchronization of its
     *         own settles it. Participating calls at any depth are seen through. Not Spring's own
     *         {@code beforeCompletion} callbacks: it swallows what they throw. Only asked when a two-phase session
     *         enlists in a transaction without a commit point.
     */
    static boolean insideCommitCallbacks() {
        CallbackFrames found = StackWalker.getInstance(Set.of(StackWalker.Option.SHOW_HIDDEN_FRAMES,
                StackWalker.Option.RETAIN_CLASS_REFERENCE)).walk(frames -> {
                    Class<?> previous = null;
                    String innermostBoundary = null;
                    for (StackWalker.StackFrame frame : (Iterable<StackWalker.StackFrame>) frames::iterator) {
                        if (isCommitCallbackFrame(frame)) {
                            return new CallbackFrames(previous, innermostBoundary);
                        }
                        if (innermostBoundary == null && isTransactionBoundary(frame)) {
                            innermostBoundary = frame.getClassName();
                        }
                        previous = frame.getDeclaringClass();
                    }
                    return null;
                });
        if (found == null) {
            return false;
        }
        if (DECLARATIVE.equals(found.innermostBoundary()) && innermostDeclarativeHasNewSynchronization()) {
            return false;
        }
        Class<?> callback = found.callbackClass();
        if (callback == null) {
            return true;
        }
        // the class that declares the running beforeCommit: the callback, or a base class of it
        return TransactionSynchronizationManager.getSynchronizations().stream().anyMatch(callback::isInstance);
    }

    private static final String DECLARATIVE = "org.springframework.transaction.interceptor.TransactionAspectSupport";

    /** What the stack shows above Spring's commit callback loop: the callback's class, a boundary began since. */
    private record CallbackFrames(@Nullable Class<?> callbackClass, @Nullable String innermostBoundary) {
    }

    private static boolean isCommitCallbackFrame(StackWalker.StackFrame frame) {
        String method = frame.getMethodName();
        return switch (frame.getClassName()) {
            case "org.springframework.transaction.support.TransactionSynchronizationUtils" ->
                method.equals("triggerBeforeCommit");
            case "org.springframework.transaction.jta.SpringJtaSynchronizationAdapter" ->
                method.equals("beforeCompletion");
            default -> false;
        };
    }

    private static boolean isTransactionBoundary(StackWalker.StackFrame frame) {
        return (frame.getClassName().equals(DECLARATIVE) && frame.getMethodName().equals("invokeWithinTransaction"))
                || (frame.getClassName().equals("org.springframework.transaction.support.TransactionTemplate")
                        && frame.getMethodName().equals("execute"));
    }

    /**
     * @return whether the innermost {@code @Transactional} call began a transaction with synchronization of its own:
     *         a new transaction of another manager that shares the committing one's synchronization does not count
     */
    private static boolean innermostDeclarativeHasNewSynchronization() {
        try {
            return TransactionAspectSupport.currentTransactionStatus() instanceof DefaultTransactionStatus status
                    && status.isNewSynchronization();
        }
        catch (NoTransactionException ex) {
            return false;
        }
    }

    /** The session will be prepared by this point; its own {@code beforeCommit} then does nothing. */
    void register(EnlistedSessionSynchronization session) {
        this.sessions.add(session);
    }

    private void prepareAll() {
        for (EnlistedSessionSynchronization session : List.copyOf(this.sessions)) {
            session.prepareForCommit();
        }
    }

    /** First of the transaction's callbacks: from here on the transaction is committing. */
    @Override
    public int getOrder() {
        return HIGHEST_PRECEDENCE;
    }

    @Override
    public void beforeCommit(boolean readOnly) {
        this.committing = true;
    }

    /**
     * A Spring {@code TransactionException} thrown while a transaction commits (from a send in a {@code beforeCommit}
     * callback, such as a {@code BEFORE_COMMIT} event listener) is taken by {@code AbstractPlatformTransactionManager}
     * for a failed database commit: it skips the rollback, and JDBC managers then commit the connection when they
     * restore auto-commit. Such an exception is therefore wrapped in an {@link IllegalStateException} while the
     * calling thread's transaction is committing, which rolls the database back.
     *
     * @return the exception to throw
     */
    static RuntimeException duringCommit(TransactionException failure) {
        SessionCommitPoint point = current();
        if (point == null || !point.committing) {
            return failure;
        }
        return new IllegalStateException("A Kafka send failed while the transaction was committing: "
                + failure.getMessage() + " The whole transaction rolls back.", failure);
    }

    @Override
    public void suspend() {
        TransactionSynchronizationManager.unbindResourceIfPossible(KEY);
    }

    @Override
    public void resume() {
        TransactionSynchronizationManager.unbindResourceIfPossible(KEY);
        TransactionSynchronizationManager.bindResource(KEY, this);
    }

    @Override
    public void afterCommit() {
        this.committing = false;
    }

    /**
     * An outcome reported unknown before the manager's {@code beforeCommit} notification came means a Spring
     * {@code TransactionException} was thrown from a {@code beforeCommit} callback (not by the library: its own are
     * wrapped): {@code AbstractPlatformTransactionManager} then skips the rollback, and a JDBC manager's clean-up
     * would commit the connection when it restores auto-commit, while the Kafka side aborts. The database never got
     * to its commit, so its connections are rolled back here, before that clean-up: both sides roll back.
     */
    @Override
    public void afterCompletion(int status) {
        this.committing = false;
        try {
            if (status == STATUS_UNKNOWN && !this.reached && !this.sessions.isEmpty()) {
                rollBackBoundConnections();
            }
        }
        finally {
            if (TransactionSynchronizationManager.getResource(KEY) == this) {
                TransactionSynchronizationManager.unbindResource(KEY);
            }
        }
    }

    private static void rollBackBoundConnections() {
        for (Object resource : TransactionSynchronizationManager.getResourceMap().values()) {
            if (resource instanceof ConnectionHolder holder) {
                try {
                    holder.getConnection().rollback();
                    log.warn("A Spring TransactionException was thrown while the transaction was committing, before "
                            + "the database commit: rolled the database back, as the Kafka side was");
                }
                catch (SQLException | RuntimeException ex) {
                    // RuntimeException: IllegalStateException when the holder has no connection (released already)
                    log.error("Could not roll back the database after a failure before its commit", ex);
                }
            }
        }
    }

    @Override
    public String toString() {
        return "SessionCommitPoint[" + this.sessions.size() + " session(s)]";
    }
}
