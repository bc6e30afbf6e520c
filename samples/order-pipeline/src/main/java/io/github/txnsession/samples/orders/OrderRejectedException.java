package io.github.txnsession.samples.orders;

/** Thrown by {@link OrderService} on request, after sending: its transaction rolls back. */
public class OrderRejectedException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    private final String orderId;

    OrderRejectedException(String orderId) {
        super("Order " + orderId + " was rejected after its events were sent; the transaction was rolled back, "
                + "so no read_committed consumer will ever see them");
        this.orderId = orderId;
    }

    /** @return the id of the rejected order */
    public String orderId() {
        return this.orderId;
    }
}
