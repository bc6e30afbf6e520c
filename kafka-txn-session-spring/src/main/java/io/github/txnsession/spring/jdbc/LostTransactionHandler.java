package io.github.txnsession.spring.jdbc;

import java.util.List;

/**
 * Called by {@link TwoPhaseRecovery} with the transactions it found lost, so the application can compensate. When
 * the handler returns normally their decision rows are cleared; when it throws, the rows stay and the next recovery
 * reports them again.
 */
@FunctionalInterface
public interface LostTransactionHandler {

    /**
     * @param lost the lost transactions of one recovery run (never empty)
     */
    void onLost(List<LostTransaction> lost);
}
