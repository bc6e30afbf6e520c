/**
 * Spring Boot auto-configuration for transaction sessions ({@code kafka.txn-session.*}).
 *
 * <p>Entry points: {@link io.github.txnsession.autoconfigure.TransactionSessionAutoConfiguration} (the session pool,
 * the session-backed producer factory, the transaction-scoped {@code TransactionSession}, health and metrics),
 * {@link io.github.txnsession.autoconfigure.SessionTransactionManagerAutoConfiguration} (which transaction manager
 * runs {@code @Transactional}: the application's own, with sessions enlisted, or the session manager) and
 * {@link io.github.txnsession.autoconfigure.TwoPhaseCommitAutoConfiguration} (JDBC two-phase commit, the decision log
 * table, recovery at startup). Settings: {@link io.github.txnsession.autoconfigure.TransactionSessionProperties} and
 * {@link io.github.txnsession.autoconfigure.TwoPhaseCommitProperties}.
 */
@NullMarked
package io.github.txnsession.autoconfigure;

import org.jspecify.annotations.NullMarked;
