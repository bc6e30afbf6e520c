package io.github.txnsession.autoconfigure;

import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Modifier;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.List;
import java.util.Properties;

import com.jayway.jsonpath.JsonPath;
import org.junit.jupiter.api.Test;

import org.springframework.boot.sql.init.DatabaseInitializationMode;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.annotation.MergedAnnotations;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * What Spring Boot does for its own auto-configuration, checked on ours: public final auto-configuration classes
 * without bean method proxies, the metadata its annotation processors generate, and the decision log settings'
 * defaults.
 */
class BootConventionsTest {

    private static final List<Class<?>> AUTO_CONFIGURATIONS = List.of(TransactionSessionAutoConfiguration.class,
            TwoPhaseCommitAutoConfiguration.class, SessionTransactionManagerAutoConfiguration.class);

    @Test
    void autoConfigurationClassesArePublicAndFinalWithoutBeanMethodProxiesLikeBootsOwn() {
        for (Class<?> type : AUTO_CONFIGURATIONS) {
            assertThat(Modifier.isPublic(type.getModifiers())).as(type.getName()).isTrue();
            assertThat(Modifier.isFinal(type.getModifiers())).as(type.getName()).isTrue();
            assertThat(MergedAnnotations.from(type).get(Configuration.class).getBoolean("proxyBeanMethods"))
                .as(type.getName())
                .isFalse();
        }
    }

    @Test
    void theAutoConfigureProcessorGeneratesTheMetadataThatBootFiltersWithBeforeLoadingClasses() throws IOException {
        Properties metadata = new Properties();
        for (URL url : Collections.list(getClass().getClassLoader()
            .getResources("META-INF/spring-autoconfigure-metadata.properties"))) {
            try (InputStream in = url.openStream()) {
                Properties one = new Properties();
                one.load(in);
                if (one.containsKey(TransactionSessionAutoConfiguration.class.getName())) {
                    metadata = one;
                }
            }
        }
        assertThat(metadata.getProperty(TwoPhaseCommitAutoConfiguration.class.getName() + ".ConditionalOnClass"))
            .contains("org.springframework.boot.jdbc.init.DataSourceScriptDatabaseInitializer");
        assertThat(metadata.getProperty(TransactionSessionAutoConfiguration.class.getName() + ".AutoConfigureBefore"))
            .contains("org.springframework.boot.kafka.autoconfigure.KafkaAutoConfiguration");
        assertThat(metadata.getProperty(
                SessionTransactionManagerAutoConfiguration.class.getName() + ".AutoConfigureAfter"))
            .contains(TwoPhaseCommitAutoConfiguration.class.getName());
    }

    @Test
    void theConfigurationProcessorDocumentsTheDecisionLogInitializationAndTheHealthIndicators() throws IOException {
        String json = null;
        for (URL url : Collections.list(getClass().getClassLoader()
            .getResources("META-INF/spring-configuration-metadata.json"))) {
            try (InputStream in = url.openStream()) {
                String one = new String(in.readAllBytes(), StandardCharsets.UTF_8);
                if (one.contains("\"kafka.txn-session.jdbc.enabled\"")) {
                    json = one;
                }
            }
        }
        assertThat(json).isNotNull();
        assertThat(defaultValue(json, "kafka.txn-session.jdbc.initialize-schema")).containsExactly("always");
        assertThat(defaultValue(json, "kafka.txn-session.jdbc.continue-on-error")).containsExactly(false);
        assertThat(defaultValue(json, "kafka.txn-session.jdbc.schema"))
            .containsExactly(TwoPhaseCommitProperties.DEFAULT_SCHEMA_LOCATION);
        assertThat(defaultValue(json, "kafka.txn-session.jdbc.table")).containsExactly("kafka_txn_decision_log");
        List<Object> types = JsonPath.read(json,
                "$.properties[?(@.name == 'kafka.txn-session.jdbc.initialize-schema')].type");
        assertThat(types).containsExactly(DatabaseInitializationMode.class.getName());
        List<Object> platforms = JsonPath.read(json,
                "$.hints[?(@.name == 'kafka.txn-session.jdbc.platform')].values[*].value");
        assertThat(platforms).containsExactly("h2", "postgresql", "mysql", "oracle", "sqlserver");
        assertThat(defaultValue(json, "management.health.kafkatxnsession.enabled")).containsExactly(true);
        assertThat(defaultValue(json, "management.health.kafkatxnrecovery.enabled")).containsExactly(true);
        // the endpoint's own properties, from @Endpoint
        assertThat(defaultValue(json, "management.endpoint.txnsessionrecovery.access"))
            .containsExactly("unrestricted");
    }

    @Test
    void theDecisionLogInitializationDefaults() {
        TwoPhaseCommitProperties properties = new TwoPhaseCommitProperties();
        assertThat(properties.getInitializeSchema()).isEqualTo(DatabaseInitializationMode.ALWAYS);
        assertThat(properties.isContinueOnError()).isFalse();
        assertThat(properties.getSchema()).isEqualTo(TwoPhaseCommitProperties.DEFAULT_SCHEMA_LOCATION)
            .isEqualTo("classpath:io/github/txnsession/spring/jdbc/schema-@@platform@@.sql");
        assertThat(properties.getPlatform()).isNull();
        assertThat(properties.getTable()).isEqualTo("kafka_txn_decision_log");
    }

    @Test
    void aScriptIsShippedForEveryPlatformOfThePlatformHint() {
        for (String platform : List.of("h2", "postgresql", "mysql", "oracle", "sqlserver")) {
            assertThat(getClass().getClassLoader()
                .getResource("io/github/txnsession/spring/jdbc/schema-" + platform + ".sql")).as(platform).isNotNull();
        }
    }

    private static List<Object> defaultValue(String json, String property) {
        return JsonPath.read(json, "$.properties[?(@.name == '" + property + "')].defaultValue");
    }
}
