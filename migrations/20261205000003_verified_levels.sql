-- The levels a chain's profile can reach (issue 26), beside 'full' and
-- 'off': 'header' (the header hash and parent links, not every root or
-- transaction hash: pre-Bedrock OP Mainnet, Arbitrum Classic, a block with
-- a type whose hash cannot be rebuilt) and 'links' (parent links, not the
-- header hash: zkSync). Existing rows already satisfy the wider check.
ALTER TABLE blocks DROP CONSTRAINT IF EXISTS blocks_verified_check;
ALTER TABLE blocks ADD CONSTRAINT blocks_verified_check
    CHECK (verified IN ('full', 'header', 'links', 'off'));
