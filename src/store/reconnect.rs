//! The [`Sink`] an indexing run writes through: the [`Store`], holding the
//! writer lock, made to outlive the database going away.
//!
//! A statement that fails because the connection did (the server
//! restarted, crashed or shut down, the network dropped) is tried again
//! with a doubling backoff until it succeeds or `database.reconnect_budget`
//! has passed since the first failure; then the run stops with an error
//! that names the database (redacted) and says that a rerun resumes. This
//! is safe because every method of the store is whole and idempotent: a
//! write commits its blocks with the checkpoint or nothing, and writing a
//! block that is already stored with the same hash changes nothing, so a
//! commit whose answer was lost is simply found done on the next try.
//!
//! A server can also come back without commits it had acknowledged
//! (`synchronous_commit = off`, a failover to a replica that was behind).
//! Blocks written after that would leave a gap below them, so after every
//! outage the checkpoint is read first: if it lies below the last block
//! this run committed, the run stops and says so; the checkpoint and the
//! blocks are lost together, so a rerun fills the gap.
//!
//! The writer lock is a session lock on a connection of its own, and a
//! restarted server has forgotten it. So before every change (writes,
//! rollbacks, index builds) the lock's connection is checked, and taken
//! again on a new one if it died; another indexer that took it meanwhile
//! stops this one.
//!
//! It adds no SQL of its own beyond that check and knows nothing of what
//! the statements do.

use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

use super::{Lease, LockMode, Store, StoreError, WriterLock};
use crate::block::Block;
use crate::decode::B256;
use crate::sink::{Segment, SegmentCounts, Segments, Sink, Written};
use crate::verify::Anchor;

const TARGET: &str = "indexer::store";
const BACKOFF_INITIAL: Duration = Duration::from_millis(200);
const BACKOFF_MAX: Duration = Duration::from_secs(10);

pub struct Reconnecting {
    store: Store,
    lock: Mutex<Option<WriterLock>>,
    /// How the lock is held, to take it again the same way.
    mode: LockMode,
    /// This process's name in the `segments` table ("host:pid:nonce").
    owner: String,
    /// The advisory lock this process holds on the writer lock's
    /// connection while it leases segments: gone with the process, so its
    /// segments are taken over at once (a random key).
    owner_key: i64,
    /// How long a segment lease lasts unrenewed.
    lease_time: Duration,
    /// The segments this process has leased and not finished, each with
    /// its last block (one at a time today); a write goes into the one that
    /// holds its first block, and a leased backfill writes nowhere else.
    leases: std::sync::Mutex<Vec<(Lease, u64)>>,
    /// The database as it may be logged (see `redact`).
    name: String,
    budget: Duration,
    /// The checkpoint as this run left it (`None`: not written yet).
    committed: std::sync::Mutex<Option<u64>>,
}

impl Reconnecting {
    pub fn new(store: Store, lock: WriterLock, name: String, budget: Duration) -> Reconnecting {
        Reconnecting {
            store,
            mode: lock.mode(),
            lock: Mutex::new(Some(lock)),
            owner: owner_name(),
            owner_key: owner_key(),
            lease_time: Duration::from_secs(30),
            leases: std::sync::Mutex::new(Vec::new()),
            name,
            budget,
            committed: std::sync::Mutex::new(None),
        }
    }

    /// Segment leases last `lease` unless renewed.
    pub fn with_lease_time(mut self, lease: Duration) -> Reconnecting {
        self.lease_time = lease;
        self
    }

    /// This process's name in the `segments` table.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    fn leases(&self) -> std::sync::MutexGuard<'_, Vec<(Lease, u64)>> {
        self.leases.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The held lease whose segment holds block `n`.
    fn lease_for(&self, n: u64) -> Option<Lease> {
        self.leases()
            .iter()
            .find(|(l, last)| (l.first..=*last).contains(&n))
            .map(|(l, _)| l.clone())
    }

    fn forget_lease(&self, first: u64) {
        self.leases().retain(|(l, _)| l.first != first);
    }

