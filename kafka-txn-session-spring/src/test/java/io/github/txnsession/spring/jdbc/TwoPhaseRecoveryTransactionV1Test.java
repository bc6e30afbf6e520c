package io.github.txnsession.spring.jdbc;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import javax.sql.DataSource;

import io.github.txnsession.kafka.SessionFencedException;
import io.github.txnsession.kafka.SessionProducer;
import io.github.txnsession.kafka.SessionState;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.PooledSession;
import io.github.txnsession.spring.TransactionSessionPool;
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
        Fixture f = new Fixture();
        try (TransactionSession predecessor = f.predecessorWithAnOpenTransaction()) {
            // the predecessor pauses here; a new instance starts and recovers: no decision row for the id
            TwoPhaseRecovery recovery = new TwoPhaseRecovery(f.dataSource, f.log, f.prefix, 1,
                    f.cluster.clientConfigs(), null);
            assertThat(recovery.recover().aborted()).containsExactly(f.prefix + "0");
            f.assertFenced(predecessor);
        }
        assertThat(f.cluster.readCommitted(f.topic)).isEmpty();
    }

    /** As the starter wires it: recovery over the application's pool, which has no session on the id yet. */
    @Test
    void recoveryOverThePoolFencesTooWhileThePoolHasNoSessionOnTheId() throws Exception {
        Fixture f = new Fixture();
        try (TransactionSession predecessor = f.predecessorWithAnOpenTransaction();
                TransactionSessionPool pool = new TransactionSessionPool(f.prefix, 1, Duration.ofSeconds(5),
                        f.sessionConfigs(), List.of())) {
            TwoPhaseRecovery recovery = new TwoPhaseRecovery(f.dataSource, f.log, pool, null);
            assertThat(recovery.recover().aborted()).containsExactly(f.prefix + "0");
            f.assertFenced(predecessor);
            // the pool's own first session on the id works
            PooledSession lent = pool.acquire();
            try {
                lent.session().beginTransaction();
                new SessionProducer<>(lent.session(), new StringSerializer(), new StringSerializer())
                    .send(new ProducerRecord<>(f.topic, "k", "pool")).get();
                lent.session().commitTransaction();
            }
            finally {
                lent.release();
            }
        }
        assertThat(f.cluster.readCommitted(f.topic)).extracting(r -> r.value()).containsExactly("pool");
    }

    /** One test's cluster view, database, prefix and output topic. */
    private static final class Fixture {
        final EmbeddedKafkaCluster cluster = kafka.cluster();
        final String topic = EmbeddedKafkaCluster.uniqueName("v1-recovery");
        final DataSource dataSource = new SimpleDriverDataSource(new org.h2.Driver(), "jdbc:h2:mem:"
                + EmbeddedKafkaCluster.uniqueName("v1rec") + ";DB_CLOSE_DELAY=-1", "sa", "");
        final DecisionLog log = new DecisionLog();
        final String prefix = EmbeddedKafkaCluster.uniqueName("v1rec") + "-";

        Fixture() {
            assertThat(this.cluster.transactionVersion()).isEqualTo(1);
            this.cluster.createTopic(this.topic, 1);
            this.log.createTableIfMissing(this.dataSource);
        }

        Map<String, Object> sessionConfigs() {
            Map<String, Object> configs = new HashMap<>(this.cluster.clientConfigs());
            configs.put("session.close.timeout.ms", 2000);
            return configs;
        }

        /** A producer of id 0 with a transaction that wrote and is still open. */
        TransactionSession predecessorWithAnOpenTransaction() throws Exception {
            Map<String, Object> configs = sessionConfigs();
            configs.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, this.prefix + "0");
            TransactionSession predecessor = TransactionSession.open(configs);
            predecessor.initialize();
            predecessor.beginTransaction();
            new SessionProducer<>(predecessor, new StringSerializer(), new StringSerializer())
                .send(new ProducerRecord<>(this.topic, "k", "aborted-by-recovery")).get();
            return predecessor;
        }

        /**
         * The predecessor goes on: it aborts its transaction (its database side rolled back, say), to start the next
         * one. Fenced, that abort fails; after a bare abort (no fence) the epoch would still be the coordinator's,
         * the abort would pass as a retry of recovery's, and the next transaction would commit.
         */
        void assertFenced(TransactionSession predecessor) {
            assertThatThrownBy(predecessor::abortTransaction).isInstanceOf(SessionFencedException.class);
            assertThat(predecessor.state()).isEqualTo(SessionState.FATAL_ERROR);
        }
    }
}
