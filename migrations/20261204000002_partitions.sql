-- The big tables (transactions, authorizations, logs) partitioned by block
-- range: 1,000,000 blocks per partition, named <table>_p<N> for blocks
-- N*1000000 ..= N*1000000+999999 (the store creates them as blocks arrive:
-- `store::partitions`). A rollback or re-index touches the partitions of
-- its blocks only, and each partition's indexes stay small. Existing rows
-- are moved over; the lookup indexes are built again on the new tables.
DROP VIEW logs_with_sender;

DO $$
DECLARE
    t TEXT;
    p BIGINT;
BEGIN
    DROP INDEX IF EXISTS transactions_sender_idx, transactions_hash_idx,
        authorizations_authority_idx, logs_address_topic0_idx, logs_topic0_idx;
    FOREACH t IN ARRAY ARRAY['transactions', 'authorizations', 'logs'] LOOP
        EXECUTE format('ALTER TABLE %I RENAME TO %I', t, t || '_unpartitioned');
        EXECUTE format('ALTER INDEX %I RENAME TO %I', t || '_pkey', t || '_unpartitioned_pkey');
        EXECUTE format(
            'CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE (block_number)',
            t, t || '_unpartitioned');
        FOR p IN EXECUTE format('SELECT DISTINCT block_number / 1000000 FROM %I', t || '_unpartitioned') LOOP
            EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%s) TO (%s)',
                t || '_p' || p, t, p * 1000000, (p + 1) * 1000000);
        END LOOP;
        EXECUTE format('INSERT INTO %I SELECT * FROM %I', t, t || '_unpartitioned');
        EXECUTE format('DROP TABLE %I', t || '_unpartitioned');
    END LOOP;
END $$;

ALTER TABLE transactions ADD PRIMARY KEY (block_number, tx_index);
ALTER TABLE authorizations ADD PRIMARY KEY (block_number, tx_index, auth_index);
ALTER TABLE logs ADD PRIMARY KEY (block_number, log_index);
CREATE INDEX transactions_sender_idx ON transactions (sender);
CREATE INDEX transactions_hash_idx ON transactions (hash);
CREATE INDEX authorizations_authority_idx ON authorizations (authority);
CREATE INDEX logs_address_topic0_idx ON logs (address, topic0);
CREATE INDEX logs_topic0_idx ON logs (topic0);

CREATE VIEW logs_with_sender AS
SELECT l.*, t.sender, t.hash AS tx_hash, t.status
FROM logs l
JOIN transactions t ON t.block_number = l.block_number AND t.tx_index = l.tx_index;
