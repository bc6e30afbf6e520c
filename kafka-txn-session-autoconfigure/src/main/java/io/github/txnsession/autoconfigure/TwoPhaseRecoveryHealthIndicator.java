package io.github.txnsession.autoconfigure;

import java.util.List;

import io.github.txnsession.spring.jdbc.LostTransaction;
import io.github.txnsession.spring.jdbc.TwoPhaseRecovery;

import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;

/**
 * DOWN while two-phase commit recovery has found lost transactions (the database committed, Kafka did not and cannot
 * any more) that the application has not yet cleared with {@link TwoPhaseRecovery#clearLost()}; details name their
 * transactional ids. UP otherwise, with the recovery counts.
 */
public class TwoPhaseRecoveryHealthIndicator implements HealthIndicator {

    private final TwoPhaseRecovery recovery;

    /** @param recovery the recovery to report on */
    public TwoPhaseRecoveryHealthIndicator(TwoPhaseRecovery recovery) {
        this.recovery = recovery;
    }

    @Override
    public Health health() {
        List<LostTransaction> lost = this.recovery.lostTransactions();
        List<LostTransaction> inDoubt = this.recovery.inDoubtTransactions();
        Health.Builder builder = lost.isEmpty() && inDoubt.isEmpty() ? Health.up() : Health.down();
        builder.withDetail("prefix", this.recovery.transactionalIdPrefix())
            .withDetail("committed", this.recovery.committedCount())
            .withDetail("alreadyCommitted", this.recovery.alreadyCommittedCount())
            .withDetail("aborted", this.recovery.abortedCount())
            .withDetail("lost", this.recovery.lostCount());
        if (!lost.isEmpty()) {
            builder.withDetail("lostTransactionalIds", lost.stream().map(LostTransaction::transactionalId).toList());
        }
        if (!inDoubt.isEmpty()) {
            builder.withDetail("inDoubtTransactionalIds",
                    inDoubt.stream().map(LostTransaction::transactionalId).toList());
        }
        return builder.build();
    }
}
