/**
 * Real, in-process KRaft Kafka clusters for tests, samples and benchmarks.
 *
 * <p>{@link io.github.txnsession.kafka.test.EmbeddedKafkaCluster} starts brokers that behave like a freshly
 * formatted production cluster (stable APIs only, the production feature levels that {@code kafka-storage format}
 * would finalize). {@link io.github.txnsession.kafka.test.KafkaClusterExtension} shares one cluster per test class.
 */
@NullMarked
package io.github.txnsession.kafka.test;

import org.jspecify.annotations.NullMarked;
