//! Embedded default database: a PostgreSQL cluster this process manages itself.
//!
//! Owns `initdb`, starting `postgres` on a private unix socket (plus
//! 127.0.0.1 only when asked), waiting until it accepts connections, reusing
//! a server already running on the data dir, stopping it, and creating a
//! database. Finding binaries and laying out directories is `layout`'s. The app uses it when no
//! DATABASE_URL is configured; the test harness uses it for throwaway
//! clusters.
//!
//! It must not: touch the distribution's PostgreSQL service or its clusters,
//! listen anywhere but a unix socket or 127.0.0.1, run SQL beyond
//! `CREATE DATABASE` (schema belongs to `store`), or depend on `su`/`sudo`.
//!
//! Root: PostgreSQL refuses to run as root, so when the euid is 0 `initdb`,
//! `postgres` and `pg_ctl` run as the `postgres` system user (uid/gid set on
//! the child). The data dir and socket dir are chowned to it. Every parent of
//! them must be traversable by that user; if one is not we fail with a hint
//! instead of loosening the permissions of a directory we did not create.
//! That is why the default data dir as root is /var/lib/sender-indexer/pg.
//!
//! Everything here blocks (process spawns, polling) except
//! [`Cluster::create_database_if_missing`]: from async code wrap
//! [`Cluster::start`] in `tokio::task::spawn_blocking`.

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod layout;

pub use layout::{PgBinaries, default_data_dir};
use layout::{
    RunAs, choose_socket_dir, pid_alive, prepare_dir, prepare_socket_dir, read_pid_file,
    server_user,
};
use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::unistd::geteuid;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgSslMode};
use sqlx::{AssertSqlSafe, Connection};

/// Superuser created by `initdb`. Auth is `trust`, which is safe only because
/// the socket dir is private to the server user (and root).
pub const SUPERUSER: &str = "sender_indexer";
/// Port used to name the socket file (`.s.PGSQL.<port>`) when no TCP port is
/// asked for; the socket dir is private, so it never clashes.
pub const DEFAULT_PORT: u16 = 5432;
/// System user the server runs as when we are root (created by Debian's
/// `postgresql` package).
pub const SERVER_USER_WHEN_ROOT: &str = "postgres";
/// `sun_path` holds 108 bytes including the trailing NUL.
const MAX_SOCKET_PATH: usize = 107;
/// First start runs crash recovery or a checkpoint on a 2-core CI box; a
/// minute is generous, and the error points at the log either way.
const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(60);
/// Readiness poll interval: startup takes ~0.2-2s, so 50ms adds little.
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// Bytes of the server log quoted in a startup error.
const LOG_TAIL_BYTES: u64 = 2048;

#[derive(Debug, thiserror::Error)]
pub enum EmbeddedPgError {
    #[error(
        "postgresql server binaries (initdb, pg_ctl, postgres) not found; searched {searched}\n\nhint: install them with `apt-get install postgresql`, or set DATABASE_URL to use an existing server"
    )]
    BinariesNotFound { searched: String },
    #[error(
        "running as root but there is no `{SERVER_USER_WHEN_ROOT}` system user to run postgresql as\n\nhint: `apt-get install postgresql` creates it; or run as an unprivileged user"
    )]
    NoServerUser,
    #[error("looking up system user `{user}`: {source}")]
    UserLookup { user: String, source: Errno },
    #[error(
        "no default data dir: neither XDG_DATA_HOME nor HOME is set\n\nhint: set HOME, or set DATABASE_URL"
    )]
    NoDataDir,
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error(
        "user `{user}` cannot traverse {dir}, a parent of {target}\n\nhint: `chmod o+x {dir}`, or use a data dir under /var/lib/sender-indexer"
    )]
    NotTraversable {
        user: String,
        dir: PathBuf,
        target: PathBuf,
    },
    #[error("socket dir {dir} is not a directory owned by uid {uid}\n\nhint: remove it and retry")]
    SocketDirNotOwned { dir: PathBuf, uid: u32 },
    #[error(
        "unix socket path under {dir} is {len} bytes, over the {MAX_SOCKET_PATH}-byte limit\n\nhint: pick a shorter socket dir"
    )]
    SocketPathTooLong { dir: PathBuf, len: usize },
    #[error("{what} failed ({status}): {output}")]
    CommandFailed {
        what: String,
        status: std::process::ExitStatus,
        output: String,
    },
    #[error("postgresql on {data_dir} exited during startup ({status}); log {log}:\n{tail}")]
    ServerExited {
        data_dir: PathBuf,
        status: String,
        log: PathBuf,
        tail: String,
    },
    #[error(
        "postgresql on {data_dir} not accepting connections after {timeout:?}\n\nhint: see the server log {log}"
    )]
    StartTimeout {
        data_dir: PathBuf,
        timeout: Duration,
        log: PathBuf,
    },
    #[error("database {database} on {socket_dir}: {source}")]
    Sql {
        database: String,
        socket_dir: PathBuf,
        source: sqlx::Error,
    },
}

