package io.github.txnsession.spring;

import java.io.IOException;
import java.sql.SQLException;
import java.sql.SQLRecoverableException;
import java.sql.SQLTransientException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.BiConsumer;

import io.github.txnsession.kafka.TransactionSessionException;
import io.github.txnsession.spring.jdbc.DecisionLogException;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.InvalidRecordException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.InvalidTimestampException;
import org.apache.kafka.common.errors.InvalidTopicException;
import org.apache.kafka.common.errors.InvalidTxnStateException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RecordBatchTooLargeException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.errors.TransactionAbortableException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import org.springframework.dao.DataAccessResourceFailureException;
import org.springframework.dao.DataIntegrityViolationException;
import org.springframework.dao.RecoverableDataAccessException;
import org.springframework.dao.TransientDataAccessException;
import org.springframework.kafka.listener.AfterRollbackProcessor;
import org.springframework.kafka.listener.ContainerProperties.EOSMode;
import org.springframework.kafka.listener.DefaultAfterRollbackProcessor;
import org.springframework.kafka.listener.DeliveryAttemptAware;
import org.springframework.kafka.listener.ListenerExecutionFailedException;
import org.springframework.kafka.listener.MessageListenerContainer;
import org.springframework.kafka.support.TopicPartitionOffset;
import org.springframework.transaction.CannotCreateTransactionException;
import org.springframework.transaction.HeuristicCompletionException;
import org.springframework.transaction.TransactionTimedOutException;
import org.springframework.util.backoff.BackOff;
import org.springframework.util.backoff.BackOffExecution;
import org.springframework.util.backoff.ExponentialBackOff;

/**
 * What a transactional listener container does after a session transaction rolled back: redeliver the records, and
 * give a record up only when the record itself is the problem, never because Kafka or the database was unavailable.
 *
 * <p>spring-kafka's default gives every record up after 10 failed deliveries, whatever failed. With transactions that
 * loses output: under an outage long enough for 10 transactions of one record to fail (brokers below
 * {@code min.insync.replicas}, a coordinator moving for minutes, a database failing over), the record is skipped and
 * its output never written. This processor sorts each failure by its causes, in this order:
 * <ol>
 * <li><b>Record failures</b> (checked first): a record-level Kafka error ({@code RecordTooLargeException},
 * {@code RecordBatchTooLargeException}, {@code InvalidRecordException}, {@code InvalidTopicException},
 * {@code InvalidTimestampException}, a {@code SerializationException} not caused by I/O or a retriable error), or a
 * data, constraint or SQL error of the database (SQL state class 22, 23 or 42, Spring's
 * {@code DataIntegrityViolationException}).</li>
 * <li><b>Transient failures</b>: an infrastructure error in the causes: Kafka's retriable errors, authentication and
 * authorization errors, a fenced, timed-out or aborted producer transaction ({@code ProducerFencedException},
 * {@code InvalidProducerEpochException}, {@code TransactionAbortableException}, {@code InvalidTxnStateException},
 * {@code OutOfOrderSequenceException}), {@code UnsupportedVersionException}, an interrupt, any
 * {@code TransactionSessionException}, the two-phase decision log, a transaction that could not begin, timed out
 * ({@code TransactionTimedOutException}) or whose outcome is unknown or mixed, a serializer that could not reach its
 * schema registry, and database errors about the database rather than the data
 * ({@code TransientDataAccessException}, {@code DataAccessResourceFailureException},
 * {@code RecoverableDataAccessException}, {@code SQLTransientException}, {@code SQLRecoverableException}, any other
 * raw {@code SQLException}). The records are redelivered with an exponential back-off (0.5 s doubling to 10 s by
 * default) and <em>without limit</em>: the partition waits for the infrastructure to come back.</li>
 * <li>Everything else is a record failure: the listener's own exceptions (its own Kafka admin or client calls
 * included), a rollback-only transaction, a validation error at commit.</li>
 * </ol>
 * Record failures are delivered 10 times by default: the second delivery at once, then 1 s doubling to 30 s apart
 * (about 2 minutes in all), then the record is handed to the recoverer (by default: logged) and skipped.
 * Transient failures do not count towards a record's limit.
 *
 * <p><b>A transaction whose outcome was not known.</b> When a transaction failed anywhere but in the listener (its
 * commit timed out and could not be settled, or something failed after the commit), redelivering the records from
 * the container's position would write their output twice if the transaction committed. So, first, the processor
 * reads the group's committed offsets of the records' partitions. Kafka answers that read only once no transaction
 * holds pending offsets for them (the offset fetch asks for stable offsets, on both group protocols), so the answer
 * is the transaction's true outcome: where the committed offset is past a record, that record's transaction committed
 * and it is not delivered again. The read is retried with back-off until Kafka answers or the container stops; the
 * consumer is not polled meanwhile, so a wait longer than {@code max.poll.interval.ms} hands the partitions to
 * another member, which starts from the same committed offsets. Batch listeners get the same check.
 *
 * <p>Not guaranteed: a transient failure that never ends blocks its partition forever (logged at WARN on every
 * attempt; an application {@code AfterRollbackProcessor} bean replaces this one in the starter). A record whose
 * content makes a transient-looking error (a send to a topic named in the record that does not exist, a stale
 * optimistic-lock version) blocks its partition too. Records given up after their limit are skipped as with
 * spring-kafka's default; their offsets are not committed by this processor. The committed-offset check proves the
 * outcome only when the container commits offsets in the transaction (its default with a transaction manager), not
 * with manual acknowledgements outside it.
 *
 * @param <K> the record key type
 * @param <V> the record value type
 */
