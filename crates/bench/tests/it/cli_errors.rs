//! The command edges: pointed spec errors, missing directories, the native hook.

use std::io;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use clap::Parser;
use nacre_bench::backend::{
    DirEntry, FileHandle, FileStat, FileSystem, FsStat, NativeConnector, OpenOptions, PosixFs,
};
use nacre_bench::cli::{self, BenchCommand, FragArgs, PafArgs};

#[derive(Parser)]
enum Nacre {
    #[command(subcommand)]
    Bench(BenchCommand),
    Paf(PafArgs),
    Frag(FragArgs),
}

fn err_of(args: &[&str], native: Option<&dyn NativeConnector>) -> String {
    let r = match Nacre::try_parse_from(args).expect("parse") {
        Nacre::Bench(b) => cli::run_bench(b, native),
        Nacre::Paf(p) => cli::run_paf(p, native),
        Nacre::Frag(f) => cli::run_frag(f, native),
    };
    format!("{:#}", r.expect_err("should fail"))
}

fn ok_of(args: &[&str], native: Option<&dyn NativeConnector>) {
    let r = match Nacre::try_parse_from(args).expect("parse") {
        Nacre::Bench(b) => cli::run_bench(b, native),
        Nacre::Paf(p) => cli::run_paf(p, native),
        Nacre::Frag(f) => cli::run_frag(f, native),
    };
    if let Err(e) = r {
        panic!("{args:?}: {e:#}");
    }
}

#[test]
fn bad_spec_points_at_the_character() {
    let tmp = tempfile::tempdir().expect("tmp");
    let d = tmp.path().to_str().expect("utf8");
    let e = err_of(&["nacre", "paf", "PAF:70.3x@264M", d], None);
    assert!(e.contains("column 9"), "{e}");
    assert!(e.contains("  PAF:70.3x@264M\n          ^"), "{e}");
    assert!(
        std::fs::read_dir(tmp.path()).expect("ls").next().is_none(),
        "nothing written"
    );
}

#[test]
fn missing_directories() {
    let tmp = tempfile::tempdir().expect("tmp");
    let missing = tmp.path().join("nope");
    let m = missing.to_str().expect("utf8");
    let want = format!("directory {m} does not exist");
    let e = err_of(&["nacre", "paf", "PAF:10.10@1M", m], None);
    assert!(e.contains(&want), "{e}");
    let f = format!("{m}/ior");
    let e = err_of(&["nacre", "bench", "ior", "-o", &f, "--quiet"], None);
    assert!(e.contains(&want), "{e}");
    let e = err_of(&["nacre", "bench", "mdtest", "-n", "5", "-d", m], None);
    assert!(e.contains(&want), "{e}");
    let e = err_of(&["nacre", "bench", "mix", m], None);
    assert!(e.contains(&want), "{e}");
    let e = err_of(&["nacre", "bench", "io500", m], None);
    assert!(e.contains(&want), "{e}");
    let e = err_of(&["nacre", "bench", "compare", m], None);
    assert!(e.contains(&want), "{e}");
    let e = err_of(&["nacre", "frag", m], None);
    assert!(e.contains(&want), "{e}");
    let dump = format!("{m}/dump.txt");
    let e = err_of(&["nacre", "frag", "dumpe2fs", &dump], None);
    assert!(
        e.contains("opening dumpe2fs output") && e.contains("No such file"),
        "{e}"
    );
    assert!(!missing.exists(), "nothing created");
}

#[test]
fn native_without_a_client_is_refused() {
    let tmp = tempfile::tempdir().expect("tmp");
    let d = tmp.path().to_str().expect("utf8");
    let e = err_of(
        &[
            "nacre",
            "bench",
            "mdtest",
            "-n",
            "5",
            "-d",
            d,
            "--native",
            "mgs:/lustre",
        ],
        None,
    );
    assert!(e.contains("this build has no native client"), "{e}");
}

/// A stand-in native client: POSIX underneath, counting the calls that reach it.
struct Counting {
    inner: PosixFs,
    calls: Arc<AtomicU64>,
}

