//! The seed's Series 1 methodology as one command: for every capacity level and every
//! fragmentation level, age the file system with PaF (`PAF:CC.FF@SIZE<N`), measure it with
//! IOR (file per task, write then read) at every transfer size for N iterations, then scrub.
//! Results go to a CSV as each cell completes (so an interrupted series resumes where it
//! stopped), then to a summary CSV and JSON and to plots: bandwidth against capacity per
//! transfer size, bandwidth against fragmentation, the coefficient of variation, and the
//! largest transfer's bandwidth against capacity per fragmentation level.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::backend::{self, FileSystem, OpenOptions};
use crate::env::RunEnv;
use crate::error::{BenchError, IoContext, Result};
use crate::ior::{self, Access, IorConfig};
use crate::paf::{
    self, PafOptions,
    plan::TreeShape,
    spec::{Generation, PafSpec},
};
use crate::plot::{self, Chart, Line};
use crate::stats::{Deviation, Summary};
use crate::units::{self, MIB};

/// Results file with one row per (cell, transfer size, iteration).
pub const RESULTS_CSV: &str = "series.csv";
/// Mean, deviation and CV per (cell, transfer size, operation).
pub const SUMMARY_CSV: &str = "series-summary.csv";
pub const SUMMARY_JSON: &str = "series-summary.json";
const STATE_JSON: &str = "series-state.json";
/// Where the IOR files live during a cell, under DIR.
pub const IOR_DIR: &str = "series-ior";

/// A series.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SeriesOptions {
    /// Capacity levels in percent (the seed: 10 to 80).
    pub capacities: Vec<u32>,
    /// Fragmentation levels in percent (the seed: 0 to 70).
    pub frags: Vec<u32>,
    /// PaF file size (the seed: 264M).
    pub file_size: u64,
    /// IOR transfer sizes (the seed: 1M to 64M).
    pub xfers: Vec<u64>,
    /// IOR block per task (rounded up to a multiple of each transfer size).
    pub block: u64,
    /// IOR iterations per transfer size (the seed: 5).
    pub iterations: u32,
    /// IOR tasks in total (default one per rank).
    pub tasks: Option<usize>,
    /// PaF threads per rank.
    pub paf_threads: usize,
    /// The `<N` of every cell: free 1K-blocks (statfs at the start when `None`).
    pub capacity_kb: Option<u64>,
    /// PaF seed (deterministic cells when given).
    pub seed: Option<u64>,
    /// O_DIRECT for IOR (the seed's -B).
    pub direct: bool,
    pub shape: TreeShape,
    /// Capacity level of the bandwidth-vs-fragmentation plot (default: the first level).
    pub plot_capacity: Option<u32>,
}

/// One measurement.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Row {
    pub capacity_pct: u32,
    pub frag_pct: u32,
    pub xfer: u64,
    pub iteration: u32,
    pub write_mib: f64,
    pub read_mib: f64,
    /// Capacity actually reached by PaF (bytes remaining over the capacity).
    pub capacity_reached_pct: f64,
}

/// Aggregates over iterations.
#[derive(Debug, Clone, Serialize)]
pub struct CellStat {
    pub capacity_pct: u32,
    pub frag_pct: u32,
    pub xfer: u64,
    pub operation: Access,
    pub mean_mib: f64,
    pub stddev_mib: f64,
    pub cv_pct: f64,
    pub min_mib: f64,
    pub max_mib: f64,
    pub iterations: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct State {
    options: SeriesOptions,
    capacity_kb: u64,
    done: Vec<(u32, u32)>,
}

/// What a series reports.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesReport {
    pub out: PathBuf,
    pub capacity_kb: u64,
    pub cells_run: usize,
    pub cells_skipped: usize,
    pub rows: usize,
    pub stats: Vec<CellStat>,
    pub files: Vec<PathBuf>,
}

fn write_state(fs: &dyn FileSystem, out: &Path, st: &State) -> Result<()> {
    paf::write_json_atomic(fs, &out.join(STATE_JSON), st)
}

