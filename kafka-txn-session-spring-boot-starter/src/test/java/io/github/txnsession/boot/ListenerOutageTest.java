package io.github.txnsession.boot;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;

import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.SessionAfterRollbackProcessor;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.config.KafkaListenerEndpointRegistry;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.listener.AbstractMessageListenerContainer;
import org.springframework.kafka.listener.AfterRollbackProcessor;
import org.springframework.kafka.listener.CommonErrorHandler;
import org.springframework.kafka.listener.DefaultAfterRollbackProcessor;
import org.springframework.kafka.listener.DefaultErrorHandler;
import org.springframework.util.backoff.FixedBackOff;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * A {@code @KafkaListener} in the starter's session transactions while the output topic cannot take writes (the
 * broker of its only replica is down): every transaction fails,
 * far more than spring-kafka's 10 deliveries, and the record's output must still appear exactly once when writes come
 * back. With spring-kafka's default after-rollback processor the same run gives the record up and its output is lost,
 * which shows that the scenario reaches the limit.
 */
class ListenerOutageTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(2);

    /** Deliveries so far of each input value. */
    static final Map<String, AtomicInteger> deliveries = new ConcurrentHashMap<>();

    /** Counted down when spring-kafka's default processor gives a record up. */
    static volatile CountDownLatch gaveUp = new CountDownLatch(1);

    @Test
    void theStartersProcessorRunsTheContainersUnlessTheApplicationHasOne() {
        try (ConfigurableApplicationContext context = app(Plain.class, "arp-wiring")) {
            assertThat(processorOf(context)).isInstanceOf(SessionAfterRollbackProcessor.class);
        }
        try (ConfigurableApplicationContext context = app(SpringKafkasDefault.class, "arp-wiring-own")) {
            assertThat(processorOf(context)).isSameAs(context.getBean(AfterRollbackProcessor.class))
                .isNotInstanceOf(SessionAfterRollbackProcessor.class);
        }
    }

    @Test
    @ExtendWith(OutputCaptureExtension.class)
    void anApplicationErrorHandlerThatWouldCapOutagesIsNamedAtStartup(CapturedOutput output) {
        try (ConfigurableApplicationContext context = app(Plain.class, "arp-check-plain")) {
            assertThat(processorOf(context)).isInstanceOf(SessionAfterRollbackProcessor.class);
        }
        assertThat(output.getOut()).doesNotContain("Listener container 'outage'");
        try (ConfigurableApplicationContext context = app(OwnErrorHandler.class, "arp-check-handler")) {
            assertThat(context.getBean(CommonErrorHandler.class)).isInstanceOf(DefaultErrorHandler.class);
        }
        assertThat(output.getOut()).contains("WARN").contains("Listener container 'outage' runs in Kafka transaction "
                + "sessions and has a CommonErrorHandler (" + DefaultErrorHandler.class.getName() + ")")
            .contains("Remove the CommonErrorHandler bean");
    }

    private static int deliveries(String value) {
        AtomicInteger count = deliveries.get(value);
        return count == null ? 0 : count.get();
    }

    private static AfterRollbackProcessor<?, ?> processorOf(ConfigurableApplicationContext context) {
        var container = (AbstractMessageListenerContainer<?, ?>) context.getBean(KafkaListenerEndpointRegistry.class)
            .getListenerContainer("outage");
        return container.getAfterRollbackProcessor();
    }

    @Test
    void aRecordWhoseTransactionsFailThroughALongOutageIsProducedExactlyOnceAfterIt() throws Exception {
        List<String> output = runThroughOutage(FastBackOff.class, "arp-session");
        assertThat(deliveries("r0")).as("deliveries of r0 through the outage").isGreaterThanOrEqualTo(12);
        assertThat(output).containsExactly("out-r0", "out-r1");
    }

    @Test
    void springKafkasDefaultProcessorLosesTheSameRecord() throws Exception {
        List<String> output = runThroughOutage(SpringKafkasDefault.class, "arp-default");
        assertThat(deliveries("r0")).as("deliveries of r0 before it was given up").isEqualTo(10);
        assertThat(output).as("given up after 10 deliveries: r0's output is lost").containsExactly("out-r1");
    }

    /**
     * Stops the only replica of the output topic, so that it has no leader and every transaction's commit fails when
     * its send expires ({@code delivery.timeout.ms}); produces r0, waits for 12 failed deliveries (spring-kafka's
     * default gives up after 10), restarts the broker, produces r1 and waits until the group's offset is past both.
     * (A topic below {@code min.insync.replicas} would do too, but there the coordinator cannot write the abort
     * markers either, so each attempt waits a minute for the previous abort and the test would take 15 minutes.)
     *
     * @return the output topic as a read_committed reader sees it
     */
    private static List<String> runThroughOutage(Class<?> config, String name) throws Exception {
        String in = name + "-in";
        String out = name + "-out";
        Admin admin = kafka.cluster().admin();
        int stopped = kafka.cluster().brokerIds().iterator().next();
        admin.createTopics(List.of(new NewTopic(in, 1, (short) 2),
                new NewTopic(out, Map.of(0, List.of(stopped))))).all().get();
        deliveries.clear();
        gaveUp = new CountDownLatch(1);
        try (ConfigurableApplicationContext context = app(config, name);
                KafkaProducer<String, String> feeder = new KafkaProducer<>(kafka.cluster().clientConfigs(),
                    new StringSerializer(), new StringSerializer())) {
            kafka.cluster().stopBroker(stopped);
            feeder.send(new ProducerRecord<>(in, "k", "r0")).get();
            await().atMost(Duration.ofSeconds(120)).until(() -> deliveries("r0") >= 12 || gaveUp.getCount() == 0);
            kafka.cluster().restartBroker(stopped);
            feeder.send(new ProducerRecord<>(in, "k", "r1")).get();
            await().atMost(Duration.ofSeconds(90)).until(() -> {
                OffsetAndMetadata offset = admin.listConsumerGroupOffsets(name).partitionsToOffsetAndMetadata().get()
                    .get(new TopicPartition(in, 0));
                return offset != null && offset.offset() == 2;
            });
        }
        finally {
            if (!kafka.cluster().stoppedBrokers().isEmpty()) {
                kafka.cluster().restartBrokers(kafka.cluster().stoppedBrokers());
            }
        }
        return CommittedReader.readToEnd(kafka.bootstrapServers(), out, true).stream().map(ConsumerRecord::value)
            .toList();
    }

    private static ConfigurableApplicationContext app(Class<?> config, String name) {
        return new SpringApplicationBuilder(config)
            .web(WebApplicationType.NONE)
            .properties("spring.main.banner-mode=off", CommittedReader.KAFKA_ONLY,
                    "spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                    "spring.kafka.consumer.auto-offset-reset=earliest",
                    "spring.kafka.consumer.isolation-level=read-committed",
                    // each transaction fails fast while the output refuses writes
                    "spring.kafka.producer.properties.delivery.timeout.ms=1000",
                    "spring.kafka.producer.properties.request.timeout.ms=900",
                    "spring.kafka.producer.properties.linger.ms=0",
                    "listener.in=" + name + "-in", "listener.group=" + name,
                    "kafka.txn-session.transactional-id-prefix=" + name + "-",
                    "kafka.txn-session.pool-size=2")
            .run();
    }

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Plain {

        @Bean
        Listener listener(KafkaTemplate<Object, Object> template) {
            return new Listener(template);
        }
    }

    /** The starter's processor with a short back-off, so that the test reaches 12 deliveries quickly. */
    @Configuration(proxyBeanMethods = false)
    @Import(Plain.class)
    static class FastBackOff {

        @Bean
        SessionAfterRollbackProcessor<Object, Object> afterRollbackProcessor() {
            return new SessionAfterRollbackProcessor<>(new FixedBackOff(50, FixedBackOff.UNLIMITED_ATTEMPTS),
                    new FixedBackOff(0, 9));
        }
    }

    /** What an application gets from spring-kafka alone: 10 deliveries of any failure, then the record is skipped. */
    @Configuration(proxyBeanMethods = false)
    @Import(Plain.class)
    static class SpringKafkasDefault {

        @Bean
        AfterRollbackProcessor<Object, Object> afterRollbackProcessor() {
            // spring-kafka's default (FixedBackOff(0, 9)); its recoverer only logs, this one also tells the test
            return new DefaultAfterRollbackProcessor<>((record, ex) -> gaveUp.countDown(), new FixedBackOff(0, 9));
        }
    }

    /** An application that keeps spring-kafka's error handler bean (Boot's factory takes it). */
    @Configuration(proxyBeanMethods = false)
    @Import(Plain.class)
    static class OwnErrorHandler {

        @Bean
        CommonErrorHandler errorHandler() {
            return new DefaultErrorHandler(new FixedBackOff(0, 2));
        }
    }

    /** The application's listener: no transaction code. */
    static class Listener {

        private final KafkaTemplate<Object, Object> template;

        Listener(KafkaTemplate<Object, Object> template) {
            this.template = template;
        }

        @KafkaListener(id = "outage", topics = "${listener.in}", groupId = "${listener.group}")
        void onRecord(ConsumerRecord<String, String> record) {
            deliveries.computeIfAbsent(record.value(), v -> new AtomicInteger()).incrementAndGet();
            this.template.send(outTopic(record), record.key(), "out-" + record.value());
        }

        private static String outTopic(ConsumerRecord<String, String> record) {
            return record.topic().substring(0, record.topic().length() - "-in".length()) + "-out";
        }
    }
}
