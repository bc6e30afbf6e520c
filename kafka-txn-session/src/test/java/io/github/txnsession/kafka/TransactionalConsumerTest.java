package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.extension.RegisterExtension;

import static io.github.txnsession.kafka.TestClients.committedOffsets;
import static io.github.txnsession.kafka.TestClients.consumerConfigs;
import static io.github.txnsession.kafka.TestClients.produce;
import static io.github.txnsession.kafka.TestClients.readCommitted;
import static io.github.txnsession.kafka.TestClients.sessionConfigs;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalStateException;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

/** Bound consumers against a real broker: offsets with the transaction, rewind on abort, rebalances, misuse. */
class TransactionalConsumerTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    private static TransactionSession session(String prefix) {
        TransactionSession session = TransactionSession.open(sessionConfigs(kafka.cluster(),
                EmbeddedKafkaCluster.uniqueName(prefix)));
        session.initialize();
        return session;
    }

    private static TransactionalConsumer<String, String> consumer(String group, int maxPollRecords) {
        return consumer(group, maxPollRecords, "classic");
    }

    /** @param protocol {@code group.protocol}: classic or consumer (KIP-848) */
    private static TransactionalConsumer<String, String> consumer(String group, int maxPollRecords, String protocol) {
        Map<String, Object> configs = consumerConfigs(kafka.cluster(), group);
        configs.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, maxPollRecords);
        configs.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        return new TransactionalConsumer<>(new KafkaConsumer<>(configs));
    }

    /** {@code count} records per partition, values "p<partition>-<seq>", keyed by partition. */
    private static void produceInput(String topic, int partitions, int count) {
        List<ProducerRecord<String, String>> records = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            for (int p = 0; p < partitions; p++) {
                records.add(new ProducerRecord<>(topic, p, "k" + p, "p" + p + "-" + i));
            }
        }
        produce(kafka.cluster(), records);
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

    private static void transform(ConsumerRecords<String, String> records, SessionProducer<String, String> out,
            String outputTopic) {
        for (ConsumerRecord<String, String> r : records) {
            out.send(new ProducerRecord<>(outputTopic, r.partition(), r.key(), "out-" + r.value()));
        }
    }

    private static List<String> ids(ConsumerRecords<String, String> records) {
        List<String> ids = new ArrayList<>();
        records.forEach(r -> ids.add(r.partition() + "@" + r.offset() + "=" + r.value()));
        return ids;
    }

    /** Output, per partition, must be the transformed input of that partition: each once, in order. */
    private static void assertExactlyOnceInOrder(String output, int partitions, int perPartition) {
        Map<Integer, List<String>> actual = new HashMap<>();
        readCommitted(kafka.cluster(), output)
            .forEach(r -> actual.computeIfAbsent(r.partition(), p -> new ArrayList<>()).add(r.value()));
        for (int p = 0; p < partitions; p++) {
            List<String> expected = new ArrayList<>();
            for (int i = 0; i < perPartition; i++) {
                expected.add("out-p" + p + "-" + i);
            }
            assertThat(actual.getOrDefault(p, List.of())).as("output partition %d", p).isEqualTo(expected);
        }
    }

    private static void assertGroupOffsetsAtEnd(String group, String input, int partitions, long perPartition) {
        Map<TopicPartition, Long> expected = new HashMap<>();
        for (int p = 0; p < partitions; p++) {
            expected.put(new TopicPartition(input, p), perPartition);
        }
        await().atMost(Duration.ofSeconds(10))
            .untilAsserted(() -> assertThat(committedOffsets(kafka.cluster(), group)).isEqualTo(expected));
    }

    @Test
    void offsetsCommitWithTheTransactionAndAnAbortReReadsExactlyTheAbortedBatch() {
        String input = EmbeddedKafkaCluster.uniqueName("ctp-in");
        String output = EmbeddedKafkaCluster.uniqueName("ctp-out");
        kafka.cluster().createTopics(1, input, output);
        produceInput(input, 1, 150);
        String group = EmbeddedKafkaCluster.uniqueName("ctp-group");

        try (TransactionSession session = session("ctp-abort");
                TransactionalConsumer<String, String> consumer = consumer(group, 50)) {
            SessionProducer<String, String> out = new SessionProducer<>(session, new StringSerializer(),
                    new StringSerializer());
            consumer.subscribe(List.of(input));
            consumer.bindTransactionSession(session);

            ConsumerRecords<String, String> first = pollNonEmpty(consumer);
            session.beginTransaction();
            transform(first, out, output);
            session.commitTransaction();
            long afterFirst = first.count();
            // the offsets become visible when the coordinator has written the commit markers, just after commit
            await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> assertThat(committedOffsets(kafka.cluster(),
                    group)).containsEntry(new TopicPartition(input, 0), afterFirst));

            ConsumerRecords<String, String> aborted = pollNonEmpty(consumer);
            session.beginTransaction();
            transform(aborted, out, output);
            session.abortTransaction();
            assertThat(committedOffsets(kafka.cluster(), group)).as("an abort commits no offsets")
                .containsEntry(new TopicPartition(input, 0), afterFirst);

            // the consumer rewound: the next records are exactly the aborted batch, from its first offset
            List<String> reread = new ArrayList<>();
            while (reread.size() < aborted.count()) {
                reread.addAll(ids(pollNonEmpty(consumer)));
            }
            assertThat(reread).startsWith(ids(aborted).toArray(String[]::new));
            assertThat(reread.get(0)).isEqualTo(ids(aborted).get(0)).startsWith("0@" + afterFirst + "=");

            // finish: the re-read records and the rest, in batches, committed
            session.beginTransaction();
            for (String id : reread) {
                String value = id.substring(id.indexOf('=') + 1);
                out.send(new ProducerRecord<>(output, 0, "k0", "out-" + value));
            }
            session.commitTransaction();
            long done = afterFirst + reread.size();
            while (done < 150) {
                ConsumerRecords<String, String> batch = pollNonEmpty(consumer);
                session.beginTransaction();
                transform(batch, out, output);
                session.commitTransaction();
                done += batch.count();
            }
        }
        assertExactlyOnceInOrder(output, 1, 150);
        assertGroupOffsetsAtEnd(group, input, 1, 150);
    }

    /**
     * Two bound consumers in one group. Worker A opens a transaction, then B joins; A's next poll inside the
     * transaction takes part in the rebalance, which revokes A's partitions (all of them with the classic protocol's
     * eager assignment, some of them with the consumer protocol's incremental one): A's commit must fail as abort-only
     * and A aborts. The output has every input once, in order.
     */
    @ParameterizedTest(name = "group.protocol={0}")
    @ValueSource(strings = { "classic", "consumer" })
    void aRebalanceDuringAnOpenTransactionMakesItAbortOnlyAndLosesOrDuplicatesNothing(String protocol)
            throws Exception {
        String input = EmbeddedKafkaCluster.uniqueName("rb-in");
        String output = EmbeddedKafkaCluster.uniqueName("rb-out");
        kafka.cluster().createTopics(4, input, output);
        int perPartition = 100;
        produceInput(input, 4, perPartition);
        String group = EmbeddedKafkaCluster.uniqueName("rb-group");

        AtomicBoolean stop = new AtomicBoolean();
        AtomicBoolean revokedA = new AtomicBoolean();
        AtomicInteger abortsA = new AtomicInteger();
        AtomicInteger abortsB = new AtomicInteger();
        List<String> abortMessages = java.util.Collections.synchronizedList(new ArrayList<>());
        CountDownLatch aInTransaction = new CountDownLatch(1);
        ExecutorService executor = Executors.newFixedThreadPool(2);
        try (TransactionSession sessionA = session("rb-a");
                TransactionSession sessionB = session("rb-b");
                TransactionalConsumer<String, String> a = consumer(group, 20, protocol);
                TransactionalConsumer<String, String> b = consumer(group, 20, protocol)) {
            ConsumerRebalanceListener noteRevocation = new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(java.util.Collection<TopicPartition> partitions) {
                    if (!partitions.isEmpty()) {
                        revokedA.set(true);
                    }
                }

                @Override
                public void onPartitionsAssigned(java.util.Collection<TopicPartition> partitions) {
                }
            };
            a.subscribe(List.of(input), noteRevocation);
            a.bindTransactionSession(sessionA);
            b.bindTransactionSession(sessionB);

            Future<?> workerA = executor.submit(() -> {
                SessionProducer<String, String> out = new SessionProducer<>(sessionA, new StringSerializer(),
                        new StringSerializer());
                boolean rebalanced = false;
                while (!stop.get()) {
                    ConsumerRecords<String, String> records = a.poll(Duration.ofMillis(100));
                    if (records.isEmpty()) {
                        continue;
                    }
                    sessionA.beginTransaction();
                    transform(records, out, output);
                    if (!rebalanced) {
                        rebalanced = true;
                        aInTransaction.countDown();
                        // keep the transaction open and take part in the rebalance B's join starts
                        long deadline = System.currentTimeMillis() + 60_000;
                        while (!revokedA.get() && System.currentTimeMillis() < deadline) {
                            transform(a.poll(Duration.ofMillis(100)), out, output);
                        }
                        assertThat(revokedA).as("A saw its partitions revoked").isTrue();
                    }
                    try {
                        sessionA.commitTransaction();
                    }
                    catch (SessionAbortableException ex) {
                        abortsA.incrementAndGet();
                        abortMessages.add(ex.getMessage());
                        assertThat(sessionA.state()).isEqualTo(SessionState.ABORTABLE_ERROR);
                        sessionA.abortTransaction();
                    }
                }
                return null;
            });
            assertThat(aInTransaction.await(60, TimeUnit.SECONDS)).isTrue();
            b.subscribe(List.of(input));
            Future<?> workerB = executor.submit(() -> {
                SessionProducer<String, String> out = new SessionProducer<>(sessionB, new StringSerializer(),
                        new StringSerializer());
                while (!stop.get()) {
                    ConsumerRecords<String, String> records = b.poll(Duration.ofMillis(100));
                    if (records.isEmpty()) {
                        continue;
                    }
                    sessionB.beginTransaction();
                    transform(records, out, output);
                    try {
                        sessionB.commitTransaction();
                    }
                    catch (SessionAbortableException ex) {
                        abortsB.incrementAndGet();
                        sessionB.abortTransaction();
                    }
                }
                return null;
            });
            try {
                await().atMost(Duration.ofSeconds(120)).pollInterval(Duration.ofMillis(200)).until(() ->
                        committedOffsets(kafka.cluster(), group).values().stream().mapToLong(Long::longValue).sum()
                                == 4L * perPartition || workerA.isDone() || workerB.isDone());
            }
            finally {
                stop.set(true);
            }
            workerA.get(30, TimeUnit.SECONDS);
            workerB.get(30, TimeUnit.SECONDS);
        }
        finally {
            executor.shutdownNow();
        }
        assertThat(abortsA.get()).as("A's transaction spanning the rebalance was abort-only").isGreaterThanOrEqualTo(1);
        assertThat(abortMessages.get(0)).contains("revoked by a rebalance", input, "abortTransaction()");
        assertExactlyOnceInOrder(output, 4, perPartition);
        assertGroupOffsetsAtEnd(group, input, 4, perPartition);
        System.out.printf("rebalance test: aborts A=%d B=%d%n", abortsA.get(), abortsB.get());
    }

    @Test
    void misuseFailsWithClearErrors() {
        String input = EmbeddedKafkaCluster.uniqueName("misuse-in");
        kafka.cluster().createTopics(1, input);
        produceInput(input, 1, 5);
        String group = EmbeddedKafkaCluster.uniqueName("misuse-group");
        TopicPartition tp = new TopicPartition(input, 0);
        try (TransactionSession one = session("misuse-1");
                TransactionSession two = session("misuse-2");
                TransactionalConsumer<String, String> consumer = consumer(group, 10)) {
            consumer.assign(List.of(tp));
            consumer.bindTransactionSession(one);
            assertThatIllegalStateException().isThrownBy(() -> consumer.bindTransactionSession(two))
                .withMessageContaining("already bound to transaction session '" + one.transactionalId() + "'")
                .withMessageContaining("unbindTransactionSession()");

            consumer.seek(tp, 0); // no transaction open: allowed
            pollNonEmpty(consumer);
            one.beginTransaction();
            assertThatIllegalStateException().isThrownBy(() -> consumer.seek(tp, 0))
                .withMessageContaining("seek() is not allowed")
                .withMessageContaining("IN_TRANSACTION")
                .withMessageContaining("Seek before beginTransaction() or after it ends");
            assertThatIllegalStateException().isThrownBy(consumer::commitSync)
                .withMessageContaining("commits this consumer's offsets with the transaction");
            assertThatIllegalStateException().isThrownBy(() -> consumer.assign(List.of(tp)))
                .withMessageContaining("assign() is not allowed");
            assertThatIllegalStateException().isThrownBy(() -> consumer.subscribe(List.of(input)))
                .withMessageContaining("subscribe() is not allowed");
            assertThatIllegalStateException().isThrownBy(consumer::unsubscribe)
                .withMessageContaining("unsubscribe() is not allowed");
            assertThatIllegalStateException().isThrownBy(consumer::unbindTransactionSession)
                .withMessageContaining("Commit or abort it first");
            one.commitTransaction();
            await().atMost(Duration.ofSeconds(10))
                .untilAsserted(() -> assertThat(committedOffsets(kafka.cluster(), group)).containsEntry(tp, 5L));

            consumer.unbindTransactionSession();
            consumer.bindTransactionSession(two); // after unbinding, another session may take it
            consumer.unbindTransactionSession();
        }
        try (TransactionalConsumer<String, String> noGroup = new TransactionalConsumer<>(new KafkaConsumer<>(
                Map.of(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers(),
                        ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG,
                        org.apache.kafka.common.serialization.StringDeserializer.class,
                        ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
                        org.apache.kafka.common.serialization.StringDeserializer.class)));
                TransactionSession three = session("misuse-3")) {
            assertThatThrownBy(() -> noGroup.bindTransactionSession(three)).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("no group.id");
        }
    }
}
