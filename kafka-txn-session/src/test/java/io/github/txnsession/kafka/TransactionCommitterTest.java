package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static io.github.txnsession.kafka.TestClients.readCommitted;
import static io.github.txnsession.kafka.TestClients.values;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalArgumentException;
import static org.assertj.core.api.Assertions.assertThatIllegalStateException;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * One long-lived {@link TransactionCommitter} completing transactions that producers left open, against a real
 * broker: many ids, retries, a stale identity next to a later open transaction, aborts, a fenced transaction.
 */
class TransactionCommitterTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    private static EmbeddedKafkaCluster cluster() {
        return kafka.cluster();
    }

    /** Leaves an open transaction with one record on {@code txnId}, as a preparer that went away would. */
    private static PreparedTransaction leaveOpen(String txnId, String topic, String value) throws Exception {
        Map<String, Object> c = cluster().clientConfigs();
        c.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        KafkaProducer<String, String> p = new KafkaProducer<>(c, new StringSerializer(), new StringSerializer());
        try {
            p.initTransactions();
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, "k", value)).get(10, TimeUnit.SECONDS);
            TransactionDescription d = describe(txnId);
            assertThat(d.state()).isEqualTo(TransactionState.ONGOING);
            return PreparedTransaction.of(d.producerId(), (short) d.producerEpoch(), d.transactionStartTimeMs().orElse(-1));
        }
        finally {
            p.close(Duration.ZERO); // leaves the transaction open
        }
    }

    private static TransactionDescription describe(String txnId) throws Exception {
        return cluster().admin().describeTransactions(List.of(txnId)).description(txnId).get(10, TimeUnit.SECONDS);
    }

    @Test
    void oneCommitterCompletesTransactionsOfManyIdsAndNeverALaterOne() throws Exception {
        String topic = EmbeddedKafkaCluster.uniqueName("committer-out");
        cluster().createTopic(topic, 1);
        List<String> ids = List.of(EmbeddedKafkaCluster.uniqueName("tx-c0"), EmbeddedKafkaCluster.uniqueName("tx-c1"),
                EmbeddedKafkaCluster.uniqueName("tx-c2"));
        try (TransactionCommitter committer = TransactionCommitter.create(cluster().clientConfigs())) {
            for (int round = 0; round < 2; round++) {
                for (String id : ids) {
                    PreparedTransaction p = leaveOpen(id, topic, id + "-" + round);
                    assertThat(committer.commit(id, p)).isEqualTo(CompletionOutcome.COMMITTED);
                    // a retried commit (a committer that restarted) changes nothing and reports it committed
                    assertThat(committer.commit(id, p)).isIn(CompletionOutcome.COMMITTED,
                            CompletionOutcome.ALREADY_COMMITTED);
                }
            }
            String id = ids.get(0);
            PreparedTransaction stale = leaveOpen(id, topic, "stale");
            assertThat(committer.commit(id, stale)).isEqualTo(CompletionOutcome.COMMITTED);
            PreparedTransaction later = leaveOpen(id, topic, "later");
            // the stale identity's EndTxn must not touch the later open transaction
            assertThatThrownBy(() -> committer.commit(id, stale)).isInstanceOf(TransactionSupersededException.class);
            assertThat(describe(id).state()).isEqualTo(TransactionState.ONGOING);
            assertThat(committer.abort(id, later)).isEqualTo(CompletionOutcome.ABORTED);
            assertThatThrownBy(() -> committer.abort(id, stale)).isInstanceOf(TransactionSessionException.class);
            assertThat(committer.commit(id, PreparedTransaction.empty(1, (short) 1)))
                .isEqualTo(CompletionOutcome.EMPTY);

            // a transaction a fencing producer aborted is never reported committed
            PreparedTransaction fenced = leaveOpen(ids.get(1), topic, "fenced");
            Map<String, Object> c = cluster().clientConfigs();
            c.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, ids.get(1));
            try (KafkaProducer<String, String> successor = new KafkaProducer<>(c, new StringSerializer(),
                    new StringSerializer())) {
                successor.initTransactions();
            }
            assertThatThrownBy(() -> committer.commit(ids.get(1), fenced))
                .isInstanceOfAny(TransactionLostException.class, TransactionSupersededException.class);

            assertThatIllegalArgumentException().isThrownBy(() -> committer.commit(" ", stale))
                .withMessageContaining("blank");
        }
        List<String> expected = new java.util.ArrayList<>();
        for (int round = 0; round < 2; round++) {
            for (String id : ids) {
                expected.add(id + "-" + round);
            }
        }
        expected.add("stale");
        assertThat(values(readCommitted(cluster(), topic))).containsExactlyElementsOf(expected);
    }

    @Test
    void aCoordinatorThatDoesNotAnswerIsATimeoutWithAnUnknownOutcome() {
        Map<String, Object> unreachable = Map.of("bootstrap.servers", "127.0.0.1:1",
                TransactionSessionConfig.COORDINATOR_TIMEOUT_MS, 300);
        try (TransactionCommitter committer = TransactionCommitter.create(unreachable)) {
            assertThatThrownBy(() -> committer.commit("tx-unreachable", PreparedTransaction.of(1, (short) 1, 5)))
                .isInstanceOf(SessionTimeoutException.class)
                .hasMessageContaining("tx-unreachable");
        }
    }

    @Test
    void aClosedCommitterSaysSo() {
        TransactionCommitter committer = TransactionCommitter.create(cluster().clientConfigs());
        committer.close();
        assertThatIllegalStateException()
            .isThrownBy(() -> committer.commit("tx", PreparedTransaction.of(1, (short) 1, 5)))
            .withMessageContaining("closed");
        assertThat(committer).hasToString("TransactionCommitter[closed]");
    }
}
