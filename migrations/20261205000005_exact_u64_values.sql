-- Every stored value is the chain's value (issue 27). Two u64 fields did
-- not fit their columns and were wrapped into other numbers:
--
-- A block's timestamp is a u64 of seconds; TIMESTAMPTZ ends in the year
-- 294276 (9,224,318,015,999 s) and the old COPY wrapped anything from 2^63
-- to a negative number. timestamp_seconds holds the exact value;
-- timestamp keeps its meaning, and is NULL for a timestamp past
-- TIMESTAMPTZ's range. Rows stored before: a negative epoch can only be a
-- wrapped u64 and is unwrapped exactly; an infinite one (saturated) is
-- unknown: both columns NULL, re-index the block to fill them.
ALTER TABLE blocks
    ADD COLUMN timestamp_seconds NUMERIC(20, 0),
    ALTER COLUMN timestamp DROP NOT NULL;
UPDATE blocks SET
    timestamp_seconds = CASE
        WHEN isfinite(timestamp) AND extract(epoch FROM timestamp) >= 0
            THEN extract(epoch FROM timestamp)::numeric(20, 0)
        WHEN isfinite(timestamp)
            THEN extract(epoch FROM timestamp)::numeric(20, 0) + 18446744073709551616
    END,
    timestamp = CASE
        WHEN isfinite(timestamp) AND extract(epoch FROM timestamp) >= 0 THEN timestamp
    END;

-- A transaction's nonce may be up to 2^64-2 (EIP-2681); BIGINT stops at
-- 2^63-1 (such a transaction stopped the run). Values are unchanged.
ALTER TABLE transactions ALTER COLUMN nonce TYPE NUMERIC(20, 0);
