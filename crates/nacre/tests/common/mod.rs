//! Helpers for tests that run the `nacre` binary and real programs on a real FUSE mount.

#![allow(dead_code)]

pub mod cluster;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn nacre() -> &'static str {
    env!("CARGO_BIN_EXE_nacre")
}

/// Runs `nacre ARGS`, returning its output.
pub fn run(args: &[&str]) -> Output {
    Command::new(nacre())
        .args(args)
        .env("NACRE_RUN_DIR", run_dir())
        .output()
        .expect("run nacre")
}

thread_local! {
    /// The registry of the file system this test thread brought up.
    static RUN_DIR: std::cell::RefCell<Option<PathBuf>> = const { std::cell::RefCell::new(None) };
}

/// The registry directory `nacre` commands of this test use: the test's own file system's
/// (tests run in parallel threads, and `lctl` acts on every process it finds), or one per
/// test process.
pub fn run_dir() -> PathBuf {
    RUN_DIR.with(|r| r.borrow().clone()).unwrap_or_else(|| {
        std::env::temp_dir().join(format!("nacre-test-run-{}", std::process::id()))
    })
}

pub fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert!(
        o.status.success(),
        "nacre {args:?} failed:\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn fail(args: &[&str]) -> String {
    let o = run(args);
    assert!(!o.status.success(), "nacre {args:?} should have failed");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// FUSE must work here: tests that need it fail loudly rather than pass vacuously, unless
/// the environment says to skip them.
pub fn require_fuse() -> bool {
    if std::env::var_os("NACRE_SKIP_FUSE").is_some() {
        eprintln!("NACRE_SKIP_FUSE is set: skipping a FUSE test");
        return false;
    }
    assert!(
        Path::new("/dev/fuse").exists(),
        "/dev/fuse is missing: install fuse3 (or set NACRE_SKIP_FUSE=1)"
    );
    true
}

/// A file system brought up with `nacre up --background`, taken down on drop.
pub struct UpFs {
    pub tmp: tempfile::TempDir,
    pub dir: PathBuf,
    pub mnt: PathBuf,
}

impl UpFs {
    pub fn new(extra: &[&str]) -> UpFs {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path().join("fs");
        let mnt = tmp.path().join("mnt");
        RUN_DIR.with(|r| *r.borrow_mut() = Some(tmp.path().join("run")));
        let port = free_port().to_string();
        let mut args = vec![
            "up",
            dir.to_str().expect("utf8"),
            "--mount",
            mnt.to_str().expect("utf8"),
            "--background",
            "--port",
            &port,
        ];
        args.extend_from_slice(extra);
        ok(&args);
        UpFs { tmp, dir, mnt }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }

    pub fn down(&self) {
        ok(&["down", self.dir.to_str().expect("utf8")]);
    }

    pub fn up_again(&self) {
        ok(&[
            "up",
            self.dir.to_str().expect("utf8"),
            "--mount",
            self.mnt.to_str().expect("utf8"),
            "--background",
        ]);
    }

    /// The pid of the running `up` process.
    pub fn pid(&self) -> u32 {
        let text = std::fs::read_to_string(self.dir.join("run.json")).expect("run.json");
        let v: serde_json::Value = serde_json::from_str(&text).expect("json");
        v["pid"].as_u64().expect("pid") as u32
    }

    pub fn spec(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("nacre.json")).expect("nacre.json");
        let v: serde_json::Value = serde_json::from_str(&text).expect("json");
        format!(
            "127.0.0.1:{}:/{}",
            v["mgs_port"],
            v["fsname"].as_str().expect("fsname")
        )
    }
}

impl Drop for UpFs {
    fn drop(&mut self) {
        let _ = run(&["down", "--force", self.dir.to_str().unwrap_or_default()]);
    }
}

/// The value of a parameter (`lctl get_param -n NAME`), trimmed.
pub fn param(name: &str) -> String {
    ok(&["lctl", "get_param", "-n", name]).trim().to_string()
}

/// `nacre lfs ARGS`, which must succeed; its output.
pub fn lfs(args: &[&str]) -> String {
    let mut v = vec!["lfs"];
    v.extend_from_slice(args);
    ok(&v)
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

pub fn sh(cmd: &str, cwd: &Path) -> String {
    let o = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(cwd)
        .output()
        .expect("sh");
    assert!(
        o.status.success(),
        "`{cmd}` failed in {}:\n{}\n{}",
        cwd.display(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn md5(p: &Path) -> String {
    let o = Command::new("md5sum").arg(p).output().expect("md5sum");
    assert!(o.status.success(), "md5sum {}: {o:?}", p.display());
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}
