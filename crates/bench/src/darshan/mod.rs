//! Aging from real Darshan logs, the method of the LFSCK study: every POSIX file record of
//! the logs gives a file (its size at open plus the bytes the job wrote, capped at 8 MiB),
//! the files go into random directories (depth 1-10, 1-100 files each) and the tree gets
//! the study's layout (`lfs setstripe -c -1 -S 1M`, every OST in 1 MiB stripes).
//!
//! [`log`] reads the logs through the `darshan` Python package; [`population`] turns the
//! records into a repeatable tree that is built on demand, directory by directory, so a
//! population of millions of files streams through a bounded queue to the writer threads.

pub mod log;
pub mod population;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::Instant;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::backend::{self, AlignedBuf, OpenOptions};
use crate::cancel::Cancel;
use crate::env::RunEnv;
use crate::error::{BenchError, IoContext, Result};
use crate::units;
use log::LogInfo;
use population::{PlannedDir, Population, PopulationSummary};

/// The tree is made in DIR/darshan.
pub const TREE_DIR: &str = "darshan";
/// Directories planned ahead of the writers: enough that no writer waits for the planner
/// (planning a directory is a few microseconds), few enough that memory stays flat however
/// large the population (a directory is a path and three numbers).
pub const DIR_QUEUE: usize = 256;

/// How to write the population.
#[derive(Debug, Clone)]
pub struct AgeOptions {
    /// Writer threads per rank.
    pub threads: usize,
    /// Bytes per write call.
    pub xfer: u64,
    /// fsync every file before closing it.
    pub fsync: bool,
}

impl Default for AgeOptions {
    fn default() -> Self {
        AgeOptions {
            threads: 4,
            xfer: units::MIB,
            fsync: false,
        }
    }
}

/// What an aging run reports.
#[derive(Debug, Clone, Serialize)]
pub struct AgeSummary {
    pub logs: Vec<LogInfo>,
    pub tree: PathBuf,
    /// The `lfs setstripe` options the tree was given, if any.
    pub layout: Option<String>,
    pub population: PopulationSummary,
    pub files_made: u64,
    pub bytes_made: u64,
    pub dirs_made: u64,
    pub ranks: usize,
    pub threads_per_rank: usize,
    pub secs: f64,
    pub files_per_sec: f64,
    pub mib_per_sec: f64,
}

/// What writers made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Made {
    pub files: u64,
    pub bytes: u64,
    /// Directories holding files (their shared parents not counted).
    pub dirs: u64,
}

/// What [`run`] made, where, and how long it took.
#[derive(Debug, Clone)]
pub struct AgeRun {
    pub tree: PathBuf,
    pub made: Made,
    pub secs: f64,
}

/// Builds `pop` under `dir`/[`TREE_DIR`]. Rank 0 makes the tree root (it must not exist) and
/// hands it to `prepare` (which sets its default layout) before any rank writes; ranks then
/// take directories round-robin, and each rank's threads take them from one bounded queue.
pub fn run(
    env: &RunEnv<'_>,
    dir: &Path,
    pop: &Population,
    opts: &AgeOptions,
    prepare: &(dyn Fn(&Path) -> Result<()> + Sync),
) -> Result<AgeRun> {
    let fs = env.fs.as_ref();
    let world = env.world;
    world.agree("darshan-check", backend::check_dir(fs, dir))?;
    if opts.threads == 0 {
        return Err(BenchError::Usage("--threads must be at least 1".into()));
    }
    if opts.xfer == 0 {
        return Err(BenchError::Usage("--xfer must be greater than 0".into()));
    }
    let root = dir.join(TREE_DIR);
    let setup = if world.is_root() {
        (|| {
            match fs.mkdir(&root, 0o755) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    return Err(BenchError::Usage(format!(
                        "{} already exists: remove it (or age another directory) first",
                        root.display()
                    )));
                }
                Err(e) => return Err(BenchError::io("creating", &root, e)),
            }
            prepare(&root)
        })()
    } else {
        Ok(())
    };
    world.agree("darshan-setup", setup)?;

    let started = Instant::now();
    let (rank, ranks) = (world.rank() as u64, world.size() as u64);
    let mine = |d: &PlannedDir| d.index % ranks == rank;
    let my_files: u64 = pop.dirs().filter(|d| mine(d)).map(|d| d.files).sum();
    let bar = env.bars().items(my_files, "darshan age");
    let stop = Cancel::new();
    let xfer = opts.xfer.min(pop.shape().cap).max(1) as usize;
    let mut buf = AlignedBuf::new(xfer, fs.io_alignment()).ctx("allocating", dir)?;
    ChaCha8Rng::seed_from_u64(pop.seed()).fill_bytes(&mut buf);
    let buf = &buf[..];
    let (tx, rx) = mpsc::sync_channel::<PlannedDir>(DIR_QUEUE);
    // A failing writer drops the receiver, so a planner blocked on a full queue returns.
    let rx = Mutex::new(Some(rx));
    let results: Vec<Result<Made>> = std::thread::scope(|s| {
        let planner = {
            let stop = &stop;
            s.spawn(move || {
                for d in pop.dirs().filter(|d| mine(d)) {
                    if stop.is_cancelled() || env.cancel.is_cancelled() || tx.send(d).is_err() {
                        break;
                    }
                }
            })
        };
        let writers: Vec<_> = (0..opts.threads)
            .map(|_| {
                let (stop, rx, root, bar) = (&stop, &rx, &root, &bar);
                s.spawn(move || {
                    let r = writer(env, root, pop, opts, buf, rx, stop, bar);
                    if r.is_err() {
                        stop.cancel();
                        if let Ok(mut q) = rx.lock() {
                            q.take();
                        }
                    }
                    r
                })
            })
            .collect();
        let mut out: Vec<Result<Made>> = writers
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(BenchError::Usage("a writer thread panicked".into())))
            })
            .collect();
        if planner.join().is_err() {
            out.push(Err(BenchError::Usage("the planner thread panicked".into())));
        }
        out
    });
    bar.finish_and_clear();
    let mut made = Made::default();
    let mut errors = Vec::new();
    for r in results {
        match r {
            Ok(m) => {
                made.files += m.files;
                made.bytes += m.bytes;
                made.dirs += m.dirs;
            }
            Err(e) => errors.push(e),
        }
    }
    // The real failure rather than a sibling's "stopped".
    let local = match errors
        .iter()
        .position(|e| !matches!(e, BenchError::Interrupted(m) if m == STOPPED))
    {
        Some(i) => Err(errors.swap_remove(i)),
        None => errors.into_iter().next().map_or(Ok(made), Err),
    };
    let local = world.agree("darshan-made", local)?;
    let all = world.gather("darshan-counts", &local)?;
    world.barrier("darshan-done")?;
    let total = all.map_or(local, |v| {
        v.iter().fold(Made::default(), |a, m| Made {
            files: a.files + m.files,
            bytes: a.bytes + m.bytes,
            dirs: a.dirs + m.dirs,
        })
    });
    Ok(AgeRun {
        tree: root,
        made: total,
        secs: started.elapsed().as_secs_f64(),
    })
}

