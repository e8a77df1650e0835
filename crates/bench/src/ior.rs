//! IOR: bulk bandwidth of a shared file or a file per task, measured and printed as IOR 4
//! does (the `Results:` table, `Max Write/Read`, and the `Summary of all tests:` table), plus
//! JSON.
//!
//! Tasks are threads: `-N` tasks are divided evenly over the ranks, task `rank × tpr + i`
//! running as thread `i` of rank `rank`. Timing follows IOR: every phase starts after a
//! barrier; per task the open, transfer and close intervals are recorded; the phase time is
//! the last close minus the first open over all tasks, and bandwidth is the aggregate bytes
//! over that time.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::backend::{self, AlignedBuf, FileHandle, FileSystem, OpenOptions};
use crate::env::RunEnv;
use crate::error::{BenchError, IoContext, Result};
use crate::paf::plan::mix_seed;
use crate::shuffle::Permutation;
use crate::stats::{Deviation, Summary};
use crate::units::{self, KIB, MIB};

/// The IOR version whose output format this follows.
pub const IOR_VERSION: &str = "4.0.0";

/// An IOR test.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IorConfig {
    /// `-o`: test file name (with `-F` a `.NNNNNNNN` task suffix is added).
    pub test_file: PathBuf,
    /// `-F`: a file per task.
    pub file_per_proc: bool,
    /// `-t`: bytes per I/O call.
    pub xfer: u64,
    /// `-b`: contiguous bytes per task per segment.
    pub block: u64,
    /// `-s`: segments.
    pub segments: u64,
    /// `-w`, `-r`.
    pub write: bool,
    pub read: bool,
    /// `-i`: repetitions.
    pub reps: u32,
    /// `-e`: fsync after the write phase.
    pub fsync: bool,
    /// `-Y`: fsync after every write.
    pub fsync_per_write: bool,
    /// `-C`: read another task's data (constant offset).
    pub reorder: bool,
    /// `-Q`: task offset for `-C` and `-Z`.
    pub task_per_node_offset: u32,
    /// `-Z` count: 1 random task offset per task, 2 a random permutation of tasks.
    pub reorder_random: u8,
    /// `-X`: seed for `-Z`; negative means "−seed + repetition".
    pub reorder_seed: i32,
    /// `-z` count: 1 shuffles the transfers, 2 draws random offsets (possibly overlapping).
    pub random_offset: u8,
    /// `-k`: keep the files.
    pub keep: bool,
    /// `-E`: use existing files (do not remove before writing).
    pub use_existing: bool,
    /// `-m`: a new file per repetition.
    pub multi_file: bool,
    /// `-B` / `--posix.odirect`: O_DIRECT.
    pub direct: bool,
    /// `-N`: total tasks (default: one per rank).
    pub tasks: Option<usize>,
    /// `-v` count.
    pub verbose: u8,
    /// As typed, for the header.
    pub command_line: String,
}

impl Default for IorConfig {
    fn default() -> Self {
        IorConfig {
            test_file: PathBuf::from("testFile"),
            file_per_proc: false,
            xfer: 256 * KIB,
            block: MIB,
            segments: 1,
            write: true,
            read: true,
            reps: 1,
            fsync: false,
            fsync_per_write: false,
            reorder: false,
            task_per_node_offset: 1,
            reorder_random: 0,
            reorder_seed: 0,
            random_offset: 0,
            keep: false,
            use_existing: false,
            multi_file: false,
            direct: false,
            tasks: None,
            verbose: 0,
            command_line: String::new(),
        }
    }
}

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    Write,
    Read,
}

impl Access {
    pub fn name(self) -> &'static str {
        match self {
            Access::Write => "write",
            Access::Read => "read",
        }
    }
}

/// One task's timers for one phase, in seconds since the phase's barrier.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct TaskTimes {
    pub open_start: f64,
    pub open_end: f64,
    pub io_start: f64,
    pub io_end: f64,
    pub close_start: f64,
    pub close_end: f64,
    pub bytes: u64,
    pub ops: u64,
}

/// One row of the `Results:` table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IterResult {
    pub access: Access,
    pub iteration: u32,
    /// Aggregate bytes moved by all tasks.
    pub bytes: u64,
    #[serde(rename = "bwMiB")]
    pub bw_mib: f64,
    pub iops: f64,
    /// Best per-task mean time per transfer.
    pub latency: f64,
    #[serde(rename = "blockKiB")]
    pub block_kib: f64,
    #[serde(rename = "xferKiB")]
    pub xfer_kib: f64,
    #[serde(rename = "openTime")]
    pub open_time: f64,
    #[serde(rename = "wrRdTime")]
    pub wr_rd_time: f64,
    #[serde(rename = "closeTime")]
    pub close_time: f64,
    #[serde(rename = "totalTime")]
    pub total_time: f64,
}

