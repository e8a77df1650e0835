//! Measures candidate stores for the MDT's namespace (redb, fjall, LMDB) on the MDT's
//! workload: batched creates, durable checkpoints, lookups, readdir, unlinks, disk use and
//! reopen time. See README.md.

mod report;
mod stores;
mod workload;

use anyhow::{Context, Result, bail};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use report::{Machine, Metric, Samples};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use stores::{Candidate, Store};
use workload::Shape;

const USAGE: &str = "\
usage: store-choice [options]
  --entries N           files to create (default 1000000)
  --batch B             operations per write transaction (default 256)
  --dir DIR             where the databases go, removed afterwards (default /tmp/store-choice)
  --runs R              repetitions; medians are reported (default 3)
  --dir-size S          entries per directory (default 10000)
  --checkpoint-every C  operations between durable checkpoints (default 250000)
  --lookups L           random lookups per measurement (default 300000)
  --unlinks U           files unlinked per run (default entries / 5)
  --readdir-dirs D      directories scanned per run (default 20)
  --cache-mb M          redb and fjall cache in MiB (default 64, as mdstore.rs)
  --stores LIST         comma-separated stores: redb, fjall, lmdb; redb:MIB and fjall:MIB
                        set the cache, lmdb:nometasync syncs data at every commit
                        (default redb,fjall,lmdb,lmdb:nometasync,redb:1024)
  --json FILE           where to write the JSON results (default results.json)";

const DEFAULT_STORES: &str = "redb,fjall,lmdb,lmdb:nometasync,redb:1024";

struct Config {
    entries: u64,
    batch: usize,
    dir: PathBuf,
    runs: usize,
    dir_size: u64,
    checkpoint_every: u64,
    lookups: u64,
    unlinks: u64,
    readdir_dirs: u64,
    cache_bytes: usize,
    stores: Vec<Candidate>,
    json: PathBuf,
}

impl Config {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Config> {
        let mut c = Config {
            entries: 1_000_000,
            batch: 256,
            dir: PathBuf::from("/tmp/store-choice"),
            runs: 3,
            dir_size: 10_000,
            checkpoint_every: 250_000,
            lookups: 300_000,
            unlinks: 0,
            readdir_dirs: 20,
            cache_bytes: 64 << 20,
            stores: Vec::new(),
            json: PathBuf::from("results.json"),
        };
        let mut unlinks = None;
        let mut stores = None;
        while let Some(flag) = args.next() {
            if flag == "-h" || flag == "--help" {
                println!("{USAGE}");
                std::process::exit(0);
            }
            let Some(value) = args.next() else {
                bail!("{flag} needs a value\n{USAGE}");
            };
            let num = || -> Result<u64> {
                value
                    .replace('_', "")
                    .parse::<u64>()
                    .with_context(|| format!("{flag}: not a number: {value}"))
            };
            match flag.as_str() {
                "--entries" => c.entries = num()?,
                "--batch" => c.batch = num()? as usize,
                "--dir" => c.dir = PathBuf::from(&value),
                "--runs" => c.runs = num()? as usize,
                "--dir-size" => c.dir_size = num()?,
                "--checkpoint-every" => c.checkpoint_every = num()?,
                "--lookups" => c.lookups = num()?,
                "--unlinks" => unlinks = Some(num()?),
                "--readdir-dirs" => c.readdir_dirs = num()?,
                "--cache-mb" => c.cache_bytes = (num()? as usize) << 20,
                "--json" => c.json = PathBuf::from(&value),
                "--stores" => {
                    stores = Some(value.clone());
                }
                _ => bail!("unknown option {flag}\n{USAGE}"),
            }
        }
        c.stores = stores
            .as_deref()
            .unwrap_or(DEFAULT_STORES)
            .split(',')
            .map(|s| Candidate::parse(s.trim(), c.cache_bytes))
            .collect::<Result<_>>()?;
        if c.entries == 0 || c.batch == 0 || c.runs == 0 || c.dir_size == 0 || c.stores.is_empty() {
            bail!("--entries, --batch, --runs, --dir-size and --stores must be non-zero/non-empty");
        }
        c.unlinks = unlinks.unwrap_or(c.entries / 5).min(c.entries);
        c.checkpoint_every = c.checkpoint_every.max(1);
        Ok(c)
    }

    fn shape(&self) -> Shape {
        Shape {
            entries: self.entries,
            dirs: self.entries.div_ceil(self.dir_size),
        }
    }

    fn settings_json(&self) -> serde_json::Value {
        let shape = self.shape();
        serde_json::json!({
            "entries": self.entries,
            "batch": self.batch,
            "directories": shape.dirs,
            "entries_per_directory": self.dir_size,
            "runs": self.runs,
            "checkpoint_every_ops": self.checkpoint_every,
            "lookups_per_measurement": self.lookups,
            "unlinks": self.unlinks,
            "readdir_dirs": self.readdir_dirs.min(shape.dirs),
            "cache_mib": self.cache_bytes >> 20,
            "dir": self.dir.display().to_string(),
        })
    }
}

/// A database directory, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Bytes allocated on disk under `dir` (as `du` counts them).
fn disk_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() {
            disk_bytes(&entry.path())?
        } else {
            meta.blocks() * 512
        };
    }
    Ok(total)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One full pass over one store: a fresh database, every measurement, then removal.
