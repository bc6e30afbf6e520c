package io.github.txnsession.spring;

import java.util.concurrent.atomic.AtomicBoolean;

import io.github.txnsession.kafka.TransactionSession;

/**
 * A session lent by a {@link TransactionSessionPool} to one thread. The holder uses {@link #session()} exclusively
 * until {@link #release()}; the pool hands the same session to nobody else meanwhile.
 *
 * <p>Release exactly once, in a {@code finally}: a second release is ignored. Releasing a session whose transaction
 * is still open aborts that transaction first.
 */
public final class PooledSession {

    private final TransactionSessionPool pool;
    private final TransactionSession session;
    private final int index;
    private final AtomicBoolean released = new AtomicBoolean();

    PooledSession(TransactionSessionPool pool, TransactionSession session, int index) {
        this.pool = pool;
        this.session = session;
        this.index = index;
    }

    /** @return the initialized session, for the holder's exclusive use until {@link #release()} */
    public TransactionSession session() {
        return this.session;
    }

    /** @return the slot index; the session's transactional id is the pool's prefix followed by it */
    public int index() {
        return this.index;
    }

    /** Gives the session back to the pool (aborting an open transaction first). Idempotent. */
    public void release() {
        if (this.released.compareAndSet(false, true)) {
            this.pool.release(this);
        }
    }

    /**
     * Gives the session back with its slot in doubt: the session is closed without ending its transaction, and its
     * transactional id is settled from the decision log (the pool's in-doubt resolver) before it is used again. For a
     * two-phase commit whose decision row could not be cleared, or whose outcome is unknown. Idempotent with
     * {@link #release()}.
     */
    public void releaseInDoubt() {
        if (this.released.compareAndSet(false, true)) {
            this.pool.releaseInDoubt(this);
        }
    }

    /** @return whether {@link #release()} was called */
    public boolean isReleased() {
        return this.released.get();
    }

    @Override
    public String toString() {
        return "PooledSession[" + this.session.transactionalId() + (isReleased() ? ", released" : "") + "]";
    }
}
