//! Side-by-side comparison of directories in one run: streaming write and cold read (a file
//! per task, fsync'd, then the page cache dropped), and file create / stat / remove rates, with
//! each figure's ratio to the first directory (normally the local disk). Optionally samples a
//! process's memory (VmRSS / VmHWM from /proc/PID/status) during the run, e.g. the FUSE
//! daemon serving the other directory.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::backend::{self, AlignedBuf, FileSystem, OpenOptions};
use crate::env::RunEnv;
use crate::error::{BenchError, IoContext, Result};
use crate::units::{self, MIB};

/// How often the memory sampler reads /proc/PID/status.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// What to run on each directory.
#[derive(Debug, Clone, Serialize)]
pub struct CompareOptions {
    /// Bytes each task writes and reads.
    pub size: u64,
    /// Tasks per rank.
    pub tasks: usize,
    /// Files each task creates, stats and removes.
    pub files: u64,
    /// Transfer size.
    pub xfer: u64,
    /// Try to drop the page cache before reading.
    pub drop_caches: bool,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            size: 256 * MIB,
            tasks: 2,
            files: 1000,
            xfer: MIB,
            drop_caches: true,
        }
    }
}

/// One directory to compare and the backend it is reached through.
pub struct Target {
    pub dir: PathBuf,
    pub fs: Arc<dyn FileSystem>,
}

/// Figures for one directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DirResult {
    pub dir: PathBuf,
    pub backend: String,
    pub write_mib_per_sec: f64,
    pub read_mib_per_sec: f64,
    /// False when the page cache could not be dropped before reading.
    pub read_cold: bool,
    pub note: Option<String>,
    pub create_per_sec: f64,
    pub stat_per_sec: f64,
    pub remove_per_sec: f64,
}

/// Memory of the watched process.
#[derive(Debug, Clone, Serialize)]
pub struct RssReport {
    pub pid: u32,
    pub peak_rss_kib: u64,
    /// The kernel's own high-water mark at the last sample.
    pub hwm_kib: u64,
    pub samples: u64,
    pub exited: bool,
}

/// The comparison.
#[derive(Debug, Clone, Serialize)]
pub struct CompareReport {
    pub options: CompareOptions,
    pub ranks: usize,
    pub dirs: Vec<DirResult>,
    pub rss: Option<RssReport>,
}

/// Reads VmRSS and VmHWM (KiB) of `pid`; `None` when the process is gone.
pub fn read_vm(pid: u32) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l[name.len()..].split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some((field("VmRSS:").unwrap_or(0), field("VmHWM:").unwrap_or(0)))
}

/// Samples a process's memory on a thread until stopped.
pub struct RssSampler {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<RssReport>>,
}

impl RssSampler {
    pub fn start(pid: u32) -> Result<RssSampler> {
        if read_vm(pid).is_none() {
            return Err(BenchError::Usage(format!(
                "--watch-pid {pid}: no such process (or /proc/{pid}/status is unreadable)"
            )));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut r = RssReport {
                pid,
                peak_rss_kib: 0,
                hwm_kib: 0,
                samples: 0,
                exited: false,
            };
            loop {
                match read_vm(pid) {
                    Some((rss, hwm)) => {
                        r.peak_rss_kib = r.peak_rss_kib.max(rss);
                        r.hwm_kib = r.hwm_kib.max(hwm);
                        r.samples += 1;
                    }
                    None => {
                        r.exited = true;
                        break;
                    }
                }
                if s.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(SAMPLE_EVERY);
            }
            r
        });
        Ok(RssSampler {
            stop,
            handle: Some(handle),
        })
    }

    pub fn finish(mut self) -> Option<RssReport> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().and_then(|h| h.join().ok())
    }
}

/// Flushes dirty data and asks the kernel to drop clean caches. Returns why it could not.
pub fn drop_caches() -> std::result::Result<(), String> {
    // SAFETY: sync has no arguments and cannot fail.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", b"3\n").map_err(|e| e.to_string())
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
struct Span {
    start: f64,
    end: f64,
    count: u64,
}

/// Runs `work(task)` on this rank's tasks after a barrier and returns the aggregate rate
/// (count over first start to last end, all ranks) on rank 0.
fn timed(
    env: &RunEnv<'_>,
    label: &str,
    tasks: usize,
    work: &(dyn Fn(usize) -> Result<u64> + Sync),
) -> Result<Option<f64>> {
    let world = env.world;
    world.barrier(label)?;
    let t0 = Instant::now();
    let res: Vec<Result<Span>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..tasks)
            .map(|i| {
                let task = world.rank() * tasks + i;
                s.spawn(move || -> Result<Span> {
                    let start = t0.elapsed().as_secs_f64();
                    let count = work(task)?;
                    Ok(Span {
                        start,
                        end: t0.elapsed().as_secs_f64(),
                        count,
                    })
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(BenchError::Usage("a task panicked".into())))
            })
            .collect()
    });
    let local: Result<Vec<Span>> = res.into_iter().collect();
    let local = world.agree(&format!("{label}-done"), local)?;
    Ok(world.gather(&format!("{label}-spans"), &local)?.map(|all| {
        let spans: Vec<Span> = all.into_iter().flatten().collect();
        let count: u64 = spans.iter().map(|s| s.count).sum();
        let start = spans.iter().map(|s| s.start).fold(f64::MAX, f64::min);
        let end = spans.iter().map(|s| s.end).fold(0.0f64, f64::max);
        if end > start {
            count as f64 / (end - start)
        } else {
            0.0
        }
    }))
}

