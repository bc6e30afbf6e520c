package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.locks.ReentrantLock;
import java.util.regex.Pattern;

import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.OffsetCommitCallback;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.errors.InvalidGroupIdException;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link Consumer} whose progress commits or rolls back with a {@link TransactionSession}: the consume side of
 * KIP-1310's consume-transform-produce. Wrap any consumer, {@link #bindTransactionSession bind} it, and the session's
 * commit includes the consumed positions of this consumer, for its group and with its {@link ConsumerGroupMetadata};
 * no application code sends offsets.
 *
 * <h2>Guarantees, while bound</h2>
 * <ul>
 * <li>The positions committed are those of the records this consumer's {@link #poll} returned since the last
 * transaction ended (records polled just before {@code beginTransaction()} belong to the transaction that follows).
 * </li>
 * <li>An abort rewinds every partition the transaction consumed, and that this consumer still owns, to the first record
 * the transaction consumed: the next poll returns exactly the aborted records again.</li>
 * <li>While a transaction is open (IN_TRANSACTION, PREPARED, ABORTABLE_ERROR, COMMITTING, ABORTING),
 * {@code commitSync}, {@code commitAsync}, {@code seek*}, {@code subscribe}, {@code assign} and {@code unsubscribe}
 * throw {@link IllegalStateException} saying why; {@code poll} is allowed but waits while a commit or abort runs.</li>
 * <li>Whenever the session's transaction ends without a commit (abort, fencing, a coordinator timeout, a failed
 * abort, close), the consumer rewinds as for an abort. When its outcome cannot be known in this process (the session
 * was abandoned with the transaction prepared, or the commit's outcome could not be read), the next poll first moves
 * every partition the transaction read to the group's committed offset, read as a stable offset (it waits for that
 * transaction to end): nothing is skipped and nothing is read twice.</li>
 * <li>A rebalance that takes away a partition this consumer read from since the last transaction ended makes the
 * transaction abort-only: its commit throws {@link SessionAbortableException} and leaves the session in
 * ABORTABLE_ERROR, so the caller aborts it. The partition's next owner starts from the last committed offset, so it
 * sees neither a gap nor a duplicate.</li>
 * </ul>
 *
 * <h2>Not guaranteed</h2>
 * <ul>
 * <li>Records polled before {@link #bindTransactionSession} was called are not tracked; bind before the first poll.</li>
 * <li>Like {@code KafkaConsumer}, this is for one application thread. A commit or abort may run on another thread:
 * the commit then takes the positions returned so far (records a poll returns while the commit runs belong to the
 * next transaction), and an abort that finds a {@code poll} in progress rewinds when that poll returns (its records of
 * the rewound partitions are dropped).</li>
 * <li>After an unknown outcome, the poll that reads the committed offsets throws if the transaction stays undecided
 * longer than {@code default.api.timeout.ms}; the next poll tries again.</li>
 * <li>Offsets are committed through the session's producer, so they become visible when the transaction commits;
 * read them with {@code isolation.level=read_committed} consumers to get exactly-once.</li>
 * </ul>
 *
 * @param <K> key type
 * @param <V> value type
 */
public class TransactionalConsumer<K, V> implements Consumer<K, V> {

    private static final Logger log = LoggerFactory.getLogger(TransactionalConsumer.class);

    private final Consumer<K, V> delegate;
    /** serializes access to the delegate, which is not thread-safe */
    private final ReentrantLock access = new ReentrantLock();
    /** guards the tracking fields below */
    private final Object track = new Object();
    private final Participant participant = new Participant();
    private volatile @Nullable KafkaTransactionSession session;

    /** first record consumed per partition since the last transaction ended (where an abort rewinds to) */
    private final Map<TopicPartition, OffsetAndMetadata> windowStart = new LinkedHashMap<>();
    /** position after the last record returned per partition since the last transaction ended (what commit sends) */
    private final Map<TopicPartition, OffsetAndMetadata> windowEnd = new LinkedHashMap<>();
    private @Nullable ConsumerGroupMetadata groupMetadata;
    private @Nullable String abortOnlyReason;
    /** the positions the session's commit sends (taken in beforeCommit); a concurrent poll may move past them */
    private @Nullable Map<TopicPartition, OffsetAndMetadata> committing;
    /** rewinds an abort could not apply because a poll was running; applied by that poll */
    private final Map<TopicPartition, OffsetAndMetadata> pendingRewind = new HashMap<>();
    /**
     * partitions of a transaction whose outcome is unknown: before the next poll they go to the group's committed
     * offset (read stable, so it waits for that transaction to end), or back to where the transaction began
     */
    private final Map<TopicPartition, OffsetAndMetadata> pendingReseek = new HashMap<>();

    /**
     * @param delegate the consumer to wrap (already configured; a {@code group.id} is needed to bind it). Use
     *        {@code isolation.level=read_committed} and {@code enable.auto.commit=false} for exactly-once.
     */
    public TransactionalConsumer(Consumer<K, V> delegate) {
        this.delegate = Objects.requireNonNull(delegate, "delegate");
    }

    /** @return the wrapped consumer; using it directly bypasses every guarantee of this class */
    public Consumer<K, V> delegate() {
        return this.delegate;
    }

    /** @return the session this consumer is bound to, if any */
    public @Nullable TransactionSession transactionSession() {
        return this.session;
    }

    /**
     * Binds this consumer to {@code session}: from now on its consumed positions join the session's transactions.
     *
     * @param session a live session created by {@link TransactionSession#open}; not null
     * @throws IllegalStateException if it is bound to a session already (unbind first), or if it has no group
     * @throws IllegalArgumentException if the session is a resumed one (it has no producer to send offsets with), or
     *         not a session created by {@link TransactionSession#open} (a transaction-scoped proxy, for example)
     */
    public void bindTransactionSession(TransactionSession session) {
        KafkaTransactionSession bound = KafkaTransactionSession.of(session);
        if (bound.isResumed()) {
            throw new IllegalArgumentException("Transaction session '" + bound.transactionalId() + "' was resumed "
                    + "to finish a transaction; it cannot take consumer offsets. Bind to a live session.");
        }
        // lock order everywhere: access, then track
        this.access.lock();
        try {
            synchronized (this.track) {
                KafkaTransactionSession current = this.session;
                if (current != null) {
                    throw new IllegalStateException("This consumer is already bound to transaction session '"
                            + current.transactionalId() + "'; a consumer's offsets can join only one session's "
                            + "transactions. Call unbindTransactionSession() first, or use a second consumer.");
                }
                ConsumerGroupMetadata metadata;
                try {
                    metadata = this.delegate.groupMetadata();
                }
                catch (InvalidGroupIdException ex) {
                    throw new IllegalStateException("This consumer has no group.id: its offsets cannot be committed "
                            + "with a transaction. Configure group.id before binding it to a session.", ex);
                }
                this.groupMetadata = metadata;
                clearWindow();
                this.session = bound;
                bound.addParticipant(this.participant);
            }
        }
        finally {
            this.access.unlock();
        }
    }

    /**
     * Unbinds this consumer; its positions no longer join the session's transactions.
     *
     * @throws IllegalStateException while the session has a transaction open that this consumer read from
     */
    public void unbindTransactionSession() {
        synchronized (this.track) {
            KafkaTransactionSession current = this.session;
            if (current == null) {
                return;
            }
            if (isOpen(current.state()) && !this.windowEnd.isEmpty()) {
                throw new IllegalStateException("Cannot unbind from transaction session '" + current.transactionalId()
                        + "' (state " + current.state() + "): its open transaction consumed from "
                        + this.windowEnd.keySet() + ". Commit or abort it first.");
            }
            if (current.state() == SessionState.FATAL_ERROR && !this.windowStart.isEmpty()) {
                // the session failed without a commit and could not tell this consumer yet: rewind now
                this.participant.afterAbort(current);
            }
            current.removeParticipant(this.participant);
            this.session = null;
            clearWindow();
        }
    }

    // ---------------------------------------------------------------- poll

    /**
     * Polls the wrapped consumer. While bound, waits first for a commit or abort in progress to finish, and
     * records the positions of the returned records for the next commit (or abort).
     */
    @Override
    public ConsumerRecords<K, V> poll(Duration timeout) {
        KafkaTransactionSession s = this.session;
        if (s != null) {
            s.awaitLifecycleIdle();
        }
        this.access.lock();
        try {
            applyPendingRewind();
            ConsumerRecords<K, V> records = this.delegate.poll(timeout);
            synchronized (this.track) {
                // no network call here: a reseek that arrived during the poll drops those partitions' records and
                // is applied by the next poll, before it fetches
                Set<TopicPartition> rewound = new java.util.HashSet<>(applyPendingRewindLocally());
                rewound.addAll(this.pendingReseek.keySet());
                if (!rewound.isEmpty()) {
                    records = without(records, rewound);
                }
                if (this.session != null) {
                    remember(records);
                }
            }
            return records;
        }
        finally {
            this.access.unlock();
        }
    }

    private void remember(ConsumerRecords<K, V> records) {
        if (records.isEmpty()) {
            return;
        }
        for (TopicPartition tp : records.partitions()) {
            List<ConsumerRecord<K, V>> list = records.records(tp);
            ConsumerRecord<K, V> first = list.get(0);
            ConsumerRecord<K, V> last = list.get(list.size() - 1);
            this.windowStart.putIfAbsent(tp, new OffsetAndMetadata(first.offset(), first.leaderEpoch(), ""));
            this.windowEnd.put(tp, new OffsetAndMetadata(last.offset() + 1, last.leaderEpoch(), ""));
        }
        // a rebalance only happens inside poll, so the metadata read after it is the one to commit with
        this.groupMetadata = this.delegate.groupMetadata();
    }

    private static <K, V> ConsumerRecords<K, V> without(ConsumerRecords<K, V> records, Set<TopicPartition> dropped) {
        Map<TopicPartition, List<ConsumerRecord<K, V>>> kept = new LinkedHashMap<>();
        for (TopicPartition tp : records.partitions()) {
            if (!dropped.contains(tp)) {
                kept.put(tp, records.records(tp));
            }
        }
        Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>(records.nextOffsets());
        next.keySet().removeAll(dropped);
        return new ConsumerRecords<>(kept, next);
    }

    /** Applies only the rewinds an abort left (local seeks, no network call); caller holds access and track. */
    private Set<TopicPartition> applyPendingRewindLocally() {
        if (this.pendingRewind.isEmpty()) {
            return Set.of();
        }
        Map<TopicPartition, OffsetAndMetadata> rewind = new HashMap<>(this.pendingRewind);
        this.pendingRewind.clear();
        seekAll(rewind);
        return rewind.keySet();
    }

    /**
     * Applies rewinds left by an abort that ran during a poll, and reseeks after an unknown outcome (reading the
     * group's committed offsets, which may wait); caller holds {@link #access}, not {@link #track}.
     */
    private Set<TopicPartition> applyPendingRewind() {
        Map<TopicPartition, OffsetAndMetadata> reseek;
        synchronized (this.track) {
            reseek = new HashMap<>(this.pendingReseek);
        }
        if (!reseek.isEmpty()) {
            // committed() reads stable offsets: it waits while the transaction of unknown outcome is still in flight,
            // and throws if that takes longer than default.api.timeout.ms (the reseek is then retried by the next poll)
            Map<TopicPartition, OffsetAndMetadata> committed = this.delegate.committed(reseek.keySet());
            committed.forEach((tp, offset) -> {
                if (offset != null) {
                    reseek.put(tp, offset);
                }
            });
        }
        synchronized (this.track) {
            this.pendingReseek.keySet().removeAll(reseek.keySet());
            if (this.pendingRewind.isEmpty() && reseek.isEmpty()) {
                return Set.of();
            }
            Map<TopicPartition, OffsetAndMetadata> rewind = new HashMap<>(this.pendingRewind);
            this.pendingRewind.clear();
            rewind.putAll(reseek);
            seekAll(rewind);
            return rewind.keySet();
        }
    }

    private void seekAll(Map<TopicPartition, OffsetAndMetadata> rewind) {
        Set<TopicPartition> assigned = this.delegate.assignment();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : rewind.entrySet()) {
            if (assigned.contains(e.getKey())) {
                this.delegate.seek(e.getKey(), e.getValue());
            }
        }
        log.debug("Rewound {} to where the aborted transaction began", rewind);
    }

    private void clearWindow() {
        this.windowStart.clear();
        this.windowEnd.clear();
        this.abortOnlyReason = null;
        this.committing = null;
    }

    // ---------------------------------------------------------------- the session's side

    /** Called by the session on its lifecycle thread, with the session's lifecycle lock held. */
    private final class Participant implements SessionParticipant {

        @Override
        public void beforeCommit(TransactionSession s) {
            Map<TopicPartition, OffsetAndMetadata> offsets;
            ConsumerGroupMetadata metadata;
            synchronized (TransactionalConsumer.this.track) {
                String reason = TransactionalConsumer.this.abortOnlyReason;
                if (reason != null) {
                    throw KafkaTransactionSession.of(s).abortOnly(reason);
                }
                offsets = new LinkedHashMap<>(TransactionalConsumer.this.windowEnd);
                metadata = TransactionalConsumer.this.groupMetadata;
                TransactionalConsumer.this.committing = offsets;
            }
            if (!offsets.isEmpty() && metadata != null) {
                s.sendOffsetsToTransaction(offsets, metadata);
            }
        }

        /**
         * Forgets what the commit covered. Records a poll on another thread returned after {@link #beforeCommit}
         * took the positions were not committed: they stay in the window, which now starts at the committed position.
         */
        @Override
        public void afterCommit(TransactionSession s) {
            synchronized (TransactionalConsumer.this.track) {
                Map<TopicPartition, OffsetAndMetadata> committed = TransactionalConsumer.this.committing;
                TransactionalConsumer.this.committing = null;
                if (committed == null) {
                    clearWindow();
                    return;
                }
                TransactionalConsumer.this.abortOnlyReason = null;
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : committed.entrySet()) {
                    TopicPartition tp = e.getKey();
                    OffsetAndMetadata end = TransactionalConsumer.this.windowEnd.get(tp);
                    if (end == null || end.offset() <= e.getValue().offset()) {
                        TransactionalConsumer.this.windowStart.remove(tp);
                        TransactionalConsumer.this.windowEnd.remove(tp);
                    }
                    else {
                        TransactionalConsumer.this.windowStart.put(tp, e.getValue());
                    }
                }
            }
        }

        @Override
        public void afterAbort(TransactionSession s) {
            Map<TopicPartition, OffsetAndMetadata> rewind;
            synchronized (TransactionalConsumer.this.track) {
                rewind = new LinkedHashMap<>(TransactionalConsumer.this.windowStart);
                clearWindow();
                if (rewind.isEmpty()) {
                    return;
                }
                if (!TransactionalConsumer.this.access.tryLock()) {
                    // a poll runs on another thread: it applies the rewind when it returns
                    TransactionalConsumer.this.pendingRewind.putAll(rewind);
                    return;
                }
            }
            try {
                synchronized (TransactionalConsumer.this.track) {
                    seekAll(rewind);
                }
            }
            finally {
                TransactionalConsumer.this.access.unlock();
            }
        }

        /**
         * The outcome cannot be known now: the next poll positions every partition the transaction read at the
         * group's committed offset, which says whether it committed (read as stable offsets, so a transaction still
         * in flight is waited for); nothing is skipped and nothing is read twice.
         */
        @Override
        public void afterOutcomeUnknown(TransactionSession s) {
            synchronized (TransactionalConsumer.this.track) {
                TransactionalConsumer.this.pendingReseek.putAll(TransactionalConsumer.this.windowStart);
                clearWindow();
            }
        }

        @Override
        public String toString() {
            return "TransactionalConsumer[" + TransactionalConsumer.this.delegate + "]";
        }
    }

    /** Wraps the application's listener: after it ran, a revocation of a partition read in the window is noted. */
    private final class RevocationGuard implements ConsumerRebalanceListener {

        private final @Nullable ConsumerRebalanceListener user;

        RevocationGuard(@Nullable ConsumerRebalanceListener user) {
            this.user = user;
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            if (this.user != null) {
                this.user.onPartitionsRevoked(partitions);
            }
            lost(partitions, "revoked by a rebalance");
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            if (this.user != null) {
                this.user.onPartitionsLost(partitions);
            }
            lost(partitions, "lost (the consumer was dropped from the group)");
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            if (this.user != null) {
                this.user.onPartitionsAssigned(partitions);
            }
        }

        private void lost(Collection<TopicPartition> partitions, String how) {
            synchronized (TransactionalConsumer.this.track) {
                List<TopicPartition> consumed = new ArrayList<>();
                for (TopicPartition tp : partitions) {
                    if (TransactionalConsumer.this.windowEnd.containsKey(tp)) {
                        consumed.add(tp);
                    }
                }
                TransactionalConsumer.this.pendingRewind.keySet().removeAll(partitions);
                TransactionalConsumer.this.pendingReseek.keySet().removeAll(partitions);
                if (consumed.isEmpty() || TransactionalConsumer.this.session == null) {
                    return;
                }
                String reason = "partitions " + consumed + " were " + how + " after the transaction consumed from "
                        + "them; their next owner starts from the last committed offsets, so committing this "
                        + "transaction would duplicate its records.";
                if (TransactionalConsumer.this.abortOnlyReason == null) {
                    TransactionalConsumer.this.abortOnlyReason = reason;
                }
                log.info("Transaction is abort-only: {}", reason);
            }
        }
    }

    // ---------------------------------------------------------------- guarded calls

    private static boolean isOpen(SessionState state) {
        return state == SessionState.IN_TRANSACTION || state == SessionState.PREPARED
                || state == SessionState.ABORTABLE_ERROR || state == SessionState.COMMITTING
                || state == SessionState.ABORTING;
    }

    private void ensureNoTransaction(String call, String why) {
        KafkaTransactionSession s = this.session;
        if (s != null && isOpen(s.state())) {
            throw new IllegalStateException(call + " is not allowed while this consumer is bound to transaction "
                    + "session '" + s.transactionalId() + "' and a transaction is open (state " + s.state() + "): "
                    + why);
        }
    }

    private static final String COMMIT_WHY = "the session commits this consumer's offsets with the transaction. "
            + "Remove the call, or unbind the consumer.";
    private static final String SEEK_WHY = "moving the position would make the offsets committed with the transaction "
            + "disagree with the records it processed. Seek before beginTransaction() or after it ends.";
    private static final String SUBSCRIBE_WHY = "changing the assignment would drop partitions the transaction "
            + "consumed from. Change it before beginTransaction() or after it ends.";

    private <T> T locked(java.util.function.Supplier<T> call) {
        this.access.lock();
        try {
            return call.get();
        }
        finally {
            this.access.unlock();
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

    private void forget(Collection<TopicPartition> partitions) {
        synchronized (this.track) {
            this.windowStart.keySet().removeAll(partitions);
            this.windowEnd.keySet().removeAll(partitions);
        }
    }

    @Override
    public void subscribe(Collection<String> topics) {
        subscribe(topics, null);
    }

    /** The listener runs first; then this consumer notes revoked partitions (see the class description). */
    @Override
    public void subscribe(Collection<String> topics, @Nullable ConsumerRebalanceListener listener) {
        ensureNoTransaction("subscribe()", SUBSCRIBE_WHY);
        lockedRun(() -> this.delegate.subscribe(topics, new RevocationGuard(listener)));
    }

    @Override
    public void subscribe(Pattern pattern) {
        subscribe(pattern, null);
    }

    @Override
    public void subscribe(Pattern pattern, @Nullable ConsumerRebalanceListener listener) {
        ensureNoTransaction("subscribe()", SUBSCRIBE_WHY);
        lockedRun(() -> this.delegate.subscribe(pattern, new RevocationGuard(listener)));
    }

    @Override
    public void subscribe(SubscriptionPattern pattern) {
        subscribe(pattern, null);
    }

    @Override
    public void subscribe(SubscriptionPattern pattern, @Nullable ConsumerRebalanceListener listener) {
        ensureNoTransaction("subscribe()", SUBSCRIBE_WHY);
        lockedRun(() -> this.delegate.subscribe(pattern, new RevocationGuard(listener)));
    }

    @Override
    public void assign(Collection<TopicPartition> partitions) {
        ensureNoTransaction("assign()", SUBSCRIBE_WHY);
        lockedRun(() -> this.delegate.assign(partitions));
        synchronized (this.track) {
            this.windowStart.keySet().retainAll(partitions);
            this.windowEnd.keySet().retainAll(partitions);
        }
    }

    @Override
    public void unsubscribe() {
        ensureNoTransaction("unsubscribe()", SUBSCRIBE_WHY);
        lockedRun(this.delegate::unsubscribe);
        synchronized (this.track) {
            clearWindow();
        }
    }

    @Override
    public void commitSync() {
        ensureNoTransaction("commitSync()", COMMIT_WHY);
        lockedRun(this.delegate::commitSync);
    }

    @Override
    public void commitSync(Duration timeout) {
        ensureNoTransaction("commitSync()", COMMIT_WHY);
        lockedRun(() -> this.delegate.commitSync(timeout));
    }

    @Override
    public void commitSync(Map<TopicPartition, OffsetAndMetadata> offsets) {
        ensureNoTransaction("commitSync()", COMMIT_WHY);
        lockedRun(() -> this.delegate.commitSync(offsets));
    }

    @Override
    public void commitSync(Map<TopicPartition, OffsetAndMetadata> offsets, Duration timeout) {
        ensureNoTransaction("commitSync()", COMMIT_WHY);
        lockedRun(() -> this.delegate.commitSync(offsets, timeout));
    }

    @Override
    public void commitAsync() {
        ensureNoTransaction("commitAsync()", COMMIT_WHY);
        lockedRun(this.delegate::commitAsync);
    }

    @Override
    public void commitAsync(@Nullable OffsetCommitCallback callback) {
        ensureNoTransaction("commitAsync()", COMMIT_WHY);
        lockedRun(() -> this.delegate.commitAsync(callback));
    }

    @Override
    public void commitAsync(Map<TopicPartition, OffsetAndMetadata> offsets, @Nullable OffsetCommitCallback callback) {
        ensureNoTransaction("commitAsync()", COMMIT_WHY);
        lockedRun(() -> this.delegate.commitAsync(offsets, callback));
    }

    @Override
    public void seek(TopicPartition partition, long offset) {
        ensureNoTransaction("seek()", SEEK_WHY);
        lockedRun(() -> this.delegate.seek(partition, offset));
        forget(List.of(partition));
    }

    @Override
    public void seek(TopicPartition partition, OffsetAndMetadata offsetAndMetadata) {
        ensureNoTransaction("seek()", SEEK_WHY);
        lockedRun(() -> this.delegate.seek(partition, offsetAndMetadata));
        forget(List.of(partition));
    }

    @Override
    public void seekToBeginning(Collection<TopicPartition> partitions) {
        ensureNoTransaction("seekToBeginning()", SEEK_WHY);
        lockedRun(() -> this.delegate.seekToBeginning(partitions));
        forget(partitions.isEmpty() ? assignment() : partitions);
    }

    @Override
    public void seekToEnd(Collection<TopicPartition> partitions) {
        ensureNoTransaction("seekToEnd()", SEEK_WHY);
        lockedRun(() -> this.delegate.seekToEnd(partitions));
        forget(partitions.isEmpty() ? assignment() : partitions);
    }

    // ---------------------------------------------------------------- plain delegation

    @Override
    public Set<TopicPartition> assignment() {
        return locked(this.delegate::assignment);
    }

    @Override
    public Set<String> subscription() {
        return locked(this.delegate::subscription);
    }

    @Override
    public void registerMetricForSubscription(KafkaMetric metric) {
        lockedRun(() -> this.delegate.registerMetricForSubscription(metric));
    }

    @Override
    public void unregisterMetricFromSubscription(KafkaMetric metric) {
        lockedRun(() -> this.delegate.unregisterMetricFromSubscription(metric));
    }

    @Override
    public long position(TopicPartition partition) {
        return locked(() -> {
            applyPendingRewind();
            return this.delegate.position(partition);
        });
    }

    @Override
    public long position(TopicPartition partition, Duration timeout) {
        return locked(() -> {
            applyPendingRewind();
            return this.delegate.position(partition, timeout);
        });
    }

    @Override
    public Map<TopicPartition, OffsetAndMetadata> committed(Set<TopicPartition> partitions) {
        return locked(() -> this.delegate.committed(partitions));
    }

    @Override
    public Map<TopicPartition, OffsetAndMetadata> committed(Set<TopicPartition> partitions, Duration timeout) {
        return locked(() -> this.delegate.committed(partitions, timeout));
    }

    @Override
    public Uuid clientInstanceId(Duration timeout) {
        return locked(() -> this.delegate.clientInstanceId(timeout));
    }

    @Override
    public Map<MetricName, ? extends Metric> metrics() {
        return locked(this.delegate::metrics);
    }

    @Override
    public List<PartitionInfo> partitionsFor(String topic) {
        return locked(() -> this.delegate.partitionsFor(topic));
    }

    @Override
    public List<PartitionInfo> partitionsFor(String topic, Duration timeout) {
        return locked(() -> this.delegate.partitionsFor(topic, timeout));
    }

    @Override
    public Map<String, List<PartitionInfo>> listTopics() {
        return locked(this.delegate::listTopics);
    }

    @Override
    public Map<String, List<PartitionInfo>> listTopics(Duration timeout) {
        return locked(() -> this.delegate.listTopics(timeout));
    }

    @Override
    public Set<TopicPartition> paused() {
        return locked(this.delegate::paused);
    }

    @Override
    public void pause(Collection<TopicPartition> partitions) {
        lockedRun(() -> this.delegate.pause(partitions));
    }

    @Override
    public void resume(Collection<TopicPartition> partitions) {
        lockedRun(() -> this.delegate.resume(partitions));
    }

    @Override
    public Map<TopicPartition, OffsetAndTimestamp> offsetsForTimes(Map<TopicPartition, Long> timestampsToSearch) {
        return locked(() -> this.delegate.offsetsForTimes(timestampsToSearch));
    }

    @Override
    public Map<TopicPartition, OffsetAndTimestamp> offsetsForTimes(Map<TopicPartition, Long> timestampsToSearch,
            Duration timeout) {
        return locked(() -> this.delegate.offsetsForTimes(timestampsToSearch, timeout));
    }

    @Override
    public Map<TopicPartition, Long> beginningOffsets(Collection<TopicPartition> partitions) {
        return locked(() -> this.delegate.beginningOffsets(partitions));
    }

    @Override
    public Map<TopicPartition, Long> beginningOffsets(Collection<TopicPartition> partitions, Duration timeout) {
        return locked(() -> this.delegate.beginningOffsets(partitions, timeout));
    }

    @Override
    public Map<TopicPartition, Long> endOffsets(Collection<TopicPartition> partitions) {
        return locked(() -> this.delegate.endOffsets(partitions));
    }

    @Override
    public Map<TopicPartition, Long> endOffsets(Collection<TopicPartition> partitions, Duration timeout) {
        return locked(() -> this.delegate.endOffsets(partitions, timeout));
    }

    @Override
    public OptionalLong currentLag(TopicPartition topicPartition) {
        return locked(() -> this.delegate.currentLag(topicPartition));
    }

    @Override
    public ConsumerGroupMetadata groupMetadata() {
        return locked(this.delegate::groupMetadata);
    }

    @Override
    public void enforceRebalance() {
        lockedRun(this.delegate::enforceRebalance);
    }

    @Override
    public void enforceRebalance(@Nullable String reason) {
        lockedRun(() -> this.delegate.enforceRebalance(reason));
    }

    /** Unbinds (see {@link #unbindTransactionSession()} for when that fails) and closes the wrapped consumer. */
    @Override
    public void close() {
        unbindQuietly();
        lockedRun(this.delegate::close);
    }

    @Override
    public void close(Duration timeout) {
        unbindQuietly();
        lockedRun(() -> this.delegate.close(timeout));
    }

    @Override
    public void close(CloseOptions option) {
        unbindQuietly();
        lockedRun(() -> this.delegate.close(option));
    }

    private void unbindQuietly() {
        synchronized (this.track) {
            KafkaTransactionSession current = this.session;
            if (current != null) {
                current.removeParticipant(this.participant);
                this.session = null;
                clearWindow();
            }
        }
    }

    /** Wakes a blocked poll; safe from any thread, like {@link Consumer#wakeup()}. */
    @Override
    public void wakeup() {
        this.delegate.wakeup();
    }

    @Override
    public String toString() {
        KafkaTransactionSession s = this.session;
        return "TransactionalConsumer[" + this.delegate + (s == null ? ", unbound" : ", bound to " + s) + "]";
    }
}
