package io.github.txnsession.autoconfigure;

import io.github.txnsession.spring.SessionPoolSnapshot;
import io.github.txnsession.spring.SessionTransactionCounters;
import io.github.txnsession.spring.TransactionSessionPool;

import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;

/**
 * Health of the transaction session pool: DOWN once the pool is closed, else UP, with the pool's figures (size,
 * initialized, in use, waiting, exhausted acquires, replaced sessions) and how transactions ended (commits,
 * rollbacks, failures, fenced, lost, the last failure). Fenced and lost transactions are reported in the details
 * rather than as DOWN, because the pool replaces the session and later transactions succeed; alert on the
 * {@code fenced} and {@code lost} figures (or the matching metrics) instead. It makes no network call.
 */
public class TransactionSessionHealthIndicator implements HealthIndicator {

    private final TransactionSessionPool pool;
    private final SessionTransactionCounters counters;

    /**
     * @param pool the pool to report on
     * @param counters how transactions ended
     */
    public TransactionSessionHealthIndicator(TransactionSessionPool pool, SessionTransactionCounters counters) {
        this.pool = pool;
        this.counters = counters;
    }

    @Override
    public Health health() {
        SessionPoolSnapshot s = this.pool.snapshot();
        Health.Builder builder = s.closed() ? Health.down() : Health.up();
        builder.withDetail("transactionalIdPrefix", this.pool.transactionalIdPrefix())
            .withDetail("poolSize", s.size())
            .withDetail("initialized", s.initialized())
            .withDetail("inUse", s.inUse())
            .withDetail("waiting", s.waiting())
            .withDetail("exhaustedAcquires", s.exhausted())
            .withDetail("replacedSessions", s.replaced())
            .withDetail("commits", this.counters.commits())
            .withDetail("rollbacks", this.counters.rollbacks())
            .withDetail("failures", this.counters.failures())
            .withDetail("fenced", this.counters.fenced())
            .withDetail("lost", this.counters.lost());
        SessionTransactionCounters.Failure last = this.counters.lastFailure();
        if (last != null) {
            builder.withDetail("lastFailure", last.transactionalId() + " at " + last.at() + ": " + last.message());
        }
        return builder.build();
    }
}
