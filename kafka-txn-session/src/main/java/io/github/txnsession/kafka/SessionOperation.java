package io.github.txnsession.kafka;

/**
 * The calls a {@link TransactionSession} accepts. Which call is legal in which state is in
 * {@link SessionStateMachine}.
 */
public enum SessionOperation {

    /** {@link TransactionSession#initialize()}. */
    INITIALIZE("initialize()"),
    /** {@link TransactionSession#beginTransaction()}. */
    BEGIN("beginTransaction()"),
    /** Sending a record through a bound producer. */
    SEND("send()"),
    /** {@link TransactionSession#sendOffsetsToTransaction}, and the offsets of bound consumers. */
    SEND_OFFSETS("sendOffsetsToTransaction()"),
    /** {@link TransactionSession#prepareTransaction()}. */
    PREPARE("prepareTransaction()"),
    /** {@link TransactionSession#commitTransaction()}. */
    COMMIT("commitTransaction()"),
    /** {@link TransactionSession#abortTransaction()}. */
    ABORT("abortTransaction()"),
    /** {@link TransactionSession#completeTransaction}. */
    COMPLETE("completeTransaction()"),
    /** {@link TransactionSession#heartbeat()}. */
    HEARTBEAT("heartbeat()"),
    /** {@link TransactionSession#close()}. */
    CLOSE("close()");

    private final String call;

    SessionOperation(String call) {
        this.call = call;
    }

    /** @return the call as a user writes it, for messages */
    public String call() {
        return this.call;
    }
}
