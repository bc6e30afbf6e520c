package io.github.txnsession.spring.jdbc;

import java.sql.SQLException;

import org.jspecify.annotations.Nullable;

/**
 * A decision {@link DecisionLog#record refused} because the transactional id's row is a fleet's fence: an owner of the
 * id failed to initialize it and no owner has initialized it since. The database transaction must roll back (its
 * Kafka transaction may still be aborted by that initialization).
 *
 * <p>What the writer should do: stop using the session of the id and have the id settled again through the fleet
 * ({@link TwoPhaseRecovery#decisionFenced}), which initializes it after confirming the slot's ownership and lifts the
 * fence. SQL state {@code 40001}, so generic retry logic treats it as a transient conflict.
 */
public final class DecisionFencedException extends SQLException {

    private static final long serialVersionUID = 1L;

    DecisionFencedException(String message, @Nullable Throwable cause) {
        super(message, "40001", cause);
    }
}
