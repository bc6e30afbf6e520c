/**
 * Sample application: an order pipeline over transaction sessions. {@code POST /orders} places an order in one
 * Kafka transaction (an event on {@code orders} and one on {@code order-audit}); a {@code @KafkaListener} turns each
 * order into a shipment on {@code shipments}, exactly once; {@code GET /records/{topic}} shows what a
 * {@code read_committed} consumer sees.
 */
@NullMarked
package io.github.txnsession.samples.orders;

import org.jspecify.annotations.NullMarked;
