package io.github.txnsession.samples.orderservice;

import java.sql.Timestamp;
import java.util.List;

import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.stereotype.Repository;

/**
 * The {@code orders} table (created by {@code schema.sql} at startup), through {@link JdbcTemplate}. Inside a
 * {@code @Transactional} method the template uses the connection the two-phase transaction manager bound, so an
 * insert commits or rolls back with the transaction's Kafka events.
 */
@Repository
public class Orders {

    /** The longest item name the table takes. */
    static final int MAX_ITEM_LENGTH = 200;

    private final JdbcTemplate jdbc;

    public Orders(JdbcTemplate jdbc) {
        this.jdbc = jdbc;
    }

    /** Inserts {@code order}, in the caller's transaction. */
    void insert(Order order) {
        this.jdbc.update("INSERT INTO orders (id, item, quantity, placed_at) VALUES (?, ?, ?, ?)", order.id(),
                order.item(), order.quantity(), Timestamp.from(order.placedAt()));
    }

    /** @return every committed order, oldest first */
    public List<Order> findAll() {
        return this.jdbc.query("SELECT id, item, quantity, placed_at FROM orders ORDER BY placed_at, id",
                (rs, row) -> new Order(rs.getString(1), rs.getString(2), rs.getInt(3),
                        rs.getTimestamp(4).toInstant()));
    }
}
