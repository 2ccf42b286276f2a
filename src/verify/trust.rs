//! Linking a run to its trust anchors before it writes anything: the
//! trusted blocks of the settings and the built-in genesis of a known
//! chain. A range is indexed only if it reaches an anchor by parent
//! hashes: the anchor inside it, right below it, or joined through stored
//! blocks (below, or above a range indexed downwards); otherwise it is
//! refused, naming both hashes. [`check`](super::check) then checks each
//! anchor's block as it arrives ([`Anchors`]).
//!
//! The one part of `verify` that reads: the node and the database, only
//! through the [`Source`] and [`Sink`] traits (so it runs through the
//! reconnecting sink, and on the tests' in-memory chain); it writes only
//! the record of the anchors linked to.

use anyhow::bail;

use super::{Anchors, Level, builtin_genesis};
use crate::config::VerifySettings;
use crate::decode::hex0x;
use crate::sink::Sink;
use crate::source::Source;

/// The anchors a run over `from..=to` (`to` unbounded when following)
/// checks blocks against, once it is known to link to one of them.
pub async fn link(
    verify: &VerifySettings,
    source: &dyn Source,
    sink: &dyn Sink,
    from: u64,
    to: Option<u64>,
) -> anyhow::Result<Anchors> {
    let mut out = Anchors::default();
    if verify.level == Level::Off {
        tracing::warn!(target: "indexer::verify", "verify = \"off\": blocks are stored as the node sends them, unverified");
        return Ok(out);
    }
    let mut anchors = verify.trusted_blocks.clone();
    if !anchors.iter().any(|a| a.number == 0)
        && (from == 0 || sink.block_hash(0).await?.is_some())
        && let Some(g) = builtin_genesis(source.chain_id().await?)
    {
        anchors.push(g);
    }
    if anchors.is_empty() {
        tracing::info!(target: "indexer::verify", "no trust anchor: blocks are verified against their own contents and each other; give --trusted-block N:0xHASH to link them to a block you trust");
        return Ok(out);
    }
    let mut linked = Vec::new();
    let mut refusals = Vec::new();
    for a in &anchors {
        let inside = a.number >= from && to.is_none_or(|t| a.number <= t);
        // A hash for the anchor's block we already have: stored, or the node's.
        let stored = sink.block_hash(a.number).await?;
        if let Some(h) = stored.filter(|h| *h != a.hash) {
            bail!(
                "block {}: the stored block's hash is {}, but {}; the database holds another chain (index into a fresh database, or check the trusted block)",
                a.number,
                hex0x(&h),
                a.describe()
            );
        }
        if inside {
            if stored.is_none()
                && let Some(h) = source.header(a.number).await?
                && h.hash != a.hash
            {
                bail!(
                    "block {}: the node's block hash is {}, but {}; refusing to index a chain that does not lead to it (check the RPC endpoint, or the trusted block)",
                    a.number,
                    hex0x(&h.hash),
                    a.describe()
                );
            }
            out.insert(a.number, a.hash, a.describe());
            linked.push(a);
        } else if a.number + 1 == from {
            out.insert(a.number, a.hash, a.describe());
            linked.push(a);
        } else if a.number < from {
            if sink.linked(a.number, from - 1).await? {
                linked.push(a);
            } else {
                refusals.push(format!(
                    "{} is below it, and blocks {}..={} are not all indexed and linked",
                    a.describe(),
                    a.number,
                    from - 1
                ));
            }
        } else if let Some(to) = to {
            // Above a range indexed downwards: through the stored blocks above it.
            if sink.linked(to + 1, a.number).await? {
                let parent = sink.parent_hash(to + 1).await?.ok_or_else(|| {
                    anyhow::anyhow!("block {}: stored a moment ago, now gone", to + 1)
                })?;
                out.insert(
                    to,
                    parent,
                    format!("the parent hash of stored block {}", to + 1),
                );
                linked.push(a);
            } else {
                refusals.push(format!(
                    "{} is above it, and blocks {}..={} are not all indexed and linked",
                    a.describe(),
                    to + 1,
                    a.number
                ));
            }
        }
    }
    if linked.is_empty() {
        let first = source.header(from).await?;
        let parent = first.map_or("unknown (the node has no such block yet)".into(), |h| {
            hex0x(&h.parent_hash)
        });
        let range = to.map_or(format!("blocks from {from}"), |t| {
            format!("blocks {from}..={t}")
        });
        bail!(
            "{range} cannot be linked to a trusted block by parent hashes (block {from}'s parent hash is {parent}): {}\n\nhint: index from the trusted block, or give --trusted-block {}:0xHASH for the block below the range",
            refusals.join("; "),
            from.saturating_sub(1)
        );
    }
    for a in linked {
        sink.record_anchor(a).await?;
        tracing::info!(target: "indexer::verify", anchor = %a.describe(), "every block of this run must link to it by parent hashes");
    }
    Ok(out)
}
