package io.github.txnsession.spring.jdbc;

import java.sql.Connection;
import java.sql.SQLException;
import java.util.List;

import javax.sql.DataSource;

import io.github.txnsession.kafka.PreparedTransaction;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.jdbc.datasource.DriverManagerDataSource;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The decision log's writes on each database it has a one-statement insert-or-replace for (PostgreSQL, H2): a new
 * decision for a transactional id replaces the old row in the caller's transaction, a rolled-back write leaves the
 * old row, and a clear names the transaction it clears.
 */
class DecisionLogTest {

    @RegisterExtension
    static final EmbeddedPostgresExtension postgres = new EmbeddedPostgresExtension();

    @Test
    void aNewDecisionReplacesTheOldRowOnPostgresql() throws SQLException {
        replacesAndClears(new DriverManagerDataSource(postgres.jdbcUrl(), "postgres", ""));
    }

    @Test
    void aNewDecisionReplacesTheOldRowOnH2() throws SQLException {
        replacesAndClears(new DriverManagerDataSource("jdbc:h2:mem:" + EmbeddedKafkaCluster.uniqueName("log")
                + ";DB_CLOSE_DELAY=-1", "sa", ""));
    }

    /**
     * A table of the application's own schema without the unique key the one-statement upsert needs: the log falls
     * back to DELETE + INSERT, with the same result.
     */
    @Test
    void aTableWithoutAUniqueKeyStillHasOneRowPerIdOnPostgresqlAndH2() throws SQLException {
        DataSource postgresql = new DriverManagerDataSource(postgres.jdbcUrl(), "postgres", "");
        DataSource h2 = new DriverManagerDataSource("jdbc:h2:mem:" + EmbeddedKafkaCluster.uniqueName("log")
                + ";DB_CLOSE_DELAY=-1", "sa", "");
        for (DataSource dataSource : List.of(postgresql, h2)) {
            String table = "unkeyed_" + Math.abs(System.nanoTime() % 1_000_000);
            inTransaction(dataSource, true, con -> con.createStatement().execute("CREATE TABLE " + table
                    + " (transactional_id VARCHAR(512) NOT NULL, producer_id BIGINT NOT NULL, "
                    + "producer_epoch SMALLINT NOT NULL, txn_start_ms BIGINT, decided_at TIMESTAMP NOT NULL)"));
            replacesAndClears(dataSource, new DecisionLog(table));
        }
    }

    /**
     * A fleet's fence (left under the key when a new owner's initialization failed) refuses every decision of its id,
     * in the one-statement upsert of PostgreSQL and H2 alike, also after a hold of the key that does not lift it, until
     * the owner that initialized the id lifts it; then decisions are written again. A decision row the fence replaces
     * is set aside first.
     */
    @Test
    void aFenceRefusesDecisionsUntilTheKeyIsHeldAgainOnPostgresqlAndH2() throws SQLException {
        DataSource postgresql = new DriverManagerDataSource(postgres.jdbcUrl(), "postgres", "");
        DataSource h2 = new DriverManagerDataSource("jdbc:h2:mem:" + EmbeddedKafkaCluster.uniqueName("fence")
                + ";DB_CLOSE_DELAY=-1", "sa", "");
        for (DataSource dataSource : List.of(postgresql, h2)) {
            DecisionLog log = new DecisionLog();
            log.createTableIfMissing(dataSource);
            String prefix = EmbeddedKafkaCluster.uniqueName("fleet") + "-";
            PreparedTransaction before = PreparedTransaction.of(11, (short) 1, 1_700_000_000_011L);
            PreparedTransaction late = PreparedTransaction.of(11, (short) 2, 1_700_000_000_012L);
            inTransaction(dataSource, true, con -> log.record(con, prefix + "0-0", before));
            for (String id : List.of(prefix + "0-0", prefix + "0-1")) { // an id with a row, and one without
                log.withKeyHeld(dataSource, id, java.time.Duration.ofSeconds(5), (con, decision) -> {
                    log.fence(con, id, decision);
                    return null;
                });
                assertThat(log.find(dataSource, id)).as("a fence is no decision").isEmpty();
                assertThatThrownBy(() -> inTransaction(dataSource, true, con -> log.record(con, id, late)))
                    .isInstanceOf(SQLException.class).hasMessageContaining("fence");
                assertThat(log.find(dataSource, id)).isEmpty();
                // a hold that does not initialize the id (recovery, an operator's resolve) keeps the fence
                log.withKeyHeld(dataSource, id, java.time.Duration.ofSeconds(5), (con, decision) -> {
                    assertThat(decision).as("a fence is no decision").isEmpty();
                    return null;
                });
                assertThatThrownBy(() -> inTransaction(dataSource, true, con -> log.record(con, id, late)))
                    .isInstanceOf(SQLException.class).hasMessageContaining("fence");
                // the owner that initialized the id lifts it
                log.withKeyHeld(dataSource, id, java.time.Duration.ofSeconds(5), (con, decision) -> {
                    log.liftFence(con, id);
                    return null;
                });
                inTransaction(dataSource, true, con -> log.record(con, id, late));
                assertThat(log.find(dataSource, id)).hasValueSatisfying(
                        r -> assertThat(r.producerEpoch()).isEqualTo((short) 2));
            }
            // the row the fence replaced was set aside, so that it stays for an operator
            assertThat(log.findSetAside(dataSource, prefix, x -> true)).extracting(DecisionRecord::transactionalId)
                .singleElement().asString()
                .matches(java.util.regex.Pattern.quote(prefix + "0-0#in-doubt-") + "\\d+-1-.*"); // <pid>-<epoch>-
        }
    }

