package io.github.txnsession.samples.orders;

import jakarta.validation.constraints.NotBlank;
import jakarta.validation.constraints.Positive;
import jakarta.validation.constraints.Size;
import org.jspecify.annotations.Nullable;

/**
 * The body of {@code POST /orders}, checked with Bean Validation: an invalid one is answered with a 400 problem detail
 * naming each invalid field.
 *
 * @param item what is ordered: not blank, at most 200 characters
 * @param quantity how many, at least 1
 */
public record OrderRequest(@NotBlank @Size(max = 200) @Nullable String item, @Positive int quantity) {
}
