//! Fragmentation reports.
//!
//! * A tree: extents per file through the backend's extent maps (FIEMAP for POSIX, counted as
//!   filefrag counts them: physically contiguous extents join), a histogram, the worst files,
//!   and the free-space fragmentation of the backing ext2/3/4 device through `e2freefrag` when
//!   the device is readable.
//! * A `dumpe2fs` output, summarised by [`dumpe2fs`].

pub mod dumpe2fs;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::io::{self, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use crate::backend::{self, FileKind, FileSystem, OpenOptions};
use crate::env::RunEnv;
use crate::error::{BenchError, IoContext, Result};
use crate::units;

/// Histogram buckets of extents per file: 0, 1, 2, 3–4, 5–8, … , over 2048.
pub const EXTENT_BUCKETS: usize = 14;

/// A file and its extent count.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct FileFrag {
    pub extents: u64,
    pub size: u64,
    pub path: PathBuf,
}

/// One histogram row.
#[derive(Debug, Clone, Serialize)]
pub struct ExtentBucket {
    pub label: String,
    pub files: u64,
    pub bytes: u64,
}

/// Free-space fragmentation of the backing device.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum FreeSpace {
    Report {
        device: String,
        tool: String,
        output: String,
    },
    NotAvailable {
        reason: String,
    },
}

/// A tree's fragmentation report.
#[derive(Debug, Clone, Serialize)]
pub struct TreeReport {
    pub dir: PathBuf,
    pub backend: String,
    pub files: u64,
    pub dirs: u64,
    pub bytes: u64,
    /// Files whose extent map the backend could not give.
    pub unmapped_files: u64,
    pub extents: u64,
    /// Files with more than one extent.
    pub fragmented_files: u64,
    pub mean_extents_per_file: f64,
    pub histogram: Vec<ExtentBucket>,
    pub worst: Vec<FileFrag>,
    /// Extents by storage target (a nacre file system's OSTs, through `--native`); empty
    /// when extents carry no target.
    pub per_ost: Vec<OstFrag>,
    pub free_space: FreeSpace,
}

/// Fragmentation of the objects one OST holds for the files of a tree.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct OstFrag {
    pub ost: u32,
    /// Objects holding data.
    pub objects: u64,
    pub extents: u64,
    pub bytes: u64,
}

/// A file's extent map, counted.
#[derive(Debug, Clone, Default)]
pub struct FileMap {
    pub extents: u64,
    /// By target: (extents, bytes).
    pub per_device: BTreeMap<u32, (u64, u64)>,
}

/// How to report.
#[derive(Debug, Clone)]
pub struct FragOptions {
    /// Worst files to list.
    pub top: usize,
    /// Look at the device's free space.
    pub free_space: bool,
    /// The device to give e2freefrag (found from the mount table when `None`).
    pub device: Option<PathBuf>,
}

fn bucket_of(extents: u64) -> usize {
    match extents {
        0 => 0,
        1 => 1,
        n => ((64 - (n - 1).leading_zeros()) as usize + 1).min(EXTENT_BUCKETS - 1),
    }
}

fn bucket_label(i: usize) -> String {
    match i {
        0 => "0".into(),
        1 => "1".into(),
        2 => "2".into(),
        i if i == EXTENT_BUCKETS - 1 => format!("> {}", 1u64 << (i - 2)),
        i => format!("{}-{}", (1u64 << (i - 2)) + 1, 1u64 << (i - 1)),
    }
}

/// A file's extents, counted as filefrag does (an extent that continues the previous one
/// both logically and physically is not a new one), in total and by target: each OST
/// object of a nacre file is counted on its own.
pub fn map_file(fs: &dyn FileSystem, path: &Path) -> io::Result<Option<FileMap>> {
    let fh = fs.open(path, OpenOptions::read())?;
    let mut m = FileMap::default();
    let mut expect: Option<(Option<u32>, u64, u64)> = None;
    let res = fs.extents(fh, &mut |e| {
        let contiguous =
            expect.is_some_and(|(d, l, p)| d == e.device && l == e.logical && p == e.physical);
        if !contiguous {
            m.extents += 1;
        }
        if let Some(d) = e.device {
            let slot = m.per_device.entry(d).or_default();
            slot.0 += u64::from(!contiguous);
            slot.1 += e.length;
        }
        expect = Some((e.device, e.logical + e.length, e.physical + e.length));
    });
    let _ = fs.close(fh);
    Ok(if res? { Some(m) } else { None })
}

