//! Samples, medians, the machine, and the printed and JSON reports.

use std::collections::BTreeMap;
use std::path::Path;

/// What one metric measures and how to show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Metric {
    Create,
    Checkpoint,
    CheckpointMax,
    Lookup1,
    Lookup2,
    Readdir,
    Unlink,
    Disk,
    Reopen,
}

impl Metric {
    pub const ALL: [Metric; 9] = [
        Metric::Create,
        Metric::Checkpoint,
        Metric::CheckpointMax,
        Metric::Lookup1,
        Metric::Lookup2,
        Metric::Readdir,
        Metric::Unlink,
        Metric::Disk,
        Metric::Reopen,
    ];

    pub fn key(self) -> &'static str {
        match self {
            Metric::Create => "create_ops_per_s",
            Metric::Checkpoint => "checkpoint_ms",
            Metric::CheckpointMax => "checkpoint_max_ms",
            Metric::Lookup1 => "lookup_1_thread_ops_per_s",
            Metric::Lookup2 => "lookup_2_threads_ops_per_s",
            Metric::Readdir => "readdir_entries_per_s",
            Metric::Unlink => "unlink_ops_per_s",
            Metric::Disk => "disk_mib",
            Metric::Reopen => "reopen_ms",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Metric::Create => "create, ops/s (batched, incl. checkpoints)",
            Metric::Checkpoint => "durable checkpoint, ms (median)",
            Metric::CheckpointMax => "durable checkpoint, ms (worst)",
            Metric::Lookup1 => "lookup dirent+inode, 1 thread, ops/s",
            Metric::Lookup2 => "lookup dirent+inode, 2 threads, ops/s",
            Metric::Readdir => "readdir (10k-entry dirs), entries/s",
            Metric::Unlink => "unlink, ops/s (batched, incl. checkpoints)",
            Metric::Disk => "disk used after creates, MiB",
            Metric::Reopen => "reopen after clean close, ms",
        }
    }

    /// Whether a larger number is better.
    pub fn higher_is_better(self) -> bool {
        matches!(
            self,
            Metric::Create | Metric::Lookup1 | Metric::Lookup2 | Metric::Readdir | Metric::Unlink
        )
    }

    fn format(self, v: f64) -> String {
        match self {
            Metric::Create
            | Metric::Lookup1
            | Metric::Lookup2
            | Metric::Readdir
            | Metric::Unlink => rate(v),
            Metric::Disk => format!("{v:.0}"),
            Metric::Checkpoint | Metric::CheckpointMax | Metric::Reopen => {
                if v < 10.0 {
                    format!("{v:.2}")
                } else {
                    format!("{v:.0}")
                }
            }
        }
    }
}

fn rate(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// All samples of one store: metric -> one value per run.
#[derive(Default)]
pub struct Samples(pub BTreeMap<Metric, Vec<f64>>);

impl Samples {
    pub fn push(&mut self, m: Metric, v: f64) {
        self.0.entry(m).or_default().push(v);
    }

    fn values(&self, m: Metric) -> &[f64] {
        self.0.get(&m).map_or(&[], Vec::as_slice)
    }

    /// Median, with the worst-case metric taking the maximum instead.
    pub fn summary(&self, m: Metric) -> Option<f64> {
        let v = self.values(m);
        if m == Metric::CheckpointMax {
            return v.iter().copied().reduce(f64::max);
        }
        median(v)
    }

    /// Half the range as a percentage of the median.
    fn spread(&self, m: Metric) -> Option<f64> {
        let v = self.values(m);
        let med = median(v)?;
        let lo = v.iter().copied().reduce(f64::min)?;
        let hi = v.iter().copied().reduce(f64::max)?;
        (med > 0.0).then(|| (hi - lo) / 2.0 / med * 100.0)
    }
}

pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

/// What the run was made on.
pub struct Machine {
    pub nproc: usize,
    pub ram_gib: f64,
    pub cpu: String,
    pub kernel: String,
    pub filesystem: String,
    pub load_start: String,
    pub load_end: String,
}

impl Machine {
    pub fn probe(dir: &Path) -> Machine {
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let ram_kib = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|r| r.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|r| r.trim_start_matches([' ', '\t', ':']).trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        Machine {
            nproc: std::thread::available_parallelism().map_or(1, |n| n.get()),
            ram_gib: ram_kib / (1024.0 * 1024.0),
            cpu,
            kernel,
            filesystem: filesystem_of(dir),
            load_start: loadavg(),
            load_end: String::new(),
        }
    }

    pub fn describe(&self) -> String {
        format!(
            "{} cores ({}), {:.1} GiB RAM, Linux {}, databases on {}",
            self.nproc, self.cpu, self.ram_gib, self.kernel, self.filesystem
        )
    }
}

pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Type and device of the mount holding `dir`.
fn filesystem_of(dir: &Path) -> String {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 3 && dir.starts_with(f[1]))
                .then(|| (f[1].len(), format!("{} ({})", f[2], f[0])))
        })
        .max_by_key(|(len, _)| *len)
        .map_or_else(|| "unknown".into(), |(_, fs)| fs)
}

