package io.github.txnsession.boot;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;
import java.util.stream.Collectors;

import io.github.txnsession.kafka.ShareOutcomeLedger;
import io.github.txnsession.kafka.TransactionalConsumer;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.CurrentTransactionSession;
import io.github.txnsession.spring.SessionShareListenerContainer;
import io.github.txnsession.spring.ShareDeadLetterHandler;
import io.github.txnsession.spring.SessionTransactionManager;
import io.github.txnsession.spring.TransactionalConsumerFactory;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.StringDeserializer;
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
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.transaction.TransactionSystemException;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.transaction.support.TransactionTemplate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

/**
 * Consumers in Spring transactions: a programmatic loop with a {@link TransactionalConsumer} bound to each
 * transaction, and a {@link SessionShareListenerContainer} over a share group whose acknowledgements apply on commit
 * and whose rollbacks RELEASE the record for redelivery.
 */
class TransactionalConsumersTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(b -> b.brokers(1)
        .brokerProperty("group.share.min.record.lock.duration.ms", "1000"));

    static final String LOOP_IN = "loop-in";
    static final String LOOP_OUT = "loop-out";
    static final String TASKS = "tasks";
    static final String RESULTS = "results";
    static final String SHARE_GROUP = "workers";
    static final int TASK_COUNT = 40;
    static final int FAIL_EVERY = 10;
    static final String BATCH_TASKS = "batch-tasks";
    static final String BATCH_RESULTS = "batch-results";
    static final String BATCH_GROUP = "batch-workers";
    static final int BATCH_TASK_COUNT = 60;
    static final String LEDGER_TASKS = "ledger-tasks";
    static final String LEDGER_RESULTS = "ledger-results";
    static final String LEDGER_GROUP = "ledger-workers";
    static final String LEDGER_TOPIC = "consumers-test-ledger";
    static final int LEDGER_TASK_COUNT = 40;

    static ConfigurableApplicationContext context;

    @BeforeAll
    static void start() throws Exception {
        kafka.cluster().createTopics(1, LOOP_IN, LOOP_OUT, TASKS, RESULTS, BATCH_TASKS, BATCH_RESULTS,
                BATCH_TASKS + "-dlt", LEDGER_TASKS, LEDGER_RESULTS);
        kafka.cluster().admin().incrementalAlterConfigs(Map.of(
                new ConfigResource(ConfigResource.Type.GROUP, LEDGER_GROUP),
                List.of(new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"),
                        AlterConfigOp.OpType.SET)),
                new ConfigResource(ConfigResource.Type.GROUP, BATCH_GROUP),
                List.of(new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"),
                        AlterConfigOp.OpType.SET)),
                new ConfigResource(ConfigResource.Type.GROUP, SHARE_GROUP),
                List.of(new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"),
                        AlterConfigOp.OpType.SET),
                        // a short lock, so that a record whose acknowledgement was lost would come back quickly
                        new AlterConfigOp(new ConfigEntry("share.record.lock.duration.ms", "2000"),
                                AlterConfigOp.OpType.SET))))
            .all().get(30, TimeUnit.SECONDS);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(kafka.cluster().clientConfigs(),
                new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < TASK_COUNT; i++) {
                producer.send(new ProducerRecord<>(TASKS, String.format("t-%02d", i), "task " + i));
            }
            for (int i = 0; i < 20; i++) {
                producer.send(new ProducerRecord<>(LOOP_IN, String.format("l-%02d", i), "line " + i));
            }
            for (int i = 0; i < BATCH_TASK_COUNT; i++) {
                producer.send(new ProducerRecord<>(BATCH_TASKS, String.format("b-%02d", i), "task " + i));
            }
            for (int i = 0; i < LEDGER_TASK_COUNT; i++) {
                producer.send(new ProducerRecord<>(LEDGER_TASKS, String.format("g-%02d", i), "task " + i));
            }
        }
        context = new SpringApplicationBuilder(App.class)
            .web(WebApplicationType.NONE)
            .properties("spring.main.banner-mode=off", CommittedReader.KAFKA_ONLY,
                    "spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                    "spring.kafka.consumer.auto-offset-reset=earliest",
                    "kafka.txn-session.transactional-id-prefix=consumers-test-",
                    "kafka.txn-session.pool-size=3")
            .run();
    }

    @AfterAll
    static void stop() {
        if (context != null) {
            context.close();
        }
    }

    @Test
    void aProgrammaticLoopCommitsOffsetsWithItsOutputAndRewindsOnRollback() {
        TransactionalConsumerFactory consumers = context.getBean(TransactionalConsumerFactory.class);
        KafkaTemplate<Object, Object> template = context.getBean(KafkaTemplate.class);
        TransactionTemplate transactions = new TransactionTemplate(context.getBean(SessionTransactionManager.class));
        AtomicBoolean failedOnce = new AtomicBoolean();
        List<String> processed = new ArrayList<>();
        try (TransactionalConsumer<String, String> consumer = consumers.createConsumer("loop-group",
                new StringDeserializer(), new StringDeserializer())) {
            assertThatThrownBy(() -> consumers.bindToCurrentTransaction(consumer))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("No transaction session");
            assertThatThrownBy(() -> context.getBean(CurrentTransactionSession.class)
                .addShareAcksToTransaction(SHARE_GROUP, List.of()))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("No transaction session");
            consumer.subscribe(List.of(LOOP_IN));
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (committedOffset("loop-group", LOOP_IN) < 20 && System.nanoTime() < deadline) {
                try {
                    transactions.executeWithoutResult(status -> {
                        consumers.bindToCurrentTransaction(consumer);
                        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                            template.send(LOOP_OUT, r.key(), r.value().toUpperCase());
                            processed.add(r.key());
                            if (r.key().equals("l-07") && failedOnce.compareAndSet(false, true)) {
                                throw new IllegalStateException("injected failure after sending l-07");
                            }
                        }
                    });
                }
                catch (IllegalStateException ex) {
                    assertThat(ex).hasMessageContaining("injected failure");
                }
            }
            assertThat(consumer.transactionSession()).as("unbound after each transaction").isNull();
        }
        assertThat(failedOnce).isTrue();
        assertThat(processed.stream().filter("l-07"::equals)).hasSize(2); // rewound and processed again
        List<ConsumerRecord<String, String>> out = CommittedReader.readToEnd(kafka.bootstrapServers(), LOOP_OUT, true);
        assertThat(out).extracting(ConsumerRecord::key).hasSize(20).doesNotHaveDuplicates();
    }

    /**
     * A commit that fails with an abortable error (a send that failed while the code carried on) aborts the
     * transaction before its afterCompletion: the bound consumer rewinds and is unbound, and the next transaction
     * processes the same records (Spring itself does not roll back after a failed commit).
     */
    @Test
    void aCommitThatFailsAbortableRewindsAndUnbindsTheConsumer() {
        TransactionalConsumerFactory consumers = context.getBean(TransactionalConsumerFactory.class);
        KafkaTemplate<Object, Object> template = context.getBean(KafkaTemplate.class);
        TransactionTemplate transactions = new TransactionTemplate(context.getBean(SessionTransactionManager.class));
        List<String> firstTry = new ArrayList<>();
        try (TransactionalConsumer<String, String> consumer = consumers.createConsumer("abortable-group",
                new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(LOOP_IN));
            assertThatThrownBy(() -> transactions.executeWithoutResult(status -> {
                consumers.bindToCurrentTransaction(consumer);
                await().atMost(Duration.ofSeconds(30)).until(() -> {
                    consumer.poll(Duration.ofMillis(200)).forEach(r -> firstTry.add(r.key()));
                    return !firstTry.isEmpty();
                });
                try {
                    // larger than max.request.size: the send fails, and this code swallows the failure
                    template.send(LOOP_OUT, "too-large", "x".repeat(2 * 1024 * 1024));
                }
                catch (org.springframework.kafka.KafkaException ex) {
                    assertThat(ex).hasMessageContaining("Send failed");
                }
            })).isInstanceOf(TransactionSystemException.class).hasMessageContaining("Commit of transaction session");
            assertThat(consumer.transactionSession()).as("unbound after the failed commit").isNull();
            List<String> again = new ArrayList<>();
            transactions.executeWithoutResult(status -> {
                consumers.bindToCurrentTransaction(consumer);
                await().atMost(Duration.ofSeconds(30)).until(() -> {
                    consumer.poll(Duration.ofMillis(200)).forEach(r -> again.add(r.key()));
                    return again.size() >= firstTry.size();
                });
            });
            assertThat(again).as("rewound: the records of the failed transaction come again")
                .startsWith(firstTry.toArray(String[]::new));
        }
    }

    @Test
    void shareListenerAcknowledgesOnCommitAndReleasesOnRollback() throws Exception {
        ShareWorker worker = context.getBean(ShareWorker.class);
        @SuppressWarnings("unchecked")
        SessionShareListenerContainer<String, String> container = context.getBean("workers",
                SessionShareListenerContainer.class);
        int injected = TASK_COUNT / FAIL_EVERY;
        await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200))
            .until(() -> container.committedRecords() == TASK_COUNT);
        // acknowledgements were applied at commit: for two lock durations no record comes back
        await().during(Duration.ofSeconds(4)).atMost(Duration.ofSeconds(6)).pollInterval(Duration.ofMillis(200))
            .until(() -> container.committedRecords() == TASK_COUNT
                    && worker.deliveries().values().stream().mapToInt(Integer::intValue).sum()
                            == TASK_COUNT + injected);
        List<ConsumerRecord<String, String>> results = CommittedReader.readToEnd(kafka.bootstrapServers(), RESULTS,
                true);
        Map<String, Long> perKey = results.stream()
            .collect(Collectors.groupingBy(ConsumerRecord::key, Collectors.counting()));
        assertThat(perKey).hasSize(TASK_COUNT);
        assertThat(perKey.values()).allMatch(n -> n == 1L);
        assertThat(worker.deliveries().entrySet().stream().filter(e -> e.getValue() == 2).map(Map.Entry::getKey))
            .hasSize(injected).allMatch(k -> Integer.parseInt(k.substring(2)) % FAIL_EVERY == 0);
        assertThat(container.failedRecords()).isEqualTo(injected);
        assertThat(container.committedRecords()).isEqualTo(TASK_COUNT);
        // the rolled-back attempts did write, and were aborted
        assertThat(CommittedReader.readToEnd(kafka.bootstrapServers(), RESULTS, false))
            .hasSizeGreaterThanOrEqualTo(TASK_COUNT + injected);
    }

    /**
     * A poll's records run in one transaction; a failing record is released (or dead-lettered on its last allowed
     * delivery) while its neighbours' output commits without them being delivered again. A transaction that fails at
     * its commit is split into one per record; a transient failure is run again without using up a delivery.
     */
    @Test
    void aBatchContainerIsolatesFailingRecordsAndDeadLettersPoisonOnes() {
        BatchWorker worker = context.getBean(BatchWorker.class);
        @SuppressWarnings("unchecked")
        SessionShareListenerContainer<String, String> container = context.getBean("batchWorkers",
                SessionShareListenerContainer.class);
        List<String> poison = worker.keys(BatchWorker::isPoison);
        List<String> failOnce = worker.keys(k -> BatchWorker.failsOnce(k) && !BatchWorker.isPoison(k));
        await().atMost(Duration.ofSeconds(90)).pollInterval(Duration.ofMillis(200))
            .until(() -> container.committedRecords() == BATCH_TASK_COUNT - poison.size()
                    && container.deadLetteredRecords() == poison.size());
        List<ConsumerRecord<String, String>> results = CommittedReader.readToEnd(kafka.bootstrapServers(),
                BATCH_RESULTS, true);
        assertThat(results).extracting(ConsumerRecord::key)
            .doesNotHaveDuplicates()
            .hasSize(BATCH_TASK_COUNT - poison.size())
            .doesNotContainAnyElementsOf(poison);
        List<ConsumerRecord<String, String>> dead = CommittedReader.readToEnd(kafka.bootstrapServers(),
                BATCH_TASKS + "-dlt", true);
        assertThat(dead).extracting(ConsumerRecord::key).containsExactlyInAnyOrderElementsOf(poison);
        for (ConsumerRecord<String, String> r : dead) {
            assertThat(header(r, ShareDeadLetterHandler.DELIVERY_COUNT)).isEqualTo("2");
            assertThat(header(r, ShareDeadLetterHandler.EXCEPTION)).isEqualTo(BatchWorker.swallowsTooLarge(r.key())
                    ? TransactionSystemException.class.getName() : IllegalStateException.class.getName());
            assertThat(header(r, ShareDeadLetterHandler.ORIGINAL_TOPIC)).isEqualTo(BATCH_TASKS);
        }
        // neighbours of a failing record were never delivered again; the failing ones came back once
        worker.maxDelivery().forEach((key, delivery) -> assertThat(delivery).as(key)
            .isEqualTo(BatchWorker.failsOnce(key) || BatchWorker.isPoison(key) ? 2 : 1));
        assertThat(container.failedRecords()).as("transient failures are not counted")
            .isEqualTo(2L * poison.size() + failOnce.size());
        assertThat(worker.transientFailures()).isGreaterThanOrEqualTo(2);
        assertThat(worker.commits()).as("records share transactions").isLessThan((BATCH_TASK_COUNT - poison.size()) / 2);
        // rejected records are not delivered again
        await().during(Duration.ofSeconds(3)).atMost(Duration.ofSeconds(5))
            .until(() -> worker.maxDelivery().values().stream().allMatch(d -> d <= 2));
    }

    /**
     * The batch container with an outcome ledger: each transaction also writes its entry, records that failed once
     * come back (looked up in the ledger first, found nowhere, processed), and every task has one output.
     */
    @Test
    void aBatchContainerWithAnOutcomeLedgerWritesEntriesAndProducesEveryTaskOnce() {
        LedgerWorker worker = context.getBean(LedgerWorker.class);
        @SuppressWarnings("unchecked")
        SessionShareListenerContainer<String, String> container = context.getBean("ledgerWorkers",
                SessionShareListenerContainer.class);
        await().atMost(Duration.ofSeconds(90)).pollInterval(Duration.ofMillis(200))
            .until(() -> container.committedRecords() == LEDGER_TASK_COUNT);
        List<ConsumerRecord<String, String>> results = CommittedReader.readToEnd(kafka.bootstrapServers(),
                LEDGER_RESULTS, true);
        assertThat(results).extracting(ConsumerRecord::key).doesNotHaveDuplicates().hasSize(LEDGER_TASK_COUNT);
        assertThat(container.failedRecords()).isEqualTo(LEDGER_TASK_COUNT / 8);
        worker.maxDelivery().forEach((key, delivery) -> assertThat(delivery).as(key)
            .isEqualTo(LedgerWorker.failsOnce(key) ? 2 : 1));
        List<ConsumerRecord<String, String>> entries = CommittedReader.readToEnd(kafka.bootstrapServers(),
                LEDGER_TOPIC, true);
        assertThat(entries).as("ledger entries written in the workers' transactions").isNotEmpty()
            .allSatisfy(e -> assertThat(e.key()).contains(LEDGER_GROUP));
    }

    private static String header(ConsumerRecord<?, ?> r, String name) {
        return new String(r.headers().lastHeader(name).value(), StandardCharsets.UTF_8);
    }

    private static long committedOffset(String group, String topic) {
        try {
            OffsetAndMetadata o = kafka.cluster().admin().listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get().get(new TopicPartition(topic, 0));
            return o == null ? 0 : o.offset();
        }
        catch (Exception ex) {
            throw new IllegalStateException(ex);
        }
    }

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class App {

        @Bean
        ShareWorker shareWorker(KafkaTemplate<Object, Object> template) {
            return new ShareWorker(template);
        }

        @Bean
        SessionShareListenerContainer<String, String> workers(TransactionalConsumerFactory consumers,
                SessionTransactionManager transactionManager, ShareWorker worker) {
            SessionShareListenerContainer<String, String> container = new SessionShareListenerContainer<>("workers",
                    consumers, transactionManager, SHARE_GROUP, List.of(TASKS), StringDeserializer::new,
                    StringDeserializer::new, worker::onTask);
            container.setPollTimeout(Duration.ofMillis(200));
            container.setMaxRecordsPerTransaction(1);
            return container;
        }

        @Bean(destroyMethod = "close")
        ShareOutcomeLedger outcomeLedger() {
            return new ShareOutcomeLedger(Map.of("bootstrap.servers", kafka.bootstrapServers()), LEDGER_TOPIC,
                    Duration.ofSeconds(30));
        }

        @Bean
        LedgerWorker ledgerWorker(KafkaTemplate<Object, Object> template) {
            return new LedgerWorker(template);
        }

        @Bean
        SessionShareListenerContainer<String, String> ledgerWorkers(TransactionalConsumerFactory consumers,
                SessionTransactionManager transactionManager, LedgerWorker worker, ShareOutcomeLedger ledger) {
            SessionShareListenerContainer<String, String> container = new SessionShareListenerContainer<>(
                    "ledger-workers", consumers, transactionManager, LEDGER_GROUP, List.of(LEDGER_TASKS),
                    StringDeserializer::new, StringDeserializer::new, worker::onTask);
            container.setPollTimeout(Duration.ofMillis(200));
            container.setOutcomeLedger(ledger);
            return container;
        }

        @Bean
        BatchWorker batchWorker(KafkaTemplate<Object, Object> template) {
            return new BatchWorker(template);
        }

        @Bean
        SessionShareListenerContainer<String, String> batchWorkers(TransactionalConsumerFactory consumers,
                SessionTransactionManager transactionManager, BatchWorker worker,
                KafkaTemplate<Object, Object> template) {
            SessionShareListenerContainer<String, String> container = new SessionShareListenerContainer<>(
                    "batch-workers", consumers, transactionManager, BATCH_GROUP, List.of(BATCH_TASKS),
                    StringDeserializer::new, StringDeserializer::new, worker::onTask);
            container.setPollTimeout(Duration.ofMillis(200));
            container.setDeadLetterHandler(2, ShareDeadLetterHandler.toTopic(template));
            return container;
        }
    }

    /** A worker for the container with a ledger: a result per task, every eighth task fails on its first delivery. */
    static class LedgerWorker {

        private final KafkaTemplate<Object, Object> template;
        private final Map<String, Integer> maxDelivery = new ConcurrentHashMap<>();

        LedgerWorker(KafkaTemplate<Object, Object> template) {
            this.template = template;
        }

        static boolean failsOnce(String key) {
            return Integer.parseInt(key.substring(2)) % 8 == 0;
        }

        AcknowledgeType onTask(ConsumerRecord<String, String> task) {
            int delivery = task.deliveryCount().map(Short::intValue).orElse(0);
            this.maxDelivery.merge(task.key(), delivery, Math::max);
            this.template.send(LEDGER_RESULTS, task.key(), "done: " + task.value());
            if (failsOnce(task.key()) && delivery == 1) {
                throw new IllegalStateException("injected failure on " + task.key());
            }
            return AcknowledgeType.ACCEPT;
        }

        Map<String, Integer> maxDelivery() {
            return this.maxDelivery;
        }
    }

    /**
     * A batch worker: produces a result per task; every task {@code 5 mod 20} always fails (poison), every task
     * {@code 3 mod 7} fails on its first delivery. Counts the transactions that committed.
     */
    static class BatchWorker {

        private static final Object MARKER = new Object();
        private final KafkaTemplate<Object, Object> template;
        private final Map<String, Integer> maxDelivery = new ConcurrentHashMap<>();
        private final Set<String> failed = ConcurrentHashMap.newKeySet();
        private final AtomicInteger commits = new AtomicInteger();
        private final AtomicInteger transientFailures = new AtomicInteger();

        BatchWorker(KafkaTemplate<Object, Object> template) {
            this.template = template;
        }

        /** Fails on every delivery: in the listener ({@code 5 mod 20}), or at the commit (b-50). */
        static boolean isPoison(String key) {
            return Integer.parseInt(key.substring(2)) % 20 == 5 || swallowsTooLarge(key);
        }

        /** Sends an output larger than the producer allows and carries on: its transaction fails at the commit. */
        static boolean swallowsTooLarge(String key) {
            return key.equals("b-50");
        }

        /** Fails twice with a transient (Kafka timeout) error: run again without using up a delivery. */
        static boolean failsTransiently(String key) {
            return key.equals("b-40");
        }

        static boolean failsOnce(String key) {
            return Integer.parseInt(key.substring(2)) % 7 == 3;
        }

        List<String> keys(Predicate<String> which) {
            List<String> keys = new ArrayList<>();
            for (int i = 0; i < BATCH_TASK_COUNT; i++) {
                String key = String.format("b-%02d", i);
                if (which.test(key)) {
                    keys.add(key);
                }
            }
            return keys;
        }

        AcknowledgeType onTask(ConsumerRecord<String, String> task) {
            countCommitOfThisTransaction();
            int delivery = task.deliveryCount().map(Short::intValue).orElse(0);
            this.maxDelivery.merge(task.key(), delivery, Math::max);
            this.template.send(BATCH_RESULTS, task.key(), "done: " + task.value());
            if (swallowsTooLarge(task.key())) {
                try {
                    this.template.send(BATCH_RESULTS, task.key(), "x".repeat(2 * 1024 * 1024));
                }
                catch (RuntimeException ex) {
                    // carries on: the transaction fails when it commits, naming no record
                }
                return AcknowledgeType.ACCEPT;
            }
            if (failsTransiently(task.key()) && this.transientFailures.incrementAndGet() <= 2) {
                throw new TimeoutException("injected transient failure on " + task.key());
            }
            if (isPoison(task.key()) || (failsOnce(task.key()) && this.failed.add(task.key()))) {
                throw new IllegalStateException("injected failure on " + task.key() + " (delivery " + delivery + ")");
            }
            return AcknowledgeType.ACCEPT;
        }

        private void countCommitOfThisTransaction() {
            if (TransactionSynchronizationManager.hasResource(MARKER)) {
                return;
            }
            TransactionSynchronizationManager.bindResource(MARKER, true);
            TransactionSynchronizationManager.registerSynchronization(
                    new TransactionSynchronization() {
                        @Override
                        public void afterCompletion(int status) {
                            TransactionSynchronizationManager
                                .unbindResource(MARKER);
                            if (status == STATUS_COMMITTED) {
                                BatchWorker.this.commits.incrementAndGet();
                            }
                        }
                    });
        }

        Map<String, Integer> maxDelivery() {
            return this.maxDelivery;
        }

        int commits() {
            return this.commits.get();
        }

        int transientFailures() {
            return this.transientFailures.get();
        }
    }

    /** The application's share-group worker: produce a result, fail once on every tenth task. */
    static class ShareWorker {

        private final KafkaTemplate<Object, Object> template;
        private final Map<String, Integer> deliveries = new ConcurrentHashMap<>();
        private final Set<String> failed = ConcurrentHashMap.newKeySet();

        ShareWorker(KafkaTemplate<Object, Object> template) {
            this.template = template;
        }

        AcknowledgeType onTask(ConsumerRecord<String, String> task) {
            int delivery = this.deliveries.merge(task.key(), 1, Integer::sum);
            this.template.send(RESULTS, task.key(), "done: " + task.value());
            if (Integer.parseInt(task.key().substring(2)) % FAIL_EVERY == 0 && this.failed.add(task.key())) {
                this.template.flush();
                throw new IllegalStateException("injected failure on " + task.key() + " (delivery " + delivery + ")");
            }
            return AcknowledgeType.ACCEPT;
        }

        Map<String, Integer> deliveries() {
            return this.deliveries;
        }
    }
}
