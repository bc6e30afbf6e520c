package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static io.github.txnsession.kafka.TestClients.everyRecordAcknowledged;
import static io.github.txnsession.kafka.TestClients.produce;
import static io.github.txnsession.kafka.TestClients.readCommitted;
import static io.github.txnsession.kafka.TestClients.sessionConfigs;
import static io.github.txnsession.kafka.TestClients.setGroupConfigs;
import static io.github.txnsession.kafka.TestClients.shareConsumerConfigs;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * A randomized model test of bound share consumers without a ledger: three workers, driven one step at a time in a
 * random order from one thread, poll, decide (ACCEPT with an output, REJECT, RELEASE), commit or abort, and in between
 * call what an application may call (its own {@code commitSync}/{@code commitAsync}, {@code heartbeat()} and
 * {@code RENEW}s inside transactions as well as between them, a wakeup before a poll, a close and a new consumer on
 * the same session), or do nothing while the others work: the gaps in which a committed transaction's
 * acknowledgements wait for the next poll or the background check.
 *
 * <p>The oracle: a record whose ACCEPT or REJECT committed is never delivered again (the acquisition lock lasts a
 * minute, longer than a default run, so a lost acknowledgement cannot hide behind a redelivery); each delivery of a
 * record counts more than the last (records a consumer fetched but never returned count too); at the end, with no further call, the group has every record acknowledged, and the
 * {@code read_committed} output holds exactly one record per accepted input and none for a rejected one; the
 * application's acknowledgement callback ran on the application's thread only, and reported no failure.
 *
 * <p>{@code -Dtxnsession.share.model.records=N} sets the input size (400 by default, about 10 s) and
 * {@code -Dtxnsession.share.model.seed=S} replays a run; {@code -Pmodel-full} runs 20,000.
 */
class ShareConsumerModelTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(b -> b.brokers(1)
        // records a worker's consumer fetched but never returned count as deliveries too (released when it closes):
        // the highest limit keeps a record from being archived unprocessed
        .brokerProperty("group.share.delivery.count.limit", "10"));

    private static final int RECORDS = Integer.getInteger("txnsession.share.model.records", 400);
    private static final int WORKERS = 3;
    /** from this delivery on a record is accepted and its transaction committed, far from the delivery limit */
    private static final int SETTLE_FROM_DELIVERY = 3;

    @BeforeEach
    void brokersRunShareGroups() {
        assumeTrue(kafka.cluster().supportsShareGroups(), "the brokers do not run share groups (Kafka 4.1+)");
    }

    @Test
    void randomCallsNeverLoseOrRepeatACommittedAcknowledgement() throws Exception {
        long seed = Long.getLong("txnsession.share.model.seed", System.nanoTime());
        Model model = new Model(new Random(seed));
        String input = EmbeddedKafkaCluster.uniqueName("share-model-in");
        String output = EmbeddedKafkaCluster.uniqueName("share-model-out");
        kafka.cluster().createTopics(2, input, output);
        List<ProducerRecord<String, String>> inputs = new ArrayList<>();
        for (int i = 0; i < RECORDS; i++) {
            inputs.add(new ProducerRecord<>(input, i % 2, null, "in-" + i));
        }
        produce(kafka.cluster(), inputs);
        String group = EmbeddedKafkaCluster.uniqueName("share-model-group");
        setGroupConfigs(kafka.cluster(), group, Map.of("share.auto.offset.reset", "earliest",
                "share.record.lock.duration.ms", "60000")); // the brokers' maximum
        List<Worker> workers = new ArrayList<>();
        try {
            for (int w = 0; w < WORKERS; w++) {
                workers.add(new Worker("w" + w, group, input, output, model));
            }
            long deadline = System.nanoTime() + Duration.ofMinutes(2).plusMillis(RECORDS * 50L).toNanos();
            while (model.settled.size() < RECORDS) {
                if (System.nanoTime() > deadline) {
                    throw model.violation("only " + model.settled.size() + " of " + RECORDS + " records settled");
                }
                workers.get(model.random.nextInt(WORKERS)).step();
            }
            for (Worker w : workers) {
                w.finishTransaction(); // (one that released all it held; any other would have settled records)
            }
            // no further call: the last commits' acknowledgements must go out on their own
            await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(200))
                .until(() -> everyRecordAcknowledged(kafka.cluster(), group, input));
        }
        catch (AssertionError | RuntimeException ex) {
            System.out.println("share model, seed " + seed + ", last steps:\n  " + String.join("\n  ", model.history));
            try {
                closeAll(workers);
            }
            catch (RuntimeException closing) {
                ex.addSuppressed(closing);
            }
            throw ex;
        }
        closeAll(workers);
        Map<String, Integer> counts = new HashMap<>();
        for (ConsumerRecord<String, String> r : readCommitted(kafka.cluster(), output)) {
            counts.merge(r.key(), 1, Integer::sum);
        }
        assertThat(counts).as("seed %d: one output per accepted input, none for a rejected one", seed)
            .containsOnlyKeys(model.accepted).allSatisfy((k, n) -> assertThat(n).isEqualTo(1));
        assertThat(model.accepted.size() + model.rejected.size()).as("seed %d", seed).isEqualTo(RECORDS);
        assertThat(model.callbackViolation).as("seed %d", seed).isNull();
        assertThat(model.callbacks).as("seed %d: the acknowledgement callback was called", seed).isPositive();
        System.out.printf("share model, seed %d: %d records (%d accepted, %d rejected), %d commits, %d aborts, "
                + "%d redeliveries, %d steps, %d acknowledgement callbacks%n", seed, RECORDS, model.accepted.size(),
                model.rejected.size(), model.commits, model.aborts, model.redeliveries, model.steps, model.callbacks);
    }

    private static void closeAll(List<Worker> workers) {
        RuntimeException first = null;
        for (Worker w : workers) {
            try {
                w.close();
            }
            catch (RuntimeException ex) {
                if (first == null) {
                    first = ex;
                }
                else {
                    first.addSuppressed(ex);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }

    /** What a read_committed reader and the group must show, as the workers' steps tell it. */
    private static final class Model {

        final Random random;
        /** inputs whose ACCEPT committed */
        final Set<String> accepted = new HashSet<>();
        /** inputs whose REJECT committed */
        final Set<String> rejected = new HashSet<>();
        /** accepted and rejected */
        final Set<String> settled = new HashSet<>();
        final Map<String, Short> lastDeliveryCount = new HashMap<>();
        final Deque<String> history = new ArrayDeque<>();
        int commits;
        int aborts;
        int redeliveries;
        int steps;
        int callbacks;
        final Thread applicationThread = Thread.currentThread();
        volatile @Nullable String callbackViolation;

        Model(Random random) {
            this.random = random;
        }

        void log(String step) {
            this.steps++;
            this.history.addLast(step);
            if (this.history.size() > 60) {
                this.history.removeFirst();
            }
        }

        void delivered(String worker, ConsumerRecord<String, String> r) {
            short count = r.deliveryCount().orElseThrow();
            if (this.settled.contains(r.value())) {
                throw violation(worker + " was delivered " + r.value() + " (delivery " + count + ") after its "
                        + (this.accepted.contains(r.value()) ? "ACCEPT" : "REJECT") + " committed");
            }
            Short last = this.lastDeliveryCount.put(r.value(), count);
            if (last != null) {
                this.redeliveries++;
                if (count <= last) {
                    throw violation(r.value() + " delivered again with delivery count " + count + " after " + last);
                }
            }
        }

        /** The application's acknowledgement callback: on the application's thread, and no failure. */
        void answered(String worker, @Nullable Exception failure) {
            this.callbacks++;
            if (Thread.currentThread() != this.applicationThread) {
                this.callbackViolation = worker + "'s acknowledgement callback ran on " + Thread.currentThread();
            }
            else if (failure != null) {
                this.callbackViolation = worker + "'s acknowledgements failed: " + failure;
            }
        }

        AssertionError violation(String what) {
            return new AssertionError("Share model violation: " + what);
        }
    }

    /** One application thread's worker: a session, a bound share consumer, a producer; one step at a time. */
    private static final class Worker {

        private final String name;
        private final String group;
        private final String input;
        private final String output;
        private final Model model;
        private final TransactionSession session;
        private final SessionProducer<String, String> producer;
        private TransactionalShareConsumer<String, String> consumer;
        /** delivered by the last poll, not yet decided */
        private List<ConsumerRecord<String, String>> held = List.of();
        /** decided in the open transaction: input to ACCEPT (true) or REJECT (false); RELEASEs are not kept */
        private final Map<String, Boolean> decided = new HashMap<>();
        private boolean inTransaction;

        Worker(String name, String group, String input, String output, Model model) {
            this.name = name;
            this.group = group;
            this.input = input;
            this.output = output;
            this.model = model;
            this.session = TransactionSession.open(sessionConfigs(kafka.cluster(),
                    EmbeddedKafkaCluster.uniqueName("share-model-" + name)));
            this.session.initialize();
            this.producer = new SessionProducer<>(this.session, new StringSerializer(), new StringSerializer());
            this.consumer = newConsumer();
        }

        private TransactionalShareConsumer<String, String> newConsumer() {
            Map<String, Object> configs = shareConsumerConfigs(kafka.cluster(), this.group);
            configs.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 7);
            configs.put(ConsumerConfig.SHARE_ACQUIRE_MODE_CONFIG, "record_limit");
            TransactionalShareConsumer<String, String> created = new TransactionalShareConsumer<>(configs,
                    new StringDeserializer(), new StringDeserializer());
            created.setAcknowledgementCommitCallback((offsets, failure) -> this.model.answered(this.name, failure));
            created.subscribe(List.of(this.input));
            created.bindTransactionSession(this.session);
            return created;
        }

        void step() {
            if (this.inTransaction) {
                finishTransaction();
            }
            else if (!this.held.isEmpty()) {
                decide();
            }
            else {
                idleStep();
            }
        }

        /** No records held: poll, or one of the other calls an application makes between transactions. */
        private void idleStep() {
            int dice = this.model.random.nextInt(100);
            if (dice < 50) {
                poll(Duration.ofMillis(this.model.random.nextInt(60)));
            }
            else if (dice < 55) {
                this.model.log(this.name + " wakeup, then poll");
                this.consumer.wakeup();
                try {
                    poll(Duration.ofMillis(50));
                    throw this.model.violation(this.name + ": a poll after wakeup() returned");
                }
                catch (WakeupException expected) {
                    // the wakeup ends the next poll, as it must
                }
            }
            else if (dice < 60) {
                this.model.log(this.name + " commitSync");
                this.consumer.commitSync();
            }
            else if (dice < 65) {
                this.model.log(this.name + " commitAsync");
                this.consumer.commitAsync();
            }
            else if (dice < 70) {
                this.model.log(this.name + " heartbeat");
                this.consumer.heartbeat();
            }
            else if (dice < 73) {
                this.model.log(this.name + " close, new consumer on the same session");
                this.consumer.close();
                this.consumer = newConsumer();
            }
            else {
                this.model.log(this.name + " does nothing"); // the others work; its acknowledgements may wait
            }
        }

        private void poll(Duration timeout) {
            ConsumerRecords<String, String> records = this.consumer.poll(timeout);
            List<ConsumerRecord<String, String>> got = new ArrayList<>();
            for (ConsumerRecord<String, String> r : records) {
                this.model.delivered(this.name, r);
                got.add(r);
            }
            this.model.log(this.name + " poll(" + timeout.toMillis() + " ms): " + got.stream()
                .map(r -> r.value() + "#" + r.deliveryCount().orElseThrow()).toList());
            this.held = got;
        }

        /** Begins a transaction and acknowledges every held record: ACCEPT with an output, REJECT, or RELEASE. */
        private void decide() {
            this.session.beginTransaction();
            this.inTransaction = true;
            StringBuilder step = new StringBuilder(this.name + " begin;");
            if (this.model.random.nextInt(6) == 0) {
                // a renewed record comes back only with a poll: the commit has to take it back first
                ConsumerRecord<String, String> renewed = this.held.get(this.model.random.nextInt(this.held.size()));
                this.consumer.acknowledge(renewed, AcknowledgeType.RENEW);
                step.append(" RENEW ").append(renewed.value()).append(';');
            }
            for (ConsumerRecord<String, String> r : this.held) {
                int dice = this.model.random.nextInt(100);
                boolean settle = r.deliveryCount().orElseThrow() >= SETTLE_FROM_DELIVERY;
                if (settle || dice < 75) {
                    this.producer.send(new ProducerRecord<>(this.output, r.value(), r.value()));
                    this.consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                    this.decided.put(r.value(), true);
                    step.append(" ACCEPT ").append(r.value());
                }
                else if (dice < 85) {
                    this.consumer.acknowledge(r, AcknowledgeType.REJECT);
                    this.decided.put(r.value(), false);
                    step.append(" REJECT ").append(r.value());
                }
                else {
                    this.consumer.acknowledge(r, AcknowledgeType.RELEASE);
                    step.append(" RELEASE ").append(r.value());
                }
            }
            this.model.log(step.toString());
            this.held = List.of();
        }

        /** Commits the open transaction, or one time in six aborts it (unless it holds a record to settle). */
        void finishTransaction() {
            if (!this.inTransaction) {
                return;
            }
            this.inTransaction = false;
            if (this.model.random.nextInt(8) == 0) {
                this.model.log(this.name + " heartbeat in the transaction: " + this.consumer.heartbeat() + " renewed");
            }
            boolean mustSettle = this.decided.keySet().stream()
                .anyMatch(v -> this.model.lastDeliveryCount.get(v) >= SETTLE_FROM_DELIVERY);
            if (!mustSettle && this.model.random.nextInt(6) == 0) {
                this.session.abortTransaction();
                this.model.aborts++;
                this.model.log(this.name + " abort");
            }
            else {
                this.session.commitTransaction();
                this.model.commits++;
                this.model.log(this.name + " commit");
                this.decided.forEach((value, accept) -> {
                    (accept ? this.model.accepted : this.model.rejected).add(value);
                    this.model.settled.add(value);
                });
            }
            this.decided.clear();
        }

        void close() {
            try {
                this.consumer.close();
            }
            finally {
                this.session.close();
            }
        }
    }
}
