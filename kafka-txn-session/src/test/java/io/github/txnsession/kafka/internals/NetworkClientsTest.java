package io.github.txnsession.kafka.internals;

import org.apache.kafka.common.utils.AppInfoParser;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The coordinator client's network stack is found by reflection; this pins which shape each kafka-clients version
 * must resolve to, so a version whose internals moved again fails here with the reason, not at a user's first resume.
 * The build runs it with the default kafka-clients; {@code -Pkafka-4.3} and {@code -Pkafka-4.4} with the others.
 */
class NetworkClientsTest {

    @Test
    void theRunningKafkaClientsVersionHasASupportedShape() {
        String version = AppInfoParser.getVersion();
        String expected = version.startsWith("4.0") || version.startsWith("4.1") || version.startsWith("4.2")
                || version.startsWith("4.3") ? "4.0-4.3" : "4.4";
        assertThat(NetworkClients.shape()).as("kafka-clients %s", version).isEqualTo(expected);
    }
}
