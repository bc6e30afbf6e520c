package io.github.txnsession.spring;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

import io.github.txnsession.kafka.SessionFencedException;
import io.github.txnsession.kafka.SessionTimeoutException;
import io.github.txnsession.kafka.TransactionLostException;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.errors.RetriableException;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import org.springframework.dao.TransientDataAccessException;
import org.springframework.kafka.listener.AfterRollbackProcessor;
import org.springframework.kafka.listener.ContainerProperties.EOSMode;
import org.springframework.kafka.listener.DefaultAfterRollbackProcessor;
import org.springframework.kafka.listener.MessageListenerContainer;
import org.springframework.transaction.CannotCreateTransactionException;
import org.springframework.transaction.TransactionException;
import org.springframework.util.backoff.BackOff;
import org.springframework.util.backoff.ExponentialBackOff;
import org.springframework.util.backoff.FixedBackOff;

/**
 * What a transactional listener container does after a session transaction rolled back: redeliver the records, and
 * give a record up only when the record itself is the problem, never because Kafka or the database was unavailable.
 *
 * <p>spring-kafka's default gives every record up after 10 failed deliveries, whatever failed. With transactions that
 * loses output: under an outage long enough for 10 transactions of one record to fail (brokers below
 * {@code min.insync.replicas}, a coordinator moving for minutes), the record is skipped and its output never written.
 * This processor sorts each failure first:
 * <ul>
 * <li><b>Transient</b>: a Kafka {@link RetriableException}, a session timeout, a lost or fenced session transaction,
 * a transient database error, or a failure of the transaction itself (begin, commit, abort) that no record-level
 * Kafka error explains. The records are redelivered with an exponential back-off (0.5 s doubling to 10 s by default)
 * and <em>without limit</em>: the partition waits for the infrastructure to come back.</li>
 * <li><b>Record failures</b>: anything else (the listener's own exceptions, a record-level Kafka error such as
 * {@code RecordTooLargeException} or a missing topic authorization). They keep spring-kafka's default: 10
 * deliveries, then the record is logged and skipped.</li>
 * </ul>
 * Transient failures do not count towards a record's limit.
 *
 * <p><b>A commit whose outcome was not known.</b> When a transaction's commit failed in a way that may still have
 * committed (it timed out, and settling it did not tell), redelivering the records from the container's position
 * would write their output twice if the commit went through. Before redelivering after a failed transaction (not a
 * failed listener), the processor therefore reads the group's committed offsets of the records' partitions. Kafka
 * answers that read only once no transaction holds pending offsets for them (the offset fetch asks for stable
 * offsets), so the answer is the transaction's true outcome: where the committed offset is past a record, that
 * record's transaction committed and it is not delivered again. The read is retried (with the transient back-off)
 * until Kafka answers or the container stops; the consumer is not polled meanwhile, so a wait longer than
 * {@code max.poll.interval.ms} hands the partitions to another member, which starts from the same committed offsets.
 *
 * <p>Not guaranteed: a transient failure that never ends blocks its partition forever (the logs say so at every
 * attempt; an application {@code AfterRollbackProcessor} bean replaces this one in the starter). Records given up
 * after their limit are skipped as with spring-kafka's default; their offsets are not committed by this processor.
 * Batch listeners get spring-kafka's default handling (no classification, no outcome check).
 *
 * @param <K> the record key type
 * @param <V> the record value type
 */
public class SessionAfterRollbackProcessor<K, V> implements AfterRollbackProcessor<K, V> {

    private static final Logger log = LoggerFactory.getLogger(SessionAfterRollbackProcessor.class);

    /** How long one read of the committed offsets may take before it is retried. */
    private static final Duration COMMITTED_READ_TIMEOUT = Duration.ofSeconds(10);

    /** How far down a cause chain the classification looks (guards against cycles). */
    private static final int MAX_CAUSE_DEPTH = 32;

    private final BackOff transientBackOff;

