//! The replay list of an MDC or an OSC (Lustre's `imp_replay_list` in ptlrpc): every
//! modifying request a target answered with a transno above its `last_committed` is kept,
//! with what its reply decided (the FID and layout a create made) or the data it carried
//! (an OST write), until a later reply's `last_committed` covers it. When the target
//! restarts (its instance changes at connect), the list is replayed in transno order
//! before the new connection carries anything else, so an acknowledged change survives a
//! crash of the target as long as this client lives.
//!
//! The list is bounded ([`REPLAY_LIST_MAX`] requests, the OSCs' data together
//! [`KEPT_WRITE_BYTES_MAX`], an MDC's Data-on-MDT writes [`KEPT_DOM_BYTES_MAX`]): when it
//! is full, the client asks the target to commit (a sync, which covers every reply
//! received before it) instead of growing it. A list is not emptied by other traffic when
//! its client goes quiet, so while it holds anything [`ping_while_kept`] asks the target
//! for its `last_committed` every [`KEPT_PING_INTERVAL`]: the list empties at the
//! target's next commit, and a restart of the target is noticed (and replayed to) within
//! its recovery window.
//!
//! Open handles are kept too, from open to close ([`OPEN_LIST_MAX`]): a restarted MDT
//! has none, so each is made again under its number ([`Request::Reopen`]) in the replay,
//! placed after the requests answered before it opened and before those answered after
//! (an uncommitted create is made again before its file is reopened, and an unlink of the
//! open file finds it open and keeps it as an orphan).
//!
//! So are the `fcntl`/`flock` locks this client holds ([`LOCKS_KEPT_MAX`] owners' locks
//! of a file): after the reopens, each is taken again ([`FlockOp::Reclaim`]) through a
//! handle of its owner's, before the MDT lets anyone else ask for a lock. So are the
//! append locks it keeps ([`Request::AppendReclaim`], one per file, through its handle):
//! what it appended under one and has not sent lands before another client reads the end
//! of file.

use bytes::Bytes;
use nacre_core::flock::FileLock;
use nacre_core::{Errno, Fid, TargetKind};
use nacre_rpc::RpcError;
use nacre_rpc::import::{ConnectHook, Import, NewLink};
use nacre_rpc::msg::{
    ClientUuid, Cred, FlockOp, OpenFlags, ReplayOutcome, Reply, Request, WriteGrant,
};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{Notify, watch};

/// Handles kept per owner's locks of a file, as on the MDT.
const OWNER_HANDLES_MAX: usize = 8;

/// Uncommitted requests kept per MDT. An MDT commits every few seconds (its checkpoint),
/// so at nacre's create rate a list rarely holds more than a few thousand; past this the
/// client makes the MDT commit rather than hold more (each entry is a request, up to a
/// 64 KiB xattr value).
pub const REPLAY_LIST_MAX: usize = 8192;

/// Open handles kept per MDT for their replay; past it a handle is not kept (it would not
/// survive a restart of its MDT), with a warning. The MDT's own bound is larger
/// (`nacre_mdt::open::MAX_OPEN_HANDLES`); a process rarely holds more than its file limit.
pub const OPEN_LIST_MAX: usize = 1 << 18;

/// Bytes of written data the OSCs of one client keep together for replay (Lustre's
/// unstable pages). Past it the client asks the OSTs to commit: a writer then goes at the
/// speed of the OSTs' disks rather than of their page cache, as it must, since a write
/// the client could not replay would be lost to a power cut.
pub const KEPT_WRITE_BYTES_MAX: u64 = 128 << 20;

/// Bytes of Data-on-MDT writes one MDC keeps for replay; past it the client asks the MDT
/// to commit. Smaller than the OSCs' bound: DoM holds small files' first bytes, and the
/// MDT commits every few seconds anyway.
pub const KEPT_DOM_BYTES_MAX: u64 = 32 << 20;

/// Owners' locks of a file kept per MDT for their replay; past it an owner's locks of
/// another file are not kept (they would not survive a restart of the MDT), with a
/// warning. The MDT's own bound is larger (`nacre_mdt::flock::MAX_FILE_LOCKS`).
pub const LOCKS_KEPT_MAX: usize = 1 << 16;

/// What the client does with the files whose kept changes an eviction lost.
pub type OnLost = Box<dyn Fn(&[Fid]) + Send + Sync>;

/// The file whose data a kept request changed, for telling its writers that an eviction
/// lost it. A punch names only its object: its truncate is the MDT's to tell.
fn changed_file(req: &Request) -> Option<Fid> {
    match req {
        Request::OstWrite { parent, .. } | Request::OstFallocate { parent, .. } => {
            Some(parent.with_ver(0))
        }
        Request::DomWrite { fid, .. } | Request::Setattr { fid, .. } => Some(*fid),
        _ => None,
    }
}

/// How often an OSC or MDC that keeps anything asks its target for `last_committed`: well
/// inside the recovery window (`recovery_time_soft`, 9 s), so a restarted target hears
/// from it in time.
pub const KEPT_PING_INTERVAL: Duration = Duration::from_secs(1);

