package io.github.txnsession.autoconfigure;

import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * Settings of the JDBC two-phase commit ({@code kafka.txn-session.jdbc.*}): one transaction manager for the
 * application's {@code DataSource} and Kafka, with a decision log table and crash recovery.
 */
@ConfigurationProperties(TwoPhaseCommitProperties.PREFIX)
public class TwoPhaseCommitProperties {

    /** The prefix of these properties. */
    public static final String PREFIX = "kafka.txn-session.jdbc";

    /**
     * Whether {@code @Transactional} spans the DataSource and Kafka with two-phase commit. Off by default: an
     * application opts in.
     */
    private boolean enabled;

    /** Name of the decision log table (optionally schema.table). */
    private String table = "kafka_txn_decision_log";

    /** Whether to create the decision log table at startup when it does not exist. */
    private boolean initializeSchema = true;

    /** Whether to run recovery at startup, before the session pool hands out any session. */
    private boolean recoverOnStartup = true;

    public boolean isEnabled() {
        return this.enabled;
    }

    public void setEnabled(boolean enabled) {
        this.enabled = enabled;
    }

    public String getTable() {
        return this.table;
    }

    public void setTable(String table) {
        this.table = table;
    }

    public boolean isInitializeSchema() {
        return this.initializeSchema;
    }

    public void setInitializeSchema(boolean initializeSchema) {
        this.initializeSchema = initializeSchema;
    }

    public boolean isRecoverOnStartup() {
        return this.recoverOnStartup;
    }

    public void setRecoverOnStartup(boolean recoverOnStartup) {
        this.recoverOnStartup = recoverOnStartup;
    }
}
