//! The deterministic layout of a PaF run: which files exist, where they live, their sizes, and
//! which of them each generation removes. Everything here is a pure function of the spec, the
//! resolved capacity, the seed and the global thread count, so every client of a multi-node
//! run computes the same plan without talking, and a resumed run picks up exactly where the
//! interrupted one stopped.
//!
//! Layout under `DIR/paf/` (MAXD bounds every directory, MAXB every branch):
//!
//! ```text
//! DIR/paf/AAAA/b00000/d00000/AAAA00000000001     thread 0 (global thread number "AAAA"),
//!             .../d00001/AAAA00000001001         branch 0 holds at most MAXB files in
//!        AAAB/b00000/d00000/AAAB00000000001      leaf directories of at most MAXD files
//! ```
//!
//! A file name is the global thread number in base 26 (`AAAA` = 0, `AAAB` = 1, …) followed by
//! the thread's 11-digit file sequence number, which continues across generations.

use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::spec::PafSpec;
use crate::error::{BenchError, Result};

/// Default entries per directory (the seed's MAXD).
pub const DEFAULT_MAXD: u64 = 1000;
/// Default files per branch (the seed's MAXB).
pub const DEFAULT_MAXB: u64 = 10_000;
/// Letters in a global thread number: 26^4 threads.
pub const GTN_LETTERS: u32 = 4;
/// Digits in a file sequence number.
pub const SEQ_DIGITS: usize = 11;
/// The directory under DIR that holds the tree.
pub const TREE_DIR: &str = "paf";

/// Global thread number as letters: 0 → `AAAA`, 1 → `AAAB`, 26 → `AABA`.
pub fn gtn_name(gtn: u64) -> String {
    let mut out = vec![b'A'; GTN_LETTERS as usize];
    let mut v = gtn;
    for slot in out.iter_mut().rev() {
        *slot = b'A' + (v % 26) as u8;
        v /= 26;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// True for names this tool creates (so scrub removes nothing else).
pub fn is_paf_name(name: &str) -> bool {
    let b = name.as_bytes();
    let gtn = |s: &[u8]| s.len() == GTN_LETTERS as usize && s.iter().all(u8::is_ascii_uppercase);
    let numbered =
        |s: &[u8], c: u8| s.len() == 6 && s[0] == c && s[1..].iter().all(u8::is_ascii_digit);
    gtn(b)
        || numbered(b, b'b')
        || numbered(b, b'd')
        || (b.len() == GTN_LETTERS as usize + SEQ_DIGITS
            && gtn(&b[..GTN_LETTERS as usize])
            && b[GTN_LETTERS as usize..].iter().all(u8::is_ascii_digit))
}

/// Tree shape limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeShape {
    /// Most entries in one directory.
    pub maxd: u64,
    /// Most files in one branch.
    pub maxb: u64,
}

impl Default for TreeShape {
    fn default() -> Self {
        TreeShape {
            maxd: DEFAULT_MAXD,
            maxb: DEFAULT_MAXB,
        }
    }
}

/// What one generation does, for all threads together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GenPlan {
    pub index: usize,
    pub capacity_pct: u32,
    pub frag_pct: u32,
    pub file_size: u64,
    /// Bytes this generation writes: capacity × capacity_pct.
    pub target_bytes: u64,
    /// Files written (target / size, rounded down).
    pub files: u64,
}

/// The whole run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub spec: PafSpec,
    pub capacity_kb: u64,
    pub seed: u64,
    pub threads_total: u64,
    pub shape: TreeShape,
    pub gens: Vec<GenPlan>,
}

/// A planned file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFile {
    pub generation: usize,
    pub gtn: u64,
    pub seq: u64,
    pub size: u64,
}

