package io.github.txnsession.kafka;

import org.jspecify.annotations.Nullable;

/**
 * A session call did not finish in time. The session keeps the state it had before the call, so the same call may
 * be retried; the outcome of a timed-out commit is decided by the retry (or by the coordinator's transaction
 * timeout, which aborts).
 */
public class SessionTimeoutException extends TransactionSessionException {

    private static final long serialVersionUID = 1L;

    /** The call that timed out, e.g. {@code commitTransaction()}. */
    private final String call;

    /**
     * @param transactionalId the session's id
     * @param call the call that timed out, e.g. {@code commitTransaction()}
     * @param cause the underlying timeout
     */
    public SessionTimeoutException(String transactionalId, String call, @Nullable Throwable cause) {
        super(transactionalId, call + " timed out. Check that the brokers in bootstrap.servers are reachable and "
                + "that the transaction coordinator is available (min.insync.replicas of __transaction_state); the "
                + "wait is bounded by max.block.ms / session.coordinator.timeout.ms. The call may be retried.", cause);
        this.call = call;
    }

    /** @return the call that timed out */
    public String call() {
        return this.call;
    }
}
