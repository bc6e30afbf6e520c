package io.github.txnsession.autoconfigure;

import io.github.txnsession.kafka.fleet.TransactionalIdFleet;
import io.github.txnsession.spring.SessionTransactionCounters;
import io.github.txnsession.spring.TransactionSessionPool;

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

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnEnabledHealthIndicator("kafkatxnsession")
    static class HealthIndicatorConfiguration {

        @Bean
        @ConditionalOnMissingBean(name = "kafkaTxnSessionHealthIndicator")
        TransactionSessionHealthIndicator kafkaTxnSessionHealthIndicator(TransactionSessionPool pool,
                SessionTransactionCounters counters, ObjectProvider<TransactionalIdFleet> fleet) {
            return new TransactionSessionHealthIndicator(pool, counters, fleet.getIfAvailable());
        }
    }
}
