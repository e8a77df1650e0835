//! The population an aging run makes: the log's files, repeated to the wanted count, spread
//! over random directories, every one of them derived from the seed alone.
//!
//! Directory `k` draws its depth and its file count from a generator seeded with
//! `(seed, k)`, and holds the next `count` files of the population in order; file `i` takes
//! the sizes of log record `i mod records`. Nothing is stored per file or per directory, so a
//! population of a billion files costs no more memory than the log's records, and any rank or
//! thread can rebuild any directory.
//!
//! Paths under the tree root: a directory of depth D is `p<r>/…/p<r>/d<k>` with D-1 parent
//! components drawn from [`BRANCHING`] names (so directories share ancestors, as a real tree
//! does) and a last component unique to it; its files are `f<i>`.

use std::path::PathBuf;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::error::{BenchError, Result};
use crate::paf::plan::mix_seed;
use crate::units::MIB;

/// What one Darshan file record says about a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FileRecord {
    /// Bytes the file held when the job opened it.
    pub size_at_open: u64,
    /// Bytes the job wrote to it.
    pub bytes_written: u64,
}

impl FileRecord {
    /// The size the aged file is given: what it held plus what was written, at most `cap`.
    pub fn size(&self, cap: u64) -> u64 {
        self.size_at_open
            .saturating_add(self.bytes_written)
            .min(cap)
    }
}

/// The seed's cap: "reduce files that are larger than 1MB * 8 to be 8MB".
pub const DEFAULT_CAP: u64 = 8 * MIB;
/// The seed's directory depths, "random (1->10) depth".
pub const DEFAULT_DEPTH: (u32, u32) = (1, 10);
/// The seed's files per directory, "files (1->100) into the same directory".
pub const DEFAULT_DIR_FILES: (u32, u32) = (1, 100);
/// Names a parent component is drawn from: few enough that directories of one population
/// share ancestors, enough that the tree has breadth at every level.
pub const BRANCHING: u32 = 8;
/// Deepest directory accepted: path lengths stay far below PATH_MAX (4096) with components
/// of at most 10 bytes.
pub const MAX_DEPTH: u32 = 64;
/// Most files in one directory accepted: the MDT splits nothing, so one directory's entries
/// stay readable in a few readdir pages.
pub const MAX_DIR_FILES: u32 = 100_000;

/// How the tree is shaped and files sized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TreeShape {
    /// Inclusive range of directory depths below the tree root.
    pub depth: (u32, u32),
    /// Inclusive range of files per directory.
    pub dir_files: (u32, u32),
    /// Files larger than this are made this size.
    pub cap: u64,
}

impl Default for TreeShape {
    fn default() -> Self {
        TreeShape {
            depth: DEFAULT_DEPTH,
            dir_files: DEFAULT_DIR_FILES,
            cap: DEFAULT_CAP,
        }
    }
}

impl TreeShape {
    fn check(&self) -> Result<()> {
        let (dlo, dhi) = self.depth;
        if dlo == 0 || dlo > dhi || dhi > MAX_DEPTH {
            return Err(BenchError::Usage(format!(
                "depth {dlo}-{dhi}: give 1 <= MIN <= MAX <= {MAX_DEPTH}"
            )));
        }
        let (flo, fhi) = self.dir_files;
        if flo == 0 || flo > fhi || fhi > MAX_DIR_FILES {
            return Err(BenchError::Usage(format!(
                "files per directory {flo}-{fhi}: give 1 <= MIN <= MAX <= {MAX_DIR_FILES}"
            )));
        }
        Ok(())
    }
}

/// One directory of the population and the files it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedDir {
    /// Its number in the population, from 0.
    pub index: u64,
    /// Its path below the tree root.
    pub rel: PathBuf,
    pub depth: u32,
    /// The population index of its first file.
    pub first_file: u64,
    pub files: u64,
}

impl PlannedDir {
    /// The name of population file `i` (in this directory).
    pub fn file_name(i: u64) -> String {
        format!("f{i:010}")
    }
}

/// A population: the log's records, how many files to make of them, the seed and the shape.
#[derive(Debug, Clone)]
pub struct Population {
    records: Vec<FileRecord>,
    files: u64,
    seed: u64,
    shape: TreeShape,
}

