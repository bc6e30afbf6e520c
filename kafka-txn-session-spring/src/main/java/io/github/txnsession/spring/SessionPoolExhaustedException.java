package io.github.txnsession.spring;

import org.springframework.transaction.CannotCreateTransactionException;

/**
 * Every session of a {@link TransactionSessionPool} stayed in use for the whole acquire timeout, so no transaction
 * could start. The message names the pool's size, the timeout and the properties that change them.
 */
public class SessionPoolExhaustedException extends CannotCreateTransactionException {

    private static final long serialVersionUID = 1L;

    /**
     * @param message what was exhausted and what to do
     */
    public SessionPoolExhaustedException(String message) {
        super(message);
    }
}
