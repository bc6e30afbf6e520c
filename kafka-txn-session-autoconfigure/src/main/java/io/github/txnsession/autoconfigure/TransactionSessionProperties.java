package io.github.txnsession.autoconfigure;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;

import org.jspecify.annotations.Nullable;

import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.validation.Errors;
import org.springframework.validation.Validator;

/**
 * Settings of the transaction session pool and its transaction manager, under {@code kafka.txn-session}. Connection
 * settings (bootstrap servers, security, producer tuning) come from {@code spring.kafka.*}; the properties here are
 * what sessions add.
 *
 * <p>The object validates itself when bound: a blank prefix, a pool size below 1, a negative duration, a zero
 * transaction, default or coordinator timeout, or a {@code transactional.id} in {@code properties} stop the
 * application at startup with a message that names the property.
 */
@ConfigurationProperties(TransactionSessionProperties.PREFIX)
public class TransactionSessionProperties implements Validator {

    /** The prefix of these properties. */
    public static final String PREFIX = "kafka.txn-session";

    /** Whether to auto-configure the session pool, the transaction manager and the session-backed producer factory. */
    private boolean enabled = true;

    /**
     * Prefix of the transactional ids: session i of the pool uses prefix + i, the same after every restart. Must be
     * unique per application instance (two instances with one prefix fence each other), unless fleet mode is on
     * (then every instance uses the same prefix and ids prefix + slot + "-" + k). Defaults to
     * spring.kafka.producer.transaction-id-prefix, else to "${spring.application.name}-txn-", else "txn-session-".
     */
    private @Nullable String transactionalIdPrefix;

    /** Maximum number of sessions, i.e. of transactions that can run at the same time. */
    private int poolSize = 8;

    /** How long a transaction waits for a free session when all are in use; 0 fails at once. */
    private Duration acquireTimeout = Duration.ofSeconds(5);

    /**
     * The broker-side transaction timeout (transaction.timeout.ms) of every session. When unset: Kafka's default, or
     * with two-phase commit the broker's transaction.max.timeout.ms (a prepared transaction must outlive a restart).
     */
    private @Nullable Duration transactionTimeout;

    /**
     * Default timeout of Spring transactions run by the transaction manager, when a transaction does not set its own;
     * checked at each send and before commit. None when unset.
     */
    private @Nullable Duration defaultTimeout;

    /**
     * Interval of the background heartbeat that checks an open transaction with its coordinator (it detects a lost or
     * fenced transaction early; it cannot extend the timeout). 0 turns it off.
     */
    private Duration heartbeatInterval = Duration.ZERO;

    /** How long closing a session may take at shutdown. */
    private Duration closeTimeout = Duration.ofSeconds(30);

    /**
     * Whether the application may define ProducerFactory beans that do not write into the sessions (deliberately
     * non-transactional ones). By default startup fails: KafkaTemplate would send outside every transaction.
     */
    private boolean allowNonSessionProducerFactories;

    /** Deadline of one call to the transaction coordinator, retries included; max.block.ms when unset. */
    private @Nullable Duration coordinatorTimeout;

    /**
     * Whether, in Kafka-only mode, the pool ends at startup the transactions a crashed predecessor left open on the
     * ids it has not used yet (fencing it), so that their pending consumer offsets do not stall the restarted
     * consumers until the transaction timeout. Set it to false when prepared transactions of these ids are settled by
     * anything the starter does not see (a two-phase setup of your own built inside other beans).
     */
    private boolean endLeftoversOnStartup = true;

    /** Further Kafka producer properties for the sessions; they override spring.kafka.producer.* and .properties. */
    private Map<String, String> properties = new LinkedHashMap<>();

    /** Fleet mode: instances with identical configuration share transactional ids through Kafka group membership. */
    private final Fleet fleet = new Fleet();

    /** @return the fleet settings ({@code kafka.txn-session.fleet.*}) */
    public Fleet getFleet() {
        return this.fleet;
    }

    /**
     * @return whether to auto-configure the session pool, the transaction manager and the session-backed producer
     *         factory (default true)
     */
    public boolean isEnabled() {
        return this.enabled;
    }

    /**
     * @return whether the application may define ProducerFactory beans that do not write into the sessions (default
     *         false: startup fails)
     */
    public boolean isAllowNonSessionProducerFactories() {
        return this.allowNonSessionProducerFactories;
    }

    /** @return whether the pool ends, at startup, the transactions a predecessor left open on unused ids */
    public boolean isEndLeftoversOnStartup() {
        return this.endLeftoversOnStartup;
    }

    /** @param endLeftoversOnStartup false to leave a predecessor's open transactions to their timeout */
    public void setEndLeftoversOnStartup(boolean endLeftoversOnStartup) {
        this.endLeftoversOnStartup = endLeftoversOnStartup;
    }

    /**
     * @param allowNonSessionProducerFactories true to allow ProducerFactory beans that do not write into the sessions
     *        (deliberately non-transactional ones)
     */
    public void setAllowNonSessionProducerFactories(boolean allowNonSessionProducerFactories) {
        this.allowNonSessionProducerFactories = allowNonSessionProducerFactories;
    }

