package io.github.txnsession.kafka;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.junit.jupiter.api.extension.RegisterExtension;

/** The session model on a cluster downgraded to transaction version 1 (one epoch for a producer's transactions). */
class SessionModelV1Test extends SessionModelTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(b -> b.feature("transaction.version", 1)
        .brokerProperty("transaction.abort.timed.out.transaction.cleanup.interval.ms", 300));

    @Override
    EmbeddedKafkaCluster kafka() {
        return kafka.cluster();
    }

    @Override
    boolean transactionVersion2() {
        return false;
    }
}
