package io.github.txnsession.kafka;

import org.jspecify.annotations.Nullable;

/**
 * The open transaction failed and can only be aborted (for example a send failed, or a bound consumer lost a
 * partition it had consumed from). The session is in {@link SessionState#ABORTABLE_ERROR}: call
 * {@link TransactionSession#abortTransaction()}, then begin a new transaction. The session itself stays usable.
 */
public class SessionAbortableException extends TransactionSessionException {

    private static final long serialVersionUID = 1L;

    /**
     * @param transactionalId the session's id
     * @param message what failed
     * @param cause the underlying error
     */
    public SessionAbortableException(String transactionalId, String message, @Nullable Throwable cause) {
        super(transactionalId, message + " The transaction must be aborted: call abortTransaction().", cause);
    }
}
