package io.github.txnsession.spring.jdbc;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;

import javax.sql.DataSource;

import io.github.txnsession.kafka.CompletionOutcome;
import io.github.txnsession.kafka.PreparedTransaction;
import io.github.txnsession.kafka.SessionTimeoutException;
import io.github.txnsession.kafka.TransactionLostException;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.TransactionSessionException;
import io.github.txnsession.spring.TransactionSessionPool;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import org.springframework.transaction.HeuristicCompletionException;
import org.springframework.transaction.TransactionSystemException;

/**
 * Settles what a crash left between the database and Kafka, for one session pool (one transactional id prefix):
 * <ul>
 * <li>every decision row of the prefix: resume its Kafka transaction and complete it (commit), then clear the row;
 * a transaction that was certainly aborted (LOST) is handed to the {@link LostTransactionHandler}; one whose outcome
 * cannot be known (the id moved on: UNKNOWN) keeps its row, is reported in {@link #inDoubtTransactions()} and is
 * never compensated;</li>
 * <li>every pool id ({@code prefix + 0 .. size-1}) without a row: abort whatever Kafka transaction is open, then
 * fence the id's producer (one producer initialized and closed per aborted id: with transaction version 1 the abort
 * alone would let a paused predecessor go on). An id the pool holds in doubt is left to the pool's resolver.</li>
 * </ul>
 * Otherwise it creates no producer (resumed sessions only), so it is cheap enough to run at every start-up and on
 * demand.
 *
 * <p>Guarantees: it touches only its own prefix, and, built over a running pool, never the ids of the pool's live
 * sessions, so applications with different prefixes sharing a table and a
 * cluster recover independently. Idempotent: running it twice settles nothing twice. Must run before the pool hands
 * out sessions ({@link JdbcKafkaTransactionManager} calls {@link #ensureRecovered()} before its first transaction):
 * initializing a pool session aborts the prepared transaction of its id.
 *
 * <p>Not guaranteed: a Kafka transaction that the coordinator already aborted cannot be brought back; it is
 * reported, counted and kept in {@link #lostTransactions()} (health DOWN) until {@link #clearLost()}.
 */
public class TwoPhaseRecovery {

    private static final Logger log = LoggerFactory.getLogger(TwoPhaseRecovery.class);

    /** Fleet mode: how long settling an id waits for its decision-log key (a decision another instance writes). */
    static final java.time.Duration FLEET_LOCK_WAIT = java.time.Duration.ofSeconds(5);

    private final DataSource dataSource;
    private final DecisionLog decisionLog;
    private final String prefix;
    private final int poolSize;
    private final Map<String, Object> clientConfigs;
    private final @Nullable LostTransactionHandler lostHandler;
    private final List<LostTransaction> lost = new CopyOnWriteArrayList<>();
    /**
     * The live sessions' identities (start time included when the prepare learned it) of transactions whose decision
     * row may lack the start time, by transactional id: filled when a decision was written alongside the prepare, and
     * when a completion and its immediate settlement failed; a settlement of the id in this process finds the row's
     * transaction by them, to tell LOST from UNKNOWN. At most one per id; dropped once the row is cleared or settled
     * (an entry left by a rollback is harmless: it matches only a row of the same producer id and epoch).
     */
    private final Map<String, PreparedTransaction> unsettled = new ConcurrentHashMap<>();
    /** replaced as a whole (readers never see it half rebuilt); appended to under {@code this} */
    private volatile List<LostTransaction> inDoubt = List.of();
    private final AtomicLong committedCount = new AtomicLong();
    private final AtomicLong alreadyCommittedCount = new AtomicLong();
    private final AtomicLong abortedCount = new AtomicLong();
    private final AtomicLong lostCount = new AtomicLong();
    /** the running pool, if recovery was built over one: ids it lends are left alone, failed ids marked in doubt */
    private final @Nullable TransactionSessionPool pool;
    private volatile @Nullable RecoveryReport lastReport;
    private volatile boolean recovered;
    /** a run completed (with a pool, what it could not settle is in doubt there) */
    private volatile boolean startupRunDone;

    /**
     * @param dataSource the database holding the decision log
     * @param decisionLog the decision log
     * @param transactionalIdPrefix the pool's prefix
     * @param poolSize the pool's size: ids {@code prefix + 0 .. poolSize-1} are checked for open transactions
     * @param clientConfigs Kafka client configs (bootstrap servers, security) for resumed sessions
     * @param lostHandler told about lost transactions; null to only report them
     */
    public TwoPhaseRecovery(DataSource dataSource, DecisionLog decisionLog, String transactionalIdPrefix, int poolSize,
            Map<String, ?> clientConfigs, @Nullable LostTransactionHandler lostHandler) {
        this(dataSource, decisionLog, transactionalIdPrefix, poolSize, clientConfigs, lostHandler, null);
    }

