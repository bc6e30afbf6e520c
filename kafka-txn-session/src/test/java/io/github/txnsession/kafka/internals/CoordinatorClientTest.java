package io.github.txnsession.kafka.internals;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The coordinator client of resumed sessions and of {@code TransactionCommitter}: its memory of coordinators stays
 * bounded (least recently used dropped, and a dropped one is found again), and a close racing calls in progress ends
 * them with an error instead of a hang.
 */
class CoordinatorClientTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    @Test
    void remembersAtMostItsLimitOfCoordinatorsAndFindsADroppedOneAgain() {
        String first = EmbeddedKafkaCluster.uniqueName("cc-lru");
        initialize(first);
        try (CoordinatorClient client = new CoordinatorClient(kafka.cluster().clientConfigs(), 2)) {
            assertThat(client.describe(first, Duration.ofSeconds(30))).isPresent();
            client.describe(EmbeddedKafkaCluster.uniqueName("cc-lru-b"), Duration.ofSeconds(30));
            assertThat(client.knownCoordinatorCount()).isEqualTo(2);
            client.describe(first, Duration.ofSeconds(30)); // used again: now the most recent
            client.describe(EmbeddedKafkaCluster.uniqueName("cc-lru-c"), Duration.ofSeconds(30));
            assertThat(client.knownCoordinatorCount()).isEqualTo(2);
            assertThat(client.knowsCoordinatorOf(first)).as("the most recently used one stays").isTrue();
            for (int i = 0; i < 5; i++) {
                client.describe(EmbeddedKafkaCluster.uniqueName("cc-lru-more"), Duration.ofSeconds(30));
            }
            assertThat(client.knownCoordinatorCount()).isEqualTo(2);
            assertThat(client.knowsCoordinatorOf(first)).isFalse();
            // dropped: found again, and the transaction is still described
            assertThat(client.describe(first, Duration.ofSeconds(30))).hasValueSatisfying(
                    d -> assertThat(d.transactionalId()).isEqualTo(first));
            assertThat(client.knowsCoordinatorOf(first)).isTrue();
        }
    }

    @Test
    @Timeout(120)
    void closeRacingCallsEndsThemWithAnError() throws Exception {
        String id = EmbeddedKafkaCluster.uniqueName("cc-close");
        initialize(id);
        CoordinatorClient client = new CoordinatorClient(kafka.cluster().clientConfigs());
        AtomicInteger described = new AtomicInteger();
        CountDownLatch running = new CountDownLatch(1);
        CompletableFuture<Throwable> caller = CompletableFuture.supplyAsync(() -> {
            try {
                while (true) {
                    client.describe(id, Duration.ofSeconds(30));
                    described.incrementAndGet();
                    running.countDown();
                }
            }
            catch (RuntimeException ex) {
                return ex;
            }
        });
        try {
            assertThat(running.await(30, TimeUnit.SECONDS)).isTrue();
        }
        finally {
            client.close(); // waits for the request in flight at most; the caller's next one fails
        }
        Throwable ended = caller.get(30, TimeUnit.SECONDS);
        assertThat(ended).isInstanceOf(KafkaException.class).hasMessageContaining("closed");
        assertThat(described.get()).isPositive();
        client.close(); // again: nothing
        assertThatThrownBy(() -> client.describe(id, Duration.ofSeconds(1))).isInstanceOf(KafkaException.class)
            .hasMessageContaining("closed");
    }

    /**
     * Without transport security only the keys the client reads are parsed: each must read as the admin client reads
     * it, reconnect back-off adjustment included (the max follows reconnect.backoff.ms when only that one is set).
     */
    @Test
    void theKeysItReadsParseAsTheAdminClientParsesThem() {
        List<Map<String, Object>> variants = List.of(Map.of(), Map.of("reconnect.backoff.ms", 10),
                Map.of("reconnect.backoff.ms", 5000),
                Map.of("reconnect.backoff.ms", 10, "reconnect.backoff.max.ms", 40),
                Map.of("security.protocol", " plaintext ", "request.timeout.ms", "1234", "send.buffer.bytes", -1),
                Map.of("client.dns.lookup", "resolve_canonical_bootstrap_servers_only",
                        "metadata.recovery.strategy", "none", "connections.max.idle.ms", 777));
        for (Map<String, Object> variant : variants) {
            Map<String, Object> configs = new HashMap<>(variant);
            configs.put("bootstrap.servers", "localhost:9092");
            AbstractConfig ours = CoordinatorClient.parse(configs);
            AdminClientConfig admin = new AdminClientConfig(configs);
            for (String key : List.of("bootstrap.servers", "client.dns.lookup", "request.timeout.ms",
                    "connections.max.idle.ms", "reconnect.backoff.ms", "reconnect.backoff.max.ms",
                    "send.buffer.bytes", "receive.buffer.bytes", "socket.connection.setup.timeout.ms",
                    "socket.connection.setup.timeout.max.ms", "metadata.recovery.rebootstrap.trigger.ms",
                    "metadata.recovery.strategy", "security.protocol", "sasl.mechanism")) {
                assertThat(ours.values().get(key)).as("%s with %s", key, variant).isEqualTo(admin.values().get(key));
            }
        }
        assertThat(CoordinatorClient.parse(new HashMap<>(Map.of("bootstrap.servers", "localhost:9092",
                "security.protocol", "SASL_PLAINTEXT")))).isInstanceOf(AdminClientConfig.class);
    }

    /** Gives {@code transactionalId} a state at its coordinator (initTransactions). */
    private static void initialize(String transactionalId) {
        Map<String, Object> configs = kafka.cluster().clientConfigs();
        configs.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(configs, new StringSerializer(),
                new StringSerializer())) {
            producer.initTransactions();
        }
    }
}
