//! Runs the real `sender-indexer` binary against a test node and database.

use std::process::{Child, Command, Output, Stdio};

pub fn command(rpc_url: &str, db_url: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sender-indexer"));
    cmd.args(args)
        .env("RPC_URL", rpc_url)
        .env("DATABASE_URL", db_url)
        .env_remove("WS_URL")
        .env_remove("METRICS_ADDR")
        .env_remove("SENDER_INDEXER_CONFIG")
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

/// Starts it in the background, stderr captured.
pub fn spawn(rpc_url: &str, db_url: &str, args: &[&str]) -> Child {
    command(rpc_url, db_url, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sender-indexer")
}

/// Stops a running indexer the way a service manager does (SIGTERM) and
/// waits; returns its stderr, after asserting that it exited 0.
pub fn terminate(child: Child) -> String {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("signal sender-indexer");
    let out = child.wait_with_output().expect("wait for sender-indexer");
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "SIGTERM: exit {}; stderr:\n{log}",
        out.status
    );
    log
}
