package io.github.txnsession.samples.orderservice;

import io.github.txnsession.samples.support.EmbeddedKafkaConfiguration;
import io.github.txnsession.samples.support.ProblemDetailsAdvice;
import org.apache.kafka.clients.admin.NewTopic;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;

/**
 * The order service. Run it with {@code ./mvnw -pl samples/order-service -am spring-boot:run}: H2 in memory and, as
 * no {@code spring.kafka.bootstrap-servers} is set, an embedded Kafka broker ({@link EmbeddedKafkaConfiguration}).
 * {@code kafka.txn-session.jdbc.enabled=true} (application.properties) makes the Kafka sessions join Boot's JDBC
 * transaction manager with two-phase commit.
 */
@SpringBootApplication(proxyBeanMethods = false)
@Import({ EmbeddedKafkaConfiguration.class, ProblemDetailsAdvice.class })
public class OrderServiceApplication {

    /** The topic of the {@link OrderPlaced} events, keyed by order id. */
    public static final String ORDER_PLACED = "order-placed";

    public static void main(String[] args) {
        SpringApplication.run(OrderServiceApplication.class, args);
    }

    @Bean
    NewTopic orderPlacedTopic() {
        return new NewTopic(ORDER_PLACED, 3, (short) 1);
    }
}