impl Population {
    /// `files` files cycling through `records`.
    pub fn new(records: Vec<FileRecord>, files: u64, seed: u64, shape: TreeShape) -> Result<Self> {
        shape.check()?;
        if records.is_empty() && files > 0 {
            return Err(BenchError::Usage(
                "the logs hold no POSIX file record to age with".into(),
            ));
        }
        Ok(Population {
            records,
            files,
            seed,
            shape,
        })
    }

    /// Every record `scale` times.
    pub fn scaled(
        records: Vec<FileRecord>,
        scale: u64,
        seed: u64,
        shape: TreeShape,
    ) -> Result<Self> {
        let files = (records.len() as u64).checked_mul(scale).ok_or_else(|| {
            BenchError::Usage(format!("--scale {scale} overflows the file count"))
        })?;
        Population::new(records, files, seed, shape)
    }

    pub fn files(&self) -> u64 {
        self.files
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn shape(&self) -> TreeShape {
        self.shape
    }

    pub fn records(&self) -> &[FileRecord] {
        &self.records
    }

    /// The record population file `i` is made from.
    pub fn record_of(&self, i: u64) -> FileRecord {
        // `new` refuses files without records, so `records` is not empty here.
        self.records[(i % self.records.len() as u64) as usize]
    }

    /// The size population file `i` is given.
    pub fn file_size(&self, i: u64) -> u64 {
        self.record_of(i).size(self.shape.cap)
    }

    /// The directories in order, each built on demand.
    pub fn dirs(&self) -> Dirs<'_> {
        Dirs {
            pop: self,
            index: 0,
            next_file: 0,
        }
    }

    /// Counts everything the population holds, walking it once.
    pub fn summary(&self) -> PopulationSummary {
        let cap = self.shape.cap;
        let mut s = PopulationSummary {
            records: self.records.len() as u64,
            files: self.files,
            seed: self.seed,
            shape: self.shape,
            size_histogram: SIZE_BUCKETS
                .iter()
                .map(|b| SizeBucket {
                    label: b.0,
                    files: 0,
                    bytes: 0,
                })
                .collect(),
            depth_histogram: (0..=self.shape.depth.1).map(|_| 0).collect(),
            ..PopulationSummary::default()
        };
        // Sizes repeat every `records` files: count one pass, scale it, add the remainder.
        let n = self.records.len() as u64;
        if let Some(full) = self.files.checked_div(n) {
            let rest = self.files % n;
            for (i, r) in self.records.iter().enumerate() {
                let times = full + u64::from((i as u64) < rest);
                if times == 0 {
                    continue;
                }
                let size = r.size(cap);
                s.bytes += size * times;
                s.log_bytes = s.log_bytes.saturating_add(
                    r.size_at_open
                        .saturating_add(r.bytes_written)
                        .saturating_mul(times),
                );
                if r.size_at_open.saturating_add(r.bytes_written) > cap {
                    s.capped_files += times;
                }
                let b = &mut s.size_histogram[bucket_of(size)];
                b.files += times;
                b.bytes += size * times;
                s.largest_file = s.largest_file.max(size);
            }
        }
        let mut min_files = u64::MAX;
        for d in self.dirs() {
            s.dirs += 1;
            s.depth_histogram[d.depth as usize] += 1;
            s.max_depth = s.max_depth.max(d.depth);
            min_files = min_files.min(d.files);
            s.max_dir_files = s.max_dir_files.max(d.files);
        }
        s.min_dir_files = if s.dirs == 0 { 0 } else { min_files };
        s
    }
}

/// The directories of a population, in order.
pub struct Dirs<'a> {
    pop: &'a Population,
    index: u64,
    next_file: u64,
}

impl Iterator for Dirs<'_> {
    type Item = PlannedDir;

    fn next(&mut self) -> Option<PlannedDir> {
        let left = self.pop.files - self.next_file;
        if left == 0 {
            return None;
        }
        let shape = &self.pop.shape;
        let k = self.index;
        let mut rng = ChaCha8Rng::seed_from_u64(mix_seed(self.pop.seed, k, 0xD1));
        let depth = rng.gen_range(shape.depth.0..=shape.depth.1);
        let wanted = rng.gen_range(shape.dir_files.0..=shape.dir_files.1) as u64;
        let mut rel = PathBuf::new();
        for _ in 1..depth {
            rel.push(format!("p{}", rng.gen_range(0..BRANCHING)));
        }
        rel.push(format!("d{k:08}"));
        // The last directory takes what is left, which may be fewer than drawn.
        let files = wanted.min(left);
        let d = PlannedDir {
            index: k,
            rel,
            depth,
            first_file: self.next_file,
            files,
        };
        self.index += 1;
        self.next_file += files;
        Some(d)
    }
}

