package io.github.txnsession.autoconfigure;

import java.time.Duration;
import java.util.function.Supplier;

import io.github.txnsession.kafka.SessionFencedException;
import io.github.txnsession.kafka.SessionListener;
import io.github.txnsession.kafka.TransactionLostException;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.TransactionSessionException;
import io.github.txnsession.spring.SessionTransactionObserver;
import io.github.txnsession.spring.TransactionSessionPool;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.binder.MeterBinder;
import org.jspecify.annotations.Nullable;

/**
 * Micrometer meters of the session pool and its transactions, tagged with the transactional id prefix:
 * <ul>
 * <li>{@code kafka.txn.session.transactions} (counter, tag {@code outcome} = committed, rolled_back, failed);</li>
 * <li>{@code kafka.txn.session.failures} (counter, tag {@code reason} = fenced, lost, other);</li>
 * <li>{@code kafka.txn.session.commit} (timer: the commit call) and {@code kafka.txn.session.duration} (timer: begin
 * to end, tag {@code outcome});</li>
 * <li>{@code kafka.txn.session.pool.size}, {@code .pool.initialized}, {@code .pool.in.use}, {@code .pool.waiting}
 * (gauges) and {@code kafka.txn.session.pool.exhausted} (counter).</li>
 * </ul>
 * Until bound to a registry it records nothing.
 */
public class TransactionSessionMetrics implements MeterBinder, SessionTransactionObserver, SessionListener {

    private final Supplier<TransactionSessionPool> poolSupplier;
    private volatile @Nullable Meters meters;

    /**
     * @param pool supplies the pool to measure when the meters are bound (the pool itself takes this object as a
     *        listener, so it cannot be passed in directly)
     */
    public TransactionSessionMetrics(Supplier<TransactionSessionPool> pool) {
        this.poolSupplier = pool;
    }

    @Override
    public void bindTo(MeterRegistry registry) {
        TransactionSessionPool pool = this.poolSupplier.get();
        String prefix = pool.transactionalIdPrefix();
        Gauge.builder("kafka.txn.session.pool.size", pool, p -> p.snapshot().size())
            .tag("prefix", prefix).description("Maximum number of sessions").register(registry);
        Gauge.builder("kafka.txn.session.pool.initialized", pool, p -> p.snapshot().initialized())
            .tag("prefix", prefix).description("Sessions created and initialized").register(registry);
        Gauge.builder("kafka.txn.session.pool.in.use", pool, p -> p.snapshot().inUse())
            .tag("prefix", prefix).description("Sessions lent to transactions now").register(registry);
        Gauge.builder("kafka.txn.session.pool.waiting", pool, p -> p.snapshot().waiting())
            .tag("prefix", prefix).description("Threads waiting for a session").register(registry);
        FunctionCounter.builder("kafka.txn.session.pool.exhausted", pool, p -> p.snapshot().exhausted())
            .tag("prefix", prefix).description("Acquires that found the pool exhausted for the whole timeout")
            .register(registry);
        this.meters = new Meters(registry, prefix);
    }

    @Override
    public void committed(String transactionalId, Duration duration, Duration commitDuration) {
        Meters m = this.meters;
        if (m != null) {
            m.committed.increment();
            m.commit.record(commitDuration);
            m.committedDuration.record(duration);
        }
    }

    @Override
    public void rolledBack(String transactionalId, Duration duration) {
        Meters m = this.meters;
        if (m != null) {
            m.rolledBack.increment();
            m.rolledBackDuration.record(duration);
        }
    }

    @Override
    public void failed(String transactionalId, TransactionSessionException failure) {
        Meters m = this.meters;
        if (m != null) {
            m.failed.increment();
            if (failure instanceof SessionFencedException) {
                m.fenced.increment();
            }
            else if (failure instanceof TransactionLostException) {
                m.lost.increment();
            }
            else {
                m.other.increment();
            }
        }
    }

    @Override
    public void onTransactionFailed(TransactionSession session, TransactionSessionException failure) {
        failed(session.transactionalId(), failure);
    }

    private static final class Meters {

        final Counter committed;
        final Counter rolledBack;
        final Counter failed;
        final Counter fenced;
        final Counter lost;
        final Counter other;
        final Timer commit;
        final Timer committedDuration;
        final Timer rolledBackDuration;

        Meters(MeterRegistry registry, String prefix) {
            this.committed = outcome(registry, prefix, "committed");
            this.rolledBack = outcome(registry, prefix, "rolled_back");
            this.failed = outcome(registry, prefix, "failed");
            this.fenced = reason(registry, prefix, "fenced");
            this.lost = reason(registry, prefix, "lost");
            this.other = reason(registry, prefix, "other");
            this.commit = Timer.builder("kafka.txn.session.commit").tag("prefix", prefix)
                .description("Duration of the commit call").register(registry);
            this.committedDuration = duration(registry, prefix, "committed");
            this.rolledBackDuration = duration(registry, prefix, "rolled_back");
        }

        private static Counter outcome(MeterRegistry registry, String prefix, String outcome) {
            return Counter.builder("kafka.txn.session.transactions").tag("prefix", prefix).tag("outcome", outcome)
                .description("Session transactions by outcome").register(registry);
        }

        private static Counter reason(MeterRegistry registry, String prefix, String reason) {
            return Counter.builder("kafka.txn.session.failures").tag("prefix", prefix).tag("reason", reason)
                .description("Failed commits, aborts and heartbeats by reason").register(registry);
        }

        private static Timer duration(MeterRegistry registry, String prefix, String outcome) {
            return Timer.builder("kafka.txn.session.duration").tag("prefix", prefix).tag("outcome", outcome)
                .description("Session transactions from begin to end").register(registry);
        }
    }
}
