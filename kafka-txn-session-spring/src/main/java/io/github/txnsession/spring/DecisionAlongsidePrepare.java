package io.github.txnsession.spring;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;

import io.github.txnsession.kafka.PreparedTransaction;
import io.github.txnsession.kafka.TransactionSession;
import org.apache.kafka.common.errors.InterruptException;

/**
 * Writes a two-phase decision while the Kafka side is being prepared, instead of after it: the two round trips of a
 * two-phase commit's first phase (the coordinator's confirmation of the transaction, the database's decision write)
 * overlap instead of adding up.
 *
 * <h2>How</h2>
 * <ol>
 * <li>With transaction version 2 every Kafka transaction has a producer epoch of its own, so the session can tell which
 * identity its prepare will confirm ({@link TransactionSession#expectedPreparedTransaction()}).</li>
 * <li>{@link TransactionSession#prepareTransactionByEpoch()} (the flush, with DescribeTransactions sent while it runs)
 * runs on the background executor; the committing thread writes the decision under the expected identity meanwhile,
 * through the transaction's own connection, as before: the connection never leaves its thread.</li>
 * <li>The committing thread then waits for the prepare. If the executor has not started it yet (all its threads busy),
 * the committing thread prepares itself: never slower than one after the other, but for a hand-off.</li>
 * <li>The decision may commit only if the prepare confirmed the same producer id and epoch. A failed prepare or a
 * failed write throws, and the database rolls the decision back with everything else; a different identity (which
 * the session's tracking should never produce) is written over the expected one before the commit.</li>
 * </ol>
 *
 * <p>The decision names the transaction by producer id and epoch, without the coordinator's start time, which
 * transaction version 2 does not need to tell transactions apart ({@code isRecorded} looks for that form, see
 * {@link Prepared#recorded()}). The completion, and the settling of a failed completion, use the confirmed identity,
 * which has the coordinator's start time when the coordinator had registered the transaction by the time it was asked
 * (not when the records were still in the producer at the prepare, the usual case): with it, a transaction the
 * coordinator aborted on its timeout (LOST) is told from a later one of the id. After a crash, and without that start
 * time, a Kafka side aborted on its timeout between the prepare and the completion is reported in doubt (UNKNOWN)
 * rather than LOST, never committed or compensated by mistake (with the broker's maximum transaction timeout, which
 * two-phase commit sets, that takes a completion delayed for that long: 15 minutes by default).
 *
 * <p>Not guaranteed: the overlap pays only when the decision write takes longer than a thread hand-off (a database
 * over the network, not an in-process one). The coordinator's state is checked once, before the database commits, but
 * by a look sent while the flush runs ({@link TransactionSession#prepareTransactionByEpoch()}): the transaction is
 * known open at a moment during the flush, not right after it.
 */
final class DecisionAlongsidePrepare {

    private DecisionAlongsidePrepare() {
    }

    /**
     * @param confirmed the prepared transaction as the coordinator confirmed it (with its start time when known)
     * @param recorded the same transaction as the decision written names it
     */
    record Prepared(PreparedTransaction confirmed, PreparedTransaction recorded) {
    }

    /**
     * @param session the enlisted session, its transaction open and written to
     * @param decision the decision log of the transaction's database
     * @param expected what {@link TransactionSession#expectedPreparedTransaction()} returned
     * @param executor where the Kafka side is prepared
     * @return the prepared transaction, as confirmed and as the decision names it
     * @throws RuntimeException what the prepare or the decision write threw; the transaction must roll back
     */
    static Prepared prepare(TransactionSession session, TwoPhaseDecision decision,
            PreparedTransaction expected, Executor executor) {
        AtomicBoolean started = new AtomicBoolean();
        CompletableFuture<PreparedTransaction> preparing = new CompletableFuture<>();
        Runnable prepare = () -> {
            if (started.compareAndSet(false, true)) {
                try {
                    preparing.complete(session.prepareTransactionByEpoch());
                }
                catch (Throwable ex) {
                    preparing.completeExceptionally(ex);
                }
            }
        };
        try {
            executor.execute(prepare);
        }
        catch (RejectedExecutionException ex) {
            // closing, or the executor is full: prepared below, on this thread
        }
        Throwable writeFailure = null;
        try {
            decision.record(session.transactionalId(), expected);
        }
        catch (Throwable ex) {
            writeFailure = ex;
        }
        // never returns nor throws with the prepare still to run or running: a task left behind would prepare the
        // session for whoever borrows it next
        prepare.run(); // not started yet: prepared here
        PreparedTransaction prepared;
        try {
            prepared = preparing.join();
        }
        catch (CompletionException ex) {
            Throwable cause = ex.getCause() != null ? ex.getCause() : ex;
            if (writeFailure != null) {
                cause.addSuppressed(writeFailure);
            }
            throw rethrow(cause);
        }
        if (writeFailure != null) {
            throw rethrow(writeFailure); // the Kafka side is prepared; the rollback aborts it
        }
        if (Thread.currentThread().isInterrupted()) {
            // the prepare ran elsewhere and did not see it; the committing thread's own prepare would have failed
            throw new InterruptException("Interrupted while the Kafka transaction of session '"
                    + session.transactionalId() + "' was prepared; the transaction rolls back");
        }
        if (prepared.producerId() != expected.producerId() || prepared.epoch() != expected.epoch()) {
            decision.record(session.transactionalId(), prepared); // replaces the expected decision, same transaction
            return new Prepared(prepared, prepared);
        }
        return new Prepared(prepared, expected);
    }

    private static RuntimeException rethrow(Throwable failure) {
        if (failure instanceof RuntimeException re) {
            return re;
        }
        if (failure instanceof Error error) {
            throw error;
        }
        return new CompletionException(failure);
    }
}
