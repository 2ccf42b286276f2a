//! A real anvil node for tests, and `cast` helpers that send every
//! transaction kind from anvil's dev accounts.
//!
//! Usage: `let anvil = Anvil::start().await;` (automine) or
//! `Anvil::start_with(AnvilOptions { no_mining: true, ..Default::default() })`,
//! then `anvil.send(1, TxKind::Legacy).await` returns the tx hash. Every
//! node runs `--hardfork prague` on 127.0.0.1 (port picked by anvil) and
//! is killed on drop, or by the kernel if the test process dies.
//!
//! Binaries: `.tools/` of this repo (installed by scripts/test.sh from the
//! pinned tools/package-lock.json), the native `@foundry-rs/*-linux-*`
//! binary first: killing npm's node wrapper would orphan the real anvil.
//! Then PATH.
//!
//! Caveat from the issue tracker: with automine off keep one fee style
//! (legacy/type-1 vs EIP-1559/4844/7702) per sender; anvil silently drops
//! some mixed-fee pending transactions.
//!
//! It must not listen anywhere but 127.0.0.1, nor reach any other network.

#![allow(dead_code)] // shared helpers: not every test module uses each one

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// anvil prints its banner and binds within ~1s; CI may be slow.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Waiting for a sent tx to be mined (automine or block time).
const RECEIPT_TIMEOUT: Duration = Duration::from_secs(30);

/// A contract-creation init code whose runtime code returns 42.
pub const RETURN_42_INITCODE: &str = "0x600a600c600039600a6000f3602a60005260206000f3";

/// What kind of transaction [`Anvil::send`] makes, and how (cast flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxKind {
    /// Type 0: `--legacy`.
    Legacy,
    /// Type 1: `--legacy --access-list '[...]'` (without `--legacy`, cast
    /// makes a type-2 tx carrying the access list).
    AccessList,
    /// Type 2: cast's default.
    Eip1559,
    /// Type 3: `--blob --eip4844 --path FILE` (Prague takes the 4844
    /// sidecar; cast's default `--blob` format is EIP-7594).
    Blob,
    /// Type 4, authority = sender: `--auth DELEGATE` (cast signs it).
    SetCode { delegate: String },
    /// Type 4 paid by the sender for another dev account: `cast wallet
    /// sign-auth` by `authority`, then `--auth SIGNED`.
    SponsoredSetCode { authority: usize, delegate: String },
    /// Contract creation (type 2): `--create INITCODE`.
    Create { initcode: String },
    /// A call (type 2) with raw calldata and a fixed gas limit, so a call
    /// that reverts is sent rather than refused by gas estimation.
    Call { to: String, data: String },
}

#[derive(Debug, Clone, Default)]
pub struct AnvilOptions {
    /// `--block-time N` seconds; None: automine (a block per tx).
    pub block_time: Option<u64>,
    /// `--no-mining`: blocks only via [`Anvil::mine`].
    pub no_mining: bool,
    /// `--network optimism`, an OP Stack chain (and not `--hardfork
    /// prague`, which that network does not take).
    pub optimism: bool,
    /// Anything else, passed through.
    pub extra_args: Vec<String>,
}

/// A running anvil; killed on drop.
pub struct Anvil {
    pid: i32,
    url: String,
    cast: PathBuf,
    accounts: Vec<(String, String)>,
    reaper: Option<JoinHandle<()>>,
    blob_dir: tempfile::TempDir,
    /// A block per transaction: [`Anvil::send`] waits until it is mined.
    automine: bool,
}

/// `.tools/node_modules/@foundry-rs/<tool>-linux-*/bin/<tool>`, then the npm
/// wrapper in `.tools/node_modules/.bin`, then PATH.
pub fn find_tool(tool: &str) -> PathBuf {
    let modules = Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/node_modules");
    let native = std::fs::read_dir(modules.join("@foundry-rs"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{tool}-linux-"))
        })
        .map(|e| e.path().join("bin").join(tool));
    let on_path = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(tool))
        .collect::<Vec<_>>();
    native
        .chain([modules.join(".bin").join(tool)])
        .chain(on_path)
        .find(|p| Command::new(p).arg("--version").output().is_ok_and(|o| o.status.success()))
        .unwrap_or_else(|| {
            panic!("{tool} not found in .tools/ or on PATH\n\nhint: run scripts/test.sh, which installs the pinned @foundry-rs/{tool}")
        })
}