/// Appends rows to the results CSV (header when the file is new).
fn append_rows(path: &Path, rows: &[Row]) -> Result<()> {
    let new = !path.exists();
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .ctx("opening", path)?;
    let mut w = csv::WriterBuilder::new().has_headers(new).from_writer(f);
    for r in rows {
        w.serialize(r)
            .map_err(|e| BenchError::Usage(format!("writing {}: {e}", path.display())))?;
    }
    w.flush().ctx("writing", path)
}

/// Reads the results CSV back.
pub fn read_rows(path: &Path) -> Result<Vec<Row>> {
    let mut r = csv::Reader::from_path(path)
        .map_err(|e| BenchError::Usage(format!("reading {}: {e}", path.display())))?;
    r.deserialize()
        .enumerate()
        .map(|(i, row)| {
            row.map_err(|e| BenchError::Parse {
                path: path.display().to_string(),
                line: i as u64 + 2,
                msg: e.to_string(),
            })
        })
        .collect()
}

/// Mean, deviation (sample, over iterations) and CV per cell, transfer size and operation.
pub fn aggregate(rows: &[Row]) -> Vec<CellStat> {
    // (capacity, fragmentation, xfer) → (write rates, read rates).
    type Rates = (Vec<f64>, Vec<f64>);
    let mut groups: BTreeMap<(u32, u32, u64), Rates> = BTreeMap::new();
    for r in rows {
        let g = groups
            .entry((r.capacity_pct, r.frag_pct, r.xfer))
            .or_default();
        g.0.push(r.write_mib);
        g.1.push(r.read_mib);
    }
    let mut out = Vec::new();
    for ((c, f, x), (w, rd)) in groups {
        for (op, vals) in [(Access::Write, w), (Access::Read, rd)] {
            let s = Summary::of(&vals, Deviation::Sample);
            out.push(CellStat {
                capacity_pct: c,
                frag_pct: f,
                xfer: x,
                operation: op,
                mean_mib: s.mean,
                stddev_mib: s.stddev,
                cv_pct: s.cv_pct(),
                min_mib: s.min,
                max_mib: s.max,
                iterations: s.count,
            });
        }
    }
    out
}

fn xfer_label(x: u64) -> String {
    format!("{} xfer", units::short_size(x))
}

/// Draws the series' plots into `out`; returns the files written.
pub fn plots(stats: &[CellStat], opts: &SeriesOptions, out: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let frag0 = opts.frags.iter().copied().min().unwrap_or(0);
    let cap0 = opts
        .plot_capacity
        .unwrap_or_else(|| opts.capacities.first().copied().unwrap_or(0));
    let size = units::short_size(opts.file_size);
    let pick = |op: Access,
                f: &dyn Fn(&CellStat) -> bool,
                x: &dyn Fn(&CellStat) -> f64,
                y: &dyn Fn(&CellStat) -> f64,
                key: &dyn Fn(&CellStat) -> u64,
                label: &dyn Fn(u64) -> String|
     -> Vec<Line> {
        let mut lines: BTreeMap<u64, Vec<(f64, f64)>> = BTreeMap::new();
        for s in stats.iter().filter(|s| s.operation == op && f(s)) {
            lines.entry(key(s)).or_default().push((x(s), y(s)));
        }
        lines
            .into_iter()
            .map(|(k, mut pts)| {
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                Line {
                    label: label(k),
                    points: pts,
                }
            })
            .collect()
    };
    let dio = if opts.direct { "DIO " } else { "" };
    for op in [Access::Write, Access::Read] {
        let opname = if op == Access::Write { "Write" } else { "Read" };
        let lower = op.name();
        let charts = [
            (
                format!("{lower}-vs-capacity"),
                Chart {
                    title: format!("{dio}{opname} Rate vs. Capacity (PaF:XX.{frag0:02}@{size})"),
                    x_label: "% Capacity".into(),
                    y_label: format!(
                        "Mean {opname} Rate in MiBps from {} Iterations",
                        opts.iterations
                    ),
                    lines: pick(
                        op,
                        &|s| s.frag_pct == frag0,
                        &|s| s.capacity_pct as f64,
                        &|s| s.mean_mib,
                        &|s| s.xfer,
                        &xfer_label,
                    ),
                },
            ),
            (
                format!("{lower}-vs-fragmentation"),
                Chart {
                    title: format!(
                        "{dio}{opname} Rate vs. Fragmentation @ {cap0}% Capacity & {size} Files"
                    ),
                    x_label: "% Fragmentation".into(),
                    y_label: format!(
                        "Mean {opname} Rate in MiBps from {} Iterations",
                        opts.iterations
                    ),
                    lines: pick(
                        op,
                        &|s| s.capacity_pct == cap0,
                        &|s| s.frag_pct as f64,
                        &|s| s.mean_mib,
                        &|s| s.xfer,
                        &xfer_label,
                    ),
                },
            ),
            (
                format!("{lower}-cv-vs-capacity"),
                Chart {
                    title: format!("% Coefficient of Variation for {opname}s (PaF:XX.{frag0:02})"),
                    x_label: "% Capacity".into(),
                    y_label: format!("% CV from {} Iterations", opts.iterations),
                    lines: pick(
                        op,
                        &|s| s.frag_pct == frag0,
                        &|s| s.capacity_pct as f64,
                        &|s| s.cv_pct,
                        &|s| s.xfer,
                        &xfer_label,
                    ),
                },
            ),
            (format!("{lower}-capacity-fragmentation"), {
                let xmax = opts.xfers.iter().copied().max().unwrap_or(0);
                Chart {
                    title: format!(
                        "{dio}{opname} Rate with Capacity and Fragmentation, {} XFER",
                        units::short_size(xmax)
                    ),
                    x_label: "% Capacity".into(),
                    y_label: "MiBps".into(),
                    lines: pick(
                        op,
                        &|s| s.xfer == xmax,
                        &|s| s.capacity_pct as f64,
                        &|s| s.mean_mib,
                        &|s| s.frag_pct as u64,
                        &|f| format!("{f}% fragmentation"),
                    ),
                }
            }),
        ];
        for (name, chart) in charts {
            let (svg, png) = plot::draw(&chart, &out.join(name))?;
            files.push(svg);
            files.push(png);
        }
    }
    Ok(files)
}

