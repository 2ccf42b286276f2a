-- `logs.topic0` alone is no longer indexed by default: nothing the indexer
-- runs (the `logs` command, the README's cookbook) reads it, every query by
-- contract goes through `logs (address, topic0)`, and keeping it cost
-- PostgreSQL a B-tree insert per log (or a sort of every log after a bulk
-- load: 0.7-1.0 s per 200,000 mainnet transactions). A database that queries
-- events by topic0 across all contracts names it in the setting
-- `index.optional_indexes = ["logs_topic0_idx"]`: the next indexing run
-- builds it again and keeps it, deferred with the others in bulk loads.
DROP INDEX IF EXISTS logs_topic0_idx;
