package io.github.txnsession.kafka;

import java.util.Collections;
import java.util.EnumMap;
import java.util.EnumSet;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

import static io.github.txnsession.kafka.SessionOperation.ABORT;
import static io.github.txnsession.kafka.SessionOperation.BEGIN;
import static io.github.txnsession.kafka.SessionOperation.CLOSE;
import static io.github.txnsession.kafka.SessionOperation.COMMIT;
import static io.github.txnsession.kafka.SessionOperation.COMPLETE;
import static io.github.txnsession.kafka.SessionOperation.HEARTBEAT;
import static io.github.txnsession.kafka.SessionOperation.INITIALIZE;
import static io.github.txnsession.kafka.SessionOperation.PREPARE;
import static io.github.txnsession.kafka.SessionOperation.SEND;
import static io.github.txnsession.kafka.SessionOperation.SEND_OFFSETS;
import static io.github.txnsession.kafka.SessionState.ABORTABLE_ERROR;
import static io.github.txnsession.kafka.SessionState.ABORTING;
import static io.github.txnsession.kafka.SessionState.CLOSED;
import static io.github.txnsession.kafka.SessionState.COMMITTING;
import static io.github.txnsession.kafka.SessionState.FATAL_ERROR;
import static io.github.txnsession.kafka.SessionState.IN_TRANSACTION;
import static io.github.txnsession.kafka.SessionState.PREPARED;
import static io.github.txnsession.kafka.SessionState.READY;
import static io.github.txnsession.kafka.SessionState.UNINITIALIZED;

/**
 * The one place that says what a {@link TransactionSession} may do in each state, and where each state may lead.
 *
 * <pre>
 * state            calls allowed                                   next states
 * ---------------  ----------------------------------------------  -------------------------------------------------
 * UNINITIALIZED    initialize, close                               READY, FATAL_ERROR, CLOSED
 * READY            begin, close                                    IN_TRANSACTION, FATAL_ERROR, CLOSED
 * IN_TRANSACTION   send, sendOffsets, prepare, commit, abort,      PREPARED, COMMITTING, ABORTING, ABORTABLE_ERROR,
 *                  heartbeat, close                                FATAL_ERROR, CLOSED
 * PREPARED         commit, abort, complete, heartbeat, close       COMMITTING, ABORTING, ABORTABLE_ERROR,
 *                                                                  FATAL_ERROR, CLOSED
 * COMMITTING       close                                           READY, IN_TRANSACTION, PREPARED, ABORTABLE_ERROR,
 *                                                                  FATAL_ERROR, CLOSED
 * ABORTING         close                                           READY, IN_TRANSACTION, PREPARED, ABORTABLE_ERROR,
 *                                                                  FATAL_ERROR, CLOSED
 * ABORTABLE_ERROR  abort, close                                    ABORTING, FATAL_ERROR, CLOSED
 * FATAL_ERROR      close                                           CLOSED
 * CLOSED           close (no-op)                                   (none)
 * </pre>
 *
 * A commit that times out once kafka-clients holds its commit request moves to PREPARED (retry the commit, or abort,
 * which waits for that commit); one that times out earlier, and an abort that times out, return to where they started
 * (an abort to ABORTABLE_ERROR), so the same call can be retried. Fencing and fatal errors move to FATAL_ERROR from
 * any state but CLOSED.
 * This class is a pure function of its tables: it holds no state and is safe to share.
 */
final class SessionStateMachine {

    private static final Map<SessionState, Set<SessionOperation>> ALLOWED = new EnumMap<>(SessionState.class);
    private static final Map<SessionState, Set<SessionState>> NEXT = new EnumMap<>(SessionState.class);

