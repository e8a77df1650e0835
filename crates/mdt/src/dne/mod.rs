//! DNE: one namespace over several MDTs.
//!
//! # Placement
//!
//! - Every inode lives on the MDT whose super-sequence holds its FID; MDT0 holds the root.
//! - A name lives with its directory: on the MDT of the directory object that holds it.
//!   The name may point at an inode on another MDT (FID-in-dirent): a *remote directory*
//!   (`lfs mkdir -i`), or a file renamed or hard-linked across MDTs (its inode stays put).
//! - A *striped directory* is a master inode holding the [`Lmv`](nacre_core::lmv::Lmv) plus
//!   one stripe directory object per stripe, each on its MDT. A name lives in the stripe
//!   `lmv.stripe_for(name)` picks (Lustre's hashes, bit for bit), so clients send each
//!   request straight to the stripe's MDT; the master holds no names. A stripe records its
//!   master and index ([`exec::STRIPE_XATTR`]) and links to the master as `[FID]:index`.
//!
//! # Distributed operations
//!
//! An operation that changes more than one MDT is a list of [`DneUpdate`]s, each run by
//! the MDT holding its object. The MDT that received the request coordinates: the MDT
//! where a name appears or disappears (the parent's for mkdir, link and unlink, the target
//! directory's for rename). The steps:
//!
//! 1. **plan**: read what is needed (locally and from other MDTs), allocate FIDs of new
//!    remote objects from sequences the target MDTs granted ([`pool`]);
//! 2. **prepare** on every other MDT, in parallel: each checks its updates, applies the
//!    reversible part and records them in its `DnePending` table, in one transaction,
//!    synced before it answers (as are the commit point and a participant's commit: a
//!    power cut must not take back what the other side already acted on);
//! 3. **commit point**: the coordinator applies its own updates and records the operation
//!    in its `DneCommitted` table, in one transaction. The name change the user sees
//!    happens here, atomically with that record;
//! 4. **commit** on every participant: the irreversible part (destroying a removed inode
//!    or directory) and the pending record goes; then the coordinator drops its record.
//!
//! A failed prepare (ENOTEMPTY, EEXIST, an MDT down ...) aborts: prepared participants undo
//! and nothing is visible. [`exec::CONFLICT`] (the namespace changed between plan and
//! prepare) makes the coordinator plan again, a bounded number of times.
//!
//! # Invariants (what a crash at any point leaves)
//!
//! - A participant's pending record exists exactly while its part is prepared but not
//!   finished. The operation committed iff the coordinator's `DneCommitted` record exists
//!   or existed (it is dropped only after every participant confirmed its commit).
//! - Recovery ([`recovery`]) runs at start and then periodically: a coordinator re-sends
//!   commits for its `DneCommitted` records; a participant asks the coordinator of each
//!   pending record (`DneResolve`) and commits or aborts. The coordinator answers
//!   "committed" if the record exists, "in progress" while the operation is running in
//!   this incarnation, and otherwise "aborted" — final, because operation ids carry the
//!   coordinator's boot epoch and an operation that did not commit before a restart never
//!   will.
//! - Order within an operation keeps every intermediate state safe: a new object exists
//!   before a name points at it; a link is counted before its name appears and
//!   uncounted only after it is gone; a directory is closed to new entries (nlink 0)
//!   before its name goes, and destroyed only after. So no name ever points at nothing,
//!   and after recovery either every part of an operation happened or none did.
//! - Concurrent operations cannot undo each other's work: a name a participant removed at
//!   prepare stays reserved ([`reserve`]) until the operation is decided, so its undo always
//!   finds it free; a link entry (linkEA) being added belongs to one operation (another one
//!   meeting it gets [`exec::CONFLICT`] and plans again); names are inserted strictly, never
//!   "again"; and an aborted link that was an inode's last reference frees the inode.
//! - A rename that moves a directory to another directory takes the file system's rename
//!   lock on MDT0 ([`rename_lock`], Lustre's BFL) from its loop check to its commit, so
//!   renames on different MDTs cannot together make a loop.
//! - What a crash can still leave is only ever what the checker (`nacre_lfsck`) reports
//!   and recovery removes: pending records and the unnamed objects they created.
//!
//! Fault injection points ([`crate::fail`]) sit between the steps: `dne.coord.prepared`,
//! `dne.coord.committed`, `dne.coord.remote_committed`, `dne.part.prepared`,
//! `dne.part.committed`, `dne.part.aborted`.

pub mod exec;
pub mod log;
pub(crate) mod ops;
pub(crate) use ops::CreateRoute;
pub mod pool;
pub mod proxy;
pub mod qos;
mod recovery;
pub mod rename_lock;
pub mod reserve;

use crate::Mdt;
use nacre_core::fid::mdt_of_seq;
use nacre_core::{Errno, Fid, Layout};
use nacre_rpc::conn::ConnConfig;
use nacre_rpc::msg::{DneOpState, FsConfig};
use parking_lot::Mutex;
use proxy::MdtProxy;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use tokio::sync::watch;