fn one_dir(env: &RunEnv<'_>, dir: &Path, opts: &CompareOptions) -> Result<Option<DirResult>> {
    let fs = env.fs.as_ref();
    let world = env.world;
    // Every rank checks; a rank that cannot see DIR stops them all.
    world.agree("compare-check", backend::check_dir(fs, dir))?;
    let work = dir.join(format!(".nacre-compare.{}", std::process::id()));
    let mk = if world.is_root() {
        backend::mkdir_all(fs, &work).ctx("creating", &work)
    } else {
        Ok(())
    };
    world.agree("compare-setup", mk)?;
    let hint = format!("remove {} to free the space", work.display());
    let fpath = |task: usize| work.join(format!("stream.{task}"));
    let mdir = |task: usize| work.join(format!("md.{task}"));

    let write = timed(env, "compare-write", opts.tasks, &|task| {
        let p = fpath(task);
        let mut buf =
            AlignedBuf::new(opts.xfer as usize, fs.io_alignment()).ctx("allocating", &p)?;
        ChaCha8Rng::seed_from_u64(task as u64).fill_bytes(&mut buf);
        let fh = fs
            .create(&p, OpenOptions::write().truncate(true))
            .ctx("creating", &p)?;
        let mut off = 0;
        let mut res = Ok(());
        while off < opts.size && res.is_ok() {
            if env.cancel.is_cancelled() {
                res = Err(io::Error::new(io::ErrorKind::Interrupted, "interrupted"));
                break;
            }
            let n = (opts.size - off).min(opts.xfer) as usize;
            res = backend::write_all_at(fs, fh, &buf[..n], off);
            off += n as u64;
        }
        if res.is_ok() {
            res = fs.fsync(fh);
        }
        let c = fs.close(fh);
        res.and(c).ctx("writing", &p)?;
        Ok(opts.size)
    })
    .map_err(|e| e.with_space_hint(&hint))?;

    let (cold, note) = if !opts.drop_caches {
        (
            false,
            Some("page cache not dropped (--no-drop-caches): the read may be warm".to_string()),
        )
    } else {
        let r = if world.is_root() {
            drop_caches()
        } else {
            Ok(())
        };
        match r {
            Ok(()) if fs.local_path(dir).is_some() => (true, None),
            Ok(()) => (
                false,
                Some(format!(
                    "{} caches data in user space; the read may be warm",
                    fs.describe()
                )),
            ),
            Err(e) => (
                false,
                Some(format!(
                    "could not drop the page cache ({e}): the read may be warm"
                )),
            ),
        }
    };
    let read = timed(env, "compare-read", opts.tasks, &|task| {
        let p = fpath(task);
        let mut buf =
            AlignedBuf::new(opts.xfer as usize, fs.io_alignment()).ctx("allocating", &p)?;
        let fh = fs.open(&p, OpenOptions::read()).ctx("opening", &p)?;
        let mut off = 0;
        let mut res = Ok(());
        while off < opts.size {
            let n = (opts.size - off).min(opts.xfer) as usize;
            match backend::read_full_at(fs, fh, &mut buf[..n], off) {
                Ok(got) if got == n => off += n as u64,
                Ok(got) => {
                    res = Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("short read: {got} of {n} bytes at {off}"),
                    ));
                    break;
                }
                Err(e) => {
                    res = Err(e);
                    break;
                }
            }
        }
        let c = fs.close(fh);
        res.and(c).ctx("reading", &p)?;
        Ok(opts.size)
    })?;

    let files = opts.files;
    let name = |task: usize, i: u64| mdir(task).join(format!("f.{i}"));
    let create = timed(env, "compare-create", opts.tasks, &|task| {
        let d = mdir(task);
        fs.mkdir(&d, 0o755).ctx("creating", &d)?;
        for i in 0..files {
            let p = name(task, i);
            let fh = fs.create(&p, OpenOptions::write()).ctx("creating", &p)?;
            fs.close(fh).ctx("closing", &p)?;
        }
        Ok(files)
    })
    .map_err(|e| e.with_space_hint(&hint))?;
    let stat = timed(env, "compare-stat", opts.tasks, &|task| {
        for i in 0..files {
            let p = name(task, i);
            fs.stat(&p).ctx("stat", &p)?;
        }
        Ok(files)
    })?;
    let remove = timed(env, "compare-remove", opts.tasks, &|task| {
        for i in 0..files {
            let p = name(task, i);
            fs.unlink(&p).ctx("removing", &p)?;
        }
        let d = mdir(task);
        fs.rmdir(&d).ctx("removing", &d)?;
        Ok(files)
    })?;
    let rm = (0..opts.tasks)
        .map(|i| fpath(world.rank() * opts.tasks + i))
        .try_for_each(|p| fs.unlink(&p).ctx("removing", &p));
    world.agree("compare-clean", rm)?;
    if world.is_root() {
        backend::remove_tree(fs, &work, &|_, _| false).ctx("removing", &work)?;
    }
    let mib = |v: Option<f64>| v.unwrap_or(0.0) / MIB as f64;
    Ok(world.is_root().then(|| DirResult {
        dir: dir.to_path_buf(),
        backend: fs.describe(),
        write_mib_per_sec: mib(write),
        read_mib_per_sec: mib(read),
        read_cold: cold,
        note,
        create_per_sec: create.unwrap_or(0.0),
        stat_per_sec: stat.unwrap_or(0.0),
        remove_per_sec: remove.unwrap_or(0.0),
    }))
}

