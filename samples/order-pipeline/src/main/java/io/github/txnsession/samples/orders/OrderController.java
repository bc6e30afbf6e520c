package io.github.txnsession.samples.orders;

import java.util.List;
import java.util.Set;

import jakarta.validation.Valid;

import org.springframework.http.HttpStatus;
import org.springframework.http.ProblemDetail;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.server.ResponseStatusException;

/**
 * {@code POST /orders} places an order ({@code ?fail=true} rolls it back after sending);
 * {@code GET /records/{topic}} shows the committed records of {@code orders}, {@code order-audit} or
 * {@code shipments}. Errors are RFC 9457 problem details: 400 for an invalid body or an unknown topic, 409 for a
 * rejected order.
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
    ResponseEntity<OrderReceipt> place(@Valid @RequestBody OrderRequest request,
            @RequestParam(name = "fail", defaultValue = "false") boolean fail) {
        return ResponseEntity.status(HttpStatus.CREATED).body(this.orders.placeOrder(request, fail));
    }

    @GetMapping("/records/{topic}")
    List<CommittedRecords.CommittedRecord> committed(@PathVariable String topic) {
        if (!TOPICS.contains(topic)) {
            throw new ResponseStatusException(HttpStatus.BAD_REQUEST, "Unknown topic '" + topic + "'; try one of "
                    + TOPICS.stream().sorted().toList());
        }
        return this.records.read(topic);
    }

    @ExceptionHandler(OrderRejectedException.class)
    ProblemDetail rejected(OrderRejectedException ex) {
        ProblemDetail problem = ProblemDetail.forStatusAndDetail(HttpStatus.CONFLICT, String.valueOf(ex.getMessage()));
        problem.setProperty("orderId", ex.orderId());
        return problem;
    }
}
