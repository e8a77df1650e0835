//! OST proxies (Lustre's osp): the MDT's view of each OST.
//!
//! Each [`Osp`] keeps a pool of objects precreated on its OST in the MDT's own data
//! sequence, refilled in the background in growing batches (32 doubling to 20000, as
//! `OST_MIN_PRECREATE`/`OST_MAX_PRECREATE`), so a file create takes objects from memory and
//! sends no OST request. It also caches the OST's statfs for allocation policy and destroys
//! objects of unlinked files from the unlink log.

use nacre_core::fid::DATA_SEQ_WIDTH;
use nacre_core::{Errno, Fid, StripeObject, TargetName};
use nacre_rpc::Import;
use nacre_rpc::msg::{Reply, Request, StatFs};
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

pub const PRECREATE_MIN: u32 = 32;
pub const PRECREATE_MAX: u32 = 20_000;
/// How long a create waits for its OST's pool to refill before trying another OST.
pub const RESERVE_WAIT: Duration = Duration::from_secs(2);
/// Lustre's `osp.*.reserved_mb_low`: an OST reporting less available space than this
/// (less than one full RPC nobody was promised) gets no new objects...
pub const RESERVED_LOW: u64 = 4 << 20;
/// ...until it reports more than this (`reserved_mb_high`), so it does not flap.
pub const RESERVED_HIGH: u64 = 8 << 20;
/// `qos_maxage`: how old cached statfs may get.
pub const STATFS_MAX_AGE: Duration = Duration::from_secs(5);

#[derive(Debug)]
struct Pool {
    /// Data sequence of this MDT on this OST.
    seq: u64,
    /// Next object id to hand out.
    next: u32,
    /// Highest object id the OST has created.
    last_created: u32,
    /// Objects taken but given back by failed creates.
    returned: Vec<u32>,
    batch: u32,
}

/// One OST as seen from this MDT.
pub struct Osp {
    pub ost_idx: u32,
    pub import: Arc<Import>,
    pool: Mutex<Pool>,
    refilled: Notify,
    want: Notify,
    statfs: Mutex<Option<(StatFs, Instant)>>,
    /// The last precreate failed with ENOSPC: skip this OST for new files.
    full: AtomicBool,
    reachable: AtomicBool,
}

impl Osp {
    pub fn new(ost_idx: u32, import: Arc<Import>, seq: u64, next: u32) -> Arc<Osp> {
        Arc::new(Osp {
            ost_idx,
            import,
            pool: Mutex::new(Pool {
                seq,
                next: next.max(1),
                last_created: 0,
                returned: Vec::new(),
                batch: PRECREATE_MIN,
            }),
            refilled: Notify::new(),
            want: Notify::new(),
            statfs: Mutex::new(None),
            full: AtomicBool::new(false),
            reachable: AtomicBool::new(false),
        })
    }

    pub fn target(&self) -> TargetName {
        TargetName::ost(self.ost_idx)
    }

