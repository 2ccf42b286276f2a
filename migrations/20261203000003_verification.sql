-- How each block was verified before it was stored (`verify.level`):
-- 'full' (recomputed: transaction hashes, roots, bloom, header hash, parent
-- link) or 'off' (stored as the node sent it). NULL: stored by a version
-- that did not verify.
ALTER TABLE blocks ADD COLUMN verified TEXT CHECK (verified IN ('full', 'off'));

-- The trusted blocks (given, or a built-in genesis) the stored chain has
-- been linked to by parent hashes; `status` shows what links to them.
CREATE TABLE trust_anchors (
    number   BIGINT      PRIMARY KEY,
    hash     BYTEA       NOT NULL,
    origin   TEXT        NOT NULL,
    added_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
