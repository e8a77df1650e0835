//! `nacre bench lfsck`: how fast the online checker goes over an aged file system, the
//! seed study's LFSCK measurement.
//!
//! For each OST count it formats a file system (1 MDT), runs it in this process, ages it
//! once from a Darshan log through the native client (the `nacre darshan-age` method:
//! random directories, the log's file sizes, `-c -1 -S 1M`), then runs LFSCK as a dry
//! run (`-n -r`) to its end for each component set (namespace, layout, both) and each
//! mode (decoupled: nacre's adaptive windows, each component at its own pace; coupled:
//! Lustre's fixed windows with namespace and layout in lockstep, `mdd.*.lfsck_coupled`).
//! It reports objects checked per second, each phase apart, and what every target served
//! meanwhile, then the ratios coupled/decoupled and N OSTs/1 OST.

use crate::local::{self, LocalCluster};
use crate::native::NativeFs;
use anyhow::{Context, Result, bail};
use nacre_bench::backend::FileSystem;
use nacre_bench::darshan::{self, log, population};
use nacre_bench::env::RunEnv;
use nacre_bench::progress::Progress;
use nacre_bench::rank::World;
use nacre_lfsck::MdtLfsck;
use nacre_lustreapi::lfsck::{LPF_DRYRUN, LPF_RESET, LfsckStatus, TYPE_LAYOUT, TYPE_NAMESPACE};
use nacre_rpc::lfsck::StartArgs;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How often a run's records are looked at: fine enough that phase times are exact to a
/// few milliseconds, coarse enough that looking costs nothing.
const POLL: Duration = Duration::from_millis(5);
/// Longest one LFSCK run may take before the benchmark gives up on it.
const RUN_LIMIT: Duration = Duration::from_secs(3600);
/// The seed's layout for the aged tree: every OST, 1 MiB stripes.
const SEED_LAYOUT: &[&str] = &["-c", "-1", "-S", "1M"];

/// LFSCK speed on a Darshan-aged file system: components, coupled against decoupled,
/// over 1, 2 and 4 OSTs.
#[derive(clap::Args, Debug, Clone)]
#[command(after_help = "\
Each OST count gets its own file system, aged once; every run is a dry run (-n) from the \
start (-r), so runs see the same objects. Aging is the slow part: on a 2-core machine the \
in-process file system takes 3,000-4,500 files/s through the native client, so \
--files 1000000 ages for 4-6 minutes per OST count (the default run, about 22 \
minutes, needs some 6 GB free at a time); --files 100000 about 25 seconds.\n\n\
Figures: objects/s is the MDT objects each selected component checked, over the run's wall \
time (start to the last component's end, phase 2 included); p1/s and p2/s are each \
component's phase-1 and phase-2 items over that phase's wall time. Per target: requests/s \
it served, their mean service time, and svc% (service time summed over requests / wall \
time: 100% is one request in service all the time; more means they overlapped). LFSCK \
reads the MDT's store directly, not through requests, so the MDT line counts only \
requests; the process line has CPU (100% = one core) and disk bytes from /proc/self.\n\n\
Example: nacre bench lfsck --files 100000 --osts 1,2,4 --json lfsck.json")]
pub struct LfsckBenchArgs {
    /// Files to age each file system to (the tree's directories come on top)
    #[arg(long, default_value_t = 1_000_000)]
    pub files: u64,
    /// OST counts, one file system each
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pub osts: Vec<u32>,
    /// Component sets to run: namespace, layout, both
    #[arg(long, value_delimiter = ',', default_value = "namespace,layout,both")]
    pub components: Vec<String>,
    /// Modes: decoupled (nacre: adaptive windows, each component at its own pace), coupled
    /// (Lustre: fixed windows, namespace and layout in lockstep)
    #[arg(long, value_delimiter = ',', default_value = "decoupled,coupled")]
    pub modes: Vec<String>,
    /// Runs of each case (modes alternate within a repetition)
    #[arg(long, default_value_t = 1)]
    pub reps: u32,
    /// Darshan log the files' sizes come from (sample:NAME: one shipped with the darshan
    /// Python package)
    #[arg(long, default_value = "sample:dxt.darshan")]
    pub log: String,
    /// Files larger than this are made this size (the seed used 8M; LFSCK checks objects,
    /// not bytes, and 1M files of the sample log's sizes would not fit on most disks)
    #[arg(long, default_value = "64k")]
    pub max_size: String,
    /// Seed of the population (the same seed gives the same tree)
    #[arg(long, default_value_t = 10)]
    pub seed: u64,
    /// Writer threads aging the file system
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Where the file systems are made, one at a time (a new temporary directory by
    /// default); each is removed after its runs
    #[arg(long)]
    pub workdir: Option<PathBuf>,
    /// Write every figure as JSON here
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// What a target served during one run.
#[derive(Debug, Clone, Serialize)]
pub struct TargetUse {
    pub target: String,
    pub requests: u64,
    pub req_per_sec: f64,
    pub mean_us: f64,
    /// Service time summed over requests, over wall time, in percent.
    pub svc_pct: f64,
}

/// What the whole process used during one run.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ProcessUse {
    /// CPU time over wall time, in percent of one core.
    pub cpu_pct: f64,
    pub read_mib_s: f64,
    pub write_mib_s: f64,
}

/// One component's figures in one run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Phases {
    pub checked_phase1: u64,
    pub checked_phase2: u64,
    pub secs_phase1: f64,
    pub secs_phase2: f64,
    /// The record's own run times (whole seconds, as Lustre prints them).
    pub run_time_phase1: i64,
    pub run_time_phase2: i64,
    pub rate_phase1: f64,
    pub rate_phase2: f64,
}

