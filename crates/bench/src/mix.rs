//! A realistic mixed workload instead of a hero number: several fio-like jobs run at once,
//! each on its own set of files, and each reports its bandwidth and time.
//!
//! The default is the seed's six-job mix (LLNL's "user job simulation"); a job file in a
//! subset of fio's syntax describes other mixes:
//!
//! ```text
//! [global]
//! bs=1M
//! [randwrite-1m]
//! rw=randwrite
//! nrfiles=10000
//! filesize=2M
//! [read-32k-zipf]
//! rw=randread
//! bs=32K
//! nrfiles=100000
//! filesize=64K
//! random_distribution=zipf:1.2
//! ```
//!
//! Random jobs touch `nrfiles × filesize / bs` blocks: uniformly each block once (a keyed
//! permutation), or with a Zipf(θ) popularity whose hot blocks are spread over the files.
//! Read jobs lay their files out first, untimed. With several ranks every rank runs the whole
//! mix on its own files, as `fio --client` does.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution as _, Zipf};
use serde::{Deserialize, Serialize};

use crate::backend::{self, AlignedBuf, FileHandle, FileSystem, OpenOptions};
use crate::env::RunEnv;
use crate::error::{BenchError, IoContext, Result};
use crate::paf::plan::mix_seed;
use crate::shuffle::Permutation;
use crate::units::{self, KIB, MIB};

/// Open files a random-access thread keeps at once.
const MAX_OPEN_PER_THREAD: usize = 64;
/// The directory under DIR.
pub const MIX_DIR: &str = "mix";

/// The access pattern of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rw {
    Read,
    Write,
    RandRead,
    RandWrite,
}

impl Rw {
    pub fn name(self) -> &'static str {
        match self {
            Rw::Read => "read",
            Rw::Write => "write",
            Rw::RandRead => "randread",
            Rw::RandWrite => "randwrite",
        }
    }
    pub fn is_read(self) -> bool {
        matches!(self, Rw::Read | Rw::RandRead)
    }
    pub fn is_random(self) -> bool {
        matches!(self, Rw::RandRead | Rw::RandWrite)
    }
}

/// How random jobs pick blocks.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Popularity {
    /// Every block once, in random order.
    Uniform,
    /// Zipf with exponent θ (blocks may repeat).
    Zipf(f64),
}

/// One job of a mix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MixJob {
    pub name: String,
    pub rw: Rw,
    /// Bytes per I/O.
    pub bs: u64,
    pub file_size: u64,
    pub nrfiles: u64,
    pub popularity: Popularity,
    /// Threads running this job (fio's numjobs).
    pub threads: usize,
    pub direct: bool,
    /// fio's `fsync=N`: an fsync of the file after every N writes of a thread (0: none).
    #[serde(default)]
    pub fsync: u64,
}

/// The seed's six jobs: 1M random writes on 2MB files, 32K zipf(1.2) reads on 64KB files,
/// 16K writes on 64KB files, 8K writes on 32KB files, 1M reads on 3MB files, 256K writes on
/// 2MB files.
pub fn seed_mix() -> Vec<MixJob> {
    let job = |name: &str, rw, bs, file_size, nrfiles, popularity| MixJob {
        name: name.to_string(),
        rw,
        bs,
        file_size,
        nrfiles,
        popularity,
        threads: 1,
        direct: false,
        fsync: 0,
    };
    vec![
        job(
            "1M Rand Write",
            Rw::RandWrite,
            MIB,
            2 * MIB,
            10_000,
            Popularity::Uniform,
        ),
        job(
            "32K Read zipf",
            Rw::RandRead,
            32 * KIB,
            64 * KIB,
            100_000,
            Popularity::Zipf(1.2),
        ),
        job(
            "16K Write",
            Rw::Write,
            16 * KIB,
            64 * KIB,
            100_000,
            Popularity::Uniform,
        ),
        job(
            "8K Write",
            Rw::Write,
            8 * KIB,
            32 * KIB,
            100_000,
            Popularity::Uniform,
        ),
        job(
            "1M Read",
            Rw::Read,
            MIB,
            3 * MIB,
            10_000,
            Popularity::Uniform,
        ),
        job(
            "256K Write",
            Rw::Write,
            256 * KIB,
            2 * MIB,
            10_000,
            Popularity::Uniform,
        ),
    ]
}

