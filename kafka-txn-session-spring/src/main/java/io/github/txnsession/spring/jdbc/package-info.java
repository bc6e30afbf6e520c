/**
 * Exactly-once across a JDBC {@code DataSource} and Kafka: two-phase commit with a decision log in the database,
 * and recovery of what a crash left behind.
 *
 * <p>Start with {@link io.github.txnsession.spring.jdbc.JdbcKafkaTransactionManager} and
 * {@link io.github.txnsession.spring.jdbc.TwoPhaseRecovery}.
 */
@NullMarked
package io.github.txnsession.spring.jdbc;

import org.jspecify.annotations.NullMarked;
