package io.github.txnsession.samples.paymentservice;

import jakarta.validation.constraints.NotBlank;
import jakarta.validation.constraints.NotNull;
import jakarta.validation.constraints.Positive;
import jakarta.validation.constraints.Size;
import org.jspecify.annotations.Nullable;

/**
 * The body of {@code POST /payments}, checked with Bean Validation: an invalid one is answered with a 400 problem
 * detail naming each invalid field.
 *
 * @param orderId the order to pay: not blank, at most {@value #MAX_ORDER_ID_LENGTH} characters
 * @param amountCents the amount in cents, greater than 0
 */
public record PaymentRequest(@NotBlank @Size(max = MAX_ORDER_ID_LENGTH) @Nullable String orderId,
        @NotNull @Positive @Nullable Long amountCents) {

    /** The longest order id the table takes. */
    static final int MAX_ORDER_ID_LENGTH = 64;
}
