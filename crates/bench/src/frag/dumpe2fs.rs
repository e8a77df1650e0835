//! Reads `dumpe2fs` output and summarises it as the seed's eval_dumpe2fs did: totals, block
//! groups by how many free inodes (and free blocks) they have left, and the free-extent size
//! histogram in e2freefrag's format.
//!
//! The parser streams: it keeps one line and a few counters, so a 400 MB dump of a large OST
//! runs in bounded memory. Free ranges that continue across a group boundary merge into one
//! extent, as e2freefrag's scan of the whole bitmap does.

use std::io::{self, BufRead, Write};

use serde::Serialize;

use crate::error::{BenchError, Result};

/// Longest line accepted: a group of 32768 blocks lists at most 16384 ranges.
pub const MAX_LINE: usize = 8 << 20;
/// e2freefrag's MAX_HIST: histogram buckets by power of two.
pub const MAX_HIST: usize = 32;
/// One past the largest block number ext4 addresses (48-bit block numbers). Block numbers
/// and per-group counts at or above it are not dumpe2fs output, and with every free range
/// below it and in order, lengths and sums cannot overflow.
pub const MAX_BLOCK: u64 = 1 << 48;

/// Free extents by size, as e2freefrag counts them.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FreeExtentHistogram {
    /// Extents per bucket; bucket `i` holds lengths in `[2^(i-1), 2^i)` blocks.
    pub extents: Vec<u64>,
    /// Free blocks per bucket.
    pub blocks: Vec<u64>,
    pub count: u64,
    pub total_blocks: u64,
    pub min_blocks: u64,
    pub max_blocks: u64,
}

impl Default for FreeExtentHistogram {
    fn default() -> Self {
        FreeExtentHistogram {
            extents: vec![0; MAX_HIST],
            blocks: vec![0; MAX_HIST],
            count: 0,
            total_blocks: 0,
            min_blocks: 0,
            max_blocks: 0,
        }
    }
}

impl FreeExtentHistogram {
    /// Counts one free extent of `len` blocks.
    pub fn add(&mut self, len: u64) {
        if len == 0 {
            return;
        }
        let idx = ((63 - len.leading_zeros()) as usize + 1).min(MAX_HIST - 1);
        self.extents[idx] += 1;
        self.blocks[idx] += len;
        if self.count == 0 || len < self.min_blocks {
            self.min_blocks = len;
        }
        self.max_blocks = self.max_blocks.max(len);
        self.count += 1;
        self.total_blocks += len;
    }

    /// The `Min. free extent` … histogram lines exactly as e2freefrag prints them.
    /// `sb_free_blocks` is the superblock's free count (the percentages' base).
    pub fn render(
        &self,
        block_size: u64,
        sb_free_blocks: u64,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let scale = block_size >> 10;
        // e2freefrag's integer arithmetic: the average in blocks, then scaled.
        let (min, max, avg) = match self.total_blocks.checked_div(self.count) {
            Some(avg) => (
                self.min_blocks * scale,
                self.max_blocks * scale,
                avg * scale,
            ),
            None => (0, 0, 0),
        };
        write!(
            out,
            "\nMin. free extent: {min} KB \nMax. free extent: {max} KB\nAvg. free extent: {avg} KB\n"
        )?;
        writeln!(out, "Num. free extent: {}", self.count)?;
        writeln!(out, "\nHISTOGRAM OF FREE EXTENT SIZES:")?;
        writeln!(
            out,
            "Extent Size Range :  {:>12}  {:>12}  {:>7}",
            "Free extents", "Free Blocks", "Percent"
        )?;
        let bits = 63 - block_size.max(1024).leading_zeros() as i64;
        let units_names = b"KMGTPEZY";
        let mut unit = 0usize;
        let mut units = 10i64;
        let mut start: u64 = 0;
        for i in 0..MAX_HIST {
            let shift = i as i64 + bits - units;
            let end: u64 = if shift >= 0 { 1u64 << shift } else { 0 };
            let u = units_names.get(unit).copied().unwrap_or(b'?') as char;
            if self.extents[i] != 0 {
                let end_str = if i == MAX_HIST - 1 {
                    "max ".to_string()
                } else {
                    format!("{end:5}{u}-")
                };
                let pct = if sb_free_blocks > 0 {
                    self.blocks[i] as f64 * 100.0 / sb_free_blocks as f64
                } else {
                    0.0
                };
                writeln!(
                    out,
                    "{start:5}{u}...{end_str:>7}  :  {:12}  {:12}  {pct:6.2}%",
                    self.extents[i], self.blocks[i]
                )?;
            }
            start = end;
            if start == 1 << 10 {
                start = 1;
                units += 10;
                unit += 1;
            }
        }
        Ok(())
    }
}