struct Kept {
    req: Request,
    /// The request's bulk (an OST write's data).
    bulk: Bytes,
    outcome: Option<ReplayOutcome>,
}

/// An open handle, as it is made again after a restart.
#[derive(Clone)]
struct KeptOpen {
    fid: Fid,
    flags: OpenFlags,
    cred: Cred,
    /// The highest transno answered when it opened: its reopen goes after that replay.
    after: u64,
}

/// One owner's locks of one file, as the MDT holds them.
#[derive(Clone, Debug, Default)]
struct KeptLocks {
    /// The handles the owner took them through (the MDT's close of any gives them back).
    handles: Vec<u64>,
    /// Disjoint and maximal ([`nacre_core::flock::apply`]).
    locks: Vec<FileLock>,
}

/// One step of a replay, in the order the MDT must see them.
enum Step {
    Replay(u64, Request, Bytes, Option<ReplayOutcome>),
    Reopen(u64, KeptOpen),
    /// A lock taken again: its file, owner, a handle of the owner's, the lock.
    Relock(Fid, u64, u64, FileLock),
    /// A kept append lock taken again: its file and handle.
    Reappend(Fid, u64),
}

/// A step sent: a replay's transno, a reopen's handle and file, a lock's file.
enum Sent {
    Replay(u64),
    Reopen(u64, Fid),
    Relock(Fid),
    Reappend(Fid),
}

#[derive(Default)]
struct List {
    /// The MDT instance last connected to (0: none yet).
    instance: u64,
    last_committed: u64,
    /// The highest transno answered so far.
    last_transno: u64,
    kept: BTreeMap<u64, Kept>,
    /// Bytes of bulk in `kept`.
    kept_bytes: u64,
    /// Open handles by number.
    opens: HashMap<u64, KeptOpen>,
    /// Opens not kept because the list was full (warned about once).
    opens_dropped: u64,
    /// Locks by file and owner.
    locks: HashMap<(Fid, u64), KeptLocks>,
    /// Owners' locks not kept because the list was full (warned about once).
    locks_dropped: u64,
    /// The append lock kept of each file, by the handle that keeps it (one of `opens`,
    /// so as bounded).
    appends: HashMap<Fid, u64>,
}

/// One MDC's or OSC's recovery state: its client identity, request numbers and replay
/// list.
pub struct ReplayList {
    pub client: ClientUuid,
    /// An MDT's list or an OST's.
    kind: TargetKind,
    /// Something was kept (wakes [`ping_while_kept`]).
    kept_more: Notify,
    xid: AtomicU64,
    list: Mutex<List>,
    /// How long a recovery request may wait (the MDT answers a replay when its turn comes
    /// and the end of replay when recovery ends).
    timeout: Duration,
    /// Requests replayed, for tests and `mdc.*.import`-style reports.
    pub replayed: AtomicU64,
    /// Handles reopened after a restart.
    pub reopened: AtomicU64,
    /// Locks taken again after a restart.
    pub relocked: AtomicU64,
    /// Told the files whose kept changes an eviction lost ([`ReplayList::on_lost`]).
    on_lost: std::sync::OnceLock<OnLost>,
}

/// Requests the MDC keeps for replay: the namespace changes a client makes, and the
/// layout changes that run again the same way from the same state (a directory's default
/// layout or LMV, components added or deleted, every change of a mirrored file's mirrors
/// or their sync state, a layout swap) or that carry what their first run decided (a
/// layout intent's objects). Layout changes must come back when writes followed them: the
/// OST keeps what a write sent to the mirrors a write intent kept, to the mirrors a split
/// left, to the objects a swap (`lfs migrate`) gave the file; without them a mirror the
/// write missed would be called in sync while it differs, or the file would go back to
/// objects the write never reached. A split's and a swap's old objects are destroyed only
/// once the change is committed, so the replay finds them; a swap's volatile file was
/// committed by the copy's `fsync`. An acknowledged `lfs mirror extend` or `resync` is
/// kept the same way: its mirrors are there, and in sync, after a crash of the MDT (an
/// extend's components come without objects; the resync's layout intent gives them
/// theirs). (An OSC keeps what [`Request::is_ost_replayable`] says.)
pub fn is_replayable(req: &Request) -> bool {
    matches!(
        req,
        Request::Create { .. }
            | Request::Mkdir { .. }
            | Request::Unlink { .. }
            | Request::Rename { .. }
            | Request::Link { .. }
            | Request::Setattr { .. }
            | Request::SetXattr { .. }
            | Request::RemoveXattr { .. }
            | Request::LayoutIntent { .. }
            | Request::SetLayout { .. }
            | Request::SetDefaultLmv { .. }
            | Request::AddComponents { .. }
            | Request::DelComponents { .. }
            | Request::SwapLayouts { .. }
            | Request::Mirror { .. }
    )
}

