package io.github.txnsession.spring.jdbc;

import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.sql.Types;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.WeakHashMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Pattern;

import javax.sql.DataSource;

import io.github.txnsession.kafka.PreparedTransaction;
import org.jspecify.annotations.Nullable;

/**
 * The decision log of the JDBC two-phase commit: a table keyed by transactional id holding the prepared Kafka
 * transaction ({@code producerId}, {@code epoch}, and the coordinator's start time of the transaction, which names
 * exactly one transaction) whose commit the database decided, and when.
 *
 * <p>Guarantees: {@link #record} writes through the caller's connection, so the row commits if and only if the
 * business data commits: the database commit <em>is</em> the decision. A transactional id has at most one row; a new
 * decision replaces an old one, except a fleet's fence ({@link #fence}: producer id -2), which refuses every decision
 * of its id until the id's new owner has initialized it.
 *
 * <p>The table: schema scripts for the default table name are shipped as
 * {@code io/github/txnsession/spring/jdbc/schema-<platform>.sql} ({@code h2}, {@code postgresql}, {@code mysql} (also
 * for MariaDB), {@code oracle} (statements end with a line holding a single {@code /}), {@code sqlserver}); each
 * creates the table if it is missing and adds the {@code txn_start_ms} column to a table of an earlier version, so it
 * can run on every start (the Spring Boot starter runs it, see {@code kafka.txn-session.jdbc.initialize-schema}) or be
 * copied into a Flyway or Liquibase migration. {@link #createTableIfMissing} does the same for any table name with
 * portable {@code CREATE TABLE IF NOT EXISTS} SQL, tested on H2 and PostgreSQL (SQL Server and Oracle before 23ai lack
 * it).
 *
 * <p>Not guaranteed: anything about rows written by other tools. The table must not be shared by two applications
 * with the same transactional id prefix.
 */
public final class DecisionLog {

    /** Default table name. */
    public static final String DEFAULT_TABLE = "kafka_txn_decision_log";

    private static final Pattern IDENTIFIER = Pattern.compile("[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)?");

    private static final String START_COLUMN = "txn_start_ms";

    private static final String IN_DOUBT = "#in-doubt-";

    /** The producer id of the row {@link #withKeyHeld} inserts for the duration when an id has no row. */
    private static final long PLACEHOLDER = -1;

    /**
     * The producer id of a fence: a committed row left by a fleet owner whose initialization of the id failed, so
     * that no decision for the id commits until an owner initializes it (see {@link #fence}).
     */
    private static final long FENCE = -2;

    private static final String MIGRATION_HINT = " (does the table exist, with the columns of "
            + "io/github/txnsession/spring/jdbc/schema-<platform>.sql? The starter creates it, and adds the "
            + "txn_start_ms column missing in a table created before version 0.2, unless "
            + "kafka.txn-session.jdbc.initialize-schema=never; by hand: ALTER TABLE <table> ADD COLUMN txn_start_ms "
            + "BIGINT)";

    /** The escape character of LIKE patterns: not a backslash, which MySQL and MariaDB read as a string escape. */
    private static final char LIKE_ESCAPE = '!';

    private final String table;
    /** by database URL: whether the table has the unique key the one-statement upsert needs */
    private final Map<String, Boolean> upsertable = new ConcurrentHashMap<>();
    /**
     * The statement {@link #record} uses, per database session (physical connection), "" for DELETE + INSERT: reading
     * the connection's schema is a round trip on PostgreSQL, worth saving on every decision. A session whose schema
     * (search path) the application changes afterwards keeps the first choice: on PostgreSQL a table without the key
     * there makes the upsert fail, and the transaction roll back, never a wrong row. Behind a pool or proxy whose
     * {@code unwrap(Connection.class)} returns a new wrapper per checkout the cache never hits: slower, not wrong.
     */
    private final Map<Connection, String> statementByConnection = Collections.synchronizedMap(new WeakHashMap<>());

    /** A log in the table {@value #DEFAULT_TABLE}. */
    public DecisionLog() {
        this(DEFAULT_TABLE);
    }

    /**
     * @param table the table name, optionally schema-qualified ({@code schema.table}); letters, digits and
     *        underscores only
     */
    public DecisionLog(String table) {
        Objects.requireNonNull(table, "table");
        if (!IDENTIFIER.matcher(table).matches()) {
            throw new IllegalArgumentException("Invalid decision log table name '" + table + "': use letters, digits "
                    + "and underscores, optionally qualified by a schema (schema.table)");
        }
        this.table = table;
    }

    /** @return the table name */
    public String table() {
        return this.table;
    }

