/**
 * Elastic fleets: many instances of one application with identical configuration share a bounded set of
 * transactional ids without fencing each other. {@link io.github.txnsession.kafka.fleet.TransactionalIdFleet} owns
 * slots through Kafka's own group membership (a consumer group over a slots topic whose partitions are the slots);
 * an instance uses only the ids of the slots it owns, and a {@link io.github.txnsession.kafka.fleet.SlotListener}
 * settles a slot's ids before use and stops using them when the slot moves.
 */
@NullMarked
package io.github.txnsession.kafka.fleet;

import org.jspecify.annotations.NullMarked;