fn run_once(candidate: &Candidate, cfg: &Config, run: usize, samples: &mut Samples) -> Result<()> {
    let shape = cfg.shape();
    let label = &candidate.label;
    let scratch = Scratch(cfg.dir.join(format!("{}-{run}", label.replace(':', "-"))));
    let _ = std::fs::remove_dir_all(&scratch.0);
    let seed = 0x5eed_0000 + run as u64;
    let mut rng = StdRng::seed_from_u64(seed);

    let store = candidate.open(&scratch.0)?;
    workload::make_dirs(store.as_ref(), shape)?;
    let created = workload::create_all(store.as_ref(), shape, cfg.batch, cfg.checkpoint_every)
        .with_context(|| format!("{label}: create"))?;
    samples.push(
        Metric::Create,
        shape.entries as f64 / created.elapsed.as_secs_f64(),
    );
    let cps: Vec<f64> = created.checkpoints.iter().copied().map(ms).collect();
    if let Some(m) = report::median(&cps) {
        samples.push(Metric::Checkpoint, m);
    }
    if let Some(m) = cps.iter().copied().reduce(f64::max) {
        samples.push(Metric::CheckpointMax, m);
    }
    store.close()?;
    samples.push(
        Metric::Disk,
        disk_bytes(&scratch.0)? as f64 / (1 << 20) as f64,
    );

    // Reopen after a clean close, until the first lookup is answered.
    let start = Instant::now();
    let store: Box<dyn Store> = candidate.open(&scratch.0)?;
    let mut buf = Vec::new();
    workload::lookup_random(store.as_ref(), shape, &mut rng, &mut buf)?;
    samples.push(Metric::Reopen, ms(start.elapsed()));

    // Warm the caches, then measure.
    workload::lookups(store.as_ref(), shape, 1, cfg.lookups / 10, seed ^ 1)?;
    let l1 = workload::lookups(store.as_ref(), shape, 1, cfg.lookups, seed ^ 2)?;
    samples.push(Metric::Lookup1, l1);
    let l2 = workload::lookups(store.as_ref(), shape, 2, cfg.lookups / 2, seed ^ 3)?;
    samples.push(Metric::Lookup2, l2);

    let mut dirs: Vec<u64> = (0..shape.dirs).collect();
    dirs.shuffle(&mut rng);
    dirs.truncate(cfg.readdir_dirs.min(shape.dirs) as usize);
    samples.push(
        Metric::Readdir,
        workload::readdir(store.as_ref(), shape, &dirs)?,
    );

    let mut victims: Vec<u64> = (0..shape.entries).collect();
    victims.shuffle(&mut rng);
    victims.truncate(cfg.unlinks as usize);
    if !victims.is_empty() {
        let unlinked = workload::unlink(
            store.as_ref(),
            shape,
            &victims,
            cfg.batch,
            cfg.checkpoint_every,
        )
        .with_context(|| format!("{label}: unlink"))?;
        samples.push(
            Metric::Unlink,
            victims.len() as f64 / unlinked.elapsed.as_secs_f64(),
        );
    }
    store.close()?;
    drop(scratch);
    Ok(())
}

fn main() -> Result<()> {
    let cfg = Config::parse(std::env::args().skip(1))?;
    std::fs::create_dir_all(&cfg.dir).with_context(|| format!("create {}", cfg.dir.display()))?;
    let mut machine = Machine::probe(&cfg.dir);
    let shape = cfg.shape();
    println!("machine: {}", machine.describe());
    println!(
        "load average at start: {} (machine shared with other work)",
        machine.load_start
    );
    println!(
        "workload: {} files in {} directories, batches of {}, checkpoint every {} ops, {} runs",
        shape.entries, shape.dirs, cfg.batch, cfg.checkpoint_every, cfg.runs
    );
    let config: Vec<(String, String)> = cfg
        .stores
        .iter()
        .map(|c| (c.label.clone(), c.describe()))
        .collect();
    for (_, d) in &config {
        println!("  {d}");
    }

    let started = Instant::now();
    let mut results: Vec<(String, Samples)> = cfg
        .stores
        .iter()
        .map(|c| (c.label.clone(), Samples::default()))
        .collect();
    for run in 0..cfg.runs {
        // Rotate the order so no store always runs first (or last) in a round.
        for j in 0..results.len() {
            let idx = (j + run) % results.len();
            let (label, samples) = &mut results[idx];
            let t = Instant::now();
            print!("run {}/{} {label:<15}... ", run + 1, cfg.runs);
            std::io::stdout().flush()?;
            run_once(&cfg.stores[idx], &cfg, run, samples)?;
            println!("{:.1} s", t.elapsed().as_secs_f64());
        }
    }
    // Leave nothing behind (the directory is removed only if it is now empty).
    let _ = std::fs::remove_dir(&cfg.dir);
    machine.load_end = report::loadavg();

    println!();
    println!(
        "{} ({} files, batch {}, median of {} runs, {:.0} s in all)",
        report::today(),
        shape.entries,
        cfg.batch,
        cfg.runs,
        started.elapsed().as_secs_f64()
    );
    println!("machine: {}", machine.describe());
    println!(
        "load average: {} at start, {} at end (shared machine: others were building and testing)",
        machine.load_start, machine.load_end
    );
    println!();
    print!("{}", report::table(&results));
    println!("(±: half the range over runs, as a share of the median)");

    let json = report::json(&results, &machine, cfg.settings_json(), &config);
    let text = serde_json::to_string_pretty(&json)?;
    std::fs::write(&cfg.json, text + "\n")
        .with_context(|| format!("write {}", cfg.json.display()))?;
    println!("JSON: {}", cfg.json.display());
    Ok(())
}
