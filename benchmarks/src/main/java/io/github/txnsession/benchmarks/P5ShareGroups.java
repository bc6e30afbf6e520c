package io.github.txnsession.benchmarks;

import java.time.Duration;
import java.util.BitSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicInteger;

import io.github.txnsession.kafka.SessionProducer;
import io.github.txnsession.kafka.ShareOutcomeLedger;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.TransactionalShareConsumer;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.jspecify.annotations.Nullable;

/**
 * P5, share groups: N records consumed by one share-group member (a new share group per run, reading from the
 * earliest record), one output record per input record. Measures records/s from the first record received to the
 * last acknowledgement sent (so the group join is not counted), and the CPU time per record over the same span of the
 * client's threads and of the embedded broker's ({@link CpuMeter}).
 * <ul>
 * <li>a) {@code KafkaShareConsumer} in explicit mode, no transactions: send the batch's output with a plain
 * (idempotent) producer, flush it, ACCEPT each record (sent with the next poll), at least once;</li>
 * <li>b) {@code TransactionalShareConsumer} bound to a session: begin, send through a {@code SessionProducer},
 * ACCEPT each record (held by the transaction), commit (the acknowledgements go out with the next poll, as a's
 * do).</li>
 * <li>c) b with a {@code ShareOutcomeLedger}: each transaction also writes its outcome entry (and flushes it before
 * the lock check), which closes the window between commit and acknowledgement.</li>
 * </ul>
 */
final class P5ShareGroups {

    static final String S = "P5";
    private static final AtomicInteger GROUPS = new AtomicInteger();

    private final Bench bench;
    private final String in = "p5-in";
    private final String out = "p5-out";

    P5ShareGroups(Bench bench) {
        this.bench = bench;
    }

