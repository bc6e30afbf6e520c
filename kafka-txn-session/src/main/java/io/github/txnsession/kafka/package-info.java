/**
 * Transaction sessions for Apache Kafka: the transaction lifecycle (identity, begin, commit, abort, prepare,
 * complete) as a first-class, thread-safe {@link io.github.txnsession.kafka.TransactionSession} that producers,
 * consumers and external coordinators bind to, after the proposal KIP-1310 "General Transaction Session".
 *
 * <p>Start with {@link io.github.txnsession.kafka.TransactionSession} ({@code open} a live session,
 * {@code resume} one to finish a prepared transaction from another process) and
 * {@link io.github.txnsession.kafka.SessionProducer}. Bind consumers with
 * {@link io.github.txnsession.kafka.TransactionalConsumer} (offsets) and
 * {@link io.github.txnsession.kafka.TransactionalShareConsumer} (acknowledgements). A prepared transaction is named
 * by {@link io.github.txnsession.kafka.PreparedTransaction}; completing it reports a
 * {@link io.github.txnsession.kafka.CompletionOutcome}. Settings:
 * {@link io.github.txnsession.kafka.TransactionSessionConfig}.
 */
@NullMarked
package io.github.txnsession.kafka;

import org.jspecify.annotations.NullMarked;
