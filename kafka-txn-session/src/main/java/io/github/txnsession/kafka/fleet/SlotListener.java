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
 * calls again after a back-off, and the ids must not be used meanwhile.</li>
 * <li>{@link #slotRevoked}: stop using the slot's ids before returning: let running transactions finish (or abort
 * them), close their sessions, leave a prepared transaction whose outcome is decided elsewhere to the next owner.
 * The slot is handed to another instance only after this returns (or, when {@code lost}, possibly already was).
 * Keep it shorter than the fleet's {@code max.poll.interval.ms}.</li>
 * </ul>
 */
public interface SlotListener {

    /**
     * @param slot a slot this instance now owns
     * @throws RuntimeException if its ids cannot be settled now (retried after a back-off)
     */
    void slotAssigned(FleetSlot slot);

    /**
     * @param slot a slot this instance no longer owns
     * @param lost true if the membership was lost (a session timeout while this instance was paused or cut off):
     *        another instance may already have initialized the ids, so every session of the slot is fenced
     */
    void slotRevoked(FleetSlot slot, boolean lost);
}
