package io.github.txnsession.benchmarks;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import io.github.txnsession.kafka.SessionProducer;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.TransactionalConsumer;
import io.github.txnsession.spring.SessionProducerFactory;
import io.github.txnsession.spring.SessionTransactionManager;
import io.github.txnsession.spring.TransactionSessionPool;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

import org.springframework.kafka.core.DefaultKafkaConsumerFactory;
import org.springframework.kafka.core.DefaultKafkaProducerFactory;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.listener.BatchMessageListener;
import org.springframework.kafka.listener.ContainerProperties;
import org.springframework.kafka.listener.KafkaMessageListenerContainer;
import org.springframework.kafka.transaction.KafkaAwareTransactionManager;
import org.springframework.kafka.transaction.KafkaTransactionManager;

/**
 * P2, consume-process-produce: N records read with {@code read_committed}, in batches of 100
 * ({@code max.poll.records=100}), one output record per input record, one transaction per batch that carries the
 * consumed offsets. Measures records/s from the first batch received to the commit of the last (so the group join
 * is not counted for anyone).
 * <ul>
 * <li>a) raw {@code KafkaConsumer} + transactional {@code KafkaProducer} with {@code sendOffsetsToTransaction};</li>
 * <li>b) spring-kafka listener container (what {@code @KafkaListener} builds) with a batch listener and
 * {@code KafkaTransactionManager}: exactly-once;</li>
 * <li>c) our {@code TransactionalConsumer} bound to a session + {@code SessionProducer};</li>
 * <li>d) the same listener container with our {@code SessionTransactionManager}.</li>
 * </ul>
 */
final class P2ConsumeProcessProduce {

    static final String S = "P2";
    private static final int BATCH = 100;
    private static final AtomicInteger GROUPS = new AtomicInteger();

    private final Bench bench;
    private final String in = "p2-in";
    private final String out = "p2-out";

    P2ConsumeProcessProduce(Bench bench) {
        this.bench = bench;
    }

    interface Competitor extends AutoCloseable {
        /** Processes the whole input once with a new consumer group; returns the measured seconds. */
        double runOnce(String group, int records) throws Exception;

        @Override
        void close();
    }

    void run() throws Exception {
        Results r = this.bench.results;
        int records = this.bench.profile.p2Records();
        String caseName = records + " records, batches of " + BATCH;
        r.layout(S, "consume-process-produce (records/s)", "records_per_s");
        this.bench.kafka.createTopic(this.in, 3);
        this.bench.kafka.createTopic(this.out, 3);
        this.bench.preload(this.in, records);
        List<String> keys = List.of("a", "b", "c", "d");
        String[] names = { "raw KafkaConsumer + KafkaProducer, sendOffsetsToTransaction",
                "spring-kafka listener container (batch), KafkaTransactionManager",
                "TransactionalConsumer bound to a session", "spring-kafka listener container, SessionTransactionManager" };
        Competitor[] all = { raw(), springKafka(), bound(), starter() };
        try {
            for (int rep = this.bench.firstRep(); rep < this.bench.profile.repetitions(); rep++) {
                for (int i : Bench.rotated(List.of(0, 1, 2, 3), rep)) {
                    double seconds = all[i].runOnce("p2-" + keys.get(i) + "-" + GROUPS.incrementAndGet(), records);
                    double rate = records / seconds;
                    if (rep >= 0) {
                        r.record(S, caseName, keys.get(i), names[i], Map.of("records_per_s", rate));
                    }
                    Bench.log("P2 %s rep %d: %.0f records/s", keys.get(i), rep, rate);
                }
            }
        }
        finally {
            for (Competitor c : all) {
                c.close();
            }
        }
        for (String ours : List.of("c", "d")) {
            r.goal(S, caseName, "records_per_s", ours, "b", 1.0, true);
            r.goal(S, caseName, "records_per_s", ours, "a", 0.95, true);
        }
    }