/// What a writer reports when it stops because a sibling failed.
const STOPPED: &str = "stopped";

#[allow(clippy::too_many_arguments)]
fn writer(
    env: &RunEnv<'_>,
    root: &Path,
    pop: &Population,
    opts: &AgeOptions,
    buf: &[u8],
    rx: &Mutex<Option<mpsc::Receiver<PlannedDir>>>,
    stop: &Cancel,
    bar: &indicatif::ProgressBar,
) -> Result<Made> {
    let fs = env.fs.as_ref();
    let mut made = Made::default();
    loop {
        let next = match rx.lock() {
            Ok(q) => match q.as_ref() {
                Some(q) => q.recv(),
                None => return Err(BenchError::Interrupted(STOPPED.into())),
            },
            Err(_) => return Err(BenchError::Usage("the work queue was poisoned".into())),
        };
        // The planner has sent every directory.
        let Ok(d) = next else {
            return Ok(made);
        };
        let path = root.join(&d.rel);
        backend::mkdir_all(fs, &path).ctx("creating directory", &path)?;
        made.dirs += 1;
        for i in d.first_file..d.first_file + d.files {
            if env.cancel.is_cancelled() {
                return Err(BenchError::Interrupted(format!(
                    "stopped by SIGINT or SIGTERM; {} holds what was made",
                    root.display()
                )));
            }
            if stop.is_cancelled() {
                return Err(BenchError::Interrupted(STOPPED.into()));
            }
            let f = path.join(PlannedDir::file_name(i));
            let size = pop.file_size(i);
            let fh = fs
                .create(&f, OpenOptions::write().truncate(true))
                .ctx("creating", &f)?;
            let mut off = 0u64;
            let mut res = Ok(());
            while off < size {
                let n = ((size - off) as usize).min(buf.len());
                if let Err(e) = backend::write_all_at(fs, fh, &buf[..n], off) {
                    res = Err(e);
                    break;
                }
                off += n as u64;
            }
            if res.is_ok() && opts.fsync {
                res = fs.fsync(fh);
            }
            let closed = fs.close(fh);
            res.and(closed).ctx("writing", &f)?;
            made.files += 1;
            made.bytes += size;
            bar.inc(1);
        }
    }
}

