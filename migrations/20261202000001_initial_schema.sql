-- The public schema of sender-indexer. Addresses and hashes are raw bytes
-- (BYTEA): query them with '\x…'::bytea and show them with encode(x, 'hex').
-- Rows are keyed by block number so a reorg rollback is an indexed range
-- delete; there are no foreign keys, to keep bulk COPY cheap.

CREATE TABLE blocks (
    number      BIGINT      PRIMARY KEY,
    hash        BYTEA       NOT NULL UNIQUE,
    parent_hash BYTEA       NOT NULL,
    timestamp   TIMESTAMPTZ NOT NULL,
    tx_count    INT         NOT NULL
);

CREATE TABLE transactions (
    block_number BIGINT        NOT NULL,
    tx_index     INT           NOT NULL,
    hash         BYTEA         NOT NULL,
    tx_type      SMALLINT      NOT NULL,
    -- Recovered from the signature; NULL only when unrecoverable (see error).
    sender       BYTEA,
    -- The `from` the node reported, and whether it equals the recovered sender
    -- (NULL when either is unknown).
    node_from    BYTEA,
    from_matches BOOLEAN,
    -- NULL for contract creations.
    to_address   BYTEA,
    nonce        BIGINT,
    value        NUMERIC(78, 0),
    -- Why the sender could not be recovered.
    error        TEXT,
    PRIMARY KEY (block_number, tx_index)
);
CREATE INDEX transactions_sender_idx ON transactions (sender);
CREATE INDEX transactions_hash_idx ON transactions (hash);

-- EIP-7702 authorizations, one row per tuple, with the recovered authority.
CREATE TABLE authorizations (
    block_number BIGINT         NOT NULL,
    tx_index     INT            NOT NULL,
    auth_index   INT            NOT NULL,
    chain_id     NUMERIC(78, 0),
    address      BYTEA,
    nonce        NUMERIC(20, 0),
    -- Recovered signer of the tuple; NULL when unrecoverable (see error).
    authority    BYTEA,
    error        TEXT,
    PRIMARY KEY (block_number, tx_index, auth_index)
);
CREATE INDEX authorizations_authority_idx ON authorizations (authority);

-- The last block the pipeline committed, written in the same database
-- transaction as the blocks themselves. One row.
CREATE TABLE checkpoint (
    id           BOOLEAN     PRIMARY KEY DEFAULT TRUE CHECK (id),
    block_number BIGINT      NOT NULL,
    block_hash   BYTEA       NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Reorgs rolled back, for operators.
CREATE TABLE reorgs (
    id          BIGSERIAL   PRIMARY KEY,
    detected_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    ancestor    BIGINT      NOT NULL,
    depth       INT         NOT NULL,
    old_hash    BYTEA       NOT NULL,
    new_hash    BYTEA
);
