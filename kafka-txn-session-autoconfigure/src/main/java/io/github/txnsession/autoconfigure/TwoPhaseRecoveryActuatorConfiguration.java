package io.github.txnsession.autoconfigure;

import io.github.txnsession.spring.jdbc.TwoPhaseRecovery;

import org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Actuator support of the two-phase commit, each part only when its module is on the classpath: the health
 * indicator {@code kafkaTxnRecovery}, the endpoint {@code txnsessionrecovery} (only when available: its access is not
 * {@code none} and it is exposed, e.g. {@code management.endpoints.web.exposure.include=txnsessionrecovery}), and the
 * meters {@code kafka.txn.session.recovery} (a {@link TwoPhaseRecoveryMetrics} binder). The conditions on the
 * modules' own annotations sit on nested classes, so that they are read only when the module is present.
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
    @ConditionalOnClass(name = { "org.springframework.boot.actuate.endpoint.annotation.Endpoint",
            "org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint" })
    static class EndpointConfiguration {

        @Bean
        @ConditionalOnMissingBean
        @ConditionalOnAvailableEndpoint(TwoPhaseRecoveryEndpoint.class)
        TwoPhaseRecoveryEndpoint twoPhaseRecoveryEndpoint(TwoPhaseRecovery recovery) {
            return new TwoPhaseRecoveryEndpoint(recovery);
        }
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "io.micrometer.core.instrument.binder.MeterBinder")
    static class Metrics {

        @Bean
        @ConditionalOnMissingBean
        TwoPhaseRecoveryMetrics twoPhaseRecoveryMetrics(TwoPhaseRecovery recovery) {
            return new TwoPhaseRecoveryMetrics(recovery);
        }
    }
}
