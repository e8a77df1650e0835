//! PaF, Populate and Fragment: ages a file system to a given capacity and fragmentation level.
//!
//! Each generation of the spec populates (T threads per rank write their share of the
//! generation's files, in the layout of [`plan`]) and then fragments (each thread removes its
//! chosen fraction), with a barrier across all ranks between the phases. The journal in
//! `DIR/.nacre-paf/` records the plan and every thread's progress, so an interrupted run
//! (Ctrl-C, a full disk, a lost node) continues with `--resume` or is removed with `--scrub`.

pub mod plan;
pub mod spec;

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::backend::{self, AlignedBuf, FileKind, FileSystem, FsStat, OpenOptions};
use crate::cancel::Cancel;
use crate::error::{BenchError, IoContext, Result};
use crate::units;
use plan::{Plan, TREE_DIR, TreeShape};
use spec::PafSpec;

/// Journal directory under DIR.
pub const JOURNAL_DIR: &str = ".nacre-paf";
const JOURNAL_FILE: &str = "journal.json";
const PROGRESS_DIR: &str = "progress";
/// A thread checkpoints its progress after this many files…
const CHECKPOINT_FILES: u64 = 64;
/// …or after this long, whichever comes first.
const CHECKPOINT_EVERY: Duration = Duration::from_secs(2);
/// Journal format version.
const JOURNAL_VERSION: u32 = 1;

/// How to run PaF.
#[derive(Debug, Clone)]
pub struct PafOptions {
    /// Writer threads per rank.
    pub threads: usize,
    /// Bytes per write call.
    pub xfer: u64,
    pub shape: TreeShape,
    /// Write with O_DIRECT.
    pub direct: bool,
    /// fsync every file before closing it.
    pub fsync: bool,
    /// Continue the run recorded in the journal.
    pub resume: bool,
}

impl Default for PafOptions {
    fn default() -> Self {
        PafOptions {
            threads: 4,
            xfer: units::MIB,
            shape: TreeShape::default(),
            direct: false,
            fsync: false,
            resume: false,
        }
    }
}

/// Everything a PaF command needs from its surroundings.
pub type PafEnv<'a> = crate::env::RunEnv<'a>;

/// State of a run as the journal records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Running,
    Interrupted,
    NoSpace,
    Failed,
    Complete,
}

/// The journal's header, written by rank 0.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Journal {
    pub version: u32,
    pub plan: Plan,
    pub ranks: usize,
    pub threads_per_rank: usize,
    pub xfer: u64,
    pub direct: bool,
    pub started: String,
    pub state: RunState,
    pub message: Option<String>,
    pub fs_before: Option<FsStat>,
}

/// Work one thread has done, per generation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GenCounters {
    pub files_written: u64,
    pub bytes_written: u64,
    pub files_removed: u64,
    pub bytes_removed: u64,
}

/// Where a thread stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "stage")]
pub enum Stage {
    /// Writing generation `generation`; `next_seq` is the first file not known to be complete.
    Populating { next_seq: u64 },
    /// Removing; the first `done` of the generation's removals are done.
    Fragmenting { done: u64 },
    /// Generation finished.
    Done,
}

/// One thread's checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadProgress {
    pub gtn: u64,
    pub generation: usize,
    pub stage: Stage,
    pub counters: Vec<GenCounters>,
}

/// Per-generation figures in the summary.
#[derive(Debug, Clone, Serialize)]
pub struct GenSummary {
    pub generation: usize,
    pub capacity_pct: u32,
    pub frag_pct: u32,
    pub file_size: u64,
    pub target_bytes: u64,
    pub files_planned: u64,
    pub files_written: u64,
    pub bytes_written: u64,
    pub files_removed: u64,
    pub bytes_removed: u64,
    pub populate_secs: f64,
    pub fragment_secs: f64,
}

