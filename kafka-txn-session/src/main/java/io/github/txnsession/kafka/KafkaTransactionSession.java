package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.Supplier;

import io.github.txnsession.kafka.internals.CoordinatorClient;
import io.github.txnsession.kafka.internals.TransactionDescription;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.PreparedTxnState;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.TimeoutException;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The {@link TransactionSession} that {@link TransactionSession#open} and {@link TransactionSession#resume} create:
 * the contract, guarantees and threading rules are documented on the interface.
 *
 * <p>Implementation notes. A live session owns one transactional {@code KafkaProducer}; a resumed one has none and
 * talks to the coordinator through {@link CoordinatorView}. One read-write lock orders the calls: lifecycle calls
 * take the write lock (and refuse to run from inside a send), sends, offsets and share acknowledgements take the read
 * lock. The state machine is {@link SessionStateMachine}. Package members ({@link SessionProducer},
 * {@link TransactionalConsumer}, {@link TransactionalShareConsumer}) reach the package-private data path through
 * {@link #of(TransactionSession)}, which refuses other implementations of the interface.
 */
final class KafkaTransactionSession implements TransactionSession {

    /** the logger name applications know: TransactionSession was this class before it became an interface */
    private static final Logger log = LoggerFactory.getLogger(TransactionSession.class);

    private static final String PRODUCER_IO_THREAD = "kafka-producer-network-thread";
    private static final String TXN_SHARE_ACKNOWLEDGE = "TXN_SHARE_ACKNOWLEDGE";
    /** initialize() reads the brokers' back-off for at most this long. */
    private static final Duration CONFIG_LOOK_LIMIT = Duration.ofSeconds(2);

    private final TransactionSessionConfig config;
    private final String transactionalId;
    private final @Nullable KafkaProducer<byte[], byte[]> producer;
    private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
    private final List<SessionParticipant> participants = new CopyOnWriteArrayList<>();
    private final List<SessionListener> listeners = new CopyOnWriteArrayList<>();
    private final List<ShareAckHolder> shareAckHolders = new CopyOnWriteArrayList<>();
    private final AtomicReference<@Nullable Exception> sendFailure = new AtomicReference<>();
    /** records sent and not yet acknowledged or failed (see {@link LookDuringFlush}) */
    private final AtomicLong unacknowledgedSends = new AtomicLong();
    /** why the open transaction became abort-only (the first failure); handed out with every refused call */
    private final AtomicReference<@Nullable Throwable> abortCause = new AtomicReference<>();
    private final Object coordinatorLock = new Object();
    private final AtomicBoolean closeStarted = new AtomicBoolean();
    private final CountDownLatch closeDone = new CountDownLatch(1);
    private final @Nullable ScheduledExecutorService heartbeats;
    /** the name of this session's producer I/O thread, where a lifecycle call would wait for itself */
    private final String producerIoThread;
    private volatile SessionState state;
    private @Nullable CoordinatorView coordinator;
    /** the open, prepared or resumed transaction, once known (live: read at prepare or by a heartbeat) */
    private volatile @Nullable PreparedTransaction txn;
    /** live: the producer id and epoch the producer writes with, or null when not known */
    private volatile @Nullable ProducerIdentity producerIdentity;
    /** live: whether records or offsets were sent in the open transaction (it reached the coordinator) */
    private volatile boolean wrote;
    /** live: counts transactions, so that a late finding about one never touches the next (heartbeat) */
    private volatile long generation;
    /** live: the last end that reached the coordinator, for the next first write to wait on; or null */
    private volatile @Nullable TransactionEndWatch endWatch;
    /** live: whether ends are watched and first writes wait for them (decided at initialize for "auto") */
    private volatile boolean awaitEnds;
    /** live: the last commit timed out; kafka-clients keeps its EndTxn(commit) and only lets it be awaited again */
    private volatile boolean commitPending;
    /** the transaction failed fatally on a thread that could not tell the participants; the next call does */
    private volatile boolean participantsOwedAbort;
    private volatile @Nullable Boolean txnShareAcks;

    /** A live session: {@link TransactionSession#open(Map)}. */
    KafkaTransactionSession(Map<String, ?> configs) {
        this(TransactionSessionConfig.of(Objects.requireNonNull(configs, "configs")), true, null);
    }

    private KafkaTransactionSession(TransactionSessionConfig config, boolean live,
            @Nullable PreparedTransaction resumed) {
        this.config = config;
        this.transactionalId = config.transactionalId();
        this.producer = live ? new KafkaProducer<>(config.producerConfigs()) : null;
        Object clientId = config.producerConfigs().get(ProducerConfig.CLIENT_ID_CONFIG);
        this.producerIoThread = PRODUCER_IO_THREAD + " | " + (clientId == null || clientId.toString().isEmpty()
                ? "producer-" + this.transactionalId : clientId);
        this.txn = resumed;
        this.state = live ? SessionState.UNINITIALIZED : SessionState.PREPARED;
        if (live && !config.heartbeatInterval().isZero()) {
            ScheduledThreadPoolExecutor executor = new ScheduledThreadPoolExecutor(1, r -> {
                Thread t = new Thread(r, "txn-session-heartbeat-" + this.transactionalId);
                t.setDaemon(true);
                return t;
            });
            executor.setRemoveOnCancelPolicy(true);
            long interval = config.heartbeatInterval().toMillis();
            executor.scheduleWithFixedDelay(this::backgroundHeartbeat, interval, interval, TimeUnit.MILLISECONDS);
            this.heartbeats = executor;
        }
        else {
            this.heartbeats = null;
        }
    }

    /**
     * {@link TransactionSession#resume(String, PreparedTransaction, Map)}: checks the identity with the coordinator
     * before handing the session out, and closes it again when that check fails.
     */
    static KafkaTransactionSession resume(String transactionalId, PreparedTransaction prepared,
            Map<String, ?> configs) {
        Objects.requireNonNull(transactionalId, "transactionalId");
        Objects.requireNonNull(prepared, "prepared");
        Objects.requireNonNull(configs, "configs");
        TransactionSessionConfig config = TransactionSessionConfig.forResume(transactionalId, configs);
        KafkaTransactionSession session = new KafkaTransactionSession(config, false, prepared);
        if (prepared.isEmpty()) {
            return session;
        }
        try {
            CoordinatorView view = session.coordinator();
            Optional<TransactionDescription> d = view.describe();
            TransactionStanding standing = view.standing(prepared, d);
            String mismatch = switch (standing) {
                case UNKNOWN_ID -> "the coordinator does not know transactional.id '" + transactionalId + "'";
                case NEVER_REACHED -> "epoch " + prepared.epoch() + " was given, but the coordinator is at epoch "
                        + d.map(TransactionDescription::producerEpoch).orElse((short) -1)
                        + ", so that transaction never existed";
                default -> d.isPresent() && d.get().producerId() != prepared.producerId()
                        && standing != TransactionStanding.OVERFLOWED && !sameStart(prepared, d.get())
                        ? "producerId " + prepared.producerId() + " was given, but the coordinator holds producerId "
                                + d.get().producerId() + " for this transactional.id"
                        : null;
            };
            if (mismatch != null) {
                throw new TransactionIdentityMismatchException(transactionalId,
                        mismatch + ". " + CoordinatorView.describeForMessage(d));
            }
            log.info("Resumed transaction {} of '{}' ({})", prepared, transactionalId,
                    CoordinatorView.describeForMessage(d));
            return session;
        }
        catch (RuntimeException ex) {
            session.closeQuietly();
            throw ex;
        }
    }

    private static boolean sameStart(PreparedTransaction prepared, TransactionDescription d) {
        return prepared.hasStartTime() && d.startTimeMs() == prepared.startTimeMs();
    }

    /** {@link TransactionSession#resume(String, PreparedTxnState, Map)}. */
    static KafkaTransactionSession resume(String transactionalId, PreparedTxnState state, Map<String, ?> configs) {
        return resume(transactionalId, PreparedTransaction.from(Objects.requireNonNull(state, "state")), configs);
    }

    /** {@link TransactionSession#resume(String, long, short, Map)}. */
    static KafkaTransactionSession resume(String transactionalId, long producerId, short producerEpoch,
            Map<String, ?> configs) {
        if (producerId < 0 || producerEpoch < 0) {
            throw new IllegalArgumentException("resume needs the producerId and epoch of a prepared transaction, got "
                    + producerId + ":" + producerEpoch);
        }
        return resume(transactionalId, PreparedTransaction.of(producerId, producerEpoch, -1), configs);
    }

    /**
     * {@link TransactionSession#resumeOpen(String, Map)}: one coordinator look; the probe becomes the resumed session
     * when a transaction is open.
     */
    static Optional<TransactionSession> resumeOpen(String transactionalId, Map<String, ?> configs) {
        Objects.requireNonNull(transactionalId, "transactionalId");
        Objects.requireNonNull(configs, "configs");
        TransactionSessionConfig config = TransactionSessionConfig.forResume(transactionalId, configs);
        KafkaTransactionSession probe = new KafkaTransactionSession(config, false,
                PreparedTransaction.empty(-1, (short) -1));
        try {
            Optional<TransactionDescription> d = probe.coordinator().describe();
            if (d.isEmpty() || !(d.get().isOngoing() || d.get().isCommitting() || d.get().isAborting())) {
                probe.closeQuietly();
                return Optional.empty();
            }
            probe.txn = PreparedTransaction.of(d.get().producerId(), d.get().producerEpoch(), d.get().startTimeMs());
            log.info("Resumed open transaction {} of '{}' (coordinator state {})", probe.txn, transactionalId,
                    d.get().state());
            return Optional.of(probe);
        }
        catch (RuntimeException ex) {
            probe.closeQuietly();
            throw ex;
        }
    }

    /**
     * The session itself, for the package members that reach its data path (sends, participants, share
     * acknowledgements): they join the transaction of one session, so they need the session, not something that
     * stands for it.
     *
     * @param session a session created by {@link TransactionSession#open} or {@link TransactionSession#resume}
     * @return {@code session}
     * @throws IllegalArgumentException if {@code session} is another implementation of {@link TransactionSession},
     *         such as a proxy
     */
    static KafkaTransactionSession of(TransactionSession session) {
        Objects.requireNonNull(session, "session");
        if (session instanceof KafkaTransactionSession s) {
            return s;
        }
        throw new IllegalArgumentException("Transaction session " + describe(session) + " was not created by "
                + "TransactionSession.open(...) or TransactionSession.resume(...) (a proxy?): producers and consumers "
                + "join the transaction of one session, so they cannot be bound to an object that stands for one. "
                + "Bind the session itself, e.g. CurrentTransactionSession.get() in Spring, inside the transaction.");
    }

    private static String describe(TransactionSession foreign) {
        String type = foreign.getClass().getName();
        try {
            return "'" + foreign + "' (" + type + ")";
        }
        catch (RuntimeException ex) {
            return "of type " + type;
        }
    }

    // ---------------------------------------------------------------- lifecycle

    @Override
    public void initialize() {
        Lock write = lockForLifecycle(SessionOperation.INITIALIZE);
        try {
            SessionStateMachine.check(this.transactionalId, this.state, SessionOperation.INITIALIZE);
            try {
                liveProducer().initTransactions();
            }
            catch (RuntimeException ex) {
                throw failed(SessionOperation.INITIALIZE, SessionState.UNINITIALIZED, ex);
            }
            learnProducerIdentity();
            this.awaitEnds = decideAwaitEnds();
            move(SessionState.READY);
        }
        finally {
            write.unlock();
        }
        log.debug("Transaction session '{}' initialized ({}; first writes wait for the previous end: {})",
                this.transactionalId, this.producerIdentity, this.awaitEnds);
    }

    @Override
    public void beginTransaction() {
        Lock write = lockForLifecycle(SessionOperation.BEGIN);
        try {
            SessionStateMachine.check(this.transactionalId, this.state, SessionOperation.BEGIN);
            if (this.producerIdentity == null) {
                learnProducerIdentity(); // only after an anomaly (overflow, failed transaction): one coordinator look
            }
            try {
                liveProducer().beginTransaction();
            }
            catch (RuntimeException ex) {
                throw failed(SessionOperation.BEGIN, SessionState.READY, ex);
            }
            this.txn = null;
            this.wrote = false;
            this.commitPending = false;
            this.sendFailure.set(null);
            this.abortCause.set(null);
            this.generation++;
            move(SessionState.IN_TRANSACTION);
        }
        finally {
            write.unlock();
        }
    }

    @Override
    public void addPartitionsToTransaction(Collection<TopicPartition> partitions) {
        Objects.requireNonNull(partitions, "partitions");
        participate(SessionOperation.SEND, () -> {
            Map<String, Integer> counts = new HashMap<>();
            for (TopicPartition tp : partitions) {
                Objects.requireNonNull(tp, "partition");
                int count = counts.computeIfAbsent(tp.topic(), t -> liveProducer().partitionsFor(t).size());
                if (tp.partition() < 0 || tp.partition() >= count) {
                    throw new IllegalArgumentException("Transaction session '" + this.transactionalId + "': topic '"
                            + tp.topic() + "' has " + count + " partition(s), so " + tp + " cannot join the "
                            + "transaction");
                }
            }
            return null;
        });
    }

    @Override
    public void sendOffsetsToTransaction(Map<TopicPartition, OffsetAndMetadata> offsets,
            ConsumerGroupMetadata groupMetadata) {
        Objects.requireNonNull(offsets, "offsets");
        Objects.requireNonNull(groupMetadata, "groupMetadata");
        if (!offsets.isEmpty()) {
            awaitPreviousEnd(true);
        }
        participate(SessionOperation.SEND_OFFSETS, () -> {
            if (!offsets.isEmpty()) {
                this.wrote = true;
                liveProducer().sendOffsetsToTransaction(offsets, groupMetadata);
            }
            return null;
        });
    }

    @Override
    public PreparedTransaction prepareTransaction() {
        return prepare(false);
    }

    @Override
    public PreparedTransaction prepareTransactionByEpoch() {
        return prepare(true);
    }

    /** @param byEpoch whether the coordinator may be asked while the flush runs (see confirmedWhileFlushing) */
    private PreparedTransaction prepare(boolean byEpoch) {
        String call = byEpoch ? "prepareTransactionByEpoch()" : SessionOperation.PREPARE.call();
        Lock write = lockForLifecycle(SessionOperation.PREPARE, call);
        try {
            checkAllowed(SessionOperation.PREPARE, call);
            CoordinatorClient.@Nullable DescribeInFlight look;
            boolean recordsOnTheirWay;
            long flushNanos;
            try {
                beforeCommit();
                recordsOnTheirWay = this.unacknowledgedSends.get() > 0; // read before the look is sent
                look = byEpoch && this.wrote ? lookWhileFlushing() : null;
                long flushStart = System.nanoTime();
                liveProducer().flush();
                flushNanos = System.nanoTime() - flushStart;
            }
            catch (RuntimeException ex) {
                throw failed(SessionOperation.PREPARE, call, SessionState.IN_TRANSACTION, ex);
            }
            Exception failedSend = this.sendFailure.get();
            if (failedSend != null) {
                enterAbortable(failedSend);
                throw new SessionAbortableException(this.transactionalId,
                        call + " found a failed send (" + failedSend + ").", failedSend);
            }
            // a long flush would move the moment the transaction is known open too far from the decision
            PreparedTransaction confirmed = look == null || flushNanos > LookDuringFlush.MAX_FLUSH_NANOS ? null
                    : confirmedWhileFlushing(look, recordsOnTheirWay);
            PreparedTransaction prepared = !this.wrote ? emptyTransaction()
                    : confirmed != null ? confirmed : readOpenTransaction(call);
            this.txn = prepared;
            move(SessionState.PREPARED);
            log.debug("Transaction session '{}' prepared {}", this.transactionalId, prepared);
            return prepared;
        }
        finally {
            write.unlock();
        }
    }

    @Override
    public Optional<PreparedTransaction> expectedPreparedTransaction() {
        ProducerIdentity known = this.producerIdentity;
        if (this.state != SessionState.IN_TRANSACTION || !this.wrote || known == null || isResumed()
                || known.epoch() >= TransactionStanding.EXHAUSTED_EPOCH) {
            return Optional.empty(); // (an exhausted epoch: the coordinator may hand out a new producer id at the end)
        }
        try {
            return coordinator().transactionVersion2()
                    ? Optional.of(PreparedTransaction.of(known.producerId(), known.epoch(), -1)) : Optional.empty();
        }
        catch (RuntimeException ex) {
            return Optional.empty(); // closing, or the version cannot be read now: prepare tells
        }
    }

    private PreparedTransaction emptyTransaction() {
        ProducerIdentity known = this.producerIdentity;
        return known == null ? PreparedTransaction.empty(-1, (short) -1)
                : PreparedTransaction.empty(known.producerId(), known.epoch());
    }

    /**
     * {@link #prepareTransactionByEpoch()} with transaction version 2: asks the coordinator about the open transaction
     * while the flush runs, instead of after it (one round trip less on the commit's path; see
     * {@link LookDuringFlush}). Null where that does not apply: version 1, an unknown or exhausted identity, a
     * resumed session, a coordinator not connected yet.
     */
    private CoordinatorClient.@Nullable DescribeInFlight lookWhileFlushing() {
        ProducerIdentity known = this.producerIdentity;
        if (known == null || known.epoch() >= TransactionStanding.EXHAUSTED_EPOCH || isResumed()) {
            return null;
        }
        try {
            return coordinator().transactionVersion2() ? coordinator().startDescribe() : null;
        }
        catch (RuntimeException ex) {
            return null; // asked again after the flush, where a failure is reported
        }
    }

    /** What the look sent while the flush ran proves ({@link LookDuringFlush}), or null to ask again after it. */
    private @Nullable PreparedTransaction confirmedWhileFlushing(CoordinatorClient.DescribeInFlight look,
            boolean recordsOnTheirWay) {
        TransactionDescription seen;
        try {
            seen = look.await();
        }
        catch (TimeoutException | InterruptException ex) {
            // no answer within the coordinator timeout (asking again would only double the wait), or interrupted: as
            // with the look after the flush, the session stays in its transaction and the prepare may be called again
            throw new SessionTimeoutException(this.transactionalId, "prepareTransactionByEpoch()", ex);
        }
        catch (RuntimeException ex) {
            return null;
        }
        return LookDuringFlush.verdict(seen, this.producerIdentity, recordsOnTheirWay);
    }

    /**
     * The open transaction wrote: the coordinator must show it Ongoing under this producer's identity.
     *
     * @param call the prepare call, as errors name it
     */
    private PreparedTransaction readOpenTransaction(String call) {
        Optional<TransactionDescription> found;
        try {
            found = coordinator().describe();
        }
        catch (TimeoutException | InterruptException ex) {
            throw new SessionTimeoutException(this.transactionalId, call, ex);
        }
        ProducerIdentity known = this.producerIdentity;
        if (known == null) {
            // without the producer's own id and epoch, the open transaction could be another producer's (a zombie's
            // successor): handing that identity out could get it committed by a recovery that never meant it
            throw enterAbortable(new SessionAbortableException(this.transactionalId, call + ": the "
                    + "session could not read its producer id and epoch from the coordinator, so it cannot tell its "
                    + "transaction from another producer's (" + CoordinatorView.describeForMessage(found) + ").",
                    null));
        }
        if (found.isPresent() && found.get().isOngoing() && known.producerId() == found.get().producerId()
                && known.epoch() == found.get().producerEpoch()) {
            TransactionDescription d = found.get();
            return PreparedTransaction.of(d.producerId(), d.producerEpoch(), d.startTimeMs());
        }
        String seen = CoordinatorView.describeForMessage(found);
        if (found.isPresent() && (found.get().isAborting() || found.get().isCompleteAbort())) {
            throw enterAbortable(new TransactionLostException(this.transactionalId, call + " found it "
                    + "aborted; abort the session's transaction (expected producer " + known + "). " + seen, null));
        }
        if (found.isPresent() && (found.get().producerId() != known.producerId()
                || found.get().producerEpoch() > known.epoch())) {
            failFatal(null);
            throw new SessionFencedException(this.transactionalId, call + " (the session's producer is "
                    + known + "; " + seen + ")", null);
        }
        throw enterAbortable(new SessionAbortableException(this.transactionalId, call + ": the "
                + "transaction wrote records or offsets, but the coordinator has no open transaction for it. " + seen,
                null));
    }

    @Override
    public void commitTransaction() {
        if (isResumed()) {
            completeTransaction(Objects.requireNonNull(this.txn));
            return;
        }
        Lock write = lockForLifecycle(SessionOperation.COMMIT);
        try {
            checkAllowed(SessionOperation.COMMIT);
            commitLive();
        }
        finally {
            write.unlock();
        }
    }

    @Override
    public void abortTransaction() {
        Lock write = lockForLifecycle(SessionOperation.ABORT);
        try {
            SessionStateMachine.check(this.transactionalId, this.state, SessionOperation.ABORT);
            if (isResumed()) {
                finishResumed(false);
            }
            else {
                abortLive();
            }
        }
        finally {
            write.unlock();
        }
    }

    @Override
    public CompletionOutcome completeTransaction(PreparedTransaction prepared) {
        Objects.requireNonNull(prepared, "prepared");
        Lock write = lockForLifecycle(SessionOperation.COMPLETE);
        try {
            checkAllowed(SessionOperation.COMPLETE);
            PreparedTransaction current = this.txn;
            if (current == null) {
                throw new IllegalStateException("Transaction session '" + this.transactionalId + "': its commit timed "
                        + "out before the transaction was prepared, so there is no prepared identity to complete. Call "
                        + "commitTransaction() again to learn the outcome of that commit, or abortTransaction().");
            }
            boolean matches = current.sameTransaction(prepared);
            if (isResumed()) {
                if (!matches) {
                    log.info("completeTransaction({}) on '{}': the resumed transaction is {}; aborting it", prepared,
                            this.transactionalId, current);
                }
                return finishResumed(matches);
            }
            if (matches) {
                commitLive();
                return current.isEmpty() ? CompletionOutcome.EMPTY : CompletionOutcome.COMMITTED;
            }
            log.info("completeTransaction({}) on '{}': the prepared transaction is {}; aborting it", prepared,
                    this.transactionalId, current);
            abortLive();
            return current.isEmpty() ? CompletionOutcome.EMPTY : CompletionOutcome.ABORTED;
        }
        finally {
            write.unlock();
        }
    }

    @Override
    public CompletionOutcome completeTransaction(PreparedTxnState state) {
        return completeTransaction(PreparedTransaction.from(Objects.requireNonNull(state, "state")));
    }

    // ---------------------------------------------------------------- the live engine

    /** Commits through the producer; caller holds the write lock and checked the state. */
    private void commitLive() {
        SessionState from = this.state;
        boolean reachedProducer = false;
        try {
            if (from == SessionState.IN_TRANSACTION) {
                beforeCommit();
            }
            move(SessionState.COMMITTING);
            reachedProducer = true;
            liveProducer().commitTransaction(); // after a timed-out commit: awaits that commit, sends nothing new
            this.commitPending = false;
            endedCleanly(true);
        }
        catch (RuntimeException ex) {
            if (reachedProducer && isTimeout(ex)) {
                // kafka-clients keeps the EndTxn(commit) and sends it; only commitTransaction() may follow
                this.commitPending = true;
                move(SessionState.PREPARED);
                throw new SessionTimeoutException(this.transactionalId, "commitTransaction()", ex);
            }
            PreparedTransaction handedOut = this.txn;
            if (handedOut != null && !handedOut.isEmpty() && !(ex instanceof TransactionSessionException)
                    && (KafkaErrors.isFenced(ex) || KafkaErrors.isFatal(ex))) {
                Boolean elsewhere = committedElsewhere();
                if (elsewhere == null || elsewhere) {
                    forceState(SessionState.FATAL_ERROR);
                    this.producerIdentity = null;
                    if (elsewhere != null) {
                        notifyEnd(true);
                        throw new TransactionSessionException(this.transactionalId, "commitTransaction() failed ("
                                + ex + "), but transaction " + handedOut + " was committed by another committer of "
                                + "its prepared identity: its records and offsets are visible. Close this session.",
                                ex);
                    }
                    notifyUnknown();
                    throw new TransactionSessionException(this.transactionalId, "commitTransaction() failed (" + ex
                            + ") and whether transaction " + handedOut + " was committed by another committer cannot "
                            + "be read now: its outcome is UNKNOWN. Close this session.", ex);
                }
            }
            throw failed(SessionOperation.COMMIT, from, ex);
        }
    }

    /** Aborts through the producer; caller holds the write lock and checked the state. */
    private void abortLive() {
        if (this.state == SessionState.ABORTABLE_ERROR) {
            // the transaction failed (a timeout-abort, a refused send): kafka-clients may bump its epoch while
            // aborting, so the producer identity is read again before the next transaction
            this.producerIdentity = null;
        }
        move(SessionState.ABORTING);
        if (this.commitPending && awaitPendingCommit()) {
            throw new TransactionSessionException(this.transactionalId, "abortTransaction(): the earlier "
                    + "commitTransaction() that timed out has completed, so the transaction is COMMITTED and cannot "
                    + "be aborted. Its records and offsets are visible; the session is READY.", null);
        }
        try {
            liveProducer().abortTransaction();
            endedCleanly(false);
        }
        catch (RuntimeException ex) {
            if (isTimeout(ex)) {
                // kafka-clients lets the abort be retried
                throw enterAbortable(new SessionTimeoutException(this.transactionalId, "abortTransaction()", ex));
            }
            Boolean elsewhere = committedElsewhere();
            if (elsewhere == null || elsewhere) {
                forceState(SessionState.FATAL_ERROR);
                this.producerIdentity = null;
                if (elsewhere == null) {
                    notifyUnknown();
                    throw new TransactionSessionException(this.transactionalId, "abortTransaction() failed (" + ex
                            + ") and whether transaction " + this.txn + " was committed by another committer cannot "
                            + "be read now: its outcome is UNKNOWN. Bound consumers go back to their group's "
                            + "committed offsets. Close this session.", ex);
                }
                // an external committer completed this prepared transaction: it cannot be aborted any more
                notifyEnd(true);
                throw new TransactionSessionException(this.transactionalId, "abortTransaction(): transaction "
                        + this.txn + " was committed by another committer (a resumed session completed it), so it "
                        + "cannot be aborted; its records and offsets are visible. Close this session.", ex);
            }
            // the abort failed: the coordinator aborts the transaction after its timeout, or already did; it never
            // commits, so the participants rewind
            failFatal(null);
            if (KafkaErrors.isFenced(ex)) {
                throw new SessionFencedException(this.transactionalId, "abortTransaction()", ex);
            }
            throw new TransactionSessionException(this.transactionalId, "abortTransaction() failed (" + ex + "); the "
                    + "transaction never commits (the coordinator aborts it after transaction.timeout.ms, if it has "
                    + "not already). Close this session and create a new one.", ex);
        }
    }

    /**
     * After a commit timed out, kafka-clients refuses an abort: its EndTxn(commit) is queued or at the coordinator.
     * Waits for that commit's result (commitTransaction() on a pending commit sends nothing new).
     *
     * @return true if it committed (the session is READY), false if it failed (an abort may follow)
     */
    private boolean awaitPendingCommit() {
        try {
            liveProducer().commitTransaction();
            this.commitPending = false;
            endedCleanly(true);
            return true;
        }
        catch (RuntimeException ex) {
            if (isTimeout(ex)) {
                move(SessionState.PREPARED);
                throw new SessionTimeoutException(this.transactionalId, "abortTransaction() (it waits for the "
                        + "commit sent by the commitTransaction() that timed out, which may still commit)", ex);
            }
            this.commitPending = false;
            log.info("Transaction session '{}': the commit that timed out failed ({}); aborting", this.transactionalId,
                    ex.toString());
            return false;
        }
    }

    /**
     * After this session's abort failed: whether its prepared transaction was committed by someone else (a resumed
     * session completing the stored identity), so the participants must not rewind. False when no identity was handed
     * out (nobody else can have committed it) or the coordinator shows it did not commit; null when that cannot be
     * read now.
     */
    private @Nullable Boolean committedElsewhere() {
        PreparedTransaction prepared = this.txn;
        if (prepared == null || prepared.isEmpty()) {
            return false;
        }
        try {
            CoordinatorView view = coordinator();
            TransactionStanding standing = view.standing(prepared, view.describe());
            if (standing == TransactionStanding.COMMITTED || standing == TransactionStanding.COMMITTING) {
                return true;
            }
            // still OPEN: whoever holds the handed-out identity may yet commit it
            return standing == TransactionStanding.ABORTED || standing == TransactionStanding.NOT_REGISTERED ? false
                    : null;
        }
        catch (RuntimeException ex) {
            log.warn("Transaction session '{}': could not read how {} ended: {}", this.transactionalId, prepared,
                    ex.toString());
            return null;
        }
    }

    /** A commit or abort succeeded: the producer's epoch moved on if the transaction reached the coordinator. */
    private void endedCleanly(boolean committed) {
        ProducerIdentity known = this.producerIdentity;
        if (known != null && this.wrote) {
            this.producerIdentity = this.sendFailure.get() != null ? null : afterEnd(known);
        }
        if (this.wrote && this.awaitEnds) {
            this.endWatch = new TransactionEndWatch(); // the end reached the coordinator
        }
        ended(committed);
    }

    /**
     * {@code session.await-transaction-end}: as configured, or for {@code auto} whether a write that meets an
     * unfinished end costs more than the wait: with transaction version 2 the brokers' back-off decides (above 2 ms, or
     * unknown: wait; read from the coordinator's broker, assuming brokers are configured alike); with version 1 the
     * producer retries its AddPartitionsToTxn after its {@code retry.backoff.ms}, at most 20 ms for a transaction's
     * first partitions (kafka-clients caps it there; with Kafka's default 100 ms that is 20 ms: wait).
     */
    private boolean decideAwaitEnds() {
        Boolean configured = this.config.awaitTransactionEnd();
        if (configured != null) {
            return configured;
        }
        try {
            CoordinatorView view = coordinator();
            if (!view.transactionVersion2()) {
                return this.config.producerRetryBackoffMs() > 2;
            }
            long backoff = view.addPartitionsRetryBackoffMs(CONFIG_LOOK_LIMIT);
            return backoff < 0 || backoff > 2;
        }
        catch (RuntimeException ex) {
            log.debug("Transaction session '{}': could not read the brokers' back-off ({}); first writes wait for the "
                    + "previous end", this.transactionalId, ex.toString());
            return true;
        }
    }

    /** @return whether first writes wait for the previous end (decided at initialize; for tests and diagnostics) */
    boolean awaitsPreviousEnds() {
        return this.awaitEnds;
    }

    /**
     * Before a write: if it may be the transaction's first and the previous end is recent, wait until the coordinator
     * has finished it (bounded; see {@link TransactionEndWatch}). Never on the producer's I/O thread.
     *
     * @param offsets whether the write adds consumer offsets (records otherwise)
     */
    private void awaitPreviousEnd(boolean offsets) {
        TransactionEndWatch watch = this.endWatch;
        if (watch != null && !this.wrote && watch.isPending(offsets) && !onProducerIoThread()) {
            try {
                watch.awaitEnd(coordinator(), offsets);
            }
            catch (RuntimeException ex) {
                // closing: the write itself will say so
            }
        }
    }

    /** The producer's identity after a clean end; null (read again before the next prepare) if it cannot be told. */
    private @Nullable ProducerIdentity afterEnd(ProducerIdentity known) {
        try {
            return known.afterEnd(coordinator().transactionVersion2());
        }
        catch (RuntimeException ex) {
            return null;
        }
    }

    private void ended(boolean committed) {
        move(SessionState.READY);
        this.txn = null;
        this.wrote = false;
        this.abortCause.set(null);
        notifyEnd(committed);
    }

    /**
     * Maps a failed lifecycle call to the session's error types and moves the session: timeouts return to
     * {@code from} (retry), fencing and fatal errors to FATAL_ERROR (participants rewind; during a commit they are told
     * the outcome is unknown, as the commit may have landed first), everything else to ABORTABLE_ERROR.
     */
    private RuntimeException failed(SessionOperation operation, SessionState from, RuntimeException ex) {
        return failed(operation, operation.call(), from, ex);
    }

    /** @param call the call as the user wrote it, one of {@code operation}'s forms, for messages */
    private RuntimeException failed(SessionOperation operation, String call, SessionState from,
            RuntimeException ex) {
        if (ex instanceof TransactionSessionException tse) {
            return tse; // raised by a participant or by a coordinator check, which moved the state already
        }
        if (isTimeout(ex)) {
            restore(from);
            return ex instanceof InterruptException ? ex : new SessionTimeoutException(this.transactionalId, call, ex);
        }
        if (operation == SessionOperation.INITIALIZE && SessionAuthorizationException.isAuthorizationError(ex)) {
            // nothing was registered or written; kafka-clients 4.2 leaves its producer in an error state after these
            // (a second initTransactions() fails with "we are in an error state", as AuthorizationTest shows)
            failFatal(null);
            return new SessionAuthorizationException(this.transactionalId, call, ex);
        }
        if (operation == SessionOperation.INITIALIZE && !KafkaErrors.isFenced(ex)) {
            restore(from);
            return new TransactionSessionException(this.transactionalId, call + " failed: " + ex, ex);
        }
        if (KafkaErrors.isFenced(ex)) {
            failFatal(null);
            return new SessionFencedException(this.transactionalId, call, ex);
        }
        if (KafkaErrors.isFatal(ex) || !(ex instanceof KafkaException)) {
            failFatal(null);
            return new TransactionSessionException(this.transactionalId, call + " failed with a fatal error (" + ex
                    + "); the transaction did not commit. Close this session and create a new one.", ex);
        }
        forceState(SessionState.ABORTABLE_ERROR);
        return noteAbortCause(new SessionAbortableException(this.transactionalId, call + " failed: " + ex + ".", ex));
    }

    /**
     * The transaction can no longer commit here and the session is done: FATAL_ERROR, and the participants are told
     * the transaction ended without a commit (consumers rewind, share consumers release), or, if it was PREPARED or
     * COMMITTING, that its outcome is unknown (someone holding its identity may still commit it, or the commit may
     * have landed before the failure). Takes the write lock unless
     * the calling thread is inside a send; then the participants are told by the next call on the session.
     *
     * @param generation only act if the session is still on this transaction (null: the current one)
     */
    private void failFatal(@Nullable Long generation) {
        if (this.lock.getReadHoldCount() > 0) {
            if (generation == null || generation == this.generation) {
                boolean open = isOpen(this.state);
                forceState(SessionState.FATAL_ERROR);
                this.participantsOwedAbort |= open;
            }
            return;
        }
        Lock write = this.lock.writeLock();
        write.lock();
        try {
            if (generation != null && generation != this.generation) {
                return;
            }
            SessionState s = this.state;
            if (s == SessionState.FATAL_ERROR || s == SessionState.CLOSED) {
                return;
            }
            forceState(SessionState.FATAL_ERROR);
            this.producerIdentity = null;
            if ((s == SessionState.PREPARED || s == SessionState.COMMITTING) && !isResumed()) {
                // PREPARED: its identity was handed out (or a commit may be in flight), so another committer or a
                // recovery reading a decision can still commit it. COMMITTING: the EndTxn may have landed before the
                // failure (a fenced retry of a commit the coordinator completed). Either way participants must not
                // treat it as aborted: consumers re-read the committed offsets, share consumers release
                notifyUnknown();
            }
            else if (isOpen(s) && !isResumed()) {
                notifyEnd(false);
            }
        }
        finally {
            write.unlock();
        }
    }

    private static boolean isOpen(SessionState s) {
        return s == SessionState.IN_TRANSACTION || s == SessionState.PREPARED || s == SessionState.ABORTABLE_ERROR
                || s == SessionState.COMMITTING || s == SessionState.ABORTING;
    }

    private static boolean isTimeout(RuntimeException ex) {
        return ex instanceof TimeoutException || ex instanceof InterruptException;
    }

    /** Reads the producer's id and epoch while none of its transactions is open; null if that cannot be known. */
    private void learnProducerIdentity() {
        try {
            long deadline = System.nanoTime() + this.config.coordinatorTimeout().toNanos();
            long backoffMs = 2;
            Optional<TransactionDescription> d = coordinator().describe();
            // the previous transaction's end may still be written: its epoch is final only once it completed
            while (d.isPresent() && (d.get().isCommitting() || d.get().isAborting()) && System.nanoTime() < deadline) {
                TimeUnit.MILLISECONDS.sleep(backoffMs);
                backoffMs = Math.min(100, backoffMs * 2);
                d = coordinator().describe();
            }
            this.producerIdentity = d.isPresent() && !d.get().isOngoing() && !d.get().isCommitting()
                    && !d.get().isAborting() ? new ProducerIdentity(d.get().producerId(), d.get().producerEpoch())
                    : null;
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            this.producerIdentity = null;
        }
        catch (RuntimeException ex) {
            this.producerIdentity = null;
            log.debug("Transaction session '{}': could not read its producer identity ({}); fencing is then found "
                    + "by the producer's next call", this.transactionalId, ex.toString());
        }
    }

    // ---------------------------------------------------------------- the resumed engine

    private CompletionOutcome finishResumed(boolean commit) {
        SessionState from = this.state;
        move(commit ? SessionState.COMMITTING : SessionState.ABORTING);
        PreparedTransaction resumed = Objects.requireNonNull(this.txn);
        try {
            ResumedCompletion completion = new ResumedCompletion(this.transactionalId, coordinator());
            CompletionOutcome outcome = commit ? completion.commit(resumed) : completion.abort(resumed);
            move(SessionState.READY);
            return outcome;
        }
        catch (RuntimeException ex) {
            if (isTimeout(ex)) {
                restore(from);
                throw ex instanceof InterruptException ? ex : new SessionTimeoutException(this.transactionalId,
                        commit ? "completeTransaction()" : "abortTransaction()", ex);
            }
            forceState(SessionState.FATAL_ERROR);
            throw ex instanceof TransactionSessionException tse ? tse : new TransactionSessionException(
                    this.transactionalId, (commit ? "commit" : "abort") + " of resumed transaction " + resumed
                            + " failed: " + ex, ex);
        }
    }

    // ---------------------------------------------------------------- heartbeat

    @Override
    public void heartbeat() {
        checkNotInsideSend(SessionOperation.HEARTBEAT.call());
        checkAllowed(SessionOperation.HEARTBEAT);
        long gen = this.generation;
        TransactionSessionException failure = isResumed() ? resumedHeartbeat() : liveHeartbeat();
        if (failure == null) {
            return;
        }
        Lock write = this.lock.writeLock();
        write.lock();
        try {
            SessionState now = this.state;
            if (gen != this.generation || this.commitPending
                    || (now != SessionState.IN_TRANSACTION && now != SessionState.PREPARED)) {
                return; // the transaction ended or is ending meanwhile (this session's commit or abort)
            }
            if (failure instanceof TransactionLostException && !isResumed()) {
                enterAbortable(failure);
                this.producerIdentity = null;
            }
            else {
                forceState(SessionState.FATAL_ERROR);
                if (!isResumed()) {
                    this.producerIdentity = null;
                    PreparedTransaction handedOut = this.txn;
                    if (handedOut != null && !handedOut.isEmpty()) {
                        notifyUnknown(); // its identity was handed out: someone may have committed it
                    }
                    else {
                        notifyEnd(false);
                    }
                }
            }
        }
        finally {
            write.unlock();
        }
        throw failure;
    }

    private @Nullable TransactionSessionException resumedHeartbeat() {
        PreparedTransaction resumed = Objects.requireNonNull(this.txn);
        if (resumed.isEmpty()) {
            return null;
        }
        CoordinatorView view = coordinator();
        Optional<TransactionDescription> d = view.describe();
        return switch (view.standing(resumed, d)) {
            case ABORTED -> new TransactionLostException(this.transactionalId, "heartbeat() found it. "
                    + CoordinatorView.describeForMessage(d), null);
            case FENCED -> new SessionFencedException(this.transactionalId, "heartbeat() ("
                    + CoordinatorView.describeForMessage(d) + ")", null);
            default -> null;
        };
    }

    private @Nullable TransactionSessionException liveHeartbeat() {
        ProducerIdentity known = this.producerIdentity;
        PreparedTransaction open = this.txn;
        if (this.commitPending || (!this.wrote && (open == null || open.isEmpty()))) {
            return null; // a commit is on its way, or nothing was written: nothing can be lost
        }
        CoordinatorView view = coordinator();
        Optional<TransactionDescription> found = view.describe();
        if (found.isEmpty()) {
            return null;
        }
        TransactionDescription d = found.get();
        String seen = CoordinatorView.describeForMessage(found);
        if (open != null && open.hasStartTime()) {
            // prepared (or seen open before): its own standing says it all
            return switch (view.standing(open, found)) {
                case OPEN, COMMITTING, COMMITTED -> null; // COMMIT*: completed by another committer of this prepare
                case ABORTED -> new TransactionLostException(this.transactionalId, "heartbeat() found it. " + seen,
                        null);
                // moved on: this session can no longer commit it, but a committer of the handed-out identity may have
                default -> new SessionFencedException(this.transactionalId, "heartbeat() (the transaction " + open
                        + " is no longer the coordinator's latest, its outcome is unknown; " + seen + ")", null);
            };
        }
        if (known == null) {
            return null; // no certain reference to compare with
        }
        if (d.producerId() == known.producerId() && d.producerEpoch() == known.epoch()) {
            return null; // open, or not registered yet (the previous transaction's end is still shown)
        }
        if (d.producerId() == known.producerId() && d.producerEpoch() == known.epoch() + 1
                && (d.isCommitting() || d.isCompleteCommit())) {
            return null; // with version 2: this session's own commit, started while the coordinator was asked
        }
        if (d.producerId() == known.producerId() && d.producerEpoch() > known.epoch()) {
            // the coordinator moved past the epoch this transaction writes with: it can never commit
            if (d.isAborting() || d.isCompleteAbort()) {
                return new TransactionLostException(this.transactionalId, "heartbeat() found it (the session's "
                        + "producer is " + known + "). " + seen, null);
            }
            return new SessionFencedException(this.transactionalId, "heartbeat() (the session's producer is " + known
                    + "; " + seen + ")", null);
        }
        if (d.producerId() != known.producerId() && known.epoch() < TransactionStanding.EXHAUSTED_EPOCH) {
            return new SessionFencedException(this.transactionalId, "heartbeat() (the session's producer is " + known
                    + "; " + seen + ")", null);
        }
        return null;
    }

    private void backgroundHeartbeat() {
        SessionState s = this.state;
        if (s != SessionState.IN_TRANSACTION && s != SessionState.PREPARED) {
            return;
        }
        try {
            heartbeat();
        }
        catch (TransactionLostException | SessionFencedException ex) {
            log.warn("Background heartbeat: {}", ex.getMessage());
            for (SessionListener listener : this.listeners) {
                try {
                    listener.onTransactionFailed(this, ex);
                }
                catch (RuntimeException listenerFailure) {
                    log.warn("Session listener failed", listenerFailure);
                }
            }
        }
        catch (IllegalStateException ex) {
            // the state moved on between the check and the call: nothing to report
        }
        catch (RuntimeException ex) {
            log.debug("Background heartbeat of '{}' could not reach the coordinator: {}", this.transactionalId,
                    ex.toString());
        }
    }

    // ---------------------------------------------------------------- close

    @Override
    public void close() {
        close(this.config.closeTimeout());
    }

    @Override
    public void close(Duration timeout) {
        close(timeout, true);
    }

    @Override
    public void abandon() {
        close(this.config.closeTimeout(), false);
    }

    private void close(Duration timeout, boolean settle) {
        Objects.requireNonNull(timeout, "timeout");
        checkNotInsideSend(SessionOperation.CLOSE.call());
        if (!this.closeStarted.compareAndSet(false, true)) {
            awaitClosed(timeout);
            return;
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        try {
            if (this.heartbeats != null) {
                this.heartbeats.shutdownNow();
            }
            Lock write = this.lock.writeLock();
            if (!tryLock(write, timeout)) {
                log.warn("Transaction session '{}': close() waits for a commit or abort in progress on another thread",
                        this.transactionalId);
                write.lock();
            }
            try {
                if (settle) {
                    settleOnClose();
                }
                else if (this.participantsOwedAbort) {
                    this.participantsOwedAbort = false;
                    notifyEnd(false); // it failed without a commit and could not tell them yet
                }
                else if (isOpen(this.state)) {
                    log.info("Transaction session '{}' abandoned with its transaction {} {}: left for another process "
                            + "to complete", this.transactionalId, this.txn, this.state);
                    notifyUnknown();
                }
            }
            finally {
                this.state = SessionState.CLOSED;
                write.unlock();
            }
        }
        finally {
            try {
                if (this.producer != null) {
                    // an abandoned transaction must not be aborted: close(ZERO) does not abort, close(timeout) does
                    this.producer.close(settle ? Duration.ofNanos(Math.max(0, deadline - System.nanoTime()))
                            : Duration.ZERO);
                }
            }
            catch (RuntimeException ex) {
                log.warn("Transaction session '{}': closing its producer failed: {}", this.transactionalId,
                        ex.toString());
            }
            finally {
                closeQuietly();
                this.closeDone.countDown();
            }
        }
    }

    private void settleOnClose() {
        SessionState from = this.state;
        if (this.producer == null) {
            return;
        }
        if (this.participantsOwedAbort) {
            this.participantsOwedAbort = false;
            notifyEnd(false);
        }
        if (!isOpen(from)) {
            return;
        }
        if (this.commitPending) {
            try {
                this.producer.commitTransaction(); // awaits the commit sent before; sends nothing new
                log.info("Transaction session '{}' closed after its pending commit completed", this.transactionalId);
                notifyEnd(true);
            }
            catch (RuntimeException ex) {
                if (isTimeout(ex)) {
                    log.error("Transaction session '{}' closed while a commit it sent was still pending ({}): its "
                            + "outcome is UNKNOWN; bound consumers go back to their group's committed offsets",
                            this.transactionalId, ex.toString());
                    notifyUnknown();
                }
                else {
                    notifyEnd(false);
                }
            }
            return;
        }
        try {
            this.producer.abortTransaction();
            log.info("Transaction session '{}' closed with a transaction open: aborted it", this.transactionalId);
        }
        catch (RuntimeException ex) {
            Boolean elsewhere = committedElsewhere();
            if (elsewhere == null) {
                log.warn("Transaction session '{}' closed: its abort failed ({}) and how {} ended cannot be read now",
                        this.transactionalId, ex.toString(), this.txn);
                notifyUnknown();
                return;
            }
            if (elsewhere) {
                log.info("Transaction session '{}' closed: its prepared transaction {} was committed by another "
                        + "committer", this.transactionalId, this.txn);
                notifyEnd(true);
                return;
            }
            log.warn("Transaction session '{}': abort on close failed ({}); unless another committer completes "
                    + "it, the coordinator aborts the transaction after transaction.timeout.ms", this.transactionalId,
                    ex.toString());
        }
        if (from != SessionState.FATAL_ERROR) {
            notifyEnd(false);
        }
    }

    private static boolean tryLock(Lock lock, Duration timeout) {
        try {
            return lock.tryLock(timeout.toMillis(), TimeUnit.MILLISECONDS);
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            return lock.tryLock();
        }
    }

    private void awaitClosed(Duration timeout) {
        try {
            if (!this.closeDone.await(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
                log.debug("Transaction session '{}': close() returns while another close() is still running",
                        this.transactionalId);
            }
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
        }
    }

    // ---------------------------------------------------------------- identity and state

    @Override
    public String transactionalId() {
        return this.transactionalId;
    }

    @Override
    public SessionState state() {
        return this.state;
    }

    @Override
    public boolean isResumed() {
        return this.producer == null;
    }

    @Override
    public Optional<PreparedTransaction> currentTransaction() {
        return Optional.ofNullable(this.txn);
    }

    @Override
    public long producerId() {
        return currentIdentity().producerId();
    }

    @Override
    public short producerEpoch() {
        return currentIdentity().epoch();
    }

    private ProducerIdentity currentIdentity() {
        SessionState s = this.state;
        if (s == SessionState.UNINITIALIZED || s == SessionState.CLOSED) {
            throw new IllegalStateException("Transaction session '" + this.transactionalId + "' is in state " + s
                    + ": its producer id and epoch are known only after initialize() and before close().");
        }
        PreparedTransaction t = this.txn;
        if (t != null && t.producerId() >= 0) {
            return new ProducerIdentity(t.producerId(), t.epoch());
        }
        ProducerIdentity known = this.producerIdentity;
        if (known != null) {
            return known;
        }
        TransactionDescription d = coordinator().describe().orElseThrow(() -> new TransactionSessionException(
                this.transactionalId, "the coordinator does not know this transactional.id; was initialize() "
                        + "called?", null));
        return new ProducerIdentity(d.producerId(), d.producerEpoch());
    }

    @Override
    public void addListener(SessionListener listener) {
        this.listeners.add(Objects.requireNonNull(listener, "listener"));
    }

    @Override
    public void removeListener(SessionListener listener) {
        this.listeners.remove(listener);
    }

    @Override
    public String toString() {
        return "TransactionSession[" + this.transactionalId + ", " + this.state
                + (isResumed() ? ", resumed " + this.txn : "") + "]";
    }

    // ---------------------------------------------------------------- data path (bound producers)

    /** @return the number of transactions begun on this session: names the open one */
    long generation() {
        return this.generation;
    }

    Future<RecordMetadata> send(ProducerRecord<byte[], byte[]> record, @Nullable Callback callback) {
        awaitPreviousEnd(false);
        return participate(SessionOperation.SEND, () -> {
            this.wrote = true;
            Future<RecordMetadata> sent = liveProducer().send(record, (metadata, exception) -> {
                this.unacknowledgedSends.decrementAndGet();
                if (exception != null) {
                    this.sendFailure.compareAndSet(null, exception);
                }
                if (callback != null) {
                    callback.onCompletion(metadata, exception);
                }
            });
            // counted once send returned (its callback may have run already): a send that throws is never counted,
            // though its callback may still run, so the count can run low (then a look during the flush confirms
            // less often), never high
            this.unacknowledgedSends.incrementAndGet();
            return sent;
        });
    }

    void flush() {
        participate(SessionOperation.SEND, () -> {
            liveProducer().flush();
            return null;
        });
    }

    List<PartitionInfo> partitionsFor(String topic) {
        ensureNotClosed("partitionsFor()");
        return liveProducer().partitionsFor(topic);
    }

    Map<MetricName, ? extends Metric> metrics() {
        ensureNotClosed("metrics()");
        return liveProducer().metrics();
    }

    KafkaProducer<byte[], byte[]> liveProducer() {
        KafkaProducer<byte[], byte[]> p = this.producer;
        if (p == null) {
            throw new IllegalStateException("Transaction session '" + this.transactionalId + "' was resumed to finish "
                    + "transaction " + this.txn + ": it has no producer, so it cannot send, add offsets or "
                    + "begin transactions. Only commitTransaction(), abortTransaction(), completeTransaction(), "
                    + "heartbeat() and close() are available.");
        }
        return p;
    }

    /** Blocks while a lifecycle call (commit, abort, prepare, ...) is running on another thread. */
    void awaitLifecycleIdle() {
        Lock read = this.lock.readLock();
        read.lock();
        read.unlock();
    }

    void addParticipant(SessionParticipant participant) {
        this.participants.add(participant);
    }

    void removeParticipant(SessionParticipant participant) {
        this.participants.remove(participant);
    }

    // ---- bound consumers and share consumers

    @Override
    public void addShareAcksToTransaction(String groupId, Collection<ShareAcknowledgement> acks) {
        Objects.requireNonNull(groupId, "groupId");
        Objects.requireNonNull(acks, "acks");
        boolean added = whileInTransaction(() -> {
            List<ShareAckHolder> holders = new ArrayList<>(acks.size());
            for (ShareAcknowledgement ack : acks) {
                Objects.requireNonNull(ack, "ack");
                holders.add(holderOf(groupId, ack));
            }
            Iterator<ShareAckHolder> holder = holders.iterator();
            for (ShareAcknowledgement ack : acks) {
                holder.next().hold(ack);
            }
        });
        if (!added) {
            throw new IllegalStateException("Transaction session '" + this.transactionalId + "' is in state "
                    + this.state + ": addShareAcksToTransaction() needs an open transaction (state IN_TRANSACTION). "
                    + "Call beginTransaction() first, or acknowledge outside a transaction on the share consumer.");
        }
    }

    @Override
    public boolean transactionalShareAcksAvailable() {
        Boolean known = this.txnShareAcks;
        if (known == null) {
            known = isResumed() ? Boolean.FALSE : coordinator().advertisesApi(TXN_SHARE_ACKNOWLEDGE);
            this.txnShareAcks = known;
            if (!known) {
                log.debug("Transaction session '{}': no {} API (KIP-1289) in this client or broker; share "
                        + "acknowledgements are sent after each commit", this.transactionalId,
                        TXN_SHARE_ACKNOWLEDGE);
            }
        }
        return known;
    }

    private ShareAckHolder holderOf(String groupId, ShareAcknowledgement ack) {
        for (ShareAckHolder h : this.shareAckHolders) {
            if (h.groupId().equals(groupId) && h.holds(ack)) {
                return h;
            }
        }
        throw new IllegalStateException("Transaction session '" + this.transactionalId + "': record "
                + ack.recordId() + " of share group '" + groupId + "' is not held by any TransactionalShareConsumer "
                + "bound to this session: it was not delivered by such a consumer, or it was acknowledged already. "
                + "Acknowledge only records returned by the poll() of a share consumer bound to this session.");
    }

    void addShareAckHolder(ShareAckHolder holder) {
        this.shareAckHolders.add(holder);
    }

    void removeShareAckHolder(ShareAckHolder holder) {
        this.shareAckHolders.remove(holder);
    }

    /**
     * Runs {@code action} under the shared lock if a transaction is open (IN_TRANSACTION), so that no commit or abort
     * can start while it runs; blocks while a lifecycle call runs.
     *
     * @return whether the action ran
     */
    boolean whileInTransaction(Runnable action) {
        Lock read = this.lock.readLock();
        read.lock();
        try {
            if (this.state != SessionState.IN_TRANSACTION) {
                return false;
            }
            action.run();
            return true;
        }
        finally {
            read.unlock();
        }
    }

    /**
     * For a participant's {@code beforeCommit}: the open transaction can only be aborted. Moves the session to
     * ABORTABLE_ERROR and returns the exception for the participant to throw.
     */
    SessionAbortableException abortOnly(String reason) {
        Lock write = this.lock.writeLock();
        write.lock();
        try {
            SessionAbortableException failure = new SessionAbortableException(this.transactionalId, reason, null);
            if (this.state == SessionState.IN_TRANSACTION || this.state == SessionState.PREPARED) {
                enterAbortable(failure);
            }
            return failure;
        }
        finally {
            write.unlock();
        }
    }

    /**
     * Runs a participation call (send, offsets) under the shared lock, in a state that allows it. Fencing ends the
     * session (participants are told the transaction did not commit); an epoch the coordinator already moved past
     * (a transaction it timed out) makes the transaction abortable.
     */
    private <T> T participate(SessionOperation operation, Supplier<T> action) {
        Lock read = this.lock.readLock();
        read.lock();
        long gen = this.generation;
        RuntimeException fenced = null;
        try {
            checkAllowed(operation);
            liveProducer();
            try {
                return action.get();
            }
            catch (TimeoutException ex) {
                throw new SessionTimeoutException(this.transactionalId, operation.call(), ex);
            }
            catch (KafkaException ex) {
                if (ex instanceof TransactionSessionException) {
                    throw ex;
                }
                if (KafkaErrors.isFenced(ex)) {
                    fenced = new SessionFencedException(this.transactionalId, operation.call(), ex);
                    throw fenced;
                }
                if (KafkaErrors.isFatal(ex)) {
                    fenced = new TransactionSessionException(this.transactionalId, operation.call()
                            + " failed with a fatal error (" + ex + "); close this session.", ex);
                    throw fenced;
                }
                SessionAbortableException failure = new SessionAbortableException(this.transactionalId,
                        operation.call() + " failed: " + ex + ".", ex);
                if (this.state == SessionState.IN_TRANSACTION) {
                    noteAbortCause(failure); // before the state: a concurrent send must find the cause
                    forceState(SessionState.ABORTABLE_ERROR); // kafka-clients put the transaction in error state
                }
                throw failure;
            }
        }
        finally {
            read.unlock();
            if (fenced != null) {
                failFatal(gen);
            }
        }
    }

    // ---------------------------------------------------------------- internals

    /**
     * Takes the write lock for a lifecycle call. Refuses, instead of deadlocking, a call from inside a send on the
     * same thread (kafka-clients runs a send callback synchronously on some errors) or from the producer's I/O thread
     * (a callback that waits for a commit would wait for itself). Tells the participants about a fatal end that a
     * send could not report.
     */
    private Lock lockForLifecycle(SessionOperation operation) {
        return lockForLifecycle(operation, operation.call());
    }

    /** @param call the call as the user wrote it, one of {@code operation}'s forms, for messages */
    private Lock lockForLifecycle(SessionOperation operation, String call) {
        checkNotInsideSend(call);
        Lock write = this.lock.writeLock();
        write.lock();
        if (this.participantsOwedAbort) {
            this.participantsOwedAbort = false;
            notifyEnd(false);
        }
        return write;
    }

    private void checkNotInsideSend(String call) {
        if (this.lock.getReadHoldCount() > 0) {
            throw new IllegalStateException("Transaction session '" + this.transactionalId + "': " + call
                    + " was called from inside a send on the same thread (a send callback that kafka-clients ran "
                    + "synchronously, or a participant); it would wait for itself. Call it after send() returns, or "
                    + "from another thread.");
        }
        if (onProducerIoThread()) {
            throw new IllegalStateException("Transaction session '" + this.transactionalId + "': " + call
                    + " was called from the producer's I/O thread (a send callback); the call needs that thread "
                    + "and would wait for itself. Hand the call to another thread.");
        }
    }

    private boolean onProducerIoThread() {
        return this.producer != null && Thread.currentThread().getName().equals(this.producerIoThread);
    }

    private void beforeCommit() {
        for (SessionParticipant p : this.participants) {
            p.beforeCommit(this);
        }
    }

    private void notifyUnknown() {
        for (SessionParticipant p : this.participants) {
            try {
                p.afterOutcomeUnknown(this);
            }
            catch (RuntimeException ex) {
                log.warn("Transaction session '{}': participant {} failed after an unknown outcome",
                        this.transactionalId, p, ex);
            }
        }
    }

    private void notifyEnd(boolean committed) {
        for (SessionParticipant p : this.participants) {
            try {
                if (committed) {
                    p.afterCommit(this);
                }
                else {
                    p.afterAbort(this);
                }
            }
            catch (RuntimeException ex) {
                log.warn("Transaction session '{}': participant {} failed after {}", this.transactionalId, p,
                        committed ? "commit" : "abort", ex);
            }
        }
    }

    /**
     * Checks {@code operation} against the table. A call that would carry an abort-only transaction forward (send,
     * offsets, prepare, commit, complete, heartbeat) fails with {@link SessionAbortableException} carrying the failure
     * that made it abort-only, so a caller that swallowed that failure still learns what it was (a record too large,
     * a broker outage) and can tell a bad record from an outage; other illegal calls fail with
     * {@link IllegalStateException}.
     */
    private void checkAllowed(SessionOperation operation) {
        checkAllowed(operation, operation.call());
    }

    /** @param call the call as the user wrote it, one of {@code operation}'s forms, for messages */
    private void checkAllowed(SessionOperation operation, String call) {
        SessionState now = this.state;
        if (now == SessionState.ABORTABLE_ERROR && operation != SessionOperation.BEGIN
                && operation != SessionOperation.INITIALIZE
                && !SessionStateMachine.isAllowed(now, operation)) {
            Throwable cause = this.abortCause.get();
            if (cause == null) {
                cause = this.sendFailure.get();
            }
            throw new SessionAbortableException(this.transactionalId, call + " is not allowed in state "
                    + now + ": the transaction failed earlier" + (cause == null ? "" : " (" + cause + ")")
                    + " and can only be aborted.", cause);
        }
        SessionStateMachine.check(this.transactionalId, now, operation, call);
    }

    /** Moves to ABORTABLE_ERROR and keeps {@code cause} as the transaction's first failure. */
    private <E extends Throwable> E enterAbortable(E cause) {
        move(SessionState.ABORTABLE_ERROR);
        return noteAbortCause(cause);
    }

    /**
     * Keeps the transaction's first failure: a send that failed earlier (reported on the producer's I/O thread, where
     * the state cannot move) wins over {@code failure}, which may only be its consequence.
     */
    private <E extends Throwable> E noteAbortCause(E failure) {
        Exception failedSend = this.sendFailure.get();
        this.abortCause.compareAndSet(null, failedSend != null ? failedSend : failure);
        return failure;
    }

    private void move(SessionState to) {
        if (this.state == SessionState.CLOSED) {
            return;
        }
        SessionStateMachine.checkMove(this.transactionalId, this.state, to);
        this.state = to;
    }

    private void restore(SessionState from) {
        if (this.state != SessionState.CLOSED) {
            this.state = from;
        }
    }

    private void forceState(SessionState to) {
        if (this.state != SessionState.CLOSED) {
            this.state = to;
        }
    }

    private CoordinatorView coordinator() {
        synchronized (this.coordinatorLock) {
            ensureNotClosed("a coordinator call");
            if (this.coordinator == null) {
                this.coordinator = new CoordinatorView(this.transactionalId,
                        new CoordinatorClient(this.config.clientConfigs()), this.config.coordinatorTimeout());
            }
            return this.coordinator;
        }
    }

    private void ensureNotClosed(String call) {
        if (this.state == SessionState.CLOSED) {
            throw new IllegalStateException(
                    SessionStateMachine.describeIllegal(this.transactionalId, SessionState.CLOSED,
                            SessionOperation.SEND, call));
        }
    }

    private void closeQuietly() {
        synchronized (this.coordinatorLock) {
            if (this.coordinator != null) {
                try {
                    this.coordinator.close();
                }
                catch (RuntimeException ex) {
                    log.debug("Closing the coordinator client of '{}' failed: {}", this.transactionalId,
                            ex.toString());
                }
                this.coordinator = null;
            }
        }
        this.state = SessionState.CLOSED;
    }
}
