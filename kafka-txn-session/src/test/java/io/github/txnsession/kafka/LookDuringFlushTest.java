package io.github.txnsession.kafka;

import io.github.txnsession.kafka.internals.TransactionDescription;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * What a look sent during a prepare's flush proves (no broker: the rules as a table). The session's producer writes
 * with 7:3; the flush succeeded.
 */
class LookDuringFlushTest {

    private static final ProducerIdentity KNOWN = new ProducerIdentity(7, (short) 3);

    private static TransactionDescription seen(long producerId, int epoch, String state, long startTimeMs) {
        return new TransactionDescription("tx", state, producerId, (short) epoch, 60_000, startTimeMs);
    }

    @Test
    void ourEpochOngoingConfirmsWithTheCoordinatorsStartTime() {
        PreparedTransaction p = LookDuringFlush.verdict(seen(7, 3, "Ongoing", 1234), KNOWN, false);
        assertThat(p).isEqualTo(PreparedTransaction.of(7, (short) 3, 1234));
        assertThat(LookDuringFlush.verdict(seen(7, 3, "Ongoing", 1234), KNOWN, true)).isEqualTo(p);
    }

    @ParameterizedTest
    @ValueSource(strings = { "Empty", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort" })
    void ourEpochWithNothingRegisteredConfirmsByEpochOnlyWhileRecordsWereOnTheirWay(String state) {
        // nothing registered at the look: the records then on their way were registered after it, under this epoch
        assertThat(LookDuringFlush.verdict(seen(7, 3, state, 99), KNOWN, true))
            .isEqualTo(PreparedTransaction.of(7, (short) 3, -1))
            .satisfies(p -> assertThat(p.hasStartTime()).isFalse());
        // nothing on its way: the flush registered nothing after the look, so the look proves nothing
        assertThat(LookDuringFlush.verdict(seen(7, 3, state, 99), KNOWN, false)).isNull();
    }

    @ParameterizedTest
    @ValueSource(strings = { "PrepareEpochFence", "Dead", "SomethingNew" })
    void otherStatesOfOurEpochProveNothing(String state) {
        assertThat(LookDuringFlush.verdict(seen(7, 3, state, 99), KNOWN, true)).isNull();
        assertThat(LookDuringFlush.verdict(seen(7, 3, state, 99), KNOWN, false)).isNull();
    }

    @ParameterizedTest
    @ValueSource(strings = { "Ongoing", "Empty", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort" })
    void anotherEpochOrProducerProvesNothing(String state) {
        // a later epoch: ended, timed out or fenced since; an earlier one or another id: not this producer's
        for (TransactionDescription d : new TransactionDescription[] { seen(7, 4, state, 99), seen(7, 5, state, 99),
            seen(7, 2, state, 99), seen(8, 3, state, 99), seen(8, 0, state, 99) }) {
            assertThat(LookDuringFlush.verdict(d, KNOWN, true)).as("%s", d).isNull();
        }
    }

    @Test
    void noAnswerOrNoKnownIdentityProvesNothing() {
        assertThat(LookDuringFlush.verdict(null, KNOWN, true)).isNull();
        assertThat(LookDuringFlush.verdict(seen(7, 3, "Ongoing", 1), null, true)).isNull();
    }
}