    /**
     * Recovery for a running pool: prefix, size and client configs come from the pool, and the ids of the pool's
     * live sessions ({@link TransactionSessionPool#activeTransactionalIds()}) are left alone, so that recovery on
     * demand never aborts or completes a transaction a live session is running. (A live session's own
     * initialization already aborted whatever its id had left open.)
     *
     * @param dataSource the database holding the decision log
     * @param decisionLog the decision log
     * @param pool the session pool to recover for
     * @param lostHandler told about lost transactions; null to only report them
     */
    public TwoPhaseRecovery(DataSource dataSource, DecisionLog decisionLog, TransactionSessionPool pool,
            @Nullable LostTransactionHandler lostHandler) {
        this(dataSource, decisionLog, pool.transactionalIdPrefix(), pool.size(), pool.sessionConfigs(), lostHandler,
                pool);
    }

    private TwoPhaseRecovery(DataSource dataSource, DecisionLog decisionLog, String transactionalIdPrefix,
            int poolSize, Map<String, ?> clientConfigs, @Nullable LostTransactionHandler lostHandler,
            @Nullable TransactionSessionPool pool) {
        this.pool = pool;
        if (pool != null) {
            pool.settledByRecovery(); // its prepared transactions are this recovery's: no startup end of leftovers
        }
        if (pool != null && pool.isFleet()) {
            // a fleet settles each id of an arriving slot under its decision-log key, then initializes it there:
            // wired here, so that every recovery over a fleet pool (auto-configured or not) closes the race
            pool.setFleetIdSettler(this::settleAndOpen);
        }
        this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
        this.decisionLog = Objects.requireNonNull(decisionLog, "decisionLog");
        this.prefix = Objects.requireNonNull(transactionalIdPrefix, "transactionalIdPrefix");
        if (transactionalIdPrefix.isBlank()) {
            throw new IllegalArgumentException("The transactional id prefix must not be blank");
        }
        if (poolSize < 1) {
            throw new IllegalArgumentException("The pool size must be at least 1, was " + poolSize);
        }
        this.poolSize = poolSize;
        Map<String, Object> configs = new HashMap<>();
        clientConfigs.forEach((k, v) -> {
            if (!k.equals("transactional.id")) {
                configs.put(k, v);
            }
        });
        this.clientConfigs = Map.copyOf(configs);
        this.lostHandler = lostHandler;
    }

    /**
     * @param transactionalId a transactional id
     * @return its decision row, if it has one
     * @throws DecisionLogException if the log cannot be read
     */
    public Optional<DecisionRecord> decisionOf(String transactionalId) {
        return this.decisionLog.find(this.dataSource, transactionalId);
    }

    /** @return the transactional id prefix this recovery is for */
    public String transactionalIdPrefix() {
        return this.prefix;
    }

    /**
     * What a session pool waits for before it lends its first session: one recovery run that completed (the ids it
     * could not settle are then in doubt in the pool, which settles each before lending it), so that no session
     * initializes an id whose prepared transaction a decision says to commit. Runs {@link #recover()} until a run
     * completes; a no-op afterwards, and on the thread of a recovery run in progress (a
     * {@link LostTransactionHandler} that sends). Without a pool, as {@link #ensureRecovered()}.
     *
     * @throws DecisionLogException if the decision log cannot be read (the next call tries again)
     */
    public void ensureStartupRun() {
        if (this.pool == null) {
            ensureRecovered();
            return;
        }
        if (this.startupRunDone || Thread.holdsLock(this)) {
            return;
        }
        if (isFleet()) {
            // a fleet settles each id when its slot arrives (settleAndOpen); the other ids belong to other instances.
            // What earlier runs (of any instance) set aside as in doubt is reported from the log.
            synchronized (this) {
                if (!this.startupRunDone) {
                    try {
                        reloadInDoubt(List.of());
                    }
                    catch (DecisionLogException ex) {
                        // reporting only: read again by the next recovery run (the recovery endpoint, a restart)
                        log.warn("Could not read the in-doubt decisions of prefix '{}' at start: {}", this.prefix,
                                ex.toString());
                    }
                    this.startupRunDone = true;
                }
            }
            return;
        }
        synchronized (this) {
            if (!this.startupRunDone) {
                recover();
                this.startupRunDone = true;
            }
        }
    }