/// One LFSCK run.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub osts: u32,
    pub component: String,
    pub mode: String,
    pub rep: u32,
    /// MDT objects each selected component checked.
    pub objects: u64,
    pub secs: f64,
    pub objects_per_sec: f64,
    pub namespace: Option<Phases>,
    pub layout: Option<Phases>,
    pub targets: Vec<TargetUse>,
    pub process: ProcessUse,
}

/// One file system's aging.
#[derive(Debug, Clone, Serialize)]
pub struct Aging {
    pub osts: u32,
    pub files: u64,
    pub dirs: u64,
    pub bytes: u64,
    pub secs: f64,
    pub files_per_sec: f64,
}

#[derive(Debug, Serialize)]
struct Report<'a> {
    log: &'a str,
    files: u64,
    max_size: u64,
    aging: &'a [Aging],
    runs: &'a [Cell],
}

fn types_of(component: &str) -> Result<u16> {
    Ok(match component {
        "namespace" => TYPE_NAMESPACE,
        "layout" => TYPE_LAYOUT,
        "both" => TYPE_NAMESPACE | TYPE_LAYOUT,
        other => bail!("unknown component '{other}' (namespace, layout, both)"),
    })
}

/// CPU seconds of this process (user + system), from /proc/self/stat.
fn cpu_secs() -> f64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) start at the last ')'.
    let Some(rest) = s.rfind(')').map(|i| &s[i + 2..]) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the file, 12 and 13 after the name.
    let ticks: u64 = f
        .get(11..13)
        .map_or(0, |v| v.iter().filter_map(|x| x.parse::<u64>().ok()).sum());
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    ticks as f64 / if hz > 0 { hz as f64 } else { 100.0 }
}

/// Bytes this process read from and wrote to storage, from /proc/self/io.
fn disk_bytes() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    let get = |k: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    (get("read_bytes:"), get("write_bytes:"))
}

/// Requests served so far by each target: (name, requests, service µs).
fn served(cluster: &LocalCluster) -> Vec<(String, u64, u64)> {
    cluster
        .mdts
        .iter()
        .chain(cluster.osts.iter())
        .flatten()
        .map(|s| {
            let (n, us) = s
                .stats
                .samples()
                .iter()
                .fold((0, 0), |(n, us), o| (n + o.count, us + o.sum_us));
            (s.name.to_string(), n, us)
        })
        .collect()
}

fn checker(cluster: &LocalCluster) -> Result<Arc<MdtLfsck>> {
    cluster
        .mdts
        .first()
        .and_then(Option::as_ref)
        .and_then(|s| s.lfsck.clone())
        .context("MDT0000 has no LFSCK")
}

