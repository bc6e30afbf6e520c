package io.github.txnsession.kafka;

import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

import io.github.txnsession.kafka.internals.TransactionDescription;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Watches the coordinator after a live session's commit or abort until the coordinator has finished it (left
 * PrepareCommit / PrepareAbort), so that the next transaction's first write can wait for that instead of meeting it.
 *
 * <h2>Why</h2>
 * {@code commitTransaction()} returns once the coordinator has decided (PrepareCommit); it then writes the markers
 * (typically well under a millisecond, a few ms at p99). A first write of the next transaction that reaches a partition
 * leader meanwhile is refused with CONCURRENT_TRANSACTIONS and retried only after a back-off: with transaction version
 * 2 the broker's own {@code add.partitions.to.txn.retry.backoff.ms} (20 ms by default), with version 1 the client's
 * {@code retry.backoff.ms}. On one transactional id that costs about one transaction in five those 20 ms.
 *
 * <h2>How</h2>
 * Right after the end, a shared daemon thread polls DescribeTransactions (a fraction of a millisecond each, backing off
 * from 0.1 to 1 ms) until the transaction left its Prepare state, for at most {@link #WATCH_LIMIT_NANOS}. The caller
 * goes on at once: only a first write that comes while the watch still runs waits for it, at most
 * {@link #MAX_WAIT_NANOS}. A caller who does not write right away pays nothing.
 *
 * <p>Not guaranteed: the wait is an optimization only. A failed or slow look, an interrupt, or a coordinator that
 * takes longer than the limits lets the write go ahead (and meet the back-off); nothing is ever refused or lost
 * because of the watch.
 */
final class TransactionEndWatch {

    private static final Logger log = LoggerFactory.getLogger(TransactionEndWatch.class);

    /** The longest a first write waits for a watch still running. */
    static final long MAX_WAIT_NANOS = TimeUnit.MILLISECONDS.toNanos(10);
    /** The longest a watch polls. */
    static final long WATCH_LIMIT_NANOS = TimeUnit.MILLISECONDS.toNanos(50);
    private static final long FIRST_BACKOFF_NANOS = TimeUnit.MICROSECONDS.toNanos(100);
    private static final long MAX_BACKOFF_NANOS = TimeUnit.MILLISECONDS.toNanos(1);

    /** At most this many watches run at once; a session whose watch finds no thread simply does not wait. */
    private static final int MAX_WATCHERS = 16;
    /** Shared by all sessions: daemon threads made on demand, gone after 30 s idle. */
    private static final Executor WATCHERS = watchers();

    private final CompletableFuture<Void> done = new CompletableFuture<>();
    private volatile boolean sawEnd;

    private TransactionEndWatch() {
    }

    /**
     * Starts watching.
     *
     * @param view the session's coordinator view
     * @return the running watch
     */
    static TransactionEndWatch start(CoordinatorView view) {
        TransactionEndWatch watch = new TransactionEndWatch();
        try {
            WATCHERS.execute(() -> watch.run(view));
        }
        catch (RuntimeException ex) {
            watch.done.complete(null); // no thread to watch with (all busy): nobody waits
        }
        return watch;
    }

    private void run(CoordinatorView view) {
        long deadline = System.nanoTime() + WATCH_LIMIT_NANOS;
        long backoff = FIRST_BACKOFF_NANOS;
        try {
            while (true) {
                Optional<TransactionDescription> d = view.describe();
                if (d.isEmpty() || !(d.get().isCommitting() || d.get().isAborting())) {
                    this.sawEnd = true;
                    return;
                }
                if (System.nanoTime() - deadline > 0) {
                    return;
                }
                LockSupport.parkNanos(backoff);
                backoff = Math.min(MAX_BACKOFF_NANOS, backoff * 2);
            }
        }
        catch (RuntimeException ex) {
            log.trace("Watching the end of a transaction stopped: {}", ex.toString());
        }
        finally {
            this.done.complete(null);
        }
    }

    /** @return whether the watch saw the coordinator leave the Prepare state (false: gave up, or still running) */
    boolean sawEnd() {
        return this.sawEnd;
    }

    /** @return whether the watch has finished */
    boolean isDone() {
        return this.done.isDone();
    }

    /** Waits until the watch has finished, at most {@link #MAX_WAIT_NANOS}; never throws. */
    void awaitEnd() {
        if (this.done.isDone()) {
            return;
        }
        try {
            this.done.get(MAX_WAIT_NANOS, TimeUnit.NANOSECONDS);
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt(); // the write that follows sees the interrupt
        }
        catch (ExecutionException | java.util.concurrent.TimeoutException ex) {
            // the write goes ahead
        }
    }

    private static Executor watchers() {
        AtomicInteger count = new AtomicInteger();
        ThreadPoolExecutor pool = new ThreadPoolExecutor(0, MAX_WATCHERS, 30, TimeUnit.SECONDS,
                new SynchronousQueue<>(), r -> {
                    Thread t = new Thread(r, "txn-session-end-watch-" + count.incrementAndGet());
                    t.setDaemon(true);
                    return t;
                });
        return pool;
    }
}