    private Map<String, Object> consumerConfigs(String group) {
        Map<String, Object> c = this.bench.consumerConfigs(group);
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, BATCH);
        return c;
    }

    /**
     * Waits until the group's committed offsets cover all {@code records} input records: the end of a run, observed
     * the same way for every competitor (transactional offsets become visible when the transaction has committed).
     */
    private void awaitCommitted(String group, int records) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(2);
        while (System.nanoTime() < deadline) {
            long sum = 0;
            for (OffsetAndMetadata o : this.bench.kafka.admin().listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS).values()) {
                if (o != null) {
                    sum += o.offset();
                }
            }
            if (sum >= records) {
                return;
            }
            Thread.sleep(1);
        }
        throw new IllegalStateException("Group " + group + " did not commit " + records + " records in time");
    }

    private static Map<TopicPartition, OffsetAndMetadata> nextOffsets(ConsumerRecords<?, ?> records) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (TopicPartition tp : records.partitions()) {
            List<? extends ConsumerRecord<?, ?>> list = records.records(tp);
            offsets.put(tp, new OffsetAndMetadata(list.get(list.size() - 1).offset() + 1));
        }
        return offsets;
    }

    // ------------------------------------------------------------------ a) raw

    private Competitor raw() {
        Map<String, Object> pc = this.bench.producerConfigs();
        pc.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "p2-raw");
        KafkaProducer<String, String> producer = new KafkaProducer<>(pc);
        producer.initTransactions();
        return new Competitor() {
            @Override
            public double runOnce(String group, int records) throws Exception {
                try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerConfigs(group))) {
                    consumer.subscribe(List.of(P2ConsumeProcessProduce.this.in));
                    int done = 0;
                    long t0 = 0;
                    while (done < records) {
                        ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(100));
                        if (batch.isEmpty()) {
                            continue;
                        }
                        if (t0 == 0) {
                            t0 = System.nanoTime();
                        }
                        producer.beginTransaction();
                        for (ConsumerRecord<String, String> rec : batch) {
                            producer.send(new ProducerRecord<>(P2ConsumeProcessProduce.this.out, rec.key(),
                                    rec.value()));
                        }
                        producer.sendOffsetsToTransaction(nextOffsets(batch), consumer.groupMetadata());
                        producer.commitTransaction();
                        done += batch.count();
                    }
                    awaitCommitted(group, records);
                    return (System.nanoTime() - t0) / 1e9;
                }
            }

            @Override
            public void close() {
                producer.close();
            }
        };
    }

    // ------------------------------------------------------------------ c) bound TransactionalConsumer

    private Competitor bound() {
        Map<String, Object> pc = this.bench.producerConfigs();
        pc.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "p2-bound");
        TransactionSession session = TransactionSession.open(pc);
        session.initialize();
        SessionProducer<String, String> producer = new SessionProducer<>(session, new StringSerializer(),
                new StringSerializer());
        return new Competitor() {
            @Override
            public double runOnce(String group, int records) throws Exception {
                try (TransactionalConsumer<String, String> consumer = new TransactionalConsumer<>(
                        new KafkaConsumer<>(consumerConfigs(group)))) {
                    consumer.subscribe(List.of(P2ConsumeProcessProduce.this.in));
                    consumer.bindTransactionSession(session);
                    int done = 0;
                    long t0 = 0;
                    while (done < records) {
                        ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(100));
                        if (batch.isEmpty()) {
                            continue;
                        }
                        if (t0 == 0) {
                            t0 = System.nanoTime();
                        }
                        session.beginTransaction();
                        for (ConsumerRecord<String, String> rec : batch) {
                            producer.send(new ProducerRecord<>(P2ConsumeProcessProduce.this.out, rec.key(),
                                    rec.value()));
                        }
                        session.commitTransaction();
                        done += batch.count();
                    }
                    awaitCommitted(group, records);
                    double seconds = (System.nanoTime() - t0) / 1e9;
                    consumer.unbindTransactionSession();
                    return seconds;
                }
            }

            @Override
            public void close() {
                session.close();
            }
        };
    }

    // ------------------------------------------------------------------ b) and d) listener containers

    private Competitor springKafka() {
        DefaultKafkaProducerFactory<String, String> pf = new DefaultKafkaProducerFactory<>(
                this.bench.producerConfigs());
        pf.setTransactionIdPrefix("p2-spring-");
        KafkaTemplate<String, String> template = new KafkaTemplate<>(pf);
        KafkaTransactionManager<String, String> tm = new KafkaTransactionManager<>(pf);
        return new ContainerCompetitor(tm, (k, v) -> template.send(this.out, k, v), pf::destroy);
    }

    private Competitor starter() {
        Map<String, Object> configs = this.bench.producerConfigs();
        TransactionSessionPool pool = new TransactionSessionPool("p2-starter-", 2, Duration.ofSeconds(30), configs,
                List.of());
        SessionProducerFactory<Object, Object> pf = new SessionProducerFactory<>(pool,
                P1ProducerTransactions.stringSerializer(), P1ProducerTransactions.stringSerializer(), configs);
        SessionTransactionManager tm = new SessionTransactionManager(pool, pf);
        KafkaTemplate<Object, Object> template = new KafkaTemplate<>(pf);
        return new ContainerCompetitor(tm, (k, v) -> template.send(this.out, k, v), () -> {
            pf.destroy();
            pool.close();
        });
    }

    /** b) and d): the same container and listener code with either transaction manager. */
    private final class ContainerCompetitor implements Competitor {
        interface Send {
            void send(String key, String value);
        }

        private final KafkaAwareTransactionManager<?, ?> tm;
        private final Send send;
        private final Runnable closer;

        ContainerCompetitor(KafkaAwareTransactionManager<?, ?> tm, Send send, Runnable closer) {
            this.tm = tm;
            this.send = send;
            this.closer = closer;
        }

        @Override
        public double runOnce(String group, int records) throws Exception {
            AtomicLong first = new AtomicLong();
            AtomicInteger processed = new AtomicInteger();
            CountDownLatch done = new CountDownLatch(1);
            ContainerProperties props = new ContainerProperties(P2ConsumeProcessProduce.this.in);
            props.setKafkaAwareTransactionManager(this.tm);
            props.setMessageListener((BatchMessageListener<String, String>) batch -> {
                first.compareAndSet(0, System.nanoTime());
                for (ConsumerRecord<String, String> rec : batch) {
                    this.send.send(rec.key(), rec.value());
                }
                // KafkaTransactionManager runs without transaction synchronization, so the end is observed at the
                // group coordinator (awaitCommitted), the same way for every competitor
                if (processed.addAndGet(batch.size()) >= records) {
                    done.countDown();
                }
            });
            KafkaMessageListenerContainer<String, String> container = new KafkaMessageListenerContainer<>(
                    new DefaultKafkaConsumerFactory<>(consumerConfigs(group)), props);
            container.start();
            try {
                if (!done.await(10, TimeUnit.MINUTES)) {
                    throw new IllegalStateException("P2 container run did not finish: " + processed + " processed");
                }
                awaitCommitted(group, records);
                return (System.nanoTime() - first.get()) / 1e9;
            }
            finally {
                container.stop();
            }
        }

        @Override
        public void close() {
            this.closer.run();
        }
    }
}
