package io.github.txnsession.spring;

import java.time.Duration;
import java.util.Collection;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.AcknowledgementCommitCallback;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.ShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metrics.KafkaMetric;

/**
 * A share consumer that remembers when its polls started, so that a listener of spring-kafka's share container can
 * tell how long the records of the current poll keep their acquisition lock (see {@link #poll}). Everything else is
 * delegated.
 * Made by {@link SessionShareKafkaListenerContainerFactory}; used on the container's one thread.
 *
 * @param <K> key type
 * @param <V> value type
 */
final class PollTimedShareConsumer<K, V> implements ShareConsumer<K, V> {

    /** slack for a fetch answer that came in just as an empty poll returned */
    private static final long EMPTY_POLL_SLACK_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

    private final ShareConsumer<K, V> delegate;
    /** the earliest time (System.nanoTime) the records of the current poll may have been acquired; 0: not known */
    private volatile long acquiredAfter;
    private long lastPollStart;
    private long lastPollEnd;
    private boolean lastPollEmpty = true;

    PollTimedShareConsumer(ShareConsumer<K, V> delegate) {
        this.delegate = delegate;
    }

    /**
     * @param share the part of the lock that may be used, e.g. 2/3
     * @return until when (System.nanoTime) the records of the current poll certainly hold their lock with that margin,
     *         or {@code Long.MAX_VALUE} while the lock duration or the poll times are not known
     */
    long lockSafeUntil(double share) {
        Optional<Integer> lockMs = this.delegate.acquisitionLockTimeoutMs();
        long after = this.acquiredAfter;
        if (lockMs.isEmpty() || after == 0) {
            return Long.MAX_VALUE;
        }
        return after + (long) (TimeUnit.MILLISECONDS.toNanos(lockMs.get()) * share);
    }

    /**
     * Polls, and dates what it returns: records a poll returns were acquired after the previous poll started (a fetch
     * sent then may be answered later), or, when that poll returned nothing, after it ended (an answer that had come
     * in during it would have been returned), less a little slack.
     */
    @Override
    public ConsumerRecords<K, V> poll(Duration timeout) {
        long start = System.nanoTime();
        ConsumerRecords<K, V> records = this.delegate.poll(timeout);
        long end = System.nanoTime();
        if (!records.isEmpty()) {
            long after = this.lastPollStart == 0 ? start
                    : this.lastPollEmpty ? Math.max(this.lastPollStart, this.lastPollEnd - EMPTY_POLL_SLACK_NANOS)
                    : this.lastPollStart;
            this.acquiredAfter = after;
        }
        this.lastPollStart = start;
        this.lastPollEnd = end;
        this.lastPollEmpty = records.isEmpty();
        return records;
    }

    @Override
    public Set<String> subscription() {
        return this.delegate.subscription();
    }

    @Override
    public void subscribe(Collection<String> topics) {
        this.delegate.subscribe(topics);
    }

    @Override
    public void unsubscribe() {
        this.delegate.unsubscribe();
    }

    @Override
    public void acknowledge(ConsumerRecord<K, V> record) {
        this.delegate.acknowledge(record);
    }

    @Override
    public void acknowledge(ConsumerRecord<K, V> record, AcknowledgeType type) {
        this.delegate.acknowledge(record, type);
    }

    @Override
    public void acknowledge(String topic, int partition, long offset, AcknowledgeType type) {
        this.delegate.acknowledge(topic, partition, offset, type);
    }

    @Override
    public Map<TopicIdPartition, Optional<KafkaException>> commitSync() {
        return this.delegate.commitSync();
    }

    @Override
    public Map<TopicIdPartition, Optional<KafkaException>> commitSync(Duration timeout) {
        return this.delegate.commitSync(timeout);
    }

    @Override
    public void commitAsync() {
        this.delegate.commitAsync();
    }

    @Override
    public void setAcknowledgementCommitCallback(AcknowledgementCommitCallback callback) {
        this.delegate.setAcknowledgementCommitCallback(callback);
    }

    @Override
    public Uuid clientInstanceId(Duration timeout) {
        return this.delegate.clientInstanceId(timeout);
    }

    @Override
    public Optional<Integer> acquisitionLockTimeoutMs() {
        return this.delegate.acquisitionLockTimeoutMs();
    }

    @Override
    public Map<MetricName, ? extends Metric> metrics() {
        return this.delegate.metrics();
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
    public void close() {
        this.delegate.close();
    }

    @Override
    public void close(Duration timeout) {
        this.delegate.close(timeout);
    }

    @Override
    public void wakeup() {
        this.delegate.wakeup();
    }

    @Override
    public String toString() {
        return "PollTimedShareConsumer[" + this.delegate + "]";
    }
}