    /** @param enabled false to turn the auto-configuration of the sessions off */
    public void setEnabled(boolean enabled) {
        this.enabled = enabled;
    }

    /**
     * @return the prefix of the transactional ids (session i uses prefix + i), or null when unset: then
     *         spring.kafka.producer.transaction-id-prefix, else "${spring.application.name}-txn-", else "txn-session-"
     */
    public @Nullable String getTransactionalIdPrefix() {
        return this.transactionalIdPrefix;
    }

    /**
     * @param transactionalIdPrefix the prefix of the transactional ids, unique per application instance and not blank;
     *        null for the default
     */
    public void setTransactionalIdPrefix(@Nullable String transactionalIdPrefix) {
        this.transactionalIdPrefix = transactionalIdPrefix;
    }

    /** @return the maximum number of sessions, i.e. of transactions that can run at the same time (default 8) */
    public int getPoolSize() {
        return this.poolSize;
    }

    /** @param poolSize the maximum number of sessions; at least 1 */
    public void setPoolSize(int poolSize) {
        this.poolSize = poolSize;
    }

    /** @return how long a transaction waits for a free session when all are in use (default 5 s; 0 fails at once) */
    public Duration getAcquireTimeout() {
        return this.acquireTimeout;
    }

    /** @param acquireTimeout how long a transaction waits for a free session; not negative, 0 fails at once */
    public void setAcquireTimeout(Duration acquireTimeout) {
        this.acquireTimeout = acquireTimeout;
    }

    /** @return the broker-side transaction timeout (transaction.timeout.ms) of every session, or null for Kafka's */
    public @Nullable Duration getTransactionTimeout() {
        return this.transactionTimeout;
    }

    /** @param transactionTimeout the broker-side transaction timeout of every session; positive, or null for Kafka's */
    public void setTransactionTimeout(@Nullable Duration transactionTimeout) {
        this.transactionTimeout = transactionTimeout;
    }

    /**
     * @return the timeout of Spring transactions run by the transaction manager that set none of their own, or null
     *         for none
     */
    public @Nullable Duration getDefaultTimeout() {
        return this.defaultTimeout;
    }

    /** @param defaultTimeout the timeout of transactions that set none of their own; positive, or null for none */
    public void setDefaultTimeout(@Nullable Duration defaultTimeout) {
        this.defaultTimeout = defaultTimeout;
    }

    /** @return the interval of the background heartbeat that checks an open transaction (default 0: off) */
    public Duration getHeartbeatInterval() {
        return this.heartbeatInterval;
    }

    /** @param heartbeatInterval the interval of the background heartbeat; not negative, 0 turns it off */
    public void setHeartbeatInterval(Duration heartbeatInterval) {
        this.heartbeatInterval = heartbeatInterval;
    }

    /** @return how long closing a session may take at shutdown (default 30 s) */
    public Duration getCloseTimeout() {
        return this.closeTimeout;
    }

    /** @param closeTimeout how long closing a session may take at shutdown; not negative */
    public void setCloseTimeout(Duration closeTimeout) {
        this.closeTimeout = closeTimeout;
    }

    /**
     * @return the deadline of one call to the transaction coordinator, retries included, or null for max.block.ms
     */
    public @Nullable Duration getCoordinatorTimeout() {
        return this.coordinatorTimeout;
    }

    /** @param coordinatorTimeout the deadline of one coordinator call; positive, or null for max.block.ms */
    public void setCoordinatorTimeout(@Nullable Duration coordinatorTimeout) {
        this.coordinatorTimeout = coordinatorTimeout;
    }

    /**
     * @return further Kafka producer properties for the sessions, which override spring.kafka.producer.* and
     *         .properties (the map itself, not a copy)
     */
    public Map<String, String> getProperties() {
        return this.properties;
    }

    /** @param properties further Kafka producer properties for the sessions; transactional.id must not be among them */
    public void setProperties(Map<String, String> properties) {
        this.properties = properties;
    }

    @Override
    public boolean supports(Class<?> clazz) {
        return TransactionSessionProperties.class.isAssignableFrom(clazz);
    }