    /**
     * Creates the table unless it exists, and migrates a table created by an earlier version: adds the
     * {@code txn_start_ms} column (the prepared transaction's start time, which tells it apart from a later
     * transaction with the same producer id and epoch). Rows written before the migration keep a NULL start time and
     * complete by epoch arithmetic.
     *
     * @param dataSource the database to create the table in; the statements run on a connection of its own
     * @throws DecisionLogException if the table cannot be created or migrated
     */
    public void createTableIfMissing(DataSource dataSource) {
        try (Connection con = dataSource.getConnection(); Statement st = con.createStatement()) {
            st.execute("CREATE TABLE IF NOT EXISTS " + this.table + " (transactional_id VARCHAR(512) NOT NULL "
                    + "PRIMARY KEY, producer_id BIGINT NOT NULL, producer_epoch SMALLINT NOT NULL, " + START_COLUMN
                    + " BIGINT, decided_at TIMESTAMP NOT NULL)");
            if (!hasStartColumn(con)) {
                st.execute("ALTER TABLE " + this.table + " ADD COLUMN " + START_COLUMN + " BIGINT");
            }
            if (!con.getAutoCommit()) {
                con.commit();
            }
        }
        catch (SQLException ex) {
            throw new DecisionLogException("Could not create or migrate the decision log table " + this.table, ex);
        }
    }

    private boolean hasStartColumn(Connection con) throws SQLException {
        try (Statement st = con.createStatement();
                ResultSet rs = st.executeQuery("SELECT * FROM " + this.table + " WHERE 1 = 0")) {
            ResultSetMetaData meta = rs.getMetaData();
            for (int i = 1; i <= meta.getColumnCount(); i++) {
                if (START_COLUMN.equalsIgnoreCase(meta.getColumnName(i))) {
                    return true;
                }
            }
            return false;
        }
    }

    /**
     * Writes the decision to commit {@code prepared} through {@code connection}, in the caller's transaction,
     * replacing an older row of the same transactional id. One statement on PostgreSQL ({@code INSERT ... ON CONFLICT})
     * and H2 ({@code MERGE ... KEY}) when the table's primary key (or another unique index) is on
     * {@code transactional_id}, as in the shipped scripts; a {@code DELETE} and an {@code INSERT} otherwise.
     *
     * @param connection the connection of the caller's database transaction; it is neither committed nor closed here
     * @param transactionalId the transactional id of the session whose transaction was prepared
     * @param prepared the prepared transaction to commit; not an empty one
     * @throws IllegalArgumentException for an empty transaction: it needs no decision (nothing to complete)
     * @throws DecisionFencedException if the id's row is a fleet's {@linkplain #fence fence}; roll back
     * @throws SQLException if the row cannot be written; the caller's transaction should then roll back
     */
    public void record(Connection connection, String transactionalId, PreparedTransaction prepared)
            throws SQLException {
        if (prepared.isEmpty()) {
            throw new IllegalArgumentException("Transaction " + prepared + " of '" + transactionalId + "' wrote "
                    + "nothing to Kafka: it needs no decision row");
        }
        String upsert = upsertStatement(connection);
        if (upsert == null) {
            // a fence (or a placeholder being held) is not deleted: the INSERT below then fails on the key
            try (PreparedStatement delete = connection.prepareStatement(
                    "DELETE FROM " + this.table + " WHERE transactional_id = ? AND producer_id >= 0")) {
                delete.setString(1, transactionalId);
                delete.executeUpdate();
            }
        }
        String columns = " (transactional_id, producer_id, producer_epoch, " + START_COLUMN + ", decided_at) ";
        int written;
        try (PreparedStatement insert = connection.prepareStatement(upsert != null ? upsert
                : "INSERT INTO " + this.table + columns + "VALUES (?, ?, ?, ?, ?)")) {
            insert.setString(1, transactionalId);
            insert.setLong(2, prepared.producerId());
            insert.setShort(3, prepared.epoch());
            if (prepared.hasStartTime()) {
                insert.setLong(4, prepared.startTimeMs());
            }
            else {
                insert.setNull(4, Types.BIGINT);
            }
            insert.setTimestamp(5, Timestamp.from(Instant.now()));
            written = insert.executeUpdate();
        }
        catch (SQLException ex) {
            if (upsert == null && ex.getSQLState() != null && ex.getSQLState().startsWith("23")) {
                throw fenced(transactionalId, ex);
            }
            throw ex;
        }
        if (written == 0) {
            throw fenced(transactionalId, null);
        }
    }

    private DecisionFencedException fenced(String transactionalId, @Nullable SQLException cause) {
        return new DecisionFencedException("The decision of '" + transactionalId + "' was refused: its row in "
                + this.table + " is a fleet's fence (an owner's initialization of the id failed, and no owner has "
                + "initialized it since), so the transaction rolls back; the id is settled again through the fleet",
                cause);
    }

