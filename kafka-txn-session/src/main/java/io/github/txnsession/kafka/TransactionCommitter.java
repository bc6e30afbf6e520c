package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.Map;
import java.util.Objects;

import io.github.txnsession.kafka.internals.CoordinatorClient;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.TimeoutException;
import org.jspecify.annotations.Nullable;

/**
 * A long-lived committer of prepared transactions, for the external-commit shape of Flink's and Connect's committers:
 * one object completes many transactions of many transactional ids, with {@link TransactionSession#resume resume}'s
 * rules, while it keeps its connections, the cluster's transaction version and every id's coordinator between calls.
 *
 * <pre>{@code
 * try (TransactionCommitter committer = TransactionCommitter.create(Map.of("bootstrap.servers", "kafka:9092"))) {
 *     for (Decision d : decisions) {
 *         committer.commit(d.transactionalId(), PreparedTransaction.parse(d.identity()));
 *     }
 * }
 * }</pre>
 *
 * <h2>What a call costs</h2>
 * A transactional id's coordinator is looked up (FindCoordinator) on its first call and again only after the
 * coordinator moved; connections and the cluster's API versions are set up once. A call is then two round trips to
 * that coordinator: DescribeTransactions, which tells whether the identity still names the open transaction, then
 * EndTxn if it does. The look is not skipped: EndTxn alone applies to whatever transaction is open at that producer
 * id and epoch, and whether the epoch names one transaction depends on the transaction version the <em>preparing</em>
 * client used, which the committer cannot know (see {@link PreparedTransaction} on why it carries a start time).
 *
 * <h2>Guarantees</h2>
 * The outcomes and exceptions of commitTransaction() and abortTransaction() on a
 * {@link TransactionSession#resume resumed session}, for the same identity: COMMITTED / ALREADY_COMMITTED
 * only when the coordinator committed, or decided to commit, that very transaction; {@link TransactionLostException}
 * only when it certainly aborted it; {@link TransactionSupersededException} when the id moved on and the outcome can
 * no longer be read; EMPTY for an empty transaction. Calls are thread-safe; their requests are serialized on one
 * connection pool (this is a control-plane client). It remembers the coordinators of the last 10,000 transactional
 * ids it saw, so a committer that sees a new id per checkpoint stays bounded.
 *
 * <p>Not guaranteed: that a transaction is still open when it is committed (a prepared transaction still times out
 * after its {@code transaction.timeout.ms}); throughput beyond one call at a time.
 */
public final class TransactionCommitter implements AutoCloseable {

    private final CoordinatorClient client;
    private final Duration timeout;
    private volatile boolean closed;

    private TransactionCommitter(CoordinatorClient client, Duration timeout) {
        this.client = client;
        this.timeout = timeout;
    }

    /**
     * Creates a committer. It connects on its first call.
     *
     * @param configs client configs: {@code bootstrap.servers} (required) and security settings; optionally
     *        {@link TransactionSessionConfig#COORDINATOR_TIMEOUT_MS} (default {@code max.block.ms}, 60000), the
     *        deadline of one call, retries included
     * @return the committer; close it when done
     * @throws InvalidSessionConfigException naming the key at fault
     */
    public static TransactionCommitter create(Map<String, ?> configs) {
        Objects.requireNonNull(configs, "configs");
        TransactionSessionConfig config = TransactionSessionConfig.forResume("transaction-committer", configs);
        return new TransactionCommitter(new CoordinatorClient(config.clientConfigs()), config.coordinatorTimeout());
    }

    /**
     * Commits the prepared transaction {@code prepared} of {@code transactionalId}.
     *
     * @param transactionalId the transactional id the transaction was prepared on; not blank
     * @param prepared the identity {@link TransactionSession#prepareTransaction()} handed out
     * @return COMMITTED, ALREADY_COMMITTED, or EMPTY for an empty transaction
     * @throws TransactionLostException if the coordinator aborted it (a timeout, a fencing producer)
     * @throws TransactionSupersededException if the id moved on and the outcome is no longer known
     * @throws SessionFencedException if another producer holds the id with an open transaction (legacy identities)
     * @throws SessionTimeoutException if the coordinator did not answer in time: the outcome is not known, call again
     * @throws TransactionSessionException for any other failure (authorization, a closed committer): the outcome is
     *         not known
     */
    public CompletionOutcome commit(String transactionalId, PreparedTransaction prepared) {
        return complete(transactionalId, prepared, true);
    }

    /**
     * Aborts the prepared transaction {@code prepared} of {@code transactionalId}.
     *
     * @param transactionalId the transactional id the transaction was prepared on; not blank
     * @param prepared the identity {@link TransactionSession#prepareTransaction()} handed out
     * @return ABORTED, or EMPTY for an empty transaction
     * @throws TransactionSessionException if it is already committed, or its commit is decided
     * @throws TransactionSupersededException if the id moved on and the outcome is no longer known
     * @throws SessionTimeoutException if the coordinator did not answer in time: the outcome is not known, call again
     * @throws TransactionSessionException for any other failure (authorization, a closed committer): the outcome is
     *         not known
     */
    public CompletionOutcome abort(String transactionalId, PreparedTransaction prepared) {
        return complete(transactionalId, prepared, false);
    }

    private CompletionOutcome complete(String transactionalId, PreparedTransaction prepared, boolean commit) {
        ResumedCompletion completion = completion(transactionalId, prepared);
        try {
            return commit ? completion.commit(prepared) : completion.abort(prepared);
        }
        catch (RuntimeException ex) {
            throw translated(transactionalId, commit ? "commit" : "abort", prepared, ex);
        }
    }

    /** The exceptions of a resumed session: timeouts as SessionTimeoutException, the rest as session exceptions. */
    private static RuntimeException translated(String transactionalId, String call, PreparedTransaction prepared,
            RuntimeException ex) {
        if (ex instanceof TransactionSessionException || ex instanceof InterruptException) {
            return ex;
        }
        if (ex instanceof TimeoutException) {
            return new SessionTimeoutException(transactionalId, "TransactionCommitter." + call + "()", ex);
        }
        return new TransactionSessionException(transactionalId, call + " of prepared transaction " + prepared
                + " failed: " + ex + ". Its outcome is not known: complete it again (a retry is safe).", ex);
    }

    private ResumedCompletion completion(@Nullable String transactionalId, @Nullable PreparedTransaction prepared) {
        Objects.requireNonNull(transactionalId, "transactionalId");
        Objects.requireNonNull(prepared, "prepared");
        if (transactionalId.isBlank()) {
            throw new IllegalArgumentException("transactionalId must not be blank: pass the id the transaction was "
                    + "prepared on");
        }
        if (this.closed) {
            throw new IllegalStateException("This TransactionCommitter is closed; create a new one");
        }
        return new ResumedCompletion(transactionalId, new CoordinatorView(transactionalId, this.client, this.timeout));
    }

    /**
     * Closes the connections, after the request in flight (if any) has its answer. A call in progress then fails with
     * a {@link TransactionSessionException} at its next request (its outcome is not known: complete it again with a
     * new committer); later calls throw {@link IllegalStateException}.
     */
    @Override
    public void close() {
        this.closed = true;
        this.client.close();
    }

    @Override
    public String toString() {
        return "TransactionCommitter[" + (this.closed ? "closed" : "open") + "]";
    }
}
