package io.github.txnsession.spring.jdbc;

import java.sql.Connection;
import java.sql.SQLException;
import java.util.List;
import java.util.Objects;

import javax.sql.DataSource;

import io.github.txnsession.kafka.CompletionOutcome;
import io.github.txnsession.kafka.PreparedTransaction;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.spring.CommitPhase;
import io.github.txnsession.spring.CommitPhaseListener;
import io.github.txnsession.spring.SessionProducerFactory;
import io.github.txnsession.spring.SessionResourceHolder;
import io.github.txnsession.spring.SessionTransactionManager;
import io.github.txnsession.spring.TransactionSessionPool;
import org.jspecify.annotations.Nullable;

import org.springframework.jdbc.datasource.ConnectionHolder;
import org.springframework.jdbc.datasource.DataSourceUtils;
import org.springframework.transaction.CannotCreateTransactionException;
import org.springframework.transaction.HeuristicCompletionException;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.TransactionSystemException;
import org.springframework.transaction.TransactionTimedOutException;
import org.springframework.transaction.support.DefaultTransactionStatus;
import org.springframework.transaction.support.DelegatingTransactionDefinition;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * One transaction manager for a JDBC {@link DataSource} and Kafka, with a real two-phase commit: a
 * {@code @Transactional} method that writes with {@code JdbcTemplate} (or anything using {@link DataSourceUtils})
 * and sends with {@code KafkaTemplate} commits both or neither, also across crashes.
 *
 * <h2>Commit protocol</h2>
 * <ol>
 * <li>prepare the Kafka transaction ({@link TransactionSession#prepareTransaction()}: flush, offsets, identity);</li>
 * <li>write the decision row ({@code transactional id, producer id, epoch, start time}) through the same JDBC
 * connection;</li>
 * <li>commit the JDBC transaction: this is the decision;</li>
 * <li>complete the Kafka transaction ({@link TransactionSession#completeTransaction});</li>
 * <li>clear the decision row.</li>
 * </ol>
 * A failure before step 3 rolls both back. A crash after it leaves a row; {@link TwoPhaseRecovery} (run at start-up,
 * before the pool hands out sessions) commits the Kafka transaction from it. A crash before it leaves a prepared
 * Kafka transaction and no row; recovery aborts it. A JDBC commit whose outcome is unknown (the connection broke) is
 * settled by reading the decision row back; if even that fails, the Kafka transaction stays prepared for recovery.
 *
 * <h2>Not guaranteed</h2>
 * Kafka-native 2PC (KIP-939) is not available on released brokers, so the coordinator aborts a prepared transaction
 * after {@code transaction.timeout.ms}. If the process dies after the JDBC commit and recovery runs only after that
 * timeout, the Kafka side is lost: recovery reports it ({@link LostTransactionHandler}, health DOWN) so the
 * application can compensate. Give sessions a long {@code transaction.timeout.ms} (the starter defaults to the
 * broker's {@code transaction.max.timeout.ms}) and run recovery promptly.
 * Isolation levels, read-only flags and timeouts apply to the JDBC connection (a transaction whose timeout has passed
 * rolls both sides back at commit); nested transactions are not supported. The session transaction observers
 * (metrics) see rollbacks but not the commits of this manager.
 */
public class JdbcKafkaTransactionManager extends SessionTransactionManager {

    private static final long serialVersionUID = 1L;

    private final transient DataSource dataSource;
    private final transient DecisionLog decisionLog;
    private final transient @Nullable TwoPhaseRecovery recovery;
    private transient List<CommitPhaseListener> phaseListeners = List.of();

    /**
     * @param pool the sessions; their transactional id prefix must be the one {@code recovery} recovers
     * @param producerFactory the factory whose templates take part
     * @param dataSource the database
     * @param decisionLog the decision log table in that database
     * @param recovery run once before the first transaction begins, so that no session is reused before what a
     *        crash left behind is settled; null if the application runs recovery itself before any transaction
     */
    public JdbcKafkaTransactionManager(TransactionSessionPool pool, SessionProducerFactory<Object, Object> producerFactory,
            DataSource dataSource, DecisionLog decisionLog, @Nullable TwoPhaseRecovery recovery) {
        super(pool, producerFactory);
        pool.settledByRecovery(); // prepared transactions of its ids are settled by two-phase recovery only
        this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
        this.decisionLog = Objects.requireNonNull(decisionLog, "decisionLog");
        this.recovery = recovery;
        if (recovery != null && !recovery.transactionalIdPrefix().equals(pool.transactionalIdPrefix())) {
            throw new IllegalArgumentException("The recovery is for prefix '" + recovery.transactionalIdPrefix()
                    + "' but the pool's prefix is '" + pool.transactionalIdPrefix() + "'");
        }
        if (recovery != null) {
            // a session released with its commit in doubt is settled from the decision log before its id is reused
            pool.setInDoubtResolver(recovery::recoverTransactionalId);
        }
    }

    /** @param listeners told as each commit passes each {@link CommitPhase} */
    public void setCommitPhaseListeners(List<? extends CommitPhaseListener> listeners) {
        this.phaseListeners = List.copyOf(listeners);
    }

    /** @return the database of this manager */
    public DataSource getDataSource() {
        return this.dataSource;
    }

    /** @return the decision log */
    public DecisionLog getDecisionLog() {
        return this.decisionLog;
    }

    @Override
    protected void doBegin(Object transaction, TransactionDefinition definition) {
        if (this.recovery != null) {
            this.recovery.ensureRecovered();
        }
        // the isolation level is the database's business: the session side runs with the default
        super.doBegin(transaction, new DelegatingTransactionDefinition(definition) {
            @Override
            public int getIsolationLevel() {
                return TransactionDefinition.ISOLATION_DEFAULT;
            }
        });
        Connection con = null;
        try {
            con = this.dataSource.getConnection();
            DataSourceUtils.prepareConnectionForTransaction(con, definition);
            if (con.getAutoCommit()) {
                con.setAutoCommit(false);
            }
            ConnectionHolder holder = new ConnectionHolder(con);
            holder.setSynchronizedWithTransaction(true);
            int timeout = determineTimeout(definition);
            if (timeout != TransactionDefinition.TIMEOUT_DEFAULT) {
                holder.setTimeoutInSeconds(timeout);
            }
            TransactionSynchronizationManager.bindResource(this.dataSource, holder);
        }
        catch (SQLException | RuntimeException ex) {
            if (con != null) {
                DataSourceUtils.releaseConnection(con, this.dataSource);
            }
            TransactionSession session = currentSession();
            try {
                session.abortTransaction();
            }
            catch (RuntimeException abortFailure) {
                ex.addSuppressed(abortFailure);
            }
            super.doCleanupAfterCompletion(transaction);
            throw new CannotCreateTransactionException("Could not open a JDBC connection for the transaction: "
                    + ex.getMessage(), ex);
        }
    }

    @Override
    protected Object doSuspend(Object transaction) {
        Object sessionResources = super.doSuspend(transaction);
        Object jdbc = TransactionSynchronizationManager.unbindResource(this.dataSource);
        return new Suspended(sessionResources, jdbc);
    }

    @Override
    protected void doResume(@Nullable Object transaction, Object suspendedResources) {
        Suspended suspended = (Suspended) suspendedResources;
        super.doResume(transaction, suspended.session());
        TransactionSynchronizationManager.bindResource(this.dataSource, suspended.jdbc());
    }

    @Override
    protected void doCommit(DefaultTransactionStatus status) {
        TransactionSession session = currentSession();
        String id = session.transactionalId();
        ConnectionHolder connection = currentConnection();
        Connection con = connection.getConnection();
        if (connection.hasTimeout()) {
            try {
                connection.getTimeToLiveInMillis(); // throws once the transaction's timeout has passed
            }
            catch (TransactionTimedOutException ex) {
                rollBackBoth(con, session, ex);
                throw ex;
            }
        }

        phase(CommitPhase.BEFORE_PREPARE, id);
        PreparedTransaction state;
        try {
            state = session.prepareTransaction();
        }
        catch (RuntimeException ex) {
            rollBackBoth(con, session, ex);
            throw new TransactionSystemException("Kafka prepare of session '" + id + "' failed; the database and "
                    + "Kafka transactions were rolled back: " + ex.getMessage(), ex);
        }
        phase(CommitPhase.AFTER_PREPARE, id);
        if (state.isEmpty()) {
            commitWithoutKafka(con, session);
            return;
        }
        try {
            this.decisionLog.record(con, id, state);
            if (this.recovery != null && this.recovery.isFleet()) {
                session.heartbeat(); // fleet: see JdbcTwoPhaseDecision#confirmOpenAfterRecord
                if (session.state() != io.github.txnsession.kafka.SessionState.PREPARED) {
                    // a background heartbeat found the failure first and moved the session on
                    throw new IllegalStateException("the Kafka transaction is no longer prepared (" + session.state()
                            + "): a new owner of the id settled it");
                }
            }
        }
        catch (SQLException | RuntimeException ex) {
            rollBackBoth(con, session, ex);
            if (ex instanceof DecisionFencedException && this.recovery != null) {
                this.recovery.decisionFenced(id);
            }
            throw new TransactionSystemException("Writing (or, in a fleet, confirming) the decision of session '" + id
                    + "' to " + this.decisionLog.table() + " failed; both transactions were rolled back: " + ex, ex);
        }
        phase(CommitPhase.AFTER_LOG_INSERT, id);
        // from here on the decision may be committed: nothing may abort the Kafka transaction any more
        sessionHolder().markDecisionMayBeCommitted();
        try {
            con.commit();
        }
        catch (SQLException ex) {
            settleFailedJdbcCommit(con, session, state, ex);
        }
        phaseAfterDecision(CommitPhase.AFTER_JDBC_COMMIT, id);
        try {
            session.completeTransaction(state);
        }
        catch (RuntimeException ex) {
            settleFailedCompletion(id, state, ex); // throws unless recovery committed it
        }
        sessionHolder().markDecisionCarriedOut();
        phaseAfterDecision(CommitPhase.AFTER_KAFKA_COMMIT, id);
        try {
            this.decisionLog.clear(con, id, state);
            con.commit();
        }
        catch (SQLException ex) {
            // both sides are committed; the stale row is replaced by the session's next decision, and recovery
            // would find the transaction already committed
            logger.warn("Could not clear the decision row of session '" + id + "' (" + ex.getMessage()
                    + "); both transactions are committed");
        }
        phaseAfterDecision(CommitPhase.AFTER_LOG_CLEAR, id);
    }

    /**
     * The database committed the decision, but completing the Kafka transaction from this session failed: settle it
     * at once from the decision log (see {@link TwoPhaseRecovery#settleAfterFailedCompletion}).
     */
    private void settleFailedCompletion(String id, PreparedTransaction state, RuntimeException failure) {
        if (this.recovery == null) {
            throw new HeuristicCompletionException(HeuristicCompletionException.STATE_UNKNOWN,
                    new TransactionSystemException("The database committed, but completing Kafka transaction " + state
                            + " of session '" + id + "' failed: " + failure.getMessage() + ". Its decision row stays "
                            + "in " + this.decisionLog.table() + " for recovery.", failure));
        }
        this.recovery.settleAfterFailedCompletion(id, state, failure);
    }

    /**
     * The transaction wrote nothing to Kafka: an ordinary database commit, with no decision row and nothing for
     * recovery. The empty Kafka transaction then ends locally (bound share consumers apply their acknowledgements,
     * bound consumers forget what they read); it never touches a later transaction.
     */
    private void commitWithoutKafka(Connection con, TransactionSession session) {
        try {
            con.commit();
        }
        catch (SQLException ex) {
            try {
                session.abortTransaction();
            }
            catch (RuntimeException abortFailure) {
                ex.addSuppressed(abortFailure);
            }
            throw new TransactionSystemException("The JDBC commit of session '" + session.transactionalId()
                    + "' failed (" + ex.getMessage() + "); it wrote nothing to Kafka", ex);
        }
        session.commitTransaction();
    }

    private static boolean isValid(Connection con) {
        try {
            return con.isValid(2);
        }
        catch (SQLException ex) {
            return false;
        }
    }

    /**
     * The JDBC commit threw: find out from the log whether the decision was written, and act on the answer. No row
     * is trusted only over a connection that still works (the database answered the COMMIT with an error).
     */
    private void settleFailedJdbcCommit(Connection con, TransactionSession session, PreparedTransaction state,
            SQLException failure) {
        String id = session.transactionalId();
        boolean decided;
        try {
            decided = this.decisionLog.contains(this.dataSource, id, state);
        }
        catch (DecisionLogException unknown) {
            failure.addSuppressed(unknown);
            throw new HeuristicCompletionException(HeuristicCompletionException.STATE_UNKNOWN,
                    new TransactionSystemException("The JDBC commit of session '" + id + "' failed and its outcome "
                            + "cannot be read back; Kafka transaction " + state + " stays prepared until recovery "
                            + "decides from " + this.decisionLog.table(), failure));
        }
        if (!decided && !isValid(con)) {
            // a broken connection is how a lost COMMIT reply looks: the commit may still land after the read-back
            throw new HeuristicCompletionException(HeuristicCompletionException.STATE_UNKNOWN,
                    new TransactionSystemException("The JDBC commit of session '" + id + "' failed over a broken "
                            + "connection and its decision is not (yet) in " + this.decisionLog.table() + "; Kafka "
                            + "transaction " + state + " stays prepared and its id is settled from the log", failure));
        }
        if (!decided) {
            sessionHolder().markDecisionCarriedOut(); // the decision did not commit: aborting is what it says
            try {
                session.abortTransaction();
            }
            catch (RuntimeException abortFailure) {
                failure.addSuppressed(abortFailure);
            }
            throw new TransactionSystemException("The JDBC commit of session '" + id + "' failed ("
                    + failure.getMessage() + "); the Kafka transaction was aborted, nothing is visible", failure);
        }
        logger.info("The JDBC commit of session '" + id + "' reported " + failure.getMessage()
                + " but the decision is in the log: completing Kafka");
    }

    @Override
    protected void doRollback(DefaultTransactionStatus status) {
        ConnectionHolder holder = currentConnection();
        RuntimeException jdbcFailure = null;
        try {
            holder.getConnection().rollback();
        }
        catch (SQLException ex) {
            jdbcFailure = new TransactionSystemException("Could not roll back the JDBC transaction", ex);
        }
        super.doRollback(status);
        if (jdbcFailure != null) {
            throw jdbcFailure;
        }
    }

    @Override
    protected void doSetRollbackOnly(DefaultTransactionStatus status) {
        super.doSetRollbackOnly(status);
        currentConnection().setRollbackOnly();
    }

    @Override
    protected void doCleanupAfterCompletion(Object transaction) {
        Object bound = TransactionSynchronizationManager.unbindResourceIfPossible(this.dataSource);
        if (bound instanceof ConnectionHolder holder) {
            Connection con = holder.getConnection();
            try {
                con.setAutoCommit(true);
            }
            catch (SQLException ex) {
                logger.debug("Could not reset autocommit of the JDBC connection", ex);
            }
            holder.clear();
            DataSourceUtils.releaseConnection(con, this.dataSource);
        }
        super.doCleanupAfterCompletion(transaction);
    }

    private void rollBackBoth(Connection con, TransactionSession session, Exception cause) {
        try {
            con.rollback();
        }
        catch (SQLException ex) {
            cause.addSuppressed(ex);
        }
        try {
            session.abortTransaction();
        }
        catch (RuntimeException ex) {
            cause.addSuppressed(ex);
        }
    }

    private void phase(CommitPhase phase, String transactionalId) {
        for (CommitPhaseListener listener : this.phaseListeners) {
            listener.reached(phase, transactionalId);
        }
    }

    /** After the decision a failing listener must not turn the commit into a rollback: it is logged only. */
    private void phaseAfterDecision(CommitPhase phase, String transactionalId) {
        try {
            phase(phase, transactionalId);
        }
        catch (RuntimeException ex) {
            logger.warn("Commit phase listener failed at " + phase + " of session '" + transactionalId + "'", ex);
        }
    }

    private SessionResourceHolder sessionHolder() {
        Object bound = TransactionSynchronizationManager.getResource(getPool());
        if (!(bound instanceof SessionResourceHolder holder)) {
            throw new IllegalStateException("No transaction session is bound to this thread");
        }
        return holder;
    }

    private TransactionSession currentSession() {
        return sessionHolder().session();
    }

    private ConnectionHolder currentConnection() {
        Object bound = TransactionSynchronizationManager.getResource(this.dataSource);
        if (!(bound instanceof ConnectionHolder holder)) {
            throw new IllegalStateException("No JDBC connection is bound to this thread for " + this.dataSource);
        }
        return holder;
    }

    @Override
    public String toString() {
        return "JdbcKafkaTransactionManager[" + getPool() + ", " + this.decisionLog + "]";
    }

    private record Suspended(Object session, Object jdbc) {
    }
}
