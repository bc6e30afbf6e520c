package io.github.txnsession.samples.paymentservice;

import java.util.UUID;

/** Thrown by {@link PaymentService} on request, after the payment was saved and its event sent: both roll back. */
public class PaymentRejectedException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    private final UUID paymentId;

    private final String orderId;

    PaymentRejectedException(UUID paymentId, String orderId) {
        super("Payment " + paymentId + " for order " + orderId + " was rejected after it was saved and its "
                + "PaymentCaptured event sent; the transaction was rolled back, so neither the payments table nor a "
                + "read_committed consumer will ever show it");
        this.paymentId = paymentId;
        this.orderId = orderId;
    }

    /** @return the id the rejected payment had been given */
    public UUID paymentId() {
        return this.paymentId;
    }

    /** @return the order the rejected payment was for */
    public String orderId() {
        return this.orderId;
    }
}
