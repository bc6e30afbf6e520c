package io.github.txnsession.kafka.internals;

import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.ApiVersions;
import org.apache.kafka.clients.ClientUtils;
import org.apache.kafka.clients.DefaultHostResolver;
import org.apache.kafka.clients.HostResolver;
import org.apache.kafka.clients.ManualMetadataUpdater;
import org.apache.kafka.clients.Metadata;
import org.apache.kafka.clients.MetadataRecoveryStrategy;
import org.apache.kafka.clients.MetadataUpdater;
import org.apache.kafka.clients.NetworkClient;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.metrics.Sensor;
import org.apache.kafka.common.network.ChannelBuilder;
import org.apache.kafka.common.network.NetworkReceive;
import org.apache.kafka.common.network.Selectable;
import org.apache.kafka.common.network.Selector;
import org.apache.kafka.common.telemetry.internals.ClientTelemetrySender;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.common.utils.Utils;
import org.jspecify.annotations.Nullable;

/**
 * Builds the {@link NetworkClient} of the {@link CoordinatorClient} on every kafka-clients version this library
 * supports, although the classes it needs are internal and change between versions: {@code LogContext} moved to
 * {@code org.apache.kafka.common.utils.internals} in 4.4, and {@code NetworkClient}'s constructor gained a bootstrap
 * configuration and a cluster-check flag there. The constructors are found once, by reflection, from the shape the
 * running kafka-clients has; a version with neither shape fails at the first resume or coordinator call with a
 * message naming the supported versions, not with a {@code NoClassDefFoundError} at class loading.
 *
 * <p>Guarantees: the client built is the same on every supported version (a manual metadata updater over the
 * bootstrap nodes, no per-connection sensors, no telemetry, no rebootstrap of its own). Not guaranteed: versions after
 * the newest one tested (4.4.0).
 */
final class NetworkClients {

    /** The shape of the running kafka-clients, found once. */
    private static final Shape SHAPE = Shape.find();

    private NetworkClients() {
    }

    /**
     * @param config the parsed admin-client config (reconnect, buffer and socket settings, security)
     * @param clientId the client id, also the log prefix
     * @param bootstrapNodes the nodes the manual metadata updater knows
     * @param metrics the metrics the selector registers in
     * @param time the clock
     * @param apiVersions where the client records each broker's API versions
     * @param requestTimeoutMs the request timeout
     * @return a network client the caller owns (and closes, which closes the selector and channel builder)
     * @throws KafkaException if this kafka-clients version has none of the supported shapes, or building failed
     */
    static NetworkClient create(AbstractConfig config, String clientId, List<Node> bootstrapNodes, Metrics metrics,
            Time time, ApiVersions apiVersions, int requestTimeoutMs) {
        Shape shape = SHAPE;
        if (shape.failure != null) {
            throw new KafkaException("This kafka-clients version is not supported by kafka-txn-session's coordinator "
                    + "client (tested with 4.2.x, 4.3.x and 4.4.0): " + shape.failure);
        }
        Object logContext;
        @Nullable ChannelBuilder channelBuilder = null;
        @Nullable Selector selector = null;
        try {
            logContext = shape.logContext.newInstance("[CoordinatorClient clientId=" + clientId + "] ");
            channelBuilder = (ChannelBuilder) shape.createChannelBuilder.invoke(null, config, time, logContext);
            // what ClientUtils.createNetworkClient builds, without per-connection sensors: a resumed session is
            // short-lived and its few requests need no per-broker metrics (they were a large share of what a resume
            // allocates)
            selector = (Selector) shape.selector.newInstance(NetworkReceive.UNLIMITED,
                    config.getLong(AdminClientConfig.CONNECTIONS_MAX_IDLE_MS_CONFIG), metrics, time,
                    "txn-session-coordinator", Map.<String, String>of(), false, channelBuilder, logContext);
            List<Object> args = new ArrayList<>(List.of(new ManualMetadataUpdater(new ArrayList<>(bootstrapNodes))));
            args.add(null); // no Metadata
            args.addAll(List.of(selector, clientId, 1,
                    config.getLong(AdminClientConfig.RECONNECT_BACKOFF_MS_CONFIG),
                    config.getLong(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG),
                    config.getInt(AdminClientConfig.SEND_BUFFER_CONFIG),
                    config.getInt(AdminClientConfig.RECEIVE_BUFFER_CONFIG), requestTimeoutMs,
                    config.getLong(AdminClientConfig.SOCKET_CONNECTION_SETUP_TIMEOUT_MS_CONFIG),
                    config.getLong(AdminClientConfig.SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS_CONFIG), time, true,
                    apiVersions));
            args.add(null); // no throttle-time sensor
            args.addAll(List.of(logContext, new DefaultHostResolver()));
            args.add(null); // no telemetry
            args.addAll(List.of(config.getLong(AdminClientConfig.METADATA_RECOVERY_REBOOTSTRAP_TRIGGER_MS_CONFIG),
                    MetadataRecoveryStrategy.forName(
                            config.getString(AdminClientConfig.METADATA_RECOVERY_STRATEGY_CONFIG))));
            if (shape.bootstrapDisabled != null) {
                // 4.4: the bootstrap nodes are the manual updater's; no cluster-id check of our own
                args.add(shape.bootstrapDisabled);
                args.add(false);
            }
            return (NetworkClient) shape.networkClient.newInstance(args.toArray());
        }
        catch (InvocationTargetException ex) {
            closeQuietly(selector, channelBuilder);
            Throwable cause = ex.getCause();
            throw cause instanceof RuntimeException runtime ? runtime
                    : new KafkaException("Could not create the coordinator client's network client", cause);
        }
        catch (ReflectiveOperationException | RuntimeException ex) {
            closeQuietly(selector, channelBuilder);
            throw ex instanceof RuntimeException runtime ? runtime
                    : new KafkaException("Could not create the coordinator client's network client", ex);
        }
    }

