package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static io.github.txnsession.kafka.TestClients.committedOffsets;
import static io.github.txnsession.kafka.TestClients.consumerConfigs;
import static io.github.txnsession.kafka.TestClients.produce;
import static io.github.txnsession.kafka.TestClients.readCommitted;
import static io.github.txnsession.kafka.TestClients.sessionConfigs;
import static io.github.txnsession.kafka.TestClients.setGroupConfigs;
import static io.github.txnsession.kafka.TestClients.shareConsumerConfigs;
import static io.github.txnsession.kafka.TestClients.values;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalStateException;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The core guarantees off the happy path, one test per way they were seen to break (transaction version 2, the
 * default): empty transactions, stale and racing completions, fencing and timeouts with bound consumers, heartbeats of
 * healthy transactions, callbacks that re-enter, close racing a commit, a poll racing a commit.
 */
class FailurePathsTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(b -> b
        .brokerProperty("transaction.abort.timed.out.transaction.cleanup.interval.ms", 300)
        .brokerProperty("group.share.min.record.lock.duration.ms", "1000"));

    private static final ExecutorService executor = Executors.newCachedThreadPool();

    @AfterAll
    static void stopExecutor() {
        executor.shutdownNow();
    }

    private static EmbeddedKafkaCluster cluster() {
        return kafka.cluster();
    }

    private static String topic(String prefix, int partitions) {
        String topic = EmbeddedKafkaCluster.uniqueName(prefix);
        cluster().createTopic(topic, partitions);
        return topic;
    }

    private static TransactionSession session(String txnId, Map<String, Object> extra) {
        Map<String, Object> configs = sessionConfigs(cluster(), txnId);
        configs.putAll(extra);
        TransactionSession session = TransactionSession.open(configs);
        session.initialize();
        return session;
    }

    private static TransactionSession session(String txnId) {
        return session(txnId, Map.of());
    }

    private static SessionProducer<String, String> producer(TransactionSession session) {
        return new SessionProducer<>(session, new StringSerializer(), new StringSerializer());
    }

    private static Map<String, Object> clientConfigs() {
        return Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster().bootstrapServers());
    }

    private static TransactionState coordinatorState(String txnId) throws Exception {
        return cluster().admin().describeTransactions(List.of(txnId)).description(txnId).get().state();
    }

    private static TransactionalConsumer<String, String> consumer(String group) {
        return new TransactionalConsumer<>(new KafkaConsumer<>(consumerConfigs(cluster(), group)));
    }

    private static <K, V> ConsumerRecords<K, V> pollNonEmpty(org.apache.kafka.clients.consumer.Consumer<K, V> c) {
        return pollNonEmpty(() -> c.poll(Duration.ofMillis(200)));
    }

    private static <K, V> ConsumerRecords<K, V> pollNonEmpty(TransactionalShareConsumer<K, V> c) {
        return pollNonEmpty(() -> c.poll(Duration.ofMillis(200)));
    }

    private static <K, V> ConsumerRecords<K, V> pollNonEmpty(
            java.util.function.Supplier<ConsumerRecords<K, V>> poll) {
        long deadline = System.currentTimeMillis() + 30_000;
        while (System.currentTimeMillis() < deadline) {
            ConsumerRecords<K, V> records = poll.get();
            if (!records.isEmpty()) {
                return records;
            }
        }
        throw new AssertionError("No records within 30 s");
    }

    private static List<String> input(String topic, String... values) {
        List<ProducerRecord<String, String>> records = new ArrayList<>();
        for (String v : values) {
            records.add(new ProducerRecord<>(topic, 0, v, v));
        }
        produce(cluster(), records);
        return List.of(values);
    }

    // ------------------------------------------------------------------ 2. empty transactions

    @Test
    void anEmptyTransactionPreparesToAStateThatCompletesAsANoOpAndNeverTouchesTheNextTransaction() throws Exception {
        String out = topic("empty-out", 1);
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-empty");
        try (TransactionSession session = session(txnId)) {
            SessionProducer<String, String> producer = producer(session);
            session.beginTransaction();
            PreparedTransaction empty = session.prepareTransaction();
            assertThat(empty.isEmpty()).isTrue();
            assertThat(PreparedTransaction.parse(empty.toString())).isEqualTo(empty);
            assertThat(session.completeTransaction(empty)).isEqualTo(CompletionOutcome.EMPTY);

            // the next transaction reuses the producer's pid:epoch; the stale empty state must not reach it
            session.beginTransaction();
            producer.send(new ProducerRecord<>(out, "k", "next"));
            producer.flush();
            await().atMost(Duration.ofSeconds(10)).until(() -> coordinatorState(txnId) == TransactionState.ONGOING);
            try (TransactionSession resumed = TransactionSession.resume(txnId, empty, clientConfigs())) {
                assertThat(resumed.completeTransaction(empty)).isEqualTo(CompletionOutcome.EMPTY);
                assertThat(resumed.state()).isEqualTo(SessionState.READY);
            }
            assertThat(coordinatorState(txnId)).isEqualTo(TransactionState.ONGOING);
            assertThat(session.state()).isEqualTo(SessionState.IN_TRANSACTION);
            assertThat(readCommitted(cluster(), out)).isEmpty();
            session.commitTransaction();
        }
        // visible once the coordinator's markers are written (the commit returns when it has decided)
        await().atMost(Duration.ofSeconds(30)).until(() -> !readCommitted(cluster(), out).isEmpty());
        assertThat(values(readCommitted(cluster(), out))).containsExactly("next");
    }

    // ------------------------------------------------------------------ prepareTransactionByEpoch: the look in the flush

    @Test
    void preparingByEpochConfirmsEachTransactionUnderItsOwnEpochAndOnlyCompletedOnesBecomeVisible() {
        assumeTrue(cluster().transactionVersion() >= 2, "with version 1 it is prepareTransaction()");
        String out = topic("by-epoch-out", 2);
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-by-epoch");
        List<String> committed = new ArrayList<>();
        int withoutStartTime = 0;
        // a long linger keeps the records in the producer until the prepare's flush: the look goes out first
        try (TransactionSession session = session(txnId, Map.of(ProducerConfig.LINGER_MS_CONFIG, 60_000))) {
            SessionProducer<String, String> producer = producer(session);
            for (int i = 0; i < 20; i++) {
                session.beginTransaction();
                producer.send(new ProducerRecord<>(out, i % 2, "k", "a" + i));
                producer.send(new ProducerRecord<>(out, (i + 1) % 2, "k", "b" + i));
                PreparedTransaction expected = session.expectedPreparedTransaction().orElseThrow();
                PreparedTransaction prepared = session.prepareTransactionByEpoch();
                assertThat(prepared.producerId()).isEqualTo(expected.producerId());
                assertThat(prepared.epoch()).as("transaction %d", i).isEqualTo(expected.epoch());
                withoutStartTime += prepared.hasStartTime() ? 0 : 1;
                if (i % 3 == 2) {
                    session.abortTransaction();
                }
                else {
                    assertThat(session.completeTransaction(prepared)).isEqualTo(CompletionOutcome.COMMITTED);
                    committed.add("a" + i);
                    committed.add("b" + i);
                }
            }
        }
        assertThat(withoutStartTime).as("prepares confirmed by a look sent before the records were registered")
            .isPositive();
        await().atMost(Duration.ofSeconds(30))
            .untilAsserted(() -> assertThat(values(readCommitted(cluster(), out)))
                .containsExactlyInAnyOrderElementsOf(committed));
    }

    @Test
    void preparingByEpochAfterAFlushLongerThanTheCapAsksTheCoordinatorAgain() {
        assumeTrue(cluster().transactionVersion() >= 2, "with version 1 it is prepareTransaction()");
        String out = topic("by-epoch-slow-out", 1);
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-by-epoch-slow");
        // the records wait in the producer for the flush (the look goes out before them), and the flush takes 30 ms:
        // the look's answer (the previous transaction's end, records on their way) would confirm without a start
        // time, but a flush that long makes the prepare ask again after it, which finds the transaction open
        try (TransactionSession session = session(txnId, Map.of(ProducerConfig.LINGER_MS_CONFIG, 60_000,
                ProducerConfig.INTERCEPTOR_CLASSES_CONFIG, SlowAcknowledgementInterceptor.class.getName()))) {
            SessionProducer<String, String> producer = producer(session);
            for (int i = 0; i < 5; i++) {
                session.beginTransaction();
                producer.send(new ProducerRecord<>(out, "k", "v" + i));
                PreparedTransaction prepared = session.prepareTransactionByEpoch();
                assertThat(prepared.hasStartTime()).as("transaction %d: %s", i, prepared).isTrue();
                assertThat(session.completeTransaction(prepared)).isEqualTo(CompletionOutcome.COMMITTED);
            }
        }
        await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> assertThat(values(readCommitted(cluster(), out)))
            .containsExactly("v0", "v1", "v2", "v3", "v4"));
    }

    @Test
    void preparingByEpochAfterAnotherProducerTookTheIdWhileTheRecordsWaitedFailsAndNothingCommits() {
        assumeTrue(cluster().transactionVersion() >= 2, "with version 1 it is prepareTransaction()");
        String out = topic("by-epoch-fenced-out", 1);
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-by-epoch-fenced");
        try (TransactionSession session = session(txnId, Map.of(ProducerConfig.LINGER_MS_CONFIG, 60_000))) {
            SessionProducer<String, String> producer = producer(session);
            session.beginTransaction();
            producer.send(new ProducerRecord<>(out, "k", "zombie"));
            try (TransactionSession successor = session(txnId)) {
                // initialized: the coordinator moved the id to a new epoch before the zombie's records left it
                assertThatThrownBy(session::prepareTransactionByEpoch).isInstanceOf(TransactionSessionException.class)
                    .hasMessageContaining("prepareTransactionByEpoch()");
                assertThat(session.state()).isIn(SessionState.FATAL_ERROR, SessionState.ABORTABLE_ERROR);
                SessionProducer<String, String> next = producer(successor);
                successor.beginTransaction();
                next.send(new ProducerRecord<>(out, "k", "successor"));
                successor.commitTransaction();
            }
        }
        await().atMost(Duration.ofSeconds(30))
            .untilAsserted(() -> assertThat(values(readCommitted(cluster(), out))).containsExactly("successor"));
    }

    @Test
    void preparingByEpochATransactionTheCoordinatorTimedOutFailsAndNothingCommits() {
        assumeTrue(cluster().transactionVersion() >= 2, "with version 1 it is prepareTransaction()");
        String out = topic("by-epoch-timeout-out", 1);
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-by-epoch-timeout");
        try (TransactionSession session = session(txnId, Map.of(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 1000,
                ProducerConfig.LINGER_MS_CONFIG, 60_000))) {
            SessionProducer<String, String> producer = producer(session);
            session.beginTransaction();
            producer.send(new ProducerRecord<>(out, "k", "late"));
            producer.flush();
            await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(100))
                .until(() -> coordinatorState(txnId) == TransactionState.COMPLETE_ABORT);
            producer.send(new ProducerRecord<>(out, "k", "later")); // still in the producer when the look goes out
            assertThatThrownBy(session::prepareTransactionByEpoch).isInstanceOf(TransactionSessionException.class)
                .hasMessageContaining("prepareTransactionByEpoch()");
            assertThat(session.state()).isIn(SessionState.ABORTABLE_ERROR, SessionState.FATAL_ERROR);
            // the session's own refusals name the call the application made too
            assertThatThrownBy(session::prepareTransactionByEpoch)
                .hasMessageContaining("prepareTransactionByEpoch() is not allowed in state");
        }
        assertThat(readCommitted(cluster(), out)).isEmpty();
    }

    @Test
    void preparingByEpochATransactionOfOffsetsOnlyFindsItOpenWithItsStartTime() {
        assumeTrue(cluster().transactionVersion() >= 2, "with version 1 it is prepareTransaction()");
        String in = topic("by-epoch-offsets-in", 1);
        String group = EmbeddedKafkaCluster.uniqueName("by-epoch-group");
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-by-epoch-offsets");
        try (TransactionSession session = session(txnId)) {
            session.beginTransaction();
            session.sendOffsetsToTransaction(Map.of(new TopicPartition(in, 0),
                    new org.apache.kafka.clients.consumer.OffsetAndMetadata(3)),
                    new org.apache.kafka.clients.consumer.ConsumerGroupMetadata(group));
            // the offsets were added before the look: the coordinator shows the transaction open, start time included
            PreparedTransaction prepared = session.prepareTransactionByEpoch();
            assertThat(prepared.hasStartTime()).isTrue();
            assertThat(session.completeTransaction(prepared)).isEqualTo(CompletionOutcome.COMMITTED);
        }
        await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> assertThat(committedOffsets(cluster(), group))
            .containsEntry(new TopicPartition(in, 0), 3L));
    }

    // ------------------------------------------------------------------ 1 and 9: stale and racing completions

    @Test
    void aStaleStateNeverCommitsTheOpenTransactionOfTheSameId() throws Exception {
        String out = topic("stale-out", 1);
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-stale");
        try (TransactionSession session = session(txnId)) {
            SessionProducer<String, String> producer = producer(session);
            session.beginTransaction();
            producer.send(new ProducerRecord<>(out, "k", "first"));
            PreparedTransaction first = session.prepareTransaction();
            assertThat(first.hasStartTime()).isTrue();
            session.commitTransaction();
            // the first one is the coordinator's latest and committed: a retried completion reports it
            try (TransactionSession resumed = TransactionSession.resume(txnId, first, clientConfigs())) {
                assertThat(resumed.completeTransaction(first)).isEqualTo(CompletionOutcome.ALREADY_COMMITTED);
            }
            session.beginTransaction();
            producer.send(new ProducerRecord<>(out, "k", "second"));
            producer.flush();
            await().atMost(Duration.ofSeconds(10)).until(() -> coordinatorState(txnId) == TransactionState.ONGOING);
            // now a later transaction is open: completing the stale first one must not commit it
            try (TransactionSession resumed = TransactionSession.resume(txnId, first, clientConfigs())) {
                assertThatThrownBy(() -> resumed.completeTransaction(first))
                    .isInstanceOf(TransactionSupersededException.class).hasMessageContaining("UNKNOWN");
            }
            assertThat(coordinatorState(txnId)).isEqualTo(TransactionState.ONGOING);
            assertThat(values(readCommitted(cluster(), out))).containsExactly("first");
            session.abortTransaction();
        }
        assertThat(values(readCommitted(cluster(), out))).containsExactly("first");
    }

    @Test
    void aCommittedTransactionFollowedByAnAbortedOneIsUnknownNeverLost() {
        String out = topic("stale-abort-out", 1);
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-stale-abort");
        PreparedTransaction first;
        try (TransactionSession session = session(txnId)) {
            SessionProducer<String, String> producer = producer(session);
            session.beginTransaction();
            producer.send(new ProducerRecord<>(out, "k", "committed"));
            first = session.prepareTransaction();
            session.commitTransaction();
            session.beginTransaction();
            producer.send(new ProducerRecord<>(out, "k", "aborted"));
            producer.flush();
            session.abortTransaction(); // the coordinator is now at epoch+2, CompleteAbort
        }
        try (TransactionSession resumed = TransactionSession.resume(txnId, first, clientConfigs())) {
            // its records are visible: reporting LOST would make recovery compensate a committed transaction
            assertThatThrownBy(() -> resumed.completeTransaction(first))
                .isInstanceOf(TransactionSupersededException.class)
                .isNotInstanceOf(TransactionLostException.class);
        }
        assertThat(values(readCommitted(cluster(), out))).containsExactly("committed");
    }

    @Test
    void committersRacingOnOnePreparedTransactionAllReportItCommittedAndItCommitsOnce() throws Exception {
        String out = topic("race-out", 2);
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-race");
        try (TransactionSession session = session(txnId)) {
            SessionProducer<String, String> producer = producer(session);
            session.beginTransaction();
            for (int i = 0; i < 10; i++) {
                producer.send(new ProducerRecord<>(out, "k" + i, "v" + i));
            }
            PreparedTransaction prepared = session.prepareTransaction();
            CountDownLatch go = new CountDownLatch(1);
            List<Future<CompletionOutcome>> committers = new ArrayList<>();
            for (int c = 0; c < 4; c++) {
                committers.add(executor.submit(() -> {
                    try (TransactionSession resumed = TransactionSession.resume(txnId, prepared, clientConfigs())) {
                        go.await();
                        return resumed.completeTransaction(prepared);
                    }
                }));
            }
            go.countDown();
            List<CompletionOutcome> outcomes = new ArrayList<>();
            for (Future<CompletionOutcome> f : committers) {
                outcomes.add(f.get(60, TimeUnit.SECONDS));
            }
            assertThat(outcomes).allMatch(o -> o == CompletionOutcome.COMMITTED
                    || o == CompletionOutcome.ALREADY_COMMITTED).contains(CompletionOutcome.COMMITTED);
            // the live session that prepared it finishes too: the coordinator answers its commit as a retry
            assertThat(session.completeTransaction(prepared)).isEqualTo(CompletionOutcome.COMMITTED);
            session.beginTransaction();
            producer.send(new ProducerRecord<>(out, "k", "after"));
            session.commitTransaction();
        }
        assertThat(values(readCommitted(cluster(), out))).hasSize(11).doesNotHaveDuplicates();
    }

    // ------------------------------------------------------------------ 3. rewind whenever it did not commit

    @Test
    void aFencedCommitRewindsTheBoundConsumer() {
        String in = topic("fence-in", 1);
        String out = topic("fence-out", 1);
        String group = EmbeddedKafkaCluster.uniqueName("fence-group");
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-fence");
        List<String> inputs = input(in, "a", "b", "c");
        try (TransactionalConsumer<String, String> consumer = consumer(group)) {
            consumer.subscribe(List.of(in));
            TransactionSession zombie = session(txnId);
            consumer.bindTransactionSession(zombie);
            SessionProducer<String, String> producer = producer(zombie);
            ConsumerRecords<String, String> records = pollNonEmpty(consumer);
            assertThat(records.count()).isEqualTo(3);
            zombie.beginTransaction();
            records.forEach(r -> producer.send(new ProducerRecord<>(out, r.key(), r.value())));
            producer.flush();
            try (TransactionSession successor = session(txnId)) { // fences the zombie, aborts its transaction
                assertThatThrownBy(zombie::commitTransaction).isInstanceOf(TransactionSessionException.class);
                if (zombie.state() == SessionState.ABORTABLE_ERROR) {
                    assertThatThrownBy(zombie::abortTransaction).isInstanceOf(TransactionSessionException.class);
                }
                assertThat(zombie.state()).isEqualTo(SessionState.FATAL_ERROR);
                zombie.close();
                // the records of the transaction that did not commit come back, for the next session
                consumer.unbindTransactionSession();
                consumer.bindTransactionSession(successor);
                List<String> again = values(new ArrayList<ConsumerRecord<String, String>>(
                        toList(pollNonEmpty(consumer))));
                assertThat(again).containsExactlyElementsOf(inputs);
                successor.beginTransaction();
                again.forEach(v -> producer(successor).send(new ProducerRecord<>(out, v, v)));
                successor.commitTransaction();
            }
        }
        assertThat(values(readCommitted(cluster(), out))).containsExactlyElementsOf(inputs);
        await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> assertThat(committedOffsets(cluster(), group))
            .containsEntry(new TopicPartition(in, 0), 3L));
    }

    @Test
    void aFencedSessionReleasesTheShareConsumersRecordsInsteadOfWedgingIt() {
        assumeTrue(cluster().supportsShareGroups(), "the brokers do not run share groups (Kafka 4.1+)");
        String in = topic("share-fence-in", 1);
        String out = topic("share-fence-out", 1);
        String group = EmbeddedKafkaCluster.uniqueName("share-fence");
        setGroupConfigs(cluster(), group, Map.of("share.auto.offset.reset", "earliest",
                "share.record.lock.duration.ms", "60000"));
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-share-fence");
        input(in, "x", "y");
        Map<String, Object> configs = shareConsumerConfigs(cluster(), group);
        try (TransactionalShareConsumer<String, String> consumer = new TransactionalShareConsumer<>(configs,
                new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(in));
            TransactionSession zombie = session(txnId);
            consumer.bindTransactionSession(zombie);
            ConsumerRecords<String, String> records = pollNonEmpty(consumer);
            zombie.beginTransaction();
            SessionProducer<String, String> producer = producer(zombie);
            for (ConsumerRecord<String, String> r : records) {
                producer.send(new ProducerRecord<>(out, r.key(), r.value()));
                consumer.acknowledge(r, AcknowledgeType.ACCEPT);
            }
            producer.flush();
            try (TransactionSession successor = session(txnId)) {
                assertThatThrownBy(zombie::commitTransaction).isInstanceOf(TransactionSessionException.class);
                if (zombie.state() == SessionState.ABORTABLE_ERROR) {
                    assertThatThrownBy(zombie::abortTransaction).isInstanceOf(TransactionSessionException.class);
                }
                assertThat(zombie.state()).isEqualTo(SessionState.FATAL_ERROR);
                // neither unbind nor poll wedges; the records were released, so they come again at once
                consumer.unbindTransactionSession();
                List<String> redelivered = new ArrayList<>();
                long deadline = System.currentTimeMillis() + 30_000;
                while (redelivered.size() < records.count() && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                        redelivered.add(r.value());
                        assertThat(r.deliveryCount()).hasValue((short) 2);
                        consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                    }
                }
                assertThat(redelivered).containsExactlyInAnyOrder("x", "y");
                zombie.close();
                assertThat(successor.state()).isEqualTo(SessionState.READY);
            }
        }
        assertThat(readCommitted(cluster(), out)).isEmpty();
    }

    @Test
    void aTransactionTheCoordinatorTimedOutIsLostForHeartbeatAndCommitAndAbortWorks() {
        assumeTrue(cluster().transactionVersion() >= 2, "with version 1 a timeout fences instead (documented)");
        String in = topic("timeout-in", 1);
        String out = topic("timeout-out", 1);
        String group = EmbeddedKafkaCluster.uniqueName("timeout-group");
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-timeout");
        List<String> inputs = input(in, "t1", "t2");
        try (TransactionalConsumer<String, String> consumer = consumer(group);
                TransactionSession session = session(txnId, Map.of(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 1000))) {
            consumer.subscribe(List.of(in));
            consumer.bindTransactionSession(session);
            SessionProducer<String, String> producer = producer(session);
            ConsumerRecords<String, String> records = pollNonEmpty(consumer);
            session.beginTransaction();
            records.forEach(r -> producer.send(new ProducerRecord<>(out, r.key(), r.value())));
            producer.flush();
            session.heartbeat(); // healthy so far
            await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(100)).untilAsserted(() ->
                    assertThatThrownBy(session::heartbeat).isInstanceOf(TransactionLostException.class));
            assertThat(session.state()).isEqualTo(SessionState.ABORTABLE_ERROR);
            session.abortTransaction();
            assertThat(session.state()).isEqualTo(SessionState.READY);
            // rewound: the same records again, and this time they commit
            ConsumerRecords<String, String> again = pollNonEmpty(consumer);
            assertThat(values(toList(again))).containsExactlyElementsOf(inputs);
            session.beginTransaction();
            again.forEach(r -> producer.send(new ProducerRecord<>(out, r.key(), r.value())));
            session.commitTransaction();
        }
        assertThat(values(readCommitted(cluster(), out))).containsExactlyElementsOf(inputs);
    }

    @Test
    void anAbandonedTransactionSendsTheBoundConsumerToItsGroupsCommittedOffsetsWhateverTheOutcome() {
        String in = topic("abandon-in", 1);
        String out = topic("abandon-out", 1);
        List<String> inputs = input(in, "p", "q");
        for (boolean commitElsewhere : new boolean[] { false, true }) {
            String group = EmbeddedKafkaCluster.uniqueName("abandon-group");
            String txnId = EmbeddedKafkaCluster.uniqueName("tx-abandon");
            try (TransactionalConsumer<String, String> consumer = consumer(group)) {
                consumer.subscribe(List.of(in));
                TransactionSession session = session(txnId);
                consumer.bindTransactionSession(session);
                ConsumerRecords<String, String> records = pollNonEmpty(consumer);
                session.beginTransaction();
                records.forEach(r -> producer(session).send(new ProducerRecord<>(out, r.key(), r.value())));
                PreparedTransaction prepared = session.prepareTransaction();
                session.abandon(); // its outcome is decided elsewhere: the consumer cannot know it yet
                try (TransactionSession other = TransactionSession.resume(txnId, prepared, clientConfigs())) {
                    if (commitElsewhere) {
                        assertThat(other.completeTransaction(prepared)).isEqualTo(CompletionOutcome.COMMITTED);
                    }
                    else {
                        other.abortTransaction();
                    }
                }
                consumer.unbindTransactionSession();
                if (commitElsewhere) {
                    // committed: the group's offset is past the records, nothing comes twice
                    assertThat(consumer.poll(Duration.ofMillis(500))).isEmpty();
                    assertThat(consumer.position(new TopicPartition(in, 0))).isEqualTo(2);
                }
                else {
                    // aborted: the records come again
                    assertThat(values(toList(pollNonEmpty(consumer)))).containsExactlyElementsOf(inputs);
                }
            }
        }
        assertThat(values(readCommitted(cluster(), out))).containsExactlyElementsOf(inputs);
    }

    // ------------------------------------------------------------------ 4. heartbeat of healthy transactions

    @Test
    void heartbeatNeverCallsAHealthyTransactionFencedEvenBeforeItsRecordsReachTheBroker() {
        String out = topic("hb-out", 1);
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-hb");
        List<TransactionSessionException> reported = new CopyOnWriteArrayList<>();
        try (TransactionSession session = session(txnId, Map.of(ProducerConfig.LINGER_MS_CONFIG, 3000,
                TransactionSessionConfig.HEARTBEAT_INTERVAL_MS, 50))) {
            session.addListener((s, failure) -> reported.add(failure));
            SessionProducer<String, String> producer = producer(session);
            for (int t = 0; t < 2; t++) { // the first transaction, and one right after a commit
                session.beginTransaction();
                producer.send(new ProducerRecord<>(out, "k", "v" + t)); // lingers 3 s: not registered yet
                session.heartbeat();
                await().during(Duration.ofMillis(500)).atMost(Duration.ofSeconds(2))
                    .until(() -> reported.isEmpty() && session.state() == SessionState.IN_TRANSACTION);
                session.commitTransaction();
            }
        }
        assertThat(reported).isEmpty();
        assertThat(values(readCommitted(cluster(), out))).containsExactly("v0", "v1");
    }

    // ------------------------------------------------------------------ 6. callbacks that re-enter

    @Test
    void aSendCallbackThatCallsALifecycleMethodGetsAClearErrorInsteadOfADeadlock() {
        String out = topic("callback-out", 1);
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-callback");
        try (TransactionSession session = session(txnId, Map.of(ProducerConfig.MAX_BLOCK_MS_CONFIG, 500))) {
            SessionProducer<String, String> producer = producer(session);
            AtomicReference<Throwable> fromIoThread = new AtomicReference<>();
            session.beginTransaction();
            producer.send(new ProducerRecord<>(out, "k", "v"), (m, e) -> {
                try {
                    session.commitTransaction();
                }
                catch (Throwable t) {
                    fromIoThread.set(t);
                }
            });
            producer.flush();
            assertThat(fromIoThread.get()).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("I/O thread");
            session.commitTransaction();

            // kafka-clients runs the callback on the sending thread when metadata times out
            AtomicReference<Throwable> fromSender = new AtomicReference<>();
            session.beginTransaction();
            Future<?> send = executor.submit(() -> producer.send(
                    new ProducerRecord<>(EmbeddedKafkaCluster.uniqueName("no-such-topic"), "v"), (m, e) -> {
                        try {
                            session.abortTransaction();
                        }
                        catch (Throwable t) {
                            fromSender.set(t);
                        }
                    }));
            await().atMost(Duration.ofSeconds(10)).until(send::isDone);
            assertThat(fromSender.get()).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("inside a send");
            assertThatThrownBy(session::commitTransaction).isInstanceOf(TransactionSessionException.class);
            session.abortTransaction();
            assertThat(session.state()).isEqualTo(SessionState.READY);
        }
        assertThat(values(readCommitted(cluster(), out))).containsExactly("v");
    }

    // ------------------------------------------------------------------ 7. close racing a commit

    @Test
    void closeWaitsForACommitInProgressAndTheCommitSucceeds() throws Exception {
        String out = topic("close-race-out", 1);
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-close-race");
        TransactionSession session = session(txnId);
        CountDownLatch inCommit = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        KafkaTransactionSession.of(session).addParticipant(new SessionParticipant() {
            @Override
            public void beforeCommit(TransactionSession s) {
                inCommit.countDown();
                try {
                    release.await(30, TimeUnit.SECONDS);
                }
                catch (InterruptedException ex) {
                    Thread.currentThread().interrupt();
                }
            }
        });
        SessionProducer<String, String> producer = producer(session);
        session.beginTransaction();
        producer.send(new ProducerRecord<>(out, "k", "raced"));
        Future<?> commit = executor.submit(session::commitTransaction);
        assertThat(inCommit.await(30, TimeUnit.SECONDS)).isTrue();
        Future<?> close = executor.submit(() -> session.close(Duration.ofMillis(100)));
        await().during(Duration.ofMillis(500)).atMost(Duration.ofSeconds(2)).until(() -> !close.isDone());
        Future<?> secondClose = executor.submit(() -> session.close(Duration.ofSeconds(30)));
        release.countDown();
        commit.get(30, TimeUnit.SECONDS); // no "illegal state transition CLOSED -> READY"
        close.get(30, TimeUnit.SECONDS);
        secondClose.get(30, TimeUnit.SECONDS);
        assertThat(session.state()).isEqualTo(SessionState.CLOSED);
        assertThatIllegalStateException().isThrownBy(session::beginTransaction).withMessageContaining("CLOSED");
        assertThat(values(readCommitted(cluster(), out))).containsExactly("raced");
    }

    // ------------------------------------------------------------------ 8. a poll racing a commit

    @Test
    void recordsAPollReturnsWhileACommitRunsAreCommittedByTheNextTransaction() throws Exception {
        String in = topic("poll-race-in", 1);
        String out = topic("poll-race-out", 1);
        String group = EmbeddedKafkaCluster.uniqueName("poll-race");
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-poll-race");
        input(in, "a0", "a1", "a2");
        TopicPartition tp = new TopicPartition(in, 0);
        try (TransactionalConsumer<String, String> consumer = consumer(group);
                TransactionSession session = session(txnId)) {
            consumer.subscribe(List.of(in));
            consumer.bindTransactionSession(session);
            SessionProducer<String, String> producer = producer(session);
            ConsumerRecords<String, String> first = pollNonEmpty(consumer);
            assertThat(first.count()).isEqualTo(3);
            session.beginTransaction();
            first.forEach(r -> producer.send(new ProducerRecord<>(out, r.key(), r.value())));

            // a poll on another thread is inside the wrapped consumer's poll when the commit starts
            AtomicReference<Thread> poller = new AtomicReference<>();
            Future<ConsumerRecords<String, String>> racing = executor.submit(() -> {
                poller.set(Thread.currentThread());
                return consumer.poll(Duration.ofSeconds(20));
            });
            await().atMost(Duration.ofSeconds(10)).until(() -> poller.get() != null && Arrays.stream(
                    poller.get().getStackTrace()).anyMatch(f -> f.getClassName().endsWith("KafkaConsumer")
                            && f.getMethodName().equals("poll") && !f.getClassName().contains("Transactional")));
            CountDownLatch inCommit = new CountDownLatch(1);
            CountDownLatch release = new CountDownLatch(1);
            // runs after the consumer took its positions
            KafkaTransactionSession.of(session).addParticipant(new SessionParticipant() {
                @Override
                public void beforeCommit(TransactionSession s) {
                    inCommit.countDown();
                    try {
                        release.await(30, TimeUnit.SECONDS);
                    }
                    catch (InterruptedException ex) {
                        Thread.currentThread().interrupt();
                    }
                }
            });
            Future<?> commit = executor.submit(session::commitTransaction);
            assertThat(inCommit.await(30, TimeUnit.SECONDS)).isTrue();
            input(in, "b0", "b1");
            ConsumerRecords<String, String> late = racing.get(30, TimeUnit.SECONDS);
            assertThat(values(toList(late))).containsExactly("b0", "b1");
            release.countDown();
            commit.get(30, TimeUnit.SECONDS);
            await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> // the offset commit's marker is asynchronous
                    assertThat(committedOffsets(cluster(), group)).containsEntry(tp, 3L));

            // the late records belong to the next transaction: their positions commit with it
            session.beginTransaction();
            late.forEach(r -> producer.send(new ProducerRecord<>(out, r.key(), r.value())));
            session.commitTransaction();
            await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> // the offset commit's marker is asynchronous
                    assertThat(committedOffsets(cluster(), group)).containsEntry(tp, 5L));
        }
        assertThat(values(readCommitted(cluster(), out))).containsExactly("a0", "a1", "a2", "b0", "b1");
    }

    // ------------------------------------------------------------------ addPartitionsToTransaction

    @Test
    void addPartitionsChecksThePartitionsExistBeforeAnythingIsSent() {
        String out = topic("add-partitions", 2);
        try (TransactionSession session = session(EmbeddedKafkaCluster.uniqueName("tx-add"))) {
            assertThatIllegalStateException().isThrownBy(() -> session.addPartitionsToTransaction(
                    List.of(new TopicPartition(out, 0)))).withMessageContaining("READY");
            session.beginTransaction();
            session.addPartitionsToTransaction(List.of(new TopicPartition(out, 0), new TopicPartition(out, 1)));
            assertThatThrownBy(() -> session.addPartitionsToTransaction(List.of(new TopicPartition(out, 2))))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("has 2 partition(s)");
            // registering wrote nothing: the transaction is still empty
            assertThat(session.prepareTransaction().isEmpty()).isTrue();
            session.abortTransaction();
        }
    }

    private static <K, V> List<ConsumerRecord<K, V>> toList(ConsumerRecords<K, V> records) {
        List<ConsumerRecord<K, V>> list = new ArrayList<>();
        records.forEach(list::add);
        return list;
    }
}
