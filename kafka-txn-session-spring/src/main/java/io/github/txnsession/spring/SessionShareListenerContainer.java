package io.github.txnsession.spring;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

import io.github.txnsession.kafka.TransactionalShareConsumer;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.Deserializer;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import org.springframework.context.SmartLifecycle;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * A listener container for a share group (KIP-932 queue semantics) whose every record is processed in a
 * {@link SessionTransactionManager} transaction: what the listener sends with a {@code KafkaTemplate} (or writes
 * through any other session participant) commits together with the record's acknowledgement, and a failure rolls
 * both back and RELEASEs the record for immediate redelivery.
 *
 * <p>Why a container of our own: spring-kafka's {@code ShareKafkaMessageListenerContainer} (4.1) has no transaction
 * manager hook, so its acknowledgements cannot be tied to a transaction's outcome. This container is small: per
 * thread, one {@link TransactionalShareConsumer} (explicit acknowledgement) polling; per record, one transaction in
 * which the consumer is bound to the transaction's session, the listener runs, and the record is acknowledged with
 * what the listener returns ({@code null} = ACCEPT; REJECT for a poison record, RELEASE to hand it back).
 *
 * <h2>Guarantees</h2>
 * <ul>
 * <li>A record's acknowledgement is applied only after its transaction committed; if the transaction rolls back,
 * the record and the rest of its batch are RELEASEd and delivered again (the delivery count rises; the broker
 * archives a record after {@code group.share.delivery.count.limit} deliveries).</li>
 * <li>{@link #stop()} lets the record in progress finish, then closes the consumers (unacknowledged records go back
 * to the group).</li>
 * </ul>
 *
 * <h2>Not guaranteed</h2>
 * No released broker makes share acknowledgements part of a Kafka transaction (KIP-1289 is a proposal): they are
 * sent right after the commit. A crash between the commit and the acknowledgement redelivers the record although its
 * output is committed: at most one duplicate per record in that window, never a loss. Consumers of the output can
 * drop such duplicates by the input's coordinates.
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
    private final String groupId;
    private final List<String> topics;
    private final Supplier<Deserializer<K>> keyDeserializer;
    private final Supplier<Deserializer<V>> valueDeserializer;
    private final ShareRecordListener<K, V> listener;
    private final List<Thread> threads = new CopyOnWriteArrayList<>();
    private final List<TransactionalShareConsumer<K, V>> active = new CopyOnWriteArrayList<>();
    private final AtomicLong committed = new AtomicLong();
    private final AtomicLong rolledBack = new AtomicLong();
    private int concurrency = 1;
    private Duration pollTimeout = Duration.ofSeconds(1);
    private volatile boolean running;

    /**
     * @param name names the consumer threads ({@code name-0}, ...)
     * @param consumers makes the share consumers and binds them to each transaction
     * @param transactionManager runs one transaction per record
     * @param groupId the share group
     * @param topics the topics to subscribe to
     * @param keyDeserializer a new key deserializer per consumer
     * @param valueDeserializer a new value deserializer per consumer
     * @param listener the application's code
     */
    public SessionShareListenerContainer(String name, TransactionalConsumerFactory consumers,
            SessionTransactionManager transactionManager, String groupId, List<String> topics,
            Supplier<Deserializer<K>> keyDeserializer, Supplier<Deserializer<V>> valueDeserializer,
            ShareRecordListener<K, V> listener) {
        this.name = Objects.requireNonNull(name, "name");
        this.consumers = Objects.requireNonNull(consumers, "consumers");
        this.transactions = new TransactionTemplate(Objects.requireNonNull(transactionManager, "transactionManager"));
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

    /** @return records whose transaction rolled back (each is delivered again) */
    public long rolledBackRecords() {
        return this.rolledBack.get();
    }

    private void run() {
        TransactionalShareConsumer<K, V> consumer = this.consumers.createShareConsumer(this.groupId,
                this.keyDeserializer.get(), this.valueDeserializer.get());
        this.active.add(consumer);
        try {
            consumer.subscribe(this.topics);
            while (this.running) {
                ConsumerRecords<K, V> records;
                try {
                    records = consumer.poll(this.pollTimeout);
                }
                catch (WakeupException ex) {
                    break;
                }
                for (ConsumerRecord<K, V> record : records) {
                    if (!process(consumer, record)) {
                        break; // the abort released this record and the rest of the batch
                    }
                }
            }
        }
        catch (RuntimeException ex) {
            log.error("Share listener container '{}' stopped its consumer of group '{}' after an unexpected error",
                    this.name, this.groupId, ex);
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

    private boolean process(TransactionalShareConsumer<K, V> consumer, ConsumerRecord<K, V> record) {
        try {
            this.transactions.executeWithoutResult(status -> {
                this.consumers.bindToCurrentTransaction(consumer);
                AcknowledgeType type = invokeListener(record);
                consumer.acknowledge(record, type == null ? AcknowledgeType.ACCEPT : type);
            });
            this.committed.incrementAndGet();
            return true;
        }
        catch (RuntimeException ex) {
            this.rolledBack.incrementAndGet();
            log.warn("Share listener '{}': the transaction of {}-{}@{} rolled back; the record is released for "
                    + "redelivery: {}", this.name, record.topic(), record.partition(), record.offset(),
                    ex instanceof ListenerFailedException ? ex.getCause() : ex.toString());
            return false;
        }
    }

    private @Nullable AcknowledgeType invokeListener(ConsumerRecord<K, V> record) {
        try {
            return this.listener.onRecord(record);
        }
        catch (RuntimeException ex) {
            throw ex;
        }
        catch (Exception ex) {
            throw new ListenerFailedException(ex);
        }
    }

    @Override
    public String toString() {
        return "SessionShareListenerContainer[" + this.name + ", group " + this.groupId + ", topics " + this.topics
                + "]";
    }

    /** Carries a checked exception of the listener through the transaction template. */
    private static final class ListenerFailedException extends RuntimeException {

        private static final long serialVersionUID = 1L;

        ListenerFailedException(Exception cause) {
            super(cause);
        }
    }
}