/// Wall times of a component's phases, seen from outside.
#[derive(Default)]
struct Seen {
    phase1_end: Option<Duration>,
    end: Option<Duration>,
}

fn look(seen: &mut Seen, status: LfsckStatus, at: Duration) {
    if seen.phase1_end.is_none() && status != LfsckStatus::ScanningPhase1 {
        seen.phase1_end = Some(at);
    }
    if seen.end.is_none() && !status.is_running() {
        seen.end = Some(at);
    }
}

fn phases(seen: &Seen, total: Duration, c1: u64, c2: u64, rt1: i64, rt2: i64) -> Phases {
    let p1 = seen.phase1_end.unwrap_or(total);
    let end = seen.end.unwrap_or(total);
    let (s1, s2) = (p1.as_secs_f64(), end.saturating_sub(p1).as_secs_f64());
    let rate = |n: u64, s: f64| if s > 0.0 { n as f64 / s } else { 0.0 };
    Phases {
        checked_phase1: c1,
        checked_phase2: c2,
        secs_phase1: s1,
        secs_phase2: s2,
        run_time_phase1: rt1,
        run_time_phase2: rt2,
        rate_phase1: rate(c1, s1),
        rate_phase2: rate(c2, s2),
    }
}

/// Runs LFSCK (`types`, dry run, from the start) to its end and measures it.
async fn lfsck_run(
    cluster: &LocalCluster,
    l: &Arc<MdtLfsck>,
    types: u16,
    coupled: bool,
    bar: &indicatif::ProgressBar,
) -> Result<(
    f64,
    Option<Phases>,
    Option<Phases>,
    Vec<TargetUse>,
    ProcessUse,
)> {
    l.coupled.store(coupled, Ordering::Relaxed);
    let before = served(cluster);
    let (cpu0, (rd0, wr0)) = (cpu_secs(), disk_bytes());
    let t0 = Instant::now();
    l.start(StartArgs {
        active: types,
        flags: LPF_DRYRUN | LPF_RESET,
        ..StartArgs::default()
    })
    .await
    .map_err(|e| anyhow::anyhow!("lfsck_start: {e}"))?;
    let (mut ns_seen, mut lo_seen) = (Seen::default(), Seen::default());
    loop {
        let at = t0.elapsed();
        let running = l.running();
        {
            let st = l.state.lock();
            if types & TYPE_NAMESPACE != 0 {
                look(&mut ns_seen, st.ns.status, at);
            }
            if types & TYPE_LAYOUT != 0 {
                look(&mut lo_seen, st.lo.status, at);
            }
            let live =
                |c: u64, l: &Option<nacre_lfsck::control::Live>| c + l.map_or(0, |l| l.new_checked);
            bar.set_position(
                live(st.ns.items_checked, &st.ns_live).max(live(st.lo.checked_phase1, &st.lo_live)),
            );
        }
        if !running {
            break;
        }
        if at > RUN_LIMIT {
            let _ = l.stop(false).await;
            bail!("LFSCK ran past {} s", RUN_LIMIT.as_secs());
        }
        tokio::time::sleep(POLL).await;
    }
    let total = t0.elapsed();
    let secs = total.as_secs_f64();
    let (cpu1, (rd1, wr1)) = (cpu_secs(), disk_bytes());
    let after = served(cluster);
    l.coupled.store(false, Ordering::Relaxed);
    let st = l.state.lock();
    let mut ns = None;
    let mut lo = None;
    if types & TYPE_NAMESPACE != 0 {
        if st.ns.status != LfsckStatus::Completed {
            bail!(
                "the namespace check ended {:?}:\n{}",
                st.ns.status,
                l.namespace_text()
            );
        }
        ns = Some(phases(
            &ns_seen,
            total,
            st.ns.items_checked,
            st.ns.objs_checked_phase2,
            st.ns.run_time_phase1,
            st.ns.run_time_phase2,
        ));
    }
    if types & TYPE_LAYOUT != 0 {
        if st.lo.status != LfsckStatus::Completed {
            bail!(
                "the layout check ended {:?}:\n{}",
                st.lo.status,
                l.layout_text()
            );
        }
        lo = Some(phases(
            &lo_seen,
            total,
            st.lo.checked_phase1,
            st.lo.checked_phase2,
            st.lo.run_time_phase1,
            st.lo.run_time_phase2,
        ));
    }
    let targets = after
        .iter()
        .map(|(name, n, us)| {
            let (n0, us0) = before
                .iter()
                .find(|b| b.0 == *name)
                .map_or((0, 0), |b| (b.1, b.2));
            let (n, us) = (n.saturating_sub(n0), us.saturating_sub(us0));
            TargetUse {
                target: name.clone(),
                requests: n,
                req_per_sec: n as f64 / secs,
                mean_us: if n > 0 { us as f64 / n as f64 } else { 0.0 },
                svc_pct: us as f64 / 1e6 / secs * 100.0,
            }
        })
        .collect();
    let mib = (1u64 << 20) as f64;
    let process = ProcessUse {
        cpu_pct: (cpu1 - cpu0) / secs * 100.0,
        read_mib_s: rd1.saturating_sub(rd0) as f64 / mib / secs,
        write_mib_s: wr1.saturating_sub(wr0) as f64 / mib / secs,
    };
    Ok((secs, ns, lo, targets, process))
}