    /**
     * Runs {@link #recover()} unless a run has already succeeded with every id settled; a no-op on the thread of a
     * recovery run in progress (a {@link LostTransactionHandler} that sends).
     */
    public void ensureRecovered() {
        if (!this.recovered && !Thread.holdsLock(this)) {
            synchronized (this) {
                if (!this.recovered) {
                    recover();
                }
            }
        }
    }

    /**
     * Settles every decision row of the prefix and aborts every open transaction of a pool id without one.
     *
     * @return what was found and done
     * @throws DecisionLogException if the decision log cannot be read (nothing is touched then)
     */
    public synchronized RecoveryReport recover() {
        if (isFleet()) {
            return recoverOwnedFleetIds();
        }
        Run run = new Run();
        List<DecisionRecord> rows = this.decisionLog.findByPrefix(this.dataSource, this.prefix).stream()
            .filter(r -> isPoolId(r.transactionalId()))
            .toList();
        Set<String> decided = new HashSet<>();
        for (DecisionRecord row : rows) {
            decided.add(row.transactionalId());
            whileIdle(row.transactionalId(), () -> settle(row, run));
        }
        for (int i = 0; i < this.poolSize; i++) {
            String id = this.prefix + i;
            if (!decided.contains(id)) {
                whileIdle(id, () -> {
                    if (this.pool != null && this.pool.isInDoubt(id)) {
                        // released in doubt while this run went on (a database commit whose outcome is unknown):
                        // its row may land after the rows were read, so the pool's resolver settles it (reading
                        // the row again), never this abort
                        log.info("Recovery leaves '{}' to the pool's in-doubt resolver", id);
                    }
                    else {
                        abortOpen(id, run);
                    }
                });
            }
        }
        RecoveryReport report = finish(run);
        reloadInDoubt(run.inDoubt);
        this.recovered = run.failed.isEmpty();
        if (this.pool != null) {
            // an id that could not be settled must not be initialized (that would abort a decided transaction)
            run.failed.forEach(this.pool::markInDoubt);
        }
        return report;
    }

    /** @return whether recovery runs for a pool in fleet mode (ids are settled under their decision-log key) */
    public boolean isFleet() {
        return this.pool != null && this.pool.isFleet();
    }

    /** Fleet mode: only the ids of the fleet slots this instance owns, each under its key, while not lent. */
    private RecoveryReport recoverOwnedFleetIds() {
        Run run = new Run();
        TransactionSessionPool p = Objects.requireNonNull(this.pool);
        for (String id : p.ownedFleetTransactionalIds()) {
            try {
                whileIdle(id, () -> settleUnderKey(id, run, null));
            }
            catch (RuntimeException ex) {
                if (!run.failed.contains(id)) {
                    run.failed.add(id);
                }
                log.warn("Recovery of '{}' failed and must be retried: {}", id, ex.toString());
            }
        }
        RecoveryReport report = finish(run);
        reloadInDoubt(run.inDoubt); // every fleet id's, whichever instance set the row aside
        this.recovered = run.failed.isEmpty();
        return report;
    }

    /**
     * What stays in doubt is what the log holds set aside for this pool's ids (in a fleet: every id of every slot,
     * whichever instance set the row aside), from this run or earlier ones, also before a restart.
     *
     * @param fromRun what this run found in doubt: its reasons are kept for the rows it set aside
     */
    private void reloadInDoubt(List<LostTransaction> fromRun) {
        List<DecisionRecord> aside = isFleet()
                ? this.decisionLog.findSetAside(this.dataSource, this.prefix,
                        Set.copyOf(Objects.requireNonNull(this.pool).transactionalIds())::contains)
                : this.decisionLog.findSetAside(this.dataSource, this.prefix);
        List<LostTransaction> found = new ArrayList<>();
        for (DecisionRecord row : aside) {
            found.add(fromRun.stream().filter(l -> row.transactionalId().equals(DecisionLog.parkedId(l.decision())))
                .findFirst().orElse(new LostTransaction(row, "the Kafka outcome of this decision is unknown; check "
                        + "the data, then delete the row")));
        }
        // one this run could not set aside (its row is still under the id) stays reported too
        fromRun.stream().filter(l -> aside.stream().noneMatch(r -> r.transactionalId().equals(
                DecisionLog.parkedId(l.decision())))).forEach(found::add);
        this.inDoubt = List.copyOf(found);
    }

    private synchronized void addInDoubt(List<LostTransaction> more) {
        if (!more.isEmpty()) {
            List<LostTransaction> all = new ArrayList<>(this.inDoubt);
            // a row found in doubt again (its set-aside failed before) is listed once
            all.removeIf(known -> more.stream().anyMatch(m -> m.decision().equals(known.decision())));
            all.addAll(more);
            this.inDoubt = List.copyOf(all);
        }
    }

