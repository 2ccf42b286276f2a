//! The `recover` command: JSON transaction objects in, one per line; one
//! JSON result line out per input line, in input order.
//!
//! Lines are grouped into chunks and recovered on the shared [`Pool`], the
//! same one the indexing pipeline uses. Chunks in flight are bounded (the
//! pool's permits plus a small ordered queue), so memory stays flat on any
//! input size. A bad line yields an error line; only I/O failure on stdin or
//! stdout stops the run. This module does not touch the database.
//!
//! Every line says how its sender was obtained (`source`, as
//! `transactions.sender_source`) and whether the hash rebuilt from its
//! fields equals the line's `hash` (`hash_verified`): a sender recovered
//! from fields that do not give the transaction's hash would be wrong, so
//! a mismatch prints no sender and an error instead.

use std::sync::Arc;

use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use crate::chain::{Family, TxHashing, family_of};
use crate::decode::{Tx, hex0x, keccak};
use crate::recover::{Pool, prefetch, recover_tx_in};

/// Which chain's rules lines are read by.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// `chain.profile` (`--chain-profile`): every line by this family.
    pub profile: Option<Family>,
    /// `--chain-id`: lines without a chainId of their own are of this chain.
    pub chain_id: Option<u64>,
}

impl Rules {
    fn family(&self, tx: &Tx) -> Family {
        // Its own chain id: `chainId`, or on a legacy line its EIP-155 `v`.
        let own = match (tx.tx_type, &tx.chain_id, &tx.v) {
            (0, _, Some(v)) => Tx::eip155_chain_id(v),
            (_, id, _) => *id,
        };
        let id = own.and_then(|c| c.to_u64()).or(self.chain_id);
        self.profile
            .or_else(|| id.and_then(|id| family_of(id, None)))
            .unwrap_or(Family::Ethereum)
    }
}

/// Lines per pool job: large enough that queueing costs nothing next to
/// ~50 µs of recovery per line, small enough to keep workers evenly fed.
const CHUNK_LINES: usize = 64;

/// Totals of one run, for the summary on stderr.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    pub lines: u64,
    pub recovered: u64,
    pub failed: u64,
}

/// The output line (without newline) for one input line, and whether a
/// sender was recovered.
pub fn process_line(line: &str, rules: Rules) -> (String, bool) {
    // Read by Ethereum's rules first (every chain's common types), then
    // again by the chain's when it has its own.
    let tx = Tx::from_json(line).and_then(|tx| match rules.family(&tx) {
        Family::Ethereum => Ok((tx, Family::Ethereum)),
        family => Tx::from_json_in(line, family).map(|tx| (tx, family)),
    });
    let (tx, family) = match tx {
        Ok(tx) => tx,
        Err(e) => {
            // Echo the hash if the line is JSON with one, even when another
            // field is malformed.
            let hash = serde_json::from_str::<serde_json::Value>(line)
                .ok()
                .and_then(|v| {
                    v.get("hash")
                        .and_then(|h| h.as_str())
                        .map(str::to_lowercase)
                });
            let out =
                json!({"hash": hash, "sender": null, "error": format!("invalid transaction: {e}")});
            return (out.to_string(), false);
        }
    };
    let profile = family.profile();
    let mut recovered = recover_tx_in(&tx, profile);
    let mut error = recovered.sender.as_ref().err().map(|e| e.to_string());
    // The hash the fields give, against the line's.
    let verified = match (tx.hash, profile.rule(tx.tx_type).map(|r| r.hashing)) {
        (_, None) => {
            error = Some(format!(
                "transaction type 0x{:02x} is not a type of the {family} profile; give --chain-id or --chain-profile for its chain",
                tx.tx_type
            ));
            None
        }
        (_, Some(TxHashing::Reported)) | (None, _) => None,
        (Some(hash), Some(_)) => match tx.signed_encoding() {
            Ok(enc) if keccak(&[&enc]) == hash => Some(true),
            Ok(enc) => {
                error = Some(format!(
                    "the transaction's fields give hash {}, not its hash {}: a sender from them would be wrong (a chain of its own types? give --chain-id or --chain-profile)",
                    hex0x(&keccak(&[&enc])),
                    hex0x(&hash)
                ));
                Some(false)
            }
            Err(e) => {
                error = Some(format!("its hash cannot be rebuilt: {e}"));
                Some(false)
            }
        },
    };
    if verified == Some(false) || error.is_some() && recovered.sender.is_ok() {
        recovered.sender = Err(crate::block::RecoverError::NoKey);
    }
    let mut out = serde_json::Map::new();
    out.insert("hash".into(), json!(tx.hash.map(|h| hex0x(&h))));
    out.insert(
        "sender".into(),
        json!(recovered.sender.as_ref().ok().map(|a| hex0x(a))),
    );
    out.insert("source".into(), json!(recovered.source.as_str()));
    out.insert("hash_verified".into(), json!(verified));
    if tx.tx_type == 4 {
        let auths: Vec<_> = recovered
            .authorities
            .iter()
            .map(|a| a.as_ref().ok().map(|a| hex0x(a)))
            .collect();
        out.insert("authorities".into(), json!(auths));
    }
    if let Some(e) = error {
        out.insert("error".into(), json!(e));
    }
    (
        serde_json::Value::Object(out).to_string(),
        recovered.sender.is_ok(),
    )
}