    pub fn seq(&self) -> u64 {
        self.pool.lock().seq
    }

    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::Acquire)
    }

    pub fn is_reachable(&self) -> bool {
        self.reachable.load(Ordering::Acquire)
    }

    /// Objects ready to hand out.
    pub fn available(&self) -> u32 {
        let p = self.pool.lock();
        (p.last_created + 1).saturating_sub(p.next) + p.returned.len() as u32
    }

    /// `(next, last_created)`, for `osp.*.prealloc_next_id` / `prealloc_last_id`.
    pub fn prealloc(&self) -> (u32, u32) {
        let p = self.pool.lock();
        (p.next, p.last_created)
    }

    pub fn cached_statfs(&self) -> Option<StatFs> {
        self.statfs.lock().map(|(s, _)| s)
    }

    fn try_take(&self) -> Option<StripeObject> {
        let mut p = self.pool.lock();
        let oid = if let Some(oid) = p.returned.pop() {
            oid
        } else if p.next <= p.last_created {
            let oid = p.next;
            p.next += 1;
            oid
        } else {
            return None;
        };
        let low = p.batch / 2;
        let left = (p.last_created + 1).saturating_sub(p.next);
        drop(p);
        if left < low {
            self.want.notify_one();
        }
        Some(StripeObject {
            ost_idx: self.ost_idx,
            fid: Fid::new(self.seq(), oid, 0),
        })
    }

    /// Takes one precreated object, waiting up to [`RESERVE_WAIT`] for a refill.
    pub async fn take(&self) -> Result<StripeObject, Errno> {
        let deadline = Instant::now() + RESERVE_WAIT;
        loop {
            let waiter = self.refilled.notified();
            if let Some(o) = self.try_take() {
                return Ok(o);
            }
            if self.is_full() {
                return Err(Errno::ENOSPC);
            }
            self.want.notify_one();
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(if self.is_reachable() {
                    Errno::EAGAIN
                } else {
                    Errno::EIO
                });
            }
            let _ = tokio::time::timeout(left, waiter).await;
        }
    }

    /// A replayed create used `oid`: never hand it out again.
    pub fn note_used(&self, oid: u32) {
        let mut p = self.pool.lock();
        p.returned.retain(|o| *o != oid);
        if oid >= p.next {
            p.next = oid + 1;
        }
    }

    /// Gives back objects a failed create did not use.
    pub fn give_back(&self, objs: &[StripeObject]) {
        let mut p = self.pool.lock();
        let seq = p.seq;
        for o in objs {
            if o.ost_idx == self.ost_idx && o.fid.seq == seq {
                p.returned.push(o.fid.oid);
            }
        }
    }

    /// The background task: keep the pool above its low-water mark and statfs fresh.
    pub async fn run(self: Arc<Self>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        let mut synced = false;
        let mut generation = self.import.generation();
        loop {
            if *shutdown.borrow() {
                return;
            }
            let now = self.import.generation();
            if now != generation {
                // A new connection: the OST may have restarted with fewer objects than we
                // handed out (its object tree lost), and refuses writes to the rest until
                // they are made again.
                generation = now;
                synced = false;
            }
            if !synced {
                synced = self.sync_last_id().await;
            }
            if synced {
                self.refill().await;
            }
            self.refresh_statfs(false).await;
            tokio::select! {
                _ = self.want.notified() => {}
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                _ = shutdown.changed() => {}
            }
        }
    }

    /// Learns how far the OST has created objects in our sequence (after any restart).
    async fn sync_last_id(&self) -> bool {
        let seq = self.seq();
        match self
            .import
            .call(&Request::OstGetLastId { seq }, Default::default())
            .await
        {
            Ok((Reply::LastId(id), _)) => {
                let mut p = self.pool.lock();
                p.last_created = id;
                if p.next > id + 1 {
                    // We handed out ids the OST never created (lost objects): make them now.
                    tracing::warn!(target: "osp", "OST{:04x}: LAST_ID {} behind next id {}", self.ost_idx, id, p.next);
                }
                self.reachable.store(true, Ordering::Release);
                true
            }
            Ok(_) => false,
            Err(e) => {
                self.reachable.store(false, Ordering::Release);
                tracing::debug!(target: "osp", "OST{:04x}: {e}", self.ost_idx);
                false
            }
        }
    }

    async fn refill(&self) {
        let (seq, target) = {
            let p = self.pool.lock();
            let left = (p.last_created + 1).saturating_sub(p.next);
            if left >= p.batch / 2 && p.next <= p.last_created + 1 {
                return;
            }
            let base = p.last_created.max(p.next.saturating_sub(1));
            (p.seq, base.saturating_add(p.batch).min(DATA_SEQ_WIDTH))
        };
        if target <= self.pool.lock().last_created {
            return;
        }
        match self
            .import
            .call(
                &Request::OstPrecreate { seq, last: target },
                Default::default(),
            )
            .await
        {
            Ok((Reply::LastId(id), _)) => {
                let mut p = self.pool.lock();
                p.last_created = p.last_created.max(id);
                p.batch = (p.batch * 2).min(PRECREATE_MAX);
                drop(p);
                self.full.store(false, Ordering::Release);
                self.reachable.store(true, Ordering::Release);
                self.refilled.notify_waiters();
            }
            Ok(_) => {}
            Err(e) => {
                if e.errno() == Errno::ENOSPC {
                    if !self.is_full() {
                        tracing::warn!(target: "osp", "OST{:04x} is out of space", self.ost_idx);
                    }
                    self.full.store(true, Ordering::Release);
                } else if e.is_transport() {
                    self.reachable.store(false, Ordering::Release);
                }
                self.refilled.notify_waiters();
                tracing::debug!(target: "osp", "OST{:04x}: precreate failed: {e}", self.ost_idx);
            }
        }
    }

    /// Refreshes the cached statfs if older than [`STATFS_MAX_AGE`] (or `force`).
    pub async fn refresh_statfs(&self, force: bool) -> Option<StatFs> {
        let fresh = self
            .statfs
            .lock()
            .filter(|(_, t)| !force && t.elapsed() < STATFS_MAX_AGE)
            .map(|(s, _)| s);
        if fresh.is_some() {
            return fresh;
        }
        match self
            .import
            .call(&Request::OstStatfs, Default::default())
            .await
        {
            Ok((Reply::Statfs(s), _)) => {
                *self.statfs.lock() = Some((s, Instant::now()));
                self.reachable.store(true, Ordering::Release);
                let avail = s.bavail.saturating_mul(u64::from(s.bsize));
                if avail < RESERVED_LOW && !self.is_full() {
                    tracing::warn!(target: "osp", "OST{:04x} is out of space ({avail} bytes available)", self.ost_idx);
                    self.full.store(true, Ordering::Release);
                } else if avail > RESERVED_HIGH && self.is_full() {
                    // Free space came back (files removed): allow creates again.
                    self.full.store(false, Ordering::Release);
                    self.want.notify_one();
                }
                Some(s)
            }
            _ => None,
        }
    }

    /// Gives objects on the OST a new owner (a chown of their file).
    pub async fn set_owner(&self, objs: Vec<Fid>, uid: u32, gid: u32) -> Result<(), Errno> {
        self.import
            .call(&Request::OstSetOwner { objs, uid, gid }, Default::default())
            .await
            .map(|_| ())
            .map_err(|e| e.errno())
    }

    /// Destroys objects on the OST (missing objects count as destroyed).
    pub async fn destroy(&self, objs: Vec<Fid>) -> Result<(), Errno> {
        self.import
            .call(&Request::OstDestroy { objs }, Default::default())
            .await
            .map(|_| ())
            .map_err(|e| e.errno())
    }
}
