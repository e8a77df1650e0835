//! `nacre bench dne`: metadata scaling over MDTs, as the DNE talk measured it.
//!
//! For each MDT count it formats a fresh file system, runs it in this process and runs
//! mdtest through the native client (no FUSE, so the client is as cheap as it gets) in
//! two shapes:
//! - **shared**: every task creates its files in one directory striped over all MDTs;
//! - **unique**: each task in its own directory, the directories spread over the MDTs by
//!   round-robin (a default layout `-D -c 1 -i -1` on the test directory).
//!
//! Each shape runs at several file counts (1k, 10k, 100k files per test), with the phases
//! separated (create, then stat, then remove) so the per-MDT distribution of the entries is
//! counted between them. It prints a table and, with `--json`, writes every figure.

use crate::local::{self, LocalCluster};
use crate::native::NativeFs;
use anyhow::{Context, Result, bail};
use nacre_bench::backend::FileSystem;
use nacre_bench::env::RunEnv;
use nacre_bench::mdtest::{self, MdtestConfig, PHASES};
use nacre_bench::rank::World;
use nacre_client::{Client, MountSpec};
use nacre_core::lmv::{HashType, LmvTemplate};
use nacre_core::{Fid, FileKind};
use nacre_rpc::msg::{Cred, LayoutRequest};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Metadata rates over 1, 2 and 4 MDTs (mdtest, shared striped and unique directories).
#[derive(clap::Args, Debug, Clone)]
pub struct DneBenchArgs {
    /// MDT counts to compare.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pub mdts: Vec<u32>,
    /// Files per test: a shared directory holds them all; unique directories split them
    /// over the tasks.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,100000")]
    pub files: Vec<u64>,
    /// mdtest tasks (threads of this process).
    #[arg(long, default_value_t = 8)]
    pub tasks: usize,
    /// Directory hash of the striped directory (fnv_1a_64, all_char, crush, crush2).
    #[arg(long = "hash", default_value = "fnv_1a_64")]
    pub hash: String,
    /// Shapes to run: shared, unique.
    #[arg(long, value_delimiter = ',', default_value = "shared,unique")]
    pub modes: Vec<String>,
    /// OSTs of each file system (as `nacre up`: every file create takes a precreated
    /// object from one of them, so one OST can starve fast creates).
    #[arg(long, default_value_t = 4)]
    pub osts: u32,
    /// Where the file systems are made (a new temporary directory by default).
    #[arg(long)]
    pub workdir: Option<PathBuf>,
    /// Keep the file systems afterwards.
    #[arg(long)]
    pub keep: bool,
    /// Write every figure as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// MDTs sync their journal before each reply (durable against power loss): each MDT
    /// then waits on its disk, which is what more MDTs spread.
    #[arg(long)]
    pub sync_journal: bool,
    /// Transactions per journal write (group commit); 1 makes each request wait for its
    /// own journal write, so the MDT's disk, not the CPU, sets the pace (with
    /// --sync-journal).
    #[arg(long)]
    pub max_batch: Option<usize>,
    /// Files created and removed before measuring, so every MDT's OST object pools are
    /// warm (0: none).
    #[arg(long, default_value_t = 4000)]
    pub warmup: u64,
}

/// One measurement.
#[derive(Debug, Clone, Serialize)]
pub struct DneRow {
    pub mdts: u32,
    pub mode: String,
    pub files: u64,
    pub tasks: usize,
    pub create_rate: f64,
    pub stat_rate: f64,
    pub remove_rate: f64,
    /// Files on each MDT after the create phase.
    pub per_mdt: BTreeMap<u32, u64>,
    /// Largest distance of an MDT's share from an even share, in percent of the even share.
    pub max_deviation_pct: f64,
}

pub(super) fn phase_rate(r: &mdtest::MdtestReport, name: &str) -> f64 {
    let Some(i) = PHASES.iter().position(|p| *p == name) else {
        return 0.0;
    };
    r.iterations
        .first()
        .and_then(|it| it.get(i))
        .map_or(0.0, |p| p.rate)
}

