package io.github.txnsession.autoconfigure;

import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.jdbc.init.DatabaseInitializationProperties;
import org.springframework.boot.sql.init.DatabaseInitializationMode;

/**
 * Settings of the JDBC two-phase commit ({@code kafka.txn-session.jdbc.*}): one transaction manager for the
 * application's {@code DataSource} and Kafka, with a decision log table and crash recovery.
 *
 * <p>The decision log table is initialized like the tables of Boot's Spring Session JDBC, Quartz and Spring Batch
 * support ({@code initialize-schema}, {@code schema}, {@code platform}, {@code continue-on-error}), with two
 * different defaults: {@code initialize-schema} is {@link DatabaseInitializationMode#ALWAYS ALWAYS}, because the
 * shipped scripts are idempotent (create the table if it is missing, add a column missing in a table of an earlier
 * version; they never drop or change data) and two-phase commit cannot work without the table, so an application that
 * opts in with {@code enabled=true} gets it on any database, as before; and {@code continue-on-error} is
 * {@code false}, because an idempotent script that fails has a real problem to report. An application whose schema is
 * managed by Flyway or Liquibase, or whose database user may not run DDL, sets {@code initialize-schema=never}.
 */
@ConfigurationProperties(TwoPhaseCommitProperties.PREFIX)
public class TwoPhaseCommitProperties extends DatabaseInitializationProperties {

    /** The prefix of these properties. */
    public static final String PREFIX = "kafka.txn-session.jdbc";

    /** The shipped schema scripts, one per platform (MariaDB uses the MySQL script). */
    public static final String DEFAULT_SCHEMA_LOCATION =
            "classpath:io/github/txnsession/spring/jdbc/schema-@@platform@@.sql";

    /**
     * Whether {@code @Transactional} spans the DataSource and Kafka with two-phase commit. Off by default: an
     * application opts in.
     */
    private boolean enabled;

    /**
     * Name of the decision log table (optionally schema.table). The shipped schema scripts create the default name;
     * with another name and the default schema location, the table is created with portable CREATE TABLE IF NOT
     * EXISTS SQL instead.
     */
    private String table = "kafka_txn_decision_log";

    /** Whether to run recovery at startup, before the session pool hands out any session. */
    private boolean recoverOnStartup = true;

    /**
     * Whether the Kafka side of a commit is completed off the committing thread once the database committed the
     * decision: the commit returns about one broker round trip sooner, and a Kafka completion failure is settled and
     * logged in the background instead of thrown to the caller. Records become visible shortly after the commit
     * returns, as they do after a Kafka commit.
     */
    private boolean completeInBackground;

    /**
     * Whether the decision row is written while the Kafka side is prepared (transaction version 2), instead of after:
     * the two round trips overlap, and the coordinator is asked while the flush runs. Trade-off: a Kafka transaction
     * the coordinator aborted on its timeout between the two commits (after a process crash, or a completion delayed
     * that long) is reported in doubt (for an operator) rather than lost (for the LostTransactionHandler), because the
     * decision has no coordinator start time.
     */
    private boolean decisionAlongsidePrepare;

    /** Settings with the defaults described above. */
    public TwoPhaseCommitProperties() {
        setInitializeSchema(DatabaseInitializationMode.ALWAYS);
        setContinueOnError(false);
    }

    /**
     * @return whether {@code @Transactional} spans the DataSource and Kafka with two-phase commit (default false: an
     *         application opts in)
     */
    public boolean isEnabled() {
        return this.enabled;
    }

    /** @param enabled true to span the DataSource and Kafka with two-phase commit */
    public void setEnabled(boolean enabled) {
        this.enabled = enabled;
    }

    /** @return the name of the decision log table, optionally schema.table (default kafka_txn_decision_log) */
    public String getTable() {
        return this.table;
    }

    /**
     * @param table the name of the decision log table, optionally schema.table; letters, digits and underscores only.
     *        With another name than the default and the default schema location, the table is created with portable
     *        CREATE TABLE IF NOT EXISTS SQL instead of the shipped scripts
     */
    public void setTable(String table) {
        this.table = table;
    }

    /** @return whether to run recovery at startup, before the session pool hands out any session (default true) */
    public boolean isRecoverOnStartup() {
        return this.recoverOnStartup;
    }

    /** @param recoverOnStartup false to skip recovery at startup */
    public void setRecoverOnStartup(boolean recoverOnStartup) {
        this.recoverOnStartup = recoverOnStartup;
    }

    /**
     * @return whether the Kafka side of a commit is completed off the committing thread once the database committed
     *         the decision (default false)
     */
    public boolean isCompleteInBackground() {
        return this.completeInBackground;
    }

    /**
     * @param completeInBackground true to complete the Kafka side of a commit in the background: the commit returns
     *        sooner, and a Kafka completion failure is settled and logged instead of thrown to the caller
     */
    public void setCompleteInBackground(boolean completeInBackground) {
        this.completeInBackground = completeInBackground;
    }

    /**
     * @return whether the decision row is written while the Kafka side is prepared (default false)
     */
    public boolean isDecisionAlongsidePrepare() {
        return this.decisionAlongsidePrepare;
    }

    /**
     * @param decisionAlongsidePrepare true to write the decision row while the Kafka side is prepared: the commit is
     *        faster, and a crash between the two commits followed by the coordinator's timeout is reported in doubt
     *        rather than lost
     */
    public void setDecisionAlongsidePrepare(boolean decisionAlongsidePrepare) {
        this.decisionAlongsidePrepare = decisionAlongsidePrepare;
    }

    @Override
    public String getDefaultSchemaLocation() {
        return DEFAULT_SCHEMA_LOCATION;
    }
}
