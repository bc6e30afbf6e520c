package io.github.txnsession.boot;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.List;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.SessionProducerFactory;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.kafka.autoconfigure.DefaultKafkaProducerFactoryCustomizer;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.core.DefaultKafkaProducerFactory;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Boot's {@code DefaultKafkaProducerFactoryCustomizer}s reach the sessions: with a {@code MeterRegistry}, Boot's Kafka
 * metrics customizer adds Micrometer's producer listener, and the client metrics of each session's producer are
 * registered when the pool opens the session; the post-processors they add wrap the producer of each transaction (the
 * issue asked that Boot's producer customizers be honoured).
 */
class ProducerClientMetricsTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    @Test
    void theSessionsProducersReportClientMetricsThroughBootsCustomizer() {
        String topic = EmbeddedKafkaCluster.uniqueName("metrics");
        kafka.cluster().createTopic(topic, 1);
        String prefix = EmbeddedKafkaCluster.uniqueName("metrics") + "-";
        try (ConfigurableApplicationContext context = new SpringApplicationBuilder(App.class)
            .web(WebApplicationType.NONE)
            .properties("spring.main.banner-mode=off", CommittedReader.KAFKA_ONLY,
                    "spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                    "kafka.txn-session.transactional-id-prefix=" + prefix, "kafka.txn-session.pool-size=1")
            .run()) {
            SessionProducerFactory<?, ?> factory = (SessionProducerFactory<?, ?>) context
                .getBean(ProducerFactory.class);
            assertThat(factory.getListeners()).as("listeners taken over from Boot's customizer").isNotEmpty();
            @SuppressWarnings("unchecked")
            KafkaTemplate<Object, Object> template = context.getBean(KafkaTemplate.class);
            new TransactionTemplate(context.getBean(PlatformTransactionManager.class))
                .executeWithoutResult(status -> template.send(topic, "k", "v"));
            MeterRegistry registry = context.getBean(MeterRegistry.class);
            assertThat(registry.getMeters()).map(m -> m.getId().getName())
                .anyMatch(name -> name.startsWith("kafka.producer."));
            assertThat(registry.getMeters()).map(Meter::getId)
                .anyMatch(id -> id.getName().startsWith("kafka.producer.")
                        && String.valueOf(id.getTag("client.id")).contains(prefix + "0"));
        }
    }

    /**
     * A {@code ProducerPostProcessor} added by a customizer (the shape of a tracing wrapper: it adds a header and
     * delegates) wraps the producer of each transaction: its header reaches the committed record, and what it sends
     * in a transaction that rolls back stays invisible.
     */
    @Test
    void aPostProcessorFromACustomizerWrapsTheProducerOfEachTransaction() {
        String topic = EmbeddedKafkaCluster.uniqueName("wrapped");
        kafka.cluster().createTopic(topic, 1);
        try (ConfigurableApplicationContext context = new SpringApplicationBuilder(App.class, Wrapping.class)
            .web(WebApplicationType.NONE)
            .properties("spring.main.banner-mode=off", CommittedReader.KAFKA_ONLY,
                    "spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                    "kafka.txn-session.transactional-id-prefix=" + EmbeddedKafkaCluster.uniqueName("wrapped") + "-",
                    "kafka.txn-session.pool-size=1")
            .run()) {
            @SuppressWarnings("unchecked")
            KafkaTemplate<Object, Object> template = context.getBean(KafkaTemplate.class);
            TransactionTemplate tx = new TransactionTemplate(context.getBean(PlatformTransactionManager.class));
            tx.executeWithoutResult(status -> template.send(topic, "kept", "v"));
            tx.executeWithoutResult(status -> {
                template.send(topic, "dropped", "v");
                status.setRollbackOnly();
            });
            tx.executeWithoutResult(status -> template.send(topic, "end", "v"));
            List<ConsumerRecord<String, String>> records = CommittedReader.readThroughMarker(kafka.bootstrapServers(),
                    topic, "end");
            assertThat(records).map(ConsumerRecord::key).containsExactly("kept", "end");
            assertThat(records).allSatisfy(r -> assertThat(r.headers().lastHeader("wrapped")).isNotNull());
        }
    }

    @Configuration(proxyBeanMethods = false)
    static class Wrapping {

        @Bean
        @SuppressWarnings({ "unchecked", "rawtypes" })
        DefaultKafkaProducerFactoryCustomizer headerAddingWrapper() {
            return factory -> ((DefaultKafkaProducerFactory) factory)
                .addPostProcessor(delegate -> headerAdding((Producer<?, ?>) delegate));
        }
    }

    /** A producer that adds a header to every record and delegates everything, as a tracing wrapper does. */
    static Producer<?, ?> headerAdding(Producer<?, ?> delegate) {
        InvocationHandler handler = (proxy, method, args) -> {
            if (method.getName().equals("send")) {
                ((ProducerRecord<?, ?>) args[0]).headers().add("wrapped", new byte[] { 1 });
            }
            try {
                return method.invoke(delegate, args);
            }
            catch (InvocationTargetException ex) {
                throw ex.getCause();
            }
        };
        return (Producer<?, ?>) Proxy.newProxyInstance(Producer.class.getClassLoader(),
                new Class<?>[] { Producer.class }, handler);
    }

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class App {

        @Bean
        SimpleMeterRegistry meterRegistry() {
            return new SimpleMeterRegistry();
        }
    }
}
