//! The `status` report: what is indexed (from `store`'s read-only queries)
//! and how far behind the node it is (one quick head request). It reads
//! and prints; it changes nothing.

use std::fmt::Write as _;
use std::time::Duration;

use crate::config::Settings;
use crate::redact::redact_url;
use crate::rpc::RpcClient;
use crate::store::Store;

/// How long the head request may take before the node counts as
/// unreachable: `status` answers quickly even when the node does not.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

pub async fn report(settings: &Settings, store: &Store) -> anyhow::Result<String> {
    let s = crate::store::query::status(store.pool()).await?;
    let mut out = String::new();
    let chain = match store.chain_id().await? {
        Some(id) => match crate::chain::known_chain(id) {
            Some(c) => format!("chain id {id} ({})", c.name),
            None => format!("chain id {id}"),
        },
        None => "no chain id recorded yet".into(),
    };
    let schema = store.schema().unwrap_or("none");
    writeln!(out, "chain:          {chain}, in schema {schema}")?;
    let range = match (s.lowest, s.highest) {
        (Some(lo), Some(hi)) => format!("{lo}..={hi}"),
        _ => "none".into(),
    };
    writeln!(out, "blocks indexed: {range} ({} blocks)", s.blocks)?;
    if s.missing_blocks == 0 {
        writeln!(out, "gaps:           none")?;
    } else {
        let shown: Vec<String> = s.gaps.iter().map(|(a, b)| format!("{a}..={b}")).collect();
        writeln!(
            out,
            "gaps:           {} blocks missing: {}",
            s.missing_blocks,
            shown.join(", ")
        )?;
    }
    match &s.checkpoint {
        Some((n, h)) => writeln!(out, "checkpoint:     {n} {h}")?,
        None => writeln!(out, "checkpoint:     none")?,
    }
    segments(&mut out, &store.segments().await?)?;
    for (table, rows) in &s.rows {
        writeln!(out, "rows {table:<14} {rows}")?;
    }
    let count = |level: Option<&str>| {
        s.verified
            .iter()
            .find(|(v, _)| v.as_deref() == level)
            .map_or(0, |(_, n)| *n)
    };
    let (full, off, before) = (count(Some("full")), count(Some("off")), count(None));
    let (header, links) = (count(Some("header")), count(Some("links")));
    if s.blocks > 0 {
        let mut line = format!("verified:       {full} of {} blocks in full", s.blocks);
        if header > 0 {
            line += &format!(
                "; {header} up to what their chain allows (header hash, parent links, hashes that can be rebuilt)"
            );
        }
        if links > 0 {
            line += &format!(
                "; {links} by parent links only (their chain's block hashes cannot be rebuilt)"
            );
        }
        if off > 0 {
            line += &format!(
                "; {off} UNVERIFIED (indexed with verify = \"off\": stored as the node sent them)"
            );
        }
        if before > 0 {
            line += &format!("; {before} indexed before verification existed");
        }
        writeln!(out, "{line}")?;
    }
    if !s.senders.is_empty() {
        let parts: Vec<String> = s
            .senders
            .iter()
            .map(|(source, n)| {
                let what = match source.as_str() {
                    "recovered" => "recovered from signatures",
                    "committed" => "committed by the transaction hash",
                    "none" => "system transactions with no sender",
                    "reported" => "as the node reported (UNCHECKED)",
                    other => other,
                };
                format!("{n} {what}")
            })
            .collect();
        writeln!(out, "senders:        {}", parts.join("; "))?;
    }
    if s.anchors.is_empty() {
        writeln!(
            out,
            "trust anchor:   none (blocks are checked against their own hashes and each other, not linked to a block you trust; give --trusted-block N:0xHASH)"
        )?;
    }
    for a in &s.anchors {
        match a.linked {
            Some((lo, hi)) => writeln!(
                out,
                "trust anchor:   {}: blocks {lo}..={hi} link to it by parent hashes",
                a.origin
            )?,
            None => writeln!(
                out,
                "trust anchor:   {}: no stored block links to it now",
                a.origin
            )?,
        }
    }
    let missing = store
        .clone()
        .with_optional_indexes(&settings.index.optional_indexes)?
        .missing_lookup_indexes()
        .await?;
    if missing.is_empty() {
        writeln!(out, "lookup indexes: ok")?;
    } else {
        writeln!(
            out,
            "lookup indexes: missing {} (dropped for a bulk load that has not finished; queries by them are slow until the next backfill, sync or follow builds them)",
            missing.join(", ")
        )?;
    }
    let mut quick = settings.rpc.clone();
    quick.max_retries = 1;
    quick.request_timeout = quick.request_timeout.min(Duration::from_secs(5));
    let head = match RpcClient::new(quick) {
        Ok(rpc) => tokio::time::timeout(HEAD_TIMEOUT, rpc.head())
            .await
            .ok()
            .and_then(Result::ok),
        Err(_) => None,
    };
    match (head, &s.checkpoint) {
        (Some(head), Some((n, _))) => writeln!(
            out,
            "node head:      {head} (lag {} blocks)",
            head.saturating_sub(*n)
        )?,
        (Some(head), None) => writeln!(out, "node head:      {head}")?,
        (None, _) => writeln!(
            out,
            "node head:      unreachable ({})",
            settings
                .rpc
                .urls
                .iter()
                .map(|u| redact_url(u.as_str()))
                .collect::<Vec<_>>()
                .join(", ")
        )?,
    }
    Ok(out)
}

/// Leased backfill segments: how many are done, leased (by whom, since
/// when, and whether the lease expired) and free, and those partly written.
fn segments(out: &mut String, rows: &[crate::store::SegmentRow]) -> std::fmt::Result {
    if rows.is_empty() {
        return Ok(());
    }
    let n = |state: &str| rows.iter().filter(|r| r.state == state).count();
    writeln!(
        out,
        "segments:       {} done, {} leased, {} free ({}..={})",
        n("done"),
        n("leased"),
        n("free"),
        rows[0].first,
        rows[rows.len() - 1].last
    )?;
    for r in rows.iter().filter(|r| r.state == "leased") {
        let expiry = match r.expires_in_s {
            Some(s) if s >= 0.0 => format!("lease ends in {s:.0}s"),
            Some(s) => format!("lease EXPIRED {:.0}s ago, free to take over", -s),
            None => "no expiry".into(),
        };
        writeln!(
            out,
            "  leased {}..={} by {} for {:.0}s, at block {}; {expiry}",
            r.first,
            r.last,
            r.owner.as_deref().unwrap_or("?"),
            r.leased_for_s.unwrap_or(0.0),
            r.next
        )?;
    }
    for r in rows
        .iter()
        .filter(|r| r.state == "free" && r.next > r.first)
    {
        writeln!(
            out,
            "  free   {}..={}, written up to block {} (resumes there)",
            r.first,
            r.last,
            r.next - 1
        )?;
    }
    Ok(())
}
