package io.github.txnsession.boot.compat;

import org.springframework.data.jpa.repository.JpaRepository;

/** Spring Data JPA repository of {@link CompatOrder}. */
public interface CompatOrders extends JpaRepository<CompatOrder, String> {
}
