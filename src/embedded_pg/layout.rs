//! Where the embedded cluster's pieces live, and who may reach them: the
//! server binaries, the default data dir, the socket dir (107-byte path
//! limit), `postmaster.pid`, and, as root, the `postgres` user with its
//! directory ownership and traversal checks.
//!
//! It starts nothing and runs no SQL; [`super::Cluster`] does.

use std::ffi::{CString, OsString};
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::{Gid, Pid, Uid, User, geteuid, getgrouplist};

use super::{EmbeddedPgError, MAX_SOCKET_PATH, Result, SERVER_USER_WHEN_ROOT, io_err};

const SERVER_BINARIES: [&str; 3] = ["initdb", "pg_ctl", "postgres"];
const VERSIONED_ROOT: &str = "/usr/lib/postgresql";

/// Where the app keeps its embedded cluster: `/var/lib/sender-indexer/pg` as
/// root (the `postgres` user can reach it, unlike /root), otherwise
/// `$XDG_DATA_HOME/sender-indexer/pg` or `~/.local/share/sender-indexer/pg`.
pub fn default_data_dir() -> Result<PathBuf> {
    default_data_dir_for(
        geteuid().is_root(),
        std::env::var_os("XDG_DATA_HOME"),
        std::env::var_os("HOME"),
    )
    .ok_or(EmbeddedPgError::NoDataDir)
}

fn default_data_dir_for(
    root: bool,
    xdg: Option<OsString>,
    home: Option<OsString>,
) -> Option<PathBuf> {
    let absolute = |v: Option<OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    let base = if root {
        PathBuf::from("/var/lib")
    } else if let Some(xdg) = absolute(xdg) {
        xdg
    } else {
        absolute(home)?.join(".local/share")
    };
    Some(base.join("sender-indexer/pg"))
}

/// A directory holding `initdb`, `pg_ctl` and `postgres`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgBinaries {
    bindir: PathBuf,
}

impl PgBinaries {
    /// Searches PATH, then `pg_config --bindir`, then the highest
    /// `/usr/lib/postgresql/<version>/bin`.
    pub fn find() -> Result<Self> {
        let pg_config = || {
            let out = Command::new("pg_config").arg("--bindir").output().ok()?;
            let dir = String::from_utf8(out.stdout).ok()?;
            out.status.success().then(|| PathBuf::from(dir.trim()))
        };
        find_with(
            std::env::var_os("PATH"),
            pg_config,
            Path::new(VERSIONED_ROOT),
        )
    }

    /// `dir` if it holds all three server binaries.
    pub fn in_dir(dir: impl Into<PathBuf>) -> Option<Self> {
        let bindir = dir.into();
        SERVER_BINARIES
            .iter()
            .all(|b| is_executable(&bindir.join(b)))
            .then_some(Self { bindir })
    }

    pub fn bindir(&self) -> &Path {
        &self.bindir
    }

    pub(super) fn bin(&self, name: &str) -> PathBuf {
        self.bindir.join(name)
    }
}

fn is_executable(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn find_with(
    path_var: Option<OsString>,
    pg_config_bindir: impl FnOnce() -> Option<PathBuf>,
    versioned_root: &Path,
) -> Result<PgBinaries> {
    for dir in std::env::split_paths(path_var.as_deref().unwrap_or_default()) {
        let initdb = dir.join("initdb");
        if !is_executable(&initdb) {
            continue;
        }
        // /usr/local/bin/initdb may be a lone symlink into the real bindir.
        let real = fs::canonicalize(&initdb)
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf));
        if let Some(found) = real
            .and_then(PgBinaries::in_dir)
            .or_else(|| PgBinaries::in_dir(dir))
        {
            return Ok(found);
        }
    }
    if let Some(found) = pg_config_bindir().and_then(PgBinaries::in_dir) {
        return Ok(found);
    }
    let mut versions: Vec<(Vec<u32>, PathBuf)> = fs::read_dir(versioned_root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let version = name
                .split('.')
                .map(|p| p.parse().ok())
                .collect::<Option<Vec<u32>>>()?;
            Some((version, e.path().join("bin")))
        })
        .collect();
    versions.sort();
    if let Some(found) = versions
        .into_iter()
        .rev()
        .find_map(|(_, bin)| PgBinaries::in_dir(bin))
    {
        return Ok(found);
    }
    Err(EmbeddedPgError::BinariesNotFound {
        searched: format!(
            "PATH, `pg_config --bindir`, {}/*/bin",
            versioned_root.display()
        ),
    })
}

