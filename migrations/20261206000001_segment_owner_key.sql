-- A leased segment names the advisory lock its owner holds for as long as
-- it lives (on the connection that holds the writer lock): a lease whose
-- owner's lock is gone (the process was killed, its connection closed) is
-- taken over at once instead of when it expires.
ALTER TABLE segments ADD COLUMN owner_key BIGINT;