    /**
     * @return the one-statement insert-or-replace of this table for the connection's database, or null where none is
     *         used (a {@code DELETE} then an {@code INSERT}): other databases, and a table without a unique key on
     *         {@code transactional_id} alone (a table of the application's own schema, say), which the upsert needs.
     *         Decided once per database and table, and kept per database session.
     */
    private @Nullable String upsertStatement(Connection connection) throws SQLException {
        Connection physical = physical(connection);
        String known = this.statementByConnection.get(physical);
        if (known != null) {
            return known.isEmpty() ? null : known;
        }
        String statement = lookUpUpsertStatement(connection);
        if (statement == null) {
            return null; // the metadata could not be read: DELETE + INSERT this time, and a new look next time
        }
        this.statementByConnection.put(physical, statement);
        return statement.isEmpty() ? null : statement;
    }

    /** @return the driver's connection under a pool's proxy: it lives as long as the database session does */
    private static Connection physical(Connection connection) {
        try {
            return connection.isWrapperFor(Connection.class) ? connection.unwrap(Connection.class) : connection;
        }
        catch (SQLException ex) {
            return connection;
        }
    }

    /** @return the upsert, "" for DELETE + INSERT, or null when undecided (the metadata could not be read) */
    private @Nullable String lookUpUpsertStatement(Connection connection) throws SQLException {
        DatabaseMetaData meta = connection.getMetaData();
        String product = meta.getDatabaseProductName();
        if (!product.equals("PostgreSQL") && !product.equals("H2")) {
            return "";
        }
        // the table an unqualified name resolves to depends on the connection's schema (search_path) and user
        String schema = connection.getSchema();
        String key = meta.getURL() + "|" + meta.getUserName() + "|" + schema;
        Boolean keyed = this.upsertable.get(key);
        if (keyed == null) {
            keyed = keyedByTransactionalId(meta, schema);
            if (keyed != null) {
                this.upsertable.put(key, keyed); // a failed look-up is not remembered
            }
        }
        if (keyed == null) {
            return null;
        }
        if (!keyed) {
            return "";
        }
        String columns = " (transactional_id, producer_id, producer_epoch, " + START_COLUMN + ", decided_at) ";
        // both forms leave a fence or a placeholder (producer id < 0) in place and then write no row
        if (product.equals("H2")) {
            return "MERGE INTO " + this.table + " d USING (VALUES (CAST(? AS VARCHAR(512)), CAST(? AS BIGINT), "
                    + "CAST(? AS SMALLINT), CAST(? AS BIGINT), CAST(? AS TIMESTAMP))) s (tid, pid, epoch, st, at) "
                    + "ON d.transactional_id = s.tid WHEN MATCHED AND d.producer_id >= 0 THEN UPDATE SET "
                    + "producer_id = s.pid, producer_epoch = s.epoch, " + START_COLUMN + " = s.st, decided_at = s.at "
                    + "WHEN NOT MATCHED THEN INSERT" + columns + "VALUES (s.tid, s.pid, s.epoch, s.st, s.at)";
        }
        return "INSERT INTO " + this.table + " AS d" + columns + "VALUES (?, ?, ?, ?, ?) ON CONFLICT "
                + "(transactional_id) DO UPDATE SET producer_id = EXCLUDED.producer_id, producer_epoch = "
                + "EXCLUDED.producer_epoch, " + START_COLUMN + " = EXCLUDED." + START_COLUMN + ", decided_at = "
                + "EXCLUDED.decided_at WHERE d.producer_id >= 0";
    }

    /**
     * @param currentSchema the connection's schema, where an unqualified table name is looked up
     * @return whether the table has a unique index (its primary key, say) on {@code transactional_id} alone, or null
     *         if the metadata could not be read
     */
    private @Nullable Boolean keyedByTransactionalId(DatabaseMetaData meta, @Nullable String currentSchema) {
        String schema = currentSchema;
        String name = this.table;
        int dot = name.indexOf('.');
        if (dot > 0) {
            schema = name.substring(0, dot);
            name = name.substring(dot + 1);
        }
        try {
            if (meta.storesUpperCaseIdentifiers()) {
                schema = schema == null ? null : schema.toUpperCase(Locale.ROOT);
                name = name.toUpperCase(Locale.ROOT);
            }
            else if (meta.storesLowerCaseIdentifiers()) {
                schema = schema == null ? null : schema.toLowerCase(Locale.ROOT);
                name = name.toLowerCase(Locale.ROOT);
            }
            Map<String, List<String>> uniqueIndexes = new HashMap<>();
            try (ResultSet rs = meta.getIndexInfo(null, schema, name, true, false)) {
                while (rs.next()) {
                    String column = rs.getString("COLUMN_NAME");
                    String index = rs.getString("TABLE_SCHEM") + "." + rs.getString("INDEX_NAME");
                    if (column != null && rs.getString("INDEX_NAME") != null) {
                        uniqueIndexes.computeIfAbsent(index, i -> new ArrayList<>()).add(column);
                    }
                }
            }
            return uniqueIndexes.values().stream()
                .anyMatch(cols -> cols.size() == 1 && cols.get(0).equalsIgnoreCase("transactional_id"));
        }
        catch (SQLException ex) {
            return null; // DELETE + INSERT this time: they work on any table
        }
    }