/// One row of `Summary of all tests:`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpSummary {
    pub operation: Access,
    #[serde(rename = "API")]
    pub api: String,
    #[serde(rename = "TestID")]
    pub test_id: u32,
    #[serde(rename = "ReferenceNumber")]
    pub reference_number: u32,
    #[serde(rename = "segmentCount")]
    pub segment_count: u64,
    #[serde(rename = "blockSize")]
    pub block_size: u64,
    #[serde(rename = "transferSize")]
    pub transfer_size: u64,
    #[serde(rename = "numTasks")]
    pub num_tasks: usize,
    #[serde(rename = "tasksPerNode")]
    pub tasks_per_node: usize,
    pub repetitions: u32,
    #[serde(rename = "filePerProc")]
    pub file_per_proc: bool,
    #[serde(rename = "reorderTasks")]
    pub reorder_tasks: bool,
    #[serde(rename = "taskPerNodeOffset")]
    pub task_per_node_offset: u32,
    #[serde(rename = "reorderTasksRandom")]
    pub reorder_tasks_random: u8,
    #[serde(rename = "reorderTasksRandomSeed")]
    pub reorder_tasks_random_seed: i32,
    #[serde(rename = "bwMaxMIB")]
    pub bw_max_mib: f64,
    #[serde(rename = "bwMinMIB")]
    pub bw_min_mib: f64,
    #[serde(rename = "bwMeanMIB")]
    pub bw_mean_mib: f64,
    #[serde(rename = "bwStdMIB")]
    pub bw_std_mib: f64,
    #[serde(rename = "OPsMax")]
    pub ops_max: f64,
    #[serde(rename = "OPsMin")]
    pub ops_min: f64,
    #[serde(rename = "OPsMean")]
    pub ops_mean: f64,
    #[serde(rename = "OPsSD")]
    pub ops_sd: f64,
    #[serde(rename = "MeanTime")]
    pub mean_time: f64,
    #[serde(rename = "xsizeMiB")]
    pub xsize_mib: f64,
}

/// File-system figures printed in the header.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FsInfo {
    #[serde(rename = "Path")]
    pub path: String,
    #[serde(rename = "Capacity")]
    pub capacity: String,
    #[serde(rename = "Used Capacity")]
    pub used_capacity: String,
    #[serde(rename = "Inodes")]
    pub inodes: String,
    #[serde(rename = "Used Inodes")]
    pub used_inodes: String,
}

/// A complete IOR run, as rank 0 reports it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IorReport {
    #[serde(rename = "Version")]
    pub version: String,
    #[serde(rename = "Began")]
    pub began: String,
    #[serde(rename = "Command line")]
    pub command_line: String,
    #[serde(rename = "Machine")]
    pub machine: String,
    #[serde(rename = "TestID")]
    pub test_id: u32,
    #[serde(rename = "StartTime")]
    pub start_time: String,
    #[serde(rename = "FS")]
    pub fs: Option<FsInfo>,
    pub backend: String,
    pub config: IorConfig,
    pub nodes: usize,
    pub tasks: usize,
    pub tasks_per_node: usize,
    #[serde(rename = "Results")]
    pub results: Vec<IterResult>,
    /// Removal time per repetition (when files are not kept).
    pub removes: Vec<(u32, f64)>,
    pub summary: Vec<OpSummary>,
    #[serde(rename = "Finished")]
    pub finished: String,
}

/// IOR's CurrentTimeString: `Thu Apr 29 23:23:09 2021`.
pub fn ior_time_now() -> String {
    chrono::Local::now()
        .format("%a %b %e %H:%M:%S %Y")
        .to_string()
}

/// `Linux hostname`, as IOR prints the machine.
pub fn machine() -> String {
    format!("Linux {}", crate::rank::hostname())
}

pub(crate) fn fs_info(fs: &dyn FileSystem, dir: &Path) -> Option<FsInfo> {
    let st = fs.statfs(dir).ok()?;
    let total = st.blocks as f64 * st.block_size as f64;
    let (size, unit) = if total / (1u64 << 30) as f64 > 1024.0 {
        (total / (1u64 << 40) as f64, "TiB")
    } else {
        (total / (1u64 << 30) as f64, "GiB")
    };
    Some(FsInfo {
        path: dir.display().to_string(),
        capacity: format!("{size:.1} {unit}"),
        used_capacity: format!("{:.1}%", st.used_pct()),
        inodes: format!("{:.1} Mi", st.files as f64 / (1u64 << 20) as f64),
        used_inodes: format!("{:.1}%", st.inodes_used_pct()),
    })
}

