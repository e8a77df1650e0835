//! OST proxies (Lustre's osp): the MDT's view of each OST.
//!
//! Each [`Osp`] keeps a pool of objects precreated on its OST in the MDT's own data
//! sequence, refilled in the background, so a file create takes objects from memory and
//! sends no OST request. It also caches the OST's statfs for allocation policy and destroys
//! objects of unlinked files from the unlink log.
//!
//! The pool follows demand as Lustre's does (`osp_precreate_reserve`/`_send`): a refill
//! asks for `create_count` objects (from `OST_MIN_PRECREATE`, 32) when fewer than half of
//! that are left; `create_count` doubles only when creates take the pool down to a quarter
//! of it, up to `max_create_count` (20000); one request asks for at most half of that;
//! an OST that makes fewer than asked brings `create_count` down to what it made. Each
//! object is a file on the OST, so a pool that grew regardless of demand would make tens
//! of thousands of them for a file system that creates a few.

use nacre_core::fid::DATA_SEQ_WIDTH;
use nacre_core::{Errno, Fid, StripeObject, TargetName};
use nacre_rpc::Import;
use nacre_rpc::error::RpcError;
use nacre_rpc::lfsck::{LfsckReply, LfsckRequest, OstRepair, Outcome};
use nacre_rpc::msg::{Reply, Request, StatFs};
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Lustre's `OST_MIN_PRECREATE`: the first and smallest `create_count`.
pub const PRECREATE_MIN: u32 = 32;
/// Lustre's `OST_MAX_PRECREATE`: the default and highest `max_create_count`.
pub const PRECREATE_MAX: u32 = nacre_rpc::msg::OST_MAX_PRECREATE;
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
    /// `create_count`: objects the next refill asks for.
    batch: u32,
    /// `max_create_count`: the most `batch` may grow to; 0 gives this OST no new objects.
    max_create: u32,
    /// `opd_pre_create_slow`: `batch` grew and its refill has not answered, or the OST
    /// made fewer than asked; it does not grow again until a refill keeps up.
    slow: bool,
}

/// A refill to send: make objects of `seq` up to `last`, `asked` more than `before`.
#[derive(Debug, PartialEq, Eq)]
struct PrecreateAsk {
    seq: u64,
    last: u32,
    asked: u32,
    before: u32,
}

impl Pool {
    /// Precreated objects not handed out yet.
    fn left(&self) -> u32 {
        (self.last_created + 1).saturating_sub(self.next)
    }

    /// Hands out one object (a given-back one first), growing `create_count` when
    /// creates take the pool down to a quarter of it.
    fn take(&mut self) -> Option<u32> {
        let oid = if let Some(oid) = self.returned.pop() {
            oid
        } else if self.next <= self.last_created {
            self.next += 1;
            self.next - 1
        } else {
            return None;
        };
        if !self.slow && self.batch < self.max_create && self.left() <= self.batch / 4 + 1 {
            // Creates outpace the refills: ask for more next time.
            self.batch = (self.batch * 2).min(self.max_create);
            self.slow = true;
        }
        Some(oid)
    }

    /// Fewer than half of `create_count` are left (Lustre's `osp_precreate_near_empty`).
    fn wants_refill(&self) -> bool {
        self.left() < self.batch / 2
    }

    /// The refill to send now, if one is due.
    fn ask(&self) -> Option<PrecreateAsk> {
        if self.max_create == 0 || (!self.wants_refill() && self.next <= self.last_created + 1) {
            return None;
        }
        // One request asks for at most half of max_create_count, as Lustre's does.
        let asked = self
            .batch
            .min((self.max_create / 2).max(PRECREATE_MIN))
            .max(1);
        let base = self.last_created.max(self.next.saturating_sub(1));
        let last = base.saturating_add(asked).min(DATA_SEQ_WIDTH);
        (last > self.last_created).then_some(PrecreateAsk {
            seq: self.seq,
            last,
            asked,
            before: self.last_created,
        })
    }

