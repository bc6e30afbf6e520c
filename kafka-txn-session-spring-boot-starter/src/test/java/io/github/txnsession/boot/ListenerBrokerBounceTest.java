package io.github.txnsession.boot;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import io.github.txnsession.kafka.test.HangingTransactions;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
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
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.KafkaTemplate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * The starter's {@code @KafkaListener} consume-transform-produce path while brokers bounce (reliability issue R2, path
 * b): 3 brokers, replication 3, {@code min.insync.replicas=2}, brokers stopped without a controlled shutdown (their
 * leaderships and coordinators move only once the controller stops hearing from them) and restarted, one at a time,
 * while the input is produced. The listener has no transaction code: Boot's container runs it in the starter's
 * session transactions. Checked: every input exactly once and in order per partition in the output read with
 * {@code read_committed}, the group's offsets at the end, and no hanging transaction of the pool's ids.
 */
class ListenerBrokerBounceTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(b -> b.brokers(3)
        .brokerProperty("min.insync.replicas", 2)
        .brokerProperty("controlled.shutdown.enable", false));

    static final String IN = "bounce-listener-in";
    static final String OUT = "bounce-listener-out";
    static final String GROUP = "bounce-listener-group";
    static final String PREFIX = "bounce-listener-";
    static final int PARTITIONS = 4;
    static final int PER_PARTITION = 300;

    @Test
    void everyInputExactlyOnceThroughTheListenerWhileBrokersBounce() throws Exception {
        long seed = Long.getLong("txnsession.bounce.seed", System.nanoTime());
        Random random = new Random(seed);
        Admin admin = kafka.cluster().admin();
        admin.createTopics(List.of(new NewTopic(IN, PARTITIONS, (short) 3), new NewTopic(OUT, PARTITIONS, (short) 3)))
            .all().get();
        List<String> bounces = new ArrayList<>();
        ConfigurableApplicationContext context = new SpringApplicationBuilder(App.class)
            .web(WebApplicationType.NONE)
            .properties("spring.main.banner-mode=off", CommittedReader.KAFKA_ONLY,
                    "spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                    "spring.kafka.consumer.auto-offset-reset=earliest",
                    "spring.kafka.consumer.isolation-level=read-committed",
                    "spring.kafka.producer.properties.delivery.timeout.ms=20000",
                    "spring.kafka.producer.properties.request.timeout.ms=8000",
                    "spring.kafka.producer.properties.max.block.ms=10000",
                    "spring.kafka.listener.concurrency=2",
                    "kafka.txn-session.transactional-id-prefix=" + PREFIX,
                    "kafka.txn-session.pool-size=4")
            .run();
        Map<String, Object> producerConfigs = new HashMap<>(kafka.cluster().clientConfigs());
        producerConfigs.put(ProducerConfig.ACKS_CONFIG, "all");
        producerConfigs.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 120_000);
        try (context; KafkaProducer<String, String> feeder = new KafkaProducer<>(producerConfigs,
                new StringSerializer(), new StringSerializer())) {
            int sent = 0;
            long nextBounce = System.nanoTime();
            int turn = 0;
            while (sent < PARTITIONS * PER_PARTITION) {
                for (int p = 0; p < PARTITIONS; p++) {
                    feeder.send(new ProducerRecord<>(IN, p, "k" + p, "p" + p + "-" + (sent / PARTITIONS)));
                }
                sent += PARTITIONS;
                if (System.nanoTime() >= nextBounce) {
                    int broker = new ArrayList<>(kafka.cluster().brokerIds()).get(turn++ % 3);
                    awaitFullyReplicated(admin);
                    kafka.cluster().stopBroker(broker);
                    bounces.add(broker + "@" + sent);
                    Thread.sleep(500 + random.nextInt(1500)); // the broker stays down a while (load keeps coming)
                    kafka.cluster().restartBroker(broker);
                    nextBounce = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(1000 + random.nextInt(2000));
                }
                Thread.sleep(50); // pacing the input, not waiting for a condition
            }
            feeder.flush();
            await().atMost(Duration.ofSeconds(180)).pollInterval(Duration.ofMillis(500)).until(() -> {
                Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(GROUP)
                    .partitionsToOffsetAndMetadata().get();
                return offsets.values().stream().mapToLong(OffsetAndMetadata::offset).sum()
                        == (long) PARTITIONS * PER_PARTITION;
            });
        }
        finally {
            if (!kafka.cluster().stoppedBrokers().isEmpty()) {
                kafka.cluster().restartBrokers(kafka.cluster().stoppedBrokers());
            }
        }
        Map<Integer, List<String>> perPartition = new HashMap<>();
        for (ConsumerRecord<String, String> r : CommittedReader.readToEnd(kafka.bootstrapServers(), OUT, true)) {
            perPartition.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.value());
        }
        for (int p = 0; p < PARTITIONS; p++) {
            List<String> expected = new ArrayList<>();
            for (int i = 0; i < PER_PARTITION; i++) {
                expected.add("out-p" + p + "-" + i);
            }
            assertThat(perPartition.getOrDefault(p, List.of()))
                .as("partition %d: every input once, in order (seed %d, bounces %s)", p, seed, bounces)
                .containsExactlyElementsOf(expected);
        }
        List<TopicPartition> partitions = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            partitions.add(new TopicPartition(OUT, p));
        }
        partitions.addAll(HangingTransactions.offsetsTopicPartitions(admin));
        HangingTransactions.assertNone(admin, PREFIX.substring(0, PREFIX.length() - 1), partitions,
                Duration.ofSeconds(30));
        System.out.printf("listener broker bounces: %d records exactly once through %d bounces %s (seed %d)%n",
                PARTITIONS * PER_PARTITION, bounces.size(), bounces, seed);
        assertThat(bounces).hasSizeGreaterThanOrEqualTo(2);
    }

    private static void awaitFullyReplicated(Admin admin) {
        await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200)).until(() -> {
            try {
                return admin.describeTopics(List.of(IN, OUT, "__transaction_state", "__consumer_offsets"))
                    .allTopicNames().get(10, TimeUnit.SECONDS).values().stream()
                    .flatMap(d -> d.partitions().stream()).allMatch(p -> p.isr().size() == p.replicas().size());
            }
            catch (Exception notNow) {
                return false;
            }
        });
    }

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class App {

        @Bean
        Listener listener(KafkaTemplate<Object, Object> template) {
            return new Listener(template);
        }
    }

    /** The application's listener: no transaction code at all. */
    static class Listener {

        private final KafkaTemplate<Object, Object> template;

        Listener(KafkaTemplate<Object, Object> template) {
            this.template = template;
        }

        @KafkaListener(id = "bounce", topics = IN, groupId = GROUP)
        void onRecord(ConsumerRecord<String, String> record) {
            this.template.send(OUT, record.partition(), record.key(), "out-" + record.value());
        }
    }
}
