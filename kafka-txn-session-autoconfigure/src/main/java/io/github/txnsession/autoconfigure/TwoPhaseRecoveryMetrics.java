package io.github.txnsession.autoconfigure;

import java.util.function.ToLongFunction;

import io.github.txnsession.spring.jdbc.TwoPhaseRecovery;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.MeterBinder;

/**
 * Micrometer meters of two-phase commit recovery: {@code kafka.txn.session.recovery} (function counters, tag
 * {@code outcome} = committed, already_committed, aborted, lost), read from the {@link TwoPhaseRecovery} totals. A
 * {@link MeterBinder} bean: Spring Boot's metrics support binds it to the application's meter registry.
 */
public class TwoPhaseRecoveryMetrics implements MeterBinder {

    private final TwoPhaseRecovery recovery;

    /** @param recovery the recovery whose totals to publish */
    public TwoPhaseRecoveryMetrics(TwoPhaseRecovery recovery) {
        this.recovery = recovery;
    }

    @Override
    public void bindTo(MeterRegistry registry) {
        counter(registry, "committed", TwoPhaseRecovery::committedCount);
        counter(registry, "already_committed", TwoPhaseRecovery::alreadyCommittedCount);
        counter(registry, "aborted", TwoPhaseRecovery::abortedCount);
        counter(registry, "lost", TwoPhaseRecovery::lostCount);
    }

    private void counter(MeterRegistry registry, String outcome, ToLongFunction<TwoPhaseRecovery> value) {
        FunctionCounter.builder("kafka.txn.session.recovery", this.recovery, r -> value.applyAsLong(r))
            .description("Transactions settled by two-phase commit recovery, by outcome")
            .tag("outcome", outcome)
            .register(registry);
    }
}
