//! PostgreSQL for tests: ONE throwaway cluster per test binary (started
//! lazily, fsync off) and a fresh, uniquely named database per test.
//!
//! Usage: `let (pool, url) = support::pg::fresh_db().await;` Migrations are
//! the caller's business.
//!
//! Cleanup, since a guard in a static is never dropped:
//! * normal exit (tests passed or failed): a libc `atexit` hook runs
//!   `pg_ctl stop -m immediate` and removes the cluster's directory;
//! * killed (SIGKILL, Ctrl-C, abort): the postmaster was started with
//!   `die_with_parent`, so the kernel sends it SIGINT when we die
//!   (PR_SET_PDEATHSIG); the directory left behind is removed by the next
//!   run, which sweeps `/tmp/sender-indexer-it-<pid>-*` whose pid is gone.
//!
//! It must not touch any cluster but its own, nor share a database between
//! tests. Under cargo-nextest (a process per test) each test gets its own
//! cluster: correct, only slower.

#![allow(dead_code)] // shared helpers: not every test module uses each one

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;
use sender_indexer::embedded_pg::{Cluster, ClusterDropGuard, ClusterOptions, StopMode};
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, PgPool};

/// Directory name prefix under /tmp; the pid after it lets a later run
/// tell a dead run's leftovers from a live one's.
const DIR_PREFIX: &str = "sender-indexer-it-";
/// PostgreSQL identifiers are cut at 63 bytes.
const MAX_DB_NAME: usize = 63;

struct Harness {
    cluster: Cluster,
    root: PathBuf,
}

static HARNESS: OnceLock<Harness> = OnceLock::new();

/// The binary's cluster, started on first use (blocks for initdb, ~1-3s).
pub fn cluster() -> &'static Cluster {
    &HARNESS
        .get_or_init(|| start().unwrap_or_else(|e| panic!("starting the test cluster: {e:#}")))
        .cluster
}

fn start() -> anyhow::Result<Harness> {
    sweep_dead_runs();
    // Under /tmp, not $TMPDIR: short enough for the socket path, and
    // reachable by the `postgres` user that runs the server when we are root.
    let root = tempfile::Builder::new()
        .prefix(&format!("{DIR_PREFIX}{}-", std::process::id()))
        .tempdir_in("/tmp")?
        .keep();
    // tempdirs are 0700; the server user only needs to traverse this one.
    fs::set_permissions(&root, fs::Permissions::from_mode(0o711))?;
    let mut opts = ClusterOptions::new(root.join("data"));
    opts.no_sync = true;
    opts.die_with_parent = true;
    let cluster = match Cluster::start(&opts) {
        Ok(c) => c,
        Err(e) => {
            let _ = fs::remove_dir_all(&root);
            return Err(e.into());
        }
    };
    // SAFETY: registers a plain `extern "C" fn` that never unwinds.
    if unsafe { nix::libc::atexit(stop_at_exit) } != 0 {
        eprintln!(
            "warning: atexit failed; the test cluster in {} outlives this run",
            root.display()
        );
    }
    Ok(Harness { cluster, root })
}

extern "C" fn stop_at_exit() {
    if let Some(h) = HARNESS.get() {
        if let Err(e) = h.cluster.stop_with(StopMode::Immediate) {
            eprintln!("warning: stopping the test cluster: {e}");
        }
        let _ = fs::remove_dir_all(&h.root);
    }
}

