package io.github.txnsession.kafka;

import java.util.Optional;

import io.github.txnsession.kafka.internals.TransactionDescription;

/**
 * How one prepared transaction stands at its coordinator: the single classification behind completion, resume,
 * heartbeat and recovery. A pure function of the expected transaction {@code (P, E, T)} (producer id, epoch, start
 * time; see {@link PreparedTransaction}) and what DescribeTransactions reports {@code (P', E', state, T')}.
 *
 * <h2>With the start time (the identity {@code prepareTransaction()} hands out), transaction version 1 or 2</h2>
 * The coordinator keeps a transaction's start time through PrepareCommit, CompleteCommit, PrepareAbort and
 * CompleteAbort, and keeps it when the epoch overflows into a new producer id, so {@code T' == T} means "this
 * transaction is the coordinator's latest" whatever the epoch bumps were (commit, abort, timeout-abort, fence).
 * <pre>
 * coordinator reports                                     standing
 * ------------------------------------------------------  ------------------------------------------------------
 * nothing (id unknown or expired)                         UNKNOWN_ID
 * T' == T, Ongoing, P' == P, E' == E                      OPEN
 * T' == T, PrepareCommit                                  COMMITTING  (decided; markers being written)
 * T' == T, CompleteCommit                                 COMMITTED   (also after an overflow: P' new, E' 0)
 * T' == T, PrepareAbort, PrepareEpochFence, CompleteAbort ABORTED     (by a caller, a timeout or a fencing producer)
 * P' == P, E' &lt; E                                         NEVER_REACHED (the coordinator never had that epoch)
 * anything else (a later transaction or a re-initialized  UNKNOWN     (the id moved on; the outcome is forgotten)
 * id: T' != T)
 * </pre>
 *
 * <h2>Without the start time (Kafka's {@code PreparedTxnState}, "pid:epoch"): epoch arithmetic</h2>
 * With transaction version 2 the coordinator bumps the epoch when a commit or abort starts (E -&gt; E+1), a
 * timeout-abort bumps it twice (fence, then abort: E+2), and an exhausted epoch (32766) moves to a new producer id
 * at epoch 0. With version 1 the epoch stays.
 * <pre>
 * coordinator reports                           version 2                   version 1
 * --------------------------------------------  --------------------------  -----------------------------------
 * P' == P, E' == E, Ongoing                     OPEN (*)                    OPEN (*)
 * P' == P, E' == E, PrepareCommit               NOT_REGISTERED              COMMITTING (*)
 * P' == P, E' == E, CompleteCommit              NOT_REGISTERED              COMMITTED (*)
 * P' == P, E' == E, aborting or CompleteAbort   NOT_REGISTERED              ABORTED (*)
 * P' == P, E' == E, Empty                       NOT_REGISTERED              NOT_REGISTERED
 * P' == P, E' == E+1, PrepareCommit             COMMITTING                  UNKNOWN
 * P' == P, E' == E+1, CompleteCommit            COMMITTED                   UNKNOWN
 * P' == P, E' == E+1, aborting or CompleteAbort ABORTED                     ABORTED (timeout: fence then abort)
 * P' != P, E' == 0, complete, E &gt;= 32766        OVERFLOWED (ask the coordinator: an EndTxn retry tells)
 * P' != P, Ongoing or PrepareCommit             FENCED                      FENCED
 * P' == P, E' &lt; E                               NEVER_REACHED               NEVER_REACHED
 * anything else                                 UNKNOWN                     UNKNOWN
 * </pre>
 * (*) cannot be told apart from a later transaction at the same epoch (version 1, or after an empty transaction):
 * this is why {@link PreparedTransaction} carries the start time.
 */
enum TransactionStanding {

