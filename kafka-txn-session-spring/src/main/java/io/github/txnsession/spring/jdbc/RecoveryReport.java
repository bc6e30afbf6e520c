package io.github.txnsession.spring.jdbc;

import java.util.List;

/**
 * What one run of {@link TwoPhaseRecovery#recover()} found and did.
 *
 * @param committed transactional ids whose prepared Kafka transaction recovery committed
 * @param alreadyCommitted ids whose Kafka transaction had already been committed (row cleared)
 * @param aborted ids without a decision whose open Kafka transaction recovery aborted
 * @param lost decisions whose Kafka transaction was certainly aborted (compensated by the handler)
 * @param failed ids recovery could not settle this time (e.g. the coordinator was unreachable); rows kept
 * @param inDoubt decisions whose Kafka outcome is unknown (the id moved on); rows kept, never compensated
 */
public record RecoveryReport(List<String> committed, List<String> alreadyCommitted, List<String> aborted,
        List<LostTransaction> lost, List<String> failed, List<LostTransaction> inDoubt) {

    /** @return whether recovery found nothing to do */
    public boolean isEmpty() {
        return this.committed.isEmpty() && this.alreadyCommitted.isEmpty() && this.aborted.isEmpty()
                && this.lost.isEmpty() && this.failed.isEmpty() && this.inDoubt.isEmpty();
    }
}
