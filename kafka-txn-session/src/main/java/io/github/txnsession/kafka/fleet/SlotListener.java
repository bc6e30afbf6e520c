package io.github.txnsession.kafka.fleet;

/**
 * Told by a {@link TransactionalIdFleet} when this instance gains or loses a slot. Both calls run on the fleet's
 * membership thread, inside Kafka's rebalance, one at a time.
 *
 * <h2>Contract</h2>
 * <ul>
 * <li>{@link #slotAssigned}: settle the slot's ids <em>before</em> any of them is used: initialize each id (which
 * aborts what a previous owner left open and fences that owner), after completing, from a decision log, any
 * transaction a two-phase commit decided to commit. Throw if that cannot be done now: the fleet keeps the slot and
 * calls again after a back-off, and the ids must not be used meanwhile. It is also called again for a slot this
 * instance still owns when {@link TransactionalIdFleet#requestSettlement} asks (a session of the slot was closed):
 * initialize only the ids that have no session, after the fleet confirmed with the group coordinator that this
 * instance still owns the slot. Never initialize an id anywhere else: an instance that was paused may have lost the
 * slot without knowing it yet, and its initialization would fence the new owner.</li>
 * <li>{@link #slotsRevoked}: stop using the slots' ids before returning: stop lending them at once, let running
 * transactions finish (or abort them), close their sessions, leave a prepared transaction whose outcome is decided
 * elsewhere to the next owner. The slots are handed to another instance only after this returns (or, when
 * {@code lost}, possibly already were: then do not wait). Keep it well under the fleet's session timeout when the
 * instance leaves (it runs before the member leaves the group) and under {@code max.poll.interval.ms} (10 min) in a
 * rebalance.</li>
 * </ul>
 */
public interface SlotListener {

    /**
     * @param slot a slot this instance now owns
     * @throws RuntimeException if its ids cannot be settled now (retried after a back-off)
     */
    void slotAssigned(FleetSlot slot);

    /**
     * @param slots slots this instance no longer owns, all at once so that none of them stays lendable while the
     *        others are given up
     * @param lost true if the membership was lost (a session timeout while this instance was paused or cut off):
     *        another instance may already have initialized the ids, so every session of the slots is fenced
     */
    void slotsRevoked(java.util.List<FleetSlot> slots, boolean lost);
}
