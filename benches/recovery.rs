//! Benchmark of sender recovery on the 4,492 real fixture transactions:
//! how close our per-transaction path comes to the raw secp256k1 floor, what
//! the founding bug (a context per call) costs, and how the real `recover`
//! command scales from one thread to two.
//!
//! Run: `cargo bench --bench recovery` (cargo builds the `sender-indexer`
//! binary with the bench profile first and passes its path to this file as
//! `CARGO_BIN_EXE_sender-indexer`). Knobs: `BENCH_ROUNDS` (timed rounds,
//! default 11), `BENCH_LINES` (input lines of the binary runs, default
//! 40,000), `BENCH_CTX_PAIRS` (recoveries per round of case c, default 400),
//! `BENCH_ONLY` (run one case once and exit; see
//! `scripts/bench-instructions.sh`, which counts its instructions).
//!
//! The machine is shared and noisy, so every case is warmed up and reported
//! as the median of several rounds, and the table shows ratios between
//! cases measured in this same run, never a pass/fail on absolute numbers.
//!
//! Case (c) is the only place in the repository allowed to construct a
//! secp256k1 context: it rebuilds the bug the crate exists to fix.

mod common;

use std::fs::File;
use std::hint::black_box;
use std::io::Write;
use std::ops::Range;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{ChildRun, Pair, Timing, print_table, thousands};
use secp256k1::Secp256k1;
use sender_indexer::decode::{Address, Tx};
use sender_indexer::recover::{recover_slices, recover_tx};
use sha3::{Digest, Keccak256};

const BIN: &str = env!("CARGO_BIN_EXE_sender-indexer");

/// The founding bug: a fresh verification context for every recovery,
/// built and freed around it, as rust-web3's `recover` did.
fn recover_with_fresh_context(p: &Pair) -> Option<Address> {
    let ctx = Secp256k1::verification_only();
    let key = ctx.recover_ecdsa(&p.msg, &p.sig).ok()?;
    let digest = Keccak256::digest(&key.serialize_uncompressed()[1..]);
    Some(digest[12..].try_into().expect("20 bytes"))
}

/// One run of `sender-indexer recover --threads N` on `input` (`None`:
/// empty stdin), its output checked: every line answered, and only the
/// expected number without a sender.
fn run_recover_command(
    input: Option<&Path>,
    threads: usize,
    out_dir: &Path,
    expect: (usize, usize),
) -> ChildRun {
    let out_path = out_dir.join(format!("out-{threads}.jsonl"));
    let stdin = match input {
        Some(path) => Stdio::from(File::open(path).expect("bench input")),
        None => Stdio::null(),
    };
    let run = common::run_child(
        Command::new(BIN)
            .args(["recover", "--threads", &threads.to_string()])
            .env("RUST_LOG", "warn")
            .env_remove("SENDER_INDEXER_CONFIG")
            .stdin(stdin)
            .stdout(File::create(&out_path).expect("bench output file")),
    )
    .unwrap_or_else(|e| panic!("running {BIN}: {e}"));
    assert!(
        run.success,
        "{BIN} recover --threads {threads} failed:\n{}",
        run.stderr
    );
    let text = std::fs::read_to_string(&out_path).expect("bench output");
    let got = (
        text.lines().count(),
        text.matches("\"sender\":null").count(),
    );
    assert_eq!(got, expect, "(output lines, lines without a sender)");
    run
}

// One case, once, for `BENCH_ONLY` (an instruction count under callgrind:
// `scripts/bench-instructions.sh` toggles collection on these functions).
#[inline(never)]
fn only_floor(pairs: &[common::Pair]) -> usize {
    common::raw_floor(pairs)
}

#[inline(never)]
fn only_full(text: &str, ranges: &[Range<usize>]) -> usize {
    recover_slices(black_box(text), ranges)
        .iter()
        .filter(|r| r.as_ref().is_ok_and(|t| t.recovered.sender.is_ok()))
        .count()
}

/// The fixture lines as one text and each one's range in it, as a block's
/// transactions reach the pool's loop.
fn joined(lines: &[String]) -> (String, Vec<Range<usize>>) {
    let mut text = String::new();
    let mut ranges = Vec::with_capacity(lines.len());
    for line in lines {
        let start = text.len();
        text.push_str(line);
        ranges.push(start..text.len());
        text.push('\n');
    }
    (text, ranges)
}