impl Counting {
    fn tick(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }
}

impl FileSystem for Counting {
    fn describe(&self) -> String {
        "counting".into()
    }
    fn create(&self, p: &Path, o: OpenOptions) -> io::Result<FileHandle> {
        self.tick();
        self.inner.create(p, o)
    }
    fn open(&self, p: &Path, o: OpenOptions) -> io::Result<FileHandle> {
        self.tick();
        self.inner.open(p, o)
    }
    fn pwrite(&self, fh: FileHandle, b: &[u8], off: u64) -> io::Result<usize> {
        self.inner.pwrite(fh, b, off)
    }
    fn pread(&self, fh: FileHandle, b: &mut [u8], off: u64) -> io::Result<usize> {
        self.inner.pread(fh, b, off)
    }
    fn fsync(&self, fh: FileHandle) -> io::Result<()> {
        self.inner.fsync(fh)
    }
    fn close(&self, fh: FileHandle) -> io::Result<()> {
        self.inner.close(fh)
    }
    fn fstat(&self, fh: FileHandle) -> io::Result<FileStat> {
        self.inner.fstat(fh)
    }
    fn stat(&self, p: &Path) -> io::Result<FileStat> {
        self.tick();
        self.inner.stat(p)
    }
    fn unlink(&self, p: &Path) -> io::Result<()> {
        self.tick();
        self.inner.unlink(p)
    }
    fn mkdir(&self, p: &Path, m: u32) -> io::Result<()> {
        self.tick();
        self.inner.mkdir(p, m)
    }
    fn rmdir(&self, p: &Path) -> io::Result<()> {
        self.tick();
        self.inner.rmdir(p)
    }
    fn readdir(&self, p: &Path, v: &mut dyn FnMut(DirEntry) -> ControlFlow<()>) -> io::Result<()> {
        self.inner.readdir(p, v)
    }
    fn statfs(&self, p: &Path) -> io::Result<FsStat> {
        self.inner.statfs(p)
    }
    fn rename(&self, a: &Path, b: &Path) -> io::Result<()> {
        self.tick();
        self.inner.rename(a, b)
    }
}

struct Connector {
    calls: Arc<AtomicU64>,
    specs: std::sync::Mutex<Vec<String>>,
}

impl NativeConnector for Connector {
    fn connect(&self, spec: &str) -> anyhow::Result<Arc<dyn FileSystem>> {
        if let Ok(mut s) = self.specs.lock() {
            s.push(spec.to_string());
        }
        Ok(Arc::new(Counting {
            inner: PosixFs::new(),
            calls: self.calls.clone(),
        }))
    }
}

#[test]
fn native_client_carries_the_io() {
    let tmp = tempfile::tempdir().expect("tmp");
    let d = tmp.path().to_str().expect("utf8");
    let conn = Connector {
        calls: Arc::new(AtomicU64::new(0)),
        specs: std::sync::Mutex::new(Vec::new()),
    };
    ok_of(
        &[
            "nacre",
            "bench",
            "mdtest",
            "-n",
            "20",
            "-F",
            "-d",
            d,
            "--native",
            "mgs@tcp:/nacre",
            "--json",
        ],
        Some(&conn),
    );
    // 20 creates + 20 stats + 20 opens + 20 unlinks, plus the tree.
    assert!(conn.calls.load(Ordering::Relaxed) >= 80);
    assert_eq!(
        conn.specs.lock().map(|s| s.clone()).unwrap_or_default(),
        vec!["mgs@tcp:/nacre"]
    );
    let before = conn.calls.load(Ordering::Relaxed);
    let f = PathBuf::from(d).join("x").display().to_string();
    ok_of(
        &[
            "nacre", "bench", "ior", "-w", "-r", "-t", "4k", "-b", "16k", "-o", &f, "--native",
            "s", "--quiet",
        ],
        Some(&conn),
    );
    assert!(conn.calls.load(Ordering::Relaxed) > before);
}
