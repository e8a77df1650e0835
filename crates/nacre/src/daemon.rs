//! Process life cycle of `nacre up`, `nacre mount` and `nacre serve`: start in the
//! foreground or as a detached child that reports readiness, mount and unmount, stop on a
//! signal, and leave state a later `down` or `up` can clean up after a `kill -9`.

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long `--background` waits for the child to be ready.
pub const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long `down` waits for a clean stop.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// Hidden flag a background child runs with.
pub const CHILD_FLAG: &str = "--daemon-child";

/// `DIR/run.json`: the running `up` process.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunState {
    pub pid: u32,
    pub mount: PathBuf,
    pub spec: String,
}

pub fn run_file(dir: &Path) -> PathBuf {
    dir.join("run.json")
}

pub fn load_run(dir: &Path) -> Option<RunState> {
    let text = std::fs::read_to_string(run_file(dir)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Process `pid`'s state letter and start time, in clock ticks after boot (fields 3 and
/// 22 of `/proc/PID/stat`). With the pid, the start time names one process, where a pid
/// alone may be reused.
fn proc_stat(pid: u32) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name before them may itself hold spaces and parentheses.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let started = fields.nth(18)?.parse().ok()?;
    Some((state, started))
}

/// When process `pid` began (see [`proc_stat`]).
pub fn process_started(pid: u32) -> Option<u64> {
    proc_stat(pid).map(|(_, started)| started)
}

/// Whether the process that began at `started` as `pid` still runs (not a zombie).
pub fn process_runs(pid: u32, started: u64) -> bool {
    proc_stat(pid).is_some_and(|(state, t)| state != 'Z' && t == started)
}

pub fn pid_alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    let r = unsafe { libc::kill(pid as i32, 0) };
    if r != 0 {
        return false;
    }
    // A zombie still answers kill(0); check its state.
    proc_stat(pid).is_some_and(|(state, _)| state != 'Z')
}

/// Whether `p` is a mount point (its device differs from its parent's, or it is a dead FUSE mount).
pub fn is_mountpoint(p: &Path) -> bool {
    let Ok(mi) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let Ok(abs) = std::path::absolute(p) else {
        return false;
    };
    let want = abs.to_string_lossy().replace(' ', "\\040");
    mi.lines()
        .any(|l| l.split(' ').nth(4) == Some(want.as_str()))
}

/// Unmounts `p`, lazily if it is busy or dead. Returns whether it was mounted.
pub fn unmount(p: &Path) -> Result<bool> {
    if !is_mountpoint(p) {
        return Ok(false);
    }
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes())?;
    // SAFETY: valid C string.
    if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
        return Ok(true);
    }
    let first = std::io::Error::last_os_error();
    // SAFETY: valid C string.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } == 0 {
        tracing::warn!("{} was busy ({first}); detached it", p.display());
        return Ok(true);
    }
    // Not root: let fusermount do it.
    let st = std::process::Command::new("fusermount3")
        .arg("-u")
        .arg("-z")
        .arg(p)
        .status();
    match st {
        Ok(s) if s.success() => Ok(true),
        _ => Err(anyhow!("cannot unmount {}: {first}", p.display())),
    }
}

/// Checks a mount point: a directory (created if missing), empty, not mounted. A dead
/// mount left by a killed process is cleared first.
pub fn prepare_mountpoint(p: &Path) -> Result<PathBuf> {
    if is_mountpoint(p) {
        // A dead FUSE mount fails stat with ENOTCONN; a live one is someone else's.
        match std::fs::metadata(p) {
            Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {
                unmount(p)?;
            }
            _ => bail!(
                "{} is already a mount point (unmount it first)",
                p.display()
            ),
        }
    }
    if p.exists() && !p.is_dir() {
        bail!("mount point {} is not a directory", p.display());
    }
    std::fs::create_dir_all(p)
        .with_context(|| format!("cannot create mount point {}", p.display()))?;
    if std::fs::read_dir(p)?.next().is_some() {
        bail!("mount point {} is not empty", p.display());
    }
    std::fs::canonicalize(p).with_context(|| format!("cannot resolve {}", p.display()))
}

/// Environment variable naming the descriptor a background child reports its failure on.
const STATUS_FD_ENV: &str = "NACRE_STATUS_FD";
/// Most of a failure report the starting command reads (an error with its causes).
const STATUS_MAX: u64 = 64 << 10;

/// The writing end of the status pipe, in a background child.
static STATUS_PIPE: parking_lot::Mutex<Option<std::fs::File>> = parking_lot::Mutex::new(None);

