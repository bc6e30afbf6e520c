package io.github.txnsession.autoconfigure;

import java.util.concurrent.CompletableFuture;

import io.github.txnsession.kafka.ClusterGuarantees;
import io.github.txnsession.kafka.fleet.TransactionalIdFleet;
import io.github.txnsession.spring.SessionPoolSnapshot;
import io.github.txnsession.spring.SessionTransactionCounters;
import io.github.txnsession.spring.TransactionSessionPool;

import org.jspecify.annotations.Nullable;

import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;

/**
 * Health of the transaction session pool: DOWN once the pool is closed, else UP, with the pool's figures (size,
 * initialized, in use, waiting, exhausted acquires, replaced sessions) and how transactions ended (commits,
 * rollbacks, failures, fenced, lost, the last failure). Fenced and lost transactions are reported in the details
 * rather than as DOWN, because the pool replaces the session and later transactions succeed; alert on the
 * {@code fenced} and {@code lost} figures (or the matching metrics) instead. In fleet mode it lists the fleet slots
 * this instance owns, is OUT_OF_SERVICE while it owns none, and DOWN if the fleet's membership thread failed. It states the guarantee level the cluster
 * allows ({@link ClusterGuarantees}, detected once in the background at startup). It makes no network call.
 */
public class TransactionSessionHealthIndicator implements HealthIndicator {

    private final TransactionSessionPool pool;
    private final SessionTransactionCounters counters;
    private final @Nullable TransactionalIdFleet fleet;
    private volatile @Nullable CompletableFuture<ClusterGuarantees> guarantees;

    /**
     * @param pool the pool to report on
     * @param counters how transactions ended
     */
    public TransactionSessionHealthIndicator(TransactionSessionPool pool, SessionTransactionCounters counters) {
        this(pool, counters, null);
    }

    /**
     * @param pool the pool to report on
     * @param counters how transactions ended
     * @param fleet the fleet membership of a pool in fleet mode (DOWN if its membership thread failed), or null
     */
    public TransactionSessionHealthIndicator(TransactionSessionPool pool, SessionTransactionCounters counters,
            @Nullable TransactionalIdFleet fleet) {
        this.pool = pool;
        this.counters = counters;
        this.fleet = fleet;
    }

    /**
     * @param detection what the cluster allows, detected in the background at startup; shown as
     *        {@code clusterGuarantees} ("detecting" until done, "unknown" if no broker answered)
     */
    public void setClusterGuarantees(CompletableFuture<ClusterGuarantees> detection) {
        this.guarantees = detection;
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
        if (this.pool.isFleet()) {
            java.util.SortedSet<Integer> owned = this.pool.ownedFleetSlots();
            builder.withDetail("fleetSlotsOwned", owned);
            if (owned.isEmpty() && !s.closed()) {
                // no id to lend: its listeners' transactions wait and fail; let a load balancer route around it
                builder.outOfService().withDetail("fleetReason", "this instance owns no fleet slot (starting, "
                        + "rebalancing, or more instances than kafka.txn-session.fleet.slots)");
            }
            TransactionalIdFleet fleet = this.fleet;
            if (fleet != null) {
                builder.withDetail("fleetGroup", fleet.groupId()).withDetail("fleetSlots", fleet.slots());
                Throwable failure = fleet.failure();
                if (failure != null) {
                    builder.down().withDetail("fleetFailure", failure.toString());
                }
            }
        }
        CompletableFuture<ClusterGuarantees> detected = this.guarantees;
        if (detected != null) {
            if (!detected.isDone()) {
                builder.withDetail("clusterGuarantees", "detecting");
            }
            else if (detected.isCompletedExceptionally()) {
                builder.withDetail("clusterGuarantees", "unknown (no broker answered at startup)");
            }
            else {
                ClusterGuarantees g = detected.join();
                builder.withDetail("clusterGuarantees", g.summary()).withDetail("transactionVersion",
                        g.transactionVersion());
            }
        }
        SessionTransactionCounters.Failure last = this.counters.lastFailure();
        if (last != null) {
            builder.withDetail("lastFailure", last.transactionalId() + " at " + last.at() + ": " + last.message());
        }
        return builder.build();
    }
}
