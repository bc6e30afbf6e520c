package io.github.txnsession.boot;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Collectors;

import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.CurrentTransactionSession;
import io.github.txnsession.spring.SessionTransactionManager;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.config.KafkaListenerEndpointRegistry;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.listener.MessageListenerContainer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * A plain {@code @KafkaListener} in Boot's listener container, with the starter's transaction manager picked up by
 * Boot's container factory: consume, transform, produce 500 records with failures injected after the output was
 * sent. Each input must appear exactly once in the committed output, and the group's offsets must reach the end
 * through the session transactions.
 */
class KafkaListenerExactlyOnceTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    static final String IN = "eos-in";
    static final String OUT = "eos-out";
    static final String GROUP = "eos-group";
    static final int RECORDS = 500;
    /** every input whose number is a multiple of this fails on its first delivery, after producing */
    static final int FAIL_EVERY = 25;

    static ConfigurableApplicationContext context;

    @BeforeAll
    static void start() {
        kafka.cluster().createTopics(3, IN, OUT);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(kafka.cluster().clientConfigs(),
                new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < RECORDS; i++) {
                producer.send(new ProducerRecord<>(IN, String.format("k-%03d", i), "order-" + i));
            }
        }
        context = new SpringApplicationBuilder(App.class)
            .web(WebApplicationType.NONE)
            .properties("spring.main.banner-mode=off", CommittedReader.KAFKA_ONLY,
                    "spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                    "spring.kafka.consumer.auto-offset-reset=earliest",
                    "spring.kafka.consumer.isolation-level=read-committed",
                    "spring.kafka.listener.concurrency=3",
                    "kafka.txn-session.transactional-id-prefix=eos-test-",
                    "kafka.txn-session.pool-size=4")
            .run();
    }

    @AfterAll
    static void stop() {
        if (context != null) {
            context.close();
        }
    }

    @Test
    void eachRecordExactlyOnceWithOffsetsInTheTransaction() throws Exception {
        MessageListenerContainer container = context.getBean(KafkaListenerEndpointRegistry.class)
            .getListenerContainer("eos");
        assertThat(container).isNotNull();
        assertThat(container.getContainerProperties().getKafkaAwareTransactionManager())
            .isInstanceOf(SessionTransactionManager.class);

        Admin admin = kafka.cluster().admin();
        await().atMost(Duration.ofSeconds(90)).pollInterval(Duration.ofMillis(200)).until(() -> {
            Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(GROUP)
                .partitionsToOffsetAndMetadata().get();
            return offsets.values().stream().mapToLong(OffsetAndMetadata::offset).sum() == RECORDS;
        });

        List<ConsumerRecord<String, String>> committed = CommittedReader.readToEnd(kafka.bootstrapServers(), OUT,
                true);
        Map<String, Long> perKey = committed.stream()
            .collect(Collectors.groupingBy(ConsumerRecord::key, Collectors.counting()));
        assertThat(perKey).hasSize(RECORDS);
        assertThat(perKey.values()).allMatch(n -> n == 1L);
        assertThat(committed).allMatch(r -> r.value().equals("ORDER-" + Integer.parseInt(r.key().substring(2))));

        // the failed deliveries did reach the log, and were aborted: read_uncommitted sees them
        int injected = RECORDS / FAIL_EVERY;
        List<ConsumerRecord<String, String>> everything = CommittedReader.readToEnd(kafka.bootstrapServers(), OUT,
                false);
        assertThat(everything).hasSizeGreaterThanOrEqualTo(RECORDS + injected);
        Listener listener = context.getBean(Listener.class);
        assertThat(listener.failedOnce()).hasSize(injected);
        assertThat(listener.sessionsUsed()).allMatch(id -> id.startsWith("eos-test-"));
    }

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class App {

        @Bean
        Listener listener(KafkaTemplate<Object, Object> template, CurrentTransactionSession current) {
            return new Listener(template, current);
        }
    }

    /** The application's listener: no transaction code at all. */
    static class Listener {

        private final KafkaTemplate<Object, Object> template;
        private final CurrentTransactionSession current;
        private final Map<String, Integer> attempts = new ConcurrentHashMap<>();
        private final Set<String> failedOnce = ConcurrentHashMap.newKeySet();
        private final Set<String> sessionsUsed = ConcurrentHashMap.newKeySet();

        Listener(KafkaTemplate<Object, Object> template, CurrentTransactionSession current) {
            this.template = template;
            this.current = current;
        }

        @KafkaListener(id = "eos", topics = IN, groupId = GROUP)
        void onOrder(ConsumerRecord<String, String> record) {
            this.sessionsUsed.add(this.current.transactionalId());
            this.template.send(OUT, record.key(), record.value().toUpperCase());
            int attempt = this.attempts.merge(record.key(), 1, Integer::sum);
            if (attempt == 1 && Integer.parseInt(record.key().substring(2)) % FAIL_EVERY == 0) {
                this.template.flush(); // the output is in the log: only the abort can hide it
                this.failedOnce.add(record.key());
                throw new IllegalStateException("injected failure on " + record.key());
            }
        }

        Set<String> failedOnce() {
            return this.failedOnce;
        }

        Set<String> sessionsUsed() {
            return this.sessionsUsed;
        }
    }
}
