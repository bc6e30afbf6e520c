package io.github.txnsession.spring;

import io.github.txnsession.kafka.SessionProducer;

/**
 * A transactional producer over a session lent by the pool, for code that drives the transaction itself (for
 * example {@code KafkaTemplate.executeInTransaction} outside a session transaction). Its transaction methods drive
 * the session; {@link #close()} gives the session back to the pool, aborting a transaction left open.
 */
final class LeasedSessionProducer<K, V> extends DelegatingSessionProducer<K, V> {

    private final PooledSession lease;

    LeasedSessionProducer(SessionProducer<K, V> delegate, PooledSession lease) {
        super(delegate);
        this.lease = lease;
    }

    /**
     * Refuses use after {@link #close()}: the session may already be lent to another thread, whose transaction a late
     * send or abort through this producer would join.
     */
    @Override
    SessionProducer<K, V> target() {
        if (this.lease.isReleased()) {
            throw new IllegalStateException("This producer was closed and its session '"
                    + this.delegate.session().transactionalId() + "' went back to the pool; get a new producer "
                    + "from the factory");
        }
        return this.delegate;
    }

    /** Gives the session back to the pool; an open transaction is aborted. */
    @Override
    public void close() {
        this.lease.release();
    }
}