impl ReplayList {
    /// The list of `client` for a target of `kind`.
    pub fn new(client: ClientUuid, kind: TargetKind, timeout: Duration) -> ReplayList {
        ReplayList {
            client,
            kind,
            kept_more: Notify::new(),
            xid: AtomicU64::new(1),
            list: Mutex::new(List::default()),
            timeout,
            replayed: AtomicU64::new(0),
            reopened: AtomicU64::new(0),
            relocked: AtomicU64::new(0),
            on_lost: std::sync::OnceLock::new(),
        }
    }

    pub fn next_xid(&self) -> u64 {
        self.xid.fetch_add(1, Ordering::Relaxed)
    }

    /// Requests kept now.
    pub fn kept(&self) -> usize {
        self.list.lock().kept.len()
    }

    /// Bytes of data kept now.
    pub fn kept_bytes(&self) -> u64 {
        self.list.lock().kept_bytes
    }

    pub fn is_full(&self) -> bool {
        self.kept() >= REPLAY_LIST_MAX
    }

    /// The highest transno answered so far: a sync sent now commits up to it.
    pub fn last_transno(&self) -> u64 {
        self.list.lock().last_transno
    }

    /// Drops what is committed up to `last_committed`.
    pub fn committed(&self, last_committed: u64) {
        let mut l = self.list.lock();
        if last_committed > l.last_committed {
            l.last_committed = last_committed;
        }
        let lc = l.last_committed;
        // Only what is dropped is counted out: this runs at every answer.
        let rest = l.kept.split_off(&(lc + 1));
        let dropped = std::mem::replace(&mut l.kept, rest);
        l.kept_bytes -= dropped.values().map(|k| k.bulk.len() as u64).sum::<u64>();
    }

    /// Sends `req` (with `bulk`) tracked over `imp`: with this mount's identity and a
    /// request number, and kept when the answer says it is not committed. The answer is
    /// the request's own.
    pub async fn call_tracked(
        &self,
        imp: &Import,
        req: Request,
        bulk: Bytes,
    ) -> Result<(Reply, Bytes), RpcError> {
        let tracked = Request::Tracked {
            client: self.client,
            xid: self.next_xid(),
            req: Box::new(req),
        };
        let (reply, reply_bulk) = imp.call(&tracked, bulk.clone()).await?;
        let Request::Tracked { req, .. } = tracked else {
            unreachable!("built as Tracked above");
        };
        match reply {
            Reply::Tracked {
                transno,
                last_committed,
                reply,
            } => {
                self.answered(*req, bulk, transno, last_committed, &reply);
                Ok((*reply, reply_bulk))
            }
            other => Ok((other, reply_bulk)),
        }
    }

    /// A tracked request's answer: kept when it is not committed yet, with its `bulk`.
    pub fn answered(
        &self,
        mut req: Request,
        bulk: Bytes,
        transno: u64,
        last_committed: u64,
        reply: &Reply,
    ) {
        self.committed(last_committed);
        if transno == 0 || transno <= last_committed {
            return;
        }
        if let Request::OstWrite { grant, .. } = &mut req {
            // The restarted OST promised this connection nothing: a replay takes free space.
            *grant = WriteGrant {
                from_grant: false,
                want: 0,
            };
        }
        let outcome = match (&req, reply) {
            (Request::Create { .. }, Reply::Created { inode, .. }) => Some(ReplayOutcome {
                fid: inode.attr.fid,
                layout: inode.layout.clone(),
            }),
            // An existing file opened: nothing to make again.
            (Request::Create { .. }, _) => return,
            // The objects a write was sent to: its replay gives the file these, not new ones.
            (Request::LayoutIntent { fid, .. }, Reply::Layout(Some(l))) => Some(ReplayOutcome {
                fid: *fid,
                layout: Some(l.clone()),
            }),
            (Request::LayoutIntent { .. }, _) => return,
            _ => None,
        };
        let mut l = self.list.lock();
        l.last_transno = l.last_transno.max(transno);
        l.kept_bytes += bulk.len() as u64;
        if let Some(old) = l.kept.insert(transno, Kept { req, bulk, outcome }) {
            l.kept_bytes -= old.bulk.len() as u64;
        }
        drop(l);
        self.kept_more.notify_one();
    }

    /// Handle `handle` of `fid` opened with `flags` as `cred`: kept until its close.
    pub fn opened(&self, handle: u64, fid: Fid, flags: OpenFlags, cred: &Cred) {
        let mut l = self.list.lock();
        if l.opens.len() >= OPEN_LIST_MAX && !l.opens.contains_key(&handle) {
            if l.opens_dropped == 0 {
                tracing::warn!(target: "client", "more than {OPEN_LIST_MAX} files open on one MDT: later opens will not survive its restart");
            }
            l.opens_dropped += 1;
            return;
        }
        let after = l.last_transno;
        l.opens.insert(
            handle,
            KeptOpen {
                fid,
                flags,
                cred: cred.clone(),
                after,
            },
        );
    }

