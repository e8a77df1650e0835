//! `nacre bench checksums`: what end-to-end and at-rest checksums cost a streaming
//! IOR, through the mount and through the native client, as ratios side by side.
//!
//! It formats a fresh file system (1 MDT, 4 OSTs, as `nacre up`), runs it in this process,
//! mounts it, and runs IOR (`-F -e`, one file per task, fsync before the write phase ends,
//! the page cache dropped before each read) with checksums on (the default) and off (no
//! checksums sent, asked for or kept: `osc.*.checksums=0` on the clients and no at-rest
//! checksums in the stores). The two settings alternate run by run, so drift in the
//! machine's speed falls on both alike.

use super::bench_fs::BenchFs;
use crate::local::LocalCluster;
use crate::native::NativeFs;
use anyhow::{Context, Result, bail};
use nacre_bench::backend::FileSystem;
use nacre_bench::env::RunEnv;
use nacre_bench::ior::{self, Access, IorConfig};
use nacre_bench::rank::World;
use nacre_client::Client;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;

/// Streaming IOR with checksums on and off, through the mount and natively.
#[derive(clap::Args, Debug, Clone)]
pub struct ChecksumBenchArgs {
    /// Bytes each task writes, then reads, per run (IOR -b)
    #[arg(long, default_value = "512m")]
    pub size: String,
    /// Bytes per I/O call (IOR -t)
    #[arg(long, default_value = "1m")]
    pub xfer: String,
    /// IOR tasks, a file each (IOR -N -F)
    #[arg(long, default_value_t = 2)]
    pub tasks: usize,
    /// Runs of each case (on and off alternate)
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// Accesses to measure: mount, native
    #[arg(long, value_delimiter = ',', default_value = "mount,native")]
    pub access: Vec<String>,
    /// Where the file system is made (a new temporary directory by default)
    #[arg(long)]
    pub workdir: Option<PathBuf>,
    /// Write every figure as JSON here
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// One IOR phase's mean rate.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub access: String,
    pub checksums: bool,
    pub op: String,
    pub rep: u32,
    pub mib_s: f64,
}

/// Turns checksums on or off everywhere: the clients' bulks and the stores at rest.
pub(super) fn set_checksums(
    cluster: &LocalCluster,
    clients: &[&Arc<Client>],
    on: bool,
) -> Result<()> {
    for c in clients {
        c.tunables
            .set("osc", "checksums", u64::from(on))
            .map_err(anyhow::Error::msg)?;
    }
    for s in cluster.osts.iter().flatten() {
        if let Some(o) = s.ost() {
            o.store().set_checksums(on);
        }
    }
    for s in cluster.mdts.iter().flatten() {
        if let Some(m) = s.mdt() {
            m.dom_store().set_checksums(on);
        }
    }
    Ok(())
}

fn rate(r: &ior::IorReport, op: Access) -> f64 {
    r.summary
        .iter()
        .find(|s| s.operation == op)
        .map_or(0.0, |s| s.bw_mean_mib)
}

/// A write run (files kept), the page cache dropped, then a read run of the same files
/// (kept after it if `base.keep`).
pub(super) fn write_then_read(env: &RunEnv<'_>, base: IorConfig) -> Result<(f64, f64)> {
    let w = IorConfig {
        write: true,
        read: false,
        keep: true,
        ..base.clone()
    };
    let wr = ior::run(env, &w)?.context("IOR gave no write report")?;
    let _ = nacre_bench::compare::drop_caches();
    let r = IorConfig {
        write: false,
        read: true,
        use_existing: true,
        ..base
    };
    let rr = ior::run(env, &r)?.context("IOR gave no read report")?;
    Ok((rate(&wr, Access::Write), rate(&rr, Access::Read)))
}

