//! mdtest: metadata rates (directory and file create, stat, rename, read, remove; tree create
//! and remove) in mdtest's tree of `mdtest_tree.N` directories, printed as mdtest 4's
//! `SUMMARY rate` table, plus JSON.
//!
//! As in mdtest, a phase's rate per iteration is the slowest task's rate times the number of
//! tasks (each task's items over the phase time measured after the closing barrier); Max, Min
//! and Mean run over iterations and the deviation is the sample standard deviation. Tree rows
//! are rank 0's own rates.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::backend::{self, AlignedBuf, OpenOptions};
use crate::env::RunEnv;
use crate::error::{BenchError, IoContext, Result};
use crate::stats::{Deviation, Summary};

/// The mdtest version whose output format this follows.
pub const MDTEST_VERSION: &str = "4.0.0";

/// An mdtest run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MdtestConfig {
    /// `-d`: the directory the test runs in.
    pub dir: PathBuf,
    /// `-n`: items per task.
    pub items: Option<u64>,
    /// `-I`: items per tree directory.
    pub items_per_dir: Option<u64>,
    /// `-i`: iterations.
    pub iterations: u32,
    /// `-z`: tree depth.
    pub depth: u32,
    /// `-b`: branching factor.
    pub branch: u32,
    /// `-u`: a tree per task.
    pub unique_dir: bool,
    /// `-F`: files only. `-D`: directories only.
    pub files_only: bool,
    pub dirs_only: bool,
    /// `-C`, `-T`, `-E`, `-r`, `-U`: run only these phases (all when none is given).
    pub create_only: bool,
    pub stat_only: bool,
    pub read_only: bool,
    pub remove_only: bool,
    pub rename_dirs: bool,
    /// `-w`: bytes written to each file. `-e`: bytes read from each file.
    pub write_bytes: u64,
    pub read_bytes: u64,
    /// `-y`: fsync each file after writing.
    pub sync_file: bool,
    /// `-N`: stat/read/remove the items of the task this many ranks away.
    pub stride: usize,
    /// `--tasks`: total tasks (default one per rank).
    pub tasks: Option<usize>,
    /// `-P`: print the time table too.
    pub print_rate_and_time: bool,
    /// `-v` count.
    pub verbose: u8,
    pub command_line: String,
}

impl Default for MdtestConfig {
    fn default() -> Self {
        MdtestConfig {
            dir: PathBuf::from("."),
            items: None,
            items_per_dir: None,
            iterations: 1,
            depth: 0,
            branch: 1,
            unique_dir: false,
            files_only: false,
            dirs_only: false,
            create_only: false,
            stat_only: false,
            read_only: false,
            remove_only: false,
            rename_dirs: false,
            write_bytes: 0,
            read_bytes: 0,
            sync_file: false,
            stride: 0,
            tasks: None,
            print_rate_and_time: false,
            verbose: 0,
            command_line: String::new(),
        }
    }
}

/// mdtest's phases, in its table order (index = mdtest's `MDTEST_*_NUM`).
pub const PHASES: [&str; 11] = [
    "Directory creation",
    "Directory stat",
    "Directory read",
    "Directory rename",
    "Directory removal",
    "File creation",
    "File stat",
    "File read",
    "File removal",
    "Tree creation",
    "Tree removal",
];
const DIR_CREATE: usize = 0;
const DIR_STAT: usize = 1;
const DIR_READ: usize = 2;
const DIR_RENAME: usize = 3;
const DIR_REMOVE: usize = 4;
const FILE_CREATE: usize = 5;
const FILE_STAT: usize = 6;
const FILE_READ: usize = 7;
const FILE_REMOVE: usize = 8;
const TREE_CREATE: usize = 9;
const TREE_REMOVE: usize = 10;

/// One task's figures for one phase of one iteration.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct TaskPhase {
    pub items: u64,
    /// The phase time after the closing barrier (the same for the tasks of one rank).
    pub time: f64,
    /// This task's own time, before the barrier.
    pub time_before_barrier: f64,
}

