//! An in-memory chain behind `sender_indexer::source::Source`, for fast
//! in-process tests of the converge loop: it grows, forks (a reorg of any
//! depth), lags behind (a replica serving an older head with the same
//! hashes), stops chaining (blocks whose parent hash is wrong), stalls and
//! fails, each on command. The pipeline cannot tell it from a node; the
//! anvil tests prove the real node, these prove the logic.
//!
//! Blocks carry real signed mainnet transactions from `tests/fixtures`
//! (a different few per block and fork), so recovery runs and orphaned
//! transaction rows would show. Hashes are keccak of (fork, number): every
//! fork's blocks differ from every other's. It builds no secp256k1
//! context and touches no network.

#![allow(dead_code)] // shared helpers: not every test module uses each one

use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::bail;
use futures::StreamExt;
use futures::stream::BoxStream;
use sender_indexer::decode::{B256, BlockHeader, RawBlock, hex0x, keccak, split_block};
use sender_indexer::source::{Heads, Source};

use super::fixtures;

/// How often a request for a block the chain does not have yet looks again.
const WAIT_STEP: Duration = Duration::from_millis(2);

pub struct MemoryChain {
    state: Mutex<State>,
    /// Signed transactions' JSON, shared by every block that uses them.
    txs: Vec<String>,
}

#[derive(Clone)]
struct Block {
    header: BlockHeader,
    /// Indexes into `MemoryChain::txs`.
    txs: Vec<usize>,
}

#[derive(Default)]
struct State {
    blocks: Vec<Block>,
    forks: u64,
    txs_per_block: usize,
    /// The head served is the tip less this; blocks above it are "not
    /// produced yet" for this replica.
    lag: u64,
    /// Blocks served from now on claim a parent hash nobody has.
    unchained: bool,
    /// The next this many requests fail.
    failures: usize,
    /// Time taken to serve each block.
    block_delay: Duration,
    blocks_served: u64,
}

