//! The one retry loop of the rpc stage. Every call that may be tried again
//! (heads, the chain id, headers, block batches, receipts, `eth_getLogs`
//! ranges and refetches by hash) runs in [`retrying`]: it takes a lease
//! from the pool for each try and hands it to the caller's [`Attempt`],
//! which says how the try went ([`Step`]). Whether a failure is tried
//! again, on which budget, and when the call gives up is decided in
//! [`weigh`] and nowhere else; the wait for a block the node has not
//! produced yet ([`Step::NotYet`]) is the driver's too.
//!
//! An attempt keeps its own state between tries (the blocks fetched so
//! far, a range narrowed by a provider's refusal) and reports progress,
//! which gives the budget back. Attempts are small structs, not async
//! closures: a future holding an async closure that borrows the client is
//! not provably `Send` (rustc's "not general enough"), and the block stream
//! must be. The driver does not build, send or parse requests, choose
//! endpoints (the pool does), or classify failures (that is `retry`'s pure
//! policy).

use std::sync::atomic::Ordering::Relaxed;

use tracing::{debug, info, warn};

use super::pool::{Lease, Want};
use super::retry::{Class, Failure, backoff_delay, classify};
use super::{RpcClient, RpcError, Subject, TARGET};

/// Rate-limit answers a call may meet, per retry of its budget, before it
/// gives up: a provider that throttles is slowed down for, not abandoned.
const THROTTLES_PER_RETRY: u32 = 8;

/// Retries of a refused first contact before it is reported as a wrong URL.
const FIRST_CONTACT_RETRIES: u32 = 2;

/// One try of a call that may be tried again, with the state it keeps
/// between tries (what has arrived so far, a narrowed range).
pub(super) trait Attempt {
    type Out;

    /// What the next try needs of its endpoint, asked before each try;
    /// `None` when the attempt takes its own leases (it asks every
    /// endpoint) and reports a failure with [`Step::FailedAt`].
    fn want(&self) -> Option<Want>;

    /// One try; `t` has the lease (if [`want`](Self::want) named one).
    async fn run<'c>(&mut self, t: Try<'_, 'c>) -> Result<Step<'c, Self::Out>, RpcError>;
}

/// How one try went.
pub(super) enum Step<'c, T> {
    /// Finished, with this.
    Done(T),
    /// Not finished, and nothing failed (a part arrived, a batch size was
    /// halved, a range narrowed): go again at once.
    Again,
    /// The endpoint answered `null` for block `n`: it has not produced it
    /// yet. Go again at once if a healthy endpoint is known to have it,
    /// else after a wait that grows until progress is made.
    NotYet(u64),
    /// It failed on the try's lease, about the subject of the whole call,
    /// one call alone.
    Failed(Failure),
    /// It failed on the try's lease, about `subject` (part of the call);
    /// `in_batch` when the failure answered a batch of more than one call.
    FailedOn {
        subject: Subject,
        failure: Failure,
        in_batch: bool,
    },
    /// It failed on `lease`, one the attempt took itself.
    FailedAt(Lease<'c>, Failure),
}

/// What one try is given: the client, the lease to send on, and a say in
/// the budget.
pub(super) struct Try<'t, 'c> {
    pub(super) client: &'c RpcClient,
    lease: Option<&'t Lease<'c>>,
    tries: &'t mut Tries,
}

impl<'t, 'c> Try<'t, 'c> {
    /// The lease of this try.
    ///
    /// # Panics
    /// In an attempt whose [`want`](Attempt::want) is `None`.
    pub(super) fn lease(&self) -> &'t Lease<'c> {
        self.lease.expect("an attempt with a want has a lease")
    }

    /// Something arrived: the retry budget and the wait for blocks not
    /// produced yet start over.
    pub(super) fn progress(&mut self) {
        *self.tries = Tries::default();
    }
}

/// What one call has spent of its retry budget since it last made
/// progress.
#[derive(Debug, Default)]
pub(super) struct Tries {
    failures: u32,
    throttles: u32,
    /// Waits for a block not produced yet.
    polls: u32,
}

/// Runs `attempt` until it is done or [`weigh`] gives up, each try on a
/// lease for its want, held for that try only; failures are about
/// `subject` unless the attempt names a part of it. The one retry loop.
pub(super) async fn retrying<A: Attempt>(
    client: &RpcClient,
    subject: Subject,
    mut attempt: A,
) -> Result<A::Out, RpcError> {
    let mut tries = Tries::default();
    loop {
        let lease = match attempt.want() {
            Some(want) => Some(client.pool.acquire(want).await),
            None => None,
        };
        let step = attempt
            .run(Try {
                client,
                lease: lease.as_ref(),
                tries: &mut tries,
            })
            .await?;
        let (lease, failure, subject, in_batch) = match (step, lease) {
            (Step::Done(out), _) => return Ok(out),
            (Step::Again, _) => continue,
            (Step::NotYet(n), Some(lease)) => {
                not_yet(client, lease, n, &mut tries).await;
                continue;
            }
            (Step::Failed(failure), Some(lease)) => (lease, failure, subject, false),
            (
                Step::FailedOn {
                    subject,
                    failure,
                    in_batch,
                },
                Some(lease),
            ) => (lease, failure, subject, in_batch),
            (Step::FailedAt(lease, failure), _) => (lease, failure, subject, false),
            (Step::NotYet(_) | Step::Failed(_) | Step::FailedOn { .. }, None) => {
                unreachable!("a failure on the try's lease in an attempt without one")
            }
        };
        weigh(client, &lease, failure, subject, in_batch, &mut tries)?;
    }
}