/// Ages the file system of `dir` with `pop` through the native client.
fn age(dir: &Path, pop: &population::Population, threads: usize, show: bool) -> Result<Aging> {
    let spec = dir.to_string_lossy().into_owned();
    let native = Arc::new(NativeFs::connect(&spec)?);
    let fs: Arc<dyn FileSystem> = native.clone();
    let world = World::single();
    let env = RunEnv {
        fs,
        world: &world,
        progress: Progress::new(show),
        cancel: world.cancel().clone(),
    };
    let layout: Vec<String> = SEED_LAYOUT.iter().map(|s| s.to_string()).collect();
    let prepare = |root: &Path| -> nacre_bench::error::Result<()> {
        super::darshan_age::set_default_layout(Some(&spec), root, &layout).map_err(|e| {
            nacre_bench::error::BenchError::Usage(format!(
                "setting the layout of {}: {e:#}",
                root.display()
            ))
        })
    };
    let opts = darshan::AgeOptions {
        threads,
        xfer: 1 << 20,
        fsync: false,
    };
    let r = darshan::run(&env, Path::new("/"), pop, &opts, &prepare).context("Darshan aging")?;
    Ok(Aging {
        osts: 0,
        files: r.made.files,
        dirs: r.made.dirs,
        bytes: r.made.bytes,
        secs: r.secs,
        files_per_sec: if r.secs > 0.0 {
            r.made.files as f64 / r.secs
        } else {
            0.0
        },
    })
}

