package io.github.txnsession.kafka.internals;

import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The coordinator client's network stack is found by reflection; this pins which shape each kafka-clients version
 * must resolve to, so a version whose internals moved again fails here with the reason, not at a user's first resume.
 * The build runs it with the default kafka-clients; {@code -Pkafka-4.3} and {@code -Pkafka-4.4} with the others.
 */
class NetworkClientsTest {

    @Test
    void theRunningKafkaClientsVersionHasASupportedShape() throws IOException {
        String version = kafkaClientsVersion();
        String expected = version.startsWith("4.0") || version.startsWith("4.1") || version.startsWith("4.2")
                || version.startsWith("4.3") ? "4.0-4.3" : "4.4";
        assertThat(NetworkClients.shape()).as("kafka-clients %s", version).isEqualTo(expected);
    }

    /** The version kafka-clients writes into its jar (its own parser moved between versions too). */
    private static String kafkaClientsVersion() throws IOException {
        Properties properties = new Properties();
        try (InputStream in = KafkaProducer.class.getClassLoader().getResourceAsStream(
                "kafka/kafka-version.properties")) {
            assertThat(in).as("kafka-clients' version resource").isNotNull();
            properties.load(in);
        }
        return properties.getProperty("version");
    }
}
