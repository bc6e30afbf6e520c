package io.github.txnsession.kafka;

/**
 * {@link TransactionSession#resume} was given an identity (transactional id, producer id, epoch) that does not
 * match any transaction the coordinator knows. No transaction was touched.
 */
public class TransactionIdentityMismatchException extends TransactionSessionException {

    private static final long serialVersionUID = 1L;

    /**
     * @param transactionalId the id given
     * @param mismatch which part did not match and what the coordinator has instead
     */
    public TransactionIdentityMismatchException(String transactionalId, String mismatch) {
        super(transactionalId, "cannot resume: " + mismatch + ". No transaction was touched.", null);
    }
}
