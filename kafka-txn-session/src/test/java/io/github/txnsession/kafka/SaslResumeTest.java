package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static io.github.txnsession.kafka.TestClients.readCommitted;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Sessions and the coordinator client honour the client's SASL settings. */
class SaslResumeTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(EmbeddedKafkaCluster.Builder::saslPlain);

    @Test
    void prepareAndResumeOverSasl() {
        String topic = EmbeddedKafkaCluster.uniqueName("sasl");
        kafka.cluster().createTopic(topic, 1);
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-sasl");
        TransactionSession live = TransactionSession.open(TestClients.sessionConfigs(kafka.cluster(), txnId));
        live.initialize();
        live.beginTransaction();
        new SessionProducer<>(live, new StringSerializer(), new StringSerializer())
            .send(new ProducerRecord<>(topic, "k", "over-sasl"));
        PreparedTransaction prepared = live.prepareTransaction();
        KafkaTransactionSession.of(live).liveProducer().close(Duration.ZERO); // abandon it, as a crash would

        Map<String, Object> wrongPassword = new HashMap<>(EmbeddedKafkaCluster.saslClientConfigs(
                EmbeddedKafkaCluster.SASL_USER, "not-the-password"));
        wrongPassword.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
        assertThatThrownBy(() -> TransactionSession.resume(txnId, prepared, wrongPassword))
            .isInstanceOf(SaslAuthenticationException.class);

        try (TransactionSession resumed = TransactionSession.resume(txnId, prepared, kafka.cluster().clientConfigs())) {
            assertThat(resumed.completeTransaction(prepared)).isEqualTo(CompletionOutcome.COMMITTED);
        }
        assertThat(TestClients.values(readCommitted(kafka.cluster(), topic))).containsExactly("over-sasl");
    }
}
