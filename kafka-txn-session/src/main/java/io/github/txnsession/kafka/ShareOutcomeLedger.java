package io.github.txnsession.kafka;

import java.nio.charset.StandardCharsets;
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
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.InvalidOffsetException;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.config.TopicConfig;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Closes the window between a share-group transaction's commit and its acknowledgements (see
 * {@link TransactionalShareConsumer}): a record whose output committed is never turned into output again, even when
 * its worker died before acknowledging it.
 *
 * <h2>How</h2>
 * The ledger is a compacted Kafka topic with one entry per share group and transactional id. Every transaction of a
 * bound share consumer that acknowledges records (ACCEPT or REJECT) also writes, in the same transaction, its
 * session's entry: the coordinates and outcome of every record whose outcome committed and whose acknowledgement is
 * not yet confirmed by the broker. So the entry becomes visible exactly when the output does. The consumer looks up
 * every record a poll returns before handing it to the application, not only those the group says it delivers again
 * ({@code deliveryCount() > 1}): a share partition whose leader failed over can deliver a record again with a delivery
 * count of 1 (the old leader's acquisition was never written to the share group's state; the starter's
 * {@code AllPathsChaosSoakTest} saw a record whose acknowledgement failed that way come back as a first delivery):
 * <ol>
 * <li>it reads the ledger's high watermark and last stable offset; if transactions are open below the high watermark
 * and one of them writes an entry naming a polled record (read uncommitted), it waits until they have ended (a
 * worker's commit in flight when the record came back);</li>
 * <li>it reads the ledger up to there ({@code read_committed});</li>
 * <li>a record found there is acknowledged with its recorded outcome and not handed to the application; any other
 * record is.</li>
 * </ol>
 * Entries stay small: a new entry leaves out records whose acknowledgement the writing consumer saw confirmed and
 * records below the share partition's start offset (every record there is acknowledged or archived, so it can never
 * be delivered again), and compaction keeps one entry per transactional id. A new entry always starts from the
 * current one (read from the ledger once per session object, then kept in memory), so a session that starts again
 * under the same transactional id, or several consumers taking turns with pooled sessions, never drop records an
 * earlier writer left there.
 *
 * <h2>Guaranteed</h2>
 * <ul>
 * <li>An entry names only records whose output committed (it is written in their transaction), so a lookup never
 * skips a record whose output does not exist.</li>
 * <li>A worker killed at any point of a transaction: its records delivered again produce no second output.</li>
 * </ul>
 *
 * <h2>Stalled workers</h2>
 * A worker that stalls (a pause, a long GC) past its records' acquisition lock must not commit: another consumer may
 * have the records by then. After writing and flushing its entry, a transaction checks that no record's lock can have
 * expired yet, measured from the start of the poll before the one that returned the record (the consumer fetches at
 * most one batch ahead with {@code share.acquire.mode=record_limit}), or from its last successful renewal; otherwise
 * it refuses to commit ({@link SessionAbortableException}). A lock does not only end by expiring: when the share
 * partition's leader fails over, or the consumer leaves the group, the broker hands its records to other consumers at
 * once. So the transaction then also asks the broker whether the consumer still holds every record it decided (a
 * {@code RENEW} of each, waited for: one round trip per transaction) and refuses to commit if not. So an entry that
 * commits was in the log before any of its records could go to another consumer, whose lookup then finds it or waits
 * for its transaction. A transaction whose record's renewal was lost refuses too.
 *
 * <h2>Cost</h2>
 * A lookup per poll: the ledger's two end offsets (one round trip, both asked at once) and reading what is new.
 * While transactions on the ledger are open, it reads what they write (read uncommitted) and waits for their outcome
 * only if one of them names a polled record: a worker that died between writing its entry and committing holds up the
 * lookups of its own records until its transaction is aborted ({@code transaction.timeout.ms}), not everyone's.
 * Meanwhile its transaction keeps the last stable offset where it is; each lookup then reads only what was written
 * since the previous one (what the open range names is kept in memory until the last stable offset moves).
 * Consumers sharing one ledger object share a read begun after their poll returned. Plus the confirmation above: one
 * round trip per transaction. Reading a session's own entry (the first write through a session object, or the one
 * after a commit whose outcome was unknown) waits likewise only for an open transaction writing that same entry.
 *
 * <h2>Not guaranteed</h2>
 * <ul>
 * <li>The stall check assumes {@code share.acquire.mode=record_limit} (a warning says so otherwise): in the default
 * mode a fetch may acquire more records than one poll returns, so a record can be older than the check believes.</li>
 * <li>Entries shrink only when their session writes again: a record confirmed by one consumer stays named in
 * other sessions' entries until those sessions write and the share partition's start offset has passed it (idle
 * sessions keep their last entry). Entries are small text; the topic is compacted.</li>
 * <li>A lookup waits for open ledger transactions up to its timeout (by default 2 minutes, longer than Kafka's
 * default {@code transaction.timeout.ms}); if they do not end by then, the records are released and come back later.
 * Each release counts as a delivery: a record released {@code group.share.delivery.count.limit} times (5 by default)
 * is archived unprocessed. Keep {@code transaction.timeout.ms} of the group's workers below the lookup timeout.</li>
 * <li>Entries name records by topic name, partition and offset: after a topic is deleted and created again, or the
 * group's offsets are reset, clear the ledger topic too, or a record at a recorded offset is acknowledged unprocessed.
 * Entries of transactional ids no longer used stay in the topic (one small entry each).</li>
 * </ul>
 * The ledger topic must have exactly one partition (an existing topic with more is refused).
 * A commit whose outcome the session could not learn makes the next entry of that session start from what the ledger
 * holds, so it keeps the records if that transaction committed.
 *
 * <p>Thread-safe; one ledger can serve many share consumers of any groups, and several ledger objects on one topic in
 * one process share what they wrote. It holds an {@link Admin} and a
 * {@link KafkaConsumer}: close it after the consumers that use it.
 */
