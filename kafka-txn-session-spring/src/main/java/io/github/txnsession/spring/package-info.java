/**
 * Spring integration of transaction sessions: a bounded {@link io.github.txnsession.spring.TransactionSessionPool},
 * the {@link io.github.txnsession.spring.SessionTransactionManager} that runs Spring transactions on its sessions, a
 * {@link io.github.txnsession.spring.SessionProducerFactory} through which unchanged {@code KafkaTemplate} code and
 * listener containers write into the current session, and the session of the current transaction as a bean:
 * {@link io.github.txnsession.spring.TransactionSessionProxy}, a transaction-scoped {@code TransactionSession}, and
 * {@link io.github.txnsession.spring.CurrentTransactionSession}, an accessor that also hands out the session itself.
 *
 * <p>With a transaction manager of the application's own (JDBC, JPA), sessions are enlisted in its transactions:
 * {@link io.github.txnsession.spring.SessionEnlistment}, with {@link io.github.txnsession.spring.SessionCommitPoint}
 * added to the manager so that sessions prepare after every {@code beforeCommit} callback.
 */
@NullMarked
package io.github.txnsession.spring;

import org.jspecify.annotations.NullMarked;
