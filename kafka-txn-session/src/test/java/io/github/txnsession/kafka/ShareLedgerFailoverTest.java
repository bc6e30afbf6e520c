package io.github.txnsession.kafka;

import static io.github.txnsession.kafka.TestClients.produce;
import static io.github.txnsession.kafka.TestClients.readCommitted;
import static io.github.txnsession.kafka.TestClients.sessionConfigs;
import static io.github.txnsession.kafka.TestClients.setGroupConfigs;
import static io.github.txnsession.kafka.TestClients.shareConsumerConfigs;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * A share-partition leader that fails over hands the records its consumers held to other consumers at once, long
 * before their acquisition locks would have expired (the new leader does not know the old one's acquisitions). A
 * worker with an outcome ledger whose records went that way while its transaction was open must not commit: the
 * consumer that got them looked the ledger up before this worker's entry existed, found nothing, and produced them.
 * Found by the starter's {@code AllPathsChaosSoakTest}, which saw one task produced twice.
 */
class ShareLedgerFailoverTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(b -> b.brokers(3)
        .brokerProperty("min.insync.replicas", 2)
        .brokerProperty("controlled.shutdown.enable", false));

    @Test
    void aWorkerWhoseRecordsMovedToAnotherConsumerOnFailoverCannotCommitADuplicate() throws Exception {
        String input = EmbeddedKafkaCluster.uniqueName("failover-share-in");
        String output = EmbeddedKafkaCluster.uniqueName("failover-share-out");
        kafka.cluster().createTopics(1, input, output);
        produce(kafka.cluster(), List.of(new ProducerRecord<>(input, 0, null, "in-0")));
        String group = EmbeddedKafkaCluster.uniqueName("failover-share-group");
        setGroupConfigs(kafka.cluster(), group, Map.of("share.auto.offset.reset", "earliest"));
        String ledgerTopic = EmbeddedKafkaCluster.uniqueName("failover-ledger");
        try (ShareOutcomeLedger ledger = new ShareOutcomeLedger(kafka.cluster().clientConfigs(), ledgerTopic,
                Duration.ofSeconds(30));
                TransactionSession first = session("failover-share-a");
                TransactionalShareConsumer<String, String> a = shareConsumer(group);
                TransactionSession second = session("failover-share-b");
                TransactionalShareConsumer<String, String> b = shareConsumer(group)) {
            a.useOutcomeLedger(ledger);
            b.useOutcomeLedger(ledger);
            a.subscribe(List.of(input));
            a.bindTransactionSession(first);
            SessionProducer<String, String> outA = new SessionProducer<>(first, new StringSerializer(),
                    new StringSerializer());
            List<ConsumerRecord<String, String>> held = pollNonEmpty(a);
            first.beginTransaction();
            for (ConsumerRecord<String, String> r : held) {
                outA.send(new ProducerRecord<>(output, r.value(), "from-a"));
                a.acknowledge(r, AcknowledgeType.ACCEPT);
            }
            outA.flush();
            // the share partition's leader dies: its acquisitions are gone, the record is available again at once
            int leader = kafka.cluster().admin().describeTopics(List.of(input)).allTopicNames().get().get(input)
                .partitions().get(0).leader().id();
            kafka.cluster().stopBroker(leader);
            try {
                b.subscribe(List.of(input));
                b.bindTransactionSession(second);
                SessionProducer<String, String> outB = new SessionProducer<>(second, new StringSerializer(),
                        new StringSerializer());
                List<ConsumerRecord<String, String>> again = pollNonEmpty(b);
                assertThat(again).extracting(ConsumerRecord::value).containsExactly("in-0");
                second.beginTransaction();
                for (ConsumerRecord<String, String> r : again) {
                    outB.send(new ProducerRecord<>(output, r.value(), "from-b"));
                    b.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                second.commitTransaction();
                // a still believes it holds the record (its lock has 30 s to run): its commit must be refused
                assertThatThrownBy(first::commitTransaction).isInstanceOf(SessionAbortableException.class)
                    .hasMessageContaining("no longer has the records");
                first.abortTransaction();
            }
            finally {
                kafka.cluster().restartBroker(leader);
            }
        }
        assertThat(readCommitted(kafka.cluster(), output)).extracting(ConsumerRecord::value)
            .as("one committed output for the one input").containsExactly("from-b");
    }

    private static TransactionSession session(String prefix) {
        TransactionSession session = TransactionSession.open(sessionConfigs(kafka.cluster(),
                EmbeddedKafkaCluster.uniqueName(prefix)));
        session.initialize();
        return session;
    }

    private static TransactionalShareConsumer<String, String> shareConsumer(String group) {
        Map<String, Object> configs = shareConsumerConfigs(kafka.cluster(), group);
        configs.put(ConsumerConfig.SHARE_ACQUIRE_MODE_CONFIG, "record_limit");
        return new TransactionalShareConsumer<>(configs, new StringDeserializer(), new StringDeserializer());
    }

    private static List<ConsumerRecord<String, String>> pollNonEmpty(TransactionalShareConsumer<String, String> c) {
        List<ConsumerRecord<String, String>> records = new ArrayList<>();
        await().atMost(Duration.ofSeconds(60)).until(() -> {
            ConsumerRecords<String, String> polled = c.poll(Duration.ofMillis(200));
            polled.forEach(records::add);
            return !records.isEmpty();
        });
        return records;
    }
}
