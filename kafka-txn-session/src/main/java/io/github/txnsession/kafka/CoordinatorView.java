package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.Optional;

import io.github.txnsession.kafka.internals.CoordinatorClient;
import io.github.txnsession.kafka.internals.TransactionDescription;
import org.apache.kafka.common.protocol.Errors;

/**
 * Reads and finishes one transactional id's transactions at the coordinator, and classifies what it finds against
 * the transaction a session expects. It knows how transaction versions 1 and 2 differ: with version 2 the
 * coordinator bumps the epoch when a transaction ends, so the transaction {@code pid:E} has ended when the
 * coordinator is at {@code pid:E+1}; with version 1 the epoch stays.
 */
final class CoordinatorView implements AutoCloseable {

    /** How a transaction stands at the coordinator, seen from the session that expects it. */
    enum Standing {
        /** Open (or its commit is being written): it can still be committed or aborted. */
        OPEN,
        /** It ended in a commit. */
        COMMITTED,
        /** It ended in an abort (or is being aborted) that this session did not ask for. */
        LOST,
        /** The id moved on; the outcome of the expected transaction is unknown. */
        SUPERSEDED,
        /** A different producer took the id over while the transaction was open. */
        FENCED,
        /** Nothing was ever written in it: nothing to commit or abort. */
        EMPTY
    }

    private final String transactionalId;
    private final CoordinatorClient client;
    private final Duration timeout;

    CoordinatorView(String transactionalId, CoordinatorClient client, Duration timeout) {
        this.transactionalId = transactionalId;
        this.client = client;
        this.timeout = timeout;
    }

    Optional<TransactionDescription> describe() {
        return this.client.describe(this.transactionalId, this.timeout);
    }

    /** @return 1 when the coordinator bumps the epoch at every transaction end (transaction version 2), else 0 */
    int epochBumpPerTransaction() {
        return this.client.transactionVersion() >= 2 ? 1 : 0;
    }

    Errors end(TxnIdentity txn, boolean commit) {
        return this.client.endTransaction(this.transactionalId, txn.producerId(), txn.epoch(), commit, this.timeout);
    }

    boolean advertisesTxnHeartbeat() {
        return this.client.advertisesApi("TXN_HEARTBEAT");
    }

    /** Whether the broker advertises the named API; false without a network call if this client lacks the key. */
    boolean advertisesApi(String apiKeyName) {
        return this.client.advertisesApi(apiKeyName);
    }

    /** Classifies the coordinator's description against the expected transaction. */
    Standing standing(TxnIdentity expected, Optional<TransactionDescription> description) {
        if (description.isEmpty()) {
            return Standing.SUPERSEDED;
        }
        TransactionDescription d = description.get();
        if (d.producerId() != expected.producerId()) {
            return d.isOngoing() || d.isCommitting() ? Standing.FENCED : Standing.SUPERSEDED;
        }
        int bump = epochBumpPerTransaction();
        int delta = d.producerEpoch() - expected.epoch();
        if (delta == 0 && (d.isOngoing() || d.isCommitting())) {
            return Standing.OPEN;
        }
        if (delta == 0 && d.isEmpty()) {
            return Standing.EMPTY;
        }
        if (delta == bump && d.isCompleteCommit()) {
            return Standing.COMMITTED;
        }
        // a coordinator-side abort (timeout) fences the old epoch first, then ends the transaction
        if (delta >= 0 && delta <= bump + 1 && (d.isAborting() || d.isCompleteAbort())) {
            return Standing.LOST;
        }
        return Standing.SUPERSEDED;
    }

    String describeForMessage(Optional<TransactionDescription> description) {
        return description.map(d -> "The coordinator has " + d.producerId() + ":" + d.producerEpoch() + " in state "
                + d.state() + ".").orElse("The coordinator does not know this transactional id.");
    }

    @Override
    public void close() {
        this.client.close();
    }
}
