package io.github.txnsession.kafka;

import java.util.Objects;

import org.apache.kafka.clients.producer.PreparedTxnState;
import org.jspecify.annotations.Nullable;

/**
 * The identity of one prepared transaction, as {@link TransactionSession#prepareTransaction()} hands it out: store it
 * with the external decision, then {@link TransactionSession#completeTransaction(PreparedTransaction) complete} it
 * here or {@link TransactionSession#resume(String, PreparedTransaction, java.util.Map) resume} it elsewhere.
 *
 * <h2>Why more than {@code producerId:epoch}</h2>
 * Kafka's {@link PreparedTxnState} is {@code producerId:epoch}, which does not name one transaction: an empty
 * transaction never reaches the coordinator, so its {@code pid:epoch} is the one the <em>next</em> transaction uses;
 * with transaction version 1 every transaction of a producer shares its epoch. This class adds the coordinator's
 * <b>start time</b> of the transaction (DescribeTransactions {@code transactionStartTimeMs}, kept by the coordinator
 * through PrepareCommit/CompleteCommit/CompleteAbort), and marks <b>empty</b> transactions explicitly:
 * <ul>
 * <li>{@code pid:epoch:startTimeMs}: a transaction that wrote records or offsets; completing it touches only the
 * transaction that started at that time, with that producer id (or the id the coordinator moved to when the epoch
 * overflowed).</li>
 * <li>{@code pid:epoch:empty}: nothing was written; completing it is a no-op ({@link CompletionOutcome#EMPTY}) and
 * never touches a later transaction.</li>
 * <li>{@code pid:epoch}: the legacy form (from a {@link PreparedTxnState}); the start time is unknown, so completion
 * falls back to epoch arithmetic, which cannot tell a later transaction of the same epoch (transaction version 1, or
 * after an empty transaction) from this one. Prefer the full form.</li>
 * </ul>
 *
 * <p>Not guaranteed: two transactions of one transactional id that the coordinator starts within the same
 * millisecond can be confused: with transaction version 1 (same epoch) always, with version 2 only when the second
 * starts in the millisecond the first ended and is then aborted (the aborted later one reads as this one). The
 * coordinator's clock has millisecond resolution; nothing finer is exposed.
 *
 * <p>Immutable; {@link #toString()} is the storable form and {@link #parse(String)} reads it back.
 */
public final class PreparedTransaction {

    private static final String EMPTY = "empty";

    private final long producerId;
    private final short epoch;
    private final long startTimeMs;
    private final boolean empty;

    private PreparedTransaction(long producerId, short epoch, long startTimeMs, boolean empty) {
        this.producerId = producerId;
        this.epoch = epoch;
        this.startTimeMs = startTimeMs;
        this.empty = empty;
    }

    /**
     * A transaction that wrote records or offsets.
     *
     * @param producerId the producer id the coordinator held when it was prepared
     * @param epoch the producer epoch of the transaction
     * @param startTimeMs the coordinator's start time of the transaction, or -1 if unknown (legacy)
     * @return the identity
     * @throws IllegalArgumentException for a negative producer id or epoch
     */
    public static PreparedTransaction of(long producerId, short epoch, long startTimeMs) {
        if (producerId < 0 || epoch < 0) {
            throw new IllegalArgumentException("A prepared transaction needs a producer id and epoch >= 0, got "
                    + producerId + ":" + epoch);
        }
        return new PreparedTransaction(producerId, epoch, startTimeMs < 0 ? -1 : startTimeMs, false);
    }

    /**
     * A transaction that wrote nothing: completing it is a no-op.
     *
     * @param producerId the producer id of the session, or -1 if not known
     * @param epoch the epoch of the session, or -1 if not known
     * @return the identity
     */
    public static PreparedTransaction empty(long producerId, short epoch) {
        return new PreparedTransaction(producerId, epoch, -1, true);
    }

    /**
     * The legacy identity of Kafka's {@link PreparedTxnState}: producer id and epoch, start time unknown.
     *
     * @param state Kafka's {@code producerId:epoch} of a prepared transaction; not null, and it must name a
     *        transaction ({@link PreparedTxnState#hasTransaction()})
     * @return the legacy identity: that producer id and epoch, start time -1
     * @throws IllegalArgumentException if {@code state} names no transaction
     */
    public static PreparedTransaction from(PreparedTxnState state) {
        Objects.requireNonNull(state, "state");
        if (!state.hasTransaction()) {
            throw new IllegalArgumentException("The PreparedTxnState '" + state + "' names no transaction (it is "
                    + "Kafka's empty state); pass the PreparedTransaction that prepareTransaction() returned instead");
        }
        return of(state.producerId(), state.epoch(), -1);
    }