/// Tells the pool `lease`'s endpoint failed, then fails at once on a
/// fatal error (unless another endpoint is healthy: a broken answer may be
/// that endpoint's fault) or an exhausted budget. Returns so the loop
/// tries again: the wait is the pool's, which benches the endpoint (or
/// honours its Retry-After) and meanwhile hands out the others.
fn weigh(
    client: &RpcClient,
    lease: &Lease<'_>,
    failure: Failure,
    subject: Subject,
    in_batch: bool,
    tries: &mut Tries,
) -> Result<(), RpcError> {
    client.pool.failed(lease, &failure);
    let fatal = classify(&failure, in_batch) == Class::Fatal;
    if fatal && (!client.pool.has_other(lease.ep.index) || config_failure(&failure)) {
        return Err(client.failed_on(lease, subject, &failure));
    }
    // Nothing has ever answered: after one quick retry (a node still
    // starting), a wrong URL is said at once, not after the whole retry
    // budget.
    if let Failure::Unreachable(cause) = &failure
        && !client.answered.load(Relaxed)
        && tries.failures >= FIRST_CONTACT_RETRIES
    {
        return Err(RpcError::Unreachable {
            endpoints: client.names.clone(),
            subject,
            cause: client.scrub(cause),
        });
    }
    let throttled = failure.throttled().is_some();
    let spent = if throttled {
        tries.throttles += 1;
        tries.throttles > client.cfg.max_retries.saturating_mul(THROTTLES_PER_RETRY)
    } else {
        tries.failures >= client.cfg.max_retries
    };
    if spent {
        return Err(RpcError::RetriesExhausted {
            endpoint: lease.ep.scrub.endpoint().to_owned(),
            subject,
            retries: tries.failures + tries.throttles,
            last: client.scrub(&failure.to_string()),
        });
    }
    if !throttled {
        tries.failures += 1;
    }
    client.stats.retries.fetch_add(1, Relaxed);
    let error = client.scrub(&failure.to_string());
    let endpoint = lease.ep.scrub.endpoint();
    if throttled {
        debug!(target: TARGET, endpoint, %subject, error, "rate limited; slowing down");
    } else {
        warn!(target: TARGET, endpoint, %subject, attempt = tries.failures, error, "retrying");
    }
    Ok(())
}

/// Block `n` is not produced yet where `lease` asked: releases the lease,
/// then returns at once if another healthy endpoint has it (this one
/// lags), else after a backoff that grows with each wait without progress.
async fn not_yet(client: &RpcClient, lease: Lease<'_>, n: u64, tries: &mut Tries) {
    let endpoint = lease.ep.scrub.endpoint().to_owned();
    drop(lease);
    if client.pool.healthy_has(n) {
        return;
    }
    let delay = backoff_delay(
        tries.polls,
        client.cfg.backoff_initial,
        client.cfg.backoff_max,
        fastrand::f64(),
    );
    let first = tries.polls == 0;
    tries.polls = tries.polls.saturating_add(1);
    client.stats.null_waits.fetch_add(1, Relaxed);
    if first {
        info!(target: TARGET, endpoint, n, "waiting for block");
    } else {
        debug!(target: TARGET, endpoint, n, ?delay, "block still null");
    }
    tokio::time::sleep(delay).await;
}

/// Failures that no other endpoint fixes: the request itself is wrong.
fn config_failure(f: &Failure) -> bool {
    matches!(
        f,
        Failure::Rpc {
            code: -32601 | -32602,
            ..
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Plays `script` (true: a 503, false: progress), then is done.
    struct Script(Vec<bool>, usize);

    impl Attempt for Script {
        type Out = usize;
        fn want(&self) -> Option<Want> {
            Some(Want::default())
        }
        async fn run<'c>(&mut self, mut t: Try<'_, 'c>) -> Result<Step<'c, usize>, RpcError> {
            self.1 += 1;
            Ok(match self.0.get(self.1 - 1) {
                None => Step::Done(self.1),
                Some(true) => Step::Failed(Failure::Status(503)),
                Some(false) => {
                    t.progress();
                    Step::Again
                }
            })
        }
    }

    fn client(max_retries: u32) -> RpcClient {
        let mut cfg = crate::config::Settings::defaults().rpc;
        cfg.urls = vec!["http://127.0.0.1:1/".parse().unwrap()];
        cfg.max_retries = max_retries;
        cfg.backoff_initial = Duration::from_millis(1);
        cfg.backoff_max = Duration::from_millis(2);
        RpcClient::new(cfg).unwrap()
    }

    #[tokio::test]
    async fn the_budget_is_spent_by_failures_and_given_back_by_progress() {
        let c = client(3);
        let run = |script: Vec<bool>| retrying(&c, Subject::Block(7), Script(script, 0));
        // One try plus three retries, then the call gives up.
        let e = run(vec![true; 10]).await.unwrap_err();
        assert!(
            matches!(e, RpcError::RetriesExhausted { retries: 3, .. }),
            "{e}"
        );
        assert_eq!(e.block(), Some(7));
        assert_eq!(c.stats.retries.load(Relaxed), 3);
        // Progress gives the budget back; a step that is not a failure
        // spends none of it.
        let script = [vec![true; 3], vec![false], vec![true; 3], vec![false]].concat();
        assert_eq!(run(script).await.unwrap(), 9);
    }
}
