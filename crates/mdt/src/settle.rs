//! Sizes settled after a writer's last close (Lazy Size-on-MDT), a batch at a time.
//!
//! When the last writer of a file closes it, the MDT records the file's exact size from
//! its objects. The objects are synced first: a size the MDT trusts must not outlive the
//! data behind it when an OST loses its unsynced writes in a power cut. A close queues its
//! file here and returns; one task takes what is queued, lets the closes of the moment
//! join for [`SETTLE_GATHER`] (up to [`SETTLE_BATCH_MAX`] files), and settles them
//! together: one request per OST syncs the batch's objects there and answers with their
//! attributes ([`Request::OstSyncGetattr`], as Lustre's `OST_SYNC` reply carries them),
//! the DoM objects are synced on one blocking thread, and one transaction records every
//! size. A file then costs a share of one request per OST and of one commit, where it
//! used to cost a sync request, a glimpse request and a commit of its own.
//!
//! A settle is abandoned if anything changed the file meanwhile (a writer opened, a
//! truncate set its size): whoever did that settles it in turn. One that cannot finish (an
//! OST away, an error) leaves the size to glimpses and the file dirty, and the next stat
//! queues it to be settled again ([`crate::resettle`]); so does a close that finds this
//! queue full. A batch waits at most [`SETTLE_OST_WAIT`] for an OST; one that does not
//! answer by then has its files left to glimpses, and the batch's other files are
//! settled. Meanwhile the batch holds one of [`SETTLE_BATCHES_IN_FLIGHT`]; the others go
//! on.

use crate::{Mdt, dom, mdd};
use bytes::Bytes;
use nacre_core::{Errno, Fid, Layout, Timespec};
use nacre_rpc::msg::{ObjAttr, Reply, Request, ost_obj_lists};
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, Semaphore, watch};

/// Settles waiting, at most; a close past it leaves its file to glimpses.
pub const SETTLE_QUEUE_MAX: usize = 16_384;
/// Files one batch settles at most.
pub const SETTLE_BATCH_MAX: usize = 256;
/// How long a batch waits for more closes to join it: long enough for the closes of a few
/// writers at a few thousand files a second, short against what a settle itself costs.
pub const SETTLE_GATHER: Duration = Duration::from_millis(2);
/// Batches under way at once: one stuck on an OST that does not answer leaves the rest.
pub const SETTLE_BATCHES_IN_FLIGHT: usize = 4;
/// How long a batch waits for an OST's answer. An OST that has not answered by then
/// leaves its files to glimpses, and the batch's other files are settled: an OST that
/// stopped would otherwise hold them for the whole recovery timeout.
pub const SETTLE_OST_WAIT: Duration = Duration::from_secs(5);

/// How a settle ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SettleEnd {
    /// The exact size is recorded, or there is nothing to settle (the file gone).
    Settled,
    /// A writer opened or the size changed meanwhile; they settle it in turn.
    Abandoned,
    /// It could not finish (an OST away, an error): the size is still unknown.
    GaveUp,
}

/// The files whose last writer closed, with the generation each settle started at.
#[derive(Default)]
pub struct SettleQueue {
    queue: Mutex<VecDeque<(Fid, u64)>>,
    kick: Notify,
}

impl SettleQueue {
    /// Queues a settle of `fid` that started at `generation`; false if the queue is full.
    pub fn push(&self, fid: Fid, generation: u64) -> bool {
        let mut q = self.queue.lock();
        if q.len() >= SETTLE_QUEUE_MAX {
            return false;
        }
        q.push_back((fid, generation));
        drop(q);
        self.kick.notify_one();
        true
    }

    /// Up to `max` queued settles, oldest first.
    fn take(&self, max: usize) -> Vec<(Fid, u64)> {
        let mut q = self.queue.lock();
        let n = q.len().min(max);
        q.drain(..n).collect()
    }

    fn len(&self) -> usize {
        self.queue.lock().len()
    }

    fn is_empty(&self) -> bool {
        self.queue.lock().is_empty()
    }
}

/// The size, blocks and latest data change a settle records.
type Sized = (u64, u64, Timespec);

