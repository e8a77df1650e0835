//! The control channel of a mounted client, for `nacre lfs` and `nacre lctl`.
//!
//! Lustre's tools talk to the kernel client through ioctls and /proc; nacre's client lives
//! in a process, so each mount serves a Unix socket and leaves a registry entry saying
//! which mount point it serves. The tools find the mount holding a path, send one JSON
//! request per line and get one JSON reply per line. The socket is created mode 0600: only
//! the user who mounted can use it.

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Largest request or reply line accepted.
pub const MAX_LINE: usize = 16 << 20;

/// Where registry entries and sockets live: `$NACRE_RUN_DIR` if set, `/run/nacre` for root,
/// else `$XDG_RUNTIME_DIR/nacre`, else `nacre-UID` in the temporary directory. The entries
/// name the sockets `lfs` and `lctl` talk to, so the directory must be one only this user
/// can have made: it is created with mode 0700, and one that is already there is used only
/// if this user owns it and no one else may write to it (in a shared `/tmp`, another user
/// could have made `nacre-UID` first).
pub fn run_dir() -> Result<PathBuf> {
    let d = run_dir_path();
    check_run_dir(&d)?;
    Ok(d)
}

fn run_dir_path() -> PathBuf {
    if let Some(d) = std::env::var_os("NACRE_RUN_DIR") {
        return PathBuf::from(d);
    }
    // SAFETY: geteuid never fails.
    let uid = unsafe { libc::geteuid() };
    if uid == 0 {
        return PathBuf::from("/run/nacre");
    }
    match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(x) if x.is_absolute() => x.join("nacre"),
        _ => std::env::temp_dir().join(format!("nacre-{uid}")),
    }
}

/// Makes `d` if missing and checks it is this user's alone to write.
fn check_run_dir(d: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    nacre_osd::create_private_dir(d).with_context(|| format!("cannot create {}", d.display()))?;
    let m = std::fs::symlink_metadata(d).with_context(|| format!("cannot stat {}", d.display()))?;
    if !m.is_dir() {
        bail!(
            "{} is not a directory (nacre keeps its mount registry there)",
            d.display()
        );
    }
    // SAFETY: geteuid never fails.
    let me = unsafe { libc::geteuid() };
    if m.uid() != me {
        bail!(
            "{} is owned by uid {}, not by you (uid {me}): another user may have made it \
             to plant entries in nacre's mount registry; remove it, or set XDG_RUNTIME_DIR",
            d.display(),
            m.uid()
        );
    }
    if m.mode() & 0o022 != 0 {
        bail!(
            "{} is writable by others (mode {:o}): nacre keeps its mount registry there; \
             `chmod 700 {}` or remove it",
            d.display(),
            m.mode() & 0o777,
            d.display()
        );
    }
    Ok(())
}

/// One mounted client, as the registry records it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct MountEntry {
    pub mountpoint: PathBuf,
    pub spec: String,
    pub fsname: String,
    pub socket: PathBuf,
    pub pid: u32,
    /// When the process began (`/proc/PID/stat`'s start time): a pid another process
    /// took after this one died, without unregistering, does not keep the entry alive.
    /// Absent in entries written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<u64>,
}

impl MountEntry {
    /// Whether the process that registered this entry still runs.
    pub fn alive(&self) -> bool {
        match self.started {
            Some(t) => crate::daemon::process_runs(self.pid, t),
            None => crate::daemon::pid_alive(self.pid),
        }
    }
}

fn entry_name(mountpoint: &Path) -> String {
    let s = mountpoint.to_string_lossy();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.as_bytes() {
        h = (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
    }
    format!("{h:016x}")
}

pub fn socket_path(mountpoint: &Path) -> Result<PathBuf> {
    Ok(run_dir()?.join(format!("{}.sock", entry_name(mountpoint))))
}

pub fn register(e: &MountEntry) -> Result<PathBuf> {
    let d = run_dir()?.join("mounts");
    nacre_osd::create_private_dir(&d).with_context(|| format!("cannot create {}", d.display()))?;
    let p = d.join(format!("{}.json", entry_name(&e.mountpoint)));
    crate::target::write_atomic(&p, serde_json::to_string_pretty(e)?.as_bytes())?;
    Ok(p)
}

/// Removes the registry entry and socket of `mountpoint`, if there are any.
pub fn unregister(mountpoint: &Path) {
    let Ok(d) = run_dir() else {
        return;
    };
    let name = entry_name(mountpoint);
    let _ = std::fs::remove_file(d.join("mounts").join(format!("{name}.json")));
    let _ = std::fs::remove_file(d.join(format!("{name}.sock")));
}

/// Registers a server process (`nacre serve`) for `lctl`: `mountpoint` is its target
/// directory, `spec` its target's name.
pub fn register_server(e: &MountEntry) -> Result<PathBuf> {
    let d = run_dir()?.join("servers");
    nacre_osd::create_private_dir(&d).with_context(|| format!("cannot create {}", d.display()))?;
    let p = d.join(format!("{}.json", entry_name(&e.mountpoint)));
    crate::target::write_atomic(&p, serde_json::to_string_pretty(e)?.as_bytes())?;
    Ok(p)
}

/// Removes the registry entry and socket of the server of target directory `dir`.
pub fn unregister_server(dir: &Path) {
    let Ok(d) = run_dir() else {
        return;
    };
    let name = entry_name(dir);
    let _ = std::fs::remove_file(d.join("servers").join(format!("{name}.json")));
    let _ = std::fs::remove_file(d.join(format!("{name}.sock")));
}

/// Server processes registered on this node whose process is alive.
pub fn servers() -> Result<Vec<MountEntry>> {
    entries("servers")
}

/// Mounts registered on this node whose process is alive.
pub fn mounts() -> Result<Vec<MountEntry>> {
    entries("mounts")
}

fn entries(kind: &str) -> Result<Vec<MountEntry>> {
    let d = run_dir()?.join(kind);
    let Ok(rd) = std::fs::read_dir(&d) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let Ok(text) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        let Ok(m) = serde_json::from_str::<MountEntry>(&text) else {
            continue;
        };
        if m.alive() {
            out.push(m);
        }
    }
    out.sort_by(|a, b| a.mountpoint.cmp(&b.mountpoint));
    Ok(out)
}

