package io.github.txnsession.spring.jdbc;

import java.sql.SQLException;

/** The decision log could not be read or written; the message says which operation, the cause says why. */
public class DecisionLogException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    /**
     * @param message what could not be done
     * @param cause the database error
     */
    public DecisionLogException(String message, SQLException cause) {
        super(message + ": " + cause.getMessage(), cause);
    }

    /**
     * @param message what is wrong with the log and what to do
     */
    public DecisionLogException(String message) {
        super(message);
    }
}
