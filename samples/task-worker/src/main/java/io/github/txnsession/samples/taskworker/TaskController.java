package io.github.txnsession.samples.taskworker;

import java.util.List;
import java.util.Map;

import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;

/** {@code POST /tasks {"id": "t-1", "payload": "..."}} submits a task; {@code GET /tasks/results} lists the rows. */
@RestController
class TaskController {

    private final Tasks tasks;

    TaskController(Tasks tasks) {
        this.tasks = tasks;
    }

    /** A task to submit. */
    record TaskRequest(String id, String payload) {
    }

    @PostMapping("/tasks")
    ResponseEntity<Void> submit(@RequestBody TaskRequest request) {
        if (request.id() == null || request.id().isBlank() || request.payload() == null) {
            return ResponseEntity.badRequest().build();
        }
        this.tasks.submit(request.id(), request.payload());
        return ResponseEntity.accepted().build();
    }

    @GetMapping("/tasks/results")
    List<Map<String, Object>> results() {
        return this.tasks.results();
    }
}