impl MemoryChain {
    /// Blocks `0..len`, each with `txs_per_block` transactions.
    pub fn new(len: u64, txs_per_block: usize) -> Arc<MemoryChain> {
        let txs = fixtures::transactions()
            .into_iter()
            .filter(|t| t.network == "mainnet")
            .map(|t| t.line)
            .collect();
        let chain = MemoryChain {
            state: Mutex::new(State {
                txs_per_block,
                ..State::default()
            }),
            txs,
        };
        chain.extend(len);
        Arc::new(chain)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    /// Adds `n` blocks on top of the tip.
    pub fn extend(&self, n: u64) {
        let mut s = self.lock();
        let fork = s.forks;
        for _ in 0..n {
            let number = s.blocks.len() as u64;
            let block = self.make(&s, number, fork);
            s.blocks.push(block);
        }
    }

    /// Replaces the last `depth` blocks with a new fork of the same length:
    /// what a node's `anvil_reorg` does.
    pub fn reorg(&self, depth: u64) {
        let tip = self.tip();
        self.fork_at(tip + 1 - depth, depth);
    }

    /// Drops every block from `first` on and grows a new fork of `len`
    /// blocks from there.
    pub fn fork_at(&self, first: u64, len: u64) {
        let mut s = self.lock();
        s.forks += 1;
        let fork = s.forks;
        s.blocks.truncate(first as usize);
        for number in first..first + len {
            let block = self.make(&s, number, fork);
            s.blocks.push(block);
        }
    }

    fn make(&self, s: &State, number: u64, fork: u64) -> Block {
        let hash = keccak(&[b"memory chain", &fork.to_be_bytes(), &number.to_be_bytes()]);
        let parent_hash = match number {
            0 => [0; 32],
            n => s.blocks[n as usize - 1].header.hash,
        };
        let first = (number as usize * 7 + fork as usize * 13) % self.txs.len();
        Block {
            header: BlockHeader {
                number,
                hash,
                parent_hash,
                timestamp: 1_700_000_000 + number * 12,
                logs_bloom: None,
                fields: None,
                l1_block_number: None,
            },
            txs: (0..s.txs_per_block)
                .map(|i| (first + i) % self.txs.len())
                .collect(),
        }
    }

    /// The last block's number.
    pub fn tip(&self) -> u64 {
        self.lock().blocks.len() as u64 - 1
    }

    /// Serve a head `blocks` below the tip, and nothing above it.
    pub fn set_lag(&self, blocks: u64) {
        self.lock().lag = blocks;
    }

    /// From now on, serve blocks whose parent hash matches no block.
    pub fn set_unchained(&self, on: bool) {
        self.lock().unchained = on;
    }

    /// The next `n` requests (head, header or a block) fail.
    pub fn fail_next(&self, n: usize) {
        self.lock().failures = n;
    }

    /// Each block takes this long to serve.
    pub fn set_block_delay(&self, delay: Duration) {
        self.lock().block_delay = delay;
    }

    pub fn blocks_served(&self) -> u64 {
        self.lock().blocks_served
    }

    /// Every canonical block: (number, hash, its transactions' hashes).
    pub fn canonical(&self) -> Vec<(u64, B256, Vec<String>)> {
        let s = self.lock();
        s.blocks
            .iter()
            .map(|b| {
                let hashes = b.txs.iter().map(|&i| self.tx_hash(i)).collect();
                (b.header.number, b.header.hash, hashes)
            })
            .collect()
    }

    fn tx_hash(&self, i: usize) -> String {
        let v: serde_json::Value = serde_json::from_str(&self.txs[i]).unwrap();
        v["hash"]
            .as_str()
            .unwrap()
            .trim_start_matches("0x")
            .to_owned()
    }

    /// Fails the request if a failure is queued.
    fn check(&self, what: &str) -> anyhow::Result<()> {
        let mut s = self.lock();
        if s.failures > 0 {
            s.failures -= 1;
            bail!("memory chain: {what}: injected failure");
        }
        Ok(())
    }

    fn visible_head(s: &State) -> u64 {
        (s.blocks.len() as u64 - 1).saturating_sub(s.lag)
    }

    /// Block `n` as a node's JSON, split as the rpc stage splits it; `None`
    /// when it is not produced yet.
    fn raw_block(&self, n: u64) -> anyhow::Result<Option<RawBlock>> {
        self.check(&format!("block {n}"))?;
        let mut s = self.lock();
        if n > Self::visible_head(&s) {
            return Ok(None);
        }
        s.blocks_served += 1;
        let b = &s.blocks[n as usize];
        let parent = if s.unchained {
            keccak(&[b"nobody's block", &n.to_be_bytes()])
        } else {
            b.header.parent_hash
        };
        let txs: Vec<&str> = b.txs.iter().map(|&i| self.txs[i].as_str()).collect();
        let text = format!(
            r#"{{"number":"0x{n:x}","hash":"{}","parentHash":"{}","timestamp":"0x{:x}","transactions":[{}]}}"#,
            hex0x(&b.header.hash),
            hex0x(&parent),
            b.header.timestamp,
            txs.join(",")
        );
        let (header, txs) = split_block(&text)?;
        Ok(Some(RawBlock {
            text: Arc::new(text),
            header,
            txs,
            receipts: None,
            logs: None,
        }))
    }
}

#[async_trait::async_trait]
impl Source for MemoryChain {
    async fn chain_id(&self) -> anyhow::Result<u64> {
        self.check("chain id")?;
        // A development chain's id: no built-in genesis anchor applies.
        Ok(31337)
    }

    async fn head(&self) -> anyhow::Result<u64> {
        self.check("head")?;
        Ok(Self::visible_head(&self.lock()))
    }

    async fn header(&self, n: u64) -> anyhow::Result<Option<BlockHeader>> {
        self.check(&format!("header {n}"))?;
        let s = self.lock();
        Ok((n <= Self::visible_head(&s)).then(|| s.blocks[n as usize].header.clone()))
    }

    fn blocks(
        self: Arc<Self>,
        range: RangeInclusive<u64>,
    ) -> BoxStream<'static, anyhow::Result<RawBlock>> {
        futures::stream::unfold(
            (self, Some(*range.start()), *range.end()),
            |(chain, next, end)| async move {
                let n = next.filter(|&n| n <= end)?;
                let delay = chain.lock().block_delay;
                tokio::time::sleep(delay).await;
                // A block not produced yet is waited for, as a node's is.
                let item = loop {
                    match chain.raw_block(n) {
                        Ok(Some(b)) => break Ok(b),
                        Ok(None) => tokio::time::sleep(WAIT_STEP).await,
                        Err(e) => break Err(e),
                    }
                };
                // The stream ends after the first error.
                let next = item.as_ref().ok().map(|_| n + 1);
                Some((item, (chain, next, end)))
            },
        )
        .boxed()
    }

    async fn block(&self, n: u64) -> anyhow::Result<Option<RawBlock>> {
        self.raw_block(n)
    }

    async fn new_heads(&self) -> anyhow::Result<Option<Heads>> {
        Ok(None)
    }
}
