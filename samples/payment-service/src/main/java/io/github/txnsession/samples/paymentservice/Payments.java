package io.github.txnsession.samples.paymentservice;

import java.util.UUID;

import org.springframework.data.jpa.repository.JpaRepository;

/**
 * The {@code payments} table, as a Spring Data JPA repository. Inside a {@code @Transactional} method it uses the
 * transaction's {@code EntityManager}, so a saved payment commits or rolls back with the transaction's Kafka events;
 * outside one, each call runs in a read-only transaction of its own.
 */
public interface Payments extends JpaRepository<Payment, UUID> {

    /**
     * @param orderId an order id
     * @return whether a committed payment for {@code orderId} exists
     */
    boolean existsByOrderId(String orderId);
}
