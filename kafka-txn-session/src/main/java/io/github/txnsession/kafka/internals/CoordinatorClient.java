package io.github.txnsession.kafka.internals;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.ApiVersions;
import org.apache.kafka.clients.ClientRequest;
import org.apache.kafka.clients.ClientResponse;
import org.apache.kafka.clients.ClientUtils;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.NetworkClient;
import org.apache.kafka.clients.NetworkClientUtils;
import org.apache.kafka.clients.NodeApiVersions;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.message.DescribeConfigsRequestData;
import org.apache.kafka.common.message.DescribeConfigsResponseData;
import org.apache.kafka.common.message.DescribeTransactionsRequestData;
import org.apache.kafka.common.message.DescribeTransactionsResponseData;
import org.apache.kafka.common.message.EndTxnRequestData;
import org.apache.kafka.common.message.FindCoordinatorRequestData;
import org.apache.kafka.common.message.FindCoordinatorResponseData;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.requests.AbstractRequest;
import org.apache.kafka.common.requests.AbstractResponse;
import org.apache.kafka.common.requests.DescribeConfigsRequest;
import org.apache.kafka.common.requests.DescribeConfigsResponse;
import org.apache.kafka.common.requests.DescribeTransactionsRequest;
import org.apache.kafka.common.requests.DescribeTransactionsResponse;
import org.apache.kafka.common.requests.EndTxnRequest;
import org.apache.kafka.common.requests.EndTxnResponse;
import org.apache.kafka.common.requests.FindCoordinatorRequest;
import org.apache.kafka.common.requests.FindCoordinatorResponse;
import org.apache.kafka.common.security.auth.SecurityProtocol;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.common.utils.Utils;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A small, blocking client of Kafka's transaction coordinator. It needs no producer: no buffer pool, no sender
 * thread, no background thread of any kind; network I/O happens on the calling thread.
 *
 * <p>Guarantees: every call has a deadline; NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
 * COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS and lost connections are retried with exponential backoff
 * until the deadline, and a moved coordinator is found again. Security settings (SSL, SASL) come from the same
 * keys as for any Kafka client, because the channel is built by kafka-clients' own networking. EndTxn is sent in
 * the version that matches the cluster's finalized {@code transaction.version} (v5 for transaction version 2,
 * which bumps the epoch; v4 for version 1).
 *
 * <p>Not guaranteed: concurrency. Calls are serialized on one connection pool; this is a control-plane client.
 */
public final class CoordinatorClient implements AutoCloseable {

    private static final Logger log = LoggerFactory.getLogger(CoordinatorClient.class);
    private static final AtomicInteger CLIENT_IDS = new AtomicInteger();
    private static final long MIN_BACKOFF_MS = 20;
    private static final long MAX_BACKOFF_MS = 1_000;
    /** How many transactional ids' coordinators are remembered (a long-lived committer sees many ids). */
    static final int MAX_KNOWN_COORDINATORS = 10_000;
    /** The admin-client keys a client without transport security reads, as the admin client defines them. */
    private static final @Nullable ConfigDef PLAINTEXT_CONFIG = plaintextConfig();

    private final Time time = Time.SYSTEM;
    private final Metrics metrics;
    private final ApiVersions apiVersions = new ApiVersions();
    private final NetworkClient client;
    private final List<Node> bootstrapNodes;
    private final int requestTimeoutMs;
    /** each transactional id's coordinator, the least recently used dropped beyond {@link #MAX_KNOWN_COORDINATORS} */
    private final Map<String, KnownCoordinator> coordinators;
    private final Object lock = new Object();
    private int nextBootstrap;
    private boolean closed;
    /** set by {@link #close()} before it waits for a call in flight, so that a caller's next request fails at once */
    private volatile boolean closing;

    /**
     * @param configs Kafka client configs: {@code bootstrap.servers}, security settings and
     *        {@code request.timeout.ms} are used; keys that are not admin-client keys are ignored
     */
    public CoordinatorClient(Map<String, ?> configs) {
        this(configs, MAX_KNOWN_COORDINATORS);
    }

