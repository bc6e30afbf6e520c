package io.github.txnsession.samples.orderservice;

import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.annotation.DirtiesContext;

/**
 * The sample as {@code spring-boot:run} starts it: H2 in memory and an embedded Kafka broker.
 */
@SpringBootTest(classes = OrderServiceApplication.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@DirtiesContext
class OrderServiceApplicationTest extends OrderServiceScenarios {

    @Override
    String expectedDatabase() {
        return "H2";
    }
}
