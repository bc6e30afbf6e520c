package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.serialization.Serializer;
import org.jspecify.annotations.Nullable;

/**
 * A {@link Producer} bound to a {@link TransactionSession}: the equivalent of KIP-1310's
 * {@code new KafkaProducer<>(configs, session)}. It serializes with its own serializers and sends through the
 * session, so any number of SessionProducers with different key and value types write into the session's one
 * transaction, under one producer id and epoch.
 *
 * <p>Guarantees: records are sent only while the session has a transaction open; a send outside a transaction
 * fails with {@link IllegalStateException} saying so. The transaction methods ({@code initTransactions},
 * {@code beginTransaction}, {@code commitTransaction}, ...) act on the session, so code written against
 * {@code Producer} keeps working. Thread-safe, like the session.
 *
 * <p>Not guaranteed: isolation from other producers of the same session. Committing through any of them commits
 * the records of all of them. {@link #close()} closes this view only (it does not close the session, which its
 * owner closes); the serializers are closed with it.
 *
 * @param <K> key type
 * @param <V> value type
 */
public class SessionProducer<K, V> implements Producer<K, V> {

    private final KafkaTransactionSession session;
    private final Serializer<K> keySerializer;
    private final Serializer<V> valueSerializer;
    private volatile boolean closed;

    /**
     * @param session the session to send through; it must be a live session created by
     *        {@link TransactionSession#open}, not an object that stands for one (such as a transaction-scoped proxy)
     * @param keySerializer serializes keys (already configured)
     * @param valueSerializer serializes values (already configured)
     * @throws IllegalArgumentException if {@code session} is not a session created by {@link TransactionSession#open}
     * @throws IllegalStateException if {@code session} is a resumed session (it has no producer)
     */
    public SessionProducer(TransactionSession session, Serializer<K> keySerializer, Serializer<V> valueSerializer) {
        this.session = KafkaTransactionSession.of(session);
        this.keySerializer = Objects.requireNonNull(keySerializer, "keySerializer");
        this.valueSerializer = Objects.requireNonNull(valueSerializer, "valueSerializer");
        this.session.liveProducer(); // a resumed session cannot carry producers: fail now, with its explanation
    }

    /** @return the session this producer sends through */
    public TransactionSession session() {
        return this.session;
    }

    /** Initializes the session if nobody did yet; otherwise does nothing. */
    @Override
    public void initTransactions() {
        ensureOpen();
        if (this.session.state() == SessionState.UNINITIALIZED) {
            this.session.initialize();
        }
    }

    @Override
    public void beginTransaction() {
        ensureOpen();
        this.session.beginTransaction();
    }

    @Override
    public void sendOffsetsToTransaction(Map<TopicPartition, OffsetAndMetadata> offsets,
            ConsumerGroupMetadata groupMetadata) {
        ensureOpen();
        this.session.sendOffsetsToTransaction(offsets, groupMetadata);
    }

    @Override
    public void commitTransaction() {
        ensureOpen();
        this.session.commitTransaction();
    }

    @Override
    public void abortTransaction() {
        ensureOpen();
        this.session.abortTransaction();
    }

    @Override
    public Future<RecordMetadata> send(ProducerRecord<K, V> record) {
        return send(record, null);
    }

    @Override
    public Future<RecordMetadata> send(ProducerRecord<K, V> record, @Nullable Callback callback) {
        Objects.requireNonNull(record, "record");
        ensureOpen();
        byte[] key;
        byte[] value;
        try {
            key = this.keySerializer.serialize(record.topic(), record.headers(), record.key());
        }
        catch (RuntimeException ex) {
            throw new SerializationException("Can't serialize key of record for topic " + record.topic() + " with "
                    + this.keySerializer.getClass().getName(), ex);
        }
        try {
            value = this.valueSerializer.serialize(record.topic(), record.headers(), record.value());
        }
        catch (RuntimeException ex) {
            throw new SerializationException("Can't serialize value of record for topic " + record.topic()
                    + " with " + this.valueSerializer.getClass().getName(), ex);
        }
        return this.session.send(new ProducerRecord<>(record.topic(), record.partition(), record.timestamp(), key,
                value, record.headers()), callback);
    }

    /** Flushes the session's producer: every record sent through any producer of the session. */
    @Override
    public void flush() {
        ensureOpen();
        this.session.flush();
    }

    @Override
    public List<PartitionInfo> partitionsFor(String topic) {
        ensureOpen();
        return this.session.partitionsFor(topic);
    }

    @Override
    public Map<MetricName, ? extends Metric> metrics() {
        return this.session.metrics();
    }

    @Override
    public Uuid clientInstanceId(Duration timeout) {
        return this.session.liveProducer().clientInstanceId(timeout);
    }

    @Override
    public void registerMetricForSubscription(KafkaMetric metric) {
        this.session.liveProducer().registerMetricForSubscription(metric);
    }

    @Override
    public void unregisterMetricFromSubscription(KafkaMetric metric) {
        this.session.liveProducer().unregisterMetricFromSubscription(metric);
    }

    /** Closes this producer view and its serializers; the session stays open. */
    @Override
    public void close() {
        close(Duration.ZERO);
    }

    /** Closes this producer view and its serializers; the session stays open. */
    @Override
    public void close(Duration timeout) {
        if (this.closed) {
            return;
        }
        this.closed = true;
        this.keySerializer.close();
        this.valueSerializer.close();
    }

    private void ensureOpen() {
        if (this.closed) {
            throw new IllegalStateException("This SessionProducer of session '" + this.session.transactionalId()
                    + "' is closed; create a new SessionProducer for the session");
        }
    }
}
