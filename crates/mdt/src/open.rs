//! Open handles: which client holds which file open, and how.
//!
//! The MDT tracks opens (as Lustre's MDT does with its open handles) for two reasons: a file
//! unlinked while open must keep its inode and objects until the last close, and the size
//! the MDT stores is exact only while nobody holds the file open for writing.

use nacre_core::Fid;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenHandle {
    pub fid: Fid,
    pub conn_id: u64,
    pub write: bool,
}

#[derive(Default, Debug, Clone, Copy)]
struct Counts {
    opens: u32,
    writers: u32,
}

/// Bound on open handles per MDT; beyond it opens fail with ENFILE.
pub const MAX_OPEN_HANDLES: usize = 1 << 20;

#[derive(Default)]
pub struct OpenTable {
    next: AtomicU64,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    handles: HashMap<u64, OpenHandle>,
    counts: HashMap<Fid, Counts>,
    /// Files a writer held when its client vanished: their size needs a glimpse until a
    /// last writer reports one.
    lost_writers: std::collections::HashSet<Fid>,
}

impl OpenTable {
    pub fn new() -> OpenTable {
        OpenTable {
            // Start somewhere unpredictable so stale handles from a previous run do not match.
            next: AtomicU64::new(rand::random::<u32>() as u64 + 1),
            inner: Mutex::new(Inner::default()),
        }
    }

    pub fn open(&self, h: OpenHandle) -> Option<u64> {
        let mut g = self.inner.lock();
        if g.handles.len() >= MAX_OPEN_HANDLES {
            return None;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        g.handles.insert(id, h);
        let c = g.counts.entry(h.fid).or_default();
        c.opens += 1;
        if h.write {
            c.writers += 1;
        }
        Some(id)
    }

    /// Removes a handle; returns it and whether it was the last open of its file.
    pub fn close(&self, id: u64) -> Option<(OpenHandle, bool, u32)> {
        let mut g = self.inner.lock();
        let h = g.handles.remove(&id)?;
        let (last, writers) = match g.counts.get_mut(&h.fid) {
            Some(c) => {
                c.opens -= 1;
                if h.write {
                    c.writers -= 1;
                }
                (c.opens == 0, c.writers)
            }
            None => (true, 0),
        };
        if last {
            g.counts.remove(&h.fid);
        }
        Some((h, last, writers))
    }

    pub fn mark_lost_writer(&self, fid: Fid) {
        self.inner.lock().lost_writers.insert(fid);
    }

    pub fn has_lost_writer(&self, fid: &Fid) -> bool {
        self.inner.lock().lost_writers.contains(fid)
    }

    pub fn clear_lost_writer(&self, fid: &Fid) {
        self.inner.lock().lost_writers.remove(fid);
    }

    pub fn is_open(&self, fid: &Fid) -> bool {
        self.inner.lock().counts.contains_key(fid)
    }

    pub fn writers(&self, fid: &Fid) -> u32 {
        self.inner.lock().counts.get(fid).map_or(0, |c| c.writers)
    }

    /// Handles of a connection that went away.
    pub fn handles_of(&self, conn_id: u64) -> Vec<u64> {
        self.inner
            .lock()
            .handles
            .iter()
            .filter(|(_, h)| h.conn_id == conn_id)
            .map(|(id, _)| *id)
            .collect()
    }

    pub fn len(&self) -> usize {
        self.inner.lock().handles.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_opens_and_writers() {
        let t = OpenTable::new();
        let f = Fid::new(0x200000401, 9, 0);
        let a = t
            .open(OpenHandle {
                fid: f,
                conn_id: 1,
                write: true,
            })
            .expect("open");
        let b = t
            .open(OpenHandle {
                fid: f,
                conn_id: 2,
                write: false,
            })
            .expect("open");
        assert!(t.is_open(&f));
        assert_eq!(t.writers(&f), 1);
        assert_eq!(t.handles_of(1), vec![a]);
        let (_, last, writers) = t.close(a).expect("close");
        assert!(!last);
        assert_eq!(writers, 0);
        let (_, last, _) = t.close(b).expect("close");
        assert!(last);
        assert!(!t.is_open(&f));
        assert!(t.close(b).is_none());
    }
}
