package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.Optional;

import io.github.txnsession.kafka.internals.CoordinatorClient;
import io.github.txnsession.kafka.internals.TransactionDescription;
import org.apache.kafka.common.protocol.Errors;
import org.jspecify.annotations.Nullable;

/**
 * One transactional id as its transaction coordinator sees it: describe it, end one of its transactions, and
 * classify a description against a prepared transaction ({@link TransactionStanding}). A thin, session-facing view
 * over the internal {@link CoordinatorClient}; every call is bounded by the session's coordinator timeout.
 */
final class CoordinatorView implements AutoCloseable {

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

    /**
     * A describe sent without waiting for its answer (see {@link CoordinatorClient#startDescribe}), bounded by the
     * view's timeout; null when it cannot be sent at once.
     */
    CoordinatorClient.@Nullable DescribeInFlight startDescribe() {
        return this.client.startDescribe(this.transactionalId, this.timeout);
    }

    /** A describe bounded by {@code limit} when that is shorter than the view's timeout. */
    Optional<TransactionDescription> describe(Duration limit) {
        return this.client.describe(this.transactionalId, limit.compareTo(this.timeout) < 0 ? limit : this.timeout);
    }

    /** @return whether the coordinator bumps the epoch at every transaction end (transaction version 2) */
    boolean transactionVersion2() {
        return this.client.transactionVersion() >= 2;
    }

    /**
     * @param limit how long the call may take at most (the view's timeout when that is shorter)
     * @return the coordinator's {@code add.partitions.to.txn.retry.backoff.ms}, or -1 when it cannot be read (no
     *         permission, an unparsable value)
     */
    long addPartitionsRetryBackoffMs(Duration limit) {
        return this.client.coordinatorBrokerConfig(this.transactionalId, "add.partitions.to.txn.retry.backoff.ms",
                limit.compareTo(this.timeout) < 0 ? limit : this.timeout).map(v -> {
                    try {
                        return Long.parseLong(v.trim());
                    }
                    catch (NumberFormatException ex) {
                        return -1L;
                    }
                }).orElse(-1L);
    }

    /** @return the coordinator timeout every call of this view is bounded by */
    Duration timeout() {
        return this.timeout;
    }

    Errors end(PreparedTransaction txn, boolean commit) {
        return this.client.endTransaction(this.transactionalId, txn.producerId(), txn.epoch(), commit, this.timeout);
    }

    /** Classifies a description against {@code expected} (not empty). */
    TransactionStanding standing(PreparedTransaction expected, Optional<TransactionDescription> description) {
        return TransactionStanding.classify(expected, description, transactionVersion2());
    }

    /** Whether the broker advertises the named API; false without a network call if this client lacks the key. */
    boolean advertisesApi(String apiKeyName) {
        return this.client.advertisesApi(apiKeyName);
    }

    static String describeForMessage(Optional<TransactionDescription> description) {
        return description.map(d -> "The coordinator has " + d.producerId() + ":" + d.producerEpoch() + " in state "
                + d.state() + (d.startTimeMs() >= 0 ? " (transaction started at " + d.startTimeMs() + ")" : "")
                + ".").orElse("The coordinator does not know this transactional id.");
    }

    @Override
    public void close() {
        this.client.close();
    }
}