/// Size classes of the summary: Darshan's own access-size bins, so the histogram reads
/// beside the log's.
pub const SIZE_BUCKETS: &[(&str, u64)] = &[
    ("0", 1),
    ("1-100", 101),
    ("100-1K", 1024 + 1),
    ("1K-10K", 10 * 1024 + 1),
    ("10K-100K", 100 * 1024 + 1),
    ("100K-1M", MIB + 1),
    ("1M-4M", 4 * MIB + 1),
    ("4M-10M", 10 * MIB + 1),
    ("10M-100M", 100 * MIB + 1),
    ("100M-1G", 1024 * MIB + 1),
    ("1G+", u64::MAX),
];

/// The bucket of a size: the first whose end is beyond it.
pub fn bucket_of(size: u64) -> usize {
    SIZE_BUCKETS
        .iter()
        .position(|b| size < b.1)
        .unwrap_or(SIZE_BUCKETS.len() - 1)
}

/// Files and bytes of one size class.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SizeBucket {
    pub label: &'static str,
    pub files: u64,
    pub bytes: u64,
}

/// What a population holds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PopulationSummary {
    /// Distinct file records read from the logs.
    pub records: u64,
    pub files: u64,
    /// Bytes of the files as made (after the cap).
    pub bytes: u64,
    /// Bytes the logs' files held (size at open plus bytes written), before the cap.
    pub log_bytes: u64,
    /// Files the cap made smaller.
    pub capped_files: u64,
    pub largest_file: u64,
    pub seed: u64,
    pub shape: TreeShape,
    pub size_histogram: Vec<SizeBucket>,
    /// Directories holding files (their shared parents come on top).
    pub dirs: u64,
    /// Directories per depth, index = depth.
    pub depth_histogram: Vec<u64>,
    pub max_depth: u32,
    pub min_dir_files: u64,
    pub max_dir_files: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recs(sizes: &[(u64, u64)]) -> Vec<FileRecord> {
        sizes
            .iter()
            .map(|&(size_at_open, bytes_written)| FileRecord {
                size_at_open,
                bytes_written,
            })
            .collect()
    }

    fn all_dirs(p: &Population) -> Vec<PlannedDir> {
        p.dirs().collect()
    }

    #[test]
    fn same_seed_same_tree_other_seed_other_tree() {
        let r = recs(&[(0, 10), (5, 0), (1 << 30, 0)]);
        let a = Population::scaled(r.clone(), 500, 42, TreeShape::default()).unwrap();
        let b = Population::scaled(r.clone(), 500, 42, TreeShape::default()).unwrap();
        let c = Population::scaled(r, 500, 43, TreeShape::default()).unwrap();
        assert_eq!(all_dirs(&a), all_dirs(&b));
        assert_ne!(all_dirs(&a), all_dirs(&c));
        let sizes = |p: &Population| (0..p.files()).map(|i| p.file_size(i)).collect::<Vec<_>>();
        assert_eq!(sizes(&a), sizes(&b));
    }

    #[test]
    fn files_above_the_cap_are_made_the_cap() {
        let r = recs(&[(0, 3 << 30), (8 * MIB, 1), (8 * MIB, 0), (100, 200)]);
        let p = Population::scaled(r, 1, 1, TreeShape::default()).unwrap();
        let sizes: Vec<u64> = (0..4).map(|i| p.file_size(i)).collect();
        assert_eq!(sizes, vec![8 * MIB, 8 * MIB, 8 * MIB, 300]);
        let s = p.summary();
        assert_eq!(s.capped_files, 2);
        assert_eq!(s.bytes, 3 * 8 * MIB + 300);
        assert_eq!(s.log_bytes, (3 << 30) + 16 * MIB + 1 + 300);
        assert_eq!(s.largest_file, 8 * MIB);
    }

    #[test]
    fn depths_and_files_per_directory_stay_in_bounds() {
        let r = recs(&[(0, 1)]);
        let p = Population::new(r, 200_000, 7, TreeShape::default()).unwrap();
        let mut files = 0;
        let mut seen_depths = [false; 11];
        let mut seen_counts = std::collections::BTreeSet::new();
        let dirs = all_dirs(&p);
        for (n, d) in dirs.iter().enumerate() {
            assert!((1..=10).contains(&d.depth), "depth {}", d.depth);
            assert_eq!(d.rel.components().count() as u32, d.depth);
            assert!(d.files <= 100 && d.files >= 1, "{} files", d.files);
            assert_eq!(d.first_file, files, "files follow each other");
            files += d.files;
            seen_depths[d.depth as usize] = true;
            if n + 1 < dirs.len() {
                seen_counts.insert(d.files);
            }
        }
        assert_eq!(files, 200_000);
        assert!(
            seen_depths[1..].iter().all(|&s| s),
            "every depth 1-10 occurs"
        );
        assert!(seen_counts.contains(&1) && seen_counts.contains(&100));
        let s = p.summary();
        assert_eq!(s.dirs, dirs.len() as u64);
        assert_eq!(s.depth_histogram.iter().sum::<u64>(), s.dirs);
        assert_eq!(s.max_depth, 10);
        assert_eq!((s.min_dir_files, s.max_dir_files), (1, 100));
    }

    #[test]
    fn a_narrower_shape_is_honoured() {
        let shape = TreeShape {
            depth: (3, 3),
            dir_files: (5, 7),
            cap: 1000,
        };
        let p = Population::new(recs(&[(0, 5000)]), 1000, 9, shape).unwrap();
        for d in p.dirs() {
            assert_eq!(d.depth, 3);
            assert!(d.files <= 7);
        }
        assert_eq!(p.file_size(0), 1000);
    }

    #[test]
    fn scale_repeats_every_record_exactly() {
        let r = recs(&[(0, 1), (0, 2), (0, 3)]);
        let p = Population::scaled(r, 1000, 5, TreeShape::default()).unwrap();
        assert_eq!(p.files(), 3000);
        let mut count = [0u64; 4];
        for d in p.dirs() {
            for i in d.first_file..d.first_file + d.files {
                count[p.file_size(i) as usize] += 1;
            }
        }
        assert_eq!(count, [0, 1000, 1000, 1000]);
        let s = p.summary();
        assert_eq!(s.bytes, 6000);
        assert_eq!(s.size_histogram[1].files, 3000);
        assert_eq!(s.records, 3);
    }

    #[test]
    fn a_million_files_walk_in_bounded_memory_and_unique_dirs() {
        let r = recs(&[(0, 1), (10, 0)]);
        let p = Population::new(r, 1_000_000, 11, TreeShape::default()).unwrap();
        let mut last = None;
        let mut n = 0u64;
        for d in p.dirs() {
            // The last component is the directory's own number: no two directories meet.
            let leaf = d.rel.file_name().unwrap().to_str().unwrap().to_string();
            assert_eq!(leaf, format!("d{:08}", d.index));
            if let Some(l) = last {
                assert_eq!(d.index, l + 1);
            }
            last = Some(d.index);
            n += d.files;
        }
        assert_eq!(n, 1_000_000);
    }

    #[test]
    fn bad_shapes_and_empty_logs_are_refused() {
        let shape = |depth, dir_files| TreeShape {
            depth,
            dir_files,
            cap: DEFAULT_CAP,
        };
        let r = recs(&[(0, 1)]);
        assert!(Population::new(r.clone(), 1, 1, shape((0, 3), (1, 2))).is_err());
        assert!(Population::new(r.clone(), 1, 1, shape((4, 3), (1, 2))).is_err());
        assert!(Population::new(r.clone(), 1, 1, shape((1, 3), (0, 2))).is_err());
        assert!(Population::new(r.clone(), 1, 1, shape((1, 300), (1, 2))).is_err());
        assert!(Population::new(Vec::new(), 1, 1, TreeShape::default()).is_err());
        let two = recs(&[(0, 1), (0, 2)]);
        assert!(Population::scaled(two, u64::MAX, 1, TreeShape::default()).is_err());
        let empty = Population::new(Vec::new(), 0, 1, TreeShape::default()).unwrap();
        assert_eq!(empty.dirs().count(), 0);
    }

    #[test]
    fn sizes_fall_in_darshans_bins() {
        assert_eq!(SIZE_BUCKETS[bucket_of(0)].0, "0");
        assert_eq!(SIZE_BUCKETS[bucket_of(100)].0, "1-100");
        assert_eq!(SIZE_BUCKETS[bucket_of(101)].0, "100-1K");
        assert_eq!(SIZE_BUCKETS[bucket_of(8 * MIB)].0, "4M-10M");
        assert_eq!(SIZE_BUCKETS[bucket_of(u64::MAX)].0, "1G+");
    }
}
