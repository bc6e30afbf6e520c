package io.github.txnsession.samples.orders;

/**
 * The body of {@code POST /orders}.
 *
 * @param item what is ordered
 * @param quantity how many
 */
public record OrderRequest(String item, int quantity) {
}
