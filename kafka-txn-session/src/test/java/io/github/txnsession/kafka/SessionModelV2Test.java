package io.github.txnsession.kafka;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.junit.jupiter.api.extension.RegisterExtension;

/** The session model on a cluster with transaction version 2 (the default: the epoch bumps at every end). */
class SessionModelV2Test extends SessionModelTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(b -> b
        .brokerProperty("transaction.abort.timed.out.transaction.cleanup.interval.ms", 300));

    @Override
    EmbeddedKafkaCluster kafka() {
        return kafka.cluster();
    }

    @Override
    boolean transactionVersion2() {
        return true;
    }
}