    private final DefaultAfterRollbackProcessor<K, V> transientFailures;

    private final DefaultAfterRollbackProcessor<K, V> recordFailures;

    /**
     * Transient failures retried without limit (0.5 s doubling to 10 s); record failures delivered 10 times, as
     * spring-kafka's default.
     */
    public SessionAfterRollbackProcessor() {
        this(defaultTransientBackOff(), new FixedBackOff(0, 9));
    }

    /**
     * @param transientBackOff the back-off between redeliveries after a transient failure; it should not end (an
     *        ending back-off gives the record up after an outage that long)
     * @param recordBackOff the back-off between redeliveries after a record failure; the record is given up when it
     *        ends
     */
    public SessionAfterRollbackProcessor(BackOff transientBackOff, BackOff recordBackOff) {
        this.transientBackOff = Objects.requireNonNull(transientBackOff, "transientBackOff");
        this.transientFailures = new DefaultAfterRollbackProcessor<>(transientBackOff);
        this.recordFailures = new DefaultAfterRollbackProcessor<>(Objects.requireNonNull(recordBackOff,
                "recordBackOff"));
    }

    /** @return 0.5 s doubling to 10 s between attempts, without limit */
    static BackOff defaultTransientBackOff() {
        ExponentialBackOff backOff = new ExponentialBackOff(500, 2.0);
        backOff.setMaxInterval(10_000);
        return backOff;
    }

    @Override
    public void process(List<ConsumerRecord<K, V>> records, Consumer<K, V> consumer,
            MessageListenerContainer container, Exception exception, boolean recoverable, EOSMode eosMode) {
        if (records.isEmpty()) {
            return;
        }
        if (mayHaveCommitted(exception) && skipCommitted(records, consumer, container)) {
            return;
        }
        boolean transientFailure = isTransient(exception);
        if (transientFailure) {
            ConsumerRecord<K, V> first = records.get(0);
            log.warn("Session transaction of {}-{}@{} rolled back on a transient failure ({}); redelivering with "
                    + "back-off, without limit", first.topic(), first.partition(), first.offset(), summary(exception));
        }
        (transientFailure ? this.transientFailures : this.recordFailures).process(records, consumer, container,
                exception, recoverable, eosMode);
    }

    @Override
    public void processBatch(ConsumerRecords<K, V> records, List<ConsumerRecord<K, V>> recordList,
            Consumer<K, V> consumer, MessageListenerContainer container, Exception exception, boolean recoverable,
            EOSMode eosMode) {
        this.recordFailures.processBatch(records, recordList, consumer, container, exception, recoverable, eosMode);
    }

    @Override
    public void clearThreadState() {
        this.transientFailures.clearThreadState();
        this.recordFailures.clearThreadState();
    }

    /**
     * Reads the committed offsets of the records' partitions (waiting until Kafka has settled the failed
     * transaction) and, if the failed transaction committed after all, seeks past what it committed.
     *
     * @return true if the transaction committed (the records it covered are not redelivered), false to redeliver
     */
    private boolean skipCommitted(List<ConsumerRecord<K, V>> records, Consumer<K, V> consumer,
            MessageListenerContainer container) {
        Map<TopicPartition, Long> firstOffsets = new LinkedHashMap<>();
        for (ConsumerRecord<K, V> r : records) {
            firstOffsets.putIfAbsent(new TopicPartition(r.topic(), r.partition()), r.offset());
        }
        Map<TopicPartition, OffsetAndMetadata> committed = readCommitted(firstOffsets.keySet(), consumer, container);
        if (committed == null) {
            return true; // the container stops: the next owner starts from the committed offsets
        }
        boolean wentThrough = false;
        for (Map.Entry<TopicPartition, Long> e : firstOffsets.entrySet()) {
            OffsetAndMetadata c = committed.get(e.getKey());
            if (c != null && c.offset() > e.getValue()) {
                wentThrough = true;
            }
        }
        if (!wentThrough) {
            return false;
        }
        List<TopicPartition> notAssigned = new ArrayList<>();
        Set<TopicPartition> assigned = new HashSet<>(consumer.assignment());
        for (Map.Entry<TopicPartition, Long> e : firstOffsets.entrySet()) {
            OffsetAndMetadata c = committed.get(e.getKey());
            if (!assigned.contains(e.getKey())) {
                notAssigned.add(e.getKey());
                continue;
            }
            consumer.seek(e.getKey(), c != null ? Math.max(c.offset(), e.getValue()) : e.getValue());
        }
        log.info("The failed session transaction of {} committed after all (the group's committed offsets are past "
                + "its records): its records are not redelivered{}", firstOffsets.keySet(),
                notAssigned.isEmpty() ? "" : "; no longer assigned: " + notAssigned);
        return true;
    }