    /**
     * A decision of {@code transactionalId} was refused by a fleet's fence ({@link DecisionFencedException}): the
     * session of the id must not be used again as it is. In a fleet, the id is marked in doubt, so that the pool stops
     * lending its session and the fleet settles the slot again (after confirming that this instance still owns it),
     * which initializes the id and lifts the fence. Outside a fleet there are no fences; nothing is done.
     *
     * @param transactionalId the id whose decision was refused
     */
    public void decisionFenced(String transactionalId) {
        Objects.requireNonNull(transactionalId, "transactionalId: the id whose decision the fence refused");
        TransactionSessionPool p = this.pool;
        if (p != null && p.isFleet()) {
            log.warn("The decision of '{}' was refused by a fleet fence; its slot is settled again", transactionalId);
            p.markInDoubt(transactionalId);
        }
    }

    /**
     * Fleet mode: settles {@code transactionalId} while holding its decision-log key, then (if {@code open} is given)
     * initializes it, still under the key. A committed decision is completed; without one, nothing is done but the
     * initialization (which aborts what the id left open): a missing row is not proof enough to abort, since the id
     * may be in use by its new owner. Holding the key means a
     * paused former owner cannot commit a decision for the id in between: its own check after writing the row (its
     * commit confirms the Kafka transaction is still open) then finds it aborted, and its database transaction rolls
     * back.
     *
     * @return the opened session, or null when {@code open} is null
     * @throws TransactionSessionException if the id could not be settled now (it must not be used yet)
     * @throws DecisionLogException if the key could not be held (a decision is being written by a paused instance)
     */
    private @Nullable TransactionSession settleUnderKey(String transactionalId, Run run,
            java.util.function.@Nullable Supplier<TransactionSession> open) {
        RuntimeException[] failedInit = new RuntimeException[1];
        TransactionSession session = this.decisionLog.withKeyHeld(this.dataSource, transactionalId, FLEET_LOCK_WAIT,
                (con, decision) -> {
                    if (decision.isPresent()) {
                        settleHeld(con, decision.get(), run);
                    }
                    // without a row nothing is aborted here: only the slot's owner, when it initializes the id under
                    // the key, ends what the id left open. Recovery elsewhere (a paused instance settling its failed
                    // completion, say) could otherwise abort the new owner's running transaction.
                    if (run.failed.contains(transactionalId)) {
                        return null;
                    }
                    if (open == null) {
                        return null;
                    }
                    TransactionSession opened;
                    try {
                        opened = open.get();
                    }
                    catch (RuntimeException initFailure) {
                        endOpenAfterFailedInit(transactionalId, initFailure);
                        // committed with the key's release: refuses a paused former owner's decision until an owner
                        // has initialized the id (a late-landing initialization could abort a decided transaction)
                        try {
                            // a lost decision's row still there is set aside first, so that it stays reported
                            this.decisionLog.fence(con, transactionalId, run.lost.stream()
                                .filter(l -> l.transactionalId().equals(transactionalId))
                                .map(LostTransaction::decision).findFirst());
                        }
                        catch (java.sql.SQLException | RuntimeException fenceFailure) {
                            fenceFailure.addSuppressed(initFailure);
                            throw fenceFailure;
                        }
                        failedInit[0] = initFailure;
                        return null;
                    }
                    // initialized under the key: nothing the former owner left can commit any more
                    try {
                        this.decisionLog.liftFence(con, transactionalId);
                    }
                    catch (java.sql.SQLException | RuntimeException liftFailure) {
                        opened.close(); // the settlement rolls back: the id must not be used
                        throw liftFailure;
                    }
                    return opened;
                });
        if (failedInit[0] != null) {
            throw failedInit[0];
        }
        if (run.failed.contains(transactionalId)) {
            throw new TransactionSessionException(transactionalId, "two-phase recovery could not settle it now; it "
                    + "is not used until it is settled (see the log)", null);
        }
        return session;
    }

