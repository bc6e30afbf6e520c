package io.github.txnsession.spring;

import java.io.IOException;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import io.github.txnsession.kafka.SessionAbortableException;
import io.github.txnsession.kafka.SessionTimeoutException;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.jdbc.DecisionLogException;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.InvalidTimestampException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.errors.TransactionAbortableException;
import org.apache.kafka.common.errors.TransactionalIdAuthorizationException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.dao.CannotAcquireLockException;
import org.springframework.dao.DataAccessResourceFailureException;
import org.springframework.dao.DuplicateKeyException;
import org.springframework.jdbc.UncategorizedSQLException;
import org.springframework.kafka.core.DefaultKafkaConsumerFactory;
import org.springframework.kafka.listener.ContainerProperties;
import org.springframework.kafka.listener.ContainerProperties.EOSMode;
import org.springframework.kafka.listener.KafkaMessageListenerContainer;
import org.springframework.kafka.listener.ListenerExecutionFailedException;
import org.springframework.kafka.listener.MessageListener;
import org.springframework.transaction.CannotCreateTransactionException;
import org.springframework.transaction.HeuristicCompletionException;
import org.springframework.transaction.TransactionSystemException;
import org.springframework.transaction.TransactionTimedOutException;
import org.springframework.transaction.UnexpectedRollbackException;
import org.springframework.util.backoff.BackOffExecution;
import org.springframework.util.backoff.FixedBackOff;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * {@link SessionAfterRollbackProcessor}: which failures give a record up, and, against a real broker, that a failed
 * transaction whose commit went through is not redelivered while one that aborted is, once Kafka has settled it.
 */
class SessionAfterRollbackProcessorTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    @Test
    void infrastructureFailuresAreTransientRecordFailuresAreNot() {
        // the commit's flush failed because the brokers could not take the write (chains as the managers throw them)
        assertTransient(new TransactionSystemException("commit failed", new SessionAbortableException("t-0",
                "flush failed", new TransactionAbortableException("abortable", new TimeoutException("expired")))));
        assertTransient(new TransactionSystemException("commit failed", new SessionAbortableException("t-0",
                "flush failed", new KafkaException("The client hasn't received acknowledgment for some previously "
                        + "sent messages and can no longer retry them. It is safe to abort the transaction"))));
        assertTransient(new ListenerExecutionFailedException("send", new KafkaException("Send failed",
                new TimeoutException("metadata"))));
        assertTransient(new SessionTimeoutException("t-0", "commitTransaction()", null));
        assertTransient(new HeuristicCompletionException(HeuristicCompletionException.STATE_UNKNOWN,
                new TransactionSystemException("unknown")));
        assertTransient(new CannotCreateTransactionException("pool"));
        // Kafka errors fixed outside the record: ACLs, credentials, an epoch the coordinator bumped, an upgrade
        assertTransient(new TransactionSystemException("commit", new SessionAbortableException("t-0", "flush",
                new TransactionalIdAuthorizationException("no Write on the id"))));
        assertTransient(new ListenerExecutionFailedException("send", new KafkaException("Send failed",
                new TopicAuthorizationException("no Write on the topic"))));
        assertTransient(new TransactionSystemException("commit", new KafkaException(
                new InvalidProducerEpochException("timed out"))));
        // the database as a service: deadlock, connection lost, failover, two-phase decision log unreachable
        assertTransient(new ListenerExecutionFailedException("db", new CannotAcquireLockException("deadlock")));
        assertTransient(new ListenerExecutionFailedException("db", new DataAccessResourceFailureException("gone")));
        assertTransient(new TransactionSystemException("commit", new SQLException("connection lost", "08006")));
        assertTransient(new ListenerExecutionFailedException("db", new UncategorizedSQLException("insert", "sql",
                new SQLException("cannot execute INSERT in a read-only transaction", "25006"))));
        assertTransient(new DecisionLogException("decision row", new SQLException("refused", "08001")));
        assertTransient(new TransactionSystemException("decision row", new SQLException("read-only", "HY000")));
        // a serializer that could not reach its schema registry; a deadline passed while Kafka did not answer
        assertTransient(new ListenerExecutionFailedException("send", new KafkaException("Send failed",
                new SerializationException("Error serializing", new IOException("Connection refused")))));
        assertTransient(new ListenerExecutionFailedException("send", new TransactionTimedOutException("deadline")));
        // a listener that caught a failed send and went on: the session's refusal carries the send's failure
        assertTransient(new TransactionSystemException("commit", new SessionAbortableException("t-0",
                "commitTransaction() is not allowed in state ABORTABLE_ERROR", new SessionAbortableException("t-0",
                        "send() failed", new KafkaException("Send failed", new TimeoutException("expired"))))));
        // the record is the problem: spring-kafka's limit applies
        assertRecordFailure(new ListenerExecutionFailedException("listener", new IllegalStateException("bad")));
        assertRecordFailure(new ListenerExecutionFailedException("db", new DuplicateKeyException("duplicate")));
        assertRecordFailure(new TransactionSystemException("commit failed", new SessionAbortableException("t-0",
                "flush failed", new RecordTooLargeException("big"))));
        assertRecordFailure(new ListenerExecutionFailedException("send", new KafkaException("Send failed",
                new SerializationException("cannot serialize"))));
        assertRecordFailure(new TransactionSystemException("commit", new SQLException("deferred fk", "23503")));
        assertRecordFailure(new TransactionSystemException("commit", new SessionAbortableException("t-0",
                "commitTransaction() is not allowed in state ABORTABLE_ERROR", new SessionAbortableException("t-0",
                        "send() failed", new KafkaException("error state", new RecordTooLargeException("big"))))));
        assertRecordFailure(new UnexpectedRollbackException("rollback-only"));
        assertRecordFailure(new TransactionSystemException("commit", new SessionAbortableException("t-0", "flush",
                new InvalidTimestampException("timestamp out of range"))));
        // the listener's own Kafka client calls: not the session's infrastructure
        assertRecordFailure(new ListenerExecutionFailedException("admin", new TopicExistsException("exists")));
        // a cause chain that loops ends the walk
        RuntimeException a = new RuntimeException("a");
        RuntimeException b = new RuntimeException("b", a);
        a.initCause(b);
        assertRecordFailure(a);
    }

    private static void assertTransient(Exception failure) {
        assertThat(SessionAfterRollbackProcessor.isTransient(failure)).as("transient: %s", failure).isTrue();
    }

    private static void assertRecordFailure(Exception failure) {
        assertThat(SessionAfterRollbackProcessor.isTransient(failure)).as("record failure: %s", failure).isFalse();
    }

    @Test
    void recordFailuresAreRetriedAtOnceThenWithAGrowingBackOffTenDeliveriesInAll() {
        BackOffExecution execution = SessionAfterRollbackProcessor.defaultRecordBackOff().start();
        List<Long> intervals = new ArrayList<>();
        for (long next = execution.nextBackOff(); next != BackOffExecution.STOP; next = execution.nextBackOff()) {
            intervals.add(next);
        }
        assertThat(intervals).containsExactly(0L, 1_000L, 2_000L, 4_000L, 8_000L, 16_000L, 30_000L, 30_000L,
                30_000L);
    }

    @Test
    void everyFailureButTheListenersOrABeginIsCheckedForACommitThatWentThrough() {
        assertThat(SessionAfterRollbackProcessor.mayHaveCommitted(new TransactionSystemException("commit"))).isTrue();
        assertThat(SessionAfterRollbackProcessor.mayHaveCommitted(new HeuristicCompletionException(
                HeuristicCompletionException.STATE_UNKNOWN, new RuntimeException()))).isTrue();
        // an afterCommit callback that failed after Kafka committed
        assertThat(SessionAfterRollbackProcessor.mayHaveCommitted(new IllegalStateException("afterCommit")))
            .isTrue();
        assertThat(SessionAfterRollbackProcessor.mayHaveCommitted(new CannotCreateTransactionException("pool")))
            .isFalse();
        assertThat(SessionAfterRollbackProcessor.mayHaveCommitted(new ListenerExecutionFailedException("listener",
                new IllegalStateException()))).isFalse();
    }

    @Test
    void aTransactionThatCommittedAfterAllIsNotRedeliveredOnceKafkaSettledIt() throws Exception {
        runAgainstPendingOffsets("arp-committed", true);
    }

    @Test
    void aTransactionThatAbortedIsRedeliveredFromItsFirstRecord() throws Exception {
        runAgainstPendingOffsets("arp-aborted", false);
    }

    @Test
    void recordFailuresAreGivenUpAtTheLimitTransientOnesAreNot() throws Exception {
        String topic = "arp-limit";
        kafka.cluster().admin().createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        TopicPartition tp = new TopicPartition(topic, 0);
        var processor = new SessionAfterRollbackProcessor<String, String>(new FixedBackOff(0, FixedBackOff
            .UNLIMITED_ATTEMPTS), new FixedBackOff(0, 2));
        try (KafkaConsumer<String, String> consumer = consumer("arp-limit-group")) {
            consumer.assign(List.of(tp));
            List<ConsumerRecord<String, String>> records = List.of(new ConsumerRecord<>(topic, 0, 7, "k", "v"));
            Exception transientFailure = new ListenerExecutionFailedException("send",
                    new KafkaException(new TimeoutException("metadata")));
            for (int i = 0; i < 20; i++) {
                consumer.seek(tp, 8); // the container's position after polling record 7
                processor.process(records, consumer, container(), transientFailure, true, EOSMode.V2);
                assertThat(consumer.position(tp)).as("transient attempt %d redelivers", i).isEqualTo(7);
            }
            Exception recordFailure = new ListenerExecutionFailedException("bad", new IllegalStateException("bad"));
            for (int i = 1; i <= 2; i++) {
                consumer.seek(tp, 8);
                processor.process(records, consumer, container(), recordFailure, true, EOSMode.V2);
                assertThat(consumer.position(tp)).as("record failure %d redelivers", i).isEqualTo(7);
            }
            consumer.seek(tp, 8);
            processor.process(records, consumer, container(), recordFailure, true, EOSMode.V2);
            assertThat(consumer.position(tp)).as("the third record failure gives the record up").isEqualTo(8);
        }
    }

    /**
     * The container polled records 3..6 (its position is 7) and the transaction of record 3 failed with an unknown
     * outcome; that transaction still holds its pending offset 4 for the group. The processor must wait until the
     * transaction ends, then seek to 4 (record 3 committed, 4..6 are redelivered) or back to 3 (it aborted).
     */
    private void runAgainstPendingOffsets(String name, boolean commit) throws Exception {
        String topic = name;
        String group = name + "-group";
        kafka.cluster().admin().createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<String, String> consumer = consumer(group)) {
            consumer.assign(List.of(tp));
            consumer.commitSync(Map.of(tp, new OffsetAndMetadata(3)));
            consumer.seek(tp, 7); // where the container's position is after the poll
            Map<String, Object> producerConfigs = new HashMap<>(kafka.cluster().clientConfigs());
            producerConfigs.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, name + "-txn");
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerConfigs, new StringSerializer(),
                    new StringSerializer())) {
                producer.initTransactions();
                producer.beginTransaction();
                producer.sendOffsetsToTransaction(Map.of(tp, new OffsetAndMetadata(4)),
                        new ConsumerGroupMetadata(group));
                List<ConsumerRecord<String, String>> records = new ArrayList<>();
                for (long offset = 3; offset < 7; offset++) {
                    records.add(new ConsumerRecord<>(topic, 0, offset, "k", "v" + offset));
                }
                var processor = new SessionAfterRollbackProcessor<String, String>();
                KafkaMessageListenerContainer<String, String> container = container();
                // the consumer is not thread-safe: the processor runs on this thread, the producer ends the
                // transaction on another once the processor is waiting
                AtomicBoolean ending = new AtomicBoolean();
                CompletableFuture<Void> end = CompletableFuture.runAsync(() -> {
                    sleepQuietly(1500); // long enough for the processor's offset fetch to meet the pending offsets
                    ending.set(true);
                    if (commit) {
                        producer.commitTransaction();
                    }
                    else {
                        producer.abortTransaction();
                    }
                });
                processor.process(records, consumer, container, new HeuristicCompletionException(
                        HeuristicCompletionException.STATE_UNKNOWN, new SessionTimeoutException(name, "commit", null)),
                        true, EOSMode.V2);
                assertThat(ending).as("the processor returned only once the transaction was ending").isTrue();
                end.get(10, TimeUnit.SECONDS);
            }
            assertThat(consumer.position(tp))
                .as(commit ? "committed: record 3 is not redelivered" : "aborted: redelivered from record 3")
                .isEqualTo(commit ? 4 : 3);
        }
    }

    private static void sleepQuietly(long millis) {
        try {
            Thread.sleep(millis);
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
        }
    }

    private static KafkaConsumer<String, String> consumer(String group) {
        Map<String, Object> configs = new HashMap<>(kafka.cluster().clientConfigs());
        configs.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        configs.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        configs.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        return new KafkaConsumer<>(configs, new StringDeserializer(), new StringDeserializer());
    }

    /** A real container, never started: the processor only asks it whether it runs. */
    private static KafkaMessageListenerContainer<String, String> container() {
        ContainerProperties properties = new ContainerProperties("unused");
        properties.setMessageListener((MessageListener<String, String>) r -> { });
        return new KafkaMessageListenerContainer<>(new DefaultKafkaConsumerFactory<>(kafka.cluster().clientConfigs()),
                properties);
    }
}