impl Anvil {
    pub async fn start() -> Self {
        Self::start_with(AnvilOptions::default()).await
    }

    pub async fn start_with(opts: AnvilOptions) -> Self {
        tokio::task::spawn_blocking(move || Self::spawn(opts))
            .await
            .expect("anvil start panicked")
    }

    fn spawn(opts: AnvilOptions) -> Self {
        let automine = opts.block_time.is_none() && !opts.no_mining;
        let mut cmd = Command::new(find_tool("anvil"));
        cmd.args(["--host", "127.0.0.1", "--port", "0"]);
        if opts.optimism {
            cmd.args(["--network", "optimism"]);
        } else {
            cmd.args(["--hardfork", "prague"]);
        }
        if let Some(secs) = opts.block_time {
            cmd.args(["--block-time", &secs.to_string()]);
        }
        if opts.no_mining {
            cmd.arg("--no-mining");
        }
        cmd.args(&opts.extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        // SAFETY: one syscall in the forked child. The kernel kills anvil
        // when its parent thread (the reaper below) ends, i.e. when we die.
        unsafe {
            cmd.pre_exec(|| nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(Into::into));
        }
        // The reaper thread spawns anvil, reads its banner, keeps draining
        // stdout (a full pipe would stall anvil) and reaps it: it must
        // outlive anvil, which no test thread or blocking-pool thread does.
        let (tx, rx) = mpsc::channel::<Result<(i32, Vec<String>), String>>();
        let reaper = std::thread::Builder::new()
            .name("anvil-reaper".into())
            .spawn(move || {
                let mut child = match cmd.spawn() {
                    Ok(c) => c,
                    Err(e) => return drop(tx.send(Err(format!("spawning anvil: {e}")))),
                };
                let pid = child.id() as i32;
                let mut banner = Vec::new();
                let mut tx = Some(tx);
                for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
                    let Ok(line) = line else { break };
                    if let Some(t) = &tx {
                        let done = line.starts_with("Listening on ");
                        banner.push(line);
                        if done {
                            let _ = t.send(Ok((pid, std::mem::take(&mut banner))));
                            tx = None;
                        }
                    }
                }
                let status = child.wait();
                if let Some(t) = tx {
                    let _ = t.send(Err(format!(
                        "anvil exited before listening: {status:?}\n{}",
                        banner.join("\n")
                    )));
                }
            })
            .expect("spawning the anvil reaper thread");
        let (pid, banner) = match rx.recv_timeout(START_TIMEOUT) {
            Ok(Ok(started)) => started,
            Ok(Err(e)) => panic!("{e}"),
            Err(e) => panic!("anvil did not start within {START_TIMEOUT:?}: {e}"),
        };
        let addr = banner
            .last()
            .and_then(|l| l.strip_prefix("Listening on "))
            .expect("listening line");
        let accounts = parse_accounts(&banner);
        assert!(
            accounts.len() >= 10,
            "anvil banner lists {} dev accounts, expected 10",
            accounts.len()
        );
        Self {
            pid,
            url: format!("http://{}", addr.trim()),
            cast: find_tool("cast"),
            accounts,
            reaper: Some(reaper),
            blob_dir: tempfile::tempdir().expect("tempdir for blob data"),
            automine,
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Dev account `i` (0..10): (address, private key), as anvil printed them.
    pub fn account(&self, i: usize) -> (&str, &str) {
        let (a, k) = &self.accounts[i];
        (a, k)
    }

    /// One JSON-RPC call over a plain HTTP/1.1 POST (no client crate
    /// needed); panics on a transport or RPC error. See [`Anvil::try_rpc`].
    pub async fn rpc(&self, method: &str, params: Value) -> Value {
        self.try_rpc(method, params)
            .await
            .unwrap_or_else(|e| panic!("rpc {method}: {e}"))
    }

    pub async fn try_rpc(&self, method: &str, params: Value) -> Result<Value, String> {
        let body =
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
        let host = self.url.trim_start_matches("http://");
        let mut stream = tokio::net::TcpStream::connect(host)
            .await
            .map_err(|e| e.to_string())?;
        let req = format!(
            "POST / HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream
            .write_all(req.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut resp = Vec::new();
        stream
            .read_to_end(&mut resp)
            .await
            .map_err(|e| e.to_string())?;
        let resp = String::from_utf8_lossy(&resp);
        let (head, body) = resp.split_once("\r\n\r\n").ok_or("no http header end")?;
        if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            return Err(format!("chunked response not supported: {head}"));
        }
        let v: Value = serde_json::from_str(body).map_err(|e| format!("{e}: {body}"))?;
        match v.get("error") {
            Some(err) => Err(err.to_string()),
            None => Ok(v["result"].clone()),
        }
    }

    pub async fn block_number(&self) -> u64 {
        hex_u64(&self.rpc("eth_blockNumber", json!([])).await)
    }

    /// `evm_mine` once.
    pub async fn mine(&self) {
        self.rpc("evm_mine", json!([])).await;
    }

    /// `anvil_reorg`: replace the last `depth` blocks with as many empty ones.
    pub async fn reorg(&self, depth: u64) {
        self.rpc("anvil_reorg", json!([depth, []])).await;
    }

    /// `anvil_rollback`: drop the last `depth` blocks (their txs go back to
    /// the pool).
    pub async fn rollback(&self, depth: u64) {
        self.rpc("anvil_rollback", json!([depth])).await;
    }

    /// `eth_getBlockByNumber(n, full)`.
    pub async fn block(&self, n: u64) -> Value {
        self.rpc("eth_getBlockByNumber", json!([format!("{n:#x}"), true]))
            .await
    }

    pub async fn tx(&self, hash: &str) -> Value {
        self.rpc("eth_getTransactionByHash", json!([hash])).await
    }

    /// Polls until the receipt exists.
    pub async fn receipt(&self, hash: &str) -> Value {
        let deadline = Instant::now() + RECEIPT_TIMEOUT;
        loop {
            let r = self.rpc("eth_getTransactionReceipt", json!([hash])).await;
            if !r.is_null() {
                return r;
            }
            assert!(
                Instant::now() < deadline,
                "tx {hash} not mined within {RECEIPT_TIMEOUT:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends a `kind` tx from dev account `from` to dev account 9 (value 1
    /// wei) and returns its hash. The nonce is the pending one, so sends
    /// queue up when automine is off (cast alone would reuse the latest
    /// nonce). With automine it returns once the tx is mined: anvil answers
    /// `eth_sendRawTransaction` before it mines, so a caller that read
    /// `eth_blockNumber` next could see the block before (found by CI).
    pub async fn send(&self, from: usize, kind: TxKind) -> String {
        let (addr, key) = self.account(from);
        let nonce = hex_u64(
            &self
                .rpc("eth_getTransactionCount", json!([addr, "pending"]))
                .await,
        );
        let mut args: Vec<String> = vec!["--nonce".into(), nonce.to_string()];
        let to = self.account(9).0.to_string();
        match &kind {
            TxKind::Legacy => args.push("--legacy".into()),
            TxKind::AccessList => {
                let list = json!([{"address": to, "storageKeys": []}]).to_string();
                args.extend(["--legacy".into(), "--access-list".into(), list]);
            }
            TxKind::Eip1559 | TxKind::Create { .. } => {}
            TxKind::Call { .. } => args.extend(["--gas-limit".into(), "300000".into()]),
            TxKind::Blob => {
                let path = self.blob_dir.path().join(format!("blob-{from}-{nonce}"));
                std::fs::write(&path, format!("blob from {addr} nonce {nonce}")).unwrap();
                args.extend([
                    "--blob".into(),
                    "--eip4844".into(),
                    "--path".into(),
                    path.display().to_string(),
                ]);
            }
            TxKind::SetCode { delegate } => args.extend(["--auth".into(), delegate.clone()]),
            TxKind::SponsoredSetCode {
                authority,
                delegate,
            } => {
                let auth_key = self.account(*authority).1.to_string();
                let signed = self
                    .cast(&["wallet", "sign-auth", delegate, "--private-key", &auth_key])
                    .await;
                args.extend(["--auth".into(), signed]);
            }
        }
        match kind {
            TxKind::Create { initcode } => args.extend(["--create".into(), initcode]),
            TxKind::Call { to, data } => args.extend([to, data]),
            _ => args.extend([to, "--value".into(), "1".into()]),
        }
        let mut full = vec!["send", "--async", "--private-key", key];
        full.extend(args.iter().map(String::as_str));
        let hash = self.cast(&full).await;
        assert!(
            hash.starts_with("0x") && hash.len() == 66,
            "cast send printed {hash:?}"
        );
        if self.automine {
            self.receipt(&hash).await;
        }
        hash
    }

    /// Runs cast with `--rpc-url URL` inserted after the leading words
    /// (subcommand, positionals: `send --create` ends the option list),
    /// returns trimmed stdout; panics with stderr on failure.
    /// Sends one transaction of every signed kind, each from its own
    /// sender so fee styles never mix per sender: legacy (account 1),
    /// EIP-2930 (2), EIP-1559 (3), blob (4), EIP-7702 self-signed (5) and
    /// sponsored by account 6 for authority 7, all delegating to account 8.
    /// Returns each hash with the type it must have.
    pub async fn send_every_kind(&self) -> Vec<(String, u64)> {
        let delegate = self.account(8).0.to_string();
        vec![
            (self.send(1, TxKind::Legacy).await, 0),
            (self.send(2, TxKind::AccessList).await, 1),
            (self.send(3, TxKind::Eip1559).await, 2),
            (self.send(4, TxKind::Blob).await, 3),
            (
                self.send(
                    5,
                    TxKind::SetCode {
                        delegate: delegate.clone(),
                    },
                )
                .await,
                4,
            ),
            (
                self.send(
                    6,
                    TxKind::SponsoredSetCode {
                        authority: 7,
                        delegate,
                    },
                )
                .await,
                4,
            ),
        ]
    }

    pub async fn cast(&self, args: &[&str]) -> String {
        let lead = args.iter().take_while(|a| !a.starts_with('-')).count();
        let out = tokio::process::Command::new(&self.cast)
            .args(&args[..lead])
            .args(["--rpc-url", &self.url])
            .args(&args[lead..])
            .stdin(Stdio::null())
            .output()
            .await
            .expect("running cast");
        assert!(
            out.status.success(),
            "cast {args:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for Anvil {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.pid), Signal::SIGKILL);
        if let Some(reaper) = self.reaper.take() {
            let _ = reaper.join();
        }
    }
}

/// Reads "(i) 0x..." lines of the "Available Accounts" and "Private Keys"
/// banner sections.
fn parse_accounts(banner: &[String]) -> Vec<(String, String)> {
    let section = |title: &str| -> Vec<String> {
        banner
            .iter()
            .skip_while(|l| l.trim() != title)
            .skip(1)
            .skip_while(|l| !l.trim_start().starts_with('('))
            .take_while(|l| l.trim_start().starts_with('('))
            .filter_map(|l| l.split_whitespace().nth(1).map(String::from))
            .collect()
    };
    section("Available Accounts")
        .into_iter()
        .zip(section("Private Keys"))
        .collect()
}

pub fn hex_u64(v: &Value) -> u64 {
    let s = v
        .as_str()
        .unwrap_or_else(|| panic!("expected a hex quantity, got {v}"));
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap_or_else(|e| panic!("{s}: {e}"))
}

/// Sends a round of every transaction kind (one fee style per sender,
/// type-4 at most once per sender per block) and mines it into one block.
pub async fn mine_every_kind(anvil: &Anvil) -> Vec<String> {
    // A second legacy and 1559 tx from the same senders: several per block.
    let mut hashes = vec![
        anvil.send(1, TxKind::Legacy).await,
        anvil.send(3, TxKind::Eip1559).await,
    ];
    hashes.extend(anvil.send_every_kind().await.into_iter().map(|(h, _)| h));
    hashes.push(
        anvil
            .send(
                0,
                TxKind::Create {
                    initcode: RETURN_42_INITCODE.into(),
                },
            )
            .await,
    );
    anvil.mine().await;
    hashes
}

/// `anvil_mine`: `n` empty blocks at once.
pub async fn mine_empty(anvil: &Anvil, n: u64) {
    anvil.rpc("anvil_mine", json!([format!("{n:#x}")])).await;
}
