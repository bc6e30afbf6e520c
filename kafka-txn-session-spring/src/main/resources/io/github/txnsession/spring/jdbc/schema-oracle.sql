-- Decision log of kafka-txn-session's JDBC two-phase commit (DecisionLog), for Oracle Database 12c or later.
-- One row per transactional id whose Kafka transaction is prepared and whose database transaction committed the
-- decision to commit it. Rows left by a crash are all that recovery needs.
-- Idempotent: creates the table if it is missing and migrates a table of an earlier version; safe on every start.
-- Oracle before 23ai has no CREATE TABLE IF NOT EXISTS, so each step is a PL-SQL block that ignores exactly the
-- error saying the step was done already. The blocks contain semicolons: statements in this script end with a line
-- holding a single slash, and the starter runs it with that separator (keep it that way in a copy of this script,
-- for example in a Flyway migration, or run it in SQL*Plus or SQLcl, which read the slash the same way).
-- NUMBER(19) and NUMBER(5) hold Java long and short; VARCHAR2(512 CHAR) counts characters, not bytes.
BEGIN
    EXECUTE IMMEDIATE 'CREATE TABLE kafka_txn_decision_log ('
        || 'transactional_id VARCHAR2(512 CHAR) NOT NULL PRIMARY KEY, '
        || 'producer_id NUMBER(19) NOT NULL, '
        || 'producer_epoch NUMBER(5) NOT NULL, '
        || 'txn_start_ms NUMBER(19), '
        || 'decided_at TIMESTAMP NOT NULL)';
EXCEPTION
    WHEN OTHERS THEN
        -- ORA-00955: name is already used by an existing object
        IF SQLCODE != -955 THEN
            RAISE;
        END IF;
END;
/
-- Migration of a table created before txn_start_ms existed (the coordinator's start time of the prepared
-- transaction: with producer id and epoch it names exactly one transaction).
BEGIN
    EXECUTE IMMEDIATE 'ALTER TABLE kafka_txn_decision_log ADD (txn_start_ms NUMBER(19))';
EXCEPTION
    WHEN OTHERS THEN
        -- ORA-01430: column being added already exists in table
        IF SQLCODE != -1430 THEN
            RAISE;
        END IF;
END;
/