/// What a PaF run reports.
#[derive(Debug, Clone, Serialize)]
pub struct PafSummary {
    pub spec: String,
    pub kind: String,
    pub dir: PathBuf,
    pub state: RunState,
    pub resumed: bool,
    pub capacity_kb: u64,
    pub capacity_bytes: u64,
    pub seed: u64,
    pub ranks: usize,
    pub threads_per_rank: usize,
    pub threads_total: u64,
    pub generations: Vec<GenSummary>,
    pub files_written: u64,
    pub bytes_written: u64,
    pub files_removed: u64,
    pub bytes_removed: u64,
    pub files_remaining: u64,
    pub bytes_remaining: u64,
    /// Bytes remaining as a percentage of the capacity.
    pub capacity_reached_pct: f64,
    pub fs_used_before_pct: Option<f64>,
    pub fs_used_after_pct: Option<f64>,
    pub populate_secs: f64,
    pub fragment_secs: f64,
    pub total_secs: f64,
    /// Write rate of this invocation's populate phases.
    pub write_mib_per_sec: f64,
    /// Removal rate of this invocation's fragment phases.
    pub removes_per_sec: f64,
}

/// What `--scrub` reports.
#[derive(Debug, Clone, Serialize)]
pub struct ScrubSummary {
    pub dir: PathBuf,
    pub entries_removed: u64,
    pub foreign_entries_kept: u64,
    pub secs: f64,
}

fn journal_dir(dir: &Path) -> PathBuf {
    dir.join(JOURNAL_DIR)
}

fn progress_path(dir: &Path, gtn: u64) -> PathBuf {
    journal_dir(dir)
        .join(PROGRESS_DIR)
        .join(plan::gtn_name(gtn))
}

/// Writes `value` as JSON to `path` atomically (temporary file, then rename).
pub(crate) fn write_json_atomic<T: Serialize>(
    fs: &dyn FileSystem,
    path: &Path,
    value: &T,
) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(value)
        .map_err(|e| BenchError::Usage(format!("encoding {}: {e}", path.display())))?;
    let tmp = path.with_extension("tmp");
    let fh = fs
        .create(&tmp, OpenOptions::write().truncate(true))
        .ctx("creating", &tmp)?;
    let w = backend::write_all_at(fs, fh, &bytes, 0);
    let c = fs.close(fh);
    w.and(c).ctx("writing", &tmp)?;
    fs.rename(&tmp, path).ctx("renaming", path)
}

/// Reads a JSON file through the backend; `Ok(None)` when it does not exist.
pub(crate) fn read_json<T: for<'de> Deserialize<'de>>(
    fs: &dyn FileSystem,
    path: &Path,
) -> Result<Option<T>> {
    let fh = match fs.open(path, OpenOptions::read()) {
        Ok(fh) => fh,
        Err(e) if backend::is_not_found(&e) => return Ok(None),
        Err(e) => return Err(BenchError::io("opening", path, e)),
    };
    let res = (|| -> io::Result<Vec<u8>> {
        let size = fs.fstat(fh)?.size;
        if size > 64 << 20 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "file too large"));
        }
        let mut buf = vec![0u8; size as usize];
        let n = backend::read_full_at(fs, fh, &mut buf, 0)?;
        buf.truncate(n);
        Ok(buf)
    })();
    let _ = fs.close(fh);
    let bytes = res.ctx("reading", path)?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| BenchError::Parse {
            path: path.display().to_string(),
            line: e.line() as u64,
            msg: e.to_string(),
        })
}

/// Reads the journal of the run in `dir`, if any.
pub fn read_journal(fs: &dyn FileSystem, dir: &Path) -> Result<Option<Journal>> {
    read_json(fs, &journal_dir(dir).join(JOURNAL_FILE))
}

fn set_state(
    fs: &dyn FileSystem,
    dir: &Path,
    state: RunState,
    message: Option<String>,
) -> Result<()> {
    if let Some(mut j) = read_journal(fs, dir)? {
        j.state = state;
        j.message = message;
        write_json_atomic(fs, &journal_dir(dir).join(JOURNAL_FILE), &j)?;
    }
    Ok(())
}

/// A fresh random seed for non-deterministic specs.
pub(crate) fn random_seed() -> u64 {
    let mut b = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| io::Read::read_exact(&mut f, &mut b))
        .is_ok()
    {
        return u64::from_le_bytes(b);
    }
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    plan::mix_seed(t, std::process::id() as u64, 0)
}

/// Computes the plan a new run of `spec` would follow, without writing anything.
pub fn plan_for(
    fs: &dyn FileSystem,
    dir: &Path,
    spec: &PafSpec,
    threads_total: u64,
    shape: TreeShape,
) -> Result<Plan> {
    let capacity_kb = match spec.capacity_kb {
        Some(n) => n,
        None => fs.statfs(dir).ctx("statfs", dir)?.avail_kb(),
    };
    let seed = spec.seed.unwrap_or_else(random_seed);
    Plan::new(spec, capacity_kb, seed, threads_total, shape)
}

