package io.github.txnsession.autoconfigure;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.config.ConfigResource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Finds the broker's {@code transaction.max.timeout.ms}: the longest {@code transaction.timeout.ms} a producer may
 * ask for, and so the longest time a prepared two-phase-commit transaction can wait for recovery.
 */
final class BrokerTransactionTimeout {

    /** Kafka's default {@code transaction.max.timeout.ms}: 15 minutes. */
    static final Duration KAFKA_DEFAULT = Duration.ofMinutes(15);

    private static final Logger log = LoggerFactory.getLogger(BrokerTransactionTimeout.class);

    private BrokerTransactionTimeout() {
    }

    /**
     * @param clientConfigs connection settings (bootstrap servers, security)
     * @param wait how long to wait for the cluster
     * @return the broker's maximum, or {@link #KAFKA_DEFAULT} (logged) when it cannot be read in time
     */
    static Duration discover(Map<String, Object> clientConfigs, Duration wait) {
        Map<String, Object> configs = new HashMap<>();
        clientConfigs.forEach((k, v) -> {
            if (AdminClientConfig.configNames().contains(k) || k.startsWith("sasl.") || k.startsWith("ssl.")) {
                configs.put(k, v);
            }
        });
        configs.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) wait.toMillis());
        configs.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, (int) wait.toMillis());
        try (Admin admin = Admin.create(configs)) {
            Node node = admin.describeCluster().nodes().get(wait.toMillis(), TimeUnit.MILLISECONDS).iterator().next();
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, node.idString());
            Config config = admin.describeConfigs(List.of(broker)).all().get(wait.toMillis(), TimeUnit.MILLISECONDS)
                .get(broker);
            ConfigEntry entry = config.get("transaction.max.timeout.ms");
            if (entry != null && entry.value() != null) {
                return Duration.ofMillis(Long.parseLong(entry.value()));
            }
        }
        catch (Exception ex) {
            if (ex instanceof InterruptedException) {
                Thread.currentThread().interrupt();
            }
            log.warn("Could not read transaction.max.timeout.ms from the brokers ({}); assuming Kafka's default of {}",
                    ex.toString(), KAFKA_DEFAULT);
        }
        return KAFKA_DEFAULT;
    }
}