/// Reads lines from `input` until EOF and writes one result line each to
/// `output`, in order.
pub async fn run<R, W>(
    input: R,
    mut output: W,
    pool: Arc<Pool>,
    rules: Rules,
) -> std::io::Result<Totals>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    // Each entry is one chunk's result, queued in input order.
    let (order_tx, mut order_rx) =
        mpsc::channel::<oneshot::Receiver<Vec<(String, bool)>>>(pool.threads() * 2);
    let reader = async move {
        let mut lines = BufReader::with_capacity(1 << 20, input).lines();
        let mut chunk = Vec::with_capacity(CHUNK_LINES);
        loop {
            let line = lines.next_line().await?;
            let eof = line.is_none();
            chunk.extend(line);
            // Send a partial chunk rather than wait for more input, so an
            // interactive caller gets each answer as soon as it can.
            let more_buffered = lines.get_ref().buffer().contains(&b'\n');
            if chunk.len() == CHUNK_LINES || (!chunk.is_empty() && (eof || !more_buffered)) {
                let lines = std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK_LINES));
                let rx = pool
                    .spawn(move || {
                        (0..lines.len())
                            .map(|i| {
                                if let Some(next) = lines.get(i + 1) {
                                    prefetch(next.as_bytes());
                                }
                                process_line(&lines[i], rules)
                            })
                            .collect()
                    })
                    .await;
                if order_tx.send(rx).await.is_err() {
                    break; // the writer stopped on an output error
                }
            }
            if eof {
                break;
            }
        }
        Ok::<(), std::io::Error>(())
    };
    let writer = async move {
        let mut totals = Totals::default();
        while let Some(rx) = order_rx.recv().await {
            let results = rx
                .await
                .map_err(|_| std::io::Error::other("a recovery job panicked"))?;
            let mut buf = Vec::with_capacity(results.len() * 128);
            for (line, ok) in results {
                buf.extend_from_slice(line.as_bytes());
                buf.push(b'\n');
                totals.lines += 1;
                if ok {
                    totals.recovered += 1;
                } else {
                    totals.failed += 1;
                }
            }
            output.write_all(&buf).await?;
            if order_rx.is_empty() {
                output.flush().await?;
            }
        }
        output.flush().await?;
        Ok::<Totals, std::io::Error>(totals)
    };
    let (read, written) = tokio::join!(reader, writer);
    let totals = written?;
    read?;
    Ok(totals)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_lines_get_error_lines() {
        let (out, ok) = process_line("not json", Rules::default());
        assert!(!ok);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["hash"], serde_json::Value::Null);
        assert_eq!(v["sender"], serde_json::Value::Null);
        assert!(v["error"].as_str().unwrap().contains("invalid transaction"));

        let (out, ok) = process_line(r#"{"hash":"0xAB","r":"zz"}"#, Rules::default());
        assert!(!ok);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["hash"], "0xab");
    }

    #[tokio::test]
    async fn one_output_line_per_input_line_in_order() {
        let pool = Arc::new(Pool::new(2, 4));
        let input: String = (0..1000)
            .map(|i| format!("{{\"hash\":\"0x{i:064x}\"}}\n"))
            .collect();
        let mut out = Vec::new();
        let totals = run(input.as_bytes(), &mut out, pool, Rules::default())
            .await
            .unwrap();
        assert_eq!(totals.lines, 1000);
        assert_eq!(totals.failed, 1000);
        let lines: Vec<_> = std::str::from_utf8(&out).unwrap().lines().collect();
        assert_eq!(lines.len(), 1000);
        for (i, l) in lines.iter().enumerate() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["hash"], format!("0x{i:064x}"));
            assert!(
                v["error"].as_str().unwrap().contains("missing field"),
                "{l}"
            );
        }
    }
}