/// Checks the options the way IOR does before running.
pub fn validate(cfg: &IorConfig, ranks: usize, align: usize) -> Result<usize> {
    let bad = |m: String| Err(BenchError::Usage(m));
    if !cfg.write && !cfg.read {
        return bad("nothing to do: give -w, -r or both".into());
    }
    if cfg.xfer == 0 || cfg.block == 0 || cfg.segments == 0 || cfg.reps == 0 {
        return bad("-t, -b, -s and -i must be greater than 0".into());
    }
    if !cfg.block.is_multiple_of(cfg.xfer) {
        return bad(format!(
            "block size {} must be a multiple of transfer size {}",
            cfg.block, cfg.xfer
        ));
    }
    if cfg.direct
        && (!cfg.xfer.is_multiple_of(align as u64) || !cfg.block.is_multiple_of(align as u64))
    {
        return bad(format!(
            "-B (O_DIRECT) needs -t and -b to be multiples of {align} bytes"
        ));
    }
    if cfg.reorder && cfg.reorder_random > 0 {
        return bad("both constant (-C) and random (-Z) task reordering given; choose one".into());
    }
    if cfg.random_offset > 0 && (cfg.reorder || cfg.reorder_random > 0) && !cfg.file_per_proc {
        return bad("random offsets (-z) with task reordering need a file per task (-F)".into());
    }
    let tasks = cfg.tasks.unwrap_or(ranks);
    if tasks == 0 || !tasks.is_multiple_of(ranks) {
        return bad(format!(
            "{tasks} tasks cannot be spread evenly over {ranks} rank(s)"
        ));
    }
    Ok(tasks)
}

/// The file task `task` uses in repetition `rep`.
pub fn file_name(cfg: &IorConfig, task: usize, rep: u32) -> PathBuf {
    let mut s = cfg.test_file.as_os_str().to_os_string();
    if cfg.multi_file {
        s.push(format!(".{rep}"));
    }
    if cfg.file_per_proc {
        s.push(format!(".{task:08}"));
    }
    PathBuf::from(s)
}

/// Whose data task `task` reads in repetition `rep` (IOR's rank offset for -C, -Z, -Z -Z).
pub fn read_source(
    cfg: &IorConfig,
    task: usize,
    tasks: usize,
    tasks_per_node: usize,
    nodes: usize,
    rep: u32,
) -> usize {
    let iseed = if cfg.reorder_seed < 0 {
        (-(cfg.reorder_seed as i64)) as u64 + rep as u64
    } else {
        cfg.reorder_seed as u64
    };
    let offset = if cfg.reorder {
        // Tasks are laid out in blocks per rank, so a shift by the tasks per node reaches
        // another node; within one node, the neighbour.
        let shift = if nodes > 1 { tasks_per_node } else { 1 };
        (cfg.task_per_node_offset as usize * shift) % tasks
    } else if cfg.reorder_random == 1 {
        let node_offset = (cfg.task_per_node_offset as usize).min(nodes.saturating_sub(1));
        let min = node_offset * tasks_per_node;
        let mut rng = ChaCha8Rng::seed_from_u64(mix_seed(iseed, task as u64, 0x2a));
        if min >= tasks {
            0
        } else {
            rng.gen_range(min..tasks)
        }
    } else if cfg.reorder_random > 1 {
        let p = Permutation::new(tasks as u64, mix_seed(iseed, 0x5a, 0));
        return p.apply(task as u64) as usize;
    } else {
        0
    };
    (task + offset) % tasks
}

/// Byte offset of transfer `i` (0-based, in task order) of task `owner`'s data.
fn offset_of(cfg: &IorConfig, tasks: usize, owner: usize, i: u64) -> u64 {
    let per_block = cfg.block / cfg.xfer;
    let seg = i / per_block;
    let within = (i % per_block) * cfg.xfer;
    if cfg.file_per_proc {
        seg * cfg.block + within
    } else {
        seg * cfg.block * tasks as u64 + owner as u64 * cfg.block + within
    }
}

struct PhaseSpec<'a> {
    cfg: &'a IorConfig,
    access: Access,
    rep: u32,
    tasks: usize,
    tasks_per_node: usize,
    nodes: usize,
}

