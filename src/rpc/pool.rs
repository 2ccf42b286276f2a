//! The endpoints of the rpc stage, and where and when each request goes.
//!
//! Every round trip first takes a [`Lease`] on one endpoint from the
//! [`Pool`]. The pool keeps, per endpoint:
//! - **health**: a failure benches the endpoint for a backoff that doubles
//!   with each strike (failures of requests sent before the last strike
//!   are the same strike, so eight batches failing together count once);
//!   a success clears it. A benched endpoint gets nothing until its bench
//!   ends, then one request decides;
//! - **adaptive concurrency**: at most `limit` requests in flight, halved
//!   on a rate-limit answer and grown by about one per `limit` successes,
//!   never above `rpc.max_in_flight`;
//! - **Retry-After**: nothing is sent before the time a 429 named;
//! - **a request rate**: `rpc.max_requests_per_second`, as spaced slots;
//! - **its head**: the highest block it is known to have, so an endpoint
//!   behind the best one is not asked for blocks it has not got while
//!   another has them;
//! - **latency**, so faster endpoints get more of the load.
//!
//! It decides only where a request goes and when it may leave: it does not
//! build, send or parse requests, and it does not retry (the one retry
//! loop, `driver`, does, taking a new lease each time).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::retry::{Failure, backoff_delay};
use crate::metrics::EndpointStats;
use crate::redact::Scrubber;

/// Weight of the newest sample in the latency average.
const LATENCY_WEIGHT: f64 = 0.2;

/// One JSON-RPC endpoint and what the pool knows about it.
pub(crate) struct Endpoint {
    pub(crate) index: usize,
    /// With its credentials (reqwest turns userinfo into basic auth); never
    /// logged.
    pub(crate) url: url::Url,
    pub(crate) scrub: Scrubber,
    /// Calls per block batch now (see [`BatchCap`]).
    pub(crate) batch_size: BatchCap,
    /// It answered that it has no `eth_getBlockReceipts`.
    pub(crate) no_block_receipts: AtomicBool,
    /// Calls per `eth_getTransactionReceipt` batch now.
    pub(crate) tx_receipt_batch: BatchCap,
    pub(crate) stats: Arc<EndpointStats>,
    state: Mutex<State>,
}

/// A batch size an endpoint may cap: only ever shrinks, and is shared by
/// every batch in flight, so one refusal teaches every task. Lowered only by
/// `RpcClient::shrink`.
pub(crate) struct BatchCap {
    size: AtomicUsize,
    /// A shrink was logged as a warning; later ones are debug lines.
    pub(crate) logged: AtomicBool,
}

impl BatchCap {
    fn new(size: usize) -> BatchCap {
        BatchCap {
            size: AtomicUsize::new(size),
            logged: AtomicBool::new(false),
        }
    }

    /// Calls per batch now.
    pub(crate) fn get(&self) -> usize {
        self.size.load(Relaxed)
    }

    /// Lowers it to `to` unless it is that low already: the size before.
    pub(crate) fn lower(&self, to: usize) -> usize {
        self.size.fetch_min(to, Relaxed)
    }
}

struct State {
    in_flight: usize,
    /// Requests allowed in flight now, in `1.0..=max_in_flight`.
    limit: f64,
    /// Consecutive strikes (failure rounds) without a success.
    strikes: u32,
    /// When the last strike or cut was counted: failures of requests sent
    /// before it belong to it.
    struck_at: Option<Instant>,
    cut_at: Option<Instant>,
    benched_until: Option<Instant>,
    /// Retry-After: nothing leaves before it.
    not_before: Option<Instant>,
    /// The next free slot under `max_requests_per_second`.
    next_slot: Instant,
    /// The highest block it is known to have.
    head: Option<u64>,
    latency: Option<Duration>,
}

impl State {
    /// When it may next be sent something (`None`: now).
    fn ready_at(&self, now: Instant) -> Option<Instant> {
        [self.benched_until, self.not_before]
            .into_iter()
            .flatten()
            .filter(|t| *t > now)
            .max()
    }