pub fn run(a: ChecksumBenchArgs) -> Result<()> {
    let size = nacre_core::size::parse_size(&a.size).map_err(|e| anyhow::anyhow!("--size: {e}"))?;
    let xfer = nacre_core::size::parse_size(&a.xfer).map_err(|e| anyhow::anyhow!("--xfer: {e}"))?;
    if xfer == 0 || size == 0 || size % xfer != 0 {
        bail!("--size must be a non-zero multiple of --xfer");
    }
    for acc in &a.access {
        if acc != "mount" && acc != "native" {
            bail!("unknown access '{acc}' (mount, native)");
        }
    }
    let fs = BenchFs::up("checksums", "ckbench", 4, a.workdir.as_deref())?;
    let (client, dir, mnt) = (fs.client.clone(), fs.dir.clone(), fs.mnt.clone());
    let cluster = &fs.cluster;
    let native = Arc::new(NativeFs::connect(&dir.to_string_lossy())?);
    let native_client = native.client().clone();
    let cold = nacre_bench::compare::drop_caches().is_ok();
    if !cold {
        eprintln!("note: cannot drop the page cache (needs root): reads may be served from memory");
    }
    let world = World::single();
    let mount_env = RunEnv::quiet(Arc::new(nacre_bench::PosixFs::new()), &world);
    let native_fs: Arc<dyn FileSystem> = native.clone();
    let native_env = RunEnv::quiet(native_fs, &world);
    let mut cells = Vec::new();
    let res = (|| -> Result<()> {
        for rep in 0..a.reps {
            // On first in even runs, off first in odd ones.
            let order = if rep % 2 == 0 {
                [true, false]
            } else {
                [false, true]
            };
            for on in order {
                set_checksums(cluster, &[&client, &native_client], on)?;
                for access in &a.access {
                    let (env, root) = match access.as_str() {
                        "mount" => (&mount_env, mnt.clone()),
                        _ => (&native_env, PathBuf::from("/")),
                    };
                    let cfg = IorConfig {
                        test_file: root.join(format!("ior-{access}-{rep}-{on}")),
                        file_per_proc: true,
                        xfer,
                        block: size,
                        fsync: true,
                        tasks: Some(a.tasks),
                        command_line: format!(
                            "ior -F -e -t {} -b {} -N {} ({access}, checksums {})",
                            a.xfer,
                            a.size,
                            a.tasks,
                            if on { "on" } else { "off" }
                        ),
                        ..IorConfig::default()
                    };
                    let (w, r) = write_then_read(env, cfg)?;
                    for (op, mib_s) in [("write", w), ("read", r)] {
                        eprintln!(
                            "run {rep}: {access} {op} checksums {}: {mib_s:.1} MiB/s",
                            if on { "on" } else { "off" }
                        );
                        cells.push(Cell {
                            access: access.clone(),
                            checksums: on,
                            op: op.into(),
                            rep,
                            mib_s,
                        });
                    }
                }
            }
        }
        Ok(())
    })();
    drop(mount_env);
    drop(native_env);
    drop(native);
    fs.down();
    res?;
    print_table(&a, &cells, cold);
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_string_pretty(&cells)?)
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(())
}

/// The median of the runs of one case (0 if it was not run).
fn median(cells: &[Cell], access: &str, op: &str, on: bool) -> f64 {
    nacre_bench::stats::median(
        cells
            .iter()
            .filter(|c| c.access == access && c.op == op && c.checksums == on)
            .map(|c| c.mib_s),
    )
    .unwrap_or(0.0)
}

fn print_table(a: &ChecksumBenchArgs, cells: &[Cell], cold: bool) {
    println!(
        "Streaming IOR -F -e -t {} -b {} -N {}, the median of {} run(s) each{}: checksums on (crc32c per 4 KiB \
         block, on the wire and at rest) against off",
        a.xfer,
        a.size,
        a.tasks,
        a.reps,
        if cold {
            ", page cache dropped before reads"
        } else {
            ""
        }
    );
    println!(
        "{:<8} {:<6} {:>12} {:>12} {:>8}",
        "access", "op", "on MiB/s", "off MiB/s", "on/off"
    );
    for access in &a.access {
        for op in ["write", "read"] {
            let (on, off) = (
                median(cells, access, op, true),
                median(cells, access, op, false),
            );
            let ratio = if off > 0.0 {
                format!("{:.2}x", on / off)
            } else {
                "-".into()
            };
            println!("{access:<8} {op:<6} {on:>12.1} {off:>12.1} {ratio:>8}");
        }
    }
}