    /** Open: it can be committed or aborted. */
    OPEN,
    /** Its commit is decided at the coordinator (PrepareCommit); the markers are being written. */
    COMMITTING,
    /** It ended in a commit. */
    COMMITTED,
    /** It ended in an abort, or its abort is being written. */
    ABORTED,
    /** The coordinator never registered a transaction at that identity: it wrote nothing (legacy identities). */
    NOT_REGISTERED,
    /** The coordinator never reached that epoch: the identity is not one of this id's transactions. */
    NEVER_REACHED,
    /** A different producer took the id over while a transaction is open (legacy identities). */
    FENCED,
    /** The epoch overflowed into a new producer id; only the coordinator can tell how (an EndTxn retry). */
    OVERFLOWED,
    /** The coordinator does not know the transactional id (never used, or expired). */
    UNKNOWN_ID,
    /** The id moved on past the transaction; its outcome is no longer known. */
    UNKNOWN;

    /** Epochs at or above this are exhausted: the coordinator moves to a new producer id when it ends one. */
    static final short EXHAUSTED_EPOCH = Short.MAX_VALUE - 1;

    /**
     * @param expected the prepared transaction (not empty)
     * @param description what the coordinator reports, empty when it does not know the id
     * @param transactionVersion2 whether the coordinator bumps the epoch at every transaction end
     */
    static TransactionStanding classify(PreparedTransaction expected, Optional<TransactionDescription> description,
            boolean transactionVersion2) {
        if (description.isEmpty()) {
            return UNKNOWN_ID;
        }
        TransactionDescription d = description.get();
        return expected.hasStartTime() ? byStartTime(expected, d, transactionVersion2)
                : byEpoch(expected, d, transactionVersion2);
    }

    private static TransactionStanding byStartTime(PreparedTransaction expected, TransactionDescription d,
            boolean transactionVersion2) {
        if (d.producerId() == expected.producerId() && d.producerEpoch() < expected.epoch()) {
            return NEVER_REACHED;
        }
        if (d.startTimeMs() != expected.startTimeMs()) {
            return UNKNOWN;
        }
        boolean sameProducer = d.producerId() == expected.producerId();
        // epochs this transaction's own end can leave: a commit or abort bumps once with version 2, a
        // timeout-abort or fence twice; version 1 bumps only to fence. A later transaction that started in the
        // same millisecond has moved further.
        int delta = sameProducer ? d.producerEpoch() - expected.epoch() : 0;
        int bump = transactionVersion2 ? 1 : 0;
        if (d.isOngoing()) {
            return sameProducer && delta == 0 ? OPEN : UNKNOWN;
        }
        if (d.isCommitting()) {
            return delta <= bump ? COMMITTING : UNKNOWN;
        }
        if (d.isCompleteCommit()) {
            return delta <= bump ? COMMITTED : UNKNOWN;
        }
        if (d.isAborting() || d.isCompleteAbort()) {
            return delta <= bump + 1 ? ABORTED : UNKNOWN;
        }
        return UNKNOWN;
    }

    private static TransactionStanding byEpoch(PreparedTransaction expected, TransactionDescription d,
            boolean transactionVersion2) {
        if (d.producerId() != expected.producerId()) {
            if (expected.epoch() >= EXHAUSTED_EPOCH && d.producerEpoch() == 0
                    && (d.isCompleteCommit() || d.isCompleteAbort())) {
                return OVERFLOWED;
            }
            return d.isOngoing() || d.isCommitting() ? FENCED : UNKNOWN;
        }
        int delta = d.producerEpoch() - expected.epoch();
        if (delta < 0) {
            return NEVER_REACHED;
        }
        if (delta == 0) {
            if (d.isOngoing()) {
                return OPEN;
            }
            if (transactionVersion2 || d.isEmpty()) {
                return NOT_REGISTERED; // with version 2 an ended transaction would have bumped the epoch
            }
            if (d.isCommitting()) {
                return COMMITTING;
            }
            if (d.isCompleteCommit()) {
                return COMMITTED;
            }
            return d.isAborting() || d.isCompleteAbort() ? ABORTED : UNKNOWN;
        }
        if (delta == 1) {
            if (d.isAborting() || d.isCompleteAbort()) {
                return ABORTED;
            }
            if (transactionVersion2 && d.isCommitting()) {
                return COMMITTING;
            }
            if (transactionVersion2 && d.isCompleteCommit()) {
                return COMMITTED;
            }
        }
        return UNKNOWN;
    }
}
