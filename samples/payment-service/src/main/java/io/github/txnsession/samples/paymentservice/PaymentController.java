package io.github.txnsession.samples.paymentservice;

import java.util.List;

import jakarta.validation.Valid;

import org.springframework.dao.DataIntegrityViolationException;
import org.springframework.data.domain.Sort;
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
 * {@code POST /payments} captures a payment ({@code ?fail=true}: rejected after both writes, so both roll back);
 * {@code GET /payments} lists the {@code payments} table; {@code GET /events} lists the committed
 * {@link PaymentCaptured} events. Errors are RFC 9457 problem details ({@code application/problem+json}): 400 for an
 * invalid body, 409 for a rejected payment and for a second payment of one order.
 */
@RestController
public class PaymentController {

    private final PaymentService service;
    private final Payments payments;
    private final PaymentCapturedEvents events;

    public PaymentController(PaymentService service, Payments payments, PaymentCapturedEvents events) {
        this.service = service;
        this.payments = payments;
        this.events = events;
    }

    @PostMapping("/payments")
    ResponseEntity<?> capture(@Valid @RequestBody PaymentRequest request,
            @RequestParam(name = "fail", defaultValue = "false") boolean fail) {
        try {
            return ResponseEntity.status(HttpStatus.CREATED).body(this.service.capture(request, fail));
        }
        catch (DataIntegrityViolationException ex) {
            // Raised by the commit, not by save(): Hibernate flushed the INSERT at commit, after the Kafka transaction
            // had been prepared. The database rolled back (the decision row with it) and the Kafka transaction was
            // aborted. The one constraint a valid request can break is one payment per order; check for that payment.
            String orderId = String.valueOf(request.orderId());
            if (!this.payments.existsByOrderId(orderId)) {
                throw ex;
            }
            ProblemDetail problem = ProblemDetail.forStatusAndDetail(HttpStatus.CONFLICT, "Order " + orderId
                    + " already has a captured payment; the database refused a second one when the transaction "
                    + "committed, so neither its row nor its PaymentCaptured event was committed");
            problem.setProperty("orderId", orderId);
            return ResponseEntity.of(problem).build();
        }
    }

    @GetMapping("/payments")
    List<Payment> payments() {
        return this.payments.findAll(Sort.by("capturedAt", "id"));
    }

    @GetMapping("/events")
    List<PaymentCapturedEvents.PublishedEvent> events() {
        return this.events.committed();
    }

    @ExceptionHandler(PaymentRejectedException.class)
    ProblemDetail rejected(PaymentRejectedException ex) {
        ProblemDetail problem = ProblemDetail.forStatusAndDetail(HttpStatus.CONFLICT, String.valueOf(ex.getMessage()));
        problem.setProperty("paymentId", ex.paymentId());
        problem.setProperty("orderId", ex.orderId());
        return problem;
    }
}
