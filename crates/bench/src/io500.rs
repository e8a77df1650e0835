//! IO500: the standard phases, scaled by options, and IO500's scoring, so any file system is
//! scored the same way.
//!
//! Phases, in IO500's order: ior-easy-write (file per task, large transfers), mdtest-easy-write
//! (empty files in a directory per task), ior-hard-write (one shared file, 47,008-byte records),
//! mdtest-hard-write (3,901-byte files in one shared directory), find, ior-easy-read,
//! mdtest-easy-stat, ior-hard-read, mdtest-hard-stat, mdtest-easy-delete, mdtest-hard-read,
//! mdtest-hard-delete. The bandwidth score is the geometric mean of the four IOR phases in
//! GiB/s, the metadata score the geometric mean of the eight others in kIOPS, and the total
//! their geometric mean. Runs are not stonewalled: each phase moves its configured amount.

use std::io::{self, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::backend::{self, FileKind, OpenOptions};
use crate::env::RunEnv;
use crate::error::{BenchError, IoContext, Result};
use crate::ior::{self, IorConfig};
use crate::mdtest::{self, MdtestConfig};
use crate::stats::geometric_mean;
use crate::units::{GIB, MIB};

/// ior-hard's record size.
pub const IOR_HARD_RECORD: u64 = 47_008;
/// mdtest-hard's file size.
pub const MDTEST_HARD_BYTES: u64 = 3_901;
/// The directory under DIR.
pub const IO500_DIR: &str = "io500";

/// How large each phase is.
#[derive(Debug, Clone, Serialize)]
pub struct Io500Options {
    /// Total tasks (default one per rank).
    pub tasks: Option<usize>,
    /// ior-easy bytes per task.
    pub easy_block: u64,
    /// ior-easy transfer size.
    pub easy_xfer: u64,
    /// ior-hard records per task.
    pub hard_segments: u64,
    /// mdtest-easy files per task.
    pub md_easy_files: u64,
    /// mdtest-hard files per task.
    pub md_hard_files: u64,
    /// O_DIRECT for the IOR phases (ior-hard's 47,008-byte records cannot be direct).
    pub direct: bool,
    pub keep: bool,
}

impl Default for Io500Options {
    fn default() -> Self {
        Io500Options {
            tasks: None,
            easy_block: 256 * MIB,
            easy_xfer: 2 * MIB,
            hard_segments: 1000,
            md_easy_files: 1000,
            md_hard_files: 1000,
            direct: false,
            keep: false,
        }
    }
}

/// Bandwidth or metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Bandwidth,
    Metadata,
}

/// One phase's result.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseScore {
    pub name: String,
    pub kind: Kind,
    /// GiB/s for bandwidth phases, kIOPS for metadata phases.
    pub score: f64,
    pub secs: f64,
    /// For find: files examined and found.
    pub detail: Option<String>,
}

/// The IO500 result.
#[derive(Debug, Clone, Serialize)]
pub struct Io500Report {
    pub dir: PathBuf,
    pub tasks: usize,
    pub options: Io500Options,
    pub phases: Vec<PhaseScore>,
    /// GiB/s.
    pub bandwidth: f64,
    /// kIOPS.
    pub iops: f64,
    pub total: f64,
}

fn ior_cfg(test_file: PathBuf, opts: &Io500Options, easy: bool, write: bool) -> IorConfig {
    IorConfig {
        test_file,
        file_per_proc: easy,
        xfer: if easy {
            opts.easy_xfer
        } else {
            IOR_HARD_RECORD
        },
        block: if easy {
            opts.easy_block
        } else {
            IOR_HARD_RECORD
        },
        segments: if easy { 1 } else { opts.hard_segments },
        write,
        read: !write,
        reps: 1,
        fsync: write,
        reorder: !write,
        keep: true,
        use_existing: false,
        direct: opts.direct && easy,
        tasks: opts.tasks,
        command_line: format!("io500 {}", if easy { "ior-easy" } else { "ior-hard" }),
        ..IorConfig::default()
    }
}

