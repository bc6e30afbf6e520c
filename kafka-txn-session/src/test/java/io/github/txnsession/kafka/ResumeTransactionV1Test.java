package io.github.txnsession.kafka;

import java.util.Map;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.apache.kafka.clients.producer.ProducerConfig;

import static io.github.txnsession.kafka.TestClients.sessionConfigs;
import static org.assertj.core.api.Assertions.assertThat;

/** Resume contract on a cluster downgraded to transaction version 1 (no epoch bump per transaction). */
class ResumeTransactionV1Test extends ResumeContractTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(b -> b.feature("transaction.version", 1));

    @Override
    EmbeddedKafkaCluster kafka() {
        return kafka.cluster();
    }

    @Override
    boolean epochBumpsPerTransaction() {
        return false;
    }

    @Test
    void clusterRunsTransactionVersion1() throws Exception {
        assertThat(kafka().admin().describeFeatures().featureMetadata().get().finalizedFeatures()
            .get("transaction.version").maxVersionLevel()).isEqualTo((short) 1);
    }

    /**
     * With transaction version 1 the producer adds partitions itself and retries after its own retry.backoff.ms
     * (at most 20 ms, capped by kafka-clients): auto waits for the previous end unless that back-off is short.
     */
    @Test
    void autoAwaitFollowsTheProducersBackoffUnderVersion1() {
        for (Object backoff : new Object[] { null, 100, 3, 2, 1 }) {
            Map<String, Object> configs = sessionConfigs(kafka(), EmbeddedKafkaCluster.uniqueName("tx-v1-await"));
            if (backoff != null) {
                configs.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, backoff);
            }
            try (KafkaTransactionSession session = (KafkaTransactionSession) TransactionSession.open(configs)) {
                session.initialize();
                boolean expected = backoff == null || (Integer) backoff > 2;
                assertThat(session.awaitsPreviousEnds()).as("retry.backoff.ms=%s", backoff).isEqualTo(expected);
            }
        }
    }
}
