package io.github.txnsession.samples.paymentservice;

import io.github.txnsession.samples.support.EmbeddedKafkaConfiguration;
import io.github.txnsession.samples.support.ProblemDetailsAdvice;
import org.apache.kafka.clients.admin.NewTopic;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;

/**
 * The payment service. Run it with {@code ./mvnw -pl samples/payment-service -am spring-boot:run}: H2 in memory and,
 * as no {@code spring.kafka.bootstrap-servers} is set, an embedded Kafka broker ({@link EmbeddedKafkaConfiguration}).
 * Spring Data JPA brings Boot's {@code JpaTransactionManager}; {@code kafka.txn-session.jdbc.enabled=true}
 * (application.properties) makes the Kafka sessions join its transactions with two-phase commit.
 */
@SpringBootApplication(proxyBeanMethods = false)
@Import({ EmbeddedKafkaConfiguration.class, ProblemDetailsAdvice.class })
public class PaymentServiceApplication {

    /** The topic of the {@link PaymentCaptured} events, keyed by order id. */
    public static final String PAYMENT_CAPTURED = "payment-captured";

    public static void main(String[] args) {
        SpringApplication.run(PaymentServiceApplication.class, args);
    }

    @Bean
    NewTopic paymentCapturedTopic() {
        return new NewTopic(PAYMENT_CAPTURED, 3, (short) 1);
    }
}
