package io.github.txnsession.boot.compat;

import jakarta.persistence.Entity;
import jakarta.persistence.Id;
import jakarta.persistence.Table;

/** A row of {@code compat_order}, as the JPA cells of the compatibility matrix write it. */
@Entity
@Table(name = "compat_order")
public class CompatOrder {

    @Id
    private String id;

    protected CompatOrder() {
    }

    CompatOrder(String id) {
        this.id = id;
    }

    String id() {
        return this.id;
    }
}
