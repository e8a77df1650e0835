//! Object ranges an erasure-coded read fetched or decoded, shared with the reads around
//! it. Decoding one lost stripe of a RAID set reads the same range of every other stripe
//! of the set and of its parity; a sequential reader's other reads (the rest of the row,
//! fetched side by side by readahead) ask for those very ranges, and the decode of a
//! second lost stripe of the row needs them again. Each range is read once while kept: a
//! read finds the range already fetched, or in flight and joins it. (Measured with two
//! OSTs of a 4+2 file stopped, `nacre bench protection`: 0.45x of a healthy read with
//! checksums, 0.51x without.)
//!
//! Bounded by [`EC_SHARDS_BYTES`] of ranges, oldest out first; a range is used only while
//! its file's change count is the one it was read at (this client's writes and other
//! clients' changes, as for readahead). A failed read is not kept: the next one tries
//! again.

use crate::cksum::ChunkReadError;
use bytes::Bytes;
use nacre_core::Fid;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::OnceCell;

/// Bytes of ranges kept: a few rows of a wide set of 1 MiB stripes.
pub const EC_SHARDS_BYTES: u64 = 16 << 20;

/// A range as read: its bytes (short at the object's end), or why not.
pub type Read = Result<Bytes, ChunkReadError>;

/// One range's read, done or in flight.
pub type Slot = Arc<OnceCell<Read>>;

/// A range of an object of a file, at the file's change count when read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    pub file: Fid,
    pub obj: Fid,
    pub off: u64,
    pub len: u64,
    pub changes: u64,
}

#[derive(Default)]
pub struct ShardCache {
    /// (key, slot), oldest first, and the bytes the keys span.
    entries: Mutex<(VecDeque<(Key, Slot)>, u64)>,
}

impl ShardCache {
    /// The read of range `key`: the one kept or in flight, else a new one for the caller
    /// to make.
    pub fn slot(&self, key: Key) -> Slot {
        let mut g = self.entries.lock();
        let (q, bytes) = &mut *g;
        if let Some((_, s)) = q.iter().find(|(k, _)| *k == key) {
            return s.clone();
        }
        let slot = Slot::default();
        if key.len > EC_SHARDS_BYTES {
            return slot;
        }
        while *bytes + key.len > EC_SHARDS_BYTES {
            match q.pop_front() {
                Some((k, _)) => *bytes -= k.len,
                None => break,
            }
        }
        *bytes += key.len;
        q.push_back((key, slot.clone()));
        slot
    }

    /// Fills the slot of range `key` with `read` (a decode's result) unless it holds one.
    pub fn put(&self, key: Key, read: Read) {
        let _ = self.slot(key).set(read);
    }

    /// Drops the slot of a range whose read failed, so the next read tries again.
    pub fn forget(&self, key: Key) {
        let mut g = self.entries.lock();
        let (q, bytes) = &mut *g;
        if let Some(i) = q.iter().position(|(k, _)| *k == key) {
            q.remove(i);
            *bytes -= key.len;
        }
    }

    /// Bytes the kept ranges span.
    pub fn bytes(&self) -> u64 {
        self.entries.lock().1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nacre_core::Errno;

    fn fid(n: u32) -> Fid {
        Fid::new(0x2_0000_0400, n, 0)
    }

    fn key(file: u32, obj: u32, off: u64, len: u64, changes: u64) -> Key {
        Key {
            file: fid(file),
            obj: fid(obj),
            off,
            len,
            changes,
        }
    }

    #[tokio::test]
    async fn a_range_is_read_once_until_its_file_changes() {
        let c = ShardCache::default();
        let reads = std::sync::atomic::AtomicU32::new(0);
        let read = || async {
            reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(Bytes::from_static(b"shard"))
        };
        let a = c.slot(key(1, 10, 0, 4096, 7));
        let b = c.slot(key(1, 10, 0, 4096, 7));
        let (x, y) = tokio::join!(a.get_or_init(read), b.get_or_init(read));
        assert_eq!(x, y);
        assert_eq!(reads.load(std::sync::atomic::Ordering::Relaxed), 1);
        // Another range, object, file or change count is another read.
        for s in [
            c.slot(key(1, 10, 4096, 4096, 7)),
            c.slot(key(1, 11, 0, 4096, 7)),
            c.slot(key(2, 10, 0, 4096, 7)),
            c.slot(key(1, 10, 0, 4096, 8)),
        ] {
            s.get_or_init(read).await;
        }
        assert_eq!(reads.load(std::sync::atomic::Ordering::Relaxed), 5);
    }

    #[tokio::test]
    async fn a_failed_read_is_tried_again_once_forgotten() {
        let c = ShardCache::default();
        let s = c.slot(key(1, 10, 0, 4096, 0));
        let r = s
            .get_or_init(|| async { Err(ChunkReadError::Failed(Errno::ENOTCONN)) })
            .await;
        assert!(r.is_err());
        c.forget(key(1, 10, 0, 4096, 0));
        assert_eq!(c.bytes(), 0);
        let s = c.slot(key(1, 10, 0, 4096, 0));
        assert!(s.get().is_none(), "the failure was kept");
    }

    #[test]
    fn the_oldest_go_first_and_the_bound_holds() {
        let c = ShardCache::default();
        let mib = 1u64 << 20;
        let n = (EC_SHARDS_BYTES / mib) as u32;
        for i in 0..n + 3 {
            c.put(key(1, 100 + i, 0, mib, 0), Ok(Bytes::from_static(b"x")));
            assert!(c.bytes() <= EC_SHARDS_BYTES);
        }
        assert!(
            c.slot(key(1, 100, 0, mib, 0)).get().is_none(),
            "the oldest stayed"
        );
        assert!(c.slot(key(1, 100 + n + 2, 0, mib, 0)).get().is_some());
        assert_eq!(c.bytes(), EC_SHARDS_BYTES);
    }
}