    /**
     * @return the stable committed offsets, or null if the container stopped before Kafka answered
     */
    private @Nullable Map<TopicPartition, OffsetAndMetadata> readCommitted(Set<TopicPartition> partitions,
            Consumer<K, V> consumer, MessageListenerContainer container) {
        var backOff = this.transientBackOff.start();
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return consumer.committed(partitions, COMMITTED_READ_TIMEOUT);
                }
                catch (RuntimeException ex) {
                    // org.apache.kafka.common.errors.InterruptException clears and reports the interrupt
                    interrupted |= ex instanceof org.apache.kafka.common.errors.InterruptException
                            || Thread.interrupted();
                    if (!container.isRunning()) {
                        log.info("Container stopping before the outcome of the failed transaction of {} was known: "
                                + "the next owner of the partitions starts from their committed offsets", partitions);
                        return null;
                    }
                    long wait = backOff.nextBackOff();
                    log.warn("Could not read the committed offsets of {} to learn whether the failed transaction "
                            + "committed ({}); retrying in {} ms", partitions, summary(ex), wait);
                    interrupted |= sleep(wait < 0 ? 10_000 : wait);
                }
            }
        }
        finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** @return true if the sleep was interrupted (the rest of it is skipped) */
    private static boolean sleep(long millis) {
        try {
            Thread.sleep(millis);
            return false;
        }
        catch (InterruptedException ex) {
            return true;
        }
    }

    /**
     * @param failure what the container caught
     * @return whether the failure may be a commit that went through: the transaction failed (not only the listener),
     *         after it may have reached the commit
     */
    static boolean mayHaveCommitted(Throwable failure) {
        int depth = 0;
        for (Throwable t = failure; t != null && depth < MAX_CAUSE_DEPTH; t = t.getCause(), depth++) {
            if (t instanceof SessionTimeoutException
                    || (t instanceof TransactionException && !(t instanceof CannotCreateTransactionException))) {
                return true;
            }
        }
        return false;
    }

    /**
     * @param failure what the container caught
     * @return true if the failure is about the infrastructure (Kafka, the database, the transaction), not the record
     */
    static boolean isTransient(Throwable failure) {
        boolean recordLevelKafkaError = false;
        boolean transactionFailure = false;
        int depth = 0;
        for (Throwable t = failure; t != null && depth < MAX_CAUSE_DEPTH; t = t.getCause(), depth++) {
            if (t instanceof RetriableException || t instanceof SessionTimeoutException
                    || t instanceof TransactionLostException || t instanceof SessionFencedException
                    || t instanceof TransientDataAccessException) {
                return true;
            }
            recordLevelKafkaError |= t instanceof ApiException;
            transactionFailure |= t instanceof TransactionException;
        }
        return transactionFailure && !recordLevelKafkaError;
    }

    private static String summary(Throwable failure) {
        StringBuilder text = new StringBuilder();
        int depth = 0;
        for (Throwable t = failure; t != null && depth < 4; t = t.getCause(), depth++) {
            text.append(depth == 0 ? "" : " <- ").append(t.getClass().getSimpleName());
        }
        return text.toString();
    }
}