public class SessionAfterRollbackProcessor<K, V> implements AfterRollbackProcessor<K, V>, DeliveryAttemptAware {

    private static final Logger log = LoggerFactory.getLogger(SessionAfterRollbackProcessor.class);

    /** How long one read of the committed offsets may take before it is retried. */
    private static final Duration COMMITTED_READ_TIMEOUT = Duration.ofSeconds(10);

    /** How far down a cause chain the classification looks (guards against cycles). */
    private static final int MAX_CAUSE_DEPTH = 32;

    private final BackOff transientBackOff;

    private final DefaultAfterRollbackProcessor<K, V> transientFailures;

    private final DefaultAfterRollbackProcessor<K, V> recordFailures;

    /**
     * Transient failures retried without limit (0.5 s doubling to 10 s); record failures delivered 10 times: the
     * second delivery at once (a failure that happens once costs nothing), then 1 s doubling to 30 s apart (about 2
     * minutes in all, so that an outage the classification does not recognise still has that long to end before a
     * record is given up; spring-kafka's default retries at once).
     */
    public SessionAfterRollbackProcessor() {
        this(defaultTransientBackOff(), defaultRecordBackOff());
    }

    /**
     * @param transientBackOff the back-off between redeliveries after a transient failure; it should not end (an
     *        ending back-off gives the record up after an outage that long)
     * @param recordBackOff the back-off between redeliveries after a record failure; the record is given up when it
     *        ends
     */
    public SessionAfterRollbackProcessor(BackOff transientBackOff, BackOff recordBackOff) {
        this(null, transientBackOff, recordBackOff);
    }

    /**
     * @param recoverer what to do with a record given up after its record failures (a dead-letter publisher, for
     *        example); null logs it, as spring-kafka's default does
     * @param transientBackOff the back-off between redeliveries after a transient failure; it should not end
     * @param recordBackOff the back-off between redeliveries after a record failure; the record is given up when it
     *        ends
     */
    public SessionAfterRollbackProcessor(@Nullable BiConsumer<ConsumerRecord<?, ?>, Exception> recoverer,
            BackOff transientBackOff, BackOff recordBackOff) {
        this.transientBackOff = Objects.requireNonNull(transientBackOff, "transientBackOff");
        this.transientFailures = new DefaultAfterRollbackProcessor<>(transientBackOff);
        // spring-kafka's fatal list (a ClassCastException at the root, ...) must not skip a transient failure
        this.transientFailures.setClassifications(Map.of(), true);
        Objects.requireNonNull(recordBackOff, "recordBackOff");
        this.recordFailures = recoverer == null ? new DefaultAfterRollbackProcessor<>(recordBackOff)
                : new DefaultAfterRollbackProcessor<>(recoverer, recordBackOff);
    }

    /** @return 9 retries (10 deliveries): the first at once, then 1 s doubling to 30 s */
    static BackOff defaultRecordBackOff() {
        return () -> new BackOffExecution() {

            private int retries;

            @Override
            public long nextBackOff() {
                int retry = this.retries++;
                return retry >= 9 ? STOP : retry == 0 ? 0 : Math.min(30_000L, 1_000L << (retry - 1));
            }
        };
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
        if (!recordList.isEmpty() && mayHaveCommitted(exception) && skipCommitted(recordList, consumer, container)) {
            return;
        }
        (isTransient(exception) ? this.transientFailures : this.recordFailures).processBatch(records, recordList,
                consumer, container, exception, recoverable, eosMode);
    }

