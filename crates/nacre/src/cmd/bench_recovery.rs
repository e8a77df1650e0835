//! `nacre bench recovery`: what "acknowledged means kept" costs.
//!
//! Replay recovery has every modifying metadata request carry the client's identity and
//! a request number, the MDT keep its answer (reply data, for resends) and the client keep
//! the request until its MDT commits it; every write keeps its data in the client until
//! its OST commits it (every 5 s, or when the client's kept data reaches its bound).
//! `mdc.*.replay_tracking=0` and `osc.*.replay_tracking=0` send them untracked, so the two
//! can be compared: mdtest's file create, stat and remove rates and a
//! streaming IOR through the mount, tracking on and off, alternating run by run.
//!
//! Durability on demand: a small-file workload that fsyncs every file (fio's `fsync=1`:
//! each file written in one write, then fsynced, by several threads at once), through the
//! mount against a local directory (ext4 here: the file system the targets themselves are
//! on), files per second side by side. On nacre each fsync makes the file's OST objects
//! and its MDT's journal durable, sharing a synced journal write with the callers beside
//! it. The same workload runs twice on nacre: in a directory of the default layout (one
//! OST object per file, row `files`) and in one whose default is Lustre's Data-on-MDT
//! layout for small files (`lfs setstripe -E 1M -L mdt -E -1`, row `dom`), where a
//! file's bytes and its name are made durable by its MDT alone.

use super::bench_checksums::write_then_read;
use super::bench_cost::{self, Cell, CostArgs, MDTEST_PHASES};
use super::bench_fs::BenchFs;
use anyhow::{Context, Result, bail};
use nacre_bench::env::RunEnv;
use nacre_bench::ior::IorConfig;
use nacre_bench::mix::{self, MixJob, MixOptions, Popularity, Rw};
use nacre_bench::rank::World;
use nacre_core::Fid;
use nacre_lustreapi::setstripe::{SetstripeAction, parse_setstripe};
use nacre_rpc::msg::Cred;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The goal for tracking: at most 5% of the create rate (stat changes nothing to track,
/// so its ratio shows the run's noise; remove is shown without a goal).
const TRACKING_GOAL: bench_cost::Goal<'static> = bench_cost::Goal {
    ratio: 0.95,
    ops: &["create"],
};
/// The goal for fsync per file: at least half the local file system's rate.
const FSYNC_GOAL: bench_cost::Goal<'static> = bench_cost::Goal {
    ratio: 0.5,
    ops: &["files", "dom"],
};
/// The `dom` case's default layout, as `lfs setstripe` options.
const DOM_SETSTRIPE: &[&str] = &["-E", "1M", "-L", "mdt", "-E", "-1"];
/// ext4's (and ext2/3's) `f_type`.
const EXT4_SUPER_MAGIC: i64 = 0xEF53;

/// Recovery tracking on and off; fsync per file against a local file system.
#[derive(clap::Args, Debug, Clone)]
#[command(
    after_long_help = "Example:\n  nacre bench recovery --files 8000 --reps 5 --sync-files 2000 --json recovery.json"
)]
pub struct RecoveryBenchArgs {
    #[command(flatten)]
    pub cost: CostArgs,
    /// Bytes each IOR task writes, then reads (IOR -b); 0 leaves IOR out
    #[arg(long, default_value = "128m")]
    pub ior_size: String,
    /// Bytes per IOR call (IOR -t)
    #[arg(long, default_value = "1m")]
    pub xfer: String,
    /// Files of the fsync-per-file workload, over all tasks; 0 leaves it out
    #[arg(long, default_value_t = 1000)]
    pub sync_files: u64,
    /// Size of each of those files (one write, then fsync)
    #[arg(long, default_value = "16k")]
    pub sync_size: String,
    /// The local directory the fsync workload is compared with (default: one beside
    /// the file system's targets, so on the same disk)
    #[arg(long)]
    pub local: Option<PathBuf>,
}

/// The mount's client records every modifying request (metadata and writes) for
/// replay, or none.
fn set_tracking(fs: &BenchFs, on: bool) -> Result<()> {
    for class in ["mdc", "osc"] {
        fs.client
            .tunables
            .set(class, "replay_tracking", u64::from(on))
            .map_err(anyhow::Error::msg)?;
    }
    Ok(())
}

/// The type of the file system holding `p`, as `statfs` names it.
fn fs_type(p: &Path) -> Result<i64> {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes())?;
    // SAFETY: a valid C string and a zeroed statfs for the call to fill.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut s) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("statfs {}", p.display()));
    }
    Ok(s.f_type as i64)
}

