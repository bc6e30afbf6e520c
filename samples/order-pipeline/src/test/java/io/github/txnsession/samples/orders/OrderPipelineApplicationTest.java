package io.github.txnsession.samples.orders;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;

import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.annotation.DirtiesContext;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * The sample's own application context, as {@code spring-boot:run} starts it (embedded broker, since no bootstrap
 * servers are configured), driven through its HTTP API the way the README describes.
 */
@SpringBootTest(classes = OrderPipelineApplication.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
// close the context (and its embedded broker) after the class, not in a JVM shutdown hook that races the test kit's
// own hook deleting the broker's directories (seen once: the fork then failed after all tests passed)
@DirtiesContext
class OrderPipelineApplicationTest {

    private static final Pattern ORDER_ID = Pattern.compile("\"orderId\"\\s*:\\s*\"(o-[0-9a-f]+)\"");

    @Value("${local.server.port}")
    int port;

    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    @Test
    void placesAnOrderAndShipsItExactlyOnce() throws Exception {
        HttpResponse<String> placed = post("/orders", "{\"item\":\"book\",\"quantity\":2}");
        assertThat(placed.statusCode()).isEqualTo(201);
        assertThat(placed.body()).contains("\"transactionalId\":\"order-pipeline-");
        String orderId = orderId(placed.body());

        await().atMost(Duration.ofSeconds(30)).until(() -> get("/records/shipments").body().contains(orderId));
        assertThat(occurrences(get("/records/shipments").body(), "\"key\":\"" + orderId + "\"")).isEqualTo(1);
        assertThat(get("/records/shipments").body()).contains("ship 2 x book");
        assertThat(occurrences(get("/records/orders").body(), "\"key\":\"" + orderId + "\"")).isEqualTo(1);
        assertThat(occurrences(get("/records/order-audit").body(), "\"key\":\"" + orderId + "\"")).isEqualTo(1);
    }

    @Test
    void aRejectedOrderLeavesNothingVisible() throws Exception {
        HttpResponse<String> rejected = post("/orders?fail=true", "{\"item\":\"lamp\",\"quantity\":1}");
        assertThat(rejected.statusCode()).isEqualTo(409);
        String rejectedId = orderId(rejected.body());

        String laterId = orderId(post("/orders", "{\"item\":\"pen\",\"quantity\":3}").body());
        // once the later order is shipped, anything the rejected one could have caused would be visible too
        await().atMost(Duration.ofSeconds(30)).until(() -> get("/records/shipments").body().contains(laterId));
        assertThat(get("/records/orders").body()).contains(laterId).doesNotContain(rejectedId);
        assertThat(get("/records/order-audit").body()).contains(laterId).doesNotContain(rejectedId);
        assertThat(get("/records/shipments").body()).doesNotContain(rejectedId);
    }

    @Test
    void healthShowsTheSessionPool() throws Exception {
        HttpResponse<String> health = get("/actuator/health");
        assertThat(health.statusCode()).isEqualTo(200);
        assertThat(health.body()).contains("\"kafkaTxnSession\"").contains("\"transactionalIdPrefix\":\"order-pipeline-\"");
    }

    @Test
    void unknownTopicsAreRefusedWithAProblemDetail() throws Exception {
        HttpResponse<String> unknown = get("/records/secrets");
        assertThat(unknown.statusCode()).isEqualTo(400);
        assertProblemDetail(unknown);
        assertThat(unknown.body()).contains("Unknown topic 'secrets'");
    }

    /** Bean Validation: a quantity of 0 or a missing item is refused, and nothing is published. */
    @Test
    void invalidOrdersAreRefusedWithTheReasonAndPublishNothing() throws Exception {
        HttpResponse<String> zero = post("/orders", "{\"item\":\"ghost\",\"quantity\":0}");
        assertThat(zero.statusCode()).as(zero.body()).isEqualTo(400);
        assertProblemDetail(zero);
        assertThat(zero.body()).contains("'quantity' must be greater than 0").contains("\"field\":\"quantity\"");
        HttpResponse<String> noItem = post("/orders", "{\"quantity\":2}");
        assertThat(noItem.statusCode()).as(noItem.body()).isEqualTo(400);
        assertThat(noItem.body()).contains("'item' must not be blank");
        HttpResponse<String> rejected = post("/orders?fail=true", "{\"item\":\"lamp\",\"quantity\":1}");
        assertThat(rejected.statusCode()).isEqualTo(409);
        assertProblemDetail(rejected);

        String laterId = orderId(post("/orders", "{\"item\":\"pen\",\"quantity\":3}").body());
        await().atMost(Duration.ofSeconds(30)).until(() -> get("/records/orders").body().contains(laterId));
        assertThat(get("/records/orders").body()).doesNotContain("ghost").doesNotContain("null");
    }

    private static void assertProblemDetail(HttpResponse<String> response) {
        assertThat(response.headers().firstValue("Content-Type")).as(response.body())
            .hasValueSatisfying(type -> assertThat(type).startsWith("application/problem+json"));
        assertThat(response.body()).contains("\"status\":" + response.statusCode()).contains("\"detail\":");
    }

    private HttpResponse<String> post(String path, String json) throws IOException, InterruptedException {
        return this.http.send(HttpRequest.newBuilder(uri(path)).header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(json)).build(), HttpResponse.BodyHandlers.ofString());
    }

    private HttpResponse<String> get(String path) throws IOException, InterruptedException {
        return this.http.send(HttpRequest.newBuilder(uri(path)).GET().build(), HttpResponse.BodyHandlers.ofString());
    }

    private URI uri(String path) {
        return URI.create("http://localhost:" + this.port + path);
    }

    private static String orderId(String body) {
        Matcher m = ORDER_ID.matcher(body);
        assertThat(m.find()).as("an orderId in " + body).isTrue();
        return m.group(1);
    }

    private static int occurrences(String text, String part) {
        int n = 0;
        for (int i = text.indexOf(part); i >= 0; i = text.indexOf(part, i + 1)) {
            n++;
        }
        return n;
    }
}