#[inline(never)]
fn only_decode(lines: &[String]) -> usize {
    lines
        .iter()
        .filter(|l| black_box(Tx::from_json(black_box(l))).is_ok())
        .count()
}

#[inline(never)]
fn only_recover_tx(txs: &[Tx]) -> usize {
    txs.iter()
        .filter(|t| black_box(recover_tx(black_box(t))).sender.is_ok())
        .count()
}

fn main() {
    let rounds = common::env_usize("BENCH_ROUNDS", 11);
    let min_lines = common::env_usize("BENCH_LINES", 40_000);
    let ctx_pairs = common::env_usize("BENCH_CTX_PAIRS", 400);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let loadavg = || {
        let l = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        l.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    };

    let lines = common::fixture_lines();
    let txs: Vec<Tx> = lines
        .iter()
        .map(|l| Tx::from_json(l).expect("fixture tx decodes"))
        .collect();
    let prepared = common::prepare(&txs);
    let pairs = &prepared.pairs;
    let n = pairs.len();
    let failed_senders = txs.iter().filter(|t| recover_tx(t).sender.is_err()).count();
    println!(
        "recovery bench: {} fixture txs -> {n} recoveries ({} senders + {} authorities), {} unrecoverable; {cores} cores, loadavg {}",
        txs.len(),
        prepared.senders,
        prepared.authorities,
        prepared.failed,
        loadavg(),
    );
    println!("binary: {BIN}");

    // The full path, from the transactions' JSON text, as the pool's loop
    // runs it (`recover_slices`, as the `recover` command and the
    // pipeline's jobs do): the next text prefetched while this one is
    // decoded and recovered. Returns the recoveries that succeeded, which
    // must be exactly the floor's.
    let (text, ranges) = joined(&lines);
    let full_path = || {
        recover_slices(black_box(&text), &ranges)
            .iter()
            .map(|r| {
                let t = r.as_ref().expect("fixture tx decodes");
                usize::from(t.recovered.sender.is_ok())
                    + t.recovered.authorities.iter().filter(|a| a.is_ok()).count()
            })
            .sum::<usize>()
    };
    assert_eq!(full_path(), n, "full path and floor recover the same set");
    if let Ok(case) = std::env::var("BENCH_ONLY") {
        let done = match case.as_str() {
            "floor" => only_floor(pairs),
            "full" => only_full(&text, &ranges),
            "decode" => only_decode(&lines),
            "recover_tx" => only_recover_tx(&txs),
            other => panic!("BENCH_ONLY={other}: expected floor, full, decode or recover_tx"),
        };
        println!("BENCH_ONLY={case}: {done}");
        return;
    }
    let c_pairs = &pairs[..ctx_pairs.min(n)];

    // In-process cases, interleaved round by round.
    let timings = common::time_interleaved(
        2,
        rounds,
        &mut [
            // (a) the floor: precomputed pairs, shared context, keccak.
            &mut || assert_eq!(common::raw_floor(pairs), n),
            // (b) JSON text -> recover_slices (decode, signing hashes, recovery, addresses).
            &mut || assert_eq!(full_path(), n),
            // (b1) its decoding alone.
            &mut || {
                for line in &lines {
                    black_box(Tx::from_json(black_box(line)).expect("decodes"));
                }
            },
            // (b2) recover_tx alone, on decoded txs.
            &mut || {
                for tx in &txs {
                    black_box(recover_tx(black_box(tx)));
                }
            },
            // (c) the founding bug: a context per call.
            &mut || {
                let ok = c_pairs
                    .iter()
                    .filter(|p| black_box(recover_with_fresh_context(black_box(p))).is_some())
                    .count();
                assert_eq!(ok, c_pairs.len());
            },
            // (e) the floor on two std threads, half each: the 2-core ceiling.
            &mut || assert_eq!(common::raw_floor_threads(pairs, 2), n),
        ],
    );
    let [a, b, b1, b2, c, e] = <[Timing; 6]>::try_from(timings).ok().expect("six cases");

    // (d) the real command, --threads 1 and 2, alternated so that noise
    // hits both alike; plus its start-up cost on empty input.
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("input.jsonl");
    let reps = min_lines.div_ceil(lines.len()).max(1);
    {
        let mut f = std::io::BufWriter::new(File::create(&input).expect("input file"));
        for _ in 0..reps {
            for l in &lines {
                writeln!(f, "{l}").expect("write input");
            }
        }
        f.flush().expect("write input");
    }
    let in_lines = reps * lines.len();
    let d_recoveries = reps * n;
    let expect = (in_lines, reps * failed_senders);
    let binary_rounds = rounds.min(5);
    let mut d = [0, 1, 2].map(|_| (Timing { rounds: vec![] }, 0.0f64));
    for round in 0..=binary_rounds {
        for (i, threads) in [1, 2].into_iter().enumerate() {
            let run = run_recover_command(Some(&input), threads, dir.path(), expect);
            if round > 0 {
                // round 0 warms the page cache and the binary
                d[i + 1].0.rounds.push(run.wall);
                d[i + 1].1 += run.cpu;
            }
        }
        let run = run_recover_command(None, 1, dir.path(), (0, 0));
        d[0].0.rounds.push(run.wall);
        d[0].1 += run.cpu;
    }
    let [(d0, d0_cpu), (d1, d1_cpu), (d2, d2_cpu)] = d;

    let rate = |count: usize, t: &Timing| count as f64 / t.median();
    let (ra, rb, rc, re) = (
        rate(n, &a),
        rate(n, &b),
        rate(c_pairs.len(), &c),
        rate(n, &e),
    );
    let (rd1, rd2) = (rate(d_recoveries, &d1), rate(d_recoveries, &d2));
    let row = |case: &str, threads: usize, count: usize, t: &Timing, ratio: String| {
        let r = rate(count, t);
        vec![
            case.to_string(),
            threads.to_string(),
            thousands(count as f64),
            format!("{:.1} ms", t.median() * 1e3),
            format!("{:.0}%", t.spread() * 100.0),
            thousands(r),
            thousands(r / threads as f64),
            ratio,
        ]
    };
    // CPU seconds per wall second over a binary's timed runs.
    let busy = |cpu: f64, t: &Timing| cpu / t.rounds.iter().sum::<f64>();
    println!();
    print_table(
        &[
            "case",
            "threads",
            "recoveries",
            "median",
            "spread",
            "recoveries/s",
            "per thread/s",
            "ratio",
        ],
        &[
            row(
                "(a) floor: secp256k1 + keccak, precomputed",
                1,
                n,
                &a,
                "reference".into(),
            ),
            row(
                "(b) JSON -> recover_slices (decode, signing hash, recover; +prefetch)",
                1,
                n,
                &b,
                format!(
                    "(b)/(a) = {:.3} per round, {:.3} of medians (goal >= 0.90)",
                    b.paired_ratio(&a),
                    rb / ra
                ),
            ),
            row(
                "(b1) of which Tx::from_json alone",
                1,
                n,
                &b1,
                format!("{:.0}% of (b)", 100.0 * b1.median() / b.median()),
            ),
            row(
                "(b2) of which recover_tx alone",
                1,
                n,
                &b2,
                format!("(b2)/(a) = {:.2}", rate(n, &b2) / ra),
            ),
            row(
                "(c) verification_only() per call (the bug)",
                1,
                c_pairs.len(),
                &c,
                format!("(a)/(c) = {:.2}x speedup", ra / rc),
            ),
            row(
                "(e) floor on 2 std threads",
                2,
                n,
                &e,
                format!("(e)/(a) = {:.2}x (2-core ceiling)", re / ra),
            ),
            row(
                "(d0) binary start-up, empty input",
                1,
                0,
                &d0,
                format!("cpu/wall {:.2}", busy(d0_cpu, &d0)),
            ),
            row(
                &format!("(d1) binary recover, {in_lines} lines"),
                1,
                d_recoveries,
                &d1,
                format!(
                    "(d1)/(b) = {:.2}; cpu/wall {:.2}",
                    rd1 / rb,
                    busy(d1_cpu, &d1)
                ),
            ),
            row(
                &format!("(d2) binary recover, {in_lines} lines"),
                2,
                d_recoveries,
                &d2,
                format!(
                    "(d2)/(d1) = {:.2}x (goal >= 1.8); (d2)/(e) = {:.2}; cpu/wall {:.2}",
                    rd2 / rd1,
                    rd2 / re,
                    busy(d2_cpu, &d2)
                ),
            ),
        ],
    );
    println!(
        "\nmedian of {rounds} interleaved rounds after warm-up ({binary_rounds} for d0-d2, alternated); spread = (max-min)/median; cpu/wall = the child's CPU seconds (wait4) per wall second; loadavg now {}",
        loadavg()
    );
}
