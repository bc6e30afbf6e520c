package io.github.txnsession.samples.orderservice;

import java.util.Optional;

import org.jspecify.annotations.Nullable;

/**
 * The body of {@code POST /orders}.
 *
 * @param item what is ordered
 * @param quantity how many, at least 1
 */
public record OrderRequest(@Nullable String item, int quantity) {

    /** @return what is wrong with this request and how to fix it, or empty if it is fine */
    Optional<String> problem() {
        if (this.item == null || this.item.isBlank()) {
            return Optional.of("'item' is missing or blank; send e.g. {\"item\":\"book\",\"quantity\":2}");
        }
        if (this.item.length() > Orders.MAX_ITEM_LENGTH) {
            return Optional.of("'item' has " + this.item.length() + " characters; at most " + Orders.MAX_ITEM_LENGTH
                    + " are allowed");
        }
        if (this.quantity < 1) {
            return Optional.of("'quantity' is " + this.quantity + "; it must be at least 1");
        }
        return Optional.empty();
    }
}