/// Block groups by the fraction of something (inodes or blocks) they have free.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct GroupClasses {
    /// More than 1/2 free.
    pub many: u64,
    /// From 1/4 to 1/2.
    pub enough: u64,
    /// From 1/8 to 1/4.
    pub few: u64,
    /// From 1/16 to 1/8.
    pub very_few: u64,
    /// Some, under 1/16.
    pub really_few: u64,
    /// None at all.
    pub none: u64,
}

impl GroupClasses {
    fn add(&mut self, free: u64, total: u64) {
        // Compare free/total with the thresholds in integers: free × 16 against total × k.
        let f = free as u128 * 16;
        let t = total.max(1) as u128;
        if free == 0 {
            self.none += 1;
        } else if f > t * 8 {
            self.many += 1;
        } else if f >= t * 4 {
            self.enough += 1;
        } else if f >= t * 2 {
            self.few += 1;
        } else if f >= t {
            self.very_few += 1;
        } else {
            self.really_few += 1;
        }
    }

    pub fn total(&self) -> u64 {
        self.many + self.enough + self.few + self.very_few + self.really_few + self.none
    }
}

/// What a dumpe2fs output says.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct DumpSummary {
    pub block_count: u64,
    pub free_blocks: u64,
    pub inode_count: u64,
    pub free_inodes: u64,
    pub block_size: u64,
    pub blocks_per_group: u64,
    pub inodes_per_group: u64,
    pub groups: u64,
    /// Sums of the per-group counts (they can differ from the superblock on a live system).
    pub group_free_blocks: u64,
    pub group_free_inodes: u64,
    pub inode_classes: GroupClasses,
    pub block_classes: GroupClasses,
    pub free_extents: FreeExtentHistogram,
}

#[derive(Default)]
struct Group {
    first: u64,
    last: u64,
    free_blocks: Option<u64>,
    free_inodes: Option<u64>,
}

fn leading_u64(s: &str) -> Option<u64> {
    let t = s.trim_start();
    let end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    t[..end].parse().ok()
}

struct Parser {
    sum: DumpSummary,
    group: Option<Group>,
    pending: Option<(u64, u64)>,
    /// End of the last free range seen: the next must start after it.
    last_free: Option<u64>,
}

impl Parser {
    fn finish_group(&mut self) -> std::result::Result<(), String> {
        if let Some(g) = self.group.take() {
            self.sum.groups += 1;
            let blocks = if g.last >= g.first {
                g.last - g.first + 1
            } else {
                self.sum.blocks_per_group
            };
            if let Some(fb) = g.free_blocks {
                self.sum.group_free_blocks = self
                    .sum
                    .group_free_blocks
                    .checked_add(fb)
                    .ok_or("the groups' free blocks add up past 2^64")?;
                self.sum.block_classes.add(fb, blocks);
            }
            if let Some(fi) = g.free_inodes {
                self.sum.group_free_inodes = self
                    .sum
                    .group_free_inodes
                    .checked_add(fi)
                    .ok_or("the groups' free inodes add up past 2^64")?;
                self.sum.inode_classes.add(fi, self.sum.inodes_per_group);
            }
        }
        Ok(())
    }

    fn free_range(&mut self, a: u64, b: u64) {
        match self.pending {
            Some((s, e)) if a == e + 1 => self.pending = Some((s, b)),
            Some((s, e)) => {
                self.sum.free_extents.add(e - s + 1);
                self.pending = Some((a, b));
            }
            None => self.pending = Some((a, b)),
        }
    }

