//! Block-range locks per object: a block's data and its checksum entry change together.
//!
//! Writes, truncates and hole punches hold the blocks they change, so two of them never
//! interleave on one block (a block's entry is computed from its whole content, so the
//! last writer's entry must match the last writer's data). Reads hold nothing: a read that
//! meets a block mid-change sees a mismatch, and checks it again holding the block before
//! calling it bad. Only ranges held right now are kept, so the table is bounded by the
//! requests in progress.

use nacre_core::Fid;
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;

/// Held block ranges `[start, end)` by object.
#[derive(Default)]
pub struct RangeLocks {
    held: Mutex<HashMap<Fid, Vec<(u64, u64)>>>,
    freed: Condvar,
}

/// Holds `[start, end)` of an object's blocks until dropped.
pub struct RangeGuard<'a> {
    locks: &'a RangeLocks,
    fid: Fid,
    range: (u64, u64),
}

impl RangeLocks {
    /// Waits until no one holds a block of `[start, end)` of `fid`, then holds them.
    pub fn lock(&self, fid: Fid, start: u64, end: u64) -> RangeGuard<'_> {
        let end = end.max(start.saturating_add(1));
        let mut held = self.held.lock();
        loop {
            let busy = held
                .get(&fid)
                .is_some_and(|v| v.iter().any(|&(s, e)| s < end && start < e));
            if !busy {
                break;
            }
            self.freed.wait(&mut held);
        }
        held.entry(fid).or_default().push((start, end));
        RangeGuard {
            locks: self,
            fid,
            range: (start, end),
        }
    }
}

impl Drop for RangeGuard<'_> {
    fn drop(&mut self) {
        let mut held = self.locks.held.lock();
        if let Some(v) = held.get_mut(&self.fid) {
            if let Some(i) = v.iter().position(|r| *r == self.range) {
                v.swap_remove(i);
            }
            if v.is_empty() {
                held.remove(&self.fid);
            }
        }
        drop(held);
        self.locks.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[test]
    fn overlapping_ranges_wait_and_disjoint_ones_do_not() {
        let l = Arc::new(RangeLocks::default());
        let f = Fid::new(0x240000400, 1, 0);
        let g = l.lock(f, 0, 4);
        // Disjoint blocks and other objects go ahead.
        drop(l.lock(f, 4, 8));
        drop(l.lock(Fid::new(0x240000400, 2, 0), 0, 4));
        let got = Arc::new(AtomicBool::new(false));
        let t = {
            let (l, got) = (l.clone(), got.clone());
            std::thread::spawn(move || {
                let _g = l.lock(f, 3, u64::MAX);
                got.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !got.load(Ordering::SeqCst),
            "an overlapping range did not wait"
        );
        drop(g);
        t.join().expect("join");
        assert!(got.load(Ordering::SeqCst));
        assert!(l.held.lock().is_empty(), "a released range stayed");
    }
}
