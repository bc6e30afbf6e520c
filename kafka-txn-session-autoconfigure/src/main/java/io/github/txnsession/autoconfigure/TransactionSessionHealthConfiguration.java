package io.github.txnsession.autoconfigure;

import io.github.txnsession.spring.SessionTransactionCounters;
import io.github.txnsession.spring.TransactionSessionPool;

import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Registers {@link TransactionSessionHealthIndicator} as health component {@code kafkaTxnSession} when Spring Boot's
 * health module is on the classpath; {@code management.health.kafkatxnsession.enabled=false} turns it off.
 */
@Configuration(proxyBeanMethods = false)
@ConditionalOnClass({ HealthIndicator.class, ConditionalOnEnabledHealthIndicator.class })
@ConditionalOnEnabledHealthIndicator("kafkatxnsession")
class TransactionSessionHealthConfiguration {

    @Bean
    @ConditionalOnMissingBean(name = "kafkaTxnSessionHealthIndicator")
    TransactionSessionHealthIndicator kafkaTxnSessionHealthIndicator(TransactionSessionPool pool,
            SessionTransactionCounters counters) {
        return new TransactionSessionHealthIndicator(pool, counters);
    }
}
