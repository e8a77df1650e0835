//! Shards a degraded erasure-coded read fetched or decoded, kept a moment for the reads
//! that follow it. Decoding one lost stripe of a RAID set reads the same range of every
//! other stripe of the set and of its parity; a sequential reader then asks for those
//! very ranges (the next stripes of the row) or needs them again (the next lost stripe of
//! the row). Kept here, they are not read twice: a read with an OST down then costs about
//! one row's worth of reads per row, as a healthy one does.
//!
//! Bounded by [`EC_SHARDS_BYTES`], oldest out first; an entry is used only while its
//! file's change count is the one it was read at (this client's writes and other
//! clients' changes, as for readahead).

use bytes::Bytes;
use nacre_core::Fid;
use parking_lot::Mutex;
use std::collections::VecDeque;

/// Bytes of shards kept: a few rows of a wide set of 1 MiB stripes.
pub const EC_SHARDS_BYTES: usize = 16 << 20;

struct Entry {
    file: Fid,
    obj: Fid,
    /// Object offset of `data`.
    start: u64,
    data: Bytes,
    /// The file's change count when read.
    changes: u64,
}

#[derive(Default)]
pub struct ShardCache {
    entries: Mutex<(VecDeque<Entry>, usize)>,
}

impl ShardCache {
    /// Keeps `data`, object `obj`'s bytes from `start` (zero-padded past its end), read
    /// for `file` at change count `changes`.
    pub fn put(&self, file: Fid, obj: Fid, start: u64, data: Bytes, changes: u64) {
        if data.is_empty() || data.len() > EC_SHARDS_BYTES {
            return;
        }
        let mut g = self.entries.lock();
        let (q, bytes) = &mut *g;
        q.retain(|e| !(e.obj == obj && e.start == start));
        *bytes = q.iter().map(|e| e.data.len()).sum();
        while *bytes + data.len() > EC_SHARDS_BYTES {
            match q.pop_front() {
                Some(e) => *bytes -= e.data.len(),
                None => break,
            }
        }
        *bytes += data.len();
        q.push_back(Entry {
            file,
            obj,
            start,
            data,
            changes,
        });
        debug_assert!(*bytes <= EC_SHARDS_BYTES);
    }

    /// `[start, start + len)` of object `obj`, if kept for `file` at change count
    /// `changes` (zero-padded past the object's end, as it was put).
    pub fn get(&self, file: Fid, obj: Fid, start: u64, len: u64, changes: u64) -> Option<Bytes> {
        let g = self.entries.lock();
        g.0.iter().rev().find_map(|e| {
            let end = e.start + e.data.len() as u64;
            (e.file == file
                && e.obj == obj
                && e.changes == changes
                && e.start <= start
                && start + len <= end)
                .then(|| {
                    let s = (start - e.start) as usize;
                    e.data.slice(s..s + len as usize)
                })
        })
    }

    /// Bytes kept.
    pub fn bytes(&self) -> usize {
        self.entries.lock().1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fid(n: u32) -> Fid {
        Fid::new(0x2_0000_0400, n, 0)
    }

    #[test]
    fn a_kept_range_serves_reads_inside_it_until_its_file_changes() {
        let c = ShardCache::default();
        let data = Bytes::from((0..=255u8).cycle().take(8192).collect::<Vec<u8>>());
        c.put(fid(1), fid(10), 4096, data.clone(), 7);
        assert_eq!(c.get(fid(1), fid(10), 4096, 8192, 7), Some(data.clone()));
        assert_eq!(
            c.get(fid(1), fid(10), 8192, 100, 7),
            Some(data.slice(4096..4196))
        );
        // Outside it, another object, another file, or after a change: not kept.
        assert_eq!(c.get(fid(1), fid(10), 0, 4096, 7), None);
        assert_eq!(c.get(fid(1), fid(10), 8192, 8192, 7), None);
        assert_eq!(c.get(fid(1), fid(11), 4096, 100, 7), None);
        assert_eq!(c.get(fid(2), fid(10), 4096, 100, 7), None);
        assert_eq!(c.get(fid(1), fid(10), 4096, 100, 8), None);
    }

    #[test]
    fn the_oldest_go_first_and_the_bound_holds() {
        let c = ShardCache::default();
        let mib = Bytes::from(vec![1u8; 1 << 20]);
        let n = EC_SHARDS_BYTES / (1 << 20);
        for i in 0..(n as u32 + 3) {
            c.put(fid(1), fid(100 + i), 0, mib.clone(), 0);
            assert!(c.bytes() <= EC_SHARDS_BYTES);
        }
        assert_eq!(c.get(fid(1), fid(100), 0, 1, 0), None, "the oldest stayed");
        assert!(c.get(fid(1), fid(100 + n as u32 + 2), 0, 1, 0).is_some());
        // The same range put again replaces, not doubles.
        c.put(fid(1), fid(100 + n as u32 + 2), 0, mib.clone(), 0);
        assert_eq!(c.bytes(), EC_SHARDS_BYTES);
    }
}
