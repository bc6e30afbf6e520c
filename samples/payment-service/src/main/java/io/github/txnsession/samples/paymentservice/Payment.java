package io.github.txnsession.samples.paymentservice;

import java.time.Instant;
import java.util.UUID;

import jakarta.persistence.Entity;
import jakarta.persistence.EnumType;
import jakarta.persistence.Enumerated;
import jakarta.persistence.GeneratedValue;
import jakarta.persistence.GenerationType;
import jakarta.persistence.Id;
import jakarta.persistence.Table;
import org.jspecify.annotations.Nullable;

/**
 * A row of the {@code payments} table (created by {@code schema.sql}), as a JPA entity. Serialized as it is by
 * {@code GET /payments}.
 *
 * <p>The id is a UUID that Hibernate generates in memory when the entity is persisted. That keeps
 * {@code repository.save(...)} free of SQL: Spring Data sees a new entity (its id is null) and calls
 * {@code persist}, and Hibernate writes the INSERT when it flushes at commit. An identity column would make Hibernate
 * insert at once, to learn the id.
 */
@Entity
@Table(name = "payments")
public class Payment {

    @Id
    @GeneratedValue(strategy = GenerationType.UUID)
    private @Nullable UUID id;

    private String orderId;

    private long amountCents;

    @Enumerated(EnumType.STRING)
    private Status status;

    private Instant capturedAt;

    /** For JPA only. */
    protected Payment() {
        this.orderId = "";
        this.status = Status.CAPTURED;
        this.capturedAt = Instant.EPOCH;
    }

    Payment(String orderId, long amountCents, Instant capturedAt) {
        this.orderId = orderId;
        this.amountCents = amountCents;
        this.status = Status.CAPTURED;
        this.capturedAt = capturedAt;
    }

    /** @return the payment's id; null until the entity is persisted */
    public @Nullable UUID getId() {
        return this.id;
    }

    /** @return the order this payment pays; unique in the table */
    public String getOrderId() {
        return this.orderId;
    }

    /** @return the amount, in cents, greater than 0 */
    public long getAmountCents() {
        return this.amountCents;
    }

    /** @return the payment's status */
    public Status getStatus() {
        return this.status;
    }

    /** @return when the payment was captured */
    public Instant getCapturedAt() {
        return this.capturedAt;
    }

    /** The status of a payment. */
    public enum Status {

        /**
         * The money was taken. The only status a row of this sample has: a payment that is not captured rolls back
         * and leaves no row.
         */
        CAPTURED
    }
}
