package io.github.txnsession.autoconfigure;

import io.github.txnsession.spring.TransactionSessionPool;
import io.micrometer.core.instrument.binder.MeterBinder;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Registers {@link TransactionSessionMetrics} when Micrometer is on the classpath. It is a {@link MeterBinder} bean,
 * so Boot's metrics support binds it to the application's registry.
 */
@Configuration(proxyBeanMethods = false)
@ConditionalOnClass(name = "io.micrometer.core.instrument.binder.MeterBinder")
class TransactionSessionMetricsConfiguration {

    @Bean
    @ConditionalOnMissingBean
    TransactionSessionMetrics transactionSessionMetrics(ObjectProvider<TransactionSessionPool> pool) {
        return new TransactionSessionMetrics(pool::getObject);
    }
}
