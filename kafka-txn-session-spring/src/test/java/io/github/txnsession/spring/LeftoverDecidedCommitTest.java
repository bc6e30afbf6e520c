package io.github.txnsession.spring;

import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * A predecessor died after the coordinator decided its commit (PrepareCommit written) but before the markers were
 * written (the partition's only broker is down). The restarted pool's background end of leftovers initializes the id:
 * that must finish the decided commit, never abort it. On two brokers: the coordinator of the id on one, the output
 * partition on the other.
 *
 * <p>Kafka itself never lets an initialization abort a transaction in PrepareCommit, so the outcome checks guard
 * against this library getting in the way (an abort of its own, a look that misses a committing transaction, a
 * background end that gives up while the broker is down); what only the pool decides is that the id is reported
 * ended, after the coordinator could finish the commit, and not before.
 */
class LeftoverDecidedCommitTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(2);

    @Test
    void aLeftoverWhoseCommitWasDecidedIsFinishedNotAborted() throws Exception {
        EmbeddedKafkaCluster cluster = kafka.cluster();
        // Kafka 4.3 and 4.4 brokers complete such a commit without the marker of a partition whose replicas are all
        // down (see README, "A broker issue in Kafka 4.3 and 4.4"; BrokerOutageTest skips its case too)
        String version = cluster.brokerVersion();
        assumeTrue(version.startsWith("4.0") || version.startsWith("4.1") || version.startsWith("4.2"),
                "Kafka " + version + " brokers drop the commit marker of a partition whose replicas are all down");
        String prefix = EmbeddedKafkaCluster.uniqueName("decided") + "-";
        String id = prefix + "0";
        Map<String, Object> configs = new HashMap<>(cluster.clientConfigs());
        configs.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id);
        configs.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 300_000);
        KafkaProducer<String, String> predecessor = new KafkaProducer<>(configs, new StringSerializer(),
                new StringSerializer());
        Integer stopped = null;
        try {
            predecessor.initTransactions();
            int coordinator = cluster.admin().describeTransactions(List.of(id)).description(id)
                .get(10, TimeUnit.SECONDS).coordinatorId();
            Set<Integer> others = new HashSet<>(cluster.brokerIds());
            others.remove(coordinator);
            int partitionBroker = others.iterator().next();
            String topic = EmbeddedKafkaCluster.uniqueName("decided-out");
            cluster.admin().createTopics(List.of(new NewTopic(topic, Map.of(0, List.of(partitionBroker)))))
                .all().get(30, TimeUnit.SECONDS);
            predecessor.beginTransaction();
            predecessor.send(new ProducerRecord<>(topic, "k", "decided")).get(30, TimeUnit.SECONDS);
            cluster.stopBroker(partitionBroker);
            stopped = partitionBroker;
            predecessor.commitTransaction(); // PrepareCommit is written; the marker waits for the partition's broker
            await().atMost(Duration.ofSeconds(10)).until(() -> state(id) == TransactionState.PREPARE_COMMIT);
            predecessor.close(Duration.ZERO); // the predecessor dies here

            Map<String, Object> poolConfigs = new HashMap<>(cluster.clientConfigs());
            // the initialization waits for the commit to finish: long enough for a slow broker restart
            poolConfigs.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 180_000);
            try (TransactionSessionPool pool = new TransactionSessionPool(prefix, 1, Duration.ofSeconds(5),
                    poolConfigs, List.of())) {
                CompletableFuture<List<String>> ended = pool.endLeftoversInBackground();
                // the coordinator cannot finish the commit while the partition's broker is down: the end of the
                // leftover waits for it (it must not abort a decided commit, nor report it ended)
                await().during(Duration.ofSeconds(2)).atMost(Duration.ofSeconds(5)).until(() -> !ended.isDone());
                assertThat(state(id)).isEqualTo(TransactionState.PREPARE_COMMIT);
                stopped = null;
                cluster.restartBroker(partitionBroker);
                assertThat(ended.get(240, TimeUnit.SECONDS)).containsExactly(id);
                assertThat(state(id)).isNotEqualTo(TransactionState.PREPARE_ABORT)
                    .isNotEqualTo(TransactionState.COMPLETE_ABORT);
            }
            assertThat(cluster.readCommitted(topic)).extracting(r -> r.value()).containsExactly("decided");
        }
        finally {
            if (stopped != null) {
                cluster.restartBroker(stopped);
            }
            predecessor.close(Duration.ZERO);
        }
    }

    private static TransactionState state(String id) throws Exception {
        return kafka.cluster().admin().describeTransactions(List.of(id)).description(id).get(10, TimeUnit.SECONDS)
            .state();
    }
}