/// The unprivileged user the server runs as when we are root.
#[derive(Debug, Clone)]
pub(super) struct RunAs {
    pub(super) name: String,
    pub(super) uid: Uid,
    pub(super) gid: Gid,
    groups: Vec<Gid>,
}

pub(super) fn server_user() -> Result<Option<RunAs>> {
    if !geteuid().is_root() {
        return Ok(None);
    }
    let name = SERVER_USER_WHEN_ROOT;
    let user = User::from_name(name)
        .map_err(|source| EmbeddedPgError::UserLookup {
            user: name.into(),
            source,
        })?
        .ok_or(EmbeddedPgError::NoServerUser)?;
    let cname = CString::new(name).expect("user name has no NUL");
    let groups = getgrouplist(&cname, user.gid).unwrap_or_else(|_| vec![user.gid]);
    Ok(Some(RunAs {
        name: user.name,
        uid: user.uid,
        gid: user.gid,
        groups,
    }))
}

/// Whether a user may search (x) a directory, from mode bits only (ACLs ignored).
fn can_traverse(mode: u32, owner: u32, group: u32, uid: u32, groups: &[u32]) -> bool {
    if uid == 0 {
        true
    } else if owner == uid {
        mode & 0o100 != 0
    } else if groups.contains(&group) {
        mode & 0o010 != 0
    } else {
        mode & 0o001 != 0
    }
}

fn check_traversable(target: &Path, run_as: Option<&RunAs>) -> Result<()> {
    let Some(user) = run_as else { return Ok(()) };
    let groups: Vec<u32> = user.groups.iter().map(|g| g.as_raw()).collect();
    for dir in target.ancestors().skip(1) {
        let meta = fs::metadata(dir).map_err(io_err("inspecting", dir))?;
        if !can_traverse(
            meta.mode(),
            meta.uid(),
            meta.gid(),
            user.uid.as_raw(),
            &groups,
        ) {
            return Err(EmbeddedPgError::NotTraversable {
                user: user.name.clone(),
                dir: dir.into(),
                target: target.into(),
            });
        }
    }
    Ok(())
}

pub(super) fn socket_path_len(dir: &Path, port: u16) -> usize {
    dir.as_os_str().len() + format!("/.s.PGSQL.{port}").len()
}

/// Explicit dir (checked); else the data dir when the socket path fits; else
/// a per-data-dir dir under /tmp, named by a hash so clusters never share one.
pub(super) fn choose_socket_dir(
    explicit: Option<&Path>,
    data_dir: &Path,
    port: u16,
    euid: u32,
) -> Result<PathBuf> {
    let dir = match explicit {
        Some(dir) => dir.to_path_buf(),
        None if socket_path_len(data_dir, port) <= MAX_SOCKET_PATH => data_dir.to_path_buf(),
        None => {
            // FNV-1a: stable across runs and Rust versions, unlike DefaultHasher.
            let hash = data_dir
                .as_os_str()
                .as_bytes()
                .iter()
                .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                    (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
                });
            PathBuf::from(format!("/tmp/sender-indexer-pg-{euid}-{hash:016x}"))
        }
    };
    let len = socket_path_len(&dir, port);
    if len > MAX_SOCKET_PATH {
        return Err(EmbeddedPgError::SocketPathTooLong { dir, len });
    }
    Ok(dir)
}