/// Runs (or resumes) PaF in `dir`.
pub fn run(
    env: &PafEnv<'_>,
    dir: &Path,
    spec: Option<&PafSpec>,
    opts: &PafOptions,
) -> Result<PafSummary> {
    let fs = env.fs.as_ref();
    let world = env.world;
    // Every rank checks; a rank that cannot see DIR stops them all.
    world.agree("paf-check", backend::check_dir(fs, dir))?;
    if opts.threads == 0 {
        return Err(BenchError::Usage("--threads must be at least 1".into()));
    }
    if opts.xfer == 0 {
        return Err(BenchError::Usage("--xfer must be greater than 0".into()));
    }
    let started = Instant::now();

    // Rank 0 decides the plan (and a random seed) and records it; the others read it.
    let setup: Result<Journal> = if world.is_root() {
        setup_journal(fs, dir, spec, opts, world.size())
    } else {
        Ok(placeholder_journal())
    };
    let setup = world.agree("paf-setup", setup)?;
    let journal: Journal = world.broadcast("paf-journal", world.is_root().then_some(&setup))?;
    let plan = journal.plan.clone();
    if opts.direct
        && plan
            .gens
            .iter()
            .any(|g| g.file_size % fs.io_alignment() as u64 != 0)
    {
        return Err(BenchError::Usage(format!(
            "--direct needs file sizes that are multiples of {} bytes",
            fs.io_alignment()
        )));
    }
    let resumed = opts.resume;
    let threads = journal.threads_per_rank;
    let first_gtn = (world.rank() * threads) as u64;

    // Each thread's starting point: a fresh start, or its checkpoint.
    let mut progress: Vec<ThreadProgress> = Vec::with_capacity(threads);
    for t in 0..threads as u64 {
        let gtn = first_gtn + t;
        let p = if resumed {
            read_json::<ThreadProgress>(fs, &progress_path(dir, gtn))?
        } else {
            None
        };
        progress.push(p.unwrap_or_else(|| ThreadProgress {
            gtn,
            generation: 0,
            stage: Stage::Populating {
                next_seq: plan.seq_start(0, gtn),
            },
            counters: vec![GenCounters::default(); plan.gens.len()],
        }));
    }

    let mut gen_times = vec![(0.0f64, 0.0f64); plan.gens.len()];
    let outcome = (|| -> Result<()> {
        for (g, times) in gen_times.iter_mut().enumerate() {
            let t0 = Instant::now();
            let res = phase(env, dir, &plan, opts, &mut progress, g, Phase::Populate);
            world.agree(&format!("paf-gen{g}-populated"), res)?;
            times.0 = t0.elapsed().as_secs_f64();
            let t1 = Instant::now();
            let res = phase(env, dir, &plan, opts, &mut progress, g, Phase::Fragment);
            world.agree(&format!("paf-gen{g}-fragmented"), res)?;
            times.1 = t1.elapsed().as_secs_f64();
        }
        Ok(())
    })();

    // Record how the run ended, whatever happened.
    let state = match &outcome {
        Ok(()) => RunState::Complete,
        Err(BenchError::Interrupted(_)) => RunState::Interrupted,
        Err(e) if e.is_no_space() => RunState::NoSpace,
        Err(e) if env.cancel.is_cancelled() && matches!(e, BenchError::Rendezvous(_)) => {
            RunState::Interrupted
        }
        Err(_) => RunState::Failed,
    };
    if world.is_root() {
        let msg = outcome.as_ref().err().map(|e| e.to_string());
        if let Err(e) = set_state(fs, dir, state, msg) {
            tracing::warn!("could not update the journal: {e}");
        }
    }
    if let Err(e) = outcome {
        let hint = format!(
            "the journal in {} records the progress: rerun with --resume to continue or \
             --scrub to remove what was made",
            journal_dir(dir).display()
        );
        return Err(match e {
            BenchError::Interrupted(m) => BenchError::Interrupted(format!("{m}; {hint}")),
            e if e.is_no_space() => e.with_space_hint(&hint),
            e => e,
        });
    }

    let all = world.gather("paf-counters", &progress)?;
    let fs_after = fs.statfs(dir).ok();
    let total_secs = started.elapsed().as_secs_f64();
    let summary = all.map(|ranks| {
        let threads_all: Vec<ThreadProgress> = ranks.into_iter().flatten().collect();
        summarize(
            dir,
            &journal,
            &plan,
            &threads_all,
            &gen_times,
            fs_after,
            total_secs,
            resumed,
        )
    });
    world.barrier("paf-done")?;
    match summary {
        Some(s) => Ok(s),
        // Ranks other than 0 report nothing; give them their own view.
        None => Ok(summarize(
            dir, &journal, &plan, &progress, &gen_times, fs_after, total_secs, resumed,
        )),
    }
}

