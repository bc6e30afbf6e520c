package io.github.txnsession.kafka;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;

import org.apache.kafka.clients.consumer.AcknowledgementCommitCallback;
import org.apache.kafka.clients.consumer.ShareConsumer;
import org.apache.kafka.common.TopicIdPartition;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The acknowledgements a {@link TransactionalShareConsumer} handed to the share consumer it wraps, until a call of
 * that consumer sends them: the next poll (they ride on its fetch, as a plain consumer's explicit acknowledgements
 * do), a commit, or close. When no such call runs within about {@link AcknowledgementLinger#DELAY_MS} ms (the
 * application stopped polling, or does other work first), a check on {@link AcknowledgementLinger}'s thread sends
 * them in a request of their own ({@code commitAsync}).
 *
 * <h2>Guaranteed</h2>
 * <ul>
 * <li>Handed-over acknowledgements are either taken along by a call of the wrapped consumer that returned normally,
 * or they still wait and a check is scheduled: a call that fails (it may have failed before it sent them) counts them
 * as waiting again and schedules one; a failed poll also tries to send them at once.</li>
 * <li>A check never makes the application wait: it takes the consumer only when it is free, and looks again later
 * while they still wait.</li>
 * <li>A check that fails tries again, at most {@value #MAX_CHECK_FAILURES} times in a row for one hand-over; the
 * error it caught is thrown by the application's next poll, once (the wrapped consumer reports some errors only once,
 * so the application must not miss one the check received).</li>
 * <li>Results the wrapped consumer reports to the acknowledgement callback while a check runs are passed on at the
 * application's next poll or close, on the application's thread.</li>
 * </ul>
 *
 * <h2>Not guaranteed</h2>
 * <ul>
 * <li>After {@value #MAX_CHECK_FAILURES} failed checks they wait for the application's next poll, commit or close:
 * records whose lock expires first are delivered again (duplicates of committed output).</li>
 * <li>Acknowledgements not handed over yet (their records were renewed and have not come back, see
 * {@link TransactionalShareConsumer}) are not covered: only a poll can take such records back.</li>
 * </ul>
 *
 * <p>Every method but the check runs with the consumer's access lock held (the check takes it with
 * {@code tryLock}).
 */
final class WaitingAcknowledgements {

    /** checks that may fail in a row before the acknowledgements are left to the next poll, commit or close */
    static final int MAX_CHECK_FAILURES = 3;

    private static final Logger log = LoggerFactory.getLogger(WaitingAcknowledgements.class);

    private final ShareConsumer<?, ?> delegate;
    private final ReentrantLock access;
    private final String groupId;
    /** handed over, and no call that sends them has returned since; under access (read by the check without) */
    private volatile boolean waiting;
    /** the consumer closed: checks leave the wrapped consumer alone; under access */
    private boolean closed;
    /** a check is sending on its own thread; under access */
    private boolean checkRunning;
    /** what the last failed check caught, for the application's next poll to throw; under access */
    private @Nullable RuntimeException checkFailure;
    /** checks that failed in a row since the last hand-over; under access */
    private int checkFailures;
    /** results reported during a check, for the application's callback; under itself */
    private final List<Runnable> deferredCallbacks = new ArrayList<>();

    WaitingAcknowledgements(ShareConsumer<?, ?> delegate, ReentrantLock access, String groupId) {
        this.delegate = delegate;
        this.access = access;
        this.groupId = groupId;
    }

    /** @return whether acknowledgements wait for a call that sends them */
    boolean any() {
        return this.waiting;
    }

    /** Acknowledgements were handed to the wrapped consumer: they wait, and a check is scheduled. */
    void handedOver() {
        this.waiting = true;
        this.checkFailures = 0;
        AcknowledgementLinger.schedule(this::check);
    }

    /**
     * Runs a call of the wrapped consumer that sends what was handed to it (a commit, a poll of the consumer's own).
     * If it fails, the acknowledgements that waited wait again and a check is scheduled.
     */
    <T> T sending(Supplier<T> call) {
        boolean waited = this.waiting;
        this.waiting = false;
        try {
            return call.get();
        }
        catch (RuntimeException ex) {
            if (waited) {
                stillWaiting(); // (a request of their own sends nothing if the call took them along)
            }
            throw ex;
        }
    }

