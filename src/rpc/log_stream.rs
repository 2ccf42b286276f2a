//! `getLogs` mode: every block of a range comes with the logs the filters
//! ask for, fetched with `eth_getLogs` over wide block ranges that run
//! alongside the block fetches, concurrently and in order.
//!
//! ```text
//!  block_stream ───────────────────────────┐
//!                                          ├─▶ merge: block n + its logs, checked
//!  spans (adaptive, buffered) ─ logs_in ───┘          └─ refetch by blockHash
//! ```
//!
//! Each log must name the hash of the block it is delivered with: a
//! load-balanced provider can answer a range from a node on another fork,
//! or from one that lags and has "no logs" for blocks it has not got. A
//! block whose logs name another hash, or that came back with none while
//! its header's bloom says it may hold some the filters want, is asked for
//! again by its hash (EIP-234), which no other fork can answer. This file
//! sends and checks; the wire and the range policy are `logs`', and its
//! calls are tried again only by `driver`. It decodes no transaction and
//! writes nothing.

use std::collections::VecDeque;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use futures::StreamExt;
use futures::stream::{self, BoxStream};
use tracing::{debug, warn};

use super::driver::{Attempt, Step, Try, retrying};
use super::logs::{self, Blocks};
use super::pool::{Lease, Want};
use super::retry::Failure;
use super::{GetLogs, RpcClient, RpcError, Subject, TARGET};
use crate::decode::{BlockHeader, Log, RawBlock, hex0x};

impl RpcClient {
    /// One `eth_getLogs` call with the configured filters.
    async fn get_logs(&self, lease: &Lease<'_>, blocks: Blocks) -> Result<Vec<Log>, Failure> {
        let Some(g) = &self.get_logs else {
            return Ok(Vec::new());
        };
        let body = logs::request_body(blocks, &g.filters);
        let answer = self
            .round_trip(lease, self.post(&lease.ep.url, body))
            .await?;
        logs::parse_answer(&answer)
    }

    /// The logs of blocks `from..=to`, in block and log order, in as many
    /// calls as the provider's limits need.
    pub(super) async fn logs_in(&self, from: u64, to: u64) -> Result<Vec<Log>, RpcError> {
        let Some(g) = &self.get_logs else {
            return Ok(Vec::new());
        };
        if from > to {
            return Ok(Vec::new());
        }
        let mut range = LogsIn {
            g,
            to,
            lo: from,
            hi: from,
            out: Vec::new(),
        };
        range.hi = range.end(from);
        let mut out = retrying(self, Subject::range(from, to), range).await?;
        out.sort_by_key(|l| (l.block_number, l.log_index));
        Ok(out)
    }

    /// The logs of exactly the block `header` names, by its hash. The node
    /// not knowing the block (lagging, or load-balanced onto one that has
    /// not got it) is retried within the budget.
    pub(super) async fn logs_by_hash(&self, header: &BlockHeader) -> Result<Vec<Log>, RpcError> {
        retrying(self, Subject::Block(header.number), LogsByHash(header)).await
    }

    /// `got`, the range answer's logs for the block `header` names, or the
    /// block's logs by hash when `got` cannot be trusted for it.
    async fn block_logs(&self, header: &BlockHeader, got: Vec<Log>) -> Result<Vec<Log>, RpcError> {
        let Some(g) = &self.get_logs else {
            return Ok(got);
        };
        let other_fork = got.iter().find(|l| l.block_hash != Some(header.hash));
        let doubtful = got.is_empty()
            && header
                .logs_bloom
                .as_deref()
                .is_some_and(|b| logs::bloom_may_match(b, &g.filters));
        if let Some(l) = other_fork {
            let named = l.block_hash.map_or("none".into(), |h| hex0x(&h));
            warn!(target: TARGET, endpoint = self.endpoint(), block = header.number, hash = %hex0x(&header.hash), log_block_hash = named, "eth_getLogs answered from another block; refetching by block hash");
        } else if !doubtful {
            return Ok(got);
        }
        let by_hash = self.logs_by_hash(header).await?;
        if doubtful && !by_hash.is_empty() {
            warn!(target: TARGET, endpoint = self.endpoint(), block = header.number, logs = by_hash.len(), "eth_getLogs over a range missed this block's logs (a node behind?); refetched by block hash");
        }
        Ok(by_hash)
    }

