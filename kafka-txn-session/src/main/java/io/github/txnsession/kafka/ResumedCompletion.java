package io.github.txnsession.kafka;

import java.util.Optional;
import java.util.concurrent.TimeUnit;

import io.github.txnsession.kafka.internals.TransactionDescription;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.protocol.Errors;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The resumed engine: finishes a transaction another process prepared, talking only to its coordinator. It holds no
 * session state; it returns what happened or throws what cannot be done, and the session moves its state machine.
 *
 * <h2>Commit</h2>
 * <pre>
 * standing ({@link TransactionStanding})   what is done                                   result
 * -------------------------------------   --------------------------------------------   --------------------------------
 * OPEN                                    EndTxn(commit)                                 COMMITTED (*)
 * COMMITTING                              wait for the markers (up to the timeout)       ALREADY_COMMITTED
 * COMMITTED                               nothing                                        ALREADY_COMMITTED
 * NOT_REGISTERED (legacy), empty state    nothing                                        EMPTY
 * OVERFLOWED                              EndTxn(commit) with the old id, a retry the    NONE: ALREADY_COMMITTED,
 *                                         coordinator recognizes after an overflow       INVALID_TXN_STATE: lost
 * ABORTED                                 nothing                                        TransactionLostException
 * FENCED                                  nothing                                        SessionFencedException
 * UNKNOWN, UNKNOWN_ID, NEVER_REACHED      nothing                                        TransactionSupersededException
 * </pre>
 * (*) EndTxn answering an error is followed by a second look: a concurrent committer of the same transaction makes
 * it ALREADY_COMMITTED, an abort makes it lost, anything else is classified as above. Two committers that both send
 * EndTxn both report COMMITTED: the coordinator answers a retried commit exactly like the first one.
 *
 * <h2>Abort</h2>
 * OPEN: EndTxn(abort) -&gt; ABORTED; ABORTED: ABORTED; NOT_REGISTERED or empty: EMPTY; COMMITTING or COMMITTED: a
 * {@link TransactionSessionException} (it cannot be aborted any more); OVERFLOWED: EndTxn(abort) retry, NONE -&gt;
 * ABORTED; the rest as for commit.
 *
 * <p>Never done: an EndTxn(commit) for a transaction that is not {@code OPEN} under the caller's identity (with the
 * start time, exactly that transaction), except the overflow retry, which the coordinator accepts only as a retry.
 */
final class ResumedCompletion {

    private static final Logger log = LoggerFactory.getLogger(ResumedCompletion.class);

    private final String transactionalId;
    private final CoordinatorView view;

    ResumedCompletion(String transactionalId, CoordinatorView view) {
        this.transactionalId = transactionalId;
        this.view = view;
    }

    CompletionOutcome commit(PreparedTransaction txn) {
        if (txn.isEmpty()) {
            return CompletionOutcome.EMPTY;
        }
        Optional<TransactionDescription> d = this.view.describe();
        TransactionStanding standing = this.view.standing(txn, d);
        switch (standing) {
            case OPEN -> {
                Errors e = this.view.end(txn, true);
                if (e == Errors.NONE) {
                    log.info("Committed resumed transaction {} of '{}'", txn, this.transactionalId);
                    return CompletionOutcome.COMMITTED;
                }
                return commitAfterEndError(txn, e);
            }
            case COMMITTING -> {
                awaitCommitMarkers(txn);
                return CompletionOutcome.ALREADY_COMMITTED;
            }
            case COMMITTED -> {
                log.info("Resumed transaction {} of '{}' was already committed", txn, this.transactionalId);
                return CompletionOutcome.ALREADY_COMMITTED;
            }
            case NOT_REGISTERED -> {
                return CompletionOutcome.EMPTY;
            }
            case OVERFLOWED -> {
                Errors e = this.view.end(txn, true);
                if (e == Errors.NONE) {
                    return CompletionOutcome.ALREADY_COMMITTED;
                }
                if (e == Errors.INVALID_TXN_STATE) {
                    throw failure(txn, TransactionStanding.ABORTED, this.view.describe());
                }
                throw failure(txn, TransactionStanding.UNKNOWN, this.view.describe());
            }
            default -> throw failure(txn, standing, d);
        }
    }

