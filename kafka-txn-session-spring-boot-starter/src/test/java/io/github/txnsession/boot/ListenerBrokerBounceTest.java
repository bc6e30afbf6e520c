package io.github.txnsession.boot;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import io.github.txnsession.kafka.test.HangingTransactions;
import io.github.txnsession.spring.jdbc.TwoPhaseRecovery;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.Environment;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.KafkaTemplate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * The starter's {@code @KafkaListener} consume-transform-produce path while brokers bounce (reliability issue R2,
 * paths b and c): 3 brokers, replication 3, {@code min.insync.replicas=2}, brokers stopped without a controlled
 * shutdown (their leaderships and coordinators move only once the controller stops hearing from them) and restarted,
 * one at a time, while the input is produced. The listener has no transaction code: Boot's container runs it in the
 * starter's session transactions; in the two-phase variant it also inserts a row per record into PostgreSQL, and the
 * Kafka side commits by two-phase commit with Boot's JDBC transaction manager. Checked: every input exactly once and
 * in order per partition in the output read with {@code read_committed}, exactly one row per input (a LOST transaction
 * would leave a row without its output; a duplicate would be refused by the primary key and retried forever), the
 * group's offsets at the end, no decision row left, and no hanging transaction of the pool's ids.
 *
 * <p>Records per partition: {@code txnsession.listener.bounce.records} (default 60;
 * {@code -Pbounce-full}: 2,500, i.e. 10,000 records per variant).
 */
class ListenerBrokerBounceTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(b -> b.brokers(3)
        .brokerProperty("min.insync.replicas", 2)
        .brokerProperty("controlled.shutdown.enable", false));

    static final String IN = "in";
    static final String OUT = "out";
    static final String GROUP = "group";
    static final int PARTITIONS = 4;

    @Test
    void everyInputExactlyOnceThroughTheListenerWhileBrokersBounce() throws Exception {
        copyWhileBrokersBounce("bounce-listener-", Integer.getInteger("txnsession.listener.bounce.records", 60),
                null, CommittedReader.KAFKA_ONLY);
    }

    @Test
    void everyInputExactlyOnceWithItsRowThroughTwoPhaseCommitWhileBrokersBounce() throws Exception {
        try (EmbeddedPostgres postgres = EmbeddedPostgres.builder().start()) {
            String url = postgres.getJdbcUrl("postgres", "postgres");
            copyWhileBrokersBounce("bounce-2pc-", Integer.getInteger("txnsession.listener.bounce.records", 60), url,
                    "spring.datasource.url=" + url, "spring.datasource.username=postgres",
                    "spring.datasource.password=postgres", "kafka.txn-session.jdbc.enabled=true");
        }
    }

    /**
     * @param prefix the pool's prefix; also names the run's topics and group
     * @param perPartition records per input partition
     * @param jdbcUrl the PostgreSQL database of the two-phase variant, or null for Kafka only
     * @param properties the variant's application properties
     */
    private void copyWhileBrokersBounce(String prefix, int perPartition, @Nullable String jdbcUrl,
            String... properties) throws Exception {
        String in = prefix + IN;
        String out = prefix + OUT;
        String group = prefix + GROUP;
        long seed = Long.getLong("txnsession.bounce.seed", System.nanoTime());
        Random random = new Random(seed);
        Admin admin = kafka.cluster().admin();
        admin.createTopics(List.of(new NewTopic(in, PARTITIONS, (short) 3), new NewTopic(out, PARTITIONS, (short) 3)))
            .all().get();
        if (jdbcUrl != null) {
            try (Connection con = DriverManager.getConnection(jdbcUrl, "postgres", "postgres");
                    Statement st = con.createStatement()) {
                st.execute("CREATE TABLE copies (id VARCHAR(64) PRIMARY KEY)");
            }
        }
        List<String> bounces = new ArrayList<>();
        List<String> props = new ArrayList<>(List.of(properties));
        props.addAll(List.of("listener.in=" + in, "listener.out=" + out, "listener.group=" + group));
        ConfigurableApplicationContext context = new SpringApplicationBuilder(App.class)
            .web(WebApplicationType.NONE)
            .properties(props.toArray(String[]::new))
            .properties("spring.main.banner-mode=off",
                    "spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                    "spring.kafka.consumer.auto-offset-reset=earliest",
                    "spring.kafka.consumer.isolation-level=read-committed",
                    "spring.kafka.producer.properties.delivery.timeout.ms=20000",
                    "spring.kafka.producer.properties.request.timeout.ms=8000",
                    "spring.kafka.producer.properties.max.block.ms=10000",
                    "spring.kafka.listener.concurrency=2",
                    "kafka.txn-session.transactional-id-prefix=" + prefix,
                    "kafka.txn-session.pool-size=4")
            .run();
        Map<String, Object> producerConfigs = new HashMap<>(kafka.cluster().clientConfigs());
        producerConfigs.put(ProducerConfig.ACKS_CONFIG, "all");
        producerConfigs.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 120_000);
        try (context; KafkaProducer<String, String> feeder = new KafkaProducer<>(producerConfigs,
                new StringSerializer(), new StringSerializer())) {
            int sent = 0;
            long nextBounce = System.nanoTime();
            int turn = 0;
            while (sent < PARTITIONS * perPartition) {
                for (int p = 0; p < PARTITIONS; p++) {
                    feeder.send(new ProducerRecord<>(in, p, "k" + p, "p" + p + "-" + (sent / PARTITIONS)));
                }
                sent += PARTITIONS;
                if (System.nanoTime() >= nextBounce) {
                    int broker = new ArrayList<>(kafka.cluster().brokerIds()).get(turn++ % 3);
                    awaitFullyReplicated(admin, in, out);
                    kafka.cluster().stopBroker(broker);
                    bounces.add(broker + "@" + sent);
                    Thread.sleep(500 + random.nextInt(1500)); // the broker stays down a while (load keeps coming)
                    kafka.cluster().restartBroker(broker);
                    nextBounce = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(1000 + random.nextInt(2000));
                }
                Thread.sleep(50); // pacing the input, not waiting for a condition
            }
            feeder.flush();
            await().atMost(Duration.ofSeconds(180)).pollInterval(Duration.ofMillis(500)).until(() -> {
                Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get();
                return offsets.values().stream().mapToLong(OffsetAndMetadata::offset).sum()
                        == (long) PARTITIONS * perPartition;
            });
            if (jdbcUrl != null) {
                // each decision row is cleared after its Kafka commit, off the caller's path
                await().atMost(Duration.ofSeconds(60)).until(() -> count(jdbcUrl, "kafka_txn_decision_log") == 0);
                // two-phase commit ran (its recovery exists), and nothing was lost or left in doubt
                TwoPhaseRecovery recovery = context.getBean(TwoPhaseRecovery.class);
                assertThat(recovery.lostTransactions()).isEmpty();
                assertThat(recovery.inDoubtTransactions()).isEmpty();
            }
        }
        finally {
            if (!kafka.cluster().stoppedBrokers().isEmpty()) {
                kafka.cluster().restartBrokers(kafka.cluster().stoppedBrokers());
            }
        }
        Map<Integer, List<String>> perPartitionOut = new HashMap<>();
        for (ConsumerRecord<String, String> r : CommittedReader.readToEnd(kafka.bootstrapServers(), out, true)) {
            perPartitionOut.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.value());
        }
        for (int p = 0; p < PARTITIONS; p++) {
            List<String> expected = new ArrayList<>();
            for (int i = 0; i < perPartition; i++) {
                expected.add("out-p" + p + "-" + i);
            }
            assertThat(perPartitionOut.getOrDefault(p, List.of()))
                .as("partition %d: every input once, in order (seed %d, bounces %s)", p, seed, bounces)
                .containsExactlyElementsOf(expected);
        }
        if (jdbcUrl != null) {
            assertThat(count(jdbcUrl, "copies")).as("one row per input").isEqualTo(PARTITIONS * perPartition);
        }
        List<TopicPartition> partitions = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            partitions.add(new TopicPartition(out, p));
        }
        partitions.addAll(HangingTransactions.offsetsTopicPartitions(admin));
        HangingTransactions.assertNone(admin, prefix.substring(0, prefix.length() - 1), partitions,
                Duration.ofSeconds(30));
        System.out.printf("listener broker bounces (%s): %d records exactly once through %d bounces %s (seed %d)%n",
                jdbcUrl == null ? "Kafka only" : "two-phase commit with PostgreSQL", PARTITIONS * perPartition,
                bounces.size(), bounces, seed);
        assertThat(bounces).hasSizeGreaterThanOrEqualTo(2);
    }

    private static int count(String jdbcUrl, String table) throws SQLException {
        try (Connection con = DriverManager.getConnection(jdbcUrl, "postgres", "postgres");
                Statement st = con.createStatement(); ResultSet rs = st.executeQuery("SELECT COUNT(*) FROM " + table)) {
            rs.next();
            return rs.getInt(1);
        }
    }

    private static void awaitFullyReplicated(Admin admin, String in, String out) {
        await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200)).until(() -> {
            try {
                return admin.describeTopics(List.of(in, out, "__transaction_state", "__consumer_offsets"))
                    .allTopicNames().get(10, TimeUnit.SECONDS).values().stream()
                    .flatMap(d -> d.partitions().stream()).allMatch(p -> p.isr().size() == p.replicas().size());
            }
            catch (Exception notNow) {
                return false;
            }
        });
    }

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class App {

        @Bean
        Listener listener(KafkaTemplate<Object, Object> template, ObjectProvider<JdbcTemplate> jdbc,
                Environment environment) {
            return new Listener(template, jdbc.getIfAvailable(), environment.getRequiredProperty("listener.out"));
        }
    }

    /** The application's listener: no transaction code at all. */
    static class Listener {

        private final KafkaTemplate<Object, Object> template;
        private final @Nullable JdbcTemplate jdbc;
        private final String out;

        Listener(KafkaTemplate<Object, Object> template, @Nullable JdbcTemplate jdbc, String out) {
            this.template = template;
            this.jdbc = jdbc;
            this.out = out;
        }

        @KafkaListener(id = "${listener.group}", topics = "${listener.in}", groupId = "${listener.group}")
        void onRecord(ConsumerRecord<String, String> record) {
            if (this.jdbc != null) {
                this.jdbc.update("INSERT INTO copies (id) VALUES (?)", record.value());
            }
            this.template.send(this.out, record.partition(), record.key(), "out-" + record.value());
        }
    }
}
