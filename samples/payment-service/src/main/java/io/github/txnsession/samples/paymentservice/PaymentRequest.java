package io.github.txnsession.samples.paymentservice;

import java.util.ArrayList;
import java.util.List;

import org.jspecify.annotations.Nullable;

/**
 * The body of {@code POST /payments}. Checked by hand, with the rules Bean Validation's {@code @NotBlank},
 * {@code @Size(max = 64)}, {@code @NotNull} and {@code @Positive} would apply (the sample does without
 * {@code spring-boot-starter-validation}).
 *
 * @param orderId the order to pay: not blank, at most {@value #MAX_ORDER_ID_LENGTH} characters
 * @param amountCents the amount in cents, greater than 0
 */
public record PaymentRequest(@Nullable String orderId, @Nullable Long amountCents) {

    /** The longest order id the table takes. */
    static final int MAX_ORDER_ID_LENGTH = 64;

    /** @return what is wrong with this request, field by field; empty if it is fine */
    List<FieldProblem> problems() {
        List<FieldProblem> problems = new ArrayList<>();
        if (this.orderId == null || this.orderId.isBlank()) {
            problems.add(new FieldProblem("orderId", "must not be blank"));
        }
        else if (this.orderId.length() > MAX_ORDER_ID_LENGTH) {
            problems.add(new FieldProblem("orderId", "must have at most " + MAX_ORDER_ID_LENGTH + " characters, has "
                    + this.orderId.length()));
        }
        if (this.amountCents == null) {
            problems.add(new FieldProblem("amountCents", "must not be null"));
        }
        else if (this.amountCents <= 0) {
            problems.add(new FieldProblem("amountCents", "must be greater than 0, is " + this.amountCents));
        }
        return problems;
    }

    /**
     * One invalid field of a request, listed in the {@code errors} member of the 400 problem detail.
     *
     * @param field the field's name in the JSON body
     * @param message what is wrong with it
     */
    public record FieldProblem(String field, String message) {
    }
}
