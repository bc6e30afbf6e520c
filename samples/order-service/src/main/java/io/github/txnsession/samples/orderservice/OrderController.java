package io.github.txnsession.samples.orderservice;

import java.util.List;

import jakarta.validation.Valid;

import org.springframework.http.HttpStatus;
import org.springframework.http.ProblemDetail;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;

/**
 * {@code POST /orders} places an order ({@code ?fail=true}: rejected after both writes, so both roll back);
 * {@code GET /orders} lists the {@code orders} table; {@code GET /events} lists the committed {@link OrderPlaced}
 * events. Errors are RFC 9457 problem details: 400 for an invalid body, 409 for a rejected order.
 */
@RestController
public class OrderController {

    private final OrderService service;
    private final Orders orders;
    private final OrderPlacedEvents events;

    public OrderController(OrderService service, Orders orders, OrderPlacedEvents events) {
        this.service = service;
        this.orders = orders;
        this.events = events;
    }

    @PostMapping("/orders")
    ResponseEntity<OrderReceipt> place(@Valid @RequestBody OrderRequest request,
            @RequestParam(name = "fail", defaultValue = "false") boolean fail) {
        return ResponseEntity.status(HttpStatus.CREATED).body(this.service.placeOrder(request, fail));
    }

    @GetMapping("/orders")
    List<Order> orders() {
        return this.orders.findAll();
    }

    @GetMapping("/events")
    List<OrderPlacedEvents.PublishedEvent> events() {
        return this.events.committed();
    }

    @ExceptionHandler(OrderRejectedException.class)
    ProblemDetail rejected(OrderRejectedException ex) {
        ProblemDetail problem = ProblemDetail.forStatusAndDetail(HttpStatus.CONFLICT, String.valueOf(ex.getMessage()));
        problem.setProperty("orderId", ex.orderId());
        return problem;
    }
}