    fn has(&self, n: u64) -> bool {
        self.head.is_some_and(|h| h >= n)
    }
}

/// What a request needs of its endpoint.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Want {
    /// A block it must have: endpoints known to have it are preferred, and
    /// while one of them is healthy the others are not asked.
    pub(crate) block: Option<u64>,
    /// An endpoint not to ask while another is healthy (a block it served
    /// did not verify).
    pub(crate) avoid: Option<usize>,
    /// Exactly this endpoint (a head poll of each).
    pub(crate) only: Option<usize>,
}

/// The endpoints and their shared settings.
pub(crate) struct Pool {
    endpoints: Vec<Endpoint>,
    max_in_flight: usize,
    /// `1 / max_requests_per_second`, when limited.
    interval: Option<Duration>,
    backoff_initial: Duration,
    backoff_max: Duration,
    /// Woken whenever a lease ends or an endpoint's state changes.
    changed: Notify,
}

/// The right to send one request to `ep`, held for the round trip.
pub(crate) struct Lease<'a> {
    pub(crate) ep: &'a Endpoint,
    pool: &'a Pool,
    sent: Instant,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        self.pool.lock(self.ep).in_flight -= 1;
        self.pool.changed.notify_waiters();
    }
}

/// Per-endpoint construction settings.
pub(crate) struct PoolSettings {
    pub(crate) max_in_flight: usize,
    pub(crate) batch_size: usize,
    pub(crate) tx_receipt_batch: usize,
    pub(crate) max_requests_per_second: f64,
    pub(crate) backoff_initial: Duration,
    pub(crate) backoff_max: Duration,
}

impl Pool {
    pub(crate) fn new(urls: &[url::Url], s: &PoolSettings) -> Pool {
        let now = Instant::now();
        let endpoints = urls
            .iter()
            .enumerate()
            .map(|(index, url)| {
                let scrub = Scrubber::new(url.as_str());
                Endpoint {
                    index,
                    url: url.clone(),
                    stats: Arc::new(EndpointStats::new(scrub.endpoint().to_owned())),
                    scrub,
                    batch_size: BatchCap::new(s.batch_size),
                    no_block_receipts: AtomicBool::new(false),
                    tx_receipt_batch: BatchCap::new(s.tx_receipt_batch),
                    state: Mutex::new(State {
                        in_flight: 0,
                        limit: s.max_in_flight as f64,
                        strikes: 0,
                        struck_at: None,
                        cut_at: None,
                        benched_until: None,
                        not_before: None,
                        next_slot: now,
                        head: None,
                        latency: None,
                    }),
                }
            })
            .collect::<Vec<_>>();
        for e in &endpoints {
            e.stats.set_limit(s.max_in_flight);
        }
        let interval = (s.max_requests_per_second > 0.0)
            .then(|| Duration::from_secs_f64(1.0 / s.max_requests_per_second));
        Pool {
            endpoints,
            max_in_flight: s.max_in_flight,
            interval,
            backoff_initial: s.backoff_initial,
            backoff_max: s.backoff_max,
            changed: Notify::new(),
        }
    }

