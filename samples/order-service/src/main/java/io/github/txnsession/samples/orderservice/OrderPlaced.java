package io.github.txnsession.samples.orderservice;

import java.time.Instant;

/**
 * The event published for every placed order, as JSON on {@value OrderServiceApplication#ORDER_PLACED}, keyed by
 * {@code orderId}. It carries the same values as the order's row.
 *
 * @param orderId the order
 * @param item what was ordered
 * @param quantity how many
 * @param placedAt when
 */
public record OrderPlaced(String orderId, String item, int quantity, Instant placedAt) {
}
