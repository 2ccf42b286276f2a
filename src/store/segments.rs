//! The `segments` table: range leases for backfills run by several
//! processes against one database (`index.segment_blocks`). PostgreSQL is
//! the coordinator: a segment is leased with `FOR UPDATE SKIP LOCKED`, a
//! lease lives until `expires_at` unless renewed, and every write into a
//! segment locks its row, checks the lease is still the writer's and
//! commits the segment's progress with the blocks. When a segment
//! completes, the checkpoint moves to the top of the done segments that are
//! contiguous from the lowest one.
//!
//! It must not decide what to index (that is `pipeline::leased`'s), nor
//! touch block rows except in [`Store::redo_segment`], which deletes one
//! segment's blocks through the table descriptions.

use std::time::Duration;

use sqlx::{Postgres, Row, Transaction};

use super::{Result, Store, StoreError};
use crate::sink::{Segment, SegmentCounts};

/// Serialises segment completions, so that two processes finishing
/// neighbouring segments at once still move the checkpoint over both (the
/// store makes the key its schema's own).
pub(super) const COMPLETION_LOCK_KEY: i64 = 0x5e4d_e21d_e7e2;

/// Serialises planning, so that processes started together cut a range
/// into segments once.
const PLAN_LOCK_KEY: i64 = 0x5e4d_e21d_e7e5;

/// A segment this process writes into: its first block and the owner name
/// the lease was taken with.
#[derive(Debug, Clone)]
pub struct Lease {
    pub owner: String,
    pub first: u64,
}

impl Lease {
    /// In a write's transaction, before anything is written: locks the
    /// segment's row (a takeover waits for this write) and checks that the
    /// lease is still ours and that the write starts at or below its
    /// committed progress (above it, acknowledged commits were lost).
    pub(super) async fn hold(&self, tx: &mut Transaction<'_, Postgres>, at: u64) -> Result<()> {
        let row: Option<(i64,)> = sqlx::query_as(
            "SELECT next_block FROM segments
             WHERE first_block = $1 AND owner = $2 AND state = 'leased' FOR UPDATE",
        )
        .bind(self.first as i64)
        .bind(&self.owner)
        .fetch_optional(&mut **tx)
        .await?;
        let Some((next,)) = row else {
            return Err(StoreError::LeaseLost { first: self.first });
        };
        if at > next as u64 {
            return Err(StoreError::SegmentGap {
                first: self.first,
                next: next as u64,
                at,
            });
        }
        Ok(())
    }

    /// In the same transaction, after the blocks up to `last`: records the
    /// progress; at the segment's end marks it done and moves the
    /// checkpoint, under advisory lock `completion_key`.
    pub(super) async fn advance(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        last: u64,
        completion_key: i64,
    ) -> Result<()> {
        let done: bool = sqlx::query_scalar(
            "UPDATE segments
             SET next_block = GREATEST(next_block, $2 + 1),
                 state = CASE WHEN $2 >= last_block THEN 'done' ELSE state END,
                 done_at = CASE WHEN $2 >= last_block THEN now() ELSE done_at END
             WHERE first_block = $1
             RETURNING state = 'done'",
        )
        .bind(self.first as i64)
        .bind(last as i64)
        .fetch_one(&mut **tx)
        .await?;
        if done {
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(completion_key)
                .execute(&mut **tx)
                .await?;
            move_checkpoint(tx).await?;
        }
        Ok(())
    }
}

