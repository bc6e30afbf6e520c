package io.github.txnsession.samples.paymentservice;

import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.annotation.DirtiesContext;

/**
 * The sample as {@code spring-boot:run} starts it: H2 in memory and an embedded Kafka broker.
 */
@SpringBootTest(classes = PaymentServiceApplication.class,
        webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@DirtiesContext
class PaymentServiceApplicationTest extends PaymentServiceScenarios {

    @Override
    String expectedDatabase() {
        return "H2";
    }
}
