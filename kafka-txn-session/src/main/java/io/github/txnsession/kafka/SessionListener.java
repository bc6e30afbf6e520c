package io.github.txnsession.kafka;

/**
 * Told about what the background heartbeat of a {@link TransactionSession} finds. Called on the heartbeat thread:
 * return quickly and do not call lifecycle methods of the session from here.
 */
@FunctionalInterface
public interface SessionListener {

    /**
     * The session's open transaction can no longer commit: lost (coordinator timeout) or fenced. The session has
     * already moved to the matching error state.
     *
     * @param session the session
     * @param failure a {@link TransactionLostException} or {@link SessionFencedException}
     */
    void onTransactionFailed(TransactionSession session, TransactionSessionException failure);
}