fn deviation(per: &BTreeMap<u32, u64>, mdts: u32) -> f64 {
    let total: u64 = per.values().sum();
    if total == 0 || mdts == 0 {
        return 0.0;
    }
    let even = total as f64 / f64::from(mdts);
    (0..mdts)
        .map(|m| (per.get(&m).copied().unwrap_or(0) as f64 - even).abs() / even * 100.0)
        .fold(0.0, f64::max)
}

/// Files under `dir`, counted by the MDT holding each.
async fn count_per_mdt(c: &Client, dir: Fid) -> Result<BTreeMap<u32, u64>> {
    let mut per = BTreeMap::new();
    let mut q = VecDeque::from([dir]);
    while let Some(d) = q.pop_front() {
        let mut cookie = 0;
        loop {
            let (ents, eof) = c.readdir(d, cookie, 1024, &Cred::root()).await?;
            for e in &ents {
                cookie = e.cookie;
                match e.kind {
                    FileKind::Directory => q.push_back(e.fid),
                    _ => *per.entry(c.mdt_of(&e.fid)).or_default() += 1,
                }
            }
            if eof {
                break;
            }
        }
    }
    Ok(per)
}

/// Waits until the OSTs stop destroying the objects of removed files (their free inode
/// count holds still), so one test's clean-up does not slow the next one's creates.
async fn settle(c: &Client) {
    const POLL: std::time::Duration = std::time::Duration::from_millis(500);
    const LIMIT: std::time::Duration = std::time::Duration::from_secs(120);
    let start = std::time::Instant::now();
    let mut last = None;
    while start.elapsed() < LIMIT {
        let free: u64 = c
            .target_statfs()
            .await
            .into_iter()
            .filter(|(t, _)| t.kind == nacre_core::TargetKind::Ost)
            .filter_map(|(_, s)| s.ok().map(|s| s.ffree))
            .sum();
        if last == Some(free) {
            return;
        }
        last = Some(free);
        tokio::time::sleep(POLL).await;
    }
}

pub(super) fn mdtest_cfg(dir: &str, items: u64, tasks: usize, unique: bool) -> MdtestConfig {
    MdtestConfig {
        dir: PathBuf::from(dir),
        items: Some(items),
        tasks: Some(tasks),
        files_only: true,
        unique_dir: unique,
        command_line: format!(
            "mdtest -F -n {items} {}-d {dir} (tasks {tasks})",
            if unique { "-u " } else { "" }
        ),
        ..MdtestConfig::default()
    }
}

fn run_phase(env: &RunEnv<'_>, mut cfg: MdtestConfig, phase: &str) -> Result<f64> {
    cfg.create_only = phase == "File creation";
    cfg.stat_only = phase == "File stat";
    cfg.remove_only = phase == "File removal";
    let r = mdtest::run(env, &cfg)
        .with_context(|| format!("mdtest ({phase})"))?
        .context("mdtest gave no report")?;
    Ok(phase_rate(&r, phase))
}