/// Removes directories of earlier runs whose process no longer exists.
fn sweep_dead_runs() {
    let Ok(entries) = fs::read_dir("/tmp") else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.strip_prefix(DIR_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<i32>().ok());
        if let Some(pid) = pid
            && kill(Pid::from_raw(pid), None) == Err(Errno::ESRCH)
        {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// A cluster of one test's own, for tests that stop or restart the server
/// (which the shared one must never be). Stopped and removed on drop.
pub struct OwnCluster {
    opts: ClusterOptions,
    root: PathBuf,
    cluster: Option<Cluster>,
}

impl OwnCluster {
    pub fn start() -> OwnCluster {
        Self::start_with(None)
    }

    fn start_with(tcp_port: Option<u16>) -> OwnCluster {
        sweep_dead_runs();
        let root = tempfile::Builder::new()
            .prefix(&format!("{DIR_PREFIX}{}-own-", std::process::id()))
            .tempdir_in("/tmp")
            .unwrap()
            .keep();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o711)).unwrap();
        // Durable like a real server (fsync and synchronous_commit on):
        // after a crash it has every commit it acknowledged.
        let mut opts = ClusterOptions::new(root.join("data"));
        opts.tcp_port = tcp_port;
        let cluster = Cluster::start(&opts).unwrap_or_else(|e| panic!("own cluster: {e:#}"));
        OwnCluster {
            opts,
            root,
            cluster: Some(cluster),
        }
    }

    /// A cluster that also listens on 127.0.0.1, where it accepts TLS
    /// connections only (`ssl = on` with a certificate of `ca` for
    /// `localhost`; `hostnossl` rejected). Its unix socket stays open for
    /// the test's own checks.
    pub async fn start_tls(ca: &super::tls::TestCa) -> OwnCluster {
        use std::os::unix::fs::MetadataExt;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let own = tokio::task::spawn_blocking(move || Self::start_with(Some(port)))
            .await
            .unwrap();
        let data = own.cluster().data_dir().to_path_buf();
        let owner = fs::metadata(&data).unwrap();
        let (cert, key) = ca.server_files();
        for (from, name) in [(cert, "server.crt"), (key, "server.key")] {
            let to = data.join(name);
            fs::copy(from, &to).unwrap();
            fs::set_permissions(&to, fs::Permissions::from_mode(0o600)).unwrap();
            std::os::unix::fs::chown(&to, Some(owner.uid()), Some(owner.gid())).unwrap();
        }
        fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostnossl all all 127.0.0.1/32 reject\n",
        )
        .unwrap();
        let mut conn = sqlx::PgConnection::connect_with(&own.cluster().connect_options("postgres"))
            .await
            .unwrap();
        for stmt in [
            "ALTER SYSTEM SET ssl = on",
            "ALTER SYSTEM SET ssl_cert_file = 'server.crt'",
            "ALTER SYSTEM SET ssl_key_file = 'server.key'",
            "SELECT pg_reload_conf()",
        ] {
            sqlx::query(stmt).execute(&mut conn).await.unwrap();
        }
        // The reload is asynchronous: wait until the server says TLS is on.
        for _ in 0..100 {
            let on: String = sqlx::query_scalar("SHOW ssl")
                .fetch_one(&mut conn)
                .await
                .unwrap();
            if on == "on" {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        own
    }

    /// `postgres://sender_indexer@localhost:PORT/NAME` over TCP, with
    /// `params` (e.g. `sslmode=verify-full&sslrootcert=…`).
    pub fn tcp_url(&self, name: &str, params: &str) -> String {
        format!(
            "postgres://sender_indexer@localhost:{}/{name}?{params}",
            self.cluster().port()
        )
    }

    fn cluster(&self) -> &Cluster {
        self.cluster.as_ref().expect("the cluster is running")
    }

    /// A new database in it: a pool, and the URL an indexer is given.
    pub async fn fresh_db(&self, name: &str) -> (PgPool, String) {
        let c = self.cluster();
        assert!(c.create_database_if_missing(name).await.unwrap());
        let pool = PgPoolOptions::new()
            .connect_with(c.connect_options(name))
            .await
            .unwrap();
        (pool, c.url(name))
    }

    /// `pg_ctl stop -m immediate`: every connection is cut at once, as in
    /// a crash; the next start runs crash recovery.
    pub fn stop_immediate(&mut self) {
        if let Some(c) = self.cluster.take() {
            c.stop_with(StopMode::Immediate).unwrap();
        }
    }

    /// Starts it again on the same data directory, socket and port.
    pub fn start_again(&mut self) {
        assert!(self.cluster.is_none(), "already running");
        let c = Cluster::start(&self.opts).unwrap_or_else(|e| panic!("restart: {e:#}"));
        self.cluster = Some(c);
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        self.stop_immediate();
        let _ = fs::remove_dir_all(&self.root);
    }
}

/// The checkpoint's block number; `None` when there is none yet, also
/// before the indexer has created the schema.
pub async fn checkpoint(pool: &PgPool) -> Option<u64> {
    sqlx::query_scalar::<_, i64>("SELECT block_number FROM checkpoint")
        .fetch_optional(pool)
        .await
        .unwrap_or(None)
        .map(|n| n as u64)
}

/// Polls the checkpoint until it is `at` (panics after `within`, or when
/// `alive` says the indexer exited).
pub async fn wait_for_checkpoint(
    pool: &PgPool,
    at: u64,
    within: std::time::Duration,
    mut alive: impl FnMut() -> bool,
) {
    let deadline = std::time::Instant::now() + within;
    while checkpoint(pool).await != Some(at) {
        assert!(alive(), "the indexer exited before block {at}");
        assert!(
            std::time::Instant::now() < deadline,
            "checkpoint not at {at} within {within:?}: {:?}",
            checkpoint(pool).await
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A temporary directory under /tmp that the `postgres` user (which runs
/// the server when we are root) can enter, for a cluster the binary makes
/// itself (`--data-dir` inside it).
pub fn server_tempdir(prefix: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/tmp")
        .unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// A new, empty database on the binary's cluster: a pool on it and its URL
/// (`postgres://sender_indexer@%2Ftmp%2F...:5432/NAME?sslmode=disable`).
/// The name holds a counter and the test's name, for reading server logs.
pub async fn fresh_db() -> (PgPool, String) {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let cluster = cluster();
    let test = std::thread::current().name().unwrap_or("test").to_string();
    let mut name = format!("it{}_{}", COUNTER.fetch_add(1, Ordering::Relaxed), test);
    name = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    name.truncate(MAX_DB_NAME);
    let created = cluster
        .create_database_if_missing(&name)
        .await
        .unwrap_or_else(|e| panic!("creating test database {name}: {e:#}"));
    assert!(created, "test database {name} already existed");
    let pool = PgPoolOptions::new()
        .connect_with(cluster.connect_options(&name))
        .await
        .unwrap_or_else(|e| panic!("connecting to test database {name}: {e:#}"));
    (pool, cluster.url(&name))
}

#[tokio::test]
async fn fresh_dbs_are_separate_and_queryable() {
    let (a, url_a) = fresh_db().await;
    let (b, url_b) = fresh_db().await;
    assert_ne!(url_a, url_b);
    sqlx::query("CREATE TABLE t (x int)")
        .execute(&a)
        .await
        .unwrap();
    let in_a: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_tables WHERE tablename = 't'")
        .fetch_one(&a)
        .await
        .unwrap();
    let in_b: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_tables WHERE tablename = 't'")
        .fetch_one(&b)
        .await
        .unwrap();
    assert_eq!((in_a, in_b), (1, 0));
    // The URL form is what other code gets: it must connect too.
    let via_url = PgPool::connect(&url_b).await.unwrap();
    let db: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(&via_url)
        .await
        .unwrap();
    assert!(url_b.contains(&db), "{url_b} vs {db}");
    let settings: (String, String) =
        sqlx::query_as("SELECT current_setting('listen_addresses'), current_setting('fsync')")
            .fetch_one(&a)
            .await
            .unwrap();
    assert_eq!(
        settings,
        (String::new(), "off".to_string()),
        "unix socket only, fsync off"
    );
}

#[tokio::test]
async fn drop_guard_stops_and_removes_its_cluster() {
    let root = tempfile::Builder::new()
        .prefix("sender-indexer-guard-")
        .tempdir_in("/tmp")
        .unwrap()
        .keep();
    fs::set_permissions(&root, fs::Permissions::from_mode(0o711)).unwrap();
    let mut opts = ClusterOptions::new(root.join("data"));
    opts.no_sync = true;
    opts.die_with_parent = true;
    let cluster = tokio::task::spawn_blocking(move || Cluster::start(&opts))
        .await
        .unwrap()
        .unwrap();
    let guard = ClusterDropGuard::new(cluster, &root);
    assert!(guard.create_database_if_missing("x").await.unwrap());
    assert!(
        !guard.create_database_if_missing("x").await.unwrap(),
        "second call finds it"
    );
    let pid = guard.pid();
    drop(guard);
    assert!(!root.exists(), "{} left behind", root.display());
    assert_eq!(
        kill(Pid::from_raw(pid), None),
        Err(Errno::ESRCH),
        "postmaster {pid} still running"
    );
}
