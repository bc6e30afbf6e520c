package io.github.txnsession.autoconfigure;

import java.util.Map;

import javax.sql.DataSource;

import io.github.txnsession.spring.jdbc.DecisionLog;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import org.springframework.boot.jdbc.DatabaseDriver;
import org.springframework.boot.jdbc.init.DataSourceScriptDatabaseInitializer;
import org.springframework.boot.jdbc.init.PlatformPlaceholderDatabaseDriverResolver;
import org.springframework.boot.jdbc.init.PropertiesBasedDataSourceScriptDatabaseInitializer;
import org.springframework.boot.sql.init.DatabaseInitializationMode;
import org.springframework.core.io.ClassPathResource;
import org.springframework.core.io.Resource;
import org.springframework.util.StringUtils;

/**
 * {@link DataSourceScriptDatabaseInitializer} for the decision log table of the JDBC two-phase commit, the way
 * Spring Boot initializes the tables of Spring Session JDBC, Quartz and Spring Batch: it runs
 * {@code kafka.txn-session.jdbc.schema} (by default the shipped
 * {@code classpath:io/github/txnsession/spring/jdbc/schema-@@platform@@.sql}, the platform taken from
 * {@code kafka.txn-session.jdbc.platform} or detected, MariaDB using the MySQL script) when
 * {@code kafka.txn-session.jdbc.initialize-schema} says so: {@code always} (the default), {@code embedded} (only an
 * embedded database such as H2 in memory) or {@code never}. Boot's database initialization ordering runs it after
 * Flyway and Liquibase and before the beans that read or write the table. May be registered as a bean to override
 * the auto-configuration, for example to initialize another {@link DataSource}.
 *
 * <p>With the default script location, two cases that the shipped scripts cannot serve fall back to
 * {@link DecisionLog#createTableIfMissing}, the portable DDL that earlier versions ran at every startup: a table name
 * other than the default (the scripts create {@value DecisionLog#DEFAULT_TABLE}), and a platform without a shipped
 * script. The mode applies to the fallback as well. A script of one's own ({@code kafka.txn-session.jdbc.schema})
 * never falls back.
 *
 * <p>The shipped Oracle script consists of PL/SQL blocks, each ending with a line holding a single {@code /}, and runs
 * with {@code /} as statement separator; other scripts use {@code ;}.
 */
public class DecisionLogDataSourceScriptDatabaseInitializer
        extends PropertiesBasedDataSourceScriptDatabaseInitializer<TwoPhaseCommitProperties> {

    private static final Logger log = LoggerFactory.getLogger(DecisionLogDataSourceScriptDatabaseInitializer.class);

    private static final String PLATFORM_PLACEHOLDER = "@@platform@@";

    private static final String SCRIPT_PATH = "io/github/txnsession/spring/jdbc/schema-" + PLATFORM_PLACEHOLDER
            + ".sql";

    private static final String ORACLE_SCRIPT_PATH = SCRIPT_PATH.replace(PLATFORM_PLACEHOLDER, "oracle");

    private static final String ORACLE_SEPARATOR = "/";

    private static final Map<DatabaseDriver, String> DRIVER_PLATFORMS = Map.of(DatabaseDriver.MARIADB, "mysql");

    private final String table;

    private final DatabaseInitializationMode mode;

    private final boolean shippedScripts;

    private final @Nullable String platform;

    /**
     * @param dataSource the database that holds the decision log
     * @param properties the two-phase commit settings: table, mode, script location, platform
     */
    public DecisionLogDataSourceScriptDatabaseInitializer(DataSource dataSource, TwoPhaseCommitProperties properties) {
        super(dataSource, properties, DRIVER_PLATFORMS);
        this.table = properties.getTable();
        this.mode = properties.getInitializeSchema();
        this.shippedScripts = TwoPhaseCommitProperties.DEFAULT_SCHEMA_LOCATION.equals(properties.getSchema());
        this.platform = properties.getPlatform();
    }

    @Override
    public boolean initializeDatabase() {
        String fallbackReason = this.shippedScripts ? fallbackReason() : null;
        if (fallbackReason == null) {
            return super.initializeDatabase();
        }
        if (!isEnabled()) {
            return false;
        }
        log.info("Decision log table {}: {}; creating it with portable CREATE TABLE IF NOT EXISTS SQL (point "
                + "kafka.txn-session.jdbc.schema to a script of your own where that SQL does not work)", this.table,
                fallbackReason);
        new DecisionLog(this.table).createTableIfMissing(getDataSource());
        return true;
    }

    /** @return why the shipped scripts cannot create the table, or {@code null} if they can */
    private @Nullable String fallbackReason() {
        if (!DecisionLog.DEFAULT_TABLE.equals(this.table)) {
            return "the shipped schema scripts create " + DecisionLog.DEFAULT_TABLE;
        }
        String resolved = StringUtils.hasText(this.platform) ? this.platform : detectPlatform(getDataSource());
        String script = SCRIPT_PATH.replace(PLATFORM_PLACEHOLDER, resolved);
        if (!new ClassPathResource(script, DecisionLog.class.getClassLoader()).exists()) {
            return "no schema script is shipped for platform '" + resolved + "' (" + script + ")";
        }
        return null;
    }

    /** @return the platform as Boot's resolver detects it for the script location, MariaDB as {@code mysql} */
    private static String detectPlatform(DataSource dataSource) {
        PlatformPlaceholderDatabaseDriverResolver resolver = new PlatformPlaceholderDatabaseDriverResolver();
        for (Map.Entry<DatabaseDriver, String> mapping : DRIVER_PLATFORMS.entrySet()) {
            resolver = resolver.withDriverPlatform(mapping.getKey(), mapping.getValue());
        }
        return resolver.resolveAll(dataSource, PLATFORM_PLACEHOLDER).get(0);
    }

    /** The mode rule of Boot's {@code AbstractScriptDatabaseInitializer}, for the fallback. */
    private boolean isEnabled() {
        return this.mode == DatabaseInitializationMode.ALWAYS
                || (this.mode == DatabaseInitializationMode.EMBEDDED && isEmbeddedDatabase());
    }

    @Override
    protected void runScripts(Scripts scripts) {
        for (Resource script : scripts) {
            if (script instanceof ClassPathResource resource
                    && ORACLE_SCRIPT_PATH.equals(StringUtils.cleanPath(resource.getPath()))) {
                scripts.separator(ORACLE_SEPARATOR);
            }
        }
        super.runScripts(scripts);
    }
}