/// Creates `dir` if missing (parents with default modes), checks the server
/// user can reach it, then gives it to that user with `mode`.
pub(super) fn prepare_dir(dir: &Path, mode: u32, run_as: Option<&RunAs>) -> Result<()> {
    if let Some(parent) = dir.parent() {
        fs::create_dir_all(parent).map_err(io_err("creating", parent))?;
    }
    check_traversable(dir, run_as)?;
    match fs::DirBuilder::new().mode(mode).create(dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
            return Err(io_err("creating", dir)(e));
        }
        _ => {}
    }
    if let Some(user) = run_as {
        std::os::unix::fs::chown(dir, Some(user.uid.as_raw()), Some(user.gid.as_raw()))
            .map_err(io_err("changing owner of", dir))?;
    }
    fs::set_permissions(dir, fs::Permissions::from_mode(mode))
        .map_err(io_err("changing mode of", dir))
}

pub(super) fn prepare_socket_dir(dir: &Path, run_as: Option<&RunAs>) -> Result<()> {
    let uid = run_as.map_or_else(geteuid, |u| u.uid).as_raw();
    match fs::symlink_metadata(dir) {
        // A predictable /tmp name: only trust it if nobody else made it.
        Ok(meta) if !meta.is_dir() || meta.uid() != uid => {
            Err(EmbeddedPgError::SocketDirNotOwned {
                dir: dir.into(),
                uid,
            })
        }
        Ok(_) => check_traversable(dir, run_as),
        Err(e) if e.kind() == io::ErrorKind::NotFound => prepare_dir(dir, 0o700, run_as),
        Err(e) => Err(io_err("inspecting", dir)(e)),
    }
}

/// Parsed `postmaster.pid` (see PostgreSQL's `pidfile.h` for the line order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PidFile {
    pub(super) pid: i32,
    pub(super) port: u16,
    pub(super) socket_dir: Option<PathBuf>,
    pub(super) listen: String,
    pub(super) status: String,
}

pub(super) fn parse_pid_file(text: &str) -> Option<PidFile> {
    let lines: Vec<&str> = text.lines().collect();
    let line = |i: usize| lines.get(i).map(|l| l.trim()).unwrap_or("");
    Some(PidFile {
        pid: line(0).parse().ok()?,
        port: line(3).parse().ok()?,
        socket_dir: Some(line(4)).filter(|s| !s.is_empty()).map(PathBuf::from),
        listen: line(5).to_string(),
        status: line(7).to_string(),
    })
}