    /** Set-aside rows are found by pool: not those of a longer prefix that starts with the pool's. */
    @Test
    void setAsideRowsAreFoundForThePoolsIdsOnly() throws SQLException {
        DataSource dataSource = new DriverManagerDataSource("jdbc:h2:mem:" + EmbeddedKafkaCluster.uniqueName("aside")
                + ";DB_CLOSE_DELAY=-1", "sa", "");
        DecisionLog log = new DecisionLog();
        log.createTableIfMissing(dataSource);
        PreparedTransaction prepared = PreparedTransaction.of(9, (short) 1, 1_700_000_000_009L);
        for (String id : List.of("app-0", "app-x-0")) {
            inTransaction(dataSource, true, con -> log.record(con, id, prepared));
            log.setAside(dataSource, new DecisionRecord(id, 9, (short) 1, 1_700_000_000_009L, java.time.Instant.now()));
        }
        assertThat(log.findSetAside(dataSource, "app-")).extracting(DecisionRecord::transactionalId)
            .singleElement().asString().startsWith("app-0#in-doubt-");
        assertThat(log.findSetAside(dataSource, "app-x-")).extracting(DecisionRecord::transactionalId)
            .singleElement().asString().startsWith("app-x-0#in-doubt-");
    }

    private static void replacesAndClears(DataSource dataSource) throws SQLException {
        DecisionLog log = new DecisionLog();
        log.createTableIfMissing(dataSource);
        replacesAndClears(dataSource, log);
    }

    private static void replacesAndClears(DataSource dataSource, DecisionLog log) throws SQLException {
        String prefix = EmbeddedKafkaCluster.uniqueName("orders") + "-";
        String id = prefix + "0";
        PreparedTransaction first = PreparedTransaction.of(7, (short) 3, 1_700_000_000_001L);
        PreparedTransaction second = PreparedTransaction.of(7, (short) 4, 1_700_000_000_002L);
        PreparedTransaction rolledBack = PreparedTransaction.of(7, (short) 5, 1_700_000_000_003L);

        inTransaction(dataSource, true, con -> log.record(con, id, first));
        inTransaction(dataSource, true, con -> log.record(con, id, second));
        inTransaction(dataSource, false, con -> log.record(con, id, rolledBack));

        List<DecisionRecord> rows = log.findByPrefix(dataSource, prefix);
        assertThat(rows).singleElement().satisfies(r -> {
            assertThat(r.producerEpoch()).isEqualTo((short) 4);
            assertThat(r.txnStartMs()).isEqualTo(1_700_000_000_002L);
        });
        assertThat(log.contains(dataSource, id, second)).isTrue();
        assertThat(log.contains(dataSource, id, first)).isFalse();
        assertThat(log.contains(dataSource, id, rolledBack)).isFalse();

        // clearing names the transaction: an older identity leaves the newer row alone
        inTransaction(dataSource, true, con -> assertThat(log.clear(con, id, first)).isFalse());
        assertThat(log.findByPrefix(dataSource, prefix)).hasSize(1);
        inTransaction(dataSource, true, con -> assertThat(log.clear(con, id, second)).isTrue());
        assertThat(log.findByPrefix(dataSource, prefix)).isEmpty();
    }

    private interface Work {
        void run(Connection con) throws SQLException;
    }

    private static void inTransaction(DataSource dataSource, boolean commit, Work work) throws SQLException {
        try (Connection con = dataSource.getConnection()) {
            con.setAutoCommit(false);
            work.run(con);
            if (commit) {
                con.commit();
            }
            else {
                con.rollback();
            }
        }
    }
}
