package io.github.txnsession.boot;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import io.github.txnsession.autoconfigure.TwoPhaseRecoveryEndpoint;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.jdbc.TwoPhaseRecovery;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Issue 12, R5, for the starter: an application on a SASL/PLAIN cluster, with a database password, runs two-phase
 * transactions (one commits, one rolls back, one cannot begin because the database refuses the statement). Every log
 * line (the library's at TRACE, the Kafka clients' config dumps), every exception the application sees, the output of
 * the health indicators and of the recovery endpoint, and the {@code toString()} of every bean of this library is
 * searched for the passwords: none may appear.
 */
@ExtendWith(OutputCaptureExtension.class)
class SecretsTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(EmbeddedKafkaCluster.Builder::saslPlain);

    private static final String DB_PASSWORD = "db-password-s3cr3t";
    private static final List<String> SECRETS = List.of(EmbeddedKafkaCluster.SASL_PASSWORD, DB_PASSWORD);

    @Test
    void noPasswordInLogsExceptionsHealthEndpointsOrToString(CapturedOutput output) {
        List<String> seen = new ArrayList<>();
        Map<String, Object> sasl = EmbeddedKafkaCluster.saslClientConfigs(EmbeddedKafkaCluster.SASL_USER,
                EmbeddedKafkaCluster.SASL_PASSWORD);
        try (ConfigurableApplicationContext context = new SpringApplicationBuilder(App.class)
            .web(WebApplicationType.NONE)
            .properties("spring.main.banner-mode=off",
                    "spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                    "spring.kafka.properties.security.protocol=" + sasl.get("security.protocol"),
                    "spring.kafka.properties.sasl.mechanism=" + sasl.get("sasl.mechanism"),
                    "spring.kafka.properties.sasl.jaas.config=" + sasl.get("sasl.jaas.config"),
                    "spring.datasource.url=jdbc:h2:mem:secrets;DB_CLOSE_DELAY=-1",
                    "spring.datasource.username=sa",
                    "spring.datasource.password=" + DB_PASSWORD,
                    "kafka.txn-session.jdbc.enabled=true",
                    "kafka.txn-session.transactional-id-prefix=secrets-test-",
                    "kafka.txn-session.pool-size=2",
                    "logging.level.io.github.txnsession=TRACE",
                    "logging.level.org.apache.kafka.clients=INFO",
                    "logging.level.org.apache.kafka.common.config=INFO") // the clients' config dumps
            .run()) {
            kafka.cluster().createTopics(1, "secret-events");
            TransactionTemplate transactions = new TransactionTemplate(
                    context.getBean(PlatformTransactionManager.class));
            JdbcTemplate jdbc = context.getBean(JdbcTemplate.class);
            @SuppressWarnings("unchecked")
            KafkaTemplate<Object, Object> template = context.getBean(KafkaTemplate.class);
            jdbc.execute("CREATE TABLE IF NOT EXISTS secret_rows (id INT PRIMARY KEY)");
            transactions.executeWithoutResult(status -> {
                jdbc.update("INSERT INTO secret_rows VALUES (1)");
                template.send("secret-events", "k", "committed");
            });
            seen.add(stackTrace(catchThrowable(() -> transactions.executeWithoutResult(status -> {
                template.send("secret-events", "k", "rolled back");
                jdbc.update("INSERT INTO secret_rows VALUES (1)"); // duplicate key: the whole transaction rolls back
            }))));
            seen.add(stackTrace(catchThrowable(() -> transactions.executeWithoutResult(status -> {
                template.send("secret-events", "k", "rolled back too");
                jdbc.update("INSERT INTO no_such_table VALUES (1)");
            }))));
            context.getBeansOfType(HealthIndicator.class).forEach((name, indicator) ->
                seen.add(name + " " + indicator.health(true)));
            TwoPhaseRecovery recovery = context.getBean(TwoPhaseRecovery.class);
            TwoPhaseRecoveryEndpoint endpoint = new TwoPhaseRecoveryEndpoint(recovery);
            seen.add(String.valueOf(endpoint.recover()));
            seen.add(String.valueOf(endpoint.status()));
            for (String name : context.getBeanDefinitionNames()) {
                Object bean = context.getBean(name);
                if (bean.getClass().getName().startsWith("io.github.txnsession")) {
                    seen.add(name + " " + bean);
                }
            }
        }
        seen.add(output.getAll()); // every log line of the run (Boot's console appender), at the levels above
        assertThat(seen).as("what was searched: log lines, exceptions, health, endpoint, toString()")
            .hasSizeGreaterThan(10)
            .anyMatch(text -> text.contains("kafkaTxnRecovery") || text.contains("TwoPhaseRecovery"))
            .anyMatch(text -> text.contains("sasl.jaas.config")); // the clients' config dump was captured
        for (String secret : SECRETS) {
            assertThat(seen).as("no password anywhere").noneMatch(text -> text != null && text.contains(secret));
        }
    }

    private static Throwable catchThrowable(Runnable call) {
        try {
            call.run();
        }
        catch (RuntimeException ex) {
            return ex;
        }
        throw new AssertionError("the transaction should have failed");
    }

    private static String stackTrace(Throwable t) {
        StringWriter w = new StringWriter();
        t.printStackTrace(new PrintWriter(w));
        return w.toString();
    }

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class App {
    }
}