pub fn run(a: LfsckBenchArgs) -> Result<()> {
    if a.files == 0 {
        bail!("--files must be at least 1");
    }
    if a.osts.is_empty() || a.osts.contains(&0) {
        bail!("--osts takes OST counts of at least 1");
    }
    for c in &a.components {
        types_of(c)?;
    }
    for m in &a.modes {
        if m != "decoupled" && m != "coupled" {
            bail!("unknown mode '{m}' (decoupled, coupled)");
        }
    }
    let cap = nacre_core::size::parse_size(&a.max_size)
        .map_err(|e| anyhow::anyhow!("--max-size: {e}"))?;
    let path = log::resolve(&a.log).context("finding the Darshan log")?;
    let records = log::read(&[path])
        .context("reading the Darshan log")?
        .records;
    let shape = population::TreeShape {
        cap,
        ..population::TreeShape::default()
    };
    let pop = population::Population::new(records, a.files, a.seed, shape)?;
    let show = a.json.is_none() || std::io::IsTerminal::is_terminal(&std::io::stderr());
    let (work, tmp) = match &a.workdir {
        Some(w) => (w.clone(), None),
        None => {
            let t = super::bench_dne::tempfile_dir("lfsck")?;
            (t.clone(), Some(t))
        }
    };
    // Ctrl-C or SIGTERM stops the aging at a clean point, so the servers and the work
    // directory are still taken down below.
    nacre_bench::cancel::install_stop_handler();
    let rt = super::runtime()?;
    let mut agings = Vec::new();
    let mut cells = Vec::new();
    let res = (|| -> Result<()> {
        for &osts in &a.osts {
            let dir = work.join(format!("fs-{osts}ost"));
            let r = one_fs(&a, &rt, &dir, osts, &pop, show, &mut agings, &mut cells);
            let _ = std::fs::remove_dir_all(&dir);
            r?;
        }
        Ok(())
    })();
    if let Some(t) = tmp {
        let _ = std::fs::remove_dir_all(t);
    }
    res?;
    print_table(&a, &agings, &cells);
    if let Some(p) = &a.json {
        let rep = Report {
            log: &a.log,
            files: a.files,
            max_size: cap,
            aging: &agings,
            runs: &cells,
        };
        std::fs::write(p, serde_json::to_string_pretty(&rep)?)
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(())
}

/// Formats, starts and ages one file system of `osts` OSTs, and runs every case on it.
#[allow(clippy::too_many_arguments)]
fn one_fs(
    a: &LfsckBenchArgs,
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    osts: u32,
    pop: &population::Population,
    show: bool,
    agings: &mut Vec<Aging>,
    cells: &mut Vec<Cell>,
) -> Result<()> {
    local::format(dir, "lfsckb", 1, osts, 0)?;
    let cluster = rt.block_on(LocalCluster::start(dir, super::up::tuning_for(1 << 30, 1)))?;
    let r = (|| -> Result<()> {
        eprintln!("{osts} OST(s): aging to {} files", a.files);
        let mut aging = age(dir, pop, a.threads, show)?;
        aging.osts = osts;
        eprintln!(
            "{osts} OST(s): {} files, {} directories in {:.1} s ({:.0} files/s)",
            aging.files, aging.dirs, aging.secs, aging.files_per_sec
        );
        let objects = aging.files + aging.dirs;
        agings.push(aging);
        let l = checker(&cluster)?;
        for rep in 0..a.reps {
            for comp in &a.components {
                let types = types_of(comp)?;
                // Modes alternate run by run, so drift in the machine falls on both.
                let mut modes = a.modes.clone();
                if rep % 2 == 1 {
                    modes.reverse();
                }
                for mode in &modes {
                    let bar = Progress::new(show).items(objects, &format!("{comp} {mode}"));
                    let (secs, ns, lo, targets, process) =
                        rt.block_on(lfsck_run(&cluster, &l, types, mode == "coupled", &bar))?;
                    bar.finish_and_clear();
                    let checked = [&ns, &lo]
                        .iter()
                        .filter_map(|p| p.as_ref().map(|p| p.checked_phase1))
                        .min()
                        .unwrap_or(0);
                    let cell = Cell {
                        osts,
                        component: comp.clone(),
                        mode: mode.clone(),
                        rep,
                        objects: checked,
                        secs,
                        objects_per_sec: if secs > 0.0 {
                            checked as f64 / secs
                        } else {
                            0.0
                        },
                        namespace: ns,
                        layout: lo,
                        targets,
                        process,
                    };
                    eprintln!(
                        "{osts} OST(s) {comp} {mode} run {rep}: {} objects in {:.2} s, {:.0} objects/s",
                        cell.objects, cell.secs, cell.objects_per_sec
                    );
                    cells.push(cell);
                }
            }
        }
        Ok(())
    })();
    rt.block_on(cluster.stop());
    r
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (n, s) = v.fold((0u32, 0.0), |(n, s), x| (n + 1, s + x));
    if n == 0 { 0.0 } else { s / f64::from(n) }
}

fn cells_of<'a>(
    cells: &'a [Cell],
    osts: u32,
    comp: &'a str,
    mode: &'a str,
) -> impl Iterator<Item = &'a Cell> + Clone {
    cells
        .iter()
        .filter(move |c| c.osts == osts && c.component == comp && c.mode == mode)
}

fn ratio(x: f64, of: f64) -> String {
    if of > 0.0 {
        format!("{:.2}x", x / of)
    } else {
        "-".into()
    }
}