    pub(crate) fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    fn lock<'a>(&self, ep: &'a Endpoint) -> MutexGuard<'a, State> {
        // The state is plain numbers, consistent after any panic.
        ep.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Endpoints not benched or waiting out a Retry-After now.
    pub(crate) fn available(&self) -> Vec<usize> {
        let now = Instant::now();
        self.endpoints
            .iter()
            .filter(|e| self.lock(e).ready_at(now).is_none())
            .map(|e| e.index)
            .collect()
    }

    /// Waits for the best endpoint for `want` with room for one more
    /// request, and its next rate slot; see the module docs for "best".
    pub(crate) async fn acquire(&self, want: Want) -> Lease<'_> {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let now = Instant::now();
            let (chosen, wake) = self.choose(want, now);
            if let Some((ep, slot)) = chosen {
                if slot > now {
                    tokio::time::sleep_until(slot).await;
                }
                return Lease {
                    ep,
                    pool: self,
                    sent: Instant::now(),
                };
            }
            match wake {
                Some(t) => {
                    tokio::select! {
                        _ = changed => {}
                        _ = tokio::time::sleep_until(t) => {}
                    }
                }
                None => changed.await,
            }
        }
    }

    /// The endpoint to use now (taken: its in-flight count and rate slot
    /// are reserved) and its slot, or the earliest time one may become
    /// ready.
    fn choose(&self, want: Want, now: Instant) -> (Option<(&Endpoint, Instant)>, Option<Instant>) {
        let mut states: Vec<_> = self.endpoints.iter().map(|e| (e, self.lock(e))).collect();
        if let Some(i) = want.only {
            states.retain(|(e, _)| e.index == i);
        }
        let wake = states.iter().filter_map(|(_, s)| s.ready_at(now)).min();
        // Prefer endpoints that meet the want, then those that are merely
        // not to be avoided (not known to have the block yet: asking costs
        // at most a `null`), then the rest; a lower tier is used only when
        // no healthy endpoint is in a higher one, however busy it is.
        let healthy = |s: &State| s.ready_at(now).is_none();
        let tier = |e: &Endpoint, s: &State| match (
            want.avoid == Some(e.index),
            want.block.is_none_or(|n| s.has(n)),
        ) {
            (false, true) => 0,
            (false, false) => 1,
            (true, _) => 2,
        };
        let top = states
            .iter()
            .filter(|(_, s)| healthy(s))
            .map(|(e, s)| tier(e, s))
            .min();
        let mut best: Option<(f64, usize)> = None;
        for (i, (e, s)) in states.iter().enumerate() {
            if !healthy(s) || Some(tier(e, s)) != top {
                continue;
            }
            let limit = s.limit.floor().max(1.0);
            if s.in_flight as f64 >= limit {
                continue;
            }
            // Expected wait: queued requests times latency, per slot.
            let latency = s.latency.map_or(0.001, |d| d.as_secs_f64().max(0.001));
            let score = (s.in_flight as f64 + 1.0) / limit * latency;
            if best.is_none_or(|(b, _)| score < b) {
                best = Some((score, i));
            }
        }
        let Some((_, i)) = best else {
            return (None, wake);
        };
        let (ep, s) = &mut states[i];
        s.in_flight += 1;
        let slot = s.next_slot.max(now);
        if let Some(step) = self.interval {
            s.next_slot = slot + step;
        }
        ep.stats.count_request();
        (Some((ep, slot)), wake)
    }

    /// The round trip of `lease` succeeded after `elapsed`.
    pub(crate) fn succeeded(&self, lease: &Lease<'_>) {
        let mut s = self.lock(lease.ep);
        let took = lease.sent.elapsed();
        s.latency = Some(match s.latency {
            None => took,
            Some(old) => old.mul_f64(1.0 - LATENCY_WEIGHT) + took.mul_f64(LATENCY_WEIGHT),
        });
        let was_benched = s.strikes > 0;
        s.strikes = 0;
        s.benched_until = None;
        s.limit = (s.limit + 1.0 / s.limit).min(self.max_in_flight as f64);
        lease.ep.stats.set_limit(s.limit as usize);
        drop(s);
        if was_benched {
            self.changed.notify_waiters();
        }
    }

    /// The round trip of `lease` failed with `f`. A rate-limit answer cuts
    /// the endpoint's concurrency and honours its Retry-After; any other
    /// failure is a strike that benches it.
    pub(crate) fn failed(&self, lease: &Lease<'_>, f: &Failure) {
        let now = Instant::now();
        let mut s = self.lock(lease.ep);
        lease.ep.stats.count_error();
        let fresh = |at: Option<Instant>| at.is_none_or(|t| lease.sent > t);
        if let Some(retry_after) = f.throttled() {
            lease.ep.stats.count_throttled();
            if fresh(s.cut_at) {
                s.cut_at = Some(now);
                s.limit = (s.in_flight as f64 / 2.0)
                    .max(1.0)
                    .min(s.limit / 2.0)
                    .max(1.0);
                lease.ep.stats.set_limit(s.limit as usize);
            }
            let wait = retry_after.unwrap_or_else(|| {
                backoff_delay(s.strikes, self.backoff_initial, self.backoff_max, 1.0)
            });
            let until = now + wait;
            s.not_before = Some(s.not_before.map_or(until, |t| t.max(until)));
            if retry_after.is_none() && fresh(s.struck_at) {
                s.strikes = s.strikes.saturating_add(1);
                s.struck_at = Some(now);
            }
        } else if fresh(s.struck_at) {
            let delay = backoff_delay(
                s.strikes,
                self.backoff_initial,
                self.backoff_max,
                fastrand::f64(),
            );
            s.strikes = s.strikes.saturating_add(1);
            s.struck_at = Some(now);
            s.benched_until = Some(now + delay);
            lease.ep.stats.count_benched();
        }
    }

    /// `lease`'s endpoint has block `n`.
    pub(crate) fn has_block(&self, lease: &Lease<'_>, n: u64) {
        self.set_head(lease.ep, n, false);
    }

    /// `lease`'s endpoint answered `null` for block `n`: its head is below.
    pub(crate) fn lacks_block(&self, lease: &Lease<'_>, n: u64) {
        self.set_head(lease.ep, n.saturating_sub(1), true);
    }

    /// Endpoint `index` reported `head` as its latest block.
    pub(crate) fn reported_head(&self, index: usize, head: u64) {
        let ep = &self.endpoints[index];
        self.lock(ep).head = Some(head);
        ep.stats.set_head(head);
    }

    /// Whether an endpoint that is healthy now is known to have block `n`.
    pub(crate) fn healthy_has(&self, n: u64) -> bool {
        let now = Instant::now();
        self.endpoints.iter().any(|e| {
            let s = self.lock(e);
            s.ready_at(now).is_none() && s.has(n)
        })
    }

    fn set_head(&self, ep: &Endpoint, n: u64, lower: bool) {
        let mut s = self.lock(ep);
        let head = match (s.head, lower) {
            (Some(h), true) => h.min(n),
            (None, true) => n,
            (Some(h), false) => h.max(n),
            (None, false) => n,
        };
        s.head = Some(head);
        ep.stats.set_head(head);
    }

    /// Whether another endpoint than `index` is healthy now.
    pub(crate) fn has_other(&self, index: usize) -> bool {
        self.available().iter().any(|i| *i != index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(n: usize, rps: f64) -> Pool {
        let urls: Vec<url::Url> = (0..n)
            .map(|i| format!("http://127.0.0.1:{}/", 1000 + i).parse().unwrap())
            .collect();
        Pool::new(
            &urls,
            &PoolSettings {
                max_in_flight: 4,
                batch_size: 10,
                tx_receipt_batch: 10,
                max_requests_per_second: rps,
                backoff_initial: Duration::from_millis(100),
                backoff_max: Duration::from_secs(2),
            },
        )
    }

    fn limit(p: &Pool, i: usize) -> f64 {
        p.lock(&p.endpoints[i]).limit
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_endpoint_is_benched_and_the_other_used() {
        let p = pool(2, 0.0);
        let a = p.acquire(Want::default()).await;
        assert_eq!(a.ep.index, 0);
        p.failed(&a, &Failure::Transport("connection refused".into()));
        drop(a);
        assert_eq!(p.available(), vec![1]);
        for _ in 0..3 {
            let l = p.acquire(Want::default()).await;
            assert_eq!(l.ep.index, 1);
            p.succeeded(&l);
        }
        // The bench ends: endpoint 0 is tried again.
        tokio::time::advance(Duration::from_millis(200)).await;
        assert_eq!(p.available(), vec![0, 1]);
        // Failures of requests sent before a strike are that strike.
        let (x, y) = (
            p.acquire(Want::default()).await,
            p.acquire(Want::default()).await,
        );
        let on0: Vec<_> = [&x, &y].into_iter().filter(|l| l.ep.index == 0).collect();
        for l in &on0 {
            p.failed(l, &Failure::Timeout(Duration::from_secs(1)));
        }
        assert!(p.lock(&p.endpoints[0]).strikes <= 2);
        assert_eq!(p.endpoints[0].stats.benched(), 1 + on0.len().min(1) as u64);
    }

    #[tokio::test(start_paused = true)]
    async fn a_lagging_endpoint_is_not_asked_for_blocks_it_has_not_got() {
        let p = pool(2, 0.0);
        p.reported_head(0, 100);
        p.reported_head(1, 80);
        assert!(p.healthy_has(100) && !p.healthy_has(101));
        let want = Want {
            block: Some(90),
            ..Want::default()
        };
        let held: Vec<_> = futures::future::join_all((0..4).map(|_| p.acquire(want))).await;
        assert!(held.iter().all(|l| l.ep.index == 0));
        // Endpoint 0 full: a fifth request for block 90 waits for it rather
        // than asking endpoint 1.
        let fifth = tokio::time::timeout(Duration::from_millis(50), p.acquire(want)).await;
        assert!(fifth.is_err());
        // Block 50 is on both: it goes to endpoint 1 now.
        let l = p
            .acquire(Want {
                block: Some(50),
                ..Want::default()
            })
            .await;
        assert_eq!(l.ep.index, 1);
        drop(held);
        // With endpoint 0 benched, the lagging one is all there is.
        let a = p.acquire(want).await;
        p.failed(&a, &Failure::Status(502));
        drop(a);
        let b = p.acquire(want).await;
        assert_eq!(b.ep.index, 1);
        p.lacks_block(&b, 90);
        assert_eq!(p.lock(&p.endpoints[1]).head, Some(80));
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limits_halve_concurrency_honour_retry_after_and_grow_back() {
        let p = pool(1, 0.0);
        let held: Vec<_> =
            futures::future::join_all((0..4).map(|_| p.acquire(Want::default()))).await;
        let throttled = Failure::Throttled {
            status: 429,
            retry_after: Some(Duration::from_secs(3)),
        };
        for l in &held {
            p.failed(l, &throttled); // one cut for the round, not four
        }
        assert_eq!(limit(&p, 0), 2.0);
        drop(held);
        let t0 = Instant::now();
        let l = p.acquire(Want::default()).await;
        assert!(t0.elapsed() >= Duration::from_secs(3), "{:?}", t0.elapsed());
        for _ in 0..20 {
            p.succeeded(&l);
        }
        assert_eq!(
            limit(&p, 0),
            4.0,
            "grows back, no further than max_in_flight"
        );
        assert_eq!(p.endpoints[0].stats.throttled(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn requests_per_second_are_spaced() {
        let p = pool(1, 4.0);
        let t0 = Instant::now();
        for _ in 0..9 {
            let l = p.acquire(Want::default()).await;
            p.succeeded(&l);
        }
        let took = t0.elapsed();
        assert!(took >= Duration::from_secs(2), "{took:?}");
        assert!(took < Duration::from_millis(2100), "{took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_refetch_avoids_the_bad_endpoint_even_if_only_it_is_known_to_have_the_block() {
        let p = pool(2, 0.0);
        p.reported_head(0, 30);
        p.reported_head(1, 29);
        let want = Want {
            block: Some(30),
            avoid: Some(0),
            ..Want::default()
        };
        for _ in 0..5 {
            let l = p.acquire(want).await;
            assert_eq!(l.ep.index, 1);
            p.succeeded(&l);
        }
        // Without the avoidance, the one known to have it.
        let l = p
            .acquire(Want {
                block: Some(30),
                ..Want::default()
            })
            .await;
        assert_eq!(l.ep.index, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_refetch_avoids_the_endpoint_that_served_the_bad_block() {
        let p = pool(3, 0.0);
        for i in 0..3 {
            let want = Want {
                avoid: Some(i),
                ..Want::default()
            };
            for _ in 0..5 {
                let l = p.acquire(want).await;
                assert_ne!(l.ep.index, i);
            }
        }
    }
}
