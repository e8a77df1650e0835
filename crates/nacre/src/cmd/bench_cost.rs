//! What a feature costs, measured the one way that survives a noisy machine: the same
//! workload with the feature on and off, the two alternating run by run (on first in even
//! runs, off first in odd ones), so drift in the machine's speed falls on both alike, and
//! the means side by side as a ratio. `nacre bench checks` and `nacre bench recovery`
//! use it.

use super::bench_dne::{mdtest_cfg, phase_rate};
use anyhow::{Context, Result};
use nacre_bench::env::RunEnv;
use nacre_bench::mdtest;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The options every on/off comparison takes.
#[derive(clap::Args, Debug, Clone)]
pub struct CostArgs {
    /// Files per mdtest run, over all tasks (mdtest -F -u -n FILES/TASKS)
    #[arg(long, default_value_t = 4000)]
    pub files: u64,
    /// Tasks (threads of this process) of each workload
    #[arg(long, default_value_t = 4)]
    pub tasks: usize,
    /// Runs of each case, the settings alternating (an even count balances their order)
    #[arg(long, default_value_t = 4)]
    pub reps: u32,
    /// Where the file system is made (a new temporary directory by default)
    #[arg(long)]
    pub workdir: Option<PathBuf>,
    /// Write every figure as JSON here
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Files created, stated and removed before measuring (0: none). A new file system's
    /// first files are slower than the rest: its OSTs' object pools start small, and the
    /// disk's first writes to new areas cost more (ext4 here: a new directory's first
    /// thousands of files took 480-770 us each, later ones 10.6 us); without a warm-up,
    /// whichever setting runs first pays that.
    #[arg(long, default_value_t = 4000)]
    pub warmup: u64,
}

impl CostArgs {
    /// Refuses counts of zero.
    pub fn check(&self) -> Result<()> {
        if self.files == 0 || self.tasks == 0 || self.reps == 0 {
            anyhow::bail!("--files, --tasks and --reps must be at least 1");
        }
        Ok(())
    }

    /// mdtest's items per task.
    pub fn per_task(&self) -> u64 {
        self.files / self.tasks as u64
    }

    /// Writes `cells` to `--json`, if given.
    pub fn write_json(&self, cells: &[Cell]) -> Result<()> {
        if let Some(p) = &self.json {
            std::fs::write(p, serde_json::to_string_pretty(cells)?)
                .with_context(|| format!("cannot write {}", p.display()))?;
        }
        Ok(())
    }
}

/// mdtest's file phases, as its report names them, and as the tables show them.
pub const MDTEST_PHASES: [(&str, &str); 3] = [
    ("File creation", "create"),
    ("File stat", "stat"),
    ("File removal", "remove"),
];

/// One measured rate.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// What ran: a workload, or who ran it.
    pub case: String,
    /// The feature on or off.
    pub on: bool,
    /// The operation (create, stat, write, ...).
    pub op: String,
    pub rep: u32,
    /// Operations (or MiB) per second.
    pub rate: f64,
}

/// The settings of run `rep`, in the order they run.
pub fn order(rep: u32) -> [bool; 2] {
    if rep.is_multiple_of(2) {
        [true, false]
    } else {
        [false, true]
    }
}

/// The median rate of `case`/`op` with the feature `on` over the runs, if it was measured.
pub fn median(cells: &[Cell], case: &str, op: &str, on: bool) -> Option<f64> {
    nacre_bench::stats::median(
        cells
            .iter()
            .filter(|c| c.case == case && c.op == op && c.on == on)
            .map(|c| c.rate),
    )
}

/// `on / off` of `case`/`op`, if both were measured and off is not zero.
pub fn ratio(cells: &[Cell], case: &str, op: &str) -> Option<f64> {
    match (
        median(cells, case, op, true),
        median(cells, case, op, false),
    ) {
        (Some(on), Some(off)) if off > 0.0 => Some(on / off),
        _ => None,
    }
}

/// A ratio an issue asks of some operations (the others are shown without a verdict).
#[derive(Clone, Copy, Debug)]
pub struct Goal<'a> {
    /// The lowest on/off ratio that meets it.
    pub ratio: f64,
    /// The operations it is for.
    pub ops: &'a [&'a str],
}