    /// Sets what the client does with the files an eviction lost changes of (once).
    pub fn on_lost(&self, f: OnLost) {
        let _ = self.on_lost.set(f);
    }

    /// Handle `handle` closed: with it go the locks of every owner that took one through
    /// it, as on the MDT.
    pub fn closed(&self, handle: u64) {
        let mut l = self.list.lock();
        l.opens.remove(&handle);
        if !l.locks.is_empty() {
            l.locks.retain(|_, k| !k.handles.contains(&handle));
        }
        if !l.appends.is_empty() {
            l.appends.retain(|_, h| *h != handle);
        }
    }

    /// Handle `handle` keeps `fid`'s append lock after an append: taken again in a replay
    /// (only a handle the list keeps open can be reopened to take it).
    pub fn append_kept(&self, fid: Fid, handle: u64) {
        let mut l = self.list.lock();
        if l.opens.contains_key(&handle) {
            l.appends.insert(fid, handle);
        }
    }

    /// Handle `handle` gives `fid`'s append lock back.
    pub fn append_released(&self, fid: Fid, handle: u64) {
        let mut l = self.list.lock();
        if l.appends.get(&fid) == Some(&handle) {
            l.appends.remove(&fid);
        }
    }

    /// Append locks kept now.
    pub fn appends_kept(&self) -> usize {
        self.list.lock().appends.len()
    }

    /// The MDT granted `lock` (which may be an unlock) on `fid` to `owner` through
    /// `handle`: kept as the MDT keeps it, with the same rules.
    pub fn locked(&self, fid: Fid, owner: u64, handle: u64, lock: &FileLock) {
        let mut l = self.list.lock();
        let full = l.locks.len() >= LOCKS_KEPT_MAX;
        let k = match l.locks.get_mut(&(fid, owner)) {
            Some(k) => k,
            None if full => {
                if l.locks_dropped == 0 {
                    tracing::warn!(target: "client", "locks of more than {LOCKS_KEPT_MAX} files and owners on one MDT: later ones will not survive its restart");
                }
                l.locks_dropped += 1;
                return;
            }
            None => l.locks.entry((fid, owner)).or_default(),
        };
        let (locks, _) = nacre_core::flock::apply(&k.locks, lock);
        k.locks = locks;
        if !k.handles.contains(&handle) {
            if k.handles.len() >= OWNER_HANDLES_MAX {
                k.handles.remove(0);
            }
            k.handles.push(handle);
        }
        if k.locks.is_empty() {
            l.locks.remove(&(fid, owner));
        }
    }

    /// Every lock of `owner` on `fid` went.
    pub fn unlocked_owner(&self, fid: Fid, owner: u64) {
        self.list.lock().locks.remove(&(fid, owner));
    }

    /// Locks kept now (ranges, over every file and owner).
    pub fn locks_kept(&self) -> usize {
        self.list.lock().locks.values().map(|k| k.locks.len()).sum()
    }

    /// Open handles kept now.
    pub fn open_handles(&self) -> usize {
        self.list.lock().opens.len()
    }

    async fn connect(&self, link: &NewLink<'_>) -> Result<(), RpcError> {
        self.connect_with(|req, bulk| async move { link.call_bulk(&req, bulk, self.timeout).await })
            .await
    }

