package io.github.txnsession.samples.support;

import java.util.Comparator;
import java.util.List;
import java.util.stream.Collectors;

import org.jspecify.annotations.Nullable;

import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.http.HttpStatusCode;
import org.springframework.http.ProblemDetail;
import org.springframework.http.ResponseEntity;
import org.springframework.validation.FieldError;
import org.springframework.web.bind.MethodArgumentNotValidException;
import org.springframework.web.bind.annotation.RestControllerAdvice;
import org.springframework.web.context.request.WebRequest;
import org.springframework.web.servlet.mvc.method.annotation.ResponseEntityExceptionHandler;

/**
 * Error bodies of the samples: RFC 9457 problem details ({@code application/problem+json}) for every error Spring
 * MVC handles, and for a request body that fails Bean Validation ({@code @Valid}) a 400 whose {@code detail} names
 * each invalid field and whose {@code errors} member lists them ({@code field}, {@code message}), sorted by field.
 * Imported by each sample's application class; the samples' own conflicts (409) are problem details too.
 */
@RestControllerAdvice
public class ProblemDetailsAdvice extends ResponseEntityExceptionHandler {

    @Override
    protected @Nullable ResponseEntity<Object> handleMethodArgumentNotValid(MethodArgumentNotValidException ex,
            HttpHeaders headers, HttpStatusCode status, WebRequest request) {
        List<FieldProblem> problems = ex.getBindingResult()
            .getFieldErrors()
            .stream()
            .map(FieldProblem::of)
            .sorted(Comparator.comparing(FieldProblem::field).thenComparing(FieldProblem::message))
            .toList();
        String reasons = problems.stream()
            .map(p -> "'" + p.field() + "' " + p.message())
            .collect(Collectors.joining("; "));
        ProblemDetail problem = ProblemDetail.forStatusAndDetail(HttpStatus.BAD_REQUEST,
                "Invalid request: " + reasons + ".");
        problem.setProperty("errors", problems);
        return handleExceptionInternal(ex, problem, headers, status, request);
    }

    /**
     * One invalid field of a request body, as listed in the {@code errors} member of a 400 problem detail.
     *
     * @param field the field's name in the JSON body
     * @param message what is wrong with it (Bean Validation's message)
     */
    public record FieldProblem(String field, String message) {

        static FieldProblem of(FieldError error) {
            return new FieldProblem(error.getField(), String.valueOf(error.getDefaultMessage()));
        }
    }
}