    /**
     * An initialization that failed in the client may still be applied by the coordinator later, after the key is
     * released, and abort a transaction a paused former owner has meanwhile decided to commit. Two defences, both
     * under the key: the id's open transaction is ended now (so that the log's lock does not pin read_committed readers
     * until the retry; best effort), and the caller leaves a {@linkplain DecisionLog#fence fence} in the log, which
     * refuses every decision of the id until an owner has initialized it: a paused former owner's database transaction
     * then rolls back, whatever the coordinator does later. The settlement is retried.
     */
    private void endOpenAfterFailedInit(String transactionalId, RuntimeException initFailure) {
        try {
            Optional<TransactionSession> open = TransactionSession.resumeOpen(transactionalId, this.clientConfigs);
            if (open.isPresent()) {
                try (TransactionSession session = open.get()) {
                    session.abortTransaction();
                }
                log.info("Fleet: initializing '{}' failed ({}); its open transaction was aborted under the key",
                        transactionalId, initFailure.toString());
            }
        }
        catch (RuntimeException abortFailure) {
            initFailure.addSuppressed(abortFailure);
        }
    }

    /**
     * Fleet mode, for {@link TransactionSessionPool#setFleetIdSettler}: settles an id of a fleet slot that just
     * arrived and initializes it, both while holding the id's decision-log key (see {@link #settleUnderKey}).
     *
     * @param transactionalId an id of the arriving slot
     * @param open initializes the id and returns its session
     * @return the initialized session
     * @throws TransactionSessionException if the id could not be settled now (the fleet retries)
     * @throws DecisionLogException if the key could not be held in time (the fleet retries)
     */
    public synchronized TransactionSession settleAndOpen(String transactionalId,
            java.util.function.Supplier<TransactionSession> open) {
        Run run = new Run();
        TransactionSession session;
        try {
            session = Objects.requireNonNull(settleUnderKey(transactionalId, run, open));
        }
        finally {
            finish(run);
            addInDoubt(run.inDoubt);
        }
        return session;
    }

    /**
     * Runs {@code action} for a pool id while the pool lends no session for it (a live session owns its id: its own
     * initialization already settled what the id had left, and recovering it could abort its transaction).
     */
    private void whileIdle(String id, Runnable action) {
        if (this.pool != null && !this.pool.runIfIdle(id, action)) {
            log.debug("Recovery leaves '{}' alone: a live session of the pool owns it", id);
        }
        else if (this.pool == null) {
            action.run();
        }
    }

    /** @return whether {@code id} is {@code prefix + i} with {@code 0 <= i < poolSize}, written as the pool writes it */
    private boolean isPoolId(String id) {
        String suffix = id.substring(this.prefix.length());
        try {
            int index = Integer.parseInt(suffix);
            return index >= 0 && index < this.poolSize && String.valueOf(index).equals(suffix);
        }
        catch (NumberFormatException ex) {
            return false;
        }
    }

    /**
     * Settles one transactional id of the prefix, whatever holds it: completes its decision row, or aborts its open
     * transaction if it has none. The session pool calls this before it initializes a slot whose session was released
     * with a prepared transaction (the outcome of its commit was in doubt), so that initializing never aborts a
     * transaction the database decided to commit.
     *
     * @param transactionalId a transactional id of this recovery's prefix
     * @return what was done for the id (committed, already committed, aborted, lost or in doubt); an empty report
     *         when it had nothing to settle
     * @throws TransactionSessionException if the id could not be settled now (the coordinator is unreachable):
     *         it must not be initialized yet
     */
    public synchronized RecoveryReport recoverTransactionalId(String transactionalId) {
        return recoverTransactionalId(transactionalId, null);
    }

    /** @param confirmed the live session's identity of the transaction, start time included; null if not known */
    private synchronized RecoveryReport recoverTransactionalId(String transactionalId,
            @Nullable PreparedTransaction confirmed) {
        Objects.requireNonNull(transactionalId, "transactionalId");
        if (isFleet()) {
            Run run = new Run(confirmed);
            RecoveryReport report;
            try {
                settleUnderKey(transactionalId, run, null);
            }
            finally {
                addInDoubt(run.inDoubt);
                report = finish(run);
            }
            return report;
        }
        Run run = new Run(confirmed);
        List<DecisionRecord> rows = this.decisionLog.findByPrefix(this.dataSource, this.prefix).stream()
            .filter(r -> r.transactionalId().equals(transactionalId)).toList();
        if (rows.isEmpty()) {
            abortOpen(transactionalId, run);
        }
        else {
            rows.forEach(row -> settle(row, run));
        }
        RecoveryReport report = finish(run);
        addInDoubt(run.inDoubt);
        if (!run.failed.isEmpty()) {
            throw new TransactionSessionException(transactionalId, "two-phase recovery could not settle it now; "
                    + "it is not reused until it is settled (see the log)", null);
        }
        return report;
    }

