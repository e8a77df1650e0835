//! Helpers for tests that run the `nacre` binary and real programs on a real FUSE mount.

#![allow(dead_code)]

pub mod cluster;
pub mod faults;
pub mod integrity;
pub mod lfsck;
pub mod netns;
pub mod power_cut;
pub mod procs;

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

/// Makes `dir` the registry the `nacre` commands of this test thread use.
pub fn use_run_dir(dir: PathBuf) {
    RUN_DIR.with(|r| *r.borrow_mut() = Some(dir));
}

/// Sends the warnings of the servers and clients this test process runs to the test's
/// captured output, so a failing test shows what they said (a passing one shows nothing).
/// `NACRE_TEST_LOG` sets another filter (`lfsck=debug`, say).
pub fn log_to_test_output() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let filter = std::env::var("NACRE_TEST_LOG").unwrap_or_else(|_| "warn".into());
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    });
}

/// One op's count in a Lustre-style stats file (`lctl get_param -n PARAM`); 0 when the
/// op has not been seen.
#[allow(dead_code)]
pub fn stat_count(param: &str, op: &str) -> u64 {
    let v = ok(&["lctl", "get_param", "-n", param]);
    v.lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some(op)).then(|| w.next().and_then(|n| n.parse().ok()))
        })
        .flatten()
        .unwrap_or(0)
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
        UpFs::start(tmp, dir, extra)
    }

    /// A file system kept in `dir` (on a disk of the test's making); the mount point and
    /// registry are elsewhere.
    pub fn with_dir(dir: PathBuf, extra: &[&str]) -> UpFs {
        UpFs::start(tempfile::tempdir().expect("tmp"), dir, extra)
    }

    fn start(tmp: tempfile::TempDir, dir: PathBuf, extra: &[&str]) -> UpFs {
        let mnt = tmp.path().join("mnt");
        use_run_dir(tmp.path().join("run"));
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

/// A second client of an [`UpFs`] (a `nacre mount` process, over TCP), unmounted on drop.
pub struct Second(pub PathBuf);

impl Second {
    pub fn mount(fs: &UpFs) -> Second {
        let mnt = fs.tmp.path().join("m2");
        ok(&[
            "mount",
            fs.dir.to_str().expect("utf8"),
            mnt.to_str().expect("utf8"),
            "--background",
        ]);
        Second(mnt)
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }
}

impl Drop for Second {
    fn drop(&mut self) {
        let _ = run(&["umount", self.0.to_str().unwrap_or_default()]);
    }
}

/// Tests that mount tmpfs or run commands as another user need root: they fail loudly
/// rather than pass vacuously, unless the environment says to skip them.
pub fn require_root() -> bool {
    if std::env::var_os("NACRE_SKIP_ROOT").is_some() {
        eprintln!("NACRE_SKIP_ROOT is set: skipping a test that needs root");
        return false;
    }
    // SAFETY: geteuid never fails.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root (or set NACRE_SKIP_ROOT=1)"
    );
    true
}

/// A small tmpfs, to fill up; unmounted on drop.
pub struct Tmpfs {
    tmp: tempfile::TempDir,
}

impl Tmpfs {
    pub fn mount(size: &str) -> Tmpfs {
        let tmp = tempfile::tempdir().expect("tmp");
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(tmp.path())
            .status()
            .expect("mount");
        assert!(
            st.success(),
            "cannot mount a tmpfs on {}",
            tmp.path().display()
        );
        Tmpfs { tmp }
    }

    pub fn path(&self) -> &Path {
        self.tmp.path()
    }

    /// Fills the disk: a filler file to the last block, then what slack the last block of
    /// each of `also` had (a file appended to on a full disk fails as soon as its own last
    /// block is full too).
    pub fn fill(&self, also: &[&Path]) {
        use std::io::Write;
        let mut f = std::fs::File::create(self.path().join("filler")).expect("filler");
        let zeros = vec![0u8; 1 << 20];
        let err = loop {
            if let Err(e) = f.write_all(&zeros) {
                break e;
            }
        };
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
        for p in also {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(p)
                .expect("open");
            let err = f.write_all(&[b'\n'; 1 << 16]).expect_err("a full disk");
            assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
        }
    }

    /// Gives the filler's space back.
    pub fn empty(&self) {
        std::fs::remove_file(self.path().join("filler")).expect("rm filler");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.tmp.path())
            .status();
    }
}