pub(super) fn read_pid_file(data_dir: &Path) -> Result<Option<PidFile>> {
    let path = data_dir.join("postmaster.pid");
    match fs::read_to_string(&path) {
        Ok(text) => Ok(parse_pid_file(&text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err("reading", &path)(e)),
    }
}

/// kill(pid, 0) as PostgreSQL itself checks, but a zombie (killed, not yet
/// reaped) counts as dead.
pub(super) fn pid_alive(pid: i32) -> bool {
    let zombie = || {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z'))
    };
    pid > 0 && matches!(kill(Pid::from_raw(pid), None), Ok(()) | Err(Errno::EPERM)) && !zombie()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn fake_bindir(dir: &Path, names: &[&str]) {
        fs::create_dir_all(dir).unwrap();
        for name in names {
            let path = dir.join(name);
            fs::write(&path, "#!/bin/sh\n").unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        }
    }

    #[test]
    fn finds_binaries_on_path_through_a_lone_symlink() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("lib/postgresql/16/bin");
        fake_bindir(&real, &SERVER_BINARIES);
        let on_path = tmp.path().join("usrbin");
        fs::create_dir_all(&on_path).unwrap();
        symlink(real.join("initdb"), on_path.join("initdb")).unwrap();
        let path = std::env::join_paths([tmp.path().join("nothing"), on_path]).unwrap();
        let found = find_with(Some(path), || None, &tmp.path().join("none")).unwrap();
        assert_eq!(found.bindir(), fs::canonicalize(&real).unwrap());
    }

    #[test]
    fn falls_back_to_pg_config_then_highest_complete_version() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("postgresql");
        fake_bindir(&root.join("9.6/bin"), &SERVER_BINARIES);
        fake_bindir(&root.join("15/bin"), &SERVER_BINARIES);
        fake_bindir(&root.join("17/bin"), &["initdb", "pg_ctl"]); // client-only leftovers
        fake_bindir(&tmp.path().join("cfg"), &SERVER_BINARIES);
        let found = find_with(None, || Some(tmp.path().join("cfg")), &root).unwrap();
        assert_eq!(found.bindir(), tmp.path().join("cfg"));
        let found = find_with(None, || None, &root).unwrap();
        assert_eq!(found.bindir(), root.join("15/bin"));
    }

    #[test]
    fn missing_binaries_name_the_package_and_places() {
        let tmp = tempfile::tempdir().unwrap();
        let err = find_with(None, || None, tmp.path())
            .unwrap_err()
            .to_string();
        assert!(err.contains("apt-get install postgresql"), "{err}");
        assert!(
            err.contains("pg_config --bindir") && err.contains("PATH"),
            "{err}"
        );
    }

    #[test]
    fn default_data_dir_depends_on_root_and_env() {
        let dir = |root, xdg: Option<&str>, home: Option<&str>| {
            default_data_dir_for(root, xdg.map(Into::into), home.map(Into::into))
        };
        assert_eq!(
            dir(true, Some("/x"), Some("/root")).unwrap(),
            Path::new("/var/lib/sender-indexer/pg")
        );
        assert_eq!(
            dir(false, Some("/x"), Some("/h")).unwrap(),
            Path::new("/x/sender-indexer/pg")
        );
        assert_eq!(
            dir(false, Some("rel"), Some("/h")).unwrap(),
            Path::new("/h/.local/share/sender-indexer/pg")
        );
        assert_eq!(dir(false, None, None), None);
    }

    #[test]
    fn traversal_follows_owner_group_other_bits() {
        assert!(can_traverse(0o700, 5, 5, 5, &[5]));
        assert!(!can_traverse(0o700, 0, 0, 5, &[5]));
        assert!(can_traverse(0o710, 0, 7, 5, &[5, 7]));
        assert!(can_traverse(0o711, 0, 0, 5, &[5]));
        assert!(!can_traverse(0o074, 5, 5, 5, &[5])); // owner bits win over other bits
        assert!(can_traverse(0o000, 1, 1, 0, &[]));
    }

    #[test]
    fn socket_dir_is_data_dir_unless_too_long() {
        let short = Path::new("/tmp/x/data");
        assert_eq!(choose_socket_dir(None, short, 5432, 0).unwrap(), short);
        let long = PathBuf::from(format!("/tmp/{}", "d".repeat(100)));
        let dir = choose_socket_dir(None, &long, 5432, 1000).unwrap();
        assert!(
            dir.starts_with("/tmp") && dir.to_string_lossy().contains("sender-indexer-pg-1000-")
        );
        assert_eq!(
            dir,
            choose_socket_dir(None, &long, 5432, 1000).unwrap(),
            "stable"
        );
        assert!(socket_path_len(&dir, 65535) <= MAX_SOCKET_PATH);
        let err = choose_socket_dir(Some(&long), short, 5432, 0).unwrap_err();
        assert!(matches!(err, EmbeddedPgError::SocketPathTooLong { .. }));
    }

    #[test]
    fn parses_postmaster_pid() {
        let text = "4242\n/d\n1700000000\n5432\n/tmp/s\n\n  5432001    196608\nready   \n";
        let pid = parse_pid_file(text).unwrap();
        assert_eq!(pid.pid, 4242);
        assert_eq!(pid.port, 5432);
        assert_eq!(pid.socket_dir.as_deref(), Some(Path::new("/tmp/s")));
        assert_eq!(pid.listen, "");
        assert_eq!(pid.status, "ready");
        assert_eq!(parse_pid_file("garbage\n"), None);
    }
}
