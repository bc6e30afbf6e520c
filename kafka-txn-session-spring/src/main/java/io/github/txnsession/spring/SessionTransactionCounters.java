package io.github.txnsession.spring;

import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;

import io.github.txnsession.kafka.SessionFencedException;
import io.github.txnsession.kafka.SessionListener;
import io.github.txnsession.kafka.TransactionLostException;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.TransactionSessionException;
import org.jspecify.annotations.Nullable;

/**
 * Running totals of how session transactions ended, fed by a {@link SessionTransactionManager} (as an observer) and
 * by the sessions' background heartbeats (as a {@link SessionListener}). Health checks read it. Thread-safe; the
 * totals only grow.
 */
public final class SessionTransactionCounters implements SessionTransactionObserver, SessionListener {

    private final LongAdder commits = new LongAdder();
    private final LongAdder rollbacks = new LongAdder();
    private final LongAdder failures = new LongAdder();
    private final LongAdder fenced = new LongAdder();
    private final LongAdder lost = new LongAdder();
    private final AtomicReference<@Nullable Failure> lastFailure = new AtomicReference<>();

    @Override
    public void committed(String transactionalId, Duration duration, Duration commitDuration) {
        this.commits.increment();
    }

    @Override
    public void rolledBack(String transactionalId, Duration duration) {
        this.rollbacks.increment();
    }

    @Override
    public void failed(String transactionalId, TransactionSessionException failure) {
        this.failures.increment();
        count(failure);
        this.lastFailure.set(new Failure(transactionalId, String.valueOf(failure.getMessage()), Instant.now()));
    }

    @Override
    public void onTransactionFailed(TransactionSession session, TransactionSessionException failure) {
        failed(session.transactionalId(), failure);
    }

    private void count(TransactionSessionException failure) {
        if (failure instanceof SessionFencedException) {
            this.fenced.increment();
        }
        else if (failure instanceof TransactionLostException) {
            this.lost.increment();
        }
    }

    /** @return committed transactions */
    public long commits() {
        return this.commits.sum();
    }

    /** @return transactions rolled back on purpose */
    public long rollbacks() {
        return this.rollbacks.sum();
    }

    /** @return failed commits, aborts and heartbeats (fenced and lost included) */
    public long failures() {
        return this.failures.sum();
    }

    /** @return transactions whose session was fenced by another producer with the same transactional id */
    public long fenced() {
        return this.fenced.sum();
    }

    /** @return transactions the coordinator aborted under the application (usually a transaction timeout) */
    public long lost() {
        return this.lost.sum();
    }

    /** @return the most recent failure, if any */
    public @Nullable Failure lastFailure() {
        return this.lastFailure.get();
    }

    /**
     * One failure, as reported.
     *
     * @param transactionalId the session's id
     * @param message the failure's message
     * @param at when it was reported
     */
    public record Failure(String transactionalId, String message, Instant at) {
    }
}