    /// "MDT" or "OST", for log lines.
    fn target_word(&self) -> &'static str {
        match self.kind {
            TargetKind::Mdt => "MDT",
            _ => "OST",
        }
    }

    /// Connects and, to a restarted MDT, replays: `call` sends one request over the new
    /// connection. The instance is recorded only once the replay is whole (the MDT's
    /// answer to [`Request::ReplayDone`]): a replay cut off by a lost connection or a
    /// timeout is started again on the next connection to the same instance, and the MDT
    /// answers the requests it had already applied without applying them twice.
    async fn connect_with<F, Fut>(&self, call: F) -> Result<(), RpcError>
    where
        F: Fn(Request, Bytes) -> Fut,
        Fut: std::future::Future<Output = Result<Reply, RpcError>>,
    {
        let hello = match self.kind {
            TargetKind::Mdt => Request::MdtConnect {
                client: self.client,
            },
            _ => Request::OstConnect {
                client: self.client,
            },
        };
        let r = call(hello, Bytes::new()).await?;
        let Reply::TargetConnected {
            instance,
            last_committed,
        } = r
        else {
            return Err(RpcError::Errno(Errno::EPROTO));
        };
        self.committed(last_committed);
        let (replays, reopens, steps) = {
            let mut l = self.list.lock();
            if l.instance == 0 || l.instance == instance {
                // The first connect, or the instance this list was replayed to: nothing
                // this MDT has not kept.
                l.instance = instance;
                return Ok(());
            }
            // Replays in transno order; each reopen after the replay of the transno it
            // saw answered last (ties: the replay first).
            let mut steps: Vec<((u64, u8), Step)> = l
                .kept
                .iter()
                .map(|(t, k)| {
                    let step = Step::Replay(*t, k.req.clone(), k.bulk.clone(), k.outcome.clone());
                    ((*t, 0), step)
                })
                .collect();
            steps.extend(
                l.opens
                    .iter()
                    .map(|(h, o)| ((o.after, 1), Step::Reopen(*h, o.clone()))),
            );
            steps.sort_by_key(|(k, _)| *k);
            // Locks last, through a handle of the owner's that is reopened.
            for ((fid, owner), k) in &l.locks {
                let Some(h) = k.handles.iter().rev().find(|h| l.opens.contains_key(h)) else {
                    continue;
                };
                for lock in &k.locks {
                    let step = Step::Relock(*fid, *owner, *h, *lock);
                    steps.push(((u64::MAX, 2), step));
                }
            }
            for (fid, h) in &l.appends {
                if l.opens.contains_key(h) {
                    steps.push(((u64::MAX, 3), Step::Reappend(*fid, *h)));
                }
            }
            (l.kept.len(), l.opens.len(), steps)
        };
        let target = self.target_word();
        tracing::info!(target: "client", "{target} restarted: replaying {replays} uncommitted requests and reopening {reopens} files");
        for (_, step) in steps {
            // The request, and what it was for the count and the log.
            let (req, bulk, sent) = match step {
                Step::Replay(transno, req, bulk, outcome) => (
                    Request::Replay {
                        client: self.client,
                        transno,
                        req: Box::new(req),
                        outcome,
                    },
                    bulk,
                    Sent::Replay(transno),
                ),
                Step::Reopen(handle, o) => (
                    Request::Reopen {
                        client: self.client,
                        handle,
                        fid: o.fid,
                        flags: o.flags,
                        cred: o.cred,
                    },
                    Bytes::new(),
                    Sent::Reopen(handle, o.fid),
                ),
                Step::Relock(fid, owner, handle, lock) => (
                    Request::Flock {
                        fid,
                        handle,
                        owner,
                        node: crate::flock::node_id(),
                        op: FlockOp::Reclaim(lock),
                    },
                    Bytes::new(),
                    Sent::Relock(fid),
                ),
                Step::Reappend(fid, handle) => (
                    Request::AppendReclaim { fid, handle },
                    Bytes::new(),
                    Sent::Reappend(fid),
                ),
            };
            match (call(req, bulk).await, sent) {
                (Ok(_), Sent::Replay(_)) => {
                    self.replayed.fetch_add(1, Ordering::Relaxed);
                }
                (Ok(_), Sent::Reopen(..)) => {
                    self.reopened.fetch_add(1, Ordering::Relaxed);
                }
                (Ok(Reply::Flock { conflict: None }), Sent::Relock(_)) => {
                    self.relocked.fetch_add(1, Ordering::Relaxed);
                }
                (Ok(_), Sent::Relock(fid)) => {
                    tracing::warn!(target: "client", "a lock on {fid} could not be taken again after the MDT restarted: another client holds it");
                }
                (Err(RpcError::Errno(e)), Sent::Relock(fid)) => {
                    tracing::warn!(target: "client", "a lock on {fid} could not be taken again after the MDT restarted: {e}");
                }
                (Ok(_), Sent::Reappend(_)) => {
                    self.relocked.fetch_add(1, Ordering::Relaxed);
                }
                (Err(RpcError::Errno(e)), Sent::Reappend(fid)) if e != Errno::ESTALE => {
                    self.list.lock().appends.remove(&fid);
                    tracing::warn!(target: "client", "the append lock on {fid} could not be taken again after the MDT restarted: {e}");
                }
                (Err(RpcError::Errno(Errno::ESTALE)), _) => return self.evicted(instance),
                (Err(RpcError::Errno(e)), Sent::Replay(transno)) => {
                    tracing::warn!(target: "client", "replay of transno {transno} failed: {e}");
                }
                (Err(RpcError::Errno(e)), Sent::Reopen(handle, fid)) => {
                    tracing::warn!(target: "client", "reopen of {fid} failed: {e}: its open file is lost");
                    self.closed(handle);
                }
                (Err(e), _) => return Err(e),
            }
        }
        match call(
            Request::ReplayDone {
                client: self.client,
            },
            Bytes::new(),
        )
        .await
        {
            Ok(Reply::Recovered { last_committed }) => {
                // Recovery ends with everything replayed committed.
                let mut l = self.list.lock();
                l.kept.clear();
                l.kept_bytes = 0;
                l.instance = instance;
                l.last_committed = last_committed;
                l.last_transno = l.last_transno.max(last_committed);
                Ok(())
            }
            Ok(_) => Err(RpcError::Errno(Errno::EPROTO)),
            Err(RpcError::Errno(Errno::ESTALE)) => self.evicted(instance),
            Err(e) => Err(e),
        }
    }

    /// The MDT did not wait for this client: what it kept is lost, and the list starts
    /// over with this instance.
    fn evicted(&self, instance: u64) -> Result<(), RpcError> {
        let kept = {
            let mut l = self.list.lock();
            l.instance = instance;
            // Its handles are gone with the export, and the locks taken through them.
            l.opens.clear();
            l.locks.clear();
            l.appends.clear();
            l.kept_bytes = 0;
            std::mem::take(&mut l.kept)
        };
        let target = self.target_word();
        tracing::error!(target: "client", "evicted by the {target} (missed its recovery window): {} uncommitted requests lost", kept.len());
        let mut files: Vec<Fid> = kept.values().filter_map(|k| changed_file(&k.req)).collect();
        files.sort_unstable();
        files.dedup();
        if let (false, Some(tell)) = (files.is_empty(), self.on_lost.get()) {
            tell(&files);
        }
        Ok(())
    }
}

