-- The L1 block an Arbitrum Nitro block was sequenced against: bytes 8..16
-- of its mixHash, which the block hash commits to, stored once the block is
-- verified in full (and the node's own l1BlockNumber found equal to it).
-- NULL on other chains, on Arbitrum Classic blocks (whose mixHash holds no
-- such number), with verification off, and in rows stored before this
-- migration (re-indexing their blocks fills them).
ALTER TABLE blocks ADD COLUMN l1_block_number BIGINT;