public final class ShareOutcomeLedger implements AutoCloseable {

    /** The ledger topic's name when none is given. */
    public static final String DEFAULT_TOPIC = "txn-session-share-ledger";

    private static final Logger log = LoggerFactory.getLogger(ShareOutcomeLedger.class);
    private static final Duration DEFAULT_LOOKUP_TIMEOUT = Duration.ofMinutes(2);
    private static final long START_OFFSETS_MAX_AGE_NANOS = TimeUnit.SECONDS.toNanos(5);
    private static final char REJECTED = 'r';
    /** the entry caches, by bootstrap servers and topic */
    private static final Map<String, Map<String, Written>> CACHES = new ConcurrentHashMap<>();

    private final String topic;
    private final Duration lookupTimeout;
    private final Admin admin;
    private final KafkaConsumer<byte[], byte[]> reader;
    /** reads what open transactions write to the ledger (read uncommitted), to tell whether a lookup must wait */
    private final KafkaConsumer<byte[], byte[]> pendingReader;
    /** group id, then writer (transactional id), then the outcomes its last committed entry names; under itself */
    private final Map<String, Map<String, Map<ShareRecordId, AcknowledgeType>>> entries = new HashMap<>();
    private final Map<String, StartOffsets> startOffsets = new ConcurrentHashMap<>();
    /** per ledger partition: what open transactions wrote above its last stable offset, as read so far */
    private final Map<TopicPartition, OpenLedgerWrites> openWrites = new HashMap<>();
    private long openRecordsRead;
    /** when the last complete read up to the ledger's end began ({@link System#nanoTime()}); under {@link #entries} */
    private long lastCatchUpStart;
    private boolean caughtUp;
    /**
     * per entry key: what this process wrote through one session object; shared by every ledger object of the same
     * cluster and topic in this process (each must build on what the others wrote); its own lock
     */
    private final Map<String, Written> written;

    /**
     * A ledger on {@link #DEFAULT_TOPIC}, created (compacted, one partition) if it does not exist.
     *
     * @param clientConfigs client configs: {@code bootstrap.servers} and the security settings; other keys are
     *        ignored
     * @see #ShareOutcomeLedger(Map, String, Duration)
     */
    public ShareOutcomeLedger(Map<String, ?> clientConfigs) {
        this(clientConfigs, DEFAULT_TOPIC, DEFAULT_LOOKUP_TIMEOUT);
    }