/// Prints the population as text (the plan, and the first part of a run's report).
pub fn print_population(
    logs: &[LogInfo],
    p: &PopulationSummary,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    for l in logs {
        writeln!(
            out,
            "log {} (Darshan {}, {} processes, {} files): {}",
            l.log.display(),
            l.version,
            l.nprocs,
            l.files,
            l.exe.trim()
        )?;
    }
    let h = units::human_bytes;
    writeln!(
        out,
        "population: {} files from {} records, seed {}",
        p.files, p.records, p.seed
    )?;
    writeln!(
        out,
        "  bytes              : {} ({} in the logs; {} files capped at {})",
        h(p.bytes as f64),
        h(p.log_bytes as f64),
        p.capped_files,
        units::short_size(p.shape.cap)
    )?;
    writeln!(
        out,
        "  directories        : {} holding files, depth {}-{}, {}-{} files each",
        p.dirs, p.shape.depth.0, p.shape.depth.1, p.min_dir_files, p.max_dir_files
    )?;
    writeln!(out, "  file sizes         :")?;
    for b in p.size_histogram.iter().filter(|b| b.files > 0) {
        writeln!(
            out,
            "    {:>10} : {:>10} files {:>12}",
            b.label,
            b.files,
            h(b.bytes as f64)
        )?;
    }
    writeln!(out, "  directory depths   :")?;
    for (depth, n) in p
        .depth_histogram
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
    {
        writeln!(out, "    {depth:>10} : {n:>10} directories")?;
    }
    Ok(())
}

/// Prints a run's report as text.
pub fn print_summary(s: &AgeSummary, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    print_population(&s.logs, &s.population, out)?;
    writeln!(out, "tree {}", s.tree.display())?;
    writeln!(
        out,
        "  layout             : {}",
        s.layout
            .as_deref()
            .map_or("the directory's default".to_string(), |l| format!(
                "lfs setstripe {l}"
            ))
    )?;
    writeln!(
        out,
        "  made               : {} files, {} directories with files, {}",
        s.files_made,
        s.dirs_made,
        units::human_bytes(s.bytes_made as f64)
    )?;
    writeln!(
        out,
        "  time               : {:.2} s, {:.0} files/s, {:.1} MiB/s ({} rank(s) x {} threads)",
        s.secs, s.files_per_sec, s.mib_per_sec, s.ranks, s.threads_per_rank
    )
}

#[cfg(test)]
mod tests {
    use super::population::{FileRecord, TreeShape};
    use super::*;
    use crate::backend::PosixFs;
    use crate::rank::World;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Every file under `root` as (path below root, size), sorted.
    fn listing(root: &Path) -> Vec<(PathBuf, u64)> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let e = e.unwrap();
                let md = e.metadata().unwrap();
                if md.is_dir() {
                    stack.push(e.path());
                } else {
                    out.push((e.path().strip_prefix(root).unwrap().to_path_buf(), md.len()));
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn a_run_makes_the_planned_tree_and_refuses_to_run_twice() {
        let tmp = tempfile::tempdir().unwrap();
        let recs = vec![
            FileRecord {
                size_at_open: 0,
                bytes_written: 3000,
            },
            FileRecord {
                size_at_open: 100,
                bytes_written: 1 << 20,
            },
            FileRecord {
                size_at_open: 0,
                bytes_written: 0,
            },
        ];
        let shape = TreeShape {
            cap: 64 << 10,
            ..TreeShape::default()
        };
        let pop = Population::scaled(recs, 100, 3, shape).unwrap();
        let world = World::single();
        let env = RunEnv::quiet(Arc::new(PosixFs::new()), &world);
        let prepared = AtomicU64::new(0);
        let prepare = |root: &Path| {
            assert!(root.is_dir());
            prepared.fetch_add(1, Ordering::SeqCst);
            Ok(())
        };
        let opts = AgeOptions {
            threads: 3,
            xfer: 4096,
            fsync: false,
        };
        let r = run(&env, tmp.path(), &pop, &opts, &prepare).unwrap();
        assert_eq!(prepared.load(Ordering::SeqCst), 1);
        let s = pop.summary();
        assert_eq!(r.made.files, 300);
        assert_eq!(r.made.bytes, s.bytes);
        assert_eq!(r.made.bytes, 100 * (3000 + (64 << 10)));
        assert_eq!(r.made.dirs, s.dirs);
        let files = listing(&r.tree);
        assert_eq!(files.len(), 300);
        let mut want: Vec<(PathBuf, u64)> = pop
            .dirs()
            .flat_map(|d| {
                (d.first_file..d.first_file + d.files)
                    .map(|i| (d.rel.join(PlannedDir::file_name(i)), pop.file_size(i)))
                    .collect::<Vec<_>>()
            })
            .collect();
        want.sort();
        assert_eq!(files, want);
        let again = run(&env, tmp.path(), &pop, &opts, &prepare).unwrap_err();
        assert!(again.to_string().contains("already exists"), "{again}");
    }

    #[test]
    fn a_failing_layout_stops_the_run_before_any_file() {
        let tmp = tempfile::tempdir().unwrap();
        let recs = vec![FileRecord {
            size_at_open: 1,
            bytes_written: 1,
        }];
        let pop = Population::scaled(recs, 10, 1, TreeShape::default()).unwrap();
        let world = World::single();
        let env = RunEnv::quiet(Arc::new(PosixFs::new()), &world);
        let prepare = |_: &Path| Err(BenchError::Usage("no layout here".into()));
        let e = run(&env, tmp.path(), &pop, &AgeOptions::default(), &prepare).unwrap_err();
        assert!(e.to_string().contains("no layout here"), "{e}");
        assert!(listing(&tmp.path().join(TREE_DIR)).is_empty());
    }
}
