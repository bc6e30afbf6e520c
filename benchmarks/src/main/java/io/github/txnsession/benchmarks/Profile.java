package io.github.txnsession.benchmarks;

import java.time.Duration;

/**
 * How much to measure: warm-up and measured repetitions, and the size of each scenario's run.
 *
 * @param name profile name
 * @param warmups unrecorded repetitions per competitor before the measured ones
 * @param repetitions measured repetitions per competitor (at least 5)
 * @param p1Run length of one timed P1 run
 * @param p2Records records per P2 run
 * @param p3Commits external commits per P3 run
 * @param p4Run length of one timed P4 run
 * @param p5Records records per P5 run
 * @param brokerWarmup transactional load before the first measurement, so that the broker's code is compiled
 */
record Profile(String name, int warmups, int repetitions, Duration p1Run, int p2Records, int p3Commits,
        Duration p4Run, int p5Records, Duration brokerWarmup) {

    static Profile of(String name) {
        return switch (name) {
            case "quick" -> new Profile("quick", 1, 5, Duration.ofMillis(1500), 10_000, 15, Duration.ofMillis(1500),
                    10_000, Duration.ofSeconds(24));
            // P5 full: 50,000 records, a quarter to half a second per run (10,000 took about a tenth of one)
            case "full" -> new Profile("full", 2, 10, Duration.ofSeconds(5), 50_000, 40, Duration.ofSeconds(5),
                    50_000, Duration.ofSeconds(60));
            default -> throw new IllegalArgumentException("Unknown profile '" + name + "': use quick or full");
        };
    }
}