/// Whether `p` is a mount point of this process's namespace.
pub fn is_mounted(p: &Path) -> bool {
    let mi = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let want = p.to_string_lossy().replace(' ', "\\040");
    mi.lines()
        .any(|l| l.split(' ').nth(4) == Some(want.as_str()))
}

/// Runs `argv` as the unprivileged user `nobody`.
pub fn as_nobody(argv: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut c = Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(argv)
        .env_remove("NACRE_RUN_DIR")
        .env_remove("XDG_RUNTIME_DIR");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("setpriv")
}

/// Sets the permission bits of `p`.
pub fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
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

/// The value of `key` in `lctl get_param -n` output.
pub fn counter(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}: ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} in\n{text}"))
}

/// Runs `lctl lfsck_start ARGS` and waits for the run's end; the record of `kind`.
pub fn lfsck_run(args: &[&str], kind: &str) -> String {
    let mut a = vec!["lctl", "lfsck_start"];
    a.extend_from_slice(args);
    ok(&a);
    ok(&["lctl", "lfsck_query", "-w"]);
    let text = ok(&["lctl", "get_param", "-n", &format!("mdd.*.lfsck_{kind}")]);
    assert!(text.contains("status: completed\n"), "{text}");
    text
}

/// `nacre inject CLASS DIR -n N`, again while the files' sizes are not yet known to the
/// MDT (a moment after their close), at most `settle`; its output.
pub fn inject_cli(class: &str, dir: &str, n: usize, settle: std::time::Duration) -> String {
    let started = std::time::Instant::now();
    let n = n.to_string();
    loop {
        let o = run(&["inject", class, dir, "-n", &n, "--seed", "7"]);
        if o.status.success() {
            return String::from_utf8_lossy(&o.stdout).into_owned();
        }
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(
            err.contains(" fit ") && started.elapsed() < settle,
            "nacre inject {class}: {err}"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// One LFSCK class end to end through the commands: `nacre inject CLASS DIR -n N` names N
/// files, a dry run (`lfsck_start ARGS -n -t KIND`) counts N as `dry_key`, a repair (with
/// `fix_args`) fixes N as `fix_key`, and a second run finds 0. The files it broke.
pub struct ClassCase<'a> {
    pub class: &'a str,
    pub kind: &'a str,
    pub dry_key: &'a str,
    pub fix_key: &'a str,
    pub fix_args: &'a [&'a str],
}

pub fn inject_and_repair(
    c: &ClassCase<'_>,
    dir: &str,
    n: usize,
    lfsck_args: &[&str],
    settle: std::time::Duration,
) -> Vec<PathBuf> {
    let class = c.class;
    let out = inject_cli(class, dir, n, settle);
    let items: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with(&format!("{class}: {dir}/f")))
        .collect();
    assert_eq!(items.len(), n, "{out}");
    assert!(items.iter().all(|l| l.contains(" [0x")), "{out}");
    assert!(
        out.ends_with(&format!("injected {n} {class} under {dir}\n")),
        "{out}"
    );
    let run_with = |extra: &[&str]| {
        let mut a = lfsck_args.to_vec();
        a.extend_from_slice(extra);
        a.extend_from_slice(&["-t", c.kind]);
        lfsck_run(&a, c.kind)
    };
    let t = run_with(&["-n"]);
    assert_eq!(counter(&t, c.dry_key), n as u64, "{class} dry run:\n{t}");
    let t = run_with(c.fix_args);
    assert_eq!(counter(&t, c.fix_key), n as u64, "{class} repair:\n{t}");
    let t = run_with(&[]);
    assert_eq!(counter(&t, c.fix_key), 0, "{class} second run:\n{t}");
    items
        .iter()
        .filter_map(|l| l.split_whitespace().nth(1).map(PathBuf::from))
        .collect()
}

/// `rm -rf` of a directory a live target may be adding files to meanwhile (OSTs make
/// object files in the background when they precreate): retried while a directory it
/// emptied gained an entry before its removal.
pub fn rm_rf_live(p: &Path) {
    for _ in 0..100 {
        match std::fs::remove_dir_all(p) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            Err(e) => panic!("rm -rf {}: {e}", p.display()),
        }
    }
    panic!("rm -rf {}: it keeps gaining entries", p.display());
}