/// While `list` keeps anything, asks its OST for `last_committed` every
/// [`KEPT_PING_INTERVAL`] (a tracked ping): what the OST committed is dropped, and a
/// restart of the OST is met by a reconnect, whose hook replays. Ends with `stopping`.
pub async fn ping_while_kept(
    imp: Arc<Import>,
    list: Arc<ReplayList>,
    mut stopping: watch::Receiver<bool>,
) {
    loop {
        while list.kept() == 0 {
            let more = list.kept_more.notified();
            let mut more = std::pin::pin!(more);
            // Registered before the count is read, so a keep in between is not missed.
            more.as_mut().enable();
            if list.kept() > 0 {
                break;
            }
            tokio::select! {
                _ = more => {}
                _ = stopping.changed() => return,
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(KEPT_PING_INTERVAL) => {}
            _ = stopping.changed() => return,
        }
        if *stopping.borrow() {
            return;
        }
        let ping = Request::Tracked {
            client: list.client,
            xid: list.next_xid(),
            req: Box::new(Request::Ping),
        };
        match imp.call(&ping, Bytes::new()).await {
            Ok((Reply::Tracked { last_committed, .. }, _)) => list.committed(last_committed),
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(target: "client", "{}: ping for last_committed: {e}", imp.target())
            }
        }
    }
}