fn measure_fs(
    a: &DneBenchArgs,
    dir: &Path,
    mdts: u32,
    hash: u32,
    rows: &mut Vec<DneRow>,
) -> Result<()> {
    let rt = super::runtime()?;
    let mut tuning = super::up::tuning_for(1 << 30, mdts);
    tuning.store.sync_journal = a.sync_journal;
    if let Some(b) = a.max_batch {
        tuning.store.max_batch = b.max(1);
    }
    let cluster = rt.block_on(LocalCluster::start(dir, tuning))?;
    let key = nacre_rpc::Key::load(&dir.join(local::KEY_FILE))?;
    let spec =
        MountSpec::parse(&cluster.spec(), key, "bench-dne-admin").map_err(anyhow::Error::msg)?;
    let admin = rt.block_on(Client::mount(spec))?;
    let fs: Arc<dyn FileSystem> = Arc::new(NativeFs::connect(&dir.to_string_lossy())?);
    let world = World::single();
    let env = RunEnv::quiet(fs, &world);
    let res = (|| -> Result<()> {
        if a.warmup > 0 {
            // Striped over every MDT, so each one's object pools fill up.
            let name = "warmup";
            rt.block_on(async {
                let (d, _) = admin
                    .create(
                        Fid::ROOT,
                        name.as_bytes(),
                        libc::S_IFDIR | 0o755,
                        0,
                        &Cred::root(),
                        None,
                        LayoutRequest::Inherit,
                        None,
                        true,
                    )
                    .await?;
                let t = LmvTemplate {
                    stripe_count: if mdts > 1 { -1 } else { 0 },
                    stripe_offset: 0,
                    hash_type: hash,
                    max_inherit: 3,
                    max_inherit_rr: 0,
                };
                admin
                    .set_default_lmv(d.attr.fid, Some(t), &Cred::root())
                    .await
            })?;
            let items = (a.warmup / a.tasks as u64).max(1);
            mdtest::run(
                &env,
                &mdtest_cfg(&format!("/{name}"), items, a.tasks, false),
            )
            .context("warm-up mdtest")?;
        }
        for mode in &a.modes {
            let unique = match mode.as_str() {
                "shared" => false,
                "unique" => true,
                other => bail!("unknown mode '{other}' (shared, unique)"),
            };
            for &files in &a.files {
                let name = format!("{mode}-{files}");
                // The test directory's default layout is what mdtest's directories get.
                let template = if unique {
                    LmvTemplate {
                        stripe_count: 1,
                        stripe_offset: -1,
                        hash_type: hash,
                        max_inherit: -1,
                        max_inherit_rr: 0,
                    }
                } else {
                    LmvTemplate {
                        stripe_count: if mdts > 1 { -1 } else { 0 },
                        stripe_offset: 0,
                        hash_type: hash,
                        max_inherit: 3,
                        max_inherit_rr: 0,
                    }
                };
                rt.block_on(settle(&admin));
                let test_dir = rt.block_on(async {
                    let (d, _) = admin
                        .create(
                            Fid::ROOT,
                            name.as_bytes(),
                            libc::S_IFDIR | 0o755,
                            0,
                            &Cred::root(),
                            None,
                            LayoutRequest::Inherit,
                            None,
                            true,
                        )
                        .await?;
                    admin
                        .set_default_lmv(d.attr.fid, Some(template), &Cred::root())
                        .await?;
                    Ok::<_, nacre_core::Errno>(d.attr.fid)
                })?;
                let items = (files / a.tasks as u64).max(1);
                let cfg = mdtest_cfg(&format!("/{name}"), items, a.tasks, unique);
                let create = run_phase(&env, cfg.clone(), "File creation")?;
                let per = rt.block_on(count_per_mdt(&admin, test_dir))?;
                rt.block_on(settle(&admin));
                let stat = run_phase(&env, cfg.clone(), "File stat")?;
                let remove = run_phase(&env, cfg, "File removal")?;
                let row = DneRow {
                    mdts,
                    mode: mode.clone(),
                    files: items * a.tasks as u64,
                    tasks: a.tasks,
                    create_rate: create,
                    stat_rate: stat,
                    remove_rate: remove,
                    max_deviation_pct: deviation(&per, mdts),
                    per_mdt: per,
                };
                print_row(&row);
                rows.push(row);
            }
        }
        Ok(())
    })();
    rt.block_on(admin.disconnect());
    admin.unmount();
    drop(env);
    rt.block_on(cluster.stop());
    res
}

fn print_header() {
    println!(
        "{:>4}  {:<6} {:>7}  {:>10} {:>10} {:>10}  per-MDT files (max deviation from even)",
        "MDTs", "dirs", "files", "create/s", "stat/s", "remove/s"
    );
}