/// Today's date (UTC) as YYYY-MM-DD.
pub fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The results as a Markdown table: one row per metric, one column per store. Each cell is
/// the median over runs and, in brackets, half the range as a share of the median.
pub fn table(results: &[(String, Samples)]) -> String {
    let mut rows = vec![{
        let mut h = vec!["metric".to_string()];
        h.extend(results.iter().map(|(k, _)| k.clone()));
        h
    }];
    for m in Metric::ALL {
        let mut row = vec![m.label().to_string()];
        for (_, s) in results {
            row.push(match (s.summary(m), s.spread(m)) {
                (Some(v), Some(p)) if m != Metric::CheckpointMax => {
                    format!("{} (±{p:.0}%)", m.format(v))
                }
                (Some(v), _) => m.format(v),
                (None, _) => "-".into(),
            });
        }
        rows.push(row);
    }
    let cols = rows[0].len();
    let width: Vec<usize> = (0..cols)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let line = |r: &[String]| {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, s)| {
                if c == 0 {
                    format!("{s:<w$}", w = width[c])
                } else {
                    format!("{s:>w$}", w = width[c])
                }
            })
            .collect();
        format!("| {} |", cells.join(" | "))
    };
    let mut out = line(&rows[0]);
    out.push('\n');
    let rule: Vec<String> = width
        .iter()
        .enumerate()
        .map(|(c, w)| {
            if c == 0 {
                "-".repeat(w + 2)
            } else {
                format!("{}:", "-".repeat(w + 1))
            }
        })
        .collect();
    out.push_str(&format!("|{}|\n", rule.join("|")));
    for r in &rows[1..] {
        out.push_str(&line(r));
        out.push('\n');
    }
    out
}

/// The results as JSON: every sample, the summaries, the machine and the settings.
pub fn json(
    results: &[(String, Samples)],
    machine: &Machine,
    settings: serde_json::Value,
    config: &[(String, String)],
) -> serde_json::Value {
    let mut stores = serde_json::Map::new();
    for (kind, s) in results {
        let mut metrics = serde_json::Map::new();
        for m in Metric::ALL {
            metrics.insert(
                m.key().into(),
                serde_json::json!({
                    "summary": s.summary(m),
                    "samples": s.values(m),
                    "higher_is_better": m.higher_is_better(),
                    "label": m.label(),
                }),
            );
        }
        let cfg = config
            .iter()
            .find(|(k, _)| k == kind)
            .map(|(_, c)| c.clone());
        stores.insert(
            kind.clone(),
            serde_json::json!({ "config": cfg, "metrics": metrics }),
        );
    }
    serde_json::json!({
        "date": today(),
        "machine": {
            "nproc": machine.nproc,
            "ram_gib": machine.ram_gib,
            "cpu": machine.cpu,
            "kernel": machine.kernel,
            "filesystem": machine.filesystem,
            "load_average_start": machine.load_start,
            "load_average_end": machine.load_end,
            "shared": true,
        },
        "settings": settings,
        "summary": "median over runs; checkpoint_max_ms is the worst over all runs",
        "stores": stores,
    })
}
