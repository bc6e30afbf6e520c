package io.github.txnsession.boot.jpa;

import java.time.Duration;
import java.util.List;

import io.github.txnsession.boot.CommittedReader;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.jdbc.DecisionLog;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.orm.jpa.JpaTransactionManager;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

/**
 * Spring Data JPA with {@code kafka.txn-session.jdbc.enabled=true}: Boot's {@code JpaTransactionManager} stays the
 * transaction manager, {@code repository.save()} and a {@code KafkaTemplate} send commit together by two-phase
 * commit (the decision row goes through the connection JPA uses), and roll back together. The issue saw the row lost
 * and the event committed here, because the starter had replaced the JPA manager.
 */
class JpaTwoPhaseTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    static final String TOPIC = EmbeddedKafkaCluster.uniqueName("jpa-orders");

    static ConfigurableApplicationContext context;

    @BeforeAll
    static void start() {
        kafka.cluster().createTopic(TOPIC, 1);
        context = new SpringApplicationBuilder(App.class)
            .web(WebApplicationType.NONE)
            .properties("spring.main.banner-mode=off",
                    "spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                    "spring.datasource.url=jdbc:h2:mem:" + EmbeddedKafkaCluster.uniqueName("jpa") + ";DB_CLOSE_DELAY=-1",
                    "spring.jpa.hibernate.ddl-auto=create",
                    "kafka.txn-session.jdbc.enabled=true",
                    "kafka.txn-session.transactional-id-prefix=" + EmbeddedKafkaCluster.uniqueName("jpa") + "-",
                    "kafka.txn-session.pool-size=2")
            .run();
    }

    @AfterAll
    static void stop() {
        if (context != null) {
            context.close();
        }
    }

    @Test
    void saveAndSendCommitTogetherAndRollBackTogether() {
        assertThat(context.getBean(PlatformTransactionManager.class)).isInstanceOf(JpaTransactionManager.class);
        PlacedOrders orders = context.getBean(PlacedOrders.class);
        @SuppressWarnings("unchecked")
        KafkaTemplate<Object, Object> template = context.getBean(KafkaTemplate.class);
        TransactionTemplate tx = new TransactionTemplate(context.getBean(PlatformTransactionManager.class));

        tx.executeWithoutResult(status -> {
            orders.save(new PlacedOrder("jpa-1")); // not flushed before the commit: Hibernate flushes at commit
            template.send(TOPIC, "jpa-1", "OrderPlaced");
        });
        assertThatThrownBy(() -> tx.executeWithoutResult(status -> {
            orders.saveAndFlush(new PlacedOrder("jpa-2"));
            template.send(TOPIC, "jpa-2", "OrderPlaced");
            throw new IllegalStateException("rolled back");
        })).isInstanceOf(IllegalStateException.class);
        assertThat(orders.findAll()).extracting(PlacedOrder::id).containsExactly("jpa-1");
        List<ConsumerRecord<String, String>> events = CommittedReader.readToEnd(kafka.bootstrapServers(), TOPIC, true);
        assertThat(events).extracting(ConsumerRecord::key).containsExactly("jpa-1");
        JdbcTemplate jdbc = new JdbcTemplate(context.getBean(javax.sql.DataSource.class));
        // the decision row is cleared in the background after the Kafka commit
        await().atMost(Duration.ofSeconds(10)).until(() -> jdbc.queryForObject(
                "SELECT COUNT(*) FROM " + DecisionLog.DEFAULT_TABLE, Integer.class) == 0);
    }

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class App {

        @Bean
        JdbcTemplate jdbcTemplate(javax.sql.DataSource dataSource) {
            return new JdbcTemplate(dataSource);
        }
    }
}
