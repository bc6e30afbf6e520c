package io.github.txnsession.boot;

import java.util.List;

import io.github.txnsession.autoconfigure.TransactionSessionHealthIndicator;
import io.github.txnsession.autoconfigure.TransactionSessionMetrics;
import io.github.txnsession.kafka.SessionState;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.CurrentTransactionSession;
import io.github.txnsession.spring.SessionProducerFactory;
import io.github.txnsession.spring.SessionTransactionManager;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.Status;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.transaction.NestedTransactionNotSupportedException;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.TransactionTimedOutException;

import static io.github.txnsession.boot.CommittedReader.readThroughMarker;
import static io.github.txnsession.boot.CommittedReader.valuesOfKey;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * {@code @Transactional} methods send through Boot's plain {@code KafkaTemplate}, backed by the starter's session
 * pool and transaction manager; the outcome is read back with {@code read_committed}. One broker and one application
 * context for the whole class.
 */
class TransactionalKafkaTemplateTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    static final String ORDERS = "orders";
    static final String AUDIT = "audit";

    static ConfigurableApplicationContext context;
    static OrderService service;
    static SimpleMeterRegistry meters;

    @BeforeAll
    static void start() {
        kafka.cluster().createTopics(2, ORDERS, AUDIT);
        context = new SpringApplicationBuilder(App.class)
            .web(WebApplicationType.NONE)
            .properties("spring.main.banner-mode=off", CommittedReader.KAFKA_ONLY,
                    "spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                    "kafka.txn-session.transactional-id-prefix=template-test-",
                    "kafka.txn-session.pool-size=3")
            .run();
        service = context.getBean(OrderService.class);
        meters = new SimpleMeterRegistry();
        context.getBean(TransactionSessionMetrics.class).bindTo(meters);
    }

    @AfterAll
    static void stop() {
        if (context != null) {
            context.close();
        }
    }

    @Test
    void theStartersBeansBackThePlainKafkaTemplate() {
        assertThat(context.getBean(ProducerFactory.class)).isInstanceOf(SessionProducerFactory.class);
        assertThat(context.getBean(PlatformTransactionManager.class)).isInstanceOf(SessionTransactionManager.class);
        assertThat(context.getBean(KafkaTemplate.class).getProducerFactory())
            .isSameAs(context.getBean(ProducerFactory.class));
    }

    @Test
    void commitMakesTheRecordsOfBothTopicsVisible() {
        String id = service.placeOrder("commit-1");
        assertThat(id).startsWith("template-test-");
        List<ConsumerRecord<String, String>> orders = readThroughMarker(kafka.bootstrapServers(), ORDERS, "commit-1");
        List<ConsumerRecord<String, String>> audit = readThroughMarker(kafka.bootstrapServers(), AUDIT, "commit-1");
        assertThat(valuesOfKey(orders, "commit-1")).containsExactly("order commit-1");
        assertThat(valuesOfKey(audit, "commit-1")).containsExactly("audit commit-1");
    }

    @Test
    void exceptionLeavesNothingVisibleOnEitherTopic() {
        assertThatThrownBy(() -> service.placeOrderThenFail("fail-1")).isInstanceOf(IllegalStateException.class);
        service.placeOrder("marker-fail-1"); // a later commit: once it is visible, the aborted one would be too
        List<ConsumerRecord<String, String>> orders = readThroughMarker(kafka.bootstrapServers(), ORDERS,
                "marker-fail-1");
        List<ConsumerRecord<String, String>> audit = readThroughMarker(kafka.bootstrapServers(), AUDIT,
                "marker-fail-1");
        assertThat(valuesOfKey(orders, "fail-1")).isEmpty();
        assertThat(valuesOfKey(audit, "fail-1")).isEmpty();
    }

    @Test
    void requiresNewCommitsIndependentlyOfTheOuterRollback() {
        assertThatThrownBy(() -> service.outerFailsAfterRequiresNew("nested-1"))
            .isInstanceOf(IllegalStateException.class);
        service.placeOrder("marker-nested-1");
        List<ConsumerRecord<String, String>> orders = readThroughMarker(kafka.bootstrapServers(), ORDERS,
                "marker-nested-1");
        List<ConsumerRecord<String, String>> audit = readThroughMarker(kafka.bootstrapServers(), AUDIT,
                "marker-nested-1");
        assertThat(valuesOfKey(orders, "nested-1")).isEmpty(); // outer rolled back
        assertThat(valuesOfKey(audit, "nested-1")).containsExactly("inner nested-1"); // inner committed
        assertThat(service.sessionsSeen()).containsKey("outer nested-1").containsKey("inner nested-1");
        assertThat(service.sessionsSeen().get("inner nested-1"))
            .isNotEqualTo(service.sessionsSeen().get("outer nested-1"));
    }

    @Test
    void rollbackRulesAreHonoured() {
        assertThatThrownBy(() -> service.checkedWithRollbackFor("rules-rollback"))
            .isInstanceOf(OrderService.CheckedFailure.class);
        assertThatThrownBy(() -> service.checkedWithoutRule("rules-commit"))
            .isInstanceOf(OrderService.CheckedFailure.class);
        assertThatThrownBy(() -> service.uncheckedWithNoRollbackFor("rules-norollback"))
            .isInstanceOf(IllegalArgumentException.class);
        service.placeOrder("marker-rules");
        List<ConsumerRecord<String, String>> orders = readThroughMarker(kafka.bootstrapServers(), ORDERS,
                "marker-rules");
        assertThat(valuesOfKey(orders, "rules-rollback")).isEmpty();
        assertThat(valuesOfKey(orders, "rules-commit")).containsExactly("order rules-commit");
        assertThat(valuesOfKey(orders, "rules-norollback")).containsExactly("order rules-norollback");
    }

    @Test
    void supportsJoinsAndNotSupportedSuspends() {
        List<String> seen = service.outerWithSupportsAndNotSupported("props-1");
        assertThat(seen.get(0)).startsWith("template-test-");
        assertThat(seen.get(1)).isEqualTo(seen.get(0)); // SUPPORTS joined the outer session
        assertThat(seen.get(2)).isEqualTo("no session"); // NOT_SUPPORTED suspended it
        assertThat(seen.get(3)).isEqualTo(seen.get(0)); // and it came back afterwards
        assertThat(service.supportsAlone()).isEqualTo("no session");
        assertThatThrownBy(() -> context.getBean(CurrentTransactionSession.class).transactionalId())
            .isInstanceOf(IllegalStateException.class)
            .hasMessageContaining("No transaction session is bound");
    }

    @Test
    void nestedIsRejectedClearly() {
        assertThatThrownBy(() -> service.nestedAlone("nested-alone"))
            .isInstanceOf(NestedTransactionNotSupportedException.class)
            .hasMessageContaining("NESTED is not supported");
        assertThatThrownBy(() -> service.outerCallingNested("nested-inside"))
            .isInstanceOf(NestedTransactionNotSupportedException.class)
            .hasMessageContaining("NESTED is not supported")
            .hasMessageContaining("REQUIRES_NEW");
        service.placeOrder("marker-nested-rejected");
        List<ConsumerRecord<String, String>> orders = readThroughMarker(kafka.bootstrapServers(), ORDERS,
                "marker-nested-rejected");
        assertThat(valuesOfKey(orders, "nested-inside")).isEmpty();
    }

    @Test
    void timeoutAbortsTheTransaction() {
        assertThatThrownBy(() -> service.slowWithTimeout("slow-1")).isInstanceOf(TransactionTimedOutException.class);
        service.placeOrder("marker-slow-1");
        List<ConsumerRecord<String, String>> orders = readThroughMarker(kafka.bootstrapServers(), ORDERS,
                "marker-slow-1");
        assertThat(valuesOfKey(orders, "slow-1")).isEmpty();
    }

    @Test
    void currentSessionExposesIdentityAndPrepare() {
        OrderService.Identity identity = service.identityAndPrepare("identity-1");
        assertThat(identity.transactionalId()).startsWith("template-test-");
        assertThat(identity.producerId()).isNotNegative();
        assertThat(identity.prepared()).isEqualTo(identity.producerId() + ":" + identity.epoch());
        assertThat(identity.stateAfterPrepare()).isEqualTo(SessionState.PREPARED);
        List<ConsumerRecord<String, String>> orders = readThroughMarker(kafka.bootstrapServers(), ORDERS,
                "identity-1");
        assertThat(valuesOfKey(orders, "identity-1")).containsExactly("order identity-1");
    }

    @Test
    void healthAndMetricsReportThePool() {
        service.placeOrder("metrics-1");
        assertThatThrownBy(() -> service.placeOrderThenFail("metrics-2")).isInstanceOf(IllegalStateException.class);
        Health health = context.getBean(TransactionSessionHealthIndicator.class).health();
        assertThat(health.getStatus()).isEqualTo(Status.UP);
        assertThat(health.getDetails()).containsEntry("poolSize", 3).containsEntry("inUse", 0);
        assertThat((Long) health.getDetails().get("commits")).isPositive();
        assertThat((Long) health.getDetails().get("rollbacks")).isPositive();
        assertThat(meters.get("kafka.txn.session.transactions").tag("outcome", "committed").counter().count())
            .isPositive();
        assertThat(meters.get("kafka.txn.session.transactions").tag("outcome", "rolled_back").counter().count())
            .isPositive();
        assertThat(meters.get("kafka.txn.session.commit").timer().count()).isPositive();
        assertThat(meters.get("kafka.txn.session.pool.size").gauge().value()).isEqualTo(3.0);
        assertThat(meters.get("kafka.txn.session.pool.initialized").gauge().value()).isBetween(1.0, 3.0);
    }

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class App {

        @Bean
        OrderService orderService(KafkaTemplate<Object, Object> template, CurrentTransactionSession current,
                org.springframework.beans.factory.ObjectProvider<OrderService> self) {
            return new OrderService(template, current, self);
        }
    }
}
