package io.github.txnsession.samples.paymentservice;

import org.junit.jupiter.api.extension.ExtendWith;

import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The sample with {@code spring.datasource.url} pointing to PostgreSQL (a real server from embedded binaries), the
 * way the README tells a user to switch: the same scenarios must hold.
 */
@ExtendWith(EmbeddedPostgresExtension.class) // above @SpringBootTest: starts before the context, stops after it
@SpringBootTest(classes = PaymentServiceApplication.class,
        webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@DirtiesContext
class PaymentServicePostgresTest extends PaymentServiceScenarios {

    @DynamicPropertySource
    static void postgres(DynamicPropertyRegistry registry) {
        registry.add("spring.datasource.url", EmbeddedPostgresExtension::jdbcUrl);
        registry.add("spring.datasource.username", () -> "postgres");
        registry.add("spring.datasource.password", () -> "postgres");
    }

    @Override
    String expectedDatabase() {
        return "PostgreSQL";
    }
}
