package io.github.txnsession.boot.jpa;

import jakarta.persistence.Entity;
import jakarta.persistence.Id;

/** An order row, written with Spring Data JPA. */
@Entity
public class PlacedOrder {

    @Id
    private String id;

    protected PlacedOrder() {
    }

    PlacedOrder(String id) {
        this.id = id;
    }

    String id() {
        return this.id;
    }
}
