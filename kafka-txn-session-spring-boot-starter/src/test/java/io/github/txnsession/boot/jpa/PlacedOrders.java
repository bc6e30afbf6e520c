package io.github.txnsession.boot.jpa;

import org.springframework.data.jpa.repository.JpaRepository;

/** The repository of {@link PlacedOrder}. */
public interface PlacedOrders extends JpaRepository<PlacedOrder, String> {
}
