-- Whether each EIP-7702 authorization could take effect by the rules that
-- need no state (chain id 0 or the chain's own, nonce below 2^64-1, s at
-- most n/2, yParity 0 or 1, an authority recovered): the chain skips a
-- tuple that fails one, yet includes its transaction. invalid_reason says
-- which rule failed. The authority's nonce and code need state: a valid
-- tuple may still have been skipped.
-- Rows stored before this migration keep NULL (not checked: s was not
-- stored); re-indexing their blocks fills them.
ALTER TABLE authorizations
    ADD COLUMN valid BOOLEAN,
    ADD COLUMN invalid_reason TEXT,
    ADD CONSTRAINT authorizations_invalid_reason_check
        CHECK (valid IS NULL OR valid = (invalid_reason IS NULL));