    /** @return a short description of the kafka-clients shape in use (for tests and logs) */
    static String shape() {
        return SHAPE.failure != null ? "unsupported: " + SHAPE.failure
                : SHAPE.bootstrapDisabled != null ? "4.4" : "4.0-4.3";
    }

    private static void closeQuietly(@Nullable Selector selector, @Nullable ChannelBuilder channelBuilder) {
        if (selector != null) {
            Utils.closeQuietly(selector, "coordinator client selector");
        }
        else if (channelBuilder != null) {
            Utils.closeQuietly(channelBuilder, "coordinator client channel builder");
        }
    }

    /** The reflective handles of one kafka-clients version, or why none fit. */
    private static final class Shape {

        @Nullable Constructor<?> logContext;
        @Nullable Method createChannelBuilder;
        @Nullable Constructor<?> selector;
        @Nullable Constructor<?> networkClient;
        /** {@code BootstrapConfiguration.DISABLED} on 4.4 and later; null before. */
        @Nullable Object bootstrapDisabled;
        @Nullable String failure;

        static Shape find() {
            Shape shape = new Shape();
            try {
                Class<?> logContext = firstClass("org.apache.kafka.common.utils.internals.LogContext",
                        "org.apache.kafka.common.utils.LogContext");
                shape.logContext = logContext.getConstructor(String.class);
                shape.createChannelBuilder = ClientUtils.class.getMethod("createChannelBuilder", AbstractConfig.class,
                        Time.class, logContext);
                shape.selector = Selector.class.getConstructor(int.class, long.class, Metrics.class, Time.class,
                        String.class, Map.class, boolean.class, ChannelBuilder.class, logContext);
                List<Class<?>> params = new ArrayList<>(List.of(MetadataUpdater.class, Metadata.class,
                        Selectable.class, String.class, int.class, long.class, long.class, int.class, int.class,
                        int.class, long.class, long.class, Time.class, boolean.class, ApiVersions.class,
                        Sensor.class, logContext, HostResolver.class, ClientTelemetrySender.class, long.class,
                        MetadataRecoveryStrategy.class));
                Class<?> bootstrap = optionalClass("org.apache.kafka.clients.BootstrapConfiguration");
                if (bootstrap != null) {
                    params.add(bootstrap);
                    params.add(boolean.class);
                    shape.bootstrapDisabled = bootstrap.getField("DISABLED").get(null);
                }
                shape.networkClient = NetworkClient.class.getConstructor(params.toArray(Class<?>[]::new));
            }
            catch (ReflectiveOperationException | RuntimeException | LinkageError ex) {
                shape.failure = ex.toString();
            }
            return shape;
        }

        private static Class<?> firstClass(String... names) throws ClassNotFoundException {
            for (String name : names) {
                Class<?> found = optionalClass(name);
                if (found != null) {
                    return found;
                }
            }
            throw new ClassNotFoundException(String.join(" or ", names));
        }

        private static @Nullable Class<?> optionalClass(String name) {
            try {
                return Class.forName(name, false, NetworkClient.class.getClassLoader());
            }
            catch (ClassNotFoundException ex) {
                return null;
            }
        }
    }
}