    CompletionOutcome abort(PreparedTransaction txn) {
        if (txn.isEmpty()) {
            return CompletionOutcome.EMPTY;
        }
        Optional<TransactionDescription> d = this.view.describe();
        TransactionStanding standing = this.view.standing(txn, d);
        switch (standing) {
            case OPEN -> {
                Errors e = this.view.end(txn, false);
                if (e == Errors.NONE) {
                    log.info("Aborted resumed transaction {} of '{}'", txn, this.transactionalId);
                    return CompletionOutcome.ABORTED;
                }
                Optional<TransactionDescription> again = this.view.describe();
                TransactionStanding now = this.view.standing(txn, again);
                if (now == TransactionStanding.ABORTED) {
                    return CompletionOutcome.ABORTED;
                }
                throw failure(txn, now == TransactionStanding.OPEN ? TransactionStanding.UNKNOWN : now, again, e);
            }
            case ABORTED -> {
                return CompletionOutcome.ABORTED;
            }
            case NOT_REGISTERED -> {
                return CompletionOutcome.EMPTY;
            }
            case OVERFLOWED -> {
                Errors e = this.view.end(txn, false);
                if (e == Errors.NONE) {
                    return CompletionOutcome.ABORTED;
                }
                throw failure(txn, e == Errors.INVALID_TXN_STATE ? TransactionStanding.COMMITTED
                        : TransactionStanding.UNKNOWN, this.view.describe());
            }
            default -> throw failure(txn, standing, d);
        }
    }

    /** EndTxn(commit) of an OPEN transaction answered an error: look again to report what really happened. */
    private CompletionOutcome commitAfterEndError(PreparedTransaction txn, Errors error) {
        Optional<TransactionDescription> d = this.view.describe();
        TransactionStanding standing = this.view.standing(txn, d);
        switch (standing) {
            case COMMITTED -> {
                return CompletionOutcome.ALREADY_COMMITTED;
            }
            case COMMITTING -> {
                awaitCommitMarkers(txn);
                return CompletionOutcome.ALREADY_COMMITTED;
            }
            case OPEN -> throw new TransactionSessionException(this.transactionalId, "EndTxn(commit) for " + txn
                    + " answered " + error + " while the transaction is still open; nothing was committed. "
                    + CoordinatorView.describeForMessage(d), error.exception());
            default -> throw failure(txn, standing, d, error);
        }
    }

    /**
     * The commit is decided (PrepareCommit): wait until the coordinator has written its markers, so that
     * {@code read_committed} readers see the records when this returns. A partition leader that is down keeps the
     * markers pending; after the timeout the commit is still reported (it is decided and durable), with a warning.
     */
    private void awaitCommitMarkers(PreparedTransaction txn) {
        long deadline = System.nanoTime() + this.view.timeout().toNanos();
        long backoffMs = 5;
        while (System.nanoTime() < deadline) {
            try {
                if (this.view.standing(txn, this.view.describe()) != TransactionStanding.COMMITTING) {
                    return;
                }
            }
            catch (org.apache.kafka.common.errors.TimeoutException ex) {
                break; // the commit is decided: a coordinator that does not answer now changes nothing
            }
            try {
                TimeUnit.MILLISECONDS.sleep(backoffMs);
            }
            catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
                throw new InterruptException(ex);
            }
            backoffMs = Math.min(200, backoffMs * 2);
        }
        log.warn("Transaction {} of '{}' is committed (the coordinator decided it), but its commit markers were not "
                + "all written within {} ms (a partition leader is unavailable?); read_committed readers see its "
                + "records once they are", txn, this.transactionalId, this.view.timeout().toMillis());
    }

    private TransactionSessionException failure(PreparedTransaction txn, TransactionStanding standing,
            Optional<TransactionDescription> d) {
        return failure(txn, standing, d, null);
    }

    private TransactionSessionException failure(PreparedTransaction txn, TransactionStanding standing,
            Optional<TransactionDescription> d, @Nullable Errors error) {
        String detail = "Requested transaction " + txn + "." + (error == null ? "" : " EndTxn answered " + error + ".")
                + " " + CoordinatorView.describeForMessage(d);
        return switch (standing) {
            case ABORTED -> new TransactionLostException(this.transactionalId, detail, null);
            case FENCED -> new SessionFencedException(this.transactionalId, "finishing " + txn + " (" + detail + ")",
                    null);
            case COMMITTING, COMMITTED -> new TransactionSessionException(this.transactionalId, "cannot abort "
                    + "transaction " + txn + ": it is already committed (or its commit is decided). " + detail, null);
            default -> new TransactionSupersededException(this.transactionalId, detail);
        };
    }
}
