package io.github.txnsession.kafka.fleet;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.locks.ReentrantLock;

import io.github.txnsession.kafka.SessionFencedException;
import io.github.txnsession.kafka.SessionProducer;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.TransactionSessionException;
import io.github.txnsession.kafka.TransactionalConsumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.jspecify.annotations.Nullable;

/**
 * One instance of the fleet application of {@link TransactionalIdFleetTest}, run in a child JVM, written the way a
 * worker without Spring would use the core API: a {@link TransactionalIdFleet} whose {@link SlotListener} opens and
 * initializes one session per id of each slot it receives and closes them when the slot leaves; the main loop
 * consumes, transforms and produces through a bound {@link TransactionalConsumer}, one transaction per poll, on the
 * session of any owned slot. Every instance gets the same arguments except its name.
 *
 * <p>Standard input: {@code hold} makes the next transaction flush its sends, print "holding" and wait for
 * {@code go} before committing; {@code stop} leaves cleanly. Prints "ready", "owns N", "released N",
 * "owned [slots]" after each change, "committed N", "fenced ..." or "failed ...", "stopped".
 *
 * <p>Arguments: bootstrap input output group prefix slots paceMs
 */
public final class FleetWorker {

    private final Map<Integer, Holder> holders = new ConcurrentHashMap<>();
    private final Map<String, Object> sessionConfigs;
    private volatile boolean hold;
    private volatile CountDownLatch go = new CountDownLatch(1);
    private volatile boolean stop;

    private FleetWorker(String bootstrap) {
        this.sessionConfigs = new HashMap<>();
        this.sessionConfigs.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        this.sessionConfigs.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        // far longer than any test waits: an open transaction ends only because a new owner settled its slot
        this.sessionConfigs.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 600_000);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String input = args[1];
        String output = args[2];
        String group = args[3];
        String prefix = args[4];
        int slots = Integer.parseInt(args[5]);
        long paceMs = Long.parseLong(args[6]);
        new FleetWorker(bootstrap).run(input, output, group, prefix, slots, paceMs);
        System.out.println("stopped");
        System.out.flush();
        System.exit(0);
    }

    private void run(String input, String output, String group, String prefix, int slots, long paceMs)
            throws InterruptedException {
        Map<String, Object> consumerConfigs = new HashMap<>();
        consumerConfigs.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, this.sessionConfigs.get("bootstrap.servers"));
        consumerConfigs.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        consumerConfigs.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        consumerConfigs.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        consumerConfigs.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        consumerConfigs.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 20);
        consumerConfigs.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 10_000);
        consumerConfigs.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 1_000);
        startCommandReader();
        try (TransactionalIdFleet fleet = TransactionalIdFleet.builder(prefix, this.sessionConfigs).slots(slots)
                .sessionTimeout(Duration.ofSeconds(10)).listener(new Slots()).start();
                TransactionalConsumer<String, String> consumer = new TransactionalConsumer<>(
                        new KafkaConsumer<>(consumerConfigs, new StringDeserializer(), new StringDeserializer()))) {
            consumer.subscribe(List.of(input));
            System.out.println("ready");
            System.out.flush();
            int committed = 0;
            while (!this.stop) {
                Holder h = anyHolder();
                if (h == null) {
                    fleet.awaitSlots(Duration.ofMillis(200));
                    continue;
                }
                h.lock.lock();
                try {
                    if (h.closed) {
                        continue;
                    }
                    if (consumer.transactionSession() != h.session) {
                        if (consumer.transactionSession() != null) {
                            consumer.unbindTransactionSession();
                        }
                        consumer.bindTransactionSession(h.session);
                    }
                    ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(100));
                    if (records.isEmpty()) {
                        continue;
                    }
                    h.session.beginTransaction();
                    for (ConsumerRecord<String, String> r : records) {
                        h.producer.send(new ProducerRecord<>(output, r.partition(), r.key(), "out-" + r.value()));
                    }
                    if (this.hold) {
                        this.hold = false;
                        h.producer.flush();
                        System.out.println("holding");
                        System.out.flush();
                        this.go.await();
                    }
                    else if (paceMs > 0) {
                        Thread.sleep(paceMs); // inside the transaction, so that a kill lands in one
                    }
                    h.session.commitTransaction();
                    committed += records.count();
                    System.out.println("committed " + committed);
                    System.out.flush();
                }
                catch (TransactionSessionException ex) {
                    System.out.println((ex instanceof SessionFencedException ? "fenced " : "failed ") + ex);
                    System.out.flush();
                    drop(h); // its transaction ended without a commit: the bound consumer was rewound
                }
                finally {
                    h.lock.unlock();
                }
            }
        }
    }

    private @Nullable Holder anyHolder() {
        for (Holder h : this.holders.values()) {
            if (!h.closed) {
                return h;
            }
        }
        return null;
    }

    private void drop(Holder h) {
        h.closed = true;
        this.holders.remove(h.slot, h);
        try {
            h.session.close(Duration.ZERO);
        }
        catch (RuntimeException ex) {
            // fenced sessions may fail to abort; closing is all that is left
        }
    }

    private void startCommandReader() {
        Thread reader = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    switch (line.trim()) {
                        case "hold" -> this.hold = true;
                        case "go" -> this.go.countDown();
                        case "stop" -> {
                            this.stop = true;
                            this.go.countDown();
                        }
                        default -> {
                        }
                    }
                }
            }
            catch (IOException ex) {
                // the parent went away
            }
        }, "commands");
        reader.setDaemon(true);
        reader.start();
    }

    /** One session per slot (one id per slot in this test). */
    private final class Slots implements SlotListener {

        @Override
        public void slotAssigned(FleetSlot slot) {
            Map<String, Object> configs = new HashMap<>(FleetWorker.this.sessionConfigs);
            configs.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, slot.transactionalIds().get(0));
            TransactionSession session = TransactionSession.open(configs);
            try {
                session.initialize(); // aborts what the slot's previous owner left open, fences it
            }
            catch (RuntimeException ex) {
                session.close(Duration.ZERO);
                throw ex;
            }
            FleetWorker.this.holders.put(slot.index(), new Holder(slot.index(), session));
            System.out.println("owns " + slot.index());
            printOwned();
        }

        @Override
        public void slotsRevoked(List<FleetSlot> slots, boolean lost) {
            for (FleetSlot slot : slots) {
                Holder h = FleetWorker.this.holders.get(slot.index());
                if (h == null) {
                    continue;
                }
                h.lock.lock(); // waits for the transaction running on it
                try {
                    drop(h);
                }
                finally {
                    h.lock.unlock();
                }
                System.out.println("released " + slot.index() + (lost ? " lost" : ""));
            }
            printOwned();
        }

        private void printOwned() {
            System.out.println("owned " + new java.util.TreeSet<>(FleetWorker.this.holders.keySet()));
            System.out.flush();
        }
    }

    private static final class Holder {

        final int slot;
        final TransactionSession session;
        final SessionProducer<String, String> producer;
        final ReentrantLock lock = new ReentrantLock();
        volatile boolean closed;

        Holder(int slot, TransactionSession session) {
            this.slot = slot;
            this.session = session;
            this.producer = new SessionProducer<>(session, new StringSerializer(), new StringSerializer());
        }
    }
}