fn task_phase(
    env: &RunEnv<'_>,
    ps: &PhaseSpec<'_>,
    task: usize,
    t0: Instant,
    bar: &indicatif::ProgressBar,
) -> Result<TaskTimes> {
    let cfg = ps.cfg;
    let fs = env.fs.as_ref();
    let owner = match ps.access {
        Access::Write => task,
        Access::Read => read_source(cfg, task, ps.tasks, ps.tasks_per_node, ps.nodes, ps.rep),
    };
    let path = file_name(cfg, if cfg.file_per_proc { owner } else { 0 }, ps.rep);
    let mut buf = AlignedBuf::new(cfg.xfer as usize, fs.io_alignment()).ctx("allocating", &path)?;
    if ps.access == Access::Write {
        ChaCha8Rng::seed_from_u64(mix_seed(task as u64, ps.rep as u64, 0x10)).fill_bytes(&mut buf);
    }
    let n = cfg.segments * (cfg.block / cfg.xfer);
    let mut tt = TaskTimes {
        open_start: t0.elapsed().as_secs_f64(),
        ..TaskTimes::default()
    };
    let fh: FileHandle = match ps.access {
        Access::Write => fs
            .create(&path, OpenOptions::write().direct(cfg.direct))
            .ctx("opening for write", &path)?,
        Access::Read => fs
            .open(&path, OpenOptions::read().direct(cfg.direct))
            .ctx("opening for read", &path)?,
    };
    tt.open_end = t0.elapsed().as_secs_f64();
    let perm = Permutation::new(n, mix_seed(task as u64, ps.rep as u64, 0x20));
    let mut rng = ChaCha8Rng::seed_from_u64(mix_seed(task as u64, ps.rep as u64, 0x30));
    tt.io_start = t0.elapsed().as_secs_f64();
    let io = (|| -> Result<()> {
        for i in 0..n {
            if env.cancel.is_cancelled() {
                return Err(BenchError::Interrupted(format!(
                    "IOR stopped during {} of {}",
                    ps.access.name(),
                    cfg.test_file.display()
                )));
            }
            let k = match cfg.random_offset {
                0 => i,
                1 => perm.apply(i),
                _ => rng.gen_range(0..n),
            };
            let off = offset_of(cfg, ps.tasks, owner, k);
            match ps.access {
                Access::Write => {
                    backend::write_all_at(fs, fh, &buf, off).ctx("writing", &path)?;
                    if cfg.fsync_per_write {
                        fs.fsync(fh).ctx("fsync", &path)?;
                    }
                }
                Access::Read => {
                    let got = backend::read_full_at(fs, fh, &mut buf, off).ctx("reading", &path)?;
                    if got != buf.len() {
                        return Err(BenchError::Usage(format!(
                            "{}: short read at offset {off} ({got} of {} bytes); was the file \
                             written with the same -b/-s/-t and task count?",
                            path.display(),
                            buf.len()
                        )));
                    }
                }
            }
            tt.bytes += cfg.xfer;
            tt.ops += 1;
            bar.inc(cfg.xfer);
        }
        if ps.access == Access::Write && cfg.fsync {
            fs.fsync(fh).ctx("fsync", &path)?;
        }
        Ok(())
    })();
    tt.io_end = t0.elapsed().as_secs_f64();
    tt.close_start = tt.io_end;
    let closed = fs.close(fh).ctx("closing", &path);
    tt.close_end = t0.elapsed().as_secs_f64();
    io.and(closed)?;
    Ok(tt)
}

/// Reduces all tasks' timers into one row, as IOR's ReduceIterResults does.
pub fn reduce(
    access: Access,
    iteration: u32,
    times: &[TaskTimes],
    xfer: u64,
    block: u64,
) -> IterResult {
    let min = |f: fn(&TaskTimes) -> f64| times.iter().map(f).fold(f64::MAX, f64::min);
    let max = |f: fn(&TaskTimes) -> f64| times.iter().map(f).fold(f64::MIN, f64::max);
    let bytes: u64 = times.iter().map(|t| t.bytes).sum();
    let total = max(|t| t.close_end) - min(|t| t.open_start);
    let access_time = max(|t| t.io_end) - min(|t| t.io_start);
    let latency = times
        .iter()
        .filter(|t| t.ops > 0)
        .map(|t| (t.io_end - t.io_start) / t.ops as f64)
        .fold(f64::MAX, f64::min);
    IterResult {
        access,
        iteration,
        bytes,
        bw_mib: if total > 0.0 {
            bytes as f64 / total / MIB as f64
        } else {
            0.0
        },
        iops: if access_time > 0.0 {
            (bytes / xfer.max(1)) as f64 / access_time
        } else {
            0.0
        },
        latency: if latency == f64::MAX { 0.0 } else { latency },
        block_kib: block as f64 / KIB as f64,
        xfer_kib: xfer as f64 / KIB as f64,
        open_time: max(|t| t.open_end) - min(|t| t.open_start),
        wr_rd_time: access_time,
        close_time: max(|t| t.close_end) - min(|t| t.close_start),
        total_time: total,
    }
}

/// The summary row of one operation over its repetitions (IOR: population deviation).
pub fn summarize_op(
    cfg: &IorConfig,
    access: Access,
    results: &[IterResult],
    tasks: usize,
    tasks_per_node: usize,
) -> Option<OpSummary> {
    let rows: Vec<&IterResult> = results.iter().filter(|r| r.access == access).collect();
    if rows.is_empty() {
        return None;
    }
    let bw: Vec<f64> = rows
        .iter()
        .map(|r| r.bytes as f64 / r.total_time / MIB as f64)
        .collect();
    let ops: Vec<f64> = rows
        .iter()
        .map(|r| r.bytes as f64 / cfg.xfer as f64 / r.total_time)
        .collect();
    let times: Vec<f64> = rows.iter().map(|r| r.total_time).collect();
    let b = Summary::of(&bw, Deviation::Population);
    let o = Summary::of(&ops, Deviation::Population);
    Some(OpSummary {
        operation: access,
        api: "POSIX".into(),
        test_id: 0,
        reference_number: 0,
        segment_count: cfg.segments,
        block_size: cfg.block,
        transfer_size: cfg.xfer,
        num_tasks: tasks,
        tasks_per_node,
        repetitions: cfg.reps,
        file_per_proc: cfg.file_per_proc,
        reorder_tasks: cfg.reorder,
        task_per_node_offset: cfg.task_per_node_offset,
        reorder_tasks_random: cfg.reorder_random,
        reorder_tasks_random_seed: cfg.reorder_seed,
        bw_max_mib: b.max,
        bw_min_mib: b.min,
        bw_mean_mib: b.mean,
        bw_std_mib: b.stddev,
        ops_max: o.max,
        ops_min: o.min,
        ops_mean: o.mean,
        ops_sd: o.stddev,
        mean_time: times.iter().sum::<f64>() / times.len() as f64,
        xsize_mib: rows[0].bytes as f64 / MIB as f64,
    })
}