    /**
     * A ledger on {@code topic}, created (compacted, one partition, the brokers' default replication) if it does not
     * exist.
     *
     * @param clientConfigs client configs: {@code bootstrap.servers} and the security settings; other keys are
     *        ignored
     * @param topic the ledger topic; an existing one must be compacted ({@code cleanup.policy} containing
     *        {@code compact})
     * @param lookupTimeout how long a lookup waits for the ledger (open transactions on it included)
     * @throws IllegalArgumentException for a blank topic, a non-positive timeout, or an existing topic that is not
     *         compacted
     * @throws InvalidSessionConfigException without {@code bootstrap.servers}
     */
    public ShareOutcomeLedger(Map<String, ?> clientConfigs, String topic, Duration lookupTimeout) {
        Objects.requireNonNull(clientConfigs, "clientConfigs");
        Objects.requireNonNull(topic, "topic");
        Objects.requireNonNull(lookupTimeout, "lookupTimeout");
        if (topic.isBlank()) {
            throw new IllegalArgumentException("The share outcome ledger needs a topic name; got a blank one");
        }
        if (lookupTimeout.isNegative() || lookupTimeout.isZero()) {
            throw new IllegalArgumentException("The share outcome ledger's lookup timeout must be positive; got "
                    + lookupTimeout);
        }
        if (clientConfigs.get(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG) == null) {
            throw new InvalidSessionConfigException(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, null,
                    "the share outcome ledger needs the cluster's bootstrap.servers");
        }
        this.topic = topic;
        this.lookupTimeout = lookupTimeout;
        this.written = CACHES.computeIfAbsent(clientConfigs.get(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG) + "|" + topic,
                k -> new HashMap<>());
        this.admin = Admin.create(only(clientConfigs, AdminClientConfig.configNames()));
        try {
            int partitions = ensureTopic();
            Map<String, Object> readerConfigs = only(clientConfigs, ConsumerConfig.configNames());
            readerConfigs.remove(ConsumerConfig.GROUP_ID_CONFIG);
            readerConfigs.remove(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG);
            readerConfigs.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            readerConfigs.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
            readerConfigs.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            readerConfigs.putIfAbsent(ConsumerConfig.CLIENT_ID_CONFIG, "txn-session-share-ledger-" + topic);
            this.reader = new KafkaConsumer<>(readerConfigs, new ByteArrayDeserializer(), new ByteArrayDeserializer());
            Map<String, Object> pendingConfigs = new HashMap<>(readerConfigs);
            pendingConfigs.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted");
            // a position past the log's end (the log was truncated or the topic made again) must not be reset quietly
            pendingConfigs.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
            pendingConfigs.put(ConsumerConfig.CLIENT_ID_CONFIG, readerConfigs.get(ConsumerConfig.CLIENT_ID_CONFIG)
                    + "-open");
            this.pendingReader = new KafkaConsumer<>(pendingConfigs, new ByteArrayDeserializer(),
                    new ByteArrayDeserializer());
            try {
                List<TopicPartition> assigned = new ArrayList<>();
                for (int p = 0; p < partitions; p++) {
                    assigned.add(new TopicPartition(topic, p));
                }
                this.reader.assign(assigned);
                this.reader.seekToBeginning(assigned);
                this.pendingReader.assign(assigned);
            }
            catch (RuntimeException ex) {
                this.reader.close(Duration.ZERO);
                this.pendingReader.close(Duration.ZERO);
                throw ex;
            }
        }
        catch (RuntimeException ex) {
            this.admin.close(Duration.ZERO);
            throw ex;
        }
    }

    private static Map<String, Object> only(Map<String, ?> configs, Set<String> names) {
        Map<String, Object> copy = new HashMap<>();
        configs.forEach((k, v) -> {
            if (names.contains(k) && v != null) {
                copy.put(k, v);
            }
        });
        return copy;
    }

