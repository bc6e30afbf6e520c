package io.github.txnsession.spring.jdbc;

import java.nio.file.Path;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

/**
 * Crash matrix on H2 (a file database shared by the child JVM and the test through H2's auto server mode).
 * {@code WRITE_DELAY=0} makes every commit durable: H2's default writes commits to disk up to a second later, so a
 * crash right after a commit can lose it, and no two-phase commit can make up for a database that forgets commits.
 */
class H2TwoPhaseCrashMatrixTest extends TwoPhaseCrashMatrixTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    @TempDir
    static Path dir;

    @Override
    EmbeddedKafkaCluster kafka() {
        return kafka.cluster();
    }

    @Override
    String jdbcUrl() {
        return "jdbc:h2:file:" + dir.resolve("orders").toAbsolutePath() + ";AUTO_SERVER=TRUE;WRITE_DELAY=0";
    }
}
