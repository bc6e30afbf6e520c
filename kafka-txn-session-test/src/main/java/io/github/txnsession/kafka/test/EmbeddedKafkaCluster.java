package io.github.txnsession.kafka.test;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import kafka.server.BrokerServer;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.security.auth.SecurityProtocol;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.test.KafkaClusterTestKit;
import org.apache.kafka.common.test.TestKitNodes;
import org.apache.kafka.metadata.bootstrap.BootstrapMetadata;
import org.apache.kafka.server.common.Feature;
import org.apache.kafka.server.common.MetadataVersion;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Assumptions;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A real Kafka cluster running in this JVM: KRaft brokers (and a controller) built on Kafka's own
 * {@code KafkaClusterTestKit}.
 *
 * <p>Guarantees: the cluster is production-like by default. Unstable APIs and unstable feature versions are off,
 * and it is bootstrapped with the feature levels a freshly formatted production cluster gets (on Kafka 4.2:
 * transaction.version=2, group.version=1, share.version=1), so tests cannot pass on features no released broker
 * offers. Internal topics (offsets, transaction log, share-group state) are sized for the number of brokers, so a
 * 1-broker cluster works for transactions and share groups.
 *
 * <p>Not guaranteed: isolation between tests that share a cluster. Give every test its own topics, groups and
 * transactional ids ({@link #uniqueName(String)} helps).
 *
 * <p><b>Other Kafka versions.</b> With the system property {@code txnsession.external.broker.classpath} set to the
 * jars of another Kafka version ({@code .ci/kafka-broker-classpath VERSION} prints them), {@link Builder#start()}
 * starts that version's broker in a child JVM instead (one combined KRaft node; feature levels from
 * {@code txnsession.external.broker.features}, e.g. {@code transaction.version=1}, and the builder's own), so a
 * whole test suite runs against it; test classes that need several brokers or SASL are skipped.
 *
 * <pre>{@code
 * try (EmbeddedKafkaCluster kafka = EmbeddedKafkaCluster.builder().brokers(3).start()) {
 *     kafka.createTopic("orders", 3);
 *     ... kafka.bootstrapServers() ...
 * }
 * }</pre>
 */
public final class EmbeddedKafkaCluster implements AutoCloseable {

    private static final Logger log = LoggerFactory.getLogger(EmbeddedKafkaCluster.class);
    private static final java.util.concurrent.atomic.AtomicLong NAMES = new java.util.concurrent.atomic.AtomicLong();

    /** SASL/PLAIN user that the embedded cluster accepts as super user (see {@link Builder#saslPlain()}). */
    public static final String SASL_USER = "plain-admin";
    /** Password of {@link #SASL_USER}. */
    public static final String SASL_PASSWORD = "plain-admin-secret";

    /** The in-process cluster, or null when the broker is an {@link ExternalKafkaBroker}. */
    private final @Nullable KafkaClusterTestKit cluster;
    private final @Nullable ExternalKafkaBroker external;
    private final int brokerCount;
    private final boolean sasl;
    private final Set<Integer> stoppedBrokers = new TreeSet<>();
    private volatile @Nullable Admin admin;

    private EmbeddedKafkaCluster(@Nullable KafkaClusterTestKit cluster, @Nullable ExternalKafkaBroker external,
            int brokerCount, boolean sasl) {
        this.cluster = cluster;
        this.external = external;
        this.brokerCount = brokerCount;
        this.sasl = sasl;
    }

    private KafkaClusterTestKit testKit() {
        KafkaClusterTestKit kit = this.cluster;
        if (kit == null) {
            throw new IllegalStateException("not available with an external broker");
        }
        return kit;
    }

    /** @return a builder for a cluster with one broker and production-like defaults */
    public static Builder builder() {
        return new Builder();
    }

    /** @return the bootstrap servers of the running brokers, for client configs */
    public String bootstrapServers() {
        ExternalKafkaBroker e = this.external;
        return e != null ? e.bootstrapServers() : testKit().bootstrapServers();
    }

    /** @return a shared {@link Admin} client for this cluster; closed with the cluster, do not close it */
    public Admin admin() {
        Admin a = this.admin;
        if (a == null) {
            synchronized (this) {
                a = this.admin;
                if (a == null) {
                    a = Admin.create(clientConfigs());
                    this.admin = a;
                }
            }
        }
        return a;
    }

    /**
     * @return the Kafka version of the brokers ({@code 4.2.2}, ...): the in-process brokers' (the kafka jars on the
     *         classpath), or an external broker's (the version of the kafka-clients jar on its classpath)
     */
    public String brokerVersion() {
        String externalClasspath = ExternalKafkaBroker.requestedClasspath();
        if (this.external != null && externalClasspath != null) {
            return ExternalKafkaBroker.version(externalClasspath);
        }
        Properties version = new Properties();
        try (InputStream in = KafkaClusterTestKit.class.getClassLoader()
            .getResourceAsStream("kafka/kafka-version.properties")) {
            if (in != null) {
                version.load(in);
            }
        }
        catch (IOException ex) {
            throw new UncheckedIOException(ex);
        }
        return version.getProperty("version", "unknown");
    }

    /**
     * @return whether the brokers run share groups ({@code share.version} finalized at 1 or more; Kafka 4.1 and
     *         later): tests of share consumers assume it, so that they are skipped against older brokers
     */
    public boolean supportsShareGroups() {
        return finalizedFeatureLevel("share.version") >= 1;
    }

    /**
     * @return the cluster's finalized {@code transaction.version} (0 when not finalized): tests of transaction
     *         version 2 behaviour assume 2, so that a run against a version 1 broker skips them
     */
    public int transactionVersion() {
        return finalizedFeatureLevel("transaction.version");
    }

    private int finalizedFeatureLevel(String feature) {
        try {
            var level = admin().describeFeatures().featureMetadata().get(30, TimeUnit.SECONDS).finalizedFeatures()
                .get(feature);
            return level == null ? 0 : level.maxVersionLevel();
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("Interrupted while describing the cluster's features", ex);
        }
        catch (ExecutionException | java.util.concurrent.TimeoutException ex) {
            throw new IllegalStateException("Could not describe the cluster's features", ex);
        }
    }

    /** @return the number of brokers this cluster was started with */
    public int brokerCount() {
        return this.brokerCount;
    }

    /** @return the ids of all brokers, running or stopped */
    public Set<Integer> brokerIds() {
        ExternalKafkaBroker e = this.external;
        return e != null ? new TreeSet<>(Set.of(e.nodeId())) : new TreeSet<>(testKit().brokers().keySet());
    }

    /**
     * Creates topics (replication factor = min(3, brokers)) and waits until they exist. A topic that already
     * exists is left as it is.
     *
     * @param topic the topic's name
     * @param partitions the number of partitions, 1 or more
     * @throws IllegalStateException if the topic could not be created, or its creation took more than 30 seconds
     */
    public void createTopic(String topic, int partitions) {
        createTopics(partitions, topic);
    }

    /**
     * Creates several topics with the same number of partitions; see {@link #createTopic(String, int)}.
     *
     * @param partitions the number of partitions of each topic, 1 or more
     * @param topics the topics' names
     * @throws IllegalStateException if a topic could not be created, or its creation took more than 30 seconds
     */
    public void createTopics(int partitions, String... topics) {
        short rf = (short) Math.min(3, this.brokerCount);
        List<NewTopic> newTopics = new ArrayList<>();
        for (String t : topics) {
            newTopics.add(new NewTopic(t, partitions, rf));
        }
        admin().createTopics(newTopics).values().forEach((name, f) -> {
            try {
                f.get(30, TimeUnit.SECONDS);
            }
            catch (ExecutionException ex) {
                if (!(ex.getCause() instanceof TopicExistsException)) {
                    throw new IllegalStateException("Could not create topic " + name, ex.getCause());
                }
            }
            catch (Exception ex) {
                throw new IllegalStateException("Could not create topic " + name, ex);
            }
        });
    }

    /**
     * Stops one broker (a controlled shutdown) and waits until it is down. Its data stays, so
     * {@link #restartBroker(int)} brings it back.
     *
     * @param brokerId the id of a running broker, one of {@link #brokerIds()}
     * @throws IllegalArgumentException if there is no broker with that id
     */
    public void stopBroker(int brokerId) {
        ExternalKafkaBroker e = this.external;
        if (e != null) {
            checkExternalId(e, brokerId);
            log.info("Stopping external broker {}", brokerId);
            e.stop();
        }
        else {
            BrokerServer broker = broker(brokerId);
            log.info("Stopping broker {}", brokerId);
            broker.shutdown();
            broker.awaitShutdown();
        }
        synchronized (this.stoppedBrokers) {
            this.stoppedBrokers.add(brokerId);
        }
    }

    /**
     * Starts a broker stopped by {@link #stopBroker(int)} again and waits until every broker is ready: restart the
     * others first, or use {@link #restartBrokers(Collection)} when several are stopped.
     *
     * @param brokerId the id of a broker stopped by {@link #stopBroker(int)}
     * @throws IllegalArgumentException if there is no broker with that id
     * @throws IllegalStateException if the brokers did not become ready
     */
    public void restartBroker(int brokerId) {
        restartBrokers(List.of(brokerId));
    }

    /**
     * Starts the brokers stopped by {@link #stopBroker(int)} again, then waits until every broker is ready.
     *
     * @param brokerIds the ids of the brokers stopped by {@link #stopBroker(int)}, started in this order
     * @throws IllegalArgumentException if there is no broker with one of the ids
     * @throws IllegalStateException if the brokers did not become ready
     */
    public void restartBrokers(Collection<Integer> brokerIds) {
        ExternalKafkaBroker e = this.external;
        if (e != null) {
            for (int brokerId : brokerIds) {
                checkExternalId(e, brokerId);
                log.info("Restarting external broker {}", brokerId);
                e.restart();
            }
            synchronized (this.stoppedBrokers) {
                this.stoppedBrokers.removeAll(brokerIds);
            }
            return;
        }
        for (int brokerId : brokerIds) {
            log.info("Restarting broker {}", brokerId);
            broker(brokerId).startup();
        }
        try {
            testKit().waitForReadyBrokers();
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("Interrupted while waiting for brokers " + brokerIds, ex);
        }
        catch (ExecutionException ex) {
            throw new IllegalStateException("Brokers " + brokerIds + " did not become ready", ex.getCause());
        }
        synchronized (this.stoppedBrokers) {
            this.stoppedBrokers.removeAll(brokerIds);
        }
    }

    /** @return the broker ids stopped with {@link #stopBroker(int)} and not restarted */
    public Set<Integer> stoppedBrokers() {
        synchronized (this.stoppedBrokers) {
            return new TreeSet<>(this.stoppedBrokers);
        }
    }

    private static void checkExternalId(ExternalKafkaBroker e, int brokerId) {
        if (brokerId != e.nodeId()) {
            throw new IllegalArgumentException("No broker with id " + brokerId + "; the external broker is "
                    + e.nodeId());
        }
    }

    private BrokerServer broker(int brokerId) {
        BrokerServer broker = testKit().brokers().get(brokerId);
        if (broker == null) {
            throw new IllegalArgumentException("No broker with id " + brokerId + "; brokers are " + brokerIds());
        }
        return broker;
    }

    /**
     * @param prefix the start of the name, e.g. the test's name
     * @return a name unique in this JVM, for topics, groups and transactional ids: {@code prefix-N}
     */
    public static String uniqueName(String prefix) {
        return prefix + "-" + NAMES.incrementAndGet();
    }

    /**
     * @return a new mutable map of client configs: {@code bootstrap.servers}, plus the SASL settings of a super user
     *         when the cluster was built with {@link Builder#saslPlain()}
     */
    public Map<String, Object> clientConfigs() {
        Map<String, Object> configs = new HashMap<>();
        configs.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers());
        if (this.sasl) {
            configs.putAll(saslClientConfigs(SASL_USER, SASL_PASSWORD));
        }
        return configs;
    }

    /**
     * @param user the SASL/PLAIN user name, e.g. {@link #SASL_USER}
     * @param password the user's password, e.g. {@link #SASL_PASSWORD}
     * @return SASL_PLAINTEXT/PLAIN client settings for the given user (an immutable map)
     */
    public static Map<String, Object> saslClientConfigs(String user, String password) {
        return Map.of("security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "PLAIN", "sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"" + user
                        + "\" password=\"" + password + "\";");
    }

    @Override
    public void close() {
        Admin a = this.admin;
        if (a != null) {
            a.close(Duration.ofSeconds(5));
        }
        ExternalKafkaBroker e = this.external;
        if (e != null) {
            e.close();
            return;
        }
        try {
            testKit().close();
        }
        catch (Exception ex) {
            throw new IllegalStateException("Could not stop the embedded Kafka cluster", ex);
        }
    }

    /**
     * Configures an {@link EmbeddedKafkaCluster}. Defaults: 1 broker in combined mode (broker and controller in one
     * node), production metadata version and feature levels, no unstable APIs.
     */
    public static final class Builder {

        private int brokers = 1;
        private boolean sasl;
        private final Map<String, String> brokerProperties = new LinkedHashMap<>();
        private final Map<String, Short> featureOverrides = new LinkedHashMap<>();

        private Builder() {
        }

        /**
         * Number of brokers, 1 or more. With more than one, the controller runs as a separate node.
         *
         * @param count the number of brokers, 1 or more
         * @return this builder
         * @throws IllegalArgumentException if {@code count} is less than 1
         */
        public Builder brokers(int count) {
            if (count < 1) {
                throw new IllegalArgumentException("brokers must be at least 1, was " + count);
            }
            this.brokers = count;
            return this;
        }

        /**
         * A broker property for every node, overriding the defaults of this class.
         *
         * @param key the broker config key; not null
         * @param value its value, set as {@link String#valueOf(Object)}
         * @return this builder
         */
        public Builder brokerProperty(String key, Object value) {
            this.brokerProperties.put(Objects.requireNonNull(key, "key"), String.valueOf(value));
            return this;
        }

        /**
         * Brokers listen with SASL_PLAINTEXT (mechanism PLAIN) and authorize with ACLs; {@link #SASL_USER} is a
         * super user, and {@link EmbeddedKafkaCluster#clientConfigs()} carries its credentials.
         *
         * @return this builder
         */
        public Builder saslPlain() {
            this.sasl = true;
            return this;
        }

        /**
         * Broker properties for every node; see {@link #brokerProperty(String, Object)}.
         *
         * @param properties the broker configs to set; not null, and no null keys
         * @return this builder
         */
        public Builder brokerProperties(Map<String, ?> properties) {
            properties.forEach(this::brokerProperty);
            return this;
        }

        /**
         * Bootstraps the cluster with a feature level other than the production default, e.g.
         * {@code feature("transaction.version", 1)} for a cluster without transaction version 2.
         *
         * @param featureName the name of a Kafka feature, e.g. {@code transaction.version}
         * @param level the feature level to bootstrap with, e.g. 1; it is narrowed to a {@code short}
         * @return this builder
         * @throws IllegalArgumentException if Kafka knows no feature of that name
         */
        public Builder feature(String featureName, int level) {
            Feature.featureFromName(featureName); // fails clearly on an unknown name
            this.featureOverrides.put(featureName, (short) level);
            return this;
        }

        /**
         * Formats and starts the cluster and waits until every broker is ready.
         *
         * @return the running cluster; close it to stop it
         * @throws IllegalStateException if the cluster could not be started
         */
        public EmbeddedKafkaCluster start() {
            String externalClasspath = ExternalKafkaBroker.requestedClasspath();
            if (externalClasspath != null) {
                return startExternal(externalClasspath);
            }
            long started = System.nanoTime();
            MetadataVersion mv = MetadataVersion.latestProduction();
            Map<String, Short> features = new LinkedHashMap<>();
            for (Feature f : Feature.PRODUCTION_FEATURES) {
                if (!f.featureName().equals(Feature.KRAFT_VERSION.featureName())) {
                    features.put(f.featureName(), f.defaultLevel(mv));
                }
            }
            features.putAll(this.featureOverrides);
            BootstrapMetadata bootstrap = BootstrapMetadata.fromVersions(mv, features, "embedded cluster bootstrap");
            boolean combined = this.brokers == 1;
            TestKitNodes.Builder nodesBuilder = new TestKitNodes.Builder();
            if (this.sasl) {
                nodesBuilder.setBrokerSecurityProtocol(SecurityProtocol.SASL_PLAINTEXT);
            }
            TestKitNodes nodes = nodesBuilder
                .setBootstrapMetadata(bootstrap)
                .setCombined(combined)
                .setNumBrokerNodes(this.brokers)
                .setNumControllerNodes(1)
                .build();
            KafkaClusterTestKit.Builder builder = new KafkaClusterTestKit.Builder(nodes);
            defaults(this.brokers).forEach(builder::setConfigProp);
            if (this.sasl) {
                // the controller listener stays PLAINTEXT (principal ANONYMOUS) and must pass the ACL authorizer
                builder.setConfigProp("super.users", "User:" + SASL_USER + ";User:ANONYMOUS");
            }
            this.brokerProperties.forEach(builder::setConfigProp);
            KafkaClusterTestKit cluster = null;
            try {
                cluster = builder.build();
                cluster.format();
                cluster.startup();
                cluster.waitForReadyBrokers();
            }
            catch (Exception ex) {
                if (cluster != null) {
                    try {
                        cluster.close();
                    }
                    catch (Exception suppressed) {
                        ex.addSuppressed(suppressed);
                    }
                }
                if (ex instanceof InterruptedException) {
                    Thread.currentThread().interrupt();
                }
                throw new IllegalStateException("Could not start the embedded Kafka cluster", ex);
            }
            log.info("Embedded Kafka cluster ({} broker(s), features {}) ready at {} in {} ms", this.brokers,
                    features, cluster.bootstrapServers(), (System.nanoTime() - started) / 1_000_000);
            return new EmbeddedKafkaCluster(cluster, null, this.brokers, this.sasl);
        }

        /**
         * A broker of another Kafka version in a child JVM ({@link ExternalKafkaBroker}); a test class that needs
         * several brokers or SASL is skipped (aborted), since one external broker cannot stand in for them.
         */
        private EmbeddedKafkaCluster startExternal(String classpath) {
            Assumptions.assumeTrue(this.brokers == 1 && !this.sasl, "skipped against an external broker ("
                    + ExternalKafkaBroker.CLASSPATH_PROPERTY + " is set): the test needs " + this.brokers
                    + " broker(s)" + (this.sasl ? " and SASL" : ""));
            Map<String, Short> features = new LinkedHashMap<>();
            String defaults = System.getProperty(ExternalKafkaBroker.FEATURES_PROPERTY, "");
            for (String pair : defaults.split(",")) {
                if (!pair.isBlank()) {
                    String[] nameLevel = pair.strip().split("=", 2);
                    features.put(nameLevel[0].strip(), Short.parseShort(nameLevel[1].strip()));
                }
            }
            features.putAll(this.featureOverrides);
            Map<String, String> properties = new LinkedHashMap<>(defaults(1));
            properties.putAll(this.brokerProperties);
            ExternalKafkaBroker broker = ExternalKafkaBroker.start(classpath, properties, features);
            log.info("External Kafka broker (features {}) ready at {}", features, broker.bootstrapServers());
            return new EmbeddedKafkaCluster(null, broker, 1, false);
        }

        private static Map<String, String> defaults(int brokers) {
            String rf = String.valueOf(Math.min(3, brokers));
            String minIsr = String.valueOf(Math.max(1, Math.min(3, brokers) - 1));
            Map<String, String> props = new LinkedHashMap<>();
            // what a released broker offers, nothing more (the test kit turns these on unless told otherwise)
            props.put("unstable.api.versions.enable", "false");
            props.put("unstable.feature.versions.enable", "false");
            props.put("offsets.topic.replication.factor", rf);
            props.put("offsets.topic.num.partitions", "3");
            props.put("transaction.state.log.replication.factor", rf);
            props.put("transaction.state.log.min.isr", minIsr);
            props.put("transaction.state.log.num.partitions", "3");
            props.put("share.coordinator.state.topic.replication.factor", rf);
            props.put("share.coordinator.state.topic.min.isr", minIsr);
            props.put("share.coordinator.state.topic.num.partitions", "3");
            props.put("group.initial.rebalance.delay.ms", "0");
            props.put("group.share.heartbeat.interval.ms", "1000");
            props.put("group.share.min.heartbeat.interval.ms", "500");
            props.put("group.consumer.heartbeat.interval.ms", "1000");
            props.put("group.consumer.min.heartbeat.interval.ms", "500");
            props.put("auto.create.topics.enable", "false");
            props.put("num.partitions", "1");
            props.put("default.replication.factor", rf);
            props.put("min.insync.replicas", "1");
            return props;
        }
    }

    /**
     * Reads every committed record of the topics ({@code isolation.level=read_committed}), from the beginning up to
     * the last stable offset of each partition, keys and values as UTF-8 strings.
     *
     * @param topics the topics to read
     * @return the committed records, in the order they were polled (per partition, in offset order)
     * @throws AssertionError if the end is not reached within 30 seconds
     */
    public List<ConsumerRecord<String, String>> readCommitted(String... topics) {
        Map<String, Object> configs = clientConfigs();
        configs.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        configs.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        // a fetch at a partition's end waits this long for new data (500 ms by default, several times per read)
        configs.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 20);
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(configs, new StringDeserializer(),
                new StringDeserializer())) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (String topic : topics) {
                consumer.partitionsFor(topic).forEach(p -> partitions.add(new TopicPartition(topic, p.partition())));
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> end = settledEndOffsets(consumer, partitions);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (!end.entrySet().stream().allMatch(e -> consumer.position(e.getKey()) >= e.getValue())) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("Could not read " + List.of(topics) + " up to " + end + " within 30 s");
                }
                consumer.poll(Duration.ofMillis(100)).forEach(out::add);
            }
        }
        return out;
    }

    /**
     * The read_committed end offsets (the last stable offsets), after giving a transaction that just ended up to 1 s
     * for its markers: a commit returns once the coordinator decided, and the markers that move the last stable offset
     * are written right after. A transaction left open on purpose keeps the last stable offset where it is; then the
     * offsets as they are after that second are returned.
     */
    private Map<TopicPartition, Long> settledEndOffsets(KafkaConsumer<String, String> consumer,
            List<TopicPartition> partitions) {
        Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
        partitions.forEach(p -> latest.put(p, OffsetSpec.latest()));
        Map<TopicPartition, Long> highWatermarks = new HashMap<>();
        try {
            admin().listOffsets(latest, new ListOffsetsOptions(IsolationLevel.READ_UNCOMMITTED)).all()
                .get(30, TimeUnit.SECONDS)
                .forEach((p, info) -> highWatermarks.put(p, info.offset()));
        }
        catch (Exception ex) {
            return consumer.endOffsets(partitions); // as before: the last stable offsets
        }
        long settle = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
        Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
        while (!end.equals(highWatermarks) && System.nanoTime() < settle) {
            end = consumer.endOffsets(partitions);
        }
        return end;
    }

    /** @return a {@link Properties} view of {@link #clientConfigs()} */
    public Properties clientProperties() {
        Properties p = new Properties();
        p.putAll(clientConfigs());
        return p;
    }
}