/// The QoS chooser's position and the MDTs' free space as last seen (and when).
type QosCache = (qos::QosState, Option<(Instant, Vec<qos::MdtSpace>)>);

/// Remote holders of the rename lock, by (holder MDT, token): what releases each.
type RenameHolders = HashMap<(u32, u64), tokio::sync::oneshot::Sender<()>>;

/// This MDT's DNE state.
pub struct Dne {
    index: u32,
    config: watch::Receiver<FsConfig>,
    conn: ConnConfig,
    proxies: Mutex<HashMap<u32, Arc<MdtProxy>>>,
    pools: tokio::sync::Mutex<HashMap<u32, pool::FidPool>>,
    epoch: AtomicU64,
    next_op: AtomicU64,
    /// Operations this incarnation coordinates that have not decided yet.
    inflight: Mutex<HashMap<u64, watch::Sender<DneOpState>>>,
    qos: Mutex<QosCache>,
    /// The root's default file layout, for MDTs other than MDT0.
    root_layout: Mutex<Option<(Instant, Option<Layout>)>>,
    /// Names removed by prepared operations, held until they are decided.
    pub(crate) reserved: reserve::Reservations,
    /// MDT0's rename lock (Lustre's BFL lock): one directory rename across directories at
    /// a time in the whole file system, so loop checks cannot interleave.
    global_rename: Arc<tokio::sync::Mutex<()>>,
    /// Remote holders of the global rename lock (MDT0), to release or expire.
    rename_holders: Arc<Mutex<RenameHolders>>,
}

impl Dne {
    pub fn new(index: u32, config: watch::Receiver<FsConfig>, conn: ConnConfig) -> Dne {
        Dne {
            index,
            config,
            conn,
            proxies: Mutex::new(HashMap::new()),
            pools: tokio::sync::Mutex::new(HashMap::new()),
            epoch: AtomicU64::new(0),
            next_op: AtomicU64::new(1),
            inflight: Mutex::new(HashMap::new()),
            qos: Mutex::new((qos::QosState { rr_next: index }, None)),
            root_layout: Mutex::new(None),
            reserved: reserve::Reservations::default(),
            global_rename: Arc::new(tokio::sync::Mutex::new(())),
            rename_holders: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// MDTs in the file system's configuration (indexes may register in any order).
    pub fn mdt_count(&self) -> u32 {
        self.config
            .borrow()
            .mdts
            .iter()
            .map(|t| t.name.index + 1)
            .max()
            .unwrap_or(0)
            .max(self.index + 1)
    }

    fn new_op(&self) -> u64 {
        log::op_id(
            self.epoch.load(Ordering::Acquire),
            self.next_op.fetch_add(1, Ordering::Relaxed),
        )
    }
}

impl Mdt {
    /// Whether `fid`'s inode lives on this MDT.
    pub fn is_local(&self, fid: &Fid) -> bool {
        mdt_of_seq(fid.seq).unwrap_or(0) == self.index
    }

    /// The MDT holding `fid`.
    pub fn mdt_of(&self, fid: &Fid) -> u32 {
        mdt_of_seq(fid.seq).unwrap_or(0)
    }

    /// The proxy of MDT `idx` (not this one).
    pub(crate) fn dne_proxy(&self, idx: u32) -> Result<Arc<MdtProxy>, Errno> {
        if idx == self.index || idx >= self.dne.mdt_count() {
            return Err(Errno::EINVAL);
        }
        let mut p = self.dne.proxies.lock();
        Ok(p.entry(idx)
            .or_insert_with(|| {
                let px = MdtProxy::new(idx, self.dne.conn.clone(), self.dne.config.clone());
                tracing::info!(target: "mdt::dne", "{}: set up", px.device_name(&self.fsname, self.index));
                Arc::new(px)
            })
            .clone())
    }

    /// Starts DNE: a new boot epoch (so operation ids of this run are new), then recovery
    /// of operations a previous run left unfinished, in the background.
    pub(crate) async fn dne_start(
        self: &Arc<Self>,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(), Errno> {
        let epoch = self
            .store
            .write(|tx| {
                let k = b"dne.epoch";
                let e = tx
                    .get(nacre_osd::Table::Meta, k)?
                    .and_then(|v| v.try_into().ok())
                    .map(u64::from_le_bytes)
                    .unwrap_or(0)
                    + 1;
                tx.put(nacre_osd::Table::Meta, k, &e.to_le_bytes())?;
                Ok(e)
            })
            .await?;
        self.dne.epoch.store(epoch, Ordering::Release);
        // Names held by operations prepared before a restart stay held.
        let mut v = self.store.read()?;
        for (_, rec) in log::all(&mut v, nacre_osd::Table::DnePending, usize::MAX)? {
            let p = log::decode_pending(&rec)?;
            for (parent, name) in exec::held_names(&p.updates) {
                self.dne.reserved.take(parent, name);
            }
        }
        drop(v);
        tokio::spawn(self.clone().dne_root_layout_loop(shutdown.clone()));
        tokio::spawn(self.clone().dne_recovery_loop(shutdown));
        Ok(())
    }
}
