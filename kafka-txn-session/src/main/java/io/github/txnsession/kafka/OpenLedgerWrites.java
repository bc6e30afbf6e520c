package io.github.txnsession.kafka;

import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * What the open transactions of a {@link ShareOutcomeLedger} wrote above one ledger partition's last stable offset,
 * as read so far (read uncommitted): the entry keys written, and per share group the records the entries name.
 *
 * <p>It is kept while the last stable offset stays where it is, so a lookup reads only what was written since the
 * previous one instead of the whole open range again. That matters when a worker died between writing its entry and
 * committing: its transaction pins the last stable offset until the coordinator aborts it
 * ({@code transaction.timeout.ms}), and everything written meanwhile lies in the open range. When the last stable
 * offset moves, the range is read again from there. The log below the high watermark does not change while its
 * leader stays (a new leader may have truncated it after an unclean election: the range is then read again) and is
 * not compacted above the last stable offset, so what was read stays true.
 *
 * <p>Memory: one entry per record named by an entry in the open range (what the records of that range hold).
 * Not thread-safe: the ledger uses it under its monitor.
 */
final class OpenLedgerWrites {

    private long stableOffset = -1;
    private int leaderEpoch = -1;
    private long readTo = -1;
    private final Set<String> keys = new HashSet<>();
    private final Map<String, Set<ShareRecordId>> named = new HashMap<>();
    /** groups with an entry in the range that could not be decoded: any record of theirs may be named */
    private final Set<String> undecodable = new HashSet<>();

    /**
     * @param lastStableOffset the partition's last stable offset now
     * @param leaderEpoch the leader epoch the high watermark came with (-1 when unknown)
     * @param highWatermark the partition's high watermark now
     * @return where to go on reading: where the last read of this range ended; or {@code lastStableOffset} when that
     *         moved, the leader changed (a new leader may have truncated the log) or the high watermark is below what
     *         was read (the range is then forgotten and read again)
     */
    long resumeFrom(long lastStableOffset, int leaderEpoch, long highWatermark) {
        if (lastStableOffset != this.stableOffset || leaderEpoch != this.leaderEpoch || highWatermark < this.readTo) {
            this.stableOffset = lastStableOffset;
            this.leaderEpoch = leaderEpoch;
            this.readTo = lastStableOffset;
            this.keys.clear();
            this.named.clear();
            this.undecodable.clear();
        }
        return this.readTo;
    }

    /** Adds a record of the range read at {@link #resumeFrom}'s position or after the previous one. */
    void add(ConsumerRecord<byte[], byte[]> r) {
        this.readTo = Math.max(this.readTo, r.offset() + 1);
        if (r.key() == null) {
            return;
        }
        String key = new String(r.key(), StandardCharsets.UTF_8);
        this.keys.add(key);
        String group = ShareOutcomeLedger.groupOf(key);
        if (group == null || r.value() == null) {
            return; // not an entry of a ledger, or a tombstone (names no record)
        }
        try {
            this.named.computeIfAbsent(group, g -> new HashSet<>())
                .addAll(ShareOutcomeLedger.decode(new String(r.value(), StandardCharsets.UTF_8)).keySet());
        }
        catch (RuntimeException malformed) {
            this.undecodable.add(group);
        }
    }

    /** Everything below {@code offset} has been read (records the reader skips, such as markers, included). */
    void readUpTo(long offset) {
        this.readTo = Math.max(this.readTo, offset);
    }

    /** @return how far the range has been read (exclusive) */
    long readTo() {
        return this.readTo;
    }

    /** @return whether an entry of {@code groupId} read in the range names one of {@code ids}, or could not be decoded */
    boolean names(String groupId, Collection<ShareRecordId> ids) {
        if (this.undecodable.contains(groupId)) {
            return true;
        }
        Set<ShareRecordId> ofGroup = this.named.get(groupId);
        return ofGroup != null && ids.stream().anyMatch(ofGroup::contains);
    }

    /** @return whether the range holds a record with entry key {@code key} */
    boolean writes(String key) {
        return this.keys.contains(key);
    }
}
