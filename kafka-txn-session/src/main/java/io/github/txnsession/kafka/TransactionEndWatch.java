package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import io.github.txnsession.kafka.internals.TransactionDescription;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps a live session's next transaction from meeting the previous one's unfinished end: the first write after a
 * commit or abort that reached the coordinator waits until the coordinator has finished it (left PrepareCommit /
 * PrepareAbort), when that end is recent.
 *
 * <h2>Why</h2>
 * {@code commitTransaction()} returns once the coordinator has decided (PrepareCommit); it then writes the markers
 * (typically well under a millisecond, a few ms at p99). A first write of the next transaction that reaches a partition
 * leader meanwhile is refused with CONCURRENT_TRANSACTIONS and retried only after a back-off: with transaction version
 * 2 the brokers' {@code add.partitions.to.txn.retry.backoff.ms} (20 ms by default). On one transactional id that costs
 * a sizeable share of transactions those 20 ms.
 *
 * <h2>How</h2>
 * The end only records when it happened. A first write within {@link #RECENT_NANOS} of it ({@link
 * #RECENT_OFFSETS_NANOS} when the first write is the consumer offsets, whose refusal costs more) asks the coordinator
 * (DescribeTransactions, a fraction of a millisecond) and, while the transaction is still in its Prepare state, asks
 * again 0.1 to 1 ms apart, for about {@link #MAX_WAIT_NANOS} at most (no pause runs past it; each look is bounded by
 * what is left of it, but by 1 ms at least). A write later than that goes ahead at once: the
 * markers are almost always written by then, and a caller who does not write right away pays nothing, not even a
 * background look.
 *
 * <p>Not guaranteed: the wait is an optimization only. A failed or slow look, an interrupt, or a coordinator that
 * takes longer than the limit lets the write go ahead (and meet the back-off); nothing is refused or lost because of
 * it. The limit holds for the looks themselves; a look first waits for a coordinator request of the same session
 * already in flight (a heartbeat), and one cut short by the limit closes its connection, which the next call opens
 * again.
 */
final class TransactionEndWatch {

    private static final Logger log = LoggerFactory.getLogger(TransactionEndWatch.class);

    /**
     * A first write later than this after the end does not look. Measured (P4, two sessions taking turns, 2026-12-03):
     * a look at an end 0.5 to 1 ms old found it unfinished 0.03 to 3% of the time, at 1 to 2 ms old 0.5% at most; a
     * look costs about 0.2 ms and a collision the brokers' 20 ms back-off, so looking pays only while more than about
     * 1% of ends are unfinished.
     */
    static final long RECENT_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
    /**
     * The same for a transaction whose first write is its consumer offsets: kafka-clients retries a refused
     * TxnOffsetCommit (AddOffsetsToTxn with version 1) after the producer's {@code retry.backoff.ms}, 100 ms by
     * default and not capped as for records, so looking pays for longer.
     */
    static final long RECENT_OFFSETS_NANOS = TimeUnit.MILLISECONDS.toNanos(2);
    /** The longest a first write waits. */
    static final long MAX_WAIT_NANOS = TimeUnit.MILLISECONDS.toNanos(10);
    private static final long FIRST_BACKOFF_NANOS = TimeUnit.MICROSECONDS.toNanos(100);
    private static final long MAX_BACKOFF_NANOS = TimeUnit.MILLISECONDS.toNanos(1);

    private final long endedNanos = System.nanoTime();
    private volatile boolean settled;

    /** Records an end that reached the coordinator, now. */
    TransactionEndWatch() {
    }

    /** @return whether a first write now would still look (the end is recent and not seen finished yet) */
    boolean isPending() {
        return isPending(false);
    }

    /**
     * @param offsets whether the first write is the transaction's consumer offsets rather than records
     * @return whether that first write now would still look
     */
    boolean isPending(boolean offsets) {
        return !this.settled
                && System.nanoTime() - this.endedNanos < (offsets ? RECENT_OFFSETS_NANOS : RECENT_NANOS);
    }

    /**
     * Waits, if the end is recent, until the coordinator has finished it; at most {@link #MAX_WAIT_NANOS}. Never
     * throws.
     *
     * @param view the session's coordinator view
     * @return whether the coordinator was seen to have finished the end (false: not recent, gave up, or failed)
     */
    boolean awaitEnd(CoordinatorView view) {
        return awaitEnd(view, false);
    }

    /**
     * As {@link #awaitEnd(CoordinatorView)}, for a first write of records or of consumer offsets.
     *
     * @param view the session's coordinator view
     * @param offsets whether the first write is the transaction's consumer offsets
     * @return whether the coordinator was seen to have finished the end
     */
    boolean awaitEnd(CoordinatorView view, boolean offsets) {
        if (!isPending(offsets)) {
            return false;
        }
        long deadline = System.nanoTime() + MAX_WAIT_NANOS;
        long backoff = FIRST_BACKOFF_NANOS;
        try {
            while (true) {
                // each look bounded by what is left of the wait (at least 1 ms), not by the coordinator timeout
                long left = Math.max(TimeUnit.MILLISECONDS.toNanos(1), deadline - System.nanoTime());
                Optional<TransactionDescription> d = view.describe(Duration.ofNanos(left));
                if (d.isEmpty() || !(d.get().isCommitting() || d.get().isAborting())) {
                    this.settled = true;
                    return true;
                }
                long remaining = deadline - System.nanoTime();
                if (remaining <= backoff || Thread.currentThread().isInterrupted()) {
                    return false; // no time for another look
                }
                LockSupport.parkNanos(backoff);
                backoff = Math.min(MAX_BACKOFF_NANOS, backoff * 2);
            }
        }
        catch (RuntimeException ex) {
            log.trace("Waiting for the end of a transaction stopped: {}", ex.toString());
            return false;
        }
        finally {
            this.settled = true; // one wait per end, whatever it found
        }
    }
}