impl Plan {
    /// Builds the plan; fails when the spec has no size or the shape cannot hold the files.
    pub fn new(
        spec: &PafSpec,
        capacity_kb: u64,
        seed: u64,
        threads_total: u64,
        shape: TreeShape,
    ) -> Result<Plan> {
        if spec.sizes.is_empty() {
            return Err(BenchError::Usage(format!(
                "{spec}: a PaF run needs a file size (add @SIZE, as in PAF:70.30@264M)"
            )));
        }
        if threads_total == 0 {
            return Err(BenchError::Usage("at least one thread is needed".into()));
        }
        if shape.maxd == 0 || shape.maxb == 0 {
            return Err(BenchError::Usage(
                "--maxd and --maxb must be at least 1".into(),
            ));
        }
        if threads_total > shape.maxd || threads_total > 26u64.pow(GTN_LETTERS) {
            return Err(BenchError::Usage(format!(
                "{threads_total} threads would put more than MAXD={} thread directories in \
                 one directory; use fewer threads or a larger --maxd",
                shape.maxd
            )));
        }
        if shape.maxb.div_ceil(shape.maxd) > shape.maxd {
            return Err(BenchError::Usage(format!(
                "MAXB={} needs more than MAXD={} leaf directories per branch",
                shape.maxb, shape.maxd
            )));
        }
        let capacity_bytes = capacity_kb.saturating_mul(1024);
        let mut gens = Vec::with_capacity(spec.generations.len());
        for (i, g) in spec.generations.iter().enumerate() {
            let file_size = spec.size_of(i).unwrap_or(1).max(1);
            let target_bytes = (capacity_bytes as u128 * g.capacity_pct as u128 / 100) as u64;
            gens.push(GenPlan {
                index: i,
                capacity_pct: g.capacity_pct,
                frag_pct: g.frag_pct,
                file_size,
                target_bytes,
                files: target_bytes / file_size,
            });
        }
        let plan = Plan {
            spec: spec.clone(),
            capacity_kb,
            seed,
            threads_total,
            shape,
            gens,
        };
        let per_thread_max = (0..plan.gens.len())
            .map(|g| plan.files_of(g, 0))
            .sum::<u64>();
        if per_thread_max.div_ceil(shape.maxb) > shape.maxd {
            return Err(BenchError::Usage(format!(
                "each thread writes up to {per_thread_max} files, more than MAXD×MAXB = {}; \
                 use more threads, larger files or a larger --maxb",
                shape.maxd * shape.maxb
            )));
        }
        if per_thread_max >= 10u64.pow(SEQ_DIGITS as u32) {
            return Err(BenchError::Usage("too many files per thread".into()));
        }
        Ok(plan)
    }

    /// Files thread `gtn` writes in generation `generation` (files go round-robin over threads).
    pub fn files_of(&self, generation: usize, gtn: u64) -> u64 {
        let m = self.gens[generation].files;
        let t = self.threads_total;
        m / t + u64::from(gtn < m % t)
    }

    /// First sequence number of thread `gtn` in generation `generation` (1-based).
    pub fn seq_start(&self, generation: usize, gtn: u64) -> u64 {
        1 + (0..generation).map(|g| self.files_of(g, gtn)).sum::<u64>()
    }

    /// Files thread `gtn` removes in generation `generation`: its share rounded to the nearest file.
    pub fn removals_of(&self, generation: usize, gtn: u64) -> u64 {
        let n = self.files_of(generation, gtn) as u128;
        ((n * self.gens[generation].frag_pct as u128 + 50) / 100) as u64
    }

    /// The sequence numbers thread `gtn` removes in generation `generation`, in increasing order.
    /// Selection sampling (Knuth's Algorithm S) picks exactly `removals_of` of the thread's
    /// files, uniformly, from a generator seeded by (seed, generation, gtn): same inputs, same set,
    /// constant memory.
    pub fn removal_seqs(&self, generation: usize, gtn: u64) -> RemovalSeqs {
        let n = self.files_of(generation, gtn);
        RemovalSeqs {
            rng: ChaCha8Rng::seed_from_u64(mix_seed(self.seed, generation as u64, gtn)),
            first: self.seq_start(generation, gtn),
            i: 0,
            n,
            left: self.removals_of(generation, gtn),
        }
    }

    /// Every planned file, in (generation, gtn, seq) order.
    pub fn files(&self) -> impl Iterator<Item = PlannedFile> + '_ {
        (0..self.gens.len()).flat_map(move |generation| {
            (0..self.threads_total).flat_map(move |gtn| {
                let first = self.seq_start(generation, gtn);
                let size = self.gens[generation].file_size;
                (first..first + self.files_of(generation, gtn)).map(move |seq| PlannedFile {
                    generation,
                    gtn,
                    seq,
                    size,
                })
            })
        })
    }

    /// The branch/leaf directory holding file `seq` of thread `gtn`.
    pub fn dir_of(&self, root: &Path, gtn: u64, seq: u64) -> PathBuf {
        let idx = seq - 1;
        let branch = idx / self.shape.maxb;
        let leaf = (idx % self.shape.maxb) / self.shape.maxd;
        root.join(TREE_DIR)
            .join(gtn_name(gtn))
            .join(format!("b{branch:05}"))
            .join(format!("d{leaf:05}"))
    }

    /// File name of file `seq` of thread `gtn`: `AAAA00000000001`.
    pub fn file_name(gtn: u64, seq: u64) -> String {
        format!("{}{seq:0width$}", gtn_name(gtn), width = SEQ_DIGITS)
    }

    /// Full path of file `seq` of thread `gtn`.
    pub fn path_of(&self, root: &Path, gtn: u64, seq: u64) -> PathBuf {
        self.dir_of(root, gtn, seq).join(Self::file_name(gtn, seq))
    }

    /// Bytes of the capacity (`<N` × 1024).
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_kb.saturating_mul(1024)
    }
}

/// Iterator over the sequence numbers one thread removes in one generation.
pub struct RemovalSeqs {
    rng: ChaCha8Rng,
    first: u64,
    i: u64,
    n: u64,
    left: u64,
}