    /**
     * Deletes the row of {@code transactionalId} if it still names {@code prepared} (producer id and epoch), through
     * {@code connection} in the caller's transaction.
     *
     * @param connection the connection to delete through; it is neither committed nor closed here
     * @param transactionalId the transactional id whose row is deleted
     * @param prepared the transaction the row must still name; only its producer id and epoch are compared
     * @return whether a row was deleted
     * @throws SQLException if the row cannot be deleted
     */
    public boolean clear(Connection connection, String transactionalId, PreparedTransaction prepared)
            throws SQLException {
        try (PreparedStatement delete = connection.prepareStatement("DELETE FROM " + this.table
                + " WHERE transactional_id = ? AND producer_id = ? AND producer_epoch = ?")) {
            delete.setString(1, transactionalId);
            delete.setLong(2, prepared.producerId());
            delete.setShort(3, prepared.epoch());
            return delete.executeUpdate() > 0;
        }
    }

    /**
     * Deletes a row in its own transaction; see {@link #clear(Connection, String, PreparedTransaction)}.
     *
     * @param dataSource the database holding the log; a connection of its own is used, in auto-commit mode
     * @param record the row to delete: its transactional id, producer id and epoch
     * @return whether a row was deleted
     * @throws DecisionLogException if the database cannot be reached or the row cannot be deleted
     */
    public boolean clear(DataSource dataSource, DecisionRecord record) {
        try (Connection con = dataSource.getConnection()) {
            boolean auto = con.getAutoCommit();
            con.setAutoCommit(true);
            try {
                return clear(con, record.transactionalId(), record.preparedTransaction());
            }
            finally {
                con.setAutoCommit(auto);
            }
        }
        catch (SQLException ex) {
            throw new DecisionLogException("Could not clear the decision of " + record.transactionalId(), ex);
        }
    }

    /**
     * @param dataSource the database holding the log; read on a connection of its own
     * @param transactionalId the transactional id whose decision is looked up
     * @param prepared the transaction the decision must name: producer id, epoch and start time (a legacy identity
     *        matches only a row without a start time)
     * @return whether the log holds the decision to commit {@code prepared} for {@code transactionalId}
     * @throws DecisionLogException if the log cannot be read
     */
    public boolean contains(DataSource dataSource, String transactionalId, PreparedTransaction prepared) {
        // the start time too: with transaction version 1 a stale row of an earlier transaction has the same pid:epoch
        try (Connection con = dataSource.getConnection(); PreparedStatement q = con.prepareStatement("SELECT 1 FROM "
                + this.table + " WHERE transactional_id = ? AND producer_id = ? AND producer_epoch = ? AND "
                + (prepared.hasStartTime() ? START_COLUMN + " = ?" : START_COLUMN + " IS NULL"))) {
            q.setString(1, transactionalId);
            q.setLong(2, prepared.producerId());
            q.setShort(3, prepared.epoch());
            if (prepared.hasStartTime()) {
                q.setLong(4, prepared.startTimeMs());
            }
            try (ResultSet rs = q.executeQuery()) {
                return rs.next();
            }
        }
        catch (SQLException ex) {
            throw new DecisionLogException("Could not read the decision of " + transactionalId, ex);
        }
    }

    /**
     * @param dataSource the database holding the log
     * @param prefix the transactional id prefix of a session pool, taken literally (no LIKE wildcards)
     * @return the rows of the transactional ids {@code prefix + N} (N a whole number), oldest first: exactly the ids
     *         of a session pool with that prefix, and no others
     */
    public List<DecisionRecord> findByPrefix(DataSource dataSource, String prefix) {
        List<DecisionRecord> records = new ArrayList<>();
        for (DecisionRecord r : select(dataSource, escape(prefix) + "%")) {
            String suffix = r.transactionalId().substring(prefix.length());
            if (!suffix.isEmpty() && suffix.chars().allMatch(Character::isDigit)) {
                records.add(r);
            }
        }
        return records;
    }

