package io.github.txnsession.samples.orders;

import io.github.txnsession.samples.support.EmbeddedKafkaConfiguration;
import io.github.txnsession.samples.support.ProblemDetailsAdvice;
import org.apache.kafka.clients.admin.NewTopic;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;

/**
 * The order pipeline. Run it with {@code ./mvnw -pl samples/order-pipeline -am spring-boot:run}; without
 * {@code spring.kafka.bootstrap-servers} it starts an embedded Kafka broker ({@link EmbeddedKafkaConfiguration}).
 */
@SpringBootApplication(proxyBeanMethods = false)
@Import({ EmbeddedKafkaConfiguration.class, ProblemDetailsAdvice.class })
public class OrderPipelineApplication {

    /** Orders placed through the REST endpoint. */
    public static final String ORDERS = "orders";
    /** One audit event per order, written in the same transaction as the order. */
    public static final String AUDIT = "order-audit";
    /** One shipment per order, produced by the listener exactly once. */
    public static final String SHIPMENTS = "shipments";

    public static void main(String[] args) {
        SpringApplication.run(OrderPipelineApplication.class, args);
    }

    @Bean
    NewTopic ordersTopic() {
        return new NewTopic(ORDERS, 3, (short) 1);
    }

    @Bean
    NewTopic auditTopic() {
        return new NewTopic(AUDIT, 1, (short) 1);
    }

    @Bean
    NewTopic shipmentsTopic() {
        return new NewTopic(SHIPMENTS, 3, (short) 1);
    }
}