/// Scales every job's file count (at least one file each).
pub fn scale(jobs: &[MixJob], factor: f64) -> Vec<MixJob> {
    jobs.iter()
        .map(|j| MixJob {
            nrfiles: ((j.nrfiles as f64 * factor).round() as u64).max(1),
            ..j.clone()
        })
        .collect()
}

/// fio options that do not change what this runner does.
const IGNORED_KEYS: [&str; 12] = [
    "ioengine",
    "iodepth",
    "create_on_open",
    "fallocate",
    "group_reporting",
    "thread",
    "norandommap",
    "randrepeat",
    "invalidate",
    "directory",
    "rwmixread",
    "file_service_type",
];

/// Parses a job file (`name` for error messages).
pub fn parse_job_file(text: &str, name: &str) -> Result<Vec<MixJob>> {
    let err = |line: usize, msg: String| BenchError::Parse {
        path: name.to_string(),
        line: line as u64,
        msg,
    };
    // (section, line of header, key/value pairs with their lines)
    // Each section: its name, its header line, and its (key, value, line) settings.
    type Setting = (String, String, usize);
    let mut sections: Vec<(String, usize, Vec<Setting>)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let sec = rest
                .strip_suffix(']')
                .ok_or_else(|| err(ln, format!("unclosed section header {line:?}")))?;
            sections.push((sec.trim().to_string(), ln, Vec::new()));
            continue;
        }
        let (k, v) = match line.split_once('=') {
            Some((k, v)) => (k.trim().to_ascii_lowercase(), v.trim().to_string()),
            None => (line.to_ascii_lowercase(), String::new()),
        };
        let sec = sections
            .last_mut()
            .ok_or_else(|| err(ln, format!("{k:?} before any [section]")))?;
        sec.2.push((k, v, ln));
    }
    let global: Vec<Setting> = sections
        .iter()
        .filter(|s| s.0 == "global")
        .flat_map(|s| s.2.clone())
        .collect();
    let mut jobs = Vec::new();
    for (sec, header_line, kvs) in sections.iter().filter(|s| s.0 != "global") {
        let mut rw = None;
        let (mut bs, mut file_size, mut nrfiles, mut size) = (None, None, None, None);
        let mut popularity = Popularity::Uniform;
        let mut threads = 1usize;
        let mut direct = false;
        let mut fsync = 0;
        for (k, v, ln) in global.iter().chain(kvs.iter()) {
            let size_of = |v: &str| units::parse_size(v).map_err(|m| err(*ln, m));
            let count_of = |v: &str| {
                v.parse::<u64>()
                    .map_err(|_| err(*ln, format!("{k}={v}: expected a whole number")))
            };
            match k.as_str() {
                "rw" | "readwrite" => {
                    rw = Some(match v.as_str() {
                        "read" => Rw::Read,
                        "write" => Rw::Write,
                        "randread" => Rw::RandRead,
                        "randwrite" => Rw::RandWrite,
                        other => {
                            return Err(err(
                                *ln,
                                format!("rw={other}: one of read, write, randread, randwrite"),
                            ));
                        }
                    })
                }
                "bs" | "blocksize" => bs = Some(size_of(v)?),
                "filesize" => file_size = Some(size_of(v)?),
                "size" => size = Some(size_of(v)?),
                "nrfiles" => nrfiles = Some(count_of(v)?),
                "numjobs" => threads = count_of(v)?.max(1) as usize,
                "direct" => direct = v == "1" || v == "true",
                "fsync" => fsync = count_of(v)?,
                "random_distribution" => {
                    popularity = match v.split_once(':') {
                        None if v == "random" => Popularity::Uniform,
                        None if v == "zipf" => Popularity::Zipf(1.2),
                        Some(("zipf", t)) => Popularity::Zipf(t.parse().map_err(|_| {
                            err(*ln, format!("random_distribution={v}: bad zipf exponent"))
                        })?),
                        _ => {
                            return Err(err(
                                *ln,
                                format!("random_distribution={v}: use random or zipf:THETA"),
                            ));
                        }
                    }
                }
                "name" => {}
                k if IGNORED_KEYS.contains(&k) => {
                    tracing::debug!("{name}:{ln}: {k} ignored");
                }
                other => {
                    return Err(err(
                        *ln,
                        format!(
                            "unsupported option {other:?} (understood: rw, bs, filesize, size, \
                             nrfiles, numjobs, direct, fsync, random_distribution)"
                        ),
                    ));
                }
            }
        }
        let rw = rw.ok_or_else(|| err(*header_line, format!("[{sec}] has no rw=")))?;
        let (file_size, nrfiles) = match (file_size, nrfiles, size) {
            (Some(f), Some(n), _) => (f, n),
            (Some(f), None, Some(s)) => (f, (s / f.max(1)).max(1)),
            (None, Some(n), Some(s)) => (s / n.max(1), n),
            (None, None, Some(s)) => (s, 1),
            _ => {
                return Err(err(
                    *header_line,
                    format!("[{sec}] needs filesize= and nrfiles= (or size=)"),
                ));
            }
        };
        let bs = bs.unwrap_or(4 * KIB);
        if bs == 0 || file_size == 0 || nrfiles == 0 {
            return Err(err(
                *header_line,
                format!("[{sec}]: sizes and counts must be > 0"),
            ));
        }
        if let Popularity::Zipf(t) = popularity
            && (t.is_nan() || t <= 0.0 || (t - 1.0).abs() < 1e-9)
        {
            return Err(err(
                *header_line,
                format!("[{sec}]: zipf exponent must be > 0 and not 1"),
            ));
        }
        jobs.push(MixJob {
            name: sec.clone(),
            rw,
            bs,
            file_size,
            nrfiles,
            popularity,
            threads,
            direct,
            fsync,
        });
    }
    if jobs.is_empty() {
        return Err(err(1, "no jobs".into()));
    }
    Ok(jobs)
}