    @Override
    public int deliveryAttempt(TopicPartitionOffset topicPartitionOffset) {
        // each tracker says 1 + its failures of the record
        return this.transientFailures.deliveryAttempt(topicPartitionOffset)
                + this.recordFailures.deliveryAttempt(topicPartitionOffset) - 1;
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
            // the container stops: the next owner starts from the committed offsets; should this consumer poll once
            // more before it stops, it must not move past the records
            firstOffsets.forEach((tp, offset) -> seekSafely(consumer, tp, offset));
            return true;
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
            seekSafely(consumer, e.getKey(), c != null ? Math.max(c.offset(), e.getValue()) : e.getValue());
        }
        log.info("The failed session transaction of {} committed after all (the group's committed offsets are past "
                + "its records): its records are not redelivered{}", firstOffsets.keySet(),
                notAssigned.isEmpty() ? "" : "; no longer assigned: " + notAssigned);
        return true;
    }

    /** A failed seek must not leave the other partitions unsought: logged, and the next one is sought. */
    private static void seekSafely(Consumer<?, ?> consumer, TopicPartition partition, long offset) {
        try {
            consumer.seek(partition, offset);
        }
        catch (RuntimeException ex) {
            log.error("Could not seek {} back to {} after a rolled-back transaction; if the partition is still "
                    + "assigned, its records from that offset may be skipped until it is reassigned", partition,
                    offset, ex);
        }
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
                    // Kafka's InterruptException sets the flag again: clear it so that the back-off can sleep, and
                    // restore it at the end
                    interrupted |= Thread.interrupted();
                    if (!container.isRunning()) {
                        log.info("Container stopping before the outcome of the failed transaction of {} was known: "
                                + "the next owner of the partitions starts from their committed offsets", partitions);
                        return null;
                    }
                    long wait = backOff.nextBackOff();
                    log.warn("Could not read the committed offsets of {} to learn whether the failed transaction "
                            + "committed ({}); retrying in {} ms", partitions, summary(ex), wait);
                    // short sleeps: a container stop is noticed within a second
                    interrupted |= sleep(wait < 0 || wait > 1_000 ? 1_000 : wait);
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
     * @return whether the transaction may have committed: it failed anywhere but in the listener (the commit, or
     *         something after it), and not because it could not begin
     */
    static boolean mayHaveCommitted(Throwable failure) {
        return !(failure instanceof ListenerExecutionFailedException)
                && !(failure instanceof CannotCreateTransactionException);
    }

    /**
     * @param failure what the container caught
     * @return true if the failure is about the infrastructure (Kafka, the database, the transaction), not the record
     */
    static boolean isTransient(Throwable failure) {
        List<Throwable> chain = causes(failure);
        for (Throwable t : chain) {
            if (isRecordLevel(t)) {
                return false;
            }
        }
        for (Throwable t : chain) {
            if (isInfrastructure(t)) {
                return true;
            }
        }
        return false;
    }

    /** Errors that the same record would meet again, whatever the infrastructure does. */
    private static boolean isRecordLevel(Throwable t) {
        if (t instanceof SerializationException) {
            // a serializer that could not reach its schema registry is an outage, not a bad record
            return causes(t).stream().noneMatch(c -> c instanceof IOException || c instanceof RetriableException);
        }
        if (t instanceof RecordTooLargeException || t instanceof RecordBatchTooLargeException
                || t instanceof InvalidRecordException || t instanceof InvalidTopicException
                || t instanceof InvalidTimestampException || t instanceof DataIntegrityViolationException) {
            return true;
        }
        String state = t instanceof SQLException sql ? sql.getSQLState() : null;
        return state != null && (state.startsWith("22") || state.startsWith("23") || state.startsWith("42"));
    }

    /**
     * Errors of Kafka as a service, of a session, of beginning or ending the transaction, of the database as a
     * service. Other Kafka errors (an admin call of the listener's own, a policy violation) are not in the list: they
     * are the listener's failures.
     */
    private static boolean isInfrastructure(Throwable t) {
        if (t instanceof RetriableException || t instanceof InterruptException
                || t instanceof AuthenticationException || t instanceof AuthorizationException
                || t instanceof ProducerFencedException || t instanceof InvalidProducerEpochException
                || t instanceof TransactionAbortableException || t instanceof InvalidTxnStateException
                || t instanceof UnsupportedVersionException || t instanceof OutOfOrderSequenceException
                || t instanceof TransactionSessionException || t instanceof DecisionLogException
                || t instanceof CannotCreateTransactionException || t instanceof HeuristicCompletionException
                || t instanceof TransactionTimedOutException
                || (t instanceof SerializationException && !isRecordLevel(t))) {
            return true;
        }
        if (t instanceof TransientDataAccessException || t instanceof DataAccessResourceFailureException
                || t instanceof RecoverableDataAccessException || t instanceof SQLTransientException
                || t instanceof SQLRecoverableException) {
            return true;
        }
        // a raw SQLException (a commit, the decision log) that is not about the data: the database as a service
        // (SQL states differ by vendor: MySQL's read-only failover is HY000, Oracle's often null)
        return t instanceof SQLException sql && !isRecordLevel(sql);
    }

    /** The failure and its causes, each once (a cause chain may loop), at most {@value #MAX_CAUSE_DEPTH}. */
    private static List<Throwable> causes(Throwable failure) {
        List<Throwable> chain = new ArrayList<>();
        Set<Throwable> seen = Collections.newSetFromMap(new IdentityHashMap<>());
        for (Throwable t = failure; t != null && chain.size() < MAX_CAUSE_DEPTH && seen.add(t); t = t.getCause()) {
            chain.add(t);
        }
        return chain;
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
