package io.github.txnsession.spring.jdbc;

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
import io.github.txnsession.spring.CommitPhase;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The crash matrix: a child JVM running the order flow is killed ({@code Runtime.halt}) at every commit phase; after
 * recovery the orders in the database and the events visible in Kafka ({@code read_committed}) are the same set, with
 * no duplicates. Repetitions per phase: system property {@code crash.repetitions} (default build 2; profile
 * {@code crash-full} 10).
 */
abstract class TwoPhaseCrashMatrixTest {

    private static final Duration CHILD_TIMEOUT = Duration.ofSeconds(120);

    abstract EmbeddedKafkaCluster kafka();

    abstract String jdbcUrl();

    @Test
    void crashAtEveryPhaseLosesAndDuplicatesNothing() {
        int repetitions = Integer.getInteger("crash.repetitions", 2);
        long seed = System.nanoTime();
        Random random = new Random(seed);
        String topic = EmbeddedKafkaCluster.uniqueName("orders");
        kafka().createTopic(topic, 2);
        String prefix = EmbeddedKafkaCluster.uniqueName("crash") + "-";
        DataSource dataSource = OrderFlow.dataSource(jdbcUrl());
        OrderFlow.createSchema(dataSource);
        new org.springframework.jdbc.core.JdbcTemplate(dataSource).update("DELETE FROM orders");
        DecisionLog log = new DecisionLog();
        Map<String, Object> clientConfigs = kafka().clientConfigs();
        Map<CommitPhase, Integer> crashes = new EnumMap<>(CommitPhase.class);
        int nextId = 0;
        for (int rep = 0; rep < repetitions; rep++) {
            for (CommitPhase phase : CommitPhase.values()) {
                int okCount = random.nextInt(3);
                String crashedOrder = "order-" + (nextId + okCount);
                try (ChildJvm child = ChildJvm.start(TwoPhaseCrashChild.class, kafka().bootstrapServers(), jdbcUrl(),
                        prefix, topic, phase.name(), String.valueOf(okCount), String.valueOf(nextId))) {
                    assertThat(child.awaitLine("CRASH", CHILD_TIMEOUT)).startsWith("CRASH " + phase);
                    assertThat(child.awaitExit(CHILD_TIMEOUT)).isEqualTo(137);
                }
                nextId += okCount + 1;
                crashes.merge(phase, 1, Integer::sum);

                // the application restarts: recovery runs before any session is handed out
                TwoPhaseRecovery recovery = new TwoPhaseRecovery(dataSource, log, prefix, 2, clientConfigs, null);
                RecoveryReport report = recovery.recover();
                assertThat(report.lost()).as("lost after a crash at %s (seed %d)", phase, seed).isEmpty();
                assertThat(report.failed()).isEmpty();
                assertThat(log.findByPrefix(dataSource, prefix)).isEmpty();

                List<String> inDatabase = new org.springframework.jdbc.core.JdbcTemplate(dataSource)
                    .queryForList("SELECT id FROM orders", String.class);
                List<String> inKafka = new ArrayList<>();
                for (ConsumerRecord<String, String> r : kafka().readCommitted(topic)) {
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
        System.out.printf("CRASH-MATRIX %s: %s crashes %s, %d orders in both stores, seed %d%n",
                getClass().getSimpleName(), repetitions, crashes, new org.springframework.jdbc.core.JdbcTemplate(
                        dataSource).queryForObject("SELECT COUNT(*) FROM orders", Integer.class), seed);
    }
}
