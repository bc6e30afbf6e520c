package io.github.txnsession.samples.taskworker;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import io.github.txnsession.samples.support.EmbeddedKafkaConfiguration;
import io.github.txnsession.spring.SessionShareListenerContainer;
import io.github.txnsession.spring.ShareDeadLetterHandler;
import io.github.txnsession.spring.TransactionalConsumerFactory;
import org.apache.kafka.clients.admin.AdminClient;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;

import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.kafka.core.KafkaAdmin;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.transaction.PlatformTransactionManager;

/**
 * The task worker. Run it with {@code ./mvnw -pl samples/task-worker -am spring-boot:run}: H2 in memory and, as no
 * {@code spring.kafka.bootstrap-servers} is set, an embedded Kafka broker. {@code kafka.txn-session.jdbc.enabled=true}
 * (application.properties) keeps Boot's JDBC transaction manager and enlists the Kafka sessions in its transactions;
 * the {@link SessionShareListenerContainer} runs each poll's tasks in such a transaction.
 */
@SpringBootApplication(proxyBeanMethods = false)
@Import(EmbeddedKafkaConfiguration.class)
public class TaskWorkerApplication {

    /** The queue: a topic read by the share group. */
    public static final String TASKS = "tasks";
    /** One event per task done, keyed by task id. */
    public static final String TASK_EVENTS = "task-events";
    /** Where tasks that failed on their last allowed delivery go ({@link ShareDeadLetterHandler#toTopic}). */
    public static final String DEAD_TASKS = TASKS + "-dlt";

    public static void main(String[] args) {
        SpringApplication.run(TaskWorkerApplication.class, args);
    }

    @Bean
    NewTopic tasksTopic() {
        return new NewTopic(TASKS, 3, (short) 1);
    }

    @Bean
    NewTopic taskEventsTopic() {
        return new NewTopic(TASK_EVENTS, 3, (short) 1);
    }

    @Bean
    NewTopic deadTasksTopic() {
        return new NewTopic(DEAD_TASKS, 1, (short) 1);
    }

    /**
     * The worker. Its transactions are those of the application's own transaction manager (Boot's JDBC one): the
     * starter enlists a Kafka session in each, so the row, the event and the acknowledgement go together.
     */
    @Bean
    SessionShareListenerContainer<String, String> taskWorkers(TransactionalConsumerFactory consumers,
            PlatformTransactionManager transactionManager, Tasks tasks, KafkaTemplate<Object, Object> template,
            KafkaAdmin admin, @Value("${task-worker.group}") String group,
            @Value("${task-worker.concurrency}") int concurrency,
            @Value("${task-worker.max-deliveries}") int maxDeliveries) throws Exception {
        readFromTheStart(admin, group);
        SessionShareListenerContainer<String, String> container = new SessionShareListenerContainer<>("task-worker",
                consumers, transactionManager, group, List.of(TASKS), StringDeserializer::new,
                StringDeserializer::new, tasks::handle);
        container.setConcurrency(concurrency);
        container.setPollTimeout(Duration.ofMillis(500));
        container.setDeadLetterHandler(maxDeliveries, ShareDeadLetterHandler.toTopic(template));
        return container;
    }

    /** A new share group starts at the latest record by default; this one takes tasks submitted before it started. */
    private static void readFromTheStart(KafkaAdmin admin, String group) throws Exception {
        try (AdminClient client = AdminClient.create(admin.getConfigurationProperties())) {
            client.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, group),
                    List.of(new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"),
                            AlterConfigOp.OpType.SET))))
                .all().get(30, TimeUnit.SECONDS);
        }
    }
}
