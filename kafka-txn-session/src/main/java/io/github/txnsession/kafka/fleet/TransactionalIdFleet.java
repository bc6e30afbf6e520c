package io.github.txnsession.kafka.fleet;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Pattern;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Shares a bounded set of transactional ids among the instances of one application through Kafka's own group
 * membership, so that instances with <em>identical configuration</em> never use the same id at the same time and a
 * dead instance's ids are settled by a survivor within seconds.
 *
 * <h2>How</h2>
 * The fleet has {@code slots} slots; slot {@code s} owns the ids {@code prefix + s + "-" + k},
 * {@code k < sessionsPerSlot}. The slots are the partitions of a <em>slots topic</em> (created on first start,
 * nothing is ever written to it), and every instance is a member of one consumer group subscribed to it (classic
 * protocol, {@link CooperativeStickyAssignor}): Kafka's group coordinator assigns each partition to one member, so
 * each slot has at most one owner per group generation. A membership thread polls the group and tells the
 * {@link SlotListener}: a slot that arrives is settled by the listener (its ids initialized, which aborts what a
 * dead owner left open and fences a paused one) before its ids are used; a slot that leaves is given up by the
 * listener (transactions finished, sessions closed) before the group hands it to another instance, because the
 * cooperative protocol revokes a partition from its owner in one rebalance and assigns it in the next.
 *
 * <h2>Guarantees</h2>
 * <ul>
 * <li>Bounded footprint: the only transactional ids are {@link #transactionalIds()}, {@code slots x sessionsPerSlot},
 * whatever the scaling and however often instances restart under new names.</li>
 * <li>Among live members, a slot is owned by one instance at a time; an instance that stops polling (a kill, a pause,
 * a network partition) loses its slots after {@code sessionTimeout}, and the new owner's initialization of the ids
 * fences it: nothing it sends or commits afterwards on those ids becomes visible, and its next call finds out. The
 * listener initializes ids only when the fleet calls it (at assignment, or after {@link #requestSettlement} confirmed
 * ownership with the coordinator), never on its own.</li>
 * <li>A dead instance's open transactions are aborted when a survivor settles the slot: about {@code sessionTimeout}
 * plus one rebalance after the death, instead of {@code transaction.timeout.ms}.</li>
 * <li>{@link #ownedSlots()} lists only slots whose settlement ({@link SlotListener#slotAssigned}) returned normally;
 * a failed settlement is retried every {@code retryBackoff} until it succeeds or the slot leaves.</li>
 * </ul>
 *
 * <h2>Not guaranteed</h2>
 * <ul>
 * <li>No id is lent while its slot is between owners (a scale-up moves slots in two rebalances); an instance that
 * owns no slot has no transactional id to use. Give the fleet at least as many slots as instances you will run.</li>
 * <li>Instances must agree on the prefix, the slot count and the sessions per slot; a slots topic with another
 * partition count is refused at {@link Builder#start()}.</li>
 * <li>The fleet does not settle two-phase commit decisions itself: the listener does (the Spring starter completes
 * decision rows from its log before initializing an id).</li>
 * <li>An initialization already on its way when the instance pauses can land after the new owner's: then the new
 * owner is fenced, finds out at its next call and settles the slot again; nothing is lost or duplicated (a fenced
 * transaction aborts), but the promise "one live user per id" is then broken for that moment.</li>
 * <li>The slots topic is created with the broker's default replication factor; the fleet needs CREATE (or an
 * existing topic) and DESCRIBE on it, and READ on its group.</li>
 * <li>Brokers enforce {@code group.min.session.timeout.ms} (6 s by default) and {@code group.max.session.timeout.ms};
 * a session timeout outside them fails the membership thread ({@link #failure()}).</li>
 * </ul>
 */
public final class TransactionalIdFleet implements AutoCloseable {

    private static final Logger log = LoggerFactory.getLogger(TransactionalIdFleet.class);

    private static final Pattern TOPIC_NAME = Pattern.compile("[a-zA-Z0-9._-]+");

    private final String prefix;
    private final int slots;
    private final int sessionsPerSlot;
    private final String groupId;
    private final String slotsTopic;
    private final Duration retryBackoff;
    private final SlotListener listener;
    private final KafkaConsumer<byte[], byte[]> consumer;
    private final Thread thread;
    /** slots assigned to this instance and settled by the listener */
    private final Set<Integer> settled = ConcurrentHashMap.newKeySet();
    /** slots assigned whose settlement failed, with the nano time of the next attempt; membership thread only */
    private final Map<Integer, Long> unsettled = new HashMap<>();
    private final Object monitor = new Object();
    /** settled slots whose listener asked to be settled again ({@link #requestSettlement}) */
    private final Set<Integer> resettle = ConcurrentHashMap.newKeySet();
    /** membership thread only: no settling again before this nano time (back-off after a failure) */
    private long nextResettle = System.nanoTime();
    private volatile boolean closing;
    private volatile @Nullable Throwable failure;
    private volatile long rebalances;

    private TransactionalIdFleet(Builder b, SlotListener listener) {
        this.prefix = b.prefix;
        this.slots = b.slots;
        this.sessionsPerSlot = b.sessionsPerSlot;
        this.groupId = b.groupId != null ? b.groupId : defaultGroupId(b.prefix);
        this.slotsTopic = b.slotsTopic != null ? b.slotsTopic : defaultSlotsTopic(b.prefix);
        this.retryBackoff = b.retryBackoff;
        this.listener = listener;
        ensureSlotsTopic(b);
        this.consumer = new KafkaConsumer<>(consumerConfigs(b), new ByteArrayDeserializer(),
                new ByteArrayDeserializer());
        this.thread = new Thread(this::run, "txn-fleet-" + this.groupId);
        this.thread.setDaemon(true);
    }

    /**
     * @param transactionalIdPrefix the prefix of every id of the fleet, the same on every instance
     * @param clientConfigs connection settings ({@code bootstrap.servers}, security); other keys are ignored, a
     *        consumer and an admin client take the ones they know
     * @return a builder; set the listener and call {@link Builder#start()}
     */
    public static Builder builder(String transactionalIdPrefix, Map<String, ?> clientConfigs) {
        return new Builder(transactionalIdPrefix, clientConfigs);
    }

    /**
     * @param prefix a transactional id prefix
     * @return the default group id of a fleet with that prefix: {@code prefix + "fleet"}
     */
    public static String defaultGroupId(String prefix) {
        return prefix + "fleet";
    }

    /**
     * @param prefix a transactional id prefix
     * @return the default slots topic of a fleet with that prefix: {@code prefix + "fleet-slots"}, with characters a
     *         topic name cannot have replaced by {@code _}
     */
    public static String defaultSlotsTopic(String prefix) {
        return (prefix + "fleet-slots").replaceAll("[^a-zA-Z0-9._-]", "_");
    }

    /** @return the transactional id prefix */
    public String transactionalIdPrefix() {
        return this.prefix;
    }

    /** @return the number of slots (partitions of the slots topic) */
    public int slots() {
        return this.slots;
    }

    /** @return the transactional ids per slot */
    public int sessionsPerSlot() {
        return this.sessionsPerSlot;
    }

    /** @return the consumer group the instances share */
    public String groupId() {
        return this.groupId;
    }

    /** @return the slots topic */
    public String slotsTopic() {
        return this.slotsTopic;
    }

    /**
     * @param index a slot number, {@code 0 <= index < slots()}
     * @return the slot with its ids
     */
    public FleetSlot slot(int index) {
        Objects.checkIndex(index, this.slots);
        return FleetSlot.of(this.prefix, index, this.sessionsPerSlot);
    }

    /** @return every transactional id the fleet can ever use, {@code slots x sessionsPerSlot} */
    public List<String> transactionalIds() {
        List<String> ids = new ArrayList<>(this.slots * this.sessionsPerSlot);
        for (int s = 0; s < this.slots; s++) {
            ids.addAll(slot(s).transactionalIds());
        }
        return ids;
    }

    /** @return the slots this instance owns and has settled, in order */
    public Set<Integer> ownedSlots() {
        return new TreeSet<>(this.settled);
    }

    /** @return how many rebalances this instance has taken part in */
    public long rebalances() {
        return this.rebalances;
    }

    /** @return what stopped the membership thread, or null while it runs (or after a clean close) */
    public @Nullable Throwable failure() {
        return this.failure;
    }

    /** @return whether the membership thread runs */
    public boolean isRunning() {
        return this.thread.isAlive() && !this.closing;
    }

    /**
     * Waits until this instance owns at least one settled slot.
     *
     * @param timeout how long to wait
     * @return true if it does; false after the timeout (no slot free: more instances than slots, or the group still
     *         rebalancing)
     * @throws IllegalStateException if the membership thread failed or the fleet is closed
     */
    public boolean awaitSlots(Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        synchronized (this.monitor) {
            while (this.settled.isEmpty()) {
                ensureRunning();
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                try {
                    TimeUnit.NANOSECONDS.timedWait(this.monitor, Math.min(left, TimeUnit.MILLISECONDS.toNanos(200)));
                }
                catch (InterruptedException ex) {
                    Thread.currentThread().interrupt();
                    return !this.settled.isEmpty();
                }
            }
            return true;
        }
    }

    private void ensureRunning() {
        Throwable t = this.failure;
        if (t != null) {
            throw new IllegalStateException("The membership thread of fleet '" + this.groupId + "' failed: " + t, t);
        }
        if (this.closing) {
            throw new IllegalStateException("Fleet '" + this.groupId + "' is closed");
        }
    }

    private void start() {
        this.thread.start();
        log.info("Fleet '{}' started: {} slot(s) x {} session(s), slots topic '{}'", this.groupId, this.slots,
                this.sessionsPerSlot, this.slotsTopic);
    }

    private void run() {
        try {
            this.consumer.subscribe(List.of(this.slotsTopic), new Rebalance());
            while (!this.closing) {
                try {
                    this.consumer.poll(Duration.ofMillis(100));
                }
                catch (WakeupException ex) {
                    if (this.closing) {
                        break;
                    }
                }
                retryUnsettled();
                settleAgainIfStillOwned();
            }
            // give the slots up while the member still heartbeats: nobody else gets them until it leaves the group
            giveUpAll(false);
        }
        catch (Throwable ex) {
            if (!this.closing) {
                this.failure = ex;
                log.error("Fleet '{}': the membership thread failed; this instance gives up its slots", this.groupId,
                        ex);
            }
        }
        finally {
            try {
                this.consumer.close(Duration.ofSeconds(30)); // leaves the group: owned slots are revoked first
            }
            catch (RuntimeException ex) {
                log.warn("Fleet '{}': closing the membership consumer failed: {}", this.groupId, ex.toString());
            }
            giveUpAll(true); // left only if the thread failed: another instance may own them already
            synchronized (this.monitor) {
                this.monitor.notifyAll();
            }
        }
    }

    /**
     * Settles again the slots whose settlement failed, once their back-off passed, and only after a commit of their
     * partitions proved this instance still owns them (as {@link #requestSettlement} does): a member that lost the slot
     * without noticing yet (its link to the group coordinator broken, say) must not initialize, or fence, ids that the
     * new owner uses.
     */
    private void retryUnsettled() {
        if (this.unsettled.isEmpty()) {
            return;
        }
        long now = System.nanoTime();
        List<Integer> due = new ArrayList<>();
        for (Map.Entry<Integer, Long> e : this.unsettled.entrySet()) {
            if (now - e.getValue() >= 0) {
                due.add(e.getKey());
            }
        }
        for (Integer s : due) {
            if (this.closing) {
                return;
            }
            // proved right before each slot's settlement: a settlement that blocks must not stand in for the next
            if (this.unsettled.containsKey(s) && provesOwnership(s)) {
                settle(s);
            }
            else if (this.unsettled.containsKey(s)) {
                this.unsettled.put(s, System.nanoTime() + this.retryBackoff.toNanos());
            }
        }
    }

    /**
     * @return whether a commit of the slot's partition to the group coordinator succeeded, which it does only for a
     *         member of the group's current generation
     */
    private boolean provesOwnership(int slot) {
        try {
            this.consumer.commitSync(Map.of(new TopicPartition(this.slotsTopic, slot), new OffsetAndMetadata(0)),
                    Duration.ofSeconds(5));
            return true;
        }
        catch (RuntimeException ex) {
            log.info("Fleet '{}': could not confirm the ownership of slot {} ({}); trying again in {} ms",
                    this.groupId, slot, ex.toString(), this.retryBackoff.toMillis());
            return false;
        }
    }

    private void settle(int index) {
        FleetSlot slot = slot(index);
        try {
            this.listener.slotAssigned(slot);
        }
        catch (RuntimeException ex) {
            this.unsettled.put(index, System.nanoTime() + this.retryBackoff.toNanos());
            log.warn("Fleet '{}': settling slot {} failed ({}); its ids stay unused, retrying in {} ms", this.groupId,
                    index, ex.toString(), this.retryBackoff.toMillis());
            return;
        }
        this.unsettled.remove(index);
        this.settled.add(index);
        log.info("Fleet '{}': owns slot {} ({})", this.groupId, index, slot.transactionalIds());
        synchronized (this.monitor) {
            this.monitor.notifyAll();
        }
    }

    private void giveUpAll(boolean lost) {
        Set<Integer> all = new TreeSet<>(this.settled);
        all.addAll(this.unsettled.keySet());
        giveUp(all, lost);
    }

    private void giveUp(Collection<Integer> indexes, boolean lost) {
        List<FleetSlot> leaving = new ArrayList<>();
        for (int index : indexes) {
            boolean wasSettled = this.settled.remove(index);
            // told even when its settlement failed: the listener may have set up part of the slot
            if (this.unsettled.remove(index) != null || wasSettled) {
                leaving.add(slot(index));
            }
            this.resettle.remove(index);
        }
        if (leaving.isEmpty()) {
            return;
        }
        try {
            this.listener.slotsRevoked(leaving, lost);
        }
        catch (RuntimeException ex) {
            log.warn("Fleet '{}': the listener failed to give up slots {}: {} (the next owner's initialization fences "
                    + "whatever it still uses)", this.groupId, indexes, ex.toString());
        }
        log.info("Fleet '{}': gave up slots {}{}", this.groupId, indexes, lost ? " (membership lost)" : "");
    }

    /**
     * Asks for {@link SlotListener#slotAssigned} to run again for a slot this instance owns (a session of the slot was
     * closed, say, and its id must be initialized again). It runs on the membership thread, only after a commit of the
     * slot's partition to the group coordinator succeeded, which proves that this instance is still the slot's owner
     * in the group's current generation; a paused instance that lost the slot without knowing it yet finds out
     * instead (the request is then dropped with the slot).
     *
     * @param slot the slot to settle again; ignored if this instance does not own it
     */
    public void requestSettlement(int slot) {
        if (this.settled.contains(slot)) {
            this.resettle.add(slot);
        }
    }

    private void settleAgainIfStillOwned() {
        if (this.resettle.isEmpty() || this.closing || System.nanoTime() - this.nextResettle < 0) {
            return;
        }
        for (Integer s : new ArrayList<>(this.resettle)) {
            if (this.closing) {
                return;
            }
            if (!this.settled.contains(s)) {
                this.resettle.remove(s);
                continue;
            }
            // the coordinator accepts the commit only from a member of the current generation; proved right before
            // each slot, so that a settlement that blocked does not stand in for the next one
            if (!provesOwnership(s)) {
                this.nextResettle = System.nanoTime() + this.retryBackoff.toNanos();
                return;
            }
            this.resettle.remove(s);
            try {
                this.listener.slotAssigned(slot(s));
                log.info("Fleet '{}': settled slot {} again (ownership confirmed)", this.groupId, s);
            }
            catch (RuntimeException ex) {
                this.resettle.add(s);
                this.nextResettle = System.nanoTime() + this.retryBackoff.toNanos();
                log.warn("Fleet '{}': settling slot {} again failed ({}); retrying in {} ms", this.groupId, s,
                        ex.toString(), this.retryBackoff.toMillis());
            }
        }
    }

    /**
     * Leaves the group: every owned slot is given up through the listener first, while the member still heartbeats
     * (so that no other instance gets a slot before this one stopped using it), then the membership thread ends.
     * Waits up to 2 min. Idempotent.
     */
    @Override
    public void close() {
        this.closing = true;
        this.consumer.wakeup();
        if (Thread.currentThread() != this.thread) {
            try {
                this.thread.join(Duration.ofMinutes(2).toMillis());
            }
            catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
            }
        }
    }

    @Override
    public String toString() {
        return "TransactionalIdFleet[" + this.groupId + ", " + this.slots + " slots, owned " + ownedSlots() + "]";
    }

    private void ensureSlotsTopic(Builder b) {
        Map<String, Object> adminConfigs = known(b.clientConfigs, AdminClientConfig.configNames());
        try (Admin admin = Admin.create(adminConfigs)) {
            try {
                admin.createTopics(List.of(new NewTopic(this.slotsTopic, Optional.of(this.slots), Optional.empty())))
                        .all().get(30, TimeUnit.SECONDS);
                log.info("Fleet '{}': created slots topic '{}' with {} partitions", this.groupId, this.slotsTopic,
                        this.slots);
                return;
            }
            catch (ExecutionException ex) {
                if (!(ex.getCause() instanceof TopicExistsException)) {
                    throw new IllegalStateException("Fleet '" + this.groupId + "': could not create its slots topic '"
                            + this.slotsTopic + "': " + ex.getCause(), ex.getCause());
                }
            }
            TopicDescription topic = admin.describeTopics(List.of(this.slotsTopic)).allTopicNames()
                    .get(30, TimeUnit.SECONDS).get(this.slotsTopic);
            int partitions = topic.partitions().size();
            if (partitions != this.slots) {
                throw new IllegalStateException("Fleet '" + this.groupId + "': its slots topic '" + this.slotsTopic
                        + "' has " + partitions + " partitions but this instance is configured with " + this.slots
                        + " slots. Every instance of the fleet must use the same slot count: set it to " + partitions
                        + ", or stop every instance and delete the topic to change it (the ids of removed slots "
                        + "must have no open transaction).");
            }
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("Interrupted while checking the slots topic '" + this.slotsTopic + "'", ex);
        }
        catch (ExecutionException | TimeoutException ex) {
            throw new IllegalStateException("Fleet '" + this.groupId + "': could not check its slots topic '"
                    + this.slotsTopic + "': " + ex, ex);
        }
    }

    private Map<String, Object> consumerConfigs(Builder b) {
        Map<String, Object> configs = known(b.clientConfigs, ConsumerConfig.configNames());
        configs.put(ConsumerConfig.GROUP_ID_CONFIG, this.groupId);
        configs.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        configs.remove(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG);
        configs.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
        configs.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, (int) b.sessionTimeout.toMillis());
        configs.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG,
                (int) Math.max(100, b.sessionTimeout.toMillis() / 5));
        configs.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        // the rebalance timeout: how long settling and giving up slots may take inside a rebalance
        configs.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, 600_000);
        configs.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "latest");
        configs.put(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, false);
        configs.putIfAbsent(ConsumerConfig.CLIENT_ID_CONFIG, this.groupId + "-member");
        return configs;
    }

    private static Map<String, Object> known(Map<String, ?> configs, Set<String> names) {
        Map<String, Object> known = new HashMap<>();
        configs.forEach((k, v) -> {
            if (names.contains(k) && v != null) {
                known.put(k, v);
            }
        });
        return known;
    }

    /** Runs on the membership thread, inside {@code poll}. */
    private final class Rebalance implements ConsumerRebalanceListener {

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            TransactionalIdFleet.this.rebalances++;
            giveUp(partitions.stream().map(TopicPartition::partition).toList(), false);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            TransactionalIdFleet.this.rebalances++;
            giveUp(partitions.stream().map(TopicPartition::partition).toList(), true);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            TransactionalIdFleet.this.rebalances++;
            for (TopicPartition tp : partitions) {
                if (tp.partition() < TransactionalIdFleet.this.slots) {
                    settle(tp.partition());
                }
            }
        }
    }

    /**
     * Settings of a fleet. Every instance must use the same prefix, slots, sessions per slot, group and topic.
     */
    public static final class Builder {

        private final String prefix;
        private final Map<String, ?> clientConfigs;
        private int slots = 8;
        private int sessionsPerSlot = 1;
        private @Nullable String groupId;
        private @Nullable String slotsTopic;
        private Duration sessionTimeout = Duration.ofSeconds(10);
        private Duration retryBackoff = Duration.ofSeconds(2);
        private @Nullable SlotListener listener;

        private Builder(String prefix, Map<String, ?> clientConfigs) {
            Objects.requireNonNull(prefix, "transactionalIdPrefix");
            if (prefix.isBlank()) {
                throw new IllegalArgumentException("transactionalIdPrefix must not be blank: every id of the fleet "
                        + "is the prefix followed by the slot and session number");
            }
            this.prefix = prefix;
            this.clientConfigs = Map.copyOf(Objects.requireNonNull(clientConfigs, "clientConfigs"));
            if (!clientConfigs.containsKey(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG)) {
                throw new IllegalArgumentException("clientConfigs must contain bootstrap.servers");
            }
        }

        /**
         * @param slots the number of slots, at least 1 (default 8): at least the most instances you will run; each
         *        instance can use only the ids of the slots it owns
         * @return this builder
         */
        public Builder slots(int slots) {
            if (slots < 1 || slots > 10_000) {
                throw new IllegalArgumentException("slots must be between 1 and 10000, was " + slots);
            }
            this.slots = slots;
            return this;
        }

        /**
         * @param sessionsPerSlot transactional ids per slot, at least 1 (default 1)
         * @return this builder
         */
        public Builder sessionsPerSlot(int sessionsPerSlot) {
            if (sessionsPerSlot < 1 || sessionsPerSlot > 1_000) {
                throw new IllegalArgumentException("sessionsPerSlot must be between 1 and 1000, was " + sessionsPerSlot);
            }
            this.sessionsPerSlot = sessionsPerSlot;
            return this;
        }

        /**
         * @param groupId the consumer group of the fleet (default {@code prefix + "fleet"})
         * @return this builder
         */
        public Builder groupId(String groupId) {
            if (Objects.requireNonNull(groupId, "groupId").isBlank()) {
                throw new IllegalArgumentException("groupId must not be blank");
            }
            this.groupId = groupId;
            return this;
        }

        /**
         * @param slotsTopic the slots topic (default {@code prefix + "fleet-slots"}); created with {@code slots}
         *        partitions if missing
         * @return this builder
         */
        public Builder slotsTopic(String slotsTopic) {
            if (!TOPIC_NAME.matcher(Objects.requireNonNull(slotsTopic, "slotsTopic")).matches()
                    || slotsTopic.length() > 249) {
                throw new IllegalArgumentException("slotsTopic '" + slotsTopic + "' is not a valid topic name "
                        + "(letters, digits, '.', '_', '-'; at most 249 characters)");
            }
            this.slotsTopic = slotsTopic;
            return this;
        }

        /**
         * @param sessionTimeout how long an instance that stopped polling keeps its slots (default 10 s; brokers
         *        allow 6 s to 30 min by default): the time until a dead instance's transactions are aborted
         * @return this builder
         */
        public Builder sessionTimeout(Duration sessionTimeout) {
            if (Objects.requireNonNull(sessionTimeout, "sessionTimeout").toMillis() < 1000
                    || sessionTimeout.toMillis() > Integer.MAX_VALUE) {
                throw new IllegalArgumentException("sessionTimeout must be at least 1 s, was " + sessionTimeout);
            }
            this.sessionTimeout = sessionTimeout;
            return this;
        }

        /**
         * @param retryBackoff how long a slot whose settlement failed waits before it is tried again (default 2 s)
         * @return this builder
         */
        public Builder retryBackoff(Duration retryBackoff) {
            if (Objects.requireNonNull(retryBackoff, "retryBackoff").isNegative()) {
                throw new IllegalArgumentException("retryBackoff must not be negative, was " + retryBackoff);
            }
            this.retryBackoff = retryBackoff;
            return this;
        }

        /**
         * @param listener settles slots that arrive and gives up slots that leave (required)
         * @return this builder
         */
        public Builder listener(SlotListener listener) {
            this.listener = Objects.requireNonNull(listener, "listener");
            return this;
        }

        /**
         * Creates the slots topic if it is missing (or checks its partition count), joins the group and starts the
         * membership thread. Slots arrive asynchronously: see {@link TransactionalIdFleet#awaitSlots}.
         *
         * @return the running fleet; close it to leave the group
         * @throws IllegalStateException if the slots topic cannot be created or has another partition count
         */
        public TransactionalIdFleet start() {
            SlotListener l = this.listener;
            if (l == null) {
                throw new IllegalStateException("Set a SlotListener (builder.listener(...)) before start(): it settles "
                        + "the ids of each slot this instance receives");
            }
            TransactionalIdFleet fleet = new TransactionalIdFleet(this, l);
            fleet.start();
            return fleet;
        }
    }
}