/// Options of a mix run.
#[derive(Debug, Clone)]
pub struct MixOptions {
    pub keep: bool,
    pub seed: u64,
}

/// One job's outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobResult {
    pub name: String,
    pub rw: Rw,
    pub bs: u64,
    pub file_size: u64,
    /// Files over all ranks.
    pub files: u64,
    pub bytes: u64,
    pub ops: u64,
    /// First start to last end over all the job's threads.
    pub secs: f64,
    pub mib_per_sec: f64,
    pub iops: f64,
}

/// The whole mix.
#[derive(Debug, Clone, Serialize)]
pub struct MixReport {
    pub dir: PathBuf,
    pub ranks: usize,
    pub jobs: Vec<JobResult>,
    pub total_bytes: u64,
    pub wall_secs: f64,
    pub aggregate_mib_per_sec: f64,
    pub read_mib_per_sec: f64,
    pub write_mib_per_sec: f64,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
struct ThreadResult {
    start: f64,
    end: f64,
    bytes: u64,
    ops: u64,
}

fn slug(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

fn job_dir(dir: &Path, j: usize, job: &MixJob, rank: usize, thread: usize) -> PathBuf {
    dir.join(MIX_DIR)
        .join(format!("{j}-{}", slug(&job.name)))
        .join(format!("r{rank}"))
        .join(format!("t{thread}"))
}

/// The files thread `t` of `threads` owns: files round-robin over threads.
fn files_of(job: &MixJob, t: usize) -> u64 {
    let n = job.nrfiles;
    let k = job.threads as u64;
    n / k + u64::from((t as u64) < n % k)
}

struct HandleCache<'a> {
    fs: &'a dyn FileSystem,
    open: HashMap<u64, FileHandle>,
    order: VecDeque<u64>,
}

impl<'a> HandleCache<'a> {
    fn get(&mut self, id: u64, path: &Path, opts: OpenOptions, create: bool) -> Result<FileHandle> {
        if let Some(fh) = self.open.get(&id) {
            return Ok(*fh);
        }
        if self.open.len() >= MAX_OPEN_PER_THREAD
            && let Some(old) = self.order.pop_front()
            && let Some(fh) = self.open.remove(&old)
        {
            self.fs.close(fh).ctx("closing", path)?;
        }
        let fh = if create {
            self.fs.create(path, opts)
        } else {
            self.fs.open(path, opts)
        }
        .ctx("opening", path)?;
        self.open.insert(id, fh);
        self.order.push_back(id);
        Ok(fh)
    }

