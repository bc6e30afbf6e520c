package io.github.txnsession.spring.jdbc;

import java.util.HashMap;
import java.util.Map;

import javax.sql.DataSource;

import io.github.txnsession.kafka.SessionProducer;
import io.github.txnsession.kafka.SessionState;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.TransactionSessionException;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.jdbc.datasource.SimpleDriverDataSource;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Recovery on a cluster with transaction version 1, where an abort keeps the producer epoch: after aborting the
 * transaction a paused predecessor left open (no decision row), recovery must also fence that predecessor, or it could
 * go on under the same epoch and commit new transactions on an id recovery considers settled.
 */
class TwoPhaseRecoveryTransactionV1Test {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(b -> b.feature("transaction.version", 1));

    @Test
    void recoveryFencesThePredecessorWhoseOpenTransactionItAborted() throws Exception {
        EmbeddedKafkaCluster cluster = kafka.cluster();
        assertThat(cluster.transactionVersion()).isEqualTo(1);
        String topic = EmbeddedKafkaCluster.uniqueName("v1-recovery");
        cluster.createTopic(topic, 1);
        DataSource dataSource = new SimpleDriverDataSource(new org.h2.Driver(), "jdbc:h2:mem:"
                + EmbeddedKafkaCluster.uniqueName("v1rec") + ";DB_CLOSE_DELAY=-1", "sa", "");
        DecisionLog log = new DecisionLog();
        log.createTableIfMissing(dataSource);
        String prefix = EmbeddedKafkaCluster.uniqueName("v1rec") + "-";
        Map<String, Object> configs = new HashMap<>(cluster.clientConfigs());
        configs.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, prefix + "0");
        configs.put("session.close.timeout.ms", 2000);
        try (TransactionSession predecessor = TransactionSession.open(configs)) {
            predecessor.initialize();
            SessionProducer<String, String> producer = new SessionProducer<>(predecessor, new StringSerializer(),
                    new StringSerializer());
            predecessor.beginTransaction();
            producer.send(new ProducerRecord<>(topic, "k", "aborted-by-recovery"));
            producer.flush();
            // the predecessor pauses here; a new instance starts and recovers: no decision row for the id
            TwoPhaseRecovery recovery = new TwoPhaseRecovery(dataSource, log, prefix, 1, cluster.clientConfigs(), null);
            RecoveryReport report = recovery.recover();
            assertThat(report.aborted()).containsExactly(prefix + "0");
            // the predecessor goes on: it aborts its transaction (its database side rolled back, say) and starts
            // the next one under its epoch; with a bare abort (no fence) that epoch is still the coordinator's, so the
            // abort is taken as a retry and the next transaction commits
            try {
                predecessor.abortTransaction();
            }
            catch (TransactionSessionException fenced) {
                // the abort's EndTxn carries the fenced epoch
            }
            if (predecessor.state() == SessionState.READY) {
                predecessor.beginTransaction();
                producer.send(new ProducerRecord<>(topic, "k", "after-recovery"));
                assertThatThrownBy(predecessor::commitTransaction).isInstanceOf(TransactionSessionException.class);
            }
            assertThat(predecessor.state()).isIn(SessionState.FATAL_ERROR, SessionState.ABORTABLE_ERROR);
        }
        assertThat(cluster.readCommitted(topic)).isEmpty();
    }
}
