//! Runs the real `sender-indexer` binary against a test node and database:
//! to completion ([`run_ok`], [`run`]), or in the background ([`Running`]).

#![allow(dead_code)] // shared helpers: not every test module uses each one

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use sqlx::PgPool;

use super::pg;

pub fn command(rpc_url: &str, db_url: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sender-indexer"));
    cmd.args(args)
        .env("RPC_URL", rpc_url)
        .env("DATABASE_URL", db_url)
        .env_remove("WS_URL")
        .env_remove("METRICS_ADDR")
        .env_remove("SENDER_INDEXER_CONFIG")
        .env_remove("DATABASE_SCHEMA")
        .env(
            "RUST_LOG",
            std::env::var("TEST_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdin(Stdio::null());
    cmd
}

/// A run that takes longer than this is reported as hung.
const RUN_LIMIT: std::time::Duration = std::time::Duration::from_secs(180);

/// Runs to completion; panics with its stderr unless it exits 0 in time.
pub fn run_ok(rpc_url: &str, db_url: &str, args: &[&str]) -> Output {
    let out = run(rpc_url, db_url, args);
    assert!(
        out.status.success(),
        "sender-indexer {args:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs to completion (killed after [`RUN_LIMIT`]), whatever its status.
pub fn run(rpc_url: &str, db_url: &str, args: &[&str]) -> Output {
    finish(command(rpc_url, db_url, args), args)
}

/// Runs `cmd` (from [`command`], adjusted) to completion, killed after
/// [`RUN_LIMIT`]; `args` only name it in the panic.
pub fn finish(mut cmd: Command, args: &[&str]) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sender-indexer");
    let pid = child.id();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let out = child.wait_with_output();
        let _ = done_tx.send(());
        out
    });
    if done_rx.recv_timeout(RUN_LIMIT).is_err() {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        let out = waiter.join().unwrap().unwrap();
        panic!(
            "sender-indexer {args:?} hung for {RUN_LIMIT:?}; stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    waiter.join().unwrap().expect("wait for sender-indexer")
}

/// A running indexer whose stderr is drained into a buffer (a full pipe
/// would stall it); SIGKILLed on drop if still running. The one way the
/// tests start an indexer in the background and stop it: [`terminate`]
/// (SIGTERM, as a service manager stops it), [`kill`] (SIGKILL, a crash),
/// or [`signal_after_checkpoint`] (either, once it has committed blocks).
///
/// [`terminate`]: Running::terminate
/// [`kill`]: Running::kill
/// [`signal_after_checkpoint`]: Running::signal_after_checkpoint
pub struct Running {
    pub child: Child,
    stderr: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

/// How long a stopped indexer may take to exit.
const STOP_LIMIT: Duration = Duration::from_secs(20);

impl Running {
    /// `sender-indexer args` against these endpoints.
    pub fn spawn(rpc_url: &str, db_url: &str, args: &[&str]) -> Running {
        Running::start(command(rpc_url, db_url, args))
    }

    /// `cmd` (from [`command`], adjusted), stdout discarded, stderr kept.
    pub fn start(mut cmd: Command) -> Running {
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn sender-indexer");
        let mut pipe = child.stderr.take().expect("piped stderr");
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&stderr);
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Running {
            child,
            stderr,
            reader: Some(reader),
        }
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub fn signal(&self, sig: Signal) {
        nix::sys::signal::kill(Pid::from_raw(self.child.id() as i32), sig)
            .expect("signal the indexer");
    }

    pub fn try_status(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("try_wait")
    }

    /// Still running.
    pub fn is_running(&mut self) -> bool {
        self.try_status().is_none()
    }

    /// Waits for the exit (panics after `limit`), then for stderr's end.
    pub async fn wait(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(s) = self.try_status() {
                break s;
            }
            assert!(
                Instant::now() < deadline,
                "indexer did not exit within {limit:?}; stderr:\n{}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        status
    }

    /// Stops it as a service manager does (SIGTERM) and asserts that it
    /// exits 0; returns its stderr.
    pub async fn terminate(&mut self) -> String {
        self.signal(Signal::SIGTERM);
        let status = self.wait(STOP_LIMIT).await;
        let log = self.stderr();
        assert!(status.success(), "SIGTERM: exit {status}; stderr:\n{log}");
        log
    }

    /// Kills it (SIGKILL: a crash) and waits; returns the exit status.
    pub async fn kill(&mut self) -> ExitStatus {
        self.signal(Signal::SIGKILL);
        self.wait(STOP_LIMIT).await
    }

    /// Polls its stderr until it holds `needle`; returns how long that
    /// took. Panics if it exits first or takes over `limit`.
    pub async fn wait_for_log(&mut self, needle: &str, limit: Duration) -> Duration {
        let started = Instant::now();
        while !self.stderr().contains(needle) {
            assert!(
                self.is_running(),
                "exited before logging {needle:?}:\n{}",
                self.stderr()
            );
            assert!(
                started.elapsed() < limit,
                "no {needle:?} within {limit:?}:\n{}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        started.elapsed()
    }

    /// Polls until the checkpoint passes `above`, then sends `sig`; returns
    /// the checkpoint seen. Panics if it exits first or takes over `limit`.
    pub async fn signal_after_checkpoint(
        &mut self,
        pool: &PgPool,
        above: u64,
        sig: Signal,
        limit: Duration,
    ) -> u64 {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(cp) = pg::checkpoint(pool).await.filter(|&c| c > above) {
                self.signal(sig);
                return cp;
            }
            assert!(
                self.is_running(),
                "indexer exited early:\n{}",
                self.stderr()
            );
            assert!(Instant::now() < deadline, "checkpoint never passed {above}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
