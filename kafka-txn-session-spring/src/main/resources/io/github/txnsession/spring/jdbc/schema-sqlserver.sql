-- Decision log of kafka-txn-session's JDBC two-phase commit (DecisionLog), for SQL Server 2016 or later and Azure
-- SQL Database.
-- One row per transactional id whose Kafka transaction is prepared and whose database transaction committed the
-- decision to commit it. Rows left by a crash are all that recovery needs.
-- Idempotent: creates the table if it is missing and migrates a table of an earlier version; safe on every start.
-- DATETIME2, not TIMESTAMP: in SQL Server TIMESTAMP is ROWVERSION, a row version counter and no point in time.
-- NVARCHAR: the JDBC driver sends strings as Unicode by default; a NONCLUSTERED primary key allows its 1024 bytes
-- (a clustered index key is limited to 900 bytes).
IF OBJECT_ID(N'kafka_txn_decision_log', N'U') IS NULL
    CREATE TABLE kafka_txn_decision_log (
        transactional_id NVARCHAR(512) NOT NULL PRIMARY KEY NONCLUSTERED,
        producer_id      BIGINT        NOT NULL,
        producer_epoch   SMALLINT      NOT NULL,
        -- the coordinator's start time of the prepared transaction: with producer id and epoch it names exactly
        -- one transaction (NULL only in rows written before this column existed)
        txn_start_ms     BIGINT        NULL,
        decided_at       DATETIME2     NOT NULL
    );
-- Migration of a table created before txn_start_ms existed:
IF COL_LENGTH(N'kafka_txn_decision_log', N'txn_start_ms') IS NULL
    ALTER TABLE kafka_txn_decision_log ADD txn_start_ms BIGINT NULL;
