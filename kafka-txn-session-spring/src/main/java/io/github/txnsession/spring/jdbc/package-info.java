/**
 * Exactly-once across a JDBC {@code DataSource} and Kafka: two-phase commit with a decision log in the database,
 * and recovery of what a crash left behind.
 *
 * <p>Start with {@link io.github.txnsession.spring.jdbc.JdbcTwoPhaseDecision} (sessions enlisted in the application's
 * own transaction manager write their decision through it), or
 * {@link io.github.txnsession.spring.jdbc.JdbcKafkaTransactionManager} (a manager of its own, for applications
 * without one), and {@link io.github.txnsession.spring.jdbc.TwoPhaseRecovery}. The table:
 * {@link io.github.txnsession.spring.jdbc.DecisionLog}.
 */
@NullMarked
package io.github.txnsession.spring.jdbc;

import org.jspecify.annotations.NullMarked;
