-- Decision log of kafka-txn-session's JDBC two-phase commit (DecisionLog), for MySQL 5.7.7 or later and MariaDB
-- 10.2.2 or later (both use this script).
-- One row per transactional id whose Kafka transaction is prepared and whose database transaction committed the
-- decision to commit it. Rows left by a crash are all that recovery needs.
-- Idempotent: creates the table if it is missing and migrates a table of an earlier version; safe on every start.
-- ENGINE=InnoDB: the row must commit or roll back with the application's own data (MyISAM has no transactions).
-- VARCHAR(512) as primary key: up to 2048 bytes in utf8mb4, within InnoDB's 3072-byte index limit (DYNAMIC rows).
-- DATETIME(6), not TIMESTAMP: a MySQL TIMESTAMP column may get ON UPDATE CURRENT_TIMESTAMP and ends in 2038.
CREATE TABLE IF NOT EXISTS kafka_txn_decision_log (
    transactional_id VARCHAR(512) NOT NULL PRIMARY KEY,
    producer_id      BIGINT       NOT NULL,
    producer_epoch   SMALLINT     NOT NULL,
    -- the coordinator's start time of the prepared transaction: with producer id and epoch it names exactly one
    -- transaction (NULL only in rows written before this column existed)
    txn_start_ms     BIGINT       NULL,
    decided_at       DATETIME(6)  NOT NULL
) ENGINE=InnoDB;
-- Migration of a table created before txn_start_ms existed. MySQL has no ADD COLUMN IF NOT EXISTS: the statement is
-- chosen from information_schema and run as a prepared statement ('SELECT 1' when the column is there already).
SET @kafka_txn_session_ddl = (SELECT IF(COUNT(*) = 0,
        'ALTER TABLE kafka_txn_decision_log ADD COLUMN txn_start_ms BIGINT NULL', 'SELECT 1')
    FROM information_schema.columns
    WHERE table_schema = DATABASE() AND table_name = 'kafka_txn_decision_log' AND column_name = 'txn_start_ms');
PREPARE kafka_txn_session_stmt FROM @kafka_txn_session_ddl;
EXECUTE kafka_txn_session_stmt;
DEALLOCATE PREPARE kafka_txn_session_stmt;