/// Runs an IOR test. Rank 0 gets the report; other ranks get `None`. When interrupted, the
/// test files this rank wrote are removed (unless `-k`), so nothing is left behind.
pub fn run(env: &RunEnv<'_>, cfg: &IorConfig) -> Result<Option<IorReport>> {
    let res = run_test(env, cfg);
    let interrupted = matches!(res, Err(BenchError::Interrupted(_)));
    if let (true, false, Ok(tasks)) = (
        interrupted,
        cfg.keep,
        validate(cfg, env.world.size(), env.fs.io_alignment()),
    ) {
        let tpr = tasks / env.world.size();
        for rep in 0..cfg.reps {
            for i in 0..tpr {
                let task = env.world.rank() * tpr + i;
                if cfg.file_per_proc || task == 0 {
                    let _ = env.fs.unlink(&file_name(cfg, task, rep));
                }
            }
        }
    }
    res
}

fn run_test(env: &RunEnv<'_>, cfg: &IorConfig) -> Result<Option<IorReport>> {
    let fs = env.fs.as_ref();
    let world = env.world;
    let dir = cfg
        .test_file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    // Every rank checks; a rank that cannot see DIR stops them all.
    world.agree("ior-check", backend::check_dir(fs, &dir))?;
    let tasks = validate(cfg, world.size(), fs.io_alignment())?;
    let tpr = tasks / world.size();
    let nodes = world.count_nodes()?;
    let tasks_per_node = (tasks / nodes.max(1)).max(1);
    let began = ior_time_now();
    let start_time = ior_time_now();
    let mut results = Vec::new();
    let mut removes = Vec::new();
    let space_hint = format!(
        "remove the test files ({}*) to free the space",
        cfg.test_file.display()
    );

    for rep in 0..cfg.reps {
        for access in [Access::Write, Access::Read] {
            if (access == Access::Write && !cfg.write) || (access == Access::Read && !cfg.read) {
                continue;
            }
            if access == Access::Write && !cfg.use_existing {
                // IOR removes an old file before writing unless -E.
                let pre: Result<()> = (|| {
                    let targets: Vec<usize> = if cfg.file_per_proc {
                        (0..tpr).map(|i| world.rank() * tpr + i).collect()
                    } else if world.is_root() {
                        vec![0]
                    } else {
                        vec![]
                    };
                    for t in targets {
                        let p = file_name(cfg, t, rep);
                        match fs.unlink(&p) {
                            Ok(()) => {}
                            Err(e) if backend::is_not_found(&e) => {}
                            Err(e) => return Err(BenchError::io("removing old", &p, e)),
                        }
                    }
                    Ok(())
                })();
                world.agree(&format!("ior-prep-{rep}"), pre)?;
            }
            let ps = PhaseSpec {
                cfg,
                access,
                rep,
                tasks,
                tasks_per_node,
                nodes,
            };
            let total_bytes = tpr as u64 * cfg.segments * cfg.block;
            let bar = env
                .bars()
                .bytes(total_bytes, &format!("{} {}", access.name(), rep));
            world.barrier(&format!("ior-{}-{rep}", access.name()))?;
            let t0 = Instant::now();
            let local: Vec<Result<TaskTimes>> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..tpr)
                    .map(|i| {
                        let ps = &ps;
                        let bar = &bar;
                        s.spawn(move || task_phase(env, ps, world.rank() * tpr + i, t0, bar))
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| {
                            Err(BenchError::Usage("an IOR task panicked".into()))
                        })
                    })
                    .collect()
            });
            bar.finish_and_clear();
            let local: Result<Vec<TaskTimes>> = local.into_iter().collect();
            let local = world
                .agree(&format!("ior-{}-{rep}-done", access.name()), local)
                .map_err(|e| e.with_space_hint(&space_hint))?;
            if let Some(all) =
                world.gather(&format!("ior-{}-{rep}-times", access.name()), &local)?
            {
                let times: Vec<TaskTimes> = all.into_iter().flatten().collect();
                results.push(reduce(access, rep, &times, cfg.xfer, cfg.block));
            }
        }
        if !cfg.keep {
            world.barrier(&format!("ior-remove-{rep}"))?;
            let t = Instant::now();
            let rm: Result<()> = (|| {
                let targets: Vec<usize> = if cfg.file_per_proc {
                    (0..tpr).map(|i| world.rank() * tpr + i).collect()
                } else if world.is_root() {
                    vec![0]
                } else {
                    vec![]
                };
                for task in targets {
                    let p = file_name(cfg, task, rep);
                    match fs.unlink(&p) {
                        Ok(()) => {}
                        Err(e) if backend::is_not_found(&e) => {}
                        Err(e) => return Err(BenchError::io("removing", &p, e)),
                    }
                }
                Ok(())
            })();
            world.agree(&format!("ior-removed-{rep}"), rm)?;
            removes.push((rep, t.elapsed().as_secs_f64()));
        }
    }

    if !world.is_root() {
        return Ok(None);
    }
    let summary = [Access::Write, Access::Read]
        .into_iter()
        .filter_map(|a| summarize_op(cfg, a, &results, tasks, tasks_per_node))
        .collect();
    Ok(Some(IorReport {
        version: IOR_VERSION.to_string(),
        began,
        command_line: cfg.command_line.clone(),
        machine: machine(),
        test_id: 0,
        start_time,
        fs: fs_info(fs, &dir),
        backend: fs.describe(),
        config: cfg.clone(),
        nodes,
        tasks,
        tasks_per_node,
        results,
        removes,
        summary,
        finished: ior_time_now(),
    }))
}