/// One phase of one iteration, reduced over tasks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhaseResult {
    pub operation: String,
    /// Items over all tasks.
    pub items: u64,
    /// Longest phase time over ranks.
    pub time: f64,
    /// mdtest's aggregate rate: the slowest task's rate × tasks (0 when skipped).
    pub rate: f64,
}

/// A row of the SUMMARY table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SummaryRow {
    pub operation: String,
    pub max: f64,
    pub min: f64,
    pub mean: f64,
    pub stddev: f64,
}

/// The report rank 0 prints.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MdtestReport {
    pub version: String,
    pub started: String,
    pub command_line: String,
    pub path: String,
    pub fs: Option<crate::ior::FsInfo>,
    pub backend: String,
    pub tasks: usize,
    pub nodes: usize,
    pub items_per_task: u64,
    pub items_per_dir: u64,
    pub dirs_in_tree: u64,
    pub config: MdtestConfig,
    /// Per iteration, the eleven phases in table order.
    pub iterations: Vec<Vec<PhaseResult>>,
    pub summary_rate: Vec<SummaryRow>,
    pub summary_time: Vec<SummaryRow>,
    pub finished: String,
}

/// The shape of the test, derived from the options.
#[derive(Debug, Clone)]
struct Shape {
    tasks: usize,
    tpr: usize,
    items: u64,
    items_per_dir: u64,
    dirs: u64,
    dirs_enabled: bool,
    files_enabled: bool,
    create: bool,
    stat: bool,
    read: bool,
    remove: bool,
    rename: bool,
}

fn shape(cfg: &MdtestConfig, ranks: usize) -> Result<Shape> {
    let bad = |m: String| Err(BenchError::Usage(m));
    if cfg.iterations == 0 {
        return bad("-i must be at least 1".into());
    }
    if cfg.depth > 0 && cfg.branch == 0 {
        return bad("-b must be at least 1 with -z".into());
    }
    let branch = cfg.branch.max(1) as u64;
    let mut dirs = 0u64;
    let mut level = 1u64;
    for _ in 0..=cfg.depth {
        dirs = dirs
            .checked_add(level)
            .ok_or_else(|| BenchError::Usage("tree too large".into()))?;
        level = level
            .checked_mul(branch)
            .ok_or_else(|| BenchError::Usage("tree too large".into()))?;
    }
    let (items, items_per_dir) = match (cfg.items, cfg.items_per_dir) {
        (None, None) => return bad("give the items per task (-n) or per directory (-I)".into()),
        (None, Some(i)) => (i * dirs, i),
        (Some(n), None) => {
            if n < dirs {
                return bad(format!(
                    "-n {n} is fewer items than the {dirs} directories of the tree"
                ));
            }
            let ipd = n / dirs;
            (ipd * dirs, ipd)
        }
        (Some(n), Some(i)) => {
            if i == 0 || n % i != 0 {
                return bad(format!("-n {n} must be a multiple of -I {i}"));
            }
            (n, i)
        }
    };
    if items_per_dir == 0 {
        return bad("no items to test".into());
    }
    let tasks = cfg.tasks.unwrap_or(ranks);
    if tasks == 0 || !tasks.is_multiple_of(ranks) {
        return bad(format!(
            "{tasks} tasks cannot be spread evenly over {ranks} rank(s)"
        ));
    }
    let none =
        !(cfg.create_only || cfg.stat_only || cfg.read_only || cfg.remove_only || cfg.rename_dirs);
    let (files_enabled, dirs_enabled) = match (cfg.files_only, cfg.dirs_only) {
        (true, false) => (true, false),
        (false, true) => (false, true),
        _ => (true, true),
    };
    Ok(Shape {
        tasks,
        tpr: tasks / ranks,
        items,
        items_per_dir,
        dirs,
        dirs_enabled,
        files_enabled,
        create: none || cfg.create_only,
        stat: none || cfg.stat_only,
        read: none || cfg.read_only,
        remove: none || cfg.remove_only,
        rename: none || cfg.rename_dirs,
    })
}

