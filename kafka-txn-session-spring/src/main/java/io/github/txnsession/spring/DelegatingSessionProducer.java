package io.github.txnsession.spring;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;

import io.github.txnsession.kafka.SessionProducer;
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
import org.apache.kafka.common.metrics.KafkaMetric;
import org.jspecify.annotations.Nullable;

/**
 * A {@link Producer} that hands every call to a {@link SessionProducer}; the producers that spring-kafka gets from
 * {@link SessionProducerFactory} override what differs (who drives the transaction, what close means).
 */
abstract class DelegatingSessionProducer<K, V> implements Producer<K, V> {

    final SessionProducer<K, V> delegate;

    DelegatingSessionProducer(SessionProducer<K, V> delegate) {
        this.delegate = delegate;
    }

    /** @return the session producer that transaction calls, sends and flushes go to */
    SessionProducer<K, V> target() {
        return this.delegate;
    }

    @Override
    public void initTransactions() {
        // the pool initialized the session
    }

    @Override
    public void beginTransaction() {
        target().beginTransaction();
    }

    @Override
    public void commitTransaction() {
        target().commitTransaction();
    }

    @Override
    public void abortTransaction() {
        target().abortTransaction();
    }

    @Override
    public void sendOffsetsToTransaction(Map<TopicPartition, OffsetAndMetadata> offsets,
            ConsumerGroupMetadata groupMetadata) {
        target().sendOffsetsToTransaction(offsets, groupMetadata);
    }

    @Override
    public Future<RecordMetadata> send(ProducerRecord<K, V> record) {
        return send(record, null);
    }

    @Override
    public Future<RecordMetadata> send(ProducerRecord<K, V> record, @Nullable Callback callback) {
        return target().send(record, callback);
    }

    @Override
    public void flush() {
        target().flush();
    }

    @Override
    public List<PartitionInfo> partitionsFor(String topic) {
        return this.delegate.partitionsFor(topic);
    }

    @Override
    public Map<MetricName, ? extends Metric> metrics() {
        return this.delegate.metrics();
    }

    @Override
    public Uuid clientInstanceId(Duration timeout) {
        return this.delegate.clientInstanceId(timeout);
    }

    @Override
    public void registerMetricForSubscription(KafkaMetric metric) {
        this.delegate.registerMetricForSubscription(metric);
    }

    @Override
    public void unregisterMetricFromSubscription(KafkaMetric metric) {
        this.delegate.unregisterMetricFromSubscription(metric);
    }

    @Override
    public void close(Duration timeout) {
        close();
    }

    @Override
    public String toString() {
        return getClass().getSimpleName() + "[" + this.delegate.session().transactionalId() + "]";
    }
}