/// IOR's PPDouble: left-justified in 10 columns, precision by magnitude.
fn pp(number: f64, append: &str) -> String {
    if number < 0.0 {
        return format!("   -      {append}");
    }
    let prec = if number < 1.0 {
        6
    } else if number < 3600.0 {
        2
    } else {
        0
    };
    format!("{number:<10.prec$}{append}")
}

/// The `Summary of all tests:` header line.
pub fn summary_header() -> String {
    format!(
        "{:<9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>13} Test# #Tasks tPN reps fPP reord reordoff reordrand seed segcnt {:>8} {:>8} {:>9} {:>5} RefNum",
        "Operation",
        "Max(MiB)",
        "Min(MiB)",
        "Mean(MiB)",
        "StdDev",
        "Max(OPs)",
        "Min(OPs)",
        "Mean(OPs)",
        "StdDev",
        "Mean(s)",
        "Stonewall(s)",
        "Stonewall(MiB)",
        " blksiz",
        "xsize",
        "aggs(MiB)",
        "API"
    )
}

/// One `Summary of all tests:` row, column for column as IOR prints it.
pub fn summary_row(s: &OpSummary) -> String {
    format!(
        "{:<9} {:10.2} {:10.2} {:10.2} {:10.2} {:10.2} {:10.2} {:10.2} {:10.2} {:10.5} {:>10} {:>13} {:5} {:6} {:3} {:4} {:3} {:5} {:8} {:9} {:4} {:6} {:8} {:8} {:9.1} {:>3} {:6}",
        s.operation.name(),
        s.bw_max_mib,
        s.bw_min_mib,
        s.bw_mean_mib,
        s.bw_std_mib,
        s.ops_max,
        s.ops_min,
        s.ops_mean,
        s.ops_sd,
        s.mean_time,
        "NA",
        "NA",
        s.test_id,
        s.num_tasks,
        s.tasks_per_node,
        s.repetitions,
        u8::from(s.file_per_proc),
        u8::from(s.reorder_tasks),
        s.task_per_node_offset,
        s.reorder_tasks_random,
        s.reorder_tasks_random_seed,
        s.segment_count,
        s.block_size,
        s.transfer_size,
        s.xsize_mib,
        s.api,
        s.reference_number
    )
}

