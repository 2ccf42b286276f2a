//! Shared by the benchmarks (`recovery`, `backfill`): loads the real-chain
//! fixtures, turns transactions into precomputed (message, signature) pairs
//! for the raw secp256k1 floor, runs that floor on one or more threads,
//! times rounds (median) and prints tables.
//!
//! It decides nothing: each bench picks what to measure and prints its own
//! ratios. The floor recovers through [`sender_indexer::recover::context`],
//! the one shared context; only `benches/recovery.rs` (c) builds another.

#![allow(dead_code)] // each bench uses a different subset

use std::hint::black_box;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use nix::libc;

use anyhow::Context as _;
use secp256k1::Message;
use secp256k1::ecdsa::{RecoverableSignature, RecoveryId};
use sender_indexer::decode::{Address, B256, Tx, U256};
use sender_indexer::embedded_pg::{Cluster, ClusterDropGuard, ClusterOptions};
use sender_indexer::recover::{context, recover_tx};
use serde_json::Value;
use sha3::{Digest, Keccak256};

/// The ten consecutive recent mainnet blocks the backfill chain repeats.
pub const RECENT_MAINNET: std::ops::RangeInclusive<u64> = 24_476_000..=24_476_009;

#[path = "../../tests/it/support/fixtures.rs"]
pub mod fixtures;

/// The JSON text of each of the 4,492 fixture transactions, one object a
/// string, as the `recover` command reads them.
pub fn fixture_lines() -> Vec<String> {
    fixtures::transactions()
        .into_iter()
        .map(|f| f.line)
        .collect()
}

/// Blocks 24,476,000..=24,476,009 (`eth_getBlockByNumber(n, true)`), in order.
pub fn recent_mainnet_blocks() -> Vec<Value> {
    fixtures::recent_mainnet()
}

/// One recovery, parsed ahead of time: all the floor does is the curve work
/// and the keccak of the public key.
#[derive(Clone, Copy)]
pub struct Pair {
    pub msg: Message,
    pub sig: RecoverableSignature,
}

/// What [`prepare`] found in a set of transactions.
pub struct Prepared {
    /// Every recovery `recover_tx` succeeds at (senders, then each tx's
    /// authorities), so the floor does exactly the curve work of the full path.
    pub pairs: Vec<Pair>,
    pub senders: usize,
    pub authorities: usize,
    /// Recoveries `recover_tx` reports as failing (skipped by the floor).
    pub failed: usize,
}

/// Builds the floor's pairs from what `recover_tx` recovers. The recovery id
/// is the one (0 or 1) that yields the same address, so this needs no copy
/// of the crate's `v`/`yParity` rules, and checks the pairs while at it.
pub fn prepare(txs: &[Tx]) -> Prepared {
    let mut out = Prepared {
        pairs: Vec::new(),
        senders: 0,
        authorities: 0,
        failed: 0,
    };
    for tx in txs {
        let rec = recover_tx(tx);
        match (&rec.sender, tx.signing_hash(), tx.r, tx.s) {
            (Ok(addr), Ok(hash), Some(r), Some(s)) => {
                out.pairs.push(pair(&hash, &r, &s, addr));
                out.senders += 1;
            }
            _ => out.failed += 1,
        }
        for (a, res) in tx.authorization_list.iter().zip(&rec.authorities) {
            match (res, a.signing_hash(), a.r, a.s) {
                (Ok(addr), Some(hash), Some(r), Some(s)) => {
                    out.pairs.push(pair(&hash, &r, &s, addr));
                    out.authorities += 1;
                }
                _ => out.failed += 1,
            }
        }
    }
    out
}

fn pair(hash: &B256, r: &U256, s: &U256, want: &Address) -> Pair {
    let mut compact = [0u8; 64];
    compact[..32].copy_from_slice(&r.0);
    compact[32..].copy_from_slice(&s.0);
    let msg = Message::from_digest(*hash);
    for id in 0..2i32 {
        let id = RecoveryId::try_from(id).expect("0 and 1 are recovery ids");
        let Ok(sig) = RecoverableSignature::from_compact(&compact, id) else {
            continue;
        };
        let p = Pair { msg, sig };
        if recover_one(&p) == Some(*want) {
            return p;
        }
    }
    panic!("no recovery id reproduces recover_tx's address");
}

