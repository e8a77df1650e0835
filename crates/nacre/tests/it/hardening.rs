//! What other local users, a full disk, a killed client and a closed pipe can do to nacre on
//! one machine: its storage stays its owner's, a restart says why it fails, the checker
//! reads without writing, `umount` does not leave a dead mount behind, the registry cannot
//! be planted, and output into a closed pipe ends quietly.

use crate::common;

use common::*;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Every file and directory under `dir` (and `dir` itself) that others may read or search.
fn not_private(dir: &Path) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let mut bad = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(p) = todo.pop() {
        let m = std::fs::symlink_metadata(&p).expect("stat");
        let mode = m.permissions().mode() & 0o777;
        let want = if m.is_dir() { 0o700 } else { 0o600 };
        if mode != want {
            bad.push(format!("{} {mode:o}", p.display()));
        }
        if m.is_dir() {
            for e in std::fs::read_dir(&p).expect("readdir") {
                todo.push(e.expect("entry").path());
            }
        }
    }
    bad
}

/// An OST object file that holds data.
fn object_file(dir: &Path) -> PathBuf {
    let mut todo = vec![dir.to_path_buf()];
    while let Some(p) = todo.pop() {
        let m = std::fs::symlink_metadata(&p).expect("stat");
        if m.is_dir() {
            for e in std::fs::read_dir(&p).expect("readdir") {
                todo.push(e.expect("entry").path());
            }
        } else if m.len() > 0
            && p.components().any(|c| c.as_os_str() == "O")
            && p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        {
            return p;
        }
    }
    panic!("no OST object with data under {}", dir.display());
}

fn mode_of(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).expect("stat").permissions().mode() & 0o777
}

#[test]
fn storage_is_readable_by_its_owner_only() {
    if !require_fuse() || !require_root() {
        return;
    }
    let fs = UpFs::new(&["--osts", "2"]);
    // The data directory sits where anyone may look (as under /srv): only nacre's own
    // modes keep other users out.
    chmod(fs.tmp.path(), 0o755);
    sh(
        "dd if=/dev/urandom of=big bs=1M count=3 status=none && mkdir -p d/e && \
        echo secret > d/e/f && chmod 600 d/e/f",
        &fs.mnt,
    );
    lfs(&[
        "setstripe",
        "-c",
        "2",
        fs.path("striped").to_str().expect("utf8"),
    ]);
    std::fs::write(fs.path("striped"), vec![7u8; 3 << 20]).expect("write");
    // What format made, and what the servers made since: object files and their
    // directories, the MDT's store and journal, the MGS's configuration, logs, run.json.
    let bad = not_private(&fs.dir);
    assert!(bad.is_empty(), "readable by others: {bad:#?}");
    let obj = object_file(&fs.dir);
    let o = as_nobody(&["cat", obj.to_str().expect("utf8")], &[]);
    assert!(
        !o.status.success(),
        "nobody read {}: {}",
        obj.display(),
        String::from_utf8_lossy(&o.stdout)
    );
    let o = as_nobody(&["ls", fs.dir.to_str().expect("utf8")], &[]);
    assert!(!o.status.success(), "nobody listed {}", fs.dir.display());

    // Directories an older nacre left open are closed at the next start.
    fs.down();
    let dirs = ["", "mgs", "mdt0", "ost0", "ost1"].map(|d| fs.dir.join(d));
    for d in &dirs {
        chmod(d, 0o755);
    }
    fs.up_again();
    for d in &dirs {
        assert_eq!(mode_of(d), 0o700, "{} still open to others", d.display());
    }
    fs.down();
}

/// The identity of a file's current version: inode (files are replaced by rename),
/// modification time and content.
fn version(p: &Path) -> (u64, i64, i64, Vec<u8>) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).expect("stat");
    (
        m.ino(),
        m.mtime(),
        m.mtime_nsec(),
        std::fs::read(p).expect("read"),
    )
}

