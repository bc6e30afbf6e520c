package io.github.txnsession.kafka;

import java.util.Map;

import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.common.KafkaException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** {@link ClusterGuarantees#detect} against a real broker, and against no broker. */
class ClusterGuaranteesTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    @Test
    void detectsWhatTheBrokerAllows() {
        ClusterGuarantees g = ClusterGuarantees.detect(kafka.cluster().clientConfigs());
        assertThat(g.transactionVersion()).isEqualTo(kafka.cluster().transactionVersion());
        assertThat(g.shareGroups()).isEqualTo(kafka.cluster().supportsShareGroups());
        assertThat(g.transactionalShareAcks()).as("KIP-1289 is a proposal").isFalse();
        assertThat(g.transactionHeartbeat()).as("KIP-1309 is a draft").isFalse();
        assertThat(g.summary()).contains("transaction version " + g.transactionVersion())
                .contains("no transaction heartbeat");
    }

    @Test
    void noBrokerIsATimeoutNotAGuess() {
        Map<String, Object> configs = Map.of(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, "localhost:1",
                CommonClientConfigs.REQUEST_TIMEOUT_MS_CONFIG, 1500);
        assertThatThrownBy(() -> ClusterGuarantees.detect(configs)).isInstanceOf(KafkaException.class);
    }
}
