package io.github.txnsession.starter;

import io.github.txnsession.autoconfigure.TransactionSessionAutoConfiguration;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.WebApplicationType;
import org.springframework.context.ConfigurableApplicationContext;

import static org.assertj.core.api.Assertions.assertThat;

/** A Boot application that only has the starter picks the auto-configuration up by itself. */
class StarterContextTest {

    @SpringBootApplication
    static class App {
    }

    @Test
    void starterBringsTheAutoConfiguration() {
        try (ConfigurableApplicationContext context = new SpringApplicationBuilder(App.class)
            .web(WebApplicationType.NONE)
            .properties("spring.main.banner-mode=off")
            .run()) {
            assertThat(context.getBeansOfType(TransactionSessionAutoConfiguration.class)).hasSize(1);
        }
    }
}
