package io.github.txnsession.kafka;

import java.util.concurrent.TimeUnit;

import io.github.txnsession.kafka.internals.TransactionDescription;
import org.jspecify.annotations.Nullable;

/**
 * What a DescribeTransactions sent while a prepare's flush runs proves about the open transaction
 * ({@link TransactionSession#prepareTransactionByEpoch()}, transaction version 2 only).
 *
 * <h2>Why it can prove anything</h2>
 * With transaction version 2 the coordinator bumps the producer epoch whenever a transaction ends (commit, abort,
 * timeout-abort, fence), and a partition leader registers a transaction's partition with the coordinator when the
 * transaction's first records for it arrive, refusing them if their epoch is no longer current (later records for an
 * already registered partition are appended without asking, until the abort's marker lands there). So once the flush
 * succeeded and no send failed, the transaction is confirmed open under the session's producer id and epoch when the
 * look showed
 * <ul>
 * <li>that identity Ongoing: the transaction was open at the look, start time known;</li>
 * <li>that identity with nothing registered yet (Empty, or the previous transaction's PrepareCommit, PrepareAbort,
 * CompleteCommit or CompleteAbort), while records sent before the look were still unacknowledged: none of them was
 * registered at the look, so each was registered after it, under that epoch, or its send failed. The start time is
 * not known then.</li>
 * </ul>
 * Anything else (another producer id or epoch, PrepareEpochFence, Dead, nothing on its way) proves nothing: the caller
 * asks again after the flush, where the usual checks give the usual errors.
 *
 * <p>Not guaranteed: the confirmation holds for a moment during the flush, not right after it; a fence or timeout-abort
 * after that moment is found by the commit, as one right after a look after the flush always was. A flush longer than
 * {@link #MAX_FLUSH_NANOS} keeps that gap bounded: its look is not used, the coordinator is asked again after it.
 */
final class LookDuringFlush {

    /**
     * A flush that took longer than this (20 ms; it takes about half a millisecond on a healthy cluster) is followed by
     * a look after it instead.
     */
    static final long MAX_FLUSH_NANOS = TimeUnit.MILLISECONDS.toNanos(20);

    private LookDuringFlush() {
    }

    /**
     * @param seen what the coordinator answered, null when it gave no usable answer
     * @param known the producer id and epoch the session's producer writes with, null when not known
     * @param recordsOnTheirWay whether records sent before the look was sent were unacknowledged then
     * @return the confirmed identity, or null when the look proves nothing (ask again after the flush)
     */
    static @Nullable PreparedTransaction verdict(@Nullable TransactionDescription seen, @Nullable ProducerIdentity known,
            boolean recordsOnTheirWay) {
        if (seen == null || known == null || seen.producerId() != known.producerId()
                || seen.producerEpoch() != known.epoch()) {
            return null;
        }
        if (seen.isOngoing()) {
            return PreparedTransaction.of(seen.producerId(), seen.producerEpoch(), seen.startTimeMs());
        }
        boolean nothingRegistered = seen.isEmpty() || seen.isCommitting() || "PrepareAbort".equals(seen.state())
                || seen.isCompleteCommit() || seen.isCompleteAbort();
        return nothingRegistered && recordsOnTheirWay
                ? PreparedTransaction.of(known.producerId(), known.epoch(), -1) : null;
    }
}
