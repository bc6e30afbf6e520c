package io.github.txnsession.samples.paymentservice;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;

import io.github.txnsession.samples.paymentservice.PaymentCapturedEvents.PublishedEvent;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.kafka.core.ConsumerFactory;
import org.springframework.orm.jpa.JpaTransactionManager;
import org.springframework.transaction.PlatformTransactionManager;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * What the README promises, driven over HTTP against the sample's own application context (embedded Kafka broker,
 * since no bootstrap servers are configured). The table is read with {@code JdbcTemplate}, the topic with
 * {@code read_committed} consumers (what downstream sees) and {@code read_uncommitted} ones (to show that a rolled-back
 * payment's event did reach the log, so that its absence downstream means it was aborted, not that it was never sent).
 * Subclasses choose the database.
 */
abstract class PaymentServiceScenarios {

    private static final JsonMapper JSON = JsonMapper.shared();

    private static final Duration TIMEOUT = Duration.ofSeconds(30);

    @Value("${local.server.port}")
    int port;

    @Autowired
    JdbcTemplate jdbc;

    @Autowired
    PlatformTransactionManager transactionManager;

    @Autowired
    PaymentCapturedEvents events;

    @Autowired
    ConsumerFactory<?, ?> consumerFactory;

    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    /** @return the product name the {@code db} health component reports */
    abstract String expectedDatabase();

    @Test
    void bootsOwnJpaTransactionManagerRunsTheTransactions() {
        // the starter enlists Kafka sessions in the application's manager instead of replacing it
        assertThat(this.transactionManager).isInstanceOf(JpaTransactionManager.class);
    }

    @Test
    void aCapturedPaymentIsInTheTableAndItsEventIsPublished() throws Exception {
        String orderId = newOrderId();
        HttpResponse<String> captured = post("/payments", body(orderId, 1299));
        assertThat(captured.statusCode()).as(captured.body()).isEqualTo(201);
        JsonNode receipt = JSON.readTree(captured.body());
        String paymentId = receipt.path("paymentId").asString();
        assertThat(UUID.fromString(paymentId)).isNotNull();
        assertThat(receipt.path("orderId").asString()).isEqualTo(orderId);
        assertThat(receipt.path("transactionalId").asString()).startsWith("payment-service-");

        assertThat(rowsFor(orderId)).isEqualTo(1);
        JsonNode row = only(JSON.readTree(get("/payments").body()), "orderId", orderId);
        assertThat(row.path("id").asString()).isEqualTo(paymentId);
        assertThat(row.path("amountCents").asLong()).isEqualTo(1299L);
        assertThat(row.path("status").asString()).isEqualTo("CAPTURED");

        // the Kafka commit is done when POST answers; the commit markers, and so visibility, follow within moments
        await().atMost(TIMEOUT).until(() -> get("/events").body().contains(paymentId));
        JsonNode published = only(JSON.readTree(get("/events").body()), "key", orderId);
        JsonNode event = published.path("event");
        assertThat(event.path("paymentId").asString()).isEqualTo(paymentId);
        assertThat(event.path("orderId").asString()).isEqualTo(orderId);
        assertThat(event.path("amountCents").asLong()).isEqualTo(1299L);
        assertThat(event.path("capturedAt").asString()).isEqualTo(row.path("capturedAt").asString());

        // the last step of the commit cleared the decision row: a later recovery has nothing to do for this payment
        // the decision row is cleared in the background after the Kafka commit
        await().atMost(Duration.ofSeconds(10)).until(() -> decisionRows() == 0);
    }

    @Test
    void aRejectedPaymentLeavesNeitherRowNorEvent() throws Exception {
        String orderId = newOrderId();
        HttpResponse<String> rejected = post("/payments?fail=true", body(orderId, 500));
        JsonNode problem = problem(rejected, 409);
        assertThat(problem.path("orderId").asString()).isEqualTo(orderId);
        String paymentId = problem.path("paymentId").asString();
        assertThat(UUID.fromString(paymentId)).isNotNull();

        // the method waited until the broker had the event: it is in the topic's log ...
        List<PublishedEvent> written = await().atMost(TIMEOUT)
            .until(() -> eventsFor(orderId, IsolationLevel.READ_UNCOMMITTED), list -> list.size() == 1);
        PublishedEvent aborted = written.get(0);
        assertThat(aborted.event().paymentId().toString()).isEqualTo(paymentId);
        // ... and its transaction was aborted: once the partition's last stable offset has passed it (the abort
        // marker is written), a read_committed consumer reads past the event without ever returning it
        await().atMost(TIMEOUT).until(() -> lastStableOffset(aborted.partition()) > aborted.offset());
        assertThat(values(JSON.readTree(get("/events").body()), "key")).doesNotContain(orderId);

        assertThat(values(JSON.readTree(get("/payments").body()), "orderId")).doesNotContain(orderId);
        assertThat(rowsFor(orderId)).isZero();
        // the decision row is cleared in the background after the Kafka commit
        await().atMost(Duration.ofSeconds(10)).until(() -> decisionRows() == 0);
    }

    @Test
    void aSecondPaymentForAnOrderIsRefusedAtCommitAndItsEventAborted() throws Exception {
        String orderId = newOrderId();
        HttpResponse<String> first = post("/payments", body(orderId, 700));
        assertThat(first.statusCode()).as(first.body()).isEqualTo(201);
        String firstId = JSON.readTree(first.body()).path("paymentId").asString();

        HttpResponse<String> second = post("/payments", body(orderId, 700));
        JsonNode problem = problem(second, 409);
        assertThat(problem.path("orderId").asString()).isEqualTo(orderId);
        assertThat(problem.path("detail").asString()).contains("already has a captured payment");

        // save() wrote nothing: Hibernate flushed the INSERT at commit, after the second event had been sent and its
        // Kafka transaction prepared (which puts the event in the log). The database refused the row at that flush;
        // the Kafka transaction must then be aborted, not committed and not left open.
        List<PublishedEvent> written = await().atMost(TIMEOUT)
            .until(() -> eventsFor(orderId, IsolationLevel.READ_UNCOMMITTED), list -> list.size() == 2);
        // one key, one partition, in offset order
        assertThat(written.get(0).event().paymentId().toString()).isEqualTo(firstId);
        PublishedEvent refused = written.get(1);
        assertThat(refused.event().paymentId().toString()).isNotEqualTo(firstId);
        await().atMost(TIMEOUT).until(() -> lastStableOffset(refused.partition()) > refused.offset());
        assertThat(eventsFor(orderId, IsolationLevel.READ_COMMITTED))
            .extracting(e -> e.event().paymentId().toString())
            .containsExactly(firstId);

        assertThat(rowsFor(orderId)).isEqualTo(1);
        assertThat(only(JSON.readTree(get("/payments").body()), "orderId", orderId).path("id").asString())
            .isEqualTo(firstId);
        // the decision row was written in the database transaction that rolled back
        // the decision row is cleared in the background after the Kafka commit
        await().atMost(Duration.ofSeconds(10)).until(() -> decisionRows() == 0);
    }

    @Test
    void invalidRequestsGetProblemDetails() throws Exception {
        int before = rowCount();

        JsonNode blank = problem(post("/payments", "{\"orderId\":\" \",\"amountCents\":100}"), 400);
        assertThat(fields(blank)).containsExactly("orderId");
        assertThat(blank.path("detail").asString()).contains("'orderId' must not be blank");

        JsonNode negative = problem(post("/payments", "{\"orderId\":\"o-negative\",\"amountCents\":-5}"), 400);
        assertThat(fields(negative)).containsExactly("amountCents");
        assertThat(negative.path("detail").asString()).contains("'amountCents' must be greater than 0");

        JsonNode zero = problem(post("/payments", "{\"orderId\":\"o-zero\",\"amountCents\":0}"), 400);
        assertThat(fields(zero)).containsExactly("amountCents");

        JsonNode tooLong = problem(post("/payments", body("o-" + "x".repeat(PaymentRequest.MAX_ORDER_ID_LENGTH), 100)),
                400);
        assertThat(fields(tooLong)).containsExactly("orderId");

        JsonNode empty = problem(post("/payments", "{}"), 400);
        assertThat(fields(empty)).containsExactly("amountCents", "orderId");

        // a body Jackson cannot read: Spring MVC's own error, a problem detail too (spring.mvc.problemdetails.enabled)
        JsonNode notANumber = problem(post("/payments", "{\"orderId\":\"o-text\",\"amountCents\":\"lots\"}"), 400);
        assertThat(notANumber.path("errors").isMissingNode()).as(notANumber.toString()).isTrue();

        assertThat(rowCount()).isEqualTo(before);
        assertThat(this.events.read(IsolationLevel.READ_UNCOMMITTED)).extracting(PublishedEvent::key)
            .doesNotContain("o-negative", "o-zero", "o-text");
    }

    @Test
    void healthIsUpAndShowsRecoveryAndTheDatabase() throws Exception {
        HttpResponse<String> response = get("/actuator/health");
        assertThat(response.statusCode()).as(response.body()).isEqualTo(200);
        JsonNode health = JSON.readTree(response.body());
        assertThat(health.path("status").asString()).isEqualTo("UP");
        JsonNode recovery = health.path("components").path("kafkaTxnRecovery");
        assertThat(recovery.path("status").asString()).isEqualTo("UP");
        assertThat(recovery.path("details").path("prefix").asString()).isEqualTo("payment-service-");
        assertThat(recovery.path("details").path("lost").asInt()).isZero();
        assertThat(health.path("components").path("db").path("details").path("database").asString())
            .isEqualTo(expectedDatabase());

        HttpResponse<String> endpoint = get("/actuator/txnsessionrecovery");
        assertThat(endpoint.statusCode()).as(endpoint.body()).isEqualTo(200);
        JsonNode status = JSON.readTree(endpoint.body());
        assertThat(status.path("prefix").asString()).isEqualTo("payment-service-");
        assertThat(status.path("lost").isArray()).isTrue();
        assertThat(status.path("lost").isEmpty()).isTrue();
        // the startup run found a fresh broker and an empty log
        assertThat(status.path("lastReport").path("failed").isEmpty()).isTrue();
        assertThat(status.path("lastReport").path("committed").isEmpty()).isTrue();
    }

    /**
     * Asserts that {@code response} is an RFC 9457 problem detail with {@code status}, answering a
     * {@code POST /payments}.
     *
     * @return its body
     */
    private static JsonNode problem(HttpResponse<String> response, int status) {
        assertThat(response.statusCode()).as(response.body()).isEqualTo(status);
        assertThat(response.headers().firstValue("Content-Type")).as(response.body())
            .hasValueSatisfying(type -> assertThat(type).startsWith("application/problem+json"));
        JsonNode body = JSON.readTree(response.body());
        assertThat(body.path("status").asInt()).as(response.body()).isEqualTo(status);
        assertThat(body.path("title").asString()).as(response.body()).isNotBlank();
        assertThat(body.path("detail").asString()).as(response.body()).isNotBlank();
        assertThat(body.path("instance").asString()).as(response.body()).isEqualTo("/payments");
        return body;
    }

    /** @return the fields named in the problem detail's {@code errors} */
    private static List<String> fields(JsonNode problem) {
        return values(problem.path("errors"), "field");
    }

    private List<PublishedEvent> eventsFor(String orderId, IsolationLevel isolation) {
        return this.events.read(isolation).stream().filter(e -> orderId.equals(e.key())).toList();
    }

    /** @return the last stable offset of one partition of the topic: what a read_committed consumer may read up to */
    private long lastStableOffset(int partition) {
        Map<String, Object> configs = new HashMap<>(this.consumerFactory.getConfigurationProperties());
        configs.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        configs.remove(ConsumerConfig.GROUP_ID_CONFIG);
        try (Consumer<String, String> consumer = new KafkaConsumer<>(configs, new StringDeserializer(),
                new StringDeserializer())) {
            TopicPartition tp = new TopicPartition(PaymentServiceApplication.PAYMENT_CAPTURED, partition);
            Long end = consumer.endOffsets(List.of(tp)).get(tp);
            return end == null ? -1 : end;
        }
    }

    private int rowsFor(String orderId) {
        Integer rows = this.jdbc.queryForObject("SELECT COUNT(*) FROM payments WHERE order_id = ?", Integer.class,
                orderId);
        return rows == null ? -1 : rows;
    }

    private int rowCount() {
        Integer rows = this.jdbc.queryForObject("SELECT COUNT(*) FROM payments", Integer.class);
        return rows == null ? -1 : rows;
    }

    private int decisionRows() {
        Integer rows = this.jdbc.queryForObject("SELECT COUNT(*) FROM kafka_txn_decision_log", Integer.class);
        return rows == null ? -1 : rows;
    }

    private static String newOrderId() {
        return "o-" + UUID.randomUUID().toString().substring(0, 8);
    }

    private static String body(String orderId, long amountCents) {
        return "{\"orderId\":\"" + orderId + "\",\"amountCents\":" + amountCents + "}";
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
