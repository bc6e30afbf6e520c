package io.github.txnsession.kafka;

import org.apache.kafka.clients.producer.PreparedTxnState;

/** A transaction's identity at the coordinator: producer id and epoch. */
record TxnIdentity(long producerId, short epoch) {

    static TxnIdentity of(PreparedTxnState state) {
        return new TxnIdentity(state.producerId(), state.epoch());
    }

    boolean matches(PreparedTxnState state) {
        return state.hasTransaction() && state.producerId() == this.producerId && state.epoch() == this.epoch;
    }

    PreparedTxnState toPreparedState() {
        return new PreparedTxnState(this.producerId + ":" + this.epoch);
    }

    @Override
    public String toString() {
        return this.producerId + ":" + this.epoch;
    }
}
