/**
 * Transaction sessions for Apache Kafka: the transaction lifecycle (identity, begin, commit, abort, prepare,
 * complete) as a first-class, thread-safe {@link io.github.txnsession.kafka.TransactionSession} that producers,
 * consumers and external coordinators bind to, after the proposal KIP-1310 "General Transaction Session".
 *
 * <p>Start with {@link io.github.txnsession.kafka.TransactionSession} and
 * {@link io.github.txnsession.kafka.SessionProducer}.
 */
@NullMarked
package io.github.txnsession.kafka;

import org.jspecify.annotations.NullMarked;
