package io.github.txnsession.samples.orderservice;

/**
 * The answer to {@code POST /orders}: the order row and its event are both committed.
 *
 * @param orderId the order's id: its primary key in {@code orders} and its key on the event topic
 * @param transactionalId the session whose Kafka transaction carried the event
 */
public record OrderReceipt(String orderId, String transactionalId) {
}
