package io.github.txnsession.samples.taskworker;

import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;

import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.stereotype.Service;
import org.springframework.transaction.annotation.Transactional;

/**
 * The tasks: submitting one, doing one, and what is done. A task whose payload contains {@code fail} fails on every
 * delivery (it ends in {@value TaskWorkerApplication#DEAD_TASKS}); one containing {@code flaky} fails on its first.
 *
 * <p>The {@code task_results} row is the task's ledger: it commits with the event (two-phase), so a task delivered
 * again whose row exists was done, and is only acknowledged. That closes the window the share container leaves open
 * (a crash between the commit and the acknowledgement) without a Kafka ledger.
 */
@Service
public class Tasks {

    private final JdbcTemplate jdbc;
    private final KafkaTemplate<Object, Object> kafka;

    Tasks(JdbcTemplate jdbc, KafkaTemplate<Object, Object> kafka) {
        this.jdbc = jdbc;
        this.kafka = kafka;
    }

    /**
     * Puts a task on the queue (a Kafka transaction of its own, enlisted in the database transaction).
     *
     * @param id the task's id
     * @param payload what to do
     */
    @Transactional
    public void submit(String id, String payload) {
        this.kafka.send(TaskWorkerApplication.TASKS, id, payload);
    }

    /**
     * Does one task, inside the container's transaction: a row and an event, committed together with the task's
     * acknowledgement, or none of the three.
     *
     * @param task the task
     * @return ACCEPT
     */
    AcknowledgeType handle(ConsumerRecord<String, String> task) {
        int delivery = task.deliveryCount().map(Short::intValue).orElse(1);
        if (delivery > 1 && isDone(task.key())) {
            // delivered again after a crash between the commit and the acknowledgement: the row (and so, by the
            // two-phase commit, the event) committed already. Acknowledge, and do not do it twice.
            return AcknowledgeType.ACCEPT;
        }
        String result = "done: " + task.value();
        this.jdbc.update("INSERT INTO task_results (task_id, result, delivery) VALUES (?, ?, ?)", task.key(), result,
                delivery);
        this.kafka.send(TaskWorkerApplication.TASK_EVENTS, task.key(), result);
        if (task.value().contains("fail") || (task.value().contains("flaky") && delivery == 1)) {
            throw new IllegalStateException("task " + task.key() + " failed on delivery " + delivery);
        }
        return AcknowledgeType.ACCEPT;
    }

    private boolean isDone(String taskId) {
        Integer rows = this.jdbc.queryForObject("SELECT COUNT(*) FROM task_results WHERE task_id = ?", Integer.class,
                taskId);
        return rows != null && rows > 0;
    }

    /** @return the rows of the tasks done, by task id */
    public List<Map<String, Object>> results() {
        return this.jdbc.queryForList("SELECT task_id, result, delivery FROM task_results ORDER BY task_id");
    }
}
