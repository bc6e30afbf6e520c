package io.github.txnsession.samples.paymentservice;

import java.util.UUID;

/**
 * The answer to {@code POST /payments}: the payment row and its event are both committed.
 *
 * @param paymentId the payment's id: its primary key in {@code payments}, and in its event
 * @param orderId the order it pays: the key of its event
 * @param transactionalId the session whose Kafka transaction carried the event
 */
public record PaymentReceipt(UUID paymentId, String orderId, String transactionalId) {
}
