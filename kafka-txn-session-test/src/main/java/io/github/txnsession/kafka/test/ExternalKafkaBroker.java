package io.github.txnsession.kafka.test;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One Kafka broker (broker and controller in one KRaft node) of <em>another</em> Kafka version, run in a child JVM from
 * that version's own jars, so that the clients under test (the project's kafka-clients) meet a broker they were not
 * built with. {@link EmbeddedKafkaCluster.Builder#start()} uses it instead of the in-process test kit when the system
 * property {@value #CLASSPATH_PROPERTY} names the broker's classpath ({@code .ci/kafka-broker-classpath VERSION}
 * prints one); {@value #FEATURES_PROPERTY} (e.g. {@code transaction.version=1}) sets feature levels at format time,
 * which a test's own {@link EmbeddedKafkaCluster.Builder#feature(String, int)} overrides.
 *
 * <p>Guarantees: the broker is formatted fresh in a temporary directory, listens on free local ports, and is ready
 * (it answers DescribeCluster) when {@link #start} returns; {@link #stop()} is a controlled shutdown (SIGTERM) and
 * {@link #restart()} starts it again on the same data. Not guaranteed: more than one broker, or SASL; the builder
 * skips test classes that ask for them.
 */
final class ExternalKafkaBroker implements AutoCloseable {

    /** System property: the classpath of the broker's Kafka version. */
    static final String CLASSPATH_PROPERTY = "txnsession.external.broker.classpath";

    /** System property: {@code name=level} pairs, comma-separated, for the format of every external broker. */
    static final String FEATURES_PROPERTY = "txnsession.external.broker.features";

    private static final Logger log = LoggerFactory.getLogger(ExternalKafkaBroker.class);

    private static final int NODE_ID = 0;

    private final String classpath;
    private final Path directory;
    private final Path properties;
    private final String bootstrapServers;
    private @Nullable Process process;

    private ExternalKafkaBroker(String classpath, Path directory, Path properties, String bootstrapServers) {
        this.classpath = classpath;
        this.directory = directory;
        this.properties = properties;
        this.bootstrapServers = bootstrapServers;
    }

    /** @return the external broker's classpath when external brokers are asked for, else null */
    static @Nullable String requestedClasspath() {
        String classpath = System.getProperty(CLASSPATH_PROPERTY);
        return classpath == null || classpath.isBlank() ? null : classpath;
    }

    /**
     * Formats and starts a broker.
     *
     * @param classpath the broker version's jars
     * @param brokerProperties server properties besides the listeners and the KRaft settings
     * @param features feature levels to format with ({@code name -> level}); the version's defaults otherwise
     * @return the running broker
     */
    static ExternalKafkaBroker start(String classpath, Map<String, String> brokerProperties,
            Map<String, Short> features) {
        try {
            Path directory = Files.createTempDirectory("kafka-external-broker-");
            int port = freePort();
            int controllerPort = freePort();
            StringBuilder props = new StringBuilder();
            brokerProperties.forEach((k, v) -> props.append(k).append('=').append(v).append('\n'));
            props.append("process.roles=broker,controller\n")
                .append("node.id=").append(NODE_ID).append('\n')
                .append("controller.quorum.voters=").append(NODE_ID).append("@localhost:").append(controllerPort)
                .append('\n')
                .append("listeners=PLAINTEXT://localhost:").append(port).append(",CONTROLLER://localhost:")
                .append(controllerPort).append('\n')
                .append("advertised.listeners=PLAINTEXT://localhost:").append(port).append('\n')
                .append("controller.listener.names=CONTROLLER\n")
                .append("inter.broker.listener.name=PLAINTEXT\n")
                .append("listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n")
                .append("log.dirs=").append(directory.resolve("data")).append('\n');
            Path properties = directory.resolve("server.properties");
            Files.writeString(properties, props, StandardCharsets.UTF_8);
            ExternalKafkaBroker broker = new ExternalKafkaBroker(classpath, directory, properties,
                    "localhost:" + port);
            broker.format(features);
            broker.launch();
            return broker;
        }
        catch (IOException ex) {
            throw new UncheckedIOException("Could not prepare the external Kafka broker", ex);
        }
    }

    /** @return {@code localhost:port} of the broker's PLAINTEXT listener */
    String bootstrapServers() {
        return this.bootstrapServers;
    }

    /**
     * @param classpath an external broker's classpath
     * @return the version of its kafka-clients jar ({@code kafka-clients-4.0.2.jar} gives {@code 4.0.2}), or
     *         {@code "external"} if there is none
     */
    static String version(String classpath) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("kafka-clients-(\\d+\\.\\d+\\.\\d+)\\.jar")
            .matcher(classpath);
        return m.find() ? m.group(1) : "external";
    }

    /** @return the node id of the broker */
    int nodeId() {
        return NODE_ID;
    }

    private void format(Map<String, Short> features) throws IOException {
        List<String> command = javaCommand("kafka.tools.StorageTool");
        command.addAll(List.of("format", "-t", clusterId(), "-c", this.properties.toString()));
        features.forEach((name, level) -> command.addAll(List.of("--feature", name + "=" + level)));
        Path output = this.directory.resolve("format.log");
        Process format = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(output.toFile())
            .start();
        try {
            if (!format.waitFor(60, TimeUnit.SECONDS) || format.exitValue() != 0) {
                format.destroyForcibly();
                throw new IllegalStateException("Formatting the external Kafka broker failed: "
                        + Files.readString(output, StandardCharsets.UTF_8));
            }
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            format.destroyForcibly();
            throw new IllegalStateException("Interrupted while formatting the external Kafka broker", ex);
        }
        log.info("External Kafka broker formatted in {}: {}", this.directory,
                Files.readString(output, StandardCharsets.UTF_8).strip());
    }

    private void launch() throws IOException {
        List<String> command = javaCommand("kafka.Kafka");
        command.add(this.properties.toString());
        File output = this.directory.resolve("broker.log").toFile();
        Process started = new ProcessBuilder(command).redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.appendTo(output)).start();
        this.process = started;
        // a test JVM that exits without closing the cluster must not leave the broker running
        Runtime.getRuntime().addShutdownHook(new Thread(started::destroyForcibly, "external-kafka-broker-reaper"));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, this.bootstrapServers,
                AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 2_000,
                AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 2_000))) {
            while (true) {
                if (!started.isAlive()) {
                    throw new IllegalStateException("The external Kafka broker exited with " + started.exitValue()
                            + "; its log is " + output);
                }
                try {
                    if (!admin.describeCluster().nodes().get(2, TimeUnit.SECONDS).isEmpty()) {
                        break;
                    }
                }
                catch (Exception notYet) {
                    if (notYet instanceof InterruptedException) {
                        Thread.currentThread().interrupt();
                        started.destroyForcibly();
                        throw new IllegalStateException("Interrupted while starting the external Kafka broker");
                    }
                    if (System.nanoTime() > deadline) {
                        started.destroyForcibly();
                        throw new IllegalStateException("The external Kafka broker was not ready within 90 s; its "
                                + "log is " + output, notYet);
                    }
                }
            }
        }
        log.info("External Kafka broker ready at {} (pid {})", this.bootstrapServers, started.pid());
    }

    /** Controlled shutdown (SIGTERM), waiting until the process has exited. */
    void stop() {
        Process p = this.process;
        this.process = null;
        if (p == null) {
            return;
        }
        p.destroy();
        try {
            if (!p.waitFor(60, TimeUnit.SECONDS)) {
                p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            p.destroyForcibly();
        }
    }

    /** Starts the stopped broker again on the same data and waits until it is ready. */
    void restart() {
        if (this.process != null) {
            throw new IllegalStateException("The external Kafka broker is running");
        }
        try {
            launch();
        }
        catch (IOException ex) {
            throw new UncheckedIOException("Could not restart the external Kafka broker", ex);
        }
    }

    /** @return whether the broker process runs */
    boolean isRunning() {
        Process p = this.process;
        return p != null && p.isAlive();
    }

    @Override
    public void close() {
        stop();
        try (Stream<Path> files = Files.walk(this.directory)) {
            files.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
        }
        catch (IOException ex) {
            log.warn("Could not delete {}", this.directory, ex);
        }
    }

    private List<String> javaCommand(String mainClass) {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        return new ArrayList<>(List.of(java, "-Xmx512m", "-XX:+UseSerialGC", "-cp", this.classpath, mainClass));
    }

    private static String clusterId() {
        // the storage tool wants a base64 (URL-safe, unpadded) UUID of 16 bytes; one starting with '-' would be read
        // as an option by its argument parser
        while (true) {
            UUID uuid = UUID.randomUUID();
            java.nio.ByteBuffer bytes = java.nio.ByteBuffer.allocate(16);
            bytes.putLong(uuid.getMostSignificantBits()).putLong(uuid.getLeastSignificantBits());
            String id = java.util.Base64.getUrlEncoder().withoutPadding().encodeToString(bytes.array());
            if (!id.startsWith("-")) {
                return id;
            }
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0)) {
            return socket.getLocalPort();
        }
    }
}