/// The test directory of an iteration.
pub fn test_dir(cfg: &MdtestConfig, iteration: u32) -> PathBuf {
    cfg.dir.join(format!("test-dir.{iteration}-0"))
}

fn base_name(cfg: &MdtestConfig, task: usize) -> String {
    if cfg.unique_dir {
        format!("mdtest_tree.{task}")
    } else {
        "mdtest_tree".to_string()
    }
}

/// Path of tree node `k` (breadth-first numbering, root 0) for `task`'s tree.
fn node_path(cfg: &MdtestConfig, root: &Path, task: usize, k: u64) -> PathBuf {
    let b = cfg.branch.max(1) as u64;
    let base = base_name(cfg, task);
    let mut chain = vec![k];
    let mut x = k;
    while x > 0 {
        x = (x - 1) / b;
        chain.push(x);
    }
    let mut p = root.to_path_buf();
    for n in chain.into_iter().rev() {
        p.push(format!("{base}.{n}"));
    }
    p
}

fn item_path(
    cfg: &MdtestConfig,
    sh: &Shape,
    root: &Path,
    owner: usize,
    i: u64,
    file: bool,
) -> PathBuf {
    let tree_owner = if cfg.unique_dir { owner } else { 0 };
    let node = i / sh.items_per_dir;
    let name = if file {
        format!("file.mdtest.{owner}.{i}")
    } else {
        format!("dir.mdtest.{owner}.{i}")
    };
    node_path(cfg, root, tree_owner, node).join(name)
}

