package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
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
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.InvalidTxnStateException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.protocol.Errors;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A Kafka transaction as a first-class, thread-safe object: one {@code transactional.id}, its producer id and
 * epoch, and the lifecycle begin / commit / abort / prepare / complete. Producers ({@link SessionProducer}) and
 * consumers bind to it; all their records and offsets go into the session's one transaction.
 *
 * <h2>Two kinds of session</h2>
 * <ul>
 * <li><b>Live</b>: {@code new TransactionSession(configs)} then {@link #initialize()}. It owns one transactional
 * {@code KafkaProducer} as its data path; bound producers serialize with their own serializers and send through it,
 * so Kafka's batching, idempotence, retries and compression apply unchanged.</li>
 * <li><b>Resumed</b>: {@link #resume(String, long, short, Map)} takes over a transaction that another process left
 * open (typically after {@link #prepareTransaction()} and a crash) and finishes it: commit, abort or
 * {@link #completeTransaction(PreparedTxnState)}. It creates no producer, no thread and no buffer pool.</li>
 * </ul>
 *
 * <h2>Guarantees</h2>
 * <ul>
 * <li>Every record sent through a bound producer between {@link #beginTransaction()} and the end of the transaction
 * becomes visible to {@code read_committed} readers if and only if the transaction commits.</li>
 * <li>Thread safety: any number of threads may send through bound producers during a transaction; lifecycle calls
 * are serialized and wait for sends in progress, and sends wait while a commit or abort runs.</li>
 * <li>One explicit state machine ({@link SessionState}, table in {@code SessionStateMachine}); an illegal call
 * throws {@link IllegalStateException} naming the state and the calls allowed in it.</li>
 * <li>Errors are classified: {@link SessionFencedException} (another session took over; state FATAL_ERROR),
 * {@link SessionAbortableException} (abort, then go on), {@link SessionTimeoutException} (the call may be retried),
 * {@link TransactionLostException}, {@link TransactionSupersededException}.</li>
 * <li>{@link #close()} aborts an open transaction.</li>
 * </ul>
 *
 * <h2>Not guaranteed</h2>
 * <ul>
 * <li>A heartbeat cannot extend a transaction's timeout: brokers have no TxnHeartbeat API yet (KIP-1309 is a
 * draft). {@link #heartbeat()} only checks that the transaction is still open and fails fast if it is not.</li>
 * <li>Kafka-native two-phase commit (KIP-939) is not available on released brokers, so a prepared transaction is
 * still aborted by the coordinator after {@code transaction.timeout.ms}; {@link #completeTransaction} reports that
 * as {@link TransactionLostException}, never as a commit.</li>
 * <li>With transaction version 1 the epoch does not change between transactions, so a retried completion cannot
 * tell the prepared transaction from a later one of the same producer; version 2 (the default) can.</li>
 * </ul>
 */
public final class TransactionSession implements AutoCloseable {

    private static final Logger log = LoggerFactory.getLogger(TransactionSession.class);

    private final TransactionSessionConfig config;
    private final String transactionalId;
    private final @Nullable KafkaProducer<byte[], byte[]> producer;
    private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
    private final List<SessionParticipant> participants = new CopyOnWriteArrayList<>();
    private final List<SessionListener> listeners = new CopyOnWriteArrayList<>();
    private final AtomicReference<@Nullable Exception> sendFailure = new AtomicReference<>();
    private final Object coordinatorLock = new Object();
    private volatile SessionState state;
    private @Nullable CoordinatorView coordinator;
    /** identity of the open, prepared or resumed transaction, once read from the coordinator */
    private volatile @Nullable TxnIdentity identity;
    private volatile boolean dataSent;
    private final @Nullable ScheduledExecutorService heartbeats;

    /**
     * Creates a live session. Nothing connects until {@link #initialize()}.
     *
     * @param configs Kafka producer configs ({@code bootstrap.servers} and {@code transactional.id} required) plus
     *        the session keys of {@link TransactionSessionConfig}
     * @throws InvalidSessionConfigException naming the key, when a config is missing or invalid
     */
    public TransactionSession(Map<String, ?> configs) {
        this(TransactionSessionConfig.of(Objects.requireNonNull(configs, "configs")), true, null);
    }

    private TransactionSession(TransactionSessionConfig config, boolean live, @Nullable TxnIdentity resumed) {
        this.config = config;
        this.transactionalId = config.transactionalId();
        this.producer = live ? new KafkaProducer<>(config.producerConfigs()) : null;
        this.identity = resumed;
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
     * Resumes a transaction that another session (usually in another process) opened and prepared, in order to
     * finish it. Creates no producer and no thread: it talks to the transaction coordinator directly.
     *
     * <p>The identity is checked with the coordinator first: an unknown transactional id, a producer id the
     * coordinator does not hold, or an epoch it never reached throw {@link TransactionIdentityMismatchException}
     * and touch nothing. A transaction that has already ended is accepted: completing it reports how it ended.
     *
     * @param transactionalId the transactional id of the prepared transaction
     * @param producerId its producer id (see {@link PreparedTxnState#producerId()})
     * @param producerEpoch its epoch (see {@link PreparedTxnState#epoch()})
     * @param configs client configs: {@code bootstrap.servers} and security settings; session keys allowed
     * @return a session in state {@link SessionState#PREPARED}
     */
    public static TransactionSession resume(String transactionalId, long producerId, short producerEpoch,
            Map<String, ?> configs) {
        Objects.requireNonNull(transactionalId, "transactionalId");
        Objects.requireNonNull(configs, "configs");
        if (producerId < 0 || producerEpoch < 0) {
            throw new IllegalArgumentException("resume needs the producerId and epoch of a prepared transaction, got "
                    + producerId + ":" + producerEpoch);
        }
        TransactionSessionConfig config = TransactionSessionConfig.forResume(transactionalId, configs);
        TxnIdentity expected = new TxnIdentity(producerId, producerEpoch);
        TransactionSession session = new TransactionSession(config, false, expected);
        try {
            Optional<TransactionDescription> d = session.coordinator().describe();
            if (d.isEmpty()) {
                throw new TransactionIdentityMismatchException(transactionalId,
                        "the coordinator does not know transactional.id '" + transactionalId + "'");
            }
            if (d.get().producerId() != producerId) {
                throw new TransactionIdentityMismatchException(transactionalId, "producerId " + producerId
                        + " was given, but the coordinator holds producerId " + d.get().producerId() + " (epoch "
                        + d.get().producerEpoch() + ", state " + d.get().state() + ") for this transactional.id");
            }
            if (producerEpoch > d.get().producerEpoch()) {
                throw new TransactionIdentityMismatchException(transactionalId, "epoch " + producerEpoch
                        + " was given, but the coordinator is at epoch " + d.get().producerEpoch()
                        + " (state " + d.get().state() + "), so that transaction never existed");
            }
            log.info("Resumed transaction {} of '{}' (coordinator: {} {}:{})", expected, transactionalId,
                    d.get().state(), d.get().producerId(), d.get().producerEpoch());
            return session;
        }
        catch (RuntimeException ex) {
            session.closeQuietly();
            throw ex;
        }
    }

    /**
     * Resumes whatever transaction is open for {@code transactionalId} right now, without knowing its identity:
     * for recovery tools that must abort leftovers of a crashed process. Creates no producer.
     *
     * @return a resumed session in state {@link SessionState#PREPARED} for the open transaction, or empty when the
     *         id is unknown or has no open transaction
     */
    public static Optional<TransactionSession> resumeOpen(String transactionalId, Map<String, ?> configs) {
        Objects.requireNonNull(transactionalId, "transactionalId");
        Objects.requireNonNull(configs, "configs");
        TransactionSessionConfig config = TransactionSessionConfig.forResume(transactionalId, configs);
        TransactionSession probe = new TransactionSession(config, false, new TxnIdentity(-1, (short) -1));
        try {
            Optional<TransactionDescription> d = probe.coordinator().describe();
            if (d.isEmpty() || !(d.get().isOngoing() || d.get().isCommitting() || d.get().isAborting())) {
                probe.closeQuietly();
                return Optional.empty();
            }
            probe.identity = new TxnIdentity(d.get().producerId(), d.get().producerEpoch());
            log.info("Resumed open transaction {} of '{}' (coordinator state {})", probe.identity, transactionalId,
                    d.get().state());
            return Optional.of(probe);
        }
        catch (RuntimeException ex) {
            probe.closeQuietly();
            throw ex;
        }
    }

    /** Convenience for {@code resume(transactionalId, state.producerId(), state.epoch(), configs)}. */
    public static TransactionSession resume(String transactionalId, PreparedTxnState state, Map<String, ?> configs) {
        Objects.requireNonNull(state, "state");
        if (!state.hasTransaction()) {
            throw new IllegalArgumentException("The PreparedTxnState is empty: it names no transaction to resume");
        }
        return resume(transactionalId, state.producerId(), state.epoch(), configs);
    }

    // ---------------------------------------------------------------- lifecycle

    /**
     * Registers the session's transactional id with the coordinator, fencing any older producer with the same id
     * and aborting whatever transaction it left open. Must be called once before {@link #beginTransaction()}.
     */
    public void initialize() {
        lifecycle(SessionOperation.INITIALIZE, SessionState.UNINITIALIZED, SessionState.READY,
                () -> liveProducer().initTransactions());
        log.debug("Transaction session '{}' initialized", this.transactionalId);
    }

    /** Opens a transaction. Bound producers may send and bound consumers' progress joins it. */
    public void beginTransaction() {
        lifecycle(SessionOperation.BEGIN, SessionState.IN_TRANSACTION, SessionState.IN_TRANSACTION, () -> {
            liveProducer().beginTransaction();
            this.identity = null;
            this.dataSent = false;
            this.sendFailure.set(null);
        });
    }

    /**
     * Adds consumed offsets to the open transaction: they are committed for the consumer group if and only if the
     * transaction commits. Bound consumers add theirs automatically; this is for offsets managed by hand.
     */
    public void sendOffsetsToTransaction(Map<TopicPartition, OffsetAndMetadata> offsets,
            ConsumerGroupMetadata groupMetadata) {
        Objects.requireNonNull(offsets, "offsets");
        Objects.requireNonNull(groupMetadata, "groupMetadata");
        participate(SessionOperation.SEND_OFFSETS, () -> {
            if (!offsets.isEmpty()) {
                liveProducer().sendOffsetsToTransaction(offsets, groupMetadata);
            }
            return null;
        });
    }

    /**
     * Makes the open transaction ready for an external decision: flushes every bound producer, adds the bound
     * consumers' offsets, checks that every send succeeded, and returns the transaction's identity. Store the
     * returned state with the decision; then call {@link #completeTransaction(PreparedTxnState)} here, or resume
     * and complete from another process.
     *
     * @return the open transaction's {@code producerId:epoch}
     * @throws SessionAbortableException if a send failed; the transaction must be aborted
     */
    public PreparedTxnState prepareTransaction() {
        Lock write = this.lock.writeLock();
        write.lock();
        try {
            SessionStateMachine.check(this.transactionalId, this.state, SessionOperation.PREPARE);
            try {
                beforeCommit();
                liveProducer().flush();
                Exception failed = this.sendFailure.get();
                if (failed != null) {
                    move(SessionState.ABORTABLE_ERROR);
                    throw new SessionAbortableException(this.transactionalId,
                            "prepareTransaction() found a failed send (" + failed + ").", failed);
                }
                TxnIdentity txn = readIdentity();
                move(SessionState.PREPARED);
                log.debug("Transaction session '{}' prepared {}", this.transactionalId, txn);
                return txn.toPreparedState();
            }
            catch (KafkaException ex) {
                throw translate(SessionOperation.PREPARE, SessionState.IN_TRANSACTION, ex);
            }
        }
        finally {
            write.unlock();
        }
    }

    /**
     * Commits the open or prepared transaction. Bound consumers' offsets are added first. On a resumed session this
     * finishes the resumed transaction, and is idempotent: a transaction that is already committed reports success.
     *
     * @throws SessionFencedException if another session took over; nothing becomes visible
     * @throws SessionAbortableException if the transaction failed; abort it
     * @throws TransactionLostException if the coordinator had already aborted it
     * @throws SessionTimeoutException if the outcome is not known yet; retry the commit
     */
    public void commitTransaction() {
        if (isResumed()) {
            TxnIdentity txn = Objects.requireNonNull(this.identity);
            completeTransaction(txn.toPreparedState());
            return;
        }
        Lock write = this.lock.writeLock();
        write.lock();
        try {
            SessionState from = this.state;
            SessionStateMachine.check(this.transactionalId, from, SessionOperation.COMMIT);
            try {
                if (from == SessionState.IN_TRANSACTION) {
                    beforeCommit();
                }
                move(SessionState.COMMITTING);
                liveProducer().commitTransaction();
                ended(SessionState.READY, true);
            }
            catch (KafkaException ex) {
                throw translate(SessionOperation.COMMIT, from, ex);
            }
        }
        finally {
            write.unlock();
        }
    }

    /**
     * Aborts the open, prepared or failed transaction: nothing it wrote becomes visible, bound consumers rewind to
     * where it began. On a resumed session this aborts the resumed transaction at the coordinator.
     */
    public void abortTransaction() {
        Lock write = this.lock.writeLock();
        write.lock();
        try {
            SessionState from = this.state;
            SessionStateMachine.check(this.transactionalId, from, SessionOperation.ABORT);
            move(SessionState.ABORTING);
            try {
                if (isResumed()) {
                    abortResumed(from);
                }
                else {
                    liveProducer().abortTransaction();
                    ended(SessionState.READY, false);
                }
            }
            catch (KafkaException ex) {
                throw translate(SessionOperation.ABORT, from, ex);
            }
        }
        finally {
            write.unlock();
        }
    }

    /**
     * Finishes a prepared transaction from the state stored with the external decision: commits if {@code state}
     * names the transaction that is prepared now, aborts it otherwise. Idempotent on a resumed session: completing
     * an already-committed transaction again reports {@link CompletionOutcome#ALREADY_COMMITTED}, so retries after a
     * crash are safe. Outcomes that cannot be known are thrown, never guessed.
     *
     * @param state the state {@link #prepareTransaction()} returned, as stored by the decision maker
     * @return what was done
     * @throws TransactionLostException the coordinator aborted the transaction (e.g. it timed out)
     * @throws TransactionSupersededException the id moved on; the outcome is unknown
     * @throws SessionFencedException another producer took the id over
     */
    public CompletionOutcome completeTransaction(PreparedTxnState state) {
        Objects.requireNonNull(state, "state");
        Lock write = this.lock.writeLock();
        write.lock();
        try {
            SessionStateMachine.check(this.transactionalId, this.state, SessionOperation.COMPLETE);
            TxnIdentity prepared = Objects.requireNonNull(this.identity);
            boolean matches = prepared.matches(state);
            if (!isResumed()) {
                try {
                    move(matches ? SessionState.COMMITTING : SessionState.ABORTING);
                    if (matches) {
                        liveProducer().commitTransaction();
                    }
                    else {
                        liveProducer().abortTransaction();
                    }
                    ended(SessionState.READY, matches);
                    return matches ? CompletionOutcome.COMMITTED : CompletionOutcome.ABORTED;
                }
                catch (KafkaException ex) {
                    throw translate(SessionOperation.COMPLETE, SessionState.PREPARED, ex);
                }
            }
            if (!matches) {
                log.info("completeTransaction({}) on '{}': prepared transaction is {}; aborting it", state,
                        this.transactionalId, prepared);
                move(SessionState.ABORTING);
                return abortResumed(SessionState.PREPARED);
            }
            move(SessionState.COMMITTING);
            return commitResumed(prepared);
        }
        finally {
            write.unlock();
        }
    }

    /**
     * Checks with the transaction coordinator that this session's transaction is still the open one. Brokers today
     * cannot extend a transaction's timeout (no TxnHeartbeat API), so this detects, it does not prolong.
     *
     * @throws TransactionLostException if the coordinator aborted the transaction (timeout); a live session moves
     *         to ABORTABLE_ERROR, a resumed one to FATAL_ERROR
     * @throws SessionFencedException if another producer took the id over; the session moves to FATAL_ERROR
     */
    public void heartbeat() {
        SessionState observed = this.state;
        SessionStateMachine.check(this.transactionalId, observed, SessionOperation.HEARTBEAT);
        TxnIdentity expected = this.identity;
        if (expected == null && !this.dataSent) {
            return; // nothing written and no identity handed out: nothing can be lost yet
        }
        CoordinatorView view = coordinator();
        Optional<TransactionDescription> d = view.describe();
        if (expected == null) {
            if (d.isPresent() && (d.get().isOngoing() || d.get().isCommitting())) {
                this.identity = new TxnIdentity(d.get().producerId(), d.get().producerEpoch());
                return;
            }
            // data was sent but the coordinator has no open transaction: it was aborted under us
            expected = d.map(x -> new TxnIdentity(x.producerId(), (short) (x.producerEpoch() - 1)))
                .orElse(new TxnIdentity(-1, (short) -1));
        }
        CoordinatorView.Standing standing = view.standing(expected, d);
        if (standing == CoordinatorView.Standing.OPEN || standing == CoordinatorView.Standing.EMPTY) {
            return;
        }
        TransactionSessionException failure;
        if (standing == CoordinatorView.Standing.LOST) {
            failure = new TransactionLostException(this.transactionalId, "heartbeat() found it. "
                    + view.describeForMessage(d), null);
        }
        else {
            failure = new SessionFencedException(this.transactionalId, "heartbeat() (" + view.describeForMessage(d)
                    + ")", null);
        }
        Lock write = this.lock.writeLock();
        write.lock();
        try {
            if (this.state == observed) {
                boolean abortable = failure instanceof TransactionLostException && !isResumed();
                move(abortable ? SessionState.ABORTABLE_ERROR : SessionState.FATAL_ERROR);
            }
        }
        finally {
            write.unlock();
        }
        throw failure;
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

    /** Closes the session within {@code session.close.timeout.ms}; see {@link #close(Duration)}. */
    @Override
    public void close() {
        close(this.config.closeTimeout());
    }

    /**
     * Closes the session: an open or prepared transaction of a live session is aborted (its records never become
     * visible), the producer and coordinator connections are closed, and every later call fails with
     * {@link IllegalStateException}. A resumed session leaves its transaction as it is. Idempotent.
     */
    public void close(Duration timeout) {
        Objects.requireNonNull(timeout, "timeout");
        long deadline = System.nanoTime() + timeout.toNanos();
        Lock write = this.lock.writeLock();
        boolean locked = false;
        try {
            locked = write.tryLock(timeout.toMillis(), TimeUnit.MILLISECONDS);
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
        }
        try {
            if (this.state == SessionState.CLOSED) {
                return;
            }
            if (this.heartbeats != null) {
                this.heartbeats.shutdownNow();
            }
            SessionState from = this.state;
            boolean open = from == SessionState.IN_TRANSACTION || from == SessionState.PREPARED
                    || from == SessionState.ABORTABLE_ERROR || from == SessionState.COMMITTING
                    || from == SessionState.ABORTING;
            this.state = SessionState.CLOSED;
            if (this.producer != null) {
                if (open && locked) {
                    try {
                        this.producer.abortTransaction();
                        notifyEnd(false);
                        log.info("Transaction session '{}' closed with a transaction open: aborted it",
                                this.transactionalId);
                    }
                    catch (RuntimeException ex) {
                        log.warn("Transaction session '{}': abort on close failed ({}); the coordinator will abort "
                                + "the transaction after transaction.timeout.ms", this.transactionalId, ex.toString());
                    }
                }
                long remaining = Math.max(0, deadline - System.nanoTime());
                this.producer.close(Duration.ofNanos(remaining));
            }
            closeQuietly();
        }
        finally {
            if (locked) {
                write.unlock();
            }
        }
    }

    // ---------------------------------------------------------------- identity and state

    /** @return the transactional id */
    public String transactionalId() {
        return this.transactionalId;
    }

    /** @return the current state; it may change right after it is read */
    public SessionState state() {
        return this.state;
    }

    /** @return whether this session was created by {@link #resume} (no producer; it can only finish) */
    public boolean isResumed() {
        return this.producer == null;
    }

    /**
     * @return the producer id, read from the transaction coordinator (cached for the open transaction)
     * @throws IllegalStateException before {@link #initialize()} or after close
     */
    public long producerId() {
        return currentIdentity().producerId();
    }

    /**
     * @return the producer epoch, read from the transaction coordinator. With transaction version 2 it changes at
     *         every commit and abort; the value is cached only while a transaction is open.
     * @throws IllegalStateException before {@link #initialize()} or after close
     */
    public short producerEpoch() {
        return currentIdentity().epoch();
    }

    /** Adds a listener for what the background heartbeat finds. */
    public void addListener(SessionListener listener) {
        this.listeners.add(Objects.requireNonNull(listener, "listener"));
    }

    /** Removes a listener added with {@link #addListener}. */
    public void removeListener(SessionListener listener) {
        this.listeners.remove(listener);
    }

    @Override
    public String toString() {
        return "TransactionSession[" + this.transactionalId + ", " + this.state
                + (isResumed() ? ", resumed " + this.identity : "") + "]";
    }

    // ---------------------------------------------------------------- data path (bound producers)

    Future<RecordMetadata> send(ProducerRecord<byte[], byte[]> record, @Nullable Callback callback) {
        return participate(SessionOperation.SEND, () -> {
            this.dataSent = true;
            return liveProducer().send(record, (metadata, exception) -> {
                if (exception != null) {
                    this.sendFailure.compareAndSet(null, exception);
                }
                if (callback != null) {
                    callback.onCompletion(metadata, exception);
                }
            });
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
                    + "transaction " + this.identity + ": it has no producer, so it cannot send, add offsets or "
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

    /**
     * Adds share-group acknowledgements to the open transaction, the share-group counterpart of
     * {@link #sendOffsetsToTransaction}: ACCEPT, RELEASE or REJECT take effect only if the transaction commits; after
     * an abort the records are released for redelivery instead.
     *
     * <p>Each acknowledgement must be for a record that a {@link TransactionalShareConsumer} of {@code groupId} bound to
     * this session delivered and has not acknowledged yet; that consumer keeps it and applies it.
     * {@link TransactionalShareConsumer#acknowledge} calls this for you.
     *
     * <p>Not atomic on today's brokers. No broker release has transactional share acknowledgements (KIP-1289 is a
     * proposal; kafka-clients 4.2.2 has no such API key, and a session checks with
     * {@link #transactionalShareAcksAvailable()}), so the acknowledgements are sent right after the Kafka commit
     * succeeds. A crash between the commit and that send leaves the records acquired until their acquisition lock
     * expires, and then they are delivered again although their output is committed: at most one duplicate per
     * record of the crashed transaction.
     *
     * @param groupId the share group of the records
     * @param acks what to acknowledge
     * @throws IllegalStateException if no transaction is open, or no bound share consumer of {@code groupId} holds a
     *         record (it was not delivered by a consumer bound to this session, or was already acknowledged)
     */
    public void addShareAcksToTransaction(String groupId, java.util.Collection<ShareAcknowledgement> acks) {
        Objects.requireNonNull(groupId, "groupId");
        Objects.requireNonNull(acks, "acks");
        boolean added = whileInTransaction(() -> {
            List<ShareAckHolder> holders = new java.util.ArrayList<>(acks.size());
            for (ShareAcknowledgement ack : acks) {
                Objects.requireNonNull(ack, "ack");
                holders.add(holderOf(groupId, ack));
            }
            java.util.Iterator<ShareAckHolder> holder = holders.iterator();
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

    /**
     * @return whether the cluster offers transactional share acknowledgements (KIP-1289), so that acknowledgements
     *         could be written into the transaction itself. Always false with kafka-clients 4.2.2: its {@code ApiKeys}
     *         has no {@code TXN_SHARE_ACKNOWLEDGE}, so the client could not send it and the broker is not asked.
     */
    public boolean transactionalShareAcksAvailable() {
        Boolean known = this.txnShareAcks;
        if (known == null) {
            known = isResumed() ? Boolean.FALSE : coordinator().advertisesApi(TXN_SHARE_ACKNOWLEDGE);
            this.txnShareAcks = known;
            if (!known) {
                log.debug("Transaction session '{}': no {} API (KIP-1289) in this client or broker; share "
                        + "acknowledgements are sent right after each commit", this.transactionalId,
                        TXN_SHARE_ACKNOWLEDGE);
            }
        }
        return known;
    }

    private static final String TXN_SHARE_ACKNOWLEDGE = "TXN_SHARE_ACKNOWLEDGE";
    private volatile @Nullable Boolean txnShareAcks;
    private final List<ShareAckHolder> shareAckHolders = new CopyOnWriteArrayList<>();

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
            if (this.state == SessionState.IN_TRANSACTION || this.state == SessionState.PREPARED) {
                move(SessionState.ABORTABLE_ERROR);
            }
            return new SessionAbortableException(this.transactionalId, reason, null);
        }
        finally {
            write.unlock();
        }
    }

    /** Runs a participation call under the shared lock, in a state that allows it. */
    private <T> T participate(SessionOperation operation, Supplier<T> action) {
        Lock read = this.lock.readLock();
        read.lock();
        try {
            SessionStateMachine.check(this.transactionalId, this.state, operation);
            liveProducer();
            try {
                return action.get();
            }
            catch (ProducerFencedException | InvalidProducerEpochException ex) {
                throw new SessionFencedException(this.transactionalId, operation.call(), ex);
            }
            catch (TimeoutException ex) {
                throw new SessionTimeoutException(this.transactionalId, operation.call(), ex);
            }
        }
        finally {
            read.unlock();
        }
    }

    // ---------------------------------------------------------------- internals

    private void lifecycle(SessionOperation operation, SessionState during, SessionState after, Runnable action) {
        Lock write = this.lock.writeLock();
        write.lock();
        try {
            SessionState from = this.state;
            SessionStateMachine.check(this.transactionalId, from, operation);
            liveProducer();
            try {
                action.run();
                if (from != after) {
                    move(after);
                }
            }
            catch (KafkaException ex) {
                throw translate(operation, from, ex);
            }
        }
        finally {
            write.unlock();
        }
    }

    private void beforeCommit() {
        for (SessionParticipant p : this.participants) {
            p.beforeCommit(this);
        }
    }

    private void ended(SessionState next, boolean committed) {
        move(next);
        this.identity = null;
        this.dataSent = false;
        notifyEnd(committed);
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

    private void move(SessionState to) {
        SessionStateMachine.checkMove(this.transactionalId, this.state, to);
        this.state = to;
    }

    /** Maps a Kafka error to the session's error types and moves the session to the matching state. */
    private RuntimeException translate(SessionOperation operation, SessionState from, KafkaException ex) {
        if (ex instanceof TransactionSessionException tse) {
            return tse;
        }
        String call = operation.call();
        if (ex instanceof TimeoutException || ex instanceof InterruptException) {
            restore(from);
            return ex instanceof TimeoutException ? new SessionTimeoutException(this.transactionalId, call, ex) : ex;
        }
        if (isFatal(ex)) {
            forceState(SessionState.FATAL_ERROR);
            if (isFenced(ex)) {
                return new SessionFencedException(this.transactionalId, call, ex);
            }
            return new TransactionSessionException(this.transactionalId, call + " failed with a fatal error ("
                    + ex + "); close this session and create a new one.", ex);
        }
        if (operation == SessionOperation.INITIALIZE) {
            restore(from);
            return new TransactionSessionException(this.transactionalId, call + " failed: " + ex, ex);
        }
        forceState(SessionState.ABORTABLE_ERROR);
        return new SessionAbortableException(this.transactionalId, call + " failed: " + ex + ".", ex);
    }

    private void restore(SessionState from) {
        this.state = from;
    }

    private void forceState(SessionState to) {
        if (this.state != SessionState.CLOSED) {
            this.state = to;
        }
    }

    private static boolean isFenced(Throwable ex) {
        for (Throwable t = ex; t != null; t = t.getCause()) {
            if (t instanceof ProducerFencedException || t instanceof InvalidProducerEpochException) {
                return true;
            }
        }
        return false;
    }

    private static boolean isFatal(Throwable ex) {
        for (Throwable t = ex; t != null; t = t.getCause()) {
            if (t instanceof ProducerFencedException || t instanceof InvalidProducerEpochException
                    || t instanceof AuthorizationException || t instanceof UnsupportedVersionException
                    || t instanceof InvalidTxnStateException || t instanceof IllegalStateException) {
                return true;
            }
        }
        return false;
    }

    private CompletionOutcome commitResumed(TxnIdentity txn) {
        CoordinatorView view = coordinator();
        try {
            Optional<TransactionDescription> d = view.describe();
            CoordinatorView.Standing standing = view.standing(txn, d);
            switch (standing) {
                case OPEN -> {
                    Errors e = view.end(txn, true);
                    if (e == Errors.NONE) {
                        move(SessionState.READY);
                        log.info("Committed resumed transaction {} of '{}'", txn, this.transactionalId);
                        return CompletionOutcome.COMMITTED;
                    }
                    return afterEndError(view, txn, e, true);
                }
                case COMMITTED, EMPTY -> {
                    move(SessionState.READY);
                    log.info("Resumed transaction {} of '{}' was already committed", txn, this.transactionalId);
                    return CompletionOutcome.ALREADY_COMMITTED;
                }
                default -> throw standingFailure(view, standing, d);
            }
        }
        catch (TimeoutException ex) {
            restore(SessionState.PREPARED);
            throw new SessionTimeoutException(this.transactionalId, "completeTransaction()", ex);
        }
    }

    private CompletionOutcome abortResumed(SessionState from) {
        TxnIdentity txn = Objects.requireNonNull(this.identity);
        CoordinatorView view = coordinator();
        try {
            Optional<TransactionDescription> d = view.describe();
            CoordinatorView.Standing standing = view.standing(txn, d);
            if (standing == CoordinatorView.Standing.LOST || standing == CoordinatorView.Standing.EMPTY) {
                move(SessionState.READY); // already aborted, or nothing to abort: the wanted outcome holds
                return CompletionOutcome.ABORTED;
            }
            if (standing == CoordinatorView.Standing.COMMITTED) {
                forceState(SessionState.FATAL_ERROR);
                throw new TransactionSessionException(this.transactionalId, "cannot abort transaction " + txn
                        + ": it is already committed. " + view.describeForMessage(d), null);
            }
            if (standing != CoordinatorView.Standing.OPEN) {
                throw standingFailure(view, standing, d);
            }
            Errors e = view.end(txn, false);
            if (e == Errors.NONE) {
                move(SessionState.READY);
                log.info("Aborted resumed transaction {} of '{}'", txn, this.transactionalId);
                return CompletionOutcome.ABORTED;
            }
            return afterEndError(view, txn, e, false);
        }
        catch (TimeoutException ex) {
            restore(from);
            throw new SessionTimeoutException(this.transactionalId, "abortTransaction()", ex);
        }
    }

    /** EndTxn answered an error: look again to report what really happened. */
    private CompletionOutcome afterEndError(CoordinatorView view, TxnIdentity txn, Errors error, boolean commit) {
        Optional<TransactionDescription> d = view.describe();
        CoordinatorView.Standing standing = view.standing(txn, d);
        if (commit && standing == CoordinatorView.Standing.COMMITTED) {
            move(SessionState.READY);
            return CompletionOutcome.ALREADY_COMMITTED;
        }
        if (!commit && standing == CoordinatorView.Standing.LOST) {
            move(SessionState.READY);
            return CompletionOutcome.ABORTED;
        }
        if (error == Errors.PRODUCER_FENCED || error == Errors.INVALID_PRODUCER_EPOCH) {
            forceState(SessionState.FATAL_ERROR);
            throw new SessionFencedException(this.transactionalId, (commit ? "commit" : "abort") + " of " + txn
                    + " (EndTxn answered " + error + "; " + view.describeForMessage(d) + ")",
                    error.exception());
        }
        if (standing == CoordinatorView.Standing.OPEN) {
            forceState(SessionState.FATAL_ERROR);
            throw new TransactionSessionException(this.transactionalId, "EndTxn for " + txn + " answered " + error
                    + " while the transaction is still open. " + view.describeForMessage(d), error.exception());
        }
        throw standingFailure(view, standing, d);
    }

    private TransactionSessionException standingFailure(CoordinatorView view, CoordinatorView.Standing standing,
            Optional<TransactionDescription> d) {
        forceState(SessionState.FATAL_ERROR);
        TxnIdentity txn = this.identity;
        String detail = "Requested transaction " + txn + ". " + view.describeForMessage(d);
        return switch (standing) {
            case LOST -> new TransactionLostException(this.transactionalId, detail, null);
            case FENCED -> new SessionFencedException(this.transactionalId, "finishing " + txn + " (" + detail + ")",
                    null);
            default -> new TransactionSupersededException(this.transactionalId, detail);
        };
    }

    private TxnIdentity currentIdentity() {
        SessionState s = this.state;
        if (s == SessionState.UNINITIALIZED || s == SessionState.CLOSED) {
            throw new IllegalStateException("Transaction session '" + this.transactionalId + "' is in state " + s
                    + ": its producer id and epoch are known only after initialize() and before close().");
        }
        TxnIdentity cached = this.identity;
        if (cached != null) {
            return cached;
        }
        return readIdentity();
    }

    /** Reads the identity from the coordinator; cached while a transaction with data is open. */
    private TxnIdentity readIdentity() {
        TransactionDescription d = coordinator().describe().orElseThrow(() -> new TransactionSessionException(
                this.transactionalId, "the coordinator does not know this transactional.id; was initialize() "
                        + "called?", null));
        TxnIdentity txn = new TxnIdentity(d.producerId(), d.producerEpoch());
        SessionState s = this.state;
        if (s == SessionState.IN_TRANSACTION || s == SessionState.PREPARED) {
            this.identity = txn;
        }
        return txn;
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
                            SessionOperation.SEND).replace(SessionOperation.SEND.call(), call));
        }
    }

    private void closeQuietly() {
        synchronized (this.coordinatorLock) {
            if (this.coordinator != null) {
                this.coordinator.close();
                this.coordinator = null;
            }
        }
        this.state = SessionState.CLOSED;
    }
}