    /// `blocks` (the block stream of `range`) with each block's logs
    /// attached, from `eth_getLogs` ranges fetched alongside; ends after
    /// the first error.
    pub(super) fn attach_logs(
        self: Arc<Self>,
        range: RangeInclusive<u64>,
        blocks: BoxStream<'static, Result<RawBlock, RpcError>>,
    ) -> BoxStream<'static, Result<RawBlock, RpcError>> {
        let (start, end) = (*range.start(), *range.end());
        let width = |c: &RpcClient| c.get_logs.as_ref().map_or(1, |g| g.span.width());
        let planner = Arc::clone(&self);
        let spans = stream::unfold((start <= end).then_some(start), move |next| {
            let client = Arc::clone(&planner);
            async move {
                let lo = next?;
                let hi = end.min(lo.saturating_add(width(&client) - 1));
                let fetch = async move { client.logs_in(lo, hi).await.map(|l| (hi, l)) };
                Some((fetch, (hi < end).then(|| hi + 1)))
            }
        })
        .buffered(self.depth())
        .boxed();
        let state = Merge {
            client: self,
            blocks,
            spans,
            held: VecDeque::new(),
            covered: None,
            failed: false,
        };
        stream::unfold(state, |mut st| async move {
            if st.failed {
                return None;
            }
            let item = st.next().await?;
            st.failed = item.is_err();
            Some((item, st))
        })
        .boxed()
    }
}

/// [`RpcClient::logs_in`]'s tries: `lo..=hi` next, as wide as the
/// adaptive span allows, until `to`.
struct LogsIn<'g> {
    g: &'g GetLogs,
    to: u64,
    lo: u64,
    hi: u64,
    out: Vec<Log>,
}

impl LogsIn<'_> {
    /// The end of a call from `lo`, by the span's width now.
    fn end(&self, lo: u64) -> u64 {
        self.to.min(lo.saturating_add(self.g.span.width() - 1))
    }
}

impl Attempt for LogsIn<'_> {
    type Out = Vec<Log>;

    fn want(&self) -> Option<Want> {
        Some(Want {
            block: Some(self.hi),
            ..Want::default()
        })
    }

    async fn run<'c>(&mut self, mut t: Try<'_, 'c>) -> Result<Step<'c, Vec<Log>>, RpcError> {
        let (c, lease) = (t.client, t.lease());
        let (g, lo, hi) = (self.g, self.lo, self.hi);
        let step = match c.get_logs(lease, Blocks::Range(lo, hi)).await {
            Ok(got) => {
                let outside = got
                    .iter()
                    .find(|l| !l.block_number.is_some_and(|n| (lo..=hi).contains(&n)));
                if let Some(l) = outside {
                    let f = Failure::Malformed(format!(
                        "eth_getLogs for blocks {lo}..={hi} answered log {} of block {}",
                        l.log_index,
                        l.block_number.map_or("none".into(), |n| n.to_string())
                    ));
                    return Err(c.failed_on(lease, Subject::range(lo, hi), &f));
                }
                g.span.succeeded(hi - lo + 1);
                self.out.extend(got);
                t.progress();
                if hi == self.to {
                    return Ok(Step::Done(std::mem::take(&mut self.out)));
                }
                self.lo = hi + 1;
                Step::Again
            }
            Err(f) => match logs::limit(&f) {
                Some(limit) => {
                    let error = c.scrub(&f.to_string());
                    let Some(next) = g.span.refused(lo, hi, limit) else {
                        return Err(RpcError::Failed {
                            endpoint: lease.ep.scrub.endpoint().to_owned(),
                            subject: Subject::Block(lo),
                            cause: format!(
                                "the provider refuses eth_getLogs even for this one block: {error}"
                            ),
                        });
                    };
                    c.stats.log_range_cuts.fetch_add(1, Relaxed);
                    if !g.cut_logged.swap(true, Relaxed) {
                        warn!(target: TARGET, endpoint = lease.ep.scrub.endpoint(), from = lo, to = hi, retry_to = next, error, "provider limits eth_getLogs; narrowing the block range");
                    } else {
                        debug!(target: TARGET, from = lo, to = hi, retry_to = next, error, "narrowing eth_getLogs range");
                    }
                    Step::Again
                }
                // A range past the node's head (a node behind, or the
                // head itself): some providers refuse it rather than
                // clamp; waiting for the node is what helps.
                None if beyond_head(&f) => Step::FailedOn {
                    subject: Subject::range(lo, hi),
                    failure: Failure::Missing(f.to_string()),
                    in_batch: false,
                },
                None => Step::FailedOn {
                    subject: Subject::range(lo, hi),
                    failure: f,
                    in_batch: false,
                },
            },
        };
        // The next call's end, by the span as it is now (another call may
        // have narrowed it meanwhile).
        self.hi = self.end(self.lo);
        Ok(step)
    }
}

