package io.github.txnsession.kafka.fleet;

import java.util.List;
import java.util.Objects;

/**
 * One slot of a {@link TransactionalIdFleet}: a partition of the fleet's slots topic, and the transactional ids
 * that only the slot's current owner may use ({@code prefix + index + "-" + k} for {@code k < sessionsPerSlot}).
 *
 * @param index the slot number, the partition of the slots topic, from 0
 * @param transactionalIds the slot's ids, the same on every instance and after every restart
 */
public record FleetSlot(int index, List<String> transactionalIds) {

    /**
     * @param index the slot number
     * @param transactionalIds the slot's ids, copied
     */
    public FleetSlot {
        if (index < 0) {
            throw new IllegalArgumentException("slot index must not be negative, was " + index);
        }
        transactionalIds = List.copyOf(Objects.requireNonNull(transactionalIds, "transactionalIds"));
    }

    /**
     * @param prefix the fleet's transactional id prefix
     * @param index the slot number
     * @param sessionsPerSlot how many ids the slot has
     * @return the slot with its ids {@code prefix + index + "-" + k}
     */
    static FleetSlot of(String prefix, int index, int sessionsPerSlot) {
        String[] ids = new String[sessionsPerSlot];
        for (int k = 0; k < sessionsPerSlot; k++) {
            ids[k] = transactionalId(prefix, index, k);
        }
        return new FleetSlot(index, List.of(ids));
    }

    /**
     * @param prefix the fleet's transactional id prefix
     * @param slot the slot number
     * @param k the session number within the slot
     * @return the transactional id of session {@code k} of the slot
     */
    public static String transactionalId(String prefix, int slot, int k) {
        return prefix + slot + "-" + k;
    }
}