fn print_row(r: &DneRow) {
    let per: Vec<String> = r.per_mdt.values().map(|n| n.to_string()).collect();
    println!(
        "{:>4}  {:<6} {:>7}  {:>10.0} {:>10.0} {:>10.0}  {} ({:.1}%)",
        r.mdts,
        r.mode,
        r.files,
        r.create_rate,
        r.stat_rate,
        r.remove_rate,
        per.join("/"),
        r.max_deviation_pct
    );
}

pub fn run(a: DneBenchArgs) -> Result<()> {
    let hash = HashType::parse(&a.hash)
        .filter(|h| *h != HashType::None)
        .with_context(|| {
            format!(
                "unknown hash '{}' (fnv_1a_64, all_char, crush, crush2)",
                a.hash
            )
        })? as u32;
    if a.mdts.is_empty() || a.files.is_empty() || a.tasks == 0 {
        bail!("--mdts, --files and --tasks need at least one value");
    }
    let (work, tmp) = match &a.workdir {
        Some(w) => (w.clone(), None),
        None => {
            let t = tempfile_dir("dne")?;
            (t.clone(), Some(t))
        }
    };
    std::fs::create_dir_all(&work)?;
    // Ctrl-C or SIGTERM stops mdtest at a clean point, so the servers and the work
    // directory are still taken down below.
    nacre_bench::cancel::install_stop_handler();
    println!(
        "DNE metadata scaling: mdtest -F through the native client, {} tasks, hash {}, {} CPUs, journal {}",
        a.tasks,
        a.hash,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        if a.sync_journal {
            "synced per reply"
        } else {
            "written per reply (kill -9 safe)"
        }
    );
    if let Some(b) = a.max_batch {
        println!("group commit: at most {b} transaction(s) per journal write");
    }
    print_header();
    let mut rows = Vec::new();
    let mut res = Ok(());
    for &m in &a.mdts {
        let dir = work.join(format!("fs-{m}mdt"));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        local::format(&dir, "benchdne", m, a.osts, 0)?;
        res = measure_fs(&a, &dir, m, hash, &mut rows);
        if !a.keep {
            let _ = std::fs::remove_dir_all(&dir);
        }
        if res.is_err() {
            break;
        }
    }
    if let Some(j) = &a.json {
        std::fs::write(j, serde_json::to_string_pretty(&rows)?)
            .with_context(|| format!("cannot write {}", j.display()))?;
    }
    print_scaling(&rows);
    if let Some(t) = tmp
        && !a.keep
    {
        let _ = std::fs::remove_dir_all(t);
    }
    res
}

/// Create rate relative to the first MDT count, per shape and file count.
fn print_scaling(rows: &[DneRow]) {
    let Some(base_mdts) = rows.first().map(|r| r.mdts) else {
        return;
    };
    println!("\ncreate rate relative to {base_mdts} MDT(s):");
    let mut keys: Vec<(String, u64)> = rows.iter().map(|r| (r.mode.clone(), r.files)).collect();
    keys.dedup();
    keys.sort();
    keys.dedup();
    for (mode, files) in keys {
        let base = rows
            .iter()
            .find(|r| r.mdts == base_mdts && r.mode == mode && r.files == files)
            .map_or(0.0, |r| r.create_rate);
        let parts: Vec<String> = rows
            .iter()
            .filter(|r| r.mode == mode && r.files == files)
            .map(|r| {
                format!(
                    "{} MDT: {:.2}x",
                    r.mdts,
                    if base > 0.0 {
                        r.create_rate / base
                    } else {
                        0.0
                    }
                )
            })
            .collect();
        println!("  {mode:<6} {files:>7} files: {}", parts.join(", "));
    }
}

/// A new work directory `nacre-bench-NAME.PID.N` in the temporary directory.
pub(super) fn tempfile_dir(name: &str) -> Result<PathBuf> {
    let base = std::env::temp_dir();
    for i in 0..1000u32 {
        let p = base.join(format!("nacre-bench-{name}.{}.{i}", std::process::id()));
        if std::fs::create_dir(&p).is_ok() {
            return Ok(p);
        }
    }
    bail!("cannot make a work directory in {}", base.display())
}