fn md_cfg(dir: PathBuf, opts: &Io500Options, easy: bool) -> MdtestConfig {
    MdtestConfig {
        dir,
        items: Some(if easy {
            opts.md_easy_files
        } else {
            opts.md_hard_files
        }),
        iterations: 1,
        unique_dir: easy,
        files_only: true,
        write_bytes: if easy { 0 } else { MDTEST_HARD_BYTES },
        read_bytes: if easy { 0 } else { MDTEST_HARD_BYTES },
        stride: 1,
        tasks: opts.tasks,
        command_line: format!("io500 {}", if easy { "mdtest-easy" } else { "mdtest-hard" }),
        ..MdtestConfig::default()
    }
}

/// IO500's find: files under `roots` whose name contains "01", of 3,901 bytes, modified after
/// `newer` (seconds, nanoseconds). Returns (examined, found) for this task's share.
fn find_share(
    env: &RunEnv<'_>,
    roots: &[PathBuf],
    newer: (i64, i64),
    share: usize,
    shares: usize,
) -> Result<(u64, u64)> {
    let fs = env.fs.as_ref();
    let (mut examined, mut found) = (0u64, 0u64);
    let mut stack: Vec<PathBuf> = roots
        .iter()
        .enumerate()
        .filter(|(i, _)| i % shares == share)
        .map(|(_, p)| p.clone())
        .collect();
    while let Some(d) = stack.pop() {
        // Entries are matched as the listing streams by: a shared directory of millions of
        // files costs no memory.
        let mut failure: Option<BenchError> = None;
        let listed = fs.readdir(&d, &mut |de| {
            if env.cancel.is_cancelled() {
                failure = Some(BenchError::Interrupted("find stopped".into()));
                return ControlFlow::Break(());
            }
            let p = d.join(&de.name);
            match fs.stat(&p) {
                Ok(st) => match st.kind {
                    FileKind::Dir => stack.push(p),
                    FileKind::File => {
                        examined += 1;
                        let name_ok = de.name.to_string_lossy().contains("01");
                        let newer_ok = (st.mtime_sec, st.mtime_nsec) > newer;
                        if name_ok && st.size == MDTEST_HARD_BYTES && newer_ok {
                            found += 1;
                        }
                    }
                    _ => {}
                },
                Err(e) if backend::is_not_found(&e) => {}
                Err(e) => {
                    failure = Some(BenchError::io("stat", &p, e));
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        });
        if let Some(e) = failure {
            return Err(e);
        }
        match listed {
            Ok(()) => {}
            Err(e) if backend::is_not_found(&e) => {}
            Err(e) => return Err(BenchError::io("listing", &d, e)),
        }
    }
    Ok((examined, found))
}

/// The directories find splits between tasks: each per-task mdtest tree, the shared mdtest
/// tree and the IOR directories.
fn find_roots(env: &RunEnv<'_>, base: &Path) -> Result<Vec<PathBuf>> {
    let fs = env.fs.as_ref();
    let mut roots = vec![base.join("ior-easy"), base.join("ior-hard")];
    for md in ["mdtest-easy", "mdtest-hard"] {
        let td = mdtest::test_dir(&md_cfg(base.join(md), &Io500Options::default(), true), 0);
        let mut names = Vec::new();
        match fs.readdir(&td, &mut |de| {
            names.push(td.join(de.name));
            ControlFlow::Continue(())
        }) {
            Ok(()) => {}
            Err(e) if backend::is_not_found(&e) => {}
            Err(e) => return Err(BenchError::io("listing", &td, e)),
        }
        names.sort();
        roots.extend(names);
    }
    Ok(roots)
}

/// Runs all phases. Rank 0 gets the report. When interrupted, rank 0 removes `DIR/io500`
/// (unless `keep`).
pub fn run(env: &RunEnv<'_>, dir: &Path, opts: &Io500Options) -> Result<Option<Io500Report>> {
    let res = run_phases(env, dir, opts);
    if matches!(res, Err(BenchError::Interrupted(_))) && !opts.keep && env.world.is_root() {
        let _ = scrub(env.fs.as_ref(), dir);
    }
    res
}

/// Removes everything IO500 made in `dir` (`DIR/io500`); returns the entries removed.
pub fn scrub(fs: &dyn crate::backend::FileSystem, dir: &Path) -> Result<u64> {
    backend::check_dir(fs, dir)?;
    let p = dir.join(IO500_DIR);
    backend::remove_tree(fs, &p, &|_, _| false).ctx("removing", &p)
}

fn run_phases(env: &RunEnv<'_>, dir: &Path, opts: &Io500Options) -> Result<Option<Io500Report>> {
    let fs = env.fs.as_ref();
    let world = env.world;
    // Every rank checks; a rank that cannot see DIR stops them all.
    world.agree("io500-check", backend::check_dir(fs, dir))?;
    let base = dir.join(IO500_DIR);
    let mk: Result<()> = if world.is_root() {
        (|| {
            for d in ["ior-easy", "ior-hard", "mdtest-easy", "mdtest-hard"] {
                backend::mkdir_all(fs, &base.join(d)).ctx("creating", &base.join(d))?;
            }
            // The reference time for find's -newer.
            let ts = base.join("timestampfile");
            let fh = fs
                .create(&ts, OpenOptions::write().truncate(true))
                .ctx("creating", &ts)?;
            fs.close(fh).ctx("closing", &ts)
        })()
    } else {
        Ok(())
    };
    world.agree("io500-setup", mk)?;
    let ts = fs
        .stat(&base.join("timestampfile"))
        .ctx("stat", &base.join("timestampfile"))?;
    let newer = (ts.mtime_sec, ts.mtime_nsec);
    let tasks = opts.tasks.unwrap_or(world.size());
    let mut phases: Vec<PhaseScore> = Vec::new();
    let easy_file = base.join("ior-easy").join("ior_file_easy");
    let hard_file = base.join("ior-hard").join("file");

    let ior_phase = |name: &str, cfg: IorConfig, phases: &mut Vec<PhaseScore>| -> Result<()> {
        let rep = ior::run(env, &cfg)?;
        if let Some(r) = rep {
            let row = r.results.first();
            phases.push(PhaseScore {
                name: name.to_string(),
                kind: Kind::Bandwidth,
                score: row.map_or(0.0, |x| x.bytes as f64 / x.total_time / GIB as f64),
                secs: row.map_or(0.0, |x| x.total_time),
                detail: None,
            });
        }
        Ok(())
    };
    let md_phase = |name: &str,
                    mut cfg: MdtestConfig,
                    which: &str,
                    phases: &mut Vec<PhaseScore>|
     -> Result<()> {
        match which {
            "File creation" => cfg.create_only = true,
            "File stat" => cfg.stat_only = true,
            "File read" => cfg.read_only = true,
            _ => cfg.remove_only = true,
        }
        let rep = mdtest::run(env, &cfg)?;
        if let Some(r) = rep {
            let p = r
                .iterations
                .first()
                .and_then(|it| it.iter().find(|p| p.operation == which));
            phases.push(PhaseScore {
                name: name.to_string(),
                kind: Kind::Metadata,
                score: p.map_or(0.0, |p| p.rate / 1000.0),
                secs: p.map_or(0.0, |p| p.time),
                detail: None,
            });
        }
        Ok(())
    };
    let easy_md = md_cfg(base.join("mdtest-easy"), opts, true);
    let hard_md = md_cfg(base.join("mdtest-hard"), opts, false);

    ior_phase(
        "ior-easy-write",
        ior_cfg(easy_file.clone(), opts, true, true),
        &mut phases,
    )?;
    md_phase(
        "mdtest-easy-write",
        easy_md.clone(),
        "File creation",
        &mut phases,
    )?;
    ior_phase(
        "ior-hard-write",
        ior_cfg(hard_file.clone(), opts, false, true),
        &mut phases,
    )?;
    md_phase(
        "mdtest-hard-write",
        hard_md.clone(),
        "File creation",
        &mut phases,
    )?;

    // find
    let roots = find_roots(env, &base)?;
    let tpr = (tasks / world.size()).max(1);
    world.barrier("io500-find")?;
    let t0 = Instant::now();
    let local: Vec<Result<(u64, u64)>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..tpr)
            .map(|i| {
                let roots = &roots;
                let share = world.rank() * tpr + i;
                s.spawn(move || find_share(env, roots, newer, share, tpr * world.size()))
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(BenchError::Usage("find panicked".into())))
            })
            .collect()
    });
    let local: Result<Vec<(u64, u64)>> = local.into_iter().collect();
    let local = world.agree("io500-find-done", local)?;
    let secs = t0.elapsed().as_secs_f64();
    let sum = local
        .iter()
        .fold((0u64, 0u64), |a, b| (a.0 + b.0, a.1 + b.1));
    if let Some(all) = world.gather("io500-find-counts", &(sum, secs))? {
        let examined: u64 = all.iter().map(|x| x.0.0).sum();
        let found: u64 = all.iter().map(|x| x.0.1).sum();
        let t = all.iter().map(|x| x.1).fold(0.0f64, f64::max);
        phases.push(PhaseScore {
            name: "find".into(),
            kind: Kind::Metadata,
            score: if t > 0.0 {
                examined as f64 / t / 1000.0
            } else {
                0.0
            },
            secs: t,
            detail: Some(format!("{found} of {examined} files matched")),
        });
    }

    ior_phase(
        "ior-easy-read",
        ior_cfg(easy_file.clone(), opts, true, false),
        &mut phases,
    )?;
    md_phase(
        "mdtest-easy-stat",
        easy_md.clone(),
        "File stat",
        &mut phases,
    )?;
    ior_phase(
        "ior-hard-read",
        ior_cfg(hard_file.clone(), opts, false, false),
        &mut phases,
    )?;
    md_phase(
        "mdtest-hard-stat",
        hard_md.clone(),
        "File stat",
        &mut phases,
    )?;
    md_phase("mdtest-easy-delete", easy_md, "File removal", &mut phases)?;
    md_phase(
        "mdtest-hard-read",
        hard_md.clone(),
        "File read",
        &mut phases,
    )?;
    md_phase("mdtest-hard-delete", hard_md, "File removal", &mut phases)?;

    if !opts.keep {
        // The IOR files; mdtest removed its own.
        let tpr = tasks / world.size();
        let rm: Result<()> = (|| {
            let cfg = ior_cfg(easy_file.clone(), opts, true, true);
            for i in 0..tpr {
                let p = ior::file_name(&cfg, world.rank() * tpr + i, 0);
                match fs.unlink(&p) {
                    Err(e) if !backend::is_not_found(&e) => {
                        return Err(BenchError::io("removing", &p, e));
                    }
                    _ => {}
                }
            }
            Ok(())
        })();
        world.agree("io500-cleanup", rm)?;
        if world.is_root() {
            backend::remove_tree(fs, &base, &|_, _| false).ctx("removing", &base)?;
        }
    }
    if !world.is_root() {
        return Ok(None);
    }
    let bw: Vec<f64> = phases
        .iter()
        .filter(|p| p.kind == Kind::Bandwidth)
        .map(|p| p.score)
        .collect();
    let md: Vec<f64> = phases
        .iter()
        .filter(|p| p.kind == Kind::Metadata)
        .map(|p| p.score)
        .collect();
    let bandwidth = geometric_mean(&bw);
    let iops = geometric_mean(&md);
    Ok(Some(Io500Report {
        dir: dir.to_path_buf(),
        tasks,
        options: opts.clone(),
        phases,
        bandwidth,
        iops,
        total: (bandwidth * iops).sqrt(),
    }))
}

/// Prints the result as IO500 does.
pub fn print_text(r: &Io500Report, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "IO500 on {} with {} task(s)", r.dir.display(), r.tasks)?;
    for p in &r.phases {
        let unit = match p.kind {
            Kind::Bandwidth => "GiB/s",
            Kind::Metadata => "kIOPS",
        };
        write!(
            out,
            "[RESULT] {:>20} {:>15.6} {unit} : time {:.3} seconds",
            p.name, p.score, p.secs
        )?;
        match &p.detail {
            Some(d) => writeln!(out, " ({d})")?,
            None => writeln!(out)?,
        }
    }
    writeln!(
        out,
        "[SCORE ] Bandwidth {:.6} GiB/s : IOPS {:.6} kiops : TOTAL {:.6}",
        r.bandwidth, r.iops, r.total
    )
}