/// Moves the checkpoint (never down) to the last block of the done
/// segments contiguous from the lowest segment.
async fn move_checkpoint(tx: &mut Transaction<'_, Postgres>) -> Result<()> {
    let rows: Vec<(i64, i64, bool)> = sqlx::query_as(
        "SELECT first_block, last_block, state = 'done' FROM segments ORDER BY first_block",
    )
    .fetch_all(&mut **tx)
    .await?;
    let mut top: Option<i64> = None;
    for (first, last, done) in rows {
        if !done || top.is_some_and(|t| first != t + 1) {
            break;
        }
        top = Some(last);
    }
    let Some(top) = top else { return Ok(()) };
    let hash: Option<Vec<u8>> = sqlx::query_scalar("SELECT hash FROM blocks WHERE number = $1")
        .bind(top)
        .fetch_optional(&mut **tx)
        .await?;
    match hash {
        Some(hash) => super::raise_checkpoint(tx, top as u64, &hash).await,
        None => Ok(()),
    }
}

/// Cuts `first..=last` into segments that end at multiples of `size` (less
/// one), so that runs over different ranges cut alike.
fn cut(first: u64, last: u64, size: u64, into: &mut Vec<(u64, u64)>) {
    let mut at = first;
    while at <= last {
        let end = (at / size + 1)
            .saturating_mul(size)
            .saturating_sub(1)
            .min(last);
        into.push((at, end));
        match end.checked_add(1) {
            Some(n) => at = n,
            None => break,
        }
    }
}

