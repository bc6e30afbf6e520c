package io.github.txnsession.samples.orders;

import java.util.List;
import java.util.Map;
import java.util.Set;

import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;

/**
 * {@code POST /orders} places an order ({@code ?fail=true} rolls it back after sending);
 * {@code GET /records/{topic}} shows the committed records of {@code orders}, {@code order-audit} or
 * {@code shipments}.
 */
@RestController
public class OrderController {

    private static final Set<String> TOPICS = Set.of(OrderPipelineApplication.ORDERS, OrderPipelineApplication.AUDIT,
            OrderPipelineApplication.SHIPMENTS);

    private final OrderService orders;
    private final CommittedRecords records;

    public OrderController(OrderService orders, CommittedRecords records) {
        this.orders = orders;
        this.records = records;
    }

    @PostMapping("/orders")
    ResponseEntity<OrderReceipt> place(@RequestBody OrderRequest request,
            @RequestParam(name = "fail", defaultValue = "false") boolean fail) {
        return ResponseEntity.status(HttpStatus.CREATED).body(this.orders.placeOrder(request, fail));
    }

    @GetMapping("/records/{topic}")
    ResponseEntity<?> committed(@PathVariable String topic) {
        if (!TOPICS.contains(topic)) {
            return ResponseEntity.badRequest().body(Map.of("error", "unknown topic '" + topic + "'; try one of "
                    + TOPICS));
        }
        List<CommittedRecords.CommittedRecord> committed = this.records.read(topic);
        return ResponseEntity.ok(committed);
    }

    @ExceptionHandler(OrderRejectedException.class)
    ResponseEntity<Map<String, String>> rejected(OrderRejectedException ex) {
        return ResponseEntity.status(HttpStatus.CONFLICT)
            .body(Map.of("orderId", ex.orderId(), "error", String.valueOf(ex.getMessage())));
    }
}