fn print_table(a: &LfsckBenchArgs, agings: &[Aging], cells: &[Cell]) {
    println!(
        "LFSCK dry run (-n -r) on 1 MDT, aged from {} to {} files (capped at {}, -c -1 -S 1M), \
         {} run(s) each",
        a.log, a.files, a.max_size, a.reps
    );
    for g in agings {
        println!(
            "  {} OST(s): aged {} files, {} directories, {:.1} MiB in {:.1} s ({:.0} files/s)",
            g.osts,
            g.files,
            g.dirs,
            g.bytes as f64 / f64::from(1u32 << 20),
            g.secs,
            g.files_per_sec
        );
    }
    println!(
        "{:>4} {:<9} {:<9} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8}",
        "OSTs",
        "component",
        "mode",
        "objects",
        "secs",
        "objects/s",
        "ns p1/s",
        "ns p2/s",
        "lo p1/s",
        "lo p2/s",
        "cpl/dec",
        "vs 1OST"
    );
    let first = a.osts.first().copied().unwrap_or(1);
    for &osts in &a.osts {
        for comp in &a.components {
            for mode in &a.modes {
                let cs = cells_of(cells, osts, comp, mode);
                let rate = mean(cs.clone().map(|c| c.objects_per_sec));
                let ph = |f: fn(&Cell) -> Option<f64>| {
                    let v: Vec<f64> = cs.clone().filter_map(f).collect();
                    if v.is_empty() {
                        "-".to_string()
                    } else {
                        format!("{:.0}", mean(v.into_iter()))
                    }
                };
                let dec = mean(cells_of(cells, osts, comp, "decoupled").map(|c| c.objects_per_sec));
                let base = mean(cells_of(cells, first, comp, mode).map(|c| c.objects_per_sec));
                println!(
                    "{osts:>4} {comp:<9} {mode:<9} {:>9.0} {:>7.2} {rate:>10.0} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8}",
                    mean(cs.clone().map(|c| c.objects as f64)),
                    mean(cs.clone().map(|c| c.secs)),
                    ph(|c| c.namespace.as_ref().map(|p| p.rate_phase1)),
                    ph(|c| c.namespace.as_ref().map(|p| p.rate_phase2)),
                    ph(|c| c.layout.as_ref().map(|p| p.rate_phase1)),
                    ph(|c| c.layout.as_ref().map(|p| p.rate_phase2)),
                    if mode == "coupled" {
                        ratio(rate, dec)
                    } else {
                        "-".into()
                    },
                    if osts == first {
                        "-".into()
                    } else {
                        ratio(rate, base)
                    },
                );
            }
        }
    }
    println!();
    println!("Per target during each run (iostat-like; means over runs):");
    println!(
        "{:>4} {:<9} {:<9} {:<16} {:>10} {:>9} {:>7}",
        "OSTs", "component", "mode", "target", "req/s", "mean µs", "svc%"
    );
    for &osts in &a.osts {
        for comp in &a.components {
            for mode in &a.modes {
                let cs = cells_of(cells, osts, comp, mode);
                let Some(c0) = cs.clone().next() else {
                    continue;
                };
                for t in &c0.targets {
                    let ts = cs
                        .clone()
                        .filter_map(|c| c.targets.iter().find(|x| x.target == t.target));
                    println!(
                        "{osts:>4} {comp:<9} {mode:<9} {:<16} {:>10.0} {:>9.0} {:>6.1}%",
                        t.target,
                        mean(ts.clone().map(|x| x.req_per_sec)),
                        mean(ts.clone().map(|x| x.mean_us)),
                        mean(ts.map(|x| x.svc_pct)),
                    );
                }
                println!(
                    "{osts:>4} {comp:<9} {mode:<9} {:<16} cpu {:>5.0}%  read {:>7.1} MiB/s  write {:>7.1} MiB/s",
                    "process",
                    mean(cs.clone().map(|c| c.process.cpu_pct)),
                    mean(cs.clone().map(|c| c.process.read_mib_s)),
                    mean(cs.map(|c| c.process.write_mib_s)),
                );
            }
        }
    }
}
