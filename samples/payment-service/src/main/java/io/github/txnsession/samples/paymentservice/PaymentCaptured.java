package io.github.txnsession.samples.paymentservice;

import java.time.Instant;
import java.util.UUID;

/**
 * The event published for every captured payment, as JSON on {@value PaymentServiceApplication#PAYMENT_CAPTURED},
 * keyed by {@code orderId} (the events of one order stay in one partition, in order). It carries the same values as
 * the payment's row.
 *
 * @param paymentId the payment's id
 * @param orderId the order it pays
 * @param amountCents the amount, in cents
 * @param capturedAt when
 */
public record PaymentCaptured(UUID paymentId, String orderId, long amountCents, Instant capturedAt) {
}
