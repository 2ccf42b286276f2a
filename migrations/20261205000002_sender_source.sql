-- Where each transaction's sender came from (chain profiles, issue 26):
--   recovered  ECDSA over the signing payload (every row before this migration);
--   committed  the `from` an unsigned type's hash commits to (OP Stack and
--              Scroll 0x7e, Arbitrum 0x64-0x69), checked once the hash and
--              the block are;
--   none       a system transaction with no sender (Polygon state-sync,
--              Arbitrum's internal 0x6a): sender is NULL, error says why;
--   reported   the node's `from`, which nothing in the block lets us check
--              (zkSync 0x71/0xff, Arbitrum Classic 0x78).
-- A constant default fills existing rows without rewriting them.
ALTER TABLE transactions
    ADD COLUMN sender_source TEXT NOT NULL DEFAULT 'recovered'
        CHECK (sender_source IN ('recovered', 'committed', 'none', 'reported'));
ALTER TABLE transactions ALTER COLUMN sender_source DROP DEFAULT;

-- OP Stack deposits (type 0x7e), as their hash commits to them: the L1
-- event they come from, the ETH minted on L2, and whether it is a system
-- deposit (pre-Regolith). NULL for every other transaction.
ALTER TABLE transactions
    ADD COLUMN source_hash BYTEA,
    ADD COLUMN mint NUMERIC(78, 0),
    ADD COLUMN is_system_tx BOOLEAN;
