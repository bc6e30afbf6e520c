package io.github.txnsession.autoconfigure;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

import io.github.txnsession.kafka.ClusterGuarantees;
import io.github.txnsession.kafka.fleet.TransactionalIdFleet;
import io.github.txnsession.spring.SessionTransactionCounters;
import io.github.txnsession.spring.TransactionSessionPool;

import org.apache.kafka.clients.CommonClientConfigs;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Registers {@link TransactionSessionHealthIndicator} as health component {@code kafkaTxnSession} when Spring Boot's
 * health module is on the classpath; {@code management.health.kafkatxnsession.enabled=false} turns it off. The
 * condition on the health module's own annotation sits on a nested class, so that it is read only when the module is
 * present.
 */
@Configuration(proxyBeanMethods = false)
@ConditionalOnClass(name = { "org.springframework.boot.health.contributor.HealthIndicator",
        "org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator" })
class TransactionSessionHealthConfiguration {

    private static final Logger log = LoggerFactory.getLogger(TransactionSessionHealthConfiguration.class);

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnEnabledHealthIndicator("kafkatxnsession")
    static class HealthIndicatorConfiguration {

        @Bean
        @ConditionalOnMissingBean(name = "kafkaTxnSessionHealthIndicator")
        TransactionSessionHealthIndicator kafkaTxnSessionHealthIndicator(TransactionSessionPool pool,
                SessionTransactionCounters counters, ObjectProvider<TransactionalIdFleet> fleet) {
            TransactionSessionHealthIndicator indicator = new TransactionSessionHealthIndicator(pool, counters,
                    fleet.getIfAvailable());
            indicator.setClusterGuarantees(detectInBackground(pool.sessionConfigs()));
            return indicator;
        }

        /** One ApiVersions round trip on a daemon thread, bounded by a 10 s request timeout; logged once. */
        private static CompletableFuture<ClusterGuarantees> detectInBackground(Map<String, Object> sessionConfigs) {
            Map<String, Object> configs = new HashMap<>(sessionConfigs);
            configs.put(CommonClientConfigs.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
            CompletableFuture<ClusterGuarantees> result = new CompletableFuture<>();
            Thread t = new Thread(() -> {
                try {
                    ClusterGuarantees g = ClusterGuarantees.detect(configs);
                    log.info("Kafka cluster allows: {}", g.summary());
                    result.complete(g);
                }
                catch (RuntimeException ex) {
                    log.warn("Could not detect what the Kafka cluster allows: {}", ex.toString());
                    result.completeExceptionally(ex);
                }
            }, "txn-session-cluster-guarantees");
            t.setDaemon(true);
            t.start();
            return result;
        }
    }

    /** The {@code txnsessionids} endpoint, when actuator is present and the endpoint is available (exposed). */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = { "org.springframework.boot.actuate.endpoint.annotation.Endpoint",
            "org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint" })
    static class IdsEndpointConfiguration {

        @Bean
        @ConditionalOnMissingBean
        @org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint(
                TransactionalIdsEndpoint.class)
        TransactionalIdsEndpoint transactionalIdsEndpoint(TransactionSessionPool pool,
                ObjectProvider<io.github.txnsession.spring.jdbc.TwoPhaseRecovery> recovery) {
            return new TransactionalIdsEndpoint(pool, recovery.getIfUnique());
        }
    }
}
