-- The payments table, in SQL that H2 and PostgreSQL both accept. Run at every startup (spring.sql.init.mode=always);
-- Hibernate does not touch the schema (spring.jpa.hibernate.ddl-auto=none, see application.properties).
-- The decision log table (kafka_txn_decision_log) is created by the starter, not here.
CREATE TABLE IF NOT EXISTS payments (
    id           UUID                     NOT NULL PRIMARY KEY,
    order_id     VARCHAR(64)              NOT NULL,
    amount_cents BIGINT                   NOT NULL CHECK (amount_cents > 0),
    status       VARCHAR(16)              NOT NULL,
    captured_at  TIMESTAMP WITH TIME ZONE NOT NULL,
    -- an order is paid once; checked when Hibernate flushes the INSERT, which is at commit
    CONSTRAINT payments_one_per_order UNIQUE (order_id)
);
