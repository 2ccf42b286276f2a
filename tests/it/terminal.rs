//! What a person sees, checked where they see it: `backfill` run under a
//! pseudo-terminal draws the progress bar (blocks, transactions per second,
//! ETA), keeps log lines off the bar's line, and prints the final summary;
//! with stderr redirected to a file, only plain log lines appear, with no
//! escape sequence and no bar.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::process::Stdio;
use std::time::Duration;

use nix::pty::{Winsize, openpty};

use crate::support::rpc_server::{Fault, RpcServer, synthetic_block};
use crate::support::{indexer, pg};

const BLOCKS: u64 = 60;

/// A chain that takes a few seconds to fetch: one block per request, up to
/// 150 ms each, so the bar is drawn many times (every 200 ms).
async fn slow_chain() -> RpcServer {
    let blocks = (0..BLOCKS).map(|n| synthetic_block(n, 3)).collect();
    let server = RpcServer::start(blocks).await.expect("start rpc server");
    server.set_latency(Duration::from_millis(150));
    server
}

/// The backfill of the whole slow chain; synthetic blocks carry neither
/// valid hashes nor receipts, hence `--verify off --logs off`.
fn backfill(server: &RpcServer, db: &str) -> std::process::Command {
    let to = (BLOCKS - 1).to_string();
    let mut cmd = indexer::command(
        &server.url(),
        db,
        &[
            "--verify",
            "off",
            "--logs",
            "off",
            "--batch-size",
            "1",
            "--concurrency",
            "2",
            "backfill",
            "--from",
            "0",
            "--to",
            &to,
        ],
    );
    cmd.env("RUST_LOG", "info,sqlx=warn")
        .env("TERM", "xterm-256color")
        .env_remove("NO_COLOR");
    cmd
}

/// Everything the child wrote to the terminal, until it exits.
fn run_in_pty(mut cmd: std::process::Command) -> (std::process::ExitStatus, String) {
    let size = Winsize {
        ws_row: 40,
        ws_col: 160,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = openpty(Some(&size), None).expect("openpty");
    let slave = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("dup pty"));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(slave(&pty.slave))
        .stderr(slave(&pty.slave))
        .spawn()
        .expect("spawn sender-indexer");
    // The master reads EOF (EIO) once no one holds the slave: not we, nor
    // the Command, which keeps its stdio until dropped.
    drop(cmd);
    drop(pty.slave);
    let mut master = std::fs::File::from(pty.master);
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match master.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
        out
    });
    let status = child.wait().expect("wait for sender-indexer");
    let out = reader.join().expect("pty reader");
    (status, String::from_utf8_lossy(&out).into_owned())
}

/// The terminal's text with colour and cursor sequences taken out, split
/// where the bar redraws itself (`\r`) and at line ends.
fn frames(screen: &str) -> Vec<String> {
    let mut plain = String::new();
    let mut chars = screen.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' && chars.peek() == Some(&'[') {
            chars.next();
            // CSI: parameters, then one final byte in '@'..='~'.
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
        .split(['\r', '\n'])
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_terminal_the_bar_shows_blocks_rate_and_eta_then_the_summary() {
    let server = slow_chain().await;
    let (_pool, db) = pg::fresh_db().await;
    let cmd = backfill(&server, &db);
    let run = tokio::task::spawn_blocking(move || run_in_pty(cmd));
    // A log line mid-run (a refused request is retried with a warning),
    // while the bar is on screen.
    tokio::time::sleep(Duration::from_millis(800)).await;
    server.fail_next(1, Fault::Status(503));
    let (status, screen) = run.await.unwrap();
    assert!(status.success(), "{status}:\n{screen}");
    let frames = frames(&screen);
    let bar_mark = format!("/{BLOCKS} blocks");
    let bars: Vec<&String> = frames.iter().filter(|l| l.contains(&bar_mark)).collect();

    // Drawn while it ran: position out of the known total, the rate, an ETA.
    let drawn = |l: &str| {
        let Some((pos, rest)) = l.split_once(&bar_mark) else {
            return false;
        };
        let pos: u64 = pos.rsplit(' ').next().unwrap_or("").parse().unwrap_or(0);
        (1..BLOCKS).contains(&pos) && rest.contains(" txs/s") && rest.contains("eta ")
    };
    assert!(
        bars.iter().filter(|l| drawn(l)).count() >= 2,
        "no bar with blocks, txs/s and eta drawn mid-run:\n{}",
        frames.join("\n")
    );
    // The log line has a line of its own, and the bar is drawn again below.
    let retry = frames
        .iter()
        .position(|l| l.contains("WARN") && l.contains("retrying"))
        .unwrap_or_else(|| panic!("no retry warning:\n{}", frames.join("\n")));
    assert!(
        frames[retry..].iter().any(|l| drawn(l)),
        "no bar after the warning:\n{}",
        frames.join("\n")
    );
    for l in &bars {
        assert!(
            !l.contains(" INFO ") && !l.contains(" WARN "),
            "a log line shares the bar's line: {l}"
        );
    }
    // The summary, after the bar is gone.
    let summary = format!("backfill: {BLOCKS} blocks, {} txs", BLOCKS * 3);
    let at = frames
        .iter()
        .position(|l| l.contains(&summary))
        .unwrap_or_else(|| panic!("no summary {summary:?}:\n{}", frames.join("\n")));
    assert!(
        !frames[at..].iter().any(|l| l.contains(&bar_mark)),
        "the bar is drawn after the summary:\n{}",
        frames[at..].join("\n")
    );
    assert!(screen.contains('\x1b'), "a terminal gets colour: {screen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_stderr_in_a_file_only_plain_log_lines_appear() {
    let server = slow_chain().await;
    let (_pool, db) = pg::fresh_db().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stderr.log");
    let file = std::fs::File::create(&path).unwrap();
    let mut cmd = backfill(&server, &db);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(file));
    let status = tokio::task::spawn_blocking(move || cmd.status().unwrap())
        .await
        .unwrap();
    let log = std::fs::read_to_string(&path).unwrap();
    assert!(status.success(), "{status}:\n{log}");
    assert!(!log.contains('\x1b'), "escape sequences in a file:\n{log}");
    assert!(!log.contains('\r'), "carriage returns in a file:\n{log}");
    assert!(!log.contains(" blocks  "), "a bar in a file:\n{log}");
    let lines: Vec<&str> = log.lines().collect();
    assert!(
        lines
            .iter()
            .all(|l| l.contains(" INFO ") || l.contains(" WARN ")),
        "not a log line:\n{log}"
    );
    let summary = format!("backfill: {BLOCKS} blocks, {} txs", BLOCKS * 3);
    assert!(
        lines.last().is_some_and(|l| l.contains(" INFO ")) && log.contains(&summary),
        "no summary line {summary:?}:\n{log}"
    );
}
