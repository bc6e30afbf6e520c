package io.github.txnsession.kafka;

import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * Bounds how long the acknowledgements of a committed share-group transaction wait for the consumer's next poll.
 * A bound share consumer hands them to the wrapped consumer after the commit without a request of their own, so that
 * they ride on the next poll's fetch (one broker round trip per transaction less); if no poll has taken them along
 * after {@link #DELAY_MS} ms (the application stopped polling, or does other work first), a check sends them in a
 * request of their own. One daemon thread serves every consumer of the JVM; a check only takes a consumer's lock if it
 * is free (a check that finds it taken runs again after the same delay).
 *
 * <p>Not guaranteed: the delay is a lower bound on a busy machine (the thread must get a core), and a check that keeps
 * finding the consumer busy keeps waiting: each holder of the lock is a call that sends the acknowledgements itself
 * (poll, commit, close) or a short one.
 */
final class AcknowledgementLinger {

    /** how long the acknowledgements of a committed transaction wait for the next poll, at least */
    static final long DELAY_MS = 10;

    private AcknowledgementLinger() {
    }

    /** @param check runs after {@link #DELAY_MS}; returns whether to run it again after the same delay */
    static void schedule(BooleanSupplier check) {
        Holder.TIMER.schedule(() -> {
            if (check.getAsBoolean()) {
                schedule(check);
            }
        }, DELAY_MS, TimeUnit.MILLISECONDS);
    }

    private static final class Holder {
        static final ScheduledThreadPoolExecutor TIMER = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, "txn-session-share-acks");
            t.setDaemon(true);
            return t;
        });
    }
}