/// Walks `dir` and reports its files' fragmentation.
pub fn tree_report(env: &RunEnv<'_>, dir: &Path, opts: &FragOptions) -> Result<TreeReport> {
    let fs = env.fs.as_ref();
    backend::check_dir(fs, dir)?;
    let mut rep = TreeReport {
        dir: dir.to_path_buf(),
        backend: fs.describe(),
        files: 0,
        dirs: 0,
        bytes: 0,
        unmapped_files: 0,
        extents: 0,
        fragmented_files: 0,
        mean_extents_per_file: 0.0,
        histogram: Vec::new(),
        worst: Vec::new(),
        per_ost: Vec::new(),
        free_space: FreeSpace::NotAvailable {
            reason: "not requested".into(),
        },
    };
    let mut hist = [(0u64, 0u64); EXTENT_BUCKETS];
    let mut worst: BinaryHeap<Reverse<FileFrag>> = BinaryHeap::new();
    let mut per_ost: BTreeMap<u32, OstFrag> = BTreeMap::new();
    let bar = env.bars().counter("files");
    // Directories still to walk; files are handled as the listing streams by, so memory
    // does not grow with the size of a directory.
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        rep.dirs += 1;
        let mut failure: Option<BenchError> = None;
        let listed = fs.readdir(&d, &mut |de| {
            let step = (|| -> Result<()> {
                if env.cancel.is_cancelled() {
                    return Err(BenchError::Interrupted(
                        "fragmentation report stopped".into(),
                    ));
                }
                let p = d.join(&de.name);
                let kind = match de.kind {
                    Some(k) => k,
                    None => match fs.stat(&p) {
                        Ok(st) => st.kind,
                        Err(e) if backend::is_not_found(&e) => return Ok(()),
                        Err(e) => return Err(BenchError::io("stat", &p, e)),
                    },
                };
                match kind {
                    FileKind::Dir => stack.push(p),
                    FileKind::File => {
                        let size = match fs.stat(&p) {
                            Ok(st) => st.size,
                            // A file removed while we walk is not an error.
                            Err(e) if backend::is_not_found(&e) => return Ok(()),
                            Err(e) => return Err(BenchError::io("stat", &p, e)),
                        };
                        rep.files += 1;
                        rep.bytes += size;
                        bar.inc(1);
                        match map_file(fs, &p) {
                            Ok(Some(map)) => {
                                let n = map.extents;
                                for (ost, (ext, bytes)) in map.per_device {
                                    let o = per_ost.entry(ost).or_default();
                                    o.ost = ost;
                                    o.objects += 1;
                                    o.extents += ext;
                                    o.bytes += bytes;
                                }
                                rep.extents += n;
                                if n > 1 {
                                    rep.fragmented_files += 1;
                                }
                                let b = bucket_of(n);
                                hist[b].0 += 1;
                                hist[b].1 += size;
                                if opts.top > 0 {
                                    worst.push(Reverse(FileFrag {
                                        extents: n,
                                        size,
                                        path: p,
                                    }));
                                    if worst.len() > opts.top {
                                        worst.pop();
                                    }
                                }
                            }
                            Ok(None) => rep.unmapped_files += 1,
                            Err(e) if backend::is_not_found(&e) => {}
                            Err(e) => return Err(BenchError::io("mapping extents of", &p, e)),
                        }
                    }
                    _ => {}
                }
                Ok(())
            })();
            match step {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => {
                    failure = Some(e);
                    ControlFlow::Break(())
                }
            }
        });
        if let Some(e) = failure {
            return Err(e);
        }
        listed.ctx("listing", &d)?;
    }
    bar.finish_and_clear();
    let mapped = rep.files - rep.unmapped_files;
    rep.mean_extents_per_file = if mapped > 0 {
        rep.extents as f64 / mapped as f64
    } else {
        0.0
    };
    rep.histogram = hist
        .iter()
        .enumerate()
        .map(|(i, (f, b))| ExtentBucket {
            label: bucket_label(i),
            files: *f,
            bytes: *b,
        })
        .collect();
    let mut w: Vec<FileFrag> = worst.into_iter().map(|r| r.0).collect();
    w.sort_by(|a, b| b.extents.cmp(&a.extents).then(a.path.cmp(&b.path)));
    rep.worst = w;
    rep.per_ost = per_ost.into_values().collect();
    if opts.free_space {
        rep.free_space = free_space(fs, dir, opts.device.as_deref());
    }
    Ok(rep)
}

/// The mount holding `path`: (mount point, file system type, source).
pub fn mount_of(path: &Path) -> Option<(PathBuf, String, String)> {
    let canon = std::fs::canonicalize(path).ok()?;
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut best: Option<(PathBuf, String, String)> = None;
    for line in text.lines() {
        let (left, right) = line.split_once(" - ")?;
        let mp = left.split(' ').nth(4)?;
        let mp = PathBuf::from(unescape_mount(mp));
        let mut r = right.split(' ');
        let (fstype, source) = (r.next()?.to_string(), r.next()?.to_string());
        if canon.starts_with(&mp)
            && best
                .as_ref()
                .is_none_or(|(b, _, _)| mp.as_os_str().len() >= b.as_os_str().len())
        {
            best = Some((mp, fstype, source));
        }
    }
    best
}