    /**
     * @param dataSource the database holding the log; read on a connection of its own
     * @param transactionalId a transactional id, taken literally
     * @return its decision row, if it has one (a row set aside is not its row)
     * @throws DecisionLogException if the log cannot be read
     */
    public Optional<DecisionRecord> find(DataSource dataSource, String transactionalId) {
        return select(dataSource, escape(transactionalId)).stream()
            .filter(r -> r.transactionalId().equals(transactionalId))
            .findFirst();
    }

    /**
     * Sets a decision whose Kafka outcome is unknown aside, so that the transactional id can take new decisions while
     * the row stays for an operator: its id becomes {@code <id>#in-doubt-<producerId>-<epoch>-<start>}, which no pool id matches.
     *
     * @param dataSource the database holding the log; the update runs on a connection of its own, in auto-commit mode
     * @param record the row to set aside; nothing changes if its id no longer has a row with that producer id and
     *        epoch
     * @throws DecisionLogException if the row cannot be updated
     */
    public void setAside(DataSource dataSource, DecisionRecord record) {
        try (Connection con = dataSource.getConnection()) {
            boolean auto = con.getAutoCommit();
            con.setAutoCommit(true);
            try {
                setAside(con, record);
            }
            finally {
                con.setAutoCommit(auto);
            }
        }
        catch (SQLException ex) {
            throw new DecisionLogException("Could not set the in-doubt decision of " + record.transactionalId()
                    + " aside", ex);
        }
    }

    /**
     * {@link #setAside(DataSource, DecisionRecord)} through {@code connection}, in the caller's transaction.
     *
     * @param connection the connection to update through; neither committed nor closed here
     * @param record the row to set aside
     * @throws SQLException if the row cannot be updated
     */
    public void setAside(Connection connection, DecisionRecord record) throws SQLException {
        String parked = parkedId(record);
        try (PreparedStatement update = connection.prepareStatement("UPDATE " + this.table + " SET transactional_id "
                + "= ? WHERE transactional_id = ? AND producer_id = ? AND producer_epoch = ?")) {
            update.setString(1, parked);
            update.setString(2, record.transactionalId());
            update.setLong(3, record.producerId());
            update.setShort(4, record.producerEpoch());
            update.executeUpdate();
        }
    }

    /**
     * Deletes the copy of {@code record} that {@link #setAside(Connection, DecisionRecord)} made, if there is one, in its
     * own transaction: once the application has been told about a lost transaction, neither row is needed.
     *
     * @param dataSource the database holding the log
     * @param record the row as it was before it was set aside
     * @return whether a set-aside row was deleted
     * @throws DecisionLogException if the database cannot be reached or the row cannot be deleted
     */
    public boolean clearSetAside(DataSource dataSource, DecisionRecord record) {
        Objects.requireNonNull(record, "record: the decision row as it was before it was set aside");
        return clear(dataSource, new DecisionRecord(parkedId(record), record.producerId(), record.producerEpoch(),
                record.txnStartMs(), record.decidedAt()));
    }

    /** @return the transactional id {@link #setAside} gives the row of {@code record} */
    static String parkedId(DecisionRecord record) {
        return record.transactionalId() + IN_DOUBT + record.producerId() + "-" + record.producerEpoch() + "-"
                + record.txnStartMs();
    }

    /** What runs while {@link #withKeyHeld} holds a transactional id's key. */
    @FunctionalInterface
    public interface KeyHeldAction<T> {

        /**
         * @param connection the connection holding the key, in its open transaction: clear or set aside rows through
         *        it (another connection would wait for the key)
         * @param decision the id's committed decision row, if it has one
         * @return the action's result
         * @throws SQLException if a statement on {@code connection} fails (everything is rolled back)
         */
        T run(Connection connection, Optional<DecisionRecord> decision) throws SQLException;
    }

