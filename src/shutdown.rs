//! Graceful shutdown: SIGINT/SIGTERM flip one watch channel that every
//! stage `select!`s on (mini-redis's `Shutdown`). The fetch stage stops
//! asking for blocks; what is already in flight is recovered and committed
//! whole; then the process exits 0. A second signal exits at once: the
//! uncommitted database transaction is rolled back by PostgreSQL, so the
//! database stays consistent either way. This module decides nothing else.

use tokio::sync::watch;

/// Cheap to clone; each holder can wait for, or poll, the shutdown request.
#[derive(Clone)]
pub struct Shutdown {
    rx: watch::Receiver<bool>,
}

/// The sending side, kept by whoever listens for signals.
pub struct ShutdownTrigger {
    tx: watch::Sender<bool>,
}

pub fn channel() -> (ShutdownTrigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (ShutdownTrigger { tx }, Shutdown { rx })
}

impl ShutdownTrigger {
    pub fn trigger(&self) {
        let _ = self.tx.send(true);
    }
}

impl Shutdown {
    pub fn requested(&self) -> bool {
        *self.rx.borrow()
    }

    /// Resolves once shutdown is requested (or the trigger is gone).
    pub async fn wait(&mut self) {
        let _ = self.rx.wait_for(|v| *v).await;
    }
}

/// Spawns the signal listener: first SIGINT/SIGTERM requests shutdown,
/// a second one exits immediately with status 130.
pub fn listen_for_signals(trigger: ShutdownTrigger) {
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            tracing::warn!(target: "indexer::shutdown", "cannot install signal handlers");
            return;
        };
        tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
        tracing::info!(target: "indexer::shutdown", "shutdown requested; finishing the blocks in flight (signal again to stop at once)");
        trigger.trigger();
        tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
        tracing::warn!(target: "indexer::shutdown", "second signal: stopping now; uncommitted blocks are rolled back");
        std::process::exit(130);
    });
}
