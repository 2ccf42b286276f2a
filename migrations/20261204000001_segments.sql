-- Leased backfill segments (index.segment_blocks): several processes share a
-- range by leasing one segment at a time with FOR UPDATE SKIP LOCKED. A
-- segment's blocks commit together with its next_block (and 'done' at its
-- end), so a process that takes an expired lease over resumes exactly where
-- the last writer stopped.
CREATE TABLE segments (
    first_block BIGINT PRIMARY KEY,
    last_block  BIGINT NOT NULL,
    -- The first block not yet committed.
    next_block  BIGINT NOT NULL,
    state       TEXT NOT NULL DEFAULT 'free' CHECK (state IN ('free', 'leased', 'done')),
    -- Who leased it last ("host:pid:nonce"), and until when.
    owner       TEXT,
    leased_at   TIMESTAMPTZ,
    expires_at  TIMESTAMPTZ,
    done_at     TIMESTAMPTZ,
    CHECK (first_block <= last_block),
    CHECK (next_block BETWEEN first_block AND last_block + 1)
);
CREATE INDEX segments_open ON segments (first_block) WHERE state <> 'done';
