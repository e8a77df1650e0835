//! Sizes settled again in the background.
//!
//! A file's exact size (Lazy Size-on-MDT) can be unknown although nobody writes it: after
//! a restart that followed an unclean stop (an exact size from before it is not trusted,
//! see [`crate::records::Inode::decode`]), after a writer vanished across a restart, after
//! a layout change. A stat of such a file glimpses its OSTs; it also queues the file here,
//! and one task settles the queued files one at a time, as the last close of a writer
//! does (objects synced, sizes glimpsed, the size recorded as exact), so later stats need
//! no glimpse. The queue is bounded: a file left out is queued again by a later stat.

use crate::Mdt;
use nacre_core::Fid;
use parking_lot::Mutex;
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use tokio::sync::{Notify, watch};

/// Files waiting to be settled again, at most.
pub const RESETTLE_QUEUE_MAX: usize = 4096;

/// The queue of files to settle again.
#[derive(Default)]
pub struct Resettle {
    queue: Mutex<Queue>,
    kick: Notify,
}

#[derive(Default)]
struct Queue {
    order: VecDeque<Fid>,
    queued: HashSet<Fid>,
}

impl Resettle {
    /// Queues `fid` unless it is queued already or the queue is full.
    pub fn push(&self, fid: Fid) {
        let mut q = self.queue.lock();
        if q.order.len() >= RESETTLE_QUEUE_MAX || !q.queued.insert(fid) {
            return;
        }
        q.order.push_back(fid);
        debug_assert_eq!(q.order.len(), q.queued.len());
        drop(q);
        self.kick.notify_one();
    }

    fn pop(&self) -> Option<Fid> {
        let mut q = self.queue.lock();
        let fid = q.order.pop_front()?;
        q.queued.remove(&fid);
        Some(fid)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.queue.lock().order.len()
    }
}

impl Mdt {
    /// Settles the queued files until the MDT stops.
    pub(crate) async fn resettle_loop(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = self.resettle.kick.notified() => {}
                _ = shutdown.changed() => return,
            }
            while let Some(fid) = self.resettle.pop() {
                if *shutdown.borrow() {
                    return;
                }
                self.resettle_one(fid, &mut shutdown).await;
            }
        }
    }

    async fn resettle_one(self: &Arc<Self>, fid: Fid, shutdown: &mut watch::Receiver<bool>) {
        let Ok(ino) = self
            .store
            .read()
            .and_then(|mut v| crate::mdd::get_inode(&mut v, &fid))
        else {
            return;
        };
        let Some(generation) = self.opens.begin_resettle(fid, ino.lsom_valid) else {
            return;
        };
        tokio::select! {
            () = self.settle_batch(vec![(fid, generation)]) => {}
            _ = shutdown.wait_for(|s| *s) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_holds_each_file_once_and_is_bounded() {
        let r = Resettle::default();
        let f = |oid| Fid::new(0x200000400, oid, 0);
        r.push(f(1));
        r.push(f(1));
        assert_eq!(r.len(), 1);
        for i in 0..RESETTLE_QUEUE_MAX as u32 + 10 {
            r.push(f(i + 2));
        }
        assert_eq!(r.len(), RESETTLE_QUEUE_MAX);
        assert_eq!(r.pop(), Some(f(1)));
        r.push(f(1));
        assert_eq!(r.len(), RESETTLE_QUEUE_MAX);
    }
}