    void run() throws Exception {
        int records = this.bench.profile.p5Records();
        String caseName = records + " records";
        this.bench.results.layout(S, "share groups (records/s)", "records_per_s", "client_cpu_us_per_record",
                "broker_cpu_us_per_record", "vm_cpu_us_per_record");
        this.bench.kafka.createTopic(this.in, 3);
        this.bench.kafka.createTopic(this.out, 3);
        this.bench.preload(this.in, records);
        String[] names = { "KafkaShareConsumer (explicit acks) + plain producer, no transactions",
                "TransactionalShareConsumer bound to a session + SessionProducer",
                "b with a ShareOutcomeLedger (no duplicate after a crash between commit and acknowledgement)" };
        List<String> keys = List.of("a", "b", "c");
        ShareOutcomeLedger ledger = new ShareOutcomeLedger(this.bench.kafka.clientConfigs(), "p5-ledger",
                Duration.ofMinutes(2));
        KafkaProducer<String, String> plain = new KafkaProducer<>(this.bench.producerConfigs());
        Map<String, Object> sc = this.bench.producerConfigs();
        sc.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "p5-session");
        TransactionSession session = TransactionSession.open(sc);
        session.initialize();
        SessionProducer<String, String> bound = new SessionProducer<>(session, new StringSerializer(),
                new StringSerializer());
        try {
            // a run lasts well under a second: the profile's warm-up repetitions alone leave the JIT compiling (rates
            // still climbing over the measured repetitions), so all three competitors run unrecorded for the
            // profile's broker warm-up first, as P1 does
            long warmEnd = System.nanoTime() + this.bench.profile.brokerWarmup().toNanos();
            int warmRuns = 0;
            while (System.nanoTime() - warmEnd < 0) {
                int i = warmRuns++ % 3;
                String group = "p5-warm-" + keys.get(i) + "-" + GROUPS.incrementAndGet();
                this.bench.shareGroupFromEarliest(group);
                Run unused = i == 0 ? plainRun(group, records, plain)
                        : boundRun(group, records, session, bound, i == 2 ? ledger : null);
            }
            Bench.log("P5 warm-up done (%d runs, %s)", warmRuns, this.bench.profile.brokerWarmup());
            for (int rep = this.bench.firstRep(); rep < this.bench.profile.repetitions(); rep++) {
                for (int i : Bench.rotated(List.of(0, 1, 2), rep)) {
                    String group = "p5-" + keys.get(i) + "-" + GROUPS.incrementAndGet();
                    this.bench.shareGroupFromEarliest(group);
                    Run run = i == 0 ? plainRun(group, records, plain)
                            : boundRun(group, records, session, bound, i == 2 ? ledger : null);
                    double rate = records / run.seconds();
                    if (rep >= 0) {
                        this.bench.results.record(S, caseName, keys.get(i), names[i],
                                Map.of("records_per_s", rate, "client_cpu_us_per_record", run.cpu().clientMicrosPer(
                                        records), "broker_cpu_us_per_record", run.cpu().brokerMicrosPer(records),
                                        "vm_cpu_us_per_record", run.cpu().vmMicrosPer(records)));
                    }
                    Bench.log("P5 %s rep %d: %.0f records/s", keys.get(i), rep, rate);
                }
            }
        }
        finally {
            plain.close();
            session.close();
            ledger.close();
        }
        this.bench.results.goal(S, caseName, "records_per_s", "b", "a", 0.8, true);
        this.bench.results.goal(S, caseName, "records_per_s", "c", "a", 0.8, true);
    }

    private Map<String, Object> consumerConfigs(String group) {
        Map<String, Object> c = this.bench.kafka.clientConfigs();
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(TransactionalShareConsumer.ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
        return c;
    }

    /**
     * One timed run.
     *
     * @param seconds from the first record received to the last acknowledgement sent
     * @param cpu the CPU time over the same span, of the client's threads and of the embedded broker's
     */
    private record Run(double seconds, CpuMeter cpu) {
    }

    /** Distinct (partition, offset) pairs seen, so that a redelivery is not counted twice. */
    private static final class Seen {
        private final Map<Integer, BitSet> byPartition = new HashMap<>();
        private int distinct;

        void add(ConsumerRecord<?, ?> r) {
            BitSet b = this.byPartition.computeIfAbsent(r.partition(), p -> new BitSet());
            if (!b.get((int) r.offset())) {
                b.set((int) r.offset());
                this.distinct++;
            }
        }
    }

    private Run plainRun(String group, int records, KafkaProducer<String, String> producer) {
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(consumerConfigs(group),
                new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(this.in));
            Seen seen = new Seen();
            long t0 = 0;
            @Nullable CpuMeter cpu = null;
            while (seen.distinct < records) {
                ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(100));
                if (batch.isEmpty()) {
                    continue;
                }
                if (t0 == 0) {
                    t0 = System.nanoTime();
                    cpu = CpuMeter.start(null);
                }
                for (ConsumerRecord<String, String> r : batch) {
                    producer.send(new ProducerRecord<>(this.out, r.key(), r.value()));
                }
                producer.flush();
                for (ConsumerRecord<String, String> r : batch) {
                    consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                    seen.add(r);
                }
            }
            consumer.commitSync(); // the last batch's acknowledgements, as b's last commit sends its own
            double seconds = (System.nanoTime() - t0) / 1e9;
            CpuMeter used = Objects.requireNonNull(cpu).stop();
            return new Run(seconds, used);
        }
    }

    private Run boundRun(String group, int records, TransactionSession session,
            SessionProducer<String, String> producer, @Nullable ShareOutcomeLedger ledger) {
        Map<String, Object> configs = consumerConfigs(group);
        if (ledger != null) {
            configs.put(ConsumerConfig.SHARE_ACQUIRE_MODE_CONFIG, "record_limit"); // what the ledger's lock check needs
        }
        try (TransactionalShareConsumer<String, String> consumer = new TransactionalShareConsumer<>(
                configs, new StringDeserializer(), new StringDeserializer())) {
            if (ledger != null) {
                consumer.useOutcomeLedger(ledger);
            }
            consumer.subscribe(List.of(this.in));
            consumer.bindTransactionSession(session);
            Seen seen = new Seen();
            long t0 = 0;
            @Nullable CpuMeter cpu = null;
            int transactions = 0;
            long commitNanos = 0;
            while (seen.distinct < records) {
                ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(100));
                if (batch.isEmpty()) {
                    continue;
                }
                if (t0 == 0) {
                    t0 = System.nanoTime();
                    cpu = CpuMeter.start(null);
                }
                session.beginTransaction();
                transactions++;
                for (ConsumerRecord<String, String> r : batch) {
                    producer.send(new ProducerRecord<>(this.out, r.key(), r.value()));
                    consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                    seen.add(r);
                }
                long c0 = System.nanoTime();
                session.commitTransaction();
                commitNanos += System.nanoTime() - c0;
            }
            double seconds = (System.nanoTime() - t0) / 1e9;
            CpuMeter used = Objects.requireNonNull(cpu).stop();
            consumer.unbindTransactionSession();
            Bench.log("P5 %s: %d transactions, %.0f records each, %.1f ms per commit, %.0f%% of the time in commits",
                    ledger == null ? "b" : "c", transactions, (double) records / transactions,
                    commitNanos / 1e6 / transactions, 100.0 * commitNanos / 1e9 / seconds);
            return new Run(seconds, used);
        }
    }
}
