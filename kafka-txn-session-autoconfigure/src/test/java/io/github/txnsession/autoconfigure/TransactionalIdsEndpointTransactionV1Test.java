package io.github.txnsession.autoconfigure;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import io.github.txnsession.kafka.SessionFencedException;
import io.github.txnsession.kafka.SessionProducer;
import io.github.txnsession.kafka.SessionState;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.TransactionSessionPool;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The {@code txnsessionids} endpoint's resolve in Kafka-only mode, on a cluster with transaction version 1 (an abort
 * keeps the producer epoch): it aborts the transaction a paused producer of the id left open and fences that producer,
 * so it cannot go on committing under the id.
 */
class TransactionalIdsEndpointTransactionV1Test {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(b -> b.feature("transaction.version", 1));

    @Test
    void resolveAbortsTheOpenTransactionAndFencesItsProducer() throws Exception {
        EmbeddedKafkaCluster cluster = kafka.cluster();
        assertThat(cluster.transactionVersion()).isEqualTo(1);
        String topic = EmbeddedKafkaCluster.uniqueName("v1-resolve");
        cluster.createTopic(topic, 1);
        String prefix = EmbeddedKafkaCluster.uniqueName("v1-resolve") + "-";
        Map<String, Object> configs = new HashMap<>(cluster.clientConfigs());
        configs.put("session.close.timeout.ms", 2000);
        try (TransactionSessionPool pool = new TransactionSessionPool(prefix, 1, Duration.ofSeconds(5), configs,
                List.of())) {
            Map<String, Object> predecessorConfigs = new HashMap<>(configs);
            predecessorConfigs.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, prefix + "0");
            try (TransactionSession predecessor = TransactionSession.open(predecessorConfigs)) {
                predecessor.initialize();
                SessionProducer<String, String> producer = new SessionProducer<>(predecessor,
                        new StringSerializer(), new StringSerializer());
                predecessor.beginTransaction();
                producer.send(new ProducerRecord<>(topic, "k", "left-open"));
                producer.flush();
                // an operator resolves the id this instance has not used yet
                Map<String, Object> resolved = new TransactionalIdsEndpoint(pool, null).resolve(prefix + "0");
                assertThat(resolved).containsEntry("resolved", true).containsEntry("aborted", true)
                    .containsEntry("fenced", true);
                // the paused producer goes on: it aborts to start its next transaction. Fenced, the abort fails;
                // after a bare abort it would pass as a retry and the next transaction would commit
                assertThatThrownBy(predecessor::abortTransaction).isInstanceOf(SessionFencedException.class);
                assertThat(predecessor.state()).isEqualTo(SessionState.FATAL_ERROR);
            }
        }
        assertThat(cluster.readCommitted(topic)).isEmpty();
    }
}