    @Override
    public void validate(Object target, Errors errors) {
        TransactionSessionProperties p = (TransactionSessionProperties) target;
        if (p.transactionalIdPrefix != null && p.transactionalIdPrefix.isBlank()) {
            errors.rejectValue("transactionalIdPrefix", "empty", PREFIX + ".transactional-id-prefix must not be "
                    + "empty: the transactional ids are this prefix followed by a number. Set it to a name unique to "
                    + "this application instance, e.g. orders-service-1-, or remove it to use the default.");
        }
        if (p.poolSize < 1) {
            errors.rejectValue("poolSize", "min", PREFIX + ".pool-size must be at least 1 (it is the number of "
                    + "transactions that can run at once), was " + p.poolSize + ".");
        }
        rejectNegative(errors, "acquireTimeout", "acquire-timeout", p.acquireTimeout);
        rejectNegative(errors, "heartbeatInterval", "heartbeat-interval", p.heartbeatInterval);
        rejectNegative(errors, "closeTimeout", "close-timeout", p.closeTimeout);
        rejectNotPositive(errors, "transactionTimeout", "transaction-timeout", p.transactionTimeout);
        rejectNotPositive(errors, "defaultTimeout", "default-timeout", p.defaultTimeout);
        rejectNotPositive(errors, "coordinatorTimeout", "coordinator-timeout", p.coordinatorTimeout);
        Fleet f = p.fleet;
        if (f.enabled) {
            if (f.slots < 1 || f.slots > 10_000) {
                errors.rejectValue("fleet.slots", "range", PREFIX + ".fleet.slots must be between 1 and 10000 (at "
                        + "least the most instances you will run), was " + f.slots + ".");
            }
            if (f.sessionsPerSlot < 1 || f.sessionsPerSlot > 1_000) {
                errors.rejectValue("fleet.sessionsPerSlot", "range", PREFIX + ".fleet.sessions-per-slot must be "
                        + "between 1 and 1000, was " + f.sessionsPerSlot + ".");
            }
            if (f.sessionTimeout.toMillis() < 1000) {
                errors.rejectValue("fleet.sessionTimeout", "min", PREFIX + ".fleet.session-timeout must be at least "
                        + "1s (brokers allow 6s to 30min by default), was " + f.sessionTimeout + ".");
            }
        }
        if (p.properties.containsKey("transactional.id")) {
            errors.rejectValue("properties", "txnId", PREFIX + ".properties.transactional.id must not be set: the "
                    + "pool gives each session its id. Set " + PREFIX + ".transactional-id-prefix instead.");
        }
    }

    private static void rejectNegative(Errors errors, String field, String property, @Nullable Duration value) {
        if (value != null && value.isNegative()) {
            errors.rejectValue(field, "negative", PREFIX + "." + property + " must not be negative, was " + value);
        }
    }

    private static void rejectNotPositive(Errors errors, String field, String property, @Nullable Duration value) {
        if (value != null && (value.isNegative() || value.isZero())) {
            errors.rejectValue(field, "notPositive", PREFIX + "." + property + " must be positive when set, was "
                    + value);
        }
    }

    /**
     * Fleet mode ({@code kafka.txn-session.fleet.*}): every instance of the application, with identical
     * configuration, joins one Kafka consumer group over a slots topic; each instance lends only the transactional ids
     * of the slots it owns ({@code prefix + slot + "-" + k}), and a dead instance's slots are settled by a survivor
     * within about the session timeout. Replaces {@code pool-size}: an instance has owned slots x sessions-per-slot
     * sessions.
     */
    public static class Fleet {

        /** Whether the pool runs in fleet mode. */
        private boolean enabled;

        /** Number of slots, the same on every instance: at least the most instances you will run. */
        private int slots = 8;

        /** Transactional ids (sessions) per slot. */
        private int sessionsPerSlot = 2;

        /** The consumer group of the fleet; defaults to the transactional id prefix + "fleet". */
        private @Nullable String groupId;

        /** The slots topic; defaults to the transactional id prefix + "fleet-slots". Created if missing. */
        private @Nullable String slotsTopic;

        /** How long an instance that stopped answering keeps its slots (the group's session timeout). */
        private Duration sessionTimeout = Duration.ofSeconds(10);

        /** @return whether the pool runs in fleet mode (default false) */
        public boolean isEnabled() {
            return this.enabled;
        }

        /** @param enabled whether the pool runs in fleet mode */
        public void setEnabled(boolean enabled) {
            this.enabled = enabled;
        }

        /** @return the number of slots (default 8) */
        public int getSlots() {
            return this.slots;
        }

        /** @param slots the number of slots, the same on every instance */
        public void setSlots(int slots) {
            this.slots = slots;
        }

        /** @return transactional ids per slot (default 2) */
        public int getSessionsPerSlot() {
            return this.sessionsPerSlot;
        }

        /** @param sessionsPerSlot transactional ids per slot */
        public void setSessionsPerSlot(int sessionsPerSlot) {
            this.sessionsPerSlot = sessionsPerSlot;
        }

        /** @return the fleet's consumer group, or null for the default */
        public @Nullable String getGroupId() {
            return this.groupId;
        }

        /** @param groupId the fleet's consumer group */
        public void setGroupId(@Nullable String groupId) {
            this.groupId = groupId;
        }

        /** @return the slots topic, or null for the default */
        public @Nullable String getSlotsTopic() {
            return this.slotsTopic;
        }

        /** @param slotsTopic the slots topic */
        public void setSlotsTopic(@Nullable String slotsTopic) {
            this.slotsTopic = slotsTopic;
        }

        /** @return the group session timeout (default 10 s) */
        public Duration getSessionTimeout() {
            return this.sessionTimeout;
        }

        /** @param sessionTimeout the group session timeout */
        public void setSessionTimeout(Duration sessionTimeout) {
            this.sessionTimeout = sessionTimeout;
        }
    }
}
