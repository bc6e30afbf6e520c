package io.github.txnsession.autoconfigure;

import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.kafka.autoconfigure.KafkaAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.transaction.autoconfigure.TransactionAutoConfiguration;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Issue 12, R4, for the starter's properties: every value that would break the sessions stops the application at
 * startup, with a message that names the property, what was wrong and what to do. No broker is needed. The table of
 * cases and their messages is printed at the end (in the test report's output).
 */
class BadPropertiesTest {

    private static final List<String> TABLE = new ArrayList<>();

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
        .withConfiguration(AutoConfigurations.of(TransactionSessionAutoConfiguration.class,
                SessionTransactionManagerAutoConfiguration.class, KafkaAutoConfiguration.class,
                TransactionAutoConfiguration.class))
        .withPropertyValues("spring.kafka.bootstrap-servers=localhost:1");

    static Stream<Arguments> cases() {
        return Stream.of(
                Arguments.of("kafka.txn-session.pool-size=0", "kafka.txn-session.pool-size", "at least 1"),
                Arguments.of("kafka.txn-session.pool-size=-3", "kafka.txn-session.pool-size", "at least 1"),
                Arguments.of("kafka.txn-session.pool-size=many", "kafka.txn-session.pool-size", "many"),
                Arguments.of("kafka.txn-session.transactional-id-prefix=", "transactional-id-prefix", "unique"),
                Arguments.of("kafka.txn-session.transactional-id-prefix=   ", "transactional-id-prefix", "unique"),
                Arguments.of("kafka.txn-session.acquire-timeout=-1s", "kafka.txn-session.acquire-timeout",
                        "must not be negative"),
                Arguments.of("kafka.txn-session.acquire-timeout=soon", "kafka.txn-session.acquire-timeout", "soon"),
                Arguments.of("kafka.txn-session.heartbeat-interval=-1s", "kafka.txn-session.heartbeat-interval",
                        "must not be negative"),
                Arguments.of("kafka.txn-session.close-timeout=-5s", "kafka.txn-session.close-timeout",
                        "must not be negative"),
                Arguments.of("kafka.txn-session.transaction-timeout=0s", "kafka.txn-session.transaction-timeout",
                        "must be positive"),
                Arguments.of("kafka.txn-session.transaction-timeout=-1s", "kafka.txn-session.transaction-timeout",
                        "must be positive"),
                Arguments.of("kafka.txn-session.default-timeout=0s", "kafka.txn-session.default-timeout",
                        "must be positive"),
                Arguments.of("kafka.txn-session.coordinator-timeout=0ms", "kafka.txn-session.coordinator-timeout",
                        "must be positive"),
                Arguments.of("kafka.txn-session.properties[transactional.id]=fixed",
                        "kafka.txn-session.properties.transactional.id", "transactional-id-prefix"),
                Arguments.of("kafka.txn-session.properties.acks=1", "acks", "all"),
                Arguments.of("kafka.txn-session.properties.enable.idempotence=false", "enable.idempotence", "true"),
                Arguments.of("spring.kafka.producer.acks=0", "acks", "all"));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void aBadValueStopsStartupNamingThePropertyAndWhatToDo(String property, String named, String says) {
        this.runner.withPropertyValues(property).run(context -> {
            assertThat(context).as(property).hasFailed();
            StringBuilder messages = new StringBuilder();
            for (Throwable t = context.getStartupFailure(); t != null; t = t.getCause()) {
                messages.append(t.getMessage()).append('\n');
            }
            assertThat(messages.toString()).as(property).contains(named).contains(says);
            TABLE.add("| `" + property + "` | " + deepest(context.getStartupFailure()).replace('\n', ' ') + " |");
        });
    }

    private static String deepest(Throwable failure) {
        Throwable t = failure;
        while (t.getCause() != null && t.getCause().getMessage() != null) {
            t = t.getCause();
        }
        return t.getClass().getSimpleName() + ": " + t.getMessage();
    }

    @AfterAll
    static void printTable() {
        System.out.println("| property | startup failure |\n|---|---|");
        TABLE.forEach(System.out::println);
    }
}