    fn close_all(&mut self) -> Result<()> {
        let mut first = Ok(());
        for (_, fh) in self.open.drain() {
            if let Err(e) = self.fs.close(fh) {
                first = first.and(Err(BenchError::io("closing", Path::new("(mix file)"), e)));
            }
        }
        self.order.clear();
        first
    }
}

#[allow(clippy::too_many_arguments)]
fn run_thread(
    env: &RunEnv<'_>,
    dir: &Path,
    j: usize,
    job: &MixJob,
    t: usize,
    seed: u64,
    t0: Instant,
    bar: &indicatif::ProgressBar,
) -> Result<ThreadResult> {
    let fs = env.fs.as_ref();
    let rank = env.world.rank();
    let d = job_dir(dir, j, job, rank, t);
    let nfiles = files_of(job, t);
    let mut buf = AlignedBuf::new(job.bs as usize, fs.io_alignment()).ctx("allocating", &d)?;
    ChaCha8Rng::seed_from_u64(mix_seed(seed, j as u64, t as u64)).fill_bytes(&mut buf);
    let mut r = ThreadResult {
        start: t0.elapsed().as_secs_f64(),
        ..ThreadResult::default()
    };
    let path_of = |i: u64| d.join(format!("f{i}"));
    let stop = || -> Result<()> {
        if env.cancel.is_cancelled() {
            return Err(BenchError::Interrupted(format!(
                "mix stopped in {}",
                dir.join(MIX_DIR).display()
            )));
        }
        Ok(())
    };
    let opts_w = OpenOptions::write().direct(job.direct);
    let opts_r = OpenOptions::read().direct(job.direct);
    let bpf = job.file_size.div_ceil(job.bs);
    // Writes since the last fsync (fio's `fsync=N`).
    let mut unsynced = 0u64;
    let mut after_write = |fh: FileHandle| -> io::Result<()> {
        unsynced += 1;
        if job.fsync > 0 && unsynced >= job.fsync {
            unsynced = 0;
            fs.fsync(fh)?;
        }
        Ok(())
    };
    if !job.rw.is_random() {
        for i in 0..nfiles {
            let p = path_of(i);
            let fh = if job.rw.is_read() {
                fs.open(&p, opts_r).ctx("opening", &p)?
            } else {
                fs.create(&p, opts_w.truncate(true)).ctx("creating", &p)?
            };
            let mut res = Ok(());
            let mut off = 0;
            while off < job.file_size {
                stop()?;
                let n = (job.file_size - off).min(job.bs) as usize;
                let step = if job.rw.is_read() {
                    backend::read_full_at(fs, fh, &mut buf[..n], off).map(drop)
                } else {
                    backend::write_all_at(fs, fh, &buf[..n], off).and_then(|()| after_write(fh))
                };
                if let Err(e) = step {
                    res = Err(e);
                    break;
                }
                off += n as u64;
                r.bytes += n as u64;
                r.ops += 1;
                bar.inc(n as u64);
            }
            let c = fs.close(fh);
            res.and(c).ctx(
                if job.rw.is_read() {
                    "reading"
                } else {
                    "writing"
                },
                &p,
            )?;
        }
    } else {
        let blocks = nfiles * bpf;
        let perm = Permutation::new(blocks, mix_seed(seed, j as u64, 0x77 + t as u64));
        let zipf = match job.popularity {
            Popularity::Zipf(theta) if blocks > 0 => Some(
                Zipf::new(blocks, theta)
                    .map_err(|e| BenchError::Usage(format!("{}: {e}", job.name)))?,
            ),
            _ => None,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(mix_seed(seed, j as u64, 0x99 + t as u64));
        let mut cache = HandleCache {
            fs,
            open: HashMap::new(),
            order: VecDeque::new(),
        };
        let res = (|| -> Result<()> {
            for k in 0..blocks {
                stop()?;
                let rank_k = match &zipf {
                    Some(z) => (z.sample(&mut rng) as u64).clamp(1, blocks) - 1,
                    None => k,
                };
                let idx = perm.apply(rank_k);
                let (file, block) = (idx / bpf, idx % bpf);
                let p = path_of(file);
                let off = block * job.bs;
                let n = (job.file_size - off).min(job.bs) as usize;
                if job.rw.is_read() {
                    let fh = cache.get(file, &p, opts_r, false)?;
                    backend::read_full_at(fs, fh, &mut buf[..n], off).ctx("reading", &p)?;
                } else {
                    let fh = cache.get(file, &p, opts_w, true)?;
                    backend::write_all_at(fs, fh, &buf[..n], off).ctx("writing", &p)?;
                    after_write(fh).ctx("fsyncing", &p)?;
                }
                r.bytes += n as u64;
                r.ops += 1;
                bar.inc(n as u64);
            }
            Ok(())
        })();
        let c = cache.close_all();
        res.and(c)?;
    }
    r.end = t0.elapsed().as_secs_f64();
    Ok(r)
}

/// Lays out the files read jobs read (untimed).
fn lay_out(env: &RunEnv<'_>, dir: &Path, jobs: &[MixJob], seed: u64) -> Result<()> {
    let fs = env.fs.as_ref();
    let rank = env.world.rank();
    let total: u64 = jobs
        .iter()
        .filter(|j| j.rw.is_read())
        .map(|j| j.nrfiles * j.file_size)
        .sum();
    let bar = env.bars().bytes(total, "laying out");
    for (j, job) in jobs.iter().enumerate() {
        let mut buf = AlignedBuf::new(MIB.min(job.file_size).max(1) as usize, fs.io_alignment())
            .ctx("allocating", dir)?;
        ChaCha8Rng::seed_from_u64(mix_seed(seed, j as u64, 0x42)).fill_bytes(&mut buf);
        for t in 0..job.threads {
            let d = job_dir(dir, j, job, rank, t);
            backend::mkdir_all(fs, &d).ctx("creating", &d)?;
            if !job.rw.is_read() {
                continue;
            }
            for i in 0..files_of(job, t) {
                if env.cancel.is_cancelled() {
                    return Err(BenchError::Interrupted(
                        "mix stopped while laying out".into(),
                    ));
                }
                let p = d.join(format!("f{i}"));
                let fh = fs
                    .create(&p, OpenOptions::write().truncate(true))
                    .ctx("creating", &p)?;
                let mut off = 0;
                let mut res = Ok(());
                while off < job.file_size && res.is_ok() {
                    let n = (job.file_size - off).min(buf.len() as u64) as usize;
                    res = backend::write_all_at(fs, fh, &buf[..n], off);
                    off += n as u64;
                    bar.inc(n as u64);
                }
                let c = fs.close(fh);
                res.and(c).ctx("laying out", &p)?;
            }
        }
    }
    bar.finish_and_clear();
    Ok(())
}

/// Runs the jobs at once on this rank and gathers the results on rank 0.
/// When interrupted, rank 0 removes the mix's files (unless `keep`).
pub fn run(
    env: &RunEnv<'_>,
    dir: &Path,
    jobs: &[MixJob],
    opts: &MixOptions,
) -> Result<Option<MixReport>> {
    let res = run_mix(env, dir, jobs, opts);
    if matches!(res, Err(BenchError::Interrupted(_))) && !opts.keep && env.world.is_root() {
        let _ = scrub(env.fs.as_ref(), dir);
    }
    res
}

/// Removes everything the mix made in `dir` (`DIR/mix`); returns the entries removed.
pub fn scrub(fs: &dyn FileSystem, dir: &Path) -> Result<u64> {
    backend::check_dir(fs, dir)?;
    let p = dir.join(MIX_DIR);
    backend::remove_tree(fs, &p, &|_, _| false).ctx("removing", &p)
}

fn run_mix(
    env: &RunEnv<'_>,
    dir: &Path,
    jobs: &[MixJob],
    opts: &MixOptions,
) -> Result<Option<MixReport>> {
    let fs = env.fs.as_ref();
    let world = env.world;
    // Every rank checks; a rank that cannot see DIR stops them all.
    world.agree("mix-check", backend::check_dir(fs, dir))?;
    if jobs.is_empty() {
        return Err(BenchError::Usage("the mix has no jobs".into()));
    }
    for job in jobs {
        if job.direct
            && (job.bs % fs.io_alignment() as u64 != 0
                || job.file_size % fs.io_alignment() as u64 != 0)
        {
            return Err(BenchError::Usage(format!(
                "{}: direct I/O needs bs and filesize multiples of {}",
                job.name,
                fs.io_alignment()
            )));
        }
    }
    let hint = format!("remove {} to free the space", dir.join(MIX_DIR).display());
    let laid = lay_out(env, dir, jobs, opts.seed);
    world
        .agree("mix-layout", laid)
        .map_err(|e| e.with_space_hint(&hint))?;
    let total: u64 = jobs.iter().map(|j| j.nrfiles * j.file_size).sum();
    let bar = env.bars().bytes(total, "mix");
    world.barrier("mix-start")?;
    let t0 = Instant::now();
    let results: Vec<Vec<Result<ThreadResult>>> = std::thread::scope(|s| {
        let handles: Vec<Vec<_>> = jobs
            .iter()
            .enumerate()
            .map(|(j, job)| {
                (0..job.threads)
                    .map(|t| {
                        let bar = &bar;
                        s.spawn(move || run_thread(env, dir, j, job, t, opts.seed, t0, bar))
                    })
                    .collect()
            })
            .collect();
        handles
            .into_iter()
            .map(|hs| {
                hs.into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| {
                            Err(BenchError::Usage("a mix thread panicked".into()))
                        })
                    })
                    .collect()
            })
            .collect()
    });
    bar.finish_and_clear();
    let local: Result<Vec<Vec<ThreadResult>>> = results
        .into_iter()
        .map(|v| v.into_iter().collect::<Result<Vec<_>>>())
        .collect();
    let local = world
        .agree("mix-done", local)
        .map_err(|e| e.with_space_hint(&hint))?;
    let all = world.gather("mix-results", &local)?;
    if !opts.keep {
        let mine = dir.join(MIX_DIR);
        let rank = world.rank();
        let rm: Result<()> = (|| {
            for (j, job) in jobs.iter().enumerate() {
                let d = job_dir(dir, j, job, rank, 0);
                if let Some(rd) = d.parent() {
                    backend::remove_tree(fs, rd, &|_, _| false).ctx("removing", rd)?;
                }
            }
            Ok(())
        })();
        world.agree("mix-cleaned", rm)?;
        if world.is_root() {
            backend::remove_tree(fs, &mine, &|_, _| false).ctx("removing", &mine)?;
        }
    }
    let Some(all) = all else {
        return Ok(None);
    };
    let mut out = Vec::new();
    let mut wall = 0.0f64;
    for (j, job) in jobs.iter().enumerate() {
        let threads: Vec<ThreadResult> = all.iter().flat_map(|r| r[j].iter().copied()).collect();
        let bytes: u64 = threads.iter().map(|t| t.bytes).sum();
        let ops: u64 = threads.iter().map(|t| t.ops).sum();
        let start = threads.iter().map(|t| t.start).fold(f64::MAX, f64::min);
        let end = threads.iter().map(|t| t.end).fold(0.0f64, f64::max);
        let secs = (end - start).max(0.0);
        wall = wall.max(end);
        out.push(JobResult {
            name: job.name.clone(),
            rw: job.rw,
            bs: job.bs,
            file_size: job.file_size,
            files: job.nrfiles * all.len() as u64,
            bytes,
            ops,
            secs,
            mib_per_sec: if secs > 0.0 {
                bytes as f64 / MIB as f64 / secs
            } else {
                0.0
            },
            iops: if secs > 0.0 { ops as f64 / secs } else { 0.0 },
        });
    }
    let total_bytes: u64 = out.iter().map(|r| r.bytes).sum();
    let rate = |f: &dyn Fn(&JobResult) -> bool| {
        let b: u64 = out.iter().filter(|r| f(r)).map(|r| r.bytes).sum();
        if wall > 0.0 {
            b as f64 / MIB as f64 / wall
        } else {
            0.0
        }
    };
    let read_mib_per_sec = rate(&|r| r.rw.is_read());
    let write_mib_per_sec = rate(&|r| !r.rw.is_read());
    Ok(Some(MixReport {
        dir: dir.to_path_buf(),
        ranks: all.len(),
        total_bytes,
        wall_secs: wall,
        aggregate_mib_per_sec: if wall > 0.0 {
            total_bytes as f64 / MIB as f64 / wall
        } else {
            0.0
        },
        read_mib_per_sec,
        write_mib_per_sec,
        jobs: out,
    }))
}

