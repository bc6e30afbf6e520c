package io.github.txnsession.boot;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.boot.WebApplicationType;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;

import static io.github.txnsession.boot.CommittedReader.readThroughMarker;
import static io.github.txnsession.boot.CommittedReader.valuesOfKey;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * A Kafka-only {@code @KafkaListener} application restarted after a crash: its predecessor died in the middle of a
 * transaction that had sent the group's offsets, on a transactional id the restarted application does not use soon
 * (the pool initializes ids lazily). Kafka keeps those offsets pending, and the output partition's last stable offset
 * held, until that transaction ends: without the pool's startup abort, the restarted consumers could not read their
 * committed offsets (nor a {@code read_committed} reader the output) until the transaction timeout. Here that timeout
 * is 5 minutes and the output must come within the reader's 30 s.
 */
class RestartAfterCrashTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    @Test
    void aRestartedListenerDoesNotWaitForThePredecessorsOpenTransaction() throws Exception {
        String prefix = "restart-";
        String in = prefix + "in";
        String out = prefix + "out";
        String group = prefix + "group";
        kafka.cluster().createTopics(1, in, out);
        Map<String, Object> configs = new HashMap<>(kafka.cluster().clientConfigs());
        try (KafkaProducer<String, String> feeder = new KafkaProducer<>(configs, new StringSerializer(),
                new StringSerializer())) {
            feeder.send(new ProducerRecord<>(in, 0, "k1", "a")).get();
        }
        // the crashed predecessor: pool id 3, a record out and the group's offset past "a", never committed
        configs.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, prefix + "3");
        configs.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 300_000);
        try (KafkaProducer<String, String> crashed = new KafkaProducer<>(configs, new StringSerializer(),
                new StringSerializer())) {
            crashed.initTransactions();
            crashed.beginTransaction();
            crashed.send(new ProducerRecord<>(out, 0, "k1", "orphan")).get();
            crashed.sendOffsetsToTransaction(Map.of(new TopicPartition(in, 0), new OffsetAndMetadata(1)),
                    new ConsumerGroupMetadata(group));
            crashed.flush();

            try (ConfigurableApplicationContext context = new SpringApplicationBuilder(ListenerBrokerBounceTest.App.class)
                .web(WebApplicationType.NONE)
                .properties("spring.main.banner-mode=off", CommittedReader.KAFKA_ONLY,
                        "spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                        "spring.kafka.consumer.auto-offset-reset=earliest",
                        "spring.kafka.consumer.isolation-level=read-committed",
                        "listener.in=" + in, "listener.out=" + out, "listener.group=" + group,
                        "kafka.txn-session.transactional-id-prefix=" + prefix, "kafka.txn-session.pool-size=4")
                .run()) {
                List<ConsumerRecord<String, String>> output = readThroughMarker(kafka.bootstrapServers(), out, "k1");
                assertThat(valuesOfKey(output, "k1")).containsExactly("out-a");
            }
        }
    }
}
