package io.github.txnsession.kafka;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static org.assertj.core.api.Assertions.assertThat;

/** Resume contract on a cluster with transaction version 2 (the production default: epoch bump per transaction). */
class ResumeTransactionV2Test extends ResumeContractTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(b -> b.feature("transaction.version", 2));

    @Override
    EmbeddedKafkaCluster kafka() {
        return kafka.cluster();
    }

    @Override
    boolean epochBumpsPerTransaction() {
        return true;
    }

    @Test
    void clusterRunsTransactionVersion2() throws Exception {
        assertThat(kafka().admin().describeFeatures().featureMetadata().get().finalizedFeatures()
            .get("transaction.version").maxVersionLevel()).isEqualTo((short) 2);
    }
}