fn placeholder_journal() -> Journal {
    Journal {
        version: JOURNAL_VERSION,
        plan: Plan {
            spec: PafSpec {
                generations: Vec::new(),
                seed: None,
                sizes: Vec::new(),
                capacity_kb: None,
            },
            capacity_kb: 0,
            seed: 0,
            threads_total: 0,
            shape: TreeShape::default(),
            gens: Vec::new(),
        },
        ranks: 0,
        threads_per_rank: 0,
        xfer: 0,
        direct: false,
        started: String::new(),
        state: RunState::Running,
        message: None,
        fs_before: None,
    }
}

fn setup_journal(
    fs: &dyn FileSystem,
    dir: &Path,
    spec: Option<&PafSpec>,
    opts: &PafOptions,
    ranks: usize,
) -> Result<Journal> {
    let jpath = journal_dir(dir).join(JOURNAL_FILE);
    let existing = read_journal(fs, dir)?;
    if opts.resume {
        let mut j = existing.ok_or_else(|| {
            BenchError::Usage(format!(
                "--resume: no PaF run recorded in {} (no {})",
                dir.display(),
                jpath.display()
            ))
        })?;
        if let Some(s) = spec
            && (s.generations != j.plan.spec.generations
                || s.sizes != j.plan.spec.sizes
                || (s.seed.is_some() && s.seed != j.plan.spec.seed)
                || (s.capacity_kb.is_some() && s.capacity_kb != j.plan.spec.capacity_kb))
        {
            return Err(BenchError::Usage(format!(
                "--resume: {s} differs from the recorded run {}",
                j.plan.spec
            )));
        }
        // Thread numbers are part of the plan: resume with the same ranks (threads per rank
        // come from the journal).
        if j.ranks != ranks {
            return Err(BenchError::Usage(format!(
                "--resume: the run was started with {} rank(s); this is {ranks}",
                j.ranks
            )));
        }
        if j.state == RunState::Complete {
            tracing::info!("the recorded run is already complete");
        }
        j.state = RunState::Running;
        j.message = None;
        write_json_atomic(fs, &jpath, &j)?;
        return Ok(j);
    }
    if let Some(j) = existing {
        return Err(BenchError::Usage(format!(
            "{} already holds a PaF run ({}, state {:?}); use --resume to continue it or \
             --scrub to remove it",
            dir.display(),
            j.plan.spec,
            j.state
        )));
    }
    let spec = spec.ok_or_else(|| {
        BenchError::Usage("a PaF spec is needed to start a run (e.g. PAF:70.30@264M)".into())
    })?;
    let fs_before = fs.statfs(dir).ok();
    let plan = plan_for(fs, dir, spec, (ranks * opts.threads) as u64, opts.shape)?;
    let j = Journal {
        version: JOURNAL_VERSION,
        plan,
        ranks,
        threads_per_rank: opts.threads,
        xfer: opts.xfer,
        direct: opts.direct,
        started: chrono::Local::now().to_rfc3339(),
        state: RunState::Running,
        message: None,
        fs_before,
    };
    backend::mkdir_all(fs, &journal_dir(dir).join(PROGRESS_DIR))
        .ctx("creating journal directory", &journal_dir(dir))?;
    write_json_atomic(fs, &jpath, &j)?;
    Ok(j)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Populate,
    Fragment,
}

