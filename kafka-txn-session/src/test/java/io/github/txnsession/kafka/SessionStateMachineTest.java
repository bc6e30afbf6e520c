package io.github.txnsession.kafka;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalStateException;

class SessionStateMachineTest {

    @Test
    void everyStateCanBeClosedAndClosedLeadsNowhere() {
        for (SessionState s : SessionState.values()) {
            assertThat(SessionStateMachine.isAllowed(s, SessionOperation.CLOSE)).as(s.name()).isTrue();
            if (s != SessionState.CLOSED) {
                assertThat(SessionStateMachine.canMove(s, SessionState.CLOSED)).as(s.name()).isTrue();
            }
        }
        for (SessionState s : SessionState.values()) {
            assertThat(SessionStateMachine.canMove(SessionState.CLOSED, s)).isFalse();
        }
    }

    @Test
    void onlyAnOpenTransactionAcceptsSends() {
        for (SessionState s : SessionState.values()) {
            assertThat(SessionStateMachine.isAllowed(s, SessionOperation.SEND)).as(s.name())
                .isEqualTo(s == SessionState.IN_TRANSACTION);
        }
    }

    @Test
    void fatalErrorAllowsOnlyClose() {
        assertThat(SessionStateMachine.allowed(SessionState.FATAL_ERROR)).containsExactly(SessionOperation.CLOSE);
    }

    @Test
    void illegalCallNamesStateAndAllowedCalls() {
        assertThatIllegalStateException()
            .isThrownBy(() -> SessionStateMachine.check("tx-1", SessionState.READY, SessionOperation.COMMIT))
            .withMessageContaining("'tx-1'")
            .withMessageContaining("state READY")
            .withMessageContaining("commitTransaction() is not allowed")
            .withMessageContaining("beginTransaction(), close()")
            .withMessageContaining("Call beginTransaction() first");
    }

    @Test
    void anIllegalCallIsNamedAsTheApplicationMadeIt() {
        assertThatIllegalStateException()
            .isThrownBy(() -> SessionStateMachine.check("tx-1", SessionState.READY, SessionOperation.PREPARE,
                    "prepareTransactionByEpoch()"))
            .withMessageContaining("prepareTransactionByEpoch() is not allowed")
            .withMessageContaining("Call beginTransaction() first");
    }

    @Test
    void illegalMoveIsRejected() {
        assertThatIllegalStateException()
            .isThrownBy(() -> SessionStateMachine.checkMove("tx-1", SessionState.READY, SessionState.PREPARED))
            .withMessageContaining("READY -> PREPARED");
    }
}
