package io.github.txnsession.kafka.docs;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import io.github.txnsession.kafka.CompletionOutcome;
import io.github.txnsession.kafka.PreparedTransaction;
import io.github.txnsession.kafka.SessionProducer;
import io.github.txnsession.kafka.ShareOutcomeLedger;
import io.github.txnsession.kafka.TransactionCommitter;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.TransactionalConsumer;
import io.github.txnsession.kafka.TransactionalShareConsumer;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.LongSerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.assertj.core.api.InstanceOfAssertFactories;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The Java snippets of README.md and docs/ (regions between {@code tag::} and {@code end::} comments), compiled and
 * run here against a real broker; {@code DocsSnippetsTest} in the starter checks that the documents show exactly these
 * regions.
 */
class CoreSnippetsTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    private static Map<String, Object> configs(String transactionalId) {
        Map<String, Object> configs = new HashMap<>(kafka.cluster().clientConfigs());
        configs.put("transactional.id", transactionalId);
        return configs;
    }

    /** @return a new one-partition topic */
    private static String newTopic(String name) {
        String topic = EmbeddedKafkaCluster.uniqueName(name);
        kafka.cluster().createTopic(topic, 1);
        return topic;
    }

    @Test
    void coreExample() {
        String ordersTopic = newTopic("orders");
        String totalsTopic = newTopic("totals");
        Map<String, Object> configs = configs(EmbeddedKafkaCluster.uniqueName("orders"));
        // tag::core-example[]
        try (TransactionSession session = TransactionSession.open(configs)) {
            session.initialize();
            var orders = new SessionProducer<>(session, new StringSerializer(), new StringSerializer());
            var totals = new SessionProducer<>(session, new StringSerializer(), new LongSerializer());

            session.beginTransaction();
            orders.send(new ProducerRecord<>(ordersTopic, "o-1", "{\"item\":\"book\"}"));
            totals.send(new ProducerRecord<>(totalsTopic, "customer-7", 1299L));
            session.commitTransaction(); // both records, one transaction, one producer id
        }
        // end::core-example[]
        // the commit returns once the coordinator decided; the markers that let read_committed readers see the records
        // are written right after, so wait for them (the reader stops at the last stable offset)
        await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(100))
            .until(() -> kafka.cluster().readCommitted(ordersTopic).size() == 1
                    && kafka.cluster().readCommitted(totalsTopic).size() == 1);
        assertThat(kafka.cluster().readCommitted(ordersTopic)).map(ConsumerRecord::key).containsExactly("o-1");
        assertThat(kafka.cluster().readCommitted(totalsTopic)).hasSize(1);
    }

    @Test
    void resumeExample() {
        String topic = newTopic("payments");
        String transactionalId = EmbeddedKafkaCluster.uniqueName("payments");
        Map<String, Object> configs = configs(transactionalId);
        String stored;
        try (TransactionSession session = TransactionSession.open(configs)) {
            session.initialize();
            var producer = new SessionProducer<>(session, new StringSerializer(), new StringSerializer());
            session.beginTransaction();
            producer.send(new ProducerRecord<>(topic, "p-1", "captured"));
            // tag::prepare-example[]
            PreparedTransaction prepared = session.prepareTransaction(); // flushed, still open
            stored = prepared.toString(); // "producerId:epoch:startTimeMs": store it with your decision
            // end::prepare-example[]
            // this process stops here without ending the transaction (a crash, or another process completes it)
            session.abandon();
        }
        Map<String, Object> connection = kafka.cluster().clientConfigs();
        CompletionOutcome outcome;
        // tag::resume-example[]
        PreparedTransaction decided = PreparedTransaction.parse(stored);
        try (TransactionSession resumed = TransactionSession.resume(transactionalId, decided, connection)) {
            // COMMITTED, ALREADY_COMMITTED (a retry), ABORTED or EMPTY; LOST and UNKNOWN are thrown
            outcome = resumed.completeTransaction(decided);
        }
        // end::resume-example[]
        assertThat(outcome).isEqualTo(CompletionOutcome.COMMITTED);
        assertThat(kafka.cluster().readCommitted(topic)).map(ConsumerRecord::key).containsExactly("p-1");
    }

    @Test
    void committerExample() {
        String topic = newTopic("settlements");
        String transactionalId = EmbeddedKafkaCluster.uniqueName("settlements");
        String stored;
        try (TransactionSession session = TransactionSession.open(configs(transactionalId))) {
            session.initialize();
            var producer = new SessionProducer<>(session, new StringSerializer(), new StringSerializer());
            session.beginTransaction();
            producer.send(new ProducerRecord<>(topic, "s-1", "settled"));
            stored = session.prepareTransaction().toString();
            session.abandon();
        }
        Map<String, Object> connection = kafka.cluster().clientConfigs();
        CompletionOutcome outcome;
        // tag::committer-example[]
        try (TransactionCommitter committer = TransactionCommitter.create(connection)) {
            // keep it for many commits: its connections and each id's coordinator stay between calls
            outcome = committer.commit(transactionalId, PreparedTransaction.parse(stored));
        }
        // end::committer-example[]
        assertThat(outcome).isEqualTo(CompletionOutcome.COMMITTED);
        assertThat(kafka.cluster().readCommitted(topic)).map(ConsumerRecord::key).containsExactly("s-1");
    }

    private TransactionalConsumer<String, String> polling;
    private final long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();

    /** Until the consumer has read the 10 input records (or a minute passed). */
    private boolean keepRunning() {
        var assigned = this.polling.assignment();
        boolean caughtUp = !assigned.isEmpty() && assigned.stream().allMatch(tp -> this.polling.position(tp) >= 10);
        return !caughtUp && System.nanoTime() < this.deadline;
    }

    @Test
    void consumeProcessProduce() {
        String input = newTopic("in");
        String output = newTopic("out");
        try (KafkaProducer<String, String> plain = new KafkaProducer<>(kafka.cluster().clientConfigs(),
                new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < 10; i++) {
                plain.send(new ProducerRecord<>(input, "k" + i, "v" + i));
            }
        }
        Map<String, Object> consumerConfigs = new HashMap<>(kafka.cluster().clientConfigs());
        consumerConfigs.put(ConsumerConfig.GROUP_ID_CONFIG, EmbeddedKafkaCluster.uniqueName("upper"));
        consumerConfigs.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        consumerConfigs.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        consumerConfigs.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        try (TransactionSession session = TransactionSession.open(configs(EmbeddedKafkaCluster.uniqueName("upper")));
                var consumer = new TransactionalConsumer<>(new KafkaConsumer<>(consumerConfigs,
                        new StringDeserializer(), new StringDeserializer()))) {
            this.polling = consumer;
            session.initialize();
            // tag::consume-process-produce[]
            consumer.subscribe(List.of(input));
            consumer.bindTransactionSession(session); // its positions commit with the session's transactions
            var out = new SessionProducer<>(session, new StringSerializer(), new StringSerializer());
            while (keepRunning()) {
                session.beginTransaction();
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    out.send(new ProducerRecord<>(output, r.key(), r.value().toUpperCase()));
                }
                session.commitTransaction(); // the output and the consumed offsets, atomically
            }
            // end::consume-process-produce[]
        }
        assertThat(kafka.cluster().readCommitted(output)).map(ConsumerRecord::value).contains("V0", "V9").hasSize(10);
    }

    @Test
    void shareLedgerExample() {
        assumeTrue(kafka.cluster().supportsShareGroups(), "the brokers run no share groups");
        Map<String, Object> clientConfigs = kafka.cluster().clientConfigs();
        Map<String, Object> consumerConfigs = new HashMap<>(clientConfigs);
        consumerConfigs.put(ConsumerConfig.GROUP_ID_CONFIG, EmbeddedKafkaCluster.uniqueName("ledger-group"));
        try (TransactionSession session = TransactionSession.open(configs(EmbeddedKafkaCluster.uniqueName("worker")));
                var consumer = new TransactionalShareConsumer<>(consumerConfigs, new StringDeserializer(),
                        new StringDeserializer())) {
            session.initialize();
            // tag::share-ledger[]
            ShareOutcomeLedger ledger = new ShareOutcomeLedger(clientConfigs); // a compacted topic, created if absent
            consumer.useOutcomeLedger(ledger);
            consumer.bindTransactionSession(session);
            // end::share-ledger[]
            assertThat(consumer.outcomeLedger()).isSameAs(ledger);
            assertThat(ledger.topic()).isEqualTo(ShareOutcomeLedger.DEFAULT_TOPIC);
            consumer.close();
            ledger.close();
        }
        assertThat(kafka.cluster().admin().listTopics().names()).succeedsWithin(Duration.ofSeconds(10))
            .asInstanceOf(InstanceOfAssertFactories.collection(String.class)).contains(ShareOutcomeLedger.DEFAULT_TOPIC);
    }
}
