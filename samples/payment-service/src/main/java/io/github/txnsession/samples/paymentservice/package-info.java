/**
 * Sample application: a payment service on Spring Data JPA and the two-phase commit. {@code POST /payments} saves a
 * {@code Payment} entity with a {@code JpaRepository} and publishes a {@code PaymentCaptured} event with
 * {@code KafkaTemplate} in one {@code @Transactional} method run by Boot's own {@code JpaTransactionManager}: both
 * commit or neither does, also across a crash (decision log + recovery). {@code GET /payments} lists the table,
 * {@code GET /events} what a {@code read_committed} consumer sees. Bad requests get RFC 9457 problem details.
 */
@NullMarked
package io.github.txnsession.samples.paymentservice;

import org.jspecify.annotations.NullMarked;
