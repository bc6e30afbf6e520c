/**
 * Side-by-side benchmarks of kafka-txn-session against the tools people use today (raw kafka-clients,
 * spring-kafka), on one embedded broker. Run {@link io.github.txnsession.benchmarks.BenchmarkMain}.
 */
@NullMarked
package io.github.txnsession.benchmarks;

import org.jspecify.annotations.NullMarked;
