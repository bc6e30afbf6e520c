package io.github.txnsession.samples.orders;

import java.util.List;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import org.springframework.boot.autoconfigure.condition.ConditionalOnExpression;
import org.springframework.boot.kafka.autoconfigure.KafkaConnectionDetails;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Starts a real, in-process Kafka broker (KRaft, one node) when {@code spring.kafka.bootstrap-servers} is not set,
 * and points every Kafka client of the application at it through a {@link KafkaConnectionDetails} bean. With the
 * property set, this configuration is skipped and the configured brokers are used. The broker stops with the
 * application, after the clients that use it.
 */
@Configuration(proxyBeanMethods = false)
@ConditionalOnExpression("'${spring.kafka.bootstrap-servers:}'.isEmpty()")
class EmbeddedKafkaConfiguration {

    private static final Logger log = LoggerFactory.getLogger(EmbeddedKafkaConfiguration.class);

    @Bean(destroyMethod = "close")
    EmbeddedKafkaCluster embeddedKafkaCluster() {
        EmbeddedKafkaCluster cluster = EmbeddedKafkaCluster.builder().brokers(1).start();
        log.info("No spring.kafka.bootstrap-servers configured: started an embedded Kafka broker at {}",
                cluster.bootstrapServers());
        return cluster;
    }

    @Bean
    KafkaConnectionDetails kafkaConnectionDetails(EmbeddedKafkaCluster cluster) {
        return () -> List.of(cluster.bootstrapServers());
    }
}
