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
 * <p>The object validates itself when bound: an empty prefix, a pool size below 1 or a negative duration stop the
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
     * unique per application instance (two instances with one prefix fence each other). Defaults to
     * spring.kafka.producer.transaction-id-prefix, else to "${spring.application.name}-txn-", else "txn-session-".
     */
    private @Nullable String transactionalIdPrefix;

    /** Maximum number of sessions, i.e. of transactions that can run at the same time. */
    private int poolSize = 8;

    /** How long a transaction waits for a free session when all are in use; 0 fails at once. */
    private Duration acquireTimeout = Duration.ofSeconds(5);

    /** The broker-side transaction timeout (transaction.timeout.ms) of every session; Kafka's default when unset. */
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

    /** Further Kafka producer properties for the sessions; they override spring.kafka.producer.* and .properties. */
    private Map<String, String> properties = new LinkedHashMap<>();

    public boolean isEnabled() {
        return this.enabled;
    }

    public boolean isAllowNonSessionProducerFactories() {
        return this.allowNonSessionProducerFactories;
    }

    public void setAllowNonSessionProducerFactories(boolean allowNonSessionProducerFactories) {
        this.allowNonSessionProducerFactories = allowNonSessionProducerFactories;
    }

    public void setEnabled(boolean enabled) {
        this.enabled = enabled;
    }

    public @Nullable String getTransactionalIdPrefix() {
        return this.transactionalIdPrefix;
    }

    public void setTransactionalIdPrefix(@Nullable String transactionalIdPrefix) {
        this.transactionalIdPrefix = transactionalIdPrefix;
    }

    public int getPoolSize() {
        return this.poolSize;
    }

    public void setPoolSize(int poolSize) {
        this.poolSize = poolSize;
    }

    public Duration getAcquireTimeout() {
        return this.acquireTimeout;
    }

    public void setAcquireTimeout(Duration acquireTimeout) {
        this.acquireTimeout = acquireTimeout;
    }

    public @Nullable Duration getTransactionTimeout() {
        return this.transactionTimeout;
    }

    public void setTransactionTimeout(@Nullable Duration transactionTimeout) {
        this.transactionTimeout = transactionTimeout;
    }

    public @Nullable Duration getDefaultTimeout() {
        return this.defaultTimeout;
    }

    public void setDefaultTimeout(@Nullable Duration defaultTimeout) {
        this.defaultTimeout = defaultTimeout;
    }

    public Duration getHeartbeatInterval() {
        return this.heartbeatInterval;
    }

    public void setHeartbeatInterval(Duration heartbeatInterval) {
        this.heartbeatInterval = heartbeatInterval;
    }

    public Duration getCloseTimeout() {
        return this.closeTimeout;
    }

    public void setCloseTimeout(Duration closeTimeout) {
        this.closeTimeout = closeTimeout;
    }

    public @Nullable Duration getCoordinatorTimeout() {
        return this.coordinatorTimeout;
    }

    public void setCoordinatorTimeout(@Nullable Duration coordinatorTimeout) {
        this.coordinatorTimeout = coordinatorTimeout;
    }

    public Map<String, String> getProperties() {
        return this.properties;
    }

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
}
