package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static io.github.txnsession.kafka.TestClients.committedOffsets;
import static io.github.txnsession.kafka.TestClients.consumerConfigs;
import static io.github.txnsession.kafka.TestClients.produce;
import static io.github.txnsession.kafka.TestClients.readCommitted;
import static io.github.txnsession.kafka.TestClients.sessionConfigs;
import static io.github.txnsession.kafka.TestClients.values;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Brokers that stop mid-commit (two brokers, transaction log replicated on both): a commit whose markers wait for a
 * stopped partition leader is reported committed to every committer; a commit that times out can be retried with a
 * bound consumer, and an abort after it reports the commit that went through instead of losing or duplicating.
 */
class BrokerOutageTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(2);

    private static EmbeddedKafkaCluster cluster() {
        return kafka.cluster();
    }

    @AfterEach
    void restartStoppedBrokers() {
        if (!cluster().stoppedBrokers().isEmpty()) {
            cluster().restartBrokers(cluster().stoppedBrokers());
        }
    }

    private static TransactionSession session(String txnId, Map<String, Object> extra) {
        Map<String, Object> configs = sessionConfigs(cluster(), txnId);
        configs.putAll(extra);
        TransactionSession session = TransactionSession.open(configs);
        session.initialize();
        return session;
    }

    private static int coordinatorOf(String txnId) throws Exception {
        return cluster().admin().describeTransactions(List.of(txnId)).description(txnId).get().coordinatorId();
    }

    private static String topicOn(int brokerId, String prefix) throws Exception {
        String topic = EmbeddedKafkaCluster.uniqueName(prefix);
        cluster().admin().createTopics(List.of(new NewTopic(topic, Map.of(0, List.of(brokerId))))).all().get();
        await().atMost(Duration.ofSeconds(30)).until(() -> cluster().admin().describeTopics(List.of(topic))
            .allTopicNames().get().get(topic).partitions().get(0).leader() != null);
        return topic;
    }

    @Test
    void aCommitWhoseMarkersWaitForAStoppedBrokerIsReportedCommittedToEveryCommitter() throws Exception {
        // measured with a plain KafkaProducer too: Kafka 4.3.1 and 4.4.0 brokers complete the commit at the
        // coordinator without the marker of a partition whose every replica is down, and that partition keeps an
        // open transaction (its last stable offset pinned) after the broker returns; 4.2.2 writes the marker then
        String version = cluster().brokerVersion();
        assumeTrue(version.startsWith("4.0") || version.startsWith("4.1") || version.startsWith("4.2"),
                "Kafka " + version + " brokers drop the commit marker of a partition whose replicas are all down "
                        + "(a hanging transaction; see docs/guarantees.md, Kafka versions)");
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-markers");
        try (TransactionSession session = session(txnId, Map.of())) {
            int coordinator = coordinatorOf(txnId);
            int dataBroker = cluster().brokerIds().stream().filter(id -> id != coordinator).findFirst().orElseThrow();
            String out = topicOn(dataBroker, "markers-out");
            SessionProducer<String, String> producer = new SessionProducer<>(session, new StringSerializer(),
                    new StringSerializer());
            session.beginTransaction();
            for (int i = 0; i < 3; i++) {
                producer.send(new ProducerRecord<>(out, "k" + i, "v" + i));
            }
            PreparedTransaction prepared = session.prepareTransaction();
            cluster().stopBroker(dataBroker);

            Map<String, Object> resumeConfigs = Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG,
                    cluster().bootstrapServers(), TransactionSessionConfig.COORDINATOR_TIMEOUT_MS, 2000);
            try (TransactionSession first = TransactionSession.resume(txnId, prepared, resumeConfigs)) {
                assertThat(first.completeTransaction(prepared)).isEqualTo(CompletionOutcome.COMMITTED);
            }
            // the coordinator decided (PrepareCommit at epoch+1) but cannot write the marker to the stopped leader
            assertThat(cluster().admin().describeTransactions(List.of(txnId)).description(txnId).get().state())
                .isEqualTo(TransactionState.PREPARE_COMMIT);
            try (TransactionSession second = TransactionSession.resume(txnId, prepared, resumeConfigs)) {
                assertThat(second.completeTransaction(prepared)).isEqualTo(CompletionOutcome.ALREADY_COMMITTED);
            }
            cluster().restartBroker(dataBroker);
            try (TransactionSession third = TransactionSession.resume(txnId, prepared, resumeConfigs)) {
                assertThat(third.completeTransaction(prepared)).isEqualTo(CompletionOutcome.ALREADY_COMMITTED);
            }
            // the coordinator writes the markers once the leader is back: until then the last stable offset is 0
            await().atMost(Duration.ofSeconds(30)).until(() -> values(readCommitted(cluster(), out)).size() >= 3);
            assertThat(values(readCommitted(cluster(), out))).containsExactly("v0", "v1", "v2");
            session.close(Duration.ZERO);
        }
    }

    /** Stops every broker from inside the commit, after the bound consumer's offsets went into the transaction. */
    private static void stopBrokersDuringCommit(TransactionSession session) {
        KafkaTransactionSession.of(session).addParticipant(new SessionParticipant() {
            private boolean done;

            @Override
            public void beforeCommit(TransactionSession s) {
                if (!this.done) {
                    this.done = true;
                    cluster().brokerIds().forEach(cluster()::stopBroker);
                }
            }
        });
    }

    private static ConsumerRecords<String, String> pollNonEmpty(TransactionalConsumer<String, String> consumer) {
        long deadline = System.currentTimeMillis() + 30_000;
        while (System.currentTimeMillis() < deadline) {
            ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
            if (!records.isEmpty()) {
                return records;
            }
        }
        throw new AssertionError("No records within 30 s");
    }

    private record Pipeline(String in, String out, String group, TransactionalConsumer<String, String> consumer,
            TransactionSession session) {
    }

    /** Input "a","b" consumed by a bound consumer, transformed into {@code out}, commit about to start. */
    private static Pipeline openTransactionWithConsumedInput(String name) {
        String in = EmbeddedKafkaCluster.uniqueName(name + "-in");
        String out = EmbeddedKafkaCluster.uniqueName(name + "-out");
        cluster().createTopics(1, in, out);
        produce(cluster(), List.of(new ProducerRecord<>(in, 0, "a", "a"), new ProducerRecord<>(in, 0, "b", "b")));
        String group = EmbeddedKafkaCluster.uniqueName(name + "-group");
        TransactionalConsumer<String, String> consumer = new TransactionalConsumer<>(
                new KafkaConsumer<>(consumerConfigs(cluster(), group)));
        consumer.subscribe(List.of(in));
        TransactionSession session = session(EmbeddedKafkaCluster.uniqueName("tx-" + name),
                Map.of(ProducerConfig.MAX_BLOCK_MS_CONFIG, 3000));
        consumer.bindTransactionSession(session);
        SessionProducer<String, String> producer = new SessionProducer<>(session, new StringSerializer(),
                new StringSerializer());
        ConsumerRecords<String, String> records = pollNonEmpty(consumer);
        session.beginTransaction();
        records.forEach(r -> producer.send(new ProducerRecord<>(out, r.key(), r.value())));
        producer.flush();
        return new Pipeline(in, out, group, consumer, session);
    }

    @Test
    void aCommitThatTimedOutWithABoundConsumerCanBeRetried() {
        Pipeline p = openTransactionWithConsumedInput("retry");
        try (TransactionSession session = p.session(); TransactionalConsumer<String, String> consumer = p.consumer()) {
            stopBrokersDuringCommit(session);
            assertThatThrownBy(session::commitTransaction).isInstanceOf(SessionTimeoutException.class);
            assertThat(session.state()).isEqualTo(SessionState.PREPARED);
            cluster().restartBrokers(cluster().brokerIds());
            await().atMost(Duration.ofSeconds(60)).ignoreExceptionsInstanceOf(SessionTimeoutException.class)
                .until(() -> {
                    session.commitTransaction(); // the offsets are not sent again
                    return true;
                });
            assertThat(session.state()).isEqualTo(SessionState.READY);
            assertThat(consumer.poll(Duration.ofMillis(500))).isEmpty(); // not rewound: it committed
        }
        assertThat(values(readCommitted(cluster(), p.out()))).containsExactly("a", "b");
        await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> assertThat(committedOffsets(cluster(), p.group()))
            .containsEntry(new TopicPartition(p.in(), 0), 2L)); // the offsets' marker is written asynchronously
    }

    @Test
    void anAbortAfterACommitTimedOutReportsTheCommitThatWentThrough() {
        Pipeline p = openTransactionWithConsumedInput("abort-after");
        try (TransactionSession session = p.session(); TransactionalConsumer<String, String> consumer = p.consumer()) {
            stopBrokersDuringCommit(session);
            assertThatThrownBy(session::commitTransaction).isInstanceOf(SessionTimeoutException.class);
            cluster().restartBrokers(cluster().brokerIds());
            // kafka-clients sends the commit it kept once the brokers are back: the abort finds it committed
            List<Throwable> answers = new ArrayList<>();
            await().atMost(Duration.ofSeconds(60)).until(() -> {
                try {
                    session.abortTransaction();
                    answers.add(null);
                }
                catch (SessionTimeoutException ex) {
                    return false;
                }
                catch (TransactionSessionException ex) {
                    answers.add(ex);
                }
                return true;
            });
            assertThat(answers.get(0)).isInstanceOf(TransactionSessionException.class)
                .hasMessageContaining("COMMITTED");
            assertThat(session.state()).isEqualTo(SessionState.READY);
            assertThat(consumer.poll(Duration.ofMillis(500))).isEmpty(); // kept its progress: nothing twice
        }
        assertThat(values(readCommitted(cluster(), p.out()))).containsExactly("a", "b");
        await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> assertThat(committedOffsets(cluster(), p.group()))
            .containsEntry(new TopicPartition(p.in(), 0), 2L)); // the offsets' marker is written asynchronously
    }
}