type Result<T, E = EmbeddedPgError> = std::result::Result<T, E>;

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> EmbeddedPgError {
    let path = path.to_path_buf();
    move |source| EmbeddedPgError::Io {
        action,
        path,
        source,
    }
}

/// How [`Cluster::stop_with`] shuts the server down (`pg_ctl stop -m`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopMode {
    /// Disconnect clients, checkpoint, exit.
    Fast,
    /// Exit at once; the next start runs crash recovery. For throwaway clusters.
    Immediate,
}

/// How to find or create, and start, a cluster.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    pub data_dir: PathBuf,
    /// None: the data dir when the socket path fits in 107 bytes, else
    /// `/tmp/sender-indexer-pg-<euid>-<hash of data dir>`.
    pub socket_dir: Option<PathBuf>,
    /// Also listen on 127.0.0.1 at this port (which then names the socket
    /// too). None: unix socket only (`listen_addresses=''`).
    pub tcp_port: Option<u16>,
    /// Tests only: `initdb --no-sync`, and fsync, synchronous_commit and
    /// full_page_writes off. A crash can lose or corrupt data.
    pub no_sync: bool,
    /// Have the kernel send the server SIGINT (fast shutdown) when this
    /// process dies, however it dies (Linux PR_SET_PDEATHSIG). For throwaway
    /// clusters; a reused server is not affected.
    pub die_with_parent: bool,
    pub start_timeout: Duration,
}

impl ClusterOptions {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            socket_dir: None,
            tcp_port: None,
            no_sync: false,
            die_with_parent: false,
            start_timeout: DEFAULT_START_TIMEOUT,
        }
    }
}

/// Exit status of a server we spawned, filled in by its reaper thread.
type ExitSlot = Arc<Mutex<Option<String>>>;

/// A running server, started here or found running on the data dir.
#[derive(Debug)]
pub struct Cluster {
    bins: PgBinaries,
    run_as: Option<RunAs>,
    data_dir: PathBuf,
    socket_dir: PathBuf,
    port: u16,
    log_file: PathBuf,
    pid: i32,
    reused: bool,
}

impl Cluster {
    /// Finds the binaries, initdb's the data dir if it has no PG_VERSION,
    /// and starts the server, or reuses one already running on it.
    pub fn start(opts: &ClusterOptions) -> Result<Self> {
        Self::start_with(PgBinaries::find()?, opts)
    }

