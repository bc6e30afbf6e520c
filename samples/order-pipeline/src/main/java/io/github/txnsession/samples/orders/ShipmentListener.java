package io.github.txnsession.samples.orders;

import org.apache.kafka.clients.consumer.ConsumerRecord;

import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.stereotype.Component;

/**
 * Consume, transform, produce: every order becomes one shipment. No transaction code: Boot's listener container
 * uses the starter's transaction manager, so the shipment and the consumed offset commit in one session
 * transaction, and a failure (retried by the container) never leaves a duplicate shipment.
 */
@Component
public class ShipmentListener {

    private final KafkaTemplate<Object, Object> template;

    public ShipmentListener(KafkaTemplate<Object, Object> template) {
        this.template = template;
    }

    @KafkaListener(id = "shipping", topics = OrderPipelineApplication.ORDERS, groupId = "shipping")
    void onOrder(ConsumerRecord<String, String> order) {
        this.template.send(OrderPipelineApplication.SHIPMENTS, order.key(), "ship " + order.value());
    }
}