    /** With a smaller memory of coordinators, for tests of the eviction. */
    CoordinatorClient(Map<String, ?> configs, int maxKnownCoordinators) {
        if (maxKnownCoordinators < 1) {
            throw new IllegalArgumentException("maxKnownCoordinators must be at least 1, got " + maxKnownCoordinators);
        }
        this.coordinators = Collections.synchronizedMap(new LinkedHashMap<>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, KnownCoordinator> eldest) {
                return size() > maxKnownCoordinators;
            }
        });
        Map<String, Object> adminConfigs = new HashMap<>();
        configs.forEach((k, v) -> {
            if (AdminClientConfig.configNames().contains(k) || k.startsWith("sasl.") || k.startsWith("ssl.")
                    || k.startsWith("security.")) {
                adminConfigs.put(k, v);
            }
        });
        String clientId = "txn-session-coordinator-" + CLIENT_IDS.incrementAndGet();
        adminConfigs.put(AdminClientConfig.CLIENT_ID_CONFIG, clientId);
        AbstractConfig config = parse(adminConfigs);
        List<InetSocketAddress> addresses = ClientUtils.parseAndValidateAddresses(
                config.getList(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG),
                config.getString(AdminClientConfig.CLIENT_DNS_LOOKUP_CONFIG));
        List<Node> nodes = new ArrayList<>();
        int id = -1;
        for (InetSocketAddress address : addresses) {
            nodes.add(new Node(id--, address.getHostString(), address.getPort()));
        }
        this.bootstrapNodes = List.copyOf(nodes);
        this.requestTimeoutMs = config.getInt(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG);
        this.metrics = new Metrics(this.time);
        try {
            this.client = NetworkClients.create(config, clientId, this.bootstrapNodes, this.metrics, this.time,
                    this.apiVersions, this.requestTimeoutMs);
        }
        catch (RuntimeException ex) {
            Utils.closeQuietly(this.metrics, "coordinator client metrics");
            throw new KafkaException("Could not create the coordinator client: " + ex.getMessage(), ex);
        }
    }

    /**
     * The configs as the admin client reads them. Without transport security only the keys this client uses are
     * parsed (the admin client's own definitions: same defaults and validation); with TLS or SASL all of them, since
     * the channel builder reads the security keys. doLog=false: a resumed session is short-lived; logging every value
     * at INFO for each one costs allocation and log noise.
     */
    static AbstractConfig parse(Map<String, Object> adminConfigs) {
        Object protocol = adminConfigs.get(AdminClientConfig.SECURITY_PROTOCOL_CONFIG);
        ConfigDef plaintext = PLAINTEXT_CONFIG;
        if (plaintext != null && (protocol == null
                || SecurityProtocol.PLAINTEXT.name.equalsIgnoreCase(protocol.toString().trim()))) {
            return new AbstractConfig(plaintext, adminConfigs, false) {
                @Override
                protected Map<String, Object> postProcessParsedConfig(Map<String, Object> parsedValues) {
                    // as the admin client does: reconnect.backoff.max.ms follows reconnect.backoff.ms when only that
                    // one is set
                    return CommonClientConfigs.postProcessReconnectBackoffConfigs(this, parsedValues);
                }
            };
        }
        return new AdminClientConfig(adminConfigs, false) { }; // protected constructor, through a subclass
    }

    /** @return the subset, or null (parse all admin keys) if a kafka-clients version lacks one of the keys */
    private static @Nullable ConfigDef plaintextConfig() {
        Map<String, ConfigDef.ConfigKey> admin = AdminClientConfig.configDef().configKeys();
        ConfigDef used = new ConfigDef();
        for (String name : List.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, AdminClientConfig.CLIENT_ID_CONFIG,
                AdminClientConfig.CLIENT_DNS_LOOKUP_CONFIG, AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG,
                AdminClientConfig.CONNECTIONS_MAX_IDLE_MS_CONFIG, AdminClientConfig.RECONNECT_BACKOFF_MS_CONFIG,
                AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, AdminClientConfig.SEND_BUFFER_CONFIG,
                AdminClientConfig.RECEIVE_BUFFER_CONFIG, AdminClientConfig.SOCKET_CONNECTION_SETUP_TIMEOUT_MS_CONFIG,
                AdminClientConfig.SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS_CONFIG,
                AdminClientConfig.METADATA_RECOVERY_REBOOTSTRAP_TRIGGER_MS_CONFIG,
                AdminClientConfig.METADATA_RECOVERY_STRATEGY_CONFIG, AdminClientConfig.SECURITY_PROTOCOL_CONFIG,
                SaslConfigs.SASL_MECHANISM)) {
            ConfigDef.ConfigKey key = admin.get(name);
            if (key == null) {
                return null;
            }
            used.define(key);
        }
        return used;
    }

    /**
     * Describes the transactional id at its coordinator.
     *
     * @param transactionalId the transactional id to describe
     * @param timeout the deadline of the whole call, finding the coordinator and retries included; less than 1 ms
     *        counts as 1 ms
     * @return the description, or empty when the coordinator does not know the id
     * @throws TimeoutException if no coordinator answered before the deadline
     */
    public Optional<TransactionDescription> describe(String transactionalId, Duration timeout) {
        long deadline = deadline(timeout);
        for (int attempt = 0;; attempt++) {
            Node coordinator = coordinator(transactionalId, deadline);
            DescribeTransactionsResponse response = send(coordinator, new DescribeTransactionsRequest.Builder(
                    new DescribeTransactionsRequestData().setTransactionalIds(List.of(transactionalId))), deadline,
                    transactionalId);
            if (response == null) {
                backoff(attempt, deadline, "DescribeTransactions(" + transactionalId + ")");
                continue;
            }
            DescribeTransactionsResponseData.TransactionState s = response.data().transactionStates().get(0);
            Errors error = Errors.forCode(s.errorCode());
            if (error == Errors.NONE) {
                return Optional.of(description(s));
            }
            if (error == Errors.TRANSACTIONAL_ID_NOT_FOUND) {
                return Optional.empty();
            }
            if (isRetriable(error)) {
                forgetCoordinatorIfMoved(transactionalId, error);
                backoff(attempt, deadline, "DescribeTransactions(" + transactionalId + "): " + error);
                continue;
            }
            throw error.exception("DescribeTransactions(" + transactionalId + ") failed: " + error);
        }
    }

    private static TransactionDescription description(DescribeTransactionsResponseData.TransactionState s) {
        return new TransactionDescription(s.transactionalId(), s.transactionState(), s.producerId(), s.producerEpoch(),
                s.transactionTimeoutMs(), s.transactionStartTimeMs());
    }

    /**
     * Sends a DescribeTransactions for the transactional id and returns without waiting for the answer, so that the
     * caller can do other work while it travels; {@link DescribeInFlight#await()} collects it. Sent only when the
     * id's coordinator is already known and connected; never retried.
     *
     * @param transactionalId the transactional id to describe
     * @param timeout how long {@link DescribeInFlight#await()} may wait for the answer, counted from now
     * @return the request in flight, or null when it could not be sent at once (the caller asks with
     *         {@link #describe} instead)
     */
    public @Nullable DescribeInFlight startDescribe(String transactionalId, Duration timeout) {
        KnownCoordinator known = this.coordinators.get(transactionalId);
        if (known == null) {
            return null;
        }
        synchronized (this.lock) {
            if (this.closing || this.closed) {
                return null;
            }
            long now = this.time.milliseconds();
            Node node = known.node();
            if (!this.client.isReady(node, now)) {
                return null;
            }
            long deadline = deadline(timeout);
            CompletableFuture<ClientResponse> answer = new CompletableFuture<>();
            ClientRequest request = this.client.newClientRequest(node.idString(),
                    new DescribeTransactionsRequest.Builder(
                            new DescribeTransactionsRequestData().setTransactionalIds(List.of(transactionalId))),
                    // the whole budget (not request.timeout.ms): an unanswered look is a timeout, not a second wait
                    now, true, (int) Math.max(1, Math.min(Integer.MAX_VALUE, deadline - now)), answer::complete);
            this.client.send(request, now);
            this.client.poll(0, now); // puts it on the wire
            return new DescribeInFlight(transactionalId, answer, deadline);
        }
    }

    /**
     * A DescribeTransactions sent by {@link #startDescribe}. Its answer is taken from the connection by whichever call
     * of this client reads it next.
     */
    public final class DescribeInFlight {

        private final String transactionalId;
        private final CompletableFuture<ClientResponse> answer;
        private final long deadline;

        private DescribeInFlight(String transactionalId, CompletableFuture<ClientResponse> answer, long deadline) {
            this.transactionalId = transactionalId;
            this.answer = answer;
            this.deadline = deadline;
        }

        /**
         * Waits for the answer until the deadline given to {@link #startDescribe}.
         *
         * @return the description, or null when no usable one came: a lost connection, an error code (the
         *         transactional id unknown included; a moved coordinator is forgotten), the client closing; ask again
         *         with {@link #describe}
         * @throws TimeoutException if no answer came before the deadline
         * @throws org.apache.kafka.common.errors.InterruptException if the thread is interrupted (it stays
         *         interrupted)
         */
        public @Nullable TransactionDescription await() {
            synchronized (CoordinatorClient.this.lock) {
                while (!this.answer.isDone()) {
                    if (CoordinatorClient.this.closing || CoordinatorClient.this.closed) {
                        return null;
                    }
                    if (Thread.currentThread().isInterrupted()) {
                        // an interrupted select returns at once: no busy loop under the lock
                        throw new org.apache.kafka.common.errors.InterruptException("Interrupted while waiting for "
                                + "DescribeTransactions(" + this.transactionalId + ")");
                    }
                    long now = CoordinatorClient.this.time.milliseconds();
                    if (now >= this.deadline) {
                        throw noAnswer();
                    }
                    CoordinatorClient.this.client.poll(this.deadline - now, now);
                }
            }
            ClientResponse response = this.answer.join();
            if (response.wasTimedOut()) {
                throw noAnswer();
            }
            if (response.wasDisconnected() || !response.hasResponse() || response.versionMismatch() != null) {
                return null;
            }
            DescribeTransactionsResponseData.TransactionState s = ((DescribeTransactionsResponse) response
                .responseBody()).data().transactionStates().get(0);
            Errors error = Errors.forCode(s.errorCode());
            if (error != Errors.NONE) {
                forgetCoordinatorIfMoved(this.transactionalId, error);
                return null;
            }
            return description(s);
        }

        private TimeoutException noAnswer() {
            return new TimeoutException("DescribeTransactions(" + this.transactionalId + ") got no answer before the "
                    + "deadline; check that the transaction coordinator is available");
        }
    }

    /**
     * Ends the transaction {@code (producerId, producerEpoch)} of a transactional id with EndTxn.
     *
     * @param transactionalId the transactional id whose transaction is ended
     * @param producerId the producer id of the transaction
     * @param producerEpoch the producer epoch of the transaction
     * @param commit true to commit the transaction, false to abort it
     * @param timeout the deadline of the whole call, finding the coordinator and retries included; less than 1 ms
     *        counts as 1 ms
     * @return the coordinator's final answer: NONE on success, or a non-retriable error (PRODUCER_FENCED,
     *         INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING, ...) for the caller to classify
     * @throws TimeoutException if the coordinator did not give a final answer before the deadline
     */
    public Errors endTransaction(String transactionalId, long producerId, short producerEpoch, boolean commit,
            Duration timeout) {
        long deadline = deadline(timeout);
        for (int attempt = 0;; attempt++) {
            Node coordinator = coordinator(transactionalId, deadline);
            boolean v2 = transactionVersion() >= 2;
            EndTxnRequestData data = new EndTxnRequestData().setTransactionalId(transactionalId)
                .setProducerId(producerId)
                .setProducerEpoch(producerEpoch)
                .setCommitted(commit);
            EndTxnResponse response = send(coordinator, new EndTxnRequest.Builder(data, v2), deadline,
                    transactionalId);
            String call = (commit ? "EndTxn(commit " : "EndTxn(abort ") + transactionalId + " " + producerId + ":"
                    + producerEpoch + ")";
            if (response == null) {
                backoff(attempt, deadline, call);
                continue;
            }
            Errors error = Errors.forCode(response.data().errorCode());
            if (isRetriable(error)) {
                forgetCoordinatorIfMoved(transactionalId, error);
                backoff(attempt, deadline, call + ": " + error);
                continue;
            }
            log.debug("{} -> {}", call, error);
            return error;
        }
    }

    /**
     * Reads one config of the broker that coordinates a transactional id (DescribeConfigs).
     *
     * @param transactionalId the transactional id whose coordinator is asked
     * @param name the broker config to read, e.g. {@code add.partitions.to.txn.retry.backoff.ms}
     * @param timeout the deadline of the whole call
     * @return the value, or empty when the broker does not report it or refuses (no DescribeConfigs permission)
     * @throws TimeoutException if the coordinator did not answer before the deadline
     */
    public Optional<String> coordinatorBrokerConfig(String transactionalId, String name, Duration timeout) {
        long deadline = deadline(timeout);
        for (int attempt = 0;; attempt++) {
            Node coordinator = coordinator(transactionalId, deadline);
            KnownCoordinator known = this.coordinators.get(transactionalId);
            if (known == null) {
                continue; // forgotten meanwhile: look it up again
            }
            int brokerId = known.brokerId();
            DescribeConfigsRequestData data = new DescribeConfigsRequestData().setResources(List.of(
                    new DescribeConfigsRequestData.DescribeConfigsResource()
                        .setResourceType(ConfigResource.Type.BROKER.id())
                        .setResourceName(String.valueOf(brokerId))
                        .setConfigurationKeys(List.of(name))));
            DescribeConfigsResponse response = send(coordinator, new DescribeConfigsRequest.Builder(data), deadline,
                    transactionalId);
            if (response == null) {
                backoff(attempt, deadline, "DescribeConfigs(broker " + brokerId + ", " + name + ")");
                continue;
            }
            for (DescribeConfigsResponseData.DescribeConfigsResult result : response.data().results()) {
                if (result.errorCode() != Errors.NONE.code()) {
                    log.debug("DescribeConfigs(broker {}, {}) -> {}", brokerId, name,
                            Errors.forCode(result.errorCode()));
                    return Optional.empty();
                }
                for (DescribeConfigsResponseData.DescribeConfigsResourceResult config : result.configs()) {
                    if (config.name().equals(name)) {
                        return Optional.ofNullable(config.value());
                    }
                }
            }
            return Optional.empty();
        }
    }

    /**
     * @return the cluster's finalized {@code transaction.version} as last reported in an ApiVersions response
     *         (0 when unknown or not finalized). Connects to a broker first if no response was seen yet.
     */
    public short transactionVersion() {
        ApiVersions.FinalizedFeaturesInfo info = this.apiVersions.getFinalizedFeaturesInfo();
        if (info.finalizedFeaturesEpoch < 0) {
            // no ApiVersions response seen yet: connecting to a broker exchanges them
            anyBroker(deadline(Duration.ofMillis(this.requestTimeoutMs)));
            info = this.apiVersions.getFinalizedFeaturesInfo();
        }
        if (info.finalizedFeatures == null) {
            return 0;
        }
        return info.finalizedFeatures.getOrDefault("transaction.version", (short) 0);
    }

    /**
     * @param apiKeyName the name of an {@link ApiKeys} constant, e.g. {@code END_TXN}
     * @return whether the broker this client talks to advertises an API key with this name (e.g. a future
     *         {@code TXN_HEARTBEAT}); false for a name this kafka-clients release does not know
     */
    public boolean advertisesApi(String apiKeyName) {
        ApiKeys key;
        try {
            key = ApiKeys.valueOf(apiKeyName);
        }
        catch (IllegalArgumentException ex) {
            return false;
        }
        Node node = anyBroker(deadline(Duration.ofMillis(this.requestTimeoutMs)));
        NodeApiVersions versions = this.apiVersions.get(node.idString());
        return versions != null && versions.apiVersion(key) != null;
    }

    /**
     * @param apiKeyName the name of an {@link ApiKeys} constant, e.g. {@code INIT_PRODUCER_ID}
     * @return the highest version of that API the broker this client talks to advertises, or -1 if it advertises
     *         none (or this kafka-clients release does not know the name)
     */
    public short maxApiVersion(String apiKeyName) {
        ApiKeys key;
        try {
            key = ApiKeys.valueOf(apiKeyName);
        }
        catch (IllegalArgumentException ex) {
            return -1;
        }
        Node node = anyBroker(deadline(Duration.ofMillis(this.requestTimeoutMs)));
        NodeApiVersions versions = this.apiVersions.get(node.idString());
        if (versions == null || versions.apiVersion(key) == null) {
            return -1;
        }
        return versions.apiVersion(key).maxVersion();
    }

    /**
     * @param feature a feature name, e.g. {@code share.version}
     * @return its finalized level as last reported in an ApiVersions response (0 when unknown or not finalized)
     */
    public short finalizedFeatureLevel(String feature) {
        transactionVersion(); // connects first if no ApiVersions response was seen yet
        ApiVersions.FinalizedFeaturesInfo info = this.apiVersions.getFinalizedFeaturesInfo();
        return info.finalizedFeatures == null ? 0 : info.finalizedFeatures.getOrDefault(feature, (short) 0);
    }

    private Node coordinator(String transactionalId, long deadline) {
        KnownCoordinator known = this.coordinators.get(transactionalId);
        if (known != null) {
            return known.node();
        }
        for (int attempt = 0;; attempt++) {
            Node broker = anyBroker(deadline);
            FindCoordinatorRequestData data = new FindCoordinatorRequestData()
                .setKeyType(FindCoordinatorRequest.CoordinatorType.TRANSACTION.id())
                .setCoordinatorKeys(List.of(transactionalId));
            FindCoordinatorResponse response = send(broker, new FindCoordinatorRequest.Builder(data), deadline, null);
            if (response == null) {
                backoff(attempt, deadline, "FindCoordinator(" + transactionalId + ")");
                continue;
            }
            FindCoordinatorResponseData.Coordinator c = response.data().coordinators().get(0);
            Errors error = Errors.forCode(c.errorCode());
            if (error == Errors.NONE) {
                Node node = sameEndpointAsBootstrap(c.host(), c.port());
                if (node == null) {
                    node = new Node(c.nodeId(), c.host(), c.port());
                }
                this.coordinators.put(transactionalId, new KnownCoordinator(node, c.nodeId()));
                return node;
            }
            if (isRetriable(error)) {
                backoff(attempt, deadline, "FindCoordinator(" + transactionalId + "): " + error);
                continue;
            }
            throw error.exception("FindCoordinator(" + transactionalId + ") failed: " + error);
        }
    }

    /**
     * The bootstrap node with this host and port, if any: the coordinator is then reached over the connection that is
     * already open to it, instead of a second connection (and a second ApiVersions exchange) to the same endpoint.
     */
    private @Nullable Node sameEndpointAsBootstrap(String host, int port) {
        for (Node n : this.bootstrapNodes) {
            if (n.port() == port && n.host().equals(host)) {
                return n;
            }
        }
        return null;
    }

    /** A reachable bootstrap broker, rotating through the list so that one stopped broker is skipped. */
    private Node anyBroker(long deadline) {
        for (int attempt = 0;; attempt++) {
            Node node;
            synchronized (this.lock) {
                ensureOpen();
                node = this.bootstrapNodes.get(this.nextBootstrap % this.bootstrapNodes.size());
                try {
                    long wait = Math.min(this.requestTimeoutMs, Math.max(1, deadline - this.time.milliseconds()));
                    if (NetworkClientUtils.awaitReady(this.client, node, this.time, Math.min(wait, 5_000))) {
                        return node;
                    }
                }
                catch (IOException ex) {
                    log.debug("Bootstrap broker {} not reachable: {}", node, ex.getMessage());
                }
                this.nextBootstrap++;
            }
            backoff(attempt, deadline, "connect to a bootstrap broker");
        }
    }

    /**
     * Sends one request and waits for its response.
     *
     * @return the response, or null when the connection was lost (the caller retries)
     */
    @SuppressWarnings("unchecked")
    private <T extends AbstractResponse> @Nullable T send(Node node, AbstractRequest.Builder<?> request,
            long deadline, @Nullable String coordinatorKey) {
        synchronized (this.lock) {
            ensureOpen();
            try {
                long wait = Math.max(1, Math.min(this.requestTimeoutMs, deadline - this.time.milliseconds()));
                if (!NetworkClientUtils.awaitReady(this.client, node, this.time, wait)) {
                    forget(coordinatorKey);
                    return null;
                }
                // bound the request by the caller's deadline, not only by request.timeout.ms: a timed-out
                // request disconnects and comes back as a disconnected response
                int requestTimeout = (int) Math.max(1, Math.min(this.requestTimeoutMs,
                        deadline - this.time.milliseconds()));
                ClientRequest clientRequest = this.client.newClientRequest(node.idString(), request,
                        this.time.milliseconds(), true, requestTimeout, null);
                ClientResponse response = NetworkClientUtils.sendAndReceive(this.client, clientRequest, this.time);
                UnsupportedVersionException mismatch = response.versionMismatch();
                if (mismatch != null) {
                    throw mismatch;
                }
                if (response.wasDisconnected() || !response.hasResponse()) {
                    forget(coordinatorKey);
                    return null;
                }
                return (T) response.responseBody();
            }
            catch (AuthenticationException ex) {
                throw ex;
            }
            catch (IOException ex) {
                log.debug("Request {} to {} failed: {}", request.apiKey(), node, ex.getMessage());
                forget(coordinatorKey);
                return null;
            }
        }
    }

    private void forget(@Nullable String coordinatorKey) {
        if (coordinatorKey != null) {
            this.coordinators.remove(coordinatorKey);
        }
    }

    private void forgetCoordinatorIfMoved(String transactionalId, Errors error) {
        if (error == Errors.NOT_COORDINATOR || error == Errors.COORDINATOR_NOT_AVAILABLE) {
            this.coordinators.remove(transactionalId);
        }
    }

    private static boolean isRetriable(Errors error) {
        return error == Errors.NOT_COORDINATOR || error == Errors.COORDINATOR_NOT_AVAILABLE
                || error == Errors.COORDINATOR_LOAD_IN_PROGRESS || error == Errors.CONCURRENT_TRANSACTIONS
                || error == Errors.REQUEST_TIMED_OUT || error == Errors.NETWORK_EXCEPTION;
    }

    private long deadline(Duration timeout) {
        return this.time.milliseconds() + Math.max(1, timeout.toMillis());
    }

    private void backoff(int attempt, long deadline, String what) {
        long remaining = deadline - this.time.milliseconds();
        if (remaining <= 0) {
            throw new TimeoutException(what + " did not succeed before the deadline; check that the brokers in "
                    + "bootstrap.servers are reachable and the transaction coordinator is available");
        }
        long backoff = Math.min(MAX_BACKOFF_MS, MIN_BACKOFF_MS << Math.min(attempt, 10));
        backoff = Math.min(remaining, backoff / 2 + ThreadLocalRandom.current().nextLong(backoff / 2 + 1));
        log.debug("Retrying {} in {} ms", what, backoff);
        try {
            Thread.sleep(backoff);
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new org.apache.kafka.common.errors.InterruptException(ex);
        }
    }

    private void ensureOpen() {
        if (this.closing || this.closed) {
            throw new KafkaException("The coordinator client is closed");
        }
    }

    /** @return how many transactional ids' coordinators are remembered now (for tests) */
    int knownCoordinatorCount() {
        return this.coordinators.size();
    }

    /** @return whether the coordinator of {@code transactionalId} is remembered now (for tests) */
    boolean knowsCoordinatorOf(String transactionalId) {
        return this.coordinators.containsKey(transactionalId);
    }

    @Override
    public void close() {
        this.closing = true;
        synchronized (this.lock) {
            if (this.closed) {
                return;
            }
            this.closed = true;
            this.client.close();
            this.metrics.close();
        }
    }

    /**
     * A transactional id's coordinator: the node to send to (a bootstrap node when it has the same endpoint) and the
     * broker id it has in the cluster.
     */
    private record KnownCoordinator(Node node, int brokerId) {
    }
}