    fn committed(&self) -> Option<u64> {
        *self.committed.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_committed(&self, n: u64) {
        *self.committed.lock().unwrap_or_else(|p| p.into_inner()) = Some(n);
    }

    /// After an outage: the database still holds what this run committed.
    async fn check_durable(&self) -> Result<(), StoreError> {
        let Some(ours) = self.committed() else {
            return Ok(());
        };
        let theirs = self.store.checkpoint().await?.map(|c| c.0);
        if theirs.is_none_or(|t| t < ours) {
            return Err(StoreError::CommitsLost {
                committed: ours,
                checkpoint: theirs,
            });
        }
        Ok(())
    }

    /// Releases the writer lock (at the end of a run).
    pub async fn release(&self) -> Result<(), StoreError> {
        match self.lock.lock().await.take() {
            Some(lock) => lock.release().await,
            None => Ok(()),
        }
    }

    /// `op` until it succeeds, fails for a reason other than the
    /// connection, or the budget is spent; `changes`: it writes, so the
    /// writer lock must be held first.
    async fn retrying<T, F, Fut>(&self, what: &str, changes: bool, op: F) -> anyhow::Result<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let mut lost: Option<Instant> = None;
        let mut delay = BACKOFF_INITIAL;
        loop {
            let attempt = async {
                if lost.is_some() {
                    self.check_durable().await?;
                }
                if changes {
                    self.hold_lock().await?;
                }
                op().await
            };
            let err = match attempt.await {
                Ok(v) => {
                    if let Some(since) = lost {
                        tracing::info!(target: TARGET, database = self.name, "database is back after {:.1?}; {what} went through", since.elapsed());
                    }
                    return Ok(v);
                }
                Err(e) if e.connection_lost() => e,
                Err(e) => return Err(e.into()),
            };
            let first = lost.is_none();
            let since = *lost.get_or_insert_with(Instant::now);
            let gone = since.elapsed();
            if gone >= self.budget {
                anyhow::bail!(
                    "database {}: unreachable for {gone:.0?} while trying to {what}, and database.reconnect_budget_ms is {:?}: {err}\n\nnothing partial was written: once the database is back, a rerun resumes after the last committed block",
                    self.name,
                    self.budget,
                );
            }
            if first {
                tracing::warn!(target: TARGET, database = self.name, "database connection lost while trying to {what} ({err}); reconnecting for up to {:?}", self.budget);
            } else {
                tracing::debug!(target: TARGET, database = self.name, "still unreachable after {gone:.1?}: {err}");
            }
            tokio::time::sleep(delay.min(self.budget.saturating_sub(gone))).await;
            delay = (delay * 2).min(BACKOFF_MAX);
        }
    }

    /// Holds this process's own key on the writer lock's connection (taken
    /// again with the lock after a reconnect).
    async fn hold_owner_key(&self) -> Result<(), StoreError> {
        match self.lock.lock().await.as_mut() {
            Some(held) => held.hold_owner_key(self.owner_key).await,
            None => Err(StoreError::LockLost),
        }
    }

    /// Makes sure this process holds the writer lock on a live connection.
    async fn hold_lock(&self) -> Result<(), StoreError> {
        let mut lock = self.lock.lock().await;
        if let Some(held) = lock.as_mut() {
            match held.check().await {
                Ok(()) => return Ok(()),
                Err(e) if e.connection_lost() => {}
                Err(e) => return Err(e),
            }
        }
        *lock = None;
        match self.store.lock_writer(self.mode).await {
            Ok(fresh) => {
                tracing::info!(target: TARGET, database = self.name, "writer lock taken again on a new connection");
                *lock = Some(fresh);
                Ok(())
            }
            Err(StoreError::Locked) => Err(StoreError::LockLost),
            Err(e) => Err(e),
        }
    }
}

#[async_trait::async_trait]
impl Sink for Reconnecting {
    async fn write_blocks(&self, blocks: &[Block]) -> anyhow::Result<Written> {
        let what = match (blocks.first(), blocks.last()) {
            (Some(a), Some(b)) => format!("write blocks {}..={}", a.header.number, b.header.number),
            _ => "write no blocks".to_owned(),
        };
        let (Some(first), Some(last)) = (blocks.first(), blocks.last()) else {
            return Ok(Written::Committed(Default::default()));
        };
        let lease = self.lease_for(first.header.number);
        if lease.is_none() && self.mode == LockMode::Shared {
            // A leased backfill writes only into segments it holds.
            return Ok(Written::LeaseEnded {
                first: first.header.number,
                reason: format!(
                    "block {}: this process holds no lease on a segment with it",
                    first.header.number
                ),
            });
        }
        let written = self
            .retrying(&what, true, || {
                self.store.write_blocks_in(blocks, lease.as_ref())
            })
            .await?;
        let last = last.header.number;
        // The segment's last block is written: it is done.
        let segment_done = |l: &Lease| {
            self.leases()
                .iter()
                .any(|(h, end)| h.first == l.first && *end <= last)
        };
        match (&written, &lease) {
            (Written::Committed(_), None) => self.set_committed(last),
            (Written::Committed(_), Some(l)) if segment_done(l) => self.forget_lease(l.first),
            (Written::LeaseEnded { .. }, Some(l)) => self.forget_lease(l.first),
            _ => {}
        }
        Ok(written)
    }

    async fn checkpoint(&self) -> anyhow::Result<Option<(u64, B256)>> {
        self.retrying("read the checkpoint", false, || self.store.checkpoint())
            .await
    }

    async fn block_hash(&self, number: u64) -> anyhow::Result<Option<B256>> {
        let what = format!("read the hash of block {number}");
        self.retrying(&what, false, || self.store.block_hash(number))
            .await
    }