    /**
     * The database committed the decision, but completing the Kafka transaction from the live session failed with
     * {@code failure}: settles the id at once from the decision log with a resumed session (which commits it if it is
     * still open, and tells a lost or unknown outcome apart), so that nothing waits for a later recovery run.
     *
     * @param transactionalId the transactional id of the live session whose completion failed
     * @param prepared the prepared transaction whose completion failed, named in the messages; what is settled is
     *        the id's decision row
     * @param failure what completing the Kafka transaction threw; logged when recovery commits the transaction, else
     *        the cause carried by the exception thrown
     * @throws HeuristicCompletionException when the Kafka side is lost (STATE_MIXED, reported to the handler) or
     *         unknown (STATE_UNKNOWN, in doubt), or when it could not be settled now (the slot is then settled before
     *         its id is used again)
     */
    public void settleAfterFailedCompletion(String transactionalId, PreparedTransaction prepared,
            RuntimeException failure) {
        RecoveryReport report;
        try {
            report = recoverTransactionalId(transactionalId, prepared);
        }
        catch (RuntimeException ex) {
            failure.addSuppressed(ex);
            rememberConfirmed(transactionalId, prepared); // for the settlement before the id is used again
            throw new HeuristicCompletionException(HeuristicCompletionException.STATE_UNKNOWN,
                    new TransactionSystemException("The database committed, but completing Kafka transaction "
                            + prepared + " of session '" + transactionalId + "' failed: " + failure.getMessage()
                            + ". Its decision row stays in " + this.decisionLog.table() + " and recovery completes it "
                            + "before the id is used again.", failure));
        }
        if (report.committed().contains(transactionalId) || report.alreadyCommitted().contains(transactionalId)) {
            log.warn("Completing Kafka transaction {} of session '{}' failed ({}); recovery committed it from the "
                    + "decision log", prepared, transactionalId, failure.getMessage());
            return;
        }
        boolean lost = !report.lost().isEmpty();
        throw new HeuristicCompletionException(lost ? HeuristicCompletionException.STATE_MIXED
                : HeuristicCompletionException.STATE_UNKNOWN, new TransactionSystemException("The database committed, "
                        + "but Kafka transaction " + prepared + " of session '" + transactionalId + "' could not be "
                        + "committed: " + (lost ? "it is LOST (reported to the LostTransactionHandler)"
                                : "its outcome is UNKNOWN (kept in doubt, see the recovery endpoint)") + ". Cause: "
                        + failure.getMessage(), failure));
    }

    /**
     * Keeps the live session's identity of a transaction, start time included when the prepare learned it, until its
     * row is cleared or settled:
     * a settlement of the id in this process (after a failed completion, an unknown database outcome, the pool's
     * in-doubt resolver) then tells a transaction the coordinator aborted on its timeout (LOST) from a later one of the
     * id even when the row was written without the start time (alongside the prepare). Lost at a restart.
     *
     * @param transactionalId the session's transactional id
     * @param confirmed the prepared transaction as the coordinator confirmed it
     */
    void rememberConfirmed(String transactionalId, PreparedTransaction confirmed) {
        this.unsettled.put(transactionalId, confirmed);
    }

    /** @param transactionalId an id whose decision row is gone: its remembered identity is no longer needed */
    void forgetConfirmed(String transactionalId) {
        this.unsettled.remove(transactionalId);
    }

    /** What one recovery run found. */
    private static final class Run {
        /** the live session's identity of the transaction being settled, start time included; null after a crash */
        final @Nullable PreparedTransaction confirmed;
        final List<String> committed = new ArrayList<>();
        final List<String> alreadyCommitted = new ArrayList<>();
        final List<String> aborted = new ArrayList<>();
        final List<LostTransaction> lost = new ArrayList<>();
        final List<String> failed = new ArrayList<>();
        final List<LostTransaction> inDoubt = new ArrayList<>();

        Run() {
            this(null);
        }

        Run(@Nullable PreparedTransaction confirmed) {
            this.confirmed = confirmed;
        }

        /**
         * @param remembered the identity a failed settlement of the row's id left, if any
         * @return the transaction a row names; a row written ahead of the prepare's answer (producer id and epoch only)
         *         gets the confirmed start time, which tells an abort on the coordinator's timeout (lost) from a later
         *         transaction of the id (unknown)
         */
        PreparedTransaction identityOf(DecisionRecord row, @Nullable PreparedTransaction remembered) {
            PreparedTransaction named = row.preparedTransaction();
            PreparedTransaction known = this.confirmed != null ? this.confirmed : remembered;
            if (known != null && !named.hasStartTime() && known.hasStartTime()
                    && known.producerId() == named.producerId() && known.epoch() == named.epoch()) {
                return known;
            }
            return named;
        }
    }