fn ior_config(dir: &Path, opts: &SeriesOptions, xfer: u64) -> IorConfig {
    IorConfig {
        test_file: dir.join(IOR_DIR).join("ior"),
        file_per_proc: true,
        xfer,
        block: opts.block.div_ceil(xfer).max(1) * xfer,
        segments: 1,
        write: true,
        read: true,
        reps: opts.iterations,
        direct: opts.direct,
        tasks: opts.tasks,
        keep: false,
        command_line: format!(
            "ior -v -F -t {} -b {} {}-w -r -i {}",
            units::short_size(xfer),
            units::short_size(opts.block.div_ceil(xfer).max(1) * xfer),
            if opts.direct { "-B " } else { "" },
            opts.iterations
        ),
        ..IorConfig::default()
    }
}

/// Runs (or resumes) the series in `dir`, writing results to `out`.
pub fn run(
    env: &RunEnv<'_>,
    dir: &Path,
    out: &Path,
    opts: &SeriesOptions,
    resume: bool,
) -> Result<SeriesReport> {
    let fs = env.fs.as_ref();
    let world = env.world;
    // Every rank checks; a rank that cannot see DIR stops them all.
    world.agree("series-check", backend::check_dir(fs, dir))?;
    if opts.capacities.is_empty() || opts.frags.is_empty() || opts.xfers.is_empty() {
        return Err(BenchError::Usage(
            "give at least one capacity, fragmentation and transfer size".into(),
        ));
    }
    if opts.iterations == 0 {
        return Err(BenchError::Usage("--iterations must be at least 1".into()));
    }
    for &c in &opts.capacities {
        if c > 100 {
            return Err(BenchError::Usage(format!(
                "capacity level {c}% is over 100%"
            )));
        }
    }
    for &f in &opts.frags {
        if f > 100 {
            return Err(BenchError::Usage(format!(
                "fragmentation level {f}% is over 100%"
            )));
        }
    }
    // Rank 0 owns the results directory and the state; everyone learns the capacity from it.
    let setup: Result<State> = if world.is_root() {
        (|| {
            std::fs::create_dir_all(out).ctx("creating", out)?;
            let prev: Option<State> =
                paf::read_json(&crate::backend::PosixFs, &out.join(STATE_JSON))?;
            match (prev, resume) {
                (Some(st), true) => {
                    if st.options != *opts {
                        return Err(BenchError::Usage(format!(
                            "--resume: the options differ from the series recorded in {}",
                            out.display()
                        )));
                    }
                    Ok(st)
                }
                (Some(_), false) => Err(BenchError::Usage(format!(
                    "{} already holds a series; use --resume to continue it or choose another --out",
                    out.display()
                ))),
                (None, _) => {
                    let capacity_kb = match opts.capacity_kb {
                        Some(n) => n,
                        None => fs.statfs(dir).ctx("statfs", dir)?.avail_kb(),
                    };
                    let st = State {
                        options: opts.clone(),
                        capacity_kb,
                        done: Vec::new(),
                    };
                    write_state(&crate::backend::PosixFs, out, &st)?;
                    let _ = std::fs::remove_file(out.join(RESULTS_CSV));
                    Ok(st)
                }
            }
        })()
    } else {
        Ok(State {
            options: opts.clone(),
            capacity_kb: 0,
            done: Vec::new(),
        })
    };
    let setup = world.agree("series-setup", setup)?;
    let mut state: State = world.broadcast("series-state", world.is_root().then_some(&setup))?;
    let ior_dir = dir.join(IOR_DIR);
    let mk = if world.is_root() {
        backend::mkdir_all(fs, &ior_dir).ctx("creating", &ior_dir)
    } else {
        Ok(())
    };
    world.agree("series-ior-dir", mk)?;

    let cells: Vec<(u32, u32)> = opts
        .capacities
        .iter()
        .flat_map(|&c| opts.frags.iter().map(move |&f| (c, f)))
        .collect();
    let bar = env.bars().items(cells.len() as u64, "series cells");
    let quiet = RunEnv {
        fs: env.fs.clone(),
        world,
        progress: crate::progress::Progress::hidden(),
        cancel: env.cancel.clone(),
    };
    let (mut run_n, mut skipped) = (0usize, 0usize);
    for (c, f) in cells {
        if state.done.contains(&(c, f)) {
            skipped += 1;
            bar.inc(1);
            continue;
        }
        if env.cancel.is_cancelled() {
            return Err(BenchError::Interrupted(
                "series stopped between cells; rerun with --resume".into(),
            ));
        }
        tracing::info!("series cell PaF:{c:02}.{f:02}");
        // A cell interrupted earlier left its PaF tree: clear it before starting again.
        if paf::read_journal(fs, dir)?.is_some() {
            paf::scrub(&quiet, dir, opts.paf_threads)?;
        }
        let spec = PafSpec {
            generations: vec![Generation {
                capacity_pct: c,
                frag_pct: f,
            }],
            seed: opts.seed,
            sizes: vec![opts.file_size],
            capacity_kb: Some(state.capacity_kb),
        };
        let paf_opts = PafOptions {
            threads: opts.paf_threads,
            shape: opts.shape,
            ..PafOptions::default()
        };
        let cell = || -> Result<Vec<Row>> {
            let aged = paf::run(&quiet, dir, Some(&spec), &paf_opts)?;
            let mut rows = Vec::new();
            for &x in &opts.xfers {
                let rep = ior::run(&quiet, &ior_config(dir, opts, x))?;
                if let Some(rep) = rep {
                    for it in 0..opts.iterations {
                        let bw = |a: Access| {
                            rep.results
                                .iter()
                                .find(|r| r.access == a && r.iteration == it)
                                .map_or(0.0, |r| r.bytes as f64 / r.total_time / MIB as f64)
                        };
                        rows.push(Row {
                            capacity_pct: c,
                            frag_pct: f,
                            xfer: x,
                            iteration: it,
                            write_mib: bw(Access::Write),
                            read_mib: bw(Access::Read),
                            capacity_reached_pct: aged.capacity_reached_pct,
                        });
                    }
                }
            }
            Ok(rows)
        };
        let rows = cell().map_err(|e| match e {
            BenchError::Interrupted(m) => BenchError::Interrupted(format!(
                "series stopped in cell PaF:{c:02}.{f:02} ({m}); `nacre series --resume` \
                 redoes this cell and goes on, `nacre series --scrub` removes what it left"
            )),
            e if e.is_no_space() => e.with_space_hint(
                "`nacre series --scrub` removes the aged tree; lower the capacity levels",
            ),
            e => e,
        })?;
        paf::scrub(&quiet, dir, opts.paf_threads)?;
        if world.is_root() {
            append_rows(&out.join(RESULTS_CSV), &rows)?;
            state.done.push((c, f));
            write_state(&crate::backend::PosixFs, out, &state)?;
        }
        world.barrier(&format!("series-cell-{c}-{f}"))?;
        run_n += 1;
        bar.inc(1);
    }
    bar.finish_and_clear();
    if world.is_root() {
        let _ = fs.rmdir(&ior_dir);
    }
    let mut report = SeriesReport {
        out: out.to_path_buf(),
        capacity_kb: state.capacity_kb,
        cells_run: run_n,
        cells_skipped: skipped,
        rows: 0,
        stats: Vec::new(),
        files: Vec::new(),
    };
    if world.is_root() {
        let rows = read_rows(&out.join(RESULTS_CSV))?;
        report.rows = rows.len();
        report.stats = aggregate(&rows);
        let sp = out.join(SUMMARY_CSV);
        let mut w = csv::Writer::from_path(&sp)
            .map_err(|e| BenchError::Usage(format!("writing {}: {e}", sp.display())))?;
        for s in &report.stats {
            w.serialize(s)
                .map_err(|e| BenchError::Usage(format!("writing {}: {e}", sp.display())))?;
        }
        w.flush().ctx("writing", &sp)?;
        report.files.push(out.join(RESULTS_CSV));
        report.files.push(sp);
        report.files.extend(plots(&report.stats, opts, out)?);
        let jp = out.join(SUMMARY_JSON);
        let text = serde_json::to_vec_pretty(&report)
            .map_err(|e| BenchError::Usage(format!("encoding {}: {e}", jp.display())))?;
        let fh = crate::backend::PosixFs
            .create(&jp, OpenOptions::write().truncate(true))
            .ctx("creating", &jp)?;
        let wr = backend::write_all_at(&crate::backend::PosixFs, fh, &text, 0);
        let cl = crate::backend::PosixFs.close(fh);
        wr.and(cl).ctx("writing", &jp)?;
        report.files.push(jp);
    }
    world.barrier("series-done")?;
    Ok(report)
}