    /**
     * Runs the application's poll of the wrapped consumer, whose fetch takes the acknowledgements along. If it fails
     * (kafka-clients 4.2 throws a pending wakeup before it takes them), they are sent at once in a request of their
     * own, or left to a check if that fails too.
     */
    <T> T polling(Supplier<T> poll) {
        boolean waited = this.waiting;
        try {
            return sending(poll);
        }
        catch (RuntimeException ex) {
            if (waited) {
                try {
                    sendWaiting();
                }
                catch (RuntimeException notSent) {
                    ex.addSuppressed(notSent); // (they still wait: sending scheduled a check)
                }
            }
            throw ex;
        }
    }

    /** Sends the waiting acknowledgements now, in a request of their own; if that fails, a check tries again. */
    void send() {
        try {
            sendWaiting();
        }
        catch (RuntimeException ex) {
            stillWaiting();
            throw ex;
        }
    }

    /** At the start of the application's poll: passes on deferred results, then throws what a check caught, once. */
    void beforePoll() {
        runDeferredCallbacks();
        RuntimeException failure = this.checkFailure;
        if (failure != null) {
            this.checkFailure = null;
            throw failure;
        }
    }

    /**
     * Passes a result the wrapped consumer reported on to the application's callback, on the application's thread: a
     * result reported during a check is kept for the next poll or close.
     */
    void passOn(AcknowledgementCommitCallback callback, Map<TopicIdPartition, Set<Long>> offsets,
            @Nullable Exception failure) {
        if (this.checkRunning) {
            synchronized (this.deferredCallbacks) {
                this.deferredCallbacks.add(() -> callback.onComplete(offsets, failure));
            }
            return;
        }
        try {
            runDeferredCallbacks();
        }
        finally {
            callback.onComplete(offsets, failure);
        }
    }

    /** Passes on results reported during a check, in their order; all run, the first error is rethrown. */
    void runDeferredCallbacks() {
        List<Runnable> due;
        synchronized (this.deferredCallbacks) {
            if (this.deferredCallbacks.isEmpty()) {
                return;
            }
            due = new ArrayList<>(this.deferredCallbacks);
            this.deferredCallbacks.clear();
        }
        RuntimeException first = null;
        for (Runnable callback : due) {
            try {
                callback.run();
            }
            catch (RuntimeException ex) {
                if (first == null) {
                    first = ex;
                }
                else {
                    first.addSuppressed(ex);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }

    /** The consumer closes: closing the wrapped consumer sends what waits, and checks leave it alone from now on. */
    void closing() {
        this.closed = true;
        this.waiting = false;
    }

    private void stillWaiting() {
        this.waiting = true;
        this.checkFailures = 0; // (a new series of checks)
        AcknowledgementLinger.schedule(this::check);
    }

    private void sendWaiting() {
        if (this.waiting && !this.closed) {
            this.delegate.commitAsync();
            this.waiting = false;
        }
    }

    /** @return whether to check again later */
    private boolean check() {
        if (!this.access.tryLock()) {
            return this.waiting; // (a poll or commit holding the consumer may take them along)
        }
        this.checkRunning = true;
        try {
            sendWaiting();
            return false;
        }
        catch (RuntimeException ex) {
            this.checkFailure = ex;
            boolean again = ++this.checkFailures < MAX_CHECK_FAILURES;
            if (again) {
                log.warn("Share group '{}': the acknowledgements of a committed transaction could not be sent ({}); "
                        + "trying again", this.groupId, ex.toString());
            }
            else {
                log.error("Share group '{}': the acknowledgements of a committed transaction could not be sent ({}); "
                        + "the next poll, commit or close sends them (records whose lock expires first are delivered "
                        + "again: duplicates of committed output)", this.groupId, ex.toString());
            }
            return again;
        }
        finally {
            this.checkRunning = false;
            this.access.unlock();
        }
    }
}