    /** Completes the Kafka transaction a decision row names, and classifies how that went. */
    private void settle(DecisionRecord row, Run run) {
        settle(row, run, r -> this.decisionLog.clear(this.dataSource, r),
                r -> this.decisionLog.setAside(this.dataSource, r));
    }

    /** As {@link #settle(DecisionRecord, Run)}, clearing or setting the row aside through {@code con}. */
    private void settleHeld(java.sql.Connection con, DecisionRecord row, Run run) {
        settle(row, run, r -> {
            try {
                this.decisionLog.clear(con, r.transactionalId(), r.preparedTransaction());
            }
            catch (java.sql.SQLException ex) {
                throw new DecisionLogException("Could not clear the decision of " + r.transactionalId(), ex);
            }
        }, r -> {
            try {
                this.decisionLog.setAside(con, r);
            }
            catch (java.sql.SQLException ex) {
                throw new DecisionLogException("Could not set the decision of " + r.transactionalId() + " aside", ex);
            }
        });
    }

    private void settle(DecisionRecord row, Run run, java.util.function.Consumer<DecisionRecord> clear,
            java.util.function.Consumer<DecisionRecord> setAside) {
        PreparedTransaction prepared = run.identityOf(row, this.unsettled.get(row.transactionalId()));
        try (TransactionSession session = TransactionSession.resume(row.transactionalId(), prepared,
                this.clientConfigs)) {
            CompletionOutcome outcome = session.completeTransaction(prepared);
            (outcome == CompletionOutcome.COMMITTED ? run.committed : run.alreadyCommitted).add(row.transactionalId());
            clear.accept(row);
        }
        catch (TransactionLostException ex) {
            run.lost.add(new LostTransaction(row, ex.getMessage())); // certainly aborted: compensate
        }
        catch (SessionTimeoutException ex) {
            run.failed.add(row.transactionalId());
            log.warn("Recovery of '{}' ({}) must be retried: {}", row.transactionalId(), prepared, ex.getMessage());
        }
        catch (TransactionSessionException ex) {
            // the outcome cannot be known (the id moved on, fenced, identity not found): never compensate a
            // transaction that may have committed; keep the row and alert
            run.inDoubt.add(new LostTransaction(row, ex.getMessage()));
            log.error("Two-phase recovery: the database committed transaction {} of '{}' at {}, but the outcome of "
                    + "its Kafka side is UNKNOWN; the decision row stays in {} (set aside as '{}#in-doubt-...') for an "
                    + "operator to check: {}", prepared, row.transactionalId(), row.decidedAt(),
                    this.decisionLog.table(), row.transactionalId(), ex.getMessage());
            try {
                // set aside, so that the id takes new decisions while this row stays for the operator
                setAside.accept(row);
            }
            catch (RuntimeException setAsideFailure) {
                // reported in doubt all the same (health, endpoint, the error above). Not retried before the id is
                // used again: a failure that persists (no UPDATE grant) would block the id for good; the id's next
                // decision replaces the row, and the in-doubt report and the log keep what it said
                log.warn("Could not set the in-doubt decision of '{}' aside; the id's next decision replaces it: {}",
                        row.transactionalId(), setAsideFailure.toString());
            }
        }
        catch (RuntimeException ex) {
            run.failed.add(row.transactionalId());
            log.warn("Recovery of '{}' ({}) failed and must be retried", row.transactionalId(), prepared, ex);
        }
        if (!run.failed.contains(row.transactionalId()) && run.lost.stream().noneMatch(l -> l.decision() == row)) {
            forgetConfirmed(row.transactionalId()); // settled: committed, or set aside in doubt (lost: once cleared)
        }
    }

    /** Aborts the open transaction of an id without a decision row (its database transaction never committed). */
    private void abortOpen(String id, Run run) {
        try {
            Optional<TransactionSession> open = TransactionSession.resumeOpen(id, this.clientConfigs);
            if (open.isPresent()) {
                try (TransactionSession session = open.get()) {
                    session.abortTransaction();
                }
                fenceUnlessLive(id);
                run.aborted.add(id);
            }
        }
        catch (RuntimeException ex) {
            run.failed.add(id);
            log.warn("Recovery could not abort the open transaction of '{}'", id, ex);
        }
    }

