package io.github.txnsession.boot;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import io.github.txnsession.kafka.fleet.TransactionalIdFleet;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.SessionTransactionCounters;
import io.github.txnsession.spring.TransactionSessionPool;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.KafkaTemplate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * {@code kafka.txn-session.fleet.enabled=true}: three Spring applications with <em>identical</em> configuration
 * (same prefix) run a {@code @KafkaListener} consume-process-produce side by side; they own disjoint fleet slots,
 * never fence each other, and when one leaves the others take its slots. Every input is in the output exactly once,
 * and no more transactional ids than slots x sessions per slot were ever used (two-phase commit in fleet mode:
 * {@link FleetTwoPhaseTest}).
 */
class FleetModeTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    static final String IN = "fleet-app-in";
    static final String OUT = "fleet-app-out";
    static final int RECORDS = 900;
    static final int SLOTS = 4;

    @Test
    void identicalInstancesShareTheIdsWithoutFencingEachOther() throws Exception {
        kafka.cluster().createTopics(4, IN, OUT);
        produce(0, RECORDS / 3);
        List<ConfigurableApplicationContext> apps = new ArrayList<>();
        try {
            apps.add(start());
            await().atMost(Duration.ofSeconds(60)).until(() -> !pool(apps.get(0)).ownedFleetSlots().isEmpty());
            apps.add(start());
            apps.add(start());
            await().atMost(Duration.ofSeconds(60)).untilAsserted(() -> {
                assertThat(apps).allMatch(a -> !pool(a).ownedFleetSlots().isEmpty());
                assertDisjointAndComplete(apps);
            });
            produce(RECORDS / 3, 2 * RECORDS / 3);

            ConfigurableApplicationContext leaving = apps.remove(1);
            SessionTransactionCounters leavingCounters = leaving.getBean(SessionTransactionCounters.class);
            leaving.close();
            assertThat(leavingCounters.fenced()).as("the leaving instance was not fenced either").isZero();
            await().atMost(Duration.ofSeconds(60)).untilAsserted(() -> assertDisjointAndComplete(apps));
            produce(2 * RECORDS / 3, RECORDS);

            await().atMost(Duration.ofSeconds(120)).pollInterval(Duration.ofMillis(500)).until(
                    () -> CommittedReader.readToEnd(kafka.bootstrapServers(), OUT, true).size() >= RECORDS);
            List<ConsumerRecord<String, String>> out = CommittedReader.readToEnd(kafka.bootstrapServers(), OUT, true);
            assertThat(out.stream().map(ConsumerRecord::value).toList()).doesNotHaveDuplicates().hasSize(RECORDS);
            Set<String> expected = new HashSet<>();
            for (int i = 0; i < RECORDS; i++) {
                expected.add("DONE-" + i);
            }
            assertThat(out.stream().map(ConsumerRecord::value).collect(Collectors.toSet())).isEqualTo(expected);

            for (ConfigurableApplicationContext app : apps) {
                SessionTransactionCounters counters = app.getBean(SessionTransactionCounters.class);
                assertThat(counters.fenced()).as("no instance fenced another").isZero();
                assertThat(counters.commits()).isPositive();
                Map<String, Object> health = app.getBean(TransactionSessionHealthIndicatorAccess.class).details();
                assertThat(health).containsKey("fleetSlotsOwned").containsEntry("fleetSlots", SLOTS);
                await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> assertThat(
                        app.getBean(TransactionSessionHealthIndicatorAccess.class).details().get("clusterGuarantees"))
                                .asString().contains("transaction version"));
            }
            Set<String> ids = kafka.cluster().admin().listTransactions().all().get(30, TimeUnit.SECONDS).stream()
                    .map(TransactionListing::transactionalId).filter(id -> id.startsWith("fleet-app-"))
                    .collect(Collectors.toCollection(TreeSet::new));
            assertThat(ids).as("ids ever used").isNotEmpty().hasSizeLessThanOrEqualTo(SLOTS * 2)
                    .allMatch(id -> id.matches("fleet-app-[0-3]-[01]"));
        }
        finally {
            apps.forEach(ConfigurableApplicationContext::close);
        }
    }

    @Test
    void aFencedSessionIsInitializedAgainOnlyByTheFleetAfterItConfirmedOwnership() {
        kafka.cluster().createTopics(1, "fleet-fence-out");
        try (ConfigurableApplicationContext app = new SpringApplicationBuilder(App.class).web(WebApplicationType.NONE)
            .properties("spring.main.banner-mode=off", CommittedReader.KAFKA_ONLY,
                    "spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                    "spring.kafka.listener.auto-startup=false",
                    "kafka.txn-session.transactional-id-prefix=fleet-fence-",
                    "kafka.txn-session.fleet.enabled=true", "kafka.txn-session.fleet.slots=2",
                    "kafka.txn-session.fleet.session-timeout=6s")
            .run()) {
            TransactionSessionPool pool = pool(app);
            await().atMost(Duration.ofSeconds(60)).until(() -> pool.snapshot().initialized() == 4);
            // an intruder initializes one of the instance's ids: that session is fenced
            Map<String, Object> configs = kafka.cluster().clientConfigs();
            configs.put("transactional.id", "fleet-fence-1-0");
            try (KafkaProducer<String, String> intruder = new KafkaProducer<>(configs, new StringSerializer(),
                    new StringSerializer())) {
                intruder.initTransactions();
            }
            @SuppressWarnings("unchecked")
            KafkaTemplate<Object, Object> template = app.getBean(KafkaTemplate.class);
            int failed = 0;
            for (int i = 0; i < 8; i++) {
                try {
                    int n = i;
                    template.executeInTransaction(t -> t.send("fleet-fence-out", "k", "v" + n));
                }
                catch (RuntimeException ex) {
                    failed++;
                }
            }
            assertThat(failed).as("the fenced session's transaction failed").isEqualTo(1);
            // the pool did not initialize the id itself; the fleet did, after its ownership check
            await().atMost(Duration.ofSeconds(30)).until(() -> pool.snapshot().initialized() == 4);
            for (int i = 0; i < 8; i++) {
                int n = i;
                template.executeInTransaction(t -> t.send("fleet-fence-out", "k", "w" + n));
            }
            assertThat(CommittedReader.readToEnd(kafka.bootstrapServers(), "fleet-fence-out", true)).hasSize(15);
        }
    }

    private static void assertDisjointAndComplete(List<ConfigurableApplicationContext> apps) {
        List<Integer> all = new ArrayList<>();
        for (ConfigurableApplicationContext app : apps) {
            all.addAll(pool(app).ownedFleetSlots());
            assertThat(app.getBean(TransactionalIdFleet.class).ownedSlots()).isEqualTo(pool(app).ownedFleetSlots());
        }
        assertThat(all).as("each slot owned by exactly one instance").containsExactlyInAnyOrder(0, 1, 2, 3);
    }

    private static TransactionSessionPool pool(ConfigurableApplicationContext app) {
        return app.getBean(TransactionSessionPool.class);
    }

    private static ConfigurableApplicationContext start() {
        return new SpringApplicationBuilder(App.class).web(WebApplicationType.NONE)
            .properties("spring.main.banner-mode=off", CommittedReader.KAFKA_ONLY,
                    "spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                    "spring.kafka.consumer.auto-offset-reset=earliest",
                    "spring.kafka.consumer.isolation-level=read-committed",
                    "spring.kafka.consumer.properties.session.timeout.ms=6000",
                    "spring.kafka.consumer.properties.heartbeat.interval.ms=1000",
                    "kafka.txn-session.transactional-id-prefix=fleet-app-",
                    "kafka.txn-session.acquire-timeout=30s",
                    "kafka.txn-session.fleet.enabled=true",
                    "kafka.txn-session.fleet.slots=" + SLOTS,
                    "kafka.txn-session.fleet.session-timeout=6s")
            .run();
    }

    private static void produce(int from, int to) {
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(kafka.cluster().clientConfigs(),
                new StringSerializer(), new StringSerializer())) {
            for (int i = from; i < to; i++) {
                producer.send(new ProducerRecord<>(IN, "k-" + i, "task-" + i));
            }
        }
    }

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class App {

        @Bean
        Listener listener(KafkaTemplate<Object, Object> template) {
            return new Listener(template);
        }

        @Bean
        TransactionSessionHealthIndicatorAccess healthAccess(org.springframework.context.ApplicationContext context) {
            return new TransactionSessionHealthIndicatorAccess(context);
        }
    }

    /** Reads the kafkaTxnSession health details, if the health indicator is registered. */
    static final class TransactionSessionHealthIndicatorAccess {

        private final org.springframework.context.ApplicationContext context;

        TransactionSessionHealthIndicatorAccess(org.springframework.context.ApplicationContext context) {
            this.context = context;
        }

        Map<String, Object> details() {
            return this.context.getBean(io.github.txnsession.autoconfigure.TransactionSessionHealthIndicator.class)
                .health().getDetails();
        }
    }

    /** Consume, transform, produce: no transaction code. */
    static class Listener {

        private final KafkaTemplate<Object, Object> template;

        Listener(KafkaTemplate<Object, Object> template) {
            this.template = template;
        }

        @KafkaListener(topics = IN, groupId = "fleet-app-group")
        void onTask(ConsumerRecord<String, String> record) {
            this.template.send(OUT, record.key(), "DONE-" + record.value().substring("task-".length()));
        }
    }
}
