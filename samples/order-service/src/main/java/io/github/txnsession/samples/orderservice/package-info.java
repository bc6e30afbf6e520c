/**
 * Sample application: an order service over the JDBC two-phase commit. {@code POST /orders} inserts a row into the
 * {@code orders} table with {@code JdbcTemplate} and publishes an {@code OrderPlaced} event with {@code KafkaTemplate}
 * in one {@code @Transactional} method: both commit or neither does, also across a crash (decision log + recovery).
 * {@code GET /orders} lists the table, {@code GET /events} what a {@code read_committed} consumer sees.
 */
@NullMarked
package io.github.txnsession.samples.orderservice;

import org.jspecify.annotations.NullMarked;
