package io.github.txnsession.samples.support;

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
 * property set, this configuration is skipped and the configured brokers are used. A sample imports it with
 * {@code @Import(EmbeddedKafkaConfiguration.class)} on its application class.
 *
 * <p>Guarantees: the broker is up before any bean that needs {@link KafkaConnectionDetails} is created, and it stops
 * with the application, after the clients that use it. Not guaranteed: anything surviving a restart: the broker keeps
 * its data in a temporary directory that is deleted when the JVM exits.
 */
@Configuration(proxyBeanMethods = false)
@ConditionalOnExpression("'${spring.kafka.bootstrap-servers:}'.isEmpty()")
public class EmbeddedKafkaConfiguration {

    private static final Logger log = LoggerFactory.getLogger(EmbeddedKafkaConfiguration.class);

    /** @return a started one-broker cluster, closed with the application context */
    @Bean(destroyMethod = "close")
    public EmbeddedKafkaCluster embeddedKafkaCluster() {
        EmbeddedKafkaCluster cluster = EmbeddedKafkaCluster.builder().brokers(1).start();
        log.info("No spring.kafka.bootstrap-servers configured: started an embedded Kafka broker at {}",
                cluster.bootstrapServers());
        return cluster;
    }

    /** @return connection details naming the embedded broker, used by Boot's Kafka clients and the starter */
    @Bean
    public KafkaConnectionDetails kafkaConnectionDetails(EmbeddedKafkaCluster cluster) {
        return () -> List.of(cluster.bootstrapServers());
    }
}
