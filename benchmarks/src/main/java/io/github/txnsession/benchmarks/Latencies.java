package io.github.txnsession.benchmarks;

import java.util.Arrays;

/**
 * Collects latencies (nanoseconds) of one thread during one repetition and answers percentiles in milliseconds.
 * Not thread-safe: give every thread its own and {@link #addAll} them afterwards.
 */
final class Latencies {

    private long[] values = new long[1024];
    private int size;

    void add(long nanos) {
        if (this.size == this.values.length) {
            this.values = Arrays.copyOf(this.values, this.size * 2);
        }
        this.values[this.size++] = nanos;
    }

    void addAll(Latencies other) {
        for (int i = 0; i < other.size; i++) {
            add(other.values[i]);
        }
    }

    int count() {
        return this.size;
    }

    /** @return the {@code p}-th percentile (0..100, nearest rank) in milliseconds; NaN when empty */
    double percentileMillis(double p) {
        if (this.size == 0) {
            return Double.NaN;
        }
        long[] sorted = Arrays.copyOf(this.values, this.size);
        Arrays.sort(sorted);
        int rank = (int) Math.ceil(p / 100.0 * sorted.length);
        return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))] / 1_000_000.0;
    }
}
