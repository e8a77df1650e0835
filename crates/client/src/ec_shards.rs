//! Object ranges an erasure-coded read fetched or decoded, and rows it decoded, shared
//! with the reads around it. Decoding one lost stripe of a RAID set reads the same range of
//! every other stripe of the set and of its parity; a sequential reader's other reads (the
//! rest of the row, fetched side by side by readahead) ask for those very ranges, and the
//! decode of a second lost stripe of the row needs them again. Each range is read once
//! while kept: a read finds the range already fetched, or in flight and joins it.
//!
//! A row is decoded once too: the codec restores every lost data stripe of a row in one
//! pass, so the reads of a row's other lost stripes, which run beside the first, join its
//! decode ([`RowCache`]) instead of reading the row again and decoding it once more each.
//!
//! Bounded by [`EC_SHARDS_BYTES`] of ranges and as many of decoded rows, oldest out first;
//! an entry is used only while its file's change count is the one it was read at (this
//! client's writes and other clients' changes, as for readahead). A failed read or decode
//! is not kept: the next one tries again.

use crate::cksum::ChunkReadError;
use bytes::Bytes;
use nacre_core::cksum::TornBlocks;
use nacre_core::{Errno, Fid};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::OnceCell;

/// Bytes of ranges kept, and of decoded rows: a few rows of a wide set of 1 MiB stripes.
pub const EC_SHARDS_BYTES: u64 = 16 << 20;

/// A range as read: its bytes (short at the object's end), or why not.
pub type Read = Result<Bytes, ChunkReadError>;

/// A row as decoded: each data stripe's range by its index in the RAID set (zero-padded
/// to the range, as the codec sees it), or why the row could not be decoded.
pub type Row = Result<Arc<[Bytes]>, Errno>;

/// One entry's read or decode, done or in flight.
pub type Slot<V> = Arc<OnceCell<V>>;

/// A range of an object of a file, at the file's change count when read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    pub file: Fid,
    pub obj: Fid,
    pub off: u64,
    pub len: u64,
    pub changes: u64,
    /// What its OST was asked to do with a block its crash tore: a read that reports
    /// such blocks and one that takes them are not the same read.
    pub torn: TornBlocks,
}

/// A row of a RAID set: the range `first` of its first data object and the same range
/// of its other `data_stripes - 1` data objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowKey {
    pub first: Key,
    pub data_stripes: u32,
}

/// What a key's entry holds at most, for the bound.
pub trait Weight {
    fn bytes(&self) -> u64;
}

impl Weight for Key {
    fn bytes(&self) -> u64 {
        self.len
    }
}

impl Weight for RowKey {
    fn bytes(&self) -> u64 {
        self.first.len.saturating_mul(u64::from(self.data_stripes))
    }
}

/// Entries by key, oldest first, bounded by [`EC_SHARDS_BYTES`] of what their keys span.
pub struct SharedCache<K, V> {
    entries: Mutex<Entries<K, V>>,
}

/// (key, slot), oldest first, and the bytes the keys span.
type Entries<K, V> = (VecDeque<(K, Slot<V>)>, u64);

/// Object ranges as read.
pub type ShardCache = SharedCache<Key, Read>;

/// Rows as decoded.
pub type RowCache = SharedCache<RowKey, Row>;

impl<K, V> Default for SharedCache<K, V> {
    fn default() -> Self {
        Self {
            entries: Mutex::new((VecDeque::new(), 0)),
        }
    }
}

impl<K: Weight + Copy + Eq, V> SharedCache<K, V> {
    /// The entry of `key`: the one kept or in flight, else a new one for the caller to
    /// fill.
    pub fn slot(&self, key: K) -> Slot<V> {
        let mut g = self.entries.lock();
        let (q, bytes) = &mut *g;
        if let Some((_, s)) = q.iter().find(|(k, _)| *k == key) {
            return s.clone();
        }
        let slot = Slot::default();
        let weight = key.bytes();
        if weight > EC_SHARDS_BYTES {
            return slot;
        }
        while *bytes + weight > EC_SHARDS_BYTES {
            match q.pop_front() {
                Some((k, _)) => *bytes -= k.bytes(),
                None => break,
            }
        }
        *bytes += weight;
        q.push_back((key, slot.clone()));
        slot
    }

    /// Fills the entry of `key` with `value` (a decode's result) unless it holds one.
    pub fn put(&self, key: K, value: V) {
        let _ = self.slot(key).set(value);
    }

    /// Drops the entry of a failed read or decode, so the next one tries again.
    pub fn forget(&self, key: K) {
        let mut g = self.entries.lock();
        let (q, bytes) = &mut *g;
        if let Some(i) = q.iter().position(|(k, _)| *k == key) {
            q.remove(i);
            *bytes -= key.bytes();
        }
    }

    /// Bytes the kept entries span.
    pub fn bytes(&self) -> u64 {
        self.entries.lock().1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            torn: TornBlocks::Report,
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

    #[tokio::test]
    async fn a_row_is_decoded_once_and_weighs_all_its_stripes() {
        let rows = RowCache::default();
        let mib = 1u64 << 20;
        let row = |obj| RowKey {
            first: key(1, obj, 0, mib, 0),
            data_stripes: 4,
        };
        let decodes = std::sync::atomic::AtomicU32::new(0);
        let decode = || async {
            decodes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(Arc::from(vec![Bytes::from_static(b"d"); 4]))
        };
        // Two lost stripes of one row: one decode.
        let (a, b) = (rows.slot(row(10)), rows.slot(row(10)));
        tokio::join!(a.get_or_init(decode), b.get_or_init(decode));
        assert_eq!(decodes.load(std::sync::atomic::Ordering::Relaxed), 1);
        assert_eq!(rows.bytes(), 4 * mib);
        // 4 MiB rows: four fit in the bound.
        for obj in 11..20 {
            rows.put(row(obj), Err(Errno::EIO));
            assert!(rows.bytes() <= EC_SHARDS_BYTES);
        }
        assert_eq!(rows.bytes(), EC_SHARDS_BYTES);
        assert!(rows.slot(row(10)).get().is_none(), "the oldest row stayed");
    }
}
