-- The orders table, in SQL that H2 and PostgreSQL both accept. Run at every startup (spring.sql.init.mode=always).
-- The decision log table (kafka_txn_decision_log) is created by the starter, not here.
CREATE TABLE IF NOT EXISTS orders (
    id        VARCHAR(36)  NOT NULL PRIMARY KEY,
    item      VARCHAR(200) NOT NULL,
    quantity  INTEGER      NOT NULL CHECK (quantity > 0),
    placed_at TIMESTAMP    NOT NULL
);
