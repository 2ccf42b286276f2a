//! Linking a run to its trust anchors before it writes anything: the
//! trusted blocks of the settings and the built-in genesis of a known
//! chain. A range is indexed only if it reaches an anchor by parent
//! hashes: the anchor inside it, right below it, or joined through stored
//! blocks (below, or above a range indexed downwards); otherwise it is
//! refused, naming both hashes. The pipeline then checks each anchor's
//! block as it arrives ([`crate::verify::Anchors`]). Reads the node and the
//! database; writes only the `trust_anchors` record.

use anyhow::bail;

use crate::config::VerifySettings;
use crate::decode::hex0x;
use crate::rpc::RpcClient;
use crate::store::Store;
use crate::verify::{Anchors, Level, builtin_genesis};

/// What linking a run needs, handed to the command's converge step, which
/// alone knows where the run starts.
pub struct Trust {
    pub verify: VerifySettings,
    pub rpc: std::sync::Arc<RpcClient>,
    pub store: Store,
}

impl Trust {
    /// Links a run over `from..=to` and gives `ctx` its anchors.
    pub async fn link(
        &self,
        ctx: &crate::pipeline::Ctx,
        from: u64,
        to: Option<u64>,
    ) -> anyhow::Result<()> {
        let anchors = link(&self.verify, &self.rpc, &self.store, from, to).await?;
        let _ = ctx.anchors.set(anchors);
        Ok(())
    }
}

/// The anchors a run over `from..=to` (`to` unbounded when following)
/// checks blocks against, once it is known to link to one of them.
async fn link(
    verify: &VerifySettings,
    rpc: &RpcClient,
    store: &Store,
    from: u64,
    to: Option<u64>,
) -> anyhow::Result<Anchors> {
    let mut out = Anchors::default();
    if verify.level == Level::Off {
        tracing::warn!(target: "indexer::verify", "verify = \"off\": blocks are stored as the node sends them, unverified");
        return Ok(out);
    }
    let mut anchors = verify.trusted_blocks.clone();
    if !anchors.iter().any(|a| a.number == 0) && (from == 0 || store.block_hash(0).await?.is_some())
    {
        if let Some(g) = builtin_genesis(rpc.chain_id().await?) {
            anchors.push(g);
        }
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
        let stored = store.block_hash(a.number).await?;
        if let Some(h) = stored.filter(|h| *h != a.hash) {
            bail!(
                "block {}: the stored block's hash is {}, but {}; the database holds another chain (index into a fresh database, or check the trusted block)",
                a.number,
                hex0x(&h),
                a.describe()
            );
        }
        if inside {
            if stored.is_none() {
                if let Some(h) = rpc.header(a.number).await? {
                    if h.hash != a.hash {
                        bail!(
                            "block {}: the node's block hash is {}, but {}; refusing to index a chain that does not lead to it (check the RPC endpoint, or the trusted block)",
                            a.number,
                            hex0x(&h.hash),
                            a.describe()
                        );
                    }
                }
            }
            out.insert(a.number, a.hash, a.describe());
            linked.push(a);
        } else if a.number + 1 == from {
            out.insert(a.number, a.hash, a.describe());
            linked.push(a);
        } else if a.number < from {
            if store.linked(a.number, from - 1).await? {
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
            if store.linked(to + 1, a.number).await? {
                let parent = store.parent_hash(to + 1).await?.expect("linked, so stored");
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
        let first = rpc.header(from).await?;
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
        store.record_anchor(a).await?;
        tracing::info!(target: "indexer::verify", anchor = %a.describe(), "every block of this run must link to it by parent hashes");
    }
    Ok(out)
}
