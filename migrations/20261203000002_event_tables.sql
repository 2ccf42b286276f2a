-- Decoded event tables ([[events]] in the config) are created at start by
-- the indexer, one per event; this records which signature each was created
-- for, so a changed signature is refused instead of decoded into the wrong
-- columns.
CREATE TABLE event_tables (
    name       TEXT PRIMARY KEY,
    signature  TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