/// Runs one task's share of `phase`. Returns the items done.
fn task_phase(
    env: &RunEnv<'_>,
    cfg: &MdtestConfig,
    sh: &Shape,
    root: &Path,
    phase: usize,
    task: usize,
    bar: &indicatif::ProgressBar,
) -> Result<u64> {
    let fs = env.fs.as_ref();
    let source = if matches!(
        phase,
        DIR_STAT | FILE_STAT | FILE_READ | DIR_REMOVE | FILE_REMOVE
    ) {
        (task + cfg.stride) % sh.tasks
    } else {
        task
    };
    let stop = || -> Result<()> {
        if env.cancel.is_cancelled() {
            return Err(BenchError::Interrupted(format!(
                "mdtest stopped during {} in {}",
                PHASES[phase],
                root.display()
            )));
        }
        Ok(())
    };
    match phase {
        TREE_CREATE | TREE_REMOVE => {
            // Breadth-first numbering: parents come before children, so create in order and
            // remove in reverse.
            let order: Box<dyn Iterator<Item = u64>> = if phase == TREE_CREATE {
                Box::new(0..sh.dirs)
            } else {
                Box::new((0..sh.dirs).rev())
            };
            for k in order {
                stop()?;
                let p = node_path(cfg, root, task, k);
                if phase == TREE_CREATE {
                    fs.mkdir(&p, 0o755).ctx("creating tree directory", &p)?;
                } else {
                    fs.rmdir(&p).ctx("removing tree directory", &p)?;
                }
                bar.inc(1);
            }
            return Ok(sh.dirs);
        }
        DIR_RENAME => {
            // mdtest's rotation: item 0 steps aside, every item takes its predecessor's name,
            // and the first one takes the last name: the set of names is unchanged.
            if sh.items < 2 {
                return Ok(0);
            }
            let first = item_path(cfg, sh, root, task, 0, false);
            let mut aside = first.clone().into_os_string();
            aside.push("-XX");
            let aside = PathBuf::from(aside);
            fs.rename(&first, &aside).ctx("renaming", &first)?;
            for i in 1..sh.items {
                stop()?;
                let from = item_path(cfg, sh, root, task, i, false);
                let to = item_path(cfg, sh, root, task, i - 1, false);
                fs.rename(&from, &to).ctx("renaming", &from)?;
                bar.inc(1);
            }
            let last = item_path(cfg, sh, root, task, sh.items - 1, false);
            fs.rename(&aside, &last).ctx("renaming", &aside)?;
            bar.inc(1);
            return Ok(sh.items);
        }
        _ => {}
    }
    let mut wbuf = if phase == FILE_CREATE && cfg.write_bytes > 0 {
        Some(AlignedBuf::new(cfg.write_bytes as usize, 8).ctx("allocating", root)?)
    } else {
        None
    };
    if let Some(b) = wbuf.as_mut() {
        b.fill(0x6d);
    }
    let mut rbuf = if phase == FILE_READ && cfg.read_bytes > 0 {
        Some(AlignedBuf::new(cfg.read_bytes as usize, 8).ctx("allocating", root)?)
    } else {
        None
    };
    for i in 0..sh.items {
        stop()?;
        let file = phase >= FILE_CREATE;
        let p = item_path(cfg, sh, root, source, i, file);
        match phase {
            DIR_CREATE => fs.mkdir(&p, 0o755).ctx("creating directory", &p)?,
            DIR_STAT | FILE_STAT => {
                fs.stat(&p).ctx("stat", &p)?;
            }
            DIR_REMOVE => fs.rmdir(&p).ctx("removing directory", &p)?,
            FILE_CREATE => {
                let fh = fs
                    .create(&p, OpenOptions::write())
                    .ctx("creating file", &p)?;
                let mut r = Ok(());
                if let Some(b) = &wbuf {
                    r = backend::write_all_at(fs, fh, b, 0);
                }
                if r.is_ok() && cfg.sync_file {
                    r = fs.fsync(fh);
                }
                let c = fs.close(fh);
                r.and(c).ctx("writing file", &p)?;
            }
            FILE_READ => {
                let fh = fs.open(&p, OpenOptions::read()).ctx("opening file", &p)?;
                let mut r = Ok(0);
                if let Some(b) = rbuf.as_mut() {
                    r = backend::read_full_at(fs, fh, b, 0);
                }
                let c = fs.close(fh);
                r.and_then(|n| c.map(|_| n)).ctx("reading file", &p)?;
            }
            FILE_REMOVE => fs.unlink(&p).ctx("removing file", &p)?,
            _ => {}
        }
        bar.inc(1);
    }
    Ok(sh.items)
}

/// Runs mdtest. Rank 0 gets the report; other ranks get `None`. When interrupted, rank 0
/// removes the test directories, so nothing is left behind.
pub fn run(env: &RunEnv<'_>, cfg: &MdtestConfig) -> Result<Option<MdtestReport>> {
    let res = run_test(env, cfg);
    if matches!(res, Err(BenchError::Interrupted(_))) && env.world.is_root() {
        for it in 0..cfg.iterations {
            let _ = backend::remove_tree(env.fs.as_ref(), &test_dir(cfg, it), &|_, _| false);
        }
    }
    res
}

