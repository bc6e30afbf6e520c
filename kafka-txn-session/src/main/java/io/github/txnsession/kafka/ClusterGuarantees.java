package io.github.txnsession.kafka;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;

import io.github.txnsession.kafka.internals.CoordinatorClient;

/**
 * What the cluster's brokers allow, which decides the guarantees a session can give, detected from one broker's
 * ApiVersions answer ({@link #detect}).
 *
 * <h2>What each figure changes</h2>
 * <ul>
 * <li>{@code transactionVersion} 2 (KIP-890, the default since Kafka 4.0): every transaction end bumps the epoch, so a
 * prepared transaction is named exactly and a timed-out transaction does not fence its producer. Version 1 still
 * works, with the weaker identity described in {@link TransactionSession}.</li>
 * <li>{@code shareGroups}: share consumers ({@code share.version} 1 or more) can be bound to sessions.</li>
 * <li>{@code keepPreparedTxnAdvertised}: the broker advertises InitProducerId version 6 or later, the request of
 * Kafka-native two-phase commit (KIP-939). Advertised is not usable: released brokers answer KeepPreparedTxn=true with
 * UNSUPPORTED_VERSION (measured on 4.0 to 4.4), so the library's two-phase commit keeps its own decision log and a
 * prepared transaction is still bounded by {@code transaction.timeout.ms}.</li>
 * <li>{@code transactionalShareAcks}: the broker has the {@code TXN_SHARE_ACKNOWLEDGE} API (KIP-1289, a proposal);
 * without it share acknowledgements go out after the Kafka commit, and only the outcome ledger closes the window
 * between the two.</li>
 * <li>{@code transactionHeartbeat}: the broker has a {@code TXN_HEARTBEAT} API (KIP-1309, a draft); without it a
 * heartbeat only checks a transaction, it cannot extend its timeout.</li>
 * </ul>
 *
 * <p>Not guaranteed: the answer is one broker's; brokers of a cluster being upgraded can differ, and a feature can be
 * finalized later. A {@code false} for an API this kafka-clients release does not know means "unknown to this client".
 *
 * @param transactionVersion the finalized {@code transaction.version} (0 when not finalized)
 * @param shareGroups whether {@code share.version} is finalized at 1 or more
 * @param keepPreparedTxnAdvertised whether InitProducerId version 6 or later is advertised (see above)
 * @param transactionalShareAcks whether {@code TXN_SHARE_ACKNOWLEDGE} is advertised
 * @param transactionHeartbeat whether {@code TXN_HEARTBEAT} is advertised
 */
public record ClusterGuarantees(int transactionVersion, boolean shareGroups, boolean keepPreparedTxnAdvertised,
        boolean transactionalShareAcks, boolean transactionHeartbeat) {

    /**
     * Asks one broker for its ApiVersions.
     *
     * @param clientConfigs connection settings ({@code bootstrap.servers}, security, {@code request.timeout.ms});
     *        other keys are ignored
     * @return what the broker allows
     * @throws org.apache.kafka.common.KafkaException (a timeout, say) if no broker answers within
     *         {@code request.timeout.ms}
     */
    public static ClusterGuarantees detect(Map<String, ?> clientConfigs) {
        Objects.requireNonNull(clientConfigs, "clientConfigs");
        try (CoordinatorClient client = new CoordinatorClient(clientConfigs)) {
            int tv = client.transactionVersion();
            boolean share = client.finalizedFeatureLevel("share.version") >= 1;
            boolean keepPrepared = client.maxApiVersion("INIT_PRODUCER_ID") >= 6;
            boolean txnShareAcks = client.advertisesApi("TXN_SHARE_ACKNOWLEDGE");
            boolean heartbeat = client.advertisesApi("TXN_HEARTBEAT");
            return new ClusterGuarantees(tv, share, keepPrepared, txnShareAcks, heartbeat);
        }
    }

    /**
     * @return one line saying what sessions can guarantee on this cluster, e.g. for health output and startup logs
     */
    public String summary() {
        List<String> parts = new ArrayList<>();
        parts.add(this.transactionVersion >= 2 ? "transaction version 2: exact transaction identity, timeouts do not fence"
                : "transaction version " + this.transactionVersion + ": weaker identity (pid:epoch + start time), "
                        + "a coordinator timeout fences the producer");
        parts.add(this.keepPreparedTxnAdvertised
                ? "InitProducerId v6 advertised, but two-phase commit still uses the decision log (KeepPreparedTxn "
                        + "refused by released brokers)"
                : "no Kafka-native two-phase commit: the decision log settles prepared transactions, bounded by "
                        + "transaction.timeout.ms");
        parts.add(!this.shareGroups ? "no share groups"
                : this.transactionalShareAcks ? "share acknowledgements inside transactions"
                        : "share acknowledgements after the commit (the outcome ledger closes the window)");
        parts.add(this.transactionHeartbeat ? "transaction heartbeats extend timeouts"
                : "no transaction heartbeat: timeouts cannot be extended");
        return String.join("; ", parts);
    }
}