impl ConnectHook for ReplayList {
    fn connected<'a>(
        &'a self,
        link: NewLink<'a>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), RpcError>> + Send + 'a>>
    {
        Box::pin(async move { self.connect(&link).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nacre_core::Fid;
    use nacre_rpc::msg::Cred;

    const CLIENT: ClientUuid = 7;

    fn unlink(name: &str) -> Request {
        Request::Unlink {
            parent: Fid::ROOT,
            name: name.as_bytes().to_vec(),
            dir: false,
            cred: Cred::root(),
        }
    }

    /// A scripted MDT: answers the connect with `instance` and `last_committed` 0, records
    /// each replayed transno and, if `cut_at` names one, times out on it (the connection
    /// lost in the middle of the replay).
    struct FakeMdt {
        instance: u64,
        cut_at: Option<u64>,
        replayed: parking_lot::Mutex<Vec<u64>>,
        /// Replays and reopens in the order they came.
        steps: parking_lot::Mutex<Vec<String>>,
        done: AtomicU64,
    }

    impl FakeMdt {
        fn new(instance: u64, cut_at: Option<u64>) -> Arc<FakeMdt> {
            Arc::new(FakeMdt {
                instance,
                cut_at,
                replayed: Default::default(),
                steps: Default::default(),
                done: AtomicU64::new(0),
            })
        }

        async fn call(self: Arc<Self>, req: Request) -> Result<Reply, RpcError> {
            match req {
                Request::MdtConnect { client } => {
                    assert_eq!(client, CLIENT);
                    Ok(Reply::TargetConnected {
                        instance: self.instance,
                        last_committed: 0,
                    })
                }
                Request::Replay { transno, .. } if Some(transno) == self.cut_at => {
                    Err(RpcError::Timeout {
                        peer: "mdt".into(),
                        secs: 1,
                    })
                }
                Request::Replay { transno, .. } => {
                    self.replayed.lock().push(transno);
                    self.steps.lock().push(format!("replay {transno}"));
                    Ok(Reply::Ok)
                }
                Request::Reopen { handle, .. } => {
                    self.steps.lock().push(format!("reopen {handle}"));
                    Ok(Reply::Ok)
                }
                Request::AppendReclaim { handle, .. } => {
                    self.steps.lock().push(format!("reappend {handle}"));
                    Ok(Reply::Ok)
                }
                Request::ReplayDone { .. } => {
                    self.done.fetch_add(1, Ordering::Relaxed);
                    Ok(Reply::Recovered { last_committed: 12 })
                }
                other => panic!("unexpected request {other:?}"),
            }
        }
    }

    async fn connect(r: &ReplayList, mdt: &Arc<FakeMdt>) -> Result<(), RpcError> {
        r.connect_with(|req, _| mdt.clone().call(req)).await
    }

    /// Three acknowledged, uncommitted requests (transnos 10, 11, 12).
    fn with_three_kept() -> ReplayList {
        let r = ReplayList::new(CLIENT, TargetKind::Mdt, Duration::from_secs(1));
        for (t, n) in [(10, "a"), (11, "b"), (12, "c")] {
            r.answered(unlink(n), Bytes::new(), t, 9, &Reply::Ok);
        }
        assert_eq!(r.kept(), 3);
        r
    }

    #[tokio::test]
    async fn a_first_connect_replays_nothing_and_a_restart_replays_in_transno_order() {
        let r = with_three_kept();
        let first = FakeMdt::new(1, None);
        connect(&r, &first).await.expect("connect");
        assert!(first.replayed.lock().is_empty());
        // A reconnect to the same instance: it kept everything.
        connect(&r, &first).await.expect("reconnect");
        assert!(first.replayed.lock().is_empty());
        assert_eq!(r.kept(), 3);
        let restarted = FakeMdt::new(2, None);
        connect(&r, &restarted)
            .await
            .expect("connect after the restart");
        assert_eq!(*restarted.replayed.lock(), vec![10, 11, 12]);
        assert_eq!(restarted.done.load(Ordering::Relaxed), 1);
        assert_eq!(r.kept(), 0, "recovery commits what was replayed");
    }

    /// A kept append lock is taken again after its handle's reopen, and only while the
    /// handle keeps it: one given back, or whose handle closed, is not; a handle the list
    /// does not hold open cannot keep one.
    #[tokio::test]
    async fn kept_append_locks_are_taken_again_after_their_reopens() {
        let r = ReplayList::new(CLIENT, TargetKind::Mdt, Duration::from_secs(1));
        let (f1, f2, f3) = (
            Fid::new(0x200000401, 1, 0),
            Fid::new(0x200000401, 2, 0),
            Fid::new(0x200000401, 3, 0),
        );
        let w = OpenFlags {
            write: true,
            append: true,
            ..OpenFlags::default()
        };
        for (h, f) in [(5, f1), (6, f2), (7, f3)] {
            r.opened(h, f, w, &Cred::root());
        }
        r.append_kept(f1, 5);
        r.append_kept(f2, 6);
        r.append_kept(f3, 7);
        r.append_kept(Fid::new(0x200000401, 4, 0), 99);
        assert_eq!(r.appends_kept(), 3, "a handle not open keeps nothing");
        r.append_released(f2, 6);
        r.append_released(f3, 5);
        r.closed(7);
        assert_eq!(r.appends_kept(), 1, "released, and closed with its handle");
        connect(&r, &FakeMdt::new(1, None)).await.expect("connect");
        let restarted = FakeMdt::new(2, None);
        connect(&r, &restarted)
            .await
            .expect("connect after the restart");
        let steps = restarted.steps.lock().clone();
        let at = |s: &str| steps.iter().position(|x| x == s);
        assert_eq!(
            steps.iter().filter(|s| s.starts_with("reappend")).count(),
            1,
            "{steps:?}"
        );
        assert!(
            at("reopen 5") < at("reappend 5") && at("reopen 5").is_some(),
            "{steps:?}"
        );
        assert_eq!(r.relocked.load(Ordering::Relaxed), 1);
        // Still kept: the lock is the handle's until it gives it back.
        assert_eq!(r.appends_kept(), 1);
    }

    /// Kept data is counted in as writes are kept and out as commits drop them.
    #[test]
    fn kept_bytes_follow_what_is_kept() {
        let r = ReplayList::new(CLIENT, TargetKind::Ost, Duration::from_secs(1));
        for (t, n) in [(10, 100), (11, 200), (12, 400)] {
            r.answered(unlink("w"), Bytes::from(vec![0; n]), t, 9, &Reply::Ok);
        }
        assert_eq!((r.kept(), r.kept_bytes()), (3, 700));
        r.committed(11);
        assert_eq!((r.kept(), r.kept_bytes()), (1, 400));
        // An answer at or below last_committed is not kept.
        r.answered(unlink("w"), Bytes::from(vec![0; 50]), 11, 11, &Reply::Ok);
        assert_eq!(r.kept_bytes(), 400);
        r.committed(12);
        assert_eq!((r.kept(), r.kept_bytes()), (0, 0));
    }

    /// The connection is lost in the middle of the replay: the next connection to the
    /// same (restarted) instance replays again, up to the end.
    #[tokio::test]
    async fn a_replay_cut_off_is_started_again_on_the_next_connection() {
        let r = with_three_kept();
        connect(&r, &FakeMdt::new(1, None)).await.expect("connect");
        let restarted = FakeMdt::new(2, Some(11));
        assert!(matches!(
            connect(&r, &restarted).await,
            Err(RpcError::Timeout { .. })
        ));
        assert_eq!(*restarted.replayed.lock(), vec![10]);
        assert_eq!(restarted.done.load(Ordering::Relaxed), 0);
        assert_eq!(r.kept(), 3, "nothing is dropped before the replay ends");
        // The same instance answers the next connection (its recovery still waits).
        let again = FakeMdt::new(2, None);
        connect(&r, &again).await.expect("reconnect");
        assert_eq!(*again.replayed.lock(), vec![10, 11, 12]);
        assert_eq!(again.done.load(Ordering::Relaxed), 1);
        assert_eq!(r.kept(), 0);
        // And once it is whole, later connections to that instance replay nothing.
        let later = FakeMdt::new(2, None);
        connect(&r, &later).await.expect("later connect");
        assert!(later.replayed.lock().is_empty());
        assert_eq!(later.done.load(Ordering::Relaxed), 0);
    }

    /// An MDT that ended its recovery without this client says ESTALE: the kept requests
    /// are dropped (with an error in the log) and the client goes on with the new instance.
    #[tokio::test]
    async fn an_evicted_client_drops_its_list_and_goes_on() {
        let r = with_three_kept();
        connect(&r, &FakeMdt::new(1, None)).await.expect("connect");
        let call = |req: Request, _: Bytes| async move {
            match req {
                Request::MdtConnect { .. } => Ok(Reply::TargetConnected {
                    instance: 3,
                    last_committed: 0,
                }),
                _ => Err(RpcError::Errno(Errno::ESTALE)),
            }
        };
        r.connect_with(call).await.expect("connect");
        assert_eq!(r.kept(), 0);
        let same = FakeMdt::new(3, None);
        connect(&r, &same).await.expect("reconnect");
        assert!(same.replayed.lock().is_empty());
    }

    /// An eviction tells the client which files' kept writes it lost (once each, by the
    /// file's FID, whatever stripe wrote them); requests that change no file's data tell
    /// nothing.
    #[tokio::test]
    async fn an_eviction_names_the_files_whose_writes_it_lost() {
        let r = ReplayList::new(CLIENT, TargetKind::Ost, Duration::from_secs(1));
        let told = Arc::new(Mutex::new(Vec::new()));
        let t = told.clone();
        r.on_lost(Box::new(move |files| t.lock().extend_from_slice(files)));
        let file = Fid::new(0x200000400, 7, 0);
        let write = |stripe: u32| Request::OstWrite {
            obj: Fid::new(0x100010000, stripe + 1, 0),
            parent: file.with_ver(stripe),
            offset: 0,
            cksum: None,
            grant: WriteGrant::default(),
            layout: None,
        };
        let punch = Request::OstPunch {
            obj: Fid::new(0x100010000, 9, 0),
            size: 0,
        };
        for (transno, req) in [(10, write(0)), (11, write(1)), (12, punch)] {
            r.answered(req, Bytes::from_static(b"data"), transno, 9, &Reply::Ok);
        }
        let first = |req: Request, _: Bytes| async move {
            match req {
                Request::OstConnect { .. } => Ok(Reply::TargetConnected {
                    instance: 1,
                    last_committed: 9,
                }),
                other => panic!("unexpected {other:?}"),
            }
        };
        r.connect_with(first).await.expect("connect");
        assert!(told.lock().is_empty());
        let evicting = |req: Request, _: Bytes| async move {
            match req {
                Request::OstConnect { .. } => Ok(Reply::TargetConnected {
                    instance: 2,
                    last_committed: 0,
                }),
                _ => Err(RpcError::Errno(Errno::ESTALE)),
            }
        };
        r.connect_with(evicting).await.expect("connect");
        assert_eq!(*told.lock(), vec![file]);
        assert_eq!((r.kept(), r.kept_bytes()), (0, 0));
    }

    /// Open handles are reopened after a restart, each between the replays answered
    /// before and after it opened; a closed one is not.
    #[tokio::test]
    async fn open_handles_are_reopened_between_the_replays_around_their_open() {
        let r = ReplayList::new(CLIENT, TargetKind::Mdt, Duration::from_secs(1));
        let flags = nacre_rpc::msg::OpenFlags::default();
        let f = Fid::new(0x200000401, 1, 0);
        r.opened(100, f, flags, &Cred::root());
        r.answered(unlink("a"), Bytes::new(), 10, 9, &Reply::Ok);
        r.opened(101, f, flags, &Cred::root());
        r.answered(unlink("b"), Bytes::new(), 11, 9, &Reply::Ok);
        r.opened(102, f, flags, &Cred::root());
        r.opened(103, f, flags, &Cred::root());
        r.closed(103);
        assert_eq!(r.open_handles(), 3);
        connect(&r, &FakeMdt::new(1, None)).await.expect("connect");
        let restarted = FakeMdt::new(2, None);
        connect(&r, &restarted)
            .await
            .expect("connect after the restart");
        assert_eq!(
            *restarted.steps.lock(),
            vec![
                "reopen 100",
                "replay 10",
                "reopen 101",
                "replay 11",
                "reopen 102"
            ]
        );
        assert_eq!(r.reopened.load(Ordering::Relaxed), 3);
        // Kept until closed: a second restart reopens them again.
        assert_eq!((r.kept(), r.open_handles()), (0, 3));
        let again = FakeMdt::new(3, None);
        connect(&r, &again)
            .await
            .expect("connect after a second restart");
        assert_eq!(again.steps.lock().len(), 3);
    }
}
