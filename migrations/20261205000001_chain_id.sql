-- The chain the tables hold: the node's eth_chainId, recorded by the first
-- indexing run (one row). A later run against a node whose chain id differs
-- is refused before it writes anything, so that one database can hold
-- several chains side by side, one schema each (database.schema), without
-- a run mixing them. A database indexed before this table existed records
-- the chain id of its next run's node.
CREATE TABLE chain (
    id          BOOLEAN        PRIMARY KEY DEFAULT TRUE CHECK (id),
    -- eth_chainId is a 64-bit unsigned quantity: NUMERIC holds all of it.
    chain_id    NUMERIC(20, 0) NOT NULL CHECK (chain_id >= 0),
    recorded_at TIMESTAMPTZ    NOT NULL DEFAULT now()
);