    /**
     * With transaction version 1 an abort does not bump the producer epoch: a predecessor that is only paused (not
     * dead) could go on after it, start a new transaction under the same epoch with its next offsets, and commit them
     * without the output the abort removed. Initializing the id once fences it (with version 2 the abort already did;
     * one more bump is harmless). Not when a session of the pool lives on the id: its initialization fenced every
     * predecessor already, and a new producer would fence that session.
     */
    private void fenceUnlessLive(String id) {
        if (this.pool != null && this.pool.hasSession(id)) {
            return;
        }
        try {
            TransactionSession.fence(id, this.clientConfigs);
        }
        catch (RuntimeException ex) {
            log.warn("Recovery aborted the open transaction of '{}' but could not fence its producer ({}): a paused "
                    + "predecessor is fenced when the id is next initialized", id, ex.toString());
        }
    }

    private RecoveryReport finish(Run run) {
        handleLost(run.lost);
        RecoveryReport report = new RecoveryReport(List.copyOf(run.committed), List.copyOf(run.alreadyCommitted),
                List.copyOf(run.aborted), List.copyOf(run.lost), List.copyOf(run.failed), List.copyOf(run.inDoubt));
        this.committedCount.addAndGet(run.committed.size());
        this.alreadyCommittedCount.addAndGet(run.alreadyCommitted.size());
        this.abortedCount.addAndGet(run.aborted.size());
        this.lostCount.addAndGet(run.lost.size());
        this.lastReport = report;
        if (report.isEmpty()) {
            log.info("Two-phase recovery of prefix '{}': nothing to do", this.prefix);
        }
        else {
            log.info("Two-phase recovery of prefix '{}': committed {}, already committed {}, aborted {}, lost {}, "
                    + "failed {}, in doubt {}", this.prefix, run.committed, run.alreadyCommitted, run.aborted,
                    run.lost.stream().map(LostTransaction::transactionalId).toList(), run.failed,
                    run.inDoubt.stream().map(LostTransaction::transactionalId).toList());
        }
        return report;
    }

    private void handleLost(List<LostTransaction> lostNow) {
        if (lostNow.isEmpty()) {
            return;
        }
        for (LostTransaction l : lostNow) {
            log.error("Two-phase recovery: the database committed transaction {} of '{}' at {}, but its Kafka side "
                    + "is lost: {}", l.decision().preparedTransaction(), l.transactionalId(), l.decision().decidedAt(),
                    l.reason());
        }
        this.lost.addAll(lostNow);
        if (this.lostHandler == null) {
            lostNow.forEach(this::clearReported);
            return;
        }
        try {
            this.lostHandler.onLost(List.copyOf(lostNow));
        }
        catch (RuntimeException ex) {
            log.error("The lost-transaction handler failed; the decision rows stay and are reported again", ex);
            return;
        }
        lostNow.forEach(this::clearReported);
    }

    /**
     * Deletes the row of a lost transaction the application has been told about, and the copy a fleet's fence may
     * have set aside (told once, kept nowhere). A failure only leaves the row, reported again by the next run.
     */
    private void clearReported(LostTransaction l) {
        try {
            this.decisionLog.clear(this.dataSource, l.decision());
            this.decisionLog.clearSetAside(this.dataSource, l.decision());
            forgetConfirmed(l.transactionalId());
        }
        catch (RuntimeException ex) {
            log.warn("Could not clear the reported lost decision of '{}' ({}); it is reported again", l.transactionalId(),
                    ex.toString());
        }
    }

    /** @return the lost transactions found since start (or since {@link #clearLost()}) */
    public List<LostTransaction> lostTransactions() {
        return List.copyOf(this.lost);
    }

    /**
     * @return the decisions whose Kafka outcome is UNKNOWN (the transactional id moved on before recovery looked):
     *         their rows stay in the log, set aside under {@code <id>#in-doubt-<producerId>-<epoch>-<start>} so that the id can take
     *         new decisions; they are never compensated automatically, and health is DOWN until an operator settles
     *         them (delete the row once the data is checked) and recovery runs again
     */
    public List<LostTransaction> inDoubtTransactions() {
        return this.inDoubt;
    }

    /** Forgets the lost transactions reported so far, once the application has compensated them. */
    public void clearLost() {
        this.lost.clear();
    }

    /** @return the report of the last run, if any */
    public Optional<RecoveryReport> lastReport() {
        return Optional.ofNullable(this.lastReport);
    }

    /** @return how many prepared transactions recovery committed, since start */
    public long committedCount() {
        return this.committedCount.get();
    }

    /** @return how many decisions recovery found already committed, since start */
    public long alreadyCommittedCount() {
        return this.alreadyCommittedCount.get();
    }

    /** @return how many open transactions without a decision recovery aborted, since start */
    public long abortedCount() {
        return this.abortedCount.get();
    }

    /** @return how many lost transactions recovery found, since start */
    public long lostCount() {
        return this.lostCount.get();
    }
}
