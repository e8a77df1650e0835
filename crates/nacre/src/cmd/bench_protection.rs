//! `nacre bench protection`: what each protection costs, as the seed's point about hero
//! numbers asks: a file system's figures with none of its protections on are not the
//! figures its users get.
//!
//! It formats a fresh file system (1 MDT, 6 OSTs), runs it in this process and mounts it,
//! then runs, through the mount, streaming IOR (`-F -e`, write, page cache dropped, read)
//! and the seed's six-job small-file mix in directories whose default layout is plain (one
//! stripe), mirrored (`lfs setstripe -N2 -c 1`, FLR immediate mode: every write goes to
//! both copies) or erasure coded (`lfs setstripe -c 4 --ec 4+2`, parity computed at each
//! writer's close), with checksums on and off. For mirrored files it also reads with the
//! OST holding the first mirror's copy of task 0's file stopped (degraded); for 4+2 files
//! with the OSTs of one and of two of the data stripes of task 0's file stopped (every
//! file of the run has an object on each of the 6 OSTs). Settings alternate run by run, so
//! drift in the machine's speed falls on all alike.
//!
//! A mirrored write puts every byte on the disk twice, so its ratio to a plain write can
//! be no better than the disk's own: how long the disk takes to take twice the bytes
//! against once. That is not a constant: a virtual disk whose host absorbs the first GiB
//! at memory speed and the rest at the device's is far below 0.5x past that point. So
//! with `mirror` and `plain` measured, the same IOR writes the same bytes once and twice
//! into a local directory on the targets' disk, and the table prints the disk's ratio
//! beside the mirrored one.

use super::bench_checksums::{set_checksums, write_then_read};
use super::bench_fs::BenchFs;
use anyhow::{Context, Result, bail};
use nacre_bench::env::RunEnv;
use nacre_bench::ior::{self, Access, IorConfig};
use nacre_bench::mix::{self, MixOptions};
use nacre_bench::rank::World;
use nacre_client::Client;
use nacre_core::Layout;
use nacre_core::layout::{Component, EOF, pflr_id};
use nacre_rpc::msg::Cred;
use serde::Serialize;
use std::path::Path;
use std::sync::Arc;

/// OSTs of the file system it brings up: a 4+2 file's six stripes each on its own OST
/// (and two mirrors of two tasks' files on different OSTs).
const OSTS: u32 = 6;
/// Stripe size of both layouts.
const STRIPE_SIZE: u32 = 1 << 20;

const EXAMPLES: &str = "\
Examples:
  # the defaults: 2 tasks x 512 MiB, 3 runs of each case, the mix at 1% of the seed's size
  nacre bench protection
  # a quick look
  nacre bench protection --size 64m --reps 1 --mix-scale 0.002
  # streaming only, figures as JSON
  nacre bench protection --mix-scale 0 --json /tmp/protection.json

What it prints: MiB/s per layout with checksums on and off (median of the runs), then the
ratios the integrity issue sets goals for: checksums on/off (goal: at least 0.90x of
streaming), mirrored/plain write (goal: at least 0.45x), degraded/healthy mirrored read,
degraded/healthy 4+2 read with one and with two OSTs stopped (goal: at least 0.5x). With
mirror and plain both measured, the disk's own ratio for taking every byte twice (the same
IOR on a local directory, writing --size and twice --size per task) is printed beside the
mirrored one: the best any mirrored write on this disk can do.";

