-- Receipts and event logs. Transactions gain what their receipts say
-- (status, gas used, effective gas price, created contract; NULL when
-- receipts are not fetched, and status NULL before Byzantium, whose
-- receipts carry a state root) and what the transaction itself says that
-- users filter by (gas limit and prices, the 4-byte selector of input).
ALTER TABLE transactions
    ADD COLUMN status                   SMALLINT,
    ADD COLUMN gas_used                 BIGINT,
    ADD COLUMN effective_gas_price      NUMERIC(78, 0),
    ADD COLUMN contract_address         BYTEA,
    ADD COLUMN gas_limit                NUMERIC(78, 0),
    ADD COLUMN gas_price                NUMERIC(78, 0),
    ADD COLUMN max_fee_per_gas          NUMERIC(78, 0),
    ADD COLUMN max_priority_fee_per_gas NUMERIC(78, 0),
    ADD COLUMN input_selector           BYTEA;

-- One row per event log, keyed by its place in the block. Unused topics
-- are NULL.
CREATE TABLE logs (
    block_number BIGINT NOT NULL,
    log_index    INT    NOT NULL,
    tx_index     INT    NOT NULL,
    address      BYTEA  NOT NULL,
    topic0       BYTEA,
    topic1       BYTEA,
    topic2       BYTEA,
    topic3       BYTEA,
    data         BYTEA  NOT NULL,
    PRIMARY KEY (block_number, log_index)
);
CREATE INDEX logs_address_topic0_idx ON logs (address, topic0);
CREATE INDEX logs_topic0_idx ON logs (topic0);

-- Every log with the recovered sender of the transaction that emitted it.
CREATE VIEW logs_with_sender AS
SELECT l.*, t.sender, t.hash AS tx_hash, t.status
FROM logs l
JOIN transactions t ON t.block_number = l.block_number AND t.tx_index = l.tx_index;