/// The mount holding `path`, and the path relative to its root.
pub fn find_mount(path: &Path) -> Result<(MountEntry, PathBuf)> {
    let abs = if path.exists() {
        std::fs::canonicalize(path).with_context(|| format!("cannot resolve {}", path.display()))?
    } else {
        // A path to create (setstripe on a new file): resolve its parent.
        let parent = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let name = path
            .file_name()
            .ok_or_else(|| anyhow!("{}: no file name", path.display()))?;
        std::fs::canonicalize(parent)
            .with_context(|| format!("{}: No such file or directory", parent.display()))?
            .join(name)
    };
    let mut best: Option<(MountEntry, PathBuf)> = None;
    for m in mounts()? {
        if let Ok(rel) = abs.strip_prefix(&m.mountpoint) {
            let better = best.as_ref().is_none_or(|(b, _)| {
                m.mountpoint.as_os_str().len() > b.mountpoint.as_os_str().len()
            });
            if better {
                best = Some((m, rel.to_path_buf()));
            }
        }
    }
    best.ok_or_else(|| anyhow!("{}: not on a mounted nacre file system", path.display()))
}

/// Sends one request to a mount's control socket and reads the reply.
pub fn call<Req: Serialize, Rep: for<'a> Deserialize<'a>>(socket: &Path, req: &Req) -> Result<Rep> {
    use std::io::{BufRead, BufReader, Read};
    let s = std::os::unix::net::UnixStream::connect(socket)
        .with_context(|| format!("cannot reach the client at {}", socket.display()))?;
    let mut line = serde_json::to_vec(req)?;
    line.push(b'\n');
    send_all(&s, &line)
        .with_context(|| format!("cannot reach the client at {}", socket.display()))?;
    let mut r = BufReader::new(s);
    let mut buf = Vec::new();
    r.by_ref()
        .take(MAX_LINE as u64)
        .read_until(b'\n', &mut buf)?;
    if buf.is_empty() {
        bail!("the client at {} closed the connection", socket.display());
    }
    Ok(serde_json::from_slice(&buf)?)
}

/// Writes all of `buf` to `s` without raising SIGPIPE: commands let SIGPIPE end them when
/// their own output goes away, but a mount whose socket closes is an error to report.
fn send_all(s: &std::os::unix::net::UnixStream, mut buf: &[u8]) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    while !buf.is_empty() {
        // SAFETY: a connected socket and a buffer of the given length.
        let n = unsafe {
            libc::send(
                s.as_raw_fd(),
                buf.as_ptr().cast(),
                buf.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        match usize::try_from(n) {
            Ok(n) => buf = &buf[n..],
            Err(_) => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry lives while its process does: the same pid with another start time is a
    /// later process that took the pid, and an entry without a start time (written before
    /// it was recorded) goes by the pid alone.
    #[test]
    fn an_entry_whose_pid_was_reused_is_not_alive() {
        let pid = std::process::id();
        let started = crate::daemon::process_started(pid).expect("own start time");
        assert_eq!(crate::daemon::process_started(pid), Some(started), "stable");
        let mut e = MountEntry {
            mountpoint: PathBuf::from("/mnt/x"),
            spec: "mgs@tcp:/x".into(),
            fsname: "x".into(),
            socket: PathBuf::from("/run/nacre/x.sock"),
            pid,
            started: Some(started),
        };
        assert!(e.alive());
        e.started = Some(started + 1);
        assert!(!e.alive(), "a reused pid");
        e.started = None;
        assert!(e.alive(), "an old entry");
        let json = serde_json::to_string(&MountEntry {
            started: None,
            ..e.clone()
        })
        .expect("encode");
        assert!(!json.contains("started"));
        assert_eq!(
            serde_json::from_str::<MountEntry>(&json).expect("decode"),
            e
        );
    }
}