/// Streaming IOR and the small-file mix on plain and mirrored layouts, checksums on
/// and off.
#[derive(clap::Args, Debug, Clone)]
#[command(after_long_help = EXAMPLES)]
pub struct ProtectionBenchArgs {
    /// Bytes each IOR task writes, then reads, per run (IOR -b)
    #[arg(long, default_value = "512m")]
    pub size: String,
    /// Bytes per I/O call (IOR -t)
    #[arg(long, default_value = "1m")]
    pub xfer: String,
    /// IOR tasks, a file each (IOR -N -F)
    #[arg(long, default_value_t = 2)]
    pub tasks: usize,
    /// Runs of each case
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// Layouts to measure: plain, mirror, ec (4+2)
    #[arg(long, value_delimiter = ',', default_value = "plain,mirror,ec")]
    pub layouts: Vec<String>,
    /// The six-job mix's size as a fraction of the seed's (0: no mix)
    #[arg(long, default_value_t = 0.01)]
    pub mix_scale: f64,
    /// Where the file system is made (a new temporary directory by default)
    #[arg(long)]
    pub workdir: Option<std::path::PathBuf>,
    /// Write every figure as JSON here
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// The local directory the disk's own ratio is measured in, in subdirectories it
    /// makes and removes (default: one beside the file system's targets, so on the same
    /// disk)
    #[arg(long)]
    pub local: Option<std::path::PathBuf>,
}

/// The pseudo-layout of the disk's own figures: `write 1x` (IOR writing `--size` per
/// task into a local directory) and `write 2x` (twice that).
const DISK: &str = "disk";

/// One measured rate.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub layout: String,
    pub checksums: bool,
    /// `write`, `read`, `degraded read` (one OST stopped), `degraded2 read` (two) or `mix`.
    pub op: String,
    pub rep: u32,
    pub mib_s: f64,
}

/// The default layout of a case's directory.
fn layout_of(name: &str) -> Result<Layout> {
    match name {
        "plain" => Ok(Layout::plain(1, STRIPE_SIZE, -1)),
        "mirror" => {
            let components = (1..=2)
                .map(|m| {
                    let mut c = Component::raid0(0, EOF, 1, STRIPE_SIZE, -1);
                    c.id = pflr_id(m, 0);
                    c
                })
                .collect();
            Ok(Layout {
                components,
                ..Layout::composite(Vec::new())
            })
        }
        "ec" => Ok(Layout {
            components: nacre_core::ec::with_parity(
                vec![Component::raid0(0, EOF, 4, STRIPE_SIZE, -1)],
                &[Some((4, 2))],
            ),
            ..Layout::composite(Vec::new())
        }),
        _ => bail!("unknown layout '{name}' (plain, mirror, ec)"),
    }
}

/// Makes `name` under the mount's root with `layout` as its default.
fn layout_dir(
    rt: &tokio::runtime::Runtime,
    client: &Client,
    mnt: &Path,
    name: &str,
    layout: Layout,
) -> Result<std::path::PathBuf> {
    let p = mnt.join(name);
    std::fs::create_dir(&p).with_context(|| format!("cannot make {}", p.display()))?;
    rt.block_on(async {
        let d = client
            .lookup(client.root(), name.as_bytes(), &Cred::root())
            .await?;
        client
            .set_default_layout(d.attr.fid, Some(layout), &Cred::root())
            .await
    })
    .map_err(|e| anyhow::anyhow!("cannot set the layout of {}: {e}", p.display()))?;
    Ok(p)
}

/// The OSTs of the first `n` objects of mirror 1 (the data mirror of a 4+2 file) of
/// `dir/file`.
fn first_mirror_osts(
    rt: &tokio::runtime::Runtime,
    client: &Client,
    dir: &str,
    file: &str,
    n: usize,
) -> Result<Vec<u32>> {
    let f = rt
        .block_on(async {
            let cred = Cred::root();
            let d = client.lookup(client.root(), dir.as_bytes(), &cred).await?;
            let f = client.lookup(d.attr.fid, file.as_bytes(), &cred).await?;
            client.getattr(f.attr.fid).await
        })
        .map_err(|e| anyhow::anyhow!("cannot stat {dir}/{file}: {e}"))?;
    let osts: Vec<u32> = f
        .layout
        .as_ref()
        .map(|l| l.mirror(1).objects().take(n).map(|o| o.ost_idx).collect())
        .unwrap_or_default();
    if osts.len() < n {
        bail!(
            "{dir}/{file} has fewer than {n} first mirror objects: {:?}",
            f.layout
        );
    }
    Ok(osts)
}

