package io.github.txnsession.kafka;

import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A resumed session is cheap: it starts no thread and allocates no producer buffer pool. The allocation figures are
 * printed for the record; the benchmarks module measures them properly.
 */
class ResumedSessionFootprintTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    @Test
    void resumeAndCommitStartNoThreadAndAllocateFarLessThanAProducer() {
        String topic = EmbeddedKafkaCluster.uniqueName("footprint");
        kafka.cluster().createTopic(topic, 1);
        for (int i = 0; i < 3; i++) { // load classes and warm up outside the measurement
            String warmupId = EmbeddedKafkaCluster.uniqueName("tx-footprint-warmup");
            PreparedTransaction warmup = prepareAndAbandon(warmupId, topic);
            long t0 = allocatedBytes();
            commitResumed(warmupId, warmup);
            System.out.printf("FOOTPRINT warm-up %d: %d bytes%n", i, allocatedBytes() - t0);
        }

        String txnId = EmbeddedKafkaCluster.uniqueName("tx-footprint");
        PreparedTransaction prepared = prepareAndAbandon(txnId, topic);
        Set<Long> threadsBefore = liveThreadIds();
        long before = allocatedBytes();
        TransactionSession session = TransactionSession.resume(txnId, prepared,
                Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers()));
        CompletionOutcome outcome = session.completeTransaction(prepared);
        long resumedBytes = allocatedBytes() - before;
        assertThat(outcome).isEqualTo(CompletionOutcome.COMMITTED);
        Set<String> newThreads = Thread.getAllStackTraces().keySet().stream()
            .filter(t -> t.isAlive() && !threadsBefore.contains(t.getId()))
            .map(Thread::getName)
            .filter(n -> n.contains("kafka-") || n.contains("txn-session") || n.contains("producer"))
            .collect(Collectors.toSet());
        session.close();
        assertThat(newThreads).as("client threads started by resume + commit").isEmpty();

        long producerBefore = allocatedBytes();
        Map<String, Object> configs = new HashMap<>();
        configs.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
        configs.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, EmbeddedKafkaCluster.uniqueName("tx-footprint-producer"));
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(configs, new ByteArraySerializer(),
                new ByteArraySerializer())) {
            producer.initTransactions();
            long producerBytes = allocatedBytes() - producerBefore;
            System.out.printf("FOOTPRINT resume+commit: %d bytes allocated on the calling thread, 0 threads; "
                    + "KafkaProducer+initTransactions: %d bytes on the calling thread (+ a 32 MiB buffer pool "
                    + "reserved lazily and a sender thread)%n", resumedBytes, producerBytes);
            assertThat(resumedBytes).as("bytes allocated by resume+commit").isLessThan(producerBytes);
        }
    }

    private static PreparedTransaction prepareAndAbandon(String txnId, String topic) {
        TransactionSession session = TransactionSession.open(TestClients.sessionConfigs(kafka.cluster(), txnId));
        session.initialize();
        session.beginTransaction();
        new SessionProducer<>(session, new StringSerializer(), new StringSerializer())
            .send(new ProducerRecord<>(topic, "k", "v"));
        PreparedTransaction state = session.prepareTransaction();
        // abandon without aborting: close the producer without waiting, as a crash would leave it
        KafkaTransactionSession.of(session).liveProducer().close(Duration.ZERO);
        return state;
    }

    private static void commitResumed(String txnId, PreparedTransaction prepared) {
        try (TransactionSession s = TransactionSession.resume(txnId, prepared,
                Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers()))) {
            s.commitTransaction();
        }
    }

    private static Set<Long> liveThreadIds() {
        return Thread.getAllStackTraces().keySet().stream().map(Thread::getId).collect(Collectors.toSet());
    }

    private static long allocatedBytes() {
        return ((com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean()).getCurrentThreadAllocatedBytes();
    }
}
