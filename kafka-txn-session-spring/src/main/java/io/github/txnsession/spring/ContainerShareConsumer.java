package io.github.txnsession.spring;

import java.time.Duration;
import java.util.Collection;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import io.github.txnsession.kafka.TransactionalShareConsumer;
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
import org.apache.kafka.common.errors.RecordDeserializationException;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The share consumer a {@link SessionShareKafkaListenerContainerFactory} container polls with: a
 * {@link TransactionalShareConsumer} over the application's consumer, so that a record's ACCEPT joins the record's
 * transaction (sent after the commit, with the container's next poll or about 10 ms later; with an outcome ledger,
 * written into it) and the records' locks can be renewed on the container's thread.
 *
 * <p>spring-kafka's container acknowledges each record itself after the listener returned (ACCEPT) or threw (its
 * recoverer's answer). The factory's listener has acknowledged the record inside its transaction already, or the
 * transactional consumer has let it go (released after an unknown outcome, its lock lost): such acknowledgements of
 * records this consumer no longer holds are ignored here. Everything else is passed on.
 * Used on the container's one thread.
 *
 * @param <K> key type
 * @param <V> value type
 */
final class ContainerShareConsumer<K, V> implements ShareConsumer<K, V> {

    private static final Logger log = LoggerFactory.getLogger(ContainerShareConsumer.class);
    /** slack for a fetch answer that came in just as an empty poll returned */
    private static final long EMPTY_POLL_SLACK_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

    private final TransactionalShareConsumer<K, V> delegate;
    /** the earliest time (System.nanoTime) the held records' locks may have started or were last renewed; 0: none */
    private long lockedSince;
    private long lastPollStart;
    private long lastPollEnd;
    private boolean lastPollEmpty = true;

    ContainerShareConsumer(TransactionalShareConsumer<K, V> delegate) {
        this.delegate = delegate;
    }

    /** @return the transactional consumer the container's records come from */
    TransactionalShareConsumer<K, V> transactional() {
        return this.delegate;
    }

    /**
     * @return whether the transactional consumer still holds {@code record} (delivered, lock not lost, not
     *         acknowledged)
     */
    boolean holds(ConsumerRecord<?, ?> record) {
        return this.delegate.holds(record);
    }

    /**
     * Renews the locks of every record held when {@code share} of the lock may have passed since they were acquired
     * or last renewed (see {@link TransactionalShareConsumer#heartbeat()}); a record whose renewal did not come back is
     * no longer held. Does nothing while the lock duration is not known.
     *
     * @param share the part of the lock after which to renew, e.g. 1/3
     */
    void renewIfDue(double share) {
        Optional<Integer> lockMs = this.delegate.acquisitionLockTimeoutMs();
        long since = this.lockedSince;
        if (lockMs.isEmpty() || since == 0
                || System.nanoTime() - since < (long) (TimeUnit.MILLISECONDS.toNanos(lockMs.get()) * share)) {
            return;
        }
        long start = System.nanoTime(); // the broker extends a lock when it gets the renewal, later
        try {
            this.delegate.heartbeat();
        }
        catch (RecordDeserializationException ex) {
            // fetched by the poll that takes renewed records back, and not the current record's fault: rejected as
            // the container rejects one its own poll cannot deserialize
            log.warn("A record fetched while renewing locks cannot be deserialized ({}); rejecting {}@{}",
                    ex.toString(), ex.topicPartition(), ex.offset());
            this.delegate.acknowledge(ex.topicPartition().topic(), ex.topicPartition().partition(), ex.offset(),
                    AcknowledgeType.REJECT);
        }
        this.lockedSince = start;
    }

    /**
     * Waits {@code millis} on the container's thread (a back-off), renewing the held records' locks whenever
     * {@code share} of the lock has passed since they were acquired or last renewed.
     *
     * @throws InterruptedException if the thread is interrupted
     */
    void pauseRenewing(long millis, double share) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        long slice = this.delegate.acquisitionLockTimeoutMs().map(ms -> Math.max(1, (long) (ms * share / 2)))
            .orElse(millis);
        while (true) {
            long left = TimeUnit.NANOSECONDS.toMillis(end - System.nanoTime());
            if (left <= 0) {
                break;
            }
            Thread.sleep(Math.min(left, slice));
            renewIfDue(share);
        }
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
            this.lockedSince = this.lastPollStart == 0 ? start
                    : this.lastPollEmpty ? Math.max(this.lastPollStart, this.lastPollEnd - EMPTY_POLL_SLACK_NANOS)
                    : this.lastPollStart;
        }
        this.lastPollStart = start;
        this.lastPollEnd = end;
        this.lastPollEmpty = records.isEmpty();
        return records;
    }

    /** ACCEPT; see {@link #acknowledge(ConsumerRecord, AcknowledgeType)}. */
    @Override
    public void acknowledge(ConsumerRecord<K, V> record) {
        acknowledge(record, AcknowledgeType.ACCEPT);
    }

    /**
     * Passes the acknowledgement on, unless the transactional consumer no longer holds the record: the record's
     * transaction acknowledged it already, or its lock was lost or it was released (the group delivers it again).
     */
    @Override
    public void acknowledge(ConsumerRecord<K, V> record, AcknowledgeType type) {
        if (type != AcknowledgeType.RENEW && !this.delegate.holds(record)) {
            log.debug("{} of {}-{}@{} ignored: acknowledged in its transaction already, or no longer held", type,
                    record.topic(), record.partition(), record.offset());
            return;
        }
        this.delegate.acknowledge(record, type);
    }

    @Override
    public void acknowledge(String topic, int partition, long offset, AcknowledgeType type) {
        this.delegate.acknowledge(topic, partition, offset, type);
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
        return "ContainerShareConsumer[" + this.delegate + "]";
    }
}