/// Splits the free segment that holds both `edge - 1` and `edge`, if any,
/// into one below `edge` and one from it (each keeping the progress that
/// lies in it; the lower one done when all its blocks are written).
async fn split_free_segment(tx: &mut Transaction<'_, Postgres>, edge: u64) -> Result<()> {
    if edge == 0 {
        return Ok(());
    }
    let row: Option<(i64, i64, i64)> = sqlx::query_as(
        "SELECT first_block, last_block, next_block FROM segments
         WHERE first_block < $1 AND last_block >= $1
           AND (state = 'free' OR (state = 'leased' AND expires_at < now()))
         FOR UPDATE",
    )
    .bind(edge as i64)
    .fetch_optional(&mut **tx)
    .await?;
    let Some((first, last, next)) = row else {
        return Ok(());
    };
    let edge = edge as i64;
    sqlx::query(
        "UPDATE segments
         SET last_block = $2 - 1, next_block = LEAST(next_block, $2),
             state = CASE WHEN next_block >= $2 THEN 'done' ELSE 'free' END,
             done_at = CASE WHEN next_block >= $2 THEN now() END,
             owner = NULL, expires_at = NULL
         WHERE first_block = $1",
    )
    .bind(first)
    .bind(edge)
    .execute(&mut **tx)
    .await?;
    sqlx::query("INSERT INTO segments (first_block, last_block, next_block) VALUES ($1, $2, $3)")
        .bind(edge)
        .bind(last)
        .bind(next.max(edge))
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The checkpoint, when every block from `from` up to it is stored: the
/// blocks a run over a range from `from` need not index again.
async fn stored_through_checkpoint(
    tx: &mut Transaction<'_, Postgres>,
    from: u64,
) -> Result<Option<u64>> {
    let checkpoint: Option<i64> = sqlx::query_scalar("SELECT block_number FROM checkpoint")
        .fetch_optional(&mut **tx)
        .await?;
    let Some(c) = checkpoint.filter(|&c| c >= from as i64) else {
        return Ok(None);
    };
    let stored: i64 =
        sqlx::query_scalar("SELECT count(*) FROM blocks WHERE number BETWEEN $1 AND $2")
            .bind(from as i64)
            .bind(c)
            .fetch_one(&mut **tx)
            .await?;
    Ok((stored == c - from as i64 + 1).then_some(c as u64))
}

/// After a rollback to `ancestor` (same transaction): segments above it are
/// open again from the block after it.
pub(super) async fn reopen_above(tx: &mut Transaction<'_, Postgres>, ancestor: u64) -> Result<()> {
    sqlx::query(
        "UPDATE segments
         SET next_block = GREATEST(first_block, $1 + 1),
             state = CASE WHEN state = 'done' THEN 'free' ELSE state END,
             done_at = NULL
         WHERE last_block > $1 AND next_block > $1 + 1",
    )
    .bind(ancestor as i64)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// A row of `segments`, for `status`.
#[derive(Debug, Clone)]
pub struct SegmentRow {
    pub first: u64,
    pub last: u64,
    pub next: u64,
    pub state: String,
    pub owner: Option<String>,
    /// Seconds since it was leased, and until the lease expires (negative:
    /// expired).
    pub leased_for_s: Option<f64>,
    pub expires_in_s: Option<f64>,
}

impl Store {
    /// Cuts the blocks of `from..=to` that no segment holds yet into new
    /// segments of `size` blocks (aligned to multiples of it), under a lock
    /// so that processes starting together plan once: a segment, once
    /// planned, keeps its bounds whatever size a later run asks for, so
    /// runs with other sizes or ranges never lease the same blocks twice.
    /// A free segment that reaches outside the range is split at its edge,
    /// so that this run can lease the part inside. New segments up to the
    /// checkpoint are done when every block from `from` to it is stored (a
    /// database indexed before without segments is not indexed again).
    /// Then every block of the range lies in a segment this run can lease
    /// or in a done one, or the error says which segment holds it.
    pub async fn plan_segments(&self, from: u64, to: u64, size: u64) -> Result<()> {
        // Partitions first: creating one while other processes write would
        // wait for their transactions.
        self.ensure_partitions(from, to).await?;
        let size = size.max(1);
        let mut tx = self.pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(self.lock_key(PLAN_LOCK_KEY))
            .execute(&mut *tx)
            .await?;
        for edge in [from, to + 1] {
            split_free_segment(&mut tx, edge).await?;
        }
        let held: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT first_block, last_block FROM segments
             WHERE last_block >= $1 AND first_block <= $2 ORDER BY first_block",
        )
        .bind(from as i64)
        .bind(to as i64)
        .fetch_all(&mut *tx)
        .await?;
        let mut new = Vec::new();
        let mut at = from; // the lowest block no segment is known to hold
        for (first, last) in held {
            if first as u64 > at {
                cut(at, first as u64 - 1, size, &mut new);
            }
            at = at.max(last as u64 + 1);
        }
        if at <= to {
            cut(at, to, size, &mut new);
        }
        let stored_through = stored_through_checkpoint(&mut tx, from).await?;
        for (first, last) in new {
            let next = match stored_through {
                Some(c) if c >= first => (c + 1).min(last + 1),
                _ => first,
            };
            sqlx::query(
                "INSERT INTO segments (first_block, last_block, next_block, state, done_at)
                 VALUES ($1, $2, $3, CASE WHEN $3 > $2 THEN 'done' ELSE 'free' END,
                         CASE WHEN $3 > $2 THEN now() END)
                 ON CONFLICT (first_block) DO NOTHING",
            )
            .bind(first as i64)
            .bind(last as i64)
            .bind(next as i64)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        self.check_segment_cover(from, to).await
    }

    /// Every block of `from..=to` lies in a done segment or in one inside
    /// the range (only those are leased by a run over it), or a
    /// [`StoreError::SegmentStraddles`] that names the first block that
    /// does not and the segment that holds it: a run never reports a range
    /// complete with blocks left out.
    async fn check_segment_cover(&self, from: u64, to: u64) -> Result<()> {
        let inside: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT first_block, last_block FROM segments
             WHERE (first_block >= $1 AND last_block <= $2)
                OR (state = 'done' AND last_block >= $1 AND first_block <= $2)
             ORDER BY first_block",
        )
        .bind(from as i64)
        .bind(to as i64)
        .fetch_all(&self.pool)
        .await?;
        let mut next = from; // the lowest block not yet known to be covered
        let mut gap = None;
        for (first, last) in inside {
            if first as u64 > next {
                gap = Some((next, first as u64 - 1));
                break;
            }
            next = next.max(last as u64 + 1);
        }
        if gap.is_none() && next <= to {
            gap = Some((next, to));
        }
        let Some((gap_first, gap_last)) = gap else {
            return Ok(());
        };
        let holder: Option<(i64, i64, Option<String>)> = sqlx::query_as(
            "SELECT first_block, last_block, owner FROM segments
             WHERE first_block <= $1 AND last_block >= $1 ORDER BY first_block LIMIT 1",
        )
        .bind(gap_first as i64)
        .fetch_optional(&self.pool)
        .await?;
        let (first, last, owner) = holder.map_or((gap_first, gap_last, None), |(f, l, o)| {
            (f as u64, l as u64, o)
        });
        Err(StoreError::SegmentStraddles {
            owner: owner.unwrap_or_else(|| "another process".to_owned()),
            from,
            to,
            gap_first,
            gap_last,
            first,
            last,
            from_hint: from.min(first),
            to_hint: to.max(last),
        })
    }

    /// Leases the lowest segment inside `from..=to` that is free, whose
    /// lease expired, or whose owner is gone (the advisory lock its
    /// `owner_key` names is held by no session: the process died and its
    /// connection closed), or that is `owner`'s own but not among `held`
    /// (leased by a call whose answer was lost with its connection: no one
    /// else would take it over, as `owner` renews and its key lives), to
    /// `owner`, who holds `owner_key`.
    pub async fn lease_segment(
        &self,
        from: u64,
        to: u64,
        owner: &str,
        owner_key: i64,
        lease: Duration,
        held: &[u64],
    ) -> Result<Option<Segment>> {
        let held: Vec<i64> = held.iter().map(|&f| f as i64).collect();
        let row = sqlx::query(
            "WITH pick AS (
                 SELECT first_block, CASE WHEN state = 'leased' THEN owner END AS was
                 FROM segments s
                 WHERE first_block >= $1 AND last_block <= $2
                   AND (state = 'free'
                        OR (state = 'leased'
                            AND ((owner = $3 AND NOT first_block = ANY($6))
                                 OR expires_at < now()
                                 OR (owner_key IS NOT NULL AND NOT EXISTS (
                                     SELECT 1 FROM pg_locks l
                                     WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                                       AND l.database = (SELECT oid FROM pg_database
                                                         WHERE datname = current_database())
                                       AND l.classid::text::int8 = (s.owner_key >> 32) & 4294967295
                                       AND l.objid::text::int8 = s.owner_key & 4294967295)))))
                 ORDER BY first_block LIMIT 1
                 FOR UPDATE SKIP LOCKED)
             UPDATE segments s
             SET state = 'leased', owner = $3, owner_key = $5, leased_at = now(),
                 expires_at = now() + $4 * interval '1 millisecond'
             FROM pick WHERE s.first_block = pick.first_block
             RETURNING s.first_block, s.last_block, s.next_block, pick.was",
        )
        .bind(from as i64)
        .bind(to as i64)
        .bind(owner)
        .bind(lease.as_millis() as f64)
        .bind(owner_key)
        .bind(&held)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|r| Segment {
            first: r.get::<i64, _>(0) as u64,
            last: r.get::<i64, _>(1) as u64,
            next: r.get::<i64, _>(2) as u64,
            taken_from: r.get(3),
        }))
    }

    pub async fn release_segment(&self, first: u64, owner: &str) -> Result<()> {
        sqlx::query(
            "UPDATE segments SET state = 'free', expires_at = NULL
             WHERE first_block = $1 AND owner = $2 AND state = 'leased'",
        )
        .bind(first as i64)
        .bind(owner)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Extends `owner`'s leases; the number extended.
    pub async fn renew_leases(&self, owner: &str, lease: Duration) -> Result<u64> {
        let r = sqlx::query(
            "UPDATE segments SET expires_at = now() + $2 * interval '1 millisecond'
             WHERE owner = $1 AND state = 'leased'",
        )
        .bind(owner)
        .bind(lease.as_millis() as f64)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected())
    }

    pub async fn segment_counts(&self, from: u64, to: u64) -> Result<SegmentCounts> {
        let (free, leased, done, left): (i64, i64, i64, i64) = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE state = 'free'),
                    count(*) FILTER (WHERE state = 'leased'),
                    count(*) FILTER (WHERE state = 'done'),
                    coalesce(sum(last_block + 1 - next_block) FILTER (WHERE state <> 'done'), 0)::int8
             FROM segments WHERE first_block >= $1 AND last_block <= $2",
        )
        .bind(from as i64)
        .bind(to as i64)
        .fetch_one(&self.pool)
        .await?;
        Ok(SegmentCounts {
            free: free as u64,
            leased: leased as u64,
            done: done as u64,
            blocks_left: left as u64,
        })
    }

    pub async fn broken_segment_links(&self, from: u64, to: u64) -> Result<Vec<u64>> {
        let rows: Vec<(i64,)> = sqlx::query_as(
            "SELECT s.first_block
             FROM segments s
             JOIN segments below ON below.last_block = s.first_block - 1 AND below.state = 'done'
             JOIN blocks b ON b.number = s.first_block
             JOIN blocks p ON p.number = s.first_block - 1
             WHERE s.state = 'done' AND s.first_block > $1 AND s.last_block <= $2
               AND b.parent_hash <> p.hash
             ORDER BY s.first_block",
        )
        .bind(from as i64)
        .bind(to as i64)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|(f,)| f as u64).collect())
    }

    pub async fn redo_segment(&self, first: u64) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let row: Option<(i64, Option<Vec<u8>>)> = sqlx::query_as(
            "SELECT s.last_block, b.hash FROM segments s
             LEFT JOIN blocks b ON b.number = s.first_block
             WHERE s.first_block = $1 AND s.state = 'done' FOR UPDATE OF s",
        )
        .bind(first as i64)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((last, old_hash)) = row else {
            return Ok(()); // another process redoes it already
        };
        self.delete_blocks(&mut tx, first, last as u64).await?;
        sqlx::query(
            "UPDATE segments SET state = 'free', next_block = first_block, done_at = NULL
             WHERE first_block = $1",
        )
        .bind(first as i64)
        .execute(&mut *tx)
        .await?;
        sqlx::query("INSERT INTO reorgs (ancestor, depth, old_hash) VALUES ($1, $2, $3)")
            .bind(first as i64 - 1)
            .bind((last as u64 + 1 - first) as i32)
            .bind(old_hash.unwrap_or_default())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Every segment, for `status`.
    pub async fn segments(&self) -> Result<Vec<SegmentRow>> {
        let rows = sqlx::query(
            "SELECT first_block, last_block, next_block, state, owner,
                    extract(epoch FROM now() - leased_at)::float8,
                    extract(epoch FROM expires_at - now())::float8
             FROM segments ORDER BY first_block",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| SegmentRow {
                first: r.get::<i64, _>(0) as u64,
                last: r.get::<i64, _>(1) as u64,
                next: r.get::<i64, _>(2) as u64,
                state: r.get(3),
                owner: r.get(4),
                leased_for_s: r.get(5),
                expires_in_s: r.get(6),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::cut;

    #[test]
    fn cuts_end_at_multiples_of_the_size() {
        let mut v = Vec::new();
        cut(26, 65, 10, &mut v);
        assert_eq!(v, [(26, 29), (30, 39), (40, 49), (50, 59), (60, 65)]);
        v.clear();
        cut(0, 9, 10, &mut v);
        assert_eq!(v, [(0, 9)]);
        v.clear();
        cut(7, 7, 1, &mut v);
        assert_eq!(v, [(7, 7)]);
        v.clear();
        cut(u64::MAX - 3, u64::MAX - 1, 10_000, &mut v);
        assert_eq!(v, [(u64::MAX - 3, u64::MAX - 1)]);
    }
}
