//! Object ranges an erasure-coded read fetched or decoded, shared with the reads around
//! it. Decoding one lost stripe of a RAID set reads the same range of every other stripe
//! of the set and of its parity; a sequential reader's other reads (the rest of the row,
//! fetched side by side by readahead) ask for those very ranges, and the decode of a
//! second lost stripe of the row needs them again. Each range is read once: a read finds
//! the range already fetched, or in flight and joins it.
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

#[derive(Clone, Copy, PartialEq, Eq)]
struct Key {
    file: Fid,
    obj: Fid,
    off: u64,
    len: u64,
    /// The file's change count when read.
    changes: u64,
}

#[derive(Default)]
pub struct ShardCache {
    /// (key, slot), oldest first, and the bytes the keys span.
    entries: Mutex<(VecDeque<(Key, Slot)>, u64)>,
}

impl ShardCache {
    /// The read of `[off, off + len)` of object `obj` of `file` at change count
    /// `changes`: the one kept or in flight, else a new one for the caller to make.
    pub fn slot(&self, file: Fid, obj: Fid, off: u64, len: u64, changes: u64) -> Slot {
        let key = Key {
            file,
            obj,
            off,
            len,
            changes,
        };
        let mut g = self.entries.lock();
        let (q, bytes) = &mut *g;
        if let Some((_, s)) = q.iter().find(|(k, _)| *k == key) {
            return s.clone();
        }
        let slot = Slot::default();
        if len > EC_SHARDS_BYTES {
            return slot;
        }
        while *bytes + len > EC_SHARDS_BYTES {
            match q.pop_front() {
                Some((k, _)) => *bytes -= k.len,
                None => break,
            }
        }
        *bytes += len;
        q.push_back((key, slot.clone()));
        slot
    }

    /// Fills the slot of a range with `read` (a decode's result) unless it holds one.
    pub fn put(&self, file: Fid, obj: Fid, off: u64, len: u64, changes: u64, read: Read) {
        let _ = self.slot(file, obj, off, len, changes).set(read);
    }

    /// Drops the slot of a range whose read failed, so the next read tries again.
    pub fn forget(&self, file: Fid, obj: Fid, off: u64, len: u64, changes: u64) {
        let key = Key {
            file,
            obj,
            off,
            len,
            changes,
        };
        let mut g = self.entries.lock();
        let (q, bytes) = &mut *g;
        if let Some(i) = q.iter().position(|(k, _)| *k == key) {
            q.remove(i);
            *bytes -= len;
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

    #[tokio::test]
    async fn a_range_is_read_once_until_its_file_changes() {
        let c = ShardCache::default();
        let reads = std::sync::atomic::AtomicU32::new(0);
        let read = || async {
            reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(Bytes::from_static(b"shard"))
        };
        let a = c.slot(fid(1), fid(10), 0, 4096, 7);
        let b = c.slot(fid(1), fid(10), 0, 4096, 7);
        let (x, y) = tokio::join!(a.get_or_init(read), b.get_or_init(read));
        assert_eq!(x, y);
        assert_eq!(reads.load(std::sync::atomic::Ordering::Relaxed), 1);
        // Another range, object, file or change count is another read.
        for s in [
            c.slot(fid(1), fid(10), 4096, 4096, 7),
            c.slot(fid(1), fid(11), 0, 4096, 7),
            c.slot(fid(2), fid(10), 0, 4096, 7),
            c.slot(fid(1), fid(10), 0, 4096, 8),
        ] {
            s.get_or_init(read).await;
        }
        assert_eq!(reads.load(std::sync::atomic::Ordering::Relaxed), 5);
    }

    #[tokio::test]
    async fn a_failed_read_is_tried_again_once_forgotten() {
        let c = ShardCache::default();
        let s = c.slot(fid(1), fid(10), 0, 4096, 0);
        let r = s
            .get_or_init(|| async { Err(ChunkReadError::Failed(Errno::ENOTCONN)) })
            .await;
        assert!(r.is_err());
        c.forget(fid(1), fid(10), 0, 4096, 0);
        assert_eq!(c.bytes(), 0);
        let s = c.slot(fid(1), fid(10), 0, 4096, 0);
        assert!(s.get().is_none(), "the failure was kept");
    }

    #[test]
    fn the_oldest_go_first_and_the_bound_holds() {
        let c = ShardCache::default();
        let mib = 1u64 << 20;
        let n = (EC_SHARDS_BYTES / mib) as u32;
        for i in 0..n + 3 {
            c.put(
                fid(1),
                fid(100 + i),
                0,
                mib,
                0,
                Ok(Bytes::from_static(b"x")),
            );
            assert!(c.bytes() <= EC_SHARDS_BYTES);
        }
        assert!(
            c.slot(fid(1), fid(100), 0, mib, 0).get().is_none(),
            "the oldest stayed"
        );
        assert!(c.slot(fid(1), fid(100 + n + 2), 0, mib, 0).get().is_some());
        assert_eq!(c.bytes(), EC_SHARDS_BYTES);
    }
}
