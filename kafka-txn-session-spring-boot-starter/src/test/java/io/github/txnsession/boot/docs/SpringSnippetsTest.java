package io.github.txnsession.boot.docs;

import java.time.Duration;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.stereotype.Service;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.annotation.Transactional;
import org.springframework.transaction.support.TransactionTemplate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * The Spring snippet of README.md and docs/ (the region between {@code tag::} and {@code end::} comments), run here
 * in a real Boot context with H2 and a real broker: the row and the event commit together, and roll back together.
 */
class SpringSnippetsTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration(excludeName = {
        "org.springframework.boot.hibernate.autoconfigure.HibernateJpaAutoConfiguration",
        "org.springframework.boot.data.jpa.autoconfigure.DataJpaRepositoriesAutoConfiguration" })
    @Import(OrderService.class)
    static class App {
    }

    @Test
    void theRowAndTheEventCommitAndRollBackTogether() {
        kafka.cluster().createTopic("orders", 1);
        try (ConfigurableApplicationContext context = new SpringApplicationBuilder(App.class)
            .web(WebApplicationType.NONE)
            .properties("spring.main.banner-mode=off", "spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                    "spring.datasource.url=jdbc:h2:mem:" + EmbeddedKafkaCluster.uniqueName("docs")
                            + ";DB_CLOSE_DELAY=-1",
                    "kafka.txn-session.transactional-id-prefix=" + EmbeddedKafkaCluster.uniqueName("docs") + "-")
            .run()) {
            JdbcTemplate jdbc = context.getBean(JdbcTemplate.class);
            jdbc.execute("CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY, item VARCHAR(64))");
            OrderService orders = context.getBean(OrderService.class);
            orders.placeOrder("o-1", "book");
            new TransactionTemplate(context.getBean(PlatformTransactionManager.class)).executeWithoutResult(s -> {
                orders.placeOrder("o-2", "lamp");
                s.setRollbackOnly();
            });
            orders.placeOrder("o-3", "pen");
            assertThat(jdbc.queryForList("SELECT id FROM orders ORDER BY id", String.class))
                .containsExactly("o-1", "o-3");
            // the markers of the last commit may still be on their way: wait for them
            await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> assertThat(kafka.cluster()
                .readCommitted("orders")).map(ConsumerRecord::key).containsExactly("o-1", "o-3"));
        }
    }
}

// tag::spring-example[]
@Service
class OrderService {

    private final JdbcTemplate jdbc;
    private final KafkaTemplate<String, String> kafka;

    OrderService(JdbcTemplate jdbc, KafkaTemplate<String, String> kafka) {
        this.jdbc = jdbc;
        this.kafka = kafka;
    }

    @Transactional // Boot's own JdbcTransactionManager: the Kafka session joins its transaction
    public void placeOrder(String id, String item) {
        this.jdbc.update("INSERT INTO orders (id, item) VALUES (?, ?)", id, item);
        this.kafka.send("orders", id, item); // commits with the row; across a crash too in two-phase mode
    }
}
// end::spring-example[]
