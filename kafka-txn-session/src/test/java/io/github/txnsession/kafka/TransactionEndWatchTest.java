package io.github.txnsession.kafka;

import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The windows in which a first write looks for the previous end (no broker: what matters is which write looks).
 * Timing-safe on a loaded machine: a "looks" check only counts when it provably ran inside the window (else it is
 * tried again), and a "does not look" check runs only once the window has provably passed.
 */
class TransactionEndWatchTest {

    private static final int ATTEMPTS = 1_000;

    @Test
    void theWindowsAreOneMillisecondForRecordsAndTwoForOffsets() {
        // measured (docs/performance.md): an end older than 1 ms was unfinished at most 0.5% of the time, and a look
        // pays above about 1%; a refused TxnOffsetCommit is retried only after retry.backoff.ms (100 ms by default)
        assertThat(TransactionEndWatch.RECENT_NANOS).isEqualTo(TimeUnit.MILLISECONDS.toNanos(1));
        assertThat(TransactionEndWatch.RECENT_OFFSETS_NANOS).isEqualTo(TimeUnit.MILLISECONDS.toNanos(2));
    }

    @Test
    void aFirstWriteRightAfterTheEndLooksWhetherItWritesRecordsOrOffsets() {
        assertLooksWithin(false, TransactionEndWatch.RECENT_NANOS);
        assertLooksWithin(true, TransactionEndWatch.RECENT_OFFSETS_NANOS);
    }

    @Test
    void pastTheRecordsWindowOnlyAFirstWriteOfOffsetsStillLooks() {
        int counted = 0;
        for (int i = 0; i < ATTEMPTS && counted == 0; i++) {
            long before = System.nanoTime();
            TransactionEndWatch watch = new TransactionEndWatch();
            long created = System.nanoTime();
            spinUntil(created + TransactionEndWatch.RECENT_NANOS);
            boolean records = watch.isPending(false);
            boolean offsets = watch.isPending(true);
            long after = System.nanoTime();
            assertThat(records).as("records, %d ns after the end", after - created).isFalse();
            if (after - before < TransactionEndWatch.RECENT_OFFSETS_NANOS) {
                assertThat(offsets).as("offsets, at most %d ns after the end", after - before).isTrue();
                counted++;
            }
        }
        assertThat(counted).as("checks that ran inside the offsets' window").isPositive();
    }

    @Test
    void pastBothWindowsNoFirstWriteLooks() {
        TransactionEndWatch watch = new TransactionEndWatch();
        spinUntil(System.nanoTime() + TransactionEndWatch.RECENT_OFFSETS_NANOS);
        assertThat(watch.isPending(false)).isFalse();
        assertThat(watch.isPending(true)).isFalse();
        assertThat(watch.isPending()).isFalse();
    }

    private static void assertLooksWithin(boolean offsets, long window) {
        int counted = 0;
        for (int i = 0; i < ATTEMPTS && counted == 0; i++) {
            long before = System.nanoTime();
            TransactionEndWatch watch = new TransactionEndWatch();
            boolean pending = watch.isPending(offsets);
            long after = System.nanoTime();
            if (after - before < window) {
                assertThat(pending).as("offsets=%s, at most %d ns after the end", offsets, after - before).isTrue();
                counted++;
            }
        }
        assertThat(counted).as("checks that ran inside the window").isPositive();
    }

    private static void spinUntil(long nanoTime) {
        while (System.nanoTime() - nanoTime < 0) {
            Thread.onSpinWait();
        }
    }
}