/// How long a degraded read waits for the MDT to know its files' sizes.
const SIZE_SETTLE_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

/// Waits until the MDT's sizes of the IOR files of `tasks` in `dir` are exact (settled
/// after their writers' close): a read with a data OST stopped takes the size from the
/// MDT, since it cannot ask the stopped OST.
fn wait_sizes_settled(
    rt: &tokio::runtime::Runtime,
    client: &Client,
    dir: &str,
    tasks: usize,
) -> Result<()> {
    rt.block_on(async {
        let cred = Cred::root();
        let d = client.lookup(client.root(), dir.as_bytes(), &cred).await?;
        let end = std::time::Instant::now() + SIZE_SETTLE_WAIT;
        for t in 0..tasks {
            let name = format!("ior.{t:08}");
            let f = client.lookup(d.attr.fid, name.as_bytes(), &cred).await?;
            while !client.getattr(f.attr.fid).await?.size_authoritative {
                if std::time::Instant::now() >= end {
                    tracing::warn!(
                        "{dir}/{name}: the MDT's size did not settle within {SIZE_SETTLE_WAIT:?}"
                    );
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
        Ok::<(), nacre_core::Errno>(())
    })
    .map_err(|e| anyhow::anyhow!("cannot stat the files of {dir}: {e}"))
}

pub fn run(a: ProtectionBenchArgs) -> Result<()> {
    let size = nacre_core::size::parse_size(&a.size).map_err(|e| anyhow::anyhow!("--size: {e}"))?;
    let xfer = nacre_core::size::parse_size(&a.xfer).map_err(|e| anyhow::anyhow!("--xfer: {e}"))?;
    if xfer == 0 || size == 0 || size % xfer != 0 {
        bail!("--size must be a non-zero multiple of --xfer");
    }
    if a.tasks == 0 || a.reps == 0 {
        bail!("--tasks and --reps must be at least 1");
    }
    if !(0.0..=1.0).contains(&a.mix_scale) {
        bail!("--mix-scale must be within 0..1");
    }
    let layouts: Vec<(String, Layout)> = a
        .layouts
        .iter()
        .map(|n| Ok((n.clone(), layout_of(n)?)))
        .collect::<Result<_>>()?;
    let mut fs = BenchFs::up("protection", "protfs", OSTS, a.workdir.as_deref())?;
    let local = fs.local_dir(a.local.as_deref())?;
    let (rt, client, mnt) = (&fs.rt, fs.client.clone(), fs.mnt.clone());
    let cluster = &mut fs.cluster;
    let cold = nacre_bench::compare::drop_caches().is_ok();
    if !cold {
        eprintln!("note: cannot drop the page cache (needs root): reads may be served from memory");
    }
    let world = World::single();
    let env = RunEnv::quiet(Arc::new(nacre_bench::PosixFs::new()), &world);
    let jobs = mix::scale(&mix::seed_mix(), a.mix_scale);
    let mut cells = Vec::new();
    let disk_ceiling =
        a.layouts.iter().any(|n| n == "mirror") && a.layouts.iter().any(|n| n == "plain");
    let res = (|| -> Result<()> {
        for rep in 0..a.reps {
            if disk_ceiling {
                for (op, block) in disk_order(rep, size) {
                    // A directory of its own, so a --local given keeps what it held.
                    let dir = local.join(format!("protection-disk-{rep}-{}", op.replace(' ', "-")));
                    let mib_s = local_write(&env, &dir, &a, xfer, block)?;
                    eprintln!("run {rep}: disk {op}: {mib_s:.1} MiB/s");
                    cells.push(Cell {
                        layout: DISK.into(),
                        checksums: false,
                        op: op.into(),
                        rep,
                        mib_s,
                    });
                }
            }
            let order = if rep % 2 == 0 {
                [true, false]
            } else {
                [false, true]
            };
            for on in order {
                set_checksums(cluster, &[&client], on)?;
                for (name, layout) in &layouts {
                    let case = format!("{name}-{rep}-{}", if on { "on" } else { "off" });
                    let d = layout_dir(rt, &client, &mnt, &case, layout.clone())?;
                    let mut push = |op: &str, mib_s: f64| {
                        eprintln!(
                            "run {rep}: {name} {op} checksums {}: {mib_s:.1} MiB/s",
                            if on { "on" } else { "off" }
                        );
                        cells.push(Cell {
                            layout: name.clone(),
                            checksums: on,
                            op: op.into(),
                            rep,
                            mib_s,
                        });
                    };
                    let cfg = IorConfig {
                        test_file: d.join("ior"),
                        file_per_proc: true,
                        xfer,
                        block: size,
                        fsync: true,
                        tasks: Some(a.tasks),
                        command_line: format!(
                            "ior -F -e -t {} -b {} -N {} ({name}, checksums {})",
                            a.xfer,
                            a.size,
                            a.tasks,
                            if on { "on" } else { "off" }
                        ),
                        ..IorConfig::default()
                    };
                    let (w, r) = write_then_read(
                        &env,
                        IorConfig {
                            keep: name == "mirror" || name == "ec",
                            ..cfg.clone()
                        },
                    )?;
                    push("write", w);
                    push("read", r);
                    // Files are kept: read them again with one copy's OST gone (and for
                    // 4+2, then with two of the data OSTs gone).
                    let degraded: &[(usize, &str)] = match name.as_str() {
                        "mirror" => &[(1, "degraded read")],
                        "ec" => &[(1, "degraded read"), (2, "degraded2 read")],
                        _ => &[],
                    };
                    for (k, &(down, op)) in degraded.iter().enumerate() {
                        wait_sizes_settled(rt, &client, &case, a.tasks)?;
                        let osts = first_mirror_osts(rt, &client, &case, "ior.00000000", down)?;
                        for &o in &osts {
                            rt.block_on(cluster.stop_ost(o));
                        }
                        let _ = nacre_bench::compare::drop_caches();
                        let r = ior::run(
                            &env,
                            &IorConfig {
                                write: false,
                                read: true,
                                use_existing: true,
                                keep: k + 1 < degraded.len(),
                                ..cfg.clone()
                            },
                        );
                        for &o in &osts {
                            rt.block_on(cluster.start_ost(o))?;
                        }
                        wait_reconnected(rt, &client, &osts)?;
                        let r = r?.context("IOR gave no degraded read report")?;
                        push(
                            op,
                            r.summary
                                .iter()
                                .find(|s| s.operation == Access::Read)
                                .map_or(0.0, |s| s.bw_mean_mib),
                        );
                    }
                    if a.mix_scale > 0.0 {
                        let opts = MixOptions {
                            keep: false,
                            seed: u64::from(rep) + 1,
                        };
                        let m = mix::run(&env, &d, &jobs, &opts)
                            .context("job mix")?
                            .context("the mix gave no report")?;
                        push("mix", m.aggregate_mib_per_sec);
                    }
                    std::fs::remove_dir_all(&d)
                        .with_context(|| format!("cannot remove {}", d.display()))?;
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
    print_table(&a, &layouts, &cells, cold);
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_string_pretty(&cells)?)
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(())
}

/// The disk's two writes of run `rep` (once and twice `size` per task), their order
/// alternating as the settings do.
fn disk_order(rep: u32, size: u64) -> [(&'static str, u64); 2] {
    let (once, twice) = (("write 1x", size), ("write 2x", 2 * size));
    if rep.is_multiple_of(2) {
        [once, twice]
    } else {
        [twice, once]
    }
}

/// IOR's write rate (MiB/s, fsync included) into `dir` on the local disk, `block` bytes
/// per task; `dir` (made here) is removed afterwards.
fn local_write(
    env: &RunEnv<'_>,
    dir: &Path,
    a: &ProtectionBenchArgs,
    xfer: u64,
    block: u64,
) -> Result<f64> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot make {}", dir.display()))?;
    let cfg = IorConfig {
        test_file: dir.join("ior"),
        file_per_proc: true,
        xfer,
        block,
        fsync: true,
        write: true,
        read: false,
        tasks: Some(a.tasks),
        command_line: format!(
            "ior -F -e -w -t {} -b {block} -N {} (local disk)",
            a.xfer, a.tasks
        ),
        ..IorConfig::default()
    };
    let r = ior::run(env, &cfg);
    let removed =
        std::fs::remove_dir_all(dir).with_context(|| format!("cannot remove {}", dir.display()));
    let r = r?.context("IOR gave no report for the local disk")?;
    removed?;
    r.summary
        .iter()
        .find(|s| s.operation == Access::Write)
        .map(|s| s.bw_mean_mib)
        .context("IOR gave no write figure for the local disk")
}

/// The disk's own ratio for taking every byte twice: the time to write `size` per task
/// over the time to write twice that, from the two rates (`r1 = B / t1`, `r2 = 2B / t2`).
fn disk_twice_ratio(once: Option<f64>, twice: Option<f64>) -> Option<f64> {
    match (once, twice) {
        (Some(r1), Some(r2)) if r1 > 0.0 => Some(r2 / (2.0 * r1)),
        _ => None,
    }
}

/// Bound on the wait for the mount to use restarted OSTs again.
const RECONNECT_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Waits until the mount's imports of `osts` answer again, so that the next case's
/// mirrored writes do not skip them (and measure one copy instead of two).
fn wait_reconnected(
    rt: &tokio::runtime::Runtime,
    client: &Arc<Client>,
    osts: &[u32],
) -> Result<()> {
    // The reconnect is spawned on the mount's runtime.
    let _in_rt = rt.enter();
    let oscs = client.oscs();
    let start = std::time::Instant::now();
    for &o in osts {
        let imp = oscs
            .get(o as usize)
            .with_context(|| format!("the mount has no import of OST{o:04x}"))?;
        while imp.is_failing() {
            imp.reconnect_in_background();
            if start.elapsed() > RECONNECT_WAIT {
                bail!(
                    "OST{o:04x} did not answer the mount within {RECONNECT_WAIT:?} of its restart"
                );
            }
            rt.block_on(tokio::time::sleep(std::time::Duration::from_millis(50)));
        }
    }
    Ok(())
}

/// The median of the runs of one case (`None` if it was not run).
fn median(cells: &[Cell], layout: &str, op: &str, on: bool) -> Option<f64> {
    nacre_bench::stats::median(
        cells
            .iter()
            .filter(|c| c.layout == layout && c.op == op && c.checksums == on)
            .map(|c| c.mib_s),
    )
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".into(),
    }
}

fn print_table(a: &ProtectionBenchArgs, layouts: &[(String, Layout)], cells: &[Cell], cold: bool) {
    println!(
        "Through the mount, 1 MDT + {OSTS} OSTs: IOR -F -e -t {} -b {} -N {}{}; the seed's six-job \
         mix at {}x; the median of {} run(s) each",
        a.xfer,
        a.size,
        a.tasks,
        if cold {
            ", page cache dropped before reads"
        } else {
            ""
        },
        a.mix_scale,
        a.reps
    );
    let ops = ["write", "read", "degraded read", "degraded2 read", "mix"];
    println!(
        "{:<8} {:<10} {:>12} {:>12} {:>14} {:>14} {:>12}",
        "layout",
        "checksums",
        "write MiB/s",
        "read MiB/s",
        "1 down MiB/s",
        "2 down MiB/s",
        "mix MiB/s"
    );
    for (name, _) in layouts {
        for on in [true, false] {
            let f = |op| median(cells, name, op, on).map_or("-".to_string(), |v| format!("{v:.1}"));
            println!(
                "{:<8} {:<10} {:>12} {:>12} {:>14} {:>14} {:>12}",
                name,
                if on { "on" } else { "off" },
                f(ops[0]),
                f(ops[1]),
                f(ops[2]),
                f(ops[3]),
                f(ops[4])
            );
        }
    }
    println!("Costs, as ratios:");
    for (name, _) in layouts {
        for op in ["write", "read", "mix"] {
            let r = ratio(
                median(cells, name, op, true),
                median(cells, name, op, false),
            );
            println!("  {name} {op}: checksums on/off {r} (goal for streaming: at least 0.90x)");
        }
    }
    if layouts.iter().any(|(n, _)| n == "mirror") && layouts.iter().any(|(n, _)| n == "plain") {
        for on in [true, false] {
            let cs = if on { "on" } else { "off" };
            println!(
                "  mirrored/plain write, checksums {cs}: {} (goal: at least 0.45x)",
                ratio(
                    median(cells, "mirror", "write", on),
                    median(cells, "plain", "write", on)
                )
            );
            if on {
                let once = median(cells, DISK, "write 1x", false);
                let twice = median(cells, DISK, "write 2x", false);
                if let Some(d) = disk_twice_ratio(once, twice) {
                    println!(
                        "  the disk itself, every byte twice / once: {d:.2}x (local IOR: {:.1} MiB/s at -b {}, {:.1} at twice that: what bounds a mirrored write here)",
                        once.unwrap_or_default(),
                        a.size,
                        twice.unwrap_or_default()
                    );
                }
            }
            if a.mix_scale > 0.0 {
                println!(
                    "  mirrored/plain mix, checksums {cs}: {}",
                    ratio(
                        median(cells, "mirror", "mix", on),
                        median(cells, "plain", "mix", on)
                    )
                );
            }
        }
    }
    if layouts.iter().any(|(n, _)| n == "mirror") {
        for on in [true, false] {
            println!(
                "  mirrored degraded/healthy read, checksums {}: {}",
                if on { "on" } else { "off" },
                ratio(
                    median(cells, "mirror", "degraded read", on),
                    median(cells, "mirror", "read", on)
                )
            );
        }
    }
    if layouts.iter().any(|(n, _)| n == "ec") {
        for on in [true, false] {
            let cs = if on { "on" } else { "off" };
            for (op, down) in [("degraded read", "1 OST"), ("degraded2 read", "2 OSTs")] {
                println!(
                    "  degraded 4+2 read / healthy, {down} stopped, checksums {cs}: {} (goal: at least 0.5x)",
                    ratio(median(cells, "ec", op, on), median(cells, "ec", "read", on))
                );
            }
            if layouts.iter().any(|(n, _)| n == "plain") {
                println!(
                    "  4+2/plain write, checksums {cs}: {}",
                    ratio(
                        median(cells, "ec", "write", on),
                        median(cells, "plain", "write", on)
                    )
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_disk_ratio_is_the_time_for_the_bytes_once_over_the_time_for_them_twice() {
        // Twice the bytes at the same rate: twice the time.
        assert_eq!(disk_twice_ratio(Some(400.0), Some(400.0)), Some(0.5));
        // 1 GiB at 1300 MiB/s, 2 GiB at 440 MiB/s: 0.79 s against 4.65 s.
        let r = disk_twice_ratio(Some(1300.0), Some(440.0)).expect("a ratio");
        assert!((r - 0.169).abs() < 0.001, "{r}");
        assert_eq!(disk_twice_ratio(Some(0.0), Some(400.0)), None);
        assert_eq!(disk_twice_ratio(None, Some(400.0)), None);
    }

    #[test]
    fn the_disk_writes_alternate_their_order_and_double_the_block() {
        assert_eq!(disk_order(0, 8), [("write 1x", 8), ("write 2x", 16)]);
        assert_eq!(disk_order(1, 8), [("write 2x", 16), ("write 1x", 8)]);
    }
}