/// [`RpcClient::logs_by_hash`]'s tries.
struct LogsByHash<'h>(&'h BlockHeader);

impl Attempt for LogsByHash<'_> {
    type Out = Vec<Log>;

    fn want(&self) -> Option<Want> {
        Some(Want {
            block: Some(self.0.number),
            ..Want::default()
        })
    }

    async fn run<'c>(&mut self, t: Try<'_, 'c>) -> Result<Step<'c, Vec<Log>>, RpcError> {
        let (c, header) = (t.client, self.0);
        c.stats.log_refetches.fetch_add(1, Relaxed);
        let f = match c.get_logs(t.lease(), Blocks::Hash(header.hash)).await {
            Ok(got) => match got.iter().find(|l| l.block_hash != Some(header.hash)) {
                None => return Ok(Step::Done(got)),
                Some(l) => Failure::Missing(format!(
                    "eth_getLogs by block hash {} answered a log of block hash {}",
                    hex0x(&header.hash),
                    l.block_hash.map_or("none".into(), |h| hex0x(&h))
                )),
            },
            // "unknown block", "header not found": a node behind.
            Err(Failure::Rpc { code, message }) => {
                Failure::Missing(format!("json-rpc error {code}: {message}"))
            }
            Err(f) => f,
        };
        Ok(Step::Failed(f))
    }
}

/// Whether `f` refuses a range for reaching past the node's head.
fn beyond_head(f: &Failure) -> bool {
    let Failure::Rpc { message, .. } = f else {
        return false;
    };
    let m = message.to_ascii_lowercase();
    [
        "beyond",
        "future block",
        "head block",
        "latest block",
        "block not found",
        "unknown block",
        "header not found",
    ]
    .iter()
    .any(|p| m.contains(p))
}

struct Merge {
    client: Arc<RpcClient>,
    blocks: BoxStream<'static, Result<RawBlock, RpcError>>,
    spans: BoxStream<'static, Result<(u64, Vec<Log>), RpcError>>,
    /// Logs of fetched spans not yet handed out, in block order.
    held: VecDeque<Log>,
    /// The last block the fetched spans cover.
    covered: Option<u64>,
    failed: bool,
}

impl Merge {
    async fn next(&mut self) -> Option<Result<RawBlock, RpcError>> {
        let mut block = match self.blocks.next().await? {
            Ok(b) => b,
            Err(e) => return Some(Err(e)),
        };
        let n = block.header.number;
        while self.covered.is_none_or(|c| c < n) {
            match self.spans.next().await {
                Some(Ok((hi, got))) => {
                    self.held.extend(got);
                    self.covered = Some(hi);
                }
                Some(Err(e)) => return Some(Err(e)),
                None => {
                    return Some(Err(RpcError::Failed {
                        endpoint: self.client.endpoint().to_owned(),
                        subject: Subject::Block(n),
                        cause: "no eth_getLogs range covers this block".into(),
                    }));
                }
            }
        }
        let mut mine = Vec::new();
        while self.held.front().is_some_and(|l| l.block_number <= Some(n)) {
            mine.extend(self.held.pop_front());
        }
        match self.client.block_logs(&block.header, mine).await {
            Ok(logs) => {
                block.logs = Some(logs);
                Some(Ok(block))
            }
            Err(e) => Some(Err(e)),
        }
    }
}