/// The fsync-per-file job: `files` files of `size` bytes over `tasks` threads, each
/// written in one call and fsynced.
fn fsync_job(files: u64, size: u64, tasks: usize) -> MixJob {
    MixJob {
        name: "fsync-per-file".into(),
        rw: Rw::Write,
        bs: size,
        file_size: size,
        nrfiles: files,
        popularity: Popularity::Uniform,
        threads: tasks,
        direct: false,
        fsync: 1,
    }
}

/// Makes `dir`, a directory in the mount's root, with Lustre's Data-on-MDT layout for
/// small files as its default (`lfs setstripe` [`DOM_SETSTRIPE`], parsed as `lfs` parses
/// it), and checks it took.
fn dom_dir(fs: &BenchFs, dir: &Path) -> Result<()> {
    let setstripe = DOM_SETSTRIPE.join(" ");
    let mut args = DOM_SETSTRIPE.to_vec();
    let path = dir.to_string_lossy();
    args.push(&path);
    let SetstripeAction::SetLayout(layout) = parse_setstripe(&args)
        .map_err(|e| anyhow::anyhow!("lfs setstripe {setstripe}: {e}"))?
        .action
    else {
        bail!("lfs setstripe {setstripe}: not a layout");
    };
    std::fs::create_dir(dir).with_context(|| format!("mkdir {}", dir.display()))?;
    let name = match dir.file_name() {
        Some(n) if dir.parent() == Some(fs.mnt.as_path()) => n,
        _ => bail!("{} is not in the mount's root", dir.display()),
    };
    let cred = Cred::root();
    let set = fs.rt.block_on(async {
        let d = fs
            .client
            .lookup(Fid::ROOT, name.as_encoded_bytes(), &cred)
            .await?;
        fs.client
            .set_default_layout(d.attr.fid, Some(layout), &cred)
            .await?;
        fs.client.get_default_layout(d.attr.fid).await
    });
    match set {
        Ok(Some(l)) if l.dom().is_some() => Ok(()),
        Ok(_) => bail!("{}: the DoM default layout did not take", dir.display()),
        Err(e) => bail!("lfs setstripe {setstripe} {}: {e}", dir.display()),
    }
}

/// Files per second of one fsync-per-file run in `dir` (made and removed here).
fn fsync_rate(env: &RunEnv<'_>, dir: &Path, job: &MixJob, seed: u64) -> Result<f64> {
    std::fs::create_dir_all(dir).with_context(|| format!("mkdir {}", dir.display()))?;
    let opts = MixOptions { keep: false, seed };
    let r = mix::run(env, dir, std::slice::from_ref(job), &opts)
        .with_context(|| format!("fsync-per-file in {}", dir.display()))?
        .context("the workload gave no report")?;
    std::fs::remove_dir_all(dir).with_context(|| format!("rm -r {}", dir.display()))?;
    let j = r.jobs.first().context("no job result")?;
    Ok(if j.secs > 0.0 {
        j.files as f64 / j.secs
    } else {
        0.0
    })
}

