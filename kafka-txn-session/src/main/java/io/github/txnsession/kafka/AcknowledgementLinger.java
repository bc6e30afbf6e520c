package io.github.txnsession.kafka;

import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Bounds how long the acknowledgements of a committed share-group transaction wait for the consumer's next poll.
 * A bound share consumer hands them to the wrapped consumer after the commit without a request of their own, so that
 * they ride on the next poll's fetch (one broker round trip per transaction less); if no poll has taken them along
 * after {@link #DELAY_MS} ms (the application stopped polling, or does other work first), a check sends them in a
 * request of their own. One daemon thread serves every consumer of the JVM (it ends after 30 s without checks); a
 * check only takes a consumer's lock if it is free (a check that finds it taken runs again after the same delay,
 * unless a poll or commit holding it has taken the acknowledgements along).
 *
 * <p>Not guaranteed: a bound on when they reach the broker. The delay is a lower bound (the thread must get a core);
 * a check that finds the consumer busy waits another delay, and one held by a long call (such as
 * {@code clientInstanceId} with a long timeout) waits as long; and the Kafka client itself holds acknowledgements
 * back while a fetch to the same broker is in flight (up to {@code fetch.max.wait.ms}), as it always did. What the
 * check does guarantee: acknowledgements handed over after a commit are not left waiting for a poll that never
 * comes.
 */
final class AcknowledgementLinger {

    /** how long the acknowledgements of a committed transaction wait for the next poll, at least */
    static final long DELAY_MS = 10;

    /** {@link #DELAY_MS}, unless a test needs the checks out of the way */
    private static volatile long delayMs = DELAY_MS;

    private static final Logger log = LoggerFactory.getLogger(AcknowledgementLinger.class);

    private AcknowledgementLinger() {
    }

    /** @param check runs after {@link #DELAY_MS}; returns whether to run it again after the same delay */
    static void schedule(BooleanSupplier check) {
        Holder.TIMER.schedule(() -> {
            try {
                if (check.getAsBoolean()) {
                    schedule(check);
                }
            }
            catch (Throwable ex) { // (the executor would drop it silently)
                log.error("A check for the acknowledgements of a committed share-group transaction failed; the "
                        + "consumer's next poll, commit or close sends them", ex);
            }
        }, delayMs, TimeUnit.MILLISECONDS);
    }

    /**
     * For tests: delays the checks scheduled from now on by {@code ms} instead of {@link #DELAY_MS}, so that a test
     * can see what happens without them.
     */
    static void delayChecksForTests(long ms) {
        delayMs = ms;
    }

    /** For tests: drops the checks not run yet and goes back to {@link #DELAY_MS}. */
    static void resetForTests() {
        delayMs = DELAY_MS; // (first: a check running now reschedules itself with the usual delay)
        Holder.TIMER.getQueue().clear();
    }

    private static final class Holder {
        static final ScheduledThreadPoolExecutor TIMER = timer();

        private static ScheduledThreadPoolExecutor timer() {
            ScheduledThreadPoolExecutor timer = new ScheduledThreadPoolExecutor(1, r -> {
                Thread t = new Thread(r, "txn-session-share-acks");
                t.setDaemon(true);
                return t;
            });
            // no thread while no consumer commits (nothing holds a class loader that is being let go)
            timer.setKeepAliveTime(30, TimeUnit.SECONDS);
            timer.allowCoreThreadTimeOut(true);
            return timer;
        }
    }
}
