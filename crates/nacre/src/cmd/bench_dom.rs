//! `nacre bench dom`: the small-file cases of the Data-on-MDT talk (seed 001), side by side.
//!
//! For each layout — Data-on-MDT (`-E 1M -L mdt -E -1`), one OST stripe (`-c 1`) and every
//! OST (`-c -1`) — it runs IOR as the talk did (`-t 8k/64k -s 16 -F -z -m`: file per task,
//! random offsets, a new file each iteration, 16 transfers per file), write then read, with
//! the page cache dropped between the two, through the mount and through the native client,
//! plus the over-DoM case (`-t 512k -s 16`, 8 MiB files). It prints the rates and the ratios
//! of each layout to one OST stripe.

use anyhow::{Context, Result, bail};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The layouts compared, as `lfs setstripe` options.
const LAYOUTS: &[(&str, &[&str])] = &[
    ("DoM", &["-E", "1M", "-L", "mdt", "-E", "-1"]),
    ("1-stripe", &["-c", "1"]),
    ("all-OST", &["-c", "-1"]),
];

/// Transfer sizes; the last makes 8 MiB files, past the 1 MiB DoM component.
const XFERS: &[&str] = &["8k", "64k", "512k"];

pub struct DomBenchArgs {
    pub mount: PathBuf,
    /// Native runs: an `up` directory or `HOST:PORT:/fsname` (key in NACRE_KEY).
    pub native: Option<String>,
    pub tasks: u32,
    pub files: u32,
    pub json: bool,
}

#[derive(Serialize)]
struct Cell {
    access: String,
    xfer: String,
    op: String,
    layout: String,
    mib_s: f64,
    ops_s: f64,
}

fn ior(exe: &Path, args: &[String]) -> Result<serde_json::Value> {
    let out = Command::new(exe)
        .arg("bench")
        .arg("ior")
        .args(args)
        .arg("--json")
        .output()
        .context("cannot run nacre bench ior")?;
    if !out.status.success() {
        bail!(
            "nacre bench ior {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

fn mean(report: &serde_json::Value, op: &str) -> Option<(f64, f64)> {
    report["summary"]
        .as_array()?
        .iter()
        .find(|s| s["operation"] == op)
        .map(|s| {
            (
                s["bwMeanMIB"].as_f64().unwrap_or_default(),
                s["OPsMean"].as_f64().unwrap_or_default(),
            )
        })
}

fn lfs_setstripe(exe: &Path, opts: &[&str], dir: &Path) -> Result<()> {
    let st = Command::new(exe)
        .arg("lfs")
        .arg("setstripe")
        .args(opts)
        .arg(dir)
        .status()
        .context("cannot run nacre lfs setstripe")?;
    if !st.success() {
        bail!("lfs setstripe {} {} failed", opts.join(" "), dir.display());
    }
    Ok(())
}

pub fn run(a: DomBenchArgs) -> Result<()> {
    let exe = std::env::current_exe()?;
    let base = a.mount.join("nacre-bench-dom");
    if !a.mount.is_dir() {
        bail!("{} is not a mounted directory", a.mount.display());
    }
    let cold = nacre_bench::compare::drop_caches().is_ok();
    if !cold && !a.json {
        eprintln!("note: cannot drop the page cache (needs root): reads may be served from memory");
    }
    let mut cells = Vec::new();
    let accesses: Vec<(&str, Option<&String>)> = match &a.native {
        Some(s) => vec![("mount", None), ("native", Some(s))],
        None => vec![("mount", None)],
    };
    for (name, opts) in LAYOUTS {
        let dir = base.join(name.to_lowercase());
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        lfs_setstripe(&exe, opts, &dir)?;
        for xfer in XFERS {
            for (access, native) in &accesses {
                let sub = dir.join(format!("{access}-{xfer}"));
                std::fs::create_dir_all(&sub)?;
                let target = match native {
                    // Inside the file system, the same directory seen from its root.
                    Some(_) => PathBuf::from("/")
                        .join(sub.strip_prefix(&a.mount)?)
                        .join("f"),
                    None => sub.join("f"),
                };
                let mut common = vec!["-F", "-t", xfer, "-b", xfer, "-s", "16", "-k", "-z", "-m"]
                    .into_iter()
                    .map(str::to_string)
                    .collect::<Vec<_>>();
                common.extend([
                    "-i".to_string(),
                    a.files.to_string(),
                    "-N".to_string(),
                    a.tasks.to_string(),
                ]);
                common.extend(["-o".to_string(), target.display().to_string()]);
                if let Some(spec) = native {
                    common.extend(["--native".to_string(), (*spec).clone()]);
                }
                let mut w = common.clone();
                w.push("-w".into());
                let wr = ior(&exe, &w)?;
                let _ = nacre_bench::compare::drop_caches();
                let mut r = common.clone();
                r.extend(["-r".into(), "-E".into()]);
                let rr = ior(&exe, &r)?;
                for (op, rep) in [("write", &wr), ("read", &rr)] {
                    let (mib_s, ops_s) = mean(rep, op).unwrap_or_default();
                    cells.push(Cell {
                        access: access.to_string(),
                        xfer: xfer.to_string(),
                        op: op.to_string(),
                        layout: name.to_string(),
                        mib_s,
                        ops_s,
                    });
                }
                let _ = std::fs::remove_dir_all(&sub);
            }
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&cells)?);
        return Ok(());
    }
    println!(
        "Small-file I/O by layout: IOR -F -z -m -s 16, {} task(s), {} files per task{}",
        a.tasks,
        a.files,
        if cold {
            ", page cache dropped before reads"
        } else {
            ""
        }
    );
    println!(
        "{:<8} {:<6} {:<6} {:>12} {:>12} {:>12} {:>10} {:>10}",
        "access", "xfer", "op", "DoM MiB/s", "1-str MiB/s", "all MiB/s", "DoM/1-str", "all/1-str"
    );
    for (access, _) in &accesses {
        for xfer in XFERS {
            for op in ["write", "read"] {
                let get = |l: &str| {
                    cells
                        .iter()
                        .find(|c| {
                            c.access == *access && c.xfer == *xfer && c.op == op && c.layout == l
                        })
                        .map_or(0.0, |c| c.mib_s)
                };
                let (d, s, all) = (get("DoM"), get("1-stripe"), get("all-OST"));
                let ratio = |x: f64| {
                    if s > 0.0 {
                        format!("{:.2}x", x / s)
                    } else {
                        "-".into()
                    }
                };
                println!(
                    "{access:<8} {xfer:<6} {op:<6} {d:>12.1} {s:>12.1} {all:>12.1} {:>10} {:>10}",
                    ratio(d),
                    ratio(all)
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}
