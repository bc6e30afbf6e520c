package io.github.txnsession.spring.jdbc;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.junit.jupiter.api.extension.RegisterExtension;

/** Crash matrix on a real embedded PostgreSQL. */
class PostgresTwoPhaseCrashMatrixTest extends TwoPhaseCrashMatrixTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    @RegisterExtension
    static final EmbeddedPostgresExtension postgres = new EmbeddedPostgresExtension();

    @Override
    EmbeddedKafkaCluster kafka() {
        return kafka.cluster();
    }

    @Override
    String jdbcUrl() {
        return postgres.jdbcUrl();
    }
}