impl Mdt {
    /// Settles the queued files, a batch at a time, until the MDT stops.
    pub(crate) async fn settle_loop(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let slots = Arc::new(Semaphore::new(SETTLE_BATCHES_IN_FLIGHT));
        loop {
            if self.settles.is_empty() {
                tokio::select! {
                    () = self.settles.kick.notified() => {}
                    _ = shutdown.wait_for(|s| *s) => return,
                }
            }
            // The closes of the moment join, unless a batch is full already.
            if self.settles.len() < SETTLE_BATCH_MAX {
                tokio::select! {
                    () = tokio::time::sleep(SETTLE_GATHER) => {}
                    _ = shutdown.wait_for(|s| *s) => return,
                }
            }
            let permit = tokio::select! {
                p = slots.clone().acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => return,
                },
                _ = shutdown.wait_for(|s| *s) => return,
            };
            let batch = self.settles.take(SETTLE_BATCH_MAX);
            if batch.is_empty() {
                continue;
            }
            let me = self.clone();
            let mut stopping = shutdown.clone();
            // A batch waiting on an OST that is gone must not keep a stopping MDT (and
            // its store) alive: the sizes are left to glimpses.
            tokio::spawn(async move {
                tokio::select! {
                    () = me.settle_batch(batch) => {}
                    _ = stopping.wait_for(|s| *s) => {}
                }
                drop(permit);
            });
        }
    }

    /// Settles `batch` (files and the generations their settles started at) and tells
    /// the open table how each ended.
    pub(crate) async fn settle_batch(self: &Arc<Self>, batch: Vec<(Fid, u64)>) {
        for (fid, generation, end) in self.settle_ends(batch).await {
            match end {
                SettleEnd::Settled => self.opens.settled(&fid, generation),
                SettleEnd::Abandoned => {}
                SettleEnd::GaveUp => self.opens.settle_gave_up(&fid, generation),
            }
        }
    }

    async fn settle_ends(self: &Arc<Self>, batch: Vec<(Fid, u64)>) -> Vec<(Fid, u64, SettleEnd)> {
        let mut ends = Vec::with_capacity(batch.len());
        let mut files: Vec<(Fid, u64, Layout)> = Vec::new();
        let mut v = match self.view() {
            Ok(v) => v,
            Err(e) => {
                tracing::debug!(target: "mdt", "MDT{:04x}: sizes of {} files left to glimpses: {e}", self.index, batch.len());
                return gave_up(batch);
            }
        };
        for (fid, generation) in batch {
            match mdd::get_inode(&mut v, &fid) {
                Ok(ino) => match ino.layout {
                    Some(l) => files.push((fid, generation, l)),
                    // No objects: the stored size is the size.
                    None => ends.push((fid, generation, SettleEnd::Settled)),
                },
                // Gone: nothing to settle.
                Err(Errno::ENOENT) => ends.push((fid, generation, SettleEnd::Settled)),
                Err(e) => {
                    tracing::debug!(target: "mdt", "MDT{:04x}: size of {fid} left to glimpses: {e}", self.index);
                    ends.push((fid, generation, SettleEnd::GaveUp));
                }
            }
        }
        drop(v);
        let mut sized = Vec::with_capacity(files.len());
        for ((fid, generation, layout), s) in files.iter().zip(self.sync_and_size(&files).await) {
            match s {
                Some(s) => sized.push((*fid, *generation, layout.dom_size(), s)),
                None => ends.push((*fid, *generation, SettleEnd::GaveUp)),
            }
        }
        if sized.is_empty() {
            return ends;
        }
        let keys: Vec<(Fid, u64)> = sized.iter().map(|(f, g, ..)| (*f, *g)).collect();
        let me = self.clone();
        let recorded = self
            .store
            .write(move |tx| {
                let mut out = Vec::with_capacity(sized.len());
                for (fid, generation, dom_size, (size, blocks, mtime)) in sized {
                    // Checked in the transaction: an open or truncate after this point is
                    // ordered after it; dirtiness is cleared only once the size is
                    // committed, so nobody trusts the old size in between.
                    if !me.opens.may_settle(&fid, generation) {
                        out.push((fid, generation, SettleEnd::Abandoned));
                        continue;
                    }
                    let mut ino = match mdd::get_inode(tx, &fid) {
                        Ok(i) => i,
                        Err(Errno::ENOENT) => {
                            out.push((fid, generation, SettleEnd::Settled));
                            continue;
                        }
                        Err(e) => return Err(e),
                    };
                    ino.attr.size = size.max(ino.attr.size.min(dom_size));
                    ino.attr.blocks = blocks;
                    if mtime > ino.attr.ctime {
                        ino.attr.mtime = mtime;
                        ino.attr.ctime = mtime;
                    }
                    ino.lsom_valid = true;
                    mdd::put_inode(tx, &ino)?;
                    out.push((fid, generation, SettleEnd::Settled));
                }
                Ok(out)
            })
            .await;
        match recorded {
            Ok(out) => ends.extend(out),
            Err(e) => {
                tracing::warn!(target: "mdt", "MDT{:04x}: settling the sizes of {} files: {e}", self.index, keys.len());
                ends.extend(gave_up(keys));
            }
        }
        ends
    }

    /// Makes the objects of `files` durable and sizes each file from them: one request
    /// per OST (per [`nacre_rpc::msg::OST_OBJS_MAX`] objects) and one blocking call for
    /// the DoM objects. `None` for a file an OST or its DoM object could not answer for.
    async fn sync_and_size(&self, files: &[(Fid, u64, Layout)]) -> Vec<Option<Sized>> {
        let objs = files
            .iter()
            .flat_map(|(_, _, l)| l.objects().map(|o| (o.ost_idx, o.fid)));
        let asks = ost_obj_lists(objs)
            .into_iter()
            .map(|(ost, objs)| async move {
                let r = tokio::time::timeout(SETTLE_OST_WAIT, self.sync_getattr(ost, &objs))
                    .await
                    .unwrap_or(Err(Errno::ETIMEDOUT));
                (ost, objs, r)
            });
        let mut found: HashMap<(u32, Fid), ObjAttr> = HashMap::new();
        let mut failed: HashSet<u32> = HashSet::new();
        for (ost, objs, r) in futures::future::join_all(asks).await {
            match r {
                Ok(attrs) => {
                    for (f, a) in objs.into_iter().zip(attrs) {
                        if let Some(a) = a {
                            found.insert((ost, f), a);
                        }
                    }
                }
                Err(e) => {
                    tracing::debug!(target: "mdt", "MDT{:04x}: sizes of files on OST{ost:04x} left to glimpses: {e}", self.index);
                    failed.insert(ost);
                }
            }
        }
        let dom_objs: Vec<Fid> = files
            .iter()
            .filter_map(|(_, _, l)| l.dom_object())
            .collect();
        let dom_synced: HashSet<Fid> = if dom_objs.is_empty() {
            HashSet::new()
        } else {
            self.dom_blocking(move |s| {
                Ok(dom_objs
                    .into_iter()
                    .filter(|o| match s.sync(o) {
                        Ok(()) | Err(Errno::ENOENT) => true,
                        Err(e) => {
                            tracing::debug!(target: "mdt", "DoM object {o} not synced for a settle: {e}");
                            false
                        }
                    })
                    .collect())
            })
            .await
            .unwrap_or_else(|e| {
                // None synced: their files are left to glimpses.
                tracing::debug!(target: "mdt", "MDT{:04x}: DoM objects not synced for a settle: {e}", self.index);
                HashSet::new()
            })
        };
        files
            .iter()
            .map(|(_, _, layout)| {
                if layout.objects().any(|o| failed.contains(&o.ost_idx)) {
                    return None;
                }
                let (mut size, mut blocks, mut mtime) = layout.merge_object_attrs(|o| {
                    found
                        .get(&(o.ost_idx, o.fid))
                        .map(|a| (a.size, a.blocks, a.mtime))
                });
                if let Some(obj) = layout.dom_object() {
                    if !dom_synced.contains(&obj) {
                        return None;
                    }
                    let (ds, db, dm) = dom::object_attr(&self.dom, &obj).ok()?;
                    size = size.max(ds);
                    blocks += db;
                    mtime = mtime.max(dm);
                }
                Some((size, blocks, mtime))
            })
            .collect()
    }

    /// Syncs `objs` on OST `ost` and returns their attributes, one per object.
    async fn sync_getattr(&self, ost: u32, objs: &[Fid]) -> Result<Vec<Option<ObjAttr>>, Errno> {
        let osp = self.lod.osp(ost).ok_or(Errno::EIO)?;
        let req = Request::OstSyncGetattr {
            objs: objs.to_vec(),
        };
        match osp.import.call(&req, Bytes::new()).await {
            Ok((Reply::ObjAttrs(attrs), _)) if attrs.len() == objs.len() => Ok(attrs),
            Ok(_) => Err(Errno::EPROTO),
            Err(e) => Err(e.errno()),
        }
    }
}

fn gave_up(files: Vec<(Fid, u64)>) -> Vec<(Fid, u64, SettleEnd)> {
    files
        .into_iter()
        .map(|(f, g)| (f, g, SettleEnd::GaveUp))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_is_bounded_and_hands_out_the_oldest_first() {
        let q = SettleQueue::default();
        let f = |oid| Fid::new(0x200000400, oid, 0);
        for i in 0..SETTLE_QUEUE_MAX as u32 {
            assert!(q.push(f(i), u64::from(i)));
        }
        assert!(!q.push(f(u32::MAX), 0), "a full queue refuses");
        let first = q.take(SETTLE_BATCH_MAX);
        assert_eq!(first.len(), SETTLE_BATCH_MAX);
        assert_eq!(first[0], (f(0), 0));
        assert_eq!(
            first[SETTLE_BATCH_MAX - 1].0,
            f(SETTLE_BATCH_MAX as u32 - 1)
        );
        assert!(q.push(f(u32::MAX), 0), "taking makes room");
        assert_eq!(q.len(), SETTLE_QUEUE_MAX - SETTLE_BATCH_MAX + 1);
    }
}