    /**
     * Runs {@code action} while this connection's transaction holds the key of {@code transactionalId} in the log: its
     * row locked ({@code SELECT ... FOR UPDATE}), or, when it has none, a placeholder row inserted for the duration (so
     * that another transaction writing a decision for the id waits, and one already writing it makes this wait until
     * it commits or rolls back). A fleet's new owner settles and initializes an id this way, so that a paused former
     * owner cannot commit a decision between the new owner's look at the log and its initialization (the former owner
     * then confirms its Kafka transaction after writing its row, and finds it aborted). A {@linkplain #fence fence}
     * is held as the id's row (locked), handed to the action as no decision, and stays unless the action lifts it.
     * Needs a unique key on {@code transactional_id} (the shipped scripts' primary key).
     *
     * @param dataSource the database holding the log; one connection of its own, committed at the end
     * @param transactionalId the id whose key to hold
     * @param lockWait how long to wait for the key (a decision being written by another transaction)
     * @param action what to run while the key is held
     * @param <T> the action's result
     * @return what the action returned
     * @throws DecisionLogException if the key cannot be held in time, or a statement fails (nothing is committed)
     */
    public <T> T withKeyHeld(DataSource dataSource, String transactionalId, java.time.Duration lockWait,
            KeyHeldAction<T> action) {
        try (Connection con = dataSource.getConnection()) {
            boolean auto = con.getAutoCommit();
            int isolation = con.getTransactionIsolation();
            con.setAutoCommit(false);
            // no gap locks (InnoDB's REPEATABLE READ would lock the whole empty log while Kafka is called)
            con.setTransactionIsolation(Connection.TRANSACTION_READ_COMMITTED);
            T result = null;
            try {
                if (!Boolean.TRUE.equals(keyedByTransactionalId(con.getMetaData(), con.getSchema()))) {
                    throw new DecisionLogException("The decision log " + this.table + " has no unique key on "
                            + "transactional_id alone: a fleet's two-phase commit needs one to hold an id's key (the "
                            + "shipped schema scripts create it as the primary key)");
                }
                Optional<DecisionRecord> row;
                boolean placeholder = false;
                boolean fenced = false;
                // a row can come and go between our looks (a decision committed, then cleared after its Kafka
                // commit; or, on some databases, a key violation reported before the other writer commits): look
                // again until the id either has a row we lock or our placeholder is in, within the lock wait
                long deadline = System.nanoTime() + lockWait.toNanos();
                for (int attempt = 1; ; attempt++) {
                    try {
                        row = selectForUpdate(con, transactionalId, secondsLeft(deadline));
                    }
                    catch (SQLException ex) {
                        // a deadlock with a writer clearing the row (InnoDB keeps the shared lock of our failed
                        // insert): nothing is held yet, so start the transaction over
                        if (!isTransientConflict(ex) || System.nanoTime() - deadline > 0) {
                            throw ex;
                        }
                        con.rollback();
                        pauseBeforeLookingAgain(attempt);
                        continue;
                    }
                    if (row.isPresent()) {
                        fenced = row.get().producerId() < 0;
                        break;
                    }
                    java.sql.Savepoint before = con.setSavepoint();
                    try {
                        insertPlaceholder(con, transactionalId, secondsLeft(deadline));
                        placeholder = true;
                        break;
                    }
                    catch (SQLException ex) {
                        con.rollback(before);
                        releaseQuietly(con, before);
                        if (!isUniqueViolation(ex) || System.nanoTime() - deadline > 0) {
                            throw ex;
                        }
                        // a decision (or a fence) is being written or was committed while we looked: hold its row
                        // instead (the next look waits for its writer), or insert again once it was cleared
                        pauseBeforeLookingAgain(attempt);
                    }
                }
                if (fenced) {
                    // a fence left by an earlier failed initialization: no decision, and it stays (locked by this
                    // transaction) unless the action lifts it, which only an owner that initialized the id may do
                    row = Optional.empty();
                }
                result = action.run(con, row);
                if (placeholder) {
                    try (PreparedStatement delete = con.prepareStatement("DELETE FROM " + this.table
                            + " WHERE transactional_id = ? AND producer_id = " + PLACEHOLDER)) {
                        delete.setString(1, transactionalId);
                        delete.executeUpdate();
                    }
                }
                con.commit();
                return result;
            }
            catch (SQLException | RuntimeException ex) {
                try {
                    con.rollback();
                }
                catch (SQLException rollbackFailure) {
                    ex.addSuppressed(rollbackFailure);
                }
                if (result instanceof AutoCloseable opened) {
                    try {
                        opened.close(); // what the action opened must not outlive a rolled-back settlement
                    }
                    catch (Exception closeFailure) {
                        ex.addSuppressed(closeFailure);
                    }
                }
                throw ex;
            }
            finally {
                try {
                    con.setAutoCommit(auto);
                    con.setTransactionIsolation(isolation);
                }
                catch (SQLException restoreFailure) {
                    // the connection is closed next (a pool resets or discards it); what the action returned stands
                }
            }
        }
        catch (SQLException ex) {
            throw new DecisionLogException("Could not hold the decision-log key of " + transactionalId + " in "
                    + this.table + " (a decision of it may be being written by another instance)", ex);
        }
    }

    private static int secondsLeft(long deadline) {
        long left = deadline - System.nanoTime();
        return (int) Math.max(1, Math.min(Integer.MAX_VALUE, (left + 999_999_999L) / 1_000_000_000L));
    }

