package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.List;
import java.util.Map;

import io.github.txnsession.kafka.test.ChildJvm;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static io.github.txnsession.kafka.TestClients.readCommitted;
import static org.assertj.core.api.Assertions.assertThat;

/** On 3 brokers, a resumed commit succeeds while the transaction's coordinator broker is down. */
class ResumeCoordinatorFailoverTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(3);

    @Test
    void resumeAndCommitWhileTheCoordinatorBrokerIsStopped() throws Exception {
        EmbeddedKafkaCluster cluster = kafka.cluster();
        String topic = EmbeddedKafkaCluster.uniqueName("failover");
        cluster.createTopic(topic, 3);
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-failover");
        PreparedTransaction prepared;
        try (ChildJvm child = ChildJvm.start(PreparingChild.class, "prepare", cluster.bootstrapServers(), txnId,
                topic, "6", "120000")) {
            prepared = PreparedTransaction.parse(child.awaitValue("PREPARED", Duration.ofSeconds(60)));
            child.awaitExit(Duration.ofSeconds(60));
        }
        int coordinator = cluster.admin().describeTransactions(List.of(txnId)).description(txnId).get()
            .coordinatorId();
        cluster.stopBroker(coordinator);
        try {
            try (TransactionSession session = TransactionSession.resume(txnId, prepared,
                    Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers()))) {
                assertThat(session.completeTransaction(prepared)).isEqualTo(CompletionOutcome.COMMITTED);
            }
            int newCoordinator = cluster.admin().describeTransactions(List.of(txnId)).description(txnId).get()
                .coordinatorId();
            assertThat(newCoordinator).isNotEqualTo(coordinator);
            assertThat(readCommitted(cluster, topic)).hasSize(6);
        }
        finally {
            cluster.restartBroker(coordinator);
        }
        assertThat(cluster.stoppedBrokers()).isEmpty();
        assertThat(readCommitted(cluster, topic)).hasSize(6);
    }
}