fn run_test(env: &RunEnv<'_>, cfg: &MdtestConfig) -> Result<Option<MdtestReport>> {
    let fs = env.fs.as_ref();
    let world = env.world;
    // Every rank checks; a rank that cannot see DIR stops them all.
    world.agree("mdtest-check", backend::check_dir(fs, &cfg.dir))?;
    let sh = shape(cfg, world.size())?;
    let nodes = world.count_nodes()?;
    let started = chrono::Local::now().format("%m/%d/%Y %H:%M:%S").to_string();
    let first_task = world.rank() * sh.tpr;
    let hint = format!("remove {} to free the space", test_dir(cfg, 0).display());

    // Per iteration, per phase, this rank's tasks' figures.
    let mut mine: Vec<Vec<Vec<TaskPhase>>> = Vec::new();
    for it in 0..cfg.iterations {
        let root = test_dir(cfg, it);
        let mut phases = vec![vec![TaskPhase::default(); sh.tpr]; PHASES.len()];
        let mut plan: Vec<usize> = Vec::new();
        if sh.create {
            plan.push(TREE_CREATE);
        }
        if sh.dirs_enabled {
            for (on, p) in [
                (sh.create, DIR_CREATE),
                (sh.stat, DIR_STAT),
                (sh.rename, DIR_RENAME),
                (sh.remove, DIR_REMOVE),
            ] {
                if on {
                    plan.push(p);
                }
            }
        }
        if sh.files_enabled {
            for (on, p) in [
                (sh.create, FILE_CREATE),
                (sh.stat, FILE_STAT),
                (sh.read, FILE_READ),
                (sh.remove, FILE_REMOVE),
            ] {
                if on {
                    plan.push(p);
                }
            }
        }
        if sh.remove {
            plan.push(TREE_REMOVE);
        }
        if sh.create && world.is_root() {
            let r = match fs.mkdir(&root, 0o755) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                    Err(BenchError::io("creating", &root, e))
                }
                _ => Ok(()),
            };
            world.agree("mdtest-testdir", r)?;
        } else if sh.create {
            world.agree("mdtest-testdir", Ok(()))?;
        }
        for &phase in &plan {
            let tree = phase == TREE_CREATE || phase == TREE_REMOVE;
            // A shared tree is made and removed by task 0 alone.
            let active = |task: usize| !tree || cfg.unique_dir || task == 0;
            let label = format!("mdtest-{it}-{phase}");
            let bar = env.bars().items(
                if tree { sh.dirs } else { sh.items } * sh.tpr as u64,
                PHASES[phase],
            );
            world.barrier(&label)?;
            let t0 = Instant::now();
            let res: Vec<Result<(u64, f64)>> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..sh.tpr)
                    .map(|i| {
                        let (sh, root, bar) = (&sh, &root, &bar);
                        let task = first_task + i;
                        s.spawn(move || -> Result<(u64, f64)> {
                            if !active(task) {
                                return Ok((0, 0.0));
                            }
                            let n = task_phase(env, cfg, sh, root, phase, task, bar)?;
                            Ok((n, t0.elapsed().as_secs_f64()))
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| {
                            Err(BenchError::Usage("an mdtest task panicked".into()))
                        })
                    })
                    .collect()
            });
            bar.finish_and_clear();
            let res: Result<Vec<(u64, f64)>> = res.into_iter().collect();
            let res = world
                .agree(&format!("{label}-done"), res)
                .map_err(|e| e.with_space_hint(&hint))?;
            let time = t0.elapsed().as_secs_f64();
            for (i, (items, before)) in res.into_iter().enumerate() {
                phases[phase][i] = TaskPhase {
                    items,
                    time,
                    time_before_barrier: before,
                };
            }
            if cfg.verbose > 0 && world.is_root() {
                let items: u64 = phases[phase].iter().map(|t| t.items).sum();
                eprintln!(
                    "   {:<18}: {:14.3} sec, {:14.3} ops/sec",
                    PHASES[phase],
                    time,
                    if time > 0.0 { items as f64 / time } else { 0.0 }
                );
            }
        }
        if sh.remove && world.is_root() {
            let r = match fs.rmdir(&root) {
                Err(e) if !backend::is_not_found(&e) => Err(BenchError::io("removing", &root, e)),
                _ => Ok(()),
            };
            world.agree("mdtest-testdir-rm", r)?;
        } else if sh.remove {
            world.agree("mdtest-testdir-rm", Ok(()))?;
        }
        mine.push(phases);
    }

    let all = world.gather("mdtest-results", &mine)?;
    let Some(all) = all else {
        return Ok(None);
    };
    // all[rank][iteration][phase][task-on-rank]
    let mut iterations = Vec::new();
    for it in 0..cfg.iterations as usize {
        let mut row = Vec::new();
        for (phase, name) in PHASES.iter().enumerate() {
            let tasks: Vec<TaskPhase> = all
                .iter()
                .flat_map(|r| r[it][phase].iter().copied())
                .collect();
            let items: u64 = tasks.iter().map(|t| t.items).sum();
            let time = tasks.iter().map(|t| t.time).fold(0.0f64, f64::max);
            let rate = if phase >= TREE_CREATE {
                // Rank 0's own tree rate.
                let r0: Vec<&TaskPhase> = all[0][it][phase].iter().collect();
                let n: u64 = r0.iter().map(|t| t.items).sum();
                let t = r0.iter().map(|t| t.time).fold(0.0f64, f64::max);
                if n == 0 || t <= 0.0 {
                    0.0
                } else {
                    n as f64 / t
                }
            } else if items == 0 {
                0.0
            } else {
                let min_rate = tasks
                    .iter()
                    .map(|t| {
                        if t.time > 0.0 {
                            t.items as f64 / t.time
                        } else {
                            0.0
                        }
                    })
                    .fold(f64::MAX, f64::min);
                min_rate * tasks.len() as f64
            };
            row.push(PhaseResult {
                operation: name.to_string(),
                items,
                time,
                rate,
            });
        }
        iterations.push(row);
    }
    let summarize = |value: fn(&PhaseResult) -> f64| -> Vec<SummaryRow> {
        let mut rows = Vec::new();
        for (phase, name) in PHASES.iter().enumerate() {
            if phase == DIR_READ {
                continue;
            }
            if phase < FILE_CREATE && !sh.dirs_enabled {
                continue;
            }
            if (FILE_CREATE..TREE_CREATE).contains(&phase) && !sh.files_enabled {
                continue;
            }
            let vals: Vec<f64> = iterations.iter().map(|r| value(&r[phase])).collect();
            let s = Summary::of(&vals, Deviation::Sample);
            rows.push(SummaryRow {
                operation: name.to_string(),
                max: s.max,
                min: s.min,
                mean: s.mean,
                stddev: s.stddev,
            });
        }
        rows
    };
    let summary_rate = summarize(|p| p.rate);
    let summary_time = summarize(|p| p.time);
    Ok(Some(MdtestReport {
        version: MDTEST_VERSION.to_string(),
        started,
        command_line: cfg.command_line.clone(),
        path: cfg.dir.display().to_string(),
        fs: crate::ior::fs_info(fs, &cfg.dir),
        backend: fs.describe(),
        tasks: sh.tasks,
        nodes,
        items_per_task: sh.items,
        items_per_dir: sh.items_per_dir,
        dirs_in_tree: sh.dirs,
        config: cfg.clone(),
        iterations,
        summary_rate,
        summary_time,
        finished: chrono::Local::now().format("%m/%d/%Y %H:%M:%S").to_string(),
    }))
}

