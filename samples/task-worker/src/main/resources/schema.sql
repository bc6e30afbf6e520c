-- One row per task done: the primary key makes a second row for a task fail, so a duplicate could not hide.
CREATE TABLE IF NOT EXISTS task_results (
    task_id VARCHAR(64) PRIMARY KEY,
    result VARCHAR(1024) NOT NULL,
    delivery INT NOT NULL
);
