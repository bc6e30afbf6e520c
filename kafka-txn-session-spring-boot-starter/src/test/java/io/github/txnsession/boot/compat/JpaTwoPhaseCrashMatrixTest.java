package io.github.txnsession.boot.compat;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;

import javax.sql.DataSource;

import io.github.txnsession.kafka.test.ChildJvm;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.CommitPhase;
import io.github.txnsession.spring.jdbc.DecisionLog;
import io.github.txnsession.spring.jdbc.RecoveryReport;
import io.github.txnsession.spring.jdbc.TwoPhaseRecovery;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The crash matrix of the two-phase commit on the JPA path: a Spring Boot child JVM with Spring Data JPA (Boot's
 * {@code JpaTransactionManager}, the Kafka session enlisted in it, the decision row on JPA's connection) is killed
 * ({@code Runtime.halt}) at every commit phase; after recovery the orders in the database and the events a
 * {@code read_committed} consumer sees are the same set, without duplicates, on H2 and PostgreSQL. Repetitions per
 * phase: system property {@code crash.repetitions} (default build 1, each phase on one of the two databases; profile
 * {@code crash-full} 10, every phase on both).
 */
class JpaTwoPhaseCrashMatrixTest {

    private static final Duration CHILD_TIMEOUT = Duration.ofSeconds(120);

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    @TempDir
    static Path dir;

    static EmbeddedPostgres postgres;

    @BeforeAll
    static void startPostgres() throws IOException {
        postgres = EmbeddedPostgres.builder().start();
    }

    @AfterAll
    static void stopPostgres() throws IOException {
        if (postgres != null) {
            postgres.close();
        }
    }

    @Test
    void h2() {
        // WRITE_DELAY=0: H2 otherwise writes a commit to disk up to a second after reporting it
        crashAt(phasesOf(0), "jdbc:h2:file:" + dir.resolve("orders").toAbsolutePath()
                + ";AUTO_SERVER=TRUE;WRITE_DELAY=0", "sa", false, false);
    }

    /**
     * {@code kafka.txn-session.jdbc.complete-in-background}: the Kafka completion phases crash a background thread.
     * The default build crashes it at those phases only (the earlier ones run as in the foreground); {@code crash-full}
     * at every phase.
     */
    @Test
    void h2CompletedInTheBackground() {
        List<CommitPhase> phases = Integer.getInteger("crash.repetitions", 1) > 1 ? List.of(CommitPhase.values())
                : List.of(CommitPhase.AFTER_JDBC_COMMIT, CommitPhase.AFTER_KAFKA_COMMIT, CommitPhase.AFTER_LOG_CLEAR);
        crashAt(phases, "jdbc:h2:file:" + dir.resolve("orders").toAbsolutePath() + ";AUTO_SERVER=TRUE;WRITE_DELAY=0",
                "sa", true, false);
    }

    @Test
    void postgresql() {
        crashAt(phasesOf(1), postgres.getJdbcUrl("postgres", "postgres"), "postgres", false, false);
    }

    /**
     * {@code kafka.txn-session.jdbc.decision-alongside-prepare}: the decision row is written while the Kafka side is
     * prepared, under producer id and epoch only; recovery completes or aborts from it all the same. The default build
     * crashes right after the database committed the row (where the row without a start time is what recovery reads);
     * {@code crash-full} at every phase.
     */
    @Test
    void postgresqlWithTheDecisionWrittenAlongsideThePrepare() {
        List<CommitPhase> phases = Integer.getInteger("crash.repetitions", 1) > 1 ? List.of(CommitPhase.values())
                : List.of(CommitPhase.AFTER_JDBC_COMMIT);
        crashAt(phases, postgres.getJdbcUrl("postgres", "postgres"), "postgres", false, true);
    }

    /**
     * The phases one database is crashed at: every phase with {@code crash-full}; in the default build every other
     * phase (H2 the even ones, PostgreSQL the odd ones), so that each phase is crashed once on the JPA path in a
     * child JVM start per phase instead of two.
     *
     * @param parity 0 for the even phases, 1 for the odd ones
     */
    private static List<CommitPhase> phasesOf(int parity) {
        List<CommitPhase> all = List.of(CommitPhase.values());
        if (Integer.getInteger("crash.repetitions", 1) > 1) {
            return all;
        }
        return all.stream().filter(p -> p.ordinal() % 2 == parity).toList();
    }

    private void crashAt(List<CommitPhase> phases, String jdbcUrl, String user, boolean completeInBackground,
            boolean decisionAlongsidePrepare) {
        int repetitions = Integer.getInteger("crash.repetitions", 1);
        long seed = System.nanoTime();
        Random random = new Random(seed);
        String topic = EmbeddedKafkaCluster.uniqueName("jpa-orders");
        kafka.cluster().createTopic(topic, 2);
        String prefix = EmbeddedKafkaCluster.uniqueName("jpa-crash") + "-";
        DataSource dataSource = new DriverManagerDataSource(jdbcUrl, user, "");
        JdbcTemplate jdbc = new JdbcTemplate(dataSource);
        jdbc.execute("CREATE TABLE IF NOT EXISTS compat_order (id VARCHAR(255) PRIMARY KEY)");
        jdbc.update("DELETE FROM compat_order WHERE id LIKE 'order-%'");
        DecisionLog log = new DecisionLog();
        log.createTableIfMissing(dataSource);
        Map<CommitPhase, Integer> crashes = new EnumMap<>(CommitPhase.class);
        int nextId = 0;
        for (int rep = 0; rep < repetitions; rep++) {
            for (CommitPhase phase : phases) {
                int okCount = random.nextInt(3);
                String crashedOrder = "order-" + (nextId + okCount);
                try (ChildJvm child = ChildJvm.start(JpaCrashChild.class, kafka.bootstrapServers(), jdbcUrl, prefix,
                        topic, phase.name(), String.valueOf(okCount), String.valueOf(nextId),
                        String.valueOf(completeInBackground), String.valueOf(decisionAlongsidePrepare))) {
                    assertThat(child.awaitLine("CRASH", CHILD_TIMEOUT)).startsWith("CRASH " + phase);
                    assertThat(child.awaitExit(CHILD_TIMEOUT)).isEqualTo(137);
                }
                nextId += okCount + 1;
                crashes.merge(phase, 1, Integer::sum);

                if (phase == CommitPhase.AFTER_JDBC_COMMIT) {
                    // the committed decision names the coordinator's start time unless it was written alongside
                    assertThat(log.findByPrefix(dataSource, prefix)).isNotEmpty().allSatisfy(row -> assertThat(
                            row.preparedTransaction().hasStartTime()).isEqualTo(!decisionAlongsidePrepare));
                }
                // the application restarts: recovery runs before any session is handed out
                TwoPhaseRecovery recovery = new TwoPhaseRecovery(dataSource, log, prefix, 2,
                        kafka.cluster().clientConfigs(), null);
                RecoveryReport report = recovery.recover();
                assertThat(report.lost()).as("lost after a crash at %s (seed %d)", phase, seed).isEmpty();
                assertThat(report.failed()).isEmpty();
                assertThat(log.findByPrefix(dataSource, prefix)).isEmpty();

                List<String> inDatabase = jdbc.queryForList("SELECT id FROM compat_order WHERE id LIKE 'order-%'",
                        String.class);
                List<String> inKafka = new ArrayList<>();
                for (ConsumerRecord<String, String> r : kafka.cluster().readCommitted(topic)) {
                    inKafka.add(r.key());
                }
                assertThat(inKafka).as("no duplicate events (seed %d)", seed).doesNotHaveDuplicates();
                assertThat(new HashSet<>(inKafka)).as("events == orders after a crash at %s (seed %d)", phase, seed)
                    .isEqualTo(new HashSet<>(inDatabase));
                boolean decided = phase.compareTo(CommitPhase.AFTER_JDBC_COMMIT) >= 0;
                assertThat(inDatabase.contains(crashedOrder)).as("%s committed after a crash at %s", crashedOrder,
                        phase).isEqualTo(decided);
            }
        }
        System.out.printf("CRASH-MATRIX JPA %s%s%s: %s repetitions, crashes %s, %d orders in both stores, seed %d%n",
                jdbcUrl.startsWith("jdbc:h2") ? "H2" : "PostgreSQL",
                completeInBackground ? " (completed in background)" : "",
                decisionAlongsidePrepare ? " (decision alongside the prepare)" : "", repetitions, crashes,
                jdbc.queryForObject("SELECT COUNT(*) FROM compat_order WHERE id LIKE 'order-%'", Integer.class), seed);
    }
}