/// Compares `targets` in order. Rank 0 gets the report.
pub fn run(
    env: &RunEnv<'_>,
    targets: &[Target],
    opts: &CompareOptions,
    watch_pid: Option<u32>,
) -> Result<Option<CompareReport>> {
    if targets.is_empty() {
        return Err(BenchError::Usage("give at least one directory".into()));
    }
    if opts.tasks == 0 || opts.xfer == 0 || opts.size == 0 {
        return Err(BenchError::Usage(
            "--tasks, --xfer and --size must be > 0".into(),
        ));
    }
    for t in targets {
        backend::check_dir(t.fs.as_ref(), &t.dir)?;
    }
    let sampler = match watch_pid {
        Some(pid) if env.world.is_root() => Some(RssSampler::start(pid)?),
        _ => None,
    };
    let mut dirs = Vec::new();
    let mut failure = None;
    for t in targets {
        let sub = RunEnv {
            fs: t.fs.clone(),
            world: env.world,
            progress: env.progress,
            cancel: env.cancel.clone(),
        };
        match one_dir(&sub, &t.dir, opts) {
            Ok(Some(r)) => dirs.push(r),
            Ok(None) => {}
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let rss = sampler.and_then(RssSampler::finish);
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(env.world.is_root().then(|| CompareReport {
        options: opts.clone(),
        ranks: env.world.size(),
        dirs,
        rss,
    }))
}

/// Prints the table with ratios to the first directory.
pub fn print_text(r: &CompareReport, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "Side by side: {} task(s) x {} rank(s), {} per task, {} files per task",
        r.options.tasks,
        r.ranks,
        units::ior_human(r.options.size),
        r.options.files
    )?;
    const W: usize = 28;
    write!(out, "{:<22}", "")?;
    for d in &r.dirs {
        let mut name = d.dir.display().to_string();
        if name.len() > W - 1 {
            name = format!("…{}", &name[name.len() - (W - 2)..]);
        }
        write!(out, "{name:<W$}")?;
    }
    writeln!(out)?;
    type Column = (&'static str, fn(&DirResult) -> f64);
    let rows: [Column; 5] = [
        ("write (MiB/s)", |d| d.write_mib_per_sec),
        ("read, cold (MiB/s)", |d| d.read_mib_per_sec),
        ("create (ops/s)", |d| d.create_per_sec),
        ("stat (ops/s)", |d| d.stat_per_sec),
        ("remove (ops/s)", |d| d.remove_per_sec),
    ];
    for (label, f) in rows {
        write!(out, "{label:<22}")?;
        let base = r.dirs.first().map(f).unwrap_or(0.0);
        for (i, d) in r.dirs.iter().enumerate() {
            let v = f(d);
            let cell = if i == 0 || base <= 0.0 {
                format!("{v:.1}")
            } else {
                format!("{v:.1} ({:.2}x)", v / base)
            };
            write!(out, "{cell:<W$}")?;
        }
        writeln!(out)?;
    }
    for d in &r.dirs {
        if let Some(n) = &d.note {
            writeln!(out, "note: {}: {n}", d.dir.display())?;
        }
    }
    if let Some(m) = &r.rss {
        writeln!(
            out,
            "peak RSS of pid {}: {} (VmHWM {}) over {} samples{}",
            m.pid,
            units::human_bytes(m.peak_rss_kib as f64 * 1024.0),
            units::human_bytes(m.hwm_kib as f64 * 1024.0),
            m.samples,
            if m.exited {
                "; the process exited during the run"
            } else {
                ""
            }
        )?;
    }
    Ok(())
}