    /**
     * Reads the form {@link #toString()} writes: {@code pid:epoch:startTimeMs}, {@code pid:epoch:empty}, or the
     * legacy {@code pid:epoch}.
     *
     * @param text the stored form; not null; leading and trailing whitespace is ignored
     * @return the identity {@code text} names: with its start time, empty, or legacy (start time -1)
     * @throws IllegalArgumentException naming what is wrong, for anything else
     */
    public static PreparedTransaction parse(String text) {
        Objects.requireNonNull(text, "text");
        String[] parts = text.trim().split(":");
        if (parts.length < 2 || parts.length > 3) {
            throw new IllegalArgumentException("Not a prepared transaction: '" + text + "'. Expected "
                    + "'producerId:epoch:startTimeMs', 'producerId:epoch:empty' or 'producerId:epoch', as written by "
                    + "PreparedTransaction.toString()");
        }
        try {
            long pid = Long.parseLong(parts[0]);
            short epoch = Short.parseShort(parts[1]);
            if (parts.length == 2) {
                return of(pid, epoch, -1);
            }
            if (EMPTY.equals(parts[2])) {
                return empty(pid, epoch);
            }
            long start = Long.parseLong(parts[2]);
            if (start < 0) {
                throw new IllegalArgumentException("Not a prepared transaction: '" + text + "': the start time must "
                        + "be >= 0 (omit it for the legacy form)");
            }
            return of(pid, epoch, start);
        }
        catch (NumberFormatException ex) {
            throw new IllegalArgumentException("Not a prepared transaction: '" + text + "': " + ex.getMessage()
                    + ". Expected 'producerId:epoch:startTimeMs', 'producerId:epoch:empty' or 'producerId:epoch'", ex);
        }
    }

    /** @return the producer id (-1 for an empty transaction of a session whose id was not known) */
    public long producerId() {
        return this.producerId;
    }

    /** @return the producer epoch (-1 for an empty transaction of a session whose epoch was not known) */
    public short epoch() {
        return this.epoch;
    }

    /** @return the coordinator's start time of the transaction, or -1 when unknown (legacy form, or empty) */
    public long startTimeMs() {
        return this.startTimeMs;
    }

    /** @return whether the start time is known, so the identity names exactly one transaction */
    public boolean hasStartTime() {
        return this.startTimeMs >= 0;
    }

    /** @return whether the transaction wrote nothing (completing it is a no-op) */
    public boolean isEmpty() {
        return this.empty;
    }

    /**
     * @return Kafka's {@code producerId:epoch} form, for APIs that take a {@link PreparedTxnState}. It loses the
     *         start time and the empty mark; see the class description for what that costs.
     */
    public PreparedTxnState toPreparedTxnState() {
        return this.producerId < 0 || this.epoch < 0 ? new PreparedTxnState()
                : new PreparedTxnState(this.producerId + ":" + this.epoch);
    }

    /** @return whether {@code other} names the same transaction (a legacy form matches on producer id and epoch) */
    boolean sameTransaction(PreparedTransaction other) {
        if (this.empty || other.empty) {
            return this.equals(other);
        }
        if (this.producerId != other.producerId || this.epoch != other.epoch) {
            return false;
        }
        return !this.hasStartTime() || !other.hasStartTime() || this.startTimeMs == other.startTimeMs;
    }

    /** The storable form: {@code pid:epoch:startTimeMs}, {@code pid:epoch:empty} or the legacy {@code pid:epoch}. */
    @Override
    public String toString() {
        String base = this.producerId + ":" + this.epoch;
        if (this.empty) {
            return base + ":" + EMPTY;
        }
        return hasStartTime() ? base + ":" + this.startTimeMs : base;
    }

    @Override
    public boolean equals(@Nullable Object o) {
        return o instanceof PreparedTransaction p && p.producerId == this.producerId && p.epoch == this.epoch
                && p.startTimeMs == this.startTimeMs && p.empty == this.empty;
    }

    @Override
    public int hashCode() {
        return Objects.hash(this.producerId, this.epoch, this.startTimeMs, this.empty);
    }
}
