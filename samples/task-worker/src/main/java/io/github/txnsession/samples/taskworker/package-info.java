/**
 * Sample application: a share-group task worker (a Kafka queue, KIP-932). Each task inserts a row into
 * {@code task_results} with {@code JdbcTemplate} and publishes a {@code task-events} record with {@code KafkaTemplate},
 * in one transaction of Boot's own JDBC transaction manager with the Kafka session enlisted (two-phase commit); the
 * task's acknowledgement applies only after both committed. {@code POST /tasks} submits a task,
 * {@code GET /tasks/results} lists the rows.
 */
@NullMarked
package io.github.txnsession.samples.taskworker;

import org.jspecify.annotations.NullMarked;