/// Prints the mix as a table.
pub fn print_text(r: &MixReport, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "Job mix in {} ({} rank(s))", r.dir.display(), r.ranks)?;
    writeln!(
        out,
        "{:<18} {:<10} {:>6} {:>8} {:>8} {:>12} {:>9} {:>10} {:>10}",
        "job", "rw", "bs", "files", "filesize", "bytes", "time(s)", "MiB/s", "IOPS"
    )?;
    for j in &r.jobs {
        writeln!(
            out,
            "{:<18} {:<10} {:>6} {:>8} {:>8} {:>12} {:>9.3} {:>10.1} {:>10.0}",
            j.name,
            j.rw.name(),
            units::short_size(j.bs),
            j.files,
            units::short_size(j.file_size),
            units::human_bytes(j.bytes as f64),
            j.secs,
            j.mib_per_sec,
            j.iops
        )?;
    }
    writeln!(
        out,
        "all jobs: {} in {:.3} s wall = {:.1} MiB/s (read {:.1} MiB/s, write {:.1} MiB/s)",
        units::human_bytes(r.total_bytes as f64),
        r.wall_secs,
        r.aggregate_mib_per_sec,
        r.read_mib_per_sec,
        r.write_mib_per_sec
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn seed_mix_is_the_six_jobs() {
        let m = seed_mix();
        assert_eq!(m.len(), 6);
        assert_eq!(
            (m[0].rw, m[0].bs, m[0].file_size, m[0].nrfiles),
            (Rw::RandWrite, MIB, 2 * MIB, 10_000)
        );
        assert_eq!(m[1].popularity, Popularity::Zipf(1.2));
        assert_eq!((m[4].rw, m[4].file_size), (Rw::Read, 3 * MIB));
        let s = scale(&m, 0.001);
        assert_eq!(s[0].nrfiles, 10);
        assert_eq!(s[1].nrfiles, 100);
        assert_eq!(scale(&m, 0.0)[0].nrfiles, 1);
    }

    #[test]
    fn job_file() {
        let text = "\
# the seed's first two jobs
[global]
ioengine=posixaio
iodepth=32
bs=1M
[randwrite-1m]
rw=randwrite
nrfiles=10000
filesize=2M
[read-32k-zipf]
rw=randread
bs=32K
size=6400K
filesize=64K
random_distribution=zipf:1.2
numjobs=2
";
        let jobs = parse_job_file(text, "mix.fio").expect("parse");
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0].bs, MIB);
        assert_eq!(jobs[1].bs, 32 * KIB);
        assert_eq!(jobs[1].nrfiles, 100);
        assert_eq!(jobs[1].threads, 2);
        assert_eq!(jobs[1].popularity, Popularity::Zipf(1.2));
        let e =
            parse_job_file("[a]\nrw=randrw\nfilesize=1M\nnrfiles=1\n", "x.fio").expect_err("rw");
        assert!(e.to_string().starts_with("x.fio:2:"), "{e}");
        let e = parse_job_file("[a]\nrw=read\nverify=md5\n", "x.fio").expect_err("unknown");
        assert!(e.to_string().contains("unsupported option"), "{e}");
        let e = parse_job_file("[a]\nrw=read\n", "x.fio").expect_err("no size");
        assert!(e.to_string().starts_with("x.fio:1:"), "{e}");
    }

    /// A local directory that counts fsyncs.
    struct CountingFs {
        posix: backend::PosixFs,
        fsyncs: std::sync::atomic::AtomicU64,
    }

    impl FileSystem for CountingFs {
        fn describe(&self) -> String {
            "counting".into()
        }
        fn create(&self, path: &Path, opts: OpenOptions) -> io::Result<FileHandle> {
            self.posix.create(path, opts)
        }
        fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<FileHandle> {
            self.posix.open(path, opts)
        }
        fn pwrite(&self, fh: FileHandle, buf: &[u8], offset: u64) -> io::Result<usize> {
            self.posix.pwrite(fh, buf, offset)
        }
        fn pread(&self, fh: FileHandle, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            self.posix.pread(fh, buf, offset)
        }
        fn fsync(&self, fh: FileHandle) -> io::Result<()> {
            self.fsyncs
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.posix.fsync(fh)
        }
        fn close(&self, fh: FileHandle) -> io::Result<()> {
            self.posix.close(fh)
        }
        fn fstat(&self, fh: FileHandle) -> io::Result<backend::FileStat> {
            self.posix.fstat(fh)
        }
        fn stat(&self, path: &Path) -> io::Result<backend::FileStat> {
            self.posix.stat(path)
        }
        fn unlink(&self, path: &Path) -> io::Result<()> {
            self.posix.unlink(path)
        }
        fn mkdir(&self, path: &Path, mode: u32) -> io::Result<()> {
            self.posix.mkdir(path, mode)
        }
        fn rmdir(&self, path: &Path) -> io::Result<()> {
            self.posix.rmdir(path)
        }
        fn readdir(
            &self,
            path: &Path,
            visit: &mut dyn FnMut(backend::DirEntry) -> std::ops::ControlFlow<()>,
        ) -> io::Result<()> {
            self.posix.readdir(path, visit)
        }
        fn statfs(&self, path: &Path) -> io::Result<backend::FsStat> {
            self.posix.statfs(path)
        }
        fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
            self.posix.rename(from, to)
        }
    }

    #[test]
    fn fsync_every_n_writes() {
        let jobs = parse_job_file(
            "[seq]\nrw=write\nbs=4k\nfilesize=16k\nnrfiles=3\nfsync=2\n\
             [rand]\nrw=randwrite\nbs=4k\nfilesize=8k\nnrfiles=5\nfsync=1\n",
            "sync.fio",
        )
        .expect("parse");
        assert_eq!((jobs[0].fsync, jobs[1].fsync), (2, 1));
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = Arc::new(CountingFs {
            posix: backend::PosixFs::new(),
            fsyncs: Default::default(),
        });
        let world = crate::rank::World::single();
        let env = RunEnv::quiet(fs.clone(), &world);
        let opts = MixOptions {
            keep: false,
            seed: 1,
        };
        let r = run(&env, dir.path(), &jobs, &opts)
            .expect("mix")
            .expect("report");
        assert_eq!(r.jobs[0].ops, 12);
        assert_eq!(r.jobs[1].ops, 10);
        // 12 writes, one fsync per 2; 10 writes, one fsync each.
        assert_eq!(fs.fsyncs.load(std::sync::atomic::Ordering::Relaxed), 6 + 10);
    }
}
