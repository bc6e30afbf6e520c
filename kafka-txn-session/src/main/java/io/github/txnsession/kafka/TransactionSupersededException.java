package io.github.txnsession.kafka;

/**
 * The transactional id has moved on past the transaction a session was asked to finish (a newer transaction or a
 * new producer took its place), and the coordinator no longer remembers how that transaction ended. Its outcome is
 * unknown and is not guessed. The session is in {@link SessionState#FATAL_ERROR}.
 */
public class TransactionSupersededException extends TransactionSessionException {

    private static final long serialVersionUID = 1L;

    /**
     * @param transactionalId the session's id
     * @param detail what the coordinator reported
     */
    public TransactionSupersededException(String transactionalId, String detail) {
        super(transactionalId, "the outcome of the requested transaction is UNKNOWN: the transactional id moved on "
                + "(a later transaction, a re-initialized or expired id) and the coordinator no longer says how it "
                + "ended. Keep the decision and check the data: nothing was committed or aborted by this call. "
                + detail, null);
    }
}
