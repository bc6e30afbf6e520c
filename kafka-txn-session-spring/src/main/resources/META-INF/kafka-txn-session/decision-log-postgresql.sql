-- Decision log of kafka-txn-session's JDBC two-phase commit (JdbcKafkaTransactionManager).
-- One row per transactional id whose Kafka transaction is prepared and whose database transaction committed the
-- decision to commit it. Rows left by a crash are all that recovery needs.
CREATE TABLE IF NOT EXISTS kafka_txn_decision_log (
    transactional_id VARCHAR(512) NOT NULL PRIMARY KEY,
    producer_id      BIGINT       NOT NULL,
    producer_epoch   SMALLINT     NOT NULL,
    decided_at       TIMESTAMP    NOT NULL
);