    /** A unique key's violation (not a NOT NULL, CHECK or foreign key one), as the supported databases report it. */
    private static boolean isUniqueViolation(SQLException ex) {
        String state = ex.getSQLState();
        if ("23505".equals(state)) {
            return true; // PostgreSQL, H2, Db2
        }
        // MySQL and MariaDB (1062), Oracle (ORA-00001), SQL Server (2627 constraint, 2601 unique index)
        int code = ex.getErrorCode();
        return state != null && state.startsWith("23") && (code == 1062 || code == 1 || code == 2627 || code == 2601);
    }

    /** A deadlock or serialization failure: the database rolled the statement's transaction back. */
    private static boolean isTransientConflict(SQLException ex) {
        String state = ex.getSQLState();
        return state != null && state.startsWith("40");
    }

    private static void releaseQuietly(Connection con, java.sql.Savepoint savepoint) {
        try {
            con.releaseSavepoint(savepoint);
        }
        catch (SQLException | UnsupportedOperationException notSupported) {
            // (Oracle has no RELEASE SAVEPOINT; the savepoint ends with the transaction)
        }
    }

    private static void pauseBeforeLookingAgain(int attempt) throws SQLException {
        try {
            Thread.sleep(Math.min(200, 5L * attempt)); // a back-off between looks; the database gives no signal
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new SQLException("Interrupted while waiting to hold a decision-log key", ex);
        }
    }

    private Optional<DecisionRecord> selectForUpdate(Connection con, String transactionalId, int timeoutSeconds)
            throws SQLException {
        // T-SQL has no SELECT ... FOR UPDATE outside cursors: a table hint takes the same lock (not tested here)
        boolean sqlServer = con.getMetaData().getDatabaseProductName().startsWith("Microsoft SQL Server");
        try (PreparedStatement q = con.prepareStatement("SELECT transactional_id, producer_id, producer_epoch, "
                + START_COLUMN + ", decided_at FROM " + this.table
                + (sqlServer ? " WITH (UPDLOCK, ROWLOCK, HOLDLOCK) WHERE transactional_id = ?"
                        : " WHERE transactional_id = ? FOR UPDATE"))) {
            q.setQueryTimeout(timeoutSeconds);
            q.setString(1, transactionalId);
            try (ResultSet rs = q.executeQuery()) {
                if (!rs.next()) {
                    return Optional.empty();
                }
                long start = rs.getLong(4);
                if (rs.wasNull()) {
                    start = -1;
                }
                return Optional.of(new DecisionRecord(rs.getString(1), rs.getLong(2), rs.getShort(3), start,
                        rs.getTimestamp(5).toInstant()));
            }
        }
    }

    private void insertPlaceholder(Connection con, String transactionalId, int timeoutSeconds) throws SQLException {
        insertMarker(con, transactionalId, PLACEHOLDER, timeoutSeconds);
    }

    private void insertMarker(Connection con, String transactionalId, long marker, int timeoutSeconds)
            throws SQLException {
        try (PreparedStatement insert = con.prepareStatement("INSERT INTO " + this.table + " (transactional_id, "
                + "producer_id, producer_epoch, " + START_COLUMN + ", decided_at) VALUES (?, ?, -1, NULL, ?)")) {
            insert.setQueryTimeout(timeoutSeconds);
            insert.setString(1, transactionalId);
            insert.setLong(2, marker);
            insert.setTimestamp(3, Timestamp.from(Instant.now()));
            insert.executeUpdate();
        }
    }

    /** @return whether the id's row (held by this connection) was turned into the marker */
    private boolean markRow(Connection con, String transactionalId, long marker) throws SQLException {
        try (PreparedStatement update = con.prepareStatement("UPDATE " + this.table + " SET producer_id = ?, "
                + "producer_epoch = -1, " + START_COLUMN + " = NULL, decided_at = ? WHERE transactional_id = ?")) {
            update.setLong(1, marker);
            update.setTimestamp(2, Timestamp.from(Instant.now()));
            update.setString(3, transactionalId);
            return update.executeUpdate() > 0;
        }
    }

    /**
     * Leaves a fence for {@code transactionalId}, through the connection of a {@link #withKeyHeld} action, committed
     * with it: until {@link #liftFence} (called by an owner that initialized the id, under the key), every
     * {@link #record} of the id is refused, so its transaction rolls back. A fleet's new owner leaves it when its
     * initialization of the id failed in the client: the coordinator may still apply that initialization later and
     * abort a transaction that a paused former owner would otherwise decide to commit in between. A decision row the
     * id still has (one recovery found lost) is first set aside ({@link #setAside(Connection, DecisionRecord)}), so
     * that it stays for an operator even if reporting the loss fails.
     *
     * @param connection the connection holding the id's key
     * @param transactionalId the id to fence
     * @param decision the id's decision row as the action found it, if it has one and it is still there
     * @throws SQLException if the fence cannot be written
     */
    void fence(Connection connection, String transactionalId, Optional<DecisionRecord> decision) throws SQLException {
        if (decision.isPresent()) {
            setAside(connection, decision.get());
        }
        if (!markRow(connection, transactionalId, FENCE)) {
            insertMarker(connection, transactionalId, FENCE, 30);
        }
    }

