package io.github.txnsession.samples.orderservice;

import java.time.Instant;

/**
 * A row of the {@code orders} table.
 *
 * @param id the order id
 * @param item what was ordered
 * @param quantity how many
 * @param placedAt when
 */
public record Order(String id, String item, int quantity, Instant placedAt) {
}
