package io.github.txnsession.spring;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;
import java.util.function.IntConsumer;
import java.util.function.Supplier;

import io.github.txnsession.kafka.InvalidSessionConfigException;
import io.github.txnsession.kafka.SessionListener;
import io.github.txnsession.kafka.SessionState;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.TransactionSessionConfig;
import io.github.txnsession.kafka.fleet.FleetSlot;
import io.github.txnsession.kafka.fleet.SlotListener;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A bounded pool of live {@link TransactionSession}s with stable transactional ids: slot {@code i} always has the
 * id {@code prefix + i}, so after a restart the same ids come back and {@code initialize()} fences and aborts
 * whatever a crashed predecessor left open.
 *
 * <h2>Guarantees</h2>
 * <ul>
 * <li>At most {@link #size()} sessions exist; a session is lent to one holder at a time ({@link #acquire()} /
 * {@link PooledSession#release()}).</li>
 * <li>Sessions are created and initialized lazily, on the first acquire that finds no idle initialized session;
 * the lowest free slot is used first, so a lightly loaded application uses only the first few ids. Among idle
 * initialized sessions the one released longest ago is lent first, so that a transactional id whose transaction has
 * just ended is not reused at once: its coordinator may still be writing that transaction's markers, and a new
 * transaction on the same id would wait for them (the broker answers CONCURRENT_TRANSACTIONS and the producer
 * backs off).</li>
 * <li>When every session is in use, {@link #acquire()} waits up to the acquire timeout, then throws
 * {@link SessionPoolExhaustedException} naming the pool size and timeout; a zero timeout fails at once.</li>
 * <li>A session released with its transaction still open is aborted; a fenced, failed or closed one is closed and
 * its slot is initialized afresh on next use. A session released with its transaction <em>prepared</em> is not
 * aborted (a two-phase commit may have decided to commit it): it is abandoned, and its slot is settled by the
 * {@linkplain #setInDoubtResolver in-doubt resolver} before its id is initialized again.</li>
 * <li>{@link #close()} closes every session (open transactions are aborted); later acquires fail.</li>
 * </ul>
 *
 * <h2>Fleet mode</h2>
 * A pool built with {@link #forFleet} has the ids of a {@link io.github.txnsession.kafka.fleet.TransactionalIdFleet}
 * ({@code prefix + s + "-" + k}) and lends only those of the fleet slots this instance owns: connect
 * {@link #fleetListener()} (and {@link #setFleetSettlementRequester}) to the fleet. A slot that arrives is settled
 * (its in-doubt resolver or {@link FleetIdSettler}, then every id initialized, which aborts what the previous owner
 * left open) before it is lent; a slot that leaves is lent no more, its idle sessions are closed at once, and the
 * lent ones when they come back (waiting up to {@link #FLEET_REVOKE_TIMEOUT} for them before the slot is handed on,
 * not at all when the membership was lost; after that the next owner's initialization fences them). The pool never
 * initializes a fleet id on its own: a session closed while its slot is owned (fenced, failed, in doubt) leaves its
 * id unlent until the fleet, after confirming ownership with the group coordinator, settles the slot again. Instances
 * with identical configuration then share the ids without fencing each other.
 *
 * <h2>Not guaranteed</h2>
 * Two pools (in one process or in two instances of an application) with the same prefix fence each other's
 * sessions, unless they are in fleet mode: otherwise give every instance its own prefix. The pool does not run crash
 * recovery of prepared transactions; initializing a slot aborts whatever its id left open. In fleet mode an
 * {@link #acquire()} while this instance owns no slot waits the acquire timeout, then fails.
 */
public final class TransactionSessionPool implements AutoCloseable {

    private static final Logger log = LoggerFactory.getLogger(TransactionSessionPool.class);

    private final String prefix;
    private final int size;
    private final Duration acquireTimeout;
    private final Map<String, Object> sessionConfigs;
    private final List<SessionListener> listeners;
    private final List<SessionLifecycleListener> lifecycleListeners = new CopyOnWriteArrayList<>();
    private final Slot[] slots;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition released = this.lock.newCondition();
    /** how long {@link #close()} waits for background work already queued */
    public static final Duration BACKGROUND_DRAIN_TIMEOUT = Duration.ofSeconds(30);
    /** how long {@link #endLeftoversInBackground()} waits for the coordinator's answer about one id */
    public static final Duration LEFTOVER_LOOK_TIMEOUT = Duration.ofSeconds(10);
    /** how long a failed background settlement waits before it tries again */
    static final Duration SETTLE_RETRY = Duration.ofSeconds(5);
    /** how long a fleet slot that leaves waits for its lent sessions to come back before it is handed on */
    public static final Duration FLEET_REVOKE_TIMEOUT = Duration.ofSeconds(30);
    /** fleet mode: transactional ids per fleet slot; 0 outside a fleet */
    private final int sessionsPerFleetSlot;

    private volatile @Nullable Consumer<String> inDoubtResolver;
    /** fleet mode: asks the fleet to settle a fleet slot again (after a membership check) */
    private volatile @Nullable IntConsumer fleetSettlementRequester;
    /** fleet mode: settles one id and opens its session, e.g. under a decision-log lock; null: resolver, then open */
    private volatile @Nullable FleetIdSettler fleetIdSettler;
    /** fleet mode: slots are not settled before a {@link FleetIdSettler} is set (two-phase commit wiring) */
    private volatile boolean fleetIdSettlerRequired;
    private volatile @Nullable Runnable acquireGate;
    /** two-phase recovery settles this pool's prepared transactions: {@link #endLeftoversInBackground} does nothing */
    private volatile boolean settledByRecovery;
    /** the futures of {@link #endLeftoversInBackground} calls, completed by {@link #close()} at the latest */
    private final List<CompletableFuture<List<String>>> leftoverSweeps = new CopyOnWriteArrayList<>();
    /**
     * runs the clearing of decision rows and the settling of in-doubt slots (set by
     * {@link #setBackgroundExecutor}, or created at the first task); guarded by the pool lock
     */
    private @Nullable ExecutorService background;
    /** settles in-doubt slots (set by {@link #setBackgroundExecutors}, or created at the first); guarded by the lock */
    private @Nullable ExecutorService settler;
    /** background work submitted and not yet done; guarded by the pool lock */
    private int pendingWork;
    private final Condition workIdle = this.lock.newCondition();
    private int inUse;
    private int waiting;
    private long exhausted;
    private long replaced;
    /** counts releases, so that idle sessions can be lent least recently released first */
    private long releases;
    private boolean closed;

    /**
     * @param transactionalIdPrefix prefix of the transactional ids; slot {@code i} uses {@code prefix + i}
     * @param size the number of sessions, at least 1
     * @param acquireTimeout how long {@link #acquire()} waits for a free session; zero fails at once
     * @param sessionConfigs configs of every session: {@code bootstrap.servers}, security and producer tuning, and
     *        the session keys of {@code TransactionSessionConfig}; {@code transactional.id} must not be set
     * @param listeners told about lost or fenced transactions that a session's background heartbeat finds
     * @throws IllegalArgumentException naming the argument, if one is invalid
     */
    public TransactionSessionPool(String transactionalIdPrefix, int size, Duration acquireTimeout,
            Map<String, ?> sessionConfigs, List<? extends SessionListener> listeners) {
        this(transactionalIdPrefix, size, 0, acquireTimeout, sessionConfigs, listeners);
    }

    /**
     * A pool in fleet mode: one slot per id of a {@link io.github.txnsession.kafka.fleet.TransactionalIdFleet} with
     * the same prefix, slot count and sessions per slot, lending only the ids of the fleet slots this instance owns.
     * Connect it with {@code TransactionalIdFleet.builder(prefix, configs).listener(pool.fleetListener())}.
     *
     * @param transactionalIdPrefix the fleet's prefix; ids are {@code prefix + s + "-" + k}
     * @param fleetSlots the fleet's slot count, at least 1
     * @param sessionsPerFleetSlot the fleet's ids per slot, at least 1
     * @param acquireTimeout how long {@link #acquire()} waits for a free session of an owned slot
     * @param sessionConfigs configs of every session, as for the other constructor
     * @param listeners told about lost or fenced transactions that a session's background heartbeat finds
     * @return the pool; it lends nothing until the fleet assigns it slots
     * @throws IllegalArgumentException naming the argument, if one is invalid
     */
    public static TransactionSessionPool forFleet(String transactionalIdPrefix, int fleetSlots,
            int sessionsPerFleetSlot, Duration acquireTimeout, Map<String, ?> sessionConfigs,
            List<? extends SessionListener> listeners) {
        if (fleetSlots < 1 || sessionsPerFleetSlot < 1) {
            throw new IllegalArgumentException("fleet slots and sessions per slot must be at least 1, were "
                    + fleetSlots + " and " + sessionsPerFleetSlot);
        }
        return new TransactionSessionPool(transactionalIdPrefix, Math.multiplyExact(fleetSlots, sessionsPerFleetSlot),
                sessionsPerFleetSlot, acquireTimeout, sessionConfigs, listeners);
    }

    private TransactionSessionPool(String transactionalIdPrefix, int size, int sessionsPerFleetSlot,
            Duration acquireTimeout, Map<String, ?> sessionConfigs, List<? extends SessionListener> listeners) {
        Objects.requireNonNull(transactionalIdPrefix, "transactionalIdPrefix");
        Objects.requireNonNull(acquireTimeout, "acquireTimeout");
        Objects.requireNonNull(sessionConfigs, "sessionConfigs");
        if (transactionalIdPrefix.isBlank()) {
            throw new IllegalArgumentException("transactionalIdPrefix must not be empty: the transactional ids are the "
                    + "prefix followed by the slot index, and must be unique per application instance");
        }
        if (size < 1) {
            throw new IllegalArgumentException("size must be at least 1, was " + size);
        }
        if (acquireTimeout.isNegative()) {
            throw new IllegalArgumentException("acquireTimeout must not be negative, was " + acquireTimeout);
        }
        if (sessionConfigs.containsKey(ProducerConfig.TRANSACTIONAL_ID_CONFIG)) {
            throw new InvalidSessionConfigException(ProducerConfig.TRANSACTIONAL_ID_CONFIG,
                    sessionConfigs.get(ProducerConfig.TRANSACTIONAL_ID_CONFIG), "A session pool sets the transactional "
                            + "id of each session itself (prefix + index): remove transactional.id from the configs "
                            + "and set the prefix instead");
        }
        this.prefix = transactionalIdPrefix;
        this.size = size;
        this.acquireTimeout = acquireTimeout;
        this.sessionConfigs = Map.copyOf(new HashMap<>(sessionConfigs));
        this.listeners = List.copyOf(Objects.requireNonNull(listeners, "listeners"));
        this.sessionsPerFleetSlot = sessionsPerFleetSlot;
        this.slots = new Slot[size];
        for (int i = 0; i < size; i++) {
            if (sessionsPerFleetSlot == 0) {
                this.slots[i] = new Slot(i, transactionalIdPrefix + i, -1);
            }
            else {
                int fleetSlot = i / sessionsPerFleetSlot;
                this.slots[i] = new Slot(i, FleetSlot.transactionalId(transactionalIdPrefix, fleetSlot,
                        i % sessionsPerFleetSlot), fleetSlot);
            }
        }
    }

    /** @return the transactional id prefix */
    public String transactionalIdPrefix() {
        return this.prefix;
    }

    /** @return the maximum number of sessions */
    public int size() {
        return this.size;
    }

    /** @return how long {@link #acquire()} waits for a free session */
    public Duration acquireTimeout() {
        return this.acquireTimeout;
    }

    /** @return the configs every session is created with (without its transactional id) */
    public Map<String, Object> sessionConfigs() {
        return this.sessionConfigs;
    }

    /**
     * Lends a session, initializing it first if its slot has none yet. Waits up to the acquire timeout when all
     * sessions are in use.
     *
     * @return the lease; release it in a {@code finally}
     * @throws SessionPoolExhaustedException if no session became free in time
     * @throws IllegalStateException if the pool is closed
     * @throws io.github.txnsession.kafka.TransactionSessionException if a new session could not be initialized
     */
    public PooledSession acquire() {
        Runnable gate = this.acquireGate;
        if (gate != null) {
            gate.run();
        }
        Slot slot;
        long remaining = this.acquireTimeout.toNanos();
        this.lock.lock();
        try {
            while (true) {
                ensureOpen();
                slot = pickFreeSlot();
                if (slot != null) {
                    slot.owner = Thread.currentThread();
                    this.inUse++;
                    break;
                }
                if (remaining <= 0) {
                    this.exhausted++;
                    if (isFleet()) {
                        throw new SessionPoolExhaustedException("The " + ownedCount() + " transaction sessions of "
                                + "the fleet slots this instance owns (pool '" + this.prefix + "') stayed in use for "
                                + this.acquireTimeout.toMillis() + " ms (holders: " + holders() + "). "
                                + (ownedCount() == 0 ? "This instance owns no fleet slot yet: the fleet is starting "
                                        + "or rebalancing, or more instances run than kafka.txn-session.fleet.slots. "
                                        : "Raise kafka.txn-session.fleet.sessions-per-slot or the acquire timeout, or "
                                                + "keep transactions shorter."));
                    }
                    throw new SessionPoolExhaustedException("All " + this.size + " transaction sessions of pool '"
                            + this.prefix + "' stayed in use for " + this.acquireTimeout.toMillis() + " ms (holders: "
                            + holders() + "). Raise the pool size or the acquire timeout "
                            + "(kafka.txn-session.pool-size, kafka.txn-session.acquire-timeout), or keep "
                            + "transactions shorter.");
                }
                this.waiting++;
                try {
                    remaining = this.released.awaitNanos(remaining);
                }
                catch (InterruptedException ex) {
                    Thread.currentThread().interrupt();
                    throw new SessionPoolExhaustedException("Interrupted while waiting for a session of pool '"
                            + this.prefix + "'");
                }
                finally {
                    this.waiting--;
                }
            }
        }
        finally {
            this.lock.unlock();
        }
        TransactionSession session = slot.session;
        if (session == null) {
            try {
                settleIfInDoubt(slot);
                session = createSession(slot.transactionalId);
            }
            catch (RuntimeException ex) {
                giveBack(slot, null);
                if (slot.inDoubt) {
                    scheduleSettlement(slot, SETTLE_RETRY); // its settlement failed: keep trying in the background
                }
                throw ex;
            }
            slot.session = session;
        }
        return new PooledSession(this, session, slot.index);
    }

    /**
     * A slot whose last session was released with a prepared transaction: initializing its id would abort that
     * transaction, so the resolver (two-phase recovery) settles it first. Without a resolver nobody can know the
     * decision, and the initialization aborts it, as a restart would. Called by the slot's new owner.
     */
    private void settleIfInDoubt(Slot slot) {
        if (!slot.inDoubt) {
            return;
        }
        Consumer<String> resolver = this.inDoubtResolver;
        if (resolver == null) {
            log.warn("Transaction session '{}': its previous session left a prepared transaction and no in-doubt "
                    + "resolver is set; initializing the id aborts it", slot.transactionalId);
        }
        else {
            resolver.accept(slot.transactionalId); // throws if it cannot settle now: the slot stays in doubt
        }
        slot.inDoubt = false;
    }

    /**
     * Runs {@code action} for {@code transactionalId} while no session of the pool can be lent for it: two-phase
     * recovery settles an id this way, so that a session cannot begin, write and prepare on the id while recovery
     * aborts or completes what the id had left. An id outside the pool runs at once.
     *
     * @param transactionalId the transactional id to hold back, usually one of the pool's
     * @param action what to run on the calling thread while the id is held back; what it throws is passed on (the id
     *        is lendable again either way)
     * @return false, without running it, if a session of the pool is in use for the id right now
     */
    public boolean runIfIdle(String transactionalId, Runnable action) {
        Slot slot = slotOf(transactionalId);
        if (slot == null) {
            action.run();
            return true;
        }
        this.lock.lock();
        try {
            if (slot.owner != null) {
                return false;
            }
            slot.owner = Thread.currentThread(); // reserved: pickFreeSlot skips it
        }
        finally {
            this.lock.unlock();
        }
        try {
            action.run();
            return true;
        }
        finally {
            this.lock.lock();
            try {
                slot.owner = null;
                this.released.signalAll();
            }
            finally {
                this.lock.unlock();
            }
        }
    }

    /**
     * Ends, in the background, what a crashed predecessor with the same prefix left open on those of the pool's ids
     * that no session of this pool holds yet. The starter calls it at startup in Kafka-only mode.
     *
     * <p>Why: a pool initializes its ids lazily, and initializing is what ends a leftover. An id the restarted
     * application does not need soon keeps its leftover transaction open until Kafka's transaction timeout, and with
     * it the consumer offsets that transaction sent: a {@code read_committed} consumer of that group cannot read its
     * committed offsets while they are pending, so the partitions the crashed process was processing stay stuck
     * (seen: a restarted {@code @KafkaListener} application got its partitions 60 s after the crash, the default
     * {@code transaction.timeout.ms}).
     *
     * <p>How: on the settlement executor, each id is looked at (DescribeTransactions, at most
     * {@link #LEFTOVER_LOOK_TIMEOUT}) while its slot is reserved, highest slot first (the lowest are lent first);
     * an id with an open transaction is initialized then, exactly as its first use would do it: that fences the
     * predecessor (a paused one cannot go on writing; with transaction version 1 a bare abort would not fence it) and
     * aborts what it left open, or lets the coordinator finish a commit it had already decided. The initialized
     * session stays in the pool, idle.
     *
     * <p>Left alone: an id that has a session (it was initialized already), is in doubt, or is wanted by an
     * {@link #acquire()} waiting at that moment (it initializes the id itself); the whole pool in fleet mode (a fleet
     * settles each slot as it arrives) and when its prepared transactions are settled elsewhere
     * ({@linkplain #setInDoubtResolver in-doubt resolver} or {@linkplain #setAcquireGate acquire gate} set, or
     * {@link #settledByRecovery()} called: two-phase commit, where a prepared transaction may have to be committed).
     * An id that cannot be looked at in time (brokers unreachable) is logged and left to the transaction timeout.
     *
     * @return completes with the ids that had an open transaction and were initialized (also when the pool closes
     *         first: then with none); never exceptionally
     */
    public CompletableFuture<List<String>> endLeftoversInBackground() {
        CompletableFuture<List<String>> done = new CompletableFuture<>();
        if (leftoversSettledElsewhere()) {
            log.debug("Transaction session pool '{}': leftovers are settled by {}", this.prefix,
                    isFleet() ? "the fleet" : "two-phase recovery");
            done.complete(List.of());
            return done;
        }
        ExecutorService lane;
        this.lock.lock();
        try {
            if (this.closed) {
                done.complete(List.of());
                return done;
            }
            if (this.settler == null) {
                this.settler = daemonThreads(1, "txn-session-settler-" + this.prefix);
            }
            lane = this.settler;
            this.leftoverSweeps.add(done); // completed by close() if the executor drops the task
            done.whenComplete((ids, ex) -> this.leftoverSweeps.remove(done));
        }
        finally {
            this.lock.unlock();
        }
        try {
            lane.execute(() -> done.complete(endLeftovers()));
        }
        catch (RejectedExecutionException ex) {
            log.warn("Transaction session pool '{}': could not look for transactions left open by a predecessor "
                    + "({}); they end at their transaction timeout", this.prefix, ex.toString());
            done.complete(List.of());
        }
        return done;
    }

    /**
     * Tells the pool that its prepared transactions are settled by two-phase recovery, so that
     * {@link #endLeftoversInBackground()} leaves its ids alone. {@code TwoPhaseRecovery} calls it for its pool.
     */
    public void settledByRecovery() {
        this.settledByRecovery = true;
    }

    private boolean leftoversSettledElsewhere() {
        return isFleet() || this.settledByRecovery || this.inDoubtResolver != null || this.acquireGate != null;
    }

    private List<String> endLeftovers() {
        List<String> ended = new ArrayList<>();
        Map<String, Object> lookConfigs = new HashMap<>(this.sessionConfigs);
        lookConfigs.put(TransactionSessionConfig.COORDINATOR_TIMEOUT_MS, LEFTOVER_LOOK_TIMEOUT.toMillis());
        for (int i = this.slots.length - 1; i >= 0; i--) {
            Slot slot = this.slots[i];
            if (leftoversSettledElsewhere() || !reserveUninitialized(slot)) {
                continue;
            }
            TransactionSession initialized = null;
            try {
                Optional<TransactionSession> open = TransactionSession.resumeOpen(slot.transactionalId, lookConfigs);
                if (open.isPresent()) {
                    open.get().abandon(); // only looked at: initializing the id ends it
                    initialized = createSession(slot.transactionalId);
                    ended.add(slot.transactionalId);
                }
            }
            catch (RuntimeException ex) {
                if (isClosed()) {
                    break; // closing: the next start looks again
                }
                log.warn("Transaction session pool '{}': could not end what '{}' left open ({}); it ends at its "
                        + "transaction timeout, or when the pool first uses the id", this.prefix,
                        slot.transactionalId, ex.toString());
            }
            finally {
                giveBackReserved(slot, initialized);
            }
        }
        if (!ended.isEmpty()) {
            log.info("Transaction session pool '{}': fenced and ended the transactions a predecessor left open on {}",
                    this.prefix, ended);
        }
        return ended;
    }

    /**
     * Reserves the slot (pickFreeSlot skips it) if it is idle, has no session, is not in doubt, and no acquire is
     * waiting for a session (it may need this slot).
     */
    private boolean reserveUninitialized(Slot slot) {
        this.lock.lock();
        try {
            if (this.closed || slot.owner != null || slot.session != null || slot.inDoubt || !slot.owned
                    || this.waiting > 0) {
                return false;
            }
            slot.owner = Thread.currentThread();
            return true;
        }
        finally {
            this.lock.unlock();
        }
    }

    /** Ends a reservation; {@code session}, when not null, becomes the slot's idle session (closed if the pool is). */
    private void giveBackReserved(Slot slot, @Nullable TransactionSession session) {
        boolean close = false;
        this.lock.lock();
        try {
            if (session != null) {
                if (this.closed) {
                    close = true;
                }
                else {
                    slot.session = session;
                }
            }
            slot.owner = null;
            this.released.signalAll();
        }
        finally {
            this.lock.unlock();
        }
        if (close) {
            closeQuietly(session);
        }
    }

    private boolean isClosed() {
        this.lock.lock();
        try {
            return this.closed;
        }
        finally {
            this.lock.unlock();
        }
    }

    /**
     * Marks the slot of {@code transactionalId} in doubt: its id may hold a prepared transaction that must be settled
     * (by the {@linkplain #setInDoubtResolver resolver}) before the id is initialized again. An idle session of the
     * slot is closed.
     *
     * @param transactionalId the id of one of the pool's slots; an id outside the pool is ignored
     */
    public void markInDoubt(String transactionalId) {
        Slot slot = slotOf(transactionalId);
        if (slot == null) {
            return;
        }
        TransactionSession idle = null;
        this.lock.lock();
        try {
            slot.inDoubt = true;
            if (slot.owner == null && slot.session != null) {
                idle = slot.session;
                slot.session = null;
            }
        }
        finally {
            this.lock.unlock();
        }
        if (idle != null) {
            abandonQuietly(idle);
        }
        if (slot.fleetSlot >= 0) {
            if (slot.owned) {
                requestFleetSettlement(slot);
            }
            return; // another instance's slot: its owner settles it
        }
        scheduleSettlement(slot, SETTLE_RETRY);
    }

    /**
     * Sets the executors of the pool's background work, before the pool is used. The pool shuts them down when it
     * closes, after waiting (up to {@link #BACKGROUND_DRAIN_TIMEOUT}) for the work already queued. Without them, the
     * pool creates daemon threads of its own when it first needs them. The starter passes executors built with Boot's
     * {@code ThreadPoolTaskExecutorBuilder} (task decorators apply). Give the pool executors of its own: a session
     * stays lent until its work is done, so that work must not queue behind the application's.
     *
     * @param work runs what follows a two-phase commit (the decision row's clearing; with
     *        {@link SessionEnlistment#setCompleteInBackground} the Kafka commit too): each lent session has at most one
     *        such task, so up to {@link #size()} threads are useful; it should not reject tasks while open
     * @param settlement settles in-doubt slots (a resumed session, the decision log): separate from {@code work}, so
     *        that settlements blocked on an unreachable coordinator or database do not hold up the sessions whose
     *        work is queued; one thread is enough
     * @throws IllegalStateException if the pool has already run background work, or is closed
     */
    public void setBackgroundExecutors(ExecutorService work, ExecutorService settlement) {
        Objects.requireNonNull(work, "work");
        Objects.requireNonNull(settlement, "settlement");
        this.lock.lock();
        try {
            if (this.closed || this.background != null || this.settler != null) {
                throw new IllegalStateException("Transaction session pool '" + this.prefix + "': set the background "
                        + "executors before the pool is used" + (this.closed ? " (the pool is closed)" : ""));
            }
            this.background = work;
            this.settler = settlement;
        }
        finally {
            this.lock.unlock();
        }
    }

    /**
     * Runs {@code task} on the pool's work executor ({@link #setBackgroundExecutors}; by default up to {@link #size()}
     * daemon threads, created when needed and ended when idle): two-phase decision rows are cleared there after the
     * Kafka commit, off the committing thread. {@link #close()} waits for such tasks.
     *
     * @param task the work to run on the work executor; {@link #awaitBackgroundWork} counts it until it ends
     * @throws java.util.concurrent.RejectedExecutionException once the pool is closed, or if the executor refuses
     */
    public void runInBackground(Runnable task) {
        ExecutorService executor;
        this.lock.lock();
        try {
            if (this.closed) {
                throw new RejectedExecutionException("Transaction session pool '" + this.prefix + "' is closed");
            }
            if (this.background == null) {
                this.background = daemonThreads(this.size, "txn-session-background-" + this.prefix);
            }
            executor = this.background;
            this.pendingWork++;
        }
        finally {
            this.lock.unlock();
        }
        try {
            executor.execute(() -> {
                try {
                    task.run();
                }
                finally {
                    workDone();
                }
            });
        }
        catch (RuntimeException ex) {
            workDone();
            throw ex;
        }
    }

    private void workDone() {
        this.lock.lock();
        try {
            this.pendingWork--;
            this.workIdle.signalAll();
        }
        finally {
            this.lock.unlock();
        }
    }

    /**
     * Waits until the background work queued so far (see {@link #runInBackground}) is done: the starter calls it
     * while the application's {@code DataSource} is still open, so that decision rows are cleared (and Kafka commits
     * completed in the background are carried out) before the database goes away.
     *
     * @param timeout how long to wait at most; zero or negative only checks
     * @return whether the work was done within {@code timeout} (false too if the waiting thread is interrupted)
     */
    public boolean awaitBackgroundWork(Duration timeout) {
        long remaining = Objects.requireNonNull(timeout, "timeout").toNanos();
        this.lock.lock();
        try {
            while (this.pendingWork > 0) {
                if (remaining <= 0) {
                    return false;
                }
                remaining = this.workIdle.awaitNanos(remaining);
            }
            return true;
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            return false;
        }
        finally {
            this.lock.unlock();
        }
    }

    private static ExecutorService daemonThreads(int threads, String name) {
        ThreadPoolExecutor executor = new ThreadPoolExecutor(threads, threads, 60, TimeUnit.SECONDS,
                new LinkedBlockingQueue<>(), r -> {
                    Thread t = new Thread(r, name);
                    t.setDaemon(true);
                    return t;
                });
        executor.allowCoreThreadTimeOut(true);
        return executor;
    }

    /**
     * Settles an in-doubt slot in the background instead of waiting for its next use: its prepared transaction holds
     * back the last stable offset of its partitions (read_committed readers see nothing newer) until it is completed,
     * and the broker aborts it at its timeout. Retried every {@link #SETTLE_RETRY} while the resolver fails (the
     * database is unreachable, say); skipped while the slot is lent (its new owner settles it first).
     */
    private void scheduleSettlement(Slot slot, Duration delay) {
        if (this.inDoubtResolver == null) {
            return;
        }
        ExecutorService lane;
        this.lock.lock();
        try {
            if (this.closed || slot.settlementScheduled) {
                return; // one retry chain per slot
            }
            slot.settlementScheduled = true;
            if (this.settler == null) {
                this.settler = daemonThreads(1, "txn-session-settler-" + this.prefix);
            }
            lane = this.settler;
        }
        finally {
            this.lock.unlock();
        }
        // the delay on the JDK's shared delay thread (it only hands the task over); the settling on the pool's lane
        CompletableFuture.delayedExecutor(delay.toMillis(), TimeUnit.MILLISECONDS, task -> {
            try {
                lane.execute(task);
            }
            catch (RejectedExecutionException ex) {
                settlementRejected(slot, ex);
            }
        }).execute(() -> settleInBackground(slot));
    }

    /** The settlement executor refused: unless the pool closed meanwhile, the slot must still be settled. */
    private void settlementRejected(Slot slot, RejectedExecutionException ex) {
        this.lock.lock();
        try {
            slot.settlementScheduled = false;
            if (this.closed) {
                return; // recovery at the next start settles it
            }
        }
        finally {
            this.lock.unlock();
        }
        log.warn("Transaction session '{}': the settlement executor refused its in-doubt settlement ({}); retrying in "
                + "{} s", slot.transactionalId, ex.toString(), SETTLE_RETRY.toSeconds());
        scheduleSettlement(slot, SETTLE_RETRY);
    }

    private void settleInBackground(Slot slot) {
        this.lock.lock();
        try {
            slot.settlementScheduled = false;
            if (this.closed) {
                return;
            }
        }
        finally {
            this.lock.unlock();
        }
        if (!slot.inDoubt) {
            return;
        }
        try {
            boolean ran = runIfIdle(slot.transactionalId, () -> settleIfInDoubt(slot));
            if (ran) {
                log.info("Transaction session '{}': its in-doubt transaction was settled", slot.transactionalId);
            }
            else if (slot.inDoubt) {
                // lent right now: its new owner settles it first; if that fails, try again later
                scheduleSettlement(slot, SETTLE_RETRY);
            }
        }
        catch (RuntimeException ex) {
            log.warn("Transaction session '{}': settling its in-doubt transaction failed ({}); retrying in {} s",
                    slot.transactionalId, ex.toString(), SETTLE_RETRY.toSeconds());
            scheduleSettlement(slot, SETTLE_RETRY);
        }
    }

    private @Nullable Slot slotOf(String transactionalId) {
        for (Slot s : this.slots) {
            if (s.transactionalId.equals(transactionalId)) {
                return s;
            }
        }
        return null;
    }

    /**
     * Sets what must have run before any session is lent: the JDBC two-phase commit sets its startup recovery here,
     * so that no code (a send from a {@code @PostConstruct} method, an {@code executeInTransaction} before the
     * application started) initializes a transactional id, which aborts its open transaction, before recovery read
     * the decision log. It runs at every {@link #acquire()}: make it cheap once done; it throws to refuse the session.
     *
     * @param gate run at the start of {@link #acquire()}, or null for none
     */
    public void setAcquireGate(@Nullable Runnable gate) {
        this.acquireGate = gate;
    }

    /**
     * Sets what settles the transactional id of a slot whose session was released with a prepared transaction,
     * before that id is initialized again (initializing aborts an open transaction). The JDBC two-phase commit sets
     * its recovery here. It must throw if it cannot settle the id now.
     *
     * @param resolver settles the transactional id it is given; null for none (initializing the id then aborts the
     *        prepared transaction, with a warning)
     */
    public void setInDoubtResolver(@Nullable Consumer<String> resolver) {
        this.inDoubtResolver = resolver;
    }

    private TransactionSession createSession(String transactionalId) {
        Map<String, Object> configs = new HashMap<>(this.sessionConfigs);
        configs.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        TransactionSession session = TransactionSession.open(configs);
        try {
            this.listeners.forEach(session::addListener);
            session.initialize();
        }
        catch (RuntimeException ex) {
            session.close(Duration.ZERO);
            throw ex;
        }
        log.debug("Initialized transaction session '{}'", transactionalId);
        for (SessionLifecycleListener l : this.lifecycleListeners) {
            try {
                l.sessionOpened(session);
            }
            catch (RuntimeException ex) {
                log.warn("Session lifecycle listener {} failed: {}", l, ex.toString());
            }
        }
        return session;
    }

    void release(PooledSession lease) {
        Slot slot = this.slots[lease.index()];
        TransactionSession session = lease.session();
        TransactionSession keep = session;
        SessionState state = session.state();
        if (state == SessionState.PREPARED) {
            // a prepared transaction may be decided elsewhere (a two-phase commit wrote its decision): never abort it
            // here; the slot is settled before its id is initialized again
            log.warn("Transaction session '{}' was released with its transaction prepared ({}): leaving it for "
                    + "recovery, the slot is settled before its next use", session.transactionalId(),
                    session.currentTransaction().map(Object::toString).orElse("?"));
            giveBackInDoubt(slot, session);
            return;
        }
        boolean open = state == SessionState.IN_TRANSACTION || state == SessionState.ABORTABLE_ERROR;
        if (open) {
            try {
                session.abortTransaction();
                log.debug("Transaction session '{}' was released with its transaction {}: aborted it",
                        session.transactionalId(), state);
            }
            catch (RuntimeException ex) {
                log.warn("Transaction session '{}': abort on release failed ({}); closing it", session.transactionalId(),
                        ex.toString());
            }
        }
        if (slot.fleetSlot >= 0 && slot.inDoubt && session.state() == SessionState.READY) {
            // marked while lent (a decision refused by a fleet fence, say): not lent again as it is; the fleet
            // settles the id again once it confirmed this instance still owns the slot
            log.info("Transaction session '{}' was marked in doubt while in use; its fleet slot is settled again",
                    session.transactionalId());
            giveBackInDoubt(slot, session);
            return;
        }
        if (session.state() != SessionState.READY) {
            log.warn("Transaction session '{}' is {} after use; closing it, its slot starts a new session "
                    + (slot.fleetSlot >= 0 ? "once the fleet confirmed this instance still owns it" : "on next use")
                    + (session.state() == SessionState.FATAL_ERROR ? " (if it was fenced, check that no other "
                            + "application instance uses the transactional id prefix '" + this.prefix + "')" : ""),
                    session.transactionalId(), session.state());
            closeQuietly(session);
            keep = null;
        }
        giveBack(slot, keep);
    }

    void releaseInDoubt(PooledSession lease) {
        Slot slot = this.slots[lease.index()];
        log.info("Transaction session '{}' was given back in doubt; its id is settled from the decision log before "
                + "it is used again", lease.session().transactionalId());
        giveBackInDoubt(slot, lease.session());
    }

    private void giveBackInDoubt(Slot slot, TransactionSession session) {
        abandonQuietly(session);
        slot.inDoubt = true;
        giveBack(slot, null);
        // not at once: a database commit whose outcome was unknown may still be landing. A fleet slot this instance
        // no longer owns is settled by its next owner.
        if (slot.fleetSlot >= 0) {
            return; // giveBack asked the fleet to settle it again: its thread runs the resolver, after a check
        }
        scheduleSettlement(slot, SETTLE_RETRY);
    }

    private void giveBack(Slot slot, @Nullable TransactionSession keep) {
        boolean closeNow = false;
        boolean resettle;
        this.lock.lock();
        try {
            if (keep == null && slot.session != null && !this.closed) {
                this.replaced++;
            }
            slot.session = keep;
            slot.owner = null;
            slot.releasedSeq = ++this.releases;
            this.inUse--;
            // a fleet slot that left while the session was lent: its next owner initializes the id
            closeNow = (this.closed || !slot.owned) && keep != null;
            if (closeNow) {
                slot.session = null;
            }
            resettle = slot.fleetSlot >= 0 && slot.owned && keep == null && !this.closed;
            this.released.signalAll(); // acquirers, and a fleet slot's revocation waiting for its sessions
        }
        finally {
            this.lock.unlock();
        }
        if (closeNow) {
            closeQuietly(keep);
        }
        if (resettle) {
            requestFleetSettlement(slot);
        }
    }

    /** Fleet mode: the slot's session was closed; the fleet initializes its id again once it confirmed ownership. */
    private void requestFleetSettlement(Slot slot) {
        IntConsumer requester = this.fleetSettlementRequester;
        if (requester != null) {
            requester.accept(slot.fleetSlot);
        }
        else {
            log.warn("Transaction session '{}' was closed and no fleet is connected to settle it again (set "
                    + "setFleetSettlementRequester): the id stays unused until its fleet slot is assigned again",
                    slot.transactionalId);
        }
    }

    /**
     * The idle initialized slot released longest ago, else the lowest idle uninitialized slot. Lock held.
     */
    private @Nullable Slot pickFreeSlot() {
        Slot initialized = null;
        Slot uninitialized = null;
        for (Slot s : this.slots) {
            // in fleet mode only settled slots are lent: an id is initialized by the fleet's thread, never here
            if (s.owner == null && s.owned && (s.session != null || s.fleetSlot < 0)) {
                if (s.session != null) {
                    if (initialized == null || s.releasedSeq < initialized.releasedSeq) {
                        initialized = s;
                    }
                }
                else if (uninitialized == null) {
                    uninitialized = s;
                }
            }
        }
        return initialized != null ? initialized : uninitialized;
    }

    private String holders() {
        List<String> names = new ArrayList<>();
        for (Slot s : this.slots) {
            Thread owner = s.owner;
            if (owner != null) {
                names.add(s.transactionalId + "@" + owner.getName());
            }
        }
        return String.join(", ", names);
    }

    /**
     * @param transactionalId a transactional id
     * @return whether a session of this pool (idle or lent) lives on that id: its initialization fenced every earlier
     *         producer of the id
     */
    public boolean hasSession(String transactionalId) {
        Slot slot = slotOf(transactionalId);
        return slot != null && slot.session != null;
    }

    /**
     * @param transactionalId a transactional id
     * @return whether the pool holds that id in doubt: its last session was released with a prepared transaction
     *         that only the {@linkplain #setInDoubtResolver in-doubt resolver} may settle
     */
    public boolean isInDoubt(String transactionalId) {
        Slot slot = slotOf(transactionalId);
        return slot != null && slot.inDoubt;
    }

    /**
     * @return the transactional ids whose slot has a session now (idle or lent) or is being lent: those ids belong to
     *         this pool's live sessions, so recovery run while the application is up must leave them alone
     */
    public java.util.Set<String> activeTransactionalIds() {
        this.lock.lock();
        try {
            java.util.Set<String> ids = new java.util.TreeSet<>();
            for (Slot s : this.slots) {
                if (s.session != null || s.owner != null) {
                    ids.add(s.transactionalId);
                }
            }
            return ids;
        }
        finally {
            this.lock.unlock();
        }
    }

    /** @return the pool's current figures */
    public SessionPoolSnapshot snapshot() {
        this.lock.lock();
        try {
            int initialized = 0;
            for (Slot s : this.slots) {
                if (s.session != null) {
                    initialized++;
                }
            }
            return new SessionPoolSnapshot(this.size, initialized, this.inUse, this.waiting, this.exhausted,
                    this.replaced, this.closed);
        }
        finally {
            this.lock.unlock();
        }
    }

    /**
     * Waits (up to {@link #BACKGROUND_DRAIN_TIMEOUT}) for the background work already queued, then closes every idle
     * session now, and every lent session when it comes back (a session in use is closed right away too, which aborts
     * its open transaction; one lent with a prepared transaction is left for recovery). Later {@link #acquire()} calls
     * fail. Idempotent.
     */
    @Override
    public void close() {
        // what follows a commit (clearing its decision row, completing its Kafka side) must not be cut off
        if (!awaitBackgroundWork(BACKGROUND_DRAIN_TIMEOUT)) {
            log.warn("Transaction session pool '{}': background work still running after {} s; closing anyway (what "
                    + "it leaves is settled by recovery at the next start)", this.prefix,
                    BACKGROUND_DRAIN_TIMEOUT.toSeconds());
        }
        List<TransactionSession> toClose = new ArrayList<>();
        List<TransactionSession> toAbandon = new ArrayList<>();
        this.lock.lock();
        try {
            if (this.closed) {
                return;
            }
            this.closed = true;
            if (this.background != null) {
                this.background.shutdown(); // work already queued still runs (and was waited for above)
            }
            if (this.settler != null) {
                this.settler.shutdownNow(); // recovery at the next start settles what is left in doubt
            }
            for (Slot s : this.slots) {
                TransactionSession session = s.session;
                if (session == null) {
                    continue;
                }
                if (s.owner == null) {
                    toClose.add(session);
                    s.session = null;
                }
                else if (session.state() == SessionState.PREPARED) {
                    // lent and prepared: a two-phase commit may have decided it; closing would abort it
                    toAbandon.add(session);
                }
                else {
                    toClose.add(session);
                }
            }
            this.released.signalAll();
        }
        finally {
            this.lock.unlock();
        }
        toClose.forEach(this::closeQuietly);
        this.leftoverSweeps.forEach(f -> f.complete(List.of()));
        for (TransactionSession session : toAbandon) {
            log.warn("Transaction session '{}' is lent with a prepared transaction while the pool closes: left for "
                    + "recovery, not aborted", session.transactionalId());
            abandonQuietly(session);
        }
        log.info("Closed transaction session pool '{}' ({} session(s))", this.prefix, toClose.size());
    }

    private void ensureOpen() {
        if (this.closed) {
            throw new IllegalStateException("Transaction session pool '" + this.prefix + "' is closed (the application "
                    + "is shutting down); no new transaction can start");
        }
    }

    private void closeQuietly(@Nullable TransactionSession session) {
        if (session == null) {
            return;
        }
        try {
            session.close();
        }
        catch (RuntimeException ex) {
            log.warn("Closing transaction session '{}' failed: {}", session.transactionalId(), ex.toString());
        }
        closed(session);
    }

    /** Closes without ending the transaction (it may be decided elsewhere). */
    private void abandonQuietly(TransactionSession session) {
        try {
            session.abandon();
        }
        catch (RuntimeException ex) {
            log.warn("Closing transaction session '{}' failed: {}", session.transactionalId(), ex.toString());
        }
        closed(session);
    }

    private void closed(TransactionSession session) {
        for (SessionLifecycleListener l : this.lifecycleListeners) {
            try {
                l.sessionClosed(session);
            }
            catch (RuntimeException ex) {
                log.warn("Session lifecycle listener {} failed: {}", l, ex.toString());
            }
        }
    }

    /**
     * @param listener told when the pool opens (initializes) a session and when it closes one: for client metrics
     *        of the sessions' producers, say. Sessions opened before it was added are not reported.
     */
    public void addLifecycleListener(SessionLifecycleListener listener) {
        this.lifecycleListeners.add(Objects.requireNonNull(listener, "listener"));
    }

    /** Told when a pool opens or closes one of its sessions; called on the thread doing it, must not block. */
    public interface SessionLifecycleListener {

        /** @param session initialized, about to be lent for the first time */
        default void sessionOpened(TransactionSession session) {
        }

        /** @param session closed or abandoned by the pool */
        default void sessionClosed(TransactionSession session) {
        }
    }

    @Override
    public String toString() {
        if (isFleet()) {
            return "TransactionSessionPool[fleet " + this.prefix + ", " + this.size / this.sessionsPerFleetSlot
                    + " slots x " + this.sessionsPerFleetSlot + "]";
        }
        return "TransactionSessionPool[" + this.prefix + "0.." + this.prefix + (this.size - 1) + "]";
    }

    /** @return whether this pool was built with {@link #forFleet} */
    public boolean isFleet() {
        return this.sessionsPerFleetSlot > 0;
    }

    /** @return the fleet slots this instance owns and has settled (empty outside a fleet) */
    public java.util.SortedSet<Integer> ownedFleetSlots() {
        java.util.SortedSet<Integer> owned = new java.util.TreeSet<>();
        this.lock.lock();
        try {
            for (Slot s : this.slots) {
                if (s.fleetSlot >= 0 && s.owned) {
                    owned.add(s.fleetSlot);
                }
            }
        }
        finally {
            this.lock.unlock();
        }
        return owned;
    }

    /** @return every transactional id of the pool (in fleet mode: of every slot of the fleet), in slot order */
    public List<String> transactionalIds() {
        List<String> ids = new ArrayList<>(this.slots.length);
        for (Slot s : this.slots) {
            ids.add(s.transactionalId);
        }
        return ids;
    }

    /** @return the transactional ids of the fleet slots this instance owns (empty outside a fleet) */
    public java.util.SortedSet<String> ownedFleetTransactionalIds() {
        java.util.SortedSet<String> ids = new java.util.TreeSet<>();
        this.lock.lock();
        try {
            for (Slot s : this.slots) {
                if (s.fleetSlot >= 0 && s.owned) {
                    ids.add(s.transactionalId);
                }
            }
        }
        finally {
            this.lock.unlock();
        }
        return ids;
    }

    /** Lock held or not: a count for messages. */
    private int ownedCount() {
        int n = 0;
        for (Slot s : this.slots) {
            if (s.owned) {
                n++;
            }
        }
        return n;
    }

    /**
     * @return the listener to give the {@link io.github.txnsession.kafka.fleet.TransactionalIdFleet} of this pool
     *         (same prefix, slots and sessions per slot): it settles and lends the ids of slots that arrive, and
     *         stops lending and closes the sessions of slots that leave
     * @throws IllegalStateException if the pool was not built with {@link #forFleet}
     */
    public SlotListener fleetListener() {
        if (!isFleet()) {
            throw new IllegalStateException("Transaction session pool '" + this.prefix + "' was not built for a fleet "
                    + "(TransactionSessionPool.forFleet)");
        }
        return new FleetSlots();
    }

    private List<Slot> slotsOf(FleetSlot fleetSlot) {
        List<Slot> mine = new ArrayList<>();
        for (Slot s : this.slots) {
            if (s.fleetSlot == fleetSlot.index()) {
                mine.add(s);
            }
        }
        if (mine.size() != fleetSlot.transactionalIds().size()
                || !mine.stream().map(s -> s.transactionalId).toList().equals(fleetSlot.transactionalIds())) {
            throw new IllegalStateException("Fleet slot " + fleetSlot + " does not match pool '" + this.prefix
                    + "' (" + this.size / this.sessionsPerFleetSlot + " slots x " + this.sessionsPerFleetSlot
                    + "): the fleet and the pool must have the same prefix, slots and sessions per slot");
        }
        return mine;
    }

    /**
     * Fleet mode: sets what asks the fleet to settle a fleet slot again when one of its sessions was closed (fenced,
     * failed, released in doubt): {@code fleet::requestSettlement}. The fleet then calls {@link #fleetListener()}'s
     * {@code slotAssigned} after confirming ownership, which initializes the ids that have no session.
     *
     * @param requester the fleet's {@code requestSettlement}
     */
    public void setFleetSettlementRequester(IntConsumer requester) {
        this.fleetSettlementRequester = Objects.requireNonNull(requester, "requester");
    }

    /**
     * Fleet mode: sets how one id of an arriving slot is settled and opened. Two-phase commit sets one that holds the
     * id's decision-log key while it completes a decided transaction and initializes the id, so that a paused former
     * owner's decision cannot commit in between. Without one, the {@linkplain #setInDoubtResolver resolver} runs, then
     * the id is initialized.
     *
     * @param settler settles the id and returns its initialized session (from the supplier it is given)
     */
    public void setFleetIdSettler(FleetIdSettler settler) {
        this.fleetIdSettler = Objects.requireNonNull(settler, "settler");
    }

    /**
     * Fleet mode: no slot is settled until {@link #setFleetIdSettler} was called (the fleet retries meanwhile), for
     * wiring where the settler is set after the fleet may already have started.
     */
    public void requireFleetIdSettler() {
        this.fleetIdSettlerRequired = true;
    }

    /** Fleet mode: settles one id of an arriving fleet slot and opens its session. */
    @FunctionalInterface
    public interface FleetIdSettler {

        /**
         * @param transactionalId the id to settle
         * @param open initializes the id and returns its session (it aborts what the id left open)
         * @return the initialized session
         * @throws RuntimeException if the id cannot be settled now (the fleet retries)
         */
        TransactionSession settleAndOpen(String transactionalId, Supplier<TransactionSession> open);
    }

    /** Settles fleet slots that arrive, gives up those that leave; called on the fleet's membership thread. */
    private final class FleetSlots implements SlotListener {

        @Override
        public void slotAssigned(FleetSlot fleetSlot) {
            List<Slot> mine = slotsOf(fleetSlot);
            FleetIdSettler settler = TransactionSessionPool.this.fleetIdSettler;
            if (settler == null && TransactionSessionPool.this.fleetIdSettlerRequired) {
                throw new IllegalStateException("fleet slot " + fleetSlot.index() + " waits for two-phase recovery "
                        + "to be wired (setFleetIdSettler)");
            }
            List<Slot> toOpen = new ArrayList<>();
            TransactionSessionPool.this.lock.lock();
            try {
                for (Slot s : mine) {
                    if (!s.owned && s.owner != null) {
                        // still lent from an earlier ownership (its revocation timed out), or reserved by recovery:
                        // the fleet retries once it is given back
                        throw new IllegalStateException("Transaction session '" + s.transactionalId + "' is still "
                                + "in use (" + s.owner.getName() + ") from an earlier ownership of fleet slot "
                                + fleetSlot.index());
                    }
                    if (s.session == null && s.owner == null) {
                        toOpen.add(s); // not lendable without a session (pickFreeSlot), so nobody races us
                    }
                }
            }
            finally {
                TransactionSessionPool.this.lock.unlock();
            }
            Map<Slot, TransactionSession> opened = new HashMap<>();
            try {
                for (Slot s : toOpen) {
                    opened.put(s, settleAndOpen(s, settler));
                }
            }
            catch (RuntimeException ex) {
                opened.values().forEach(TransactionSessionPool.this::closeQuietly);
                throw ex;
            }
            List<TransactionSession> toClose = new ArrayList<>();
            TransactionSessionPool.this.lock.lock();
            try {
                for (Slot s : mine) {
                    TransactionSession fresh = opened.get(s);
                    if (TransactionSessionPool.this.closed) {
                        if (fresh != null) {
                            toClose.add(fresh);
                        }
                        continue;
                    }
                    if (fresh != null) {
                        s.session = fresh;
                        s.inDoubt = false;
                    }
                    s.owned = true;
                }
                TransactionSessionPool.this.released.signalAll();
            }
            finally {
                TransactionSessionPool.this.lock.unlock();
            }
            toClose.forEach(TransactionSessionPool.this::closeQuietly);
        }

        private TransactionSession settleAndOpen(Slot s, @Nullable FleetIdSettler settler) {
            if (settler != null) {
                return settler.settleAndOpen(s.transactionalId, () -> createSession(s.transactionalId));
            }
            if (TransactionSessionPool.this.inDoubtResolver != null) {
                // a decision log without a settler: settling and initializing apart would let a paused former owner
                // commit a decision in between
                throw new IllegalStateException("Fleet pool '" + TransactionSessionPool.this.prefix + "' has an "
                        + "in-doubt resolver but no FleetIdSettler: build TwoPhaseRecovery over the pool (it sets "
                        + "one) or call setFleetIdSettler");
            }
            // initializing aborts what the previous owner left open and fences it, if it still runs
            return createSession(s.transactionalId);
        }

        @Override
        public void slotsRevoked(List<FleetSlot> fleetSlots, boolean lost) {
            List<Slot> mine = new ArrayList<>();
            fleetSlots.forEach(f -> mine.addAll(slotsOf(f)));
            List<TransactionSession> toClose = new ArrayList<>();
            List<String> stillLent = new ArrayList<>();
            TransactionSessionPool.this.lock.lock();
            try {
                mine.forEach(s -> s.owned = false); // all lent no more, at once
                // lost: another instance may use the ids already, and these sessions are fenced: do not wait
                long remaining = lost ? 0 : FLEET_REVOKE_TIMEOUT.toNanos();
                while (remaining > 0 && mine.stream().anyMatch(s -> s.owner != null)
                        && !TransactionSessionPool.this.closed) {
                    remaining = TransactionSessionPool.this.released.awaitNanos(remaining);
                }
                for (Slot s : mine) {
                    if (s.owner == null) {
                        if (s.session != null) {
                            toClose.add(s.session);
                            s.session = null;
                        }
                    }
                    else {
                        stillLent.add(s.transactionalId + "@" + s.owner.getName());
                    }
                }
            }
            catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
            }
            finally {
                TransactionSessionPool.this.lock.unlock();
            }
            if (!stillLent.isEmpty()) {
                log.warn("Fleet slots {} leave this instance{} while {} still in use{}; closed when given back, and "
                        + "fenced by the next owner's initialization", fleetSlots.stream().map(FleetSlot::index)
                                .toList(), lost ? " (membership lost)" : "", stillLent,
                        lost ? "" : " after " + FLEET_REVOKE_TIMEOUT.toSeconds() + " s");
            }
            toClose.forEach(TransactionSessionPool.this::closeQuietly); // an open transaction is aborted
        }
    }

    private static final class Slot {

        final int index;
        final String transactionalId;
        /** written under the pool lock, or by the owner while the slot is lent */
        volatile @Nullable TransactionSession session;
        /** guarded by the pool lock */
        @Nullable Thread owner;
        /** guarded by the pool lock: the pool's release count when this slot was last given back */
        long releasedSeq;
        /** written by the slot's owner: its last session was released with a prepared transaction */
        volatile boolean inDoubt;
        /** guarded by the pool lock: a background settlement of this slot is scheduled */
        boolean settlementScheduled;
        /** the fleet slot this slot's id belongs to; -1 outside a fleet */
        final int fleetSlot;
        /** written under the pool lock: the slot may be lent (always outside a fleet; while its fleet slot is owned) */
        volatile boolean owned;

        Slot(int index, String transactionalId, int fleetSlot) {
            this.index = index;
            this.transactionalId = transactionalId;
            this.fleetSlot = fleetSlot;
            this.owned = fleetSlot < 0;
        }
    }
}
