package io.github.txnsession.boot;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Collectors;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.DatabaseSessionTransactionManager;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
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
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.config.KafkaListenerEndpointRegistry;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.transaction.PlatformTransactionManager;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * An application with a database, default starter settings: Boot's own transaction manager stays the
 * {@code transactionManager}, and a {@code @KafkaListener} that inserts a row and sends an event commits the row, the
 * event and the consumed offset together. A record that fails after both writes is rolled back on all three and
 * retried: no duplicate key, no skipped record, no lost output (the failure the issue observed with the starter).
 */
class DatabaseListenerTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    public static final String IN = EmbeddedKafkaCluster.uniqueName("db-in");
    static final String OUT = EmbeddedKafkaCluster.uniqueName("db-out");
    public static final String GROUP = EmbeddedKafkaCluster.uniqueName("db-group");
    static final int RECORDS = 60;

    static ConfigurableApplicationContext context;

    @BeforeAll
    static void start() {
        kafka.cluster().createTopics(2, IN, OUT);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(kafka.cluster().clientConfigs(),
                new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < RECORDS; i++) {
                producer.send(new ProducerRecord<>(IN, String.format("k-%03d", i), i % 20 == 7 ? "poison" : "ok"));
            }
        }
        context = new SpringApplicationBuilder(App.class)
            .web(WebApplicationType.NONE)
            .properties("spring.main.banner-mode=off",
                    "spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                    "spring.kafka.consumer.auto-offset-reset=earliest",
                    "spring.kafka.consumer.isolation-level=read-committed",
                    "spring.datasource.url=jdbc:h2:mem:" + EmbeddedKafkaCluster.uniqueName("listener")
                            + ";DB_CLOSE_DELAY=-1",
                    "kafka.txn-session.transactional-id-prefix=" + EmbeddedKafkaCluster.uniqueName("dbl") + "-",
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
    void aListenerWritingTheDatabaseAndKafkaCommitsRowEventAndOffsetTogether() {
        // Boot's own manager: JPA's here (this module's test classpath has JPA too); JdbcTemplate writes join it
        assertThat(context.getBean(PlatformTransactionManager.class))
            .isInstanceOf(org.springframework.orm.jpa.JpaTransactionManager.class);
        assertThat(context.getBean(KafkaListenerEndpointRegistry.class).getListenerContainer("db")
            .getContainerProperties().getKafkaAwareTransactionManager())
            .isInstanceOf(DatabaseSessionTransactionManager.class);

        await().atMost(Duration.ofSeconds(90)).pollInterval(Duration.ofMillis(200)).until(() -> kafka.cluster()
            .admin().listConsumerGroupOffsets(GROUP).partitionsToOffsetAndMetadata().get().values().stream()
            .mapToLong(OffsetAndMetadata::offset).sum() == RECORDS);

        JdbcTemplate jdbc = context.getBean(JdbcTemplate.class);
        assertThat(jdbc.queryForObject("SELECT COUNT(*) FROM processed", Integer.class)).isEqualTo(RECORDS);
        List<ConsumerRecord<String, String>> events = CommittedReader.readToEnd(kafka.bootstrapServers(), OUT, true);
        Map<String, Long> perKey = events.stream()
            .collect(Collectors.groupingBy(ConsumerRecord::key, Collectors.counting()));
        assertThat(perKey).hasSize(RECORDS);
        assertThat(perKey.values()).allMatch(n -> n == 1L);
        Listener listener = context.getBean(Listener.class);
        assertThat(listener.failures()).isEqualTo(RECORDS / 20); // each poison record failed once, then passed
    }

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class App {

        @Bean
        Listener listener(KafkaTemplate<Object, Object> template, JdbcTemplate jdbc) {
            jdbc.execute("CREATE TABLE processed (id VARCHAR(32) PRIMARY KEY)");
            return new Listener(template, jdbc);
        }
    }

    /** The application's listener: plain JdbcTemplate and KafkaTemplate code. */
    static class Listener {

        private final KafkaTemplate<Object, Object> template;
        private final JdbcTemplate jdbc;
        private final Map<String, Integer> attempts = new ConcurrentHashMap<>();

        Listener(KafkaTemplate<Object, Object> template, JdbcTemplate jdbc) {
            this.template = template;
            this.jdbc = jdbc;
        }

        @KafkaListener(id = "db", topics = "#{T(io.github.txnsession.boot.DatabaseListenerTest).IN}",
                groupId = "#{T(io.github.txnsession.boot.DatabaseListenerTest).GROUP}")
        void onRecord(ConsumerRecord<String, String> record) {
            this.jdbc.update("INSERT INTO processed (id) VALUES (?)", record.key());
            this.template.send(OUT, record.key(), "done " + record.key());
            if ("poison".equals(record.value()) && this.attempts.merge(record.key(), 1, Integer::sum) == 1) {
                throw new IllegalStateException("fails once after writing both: " + record.key());
            }
        }

        int failures() {
            return (int) this.attempts.values().stream().filter(n -> n >= 1).count();
        }
    }
}