    static {
        row(UNINITIALIZED, EnumSet.of(INITIALIZE, CLOSE), EnumSet.of(READY, FATAL_ERROR, CLOSED));
        row(READY, EnumSet.of(BEGIN, CLOSE), EnumSet.of(IN_TRANSACTION, FATAL_ERROR, CLOSED));
        row(IN_TRANSACTION, EnumSet.of(SEND, SEND_OFFSETS, PREPARE, COMMIT, ABORT, HEARTBEAT, CLOSE),
                EnumSet.of(PREPARED, COMMITTING, ABORTING, ABORTABLE_ERROR, FATAL_ERROR, CLOSED));
        row(PREPARED, EnumSet.of(COMMIT, ABORT, COMPLETE, HEARTBEAT, CLOSE),
                EnumSet.of(COMMITTING, ABORTING, ABORTABLE_ERROR, FATAL_ERROR, CLOSED));
        row(COMMITTING, EnumSet.of(CLOSE),
                EnumSet.of(READY, IN_TRANSACTION, PREPARED, ABORTABLE_ERROR, FATAL_ERROR, CLOSED));
        row(ABORTING, EnumSet.of(CLOSE),
                EnumSet.of(READY, IN_TRANSACTION, PREPARED, ABORTABLE_ERROR, FATAL_ERROR, CLOSED));
        row(ABORTABLE_ERROR, EnumSet.of(ABORT, CLOSE), EnumSet.of(ABORTING, FATAL_ERROR, CLOSED));
        row(FATAL_ERROR, EnumSet.of(CLOSE), EnumSet.of(CLOSED));
        row(CLOSED, EnumSet.of(CLOSE), EnumSet.noneOf(SessionState.class));
    }

    private static void row(SessionState state, Set<SessionOperation> allowed, Set<SessionState> next) {
        ALLOWED.put(state, Collections.unmodifiableSet(allowed));
        NEXT.put(state, Collections.unmodifiableSet(next));
    }

    private SessionStateMachine() {
    }

    /** @return the calls legal in {@code state} */
    static Set<SessionOperation> allowed(SessionState state) {
        return ALLOWED.get(state);
    }

    /** @return whether {@code operation} is legal in {@code state} */
    static boolean isAllowed(SessionState state, SessionOperation operation) {
        return ALLOWED.get(state).contains(operation);
    }

    /** @return whether the session may move from {@code from} to {@code to} */
    static boolean canMove(SessionState from, SessionState to) {
        return NEXT.get(from).contains(to);
    }

    /**
     * @throws IllegalStateException naming the state and the calls allowed in it, if {@code operation} is illegal
     */
    static void check(String transactionalId, SessionState state, SessionOperation operation) {
        check(transactionalId, state, operation, operation.call());
    }

    /**
     * {@link #check(String, SessionState, SessionOperation)} for a call that is one of {@code operation}'s forms
     * ({@code prepareTransactionByEpoch()} is a PREPARE): the message names {@code call}.
     */
    static void check(String transactionalId, SessionState state, SessionOperation operation, String call) {
        if (!isAllowed(state, operation)) {
            throw new IllegalStateException(describeIllegal(transactionalId, state, operation, call));
        }
    }

    /**
     * @throws IllegalStateException if the move is not in the table (a bug in the session, never user error)
     */
    static void checkMove(String transactionalId, SessionState from, SessionState to) {
        if (!canMove(from, to)) {
            throw new IllegalStateException("Transaction session '" + transactionalId
                    + "': illegal state transition " + from + " -> " + to);
        }
    }

    static String describeIllegal(String transactionalId, SessionState state, SessionOperation operation) {
        return describeIllegal(transactionalId, state, operation, operation.call());
    }

    /** @param call the call as the user wrote it, one of {@code operation}'s forms */
    static String describeIllegal(String transactionalId, SessionState state, SessionOperation operation,
            String call) {
        String allowed = ALLOWED.get(state).stream().map(SessionOperation::call).collect(Collectors.joining(", "));
        String hint = switch (state) {
            case UNINITIALIZED -> " Call initialize() first.";
            case READY -> operation == SEND || operation == SEND_OFFSETS || operation == COMMIT
                    || operation == ABORT || operation == PREPARE ? " Call beginTransaction() first." : "";
            case ABORTABLE_ERROR -> " The transaction failed and must be aborted.";
            case FATAL_ERROR -> " The session cannot be used any more; close it and create a new one.";
            case CLOSED -> " The session is closed; create a new one.";
            default -> "";
        };
        return "Transaction session '" + transactionalId + "' is in state " + state + ": " + call
                + " is not allowed. Allowed in " + state + ": " + allowed + "." + hint;
    }
}
