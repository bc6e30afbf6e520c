package io.github.txnsession.spring;

import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import io.github.txnsession.kafka.SessionAbortableException;
import io.github.txnsession.kafka.TransactionalShareConsumer;
import io.github.txnsession.spring.SessionShareListenerContainer.ShareRecordListener;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import org.springframework.dao.DataAccessException;
import org.springframework.transaction.HeuristicCompletionException;
import org.springframework.transaction.TransactionException;
import org.springframework.transaction.UnexpectedRollbackException;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * Processes one poll's records for one consumer of a {@link SessionShareListenerContainer}, in as few transactions
 * as the bounds and failures allow. The consumer keeps its records when a transaction aborts
 * ({@link TransactionalShareConsumer#setRetainRecordsOnAbort}), so a failure costs a replay of the neighbours, not a
 * redelivery:
 * <ol>
 * <li>Records run in transactions of at most {@code maxRecords} records and about {@code maxTime} (a transaction is
 * committed after the record that passed the time).</li>
 * <li>A transaction that fails on a transient failure (Kafka or the database as a service, see
 * {@link SessionAfterRollbackProcessor}) is run again after a back-off (0.5 s doubling to 10 s, the locks renewed),
 * as long as the container runs: an outage does not use up deliveries.</li>
 * <li>Any other failure: the record the listener failed on is released (or dead-lettered on its last allowed
 * delivery) and the others run again in a new transaction. A failure that names no record (the commit failed, or the
 * listener failed because the transaction was abort-only already: a {@link SessionAbortableException}, whose cause
 * is an earlier record's failure) splits the records in halves, each run in a transaction of its own (and halved
 * again while it fails), so that one such record costs about 2 log2(n) transactions, not n.</li>
 * <li>Records whose lock was lost or has expired, or whose transaction may have committed (an unknown outcome), are
 * no longer held and are left alone: the group delivers them again (the ledger, if used, settles them). With the
 * application's own manager, a commit that failed in a way that may hide a commit (its database COMMIT, a heuristic
 * outcome) releases its records instead of running them again.</li>
 * </ol>
 */
final class ShareBatchProcessor<K, V> {

    private static final Logger log = LoggerFactory.getLogger(ShareBatchProcessor.class);
    private static final long FIRST_BACK_OFF_MS = 500;
    private static final long MAX_BACK_OFF_MS = 10_000;
    private static final int TRANSIENT_FAILURES_BEFORE_SPLIT = 2;

    private final SessionShareListenerContainer<K, V> container;
    private final TransactionalShareConsumer<K, V> consumer;
    private final TransactionTemplate transactions;
    private final BooleanSupplier running;
    /** when the held records' locks were last renewed (or the poll returned them), System.nanoTime */
    private long lastRenewal;

    ShareBatchProcessor(SessionShareListenerContainer<K, V> container, TransactionalShareConsumer<K, V> consumer,
            TransactionTemplate transactions, BooleanSupplier running) {
        this.container = container;
        this.consumer = consumer;
        this.transactions = transactions;
        this.running = running;
        consumer.setRetainRecordsOnAbort(true);
    }

    /**
     * Processes {@code records}; on return each is acknowledged, released, or no longer held.
     *
     * @param records a poll's records
     * @param acquiredAfter the earliest time (System.nanoTime) they may have been acquired: the start of the poll
     *        before the one that returned them (a consumer may fetch ahead); their locks are renewed a third of the
     *        lock duration after it
     */
    void process(List<ConsumerRecord<K, V>> records, long acquiredAfter) {
        Deque<Work<K, V>> queue = new ArrayDeque<>();
        queue.add(new Work<>(records, this.container.maxRecordsPerTransaction(), 0));
        this.lastRenewal = acquiredAfter;
        long backOff = FIRST_BACK_OFF_MS;
        while (!queue.isEmpty()) {
            Work<K, V> work = queue.pollFirst();
            List<ConsumerRecord<K, V>> held = held(work.records());
            if (held.isEmpty()) {
                continue;
            }
            if (!this.running.getAsBoolean()) {
                releaseAll(held);
                continue;
            }
            try {
                renewIfDue();
            }
            catch (RuntimeException ex) {
                // an outage: the records whose renewal did not come back are no longer held; the rest goes on
                log.warn("Share listener '{}': renewing the acquisition locks failed ({}); trying again in {} ms",
                        this.container.name(), ex.toString(), backOff);
                queue.addFirst(work);
                pause(backOff);
                backOff = Math.min(backOff * 2, MAX_BACK_OFF_MS);
                continue;
            }
            List<ConsumerRecord<K, V>> chunk = held.subList(0, Math.min(work.limit(), held.size()));
            if (chunk.size() < held.size()) {
                queue.addFirst(new Work<>(held.subList(chunk.size(), held.size()), work.limit(), 0));
            }
            Attempt<K, V> attempt = transact(chunk);
            if (attempt.failure() == null) {
                backOff = FIRST_BACK_OFF_MS;
                this.container.committed(attempt.acknowledged());
                if (attempt.ran() < chunk.size()) { // the time bound ended the transaction early
                    queue.addFirst(new Work<>(chunk.subList(attempt.ran(), chunk.size()), work.limit(), 0));
                }
                continue;
            }
            RuntimeException failure = attempt.failure();
            Throwable cause = failure instanceof ListenerFailedException lf ? lf.getCause() : failure;
            if (mayHaveCommittedInPart(failure) || (attempt.inCommit() && commitMayHaveHappened(failure))) {
                // the database and Kafka may have ended differently: running the records again could repeat what
                // committed. Hand them back to the group (a redelivery is looked up in the ledger, if one is used)
                log.error("Share listener '{}': a transaction of {} record(s) may have committed in part ({}); "
                        + "releasing them rather than running them again", this.container.name(), chunk.size(),
                        cause.toString());
                releaseAll(held(chunk));
                continue;
            }
            if (SessionAfterRollbackProcessor.isTransient(failure)) {
                int attempts = work.transientFailures() + 1;
                if (chunk.size() > 1 && attempts >= TRANSIENT_FAILURES_BEFORE_SPLIT) {
                    // may be the transaction's size (a timeout shorter than the work) or one record misread as
                    // transient: go on in halves
                    int half = chunk.size() / 2;
                    queue.addFirst(new Work<>(chunk.subList(half, chunk.size()), chunk.size() - half, 0));
                    queue.addFirst(new Work<>(chunk.subList(0, half), half, 0));
                }
                else {
                    queue.addFirst(new Work<>(chunk, work.limit(), attempts));
                }
                log.warn("Share listener '{}': a transaction of {} record(s) rolled back on a transient failure ({}); "
                        + "running {} again in {} ms", this.container.name(), chunk.size(), cause.toString(),
                        chunk.size() > 1 && attempts >= TRANSIENT_FAILURES_BEFORE_SPLIT ? "them in halves" : "it",
                        backOff);
                pause(backOff);
                backOff = Math.min(backOff * 2, MAX_BACK_OFF_MS);
                continue;
            }
            // a record that failed because the transaction was already abort-only (a failed send of an earlier
            // record that the listener carried on after) is not the culprit: it only noticed
            ConsumerRecord<K, V> culprit = noticedEarlierFailure(failure) ? null : attempt.failedOn();
            if (culprit == null && chunk.size() > 1) {
                log.info("Share listener '{}': a transaction of {} record(s) failed, naming no record ({}); running "
                        + "each half in a transaction of its own", this.container.name(), chunk.size(), cause.toString());
                int half = chunk.size() / 2;
                queue.addFirst(new Work<>(chunk.subList(half, chunk.size()), chunk.size() - half, 0));
                queue.addFirst(new Work<>(chunk.subList(0, half), half, 0));
                continue;
            }
            ConsumerRecord<K, V> failed = culprit != null ? culprit : chunk.get(0);
            List<ConsumerRecord<K, V>> rest = new ArrayList<>(chunk);
            rest.remove(failed);
            if (!rest.isEmpty()) {
                queue.addFirst(new Work<>(rest, work.limit(), 0));
            }
            recordFailed(failed, cause instanceof Exception ex ? ex : failure);
        }
        List<ConsumerRecord<K, V>> left = held(records);
        if (!left.isEmpty()) { // not expected: every branch above acknowledges, releases or drops what it holds
            log.warn("Share listener '{}': releasing {} record(s) left unacknowledged", this.container.name(),
                    left.size());
            releaseAll(left);
        }
    }

    /**
     * A failure of the commit itself, with the application's manager: the database's COMMIT failed (a Spring
     * {@code TransactionException}, or a {@code DataAccessException} as Boot's {@code JdbcTransactionManager} and JPA
     * translate it), which may hide a commit that happened, unless its SQL state says the database rolled back (data,
     * constraint, serialization or syntax errors: classes 22, 23, 40, 42). Failures before the database commits (the
     * Kafka session's prepare) are neither and roll it back. With a {@link SessionTransactionManager} the session
     * itself says how it ended: the consumer keeps the records only after a certain abort.
     */
    private boolean commitMayHaveHappened(Throwable failure) {
        if (this.container.kafkaOnly() || failure instanceof UnexpectedRollbackException) {
            return false;
        }
        if (!(failure instanceof TransactionException) && !(failure instanceof DataAccessException)) {
            return false;
        }
        int depth = 0;
        for (Throwable t = failure; t != null && depth < 16; t = t.getCause(), depth++) {
            String state = t instanceof SQLException sql ? sql.getSQLState() : null;
            if (state != null && (state.startsWith("22") || state.startsWith("23") || state.startsWith("40")
                    || state.startsWith("42"))) {
                return false; // the database refused the commit: it rolled back
            }
        }
        return true;
    }

    /** A heuristic outcome: the database and Kafka (or Kafka and its decision) may have ended differently. */
    private static boolean mayHaveCommittedInPart(Throwable failure) {
        return causedBy(failure, HeuristicCompletionException.class);
    }

    private static boolean noticedEarlierFailure(Throwable failure) {
        return causedBy(failure, SessionAbortableException.class);
    }

    /** Whether {@code failure} or one of its causes (at most 16 deep, as a chain may loop) is a {@code type}. */
    private static boolean causedBy(Throwable failure, Class<? extends Throwable> type) {
        int depth = 0;
        for (Throwable t = failure; t != null && depth < 16; t = t.getCause(), depth++) {
            if (type.isInstance(t)) {
                return true;
            }
        }
        return false;
    }

    /** One transaction over {@code chunk}: the consumer bound, the listener run on each record, each acknowledged. */
    private Attempt<K, V> transact(List<ConsumerRecord<K, V>> chunk) {
        long start = System.nanoTime();
        long maxNanos = this.container.maxTransactionTime().toNanos();
        int[] ran = { 0, 0, 0 };
        @SuppressWarnings("unchecked")
        ConsumerRecord<K, V>[] current = new ConsumerRecord[1];
        try {
            this.transactions.executeWithoutResult(status -> {
                this.container.consumers().bindToCurrentTransaction(this.consumer);
                for (ConsumerRecord<K, V> record : chunk) {
                    if (ran[0] > 0 && System.nanoTime() - start >= maxNanos) {
                        ran[2] = 1;
                        return; // commit what ran; the rest goes into the next transaction
                    }
                    renewIfDue(); // the locks of what this transaction still has to do, and the session's
                    ran[0]++;
                    if (!this.consumer.holds(record)) {
                        continue; // its lock was lost: the group delivers it again
                    }
                    current[0] = record;
                    AcknowledgeType type = invoke(record);
                    current[0] = null;
                    this.consumer.acknowledge(record, type == null ? AcknowledgeType.ACCEPT : type);
                    ran[1]++;
                }
                ran[2] = 1; // the work is done: a failure from here on is the commit's
            });
            return new Attempt<>(ran[0], ran[1], null, null, false);
        }
        catch (RuntimeException ex) {
            return new Attempt<>(ran[0], 0, ex, current[0], ran[2] == 1);
        }
    }

    /**
     * The listener failed on {@code record}: dead-letter it on its last allowed delivery (a transient failure of the
     * dead-letter transaction is retried while the container runs), or release it.
     */
    private void recordFailed(ConsumerRecord<K, V> record, Exception failure) {
        if (!this.consumer.holds(record)) {
            return;
        }
        this.container.failed();
        int delivery = record.deliveryCount().map(Short::intValue).orElse(1);
        ShareDeadLetterHandler<K, V> handler = this.container.deadLetterHandler();
        if (handler != null && delivery >= this.container.maxDeliveries()) {
            long backOff = FIRST_BACK_OFF_MS;
            while (this.consumer.holds(record) && this.running.getAsBoolean()) {
                try {
                    renewIfDue();
                    deadLetter(handler, record, failure);
                    this.container.deadLettered();
                    log.warn("Share listener '{}': {}-{}@{} failed on delivery {} ({}); dead-lettered and rejected",
                            this.container.name(), record.topic(), record.partition(), record.offset(), delivery,
                            failure.toString());
                    return;
                }
                catch (RuntimeException ex) {
                    if (!SessionAfterRollbackProcessor.isTransient(ex) || mayHaveCommittedInPart(ex)) {
                        log.error("Share listener '{}': dead-lettering {}-{}@{} failed ({}); releasing it",
                                this.container.name(), record.topic(), record.partition(), record.offset(),
                                ex.toString());
                        break;
                    }
                    log.warn("Share listener '{}': dead-lettering {}-{}@{} failed on a transient failure ({}); trying "
                            + "again in {} ms", this.container.name(), record.topic(), record.partition(),
                            record.offset(), ex.toString(), backOff);
                    pause(backOff);
                    backOff = Math.min(backOff * 2, MAX_BACK_OFF_MS);
                }
            }
        }
        else {
            log.warn("Share listener '{}': {}-{}@{} failed on delivery {} and is released for redelivery: {}",
                    this.container.name(), record.topic(), record.partition(), record.offset(), delivery,
                    failure.toString());
        }
        if (this.consumer.holds(record)) {
            this.consumer.acknowledge(record, AcknowledgeType.RELEASE);
        }
    }

    /** One transaction: the handler's output, and the record REJECTed. */
    private void deadLetter(ShareDeadLetterHandler<K, V> handler, ConsumerRecord<K, V> record, Exception failure) {
        this.transactions.executeWithoutResult(status -> {
            this.container.consumers().bindToCurrentTransaction(this.consumer);
            try {
                handler.deadLetter(record, failure);
            }
            catch (RuntimeException ex) {
                throw ex;
            }
            catch (Exception ex) {
                throw new ListenerFailedException(ex);
            }
            this.consumer.acknowledge(record, AcknowledgeType.REJECT);
        });
    }

    private @Nullable AcknowledgeType invoke(ConsumerRecord<K, V> record) {
        try {
            return this.container.listener().onRecord(record);
        }
        catch (RuntimeException ex) {
            throw ex;
        }
        catch (Exception ex) {
            throw new ListenerFailedException(ex);
        }
    }

    private List<ConsumerRecord<K, V>> held(List<ConsumerRecord<K, V>> records) {
        List<ConsumerRecord<K, V>> held = new ArrayList<>(records.size());
        for (ConsumerRecord<K, V> r : records) {
            if (this.consumer.holds(r)) {
                held.add(r);
            }
        }
        return held;
    }

    private void releaseAll(List<ConsumerRecord<K, V>> records) {
        for (ConsumerRecord<K, V> r : records) {
            this.consumer.acknowledge(r, AcknowledgeType.RELEASE);
        }
    }

    /** Renews the held records' locks (and the bound session's transaction) once a third of their duration passed. */
    private void renewIfDue() {
        if (System.nanoTime() - this.lastRenewal >= renewInterval()) {
            this.consumer.heartbeat();
            this.lastRenewal = System.nanoTime();
        }
    }

    /** Renew the locks after a third of their duration (never, while the broker has not said how long they are). */
    private long renewInterval() {
        return this.consumer.acquisitionLockTimeoutMs()
            .map(ms -> TimeUnit.MILLISECONDS.toNanos(Math.max(1, ms / 3)))
            .orElse(Long.MAX_VALUE);
    }

    /** Waits {@code millis} or until the container stops, renewing the held records' locks when due meanwhile. */
    private void pause(long millis) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        while (this.running.getAsBoolean()) {
            long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
            if (left <= 0) {
                return;
            }
            if (!this.container.awaitStop(Math.min(left, 1000))) {
                return; // stopping
            }
            try {
                renewIfDue();
            }
            catch (RuntimeException ex) {
                log.debug("Renewing locks during the back-off failed: {}", ex.toString());
            }
        }
    }

    /**
     * Records to run, how many of them one transaction may take, and how many transient failures in a row they met.
     */
    private record Work<K, V>(List<ConsumerRecord<K, V>> records, int limit, int transientFailures) {
    }

    /**
     * How a transaction went: how many records it went through and acknowledged, and the failure and the record it
     * happened on, if any.
     */
    private record Attempt<K, V>(int ran, int acknowledged, @Nullable RuntimeException failure,
            @Nullable ConsumerRecord<K, V> failedOn, boolean inCommit) {
    }

    /** Carries a checked exception of the application through the transaction template. */
    static final class ListenerFailedException extends RuntimeException {

        private static final long serialVersionUID = 1L;

        ListenerFailedException(Exception cause) {
            super(cause);
        }
    }
}