/// The floor for one pair: secp256k1 recovery on the shared context, then
/// keccak256 of the uncompressed key without its 0x04 prefix.
#[inline]
pub fn recover_one(p: &Pair) -> Option<Address> {
    let key = context().recover_ecdsa(&p.msg, &p.sig).ok()?;
    let digest = Keccak256::digest(&key.serialize_uncompressed()[1..]);
    Some(digest[12..].try_into().expect("20 bytes"))
}

/// Runs the floor over `pairs`; returns how many recovered.
pub fn raw_floor(pairs: &[Pair]) -> usize {
    pairs
        .iter()
        .filter(|p| black_box(recover_one(black_box(p))).is_some())
        .count()
}

/// The floor on `threads` std threads, each taking an equal share of
/// `pairs`; returns how many recovered. Thread start-up is inside the
/// timing of the caller, as it would be in any real split.
pub fn raw_floor_threads(pairs: &[Pair], threads: usize) -> usize {
    let share = pairs.len().div_ceil(threads.max(1));
    std::thread::scope(|scope| {
        let handles: Vec<_> = pairs
            .chunks(share.max(1))
            .map(|chunk| scope.spawn(move || raw_floor(chunk)))
            .collect();
        handles.into_iter().map(|h| h.join().expect("floor")).sum()
    })
}

/// Seconds of each timed round.
pub struct Timing {
    pub rounds: Vec<f64>,
}

impl Timing {
    pub fn median(&self) -> f64 {
        let mut v = self.rounds.clone();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    }

    /// The fastest round.
    pub fn best(&self) -> f64 {
        self.rounds.iter().copied().fold(f64::INFINITY, f64::min)
    }

    /// (max - min) / median: how noisy the rounds were.
    pub fn spread(&self) -> f64 {
        let min = self.best();
        let max = self.rounds.iter().copied().fold(0.0, f64::max);
        (max - min) / self.median()
    }

    /// Throughput relative to `reference`, round by round (`reference`'s
    /// time over this one's, each pair measured back to back by
    /// [`time_interleaved`]), then the median: drift of the machine's
    /// speed across rounds cancels within each pair.
    pub fn paired_ratio(&self, reference: &Timing) -> f64 {
        let ratios = Timing {
            rounds: self
                .rounds
                .iter()
                .zip(&reference.rounds)
                .map(|(mine, theirs)| theirs / mine)
                .collect(),
        };
        ratios.median()
    }

    pub fn extend(&mut self, other: Timing) {
        self.rounds.extend(other.rounds);
    }
}

/// Runs `f` `warmup` times untimed, then `rounds` times timed.
pub fn time_rounds(warmup: usize, rounds: usize, mut f: impl FnMut()) -> Timing {
    for _ in 0..warmup {
        f();
    }
    let rounds = (0..rounds.max(1))
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    Timing { rounds }
}

/// Times several cases round-robin: each round runs every case once, so a
/// change in background load (the machine is shared) hits all cases alike
/// instead of skewing the ratio between two of them.
pub fn time_interleaved(
    warmup: usize,
    rounds: usize,
    cases: &mut [&mut dyn FnMut()],
) -> Vec<Timing> {
    for _ in 0..warmup {
        cases.iter_mut().for_each(|f| f());
    }
    let mut out: Vec<Timing> = cases.iter().map(|_| Timing { rounds: vec![] }).collect();
    for _ in 0..rounds.max(1) {
        for (f, t) in cases.iter_mut().zip(&mut out) {
            let started = Instant::now();
            f();
            t.rounds.push(started.elapsed().as_secs_f64());
        }
    }
    out
}

/// How a child process ran: wall time from spawn to exit, CPU from wait4
/// (its own, not mixed with other children's), memory from /proc.
///
/// Peak RSS is the child's `VmHWM`, not wait4's `ru_maxrss`: Linux carries
/// the high-water mark of the address space a process had before `exec`
/// into `ru_maxrss`, and std spawns with a vfork-style clone that shares
/// the parent's memory until then, so `ru_maxrss` reports at least this
/// bench's own peak (over 1 GB with the whole chain in memory).
pub struct ChildRun {
    pub wall: f64,
    pub cpu: f64,
    /// Last `VmHWM` sampled (MB): the peak, short of a last-instant spike.
    pub peak_rss_mb: f64,
    pub success: bool,
    pub stderr: String,
    /// (seconds since spawn, VmRSS in MB), sampled every [`RSS_SAMPLE_MS`]:
    /// tells a plateau from steady growth.
    pub rss_samples: Vec<(f64, f64)>,
}

/// Interval of [`ChildRun::rss_samples`] and of the `VmHWM` polls.
pub const RSS_SAMPLE_MS: u64 = 50;