/// Mount points escape blanks as `\040` and so on.
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Finds a system tool in PATH or the sbin directories.
pub fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(
            ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
                .iter()
                .map(PathBuf::from),
        )
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn free_space(fs: &dyn FileSystem, dir: &Path, device: Option<&Path>) -> FreeSpace {
    let na = |reason: String| FreeSpace::NotAvailable { reason };
    let Some(local) = fs.local_path(dir) else {
        return na(format!(
            "{} has no local block device (per-target reports come through the native client)",
            fs.describe()
        ));
    };
    let dev = match device {
        Some(d) => d.to_path_buf(),
        None => match mount_of(&local) {
            None => return na("could not find the mount in /proc/self/mountinfo".into()),
            Some((mp, fstype, source)) => {
                if !matches!(fstype.as_str(), "ext2" | "ext3" | "ext4") {
                    return na(format!(
                        "{} is {fstype} (mounted on {}); e2freefrag reads ext2/3/4 only",
                        source,
                        mp.display()
                    ));
                }
                PathBuf::from(source)
            }
        },
    };
    if std::fs::metadata(&dev).is_err() {
        return na(format!("device {} is not accessible here", dev.display()));
    }
    let Some(tool) = find_tool("e2freefrag") else {
        return na("e2freefrag is not installed (Debian: e2fsprogs)".into());
    };
    match Command::new(&tool).arg(&dev).output() {
        Ok(o) if o.status.success() => FreeSpace::Report {
            device: dev.display().to_string(),
            tool: tool.display().to_string(),
            output: String::from_utf8_lossy(&o.stdout).into_owned(),
        },
        Ok(o) => na(format!(
            "e2freefrag {} failed: {}",
            dev.display(),
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .next()
                .unwrap_or("no message")
        )),
        Err(e) => na(format!("could not run e2freefrag: {e}")),
    }
}

/// Prints a tree report as text.
pub fn print_tree(r: &TreeReport, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "Fragmentation of {} ({})", r.dir.display(), r.backend)?;
    writeln!(
        out,
        "  {} files in {} directories, {}",
        r.files,
        r.dirs,
        units::human_bytes(r.bytes as f64)
    )?;
    let mapped = r.files - r.unmapped_files;
    if mapped == 0 && r.files > 0 {
        writeln!(
            out,
            "  extent maps are not available from this file system (FIEMAP unsupported)"
        )?;
    } else {
        writeln!(
            out,
            "  {} extents, {:.2} per file; {} files ({:.1}%) have more than one extent",
            r.extents,
            r.mean_extents_per_file,
            r.fragmented_files,
            if mapped > 0 {
                r.fragmented_files as f64 * 100.0 / mapped as f64
            } else {
                0.0
            }
        )?;
        if r.unmapped_files > 0 {
            writeln!(out, "  {} files had no extent map", r.unmapped_files)?;
        }
        writeln!(
            out,
            "\n  {:>12}  {:>10}  {:>12}",
            "extents/file", "files", "bytes"
        )?;
        for b in r.histogram.iter().filter(|b| b.files > 0) {
            writeln!(
                out,
                "  {:>12}  {:>10}  {:>12}",
                b.label,
                b.files,
                units::human_bytes(b.bytes as f64)
            )?;
        }
        if !r.per_ost.is_empty() {
            writeln!(
                out,
                "\n  {:>8}  {:>10}  {:>10}  {:>12}  {:>14}",
                "OST", "objects", "extents", "bytes", "extents/object"
            )?;
            for o in &r.per_ost {
                writeln!(
                    out,
                    "  {:>8}  {:>10}  {:>10}  {:>12}  {:>14.2}",
                    format!("OST{:04x}", o.ost),
                    o.objects,
                    o.extents,
                    units::human_bytes(o.bytes as f64),
                    o.extents as f64 / o.objects.max(1) as f64
                )?;
            }
        }
        if !r.worst.is_empty() {
            writeln!(out, "\n  most fragmented files:")?;
            for w in &r.worst {
                writeln!(
                    out,
                    "  {:>8} extents  {:>10}  {}",
                    w.extents,
                    units::human_bytes(w.size as f64),
                    w.path.display()
                )?;
            }
        }
    }
    writeln!(out, "\nFree space fragmentation:")?;
    match &r.free_space {
        FreeSpace::Report { output, .. } => write!(out, "{output}"),
        FreeSpace::NotAvailable { reason } => writeln!(out, "  not available: {reason}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1), 1);
        assert_eq!(bucket_of(2), 2);
        assert_eq!(bucket_of(3), 3);
        assert_eq!(bucket_of(4), 3);
        assert_eq!(bucket_of(5), 4);
        assert_eq!(bucket_of(8), 4);
        assert_eq!(bucket_of(9), 5);
        assert_eq!(bucket_label(3), "3-4");
        assert_eq!(bucket_label(4), "5-8");
        assert_eq!(bucket_of(1 << 40), EXTENT_BUCKETS - 1);
        assert_eq!(bucket_label(EXTENT_BUCKETS - 1), "> 2048");
        assert_eq!(bucket_label(EXTENT_BUCKETS - 2), "1025-2048");
        assert_eq!(unescape_mount("/mnt/a\\040b"), "/mnt/a b");
    }
}