fn kill_9(pid: u32) {
    // SAFETY: killing a process this test started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let start = Instant::now();
    // Gone, or a zombie nobody reaps.
    while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
    }) {
        assert!(start.elapsed() < Duration::from_secs(10), "pid {pid} lives");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_full_disk_neither_hides_why_a_restart_fails_nor_stops_the_checker() {
    if !require_fuse() || !require_root() {
        return;
    }
    let disk = Tmpfs::mount("64m");
    let fs = UpFs::with_dir(disk.path().join("fs"), &["--osts", "2"]);
    let dir = fs.dir.to_str().expect("utf8");
    sh(
        "dd if=/dev/urandom of=data bs=1M count=4 status=none && mkdir d && touch d/a d/b",
        &fs.mnt,
    );
    let sum = md5(&fs.path("data"));
    fs.down();
    // A restart that brings nothing new writes no configuration.
    let config = fs.dir.join("mgs").join("config.json");
    let before = version(&config);
    fs.up_again();
    fs.down();
    assert!(
        version(&config) == before,
        "the MGS rewrote config.json at a restart"
    );

    let log = fs.dir.join("nacre.log");
    disk.fill(&[&log]);
    let o = run(&[
        "up",
        dir,
        "--mount",
        fs.mnt.to_str().expect("utf8"),
        "--background",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    if o.status.success() {
        assert_eq!(md5(&fs.path("data")), sum);
        fs.down();
    } else {
        assert!(
            err.contains("No space left on device"),
            "a restart on a full disk failed without saying why:\n{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    // The checker reads a stopped file system as it is.
    let out = ok(&["check", dir]);
    assert!(
        out.contains(" 3 files") && out.contains("0 dangling names"),
        "{out}"
    );

    // Also one whose server was killed: its journal is replayed in memory.
    disk.empty();
    fs.up_again();
    sh("mkdir late && touch late/x late/y", &fs.mnt);
    kill_9(fs.pid());
    disk.fill(&[]);
    let out = ok(&["check", dir]);
    assert!(
        out.contains(" 5 files") && out.contains("0 dangling names"),
        "{out}"
    );
}

/// The pid serving the client mount at `mnt`, from the registry.
fn client_pid(mnt: &Path) -> u32 {
    let mnt = std::fs::canonicalize(mnt).expect("canonicalize");
    for e in std::fs::read_dir(run_dir().join("mounts")).expect("registry") {
        let text = std::fs::read_to_string(e.expect("entry").path()).expect("read");
        let v: serde_json::Value = serde_json::from_str(&text).expect("json");
        if v["mountpoint"].as_str() == mnt.to_str() {
            return v["pid"].as_u64().expect("pid") as u32;
        }
    }
    panic!("{} is not in the registry", mnt.display());
}

/// Detaches a mount the test made, whatever happened to it.
struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        if is_mounted(&self.0) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

#[test]
fn umount_clears_the_mount_of_a_killed_client() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&["--osts", "1"]);
    let mnt2 = fs.tmp.path().join("mnt2");
    let m2 = mnt2.to_str().expect("utf8");
    ok(&["mount", fs.dir.to_str().expect("utf8"), m2, "--background"]);
    let mnt2 = std::fs::canonicalize(&mnt2).expect("canonicalize");
    let _guard = Unmount(mnt2.clone());
    assert!(is_mounted(&mnt2));
    kill_9(client_pid(&mnt2));
    let o = run(&["umount", m2]);
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !is_mounted(&mnt2),
        "the dead mount stays after `nacre umount` (status {}, stdout {out:?}, stderr {err:?})",
        o.status
    );
    assert!(o.status.success(), "{err}");
    // The mount point is usable again.
    ok(&["mount", fs.dir.to_str().expect("utf8"), m2, "--background"]);
    ok(&["umount", m2]);
    assert!(!is_mounted(&mnt2));
    fs.down();
}

#[test]
fn the_registry_is_a_directory_only_its_user_can_have_made() {
    if !require_root() {
        return;
    }
    let nacre = nacre();
    let tmp = tempfile::tempdir().expect("tmp");
    // `nobody` may pass through, as through /tmp.
    chmod(tmp.path(), 0o711);
    let lctl = [nacre, "lctl", "list_param", "llite.*"];

    // Another user made /tmp/nacre-65534 first.
    let planted = tmp.path().join("planted");
    std::fs::create_dir_all(planted.join("nacre-65534")).expect("mkdir");
    chmod(&planted, 0o755);
    chmod(&planted.join("nacre-65534"), 0o777);
    let o = as_nobody(&lctl, &[("TMPDIR", &planted)]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("nacre-65534") && err.contains("owned by uid 0"),
        "a registry another user made was used: {err}"
    );

    // A new one is made private to its user.
    let fresh = tmp.path().join("fresh");
    std::fs::create_dir(&fresh).expect("mkdir");
    chmod(&fresh, 0o777);
    let _ = as_nobody(&lctl, &[("TMPDIR", &fresh)]);
    let made = fresh.join("nacre-65534");
    let m = std::fs::metadata(&made).expect("no registry made");
    use std::os::unix::fs::MetadataExt;
    assert_eq!((m.uid(), m.mode() & 0o777), (65534, 0o700));

    // Under $XDG_RUNTIME_DIR when there is one.
    let xdg = tmp.path().join("xdg");
    std::fs::create_dir(&xdg).expect("mkdir");
    std::os::unix::fs::chown(&xdg, Some(65534), Some(65534)).expect("chown");
    chmod(&xdg, 0o700);
    let _ = as_nobody(&lctl, &[("XDG_RUNTIME_DIR", &xdg), ("TMPDIR", &planted)]);
    let m = std::fs::metadata(xdg.join("nacre")).expect("no registry made under XDG");
    assert_eq!((m.uid(), m.mode() & 0o777), (65534, 0o700));

    // NACRE_RUN_DIR is checked the same way.
    let shared = tmp.path().join("shared");
    std::fs::create_dir(&shared).expect("mkdir");
    chmod(&shared, 0o777);
    let o = Command::new(nacre)
        .args(&lctl[1..])
        .env("NACRE_RUN_DIR", &shared)
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("writable by others"),
        "{err}"
    );
}

/// Runs `nacre ARGS` with its output going into a pipe nobody reads any more.
fn run_into_closed_pipe(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    Command::new(nacre())
        .args(args)
        .env("NACRE_RUN_DIR", run_dir())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run nacre")
}

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&["--osts", "1"]);
    std::fs::write(fs.path("f"), b"x").expect("write");
    let f = fs.path("f");
    let f = f.to_str().expect("utf8");
    let m = fs.mnt.to_str().expect("utf8");
    let dir = fs.dir.to_str().expect("utf8");
    for args in [
        vec!["status", dir],
        vec!["lfs", "getstripe", f],
        vec!["lfs", "df", m],
        vec!["lctl", "list_param", "llite.*"],
        vec!["lctl", "get_param", "llite.*.stats"],
    ] {
        let o = run_into_closed_pipe(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe"),
            "nacre {args:?}: {err}"
        );
        assert!(
            o.status.success() || o.status.signal() == Some(libc::SIGPIPE),
            "nacre {args:?} ended with {}: {err}",
            o.status
        );
    }
    fs.down();
}
