package io.github.txnsession.samples.paymentservice;

import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.Objects;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;

import io.github.txnsession.kafka.TransactionSession;
import tools.jackson.databind.json.JsonMapper;

import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.stereotype.Service;
import org.springframework.transaction.annotation.Transactional;

/**
 * Captures payments: one {@link Payment} saved with Spring Data JPA, one {@link PaymentCaptured} event, one
 * transaction. Plain {@code JpaRepository} and {@code KafkaTemplate} code; Boot's own {@code JpaTransactionManager}
 * runs the method, and with {@code kafka.txn-session.jdbc.enabled=true} the Kafka session the first send enlists in
 * it commits by two-phase commit: prepare the Kafka transaction, write a decision row through the connection JPA uses,
 * let Hibernate flush the payment's INSERT and commit the database, commit Kafka, clear the row.
 * Either both the row and the event become visible or neither does; if the database refuses the INSERT at that flush
 * (a second payment for one order), the prepared Kafka transaction is aborted. After a crash, recovery at the next
 * startup finishes what the decision row says.
 */
@Service
public class PaymentService {

    private final Payments payments;
    private final KafkaTemplate<Object, Object> template;
    private final JsonMapper json;
    /** the transaction-scoped proxy the starter registers: each call reaches the current transaction's session */
    private final TransactionSession session;

    public PaymentService(Payments payments, KafkaTemplate<Object, Object> template, JsonMapper json,
            TransactionSession session) {
        this.payments = payments;
        this.template = template;
        this.json = json;
        this.session = session;
    }

    /**
     * @param request a valid request (checked by Bean Validation)
     * @param failAfterWrites throw after the payment was saved and the event sent, to show that the rollback undoes
     *        both
     * @return the receipt
     * @throws PaymentRejectedException if {@code failAfterWrites}
     * @throws org.springframework.dao.DataIntegrityViolationException from the commit, if the database refuses the
     *         payment when Hibernate flushes it (the order already has a payment); nothing is committed
     */
    @Transactional
    public PaymentReceipt capture(PaymentRequest request, boolean failAfterWrites) {
        String orderId = Objects.requireNonNull(request.orderId(), "orderId");
        long amountCents = Objects.requireNonNull(request.amountCents(), "amountCents");
        // databases keep microseconds at best: truncate so that the row and the event carry the same instant
        Instant now = Instant.now().truncatedTo(ChronoUnit.MILLIS);
        // save, not saveAndFlush: persist() only generates the id; Hibernate writes the INSERT when it flushes at
        // commit, after the starter has prepared the Kafka transaction and written its decision row
        Payment payment = this.payments.save(new Payment(orderId, amountCents, now));
        UUID paymentId = Objects.requireNonNull(payment.getId(), "persist() generates the id");
        PaymentCaptured event = new PaymentCaptured(paymentId, orderId, amountCents, now);
        CompletableFuture<?> sent = this.template.send(PaymentServiceApplication.PAYMENT_CAPTURED, orderId,
                this.json.writeValueAsString(event));
        if (failAfterWrites) {
            // wait until the broker has the event in its log, so the rollback has a real write to undo
            sent.join();
            throw new PaymentRejectedException(paymentId, orderId);
        }
        return new PaymentReceipt(paymentId, orderId, this.session.transactionalId());
    }
}