/// (VmRSS, VmHWM) of `pid` in MB; `None` once it has exited.
fn vm_rss_hwm_mb(pid: libc::pid_t) -> Option<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<f64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib / 1024.0)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

fn timeval_secs(tv: libc::timeval) -> f64 {
    tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6
}

/// Spawns `cmd` (stderr captured, stdin/stdout as the caller set them) and
/// reaps it with wait4.
pub fn run_child(cmd: &mut Command) -> std::io::Result<ChildRun> {
    let started = Instant::now();
    let mut child = cmd.stderr(Stdio::piped()).spawn()?;
    let mut stderr = child.stderr.take().expect("piped stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let pid = child.id() as libc::pid_t;
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let (mut samples, mut hwm) = (Vec::new(), 0.0f64);
            while !done.load(Ordering::Relaxed) {
                match vm_rss_hwm_mb(pid) {
                    Some((rss, peak)) => {
                        samples.push((started.elapsed().as_secs_f64(), rss));
                        hwm = hwm.max(peak);
                    }
                    None => break, // exited (a zombie has no VmRSS)
                }
                std::thread::sleep(std::time::Duration::from_millis(RSS_SAMPLE_MS));
            }
            (samples, hwm)
        })
    };
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data; wait4 fills it in.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid pointers to locals; `pid` is our unreaped child
        // (std's Child never waits on its own, and is not waited on here).
        if unsafe { libc::wait4(pid, &mut status, 0, &mut ru) } == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    let wall = started.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    let (rss_samples, peak_rss_mb) = sampler.join().unwrap_or_default();
    Ok(ChildRun {
        rss_samples,
        peak_rss_mb,
        wall,
        cpu: timeval_secs(ru.ru_utime) + timeval_secs(ru.ru_stime),
        success: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        stderr: reader.join().unwrap_or_default(),
    })
}

/// CPU seconds (user + system) this process has used so far.
pub fn self_cpu_secs() -> f64 {
    // SAFETY: as in run_child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    timeval_secs(ru.ru_utime) + timeval_secs(ru.ru_stime)
}

/// CPU seconds (user + system) the calling thread has used so far.
pub fn thread_cpu_secs() -> f64 {
    // SAFETY: as in run_child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    timeval_secs(ru.ru_utime) + timeval_secs(ru.ru_stime)
}

/// The median of `values` (of the two middle ones for an even count, their
/// mean).
pub fn median(values: Vec<f64>) -> f64 {
    Timing { rounds: values }.median()
}

/// A count from the environment, for quick or thorough runs.
pub fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .replace('_', "")
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?}: expected a number")),
        Err(_) => default,
    }
}

/// 1234567.8 → "1,234,568".
pub fn thousands(x: f64) -> String {
    let digits = format!("{:.0}", x.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Prints rows as a Markdown table, columns padded to their widest cell.
pub fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&width)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("| {} |", padded.join(" | "));
    };
    line(header.iter().map(|h| h.to_string()).collect());
    line(width.iter().map(|w| "-".repeat(*w)).collect());
    for row in rows {
        line(row.clone());
    }
}

/// Throwaway cluster in a fresh /tmp dir; removed again when dropped.
pub fn start_cluster() -> anyhow::Result<ClusterDropGuard> {
    // Under /tmp: short socket path, and reachable by the `postgres` user
    // that runs the server when we are root (tempdirs are 0700).
    let root = tempfile::Builder::new()
        .prefix("sender-indexer-bench-")
        .tempdir_in("/tmp")?
        .keep();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o711))?;
    let mut opts = ClusterOptions::new(root.join("data"));
    opts.die_with_parent = true; // fsync stays on: no_sync is false
    match Cluster::start(&opts) {
        Ok(c) => Ok(ClusterDropGuard::new(c, root)),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&root);
            Err(e).context("starting the bench cluster")
        }
    }
}

/// Points a `sender-indexer` child at `rpc_url` and `db_url` with log level
/// `log`, and clears every other setting the environment could pass it.
pub fn indexer_env<'a>(
    cmd: &'a mut Command,
    rpc_url: &str,
    db_url: &str,
    log: &str,
) -> &'a mut Command {
    cmd.env("RPC_URL", rpc_url)
        .env("DATABASE_URL", db_url)
        .env("RUST_LOG", log)
        .env("NO_COLOR", "1")
        .env_remove("WS_URL")
        .env_remove("METRICS_ADDR")
        .env_remove("SENDER_INDEXER_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
}
