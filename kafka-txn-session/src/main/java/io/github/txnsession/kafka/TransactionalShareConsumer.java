package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.ReentrantLock;
import java.util.stream.Collectors;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.AcknowledgementCommitCallback;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.ShareConsumer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.serialization.Deserializer;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link ShareConsumer} (share group, KIP-932) whose acknowledgements take effect with a {@link TransactionSession}:
 * the output of a record and its acknowledgement are tied to the same commit. It works in explicit acknowledgement
 * mode only: the configs constructor sets {@code share.acknowledgement.mode=explicit} when it is absent, and both
 * constructors reject {@code implicit}, because implicit mode acknowledges a batch on the next poll, before the
 * transaction that processed it has ended.
 *
 * <h2>Guarantees, while bound and a transaction is open</h2>
 * <ul>
 * <li>{@code acknowledge(record, ACCEPT | REJECT | RELEASE)} is kept, not sent (through
 * {@link TransactionSession#addShareAcksToTransaction}). After the transaction commits they are handed to the
 * wrapped consumer and ride on the fetch of the next {@link #poll} (as a plain share consumer's explicit
 * acknowledgements do: one request per transaction less); if no poll has taken them along after 10 ms, a background
 * check sends them in a request of their own ({@code commitAsync}; results the application's acknowledgement callback
 * should get then reach it at the next poll, on the application's thread). With an
 * {@link #useOutcomeLedger outcome ledger} the commit sends them at once and waits for the answer ({@code commitSync}),
 * from which the ledger learns which records it can forget. After an abort they are dropped and every record this
 * consumer holds is RELEASEd, so the group delivers it again at once (its delivery count goes up
 * by one), unless {@link #setRetainRecordsOnAbort retained}. When the outcome is unknown (a commit that may have
 * happened), the records are always released.</li>
 * <li>{@code acknowledge(record, RENEW)} is sent at once: it extends the record's acquisition lock.
 * {@link #heartbeat()}, called on the consumer's thread, renews the locks of every record this consumer holds, for
 * transactions that outlast the lock ({@code group.share.record.lock.duration.ms}, 30 s by default). A record whose
 * renewal did not come back lost its lock: the open transaction then refuses to commit
 * ({@link SessionAbortableException}), since another consumer may be processing the record.</li>
 * <li>{@link #poll} fails with {@link IllegalStateException} while the open transaction holds acknowledgements of
 * this consumer (explicit mode needs every record acknowledged before the next poll), and waits while a commit or
 * abort runs.</li>
 * <li>Acknowledging a record this consumer did not deliver, or acknowledged already, fails with
 * {@link IllegalStateException} naming the record.</li>
 * <li>While the bound session is PREPARED, ABORTABLE_ERROR, COMMITTING or ABORTING, ACCEPT/REJECT/RELEASE fail with
 * {@link IllegalStateException}: sent at once they could acknowledge a record whose output never commits.</li>
 * <li>Outside a transaction (or unbound) it behaves like the wrapped consumer in explicit mode, with one difference:
 * acknowledgements made then can go out with a request this consumer sends for a committed transaction's (a
 * background check, {@link #unsubscribe()}); their results then reach the acknowledgement callback and are missing
 * from the map the application's next {@code commitSync} returns.</li>
 * </ul>
 *
 * <h2>Not guaranteed: the window between commit and acknowledgement</h2>
 * No released broker can make a share acknowledgement part of a Kafka transaction: KIP-1289 (transactional
 * acknowledgements for share groups) is a proposal, and kafka-clients 4.2.2 has no {@code TXN_SHARE_ACKNOWLEDGE} API
 * key ({@link TransactionSession#transactionalShareAcksAvailable()} checks). So the acknowledgements are sent after
 * the Kafka commit succeeds (with the next poll, or from a background check about 10 ms later). If the process dies,
 * or the acknowledgement fails, in between, the records stay acquired until their lock expires and are then delivered
 * again although their output is committed: <b>at most one duplicate per record of that transaction</b>. Never a loss:
 * an output that was not committed is never acknowledged.
 * {@link #useOutcomeLedger(ShareOutcomeLedger)} closes this window: the outcome is recorded in the transaction, and a
 * redelivered record whose outcome committed is acknowledged instead of returned (see {@link ShareOutcomeLedger} for
 * what it covers). Without a ledger, consumers of the output that must not see the duplicate can drop it by the
 * input's coordinates (topic, partition, offset), for example carried in a header.
 *
 * <p>Like {@code KafkaShareConsumer}, this is for one application thread; the session's commit or abort may run on
 * another thread and then waits for a call in progress on this consumer.
 *
 * @param <K> key type
 * @param <V> value type
 */
public class TransactionalShareConsumer<K, V> implements ShareConsumer<K, V> {

    /** The Kafka config that selects the acknowledgement mode. */
    public static final String ACKNOWLEDGEMENT_MODE_CONFIG = "share.acknowledgement.mode";

    private static final Logger log = LoggerFactory.getLogger(TransactionalShareConsumer.class);
    private static final Duration RETAKE_TIMEOUT = Duration.ofSeconds(15);
    /** how long a lock renewal waits for the broker's answer; no answer: not renewed */
    private static final Duration RENEW_TIMEOUT = Duration.ofSeconds(10);

    private final ShareConsumer<K, V> delegate;
    private final String groupId;
    /** serializes access to the delegate, which is not thread-safe; taken before {@link #track} */
    private final ReentrantLock access = new ReentrantLock();
    /** guards the maps below */
    private final Object track = new Object();
    /** {@link #wakeup()} was called and no poll has thrown for it yet */
    private final AtomicBoolean wakeupRequested = new AtomicBoolean();
    /** the application's poll is in the wrapped consumer's poll: a wakeup is passed to it */
    private volatile boolean polling;
    private final Participant participant = new Participant();
    private volatile @Nullable KafkaTransactionSession session;

    /** delivered by this consumer and not yet acknowledged at the wrapped consumer */
    private final Map<ShareRecordId, ConsumerRecord<K, V>> held = new LinkedHashMap<>();
    /** held records whose RENEW went out; out of the wrapped consumer's flight until a poll returns them */
    private final Set<ShareRecordId> renewed = new HashSet<>();
    /** acknowledgements of the open transaction */
    private final Map<ShareRecordId, AcknowledgeType> buffered = new LinkedHashMap<>();
    /** acknowledgements to send to the wrapped consumer as soon as it can take them */
    private final Map<ShareRecordId, AcknowledgeType> outgoing = new LinkedHashMap<>();
    /** records a poll of ours fetched while taking renewed records back; the next {@link #poll} returns them */
    private final List<ConsumerRecord<K, V>> stash = new ArrayList<>();
    /** the ledger that closes the commit-acknowledgement window, if one is used */
    private volatile @Nullable ShareOutcomeLedger ledger;
    /** (ledger) records whose acknowledgement the broker confirmed: the next entry leaves them out; under track */
    private final Set<ShareRecordId> confirmed = new HashSet<>();
    /** (ledger) the ledger and session the open transaction writes an entry with, and what it leaves out */
    private @Nullable ShareOutcomeLedger writingLedger;
    private @Nullable KafkaTransactionSession writingSession;
    private Set<ShareRecordId> writingRemovals = Set.of();
    /** records of the open transaction whose lock was lost (a renewal that did not come back); under track */
    private final Set<ShareRecordId> lostInTransaction = new HashSet<>();
    /** (ledger) outgoing acknowledgements dropped without being sent during the last flush; under track */
    private final Set<ShareRecordId> droppedUnsent = new HashSet<>();
    /** (ledger) acknowledgements handed to the wrapped consumer since its last commitSync; under access */
    private final Set<ShareRecordId> sentUnanswered = new HashSet<>();
    /** (ledger) acknowledgements of this flush the broker answered without error; under track */
    private final Set<ShareRecordId> answeredOk = new HashSet<>();
    /** share.acquire.mode as configured (null: the broker's default) */
    private final @Nullable String acquireMode;
    /**
     * the earliest time (System.nanoTime) each held record can have been acquired: the start of the poll before the
     * one that returned it (the consumer may fetch a batch ahead), or its last renewal; under track
     */
    private final Map<ShareRecordId, Long> heldSince = new HashMap<>();
    /** when the last call of the wrapped consumer's poll started (0: never) */
    private long previousPollStart;
    /** the acquisition lock duration the brokers last announced, in ms (-1: not known yet) */
    private volatile long lockTimeoutMs = -1;
    /** the application's acknowledgement callback, called after this consumer's own */
    private volatile @Nullable AcknowledgementCommitCallback userAckCallback;
    /** whether an abort keeps the records this consumer holds rather than releasing them */
    private volatile boolean retainOnAbort;
    /** acknowledgements handed to the wrapped consumer that wait for a call of it that sends them */
    private final WaitingAcknowledgements waiting;

    /**
     * Creates a {@link KafkaShareConsumer} in explicit acknowledgement mode.
     *
     * @param configs consumer configs with {@code bootstrap.servers} and {@code group.id}; {@code
     *        share.acknowledgement.mode} may be absent (explicit is set) or {@code explicit}
     * @param keyDeserializer the deserializer of record keys, handed to the created {@link KafkaShareConsumer}
     * @param valueDeserializer the deserializer of record values, handed to the created {@link KafkaShareConsumer}
     * @throws InvalidSessionConfigException if the mode is anything but explicit, or {@code group.id} is missing
     */
    public TransactionalShareConsumer(Map<String, ?> configs, Deserializer<K> keyDeserializer,
            Deserializer<V> valueDeserializer) {
        this(new KafkaShareConsumer<>(explicit(configs), keyDeserializer, valueDeserializer), explicit(configs));
    }

    /**
     * Creates a {@link KafkaShareConsumer} in explicit acknowledgement mode, deserializers named in {@code configs}.
     *
     * @param configs consumer configs with {@code bootstrap.servers}, {@code group.id} and the key and value
     *        deserializers; {@code share.acknowledgement.mode} may be absent (explicit is set) or {@code explicit}
     * @see #TransactionalShareConsumer(Map, Deserializer, Deserializer)
     */
    public TransactionalShareConsumer(Map<String, ?> configs) {
        this(new KafkaShareConsumer<>(explicit(configs)), explicit(configs));
    }

    /**
     * Wraps a share consumer created elsewhere.
     *
     * @param delegate the share consumer
     * @param delegateConfigs the configs {@code delegate} was created with: they must contain {@code group.id} and
     *        {@code share.acknowledgement.mode=explicit} (Kafka's default is implicit)
     * @throws InvalidSessionConfigException if they do not
     */
    public TransactionalShareConsumer(ShareConsumer<K, V> delegate, Map<String, ?> delegateConfigs) {
        this.delegate = Objects.requireNonNull(delegate, "delegate");
        Objects.requireNonNull(delegateConfigs, "delegateConfigs");
        Object mode = delegateConfigs.get(ACKNOWLEDGEMENT_MODE_CONFIG);
        if (mode == null || !"explicit".equalsIgnoreCase(mode.toString().trim())) {
            throw implicitMode(mode);
        }
        this.groupId = groupId(delegateConfigs);
        Object acquire = delegateConfigs.get(ConsumerConfig.SHARE_ACQUIRE_MODE_CONFIG);
        this.acquireMode = acquire == null ? null : acquire.toString();
        this.waiting = new WaitingAcknowledgements(this.delegate, this.access, this.groupId);
        this.delegate.setAcknowledgementCommitCallback(this::acknowledged);
    }

    private static Map<String, Object> explicit(Map<String, ?> configs) {
        Objects.requireNonNull(configs, "configs");
        Map<String, Object> copy = new HashMap<>(configs);
        Object mode = copy.get(ACKNOWLEDGEMENT_MODE_CONFIG);
        if (mode == null) {
            copy.put(ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
        }
        else if (!"explicit".equalsIgnoreCase(mode.toString().trim())) {
            throw implicitMode(mode);
        }
        groupId(copy);
        return copy;
    }

    private static InvalidSessionConfigException implicitMode(@Nullable Object mode) {
        return new InvalidSessionConfigException(ACKNOWLEDGEMENT_MODE_CONFIG, mode, "a TransactionalShareConsumer "
                + "needs explicit acknowledgement mode (" + ACKNOWLEDGEMENT_MODE_CONFIG + "=explicit), but the "
                + "consumer is in " + (mode == null ? "Kafka's default, implicit," : "'" + mode + "'") + " mode: "
                + "implicit mode acknowledges every record on the next poll, before the transaction that processed it "
                + "has committed. Set " + ACKNOWLEDGEMENT_MODE_CONFIG + "=explicit.");
    }

    private static String groupId(Map<String, ?> configs) {
        Object group = configs.get(ConsumerConfig.GROUP_ID_CONFIG);
        if (group == null || group.toString().isBlank()) {
            throw new InvalidSessionConfigException(ConsumerConfig.GROUP_ID_CONFIG, group,
                    "a share consumer needs the share group's id in group.id");
        }
        return group.toString();
    }

    /** @return the share group this consumer belongs to */
    public String groupId() {
        return this.groupId;
    }

    /** @return the wrapped consumer; using it directly bypasses every guarantee of this class */
    public ShareConsumer<K, V> delegate() {
        return this.delegate;
    }

    /** @return the session this consumer is bound to, if any */
    public @Nullable TransactionSession transactionSession() {
        return this.session;
    }

    /**
     * Binds this consumer to {@code session}: from now on its acknowledgements made while a transaction is open take
     * effect only when that transaction commits.
     *
     * @param session a live session created by {@link TransactionSession#open}; not null
     * @throws IllegalStateException if it is bound already (unbind first)
     * @throws IllegalArgumentException if the session is a resumed one, or not a session created by
     *         {@link TransactionSession#open} (a transaction-scoped proxy, for example)
     */
    public void bindTransactionSession(TransactionSession session) {
        KafkaTransactionSession bound = KafkaTransactionSession.of(session);
        if (bound.isResumed()) {
            throw new IllegalArgumentException("Transaction session '" + bound.transactionalId() + "' was resumed "
                    + "to finish a transaction; share acknowledgements cannot join it. Bind to a live session.");
        }
        synchronized (this.track) {
            KafkaTransactionSession current = this.session;
            if (current != null) {
                throw new IllegalStateException("This share consumer is already bound to transaction session '"
                        + current.transactionalId() + "'; its acknowledgements can join only one session's "
                        + "transactions. Call unbindTransactionSession() first, or use a second consumer.");
            }
            this.session = bound;
            bound.addParticipant(this.participant);
            bound.addShareAckHolder(this.participant);
        }
        warmLedger();
        if (bound.transactionalShareAcksAvailable()) {
            log.warn("The cluster advertises transactional share acknowledgements (KIP-1289), but this library "
                    + "version cannot send them yet; acknowledgements are sent after each commit");
        }
    }

    /**
     * Unbinds this consumer.
     *
     * @throws IllegalStateException while the open transaction holds acknowledgements of this consumer
     */
    public void unbindTransactionSession() {
        this.access.lock(); // lock order everywhere: access, then track
        try {
            synchronized (this.track) {
                KafkaTransactionSession current = this.session;
                if (current == null) {
                    return;
                }
                releaseIfSessionCannotCommit(current);
                if (!this.buffered.isEmpty()) {
                    throw new IllegalStateException("Cannot unbind from transaction session '"
                            + current.transactionalId() + "': its open transaction holds " + this.buffered.size()
                            + " acknowledgement(s) of this consumer. Commit or abort the transaction first.");
                }
                detach(current);
            }
        }
        finally {
            this.access.unlock();
        }
    }

    /**
     * A session that failed fatally or was closed can never commit the acknowledgements this consumer holds for it:
     * release them now, so that neither poll nor unbind waits for a transaction end that already happened. (The
     * session tells its participants too; this covers a failure it could only report later.) Caller holds
     * {@link #access} and {@link #track}.
     */
    private void releaseIfSessionCannotCommit(TransactionSession current) {
        SessionState s = current.state();
        if (!this.buffered.isEmpty() && (s == SessionState.FATAL_ERROR || s == SessionState.CLOSED)) {
            log.info("Transaction session '{}' is {}: releasing the {} record(s) its transaction held",
                    current.transactionalId(), s, this.buffered.size());
            this.participant.entryEnded(null); // how it ended is not known here: the ledger reads the entry again
            this.participant.releaseHeld(false);
        }
    }

    private void detach(KafkaTransactionSession current) {
        current.removeParticipant(this.participant);
        current.removeShareAckHolder(this.participant);
        this.session = null;
    }

    /**
     * Closes the window between commit and acknowledgement with {@code ledger}: from now on every transaction that
     * acknowledges records of this consumer also writes, in that transaction, which records' outcomes committed, and
     * a record the group delivers again whose outcome committed is acknowledged with that outcome instead of being
     * returned by {@link #poll}. Use the same ledger topic in every consumer of the group. See
     * {@link ShareOutcomeLedger} for what it guarantees and what it does not.
     *
     * @param ledger the ledger; the caller closes it after this consumer
     * @throws IllegalStateException while the open transaction holds acknowledgements of this consumer
     */
    public void useOutcomeLedger(ShareOutcomeLedger ledger) {
        Objects.requireNonNull(ledger, "ledger");
        synchronized (this.track) {
            if (!this.buffered.isEmpty()) {
                throw new IllegalStateException("useOutcomeLedger() is not allowed while the open transaction holds "
                        + this.buffered.size() + " acknowledgement(s) of this share consumer. Commit or abort first.");
            }
            this.ledger = ledger;
            this.confirmed.clear();
        }
        if (!"record_limit".equalsIgnoreCase(String.valueOf(this.acquireMode))) {
            log.warn("Share consumer of group '{}' uses an outcome ledger with {}={}: a fetch may then acquire more "
                    + "records than one poll returns, and the check that refuses to commit records whose lock expired "
                    + "measures from the poll before the one that returned them. Set {}=record_limit so that it holds.",
                    this.groupId, ConsumerConfig.SHARE_ACQUIRE_MODE_CONFIG, this.acquireMode,
                    ConsumerConfig.SHARE_ACQUIRE_MODE_CONFIG);
        }
        warmLedger();
    }

    /**
     * (ledger) Reads the bound session's entry before the first record arrives, so that the first commit does not
     * wait for the ledger.
     */
    private void warmLedger() {
        ShareOutcomeLedger l = this.ledger;
        KafkaTransactionSession s = this.session;
        if (l != null && s != null) {
            try {
                l.warm(this.groupId, s.transactionalId(), s);
            }
            catch (KafkaException ex) {
                // not fatal: the first commit that writes an entry reads it again
                log.warn("Share group '{}': the outcome ledger could not be read ahead ({}); the first commit will "
                        + "read it", this.groupId, ex.toString());
            }
        }
    }

    /** @return the outcome ledger this consumer uses, if any */
    public @Nullable ShareOutcomeLedger outcomeLedger() {
        return this.ledger;
    }

    /**
     * Chooses what an abort does with the records this consumer holds. By default ({@code false}) it releases them
     * all, so the group delivers them again at once. With {@code true} it keeps them: the acknowledgements the aborted
     * transaction held are dropped, and every record stays acquired by this consumer (its lock keeps running), so the
     * application can process the records again in a new transaction, for example without the one that failed. It
     * must then acknowledge each of them (in a transaction or not) before the next {@link #poll}, which the wrapped
     * consumer requires in explicit mode. Records whose lock was lost (a renewal that did not come back) or has
     * certainly expired are released as before; {@link #holds(ConsumerRecord)} tells which records are still held.
     *
     * @param retain whether an abort keeps the held records
     */
    public void setRetainRecordsOnAbort(boolean retain) {
        this.retainOnAbort = retain;
    }

    /**
     * @param record a record this consumer's {@link #poll} returned
     * @return whether this consumer still holds it: delivered, its lock not known to be lost (a renewal that did not
     *         come back, a release after an abort), and not acknowledged (an acknowledgement the open transaction
     *         holds counts as acknowledged). A held record must be acknowledged before the next {@link #poll}. Its
     *         lock may still have expired at the broker by now: renew long work with {@link #heartbeat()}.
     */
    public boolean holds(ConsumerRecord<?, ?> record) {
        ShareRecordId id = ShareRecordId.of(record);
        synchronized (this.track) {
            return this.held.containsKey(id) && !this.buffered.containsKey(id) && !this.outgoing.containsKey(id);
        }
    }

    /** Whether the lock of held record {@code id} has certainly expired by {@code now}. Caller holds {@link #track}. */
    private boolean lockExpired(ShareRecordId id, long lockMs, long now) {
        if (lockMs <= 0 || this.renewed.contains(id)) {
            return false; // lock length not known yet; a renewal in flight is decided when it comes back
        }
        Long since = this.heldSince.get(id);
        return since == null || now - since >= TimeUnit.MILLISECONDS.toNanos(lockMs);
    }

    // ---------------------------------------------------------------- poll and acknowledge

    /**
     * Polls the wrapped consumer. Waits while the bound session commits or aborts.
     *
     * @throws IllegalStateException while the open transaction holds acknowledgements of this consumer
     */
    @Override
    public ConsumerRecords<K, V> poll(Duration timeout) {
        KafkaTransactionSession s = this.session;
        if (s != null) {
            s.awaitLifecycleIdle();
        }
        this.access.lock();
        try {
            this.waiting.beforePoll();
            ConsumerRecords<K, V> stashed = null;
            synchronized (this.track) {
                KafkaTransactionSession current = this.session;
                if (current != null) {
                    releaseIfSessionCannotCommit(current);
                }
                if (!this.buffered.isEmpty()) {
                    KafkaTransactionSession bound = this.session;
                    throw new IllegalStateException("poll() is not allowed while the open transaction of session '"
                            + (bound == null ? "?" : bound.transactionalId()) + "' holds " + this.buffered.size()
                            + " acknowledgement(s) of this share consumer: in explicit mode every record must be "
                            + "acknowledged before the next poll, and these are acknowledged only when the transaction "
                            + "ends. Commit or abort the transaction, then poll.");
                }
                if (!this.outgoing.isEmpty()) {
                    flushOutgoing(false);
                }
                if (!this.stash.isEmpty() || this.wakeupRequested.get()) {
                    // this poll does not fetch: the acknowledgements of committed transactions go out now
                    this.waiting.send();
                }
                throwIfWakeupRequested();
                if (!this.stash.isEmpty()) {
                    stashed = takeStash();
                }
            }
            if (stashed != null) {
                // fetched by a retake and not looked up yet; looked up without holding track (the lookup may wait)
                ConsumerRecords<K, V> left = settleRedeliveries(stashed);
                synchronized (this.track) {
                    for (ConsumerRecord<K, V> r : stashed) {
                        ShareRecordId id = ShareRecordId.of(r);
                        if (!contains(left, id)) {
                            this.held.remove(id); // settled (acknowledged) or released by the lookup
                            this.heldSince.remove(id);
                        }
                    }
                }
                return left;
            }
            long pollStart = System.nanoTime();
            long now = this.previousPollStart == 0 ? pollStart : this.previousPollStart;
            this.previousPollStart = pollStart;
            this.sentUnanswered.clear(); // what goes out with a poll is never counted as confirmed
            ConsumerRecords<K, V> records = settleRedeliveries(pollWakeable(timeout));
            this.delegate.acquisitionLockTimeoutMs().ifPresent(ms -> this.lockTimeoutMs = ms);
            synchronized (this.track) {
                for (ConsumerRecord<K, V> r : records) {
                    ShareRecordId id = ShareRecordId.of(r);
                    this.held.put(id, r);
                    this.heldSince.put(id, now);
                    this.renewed.remove(id);
                }
            }
            return records;
        }
        finally {
            this.access.unlock();
        }
    }

    /**
     * With a ledger: records whose outcome committed already (delivered again after their acknowledgement was lost)
     * are acknowledged with that outcome here and left out. Every record is looked up, whatever its delivery count:
     * after a share leader's failover a record can come again as a first delivery. If the ledger cannot be read, the
     * records are released (they come back later) rather than risk a second output. Caller holds {@link #access}.
     */
    private ConsumerRecords<K, V> settleRedeliveries(ConsumerRecords<K, V> records) {
        ShareOutcomeLedger l = this.ledger;
        if (l == null || records.isEmpty()) {
            return records;
        }
        List<ConsumerRecord<K, V>> again = new ArrayList<>();
        records.forEach(again::add);
        Map<ShareRecordId, AcknowledgeType> done;
        try {
            done = l.lookup(this.groupId, again.stream().map(ShareRecordId::of).toList());
        }
        catch (KafkaException ex) {
            log.warn("Share group '{}': the outcome ledger could not be read ({}); releasing the {} record(s) "
                    + "the poll returned, which come back later", this.groupId, ex.toString(), again.size());
            for (ConsumerRecord<K, V> r : again) {
                this.delegate.acknowledge(r, AcknowledgeType.RELEASE);
            }
            this.waiting.handedOver(); // (they must not wait for a poll that may not come)
            if (ex instanceof InterruptException) {
                throw ex;
            }
            return without(records, again.stream().map(ShareRecordId::of).collect(Collectors.toSet()));
        }
        if (done.isEmpty()) {
            return records;
        }
        for (ConsumerRecord<K, V> r : again) {
            AcknowledgeType outcome = done.get(ShareRecordId.of(r));
            if (outcome != null) {
                this.delegate.acknowledge(r, outcome);
            }
        }
        this.waiting.handedOver();
        log.info("Share group '{}': {} record(s) delivered again had their outcome committed already (their "
                + "acknowledgement was lost); acknowledged, not processed again: {}", this.groupId, done.size(),
                done.keySet());
        return without(records, done.keySet());
    }

    private ConsumerRecords<K, V> without(ConsumerRecords<K, V> records, Set<ShareRecordId> left) {
        Map<TopicPartition, List<ConsumerRecord<K, V>>> byPartition = new LinkedHashMap<>();
        for (ConsumerRecord<K, V> r : records) {
            if (!left.contains(ShareRecordId.of(r))) {
                byPartition.computeIfAbsent(new TopicPartition(r.topic(), r.partition()), tp -> new ArrayList<>())
                    .add(r);
            }
        }
        return new ConsumerRecords<>(byPartition, Map.of());
    }

    private static boolean contains(ConsumerRecords<?, ?> records, ShareRecordId id) {
        for (ConsumerRecord<?, ?> r : records) {
            if (id.equals(ShareRecordId.of(r))) {
                return true;
            }
        }
        return false;
    }

    private ConsumerRecords<K, V> takeStash() {
        Map<TopicPartition, List<ConsumerRecord<K, V>>> byPartition = new LinkedHashMap<>();
        for (ConsumerRecord<K, V> r : this.stash) {
            byPartition.computeIfAbsent(new TopicPartition(r.topic(), r.partition()), tp -> new ArrayList<>()).add(r);
        }
        this.stash.clear();
        Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
        return new ConsumerRecords<>(byPartition, next);
    }

    /** Acknowledges {@code record} with ACCEPT; see {@link #acknowledge(ConsumerRecord, AcknowledgeType)}. */
    @Override
    public void acknowledge(ConsumerRecord<K, V> record) {
        acknowledge(record, AcknowledgeType.ACCEPT);
    }

    /**
     * Acknowledges a record this consumer delivered. While bound and a transaction is open, ACCEPT, REJECT and
     * RELEASE are kept until the transaction ends; RENEW is sent at once.
     *
     * @throws IllegalStateException if this consumer did not deliver the record, or it was acknowledged already
     */
    @Override
    public void acknowledge(ConsumerRecord<K, V> record, AcknowledgeType type) {
        Objects.requireNonNull(record, "record");
        Objects.requireNonNull(type, "type");
        acknowledge(ShareRecordId.of(record), type, false);
    }

    /**
     * Acknowledges by coordinates. For a record this consumer delivered, as
     * {@link #acknowledge(ConsumerRecord, AcknowledgeType)}; otherwise (outside a transaction only) passed to the
     * wrapped consumer, which accepts it for records it could not deserialize.
     */
    @Override
    public void acknowledge(String topic, int partition, long offset, AcknowledgeType type) {
        Objects.requireNonNull(topic, "topic");
        Objects.requireNonNull(type, "type");
        acknowledge(new ShareRecordId(topic, partition, offset), type, true);
    }

    private void acknowledge(ShareRecordId id, AcknowledgeType type, boolean byCoordinates) {
        boolean delivered;
        synchronized (this.track) {
            delivered = this.held.containsKey(id) && !this.buffered.containsKey(id) && !this.outgoing.containsKey(id);
        }
        if (type == AcknowledgeType.RENEW) {
            if (!delivered) {
                throw notDelivered(id);
            }
            renew(List.of(id));
            return;
        }
        KafkaTransactionSession s = this.session;
        if (s != null) {
            if (!delivered && s.state() == SessionState.IN_TRANSACTION) {
                throw notDelivered(id);
            }
            ShareAcknowledgement ack = new ShareAcknowledgement(id.topic(), id.partition(), id.offset(), type);
            boolean inTransaction = s.whileInTransaction(() -> s.addShareAcksToTransaction(this.groupId, List.of(ack)));
            if (inTransaction) {
                return;
            }
            SessionState state = s.state();
            if (state != SessionState.READY && state != SessionState.UNINITIALIZED) {
                // sending it now would acknowledge a record whose output may be aborted: refuse
                throw new IllegalStateException("Cannot acknowledge " + id + " while transaction session '"
                        + s.transactionalId() + "' is in state " + state + ": acknowledgements join a transaction "
                        + "only while it is IN_TRANSACTION, and sending one now could acknowledge a record whose "
                        + "output is never committed. Finish the transaction (abort releases the records) first.");
            }
        }
        if (!delivered) {
            if (byCoordinates) {
                lockedRun(() -> this.delegate.acknowledge(id.topic(), id.partition(), id.offset(), type));
                return;
            }
            throw notDelivered(id);
        }
        this.access.lock();
        try {
            synchronized (this.track) {
                ConsumerRecord<K, V> record = this.held.get(id);
                if (record != null && !this.renewed.contains(id)) {
                    this.delegate.acknowledge(record, type);
                    this.held.remove(id);
                this.heldSince.remove(id);
                }
                else {
                    this.outgoing.put(id, type); // renewed: sent once a poll has taken it back
                }
            }
        }
        finally {
            this.access.unlock();
        }
    }

    private IllegalStateException notDelivered(ShareRecordId id) {
        return new IllegalStateException("Record " + id + " was not delivered by this share consumer (group '"
                + this.groupId + "'), or it was acknowledged already. Acknowledge only records returned by this "
                + "consumer's poll(), once each.");
    }

    /**
     * Renews the acquisition locks of every record this consumer holds (delivered, not yet acknowledged, including
     * those whose acknowledgement waits for the open transaction), then, when the bound session has a transaction
     * open, runs {@link TransactionSession#heartbeat()}. Call it on the consumer's thread, more often than the lock
     * duration, while a long transaction is processing.
     *
     * @return how many records' locks were renewed
     */
    public int heartbeat() {
        List<ShareRecordId> ids;
        synchronized (this.track) {
            ids = new ArrayList<>(this.held.keySet());
            ids.removeAll(this.renewed);
        }
        int count = ids.isEmpty() ? 0
                : (int) renew(ids).values().stream().filter(Boolean::booleanValue).count();
        KafkaTransactionSession s = this.session;
        if (s != null && (s.state() == SessionState.IN_TRANSACTION || s.state() == SessionState.PREPARED)) {
            s.heartbeat();
        }
        return count;
    }

    /**
     * Sends RENEW for these held records now; when nothing else is in flight, takes them back at once.
     *
     * @return the records whose RENEW went out, each mapped to whether the broker confirmed it (it still had the
     *         record acquired by this consumer)
     */
    private Map<ShareRecordId, Boolean> renew(List<ShareRecordId> ids) {
        this.access.lock();
        try {
            synchronized (this.track) {
                long sentAt = System.nanoTime(); // the broker extends a lock when it gets the renewal, later
                List<ShareRecordId> sent = new ArrayList<>();
                for (ShareRecordId id : ids) {
                    ConsumerRecord<K, V> record = this.held.get(id);
                    if (record != null && this.renewed.add(id)) {
                        this.delegate.acknowledge(record, AcknowledgeType.RENEW);
                        sent.add(id);
                    }
                }
                this.sentUnanswered.clear(); // (acknowledgements going out with a renewal are not counted)
                Map<TopicIdPartition, Optional<KafkaException>> result;
                try {
                    result = this.waiting.sending(() -> this.delegate.commitSync(RENEW_TIMEOUT));
                }
                catch (WakeupException ex) {
                    // a wakeup that raced into this call: the renewals went out, their answer is lost. A renewed
                    // record comes back to the wrapped consumer (a refused one never does), so taking them back
                    // tells: those back are renewed; the others stay renewed until a later poll brings them or a
                    // retake gives up, and an open transaction that acknowledged them must not commit them
                    passOnWakeup();
                    List<ShareRecordId> marked = new ArrayList<>();
                    for (ShareRecordId id : sent) {
                        if (this.buffered.containsKey(id) && this.lostInTransaction.add(id)) {
                            marked.add(id); // until it is back (marked first: the retake may throw)
                        }
                    }
                    if (allInFlightAcknowledged()) {
                        retake(); // (absorbs a wakeup too)
                    }
                    Map<ShareRecordId, Boolean> back = new LinkedHashMap<>();
                    for (ShareRecordId id : sent) {
                        boolean ok = this.held.containsKey(id) && !this.renewed.contains(id);
                        if (ok) {
                            this.heldSince.put(id, sentAt);
                            if (marked.contains(id)) {
                                this.lostInTransaction.remove(id);
                            }
                        }
                        back.put(id, ok);
                    }
                    return back;
                }
                catch (RuntimeException ex) {
                    // whether the locks were extended is not known: the open transaction must not commit the
                    // output of these records (another consumer may get them once their old lock runs out)
                    for (ShareRecordId id : sent) {
                        if (this.buffered.containsKey(id)) {
                            this.lostInTransaction.add(id);
                        }
                    }
                    throw ex;
                }
                Set<TopicPartition> answered = new HashSet<>();
                result.forEach((tip, error) -> {
                    if (error.isEmpty()) {
                        answered.add(new TopicPartition(tip.topic(), tip.partition()));
                    }
                    else {
                        log.warn("Renewing acquisition locks on {} failed: {}; those records may be delivered to "
                                + "another consumer", tip, error.get().toString());
                    }
                });
                Map<ShareRecordId, Boolean> confirmed = new LinkedHashMap<>();
                for (ShareRecordId id : sent) {
                    // renewed only when the broker answered for its partition without error (a partition left out
                    // of the answer, e.g. its leader gone from the client's metadata, renewed nothing)
                    boolean ok = answered.contains(new TopicPartition(id.topic(), id.partition()));
                    if (ok) {
                        this.heldSince.put(id, sentAt); // a failed renewal extended nothing
                    }
                    else {
                        dropLost(id); // the client drops a record whose renewal was refused: it never comes back
                    }
                    confirmed.put(id, ok);
                }
                if (allInFlightAcknowledged()) {
                    retake();
                }
                return confirmed;
            }
        }
        finally {
            this.access.unlock();
        }
    }

    /**
     * Forgets held record {@code id}, whose lock is lost (a renewal the broker refused or that did not come back): the
     * group delivers it again, so its pending acknowledgement is dropped, and an open transaction that acknowledged it
     * must not commit. Caller holds {@link #track}.
     */
    private void dropLost(ShareRecordId id) {
        this.held.remove(id);
        this.heldSince.remove(id);
        this.renewed.remove(id);
        this.outgoing.remove(id);
        this.stash.removeIf(r -> id.equals(ShareRecordId.of(r))); // fetched by a retake, then lost: never returned
        if (this.buffered.remove(id) != null) {
            this.lostInTransaction.add(id); // its output must not commit: another consumer may get it
        }
    }

    /** Whether every held record that is in the wrapped consumer's flight has been acknowledged there (or renewed). */
    private boolean allInFlightAcknowledged() {
        return this.renewed.containsAll(this.held.keySet());
    }

    /**
     * Polls the wrapped consumer until the renewed records are back in its flight (a renewed record must come back
     * before it can be acknowledged again). Records that poll fetches instead are stashed for the next
     * {@link #poll}. Caller holds {@link #access} and {@link #track}; every in-flight record must be acknowledged.
     */
    private void retake() {
        long deadline = System.nanoTime() + RETAKE_TIMEOUT.toNanos();
        while (!this.renewed.isEmpty() && System.nanoTime() < deadline) {
            long pollStart = System.nanoTime();
            long acquiredAfter = this.previousPollStart == 0 ? pollStart : this.previousPollStart;
            this.previousPollStart = pollStart;
            this.sentUnanswered.clear();
            ConsumerRecords<K, V> records;
            try {
                records = this.waiting.sending(() -> this.delegate.poll(Duration.ofMillis(100)));
            }
            catch (WakeupException ex) {
                passOnWakeup(); // (a wakeup that reached the wrapped consumer after the application's poll returned)
                continue;
            }
            if (records.isEmpty()) {
                continue;
            }
            boolean fresh = false;
            for (ConsumerRecord<K, V> r : records) {
                ShareRecordId id = ShareRecordId.of(r);
                if (!this.renewed.remove(id)) {
                    fresh = true;
                    this.stash.add(r);
                }
                this.held.put(id, r);
                this.heldSince.putIfAbsent(id, acquiredAfter); // a renewed one keeps its renewal time
            }
            if (fresh) {
                break; // the renewal path is over: whatever did not come back lost its lock
            }
            if (!this.renewed.isEmpty()) {
                return; // the rest is still being renewed; it comes back with a later poll
            }
        }
        if (!this.renewed.isEmpty()) {
            log.warn("Share group '{}': records {} did not come back after their lock renewal (lock expired or lost); "
                    + "the group delivers them again, so their pending acknowledgements are dropped", this.groupId,
                    this.renewed);
            for (ShareRecordId id : new ArrayList<>(this.renewed)) {
                dropLost(id);
            }
        }
    }

    /**
     * Sends the outgoing acknowledgements: first those of records in flight, then (taking renewed records back)
     * the rest. Caller holds {@link #access} and {@link #track}.
     *
     * @param commit whether to send them to the broker now ({@code commitSync}) rather than with the next poll
     * @return the records whose acknowledgement failed at the broker
     */
    private Set<TopicIdPartition> flushOutgoing(boolean commit) {
        this.droppedUnsent.clear();
        this.answeredOk.clear();
        Set<TopicIdPartition> failed = new HashSet<>();
        sendInFlight();
        if (!this.outgoing.isEmpty() && allInFlightAcknowledged()) {
            failed.addAll(commitSync0());
            retake();
            sendInFlight();
        }
        if (!this.outgoing.isEmpty()) {
            log.debug("Share group '{}': acknowledgements {} wait until their renewed records come back",
                    this.groupId, this.outgoing);
        }
        if (commit) {
            failed.addAll(commitSync0());
        }
        return failed;
    }

    private void sendInFlight() {
        boolean handedOver = false;
        for (var it = this.outgoing.entrySet().iterator(); it.hasNext();) {
            Map.Entry<ShareRecordId, AcknowledgeType> e = it.next();
            ConsumerRecord<K, V> record = this.held.get(e.getKey());
            if (record == null) {
                this.droppedUnsent.add(e.getKey()); // its lock was lost: never acknowledged
                it.remove();
            }
            else if (!this.renewed.contains(e.getKey())) {
                this.delegate.acknowledge(record, e.getValue());
                if (!handedOver) {
                    handedOver = true;
                    this.waiting.handedOver(); // (the calls that send them, or a check, take them from here)
                }
                this.sentUnanswered.add(e.getKey());
                this.held.remove(e.getKey());
                this.heldSince.remove(e.getKey());
                it.remove();
            }
        }
    }

    /**
     * Sends what was acknowledged and waits for the answer. An acknowledgement counts as confirmed only when this
     * call's answer names its partition without error.
     */
    private Set<TopicIdPartition> commitSync0() {
        Map<TopicIdPartition, Optional<KafkaException>> result;
        try {
            result = this.waiting.sending(this.delegate::commitSync);
        }
        catch (WakeupException ex) {
            // the acknowledgements went out before the wait was woken (kafka-clients queues them first); only the
            // answer is lost: they count as sent and unconfirmed, as those of a poll do
            passOnWakeup();
            result = Map.of();
        }
        Set<TopicIdPartition> failed = new HashSet<>();
        Set<TopicPartition> answered = new HashSet<>();
        result.forEach((tip, error) -> {
            if (error.isEmpty()) {
                answered.add(new TopicPartition(tip.topic(), tip.partition()));
            }
            else {
                failed.add(tip);
                log.warn("Share group '{}': acknowledgements on {} failed: {}", this.groupId, tip,
                        error.get().toString());
            }
        });
        for (ShareRecordId id : this.sentUnanswered) {
            if (answered.contains(new TopicPartition(id.topic(), id.partition()))) {
                this.answeredOk.add(id);
            }
        }
        this.sentUnanswered.clear();
        return failed;
    }

    /**
     * The application's poll, woken by {@link #wakeup()}: only this call lets a wakeup reach the wrapped consumer,
     * so that a wakeup meant for the poll loop (a container stopping) does not break the calls this class makes to
     * send a committed transaction's acknowledgements or to renew locks (seen in the all-paths soak: a stop during a
     * commit made the acknowledgements' {@code commitSync} throw, and the commit was reported as not acknowledged).
     * Caller holds {@link #access}.
     */
    private ConsumerRecords<K, V> pollWakeable(Duration timeout) {
        this.polling = true;
        try {
            throwIfWakeupRequested(); // (requested between the check at the start of poll and now)
            return this.waiting.polling(() -> this.delegate.poll(timeout));
        }
        catch (WakeupException ex) {
            this.wakeupRequested.set(false);
            throw ex;
        }
        finally {
            this.polling = false;
        }
    }

    private void throwIfWakeupRequested() {
        if (this.wakeupRequested.getAndSet(false)) {
            throw new WakeupException();
        }
    }

    /**
     * A wakeup reached the wrapped consumer during one of this class's own calls (it raced with the end of the
     * application's poll): keep it for the application's next poll.
     */
    private void passOnWakeup() {
        log.debug("Share group '{}': a wakeup reached one of the consumer's own calls; the next poll gets it",
                this.groupId);
        this.wakeupRequested.set(true);
    }

    // ---------------------------------------------------------------- the session's side

    private final class Participant implements SessionParticipant, ShareAckHolder {

        @Override
        public String groupId() {
            return TransactionalShareConsumer.this.groupId;
        }

        @Override
        public boolean holds(ShareAcknowledgement ack) {
            ShareRecordId id = new ShareRecordId(ack.topic(), ack.partition(), ack.offset());
            synchronized (TransactionalShareConsumer.this.track) {
                return TransactionalShareConsumer.this.held.containsKey(id)
                        && !TransactionalShareConsumer.this.buffered.containsKey(id)
                        && !TransactionalShareConsumer.this.outgoing.containsKey(id);
            }
        }

        @Override
        public void hold(ShareAcknowledgement ack) {
            synchronized (TransactionalShareConsumer.this.track) {
                TransactionalShareConsumer.this.buffered.put(new ShareRecordId(ack.topic(), ack.partition(), ack.offset()),
                        ack.type());
            }
        }

        /**
         * With a ledger: the transaction also writes its session's entry, naming this transaction's outcomes next to
         * what the entry already names.
         */
        @Override
        public void beforeCommit(TransactionSession s) {
            refuseLostLocks(s);
            ShareOutcomeLedger l = TransactionalShareConsumer.this.ledger;
            if (l == null) {
                return;
            }
            Map<ShareRecordId, AcknowledgeType> additions;
            Set<ShareRecordId> removals;
            synchronized (TransactionalShareConsumer.this.track) {
                TransactionalShareConsumer.this.writingLedger = null;
                TransactionalShareConsumer.this.writingSession = null;
                additions = decided(TransactionalShareConsumer.this.buffered);
                if (additions.isEmpty()) {
                    return; // nothing of this transaction to record; the entry stands
                }
                removals = new HashSet<>(TransactionalShareConsumer.this.confirmed);
            }
            KafkaTransactionSession session = KafkaTransactionSession.of(s);
            ProducerRecord<byte[], byte[]> entry = l.write(TransactionalShareConsumer.this.groupId,
                    session.transactionalId(), session, additions, removals);
            synchronized (TransactionalShareConsumer.this.track) {
                TransactionalShareConsumer.this.writingLedger = l;
                TransactionalShareConsumer.this.writingSession = session;
                TransactionalShareConsumer.this.writingRemovals = removals;
            }
            session.send(entry, null);
            session.flush();
            // after the entry is in the log: if no lock had expired by now, a consumer that gets one of these
            // records later finds the entry, or waits for this transaction to end
            refuseExpiredLocks(s);
            confirmStillHeld(s, additions.keySet());
        }

        /**
         * (ledger) The broker confirms, after the entry is in the log, that this consumer still holds every record
         * the transaction decided: a RENEW of each, waited for. A lock does not only end by expiring: when a share
         * partition's leader fails over, or this member leaves the group, the records go to other consumers at
         * once. One that got a record before the entry was in the log found nothing there and produced it; this
         * transaction must then not commit. A record handed on after the confirmation is looked up by its new
         * consumer, which finds this entry or waits for the transaction to end.
         */
        private void confirmStillHeld(TransactionSession s, Set<ShareRecordId> decided) {
            TransactionalShareConsumer<K, V> consumer = TransactionalShareConsumer.this;
            List<ShareRecordId> pendingRenewal;
            synchronized (consumer.track) {
                pendingRenewal = decided.stream().filter(consumer.renewed::contains).toList();
            }
            if (!pendingRenewal.isEmpty()) {
                // renewed by the application and not back in the wrapped consumer's flight yet (a renewed record
                // cannot be renewed again before a poll returns it): renewing everything else held takes them back
                List<ShareRecordId> rest;
                synchronized (consumer.track) {
                    rest = new ArrayList<>(consumer.held.keySet());
                    rest.removeAll(consumer.renewed);
                }
                renewOrAbort(s, rest, false);
                refuseLostLocks(s);
            }
            renewOrAbort(s, new ArrayList<>(decided), true);
            refuseLostLocks(s); // (taking them back may have found one gone)
        }

        /** @param all whether every one of {@code ids} must be confirmed (else: those the renewal sent) */
        private void renewOrAbort(TransactionSession s, List<ShareRecordId> ids, boolean all) {
            Map<ShareRecordId, Boolean> renewal;
            try {
                renewal = ids.isEmpty() ? Map.of() : renew(ids);
            }
            catch (RuntimeException ex) {
                throw KafkaTransactionSession.of(s).abortOnly("the broker could not confirm that this consumer still "
                        + "holds the records " + ids + " (" + ex + "): another consumer may be processing them, so "
                        + "this output must not commit");
            }
            List<ShareRecordId> notHeld = new ArrayList<>();
            for (ShareRecordId id : ids) {
                // a record this renewal did not send (no longer held, or renewed elsewhere and not back yet) is not
                // confirmed either
                if (all ? !Boolean.TRUE.equals(renewal.get(id)) : Boolean.FALSE.equals(renewal.get(id))) {
                    notHeld.add(id);
                }
            }
            if (!notHeld.isEmpty()) {
                throw KafkaTransactionSession.of(s).abortOnly("the broker no longer has the records " + notHeld
                        + " acquired by this consumer (its share partition's leader failed over, or the consumer "
                        + "left the group): another consumer may be processing them, so this output must not commit");
            }
        }

        /** A record of the transaction lost its lock while it was open: its output must not commit. */
        private void refuseLostLocks(TransactionSession s) {
            List<ShareRecordId> lost;
            synchronized (TransactionalShareConsumer.this.track) {
                if (TransactionalShareConsumer.this.lostInTransaction.isEmpty()) {
                    return;
                }
                lost = new ArrayList<>(TransactionalShareConsumer.this.lostInTransaction);
            }
            throw KafkaTransactionSession.of(s).abortOnly("the acquisition locks of records " + lost + " were lost "
                    + "while the transaction was open (a renewal that did not come back): another consumer may be "
                    + "processing them, so this output must not commit");
        }

        /** (ledger) Tells the ledger how the transaction that wrote an entry ended (null: unknown). */
        private void entryEnded(@Nullable Boolean committed) {
            synchronized (TransactionalShareConsumer.this.track) {
                ShareOutcomeLedger l = TransactionalShareConsumer.this.writingLedger;
                KafkaTransactionSession session = TransactionalShareConsumer.this.writingSession;
                if (l == null || session == null) {
                    return;
                }
                l.ended(TransactionalShareConsumer.this.groupId, session.transactionalId(), session, committed);
                if (Boolean.TRUE.equals(committed)) {
                    TransactionalShareConsumer.this.confirmed.removeAll(TransactionalShareConsumer.this.writingRemovals);
                }
                TransactionalShareConsumer.this.writingLedger = null;
                TransactionalShareConsumer.this.writingSession = null;
                TransactionalShareConsumer.this.writingRemovals = Set.of();
            }
        }

        @Override
        public void afterOutcomeUnknown(TransactionSession s) {
            entryEnded(null); // the ledger reads the entry again: it holds whatever the transaction did
            // the output may have committed: never keep these records for another run (even with retain), the group
            // delivers them again and the ledger, if used, settles them
            releaseHeld(false);
        }

        /**
         * A record whose acquisition lock has certainly expired may be with another consumer already, which cannot
         * see this transaction's entry: the transaction must not commit its output (it aborts, the record comes back).
         */
        private void refuseExpiredLocks(TransactionSession s) {
            long lockMs = TransactionalShareConsumer.this.lockTimeoutMs;
            if (lockMs <= 0) {
                return;
            }
            List<ShareRecordId> expired = new ArrayList<>();
            long now = System.nanoTime();
            synchronized (TransactionalShareConsumer.this.track) {
                for (ShareRecordId id : TransactionalShareConsumer.this.buffered.keySet()) {
                    Long since = TransactionalShareConsumer.this.heldSince.get(id);
                    if (since == null || now - since >= TimeUnit.MILLISECONDS.toNanos(lockMs)) {
                        expired.add(id);
                    }
                }
            }
            if (!expired.isEmpty()) {
                throw KafkaTransactionSession.of(s).abortOnly("the acquisition locks of records " + expired + " ("
                        + lockMs + " ms) expired before the transaction committed: another consumer may be "
                        + "processing them, so this output must not commit. Renew the locks with heartbeat() in long "
                        + "transactions, or raise share.record.lock.duration.ms");
            }
        }

        private static Map<ShareRecordId, AcknowledgeType> decided(Map<ShareRecordId, AcknowledgeType> acks) {
            Map<ShareRecordId, AcknowledgeType> decided = new HashMap<>();
            acks.forEach((id, type) -> {
                if (type == AcknowledgeType.ACCEPT || type == AcknowledgeType.REJECT) {
                    decided.put(id, type);
                }
            });
            return decided;
        }

        /**
         * The transaction committed: hand its acknowledgements to the wrapped consumer (the window the class
         * description names), for the next poll to take along; with a ledger, send them now and wait for the answer.
         */
        @Override
        public void afterCommit(TransactionSession s) {
            entryEnded(true);
            synchronized (TransactionalShareConsumer.this.track) {
                TransactionalShareConsumer.this.lostInTransaction.clear();
                if (TransactionalShareConsumer.this.buffered.isEmpty()) {
                    return;
                }
            }
            TransactionalShareConsumer.this.access.lock();
            try {
                synchronized (TransactionalShareConsumer.this.track) {
                    int count = TransactionalShareConsumer.this.buffered.size();
                    Set<ShareRecordId> sent = new HashSet<>(TransactionalShareConsumer.this.buffered.keySet());
                    TransactionalShareConsumer.this.outgoing.putAll(TransactionalShareConsumer.this.buffered);
                    TransactionalShareConsumer.this.buffered.clear();
                    // without a ledger they ride on the next poll's fetch, or a moment later in a request of their
                    // own (see WaitingAcknowledgements); the ledger needs the broker's answer, so it waits for it
                    Set<TopicIdPartition> failed = flushOutgoing(TransactionalShareConsumer.this.ledger != null);
                    confirmed(sent, failed);
                    if (!failed.isEmpty()) {
                        log.error("Transaction of session '{}' committed, but acknowledging its records on {} failed: "
                                + "they will be delivered again after their lock expires (duplicates of committed "
                                + "output)", s.transactionalId(), failed);
                    }
                    else {
                        log.debug("Session '{}' committed; {} share acknowledgement(s) sent", s.transactionalId(),
                                count);
                    }
                }
            }
            catch (RuntimeException ex) {
                log.error("Transaction of session '{}' committed, but its share acknowledgements could not be sent "
                        + "({}); the records will be delivered again after their lock expires", s.transactionalId(),
                        ex.toString());
                throw ex;
            }
            finally {
                TransactionalShareConsumer.this.access.unlock();
            }
        }

        /**
         * The transaction aborted: release every record this consumer holds, so it is delivered again at once (with
         * {@link #setRetainRecordsOnAbort retain}: only those whose lock is lost or expired).
         */
        @Override
        public void afterAbort(TransactionSession s) {
            entryEnded(false); // the entry aborted with the transaction (no-op after an unknown outcome)
            releaseHeld(TransactionalShareConsumer.this.retainOnAbort);
        }

        /** Drops the open transaction's acknowledgements and releases the held records (all, or unless retained). */
        void releaseHeld(boolean retain) {
            synchronized (TransactionalShareConsumer.this.track) {
                TransactionalShareConsumer.this.lostInTransaction.clear();
                TransactionalShareConsumer.this.buffered.clear();
                if (TransactionalShareConsumer.this.held.isEmpty()) {
                    return;
                }
            }
            TransactionalShareConsumer.this.access.lock();
            try {
                synchronized (TransactionalShareConsumer.this.track) {
                    long lockMs = TransactionalShareConsumer.this.lockTimeoutMs;
                    long now = System.nanoTime();
                    List<ShareRecordId> release = new ArrayList<>();
                    for (ShareRecordId id : TransactionalShareConsumer.this.held.keySet()) {
                        if (!retain || lockExpired(id, lockMs, now)) {
                            release.add(id);
                        }
                    }
                    if (release.isEmpty()) {
                        return;
                    }
                    // released with the rest, delivered again
                    Set<ShareRecordId> released = new HashSet<>(release);
                    TransactionalShareConsumer.this.stash.removeIf(r -> released.contains(ShareRecordId.of(r)));
                    for (ShareRecordId id : release) {
                        TransactionalShareConsumer.this.outgoing.putIfAbsent(id, AcknowledgeType.RELEASE);
                    }
                    flushOutgoing(true);
                }
            }
            finally {
                TransactionalShareConsumer.this.access.unlock();
            }
        }

        @Override
        public String toString() {
            return "TransactionalShareConsumer[" + TransactionalShareConsumer.this.groupId + "]";
        }
    }

    // ---------------------------------------------------------------- plain delegation

    /**
     * (ledger) The acknowledgements of {@code sent} went out; those the broker confirmed (not waiting for a renewed
     * record, partition not failed) need no entry any more. Caller holds {@link #track}.
     */
    private void confirmed(Set<ShareRecordId> sent, Set<TopicIdPartition> failed) {
        if (this.ledger == null) {
            return;
        }
        Set<TopicPartition> failedPartitions = new HashSet<>();
        failed.forEach(tip -> failedPartitions.add(new TopicPartition(tip.topic(), tip.partition())));
        for (ShareRecordId id : sent) {
            TopicPartition tp = new TopicPartition(id.topic(), id.partition());
            // confirmed only when the broker answered for its partition without error
            if (!this.outgoing.containsKey(id) && !this.droppedUnsent.contains(id) && !failedPartitions.contains(tp)
                    && this.answeredOk.contains(id)) {
                this.confirmed.add(id);
            }
        }
    }

    private void lockedRun(Runnable call) {
        this.access.lock();
        try {
            call.run();
        }
        finally {
            this.access.unlock();
        }
    }

    private void ensureNoHeldAcks(String call) {
        synchronized (this.track) {
            if (!this.buffered.isEmpty()) {
                throw new IllegalStateException(call + " is not allowed while the open transaction holds "
                        + this.buffered.size() + " acknowledgement(s) of this share consumer. Commit or abort first.");
            }
        }
    }

    @Override
    public Set<String> subscription() {
        this.access.lock();
        try {
            return this.delegate.subscription();
        }
        finally {
            this.access.unlock();
        }
    }

    @Override
    public void subscribe(Collection<String> topics) {
        ensureNoHeldAcks("subscribe()");
        lockedRun(() -> this.delegate.subscribe(topics));
    }

    /**
     * Leaves the group. The acknowledgements of committed transactions that still wait are sent first, and their
     * answer waited for (kafka-clients leaves the group without sending what was handed to it, and the group would
     * deliver those records again); records the application holds unacknowledged are released.
     *
     * @throws KafkaException if those acknowledgements could not be sent (for example a timeout after the consumer's
     *         {@code default.api.timeout.ms}): the consumer stays in the group; call again
     */
    @Override
    public void unsubscribe() {
        ensureNoHeldAcks("unsubscribe()");
        lockedRun(() -> {
            synchronized (this.track) {
                if (!this.outgoing.isEmpty() || this.waiting.any()) {
                    Set<TopicIdPartition> failed = flushBeforeLeaving(true);
                    if (!failed.isEmpty()) {
                        log.error("Share group '{}': unsubscribing, the acknowledgements of committed transactions on "
                                + "{} failed: those records will be delivered again (duplicates of committed output)",
                                this.groupId, failed);
                    }
                }
            }
            this.delegate.unsubscribe();
            synchronized (this.track) {
                forgetHeldRecords(); // (leaving the group released them)
            }
        });
    }

    /**
     * Before the consumer leaves the group: releases the records the application holds unacknowledged (leaving would
     * release them anyway), so that renewed records of committed transactions can be taken back and their
     * acknowledgements handed over, then hands them over (and sends them, if {@code commit}). Warns about those it
     * could not hand over. Caller holds {@link #access} and {@link #track}.
     *
     * @return the partitions whose acknowledgements failed at the broker
     */
    private Set<TopicIdPartition> flushBeforeLeaving(boolean commit) {
        if (!this.outgoing.isEmpty()) {
            boolean released = false;
            for (var it = this.held.entrySet().iterator(); it.hasNext();) {
                Map.Entry<ShareRecordId, ConsumerRecord<K, V>> e = it.next();
                ShareRecordId id = e.getKey();
                if (!this.outgoing.containsKey(id) && !this.buffered.containsKey(id) && !this.renewed.contains(id)) {
                    this.delegate.acknowledge(e.getValue(), AcknowledgeType.RELEASE);
                    this.heldSince.remove(id);
                    it.remove();
                    released = true;
                }
            }
            if (released) {
                this.waiting.handedOver();
            }
        }
        Set<TopicIdPartition> failed = flushOutgoing(commit);
        if (!this.outgoing.isEmpty()) {
            log.warn("Share group '{}': leaving the group before the renewed records {} came back; their committed "
                    + "acknowledgements are not sent and the group delivers them again (duplicates of committed "
                    + "output)", this.groupId, this.outgoing.keySet());
        }
        return failed;
    }

    /** After leaving the group: what this consumer held is the group's again. Caller holds {@link #track}. */
    private void forgetHeldRecords() {
        this.held.clear();
        this.heldSince.clear();
        this.renewed.clear();
        this.outgoing.clear();
        this.stash.clear();
    }

    /**
     * Sends the acknowledgements made outside a transaction; those the open transaction holds are not sent.
     */
    @Override
    public Map<TopicIdPartition, Optional<KafkaException>> commitSync() {
        return commitSync(null);
    }

    /** @see #commitSync() */
    @Override
    public Map<TopicIdPartition, Optional<KafkaException>> commitSync(@Nullable Duration timeout) {
        this.access.lock();
        try {
            synchronized (this.track) {
                if (!this.outgoing.isEmpty()) {
                    flushOutgoing(false);
                }
            }
            this.sentUnanswered.clear(); // (the application's call: its answer is the application's)
            return this.waiting.sending(() -> timeout == null ? this.delegate.commitSync()
                    : this.delegate.commitSync(timeout));
        }
        finally {
            this.access.unlock();
        }
    }

    /** @see #commitSync() */
    @Override
    public void commitAsync() {
        this.access.lock();
        try {
            synchronized (this.track) {
                if (!this.outgoing.isEmpty()) {
                    flushOutgoing(false);
                }
            }
            this.sentUnanswered.clear();
            this.waiting.sending(() -> {
                this.delegate.commitAsync();
                return null;
            });
        }
        finally {
            this.access.unlock();
        }
    }

    /**
     * Sets the application's callback for acknowledgement results. This consumer keeps its own callback on the
     * wrapped consumer (it logs acknowledgements the broker refused, which come back as duplicates of committed output)
     * and passes every result on to {@code callback}. Like the wrapped consumer, it calls back from within this
     * consumer's calls, on the thread that made them: results reported while a background check sent the
     * acknowledgements of a committed transaction (no poll took them along) reach {@code callback} at the next poll or
     * close. As with Kafka's consumer, {@code callback} must not call this consumer.
     */
    @Override
    public void setAcknowledgementCommitCallback(AcknowledgementCommitCallback callback) {
        this.userAckCallback = callback;
    }

    /** Results of acknowledgements the wrapped consumer reports: failures are logged, then passed on. */
    private void acknowledged(Map<TopicIdPartition, Set<Long>> offsets, @Nullable Exception failure) {
        if (failure != null) {
            log.warn("Share group '{}': the broker refused acknowledgements of {} ({}); those records come back "
                    + "after their lock expires (for records of a committed transaction: a duplicate of its output)",
                    this.groupId, offsets, failure.toString());
        }
        AcknowledgementCommitCallback user = this.userAckCallback;
        if (user == null) {
            return;
        }
        this.waiting.passOn(user, offsets, failure);
    }

    @Override
    public Uuid clientInstanceId(Duration timeout) {
        this.access.lock();
        try {
            return this.delegate.clientInstanceId(timeout);
        }
        finally {
            this.access.unlock();
        }
    }

    @Override
    public Optional<Integer> acquisitionLockTimeoutMs() {
        this.access.lock();
        try {
            return this.delegate.acquisitionLockTimeoutMs();
        }
        finally {
            this.access.unlock();
        }
    }

    @Override
    public Map<MetricName, ? extends Metric> metrics() {
        this.access.lock();
        try {
            return this.delegate.metrics();
        }
        finally {
            this.access.unlock();
        }
    }

    @Override
    public void registerMetricForSubscription(KafkaMetric metric) {
        lockedRun(() -> this.delegate.registerMetricForSubscription(metric));
    }

    @Override
    public void unregisterMetricFromSubscription(KafkaMetric metric) {
        lockedRun(() -> this.delegate.unregisterMetricFromSubscription(metric));
    }

    /**
     * Unbinds and closes the wrapped consumer, which releases the records it holds. If the open transaction still
     * holds acknowledgements of this consumer they are lost: should that transaction commit later, its records are
     * delivered again (the window described on the class). Acknowledgements of committed transactions that still
     * wait for their renewed records are handed over first, so that closing sends them: that can take longer than the
     * timeout (taking the records back, at most 15 s, and the consumer's {@code default.api.timeout.ms} for the
     * answer).
     */
    @Override
    public void close() {
        close(Duration.ofSeconds(30));
    }

    /** @see #close() */
    @Override
    public void close(Duration timeout) {
        synchronized (this.track) {
            KafkaTransactionSession current = this.session;
            if (current != null) {
                if (!this.buffered.isEmpty()) {
                    log.warn("Share consumer of group '{}' closed while transaction session '{}' held {} of its "
                            + "acknowledgements; its records will be delivered again", this.groupId,
                            current.transactionalId(), this.buffered.size());
                    this.buffered.clear();
                }
                detach(current);
            }
        }
        lockedRun(() -> {
            synchronized (this.track) {
                if (!this.outgoing.isEmpty()) {
                    // acknowledgements of committed transactions not yet handed over (renewed records not back yet):
                    // handed over now, so that closing sends them
                    try {
                        flushBeforeLeaving(false);
                    }
                    catch (RuntimeException ex) {
                        log.warn("Share consumer of group '{}' closed with acknowledgements of committed "
                                + "transactions it could not send ({}): those records will be delivered again",
                                this.groupId, ex.toString());
                    }
                }
            }
            this.waiting.closing();
            try {
                this.delegate.close(timeout);
            }
            finally {
                try {
                    this.waiting.runDeferredCallbacks();
                }
                catch (RuntimeException ex) {
                    log.warn("Share consumer of group '{}': the acknowledgement callback threw while closing",
                            this.groupId, ex);
                }
            }
        });
    }

    /**
     * Wakes a blocked {@link #poll}, or makes the next one throw {@link WakeupException} (after it has handed over
     * the acknowledgements of committed transactions); safe from any thread. Unlike a plain share consumer's, it is
     * meant for {@code poll} only: the other calls (commits, acknowledgements, lock renewals) carry the
     * acknowledgements of committed transactions, which a stopping application must still send, so they are not
     * interrupted, and a stop waits for them (a lock renewal at most its 10-s timeout, taking renewed records back at
     * most 15 s, sending acknowledgements up to the consumer's {@code default.api.timeout.ms}). In a narrow race (a
     * wakeup as the wrapped consumer's poll returns) one of them can still be woken: its acknowledgements count as
     * sent and unanswered, renewed records count as renewed once they come back (an open transaction that
     * acknowledged the others refuses to commit), and the next poll throws.
     */
    @Override
    public void wakeup() {
        this.wakeupRequested.set(true);
        if (this.polling) {
            this.delegate.wakeup();
        }
    }

    @Override
    public String toString() {
        KafkaTransactionSession s = this.session;
        return "TransactionalShareConsumer[" + this.groupId + (s == null ? ", unbound" : ", bound to " + s) + "]";
    }
}
