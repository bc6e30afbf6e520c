package io.github.txnsession.spring;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

import io.github.txnsession.kafka.ShareOutcomeLedger;
import io.github.txnsession.kafka.TransactionalShareConsumer;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.Deserializer;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import org.springframework.context.SmartLifecycle;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * A listener container for a share group (KIP-932 queue semantics) whose records are processed in transactions
 * that a Kafka session takes part in (a {@link SessionTransactionManager}'s, or the application's database
 * manager's with the session enlisted): what the listener sends with a {@code KafkaTemplate}, writes to the database
 * or through any other session participant commits together with the records' acknowledgements, and a failure rolls
 * them back together.
 *
 * <p>Why a container of our own: spring-kafka's {@code ShareKafkaMessageListenerContainer} (4.1) calls its listener
 * once per record and has no transaction-manager hook; {@link SessionShareKafkaListenerContainerFactory} runs each of
 * its records in a transaction, which keeps {@code @KafkaListener}, but cannot batch records or isolate failures in a
 * batch, and renews locks only between records.
 * This container is small: per thread, one {@link TransactionalShareConsumer} (explicit acknowledgement) polling;
 * per poll, as few transactions as {@link #setMaxRecordsPerTransaction} and {@link #setMaxTransactionTime} allow (one
 * per record if the first is 1). In each, the consumer is bound to the transaction's session, the listener runs on
 * each record, and each record is acknowledged with what the listener returns ({@code null} = ACCEPT; REJECT for a
 * poison record, RELEASE to hand it back).
 *
 * <h2>Guarantees</h2>
 * <ul>
 * <li>A record's acknowledgement is applied only after its transaction committed.</li>
 * <li><b>A failing record does not fail its neighbours.</b> When the listener throws, the transaction rolls back;
 * the consumer keeps the records (their locks keep running), the failing record is RELEASEd and the others run again
 * in a new transaction. On its last allowed delivery ({@link #setDeadLetterHandler}) the failing record goes to the
 * dead-letter handler instead, in a transaction that also REJECTs it. A transaction that fails naming no record (at its
 * commit, or a record that failed only because an earlier one's failed send made the transaction abort-only) is run
 * again in halves, halved again while they fail, until the record is found.</li>
 * <li><b>An outage does not use up deliveries.</b> A transaction that fails on a transient failure (Kafka or the
 * database as a service, classified as {@link SessionAfterRollbackProcessor} does) runs again after a back-off
 * (0.5 s doubling to 10 s) with the locks renewed, for as long as the container runs.</li>
 * <li>Long transactions renew their records' locks ({@link TransactionalShareConsumer#heartbeat()}) every third of
 * the lock duration.</li>
 * <li>{@link #stop()} lets the transaction in progress finish, releases what it has not processed, then closes the
 * consumers.</li>
 * <li>A consumer that fails unexpectedly is closed (its records go back to the group) and replaced; the thread does
 * not end while the container runs.</li>
 * </ul>
 *
 * <h2>Not guaranteed</h2>
 * <ul>
 * <li>The listener runs again on the neighbours of a failed record (and on the records of a transaction that failed
 * transiently): its effects outside the transaction (a call to a web service, a log line) can repeat. Only what goes
 * through the transaction happens once.</li>
 * <li>No released broker makes share acknowledgements part of a Kafka transaction (KIP-1289 is a proposal): they are
 * sent after the commit (with the next poll). A crash between the commit and the acknowledgement redelivers the records although
 * their output is committed: at most one duplicate per record in that window, never a loss, unless the consumers use
 * a {@link io.github.txnsession.kafka.ShareOutcomeLedger} ({@link #setOutcomeLedger}). A transaction whose outcome is
 * unknown (a commit that timed out unsettled) hands its records back to the group rather than running them again.</li>
 * <li>A transient failure that never ends blocks the thread (logged at WARN on every attempt); a failure misread as
 * transient does the same.</li>
 * </ul>
 *
 * @param <K> key type
 * @param <V> value type
 */
public class SessionShareListenerContainer<K, V> implements SmartLifecycle {

    private static final Logger log = LoggerFactory.getLogger(SessionShareListenerContainer.class);

    /**
     * The application's code for one record, run inside the record's transaction.
     *
     * @param <K> key type
     * @param <V> value type
     */
    @FunctionalInterface
    public interface ShareRecordListener<K, V> {

        /**
         * @param record the record
         * @return how to acknowledge it when the transaction commits; {@code null} means ACCEPT
         * @throws Exception to roll the transaction back and RELEASE the record
         */
        @Nullable AcknowledgeType onRecord(ConsumerRecord<K, V> record) throws Exception;
    }

    private final String name;
    private final TransactionalConsumerFactory consumers;
    private final TransactionTemplate transactions;
    private final boolean kafkaOnly;
    private final String groupId;
    private final List<String> topics;
    private final Supplier<Deserializer<K>> keyDeserializer;
    private final Supplier<Deserializer<V>> valueDeserializer;
    private final ShareRecordListener<K, V> listener;
    private final List<Thread> threads = new CopyOnWriteArrayList<>();
    private final List<TransactionalShareConsumer<K, V>> active = new CopyOnWriteArrayList<>();
    private final AtomicLong committed = new AtomicLong();
    private final AtomicLong failed = new AtomicLong();
    private final AtomicLong deadLettered = new AtomicLong();
    private final Object stopSignal = new Object();
    private int concurrency = 1;
    private Duration pollTimeout = Duration.ofSeconds(1);
    private int maxRecordsPerTransaction = 500;
    private Duration maxTransactionTime = Duration.ofSeconds(5);
    private int maxDeliveries = 5;
    private @Nullable ShareDeadLetterHandler<K, V> deadLetterHandler;
    private @Nullable ShareOutcomeLedger ledger;
    private volatile boolean running;

    /**
     * @param name names the consumer threads ({@code name-0}, ...)
     * @param consumers makes the share consumers and binds them to each transaction
     * @param transactionManager runs the transactions: a {@link SessionTransactionManager}, or the application's own
     *        manager (JDBC, JPA) when {@code consumers} has an enlistment (set by the starter, see
     *        {@link TransactionalConsumerFactory#setEnlistment}), so that the database and the session commit together
     * @param groupId the share group
     * @param topics the topics to subscribe to
     * @param keyDeserializer a new key deserializer per consumer
     * @param valueDeserializer a new value deserializer per consumer
     * @param listener the application's code
     */
    public SessionShareListenerContainer(String name, TransactionalConsumerFactory consumers,
            PlatformTransactionManager transactionManager, String groupId, List<String> topics,
            Supplier<Deserializer<K>> keyDeserializer, Supplier<Deserializer<V>> valueDeserializer,
            ShareRecordListener<K, V> listener) {
        this.name = Objects.requireNonNull(name, "name");
        this.consumers = Objects.requireNonNull(consumers, "consumers");
        this.transactions = new TransactionTemplate(Objects.requireNonNull(transactionManager, "transactionManager"));
        this.kafkaOnly = transactionManager instanceof SessionTransactionManager;
        this.groupId = Objects.requireNonNull(groupId, "groupId");
        this.topics = List.copyOf(topics);
        if (this.topics.isEmpty()) {
            throw new IllegalArgumentException("A share listener container needs at least one topic");
        }
        this.keyDeserializer = Objects.requireNonNull(keyDeserializer, "keyDeserializer");
        this.valueDeserializer = Objects.requireNonNull(valueDeserializer, "valueDeserializer");
        this.listener = Objects.requireNonNull(listener, "listener");
    }

    /** @param concurrency how many consumers (threads) to run, at least 1; set before {@link #start()} */
    public void setConcurrency(int concurrency) {
        if (concurrency < 1) {
            throw new IllegalArgumentException("concurrency must be at least 1, was " + concurrency);
        }
        this.concurrency = concurrency;
    }

    /** @param pollTimeout how long one poll waits for records */
    public void setPollTimeout(Duration pollTimeout) {
        this.pollTimeout = Objects.requireNonNull(pollTimeout, "pollTimeout");
    }

    /**
     * @param maxRecords how many records of a poll one transaction processes at most (default 500, which with the
     *        share consumer's default {@code max.poll.records} is the whole poll); 1 runs a transaction per record
     */
    public void setMaxRecordsPerTransaction(int maxRecords) {
        if (maxRecords < 1) {
            throw new IllegalArgumentException("maxRecordsPerTransaction must be at least 1, was " + maxRecords);
        }
        this.maxRecordsPerTransaction = maxRecords;
    }

    /**
     * @param maxTime after how long a transaction commits what it processed so far and the rest of the poll goes into
     *        the next one (default 5 s; checked between records, so one slow record can overrun it); positive
     */
    public void setMaxTransactionTime(Duration maxTime) {
        Objects.requireNonNull(maxTime, "maxTransactionTime");
        if (maxTime.isNegative() || maxTime.isZero()) {
            throw new IllegalArgumentException("maxTransactionTime must be positive, was " + maxTime);
        }
        this.maxTransactionTime = maxTime;
    }

    /**
     * Dead-letters records that fail on their last allowed delivery: the handler runs in a transaction of its own,
     * which also REJECTs the record (see {@link ShareDeadLetterHandler}).
     *
     * @param maxDeliveries the delivery on which a failing record is dead-lettered instead of released: at most the
     *        group's {@code group.share.delivery.count.limit} (5 by default), or the broker archives it first
     * @param handler what to do with it, for example {@link ShareDeadLetterHandler#toTopic}
     */
    public void setDeadLetterHandler(int maxDeliveries, ShareDeadLetterHandler<K, V> handler) {
        if (maxDeliveries < 1) {
            throw new IllegalArgumentException("maxDeliveries must be at least 1, was " + maxDeliveries);
        }
        this.maxDeliveries = maxDeliveries;
        this.deadLetterHandler = Objects.requireNonNull(handler, "handler");
    }

    /**
     * Makes every consumer of this container use {@code ledger}, which closes the window between a commit and its
     * acknowledgements (see {@link ShareOutcomeLedger}); the consumers are then created with
     * {@code share.acquire.mode=record_limit}, which its lock check needs. Set before {@link #start()}; the caller
     * closes the ledger after the container.
     *
     * @param ledger the ledger
     */
    public void setOutcomeLedger(ShareOutcomeLedger ledger) {
        this.ledger = Objects.requireNonNull(ledger, "ledger");
    }

    @Override
    public synchronized void start() {
        if (this.running) {
            return;
        }
        this.running = true;
        for (int i = 0; i < this.concurrency; i++) {
            Thread t = new Thread(this::run, this.name + "-" + i);
            t.setDaemon(false);
            this.threads.add(t);
            t.start();
        }
    }

    @Override
    public synchronized void stop() {
        if (!this.running) {
            return;
        }
        this.running = false;
        synchronized (this.stopSignal) {
            this.stopSignal.notifyAll();
        }
        this.active.forEach(TransactionalShareConsumer::wakeup);
        List<Thread> toJoin = new ArrayList<>(this.threads);
        this.threads.clear();
        for (Thread t : toJoin) {
            try {
                t.join(Duration.ofSeconds(30).toMillis());
            }
            catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    @Override
    public boolean isRunning() {
        return this.running;
    }

    /** @return records whose transaction committed */
    public long committedRecords() {
        return this.committed.get();
    }

    /**
     * @return failed processing attempts of single records (the listener threw, or the record's own transaction
     *         failed for a reason other than a transient one); each such record was released or dead-lettered
     */
    public long failedRecords() {
        return this.failed.get();
    }

    /** @return records dead-lettered (and rejected) */
    public long deadLetteredRecords() {
        return this.deadLettered.get();
    }

    /** A consumer thread: runs consumers until the container stops, a new one after an unexpected error. */
    private void run() {
        while (this.running) {
            if (runConsumer()) {
                return;
            }
            // the consumer was closed after an unexpected error (its records go back to the group): start afresh
            awaitStop(1000);
        }
    }

    /** @return true if the container stopped, false after an unexpected error */
    private boolean runConsumer() {
        Map<String, Object> overrides = this.ledger == null ? Map.of()
                : Map.of(ConsumerConfig.SHARE_ACQUIRE_MODE_CONFIG, "record_limit");
        TransactionalShareConsumer<K, V> consumer = this.consumers.createShareConsumer(this.groupId,
                this.keyDeserializer.get(), this.valueDeserializer.get(), overrides);
        this.active.add(consumer);
        try {
            ShareOutcomeLedger l = this.ledger;
            if (l != null) {
                consumer.useOutcomeLedger(l);
            }
            ShareBatchProcessor<K, V> processor = new ShareBatchProcessor<>(this, consumer, this.transactions,
                    () -> this.running);
            consumer.subscribe(this.topics);
            long previousPollStart = 0;
            while (this.running) {
                ConsumerRecords<K, V> records;
                long pollStart = System.nanoTime();
                try {
                    records = consumer.poll(this.pollTimeout);
                }
                catch (WakeupException ex) {
                    break;
                }
                if (!records.isEmpty()) {
                    List<ConsumerRecord<K, V>> list = new ArrayList<>(records.count());
                    records.forEach(list::add);
                    // the consumer may have fetched them during the poll before: date them from its start
                    processor.process(list, previousPollStart == 0 ? pollStart : previousPollStart);
                }
                previousPollStart = pollStart;
            }
            return true;
        }
        catch (RuntimeException ex) {
            if (!this.running) {
                return true;
            }
            log.error("Share listener container '{}': its consumer of group '{}' failed unexpectedly; closing it "
                    + "(its records go back to the group) and starting a new one", this.name, this.groupId, ex);
            return false;
        }
        finally {
            this.active.remove(consumer);
            try {
                consumer.close();
            }
            catch (RuntimeException ex) {
                log.warn("Closing the share consumer of '{}' failed: {}", this.name, ex.toString());
            }
        }
    }

    // ---------------------------------------------------------------- for ShareBatchProcessor

    String name() {
        return this.name;
    }

    TransactionalConsumerFactory consumers() {
        return this.consumers;
    }

    ShareRecordListener<K, V> listener() {
        return this.listener;
    }

    boolean kafkaOnly() {
        return this.kafkaOnly;
    }

    int maxRecordsPerTransaction() {
        return this.maxRecordsPerTransaction;
    }

    Duration maxTransactionTime() {
        return this.maxTransactionTime;
    }

    int maxDeliveries() {
        return this.maxDeliveries;
    }

    @Nullable ShareDeadLetterHandler<K, V> deadLetterHandler() {
        return this.deadLetterHandler;
    }

    void committed(int records) {
        this.committed.addAndGet(records);
    }

    void failed() {
        this.failed.incrementAndGet();
    }

    void deadLettered() {
        this.deadLettered.incrementAndGet();
    }

    /** @return false if the container is stopping; otherwise true after waiting up to {@code millis} */
    boolean awaitStop(long millis) {
        synchronized (this.stopSignal) {
            if (!this.running) {
                return false;
            }
            try {
                this.stopSignal.wait(Math.max(1, millis));
            }
            catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
                return false;
            }
            return this.running;
        }
    }

    @Override
    public String toString() {
        return "SessionShareListenerContainer[" + this.name + ", group " + this.groupId + ", topics " + this.topics
                + "]";
    }
}
