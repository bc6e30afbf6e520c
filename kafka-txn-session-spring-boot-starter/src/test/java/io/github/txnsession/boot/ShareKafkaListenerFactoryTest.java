package io.github.txnsession.boot;

import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import io.github.txnsession.kafka.ShareOutcomeLedger;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.SessionShareKafkaListenerContainerFactory;
import io.github.txnsession.spring.SessionTransactionManager;
import io.github.txnsession.spring.TransactionalConsumerFactory;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.jspecify.annotations.Nullable;
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
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.DefaultShareConsumerFactory;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.TransactionException;
import org.springframework.transaction.TransactionStatus;
import org.springframework.transaction.TransactionSystemException;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * {@code @KafkaListener} share listeners on a {@link SessionShareKafkaListenerContainerFactory} against a broker, with
 * a 2-s acquisition lock: each record's output commits in its transaction before it is ACCEPTed; an outage longer
 * than the group's deliveries' worth of locks keeps the record on its first delivery; a listener call longer than the
 * lock does not commit a second output; a commit that happened but reported a failure is not run again; a factory
 * with an outcome ledger writes entries and produces every task once.
 */
class ShareKafkaListenerFactoryTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(b -> b.brokers(1)
        .brokerProperty("group.share.min.record.lock.duration.ms", "1000"));

    /** the groups' acquisition lock; the default delivery limit (5) of locks is 10 s */
    static final int LOCK_MS = 2000;
    static final String TASKS = "listener-tasks";
    static final String RESULTS = "listener-results";
    static final String GROUP = "listener-workers";
    static final int TASK_COUNT = 30;
    /** how long task k-02's outage lasts: longer than the delivery limit's worth of locks */
    static final Duration OUTAGE = Duration.ofSeconds(12);
    static final String SLOW_TASKS = "slow-tasks";
    static final String SLOW_RESULTS = "slow-results";
    static final String SLOW_GROUP = "slow-workers";
    static final String COMMIT_TASKS = "commit-tasks";
    static final String COMMIT_RESULTS = "commit-results";
    static final String COMMIT_GROUP = "commit-workers";
    static final String LEDGER_TASKS = "ledger-listener-tasks";
    static final String LEDGER_RESULTS = "ledger-listener-results";
    static final String LEDGER_GROUP = "ledger-listener-workers";
    static final String LEDGER_TOPIC = "listener-factory-ledger";
    static final int LEDGER_TASK_COUNT = 20;
    static final int LEDGER_LOCK_MS = 15_000;

    static ConfigurableApplicationContext context;

    @BeforeAll
    static void start() throws Exception {
        kafka.cluster().createTopics(1, TASKS, RESULTS, SLOW_TASKS, SLOW_RESULTS, COMMIT_TASKS, COMMIT_RESULTS,
                LEDGER_TASKS, LEDGER_RESULTS);
        Map<ConfigResource, Collection<AlterConfigOp>> groups = new HashMap<>();
        for (String group : List.of(GROUP, SLOW_GROUP, COMMIT_GROUP, LEDGER_GROUP)) {
            // the ledger's first transactions read the ledger: they may outlast a 2-s lock
            int lockMs = group.equals(LEDGER_GROUP) ? LEDGER_LOCK_MS : LOCK_MS;
            groups.put(new ConfigResource(ConfigResource.Type.GROUP, group), List.of(
                    new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("share.record.lock.duration.ms", String.valueOf(lockMs)),
                            AlterConfigOp.OpType.SET)));
        }
        kafka.cluster().admin().incrementalAlterConfigs(groups).all().get(30, TimeUnit.SECONDS);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(kafka.cluster().clientConfigs(),
                new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < TASK_COUNT; i++) {
                producer.send(new ProducerRecord<>(TASKS, String.format("k-%02d", i), "task " + i));
            }
            producer.send(new ProducerRecord<>(SLOW_TASKS, "s-0", "slow task"));
            producer.send(new ProducerRecord<>(COMMIT_TASKS, "c-0", "task whose commit reports a failure"));
            for (int i = 0; i < LEDGER_TASK_COUNT; i++) {
                producer.send(new ProducerRecord<>(LEDGER_TASKS, String.format("g-%02d", i), "task " + i));
            }
        }
        context = new SpringApplicationBuilder(App.class)
            .web(WebApplicationType.NONE)
            .properties("spring.main.banner-mode=off", CommittedReader.KAFKA_ONLY,
                    "spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                    "kafka.txn-session.transactional-id-prefix=listener-factory-test-",
                    "kafka.txn-session.pool-size=4")
            .run();
    }

    @AfterAll
    static void stop() {
        if (context != null) {
            context.close();
        }
    }

    /**
     * Each record's output commits in its transaction before the container ACCEPTs it; a rolled-back record is
     * released and done on its next delivery; a transient failure is run again on the same delivery, and an outage
     * longer than the group's deliveries' worth of locks keeps the record, and the poll's others, on their first
     * delivery (their locks are renewed).
     */
    @Test
    void eachRecordRunsInATransactionAndAnOutageUsesUpNoDelivery() {
        ListenerWorker worker = context.getBean(ListenerWorker.class);
        await().atMost(Duration.ofSeconds(90)).pollInterval(Duration.ofMillis(200))
            .until(() -> CommittedReader.readToEnd(kafka.bootstrapServers(), RESULTS, true).size() >= TASK_COUNT);
        // acknowledged after commit: nothing comes back for more than a lock
        await().during(Duration.ofSeconds(3)).atMost(Duration.ofSeconds(5))
            .until(() -> worker.invocations().entrySet().stream().filter(e -> !e.getKey().equals("k-02"))
                .mapToInt(Map.Entry::getValue).sum() == TASK_COUNT - 1 + TASK_COUNT / 5 + 1);
        List<Long> attempts = worker.outageAttempts();
        assertThat(Duration.ofNanos(attempts.get(attempts.size() - 1) - attempts.get(0)))
            .as("k-02 was retried in place through the whole outage").isGreaterThanOrEqualTo(OUTAGE);
        List<ConsumerRecord<String, String>> results = CommittedReader.readToEnd(kafka.bootstrapServers(), RESULTS,
                true);
        assertThat(results).extracting(ConsumerRecord::key).doesNotHaveDuplicates().hasSize(TASK_COUNT);
        worker.maxDelivery().forEach((key, delivery) -> assertThat(delivery).as(key)
            .isEqualTo(ListenerWorker.failsOnce(key) ? 2 : 1));
        assertThat(CommittedReader.readToEnd(kafka.bootstrapServers(), RESULTS, false))
            .as("the rolled-back attempts wrote, and were aborted").hasSizeGreaterThan(TASK_COUNT);
    }

    /**
     * A listener call longer than the lock: the record may have gone to another consumer meanwhile, so the call's
     * output is committed only if the consumer still holds the record afterwards; either way it is committed once.
     */
    @Test
    void aListenerCallLongerThanTheLockCommitsItsOutputOnce() {
        SlowWorker worker = context.getBean(SlowWorker.class);
        await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200))
            .until(() -> CommittedReader.readToEnd(kafka.bootstrapServers(), SLOW_RESULTS, true).size() >= 1);
        // a second output would come within a lock or two of the first delivery's end
        await().during(Duration.ofMillis(3 * LOCK_MS)).atMost(Duration.ofMillis(4 * LOCK_MS))
            .until(() -> CommittedReader.readToEnd(kafka.bootstrapServers(), SLOW_RESULTS, true).size() == 1);
        assertThat(worker.calls()).as("the slow first call ran").isGreaterThanOrEqualTo(1);
    }

    /**
     * A commit that happened but reported a failure: the work is not run again on that delivery (the commit may have
     * happened), and the record, acknowledged with the commit, is not delivered again.
     */
    @Test
    void aCommitThatReportsAFailureIsNotRunAgain() {
        CommitWorker worker = context.getBean(CommitWorker.class);
        await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200))
            .until(() -> CommittedReader.readToEnd(kafka.bootstrapServers(), COMMIT_RESULTS, true).size() >= 1);
        await().during(Duration.ofMillis(2 * LOCK_MS)).atMost(Duration.ofMillis(3 * LOCK_MS))
            .until(() -> worker.calls() == 1);
        assertThat(FailingAfterCommit.FAILED).as("the commit reported a failure").isTrue();
        assertThat(CommittedReader.readToEnd(kafka.bootstrapServers(), COMMIT_RESULTS, true)).hasSize(1);
    }

    /** A factory with an outcome ledger: each transaction writes its entry; every task has one output. */
    @Test
    void aFactoryWithAnOutcomeLedgerProducesEveryTaskOnce() {
        LedgerWorker worker = context.getBean(LedgerWorker.class);
        await().atMost(Duration.ofSeconds(90)).pollInterval(Duration.ofMillis(200))
            .until(() -> CommittedReader.readToEnd(kafka.bootstrapServers(), LEDGER_RESULTS, true).size()
                    >= LEDGER_TASK_COUNT);
        await().atMost(Duration.ofSeconds(10)).until(() -> worker.maxDelivery().size() == LEDGER_TASK_COUNT);
        assertThat(CommittedReader.readToEnd(kafka.bootstrapServers(), LEDGER_RESULTS, true))
            .extracting(ConsumerRecord::key).doesNotHaveDuplicates().hasSize(LEDGER_TASK_COUNT);
        worker.maxDelivery().forEach((key, delivery) -> assertThat(delivery).as(key)
            .isEqualTo(LedgerWorker.failsOnce(key) ? 2 : 1));
        assertThat(CommittedReader.readToEnd(kafka.bootstrapServers(), LEDGER_TOPIC, true))
            .as("ledger entries written in the listeners' transactions").isNotEmpty()
            .allSatisfy(e -> assertThat(e.key()).contains(LEDGER_GROUP));
    }

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class App {

        private static DefaultShareConsumerFactory<String, String> shareConsumers() {
            return new DefaultShareConsumerFactory<>(Map.of("bootstrap.servers", kafka.bootstrapServers()),
                    StringDeserializer::new, StringDeserializer::new);
        }

        @Bean
        SessionShareKafkaListenerContainerFactory<String, String> sessionShareFactory(
                SessionTransactionManager transactionManager) {
            return new SessionShareKafkaListenerContainerFactory<>(shareConsumers(), transactionManager);
        }

        @Bean
        SessionShareKafkaListenerContainerFactory<String, String> commitFailingShareFactory(
                SessionTransactionManager transactionManager, TransactionalConsumerFactory transactionalConsumers) {
            // (not a bean: a second transaction manager in the context would be refused)
            return new SessionShareKafkaListenerContainerFactory<>(shareConsumers(),
                    new FailingAfterCommit(transactionManager), transactionalConsumers);
        }

        @Bean(destroyMethod = "close")
        ShareOutcomeLedger outcomeLedger() {
            return new ShareOutcomeLedger(Map.of("bootstrap.servers", kafka.bootstrapServers()), LEDGER_TOPIC,
                    Duration.ofSeconds(30));
        }

        @Bean
        SessionShareKafkaListenerContainerFactory<String, String> ledgerShareFactory(
                SessionTransactionManager transactionManager, ShareOutcomeLedger ledger) {
            SessionShareKafkaListenerContainerFactory<String, String> factory =
                    new SessionShareKafkaListenerContainerFactory<>(shareConsumers(), transactionManager);
            factory.setOutcomeLedger(ledger);
            return factory;
        }

        @Bean
        ListenerWorker listenerWorker(KafkaTemplate<Object, Object> template) {
            return new ListenerWorker(template);
        }

        @Bean
        SlowWorker slowWorker(KafkaTemplate<Object, Object> template) {
            return new SlowWorker(template);
        }

        @Bean
        CommitWorker commitWorker(KafkaTemplate<Object, Object> template) {
            return new CommitWorker(template);
        }

        @Bean
        LedgerWorker ledgerWorker(KafkaTemplate<Object, Object> template) {
            return new LedgerWorker(template);
        }
    }

    /**
     * A result per task; every fifth task fails on its first delivery (after sending), task k-01 fails once with a
     * transient error, task k-02 fails transiently for {@link #OUTAGE} from its first attempt.
     */
    static class ListenerWorker {

        private final KafkaTemplate<Object, Object> template;
        private final Map<String, Integer> invocations = new ConcurrentHashMap<>();
        private final Map<String, Integer> maxDelivery = new ConcurrentHashMap<>();
        private final AtomicBoolean transientFailed = new AtomicBoolean();
        private final List<Long> outageAttempts = new CopyOnWriteArrayList<>();

        ListenerWorker(KafkaTemplate<Object, Object> template) {
            this.template = template;
        }

        static boolean failsOnce(String key) {
            return Integer.parseInt(key.substring(2)) % 5 == 0;
        }

        @KafkaListener(topics = TASKS, groupId = GROUP, containerFactory = "sessionShareFactory")
        void onTask(ConsumerRecord<String, String> task) {
            this.invocations.merge(task.key(), 1, Integer::sum);
            int delivery = task.deliveryCount().map(Short::intValue).orElse(0);
            this.maxDelivery.merge(task.key(), delivery, Math::max);
            this.template.send(RESULTS, task.key(), "done: " + task.value());
            if (task.key().equals("k-01") && this.transientFailed.compareAndSet(false, true)) {
                throw new TimeoutException("injected transient failure on " + task.key());
            }
            if (task.key().equals("k-02")) {
                long now = System.nanoTime();
                this.outageAttempts.add(now);
                if (now - this.outageAttempts.get(0) < OUTAGE.toNanos()) {
                    throw new TimeoutException("injected outage on " + task.key());
                }
            }
            if (failsOnce(task.key()) && delivery == 1) {
                this.template.flush();
                throw new IllegalStateException("injected failure on " + task.key());
            }
        }

        Map<String, Integer> invocations() {
            return this.invocations;
        }

        List<Long> outageAttempts() {
            return this.outageAttempts;
        }

        Map<String, Integer> maxDelivery() {
            return this.maxDelivery;
        }
    }

    /** Its first call outlasts the lock (the work itself is slow, not a wait for something). */
    static class SlowWorker {

        private final KafkaTemplate<Object, Object> template;
        private final AtomicInteger calls = new AtomicInteger();

        SlowWorker(KafkaTemplate<Object, Object> template) {
            this.template = template;
        }

        @KafkaListener(topics = SLOW_TASKS, groupId = SLOW_GROUP, containerFactory = "sessionShareFactory")
        void onTask(ConsumerRecord<String, String> task) throws InterruptedException {
            this.template.send(SLOW_RESULTS, task.key(), "done: " + task.value());
            if (this.calls.incrementAndGet() == 1) {
                Thread.sleep(LOCK_MS + 1500); // slow work, longer than the lock
            }
        }

        int calls() {
            return this.calls.get();
        }
    }

    /** A result per task, through a transaction manager whose first commit reports a failure after committing. */
    static class CommitWorker {

        private final KafkaTemplate<Object, Object> template;
        private final AtomicInteger calls = new AtomicInteger();

        CommitWorker(KafkaTemplate<Object, Object> template) {
            this.template = template;
        }

        @KafkaListener(topics = COMMIT_TASKS, groupId = COMMIT_GROUP, containerFactory = "commitFailingShareFactory")
        void onTask(ConsumerRecord<String, String> task) {
            this.calls.incrementAndGet();
            this.template.send(COMMIT_RESULTS, task.key(), "done: " + task.value());
        }

        int calls() {
            return this.calls.get();
        }
    }

    /** The session manager, except that its first commit throws a transient-looking failure after it committed. */
    static final class FailingAfterCommit implements PlatformTransactionManager {

        static final AtomicBoolean FAILED = new AtomicBoolean();
        private final SessionTransactionManager delegate;

        FailingAfterCommit(SessionTransactionManager delegate) {
            this.delegate = delegate;
        }

        @Override
        public TransactionStatus getTransaction(@Nullable TransactionDefinition definition) throws TransactionException {
            return this.delegate.getTransaction(definition);
        }

        @Override
        public void commit(TransactionStatus status) throws TransactionException {
            this.delegate.commit(status);
            if (FAILED.compareAndSet(false, true)) {
                throw new TransactionSystemException("commit outcome not reported",
                        new TimeoutException("injected: no answer to the commit"));
            }
        }

        @Override
        public void rollback(TransactionStatus status) throws TransactionException {
            this.delegate.rollback(status);
        }
    }

    /** A result per task on the ledger factory; every fourth task fails on its first delivery. */
    static class LedgerWorker {

        private final KafkaTemplate<Object, Object> template;
        private final Map<String, Integer> maxDelivery = new ConcurrentHashMap<>();

        LedgerWorker(KafkaTemplate<Object, Object> template) {
            this.template = template;
        }

        static boolean failsOnce(String key) {
            return Integer.parseInt(key.substring(2)) % 4 == 0;
        }

        @KafkaListener(topics = LEDGER_TASKS, groupId = LEDGER_GROUP, containerFactory = "ledgerShareFactory")
        void onTask(ConsumerRecord<String, String> task) {
            int delivery = task.deliveryCount().map(Short::intValue).orElse(0);
            this.maxDelivery.merge(task.key(), delivery, Math::max);
            this.template.send(LEDGER_RESULTS, task.key(), "done: " + task.value());
            if (failsOnce(task.key()) && delivery == 1) {
                throw new IllegalStateException("injected failure on " + task.key());
            }
        }

        Map<String, Integer> maxDelivery() {
            return this.maxDelivery;
        }
    }
}
