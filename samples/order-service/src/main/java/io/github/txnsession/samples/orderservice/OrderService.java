package io.github.txnsession.samples.orderservice;

import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.Objects;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;

import io.github.txnsession.spring.CurrentTransactionSession;
import tools.jackson.databind.json.JsonMapper;

import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.stereotype.Service;
import org.springframework.transaction.annotation.Transactional;

/**
 * Places orders: one row in {@code orders}, one {@link OrderPlaced} event, one transaction. Plain
 * {@code JdbcTemplate} and {@code KafkaTemplate} code; Boot's own JDBC transaction manager runs the method, and with
 * {@code kafka.txn-session.jdbc.enabled=true} the Kafka session the first send enlists in it commits by two-phase
 * commit: prepare the Kafka transaction, write a decision row in the database transaction, commit the database,
 * commit Kafka, clear the row.
 * Either both the row and the event become visible or neither does; after a crash, recovery at the next startup
 * finishes what the decision row says.
 */
@Service
public class OrderService {

    private final Orders orders;
    private final KafkaTemplate<Object, Object> template;
    private final JsonMapper json;
    private final CurrentTransactionSession session;

    public OrderService(Orders orders, KafkaTemplate<Object, Object> template, JsonMapper json,
            CurrentTransactionSession session) {
        this.orders = orders;
        this.template = template;
        this.json = json;
        this.session = session;
    }

    /**
     * @param request a valid order (checked by Bean Validation)
     * @param failAfterWrites throw after the row was inserted and the event sent, to show that the rollback undoes
     *        both
     * @return the receipt
     * @throws OrderRejectedException if {@code failAfterWrites}
     */
    @Transactional
    public OrderReceipt placeOrder(OrderRequest request, boolean failAfterWrites) {
        String item = Objects.requireNonNull(request.item(), "item");
        String orderId = "o-" + UUID.randomUUID().toString().substring(0, 8);
        // databases keep microseconds at best: truncate so that the row and the event carry the same instant
        Instant now = Instant.now().truncatedTo(ChronoUnit.MILLIS);
        this.orders.insert(new Order(orderId, item, request.quantity(), now));
        OrderPlaced event = new OrderPlaced(orderId, item, request.quantity(), now);
        CompletableFuture<?> sent = this.template.send(OrderServiceApplication.ORDER_PLACED, orderId,
                this.json.writeValueAsString(event));
        if (failAfterWrites) {
            // wait until the broker has the event in its log, so the rollback has a real write to undo
            sent.join();
            throw new OrderRejectedException(orderId);
        }
        return new OrderReceipt(orderId, this.session.transactionalId());
    }
}