    /** @return the number of the ledger topic's partitions, after creating it if needed */
    private int ensureTopic() {
        try {
            TopicDescription existing = this.admin.describeTopics(List.of(this.topic)).allTopicNames()
                .get(this.lookupTimeout.toMillis(), TimeUnit.MILLISECONDS).get(this.topic);
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, this.topic);
            Config config = this.admin.describeConfigs(List.of(resource)).all()
                .get(this.lookupTimeout.toMillis(), TimeUnit.MILLISECONDS).get(resource);
            ConfigEntry policy = config == null ? null : config.get(TopicConfig.CLEANUP_POLICY_CONFIG);
            if (policy == null || policy.value() == null || !policy.value().contains(TopicConfig.CLEANUP_POLICY_COMPACT)) {
                throw new IllegalArgumentException("The share outcome ledger topic '" + this.topic + "' exists with "
                        + "cleanup.policy=" + (policy == null ? "?" : policy.value()) + ": the ledger keeps one entry "
                        + "per transactional id and needs a compacted topic. Set cleanup.policy=compact on it, or "
                        + "name another topic.");
            }
            if (existing.partitions().size() != 1) {
                throw new IllegalArgumentException("The share outcome ledger topic '" + this.topic + "' has "
                        + existing.partitions().size() + " partitions: the ledger needs exactly one (every entry of "
                        + "a writer must land in the same partition, whatever the producer's partitioner). Name "
                        + "another topic, or recreate it with one partition.");
            }
            return 1;
        }
        catch (ExecutionException ex) {
            if (!(ex.getCause() instanceof UnknownTopicOrPartitionException)) {
                throw new KafkaException("Share outcome ledger: describing topic '" + this.topic + "' failed: "
                        + ex.getCause(), ex.getCause());
            }
        }
        catch (java.util.concurrent.TimeoutException ex) {
            throw new TimeoutException("share outcome ledger: the cluster did not describe topic '" + this.topic
                    + "' within " + this.lookupTimeout, ex);
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new InterruptException(ex);
        }
        NewTopic created = new NewTopic(this.topic, Optional.of(1), Optional.empty())
            .configs(Map.of(TopicConfig.CLEANUP_POLICY_CONFIG, TopicConfig.CLEANUP_POLICY_COMPACT));
        try {
            this.admin.createTopics(List.of(created)).all().get(this.lookupTimeout.toMillis(), TimeUnit.MILLISECONDS);
            log.info("Created the share outcome ledger topic '{}' (compacted, 1 partition)", this.topic);
        }
        catch (ExecutionException ex) {
            if (!(ex.getCause() instanceof TopicExistsException)) {
                throw new KafkaException("Share outcome ledger: creating topic '" + this.topic + "' failed: "
                        + ex.getCause() + ". Create it (compacted) yourself, or grant Create on it.", ex.getCause());
            }
        }
        catch (java.util.concurrent.TimeoutException ex) {
            throw new TimeoutException("share outcome ledger: creating topic '" + this.topic + "' did not finish "
                    + "within " + this.lookupTimeout, ex);
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new InterruptException(ex);
        }
        return 1;
    }

    /** @return the ledger topic */
    public String topic() {
        return this.topic;
    }

    // ---------------------------------------------------------------- used by TransactionalShareConsumer

    /**
     * The record to send in the open transaction of {@code session} (transactional id {@code writer}): the entry as it
     * stands (what this process committed through the same session object, what another consumer wrote in the same
     * open transaction, or else what the ledger holds), plus {@code additions}, minus {@code confirmed} and records
     * below their share partition's start offset. Every consumer bound to the session merges into one entry, so none
     * drops another's records. {@link #ended} must follow with the transaction's outcome.
     */
    ProducerRecord<byte[], byte[]> write(String groupId, String writer, KafkaTransactionSession session,
            Map<ShareRecordId, AcknowledgeType> additions, Set<ShareRecordId> confirmed) {
        String key = key(groupId, writer);
        Written w = current(key, groupId, writer, session);
        Map<ShareRecordId, AcknowledgeType> next = new HashMap<>(w.pending != null ? w.pending : w.committed);
        next.keySet().removeAll(confirmed);
        next.putAll(additions);
        prune(groupId, next);
        synchronized (this.written) {
            this.written.put(key, new Written(session, w.committed, next, session.generation()));
        }
        return entryRecord(groupId, writer, next);
    }

    /**
     * The open transaction of {@code session} ended: committed, its entry is what it wrote; aborted, the entry stays
     * as it was; outcome unknown, the entry is read from the ledger again at the next write.
     */
    void ended(String groupId, String writer, KafkaTransactionSession session, @Nullable Boolean committed) {
        String key = key(groupId, writer);
        synchronized (this.written) {
            Written w = this.written.get(key);
            if (w == null || w.session != session || w.pending == null) {
                return;
            }
            if (committed == null) {
                this.written.remove(key);
            }
            else {
                this.written.put(key, new Written(session, committed ? w.pending : w.committed, null, -1));
            }
        }
    }

    /**
     * Reads the entry of {@code writer} once per session object (a new session of the id, here or in another process,
     * may have changed it), so that the first transaction does not wait for the ledger.
     */
    void warm(String groupId, String writer, KafkaTransactionSession session) {
        current(key(groupId, writer), groupId, writer, session);
    }

    /**
     * The entry as this process knows it through {@code session}; read from the ledger when this session object has
     * not written it yet, or when a transaction wrote it and ended without saying how (a consumer closed meanwhile):
     * the ledger then holds what that transaction did. The cache lock is never held while the ledger is read.
     */
    private Written current(String key, String groupId, String writer, KafkaTransactionSession session) {
        synchronized (this.written) {
            Written w = usable(this.written.get(key), session);
            if (w != null) {
                return w;
            }
        }
        Map<ShareRecordId, AcknowledgeType> read;
        synchronized (this.entries) {
            // waits only for an open transaction writing this very entry (its outcome decides what the entry holds)
            String entryKey = key(groupId, writer);
            catchUp(open -> open.writes(entryKey));
            read = new HashMap<>(this.entries.getOrDefault(groupId, Map.of()).getOrDefault(writer, Map.of()));
        }
        synchronized (this.written) {
            Written w = usable(this.written.get(key), session);
            if (w != null) {
                return w; // another thread read it meanwhile
            }
            Written fresh = new Written(session, read, null, -1);
            this.written.put(key, fresh);
            return fresh;
        }
    }

    private static @Nullable Written usable(@Nullable Written w, KafkaTransactionSession session) {
        if (w == null || w.session != session) {
            return null;
        }
        if (w.pending != null && w.pendingGeneration != session.generation()) {
            return null; // written by a transaction that ended unreported
        }
        return w;
    }

    /**
     * @return the record that sets the entry of {@code writer} in {@code groupId} to {@code outcomes} (a tombstone when
     *         it is empty)
     */
    private ProducerRecord<byte[], byte[]> entryRecord(String groupId, String writer,
            Map<ShareRecordId, AcknowledgeType> outcomes) {
        byte[] value = outcomes.isEmpty() ? null : encode(outcomes).getBytes(StandardCharsets.UTF_8);
        return new ProducerRecord<>(this.topic, key(groupId, writer).getBytes(StandardCharsets.UTF_8), value);
    }

    /**
     * Which of {@code ids} (records of {@code groupId} a poll returned) have a committed outcome, after waiting for
     * the ledger's open transactions. The ledger is read up to where it ended after the records were acquired (the
     * call comes after the poll returned them): a read another thread began after this call started serves too.
     *
     * @throws TimeoutException if the ledger could not be read up to date within the lookup timeout
     */
    Map<ShareRecordId, AcknowledgeType> lookup(String groupId, Collection<ShareRecordId> ids) {
        long acquiredBefore = System.nanoTime();
        synchronized (this.entries) {
            if (!this.caughtUp || this.lastCatchUpStart - acquiredBefore < 0) {
                long start = System.nanoTime();
                if (catchUp(open -> open.names(groupId, ids))) {
                    this.caughtUp = true;
                    this.lastCatchUpStart = start;
                }
            }
            Map<ShareRecordId, AcknowledgeType> found = new LinkedHashMap<>();
            Map<String, Map<ShareRecordId, AcknowledgeType>> writers = this.entries.getOrDefault(groupId, Map.of());
            for (ShareRecordId id : ids) {
                for (Map<ShareRecordId, AcknowledgeType> outcomes : writers.values()) {
                    AcknowledgeType type = outcomes.get(id);
                    if (type != null) {
                        found.put(id, type);
                        break;
                    }
                }
            }
            return found;
        }
    }

    /**
     * Drops the outcomes of records below their share partition's start offset (acknowledged or archived: never
     * delivered again). Keeps everything if the start offsets cannot be read.
     */
    private void prune(String groupId, Map<ShareRecordId, AcknowledgeType> outcomes) {
        if (outcomes.isEmpty()) {
            return;
        }
        Map<TopicPartition, Long> starts = startOffsets(groupId);
        outcomes.keySet().removeIf(id -> {
            Long start = starts.get(new TopicPartition(id.topic(), id.partition()));
            return start != null && id.offset() < start;
        });
    }

    private Map<TopicPartition, Long> startOffsets(String groupId) {
        StartOffsets cached = this.startOffsets.get(groupId);
        if (cached != null && System.nanoTime() - cached.readAtNanos < START_OFFSETS_MAX_AGE_NANOS) {
            return cached.offsets;
        }
        try {
            Map<TopicPartition, SharePartitionOffsetInfo> info = this.admin
                .listShareGroupOffsets(Map.of(groupId, new ListShareGroupOffsetsSpec()))
                .partitionsToOffsetInfo(groupId).get(5, TimeUnit.SECONDS);
            Map<TopicPartition, Long> offsets = new HashMap<>();
            info.forEach((tp, i) -> {
                if (i != null && i.startOffset() >= 0) {
                    offsets.put(tp, i.startOffset());
                }
            });
            this.startOffsets.put(groupId, new StartOffsets(offsets, System.nanoTime()));
            return offsets;
        }
        catch (ExecutionException | java.util.concurrent.TimeoutException ex) {
            log.debug("Share outcome ledger: could not read the start offsets of group '{}': {}", groupId,
                    ex.toString());
            return cached == null ? Map.of() : cached.offsets;
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new InterruptException(ex);
        }
    }

    /**
     * Reads the ledger's committed entries as far as the caller needs them. Entries committed before the records of
     * {@code ids} were acquired lie below the high watermark read now; those of transactions still open there are
     * either about other records, or the lookup must wait for their outcome. So: read what is committed (up to the
     * last stable offset); if transactions are still open below the high watermark, look at what they write (read
     * uncommitted); unless one of them names a record of {@code ids}, that is enough. Otherwise (or without
     * {@code ids}) wait until they ended and read up to the high watermark.
     *
     * @param mustWaitFor what, written by open transactions, makes the caller wait for their outcome
     * @return whether everything up to the high watermark was read (nothing open below it any more)
     */
    private boolean catchUp(Predicate<OpenLedgerWrites> mustWaitFor) {
        long deadline = System.nanoTime() + this.lookupTimeout.toNanos();
        Set<TopicPartition> partitions = this.reader.assignment();
        // both ends asked at once: the ledger is usually stable (entries are written last, just before a commit)
        KafkaFuture<Map<TopicPartition, ListOffsetsResultInfo>> highWatermarkInfo = endOffsets(partitions,
                IsolationLevel.READ_UNCOMMITTED);
        KafkaFuture<Map<TopicPartition, ListOffsetsResultInfo>> stableEnds = endOffsets(partitions,
                IsolationLevel.READ_COMMITTED);
        Map<TopicPartition, ListOffsetsResultInfo> ends = awaitInfo(highWatermarkInfo, deadline);
        Map<TopicPartition, Long> highWatermarks = offsetsOf(ends);
        Map<TopicPartition, Long> stable = await(stableEnds, deadline);
        if (!isStable(highWatermarks, stable)) {
            readCommittedUpTo(stable, deadline);
            if (!writtenWhileOpen(mustWaitFor, stable, ends, deadline)) {
                return false;
            }
        }
        else {
            this.openWrites.clear(); // nothing open: nothing to keep
        }
        while (!isStable(highWatermarks, stable)) {
            if (System.nanoTime() > deadline) {
                throw stayedOpen(stable, highWatermarks, null);
            }
            try {
                Thread.sleep(2); // the coordinator writes markers within milliseconds; no notification exists
            }
            catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
                throw new InterruptException(ex);
            }
            Map<TopicPartition, Long> before = stable;
            try {
                stable = await(endOffsets(partitions, IsolationLevel.READ_COMMITTED), deadline);
            }
            catch (TimeoutException ex) {
                if (System.nanoTime() - deadline >= 0) {
                    throw stayedOpen(stable, highWatermarks, ex); // (the deadline, not the broker, ended the read)
                }
                throw ex;
            }
            if (!stable.equals(before) && !isStable(highWatermarks, stable)) {
                // a transaction ended, another is still open: what is still open may not concern the caller
                readCommittedUpTo(stable, deadline);
                if (!writtenWhileOpen(mustWaitFor, stable, ends, deadline)) {
                    return false;
                }
            }
        }
        readCommittedUpTo(highWatermarks, deadline);
        return true;
    }

    private TimeoutException stayedOpen(Map<TopicPartition, Long> stable, Map<TopicPartition, Long> highWatermarks,
            @Nullable Throwable cause) {
        return new TimeoutException("Share outcome ledger '" + this.topic + "': a transaction on it stayed open for "
                + this.lookupTimeout + " (last stable offsets " + stable + ", high watermarks " + highWatermarks
                + "); whether redelivered records were committed cannot be told yet", cause);
    }

    private static boolean isStable(Map<TopicPartition, Long> highWatermarks, Map<TopicPartition, Long> stable) {
        return highWatermarks.entrySet().stream().allMatch(e -> stable.getOrDefault(e.getKey(), -1L) >= e.getValue());
    }

    private void readCommittedUpTo(Map<TopicPartition, Long> ends, long deadline) {
        while (ends.entrySet().stream().anyMatch(e -> this.reader.position(e.getKey()) < e.getValue())) {
            if (System.nanoTime() > deadline) {
                throw new TimeoutException("Share outcome ledger '" + this.topic + "': reading it up to " + ends
                        + " took longer than " + this.lookupTimeout);
            }
            for (ConsumerRecord<byte[], byte[]> r : this.reader.poll(Duration.ofMillis(100))) {
                try {
                    apply(r);
                }
                catch (RuntimeException ex) {
                    log.warn("Share outcome ledger '{}': ignoring a malformed entry at {}-{}@{}: {}", this.topic,
                            r.topic(), r.partition(), r.offset(), ex.toString());
                }
            }
        }
    }

    /**
     * Whether what transactions wrote between the last stable offset and the high watermark (transactions that may
     * still be open, or have ended since) is something {@code mustWaitFor} accepts. Read uncommitted; only what was
     * written since the previous call is read while the last stable offset and the partition's leader epoch stay
     * what they were (a new leader may have truncated the log: then the range is read again).
     */
    private boolean writtenWhileOpen(Predicate<OpenLedgerWrites> mustWaitFor, Map<TopicPartition, Long> from,
            Map<TopicPartition, ListOffsetsResultInfo> ends, long deadline) {
        Map<TopicPartition, Long> to = offsetsOf(ends);
        Set<TopicPartition> unread = new HashSet<>();
        to.forEach((tp, end) -> {
            OpenLedgerWrites range = this.openWrites.computeIfAbsent(tp, p -> new OpenLedgerWrites());
            long position = range.resumeFrom(from.getOrDefault(tp, 0L), ends.get(tp).leaderEpoch().orElse(-1), end);
            if (position < end) {
                unread.add(tp);
            }
            this.pendingReader.seek(tp, position); // (a partition read to its end reads nothing)
        });
        try {
            while (unread.stream().anyMatch(tp -> this.pendingReader.position(tp) < to.get(tp))) {
                if (System.nanoTime() > deadline) {
                    return true; // not read in time: wait for the outcome instead
                }
                for (ConsumerRecord<byte[], byte[]> r : this.pendingReader.poll(Duration.ofMillis(100))) {
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    OpenLedgerWrites range = this.openWrites.get(tp);
                    if (range != null && r.offset() >= range.readTo() && r.offset() < to.getOrDefault(tp, 0L)) {
                        range.add(r);
                        this.openRecordsRead++;
                    }
                }
            }
        }
        catch (InvalidOffsetException ex) {
            // the log no longer has what the range was read from: forget it and wait for the outcome instead
            log.warn("Share outcome ledger '{}': reading its open transactions failed ({}); waiting for them to end",
                    this.topic, ex.toString());
            this.openWrites.clear();
            return true;
        }
        for (TopicPartition tp : unread) {
            this.openWrites.get(tp).readUpTo(to.get(tp)); // markers and skipped records included
        }
        return to.keySet().stream().anyMatch(tp -> mustWaitFor.test(this.openWrites.get(tp)));
    }

    /** @return how many records the reads of open ranges have read so far (for tests of the reuse) */
    long openRecordsRead() {
        synchronized (this.entries) {
            return this.openRecordsRead;
        }
    }

    /** @return the group of an entry's key, or null for a key this ledger did not write */
    static @Nullable String groupOf(String key) {
        int colon = key.indexOf(':');
        try {
            int length = Integer.parseInt(key.substring(0, colon));
            return key.substring(colon + 1, colon + 1 + length);
        }
        catch (RuntimeException ex) {
            return null;
        }
    }

    private KafkaFuture<Map<TopicPartition, ListOffsetsResultInfo>> endOffsets(Set<TopicPartition> partitions,
            IsolationLevel isolation) {
        Map<TopicPartition, OffsetSpec> latest = partitions.stream()
            .collect(Collectors.toMap(tp -> tp, tp -> OffsetSpec.latest()));
        return this.admin.listOffsets(latest, new ListOffsetsOptions(isolation)).all();
    }

    private Map<TopicPartition, Long> await(KafkaFuture<Map<TopicPartition, ListOffsetsResultInfo>> ends,
            long deadline) {
        return offsetsOf(awaitInfo(ends, deadline));
    }

    private static Map<TopicPartition, Long> offsetsOf(Map<TopicPartition, ListOffsetsResultInfo> ends) {
        Map<TopicPartition, Long> offsets = new HashMap<>();
        ends.forEach((tp, info) -> offsets.put(tp, info.offset()));
        return offsets;
    }

    private Map<TopicPartition, ListOffsetsResultInfo> awaitInfo(
            KafkaFuture<Map<TopicPartition, ListOffsetsResultInfo>> ends, long deadline) {
        // rounded up: a wait cut off by the deadline must end at or after it (see catchUp)
        long left = Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime() + 999_999));
        try {
            return ends.get(left, TimeUnit.MILLISECONDS);
        }
        catch (ExecutionException ex) {
            throw new TimeoutException("Share outcome ledger '" + this.topic + "': reading its end offsets failed: "
                    + ex.getCause(), ex.getCause());
        }
        catch (java.util.concurrent.TimeoutException ex) {
            throw new TimeoutException("Share outcome ledger '" + this.topic + "': its end offsets could not be read "
                    + "within " + this.lookupTimeout, ex);
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new InterruptException(ex);
        }
    }

    private void apply(ConsumerRecord<byte[], byte[]> r) {
        if (r.key() == null) {
            return;
        }
        String key = new String(r.key(), StandardCharsets.UTF_8);
        int colon = key.indexOf(':');
        int length;
        try {
            length = Integer.parseInt(key.substring(0, colon));
        }
        catch (RuntimeException ex) {
            log.warn("Share outcome ledger '{}': ignoring an entry with a foreign key '{}' at {}-{}@{}", this.topic,
                    key, r.topic(), r.partition(), r.offset());
            return;
        }
        String group = key.substring(colon + 1, colon + 1 + length);
        String writer = key.substring(colon + 1 + length);
        if (r.value() == null) {
            Map<String, Map<ShareRecordId, AcknowledgeType>> writers = this.entries.get(group);
            if (writers != null) {
                writers.remove(writer);
            }
            return;
        }
        this.entries.computeIfAbsent(group, g -> new HashMap<>())
            .put(writer, decode(new String(r.value(), StandardCharsets.UTF_8)));
    }

    static String key(String groupId, String writer) {
        return groupId.length() + ":" + groupId + writer;
    }

    /** One line per partition: {@code topic TAB partition TAB offsets}, a rejected record's offset prefixed 'r'. */
    static String encode(Map<ShareRecordId, AcknowledgeType> outcomes) {
        Map<String, Map<Long, AcknowledgeType>> byPartition = new TreeMap<>();
        outcomes.forEach((id, type) -> byPartition.computeIfAbsent(id.topic() + '\t' + id.partition(),
                k -> new TreeMap<>()).put(id.offset(), type));
        StringBuilder text = new StringBuilder();
        byPartition.forEach((partition, offsets) -> {
            text.append(partition).append('\t');
            boolean first = true;
            for (Map.Entry<Long, AcknowledgeType> e : offsets.entrySet()) {
                if (!first) {
                    text.append(',');
                }
                first = false;
                if (e.getValue() == AcknowledgeType.REJECT) {
                    text.append(REJECTED);
                }
                text.append(e.getKey());
            }
            text.append('\n');
        });
        return text.toString();
    }

    static Map<ShareRecordId, AcknowledgeType> decode(String text) {
        Map<ShareRecordId, AcknowledgeType> outcomes = new HashMap<>();
        for (String line : text.split("\n")) {
            if (line.isEmpty()) {
                continue;
            }
            String[] parts = line.split("\t");
            String topic = parts[0];
            int partition = Integer.parseInt(parts[1]);
            for (String offset : parts[2].split(",")) {
                boolean rejected = offset.charAt(0) == REJECTED;
                outcomes.put(new ShareRecordId(topic, partition, Long.parseLong(rejected ? offset.substring(1) : offset)),
                        rejected ? AcknowledgeType.REJECT : AcknowledgeType.ACCEPT);
            }
        }
        return outcomes;
    }

    /** Closes the reader and the admin client. */
    @Override
    public void close() {
        synchronized (this.entries) {
            this.reader.close(Duration.ofSeconds(5));
            this.pendingReader.close(Duration.ofSeconds(5));
        }
        this.admin.close(Duration.ofSeconds(5));
    }

    @Override
    public String toString() {
        return "ShareOutcomeLedger[" + this.topic + "]";
    }

    private record StartOffsets(Map<TopicPartition, Long> offsets, long readAtNanos) {
    }

    /**
     * An entry as this process knows it: written through {@code session}, committed content, and the content the
     * session's transaction {@code pendingGeneration} writes (null when none is open).
     */
    private record Written(KafkaTransactionSession session, Map<ShareRecordId, AcknowledgeType> committed,
            @Nullable Map<ShareRecordId, AcknowledgeType> pending, long pendingGeneration) {
    }
}