/// Removes what an interrupted series left in `dir` (the aged tree, its journal and the IOR
/// files); the results directory is kept.
pub fn scrub(env: &RunEnv<'_>, dir: &Path, paf_threads: usize) -> Result<u64> {
    let fs = env.fs.as_ref();
    let mut removed = paf::scrub(env, dir, paf_threads)?.entries_removed;
    if env.world.is_root() {
        let p = dir.join(IOR_DIR);
        removed += backend::remove_tree(fs, &p, &|_, _| false).ctx("removing", &p)?;
    }
    env.world.barrier("series-scrubbed")?;
    Ok(removed)
}

/// Prints what the series did and the mean table.
pub fn print_text(r: &SeriesReport, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "Series: {} cell(s) run, {} resumed from earlier, {} measurements, capacity {} 1K-blocks",
        r.cells_run, r.cells_skipped, r.rows, r.capacity_kb
    )?;
    writeln!(
        out,
        "{:>8} {:>6} {:>7} {:>6} {:>12} {:>10} {:>7}",
        "PaF", "xfer", "op", "iters", "mean MiB/s", "stddev", "CV %"
    )?;
    for s in &r.stats {
        writeln!(
            out,
            "{:>8} {:>6} {:>7} {:>6} {:>12.2} {:>10.2} {:>7.2}",
            format!("{:02}.{:02}", s.capacity_pct, s.frag_pct),
            units::short_size(s.xfer),
            s.operation.name(),
            s.iterations,
            s.mean_mib,
            s.stddev_mib,
            s.cv_pct
        )?;
    }
    writeln!(out, "files:")?;
    for f in &r.files {
        writeln!(out, "  {}", f.display())?;
    }
    Ok(())
}