    /**
     * Removes the fence of {@code transactionalId}, if it has one, through the connection of a {@link #withKeyHeld}
     * action: only for an owner that has just initialized the id under the key (which aborted whatever a paused former
     * owner had open, and supersedes an earlier initialization still in flight).
     *
     * @param connection the connection holding the id's key
     * @param transactionalId the id whose fence to remove
     * @throws SQLException if the fence cannot be deleted
     */
    void liftFence(Connection connection, String transactionalId) throws SQLException {
        try (PreparedStatement delete = connection.prepareStatement("DELETE FROM " + this.table
                + " WHERE transactional_id = ? AND producer_id = " + FENCE)) {
            delete.setString(1, transactionalId);
            delete.executeUpdate();
        }
    }

    /**
     * @param dataSource the database holding the log
     * @param prefix the transactional id prefix of a session pool, taken literally (no LIKE wildcards)
     * @return the decisions of the pool's ids ({@code prefix + N}, N a whole number) set aside by {@link #setAside}
     *         (their transactional id still carries the {@code #in-doubt-} suffix), for an operator to check and
     *         delete; not those of a longer prefix that starts with this one
     */
    public List<DecisionRecord> findSetAside(DataSource dataSource, String prefix) {
        return findSetAside(dataSource, prefix, id -> {
            String suffix = id.substring(prefix.length());
            return !suffix.isEmpty() && suffix.chars().allMatch(Character::isDigit);
        });
    }

    /**
     * @param dataSource the database holding the log
     * @param prefix the prefix every id of the pool starts with, taken literally
     * @param isPoolId whether a transactional id (without the set-aside suffix) is one of the pool's: a fleet's ids
     *        ({@code prefix + slot + "-" + k}), say
     * @return the decisions of the pool's ids set aside by {@link #setAside}, for an operator to check and delete
     */
    public List<DecisionRecord> findSetAside(DataSource dataSource, String prefix,
            java.util.function.Predicate<String> isPoolId) {
        Objects.requireNonNull(prefix, "prefix: the pool's transactional id prefix");
        Objects.requireNonNull(isPoolId, "isPoolId: which ids are the pool's (a fleet's: prefix + slot + \"-\" + k)");
        List<DecisionRecord> records = new ArrayList<>();
        for (DecisionRecord r : select(dataSource, escape(prefix) + "%" + IN_DOUBT + "%")) {
            int mark = r.transactionalId().indexOf(IN_DOUBT, prefix.length());
            if (mark > prefix.length() && isPoolId.test(r.transactionalId().substring(0, mark))) {
                records.add(r);
            }
        }
        return records;
    }

    private static String escape(String likeLiteral) {
        String escape = String.valueOf(LIKE_ESCAPE);
        return likeLiteral.replace(escape, escape + escape).replace("%", escape + "%").replace("_", escape + "_");
    }

    /** The rows whose transactional id matches the LIKE pattern (escape character '!'), oldest first. */
    private List<DecisionRecord> select(DataSource dataSource, String pattern) {
        List<DecisionRecord> records = new ArrayList<>();
        try (Connection con = dataSource.getConnection(); PreparedStatement q = con.prepareStatement(
                "SELECT transactional_id, producer_id, producer_epoch, " + START_COLUMN + ", decided_at FROM "
                        + this.table + " WHERE transactional_id LIKE ? ESCAPE '" + LIKE_ESCAPE
                        + "' ORDER BY decided_at")) {
            q.setString(1, pattern);
            try (ResultSet rs = q.executeQuery()) {
                while (rs.next()) {
                    if (rs.getLong(2) < 0) {
                        continue; // a fence or a placeholder: no decision
                    }
                    long start = rs.getLong(4);
                    if (rs.wasNull()) {
                        start = -1; // a row written before the column existed: legacy identity
                    }
                    records.add(new DecisionRecord(rs.getString(1), rs.getLong(2), rs.getShort(3), start,
                            rs.getTimestamp(5).toInstant()));
                }
            }
        }
        catch (SQLException ex) {
            throw new DecisionLogException("Could not read the decision log " + this.table + MIGRATION_HINT, ex);
        }
        return records;
    }

    @Override
    public String toString() {
        return "DecisionLog[" + this.table + "]";
    }
}
