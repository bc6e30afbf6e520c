package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import io.github.txnsession.kafka.test.ChildJvm;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static io.github.txnsession.kafka.TestClients.readCommitted;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalStateException;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

/** Transactions the coordinator aborted on timeout are reported as LOST, never as committed. */
class TransactionTimeoutTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(b -> b
        .brokerProperty("transaction.abort.timed.out.transaction.cleanup.interval.ms", 300));

    private static String topic(String prefix) {
        String topic = EmbeddedKafkaCluster.uniqueName(prefix);
        kafka.cluster().createTopic(topic, 1);
        return topic;
    }

    private static void awaitNoLongerOngoing(String txnId) {
        await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(100)).until(() -> kafka.cluster()
            .admin().describeTransactions(List.of(txnId)).description(txnId).get().state() != TransactionState.ONGOING);
    }

    @Test
    void preparedTransactionLeftPastItsTimeoutIsReportedLost() {
        String topic = topic("timeout-prepared");
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-timeout-prepared");
        PreparedTransaction prepared;
        try (ChildJvm child = ChildJvm.start(PreparingChild.class, "prepare", kafka.bootstrapServers(), txnId, topic,
                "3", "1500")) {
            prepared = PreparedTransaction.parse(child.awaitValue("PREPARED", Duration.ofSeconds(60)));
            child.awaitExit(Duration.ofSeconds(60));
        }
        awaitNoLongerOngoing(txnId);
        try (TransactionSession session = TransactionSession.resume(txnId, prepared,
                Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers()))) {
            assertThatThrownBy(() -> session.completeTransaction(prepared))
                .isInstanceOf(TransactionLostException.class)
                .hasMessageContaining("LOST")
                .hasMessageContaining(txnId);
            assertThat(session.state()).isEqualTo(SessionState.FATAL_ERROR);
        }
        // a second attempt by another process gives the same answer
        try (TransactionSession session = TransactionSession.resume(txnId, prepared,
                Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers()))) {
            assertThatThrownBy(session::commitTransaction).isInstanceOf(TransactionLostException.class);
        }
        assertThat(readCommitted(kafka.cluster(), topic)).isEmpty();
    }

    @Test
    void heartbeatReportsATimedOutLiveTransactionBeforeCommit() {
        String topic = topic("timeout-live");
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-timeout-live");
        Map<String, Object> configs = TestClients.sessionConfigs(kafka.cluster(), txnId);
        configs.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 1500);
        try (TransactionSession session = TransactionSession.open(configs)) {
            session.initialize();
            SessionProducer<String, String> producer = new SessionProducer<>(session, new StringSerializer(),
                    new StringSerializer());
            session.beginTransaction();
            producer.send(new ProducerRecord<>(topic, "k", "lost"));
            producer.flush();
            session.heartbeat(); // open and well
            awaitNoLongerOngoing(txnId);
            assertThatThrownBy(session::heartbeat).isInstanceOf(TransactionLostException.class)
                .hasMessageContaining("transaction.timeout.ms");
            assertThat(session.state()).isEqualTo(SessionState.ABORTABLE_ERROR);
            assertThatThrownBy(session::commitTransaction).isInstanceOf(SessionAbortableException.class)
                .hasMessageContaining("ABORTABLE_ERROR").hasMessageContaining("must be aborted")
                .hasCauseInstanceOf(TransactionLostException.class);
        }
        assertThat(readCommitted(kafka.cluster(), topic)).isEmpty();
    }

    @Test
    void backgroundHeartbeatNotifiesTheListener() throws Exception {
        String topic = topic("timeout-background");
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-timeout-background");
        Map<String, Object> configs = TestClients.sessionConfigs(kafka.cluster(), txnId);
        configs.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 1500);
        configs.put(TransactionSessionConfig.HEARTBEAT_INTERVAL_MS, 200);
        CountDownLatch failed = new CountDownLatch(1);
        AtomicReference<TransactionSessionException> failure = new AtomicReference<>();
        try (TransactionSession session = TransactionSession.open(configs)) {
            session.addListener((s, ex) -> {
                failure.set(ex);
                failed.countDown();
            });
            session.initialize();
            session.beginTransaction();
            new SessionProducer<>(session, new StringSerializer(), new StringSerializer())
                .send(new ProducerRecord<>(topic, "k", "lost"));
            assertThat(failed.await(30, TimeUnit.SECONDS)).as("listener called").isTrue();
            assertThat(failure.get()).isInstanceOf(TransactionLostException.class);
            assertThat(session.state()).isEqualTo(SessionState.ABORTABLE_ERROR);
        }
    }
}