/// Prints one line per case and operation: the means with the feature on and off and
/// their ratio, beside `goal`'s verdict for the operations it names.
pub fn print_table(
    cells: &[Cell],
    cases: &[String],
    ops: &[&str],
    unit: &str,
    goal: Option<Goal<'_>>,
) {
    println!(
        "{:<10} {:<8} {:>14} {:>14} {:>8}  {}",
        "case",
        "op",
        format!("on {unit}"),
        format!("off {unit}"),
        "on/off",
        if goal.is_some() { "goal" } else { "" }
    );
    for case in cases {
        for op in ops {
            let (Some(on), Some(off)) = (
                median(cells, case, op, true),
                median(cells, case, op, false),
            ) else {
                continue;
            };
            let r = ratio(cells, case, op);
            let verdict = verdict(goal, op, r);
            println!(
                "{case:<10} {op:<8} {on:>14.1} {off:>14.1} {:>8}  {verdict}",
                r.map_or("-".into(), |r| format!("{r:.3}x"))
            );
        }
    }
}

/// What a table row says of `goal`: nothing for an operation it is not for.
fn verdict(goal: Option<Goal<'_>>, op: &str, ratio: Option<f64>) -> String {
    match (goal.filter(|g| g.ops.contains(&op)), ratio) {
        (Some(g), Some(r)) if r >= g.ratio => format!(">= {:.2}x: met", g.ratio),
        (Some(g), Some(_)) => format!(">= {:.2}x: NOT met", g.ratio),
        _ => String::new(),
    }
}

/// mdtest's file create, stat and remove rates for `files` files over `tasks` tasks, a
/// directory per task, under `dir` (which must exist); in [`MDTEST_PHASES`] order.
pub fn mdtest_rates(
    env: &RunEnv<'_>,
    dir: &Path,
    files: u64,
    tasks: usize,
) -> Result<Vec<(&'static str, f64)>> {
    let cfg = mdtest_cfg(
        &dir.to_string_lossy(),
        (files / tasks.max(1) as u64).max(1),
        tasks,
        true,
    );
    let r = mdtest::run(env, &cfg)
        .with_context(|| format!("mdtest in {}", dir.display()))?
        .context("mdtest gave no report")?;
    Ok(MDTEST_PHASES
        .iter()
        .map(|(phase, op)| (*op, phase_rate(&r, phase)))
        .collect())
}

/// The unmeasured warm-up ([`CostArgs::warmup`]): an mdtest run in `dir` (made and
/// removed here) whose rates are dropped.
pub fn warm_up(env: &RunEnv<'_>, dir: &Path, c: &CostArgs) -> Result<()> {
    if c.warmup == 0 {
        return Ok(());
    }
    std::fs::create_dir(dir).with_context(|| format!("mkdir {}", dir.display()))?;
    mdtest_rates(env, dir, c.warmup, c.tasks).context("warm-up")?;
    std::fs::remove_dir_all(dir).with_context(|| format!("rm -r {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_goal_judges_only_its_own_operations() {
        let g = Goal {
            ratio: 0.95,
            ops: &["create"],
        };
        assert_eq!(verdict(Some(g), "create", Some(0.96)), ">= 0.95x: met");
        assert_eq!(verdict(Some(g), "create", Some(0.90)), ">= 0.95x: NOT met");
        assert_eq!(verdict(Some(g), "remove", Some(0.50)), "");
        assert_eq!(verdict(Some(g), "create", None), "");
        assert_eq!(verdict(None, "create", Some(0.5)), "");
    }

    fn cell(case: &str, on: bool, rate: f64) -> Cell {
        Cell {
            case: case.into(),
            on,
            op: "create".into(),
            rep: 0,
            rate,
        }
    }

    #[test]
    fn alternates_and_takes_medians() {
        assert_eq!(order(0), [true, false]);
        assert_eq!(order(1), [false, true]);
        let cells = [
            cell("a", true, 90.0),
            cell("a", true, 110.0),
            cell("a", true, 100.0),
            cell("a", true, 10.0),
            cell("a", true, 1000.0),
            cell("a", false, 200.0),
            cell("b", false, 1.0),
        ];
        assert_eq!(median(&cells, "a", "create", true), Some(100.0));
        assert_eq!(ratio(&cells, "a", "create"), Some(0.5));
        assert_eq!(ratio(&cells, "b", "create"), None);
        assert_eq!(median(&cells, "a", "stat", true), None);
    }
}
