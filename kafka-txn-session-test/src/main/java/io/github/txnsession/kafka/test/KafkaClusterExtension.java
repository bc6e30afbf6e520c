package io.github.txnsession.kafka.test;

import java.util.function.Consumer;

import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * JUnit 5 extension that starts one {@link EmbeddedKafkaCluster} before the first test of a class and stops it
 * after the last one, so a test class pays for one broker start, not one per test.
 *
 * <pre>{@code
 * @RegisterExtension
 * static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);
 *
 * @Test void sends() { ... kafka.cluster().bootstrapServers() ... }
 * }</pre>
 *
 * <p>Register it in a {@code static} field; an instance field would start a cluster per test.
 */
public final class KafkaClusterExtension implements BeforeAllCallback, AfterAllCallback {

    private final Consumer<EmbeddedKafkaCluster.Builder> customizer;
    private volatile @Nullable EmbeddedKafkaCluster cluster;

    private KafkaClusterExtension(Consumer<EmbeddedKafkaCluster.Builder> customizer) {
        this.customizer = customizer;
    }

    /**
     * @param brokers the number of brokers, 1 or more (checked when the cluster starts)
     * @return an extension for a cluster of {@code brokers} brokers with the default settings
     */
    public static KafkaClusterExtension withBrokers(int brokers) {
        return new KafkaClusterExtension(b -> b.brokers(brokers));
    }

    /**
     * @param customizer configures the cluster's builder when the test class starts; must not be null, and must not
     *        call {@link EmbeddedKafkaCluster.Builder#start()}, which the extension calls itself
     * @return an extension whose cluster the customizer configures (brokers, broker properties, features)
     */
    public static KafkaClusterExtension with(Consumer<EmbeddedKafkaCluster.Builder> customizer) {
        return new KafkaClusterExtension(customizer);
    }

    @Override
    public void beforeAll(ExtensionContext context) {
        EmbeddedKafkaCluster.Builder builder = EmbeddedKafkaCluster.builder();
        this.customizer.accept(builder);
        this.cluster = builder.start();
    }

    @Override
    public void afterAll(ExtensionContext context) {
        EmbeddedKafkaCluster c = this.cluster;
        this.cluster = null;
        if (c != null) {
            c.close();
        }
    }

    /** @return the running cluster; fails outside the test class's lifetime */
    public EmbeddedKafkaCluster cluster() {
        EmbeddedKafkaCluster c = this.cluster;
        if (c == null) {
            throw new IllegalStateException("The Kafka cluster is not running: register KafkaClusterExtension in a "
                    + "static field annotated with @RegisterExtension and use it from tests of that class");
        }
        return c;
    }

    /**
     * Shortcut for {@code cluster().bootstrapServers()}.
     *
     * @return the bootstrap servers of the running cluster, for client configs
     * @throws IllegalStateException outside the test class's lifetime, as {@link #cluster()}
     */
    public String bootstrapServers() {
        return cluster().bootstrapServers();
    }
}