    /// The OST answered a refill of `asked` objects with LAST_ID `id`.
    fn made(&mut self, id: u32, asked: u32, before: u32) {
        self.last_created = self.last_created.max(id);
        let made = id.saturating_sub(before);
        if made < asked {
            // The OST could not make them all: ask for what it managed.
            self.batch = made.max(PRECREATE_MIN).min(self.max_create.max(1));
            self.slow = true;
        } else {
            self.slow = false;
        }
    }
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
    /// The OST reset the objects this MDT may have handed out to files a power cut took
    /// back ([`Osp::clean_orphans`]); until then the pool hands out nothing.
    orphans_cleaned: AtomicBool,
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
                max_create: PRECREATE_MAX,
                slow: false,
            }),
            refilled: Notify::new(),
            want: Notify::new(),
            statfs: Mutex::new(None),
            full: AtomicBool::new(false),
            reachable: AtomicBool::new(false),
            orphans_cleaned: AtomicBool::new(false),
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
        p.left() + p.returned.len() as u32
    }

    /// Whether new files may get objects here (`max_create_count` is not 0: an
    /// administrator drains an OST by setting it to 0).
    pub fn takes_new_objects(&self) -> bool {
        self.pool.lock().max_create > 0
    }

    /// `(next, last_created)`, for `osp.*.prealloc_next_id` / `prealloc_last_id`.
    pub fn prealloc(&self) -> (u32, u32) {
        let p = self.pool.lock();
        (p.next, p.last_created)
    }

    /// This proxy's parameters (`osp.<fs>-OSTxxxx-osc-MDTxxxx.<name>`): name, value,
    /// and whether `lctl set_param` may change it.
    pub fn params(&self) -> Vec<(&'static str, String, bool)> {
        let p = self.pool.lock();
        vec![
            ("prealloc_next_id", p.next.to_string(), false),
            ("prealloc_last_id", p.last_created.to_string(), false),
            ("create_count", p.batch.to_string(), true),
            ("max_create_count", p.max_create.to_string(), true),
        ]
    }

    /// Sets parameter `name` with Lustre's ranges (`lproc_osp.c`): `create_count` from
    /// 1 to `max_create_count`, rounded down to a power of two; `max_create_count` 0
    /// (no new objects here) or from [`PRECREATE_MIN`] to [`PRECREATE_MAX`].
    pub fn set_param(&self, name: &str, value: &str) -> Result<(), String> {
        let v: u32 = value
            .trim()
            .parse()
            .map_err(|_| format!("{name}: '{value}' is not a count"))?;
        let mut p = self.pool.lock();
        match name {
            "create_count" => {
                if v == 0 || v > PRECREATE_MAX || v > p.max_create {
                    return Err(format!(
                        "{name}: {v} is out of range (1 to max_create_count, {})",
                        p.max_create
                    ));
                }
                p.batch = 1 << v.ilog2();
                drop(p);
                self.want.notify_one();
            }
            "max_create_count" => {
                if v != 0 && !(PRECREATE_MIN..=PRECREATE_MAX).contains(&v) {
                    return Err(format!(
                        "{name}: {v} is out of range (0, or {PRECREATE_MIN} to {PRECREATE_MAX})"
                    ));
                }
                p.max_create = v;
                p.batch = p.batch.min(v);
                if p.batch == 0 && v != 0 {
                    p.batch = PRECREATE_MIN;
                }
                drop(p);
                self.want.notify_one();
            }
            _ => return Err(format!("{name}: read-only or unknown parameter")),
        }
        Ok(())
    }

    pub fn cached_statfs(&self) -> Option<StatFs> {
        self.statfs.lock().map(|(s, _)| s)
    }

    fn try_take(&self) -> Option<StripeObject> {
        let mut p = self.pool.lock();
        let oid = p.take()?;
        let refill = p.wants_refill();
        let seq = p.seq;
        drop(p);
        if refill {
            self.want.notify_one();
        }
        Some(StripeObject {
            ost_idx: self.ost_idx,
            fid: Fid::new(seq, oid, 0),
        })
    }

    /// Takes one precreated object, waiting up to [`RESERVE_WAIT`] for a refill.
    pub async fn take(&self) -> Result<StripeObject, Errno> {
        if !self.takes_new_objects() {
            // Drained: not even the objects already precreated (Lustre's ENOBUFS).
            return Err(Errno::ENOSPC);
        }
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
    /// `recovered` turns true once the MDT's recovery is over: its replayed creates have
    /// taken back their objects, so the rest may be cleaned.
    pub async fn run(
        self: Arc<Self>,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
        mut recovered: tokio::sync::watch::Receiver<bool>,
    ) {
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
                let over = *recovered.borrow_and_update();
                synced = self.sync_last_id(over).await;
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
    /// The first time, once the MDT's recovery is over (`recovered`), the OST cleans
    /// the orphans first; until then the pool stays empty.
    async fn sync_last_id(&self, recovered: bool) -> bool {
        let seq = self.seq();
        let id = match self
            .import
            .call(&Request::OstGetLastId { seq }, Default::default())
            .await
        {
            Ok((Reply::LastId(id), _)) => id,
            Ok(_) => return false,
            Err(e) => {
                self.reachable.store(false, Ordering::Release);
                tracing::debug!(target: "osp", "OST{:04x}: {e}", self.ost_idx);
                return false;
            }
        };
        self.reachable.store(true, Ordering::Release);
        let cleaned = self.orphans_cleaned.load(Ordering::Acquire)
            || (recovered && self.clean_orphans(seq, id).await);
        if !cleaned {
            return false;
        }
        let mut p = self.pool.lock();
        p.last_created = id;
        if p.next > id + 1 {
            // We handed out ids the OST never created (lost objects): make them now.
            tracing::warn!(target: "osp", "OST{:04x}: LAST_ID {} behind next id {}", self.ost_idx, id, p.next);
        }
        drop(p);
        // Creates that waited for the pool may take what it holds now.
        self.refilled.notify_waiters();
        true
    }

    /// Lustre's orphan cleanup at an MDT's start (`osp_precreate_cleanup_orphans`): the
    /// objects from the pool's next id up to the OST's LAST_ID (`last`) were precreated
    /// and belong to no file this MDT kept, but a power cut may have taken back creates
    /// that had handed them out, and clients may have written them. The pool hands them
    /// out again, so the OST first resets each one written. A range too long for the OST
    /// to reset is skipped instead: the pool goes on past LAST_ID.
    async fn clean_orphans(&self, seq: u64, last: u32) -> bool {
        let from = self.pool.lock().next;
        match self
            .import
            .call(&Request::OstCleanOrphans { seq, from }, Default::default())
            .await
        {
            Ok((Reply::LastId(_), _)) => {}
            Err(RpcError::Errno(Errno::EOVERFLOW)) => {
                tracing::warn!(target: "osp", "OST{:04x}: objects {from}..={last} not reset: new files get objects past them", self.ost_idx);
                let mut p = self.pool.lock();
                p.next = p.next.max(last.saturating_add(1));
            }
            Ok(_) => return false,
            Err(e) => {
                tracing::debug!(target: "osp", "OST{:04x}: orphan cleanup: {e}", self.ost_idx);
                return false;
            }
        }
        self.orphans_cleaned.store(true, Ordering::Release);
        true
    }

    async fn refill(&self) {
        let Some(PrecreateAsk {
            seq,
            last: target,
            asked,
            before,
        }) = self.pool.lock().ask()
        else {
            return;
        };
        if target <= self.pool.lock().last_created {
            return;
        }
        tracing::debug!(target: "osp", "OST{:04x}: precreate {asked} objects, up to {target}", self.ost_idx);
        match self
            .import
            .call(
                &Request::OstPrecreate { seq, last: target },
                Default::default(),
            )
            .await
        {
            Ok((Reply::LastId(id), _)) => {
                self.pool.lock().made(id, asked, before);
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

    /// Gives objects on the OST a new owner (a chown of their file), in requests of at
    /// most [`nacre_rpc::msg::OST_OBJS_MAX`].
    pub async fn set_owner(&self, objs: Vec<Fid>, uid: u32, gid: u32) -> Result<(), Errno> {
        let each = objs.into_iter().map(|o| (self.ost_idx, o));
        for (_, objs) in nacre_rpc::msg::ost_obj_lists(each) {
            self.import
                .call(&Request::OstSetOwner { objs, uid, gid }, Default::default())
                .await
                .map_err(|e| e.errno())?;
        }
        Ok(())
    }

    /// Points objects at the file and stripe that now hold them, with their component's
    /// layout (the OST's half of a layout swap, Lustre's
    /// `lod_obj_stripe_replace_parent_fid`), as LFSCK's repair of an unmatched pair does:
    /// an object whose filter fid names neither the old nor the new parent is left alone.
    /// How many could not be changed (an object without a file needs no change).
    pub async fn replace_parents(&self, objs: Vec<OstRepair>) -> Result<usize, Errno> {
        let mut failed = 0;
        for batch in objs.chunks(nacre_rpc::lfsck::MAX_BATCH) {
            let req = Request::Lfsck(LfsckRequest::OstRepair(batch.to_vec()));
            match self.import.call(&req, Default::default()).await {
                Ok((Reply::Lfsck(LfsckReply::Outcomes(o)), _)) if o.len() == batch.len() => {
                    // An object never written has no file, so no filter fid: its first
                    // write gives it the file's.
                    failed += o
                        .iter()
                        .filter(|o| matches!(o, Outcome::Failed(e) if *e != Errno::ENOENT))
                        .count();
                }
                Ok(_) => return Err(Errno::EPROTO),
                Err(e) => return Err(e.errno()),
            }
        }
        Ok(failed)
    }

    /// Destroys objects on the OST (missing objects count as destroyed), in requests of
    /// at most [`nacre_rpc::msg::OST_OBJS_MAX`].
    pub async fn destroy(&self, objs: Vec<Fid>) -> Result<(), Errno> {
        let each = objs.into_iter().map(|o| (self.ost_idx, o));
        for (_, objs) in nacre_rpc::msg::ost_obj_lists(each) {
            self.import
                .call(&Request::OstDestroy { objs }, Default::default())
                .await
                .map_err(|e| e.errno())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> Pool {
        Pool {
            seq: 0x2_0000_0400,
            next: 1,
            last_created: 0,
            returned: Vec::new(),
            batch: PRECREATE_MIN,
            max_create: PRECREATE_MAX,
            slow: false,
        }
    }

    /// Refills as the OST answers them, taking `per_refill` objects between two.
    fn run(p: &mut Pool, refills: usize, per_refill: u32) -> Vec<u32> {
        let mut asked = Vec::new();
        for _ in 0..refills {
            if let Some(a) = p.ask() {
                asked.push(a.asked);
                p.made(a.last, a.asked, a.before);
            }
            for _ in 0..per_refill {
                if p.take().is_none() {
                    break;
                }
            }
        }
        asked
    }

    #[test]
    fn a_pool_used_slowly_stays_small() {
        let mut p = pool();
        // A few creates between refills never take the pool below a quarter.
        let asked = run(&mut p, 50, 4);
        assert!(asked.iter().all(|&a| a == PRECREATE_MIN), "{asked:?}");
        assert_eq!(p.batch, PRECREATE_MIN);
        assert!(p.last_created <= 50 * 4 + 2 * PRECREATE_MIN);
    }

    #[test]
    fn a_pool_drained_between_refills_doubles_up_to_half_the_max() {
        let mut p = pool();
        let asked = run(&mut p, 20, u32::MAX);
        assert_eq!(&asked[..4], &[32, 64, 128, 256]);
        assert_eq!(*asked.last().unwrap(), PRECREATE_MAX / 2);
        assert!(asked.windows(2).all(|w| w[1] >= w[0]));
        assert_eq!(p.batch, PRECREATE_MAX);
    }

    #[test]
    fn an_ost_that_makes_fewer_brings_create_count_down() {
        let mut p = pool();
        p.batch = 4096;
        let a = p.ask().unwrap();
        p.made(a.before + 100, a.asked, a.before);
        assert_eq!(p.batch, 100);
        assert!(p.slow);
        // Draining the pool does not grow it until a refill keeps up.
        while p.take().is_some() {}
        assert_eq!(p.batch, 100);
        let a = p.ask().unwrap();
        assert_eq!(a.asked, 100);
        p.made(a.last, a.asked, a.before);
        assert!(!p.slow);
    }

    #[test]
    fn max_create_count_zero_stops_refills() {
        let mut p = pool();
        p.max_create = 0;
        p.batch = 0;
        assert_eq!(p.ask(), None);
        p.max_create = 64;
        p.batch = PRECREATE_MIN;
        assert_eq!(p.ask().map(|a| a.asked), Some(32));
    }

    #[test]
    fn given_back_objects_go_first() {
        let mut p = pool();
        let a = p.ask().unwrap();
        p.made(a.last, a.asked, a.before);
        p.returned.push(7);
        assert_eq!(p.take(), Some(7));
        assert_eq!(p.take(), Some(1));
    }
}
