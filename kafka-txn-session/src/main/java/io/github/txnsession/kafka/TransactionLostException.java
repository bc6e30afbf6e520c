package io.github.txnsession.kafka;

import org.jspecify.annotations.Nullable;

/**
 * The transaction coordinator aborted this session's transaction on its own, usually because it stayed open longer
 * than {@code transaction.timeout.ms}. Nothing the transaction wrote becomes visible. A live session is left in
 * {@link SessionState#ABORTABLE_ERROR} (abort, then go on); a resumed session in {@link SessionState#FATAL_ERROR}.
 * In a two-phase commit this is the case that needs compensation: the other resource may have committed.
 */
public class TransactionLostException extends TransactionSessionException {

    private static final long serialVersionUID = 1L;

    /**
     * @param transactionalId the session's id
     * @param detail what the coordinator reported
     * @param cause the underlying error, if any
     */
    public TransactionLostException(String transactionalId, String detail, @Nullable Throwable cause) {
        super(transactionalId, "the transaction was aborted (LOST): the coordinator timed it out "
                + "(transaction.timeout.ms), a producer with the same transactional.id fenced it, or another party "
                + "aborted it; none of its records become visible. " + detail, cause);
    }
}
