/**
 * The one place where kafka-clients internals are used: a small blocking client of the transaction coordinator
 * (ApiVersions, FindCoordinator, DescribeTransactions, EndTxn) built on kafka-clients' {@code NetworkClient}; see
 * {@link io.github.txnsession.kafka.internals.CoordinatorClient}.
 *
 * <p>Not a public API: types here may change in any release, and follow the Kafka internals they wrap.
 */
@NullMarked
package io.github.txnsession.kafka.internals;

import org.jspecify.annotations.NullMarked;
