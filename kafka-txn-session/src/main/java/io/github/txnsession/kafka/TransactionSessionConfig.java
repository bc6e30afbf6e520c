package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.jspecify.annotations.Nullable;

/**
 * The validated configuration of a {@link TransactionSession}.
 *
 * <p>Configs are Kafka producer configs. {@code bootstrap.servers} and {@code transactional.id} are required; security
 * settings and tuning (batching, compression, {@code transaction.timeout.ms}, ...) pass through to the session's
 * producer. Serializers are not taken: each {@link SessionProducer} has its own. Keys that belong to the session
 * alone start with {@value #PREFIX}:
 * <ul>
 * <li>{@value #HEARTBEAT_INTERVAL_MS}: when positive, a background heartbeat checks the open transaction at this
 * interval (default 0 = off);</li>
 * <li>{@value #CLOSE_TIMEOUT_MS}: how long {@link TransactionSession#close()} waits (default 30000);</li>
 * <li>{@value #COORDINATOR_TIMEOUT_MS}: deadline of a call to the transaction coordinator, including retries
 * (default {@code max.block.ms}, 60000);</li>
 * <li>{@value #AWAIT_TRANSACTION_END}: {@code auto} (default), {@code true} or {@code false}. When on, a transaction's
 * first write within 1 ms (2 ms when it is the consumer offsets) of the session's previous commit or abort waits
 * (about 10 ms at most, asking the coordinator) until the coordinator has finished that end: a write that met the
 * unfinished end would be retried only after the brokers' back-off ({@code add.partitions.to.txn.retry.backoff.ms},
 * 20 ms by default; with transaction version 1 the producer's {@code retry.backoff.ms}, capped at 20 ms there; offsets
 * after the producer's {@code retry.backoff.ms}). {@code auto} turns it on when that back-off is above
 * 2 ms or cannot be read, as {@code initialize()} finds out; a shorter back-off costs less than the wait.</li>
 * </ul>
 */
public final class TransactionSessionConfig {

    /** Prefix of the keys that belong to the session, not to Kafka. */
    public static final String PREFIX = "session.";
    /** Background heartbeat interval in ms; 0 turns it off. */
    public static final String HEARTBEAT_INTERVAL_MS = "session.heartbeat.interval.ms";
    /** How long close() may take in ms. */
    public static final String CLOSE_TIMEOUT_MS = "session.close.timeout.ms";
    /** Deadline of one coordinator call in ms (retries included). */
    public static final String COORDINATOR_TIMEOUT_MS = "session.coordinator.timeout.ms";
    /** Whether a transaction's first write waits for the coordinator to finish the previous end (auto, true, false). */
    public static final String AWAIT_TRANSACTION_END = "session.await-transaction-end";

    private final String transactionalId;
    private final Map<String, Object> producerConfigs;
    private final Map<String, Object> clientConfigs;
    private final Duration heartbeatInterval;
    private final Duration closeTimeout;
    private final Duration coordinatorTimeout;
    private final @Nullable Boolean awaitTransactionEnd;
    private final long producerRetryBackoffMs;