pub fn run(a: RecoveryBenchArgs) -> Result<()> {
    let ior_size = nacre_core::size::parse_size(&a.ior_size)
        .map_err(|e| anyhow::anyhow!("--ior-size: {e}"))?;
    let xfer = nacre_core::size::parse_size(&a.xfer).map_err(|e| anyhow::anyhow!("--xfer: {e}"))?;
    let sync_size = nacre_core::size::parse_size(&a.sync_size)
        .map_err(|e| anyhow::anyhow!("--sync-size: {e}"))?;
    if xfer == 0 || ior_size % xfer != 0 {
        bail!("--ior-size must be a multiple of a non-zero --xfer");
    }
    let c = &a.cost;
    c.check()?;
    if sync_size == 0 {
        bail!("--sync-size must be at least 1");
    }
    let fs = BenchFs::up("recovery", "rcvbench", 4, c.workdir.as_deref())?;
    let local = fs.local_dir(a.local.as_deref())?;
    let world = World::single();
    let env = RunEnv::quiet(Arc::new(nacre_bench::PosixFs::new()), &world);
    let job = fsync_job(a.sync_files, sync_size, c.tasks);
    let mut cells = Vec::new();
    let mut local_type = None;
    let res = (|| -> Result<()> {
        std::fs::create_dir_all(&local).with_context(|| format!("mkdir {}", local.display()))?;
        local_type = Some(fs_type(&local)?);
        bench_cost::warm_up(&env, &fs.mnt.join("warmup"), c)?;
        for rep in 0..c.reps {
            for on in bench_cost::order(rep) {
                set_tracking(&fs, on)?;
                let setting = if on { "on" } else { "off" };
                let d = fs.mnt.join(format!("r{rep}-{setting}"));
                std::fs::create_dir(&d).with_context(|| format!("mkdir {}", d.display()))?;
                let mut push = |case: &str, op: &str, rate: f64| {
                    eprintln!("run {rep}: {case} {op} tracking {setting}: {rate:.1}");
                    cells.push(Cell {
                        case: case.into(),
                        on,
                        op: op.into(),
                        rep,
                        rate,
                    });
                };
                for (op, rate) in bench_cost::mdtest_rates(&env, &d, c.files, c.tasks)? {
                    push("mdtest", op, rate);
                }
                if ior_size > 0 {
                    let cfg = IorConfig {
                        test_file: d.join("ior"),
                        file_per_proc: true,
                        xfer,
                        block: ior_size,
                        fsync: true,
                        tasks: Some(c.tasks),
                        command_line: format!(
                            "ior -F -e -t {} -b {} -N {} (replay tracking {setting})",
                            a.xfer, a.ior_size, c.tasks
                        ),
                        ..IorConfig::default()
                    };
                    let (w, r) = write_then_read(&env, cfg)?;
                    push("ior", "write", w);
                    push("ior", "read", r);
                }
                std::fs::remove_dir_all(&d).with_context(|| format!("rm -r {}", d.display()))?;
            }
            if a.sync_files > 0 {
                // "on" is nacre, "off" the local file system; they alternate too. The
                // local rate stands against both of nacre's layouts.
                set_tracking(&fs, true)?;
                let seed = u64::from(rep) + 1;
                for on in bench_cost::order(rep) {
                    let rates = if on {
                        // The two layouts take turns going first, as on and off do.
                        let (mut plain, mut dom) = (0.0, 0.0);
                        for dom_now in bench_cost::order(rep) {
                            if dom_now {
                                let dir = fs.mnt.join(format!("sync-dom-{rep}"));
                                dom_dir(&fs, &dir)?;
                                dom = fsync_rate(&env, &dir, &job, seed)?;
                            } else {
                                let dir = fs.mnt.join(format!("sync-{rep}"));
                                plain = fsync_rate(&env, &dir, &job, seed)?;
                            }
                        }
                        eprintln!(
                            "run {rep}: fsync per file on nacre: {plain:.1} files/s, with DoM {dom:.1}"
                        );
                        [plain, dom]
                    } else {
                        let rate =
                            fsync_rate(&env, &local.join(format!("sync-{rep}")), &job, seed)?;
                        eprintln!("run {rep}: fsync per file on local: {rate:.1} files/s");
                        [rate, rate]
                    };
                    for (op, rate) in ["files", "dom"].into_iter().zip(rates) {
                        cells.push(Cell {
                            case: "fsync".into(),
                            on,
                            op: op.into(),
                            rep,
                            rate,
                        });
                    }
                }
            }
        }
        Ok(())
    })();
    drop(env);
    fs.down();
    if a.local.is_none() {
        let _ = std::fs::remove_dir_all(&local);
    }
    res?;
    print_tables(&a, &cells, &local, local_type);
    c.write_json(&cells)
}

fn print_tables(a: &RecoveryBenchArgs, cells: &[Cell], local: &Path, local_type: Option<i64>) {
    println!(
        "Replay tracking (mdc.*.replay_tracking, osc.*.replay_tracking) on against off through the mount, {} run(s) \
         each: mdtest -F -u -n {} ({} tasks); IOR -F -e -t {} -b {} (MiB/s)",
        a.cost.reps,
        a.cost.per_task(),
        a.cost.tasks,
        a.xfer,
        a.ior_size
    );
    let ops: Vec<&str> = MDTEST_PHASES.iter().map(|(_, op)| *op).collect();
    bench_cost::print_table(
        cells,
        &["mdtest".into()],
        &ops,
        "ops/s",
        Some(TRACKING_GOAL),
    );
    bench_cost::print_table(cells, &["ior".into()], &["write", "read"], "MiB/s", None);
    if a.sync_files == 0 {
        return;
    }
    let kind = match local_type {
        Some(EXT4_SUPER_MAGIC) => "ext4".to_string(),
        Some(t) => format!("f_type {t:#x}, not ext4"),
        None => "unknown".into(),
    };
    println!();
    println!(
        "fsync per file ({} files of {}, one write and an fsync each, {} threads): nacre \
         (\"on\"; files: one OST object each; dom: {}) against local {} ({kind}) (\"off\")",
        a.sync_files,
        a.sync_size,
        a.cost.tasks,
        DOM_SETSTRIPE.join(" "),
        local.display()
    );
    bench_cost::print_table(
        cells,
        &["fsync".into()],
        &["files", "dom"],
        "files/s",
        Some(FSYNC_GOAL),
    );
}