/// Re-runs this command as a detached child, output to `log`, and waits until `ready`
/// says it is up. If the child dies first, the error it reports on a pipe is shown (its
/// log may be on a full disk), or else the end of its log.
pub fn spawn_background(log: &Path, ready: impl Fn(u32) -> bool) -> Result<u32> {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().context("cannot find the nacre executable")?;
    let mut args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--background" && a != "-b")
        .collect();
    args.push(CHILD_FLAG.to_string());
    let out = nacre_osd::private_file()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("cannot open log {}", log.display()))?;
    let err = out.try_clone()?;
    let (mut status_rx, status_tx) = std::io::pipe().context("cannot make a status pipe")?;
    let status_fd = status_tx.as_raw_fd();
    let mut cmd = std::process::Command::new(exe);
    cmd.args(&args)
        .env(STATUS_FD_ENV, status_fd.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err);
    // SAFETY: setsid and fcntl are async-signal-safe. setsid detaches the child from our
    // terminal; the status pipe is made close-on-exec and must stay open across this one.
    unsafe {
        cmd.pre_exec(move || {
            libc::setsid();
            if libc::fcntl(status_fd, libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().context("cannot start the background process")?;
    drop(status_tx);
    let pid = child.id();
    let start = Instant::now();
    loop {
        if ready(pid) {
            return Ok(pid);
        }
        if let Some(status) = child.try_wait()? {
            // The child and its copy of the pipe are gone: this read ends.
            let mut report = String::new();
            let _ = status_rx
                .by_ref()
                .take(STATUS_MAX)
                .read_to_string(&mut report);
            let report = report.trim();
            if !report.is_empty() {
                bail!(
                    "the background process failed: {report}\n(its log: {})",
                    log.display()
                );
            }
            let tail = std::fs::read_to_string(log).unwrap_or_default();
            let tail: Vec<&str> = tail.lines().rev().take(15).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            bail!(
                "the background process exited ({status}) before it was ready:\n{}",
                tail.join("\n")
            );
        }
        if start.elapsed() > READY_TIMEOUT {
            // SAFETY: plain signal to our own child.
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
            bail!(
                "the background process was not ready within {}s; see {}",
                READY_TIMEOUT.as_secs(),
                log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// In a background child: takes the status pipe its parent left it (see
/// [`spawn_background`]), so [`report_failure`] can reach the parent.
pub fn take_status_pipe() {
    use std::os::fd::FromRawFd;
    let Some(fd) = std::env::var(STATUS_FD_ENV)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
    else {
        return;
    };
    // SAFETY: at start-up, before any other thread runs; nothing this process starts
    // should see the variable.
    unsafe { std::env::remove_var(STATUS_FD_ENV) };
    // SAFETY: all zeros is a valid `stat` for fstat to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes only into `st`; a descriptor that is not open just fails.
    let is_pipe =
        unsafe { libc::fstat(fd, &mut st) } == 0 && st.st_mode & libc::S_IFMT == libc::S_IFIFO;
    if !is_pipe {
        return;
    }
    // SAFETY: fcntl on the descriptor just checked. Nothing this process starts inherits
    // it, and a report the pipe has no room for (the parent reads only once the child is
    // gone) is dropped rather than blocking the reporter.
    unsafe {
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK);
    }
    // SAFETY: the parent gave this descriptor to this process alone, and it is taken once.
    let f = unsafe { std::fs::File::from_raw_fd(fd) };
    *STATUS_PIPE.lock() = Some(f);
}

/// Tells the command that started this background child why it failed (nothing if this
/// process is not one, or its parent stopped listening).
pub fn report_failure(msg: &str) {
    use std::io::Write;
    if let Some(f) = STATUS_PIPE.lock().as_mut() {
        let _ = f.write_all(msg.as_bytes());
    }
}

/// Sends SIGTERM and waits for the process to go.
pub fn stop_pid(pid: u32, timeout: Duration) -> bool {
    // SAFETY: plain signal.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let start = Instant::now();
    while start.elapsed() < timeout {
        if !pid_alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Waits for SIGINT, SIGTERM or SIGHUP.
pub async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).ok();
    let mut hup = signal(SignalKind::hangup()).ok();
    let term_f = async {
        match term.as_mut() {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending().await,
        }
    };
    let hup_f = async {
        match hup.as_mut() {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term_f => {}
        _ = hup_f => {}
    }
}