    fn line(&mut self, line: &str) -> std::result::Result<(), String> {
        // "Group 12: (Blocks …)", not the header's "Group descriptor size:".
        if let Some(rest) = line
            .strip_prefix("Group ")
            .filter(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        {
            self.finish_group()?;
            let mut g = Group::default();
            if let Some(i) = rest.find("(Blocks ") {
                let r = &rest[i + 8..];
                let first = leading_u64(r);
                let last = r.find('-').and_then(|j| leading_u64(&r[j + 1..]));
                if let (Some(f), Some(l)) = (first, last) {
                    if l >= MAX_BLOCK {
                        return Err(format!("group ends at block {l}, past ext4's last"));
                    }
                    g.first = f;
                    g.last = l;
                }
            }
            self.group = Some(g);
            return Ok(());
        }
        if line.starts_with(' ') || line.starts_with('\t') {
            let t = line.trim_start();
            if let Some(ranges) = t.strip_prefix("Free blocks:") {
                for part in ranges.split(',') {
                    let part = part.trim();
                    if part.is_empty() {
                        continue;
                    }
                    let (a, b) = match part.split_once('-') {
                        Some((a, b)) => (a.trim().parse::<u64>(), b.trim().parse::<u64>()),
                        None => (part.parse::<u64>(), part.parse::<u64>()),
                    };
                    match (a, b) {
                        (Ok(a), Ok(b))
                            if b >= a && b < MAX_BLOCK && self.last_free.is_none_or(|e| a > e) =>
                        {
                            self.last_free = Some(b);
                            self.free_range(a, b)
                        }
                        _ => return Err(format!("bad free block range {part:?}")),
                    }
                }
            } else if t.contains(" free blocks, ")
                && t.contains(" free inodes")
                && let Some(g) = self.group.as_mut()
            {
                g.free_blocks = leading_u64(t);
                g.free_inodes = t
                    .split_once(" free blocks, ")
                    .and_then(|(_, r)| leading_u64(r));
                if g.free_blocks.is_some_and(|n| n >= MAX_BLOCK) {
                    return Err(format!("{t:?}: more free blocks than ext4 has"));
                }
            }
            return Ok(());
        }
        if self.group.is_none()
            && let Some((k, v)) = line.split_once(':')
        {
            let v = leading_u64(v);
            match (k.trim(), v) {
                ("Block count", Some(v)) => self.sum.block_count = v,
                ("Free blocks", Some(v)) => self.sum.free_blocks = v,
                ("Inode count", Some(v)) => self.sum.inode_count = v,
                ("Free inodes", Some(v)) => self.sum.free_inodes = v,
                ("Block size", Some(v)) => self.sum.block_size = v,
                ("Blocks per group", Some(v)) => self.sum.blocks_per_group = v,
                ("Inodes per group", Some(v)) => self.sum.inodes_per_group = v,
                _ => {}
            }
        }
        Ok(())
    }
}

/// Parses dumpe2fs output from `input` (`name` is used in error messages).
pub fn parse(mut input: impl BufRead, name: &str) -> Result<DumpSummary> {
    let mut p = Parser {
        sum: DumpSummary::default(),
        group: None,
        pending: None,
        last_free: None,
    };
    let mut buf = Vec::with_capacity(4096);
    let mut lineno = 0u64;
    loop {
        buf.clear();
        let n = io::Read::take(&mut input, MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| BenchError::Parse {
                path: name.to_string(),
                line: lineno + 1,
                msg: e.to_string(),
            })?;
        if n == 0 {
            break;
        }
        lineno += 1;
        if buf.len() > MAX_LINE {
            return Err(BenchError::Parse {
                path: name.to_string(),
                line: lineno,
                msg: format!("line longer than {MAX_LINE} bytes"),
            });
        }
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim_end_matches(['\n', '\r']);
        p.line(line).map_err(|msg| BenchError::Parse {
            path: name.to_string(),
            line: lineno,
            msg,
        })?;
    }
    p.finish_group().map_err(|msg| BenchError::Parse {
        path: name.to_string(),
        line: lineno,
        msg,
    })?;
    if let Some((s, e)) = p.pending.take() {
        p.sum.free_extents.add(e - s + 1);
    }
    if p.sum.block_count == 0 && p.sum.groups == 0 {
        return Err(BenchError::Parse {
            path: name.to_string(),
            line: lineno,
            msg: "no dumpe2fs header or block groups found".into(),
        });
    }
    Ok(p.sum)
}

fn classes(out: &mut dyn Write, c: &GroupClasses, what: &str) -> io::Result<()> {
    writeln!(
        out,
        "{} block groups with many (> 50%) free {what},",
        c.many
    )?;
    writeln!(
        out,
        "{} block groups with enough (< 1/2) free {what},",
        c.enough
    )?;
    writeln!(out, "{} block groups with few (< 1/4) free {what},", c.few)?;
    writeln!(
        out,
        "{} block groups with very few (< 1/8) free {what},",
        c.very_few
    )?;
    writeln!(
        out,
        "{} block groups with *really* few (< 1/16) free {what},",
        c.really_few
    )?;
    writeln!(out, "{} block groups with no free {what}.", c.none)
}

/// Prints the summary as text: the seed's eval_dumpe2fs lines, then e2freefrag's.
pub fn print_text(s: &DumpSummary, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "Summary: {} blocks ({} free), {} inodes ({} free)",
        s.block_count, s.free_blocks, s.inode_count, s.free_inodes
    )?;
    writeln!(
        out,
        "{} block groups with {} blocks and {} inodes each:\n",
        s.groups, s.blocks_per_group, s.inodes_per_group
    )?;
    classes(out, &s.inode_classes, "inodes")?;
    writeln!(out)?;
    classes(out, &s.block_classes, "blocks")?;
    if s.group_free_blocks != s.free_blocks || s.group_free_inodes != s.free_inodes {
        writeln!(
            out,
            "\nnote: block groups add up to {} free blocks and {} free inodes (the superblock \
             says {} and {}; expected on a mounted, busy file system)",
            s.group_free_blocks, s.group_free_inodes, s.free_blocks, s.free_inodes
        )?;
    }
    writeln!(out, "\nFree space fragmentation (as e2freefrag):")?;
    writeln!(out, "Blocksize: {} bytes", s.block_size)?;
    writeln!(out, "Total blocks: {}", s.block_count)?;
    writeln!(
        out,
        "Free blocks: {} ({:.1}%)",
        s.free_blocks,
        if s.block_count > 0 {
            s.free_blocks as f64 * 100.0 / s.block_count as f64
        } else {
            0.0
        }
    )?;
    s.free_extents.render(s.block_size, s.free_blocks, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
Inode count:              256
Group descriptor size:    64
Block count:              8192
Free blocks:              2900
Free inodes:              225
Block size:               1024
Blocks per group:         1024
Inodes per group:         32

Group 0: (Blocks 1-1024) csum 0x7860
  Primary superblock at 1, Group descriptors at 2-2
  314 free blocks, 10 free inodes, 2 directories
  Free blocks: 353-359, 429-504, 588-676, 773-875, 986-1024
  Free inodes: 12, 14
Group 1: (Blocks 1025-2048) csum 0x65d0
  0 free blocks, 0 free inodes, 0 directories, 13 unused inodes
  Free blocks: 
  Free inodes: 
Group 2: (Blocks 2049-3072) csum 0x4305 [INODE_UNINIT]
  125 free blocks, 32 free inodes, 0 directories, 32 unused inodes
  Free blocks: 2948-3072
  Free inodes: 65-96
Group 3: (Blocks 3073-4096) csum 0x25da [INODE_UNINIT]
  3 free blocks, 1 free inodes, 0 directories, 32 unused inodes
  Free blocks: 3073-3074, 3090
  Free inodes: 97
";

    /// A header and one group, then `tail`.
    fn with_group(tail: &str) -> String {
        format!("Block count: 8192\nBlocks per group: 1024\nGroup 0: (Blocks 1-1024)\n{tail}")
    }

    #[test]
    fn a_free_range_past_ext4s_last_block_is_refused() {
        // Found by the fuzzer: the end of the range wrapped when the next one was joined
        // to it, and its length wrapped to 0 blocks.
        for tail in [
            "  Free blocks: 0-18446744073709551615, 0-5\n",
            "  Free blocks: 0-18446744073709551615\n",
            "  Free blocks: 281474976710656\n",
        ] {
            let r = parse(with_group(tail).as_bytes(), "t");
            assert!(r.is_err(), "{tail:?} gave {r:?}");
        }
    }

    #[test]
    fn free_ranges_out_of_order_are_refused() {
        // dumpe2fs lists free blocks in increasing order; ranges that go back or overlap
        // would count blocks twice.
        let r = parse(with_group("  Free blocks: 5-10, 3-4\n").as_bytes(), "t");
        assert!(r.is_err(), "{r:?}");
        let r = parse(with_group("  Free blocks: 5-10, 10-12\n").as_bytes(), "t");
        assert!(r.is_err(), "{r:?}");
    }

    #[test]
    fn group_block_ranges_and_counts_past_ext4s_limits_are_refused() {
        let huge = "18446744073709551615";
        for text in [
            format!("Block count: 1\nGroup 0: (Blocks 0-{huge})\n  1 free blocks, 1 free inodes\n"),
            format!(
                "Block count: 1\nGroup 0: (Blocks 0-9)\n  {huge} free blocks, 1 free inodes\n\
                 Group 1: (Blocks 10-19)\n  {huge} free blocks, 1 free inodes\n"
            ),
            format!(
                "Block count: 1\nGroup 0: (Blocks 0-9)\n  1 free blocks, {huge} free inodes\n\
                 Group 1: (Blocks 10-19)\n  1 free blocks, {huge} free inodes\n"
            ),
        ] {
            let r = parse(text.as_bytes(), "t");
            assert!(r.is_err(), "{text:?} gave {r:?}");
        }
    }

    #[test]
    fn parses_and_merges_across_groups() {
        let s = parse(SAMPLE.as_bytes(), "sample").expect("parse");
        assert_eq!(s.block_count, 8192);
        assert_eq!(s.groups, 4);
        assert_eq!(s.group_free_blocks, 314 + 125 + 3);
        // 7, 76, 89, 103, 39, then 2948-3072 and 3073-3074 join into 127, then 1.
        assert_eq!(s.free_extents.count, 7);
        assert_eq!(s.free_extents.min_blocks, 1);
        assert_eq!(s.free_extents.max_blocks, 127);
        assert_eq!(
            s.free_extents.total_blocks,
            7 + 76 + 89 + 103 + 39 + 127 + 1
        );
        // Inodes: 10/32 enough, 0/32 none, 32/32 many, 1/32 really few.
        assert_eq!(
            s.inode_classes,
            GroupClasses {
                many: 1,
                enough: 1,
                few: 0,
                very_few: 0,
                really_few: 1,
                none: 1
            }
        );
        assert_eq!(s.inode_classes.total(), 4);
    }

    #[test]
    fn histogram_labels_follow_e2freefrag() {
        let mut h = FreeExtentHistogram::default();
        for len in [7u64, 40, 100, 200, 1] {
            h.add(len);
        }
        let mut out = Vec::new();
        h.render(4096, 348, &mut out).expect("render");
        let text = String::from_utf8(out).expect("utf8");
        assert!(
            text.contains("    4K...    8K-  :             1             1    0.29%"),
            "{text}"
        );
        assert!(
            text.contains("   16K...   32K-  :             1             7    2.01%"),
            "{text}"
        );
        assert!(
            text.contains("  512K... 1024K-  :             1           200   57.47%"),
            "{text}"
        );
        assert!(
            text.contains("Min. free extent: 4 KB \nMax. free extent: 800 KB"),
            "{text}"
        );
    }

    #[test]
    fn classes_thresholds() {
        let mut c = GroupClasses::default();
        for free in [17u64, 16, 8, 7, 4, 3, 2, 1, 0] {
            c.add(free, 32);
        }
        assert_eq!(
            c,
            GroupClasses {
                many: 1,
                enough: 2,
                few: 2,
                very_few: 2,
                really_few: 1,
                none: 1
            }
        );
    }

    #[test]
    fn garbage_is_rejected() {
        assert!(parse("hello\nworld\n".as_bytes(), "x").is_err());
        let bad = "Block count: 10\nGroup 0: (Blocks 0-9)\n  Free blocks: 5-x\n";
        let e = parse(bad.as_bytes(), "bad.txt").expect_err("bad range");
        assert!(e.to_string().starts_with("bad.txt:3:"), "{e}");
    }
}