/// Prints the report as IOR does.
pub fn print_text(r: &IorReport, out: &mut dyn Write) -> io::Result<()> {
    let c = &r.config;
    let kv = |out: &mut dyn Write, k: &str, v: &str| writeln!(out, "{k:<20}: {v}");
    // Says what produced it: the layout is IOR's, so IOR's readers can parse the rest,
    // but a first line like IOR's own would pass these numbers off as IOR's.
    writeln!(
        out,
        "nacre bench ior {}: IOR-{} options and report format (not IOR itself)",
        env!("CARGO_PKG_VERSION"),
        r.version
    )?;
    kv(out, "Began", &r.began)?;
    kv(out, "Command line", &r.command_line)?;
    kv(out, "Machine", &r.machine)?;
    kv(out, "TestID", &r.test_id.to_string())?;
    kv(out, "StartTime", &r.start_time)?;
    if let Some(f) = &r.fs {
        kv(out, "Path", &f.path)?;
        writeln!(
            out,
            "{:<20}: {}   Used FS: {}   Inodes: {}   Used Inodes: {}",
            "FS", f.capacity, f.used_capacity, f.inodes, f.used_inodes
        )?;
    }
    writeln!(out, "\nOptions: ")?;
    kv(out, "api", "POSIX")?;
    kv(out, "apiVersion", &r.backend)?;
    kv(out, "test filename", &c.test_file.display().to_string())?;
    kv(
        out,
        "access",
        if c.file_per_proc {
            "file-per-process"
        } else {
            "single-shared-file"
        },
    )?;
    kv(out, "type", "independent")?;
    kv(out, "segments", &c.segments.to_string())?;
    kv(
        out,
        "ordering in a file",
        if c.random_offset > 0 {
            "random"
        } else {
            "sequential"
        },
    )?;
    if c.reorder {
        kv(out, "ordering inter file", "constant task offset")?;
        kv(out, "task offset", &c.task_per_node_offset.to_string())?;
    } else if c.reorder_random > 0 {
        kv(out, "ordering inter file", "random task offset")?;
        kv(out, "task offset", &c.task_per_node_offset.to_string())?;
        kv(out, "reorder random seed", &c.reorder_seed.to_string())?;
    } else {
        kv(out, "ordering inter file", "no tasks offsets")?;
    }
    kv(out, "nodes", &r.nodes.to_string())?;
    kv(out, "tasks", &r.tasks.to_string())?;
    kv(out, "clients per node", &r.tasks_per_node.to_string())?;
    kv(out, "repetitions", &c.reps.to_string())?;
    kv(out, "xfersize", &units::ior_human(c.xfer))?;
    kv(out, "blocksize", &units::ior_human(c.block))?;
    kv(
        out,
        "aggregate filesize",
        &units::ior_human(c.block * c.segments * r.tasks as u64),
    )?;
    if c.direct {
        kv(out, "useO_DIRECT", "1")?;
    }
    writeln!(out, "\nResults: \n")?;
    writeln!(
        out,
        "access    bw(MiB/s)  IOPS       Latency(s)  block(KiB) xfer(KiB)  open(s)    wr/rd(s)   close(s)   total(s)   iter"
    )?;
    writeln!(
        out,
        "------    ---------  ----       ----------  ---------- ---------  --------   --------   --------   --------   ----"
    )?;
    for rep in 0..c.reps {
        for row in r.results.iter().filter(|x| x.iteration == rep) {
            writeln!(
                out,
                "{:<10}{}{}{}{}{}{}{}{}{}{:<4}",
                row.access.name(),
                pp(row.bw_mib, " "),
                pp(row.iops, " "),
                pp(row.latency, "  "),
                pp(row.block_kib, " "),
                pp(row.xfer_kib, " "),
                pp(row.open_time, " "),
                pp(row.wr_rd_time, " "),
                pp(row.close_time, " "),
                pp(row.total_time, " "),
                row.iteration
            )?;
        }
        if c.verbose > 0 {
            for (_, t) in r.removes.iter().filter(|(i, _)| *i == rep) {
                writeln!(
                    out,
                    "remove    -          -          -           -          -          -          -          -          {}{:<4}",
                    pp(*t, " "),
                    rep
                )?;
            }
        }
    }
    let max_of = |a: Access| {
        r.results
            .iter()
            .filter(|x| x.access == a)
            .map(|x| x.bytes as f64 / x.total_time)
            .fold(0.0f64, f64::max)
    };
    if c.write {
        let m = max_of(Access::Write);
        writeln!(
            out,
            "Max Write: {:.2} MiB/sec ({:.2} MB/sec)",
            m / MIB as f64,
            m / 1e6
        )?;
    }
    if c.read {
        let m = max_of(Access::Read);
        writeln!(
            out,
            "Max Read:  {:.2} MiB/sec ({:.2} MB/sec)",
            m / MIB as f64,
            m / 1e6
        )?;
    }
    writeln!(out, "\nSummary of all tests:")?;
    writeln!(out, "{}", summary_header())?;
    for s in &r.summary {
        writeln!(out, "{}", summary_row(s))?;
    }
    kv(out, "Finished", &r.finished)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_table_matches_ior_columns() {
        // A row IOR 4 printed (from a published run), rebuilt from its numbers.
        let expected_header = "Operation   Max(MiB)   Min(MiB)  Mean(MiB)     StdDev   Max(OPs)   Min(OPs)  Mean(OPs)     StdDev    Mean(s) Stonewall(s) Stonewall(MiB) Test# #Tasks tPN reps fPP reord reordoff reordrand seed segcnt   blksiz    xsize aggs(MiB)   API RefNum";
        assert_eq!(summary_header(), expected_header);
        let s = OpSummary {
            operation: Access::Write,
            api: "POSIX".into(),
            test_id: 0,
            reference_number: 0,
            segment_count: 1,
            block_size: 1_048_576,
            transfer_size: 262_144,
            num_tasks: 8,
            tasks_per_node: 8,
            repetitions: 1,
            file_per_proc: false,
            reorder_tasks: false,
            task_per_node_offset: 1,
            reorder_tasks_random: 0,
            reorder_tasks_random_seed: 0,
            bw_max_mib: 912.40,
            bw_min_mib: 912.40,
            bw_mean_mib: 912.40,
            bw_std_mib: 0.0,
            ops_max: 3649.62,
            ops_min: 3649.62,
            ops_mean: 3649.62,
            ops_sd: 0.0,
            mean_time: 0.00877,
            xsize_mib: 8.0,
        };
        assert_eq!(
            summary_row(&s),
            "write         912.40     912.40     912.40       0.00    3649.62    3649.62    3649.62       0.00    0.00877         NA            NA     0      8   8    1   0     0        1         0    0      1  1048576   262144       8.0 POSIX      0"
        );
    }

    #[test]
    fn pp_double_like_ior() {
        assert_eq!(pp(912.4, " "), "912.40     ");
        assert_eq!(pp(0.001868, "  "), "0.001868    ");
        assert_eq!(pp(4282.3, " "), "4282       ");
        assert_eq!(pp(-1.0, " "), "   -       ");
    }

    #[test]
    fn reduce_takes_first_start_and_last_end() {
        let a = TaskTimes {
            open_start: 0.0,
            open_end: 0.1,
            io_start: 0.1,
            io_end: 1.1,
            close_start: 1.1,
            close_end: 1.2,
            bytes: 100 * MIB,
            ops: 100,
        };
        let b = TaskTimes {
            open_start: 0.05,
            open_end: 0.2,
            io_start: 0.2,
            io_end: 1.8,
            close_start: 1.8,
            close_end: 2.0,
            bytes: 100 * MIB,
            ops: 100,
        };
        let r = reduce(Access::Write, 0, &[a, b], MIB, 100 * MIB);
        assert!((r.total_time - 2.0).abs() < 1e-12);
        assert!((r.bw_mib - 100.0).abs() < 1e-9);
        assert!((r.open_time - 0.2).abs() < 1e-12);
        assert!((r.wr_rd_time - 1.7).abs() < 1e-12);
        assert!((r.iops - 200.0 / 1.7).abs() < 1e-9);
        assert!((r.latency - 0.01).abs() < 1e-12);
    }

    #[test]
    fn reorder_sources() {
        let mut cfg = IorConfig {
            reorder: true,
            ..IorConfig::default()
        };
        // One node: the neighbour's data.
        assert_eq!(read_source(&cfg, 0, 4, 4, 1, 0), 1);
        assert_eq!(read_source(&cfg, 3, 4, 4, 1, 0), 0);
        // Two nodes of two tasks: the other node.
        assert_eq!(read_source(&cfg, 0, 4, 2, 2, 0), 2);
        cfg.reorder = false;
        cfg.reorder_random = 2;
        let mut seen: Vec<usize> = (0..8).map(|t| read_source(&cfg, t, 8, 8, 1, 0)).collect();
        seen.sort();
        assert_eq!(seen, (0..8).collect::<Vec<_>>(), "a permutation");
        cfg.reorder_random = 1;
        cfg.task_per_node_offset = 1;
        for t in 0..8 {
            let s = read_source(&cfg, t, 8, 2, 4, 0);
            let off = (s + 8 - t) % 8;
            assert!(off >= 2, "offset {off} stays off the node");
        }
    }

    #[test]
    fn names_and_offsets() {
        let mut cfg = IorConfig {
            test_file: PathBuf::from("/x/ior"),
            file_per_proc: true,
            xfer: 4,
            block: 16,
            segments: 2,
            ..IorConfig::default()
        };
        assert_eq!(file_name(&cfg, 3, 0), PathBuf::from("/x/ior.00000003"));
        cfg.multi_file = true;
        assert_eq!(file_name(&cfg, 3, 2), PathBuf::from("/x/ior.2.00000003"));
        assert_eq!(offset_of(&cfg, 4, 3, 5), 16 + 4);
        cfg.file_per_proc = false;
        // Shared file, segment 1, task 3, transfer 1: 1×16×4 + 3×16 + 4.
        assert_eq!(offset_of(&cfg, 4, 3, 5), 64 + 48 + 4);
    }

    #[test]
    fn validation() {
        let cfg = IorConfig {
            block: 10,
            xfer: 4,
            ..IorConfig::default()
        };
        assert!(validate(&cfg, 1, 4096).is_err());
        let cfg = IorConfig {
            reorder: true,
            reorder_random: 1,
            ..IorConfig::default()
        };
        assert!(validate(&cfg, 1, 4096).is_err());
        let cfg = IorConfig {
            tasks: Some(3),
            ..IorConfig::default()
        };
        assert!(validate(&cfg, 2, 4096).is_err());
        assert_eq!(validate(&IorConfig::default(), 2, 4096).ok(), Some(2));
    }
}
