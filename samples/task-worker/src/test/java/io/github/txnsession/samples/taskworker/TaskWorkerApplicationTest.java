package io.github.txnsession.samples.taskworker;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

import io.github.txnsession.spring.SessionShareListenerContainer;
import io.github.txnsession.spring.ShareDeadLetterHandler;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;

import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.kafka.autoconfigure.KafkaConnectionDetails;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.http.MediaType;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.web.client.RestClient;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * The sample as {@code spring-boot:run} starts it (H2, embedded broker): tasks submitted over HTTP are each done
 * exactly once (one row, one event, seen by a {@code read_committed} reader), a task that fails once is done on its
 * second delivery, and one that always fails is dead-lettered on its last delivery with neither row nor event.
 */
@SpringBootTest(classes = TaskWorkerApplication.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@DirtiesContext
class TaskWorkerApplicationTest {

    private static final int TASKS = 30;
    private static final Set<String> FAILING = Set.of("t-07", "t-19");
    private static final Set<String> FLAKY = Set.of("t-03", "t-11", "t-23");

    @LocalServerPort
    int port;

    @Autowired
    Tasks tasks;

    @Autowired
    KafkaConnectionDetails kafka;

    @Autowired
    SessionShareListenerContainer<String, String> worker;

    @Test
    void everyTaskIsDoneExactlyOnceAndPoisonTasksAreDeadLettered() {
        RestClient http = RestClient.create("http://localhost:" + this.port);
        for (int i = 0; i < TASKS; i++) {
            String id = String.format("t-%02d", i);
            String payload = FAILING.contains(id) ? "fail" : FLAKY.contains(id) ? "flaky" : "task " + i;
            http.post().uri("/tasks").contentType(MediaType.APPLICATION_JSON)
                .body(Map.of("id", id, "payload", payload)).retrieve().toBodilessEntity();
        }
        int done = TASKS - FAILING.size();
        await().atMost(Duration.ofSeconds(90)).pollInterval(Duration.ofMillis(250))
            .until(() -> this.tasks.results().size() == done && this.worker.deadLetteredRecords() == FAILING.size());

        Map<String, Integer> deliveryById = new HashMap<>();
        this.tasks.results().forEach(row -> deliveryById.put((String) row.get("TASK_ID"),
                ((Number) row.get("DELIVERY")).intValue()));
        assertThat(deliveryById).hasSize(done).doesNotContainKeys(FAILING.toArray(String[]::new));
        FLAKY.forEach(id -> assertThat(deliveryById.get(id)).as(id).isEqualTo(2));

        List<ConsumerRecord<String, String>> events = readCommitted(TaskWorkerApplication.TASK_EVENTS);
        assertThat(events).extracting(ConsumerRecord::key).doesNotHaveDuplicates()
            .containsExactlyInAnyOrderElementsOf(deliveryById.keySet());
        List<ConsumerRecord<String, String>> dead = readCommitted(TaskWorkerApplication.DEAD_TASKS);
        assertThat(dead).extracting(ConsumerRecord::key).containsExactlyInAnyOrderElementsOf(FAILING);
        assertThat(dead).allSatisfy(r -> assertThat(new String(
                r.headers().lastHeader(ShareDeadLetterHandler.DELIVERY_COUNT).value(), StandardCharsets.UTF_8))
            .isEqualTo("3"));

        // acknowledged, rejected: nothing comes back
        await().during(Duration.ofSeconds(3)).atMost(Duration.ofSeconds(5))
            .until(() -> this.tasks.results().size() == done && this.worker.deadLetteredRecords() == FAILING.size());
        assertThat(http.get().uri("/tasks/results").retrieve().body(List.class)).hasSize(done);
    }

    private List<ConsumerRecord<String, String>> readCommitted(String topic) {
        Map<String, Object> configs = new HashMap<>();
        configs.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, String.join(",", this.kafka.getBootstrapServers()));
        configs.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        List<ConsumerRecord<String, String>> all = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(configs, new StringDeserializer(),
                new StringDeserializer())) {
            List<TopicPartition> partitions = consumer.partitionsFor(topic).stream()
                .map(p -> new TopicPartition(topic, p.partition())).collect(Collectors.toList());
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (partitions.stream().anyMatch(p -> consumer.position(p) < end.get(p))
                    && System.nanoTime() < deadline) {
                consumer.poll(Duration.ofMillis(200)).forEach(all::add);
            }
        }
        return all;
    }
}
