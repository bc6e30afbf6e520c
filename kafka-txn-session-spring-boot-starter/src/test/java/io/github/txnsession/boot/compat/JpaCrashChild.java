package io.github.txnsession.boot.compat;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import io.github.txnsession.spring.CommitPhase;
import io.github.txnsession.spring.CommitPhaseListener;

import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.transaction.annotation.Transactional;

/**
 * Child JVM of the JPA crash matrix: a Spring Boot application with Spring Data JPA and
 * {@code kafka.txn-session.jdbc.enabled=true} (Boot's {@code JpaTransactionManager}, the Kafka session enlisted in it
 * by two-phase commit) places {@code okCount} orders with {@code repository.save()} and a {@code KafkaTemplate} send,
 * then dies with {@code Runtime.halt} when the commit of the next order reaches {@code phase}.
 * <p>Arguments: BOOTSTRAP JDBC_URL PREFIX TOPIC PHASE OK_COUNT FIRST_ID [COMPLETE_IN_BACKGROUND]
 */
public final class JpaCrashChild {

    private JpaCrashChild() {
    }

    public static void main(String[] args) {
        CommitPhase crashAt = CommitPhase.valueOf(args[4]);
        int okCount = Integer.parseInt(args[5]);
        int firstId = Integer.parseInt(args[6]);
        // the index of the transaction each session runs: the decision row of an enlisted session is cleared in the
        // background, so AFTER_LOG_CLEAR may come after the next order started (on the pool's other session)
        AtomicInteger started = new AtomicInteger();
        Map<String, Integer> current = new ConcurrentHashMap<>();
        CommitPhaseListener crash = (phase, txnId) -> {
            if (phase == CommitPhase.BEFORE_PREPARE) {
                current.put(txnId, started.getAndIncrement());
            }
            if (phase == crashAt && current.get(txnId) == okCount) {
                System.out.println("CRASH " + phase + " " + txnId);
                System.out.flush();
                Runtime.getRuntime().halt(137);
            }
        };
        ConfigurableApplicationContext context = new SpringApplicationBuilder(App.class)
            .web(WebApplicationType.NONE)
            .initializers(c -> c.getBeanFactory().registerSingleton("crashAtPhase", crash))
            .properties("spring.main.banner-mode=off", "spring.kafka.bootstrap-servers=" + args[0],
                    "spring.datasource.url=" + args[1],
                    "spring.datasource.username=" + (args[1].startsWith("jdbc:postgresql") ? "postgres" : "sa"),
                    "spring.jpa.hibernate.ddl-auto=none", "kafka.txn-session.jdbc.enabled=true",
                    "kafka.txn-session.transactional-id-prefix=" + args[2], "kafka.txn-session.pool-size=2",
                    "crash.topic=" + args[3], "logging.level.root=WARN",
                    "kafka.txn-session.jdbc.complete-in-background="
                            + (args.length > 7 && Boolean.parseBoolean(args[7])),
                    "kafka.txn-session.jdbc.decision-alongside-prepare="
                            + (args.length > 8 && Boolean.parseBoolean(args[8])))
            .run();
        PlaceOrders orders = context.getBean(PlaceOrders.class);
        for (int i = 0; i <= okCount; i++) {
            String id = "order-" + (firstId + i);
            orders.place(id, args[3]);
            System.out.println("OK " + id);
            System.out.flush();
        }
        // a crash after the row is cleared happens on the clearing thread, after place() returned: give it time
        try {
            new CountDownLatch(1).await(30, TimeUnit.SECONDS);
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
        }
        System.out.println("NO-CRASH");
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class App {

        @Bean
        PlaceOrders placeOrders(CompatOrders repository, KafkaTemplate<Object, Object> template) {
            return new PlaceOrders(repository, template);
        }
    }

    /** The application's code: a repository save (flushed by Hibernate at commit) and a send. */
    public static class PlaceOrders {

        private final CompatOrders repository;
        private final KafkaTemplate<Object, Object> template;

        PlaceOrders(CompatOrders repository, KafkaTemplate<Object, Object> template) {
            this.repository = repository;
            this.template = template;
        }

        @Transactional
        public void place(String id, String topic) {
            this.repository.save(new CompatOrder(id));
            this.template.send(topic, id, "OrderPlaced:" + id);
        }
    }
}
