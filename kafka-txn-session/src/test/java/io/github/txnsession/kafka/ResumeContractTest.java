package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.List;
import java.util.Map;

import io.github.txnsession.kafka.test.ChildJvm;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;

import static io.github.txnsession.kafka.TestClients.readCommitted;
import static io.github.txnsession.kafka.TestClients.values;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalStateException;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Finishing a transaction from another process, run on a cluster of each transaction version (see subclasses).
 * The preparing process is a child JVM that dies with {@code Runtime.halt} right after prepareTransaction().
 */
abstract class ResumeContractTest {

    private static final Duration CHILD_TIMEOUT = Duration.ofSeconds(60);

    abstract EmbeddedKafkaCluster kafka();

    /** @return whether the cluster runs transaction version 2, which bumps the epoch at every transaction end */
    abstract boolean epochBumpsPerTransaction();

    Map<String, Object> clientConfigs() {
        return Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka().bootstrapServers());
    }

    /** A child JVM prepares {@code count} records in a transaction and dies; returns the prepared state. */
    PreparedTransaction prepareInChildAndKill(String txnId, String topic, int count, int timeoutMs) {
        try (ChildJvm child = ChildJvm.start(PreparingChild.class, "prepare", kafka().bootstrapServers(), txnId,
                topic, String.valueOf(count), String.valueOf(timeoutMs))) {
            PreparedTransaction state = PreparedTransaction.parse(child.awaitValue("PREPARED", CHILD_TIMEOUT));
            assertThat(child.awaitExit(CHILD_TIMEOUT)).isZero();
            return state;
        }
    }

    /** A second child JVM resumes and finishes; returns what it printed after OUTCOME or ERROR. */
    String completeInChild(String txnId, PreparedTransaction prepared, String action, String requested) {
        try (ChildJvm child = ChildJvm.start(PreparingChild.class, "complete", kafka().bootstrapServers(), txnId,
                prepared.toString(), action, requested)) {
            String line = child.awaitLine("", CHILD_TIMEOUT);
            while (!line.startsWith("OUTCOME") && !line.startsWith("ERROR")) {
                line = child.awaitLine("", CHILD_TIMEOUT);
            }
            return line;
        }
    }

    String topic(String prefix) {
        String topic = EmbeddedKafkaCluster.uniqueName(prefix);
        kafka().createTopic(topic, 2);
        return topic;
    }

    @Test
    void preparedInADeadProcessCommitsFromAnother() {
        String topic = topic("resume-commit");
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-resume-commit");
        PreparedTransaction prepared = prepareInChildAndKill(txnId, topic, 5, 60_000);
        assertThat(readCommitted(kafka(), topic)).isEmpty();
        assertThat(completeInChild(txnId, prepared, "commit", "")).isEqualTo("OUTCOME COMMITTED");
        assertThat(values(readCommitted(kafka(), topic))).containsExactlyInAnyOrder(txnId + "-0", txnId + "-1",
                txnId + "-2", txnId + "-3", txnId + "-4");
    }

    @Test
    void preparedInADeadProcessAbortsFromAnother() {
        String topic = topic("resume-abort");
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-resume-abort");
        PreparedTransaction prepared = prepareInChildAndKill(txnId, topic, 5, 60_000);
        assertThat(completeInChild(txnId, prepared, "abort", "")).isEqualTo("OUTCOME ABORTED");
        assertThat(readCommitted(kafka(), topic)).isEmpty();
        assertOpenTransactionIsGone(txnId);
    }

    @Test
    void completeWithTheMatchingStateCommitsOnceEvenWhenRepeated() {
        String topic = topic("resume-complete");
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-resume-complete");
        PreparedTransaction prepared = prepareInChildAndKill(txnId, topic, 3, 60_000);
        assertThat(completeInChild(txnId, prepared, "complete", prepared.toString()))
            .isEqualTo("OUTCOME COMMITTED");
        // a second process completes the same transaction again
        assertThat(completeInChild(txnId, prepared, "complete", prepared.toString()))
            .isEqualTo("OUTCOME ALREADY_COMMITTED");
        // and a retry in this process
        try (TransactionSession again = TransactionSession.resume(txnId, prepared, clientConfigs())) {
            assertThat(again.completeTransaction(prepared)).isEqualTo(CompletionOutcome.ALREADY_COMMITTED);
        }
        try (TransactionSession again = TransactionSession.resume(txnId, prepared, clientConfigs())) {
            again.commitTransaction();
            assertThat(again.state()).isEqualTo(SessionState.READY);
        }
        assertThat(readCommitted(kafka(), topic)).hasSize(3);
    }

    @Test
    void completeWithAMismatchedStateAborts() {
        String topic = topic("resume-mismatch");
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-resume-mismatch");
        PreparedTransaction prepared = prepareInChildAndKill(txnId, topic, 3, 60_000);
        PreparedTransaction other = PreparedTransaction.of(prepared.producerId(), (short) (prepared.epoch() + 7),
                prepared.startTimeMs());
        assertThat(completeInChild(txnId, prepared, "complete", other.toString())).isEqualTo("OUTCOME ABORTED");
        assertThat(readCommitted(kafka(), topic)).isEmpty();
        assertOpenTransactionIsGone(txnId);
    }

    @Test
    void wrongIdentityIsRejectedAndTouchesNothing() {
        String topic = topic("resume-wrong");
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-resume-wrong");
        PreparedTransaction prepared = prepareInChildAndKill(txnId, topic, 2, 60_000);
        assertThatThrownBy(() -> TransactionSession.resume(txnId, prepared.producerId(),
                (short) (prepared.epoch() + 5), clientConfigs()))
            .isInstanceOf(TransactionIdentityMismatchException.class)
            .hasMessageContaining("epoch " + (prepared.epoch() + 5))
            .hasMessageContaining("No transaction was touched");
        assertThatThrownBy(() -> TransactionSession.resume(txnId, prepared.producerId() + 1000, prepared.epoch(),
                clientConfigs()))
            .isInstanceOf(TransactionIdentityMismatchException.class)
            .hasMessageContaining("producerId " + (prepared.producerId() + 1000));
        assertThatThrownBy(() -> TransactionSession.resume(txnId + "-unknown", prepared, clientConfigs()))
            .isInstanceOf(TransactionIdentityMismatchException.class)
            .hasMessageContaining("does not know transactional.id");
        // nothing was touched: the prepared transaction is still open and commits
        assertThat(describe(txnId).state().toString()).isEqualToIgnoringCase("ONGOING");
        assertThat(readCommitted(kafka(), topic)).isEmpty();
        try (TransactionSession session = TransactionSession.resume(txnId, prepared, clientConfigs())) {
            assertThat(session.completeTransaction(prepared)).isEqualTo(CompletionOutcome.COMMITTED);
        }
        assertThat(readCommitted(kafka(), topic)).hasSize(2);
    }

    @Test
    void resumedSessionOnlyFinishes() {
        String topic = topic("resume-only");
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-resume-only");
        PreparedTransaction prepared = prepareInChildAndKill(txnId, topic, 1, 60_000);
        try (TransactionSession session = TransactionSession.resume(txnId, prepared, clientConfigs())) {
            assertThat(session.isResumed()).isTrue();
            assertThat(session.state()).isEqualTo(SessionState.PREPARED);
            assertThat(session.producerId()).isEqualTo(prepared.producerId());
            assertThat(session.producerEpoch()).isEqualTo(prepared.epoch());
            assertThatIllegalStateException().isThrownBy(session::beginTransaction)
                .withMessageContaining("PREPARED");
            assertThatIllegalStateException()
                .isThrownBy(() -> new SessionProducer<>(session, new StringSerializer(), new StringSerializer()))
                .withMessageContaining("resumed").withMessageContaining("Only commitTransaction()");
            assertThatIllegalStateException().isThrownBy(session::prepareTransaction)
                .withMessageContaining("PREPARED");
            session.heartbeat(); // still open
            session.abortTransaction();
            assertThat(session.state()).isEqualTo(SessionState.READY);
        }
    }

    @Test
    void livePrepareAndCompleteInOneProcess() {
        String topic = topic("live-complete");
        String txnId = EmbeddedKafkaCluster.uniqueName("tx-live-complete");
        Map<String, Object> configs = TestClients.sessionConfigs(kafka(), txnId);
        try (TransactionSession session = TransactionSession.open(configs)) {
            session.initialize();
            SessionProducer<String, String> producer = new SessionProducer<>(session, new StringSerializer(),
                    new StringSerializer());
            session.beginTransaction();
            producer.send(new ProducerRecord<>(topic, "k", "one"));
            PreparedTransaction state = session.prepareTransaction();
            assertThat(state.producerId()).isEqualTo(session.producerId());
            assertThat(state.epoch()).isEqualTo(session.producerEpoch());
            assertThat(session.state()).isEqualTo(SessionState.PREPARED);
            session.heartbeat();
            assertThatIllegalStateException().isThrownBy(() -> producer.send(new ProducerRecord<>(topic, "x")))
                .withMessageContaining("PREPARED");
            assertThat(session.completeTransaction(state)).isEqualTo(CompletionOutcome.COMMITTED);

            session.beginTransaction();
            producer.send(new ProducerRecord<>(topic, "k", "two"));
            PreparedTransaction second = session.prepareTransaction();
            // the start time tells the two transactions apart, with transaction version 1 too (same epoch there)
            assertThat(second).isNotEqualTo(state);
            assertThat(second.startTimeMs()).isGreaterThanOrEqualTo(state.startTimeMs());
            if (!epochBumpsPerTransaction()) {
                assertThat(second.epoch()).isEqualTo(state.epoch());
            }
            PreparedTransaction stale = state;
            assertThat(session.completeTransaction(stale)).as("stale state").isEqualTo(CompletionOutcome.ABORTED);
        }
        assertThat(values(readCommitted(kafka(), topic))).containsExactly("one");
    }

    void assertOpenTransactionIsGone(String txnId) {
        assertThat(describe(txnId).state().toString()).isNotEqualToIgnoringCase("ONGOING");
    }

    org.apache.kafka.clients.admin.TransactionDescription describe(String txnId) {
        try {
            return kafka().admin().describeTransactions(List.of(txnId)).description(txnId).get();
        }
        catch (Exception ex) {
            throw new AssertionError(ex);
        }
    }
}