    pub fn start_with(bins: PgBinaries, opts: &ClusterOptions) -> Result<Self> {
        let run_as = server_user()?;
        let data_dir =
            std::path::absolute(&opts.data_dir).map_err(io_err("resolving", &opts.data_dir))?;
        let mut cluster = Self {
            bins,
            run_as,
            log_file: data_dir.join("server.log"),
            socket_dir: data_dir.clone(),
            data_dir,
            port: opts.tcp_port.unwrap_or(DEFAULT_PORT),
            pid: 0,
            reused: true,
        };
        if let Some(running) = read_pid_file(&cluster.data_dir)?.filter(|p| pid_alive(p.pid)) {
            cluster.pid = running.pid;
            cluster.port = running.port;
            cluster.socket_dir = running.socket_dir.ok_or_else(|| {
                let no_socket = io::Error::other("it has no unix socket");
                io_err("reusing the server on", &cluster.data_dir)(no_socket)
            })?;
            match cluster.wait_ready(None, opts.start_timeout) {
                Ok(()) => {
                    tracing::info!(target: "indexer::embedded_pg", data_dir = %cluster.data_dir.display(), pid = cluster.pid, "reusing running postgresql");
                    return Ok(cluster);
                }
                // It died meanwhile: start our own below.
                Err(EmbeddedPgError::ServerExited { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        cluster.reused = false;
        cluster.port = opts.tcp_port.unwrap_or(DEFAULT_PORT);
        let run_as = cluster.run_as.as_ref();
        let data_dir = &cluster.data_dir;
        prepare_dir(data_dir, 0o700, run_as)?;
        if !data_dir.join("PG_VERSION").exists() {
            let mut cmd = command(&cluster.bins.bin("initdb"), run_as);
            cmd.arg("-D")
                .arg(data_dir)
                .arg(format!("--username={SUPERUSER}"));
            cmd.args(["--auth=trust", "--encoding=UTF8", "--locale=C"]);
            if opts.no_sync {
                cmd.arg("--no-sync");
            }
            run(cmd, format!("initdb {}", data_dir.display()))?;
        }
        let euid = geteuid().as_raw();
        cluster.socket_dir =
            choose_socket_dir(opts.socket_dir.as_deref(), data_dir, cluster.port, euid)?;
        if cluster.socket_dir != cluster.data_dir {
            prepare_socket_dir(&cluster.socket_dir, run_as)?;
        }

        let (pid, exited) = spawn_reaped(cluster.server_command(opts)?)
            .map_err(io_err("starting", &cluster.bins.bin("postgres")))?;
        cluster.pid = pid;
        cluster.wait_ready(Some(&exited), opts.start_timeout)?;
        tracing::info!(target: "indexer::embedded_pg", data_dir = %cluster.data_dir.display(), pid, "started postgresql");
        Ok(cluster)
    }

    fn server_command(&self, opts: &ClusterOptions) -> Result<Command> {
        let log_err = io_err("opening", &self.log_file);
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log_file);
        let log = log.map_err(log_err)?;
        let log2 = log.try_clone().map_err(io_err("opening", &self.log_file))?;
        let listen = if opts.tcp_port.is_some() {
            "127.0.0.1"
        } else {
            ""
        };
        let sockets = self.socket_dir.display().to_string().replace('"', "\"\"");
        let mut settings = vec![
            format!("port={}", self.port),
            format!("listen_addresses={listen}"),
            format!("unix_socket_directories=\"{sockets}\""),
        ];
        if opts.no_sync {
            let unsafe_fast = [
                "fsync=off",
                "synchronous_commit=off",
                "full_page_writes=off",
            ];
            settings.extend(unsafe_fast.map(String::from));
        }
        let mut cmd = command(&self.bins.bin("postgres"), self.run_as.as_ref());
        cmd.arg("-D").arg(&self.data_dir);
        for s in settings {
            cmd.arg("-c").arg(s);
        }
        // Own process group: a terminal's Ctrl-C must reach the app, which
        // then shuts down gracefully while the database is still up.
        cmd.stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .process_group(0);
        if opts.die_with_parent {
            // Set after std's setuid (which clears the setting); runs in the
            // forked child, where only async-signal-safe calls are allowed.
            unsafe {
                cmd.pre_exec(|| {
                    nix::sys::prctl::set_pdeathsig(Signal::SIGINT).map_err(io::Error::from)
                });
            }
        }
        Ok(cmd)
    }

    /// Polls until `postmaster.pid` says "ready" and the socket accepts a
    /// connection (what `pg_ctl start -w` checks), or the server dies.
    fn wait_ready(&self, exited: Option<&ExitSlot>, timeout: Duration) -> Result<()> {
        let socket = self.socket_dir.join(format!(".s.PGSQL.{}", self.port));
        let deadline = Instant::now() + timeout;
        loop {
            let status = exited.and_then(|slot| slot.lock().expect("exit slot poisoned").clone());
            let status =
                status.or_else(|| (!pid_alive(self.pid)).then(|| "no longer running".to_string()));
            if let Some(status) = status {
                return Err(EmbeddedPgError::ServerExited {
                    data_dir: self.data_dir.clone(),
                    status,
                    log: self.log_file.clone(),
                    tail: log_tail(&self.log_file),
                });
            }
            let ready = read_pid_file(&self.data_dir)
                .ok()
                .flatten()
                .is_some_and(|p| p.status == "ready");
            if ready && UnixStream::connect(&socket).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(EmbeddedPgError::StartTimeout {
                    data_dir: self.data_dir.clone(),
                    timeout,
                    log: self.log_file.clone(),
                });
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn socket_dir(&self) -> &Path {
        &self.socket_dir
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn log_file(&self) -> &Path {
        &self.log_file
    }

    /// Postmaster pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// True when the server was already running and we attached to it.
    pub fn reused(&self) -> bool {
        self.reused
    }

    /// Options for sqlx: unix socket, [`SUPERUSER`], no TLS.
    pub fn connect_options(&self, database: &str) -> PgConnectOptions {
        PgConnectOptions::new_without_pgpass()
            .socket(&self.socket_dir)
            .port(self.port)
            .username(SUPERUSER)
            .database(database)
            .ssl_mode(PgSslMode::Disable)
    }

    /// `postgres://sender_indexer@%2Fsocket%2Fdir:PORT/DB?sslmode=disable`:
    /// the socket dir percent-encoded as host, accepted by sqlx and psql.
    pub fn url(&self, database: &str) -> String {
        socket_url(&self.socket_dir, self.port, database)
    }

    /// Creates `name` unless it exists; true if this call created it.
    /// Safe to race: a concurrent creation counts as "exists".
    pub async fn create_database_if_missing(&self, name: &str) -> Result<bool> {
        let sql_err = |source| EmbeddedPgError::Sql {
            database: name.to_string(),
            socket_dir: self.socket_dir.clone(),
            source,
        };
        let mut conn = PgConnection::connect_with(&self.connect_options("postgres"))
            .await
            .map_err(sql_err)?;
        let exists: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
                .bind(name)
                .fetch_one(&mut conn)
                .await
                .map_err(sql_err)?;
        let created = if exists {
            false
        } else {
            let sql = format!("CREATE DATABASE \"{}\"", name.replace('"', "\"\""));
            match sqlx::query(AssertSqlSafe(sql)).execute(&mut conn).await {
                Ok(_) => true,
                // duplicate_database, or pg_database's unique index when racing
                Err(sqlx::Error::Database(e))
                    if matches!(e.code().as_deref(), Some("42P04" | "23505")) =>
                {
                    false
                }
                Err(e) => return Err(sql_err(e)),
            }
        };
        let _ = conn.close().await;
        Ok(created)
    }

    /// `pg_ctl stop -m fast`; a server that is already gone is not an error.
    pub fn stop(&self) -> Result<()> {
        self.stop_with(StopMode::Fast)
    }

    pub fn stop_with(&self, mode: StopMode) -> Result<()> {
        if !read_pid_file(&self.data_dir)?.is_some_and(|p| pid_alive(p.pid)) {
            return Ok(());
        }
        let mode = match mode {
            StopMode::Fast => "fast",
            StopMode::Immediate => "immediate",
        };
        let mut cmd = command(&self.bins.bin("pg_ctl"), self.run_as.as_ref());
        cmd.arg("stop")
            .arg("-D")
            .arg(&self.data_dir)
            .args(["-m", mode, "-w", "-t", "60"]);
        run(cmd, format!("pg_ctl stop {}", self.data_dir.display()))
    }
}

fn socket_url(socket_dir: &Path, port: u16, database: &str) -> String {
    // The url crate rejects an empty host (`postgres://u@/db?host=...`), so
    // the socket dir goes percent-encoded in the host, as sqlx itself does.
    let enc = |s: &[u8]| {
        url::form_urlencoded::byte_serialize(s)
            .collect::<String>()
            .replace('+', "%20")
    };
    let host = enc(socket_dir.as_os_str().as_bytes());
    format!(
        "postgres://{SUPERUSER}@{host}:{port}/{}?sslmode=disable",
        enc(database.as_bytes())
    )
}

/// A command for a server binary, run as the server user when we are root.
fn command(program: &Path, run_as: Option<&RunAs>) -> Command {
    let mut cmd = Command::new(program);
    // The server user may not be able to read our cwd (e.g. /root).
    cmd.current_dir("/");
    if let Some(user) = run_as {
        // std drops supplementary groups (setgroups(0)) when uid is set as root.
        cmd.uid(user.uid.as_raw()).gid(user.gid.as_raw());
    }
    cmd
}

fn run(mut cmd: Command, what: String) -> Result<()> {
    let program = PathBuf::from(cmd.get_program());
    let out = cmd.output().map_err(io_err("running", &program))?;
    if out.status.success() {
        return Ok(());
    }
    let mut output = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if output.is_empty() {
        output = String::from_utf8_lossy(&out.stdout).trim().to_string();
    }
    Err(EmbeddedPgError::CommandFailed {
        what,
        status: out.status,
        output,
    })
}

/// Spawns from a dedicated thread that then waits on the child: it reaps the
/// server (no zombie) and, since PR_SET_PDEATHSIG fires when the parent
/// *thread* exits, it must outlive the server, which no test thread does.
fn spawn_reaped(mut cmd: Command) -> io::Result<(i32, ExitSlot)> {
    let slot: ExitSlot = Arc::new(Mutex::new(None));
    let (tx, rx) = std::sync::mpsc::channel();
    let reaper_slot = slot.clone();
    std::thread::Builder::new()
        .name("embedded-pg-reaper".into())
        .spawn(move || match cmd.spawn() {
            Err(e) => drop(tx.send(Err(e))),
            Ok(mut child) => {
                let _ = tx.send(Ok(child.id() as i32));
                let status = child
                    .wait()
                    .map_or_else(|e| e.to_string(), |s| s.to_string());
                *reaper_slot.lock().expect("exit slot poisoned") = Some(status);
            }
        })?;
    let pid = rx
        .recv()
        .map_err(|_| io::Error::other("reaper thread died"))??;
    Ok((pid, slot))
}

fn log_tail(path: &Path) -> String {
    let mut buf = Vec::new();
    if let Ok(mut f) = File::open(path) {
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = f.seek(SeekFrom::Start(len.saturating_sub(LOG_TAIL_BYTES)));
        let _ = f.read_to_end(&mut buf);
    }
    String::from_utf8_lossy(&buf).trim().to_string()
}

/// Stops the cluster (immediate: its data is thrown away) and removes
/// `remove_dir` on drop. For tests.
#[derive(Debug)]
pub struct ClusterDropGuard {
    cluster: Cluster,
    remove_dir: PathBuf,
}

impl ClusterDropGuard {
    /// `remove_dir` is deleted recursively on drop: pass the cluster's own
    /// scratch dir (e.g. a tempdir holding the data dir), nothing shared.
    pub fn new(cluster: Cluster, remove_dir: impl Into<PathBuf>) -> Self {
        Self {
            cluster,
            remove_dir: remove_dir.into(),
        }
    }
}

impl std::ops::Deref for ClusterDropGuard {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        &self.cluster
    }
}

impl Drop for ClusterDropGuard {
    fn drop(&mut self) {
        if let Err(e) = self.cluster.stop_with(StopMode::Immediate) {
            tracing::warn!(target: "indexer::embedded_pg", "stopping throwaway cluster: {e}");
        }
        let _ = fs::remove_dir_all(&self.remove_dir);
        if !self.cluster.socket_dir.starts_with(&self.remove_dir) {
            // only if empty: the fallback /tmp dir, never a shared one
            let _ = fs::remove_dir(&self.cluster.socket_dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_url_round_trips_through_sqlx() {
        let url = socket_url(Path::new("/tmp/a b/s"), 6543, "it db");
        let opts: PgConnectOptions = url.parse().unwrap();
        assert_eq!(
            opts.get_socket().map(PathBuf::as_path),
            Some(Path::new("/tmp/a b/s"))
        );
        assert_eq!(opts.get_port(), 6543);
        assert_eq!(opts.get_username(), SUPERUSER);
        assert_eq!(opts.get_database(), Some("it db"));
    }
}
