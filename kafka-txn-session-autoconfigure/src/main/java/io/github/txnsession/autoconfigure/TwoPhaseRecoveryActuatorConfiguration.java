package io.github.txnsession.autoconfigure;

import io.github.txnsession.spring.jdbc.TwoPhaseRecovery;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.MeterRegistry;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Actuator support of the two-phase commit, each part only when its module is on the classpath: the health
 * indicator {@code kafkaTxnRecovery}, the endpoint {@code txnsessionrecovery}, and meters
 * {@code kafka.txn.session.recovery} (tag {@code outcome}: committed, already_committed, aborted, lost).
 */
@Configuration(proxyBeanMethods = false)
class TwoPhaseRecoveryActuatorConfiguration {

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = { "org.springframework.boot.health.contributor.HealthIndicator",
            "org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator" })
    static class Health {

        @Configuration(proxyBeanMethods = false)
        @ConditionalOnEnabledHealthIndicator("kafkatxnrecovery")
        static class Indicator {

            @Bean
            @ConditionalOnMissingBean(name = "kafkaTxnRecoveryHealthIndicator")
            TwoPhaseRecoveryHealthIndicator kafkaTxnRecoveryHealthIndicator(TwoPhaseRecovery recovery) {
                return new TwoPhaseRecoveryHealthIndicator(recovery);
            }
        }
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "org.springframework.boot.actuate.endpoint.annotation.Endpoint")
    static class EndpointConfiguration {

        @Bean
        @ConditionalOnMissingBean
        TwoPhaseRecoveryEndpoint twoPhaseRecoveryEndpoint(TwoPhaseRecovery recovery) {
            return new TwoPhaseRecoveryEndpoint(recovery);
        }
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "io.micrometer.core.instrument.MeterRegistry")
    static class Metrics {

        @Bean
        SmartInitializingSingleton twoPhaseRecoveryMeters(ObjectProvider<MeterRegistry> registries,
                TwoPhaseRecovery recovery) {
            return () -> registries.orderedStream().forEach(registry -> {
                counter(registry, recovery, "committed", TwoPhaseRecovery::committedCount);
                counter(registry, recovery, "already_committed", TwoPhaseRecovery::alreadyCommittedCount);
                counter(registry, recovery, "aborted", TwoPhaseRecovery::abortedCount);
                counter(registry, recovery, "lost", TwoPhaseRecovery::lostCount);
            });
        }

        private static void counter(MeterRegistry registry, TwoPhaseRecovery recovery, String outcome,
                java.util.function.ToLongFunction<TwoPhaseRecovery> value) {
            FunctionCounter.builder("kafka.txn.session.recovery", recovery, r -> value.applyAsLong(r))
                .description("Transactions settled by two-phase commit recovery, by outcome")
                .tag("outcome", outcome)
                .register(registry);
        }
    }
}