    private TransactionSessionConfig(Map<String, ?> configs, @Nullable String transactionalIdOverride) {
        Map<String, Object> kafka = new HashMap<>();
        Map<String, Object> session = new HashMap<>();
        configs.forEach((k, v) -> {
            if (k == null) {
                throw new InvalidSessionConfigException("(null)", v, "Config keys must not be null");
            }
            if (k.startsWith(PREFIX)) {
                session.put(k, v);
            }
            else {
                kafka.put(k, v);
            }
        });
        for (String key : session.keySet()) {
            if (!key.equals(HEARTBEAT_INTERVAL_MS) && !key.equals(CLOSE_TIMEOUT_MS)
                    && !key.equals(COORDINATOR_TIMEOUT_MS) && !key.equals(AWAIT_TRANSACTION_END)) {
                throw new InvalidSessionConfigException(key, session.get(key), "Unknown session config; known keys are "
                        + HEARTBEAT_INTERVAL_MS + ", " + CLOSE_TIMEOUT_MS + ", " + COORDINATOR_TIMEOUT_MS + ", "
                        + AWAIT_TRANSACTION_END);
            }
        }
        Object bootstrap = kafka.get(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG);
        if (bootstrap == null || bootstrap.toString().isBlank() || bootstrap.toString().equals("[]")) {
            throw new InvalidSessionConfigException(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                    "Missing required config: set bootstrap.servers to the brokers to connect to, e.g. host:9092");
        }
        Object txnId = transactionalIdOverride != null ? transactionalIdOverride
                : kafka.get(ProducerConfig.TRANSACTIONAL_ID_CONFIG);
        if (txnId == null) {
            throw new InvalidSessionConfigException(ProducerConfig.TRANSACTIONAL_ID_CONFIG, null,
                    "Missing required config: a transaction session needs a transactional.id, stable across restarts "
                            + "of the same logical producer and unique among concurrent ones");
        }
        if (!(txnId instanceof String s) || s.isBlank()) {
            throw new InvalidSessionConfigException(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId,
                    "transactional.id must be a non-blank string");
        }
        Object idempotence = kafka.get(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG);
        if (idempotence != null && !Boolean.parseBoolean(idempotence.toString().trim())) {
            throw new InvalidSessionConfigException(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, idempotence,
                    "Transactions need an idempotent producer: remove enable.idempotence or set it to true");
        }
        Object acks = kafka.get(ProducerConfig.ACKS_CONFIG);
        if (acks != null && !acks.toString().equals("all") && !acks.toString().equals("-1")) {
            throw new InvalidSessionConfigException(ProducerConfig.ACKS_CONFIG, acks,
                    "Transactions need acks=all: remove acks or set it to all");
        }
        this.transactionalId = (String) txnId;
        kafka.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, this.transactionalId);
        this.clientConfigs = Map.copyOf(kafka);
        Map<String, Object> producer = new HashMap<>(kafka);
        producer.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        producer.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        producer.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        producer.putIfAbsent(ProducerConfig.CLIENT_ID_CONFIG, "txn-session-" + this.transactionalId);
        this.producerConfigs = Map.copyOf(producer);
        this.heartbeatInterval = Duration.ofMillis(longValue(session, HEARTBEAT_INTERVAL_MS, 0, 0));
        this.closeTimeout = Duration.ofMillis(longValue(session, CLOSE_TIMEOUT_MS, 30_000, 0));
        long maxBlock = longValue(kafka, ProducerConfig.MAX_BLOCK_MS_CONFIG, 60_000, 0);
        this.coordinatorTimeout = Duration.ofMillis(longValue(session, COORDINATOR_TIMEOUT_MS, maxBlock, 1));
        this.awaitTransactionEnd = autoOrBoolean(session, AWAIT_TRANSACTION_END);
        this.producerRetryBackoffMs = longValue(kafka, ProducerConfig.RETRY_BACKOFF_MS_CONFIG, 100, 0);
    }

    /** @return null for auto (also when not set), else the boolean given */
    private static @Nullable Boolean autoOrBoolean(Map<String, ?> configs, String key) {
        Object v = configs.get(key);
        if (v == null) {
            return null;
        }
        if (v instanceof Boolean b) {
            return b;
        }
        String text = v.toString().trim();
        if (text.equalsIgnoreCase("auto")) {
            return null;
        }
        if (text.equalsIgnoreCase("true") || text.equalsIgnoreCase("false")) {
            return Boolean.parseBoolean(text);
        }
        throw new InvalidSessionConfigException(key, v, "Expected auto, true or false");
    }

    /**
     * Validates configs for a live session.
     *
     * @param configs Kafka producer configs ({@code bootstrap.servers} and {@code transactional.id} required) plus
     *        the session keys of this class; no null keys
     * @return the validated configuration
     * @throws InvalidSessionConfigException naming the key at fault
     */
    public static TransactionSessionConfig of(Map<String, ?> configs) {
        return new TransactionSessionConfig(configs, null);
    }

    /**
     * Validates configs for a resumed session, whose transactional id is given apart from the configs.
     *
     * @param transactionalId the transactional id of the transaction to resume; a non-blank string, used instead of
     *        any {@code transactional.id} in {@code configs}
     * @param configs client configs ({@code bootstrap.servers} required, security settings) plus the session keys of
     *        this class; no null keys
     * @return the validated configuration
     * @throws InvalidSessionConfigException naming the key at fault
     */
    public static TransactionSessionConfig forResume(String transactionalId, Map<String, ?> configs) {
        return new TransactionSessionConfig(configs, transactionalId);
    }

    private static long longValue(Map<String, ?> configs, String key, long defaultValue, long min) {
        Object v = configs.get(key);
        if (v == null) {
            return defaultValue;
        }
        long value;
        if (v instanceof Number n) {
            value = n.longValue();
        }
        else {
            try {
                value = Long.parseLong(v.toString().trim());
            }
            catch (NumberFormatException ex) {
                throw new InvalidSessionConfigException(key, v, "Expected a whole number of milliseconds");
            }
        }
        if (value < min) {
            throw new InvalidSessionConfigException(key, v, "Must be at least " + min);
        }
        return value;
    }

    /** @return the transactional id */
    public String transactionalId() {
        return this.transactionalId;
    }

    /** @return the configs of the session's producer (byte-array serializers, idempotence on) */
    public Map<String, Object> producerConfigs() {
        return this.producerConfigs;
    }

    /** @return the Kafka configs as given (no session keys), for other clients such as the coordinator client */
    public Map<String, Object> clientConfigs() {
        return this.clientConfigs;
    }

    /** @return the background heartbeat interval; zero when off */
    public Duration heartbeatInterval() {
        return this.heartbeatInterval;
    }

    /** @return how long close() may take */
    public Duration closeTimeout() {
        return this.closeTimeout;
    }

    /** @return the deadline of one coordinator call */
    public Duration coordinatorTimeout() {
        return this.coordinatorTimeout;
    }

    /**
     * @return whether a transaction's first write waits for the coordinator to finish the previous end; null for
     *         {@code auto} (the session decides at {@code initialize()})
     */
    public @Nullable Boolean awaitTransactionEnd() {
        return this.awaitTransactionEnd;
    }

    /** @return the producer's {@code retry.backoff.ms} (Kafka's default, 100, when not set) */
    public long producerRetryBackoffMs() {
        return this.producerRetryBackoffMs;
    }
}