impl Iterator for RemovalSeqs {
    type Item = u64;
    fn next(&mut self) -> Option<u64> {
        while self.left > 0 && self.i < self.n {
            let remaining = self.n - self.i;
            let pick = self.rng.gen_range(0..remaining) < self.left;
            let seq = self.first + self.i;
            self.i += 1;
            if pick {
                self.left -= 1;
                return Some(seq);
            }
        }
        None
    }
}

/// SplitMix64 finaliser over the inputs: independent streams per (seed, generation, thread).
pub fn mix_seed(seed: u64, a: u64, b: u64) -> u64 {
    let mut z =
        seed ^ a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(spec: &str, seed: u64, threads: u64) -> Plan {
        let s = PafSpec::parse(spec).expect("spec");
        let cap = s.capacity_kb.expect("capacity");
        Plan::new(&s, cap, seed, threads, TreeShape { maxd: 10, maxb: 25 }).expect("plan")
    }

    #[test]
    fn names() {
        assert_eq!(gtn_name(0), "AAAA");
        assert_eq!(gtn_name(1), "AAAB");
        assert_eq!(gtn_name(2), "AAAC");
        assert_eq!(gtn_name(26), "AABA");
        assert_eq!(Plan::file_name(0, 1), "AAAA00000000001");
        assert!(is_paf_name("AAAA00000000001"));
        assert!(is_paf_name("AAAB"));
        assert!(is_paf_name("b00012"));
        assert!(is_paf_name("d00000"));
        assert!(!is_paf_name("notes.txt"));
        assert!(!is_paf_name("AAAA0000000001"));
    }

    #[test]
    fn counts_add_up() {
        // 1000 KiB capacity: generation 1 writes 70 % in 8 KiB files, generation 2 20 % in 4 KiB files.
        let p = plan("PAF:70.30,20.40:67005@8K,4K<1000", 1, 3);
        assert_eq!(p.gens[0].files, 700 * 1024 / 8192);
        assert_eq!(p.gens[1].files, 200 * 1024 / 4096);
        for g in 0..2 {
            let total: u64 = (0..3).map(|t| p.files_of(g, t)).sum();
            assert_eq!(total, p.gens[g].files);
            for t in 0..3 {
                let r: Vec<u64> = p.removal_seqs(g, t).collect();
                assert_eq!(r.len() as u64, p.removals_of(g, t));
                let first = p.seq_start(g, t);
                assert!(r.windows(2).all(|w| w[0] < w[1]));
                assert!(
                    r.iter()
                        .all(|s| *s >= first && *s < first + p.files_of(g, t))
                );
            }
        }
        assert_eq!(p.seq_start(1, 0), 1 + p.files_of(0, 0));
        assert_eq!(p.files().count() as u64, p.gens[0].files + p.gens[1].files);
    }

    #[test]
    fn same_seed_same_removals_other_seed_differs() {
        let a = plan("PAF:50.50@4K<4000", 42, 2);
        let b = plan("PAF:50.50@4K<4000", 42, 2);
        let c = plan("PAF:50.50@4K<4000", 43, 2);
        let ra: Vec<u64> = a.removal_seqs(0, 1).collect();
        assert_eq!(ra, b.removal_seqs(0, 1).collect::<Vec<_>>());
        assert_ne!(ra, c.removal_seqs(0, 1).collect::<Vec<_>>());
    }

    #[test]
    fn tree_respects_maxd_and_maxb() {
        let p = plan("PAF:90.00@1K<100", 1, 1);
        let root = Path::new("/r");
        assert_eq!(
            p.path_of(root, 0, 1),
            Path::new("/r/paf/AAAA/b00000/d00000/AAAA00000000001")
        );
        assert_eq!(
            p.dir_of(root, 0, 10),
            Path::new("/r/paf/AAAA/b00000/d00000")
        );
        assert_eq!(
            p.dir_of(root, 0, 11),
            Path::new("/r/paf/AAAA/b00000/d00001")
        );
        assert_eq!(
            p.dir_of(root, 0, 26),
            Path::new("/r/paf/AAAA/b00001/d00000")
        );
        let mut per_dir = std::collections::HashMap::new();
        for f in p.files() {
            *per_dir.entry(p.dir_of(root, f.gtn, f.seq)).or_insert(0u64) += 1;
        }
        assert!(per_dir.values().all(|&n| n <= 10));
    }

    #[test]
    fn shape_limits_are_checked() {
        let s = PafSpec::parse("PAF:90.00@1K<100000").expect("spec");
        let e = Plan::new(&s, 100_000, 1, 1, TreeShape { maxd: 10, maxb: 25 })
            .expect_err("too many files");
        assert!(e.to_string().contains("MAXD×MAXB"), "{e}");
        let s = PafSpec::parse("PAF:90.00").expect("label");
        assert!(Plan::new(&s, 1000, 1, 1, TreeShape::default()).is_err());
    }
}
