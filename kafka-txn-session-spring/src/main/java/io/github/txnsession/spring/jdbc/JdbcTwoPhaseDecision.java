package io.github.txnsession.spring.jdbc;

import java.sql.Connection;
import java.sql.SQLException;
import java.time.Instant;
import java.util.Objects;

import javax.sql.DataSource;

import io.github.txnsession.kafka.PreparedTransaction;
import io.github.txnsession.spring.TwoPhaseDecision;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import org.springframework.jdbc.datasource.ConnectionHolder;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * The {@link TwoPhaseDecision} of a JDBC database, for sessions enlisted in the application's own transaction manager
 * ({@code JdbcTransactionManager}, {@code DataSourceTransactionManager}, {@code JpaTransactionManager} with its
 * {@code DataSource}, or any manager that binds the {@code DataSource}'s connection to the transaction): the decision
 * row is written through the transaction's own connection, so it commits exactly when the application's data does.
 *
 * <p>Fails fast: a manager that does not bind a connection of this {@code DataSource} to the transaction (a
 * {@code JpaTransactionManager} without a {@code DataSource}, a manager of another database) would write the row
 * outside the transaction, so the commit is refused with a message saying what to configure.
 */
public class JdbcTwoPhaseDecision implements TwoPhaseDecision {

    private static final Logger log = LoggerFactory.getLogger(JdbcTwoPhaseDecision.class);

    private final DataSource dataSource;
    private final DecisionLog decisionLog;
    private final TwoPhaseRecovery recovery;

    /**
     * @param dataSource the application's database, the one its transaction manager binds
     * @param decisionLog the decision log table in that database
     * @param recovery recovery of the session pool (settles failed completions)
     */
    public JdbcTwoPhaseDecision(DataSource dataSource, DecisionLog decisionLog, TwoPhaseRecovery recovery) {
        this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
        this.decisionLog = Objects.requireNonNull(decisionLog, "decisionLog");
        this.recovery = Objects.requireNonNull(recovery, "recovery");
    }

    @Override
    public void ensureReady() {
        this.recovery.ensureStartupRun();
    }

    @Override
    public void record(String transactionalId, PreparedTransaction prepared) {
        // the transaction's own connection, bound by its manager; DataSourceUtils.getConnection would otherwise open
        // (and bind) a new auto-commit connection, and the decision would commit whatever the transaction does
        Connection con = transactionConnection();
        try {
            if (con == null || con.getAutoCommit()) {
                throw new IllegalStateException("The two-phase commit of session '" + transactionalId + "' must write "
                        + "its decision in the database transaction, but the transaction manager did not bind a "
                        + "transactional connection of " + this.dataSource + ". Use a transaction manager over that "
                        + "DataSource (JdbcTransactionManager, or JpaTransactionManager with its DataSource).");
            }
            this.decisionLog.record(con, transactionalId, prepared);
        }
        catch (SQLException ex) {
            if (ex instanceof DecisionFencedException) {
                this.recovery.decisionFenced(transactionalId);
            }
            throw new DecisionLogException("Writing the decision of session '" + transactionalId + "' to "
                    + this.decisionLog.table() + " failed; the transaction rolls back", ex);
        }
    }

    /** A fleet's new owner may have settled the id while this instance was paused: see {@link TwoPhaseRecovery}. */
    @Override
    public boolean confirmOpenAfterRecord() {
        return this.recovery.isFleet();
    }

    /**
     * The transaction's connection (still bound while Spring runs the completion callbacks) is asked whether it is
     * still valid: a database that answered the COMMIT with an error (a constraint checked at commit, a serialization
     * failure) left it usable, and that transaction surely rolled back; a broken connection is how a lost reply looks,
     * and then the commit may still land after the read-back.
     */
    @Override
    public boolean rollbackIsCertain() {
        Connection con = transactionConnection();
        if (con == null) {
            return false;
        }
        try {
            return con.isValid(2);
        }
        catch (SQLException ex) {
            return false;
        }
    }

    private @Nullable Connection transactionConnection() {
        if (!(TransactionSynchronizationManager.getResource(this.dataSource) instanceof ConnectionHolder holder)) {
            return null;
        }
        try {
            return holder.getConnection();
        }
        catch (IllegalStateException released) {
            return null;
        }
    }

    @Override
    public void confirmed(String transactionalId, PreparedTransaction confirmed) {
        this.recovery.rememberConfirmed(transactionalId, confirmed);
    }

    @Override
    public void settle(String transactionalId, PreparedTransaction prepared, RuntimeException failure) {
        this.recovery.settleAfterFailedCompletion(transactionalId, prepared, failure);
    }

    @Override
    public boolean isRecorded(String transactionalId, PreparedTransaction prepared) {
        return this.decisionLog.contains(this.dataSource, transactionalId, prepared);
    }

    @Override
    public boolean clear(String transactionalId, PreparedTransaction prepared) {
        try {
            this.decisionLog.clear(this.dataSource, new DecisionRecord(transactionalId, prepared.producerId(),
                    prepared.epoch(), prepared.startTimeMs(), Instant.now()));
            this.recovery.forgetConfirmed(transactionalId);
            return true;
        }
        catch (RuntimeException ex) {
            // both sides committed; the row stays until recovery finds the transaction committed and clears it
            log.warn("Could not clear the decision row of session '{}': {}", transactionalId, ex.toString());
            return false;
        }
    }

    @Override
    public String toString() {
        return "JdbcTwoPhaseDecision[" + this.decisionLog + "]";
    }
}
