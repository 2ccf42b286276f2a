-- What rollup nodes report a transaction paid for its L1 data, from its
-- receipt: l1_fee (OP Stack and Scroll `l1Fee`, wei, on top of
-- gas_used x effective_gas_price), l1_gas_used and l1_gas_price (OP Stack
-- `l1GasUsed`, `l1GasPrice`), gas_used_for_l1 (Arbitrum `gasUsedForL1`,
-- the part of gas_used that paid for L1 data). These fields are outside
-- the receipts root: nothing in a block commits to them, so they hold what
-- the node said. NULL where the chain reports none (Ethereum) and in rows
-- stored before this migration (re-indexing their blocks fills them).
ALTER TABLE transactions
    ADD COLUMN l1_fee NUMERIC(78, 0),
    ADD COLUMN l1_gas_used NUMERIC(78, 0),
    ADD COLUMN l1_gas_price NUMERIC(78, 0),
    ADD COLUMN gas_used_for_l1 BIGINT;