/// Runs one phase of generation `g` on this rank's threads.
fn phase(
    env: &PafEnv<'_>,
    dir: &Path,
    plan: &Plan,
    opts: &PafOptions,
    progress: &mut [ThreadProgress],
    g: usize,
    ph: Phase,
) -> Result<()> {
    let fs = env.fs.as_ref();
    // A sibling's failure (a full disk) stops the other threads promptly.
    let stop = Cancel::new();
    let (total, label) = match ph {
        Phase::Populate => (
            progress
                .iter()
                .map(|p| plan.files_of(g, p.gtn) * plan.gens[g].file_size)
                .sum::<u64>(),
            format!("gen {} populate", g + 1),
        ),
        Phase::Fragment => (
            progress
                .iter()
                .map(|p| plan.removals_of(g, p.gtn))
                .sum::<u64>(),
            format!("gen {} fragment", g + 1),
        ),
    };
    let bar = if env.world.is_root() {
        match ph {
            Phase::Populate => env.bars().bytes(total, &label),
            Phase::Fragment => env.bars().items(total, &label),
        }
    } else {
        indicatif::ProgressBar::hidden()
    };
    let results: Vec<Result<()>> = std::thread::scope(|s| {
        let handles: Vec<_> = progress
            .iter_mut()
            .map(|p| {
                let stop = &stop;
                let bar = &bar;
                s.spawn(move || {
                    let r = match ph {
                        Phase::Populate => populate_thread(env, dir, plan, opts, p, g, stop, bar),
                        Phase::Fragment => fragment_thread(env, dir, plan, p, g, stop, bar),
                    };
                    if r.is_err() {
                        stop.cancel();
                    }
                    // Record where the thread stopped, even on failure.
                    let c = write_json_atomic(fs, &progress_path(dir, p.gtn), &*p);
                    r.and(c)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(BenchError::Usage("a worker thread panicked".into())))
            })
            .collect()
    });
    bar.finish_and_clear();
    // Report the most telling error: a real failure rather than a sibling's "stopped".
    let mut errors: Vec<BenchError> = results.into_iter().filter_map(|r| r.err()).collect();
    let is_sibling_stop = |e: &BenchError| matches!(e, BenchError::Interrupted(m) if m == STOPPED);
    if let Some(i) = errors.iter().position(|e| !is_sibling_stop(e)) {
        return Err(errors.swap_remove(i));
    }
    errors.into_iter().next().map_or(Ok(()), Err)
}

/// What a thread reports when it stops because a sibling failed.
const STOPPED: &str = "stopped";

fn check_stop(env: &PafEnv<'_>, stop: &Cancel) -> Result<()> {
    if env.cancel.is_cancelled() {
        return Err(BenchError::Interrupted(
            "stopped by SIGINT or SIGTERM".into(),
        ));
    }
    if stop.is_cancelled() {
        return Err(BenchError::Interrupted(STOPPED.into()));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn populate_thread(
    env: &PafEnv<'_>,
    dir: &Path,
    plan: &Plan,
    opts: &PafOptions,
    p: &mut ThreadProgress,
    g: usize,
    stop: &Cancel,
    bar: &indicatif::ProgressBar,
) -> Result<()> {
    let fs = env.fs.as_ref();
    let first = plan.seq_start(g, p.gtn);
    let end = first + plan.files_of(g, p.gtn);
    let next = match (p.generation.cmp(&g), p.stage) {
        (std::cmp::Ordering::Greater, _) => return Ok(()),
        (std::cmp::Ordering::Equal, Stage::Populating { next_seq }) => next_seq.max(first),
        (std::cmp::Ordering::Equal, _) => return Ok(()),
        // Fresh thread state or a thread behind by a generation: start this one.
        (std::cmp::Ordering::Less, _) => first,
    };
    p.generation = g;
    p.stage = Stage::Populating { next_seq: next };
    let size = plan.gens[g].file_size;
    bar.inc((next - first) * size);
    let xfer = opts.xfer.min(size).max(1) as usize;
    let mut buf = AlignedBuf::new(xfer, fs.io_alignment()).ctx("allocating", dir)?;
    ChaCha8Rng::seed_from_u64(plan::mix_seed(plan.seed, g as u64, p.gtn)).fill_bytes(&mut buf);
    let mut current_dir: Option<PathBuf> = None;
    let mut since = (0u64, Instant::now());
    for seq in next..end {
        check_stop(env, stop)?;
        let d = plan.dir_of(dir, p.gtn, seq);
        if current_dir.as_deref() != Some(d.as_path()) {
            backend::mkdir_all(fs, &d).ctx("creating directory", &d)?;
            current_dir = Some(d.clone());
        }
        let path = d.join(Plan::file_name(p.gtn, seq));
        let fh = fs
            .create(
                &path,
                OpenOptions::write().truncate(true).direct(opts.direct),
            )
            .ctx("creating", &path)?;
        let mut off = 0u64;
        let mut res = Ok(());
        while off < size {
            let n = ((size - off) as usize).min(xfer);
            if let Err(e) = backend::write_all_at(fs, fh, &buf[..n], off) {
                res = Err(e);
                break;
            }
            off += n as u64;
            bar.inc(n as u64);
        }
        if res.is_ok() && opts.fsync {
            res = fs.fsync(fh);
        }
        let closed = fs.close(fh);
        res.and(closed).ctx("writing", &path)?;
        let c = &mut p.counters[g];
        c.files_written += 1;
        c.bytes_written += size;
        p.stage = Stage::Populating { next_seq: seq + 1 };
        since.0 += 1;
        if since.0 >= CHECKPOINT_FILES || since.1.elapsed() >= CHECKPOINT_EVERY {
            write_json_atomic(fs, &progress_path(dir, p.gtn), &*p)?;
            since = (0, Instant::now());
        }
    }
    p.stage = Stage::Fragmenting { done: 0 };
    Ok(())
}

fn fragment_thread(
    env: &PafEnv<'_>,
    dir: &Path,
    plan: &Plan,
    p: &mut ThreadProgress,
    g: usize,
    stop: &Cancel,
    bar: &indicatif::ProgressBar,
) -> Result<()> {
    let fs = env.fs.as_ref();
    let done = match (p.generation.cmp(&g), p.stage) {
        (std::cmp::Ordering::Greater, _) | (std::cmp::Ordering::Equal, Stage::Done) => {
            return Ok(());
        }
        (std::cmp::Ordering::Equal, Stage::Fragmenting { done }) => done,
        _ => {
            return Err(BenchError::Usage(format!(
                "thread {} reached fragmentation of generation {} before populating it",
                plan::gtn_name(p.gtn),
                g + 1
            )));
        }
    };
    let size = plan.gens[g].file_size;
    bar.inc(done);
    let mut since = (0u64, Instant::now());
    for (i, seq) in (done + 1..).zip(plan.removal_seqs(g, p.gtn).skip(done as usize)) {
        check_stop(env, stop)?;
        let path = plan.path_of(dir, p.gtn, seq);
        match fs.unlink(&path) {
            Ok(()) => {
                let c = &mut p.counters[g];
                c.files_removed += 1;
                c.bytes_removed += size;
            }
            // Already removed by the interrupted run this one resumes.
            Err(e) if backend::is_not_found(&e) => {}
            Err(e) => return Err(BenchError::io("removing", &path, e)),
        }
        p.stage = Stage::Fragmenting { done: i };
        bar.inc(1);
        since.0 += 1;
        if since.0 >= CHECKPOINT_FILES || since.1.elapsed() >= CHECKPOINT_EVERY {
            write_json_atomic(fs, &progress_path(dir, p.gtn), &*p)?;
            since = (0, Instant::now());
        }
    }
    p.stage = Stage::Done;
    if g + 1 < plan.gens.len() {
        p.generation = g + 1;
        p.stage = Stage::Populating {
            next_seq: plan.seq_start(g + 1, p.gtn),
        };
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn summarize(
    dir: &Path,
    journal: &Journal,
    plan: &Plan,
    threads: &[ThreadProgress],
    gen_times: &[(f64, f64)],
    fs_after: Option<FsStat>,
    total_secs: f64,
    resumed: bool,
) -> PafSummary {
    let mut generations = Vec::new();
    for (g, gp) in plan.gens.iter().enumerate() {
        let mut c = GenCounters::default();
        for t in threads {
            if let Some(tc) = t.counters.get(g) {
                c.files_written += tc.files_written;
                c.bytes_written += tc.bytes_written;
                c.files_removed += tc.files_removed;
                c.bytes_removed += tc.bytes_removed;
            }
        }
        let (pop, frag) = gen_times.get(g).copied().unwrap_or_default();
        generations.push(GenSummary {
            generation: g + 1,
            capacity_pct: gp.capacity_pct,
            frag_pct: gp.frag_pct,
            file_size: gp.file_size,
            target_bytes: gp.target_bytes,
            files_planned: gp.files,
            files_written: c.files_written,
            bytes_written: c.bytes_written,
            files_removed: c.files_removed,
            bytes_removed: c.bytes_removed,
            populate_secs: pop,
            fragment_secs: frag,
        });
    }
    let sum = |f: fn(&GenSummary) -> u64| generations.iter().map(f).sum::<u64>();
    let files_written = sum(|g| g.files_written);
    let bytes_written = sum(|g| g.bytes_written);
    let files_removed = sum(|g| g.files_removed);
    let bytes_removed = sum(|g| g.bytes_removed);
    let populate_secs: f64 = gen_times.iter().map(|t| t.0).sum();
    let fragment_secs: f64 = gen_times.iter().map(|t| t.1).sum();
    let capacity_bytes = plan.capacity_bytes();
    let bytes_remaining = bytes_written.saturating_sub(bytes_removed);
    PafSummary {
        spec: plan.spec.to_string(),
        kind: plan.spec.kind(),
        dir: dir.to_path_buf(),
        state: RunState::Complete,
        resumed,
        capacity_kb: plan.capacity_kb,
        capacity_bytes,
        seed: plan.seed,
        ranks: journal.ranks,
        threads_per_rank: journal.threads_per_rank,
        threads_total: plan.threads_total,
        files_written,
        bytes_written,
        files_removed,
        bytes_removed,
        files_remaining: files_written.saturating_sub(files_removed),
        bytes_remaining,
        capacity_reached_pct: if capacity_bytes == 0 {
            0.0
        } else {
            bytes_remaining as f64 / capacity_bytes as f64 * 100.0
        },
        fs_used_before_pct: journal.fs_before.map(|s| s.used_pct()),
        fs_used_after_pct: fs_after.map(|s| s.used_pct()),
        populate_secs,
        fragment_secs,
        total_secs,
        write_mib_per_sec: if populate_secs > 0.0 {
            generations.iter().map(|g| g.bytes_written).sum::<u64>() as f64
                / units::MIB as f64
                / populate_secs
        } else {
            0.0
        },
        removes_per_sec: if fragment_secs > 0.0 {
            files_removed as f64 / fragment_secs
        } else {
            0.0
        },
        generations,
    }
}

/// Prints the summary as text.
pub fn print_summary(s: &PafSummary, out: &mut dyn io::Write) -> io::Result<()> {
    writeln!(out, "PaF {}  ({})", s.spec, s.kind)?;
    writeln!(out, "  directory            : {}", s.dir.display())?;
    writeln!(
        out,
        "  capacity             : {} free 1K-blocks ({})",
        s.capacity_kb,
        units::human_bytes(s.capacity_bytes as f64)
    )?;
    writeln!(out, "  seed                 : {}", s.seed)?;
    writeln!(
        out,
        "  threads              : {} rank(s) x {} = {}",
        s.ranks, s.threads_per_rank, s.threads_total
    )?;
    for g in &s.generations {
        writeln!(
            out,
            "  gen {}: {:>3}% @ {:>6}  wrote {} of {} files ({}) in {:.2} s, removed {} ({:.1}%) in {:.2} s",
            g.generation,
            g.capacity_pct,
            units::short_size(g.file_size),
            g.files_written,
            g.files_planned,
            units::human_bytes(g.bytes_written as f64),
            g.populate_secs,
            g.files_removed,
            if g.files_written > 0 {
                g.files_removed as f64 / g.files_written as f64 * 100.0
            } else {
                0.0
            },
            g.fragment_secs
        )?;
    }
    writeln!(
        out,
        "  files                : {} written, {} removed, {} remaining",
        s.files_written, s.files_removed, s.files_remaining
    )?;
    writeln!(
        out,
        "  bytes                : {} written, {} removed, {} remaining",
        units::human_bytes(s.bytes_written as f64),
        units::human_bytes(s.bytes_removed as f64),
        units::human_bytes(s.bytes_remaining as f64)
    )?;
    writeln!(
        out,
        "  capacity reached     : {:.2}% of the capacity",
        s.capacity_reached_pct
    )?;
    if let (Some(b), Some(a)) = (s.fs_used_before_pct, s.fs_used_after_pct) {
        writeln!(
            out,
            "  file system used     : {b:.1}% before, {a:.1}% after"
        )?;
    }
    writeln!(
        out,
        "  time                 : {:.2} s (populate {:.2} s, fragment {:.2} s){}",
        s.total_secs,
        s.populate_secs,
        s.fragment_secs,
        if s.resumed { ", this invocation" } else { "" }
    )?;
    writeln!(
        out,
        "  rate                 : {:.1} MiB/s written, {:.0} files/s removed",
        s.write_mib_per_sec, s.removes_per_sec
    )
}

/// Removes everything PaF made in `dir`: the tree (only entries with PaF's names) and the
/// journal. Ranks and threads split the thread directories between them.
pub fn scrub(env: &PafEnv<'_>, dir: &Path, threads: usize) -> Result<ScrubSummary> {
    let fs = env.fs.as_ref();
    let world = env.world;
    // Every rank checks; a rank that cannot see DIR stops them all.
    world.agree("paf-scrub-check", backend::check_dir(fs, dir))?;
    let t0 = Instant::now();
    let tree = dir.join(TREE_DIR);
    let mut tops = Vec::new();
    match fs.readdir(&tree, &mut |de| {
        tops.push(de.name);
        std::ops::ControlFlow::Continue(())
    }) {
        Ok(()) => {}
        Err(e) if backend::is_not_found(&e) => {}
        Err(e) => return Err(BenchError::io("listing", &tree, e)),
    }
    tops.sort();
    let workers = (world.size() * threads.max(1)) as u64;
    let me = (world.rank() * threads.max(1)) as u64;
    let keep = |p: &Path, _k: FileKind| {
        !p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(plan::is_paf_name)
    };
    let bar = if world.is_root() {
        env.progress.items(tops.len() as u64, "scrub")
    } else {
        indicatif::ProgressBar::hidden()
    };
    let counts: Vec<Result<(u64, u64)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.max(1) as u64)
            .map(|t| {
                let tops = &tops;
                let tree = &tree;
                let bar = &bar;
                let keep = &keep;
                s.spawn(move || -> Result<(u64, u64)> {
                    let mut removed = 0;
                    let mut kept = 0;
                    for (i, name) in tops.iter().enumerate() {
                        if i as u64 % workers != me + t {
                            continue;
                        }
                        if env.cancel.is_cancelled() {
                            return Err(BenchError::Interrupted(
                                "scrub stopped; run --scrub again to finish".into(),
                            ));
                        }
                        let p = tree.join(name);
                        if keep(&p, FileKind::Dir) {
                            kept += 1;
                        } else {
                            removed += backend::remove_tree(fs, &p, keep).ctx("removing", &p)?;
                        }
                        bar.inc(1);
                    }
                    Ok((removed, kept))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(BenchError::Usage("a worker thread panicked".into())))
            })
            .collect()
    });
    bar.finish_and_clear();
    let mut local = (0u64, 0u64);
    let mut err = None;
    for c in counts {
        match c {
            Ok((r, k)) => {
                local.0 += r;
                local.1 += k;
            }
            Err(e) => err = err.or(Some(e)),
        }
    }
    let local = match err {
        Some(e) => Err(e),
        None => Ok(local),
    };
    let local = world.agree("paf-scrubbed", local)?;
    let all = world.gather("paf-scrub-counts", &local)?;
    let mut summary = ScrubSummary {
        dir: dir.to_path_buf(),
        entries_removed: 0,
        foreign_entries_kept: 0,
        secs: 0.0,
    };
    if let Some(all) = all {
        for (r, k) in all {
            summary.entries_removed += r;
            summary.foreign_entries_kept += k;
        }
        match fs.rmdir(&tree) {
            Ok(()) => summary.entries_removed += 1,
            Err(e) if backend::is_not_found(&e) => {}
            Err(e) => tracing::warn!("{} left in place: {e}", tree.display()),
        }
        let jd = journal_dir(dir);
        summary.entries_removed +=
            backend::remove_tree(fs, &jd, &|_, _| false).ctx("removing journal", &jd)?;
        if summary.foreign_entries_kept > 0 {
            tracing::warn!(
                "{} entries under {} were not made by PaF and were left in place",
                summary.foreign_entries_kept,
                tree.display()
            );
        }
    }
    world.barrier("paf-scrub-done")?;
    summary.secs = t0.elapsed().as_secs_f64();
    Ok(summary)
}
