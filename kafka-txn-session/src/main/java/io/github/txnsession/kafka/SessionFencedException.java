package io.github.txnsession.kafka;

import org.jspecify.annotations.Nullable;

/**
 * Another session (or producer) with the same {@code transactional.id} took over, so this session's transaction
 * will never commit. The session is in {@link SessionState#FATAL_ERROR}: close it. Nothing it sent in the open
 * transaction becomes visible to {@code read_committed} readers.
 *
 * <p>One exception: fenced during {@code commitTransaction()}, the commit may have landed before the fence (the
 * coordinator completes a commit it had begun before it lets the new producer in, and a retried EndTxn then finds
 * itself fenced). Bound participants are then told the outcome is unknown: consumers re-read their group's committed
 * offsets, share consumers release their records (an outcome ledger recognises them when they come back).
 */
public class SessionFencedException extends TransactionSessionException {

    private static final long serialVersionUID = 1L;

    /**
     * @param transactionalId the fenced session's id
     * @param call the call that found out
     * @param cause the broker's error
     */
    public SessionFencedException(String transactionalId, String call, @Nullable Throwable cause) {
        super(transactionalId, call + " failed: the session was fenced by a newer session or producer with the same "
                + "transactional.id. Its open transaction is aborted; close this session. If this was unexpected, "
                + "check that no two processes use the same transactional.id.", cause);
    }
}
