-- Decision log of kafka-txn-session's JDBC two-phase commit (DecisionLog), for H2.
-- One row per transactional id whose Kafka transaction is prepared and whose database transaction committed the
-- decision to commit it. Rows left by a crash are all that recovery needs.
-- Idempotent: creates the table if it is missing and migrates a table of an earlier version; safe on every start.
CREATE TABLE IF NOT EXISTS kafka_txn_decision_log (
    transactional_id VARCHAR(512) NOT NULL PRIMARY KEY,
    producer_id      BIGINT       NOT NULL,
    producer_epoch   SMALLINT     NOT NULL,
    -- the coordinator's start time of the prepared transaction: with producer id and epoch it names exactly one
    -- transaction (NULL only in rows written before this column existed)
    txn_start_ms     BIGINT,
    decided_at       TIMESTAMP    NOT NULL
);
-- Migration of a table created before txn_start_ms existed:
ALTER TABLE kafka_txn_decision_log ADD COLUMN IF NOT EXISTS txn_start_ms BIGINT;
