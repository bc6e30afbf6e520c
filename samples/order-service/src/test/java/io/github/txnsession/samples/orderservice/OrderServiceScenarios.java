package io.github.txnsession.samples.orderservice;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.jdbc.core.JdbcTemplate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * What the README promises, driven over HTTP against the sample's own application context (embedded Kafka broker,
 * since no bootstrap servers are configured). Subclasses choose the database.
 */
abstract class OrderServiceScenarios {

    private static final JsonMapper JSON = JsonMapper.shared();

    @Value("${local.server.port}")
    int port;

    @Autowired
    JdbcTemplate jdbc;

    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    /** @return the product name the {@code db} health component reports */
    abstract String expectedDatabase();

    @Test
    void aPlacedOrderIsInTheTableAndItsEventIsPublished() throws Exception {
        HttpResponse<String> placed = post("/orders", "{\"item\":\"book\",\"quantity\":2}");
        assertThat(placed.statusCode()).as(placed.body()).isEqualTo(201);
        JsonNode receipt = JSON.readTree(placed.body());
        String orderId = receipt.path("orderId").asString();
        assertThat(receipt.path("transactionalId").asString()).startsWith("order-service-");

        JsonNode row = only(JSON.readTree(get("/orders").body()), "id", orderId);
        assertThat(row.path("item").asString()).isEqualTo("book");
        assertThat(row.path("quantity").asInt()).isEqualTo(2);

        // the Kafka commit is done when POST answers; the commit markers, and so visibility, follow within moments
        await().atMost(Duration.ofSeconds(30)).until(() -> get("/events").body().contains(orderId));
        JsonNode published = only(JSON.readTree(get("/events").body()), "key", orderId);
        JsonNode event = published.path("event");
        assertThat(event.path("orderId").asString()).isEqualTo(orderId);
        assertThat(event.path("item").asString()).isEqualTo("book");
        assertThat(event.path("quantity").asInt()).isEqualTo(2);
        assertThat(event.path("placedAt").asString()).isEqualTo(row.path("placedAt").asString());

        // step 5 of the commit cleared the decision row: a later recovery has nothing to do for this order
        // the decision row is cleared in the background after the Kafka commit
        await().atMost(Duration.ofSeconds(10)).until(() -> decisionRows() == 0);
    }

    @Test
    void aRejectedOrderLeavesNeitherRowNorEvent() throws Exception {
        HttpResponse<String> rejected = post("/orders?fail=true", "{\"item\":\"lamp\",\"quantity\":1}");
        assertThat(rejected.statusCode()).as(rejected.body()).isEqualTo(409);
        String rejectedId = JSON.readTree(rejected.body()).path("orderId").asString();
        assertThat(rejectedId).startsWith("o-");

        HttpResponse<String> later = post("/orders", "{\"item\":\"pen\",\"quantity\":3}");
        assertThat(later.statusCode()).as(later.body()).isEqualTo(201);
        String laterId = JSON.readTree(later.body()).path("orderId").asString();
        await().atMost(Duration.ofSeconds(30)).until(() -> get("/events").body().contains(laterId));

        assertThat(values(JSON.readTree(get("/orders").body()), "id")).contains(laterId).doesNotContain(rejectedId);
        assertThat(values(JSON.readTree(get("/events").body()), "key")).contains(laterId).doesNotContain(rejectedId);
        assertThat(this.jdbc.queryForObject("SELECT COUNT(*) FROM orders WHERE id = ?", Integer.class, rejectedId))
            .isZero();
        // the decision row is cleared in the background after the Kafka commit
        await().atMost(Duration.ofSeconds(10)).until(() -> decisionRows() == 0);
    }

    @Test
    void invalidOrdersAreRefusedWithTheReason() throws Exception {
        int before = values(JSON.readTree(get("/orders").body()), "id").size();
        HttpResponse<String> noQuantity = post("/orders", "{\"item\":\"book\",\"quantity\":0}");
        assertThat(noQuantity.statusCode()).isEqualTo(400);
        assertThat(noQuantity.headers().firstValue("Content-Type")).hasValueSatisfying(
                type -> assertThat(type).startsWith("application/problem+json"));
        assertThat(JSON.readTree(noQuantity.body()).path("detail").asString())
            .contains("'quantity' must be greater than 0");
        HttpResponse<String> noItem = post("/orders", "{\"quantity\":1}");
        assertThat(noItem.statusCode()).isEqualTo(400);
        assertThat(values(JSON.readTree(noItem.body()).path("errors"), "field")).containsExactly("item");
        assertThat(JSON.readTree(noItem.body()).path("detail").asString()).contains("'item' must not be blank");
        assertThat(values(JSON.readTree(get("/orders").body()), "id")).hasSize(before);
    }

    @Test
    void healthIsUpAndShowsRecoveryAndTheDatabase() throws Exception {
        HttpResponse<String> response = get("/actuator/health");
        assertThat(response.statusCode()).as(response.body()).isEqualTo(200);
        JsonNode health = JSON.readTree(response.body());
        assertThat(health.path("status").asString()).isEqualTo("UP");
        JsonNode recovery = health.path("components").path("kafkaTxnRecovery");
        assertThat(recovery.path("status").asString()).isEqualTo("UP");
        assertThat(recovery.path("details").path("prefix").asString()).isEqualTo("order-service-");
        assertThat(recovery.path("details").path("lost").asInt()).isZero();
        assertThat(health.path("components").path("db").path("details").path("database").asString())
            .isEqualTo(expectedDatabase());

        HttpResponse<String> endpoint = get("/actuator/txnsessionrecovery");
        assertThat(endpoint.statusCode()).as(endpoint.body()).isEqualTo(200);
        JsonNode status = JSON.readTree(endpoint.body());
        assertThat(status.path("prefix").asString()).isEqualTo("order-service-");
        assertThat(status.path("lost").isArray()).isTrue();
        assertThat(status.path("lost").isEmpty()).isTrue();
        // the startup run found a fresh broker and an empty log
        assertThat(status.path("lastReport").path("failed").isEmpty()).isTrue();
        assertThat(status.path("lastReport").path("committed").isEmpty()).isTrue();
    }

    private int decisionRows() {
        Integer rows = this.jdbc.queryForObject("SELECT COUNT(*) FROM kafka_txn_decision_log", Integer.class);
        return rows == null ? -1 : rows;
    }

    private static JsonNode only(JsonNode array, String field, String value) {
        List<JsonNode> matches = new ArrayList<>();
        array.forEach(node -> {
            if (value.equals(node.path(field).asString())) {
                matches.add(node);
            }
        });
        assertThat(matches).as("entries with %s=%s in %s", field, value, array).hasSize(1);
        return matches.get(0);
    }

    private static List<String> values(JsonNode array, String field) {
        assertThat(array.isArray()).as("an array: " + array).isTrue();
        List<String> values = new ArrayList<>();
        array.forEach(node -> values.add(node.path(field).asString()));
        return values;
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
}
