package io.github.txnsession.spring.jdbc;

import java.util.Map;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.transaction.TransactionSystemException;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Kafka fails at prepare (its only broker is down): the JDBC transaction is rolled back. */
class TwoPhasePrepareFailureTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    @Test
    void brokerDownAtPrepareRollsBackTheDatabase() {
        EmbeddedKafkaCluster cluster = kafka.cluster();
        String topic = EmbeddedKafkaCluster.uniqueName("orders");
        cluster.createTopic(topic, 1);
        String url = "jdbc:h2:mem:" + EmbeddedKafkaCluster.uniqueName("prepare") + ";DB_CLOSE_DELAY=-1";
        Map<String, Object> fastFailure = Map.of("delivery.timeout.ms", 4000, "request.timeout.ms", 2000,
                "max.block.ms", 4000, "session.coordinator.timeout.ms", 4000, "session.close.timeout.ms", 2000);
        int broker = cluster.brokerIds().iterator().next();
        try (OrderFlow flow = new OrderFlow(cluster.bootstrapServers(), url,
                EmbeddedKafkaCluster.uniqueName("prep") + "-", topic, fastFailure, null)) {
            OrderFlow.createSchema(flow.dataSource);
            flow.placeOrder("before");
            try {
                assertThatThrownBy(() -> flow.tx.executeWithoutResult(status -> {
                    flow.jdbc.update("INSERT INTO orders (id, ref) VALUES ('during', 'r')");
                    flow.kafka.send(topic, "during", "OrderPlaced:during");
                    flow.kafka.flush();
                    cluster.stopBroker(broker); // the commit's first step, prepare, now cannot reach Kafka
                })).isInstanceOf(TransactionSystemException.class).hasMessageContaining("prepare");
                assertThat(flow.orderIds()).containsExactly("before");
                assertThat(flow.decisionLog.findByPrefix(flow.dataSource, flow.pool.transactionalIdPrefix()))
                    .isEmpty();
            }
            finally {
                if (cluster.stoppedBrokers().contains(broker)) {
                    cluster.restartBroker(broker);
                }
            }
        }
        assertThat(cluster.readCommitted(topic)).extracting(r -> r.key()).containsExactly("before");
    }
}
