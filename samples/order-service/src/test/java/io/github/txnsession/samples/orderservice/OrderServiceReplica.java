package io.github.txnsession.samples.orderservice;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

import io.github.txnsession.spring.CommitPhase;
import io.github.txnsession.spring.CommitPhaseListener;
import org.jspecify.annotations.Nullable;

import org.springframework.boot.SpringApplication;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * One replica of the unchanged order service in a child JVM, for {@link OrderServiceFleetTest}: runs
 * {@link OrderServiceApplication} with the arguments given, prints {@code replica-port <port>} once it serves, and
 * reads commands from standard input: {@code stop} closes the application cleanly; {@code halt-at <PHASE>} makes the
 * process die ({@code Runtime.halt}, as kill -9) when the next two-phase commit reaches that {@link CommitPhase}.
 */
public final class OrderServiceReplica {

    private static volatile @Nullable CommitPhase haltAt;

    private OrderServiceReplica() {
    }

    public static void main(String[] args) throws IOException {
        ConfigurableApplicationContext context = new SpringApplication(OrderServiceApplication.class, Hooks.class)
            .run(args);
        System.out.println("replica-port " + context.getEnvironment().getProperty("local.server.port"));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null && !line.equals("stop")) {
            if (line.startsWith("halt-at ")) {
                haltAt = CommitPhase.valueOf(line.substring("halt-at ".length()).trim());
            }
        }
        context.close();
        System.out.println("replica-stopped");
        System.exit(0);
    }

    /** The crash point: a commit-phase listener that halts the JVM at the armed phase. */
    @Configuration(proxyBeanMethods = false)
    static class Hooks {

        @Bean
        CommitPhaseListener haltAtArmedPhase() {
            return (phase, transactionalId) -> {
                if (phase == haltAt) {
                    Runtime.getRuntime().halt(137);
                }
            };
        }
    }
}
