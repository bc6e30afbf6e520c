package io.github.txnsession.samples.orders;

/**
 * The answer to {@code POST /orders}.
 *
 * @param orderId the order's key on every topic
 * @param transactionalId the session whose transaction carried both events
 * @param events the topics the order was written to, in one transaction
 */
public record OrderReceipt(String orderId, String transactionalId, java.util.List<String> events) {
}
