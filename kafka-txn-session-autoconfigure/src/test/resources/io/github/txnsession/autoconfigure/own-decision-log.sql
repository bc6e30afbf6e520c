-- A decision log script of the application's own (kafka.txn-session.jdbc.schema), for another table name and with
-- a column of its own: the test checks that this script ran, and not the shipped one or the portable fallback.
CREATE TABLE IF NOT EXISTS own_decisions (
    transactional_id VARCHAR(512) NOT NULL PRIMARY KEY,
    producer_id      BIGINT       NOT NULL,
    producer_epoch   SMALLINT     NOT NULL,
    txn_start_ms     BIGINT,
    decided_at       TIMESTAMP    NOT NULL,
    note             VARCHAR(64)
);
