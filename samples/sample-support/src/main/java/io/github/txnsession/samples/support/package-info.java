/**
 * Shared by the sample applications, not meant for production code: {@link
 * io.github.txnsession.samples.support.EmbeddedKafkaConfiguration} starts a real in-process Kafka broker when the
 * application has no {@code spring.kafka.bootstrap-servers}, so that a sample runs with one command.
 */
@NullMarked
package io.github.txnsession.samples.support;

import org.jspecify.annotations.NullMarked;
