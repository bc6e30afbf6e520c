package io.github.txnsession.samples.orderservice;

/** Thrown by {@link OrderService} on request, after the row was inserted and the event sent: both roll back. */
public class OrderRejectedException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    private final String orderId;

    OrderRejectedException(String orderId) {
        super("Order " + orderId + " was rejected after its row was inserted and its OrderPlaced event sent; the "
                + "transaction was rolled back, so neither the orders table nor a read_committed consumer will ever "
                + "show it");
        this.orderId = orderId;
    }

    /** @return the id of the rejected order */
    public String orderId() {
        return this.orderId;
    }
}
