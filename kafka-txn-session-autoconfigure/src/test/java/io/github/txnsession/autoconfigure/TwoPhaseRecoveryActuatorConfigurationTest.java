package io.github.txnsession.autoconfigure;

import java.sql.Connection;
import java.sql.DriverManager;
import java.util.Map;

import io.github.txnsession.kafka.PreparedTransaction;
import io.github.txnsession.kafka.SessionProducer;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.jdbc.DecisionLog;
import io.micrometer.core.instrument.MeterRegistry;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.boot.jdbc.autoconfigure.DataSourceTransactionManagerAutoConfiguration;
import org.springframework.boot.kafka.autoconfigure.KafkaAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.MetricsAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.export.simple.SimpleMetricsExportAutoConfiguration;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.transaction.autoconfigure.TransactionAutoConfiguration;
import org.springframework.jdbc.datasource.SingleConnectionDataSource;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The actuator parts of the two-phase commit the way Boot registers its own: the recovery endpoint only when it is
 * available ({@code @ConditionalOnAvailableEndpoint}: access not {@code none}, and exposed), the recovery meters and
 * the session meters as {@code MeterBinder} beans that Boot's metrics support binds to the registry.
 */
class TwoPhaseRecoveryActuatorConfigurationTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    private static ApplicationContextRunner runner(String prefix, String db) {
        return new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(TwoPhaseCommitAutoConfiguration.class,
                    TransactionSessionAutoConfiguration.class, SessionTransactionManagerAutoConfiguration.class,
                    KafkaAutoConfiguration.class, DataSourceAutoConfiguration.class,
                    DataSourceTransactionManagerAutoConfiguration.class, TransactionAutoConfiguration.class))
            .withPropertyValues("spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                    "spring.datasource.url=jdbc:h2:mem:" + db + ";DB_CLOSE_DELAY=-1",
                    "kafka.txn-session.jdbc.enabled=true", "kafka.txn-session.transactional-id-prefix=" + prefix,
                    "kafka.txn-session.pool-size=2");
    }

    private static ApplicationContextRunner runner() {
        return runner(EmbeddedKafkaCluster.uniqueName("actuator") + "-", EmbeddedKafkaCluster.uniqueName("db"));
    }

    @Test
    void theRecoveryEndpointIsRegisteredOnlyWhenAvailable() {
        runner().run(context -> {
            // Boot's default: web exposure of health only
            assertThat(context).hasNotFailed().doesNotHaveBean(TwoPhaseRecoveryEndpoint.class);
        });
        runner().withPropertyValues("management.endpoints.web.exposure.include=health,txnsessionrecovery")
            .run(context -> assertThat(context).hasNotFailed().hasSingleBean(TwoPhaseRecoveryEndpoint.class));
        runner().withPropertyValues("spring.jmx.enabled=true",
                "management.endpoints.jmx.exposure.include=txnsessionrecovery")
            .run(context -> assertThat(context).hasNotFailed().hasSingleBean(TwoPhaseRecoveryEndpoint.class));
        runner().withPropertyValues("management.endpoints.web.exposure.include=*",
                // upper case: the context runner has no ApplicationConversionService (an application accepts "none")
                "management.endpoint.txnsessionrecovery.access=NONE")
            .run(context -> assertThat(context).hasNotFailed().doesNotHaveBean(TwoPhaseRecoveryEndpoint.class));
    }

    @Test
    void withoutActuatorsAutoConfigurationModuleThereIsNoEndpointAndTheRestWorks() {
        runner().withPropertyValues("management.endpoints.web.exposure.include=*")
            .withClassLoader(new FilteredClassLoader("org.springframework.boot.actuate.autoconfigure"))
            .run(context -> {
                assertThat(context).hasNotFailed().doesNotHaveBean(TwoPhaseRecoveryEndpoint.class);
                assertThat(context).hasSingleBean(TwoPhaseRecoveryHealthIndicator.class)
                    .hasSingleBean(TwoPhaseRecoveryMetrics.class);
            });
    }

    @Test
    void recoveryAndSessionMetersAreBoundByBootsMetricsSupport() throws Exception {
        String prefix = EmbeddedKafkaCluster.uniqueName("metrics") + "-";
        String db = EmbeddedKafkaCluster.uniqueName("db");
        String topic = EmbeddedKafkaCluster.uniqueName("metrics-orders");
        kafka.cluster().createTopic(topic, 1);
        // a decided transaction left by a crash: startup recovery commits it, and the meter counts it
        PreparedTransaction decided = prepareAndAbandon(prefix + "0", topic);
        try (Connection con = DriverManager.getConnection("jdbc:h2:mem:" + db + ";DB_CLOSE_DELAY=-1", "sa", "")) {
            DecisionLog log = new DecisionLog();
            log.createTableIfMissing(new SingleConnectionDataSource(con, true));
            con.setAutoCommit(false);
            log.record(con, prefix + "0", decided);
            con.commit();
        }
        runner(prefix, db)
            .withConfiguration(AutoConfigurations.of(MetricsAutoConfiguration.class,
                    CompositeMeterRegistryAutoConfiguration.class, SimpleMetricsExportAutoConfiguration.class))
            .run(context -> {
                assertThat(context).hasNotFailed().hasSingleBean(TwoPhaseRecoveryMetrics.class)
                    .hasSingleBean(TransactionSessionMetrics.class);
                MeterRegistry registry = context.getBean(MeterRegistry.class);
                assertThat(registry.get("kafka.txn.session.recovery").tag("outcome", "committed").functionCounter()
                    .count()).isEqualTo(1.0);
                assertThat(registry.get("kafka.txn.session.recovery").tag("outcome", "lost").functionCounter()
                    .count()).isZero();
                assertThat(registry.get("kafka.txn.session.recovery").functionCounters()).hasSize(4);
                assertThat(registry.get("kafka.txn.session.pool.size").tag("prefix", prefix).gauge().value())
                    .isEqualTo(2.0);
            });
    }

    private static PreparedTransaction prepareAndAbandon(String transactionalId, String topic) {
        Map<String, Object> configs = kafka.cluster().clientConfigs();
        configs.put("transactional.id", transactionalId);
        configs.put("transaction.timeout.ms", 120_000);
        TransactionSession session = TransactionSession.open(configs);
        session.initialize();
        session.beginTransaction();
        new SessionProducer<>(session, new StringSerializer(), new StringSerializer())
            .send(new ProducerRecord<>(topic, transactionalId, "decided"));
        return session.prepareTransaction();
    }
}
