package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.serialization.IntegerSerializer;
import org.apache.kafka.common.serialization.LongSerializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static io.github.txnsession.kafka.TestClients.readCommitted;
import static io.github.txnsession.kafka.TestClients.sessionConfigs;
import static io.github.txnsession.kafka.TestClients.values;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;
import static org.assertj.core.api.Assertions.assertThatIllegalStateException;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The live session against a real broker: shared transactions, epochs, offsets, fencing, threads, misuse. */
class TransactionSessionTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    private static String[] topics(String prefix, int count) {
        String[] names = new String[count];
        for (int i = 0; i < count; i++) {
            names[i] = EmbeddedKafkaCluster.uniqueName(prefix + i);
        }
        kafka.cluster().createTopics(2, names);
        return names;
    }

    private static TransactionSession session(String transactionalId) {
        TransactionSession session = TransactionSession.open(sessionConfigs(kafka.cluster(), transactionalId));
        session.initialize();
        return session;
    }

    /** Sends 2 records per topic through a String producer and a Long-valued producer of the same session. */
    private static void sendThroughTwoProducers(TransactionSession session, String[] topics, String tag) {
        SessionProducer<String, String> strings = new SessionProducer<>(session, new StringSerializer(),
                new StringSerializer());
        SessionProducer<Integer, Long> numbers = new SessionProducer<>(session, new IntegerSerializer(),
                new LongSerializer());
        for (String topic : topics) {
            strings.send(new ProducerRecord<>(topic, "k", tag + "-" + topic));
            numbers.send(new ProducerRecord<>(topic, 7, 42L));
        }
    }

    /**
     * The wait behind a transaction's first write: right after a commit it returns once the coordinator has left
     * PrepareCommit, so a write after it never meets the unfinished end (and the brokers' 20 ms back-off).
     */
    @Test
    void theEndWatchReturnsOnceTheCoordinatorHasWrittenTheMarkers() throws Exception {
        String topic = topics("end-watch", 1)[0];
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-end-watch");
        int sawEnd = 0;
        try (TransactionSession session = session(txnId);
                CoordinatorView view = new CoordinatorView(txnId,
                        new io.github.txnsession.kafka.internals.CoordinatorClient(kafka.cluster().clientConfigs()),
                        Duration.ofSeconds(10))) {
            SessionProducer<String, String> producer = new SessionProducer<>(session, new StringSerializer(),
                    new StringSerializer());
            for (int i = 0; i < 20; i++) {
                session.beginTransaction();
                producer.send(new ProducerRecord<>(topic, "k", "v" + i));
                session.commitTransaction();
                TransactionEndWatch watch = new TransactionEndWatch();
                if (watch.awaitEnd(view)) {
                    sawEnd++;
                    TransactionDescription d = kafka.cluster().admin().describeTransactions(List.of(txnId))
                        .description(txnId).get(10, TimeUnit.SECONDS);
                    assertThat(d.state()).as("after transaction %d", i)
                        .isEqualTo(org.apache.kafka.clients.admin.TransactionState.COMPLETE_COMMIT);
                }
                assertThat(watch.isPending()).as("one wait per end").isFalse();
            }
        }
        assertThat(sawEnd).as("waits that saw the end within their limit").isPositive();
        assertThat(values(readCommitted(kafka.cluster(), topic))).hasSize(20);
    }

    @Test
    void twoProducersWithDifferentSerializersShareOneCommittedTransaction() {
        String[] topics = topics("shared-commit", 3);
        try (TransactionSession session = session(EmbeddedKafkaCluster.uniqueName("tx-commit"))) {
            session.beginTransaction();
            sendThroughTwoProducers(session, topics, "committed");
            session.commitTransaction();
            assertThat(session.state()).isEqualTo(SessionState.READY);
        }
        List<ConsumerRecord<String, String>> records = readCommitted(kafka.cluster(), topics);
        assertThat(records).hasSize(6);
        for (String topic : topics) {
            assertThat(records).filteredOn(r -> r.topic().equals(topic)).hasSize(2);
            assertThat(values(records)).contains("committed-" + topic);
        }
        // the Long-serialized value 42 is 8 bytes, read back as a String of 8 chars
        assertThat(records).filteredOn(r -> r.value().length() == 8).hasSize(3);
    }

    @Test
    void abortedTransactionOfTwoProducersIsInvisible() {
        String[] topics = topics("shared-abort", 3);
        try (TransactionSession session = session(EmbeddedKafkaCluster.uniqueName("tx-abort"))) {
            session.beginTransaction();
            sendThroughTwoProducers(session, topics, "aborted");
            KafkaTransactionSession.of(session).flush();
            session.abortTransaction();
            session.beginTransaction();
            new SessionProducer<>(session, new StringSerializer(), new StringSerializer())
                .send(new ProducerRecord<>(topics[0], "k", "after-abort"));
            session.commitTransaction();
        }
        assertThat(values(readCommitted(kafka.cluster(), topics))).containsExactly("after-abort");
    }

    @Test
    void producerEpochFollowsTheBrokerAcrossCommitsAndAborts() throws Exception {
        assumeTrue(kafka.cluster().transactionVersion() >= 2, "the epoch bumps per transaction from version 2 on");
        String[] topics = topics("epochs", 1);
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-epochs");
        try (TransactionSession session = session(txnId)) {
            SessionProducer<String, String> producer = new SessionProducer<>(session, new StringSerializer(),
                    new StringSerializer());
            List<Short> epochs = new ArrayList<>();
            for (int i = 0; i < 5; i++) {
                session.beginTransaction();
                producer.send(new ProducerRecord<>(topics[0], "k", "v" + i));
                if (i % 2 == 0) {
                    session.commitTransaction();
                }
                else {
                    session.abortTransaction();
                }
                TransactionDescription broker = kafka.cluster().admin().describeTransactions(List.of(txnId))
                    .description(txnId).get(10, TimeUnit.SECONDS);
                assertThat((int) session.producerEpoch()).as("after transaction %d", i).isEqualTo(broker.producerEpoch());
                assertThat(session.producerId()).isEqualTo(broker.producerId());
                epochs.add(session.producerEpoch());
            }
            for (int i = 1; i < epochs.size(); i++) {
                assertThat(epochs.get(i)).as("epochs %s", epochs).isGreaterThan(epochs.get(i - 1));
            }
        }
        assertThat(values(readCommitted(kafka.cluster(), topics))).containsExactly("v0", "v2", "v4");
    }

    @Test
    void offsetsCommitOnlyWithTheTransaction() throws Exception {
        String[] topics = topics("offsets", 1);
        String group = EmbeddedKafkaCluster.uniqueName("group");
        TopicPartition tp = new TopicPartition(topics[0], 0);
        ConsumerGroupMetadata metadata = new ConsumerGroupMetadata(group);
        try (TransactionSession session = session(EmbeddedKafkaCluster.uniqueName("tx-offsets"))) {
            session.beginTransaction();
            session.sendOffsetsToTransaction(Map.of(tp, new OffsetAndMetadata(10)), metadata);
            session.abortTransaction();
            assertThat(groupOffsets(group)).doesNotContainKey(tp);

            session.beginTransaction();
            session.sendOffsetsToTransaction(Map.of(tp, new OffsetAndMetadata(20)), metadata);
            assertThat(groupOffsets(group)).doesNotContainKey(tp);
            session.commitTransaction();
        }
        // the commit returns once the coordinator decided; the offsets become stable when its markers are written
        await().atMost(Duration.ofSeconds(30)).until(() -> groupOffsets(group).containsKey(tp));
        assertThat(groupOffsets(group).get(tp).offset()).isEqualTo(20);
    }

    private static Map<TopicPartition, OffsetAndMetadata> groupOffsets(String group) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        kafka.cluster().admin().listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
            .get(10, TimeUnit.SECONDS).forEach((k, v) -> {
                if (v != null) {
                    offsets.put(k, v);
                }
            });
        return offsets;
    }

    @Test
    void aSecondSessionWithTheSameIdFencesTheFirst() {
        String[] topics = topics("fencing", 1);
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-fenced");
        TransactionSession first = session(txnId);
        SessionProducer<String, String> p1 = new SessionProducer<>(first, new StringSerializer(),
                new StringSerializer());
        first.beginTransaction();
        p1.send(new ProducerRecord<>(topics[0], "k", "from-first"));
        p1.flush();
        try (TransactionSession second = session(txnId)) {
            assertThatThrownBy(first::commitTransaction).isInstanceOf(SessionFencedException.class)
                .hasMessageContaining(txnId)
                .hasMessageContaining("fenced");
            assertThat(first.state()).isEqualTo(SessionState.FATAL_ERROR);
            assertThatIllegalStateException().isThrownBy(first::beginTransaction)
                .withMessageContaining("FATAL_ERROR");
            first.close();

            second.beginTransaction();
            new SessionProducer<>(second, new StringSerializer(), new StringSerializer())
                .send(new ProducerRecord<>(topics[0], "k", "from-second"));
            second.commitTransaction();
        }
        assertThat(values(readCommitted(kafka.cluster(), topics))).containsExactly("from-second");
    }

    @Test
    void eightThreadsSendIntoOneTransaction() throws Exception {
        String[] topics = topics("threads", 1);
        kafka.cluster().createTopic(topics[0], 2);
        try (TransactionSession session = session(EmbeddedKafkaCluster.uniqueName("tx-threads"))) {
            SessionProducer<String, String> producer = new SessionProducer<>(session, new StringSerializer(),
                    new StringSerializer());
            session.beginTransaction();
            sendFromThreads(producer, topics[0], "c");
            session.commitTransaction();

            session.beginTransaction();
            sendFromThreads(producer, topics[0], "a");
            session.abortTransaction();
        }
        List<String> values = values(readCommitted(kafka.cluster(), topics));
        assertThat(values).hasSize(8_000);
        assertThat(new HashSet<>(values)).hasSize(8_000);
        assertThat(values).allMatch(v -> v.startsWith("c-"));
    }

    private static void sendFromThreads(SessionProducer<String, String> producer, String topic, String tag)
            throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(8);
        CountDownLatch start = new CountDownLatch(1);
        try {
            List<Future<?>> futures = new ArrayList<>();
            for (int t = 0; t < 8; t++) {
                int thread = t;
                futures.add(pool.submit(() -> {
                    start.await();
                    for (int i = 0; i < 1_000; i++) {
                        producer.send(new ProducerRecord<>(topic, "t" + thread, tag + "-" + thread + "-" + i));
                    }
                    return null;
                }));
            }
            start.countDown();
            for (Future<?> f : futures) {
                f.get(60, TimeUnit.SECONDS);
            }
        }
        finally {
            pool.shutdownNow();
        }
    }

    @Test
    void illegalTransitionsNameTheState() {
        String[] topics = topics("illegal", 1);
        TransactionSession session = TransactionSession.open(sessionConfigs(kafka.cluster(),
                EmbeddedKafkaCluster.uniqueName("tx-illegal")));
        SessionProducer<String, String> producer = new SessionProducer<>(session, new StringSerializer(),
                new StringSerializer());
        ProducerRecord<String, String> record = new ProducerRecord<>(topics[0], "k", "v");
        assertThatIllegalStateException().isThrownBy(session::beginTransaction)
            .withMessageContaining("UNINITIALIZED").withMessageContaining("initialize()");
        session.initialize();
        assertThatIllegalStateException().isThrownBy(session::initialize).withMessageContaining("READY");
        assertThatIllegalStateException().isThrownBy(session::commitTransaction)
            .withMessageContaining("READY").withMessageContaining("beginTransaction() first");
        assertThatIllegalStateException().isThrownBy(session::abortTransaction).withMessageContaining("READY");
        assertThatIllegalStateException().isThrownBy(() -> producer.send(record))
            .withMessageContaining("READY").withMessageContaining("send()");
        assertThatIllegalStateException().isThrownBy(session::prepareTransaction).withMessageContaining("READY");
        session.beginTransaction();
        assertThatIllegalStateException().isThrownBy(session::beginTransaction)
            .withMessageContaining("IN_TRANSACTION");
        assertThatIllegalStateException()
            .isThrownBy(() -> session.completeTransaction(PreparedTransaction.of(1, (short) 0, -1)))
            .withMessageContaining("IN_TRANSACTION");
        session.prepareTransaction();
        assertThatIllegalStateException().isThrownBy(() -> producer.send(record)).withMessageContaining("PREPARED");
        session.abortTransaction();
        session.close();
        assertThatIllegalStateException().isThrownBy(() -> producer.send(record)).withMessageContaining("CLOSED");
        assertThatIllegalStateException().isThrownBy(session::beginTransaction).withMessageContaining("CLOSED");
        assertThatIllegalStateException().isThrownBy(session::producerEpoch).withMessageContaining("CLOSED");
        session.close(); // idempotent
        assertThat(session.state()).isEqualTo(SessionState.CLOSED);
    }

    @Test
    void closedProducerViewFailsClearlyButSessionGoesOn() {
        String[] topics = topics("view-close", 1);
        try (TransactionSession session = session(EmbeddedKafkaCluster.uniqueName("tx-view"))) {
            SessionProducer<String, String> producer = new SessionProducer<>(session, new StringSerializer(),
                    new StringSerializer());
            producer.close();
            session.beginTransaction();
            assertThatIllegalStateException().isThrownBy(() -> producer.send(new ProducerRecord<>(topics[0], "v")))
                .withMessageContaining("SessionProducer").withMessageContaining("closed");
            new SessionProducer<>(session, new StringSerializer(), new StringSerializer())
                .send(new ProducerRecord<>(topics[0], "still-works"));
            session.commitTransaction();
        }
        assertThat(values(readCommitted(kafka.cluster(), topics))).containsExactly("still-works");
    }

    @Test
    void closeDuringAnOpenTransactionAbortsItAndStopsTheProducerThread() {
        String[] topics = topics("close-open", 1);
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-close");
        TransactionSession session = session(txnId);
        SessionProducer<String, String> producer = new SessionProducer<>(session, new StringSerializer(),
                new StringSerializer());
        session.beginTransaction();
        producer.send(new ProducerRecord<>(topics[0], "k", "never-visible"));
        producer.flush();
        assertThat(sessionThreads(txnId)).isNotEmpty();
        session.close();
        assertThat(session.state()).isEqualTo(SessionState.CLOSED);
        assertThat(sessionThreads(txnId)).isEmpty();
        assertThatIllegalStateException().isThrownBy(session::commitTransaction).withMessageContaining("CLOSED");
        // the abort is complete: a new session sees the partition's last stable offset move past the records
        try (TransactionSession next = session(txnId)) {
            next.beginTransaction();
            new SessionProducer<>(next, new StringSerializer(), new StringSerializer())
                .send(new ProducerRecord<>(topics[0], "k", "visible"));
            next.commitTransaction();
        }
        assertThat(values(readCommitted(kafka.cluster(), topics))).containsExactly("visible");
    }

    private static Set<String> sessionThreads(String transactionalId) {
        Set<String> names = new HashSet<>();
        Thread.getAllStackTraces().keySet().forEach(t -> {
            if (t.isAlive() && t.getName().contains("txn-session-" + transactionalId)) {
                names.add(t.getName());
            }
        });
        return names;
    }

    @Test
    void aFailedSendMakesTheTransactionAbortableAndTheSessionGoesOn() {
        String[] topics = topics("abortable", 1);
        Map<String, Object> configs = sessionConfigs(kafka.cluster(), EmbeddedKafkaCluster.uniqueName("tx-abortable"));
        configs.put(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, 1024);
        try (TransactionSession session = TransactionSession.open(configs)) {
            session.initialize();
            SessionProducer<String, String> producer = new SessionProducer<>(session, new StringSerializer(),
                    new StringSerializer());
            session.beginTransaction();
            producer.send(new ProducerRecord<>(topics[0], "k", "fits"));
            producer.send(new ProducerRecord<>(topics[0], "k", "x".repeat(4096))); // larger than max.request.size
            assertThatThrownBy(session::commitTransaction).isInstanceOf(SessionAbortableException.class)
                .hasMessageContaining("commitTransaction()")
                .hasMessageContaining("must be aborted");
            assertThat(session.state()).isEqualTo(SessionState.ABORTABLE_ERROR);
            assertThatIllegalStateException().isThrownBy(session::beginTransaction)
                .withMessageContaining("ABORTABLE_ERROR");
            // a caller that swallows the failure and carries on learns it from every call that would go on
            assertThatThrownBy(() -> producer.send(new ProducerRecord<>(topics[0], "k", "ignored")))
                .isInstanceOf(SessionAbortableException.class).hasRootCauseInstanceOf(RecordTooLargeException.class);
            assertThatThrownBy(session::prepareTransaction).isInstanceOf(SessionAbortableException.class)
                .hasRootCauseInstanceOf(RecordTooLargeException.class);
            assertThatThrownBy(session::commitTransaction).isInstanceOf(SessionAbortableException.class)
                .hasMessageContaining("ABORTABLE_ERROR").hasRootCauseInstanceOf(RecordTooLargeException.class);
            assertThatThrownBy(session::heartbeat).isInstanceOf(SessionAbortableException.class);
            assertThat(session.state()).isEqualTo(SessionState.ABORTABLE_ERROR);
            session.abortTransaction();
            session.beginTransaction();
            producer.send(new ProducerRecord<>(topics[0], "k", "after"));
            session.commitTransaction();
        }
        assertThat(values(readCommitted(kafka.cluster(), topics))).containsExactly("after");
    }

    @Test
    void anUnreachableClusterTimesOutNamingTheCall() {
        Map<String, Object> configs = Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, "localhost:1",
                ProducerConfig.TRANSACTIONAL_ID_CONFIG, "tx-unreachable", ProducerConfig.MAX_BLOCK_MS_CONFIG, 500);
        try (TransactionSession session = TransactionSession.open(configs)) {
            assertThatThrownBy(session::initialize).isInstanceOf(SessionTimeoutException.class)
                .hasMessageContaining("initialize() timed out")
                .hasMessageContaining("bootstrap.servers")
                .satisfies(ex -> assertThat(((SessionTimeoutException) ex).call()).isEqualTo("initialize()"));
            assertThat(session.state()).as("the call may be retried").isEqualTo(SessionState.UNINITIALIZED);
        }
    }

    @Test
    void badConfigsNameTheKey() {
        String bootstrap = kafka.bootstrapServers();
        assertConfigError(Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap), "transactional.id");
        assertConfigError(Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "tx"), "bootstrap.servers");
        assertConfigError(Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                ProducerConfig.TRANSACTIONAL_ID_CONFIG, "  "), "transactional.id");
        assertConfigError(Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                ProducerConfig.TRANSACTIONAL_ID_CONFIG, "tx", ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false"),
                "enable.idempotence");
        assertConfigError(Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                ProducerConfig.TRANSACTIONAL_ID_CONFIG, "tx", ProducerConfig.ACKS_CONFIG, "1"), "acks");
        assertConfigError(Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                ProducerConfig.TRANSACTIONAL_ID_CONFIG, "tx", "session.heartbeat.interval.ms", "soon"),
                "session.heartbeat.interval.ms");
        assertConfigError(Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                ProducerConfig.TRANSACTIONAL_ID_CONFIG, "tx", "session.unknown", "1"), "session.unknown");
        assertConfigError(Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                ProducerConfig.TRANSACTIONAL_ID_CONFIG, "tx", TransactionSessionConfig.AWAIT_TRANSACTION_END, "maybe"),
                TransactionSessionConfig.AWAIT_TRANSACTION_END);
    }

    /**
     * session.await-transaction-end: as configured, and for auto decided at initialize() from the brokers' back-off
     * (this test broker keeps Kafka's 20 ms, so auto waits).
     */
    @Test
    void awaitingThePreviousEndIsDecidedAtInitialize() {
        for (Object value : new Object[] { null, "auto", " AUTO ", true, "false" }) {
            Map<String, Object> configs = sessionConfigs(kafka.cluster(), EmbeddedKafkaCluster.uniqueName("tx-await"));
            if (value != null) {
                configs.put(TransactionSessionConfig.AWAIT_TRANSACTION_END, value);
            }
            try (KafkaTransactionSession session = (KafkaTransactionSession) TransactionSession.open(configs)) {
                session.initialize();
                assertThat(session.awaitsPreviousEnds()).as("%s", value).isEqualTo(!"false".equals(value));
            }
        }
    }

    private static void assertConfigError(Map<String, Object> configs, String key) {
        assertThatThrownBy(() -> TransactionSession.open(configs)).isInstanceOf(InvalidSessionConfigException.class)
            .hasMessageContaining(key)
            .satisfies(ex -> assertThat(((InvalidSessionConfigException) ex).key()).isEqualTo(key));
    }

    @Test
    void producerConfigsPassThrough() {
        Map<String, Object> configs = sessionConfigs(kafka.cluster(), EmbeddedKafkaCluster.uniqueName("tx-cfg"));
        configs.put(ConsumerConfig.CLIENT_ID_CONFIG, "custom-client");
        configs.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4");
        TransactionSessionConfig config = TransactionSessionConfig.of(configs);
        assertThat(config.producerConfigs()).containsEntry(ProducerConfig.CLIENT_ID_CONFIG, "custom-client")
            .containsEntry(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4")
            .containsEntry(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        assertThat(config.coordinatorTimeout()).isEqualTo(Duration.ofSeconds(60));
    }
}