fn print_table(
    out: &mut dyn Write,
    title: &str,
    rows: &[SummaryRow],
    iterations: u32,
) -> io::Result<()> {
    writeln!(out, "\nSUMMARY {title}: (of {iterations} iterations)")?;
    writeln!(
        out,
        "   Operation                     Max            Min           Mean        Std Dev"
    )?;
    writeln!(
        out,
        "   ---------                     ---            ---           ----        -------"
    )?;
    for r in rows {
        if r.operation.starts_with("Tree") {
            writeln!(
                out,
                "   {:<22} {:14.3} {:14.3} {:14.3} {:14.3}",
                r.operation, r.max, r.min, r.mean, r.stddev
            )?;
        } else {
            writeln!(
                out,
                "   {:<18}     {:14.3} {:14.3} {:14.3} {:14.3}",
                r.operation, r.max, r.min, r.mean, r.stddev
            )?;
        }
    }
    Ok(())
}

/// Prints the report as mdtest does.
pub fn print_text(r: &MdtestReport, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "-- started at {} --\n", r.started)?;
    writeln!(
        out,
        "mdtest-{} was launched with {} total task(s) on {} node(s)",
        r.version, r.tasks, r.nodes
    )?;
    writeln!(out, "Command line used: {}", r.command_line)?;
    writeln!(out, "Path: {}", r.path)?;
    if let Some(f) = &r.fs {
        writeln!(
            out,
            "FS: {}   Used FS: {}   Inodes: {}   Used Inodes: {}\n",
            f.capacity, f.used_capacity, f.inodes, f.used_inodes
        )?;
    }
    writeln!(
        out,
        "{} tasks, {} files/directories",
        r.tasks,
        r.items_per_task * r.tasks as u64
    )?;
    print_table(
        out,
        "rate (in ops/sec)",
        &r.summary_rate,
        r.config.iterations,
    )?;
    if r.config.print_rate_and_time {
        print_table(out, "time (in ms/op)", &r.summary_time, r.config.iterations)?;
    }
    writeln!(out, "-- finished at {} --", r.finished)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_shape_and_paths() {
        let cfg = MdtestConfig {
            items: Some(28),
            depth: 2,
            branch: 2,
            ..MdtestConfig::default()
        };
        let sh = shape(&cfg, 1).expect("shape");
        assert_eq!(sh.dirs, 7);
        assert_eq!(sh.items_per_dir, 4);
        assert_eq!(sh.items, 28);
        let root = Path::new("/t");
        assert_eq!(node_path(&cfg, root, 0, 0), Path::new("/t/mdtest_tree.0"));
        assert_eq!(
            node_path(&cfg, root, 0, 5),
            Path::new("/t/mdtest_tree.0/mdtest_tree.2/mdtest_tree.5")
        );
        assert_eq!(
            item_path(&cfg, &sh, root, 3, 9, true),
            Path::new("/t/mdtest_tree.0/mdtest_tree.2/file.mdtest.3.9")
        );
        let u = MdtestConfig {
            unique_dir: true,
            ..cfg.clone()
        };
        assert_eq!(
            node_path(&u, root, 3, 1),
            Path::new("/t/mdtest_tree.3.0/mdtest_tree.3.1")
        );
        let bad = MdtestConfig {
            items: Some(10),
            items_per_dir: Some(3),
            ..MdtestConfig::default()
        };
        assert!(shape(&bad, 1).is_err());
        let i_only = MdtestConfig {
            items_per_dir: Some(5),
            depth: 1,
            branch: 3,
            ..MdtestConfig::default()
        };
        assert_eq!(shape(&i_only, 1).expect("shape").items, 20);
    }

    #[test]
    fn table_rows_match_mdtest_layout() {
        let rows = vec![
            SummaryRow {
                operation: "Directory creation".into(),
                max: 12345.678,
                min: 11111.111,
                mean: 11800.0,
                stddev: 512.345,
            },
            SummaryRow {
                operation: "Tree creation".into(),
                max: 45.678,
                min: 40.0,
                mean: 43.0,
                stddev: 2.345,
            },
        ];
        let mut out = Vec::new();
        print_table(&mut out, "rate (in ops/sec)", &rows, 3).expect("print");
        let text = String::from_utf8(out).expect("utf8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "SUMMARY rate (in ops/sec): (of 3 iterations)");
        assert_eq!(
            lines[2],
            "   Operation                     Max            Min           Mean        Std Dev"
        );
        assert_eq!(
            lines[3],
            "   ---------                     ---            ---           ----        -------"
        );
        assert_eq!(
            lines[4],
            "   Directory creation          12345.678      11111.111      11800.000        512.345"
        );
        assert_eq!(
            lines[5],
            "   Tree creation                  45.678         40.000         43.000          2.345"
        );
    }
}
