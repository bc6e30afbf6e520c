package io.github.txnsession.kafka;

import org.apache.kafka.common.KafkaException;
import org.jspecify.annotations.Nullable;

/**
 * Base of the errors a {@link TransactionSession} reports. Each subclass says what happened to the transaction and
 * what the caller must do next; the message says it too.
 */
public class TransactionSessionException extends KafkaException {

    private static final long serialVersionUID = 1L;

    /** The transactional id of the session that failed. */
    private final String transactionalId;

    /**
     * @param transactionalId the session's transactional id
     * @param message what happened and what to do
     * @param cause the underlying Kafka error, if any
     */
    public TransactionSessionException(String transactionalId, String message, @Nullable Throwable cause) {
        super("Transaction session '" + transactionalId + "': " + message, cause);
        this.transactionalId = transactionalId;
    }

    /** @return the transactional id of the session that failed */
    public String transactionalId() {
        return this.transactionalId;
    }
}
