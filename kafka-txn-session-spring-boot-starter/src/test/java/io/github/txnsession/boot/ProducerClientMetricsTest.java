package io.github.txnsession.boot;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.SessionProducerFactory;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Boot's {@code DefaultKafkaProducerFactoryCustomizer}s reach the sessions: with a {@code MeterRegistry}, Boot's Kafka
 * metrics customizer adds Micrometer's producer listener, and the client metrics of each session's producer are
 * registered when the pool opens the session (the issue asked that Boot's producer customizers be honoured).
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

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class App {

        @Bean
        SimpleMeterRegistry meterRegistry() {
            return new SimpleMeterRegistry();
        }
    }
}
