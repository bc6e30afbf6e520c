package io.github.txnsession.kafka;

import java.util.List;
import java.util.Map;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static io.github.txnsession.kafka.TestClients.sessionConfigs;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * A broker whose {@code add.partitions.to.txn.retry.backoff.ms} is 1 ms (the tuning docs/performance.md recommends):
 * {@code session.await-transaction-end=auto} reads it at initialize and leaves first writes alone; an explicit
 * {@code true} still waits. Transactions back to back on one id commit either way.
 */
class TunedBrokerAwaitTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(b -> b
        .feature("transaction.version", 2) // what auto decides under version 1 is ResumeTransactionV1Test's
        .brokerProperty("add.partitions.to.txn.retry.backoff.ms", 1));

    @Test
    void autoDoesNotWaitOnATunedBroker() throws Exception {
        String topic = EmbeddedKafkaCluster.uniqueName("tuned");
        kafka.cluster().createTopic(topic, 1);
        for (Object value : new Object[] { null, "auto", true }) {
            Map<String, Object> configs = sessionConfigs(kafka.cluster(), EmbeddedKafkaCluster.uniqueName("tx-tuned"));
            if (value != null) {
                configs.put(TransactionSessionConfig.AWAIT_TRANSACTION_END, value);
            }
            try (KafkaTransactionSession session = (KafkaTransactionSession) TransactionSession.open(configs)) {
                session.initialize();
                assertThat(session.awaitsPreviousEnds()).as("%s", value).isEqualTo(Boolean.TRUE.equals(value));
                SessionProducer<String, String> producer = new SessionProducer<>(session, new StringSerializer(),
                        new StringSerializer());
                for (int i = 0; i < 5; i++) {
                    session.beginTransaction();
                    producer.send(new ProducerRecord<>(topic, value + "-" + i));
                    session.commitTransaction();
                }
            }
        }
        assertThat(TestClients.values(TestClients.readCommitted(kafka.cluster(), topic))).hasSize(15)
            .containsAll(List.of("null-0", "auto-4", "true-2"));
    }
}
