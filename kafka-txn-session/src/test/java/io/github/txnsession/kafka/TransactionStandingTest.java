package io.github.txnsession.kafka;

import java.util.Optional;

import io.github.txnsession.kafka.internals.TransactionDescription;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The classification table of {@link TransactionStanding}, row by row, for transaction versions 1 and 2. The rows
 * are the coordinator situations the broker tests create (FailurePathsTest, CommitMarkersPendingTest,
 * SessionModelTest) plus those too slow to create in the default build (epoch overflow after 32766 transactions).
 */
class TransactionStandingTest {

    private static final long P = 7;
    private static final long T = 1_700_000_000_000L;

    /**
     * Expected transaction {@code 7:5} started at {@code T}; the coordinator reports {@code pid:epoch state start}.
     * {@code start} is an offset from T, or {@code none} for the -1 of an id with no transaction since init.
     */
    @ParameterizedTest(name = "TV{0}, coordinator {1}:{2} {3} start {4} -> {5}")
    @CsvSource({
        // open, and the ends of this very transaction (same start time), any version
        "2, 7, 5, Ongoing,        0, OPEN",
        "1, 7, 5, Ongoing,        0, OPEN",
        "2, 7, 6, PrepareCommit,  0, COMMITTING",
        "1, 7, 5, PrepareCommit,  0, COMMITTING",
        "2, 7, 6, CompleteCommit, 0, COMMITTED",
        "1, 7, 5, CompleteCommit, 0, COMMITTED",
        "2, 7, 6, PrepareAbort,   0, ABORTED",
        "2, 7, 6, CompleteAbort,  0, ABORTED",
        "2, 7, 7, CompleteAbort,  0, ABORTED",        // a timeout-abort: fence, then abort
        "1, 7, 6, CompleteAbort,  0, ABORTED",        // version 1 timeout-abort: fence only
        "2, 7, 6, PrepareEpochFence, 0, ABORTED",
        // epoch overflow: the commit of 7:32766 moves the id to a new producer id at epoch 0, same start time
        "2, 8, 0, CompleteCommit, 0, COMMITTED",
        // later transactions on the same id (another start time): the outcome is no longer known
        "2, 7, 6, Ongoing,        5, UNKNOWN",
        "1, 7, 5, Ongoing,        5, UNKNOWN",         // version 1: same epoch, told apart by the start time
        "2, 7, 7, CompleteCommit, 5, UNKNOWN",
        "2, 7, 7, CompleteAbort,  5, UNKNOWN",        // committed, then a later transaction aborted
        "1, 7, 5, CompleteCommit, 5, UNKNOWN",
        "2, 7, 8, Empty,       none, UNKNOWN",        // re-initialized by another producer
        "2, 9, 0, Ongoing,        5, UNKNOWN",        // another producer id took over
        // a transaction that started in the same millisecond as a later one is still told apart by the epoch
        "2, 7, 8, CompleteCommit, 0, UNKNOWN",
        // an epoch the coordinator never reached
        "2, 7, 4, Ongoing,        0, NEVER_REACHED",
    })
    void withTheStartTime(int version, long pid, short epoch, String state, String start, TransactionStanding want) {
        PreparedTransaction expected = PreparedTransaction.of(P, (short) 5, T);
        assertThat(TransactionStanding.classify(expected, describe(pid, epoch, state, start), version == 2))
            .isEqualTo(want);
    }

    /** Legacy identities ({@code pid:epoch}, no start time): epoch arithmetic only. */
    @ParameterizedTest(name = "TV{0}, legacy 7:{1}, coordinator {2}:{3} {4} -> {5}")
    @CsvSource({
        "2, 5,     7, 5,   Ongoing,        OPEN",
        "2, 5,     7, 5,   CompleteCommit, NOT_REGISTERED",  // nothing of 7:5 ever reached the coordinator
        "2, 5,     7, 5,   Empty,          NOT_REGISTERED",
        "2, 5,     7, 6,   PrepareCommit,  COMMITTING",
        "2, 5,     7, 6,   CompleteCommit, COMMITTED",
        "2, 5,     7, 6,   CompleteAbort,  ABORTED",
        "2, 5,     7, 6,   Ongoing,        UNKNOWN",
        "2, 5,     7, 7,   CompleteAbort,  UNKNOWN",         // a timeout-abort of it, or a later abort: unknown
        "1, 5,     7, 5,   CompleteCommit, COMMITTED",
        "1, 5,     7, 5,   CompleteAbort,  ABORTED",
        "1, 5,     7, 6,   CompleteAbort,  ABORTED",
        "1, 5,     7, 6,   CompleteCommit, UNKNOWN",
        "2, 32766, 8, 0,   CompleteCommit, OVERFLOWED",      // settled by an EndTxn retry the coordinator accepts
        "2, 32766, 8, 0,   CompleteAbort,  OVERFLOWED",
        "2, 5,     8, 0,   Ongoing,        FENCED",
        "2, 5,     8, 0,   CompleteCommit, UNKNOWN",
        "2, 5,     7, 4,   Ongoing,        NEVER_REACHED",
    })
    void withoutTheStartTime(int version, short epoch, long pid, short coordinatorEpoch, String state,
            TransactionStanding want) {
        PreparedTransaction expected = PreparedTransaction.of(P, epoch, -1);
        assertThat(TransactionStanding.classify(expected, describe(pid, coordinatorEpoch, state, "0"),
                version == 2)).isEqualTo(want);
    }

    @ParameterizedTest
    @CsvSource({ "true", "false" })
    void anUnknownIdIsUnknown(boolean version2) {
        assertThat(TransactionStanding.classify(PreparedTransaction.of(P, (short) 5, T), Optional.empty(), version2))
            .isEqualTo(TransactionStanding.UNKNOWN_ID);
    }

    private static Optional<TransactionDescription> describe(long pid, short epoch, String state, String start) {
        long startMs = "none".equals(start) ? -1 : T + Long.parseLong(start);
        return Optional.of(new TransactionDescription("tx", state, pid, epoch, 60_000, startMs));
    }
}
