package io.github.txnsession.samples.orders;

import java.util.List;
import java.util.UUID;

import io.github.txnsession.spring.CurrentTransactionSession;

import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.stereotype.Service;
import org.springframework.transaction.annotation.Transactional;

/**
 * Places orders: two events, one transaction. Plain {@code KafkaTemplate} code; the starter's transaction manager
 * runs the method on a session from the pool, so either both events become visible or neither does.
 */
@Service
public class OrderService {

    private final KafkaTemplate<Object, Object> template;
    private final CurrentTransactionSession session;

    public OrderService(KafkaTemplate<Object, Object> template, CurrentTransactionSession session) {
        this.template = template;
        this.session = session;
    }

    /**
     * @param request the order
     * @param failAfterSending throw after both events were sent, to show that the rollback hides them
     * @return the receipt
     */
    @Transactional
    public OrderReceipt placeOrder(OrderRequest request, boolean failAfterSending) {
        String orderId = "o-" + UUID.randomUUID().toString().substring(0, 8);
        this.template.send(OrderPipelineApplication.ORDERS, orderId, request.quantity() + " x " + request.item());
        this.template.send(OrderPipelineApplication.AUDIT, orderId, "order placed: " + request.quantity() + " x "
                + request.item());
        if (failAfterSending) {
            throw new OrderRejectedException(orderId);
        }
        return new OrderReceipt(orderId, this.session.transactionalId(),
                List.of(OrderPipelineApplication.ORDERS, OrderPipelineApplication.AUDIT));
    }
}