    async fn rollback_to(&self, ancestor: u64, new_hash: Option<&B256>) -> anyhow::Result<u64> {
        let what = format!("roll back to block {ancestor}");
        let deleted = self
            .retrying(&what, true, || self.store.rollback_to(ancestor, new_hash))
            .await?;
        if let Some(c) = self.committed() {
            self.set_committed(c.min(ancestor));
        }
        Ok(deleted)
    }

    async fn parent_hash(&self, number: u64) -> anyhow::Result<Option<B256>> {
        let what = format!("read the parent hash of block {number}");
        self.retrying(&what, false, || self.store.parent_hash(number))
            .await
    }

    async fn linked(&self, from: u64, to: u64) -> anyhow::Result<bool> {
        let what = format!("check that blocks {from}..={to} are linked");
        self.retrying(&what, false, || self.store.linked(from, to))
            .await
    }

    async fn record_anchor(&self, anchor: &Anchor) -> anyhow::Result<()> {
        self.retrying("record a trust anchor", false, || {
            self.store.record_anchor(anchor)
        })
        .await
    }

    async fn stored_blocks(&self, from: u64, to: u64) -> anyhow::Result<(u64, u64)> {
        self.retrying("count stored blocks", false, || {
            self.store.stored_blocks(from, to)
        })
        .await
    }

    async fn missing_lookup_indexes(&self) -> anyhow::Result<Vec<&'static str>> {
        self.retrying("list missing indexes", false, || {
            self.store.missing_lookup_indexes()
        })
        .await
    }

    async fn drop_lookup_indexes(&self) -> anyhow::Result<()> {
        self.retrying("drop the lookup indexes", true, || {
            self.store.drop_lookup_indexes()
        })
        .await
    }

    async fn build_lookup_indexes(&self) -> anyhow::Result<()> {
        self.retrying("build the lookup indexes", true, || async {
            self.store.build_lookup_indexes().await.map(|_| ())
        })
        .await
    }
}

/// A key no other process draws: from the clock, the pid and the address
/// of a fresh allocation, hashed.
fn owner_key() -> i64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write(owner_name().as_bytes());
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish() as i64
}

/// "host:pid:nonce": unique per process, readable in `status`.
fn owner_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "host".to_owned());
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{host}:{}:{nonce:08x}", std::process::id())
}

#[async_trait::async_trait]
impl Segments for Reconnecting {
    async fn plan(&self, from: u64, to: u64, size: u64) -> anyhow::Result<()> {
        self.retrying("plan the segments", true, || {
            self.store.plan_segments(from, to, size)
        })
        .await
    }

    async fn lease(&self, from: u64, to: u64) -> anyhow::Result<Option<Segment>> {
        let seg = self
            .retrying("lease a segment", true, || async {
                self.hold_owner_key().await?;
                // A segment leased by an attempt whose answer was lost is
                // ours but not among these: this attempt takes it.
                let held: Vec<u64> = self.leases().iter().map(|(l, _)| l.first).collect();
                self.store
                    .lease_segment(
                        from,
                        to,
                        &self.owner,
                        self.owner_key,
                        self.lease_time,
                        &held,
                    )
                    .await
            })
            .await?;
        if let Some(s) = &seg {
            let lease = Lease {
                owner: self.owner.clone(),
                first: s.first,
            };
            self.leases().push((lease, s.last));
        }
        Ok(seg)
    }

    async fn release(&self) -> anyhow::Result<()> {
        let held: Vec<u64> = self.leases().iter().map(|(l, _)| l.first).collect();
        for first in held {
            self.release_one(first).await?;
        }
        Ok(())
    }

    async fn release_one(&self, first: u64) -> anyhow::Result<()> {
        self.forget_lease(first);
        let what = format!("give segment {first} back");
        self.retrying(&what, true, || {
            self.store.release_segment(first, &self.owner)
        })
        .await
    }

    async fn renew(&self) -> anyhow::Result<bool> {
        let held = self.leases().len() as u64;
        let renewed = self
            .retrying("renew the lease", true, || async {
                self.hold_owner_key().await?;
                self.store.renew_leases(&self.owner, self.lease_time).await
            })
            .await?;
        Ok(renewed >= held)
    }

    async fn counts(&self, from: u64, to: u64) -> anyhow::Result<SegmentCounts> {
        self.retrying("count segments", false, || {
            self.store.segment_counts(from, to)
        })
        .await
    }

    async fn broken_links(&self, from: u64, to: u64) -> anyhow::Result<Vec<u64>> {
        self.retrying("check links across segments", false, || {
            self.store.broken_segment_links(from, to)
        })
        .await
    }

    async fn redo(&self, first: u64) -> anyhow::Result<()> {
        let what = format!("free segment {first} to index it again");
        self.retrying(&what, true, || self.store.redo_segment(first))
            .await
    }
}
