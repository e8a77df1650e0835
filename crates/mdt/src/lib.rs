//! The metadata target: Lustre's mdt (request handling), mdd (namespace logic), lod (layout
//! policy) and osp (OST proxies), over the store in [`nacre_osd::MdStore`].
//!
//! - [`mdd`]: every namespace change as one transaction;
//! - [`perm`]: whether the caller may (mdd's permission room), checked by every operation;
//! - [`squash`]: root squash (`root_squash`, `nosquash_nids`);
//! - [`lod`]: which layout and which OST objects a new file gets;
//! - [`osp`]: precreated object pools and object destruction on each OST;
//! - [`open`]: open handles, for open-unlinked files and exact sizes;
//! - [`append`]: one client appending to a file at a time (`O_APPEND` across clients);
//! - [`callback`]: telling clients that hold a file open to drop their cache of it;
//! - [`recovery`]: transnos, `last_rcvd` and replay after a restart;
//! - [`exports`]: which client each connection is, so none acts in another's name;
//! - [`records`]: how inodes and entries are encoded in the store;
//! - [`dne`]: the namespace over several MDTs (remote and striped directories, operations
//!   across MDTs and their recovery); [`fail`]: fault-injection points.
//!
//! This module turns requests into those operations and owns the MDT's background work
//! (precreation, the unlink log, cleaning up after clients that went away, checking its
//! storage). An MDT whose storage failed (see [`nacre_osd::health`]) answers every request
//! with EIO until it is restarted.

pub mod append;
pub mod callback;
pub mod dne;
pub mod dom;
pub mod ec;
pub mod exports;
pub mod fail;
pub mod flock;
pub mod flr;
pub mod layout_change;
pub mod lod;
pub mod mdd;
pub mod open;
pub mod osp;
pub mod owner;
pub mod perm;
pub mod records;
pub mod recovery;
pub mod resettle;
pub mod settle;
pub mod squash;

use bytes::Bytes;
use lod::Lod;
use mdd::{CreateArgs, Created, Removed};
use nacre_core::layout::{LCME_FL_INIT, Pattern};
use nacre_core::{Errno, Fid, FileKind, Layout, TargetName, Timespec};
use nacre_osd::{Health, MdStore, MdStoreConfig, ObjStore, ObjStoreConfig, ReadView, Table};
use nacre_rpc::Import;
use nacre_rpc::conn::ConnConfig;
use nacre_rpc::lfsck::LfsckService;
use nacre_rpc::msg::{
    Cred, Dirent, FlockOp, FsConfig, InodeInfo, LayoutRequest, MAX_GROUPS, MirrorOp, OpenFlags,
    Reply, Request, StatFs,
};
use nacre_rpc::server::{RequestCtx, Service};
use open::{OpenHandle, OpenTable};
use osp::Osp;
use records::Inode;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

/// Entries one readdir reply carries at most.
pub const READDIR_MAX: u32 = 1024;
/// Unlink-log records destroyed per pass.
const LLOG_BATCH: usize = 1024;
/// How long the unlink log gathers records after a kick before a pass: a pass per unlink
/// costs a destroy RPC and a commit each, and `rm -r` removes thousands a second.
const LLOG_GATHER: Duration = Duration::from_millis(20);
/// How long a pass of the unlink log with no backlog waits for the journal to commit its
/// records on its own (a sync or a checkpoint) before it forces a sync: objects go only
/// once the change that dropped them from a layout is durable, and their space comes back
/// within moments.
const LLOG_COMMIT_WAIT: Duration = Duration::from_secs(1);

#[derive(Clone, Debug)]
pub struct MdtConfig {
    pub fsname: String,
    pub index: u32,
    /// The target directory (the store lives in `<dir>/mdstore`).
    pub dir: PathBuf,
    pub store: MdStoreConfig,
    /// How this MDT authenticates to OSTs.
    pub conn: ConnConfig,
    /// The health of the target directory's storage, shared with the stores in it.
    pub health: Arc<Health>,
}

#[derive(Debug, thiserror::Error)]
pub enum MdtError {
    #[error(transparent)]
    Store(#[from] nacre_osd::mdstore::StoreError),
    #[error("MDT{index:04x}: {reason}")]
    Setup { index: u32, reason: String },
}

pub struct Mdt {
    pub index: u32,
    /// Object index entries rebuilt at start because the index was lost (0: it was not).
    pub oi_rebuilt: u64,
    pub fsname: String,
    dir: PathBuf,
    store: MdStore,
    /// Data-on-MDT objects.
    dom: Arc<ObjStore>,
    /// Checksum scrub of the Data-on-MDT objects.
    dom_scrub: Arc<nacre_osd::scrub::Scrub>,
    /// DoM write bulks refused because they arrived damaged.
    pub(crate) dom_bulk_checksum_errors: std::sync::atomic::AtomicU64,
    /// DoM objects changed since the store's last commit synced them (see
    /// [`dom::DomCommit`]).
    dom_commit: Arc<dom::DomCommit>,
    /// `mdt.*.dom_read_open`: send small DoM files with read-only opens.
    pub dom_read_open: std::sync::atomic::AtomicBool,
    /// `mdt.*.root_squash` and `mdt.*.nosquash_nids`.
    pub squash: squash::RootSquash,
    lod: Lod,
    opens: OpenTable,
    pub callbacks: callback::Callbacks,
    pub appends: append::AppendLocks,
    /// `fcntl` and `flock` locks across clients ([`flock`]).
    pub flocks: flock::FileLocks,
    llog_kick: Notify,
    /// Files whose exact size is unknown though nobody writes them ([`resettle`]).
    resettle: resettle::Resettle,
    /// Files whose last writer closed, to settle ([`settle`]).
    settles: settle::SettleQueue,
    /// A chown wrote an owner record ([`owner`]).
    owner_kick: Notify,
    shutdown: watch::Sender<bool>,
    dne: dne::Dne,
    /// The checker, attached once the MDT has started ([`Mdt::set_lfsck`]).
    lfsck: std::sync::OnceLock<Arc<dyn LfsckService>>,
    /// Replay recovery after a restart, and the clients' records.
    pub recovery: recovery::Recovery,
    /// Answers to the clients' tracked requests, for their resends.
    pub replies: recovery::ReplyData,
    /// Which client uuid each connection proved.
    pub exports: exports::Exports,
    /// Passing a file's owner to its OST objects, one file at a time.
    pub owner_locks: owner::OwnerLocks,
}

fn now() -> Timespec {
    Timespec::now()
}

impl Mdt {
    /// Opens the MDT's store (formatting the root on MDT0 the first time), connects to the
    /// OSTs named in `config`, and starts the background tasks.
    pub async fn start(
        cfg: MdtConfig,
        config: watch::Receiver<FsConfig>,
    ) -> Result<Arc<Mdt>, MdtError> {
        let store = MdStore::open(
            &nacre_osd::mdstore::store_dir(&cfg.dir),
            cfg.store.clone(),
            cfg.health.clone(),
        )?;
        let setup = |reason: String| MdtError::Setup {
            index: cfg.index,
            reason,
        };
        let converted = mdd::upgrade_records(&store)
            .await
            .map_err(|e| setup(format!("cannot convert inode records: {e}")))?;
        if converted > 0 {
            tracing::info!(target: "mdt", "MDT{:04x}: {converted} inode records converted to the current format (links in the links table)", cfg.index);
        }
        // Made here on first start, one level below the target directory (never above).
        let dom_dir = cfg.dir.join("dom");
        match nacre_osd::private_dir_builder().create(&dom_dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err(setup(format!("cannot make {}: {e}", dom_dir.display())));
            }
            _ => {}
        }
        let dom = ObjStore::open(&dom_dir, ObjStoreConfig::default(), cfg.health.clone())
            .map_err(|e| setup(format!("cannot open the Data-on-MDT objects: {e}")))?;
        let moved = mdd::upgrade_oi(&store)
            .await
            .map_err(|e| setup(format!("cannot build the object index: {e}")))?;
        if moved > 0 {
            tracing::info!(target: "mdt", "MDT{:04x}: {moved} inodes moved under local inode numbers (object index built)", cfg.index);
        }
        let oi_rebuilt = mdd::rebuild_lost_oi(&store)
            .await
            .map_err(|e| setup(format!("cannot rebuild the object index: {e}")))?;
        if oi_rebuilt > 0 {
            tracing::warn!(target: "mdt", "MDT{:04x}: the object index was empty: rebuilt {oi_rebuilt} entries from the inodes", cfg.index);
        }
        if cfg.index == 0 {
            store
                .write(|tx| mdd::format_root(tx, now()))
                .await
                .map_err(|e| setup(format!("cannot create the root directory: {e}")))?;
        }
        let (recorded, replies) = store
            .read()
            .and_then(|v| {
                let recorded = recovery::recorded_clients(&v)?;
                let replies = recovery::ReplyData::load(&v, &recorded)?;
                Ok((recorded, replies))
            })
            .map_err(|e| setup(format!("cannot read the client records: {e}")))?;
        let recovery = recovery::Recovery::new(recorded, store.last_committed());
        let (shutdown, sd_rx) = watch::channel(false);
        dom.set_name(&format!("{}-MDT{:04x}-dom", cfg.fsname, cfg.index));
        let dom = Arc::new(dom);
        let dom_commit = dom::DomCommit::install(&store, &dom)
            .map_err(|e| setup(format!("cannot tie DoM data to the store's commits: {e}")))?;
        let mdt = Arc::new(Mdt {
            index: cfg.index,
            fsname: cfg.fsname.clone(),
            dir: cfg.dir.clone(),
            store,
            dom_scrub: nacre_osd::scrub::Scrub::new(dom.clone()),
            dom_bulk_checksum_errors: std::sync::atomic::AtomicU64::new(0),
            dom_commit,
            dom,
            dom_read_open: std::sync::atomic::AtomicBool::new(true),
            squash: squash::RootSquash::default(),
            lod: Lod::new(Vec::new()),
            opens: OpenTable::new(),
            callbacks: callback::Callbacks::default(),
            appends: append::AppendLocks::default(),
            flocks: flock::FileLocks::default(),
            llog_kick: Notify::new(),
            resettle: resettle::Resettle::default(),
            settles: settle::SettleQueue::default(),
            owner_kick: Notify::new(),
            shutdown,
            dne: dne::Dne::new(cfg.index, config.clone(), cfg.conn.clone()),
            lfsck: std::sync::OnceLock::new(),
            oi_rebuilt,
            recovery,
            replies,
            exports: exports::Exports::default(),
            owner_locks: owner::OwnerLocks::default(),
        });
        let cc = cfg.conn.clone();
        mdt.add_osts(&config, &cc, &sd_rx)
            .await
            .map_err(|e| setup(format!("cannot set up OST pools: {e}")))?;
        if !mdt.recovery.is_recovering() {
            // Otherwise after the recovery: its clients reopen what they hold first.
            mdt.clean_orphans().await;
        }
        mdt.dne_start(sd_rx.clone())
            .await
            .map_err(|e| setup(format!("cannot start DNE: {e}")))?;
        tokio::spawn(cfg.health.clone().monitor(sd_rx.clone()));
        tokio::spawn(mdt.clone().llog_loop(sd_rx.clone()));
        tokio::spawn(mdt.clone().resettle_loop(sd_rx.clone()));
        tokio::spawn(mdt.clone().settle_loop(sd_rx.clone()));
        tokio::spawn(mdt.clone().owner_loop(sd_rx.clone()));
        // Scrub reports name files by path, which this MDT (or another) resolves.
        let me = Arc::downgrade(&mdt);
        mdt.dom_scrub.set_resolver(Arc::new(move |fid| {
            let me = me.clone();
            Box::pin(async move {
                let m = me.upgrade()?;
                let p = m.dne_fid2path(fid).await.ok()?;
                let p = String::from_utf8_lossy(&p).into_owned();
                Some(if p.starts_with('/') {
                    p
                } else {
                    format!("/{p}")
                })
            })
        }));
        tokio::spawn(mdt.dom_scrub.clone().run(sd_rx.clone()));
        if mdt.recovery.is_recovering() {
            tracing::info!(target: "mdt", "{}-MDT{:04x}: in recovery, waiting for its clients", cfg.fsname, cfg.index);
            tokio::spawn(mdt.clone().recover(sd_rx.clone()));
        }
        tokio::spawn(mdt.clone().follow_osts(config, cc, sd_rx));
        Ok(mdt)
    }

    /// Creates the proxy (and its data sequence) of every OST in `config` not yet known,
    /// and takes the configuration's OST pools.
    async fn add_osts(
        &self,
        config: &watch::Receiver<FsConfig>,
        conn: &ConnConfig,
        shutdown: &watch::Receiver<bool>,
    ) -> Result<(), Errno> {
        let osts: Vec<TargetName> = {
            let c = config.borrow();
            self.lod.set_pools(&c.pools);
            c.osts.iter().map(|t| t.name).collect()
        };
        for t in osts {
            let idx = t.index;
            if (idx as usize) < self.lod.ost_count() {
                continue;
            }
            if idx as usize != self.lod.ost_count() {
                // Wait for the lower indices to register first.
                break;
            }
            let mdt_idx = self.index;
            let (seq, next) = self
                .store
                .write(move |tx| {
                    let kseq = format!("osp.{idx}.seq").into_bytes();
                    let knext = format!("osp.{idx}.next").into_bytes();
                    let seq = match tx.get(Table::Meta, &kseq)? {
                        Some(v) => u64::from_le_bytes(v.try_into().map_err(|_| Errno::EIO)?),
                        None => {
                            let s = mdd::alloc_seq(tx, mdt_idx)?;
                            tx.put(Table::Meta, &kseq, &s.to_le_bytes())?;
                            tx.put(
                                Table::Fld,
                                &s.to_be_bytes(),
                                format!("OST{idx:04x}").as_bytes(),
                            )?;
                            s
                        }
                    };
                    let next = match tx.get(Table::Meta, &knext)? {
                        Some(v) => u32::from_le_bytes(v.try_into().map_err(|_| Errno::EIO)?),
                        None => 1,
                    };
                    Ok((seq, next))
                })
                .await?;
            let import = Arc::new(Import::new(t, conn.clone(), config.clone()));
            let osp = Osp::new(idx, import, seq, next);
            tokio::spawn(
                osp.clone()
                    .run(shutdown.clone(), self.recovery.ended_signal()),
            );
            self.lod.add_osp(osp);
            tracing::info!(target: "mdt", "MDT{:04x}: using OST{idx:04x}", self.index);
        }
        Ok(())
    }

    /// Adds OSTs that join later (a cluster whose OSTs start after the MDT) and follows
    /// pool changes.
    async fn follow_osts(
        self: Arc<Self>,
        mut config: watch::Receiver<FsConfig>,
        conn: ConnConfig,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                r = config.changed() => if r.is_err() { return },
                _ = shutdown.changed() => return,
            }
            let cur = config.clone();
            if let Err(e) = self.add_osts(&cur, &conn, &shutdown).await {
                tracing::warn!(target: "mdt", "MDT{:04x}: {e}", self.index);
            }
        }
    }

    pub fn store(&self) -> &MdStore {
        &self.store
    }

    /// The health of this MDT's storage; its failure and reason, once failed.
    pub fn health(&self) -> &Arc<Health> {
        self.store.health()
    }

    /// `mdt.*.health_check`: `healthy` or `NOT HEALTHY: reason`.
    pub fn health_check(&self) -> String {
        self.health().status()
    }

    pub fn lod(&self) -> &Lod {
        &self.lod
    }

    pub fn dom_store(&self) -> &Arc<ObjStore> {
        &self.dom
    }

    pub fn dom_scrub(&self) -> &Arc<nacre_osd::scrub::Scrub> {
        &self.dom_scrub
    }

    /// DoM write bulks refused because they arrived damaged.
    pub fn dom_bulk_checksum_errors(&self) -> u64 {
        self.dom_bulk_checksum_errors
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn info_of(&self, ino: Inode) -> Result<InodeInfo, Errno> {
        self.info(ino)
    }

    pub(crate) fn kick_llog(&self) {
        self.llog_kick.notify_one();
    }

    pub(crate) fn register_open(&self, h: OpenHandle) -> Result<u64, Errno> {
        self.opens.open(h).ok_or(Errno::ENFILE)
    }

    pub(crate) fn opens_table(&self) -> &OpenTable {
        &self.opens
    }

    pub(crate) fn writers_of(&self, fid: &Fid) -> u32 {
        self.opens.writers(fid)
    }

    pub fn target(&self) -> TargetName {
        TargetName::mdt(self.index)
    }

    /// Stops background work and checkpoints the store (a running check saves where it
    /// was first).
    pub async fn stop(&self) {
        if let Some(l) = self.lfsck.get() {
            l.clone().stopping().await;
        }
        let _ = self.shutdown.send(true);
        self.store.close().await;
    }

    /// Attaches the checker; requests for it go there from now on.
    pub fn set_lfsck(&self, l: Arc<dyn LfsckService>) {
        if self.lfsck.set(l).is_err() {
            tracing::warn!(target: "mdt", "MDT{:04x}: a checker is already attached", self.index);
        }
    }

    /// Becomes true when the MDT stops.
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// MDTs of the file system.
    pub fn mdt_count(&self) -> u32 {
        self.dne.mdt_count()
    }

    /// This MDT's connection to MDT `idx`.
    pub fn mdt_proxy(&self, idx: u32) -> Result<Arc<dne::proxy::MdtProxy>, Errno> {
        self.dne_proxy(idx)
    }

    /// Whether a client holds `fid` open.
    pub fn is_open(&self, fid: &Fid) -> bool {
        self.opens.is_open(fid)
    }

    /// Whether a distributed operation in flight holds the name `parent/name`.
    pub fn name_reserved(&self, parent: &Fid, name: &[u8]) -> bool {
        self.dne.reserved.holds(parent, name)
    }

    /// The path of `fid` from the root, through every MDT.
    pub async fn fid2path(&self, fid: Fid) -> Result<Vec<u8>, Errno> {
        self.dne_fid2path(fid).await
    }

    /// Undoes what this MDT prepared for operation `op` of MDT `coord` (an operation
    /// that can never be decided: its coordinator is not part of the file system).
    pub async fn abort_prepared(self: &Arc<Self>, coord: u32, op: u64) -> Result<(), Errno> {
        self.dne_participant_abort(coord, op).await
    }

    /// Keeps the committed record of `op` for participants `left` only (drops it when
    /// none is left).
    pub async fn narrow_committed(&self, op: u64, left: Vec<u32>) {
        self.dne_forget_or_keep(op, left).await
    }

    /// Runs `updates` as a distributed operation this MDT coordinates (LFSCK moves a
    /// name to the stripe it hashes to this way), again while it meets a name another
    /// operation holds or a namespace changing under it, as clients' operations are.
    pub async fn run_distributed(
        self: &Arc<Self>,
        updates: Vec<nacre_rpc::msg::DneUpdate>,
    ) -> Result<(), Errno> {
        dne::ops::retry_conflicts(|| self.dne_run(updates.clone())).await
    }

    /// The OST objects of removed files wait in the unlink log: destroy them now.
    pub fn kick_unlink_log(&self) {
        self.llog_kick.notify_one();
    }

    fn view(&self) -> Result<ReadView, Errno> {
        self.store.read()
    }

    /// What a reply tells of an inode. Fails when its DoM data cannot be read: a size
    /// from a store in trouble would be a wrong size.
    fn info(&self, ino: Inode) -> Result<InodeInfo, Errno> {
        let fid = ino.fid();
        let mut attr = ino.attr;
        let trusted = self.opens.size_trusted(&fid, ino.lsom_valid);
        if !trusted
            && ino.layout.as_ref().is_some_and(|l| l.has_ost_objects())
            && self.opens.needs_resettle(&fid, ino.lsom_valid)
        {
            // Glimpsed now; settled in the background so the next stat needs no glimpse.
            self.resettle.push(fid);
        }
        let size_authoritative = match &ino.layout {
            None => true,
            Some(l) => {
                // A DoM-only file's size is its DoM object's, here and exact; with OST
                // objects too, the stored size counts only when trusted.
                let dom_only = if trusted && l.has_ost_objects() {
                    false
                } else {
                    dom::merge_into(&self.dom, l, &mut attr)?
                };
                dom_only || !l.has_ost_objects() || trusted
            }
        };
        Ok(InodeInfo {
            attr,
            layout: ino.layout,
            lmv: ino.lmv,
            size_authoritative,
        })
    }

    /// Orphans of a previous run that no client reopened in recovery: nobody can hold
    /// them open any more.
    async fn clean_orphans(&self) {
        let held = self.opens.open_fids();
        let res = self
            .store
            .write(move |tx| {
                let orphans = tx.range(Table::Orphans, &[], &[0xff; 17], usize::MAX)?;
                let mut n = 0;
                for (k, _) in orphans {
                    let fid = Fid::from_bytes(&k).ok_or(Errno::EIO)?;
                    if held.contains(&fid) {
                        continue;
                    }
                    match mdd::get_inode(tx, &fid) {
                        Ok(ino) => {
                            mdd::destroy_inode(tx, &ino)?;
                        }
                        Err(_) => {
                            tx.delete(Table::Orphans, &k)?;
                        }
                    }
                    n += 1;
                }
                Ok(n)
            })
            .await;
        match res {
            Ok(0) => {}
            Ok(n) => {
                tracing::info!(target: "mdt", "MDT{:04x}: removed {n} open-unlinked files of the previous run", self.index)
            }
            Err(e) => {
                tracing::warn!(target: "mdt", "MDT{:04x}: orphan cleanup failed: {e}", self.index)
            }
        }
        self.llog_kick.notify_one();
    }

    /// Returns once every unlink-log record read so far is on stable storage. A pass
    /// with a backlog (a full batch, as under `rm -r`) forces a sync at once, one per
    /// [`LLOG_BATCH`] records, so destroys keep up with removes; a smaller one waits for
    /// the journal's own commit up to [`LLOG_COMMIT_WAIT`], then forces it.
    async fn llog_committed(&self, backlog: bool) -> Result<(), Errno> {
        // Every record a view showed was written at or before this transaction.
        let seen = self.store.last_transno();
        if self.store.last_committed() >= seen {
            return Ok(());
        }
        if !backlog
            && tokio::time::timeout(LLOG_COMMIT_WAIT, self.store.committed_through(seen))
                .await
                .is_ok()
        {
            return Ok(());
        }
        self.store.sync().await
    }

    /// Destroys OST objects of removed files, then drops their log records.
    async fn llog_loop(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = self.llog_kick.notified() => {
                    tokio::select! {
                        _ = tokio::time::sleep(LLOG_GATHER) => {}
                        _ = shutdown.changed() => return,
                    }
                }
                _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                _ = shutdown.changed() => return,
            }
            while let Ok(recs) = self
                .view()
                .and_then(|v| v.range(Table::Llog, &[], &[0xff; 9], LLOG_BATCH))
            {
                if recs.is_empty() {
                    break;
                }
                // As Lustre's OSP sends only committed llog records: a power cut could
                // take back the unlink, the swap or the truncate that wrote a record, and
                // the file would come back without its objects.
                if let Err(e) = self.llog_committed(recs.len() == LLOG_BATCH).await {
                    tracing::warn!(target: "mdt", "MDT{:04x}: destroys deferred, the journal did not sync: {e}", self.index);
                    break;
                }
                let mut by_ost: std::collections::BTreeMap<u32, Vec<Fid>> = Default::default();
                let mut done_keys = Vec::new();
                for (k, v) in &recs {
                    let Some((owner, objs)) = mdd::decode_llog(v) else {
                        done_keys.push(k.clone());
                        continue;
                    };
                    // A file reopened by FID in the window of its unlink keeps its data.
                    if self.opens.is_open(&owner) {
                        continue;
                    }
                    for o in objs {
                        by_ost.entry(o.ost_idx).or_default().push(o.fid);
                    }
                    done_keys.push(k.clone());
                }
                let mut failed = false;
                for (ost, fids) in by_ost {
                    if ost == mdd::LLOG_DOM_OBJECT {
                        if let Err(e) = self.dom_destroy(fids).await {
                            tracing::warn!(target: "mdt", "destroying Data-on-MDT objects: {e}");
                            failed = true;
                        }
                        continue;
                    }
                    let Some(osp) = self.lod.osp(ost) else {
                        continue;
                    };
                    if let Err(e) = osp.destroy(fids).await {
                        tracing::debug!(target: "mdt", "destroy on OST{ost:04x} deferred: {e}");
                        failed = true;
                    }
                }
                if failed {
                    // Keep the records; a later pass retries the whole batch (destroy is idempotent).
                    break;
                }
                let n = done_keys.len();
                if self
                    .store
                    .write(move |tx| {
                        for k in done_keys {
                            tx.delete(Table::Llog, &k)?;
                        }
                        Ok(())
                    })
                    .await
                    .is_err()
                    || n < LLOG_BATCH
                {
                    break;
                }
            }
        }
    }

    // statvfs's field types differ between targets (u32 or u64): the casts are needed there.
    #[allow(clippy::unnecessary_cast)]
    fn statfs(&self) -> Result<StatFs, Errno> {
        let st = nacre_osd::objstore::statvfs(&self.dir)?;
        let frsize = st.f_frsize as u64;
        let used = self.view()?.count(Table::Inodes)?;
        Ok(StatFs {
            bsize: 4096,
            blocks: st.f_blocks as u64 * frsize / 4096,
            bfree: st.f_bfree as u64 * frsize / 4096,
            bavail: st.f_bavail as u64 * frsize / 4096,
            files: used + st.f_ffree as u64,
            ffree: st.f_ffree as u64,
            namelen: mdd::NAME_MAX as u32,
        })
    }

    /// A create; with `replay`, the replay of one answered before a crash, which makes the
    /// same FID with the same layout (and opens nothing: the handle died with the MDT).
    async fn create(
        &self,
        ctx: &RequestCtx,
        req: Request,
        replay: Option<nacre_rpc::msg::ReplayOutcome>,
    ) -> Result<Reply, Errno> {
        let Request::Create {
            parent,
            name,
            mode,
            rdev,
            cred,
            symlink,
            layout,
            open,
            exclusive,
        } = req
        else {
            return Err(Errno::EPROTO);
        };
        let open = if replay.is_some() { None } else { open };
        mdd::check_name(&name)?;
        let kind = FileKind::from_mode(mode).ok_or(Errno::EINVAL)?;
        if symlink.is_some() != (kind == FileKind::Symlink) {
            return Err(Errno::EINVAL);
        }
        let mut v = self.view()?;
        let pino = mdd::get_inode(&mut v, &parent)?;
        if !pino.attr.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        perm::may_lookup(&mut v, &cred, &pino.attr)?;
        // Opening an existing file needs no new layout.
        if open.is_some()
            && !exclusive
            && let Some((fid, _)) = mdd::lookup(&mut v, &parent, &name)?
        {
            drop(v);
            return self.open(ctx, fid, open.unwrap_or_default(), &cred).await;
        }
        let mut file_layout = None;
        if let Some(r) = &replay {
            // What the client says its first run decided is checked as a new request
            // would be: a FID of this MDT's own sequences, a layout lod accepts.
            if !self.is_local(&r.fid) || r.fid.seq < nacre_core::fid::FID_SEQ_NORMAL {
                return Err(Errno::EINVAL);
            }
            if let Some(l) = &r.layout {
                lod::check_layout(l, &self.lod.layout_ctx())?;
                // A new file's objects: all of them this MDT's own.
                self.lod
                    .own_sequences()
                    .check(&l.objects().copied().collect::<Vec<_>>())?;
            }
            file_layout = r.layout.clone();
            if let Some(l) = &file_layout {
                self.lod
                    .note_used(&l.objects().copied().collect::<Vec<_>>());
            }
        } else if kind == FileKind::Regular {
            let root_default = if parent == Fid::ROOT {
                pino.default_layout.clone()
            } else {
                mdd::get_inode(&mut v, &Fid::ROOT)
                    .ok()
                    .and_then(|r| r.default_layout)
                    .or_else(|| self.dne_root_default_layout())
            };
            let explicit = match &layout {
                LayoutRequest::Explicit(l) => Some(l),
                LayoutRequest::Inherit => None,
            };
            let mut l = self.lod.resolve(
                explicit,
                pino.default_layout.as_ref(),
                root_default.as_ref(),
            )?;
            self.lod.instantiate_at_create(&mut l).await?;
            // A new erasure-coded file's parity codes nothing yet: stale until computed,
            // since a create that opens the file writes without another open.
            ec::stale_on_data_change(&mut l);
            file_layout = Some(l);
        }
        drop(v);
        let objs: Vec<_> = file_layout
            .iter()
            .flat_map(|l| l.objects().copied())
            .collect();
        let want_write = open.is_some_and(|o| o.write);
        let held = (self.dne.reserved.clone(), parent, name.clone());
        let opener = cred.clone();
        let args = CreateArgs {
            parent,
            name,
            mode,
            rdev,
            cred,
            symlink,
            layout: file_layout,
            fid: replay.as_ref().map(|r| r.fid),
            now: now(),
            open_for_write: want_write,
        };
        let idx = self.index;
        let used = objs.clone();
        let res = self
            .store
            .write(move |tx| {
                // A name a distributed operation may still put back (DNE).
                held.0.check(&held.1, &held.2)?;
                let forced = args.fid;
                let c = mdd::create(tx, idx, args, open.is_some() && !exclusive)?;
                if let Some(f) = forced {
                    // A replayed FID the crash took back from the allocator.
                    mdd::note_fid_used(tx, idx, &f)?;
                }
                // Objects handed out must never be handed out again, even after a crash.
                mdd::note_objects_used(tx, &used)?;
                Ok(c)
            })
            .await;
        let created = match res {
            Ok(c) => c,
            Err(e) => {
                if replay.is_none() {
                    self.lod.give_back(&objs);
                }
                return Err(e);
            }
        };
        match created {
            Created::Existing(ino) => {
                self.lod.give_back(&objs);
                self.open(ctx, ino.fid(), open.unwrap_or_default(), &opener)
                    .await
            }
            Created::New(ino) => {
                let handle = match open {
                    Some(f) => Some(
                        self.opens
                            .open(OpenHandle {
                                fid: ino.fid(),
                                conn_id: ctx.conn_id,
                                write: f.write,
                            })
                            .ok_or(Errno::ENFILE)?,
                    ),
                    None => None,
                };
                Ok(Reply::Created {
                    inode: self.info(ino)?,
                    handle,
                })
            }
        }
    }

    async fn open(
        &self,
        ctx: &RequestCtx,
        fid: Fid,
        flags: OpenFlags,
        cred: &Cred,
    ) -> Result<Reply, Errno> {
        self.open_handle(ctx, fid, flags, cred, None).await
    }

    /// Opens `fid`; `reopen`: the handle number it had before this MDT restarted (open
    /// replay), which the file's owner may reopen whatever its mode is now.
    async fn open_handle(
        &self,
        ctx: &RequestCtx,
        fid: Fid,
        flags: OpenFlags,
        cred: &Cred,
        reopen: Option<u64>,
    ) -> Result<Reply, Errno> {
        // Register first, then look: an unlink that commits after this sees the file open.
        let h = OpenHandle {
            fid,
            conn_id: ctx.conn_id,
            write: flags.write,
        };
        let handle = match reopen {
            None => self.opens.open(h).ok_or(Errno::ENFILE)?,
            Some(id) => self.opens.open_as(id, h).ok_or(Errno::EEXIST)?,
        };
        // An unlink whose transaction ran before the registration (and found the file not
        // open) may still be committing: its batch ends before the look, which then finds
        // the file gone. Without this the open succeeded, and its reads failed once the
        // objects went.
        self.store.barrier().await;
        let ino = match self.view().and_then(|mut v| {
            let i = mdd::get_inode(&mut v, &fid)?;
            match perm::may_open(&mut v, cred, &i.attr, &flags) {
                Err(Errno::EACCES) if reopen.is_some() && cred.uid == i.attr.uid => {}
                r => r?,
            }
            Ok(i)
        }) {
            Ok(i) => i,
            Err(e) => {
                self.opens.close(handle);
                return Err(if e == Errno::ENOENT { Errno::ESTALE } else { e });
            }
        };
        if flags.write && ino.attr.is_dir() {
            self.opens.close(handle);
            return Err(Errno::EISDIR);
        }
        let ec = ino.layout.as_ref().is_some_and(nacre_core::ec::is_ec);
        let ino = if flags.write
            && (ec
                || ino.lsom_valid
                    && ino
                        .layout
                        .as_ref()
                        .is_some_and(|l| l.objects().next().is_some()))
        {
            // Writes will bypass the MDT: its size stops being exact, durably (and an
            // erasure-coded file's parity stops being current).
            let r = self
                .store
                .write(move |tx| {
                    let mut i = mdd::get_inode(tx, &fid)?;
                    let mut in_sync_gen = None;
                    if let Some(l) = i.layout.as_mut() {
                        let in_sync = ec && nacre_core::ec::parity_in_sync(l, 0, u64::MAX);
                        ec::stale_on_data_change(l);
                        in_sync_gen = in_sync.then_some(l.layout_gen);
                    }
                    i.lsom_valid = false;
                    mdd::put_inode(tx, &i)?;
                    Ok((i, in_sync_gen))
                })
                .await;
            match r {
                Ok((i, in_sync_gen)) => {
                    if let Some(layout_gen) = in_sync_gen {
                        self.opens.set_ec_gen(handle, layout_gen);
                    }
                    i
                }
                Err(e) => {
                    self.opens.close(handle);
                    return Err(e);
                }
            }
        } else {
            ino
        };
        Ok(Reply::Opened {
            inode: self.info(ino)?,
            handle,
            data_cksum: None,
        })
    }

    /// A file's inode as `Getattr` answers it: ESTALE for one that is gone (the client
    /// knew it by FID, so the kernel looks its name up again).
    fn getattr(&self, fid: &Fid) -> Result<InodeInfo, Errno> {
        let mut v = self.view()?;
        match mdd::get_inode(&mut v, fid) {
            Ok(i) => self.info(i),
            Err(Errno::ENOENT) => Err(Errno::ESTALE),
            Err(e) => Err(e),
        }
    }

    /// A [`Request::Flock`] from connection `conn` (see [`flock`]).
    fn flock(&self, fid: Fid, handle: u64, who: flock::Owner, op: FlockOp) -> Result<Reply, Errno> {
        // A lock is taken through a handle of the caller's on that very file, so its
        // close (or the client's eviction) gives the lock back.
        if !self.opens.held_as(handle, &fid, who.conn) {
            return Err(Errno::EBADF);
        }
        let (conflict, wake) = match op {
            FlockOp::Test(lock) => {
                lock.check()?;
                (self.flocks.test(&fid, who, &lock), Vec::new())
            }
            FlockOp::Set { lock, wait } => {
                let o = self.flocks.set(fid, who, handle, lock, wait)?;
                (o.conflict, o.wake)
            }
            FlockOp::ReleaseOwner => (None, self.flocks.release_owner(&fid, who)),
            FlockOp::Reclaim(lock) => {
                let o = self.flocks.set(fid, who, handle, lock, false)?;
                if let Some(c) = &o.conflict {
                    tracing::warn!(target: "mdt", "MDT{:04x}: file {fid}: a replayed lock of connection {} conflicts with {c:?}: not taken", self.index, who.conn);
                }
                (o.conflict, o.wake)
            }
        };
        if !wake.is_empty() {
            self.callbacks.post(fid, &wake);
        }
        Ok(Reply::Flock { conflict })
    }

    /// Closes what connection `conn` held open, as lost: its client is gone.
    async fn close_handles_of(self: &Arc<Self>, conn: u64) {
        for h in self.opens.handles_of(conn) {
            let _ = self.close(h, false, true).await;
        }
    }

    /// Closes a handle. `wrote` says the handle changed the file's data; `lost` that its
    /// client vanished (it may have written). When the last writer of a dirty file is gone,
    /// the size is settled from the objects in the background ([`settle`]). For an untouched write
    /// handle of an erasure-coded file, returns what [`Mdt::ec_untouched_close`] did.
    async fn close(
        self: &Arc<Self>,
        handle: u64,
        wrote: bool,
        lost: bool,
    ) -> Result<Option<Option<Layout>>, Errno> {
        let ec_gen = self.opens.ec_untouched_gen(handle);
        let Some((h, last, writers)) = self.opens.close(handle) else {
            // Unknown handle: from before a restart, or already closed.
            return Ok(None);
        };
        let fid = h.fid;
        self.appends.release(&fid, handle);
        let waiting = self.flocks.release_handle(&fid, handle);
        if !waiting.is_empty() {
            self.callbacks.post(fid, &waiting);
        }
        let ec_layout = match ec_gen {
            Some(layout_gen) if h.write && !wrote && !lost => {
                match self.ec_untouched_close(fid, layout_gen, writers).await {
                    Ok(l) => Some(l),
                    // Parity stays stale; the close goes on.
                    Err(e) => {
                        tracing::debug!(target: "mdt", "file {fid}: parity left stale at an untouched close: {e}");
                        None
                    }
                }
            }
            _ => None,
        };
        if h.write && (wrote || lost) {
            self.opens.mark_dirty(fid);
        }
        if h.write && wrote {
            self.changed_data(fid, h.conn_id).await;
        }
        let last_writer = h.write && writers == 0;
        if last_writer {
            match self.opens.begin_settle(&fid) {
                Some(generation) => {
                    if !self.settles.push(fid, generation) {
                        // The queue is full: the size is left to glimpses, and the next
                        // stat queues the file to be settled again.
                        self.opens.settle_gave_up(&fid, generation);
                    }
                }
                None => self.opens.mark_clean(fid),
            }
        }
        if !last {
            return Ok(ec_layout);
        }
        let ino = self.view().and_then(|mut v| mdd::get_inode(&mut v, &fid));
        let Ok(ino) = ino else { return Ok(ec_layout) };
        if ino.attr.nlink > 0 {
            return Ok(ec_layout);
        }
        // The last close of an unlinked file: now it goes.
        let destroyed = self
            .store
            .write(move |tx| match mdd::get_inode(tx, &fid) {
                Ok(ino) if ino.attr.nlink == 0 => mdd::destroy_inode(tx, &ino).map(|_| true),
                Ok(_) | Err(Errno::ENOENT) => Ok(false),
                Err(e) => Err(e),
            })
            .await?;
        if destroyed {
            self.llog_kick.notify_one();
        }
        Ok(ec_layout)
    }

    /// `fsync` of a file whose names live on other MDTs (under a remote or striped
    /// parent): their journals are made durable too, so the name survives with the inode.
    async fn sync_name_mdts(&self, fid: &Fid) -> Result<(), Errno> {
        let links = self.view().and_then(|mut v| {
            let ino = mdd::get_inode(&mut v, fid)?;
            mdd::links_of(&mut v, &ino, mdd::LINK_MAX as usize)
        });
        let links = match links {
            Ok(l) => l,
            // Gone meanwhile (unlinked): nothing names it.
            Err(Errno::ENOENT) => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut mdts: Vec<u32> = links
            .iter()
            .map(|(parent, _)| self.mdt_of(parent))
            .filter(|m| *m != self.index)
            .collect();
        mdts.sort_unstable();
        mdts.dedup();
        for m in mdts {
            let req = Request::Sync {
                fid: None,
                changed: false,
            };
            self.dne_proxy(m)?.call(&req).await.map_err(|e| e.errno())?;
        }
        Ok(())
    }

    /// A client changed `fid`'s data and says so: other clients holding it open drop
    /// what they cached of it before this returns (see [`callback`]).
    async fn changed_data(&self, fid: Fid, by: u64) {
        let holders = self.opens.holders(&fid, by);
        if holders.is_empty() {
            return;
        }
        let waits = self.callbacks.post(fid, &holders);
        self.callbacks.wait(&waits).await;
    }

    /// Makes a layout's objects durable on their OSTs (one sync request per OST), and its
    /// DoM object here.
    async fn sync_objects(&self, fid: Fid, layout: &Layout) -> Result<(), Errno> {
        let objs = layout.objects().map(|o| (o.ost_idx, o.fid));
        for (ost, objs) in nacre_rpc::msg::ost_obj_lists(objs) {
            let osp = self.lod.osp(ost).ok_or(Errno::EIO)?;
            match osp
                .import
                .call(&Request::OstSync { objs }, Bytes::new())
                .await
            {
                Ok((Reply::Ok, _)) => {}
                Ok(_) => return Err(Errno::EIO),
                Err(e) => return Err(e.errno()),
            }
        }
        if layout.dom_object().is_some() {
            self.dom_sync(fid).await?;
        }
        Ok(())
    }

    async fn layout_intent(&self, fid: Fid, end: u64) -> Result<Reply, Errno> {
        let mut v = self.view()?;
        let ino = mdd::get_inode(&mut v, &fid)?;
        drop(v);
        let Some(mut layout) = ino.layout.clone() else {
            return Err(Errno::EINVAL);
        };
        if end > layout.max_file_size() {
            return Err(Errno::EFBIG);
        }
        let mut added = Vec::new();
        for i in 0..layout.components.len() {
            let c = &layout.components[i];
            if c.start < end && !c.is_init() {
                if let Err(e) = self.lod.instantiate_in(&mut layout, i).await {
                    self.lod.give_back(&added);
                    return Err(e);
                }
                added.extend(layout.components[i].objects.iter().copied());
            }
        }
        if added.is_empty() && layout.instantiated_to(end) {
            return Ok(Reply::Layout(Some(layout)));
        }
        let give_back = added.clone();
        let res = self
            .store
            .write(move |tx| {
                let mut cur = mdd::get_inode(tx, &fid)?;
                let Some(cl) = cur.layout.as_mut() else {
                    return Err(Errno::EINVAL);
                };
                let used = cl.adopt_instantiated(&layout);
                cl.layout_gen += 1;
                cur.lsom_valid = false;
                mdd::note_objects_used(tx, &used)?;
                mdd::put_inode(tx, &cur)?;
                Ok((cur.layout.clone(), used))
            })
            .await;
        match res {
            Ok((l, used)) => {
                let unused: Vec<_> = give_back
                    .into_iter()
                    .filter(|o| !used.contains(o))
                    .collect();
                self.lod.give_back(&unused);
                Ok(Reply::Layout(l))
            }
            Err(e) => {
                self.lod.give_back(&give_back);
                Err(e)
            }
        }
    }

    fn readdir(&self, fid: Fid, cookie: u64, max: u32, cred: &Cred) -> Result<Reply, Errno> {
        let mut v = self.view()?;
        let ino = mdd::get_inode(&mut v, &fid)?;
        if !ino.attr.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        // What opendir checks (an open for reading); Lustre checks it at open.
        perm::check(&mut v, cred, &ino.attr, perm::MAY_READ)?;
        if ino.lmv.is_some() {
            return Err(mdd::STRIPED);
        }
        let max = max.clamp(1, READDIR_MAX) as usize;
        let start = records::dirent_start(&fid, cookie);
        let end = records::dirent_end(&fid);
        // One more than asked, so a group of equal hashes is never split across replies.
        let rows = v.range(Table::Dirents, &start, &end, max + 1)?;
        let mut entries = Vec::with_capacity(rows.len());
        let mut eof = rows.len() <= max;
        for (i, (k, val)) in rows.iter().enumerate() {
            let (hash, name) = records::dirent_key_parts(k).ok_or(Errno::EIO)?;
            if i >= max {
                if entries.last().is_some_and(|e: &Dirent| e.cookie == hash) {
                    // Rare collision group at the boundary: include it.
                    let (child, kind) = records::parse_dirent_value(val)?;
                    entries.push(Dirent {
                        name: name.to_vec(),
                        fid: child,
                        kind,
                        cookie: hash,
                    });
                    eof = false;
                    continue;
                }
                break;
            }
            let (child, kind) = records::parse_dirent_value(val)?;
            entries.push(Dirent {
                name: name.to_vec(),
                fid: child,
                kind,
                cookie: hash,
            });
        }
        Ok(Reply::Dirents { entries, eof })
    }

    async fn set_layout(&self, fid: Fid, layout: Option<Layout>) -> Result<Reply, Errno> {
        if let Some(l) = &layout {
            self.lod.check(l)?;
        }
        self.store
            .write(move |tx| {
                let mut ino = mdd::get_inode(tx, &fid)?;
                if !ino.attr.is_dir() {
                    // A file's layout is fixed at create (Lustre: EEXIST); migrate changes it.
                    return Err(Errno::EEXIST);
                }
                ino.default_layout = layout.map(|mut l| {
                    for c in &mut l.components {
                        c.objects.clear();
                        c.flags &= !LCME_FL_INIT;
                        if c.pattern == Pattern::Mdt {
                            c.stripe_count = 0;
                        }
                    }
                    l
                });
                ino.attr.ctime = now();
                mdd::put_inode(tx, &ino)?;
                Ok(())
            })
            .await?;
        Ok(Reply::Ok)
    }

    /// A client's connect: its record written first if it is new.
    async fn mds_connect(&self, client: u64) -> Result<(Reply, Bytes), Errno> {
        if self.recovery.connect(client).await {
            recovery::record_client(&self.store, client).await?;
            self.recovery.recorded(client);
        }
        Ok((
            Reply::TargetConnected {
                instance: self.recovery.instance,
                last_committed: self.store.last_committed(),
            },
            Bytes::new(),
        ))
    }

    /// Recovery's driver: applies replays in transno order, evicts clients that miss the
    /// window, and ends with everything replayed committed.
    async fn recover(self: Arc<Self>, mut stopping: watch::Receiver<bool>) {
        let me = format!("{}-MDT{:04x}", self.fsname, self.index);
        loop {
            if *stopping.borrow() {
                return;
            }
            match self.recovery.next_step() {
                recovery::Step::Apply(transno, q) => {
                    let r = self
                        .clone()
                        .apply_replay(q.ctx, q.req, q.bulk, q.outcome)
                        .await;
                    if let Err(e) = &r {
                        tracing::warn!(target: "mdt", "{me}: replay of transno {transno} from client {:016x} failed: {e}", q.client);
                    }
                    let _ = q.done.send(r);
                }
                recovery::Step::Evict(gone) => {
                    for c in gone {
                        self.replies.forget(c);
                        tracing::warn!(target: "mdt", "{me}: recovery window ended: evicting client {c:016x}, which did not reconnect; its uncommitted requests are lost");
                    }
                }
                recovery::Step::Wait(until) => {
                    tokio::select! {
                        _ = self.recovery.wait(until) => {}
                        _ = stopping.changed() => {}
                    }
                }
                recovery::Step::Finish => break,
            }
        }
        self.deferred_reopens().await;
        let last = self.recovery.last_replayed();
        let store = self.store.clone();
        let _ = tokio::task::spawn_blocking(move || store.advance_transno(last)).await;
        if let Err(e) = self.store.sync().await {
            tracing::error!(target: "mdt", "{me}: cannot commit the replayed requests: {e}");
        }
        if let Err(e) = recovery::forget_clients(&self.store, self.recovery.evicted()).await {
            tracing::warn!(target: "mdt", "{me}: cannot remove the records of evicted clients: {e}");
        }
        let (recovered, evicted, replayed, _) = self.recovery.finish();
        tracing::info!(target: "mdt", "{me}: recovery over: {recovered} clients recovered, {evicted} evicted, {replayed} requests replayed");
        self.clean_orphans().await;
    }

    /// Reopens that found no file during the replays, once every replay is applied, over
    /// their clients' connections of now.
    async fn deferred_reopens(&self) {
        for r in self.recovery.take_deferred_reopens() {
            let Some(conn) = self.exports.conn_of(r.client) else {
                tracing::warn!(target: "mdt", "MDT{:04x}: client {:#x} is gone: its reopen of {} is dropped", self.index, r.client, r.fid);
                continue;
            };
            let mut ctx = r.ctx;
            ctx.conn_id = conn;
            if let Err(e) = self
                .open_handle(&ctx, r.fid, r.flags, &r.cred, Some(r.handle))
                .await
            {
                tracing::warn!(target: "mdt", "MDT{:04x}: client {:#x} could not reopen {} after the replays: {e}", self.index, r.client, r.fid);
            }
        }
    }

    /// One replayed request, run as it first ran: its caller squashed as then.
    async fn apply_replay(
        self: Arc<Self>,
        ctx: RequestCtx,
        mut req: Request,
        bulk: Bytes,
        outcome: Option<nacre_rpc::msg::ReplayOutcome>,
    ) -> Result<Reply, Errno> {
        if let Some(c) = req.cred_mut() {
            self.squash.apply(c, ctx.peer.ip());
        }
        match (req, outcome) {
            (mut r @ Request::Create { .. }, Some(o)) => {
                // The handle it opened is reopened by the client under its own number
                // (`Request::Reopen`), not opened again here.
                if let Request::Create { open, .. } = &mut r {
                    *open = None;
                }
                self.create(&ctx, r, Some(o)).await
            }
            (Request::DomWrite { fid, offset, cksum }, _) => {
                let n = self.dom_write(&ctx, fid, offset, bulk, cksum, true).await?;
                Ok(Reply::Written(n))
            }
            (Request::LayoutIntent { fid, .. }, Some(o)) => self.replay_layout_intent(fid, o).await,
            (r @ Request::SwapLayouts { .. }, _) => self.swap_request(r, true).await,
            (
                Request::Mirror {
                    fid,
                    op: op @ MirrorOp::ResyncDone { .. },
                    cred,
                },
                _,
            ) => self.mirror_request(fid, op, &cred, true).await,
            (r, _) => self
                .dispatch_bulk(ctx, r, Bytes::new())
                .await
                .map(|(r, _)| r),
        }
    }

    /// `SwapLayouts`, checked against the caller's rights on both files; with `replay`,
    /// the replay of one answered before a crash ([`Mdt::swap_layouts`]).
    async fn swap_request(&self, req: Request, replay: bool) -> Result<Reply, Errno> {
        let Request::SwapLayouts {
            fid,
            volatile,
            layout_gen,
            cred,
        } = req
        else {
            return Err(Errno::EPROTO);
        };
        self.may(&fid, &cred, perm::MAY_WRITE)?;
        self.may(&volatile, &cred, perm::MAY_WRITE)?;
        self.swap_layouts(fid, volatile, layout_gen, replay).await
    }

    /// A replayed layout intent: the components its first run instantiated get the objects
    /// that run gave them (the client's writes went there), not new ones from the pool;
    /// those the journal kept are left as they are. The client's layout is checked as a
    /// new one would be, and its objects are never handed out again.
    async fn replay_layout_intent(
        &self,
        fid: Fid,
        o: nacre_rpc::msg::ReplayOutcome,
    ) -> Result<Reply, Errno> {
        let Some(want) = o.layout.filter(|_| o.fid == fid) else {
            return Err(Errno::EINVAL);
        };
        lod::check_layout(&want, &self.lod.layout_ctx())?;
        self.lod
            .note_used(&want.objects().copied().collect::<Vec<_>>());
        // Only the objects it instantiated must be this MDT's own: the file's older ones
        // may come from another MDT (a file migrated here).
        let own = self.lod.own_sequences();
        let layout = self
            .store
            .write(move |tx| {
                let mut cur = mdd::get_inode(tx, &fid)?;
                let Some(cl) = cur.layout.as_mut() else {
                    return Err(Errno::EINVAL);
                };
                let used = cl.adopt_instantiated(&want);
                own.check(&used)?;
                if !used.is_empty() {
                    cl.layout_gen += 1;
                    cur.lsom_valid = false;
                    mdd::note_objects_used(tx, &used)?;
                    mdd::put_inode(tx, &cur)?;
                }
                Ok(cur.layout)
            })
            .await?;
        Ok(Reply::Layout(layout))
    }

    /// Requests that carry bulk data in or out; everything else goes to [`Mdt::dispatch`].
    async fn dispatch_bulk(
        self: Arc<Self>,
        ctx: RequestCtx,
        req: Request,
        bulk: Bytes,
    ) -> Result<(Reply, Bytes), Errno> {
        let mut req = req;
        if let Some(c) = req.cred_mut() {
            self.squash.apply(c, ctx.peer.ip());
        }
        if grows_namespace(&req) {
            // What frees space (unlink, rmdir) always has room; what takes it stops short.
            self.store.check_growth_space()?;
        }
        match req {
            Request::DomWrite { fid, offset, cksum } => {
                let n = self
                    .dom_write(&ctx, fid, offset, bulk, cksum, false)
                    .await?;
                Ok((Reply::Written(n), Bytes::new()))
            }
            Request::DomRead {
                fid,
                offset,
                len,
                cksum,
            } => self.dom_read(fid, offset, len, cksum).await,
            Request::Open { fid, flags, cred } => {
                let mut r = self.open(&ctx, fid, flags, &cred).await?;
                let data = match &mut r {
                    Reply::Opened {
                        inode, data_cksum, ..
                    } => match &inode.layout {
                        Some(l) if flags.read && !flags.write => {
                            let (data, sums) = self.dom_read_on_open(l).await;
                            *data_cksum = sums;
                            data
                        }
                        _ => Bytes::new(),
                    },
                    _ => Bytes::new(),
                };
                Ok((r, data))
            }
            other => Ok((self.dispatch(ctx, other).await?, Bytes::new())),
        }
    }

    async fn dispatch(self: Arc<Self>, ctx: RequestCtx, req: Request) -> Result<Reply, Errno> {
        let is_open = {
            let me = self.clone();
            move |f: &Fid| me.opens.is_open(f)
        };
        match req {
            Request::Ping => Ok(Reply::Pong {
                target: self.target().full(&self.fsname),
            }),
            Request::Statfs => Ok(Reply::Statfs(self.statfs()?)),
            Request::Lookup { parent, name, cred } => {
                let mut v = self.view()?;
                let dir = mdd::get_inode(&mut v, &parent)?;
                if dir.attr.is_dir() {
                    perm::may_lookup(&mut v, &cred, &dir.attr)?;
                }
                let (fid, ino) = mdd::lookup_name_rec(&mut v, &parent, &name)?;
                if !self.is_local(&fid) {
                    return Ok(Reply::RemoteFid(fid));
                }
                Ok(Reply::Inode(
                    self.info(mdd::get_inode_hint(&mut v, &fid, ino)?)?,
                ))
            }
            Request::Getattr { fid } => Ok(Reply::Inode(self.getattr(&fid)?)),
            Request::Setattr {
                fid,
                attr,
                cred,
                handle,
            } => {
                let t = now();
                let writable = handle.is_some_and(|h| self.opens.is_writer(h, &fid, ctx.conn_id));
                let sized = attr.size.is_some();
                if let Some(size) = attr.size {
                    // The client truncates OST objects; the DoM part is the MDT's own.
                    let layout = self
                        .view()
                        .and_then(|mut v| mdd::get_inode(&mut v, &fid))?
                        .layout;
                    if let Some(l) = layout {
                        if size > l.max_file_size() {
                            return Err(Errno::EFBIG);
                        }
                        self.dom_truncate(&l, size).await?;
                        // The size this records may be trusted without a glimpse: the
                        // punches must not be lost to an OST's power cut after it.
                        self.sync_objects(fid, &l).await?;
                    }
                }
                let chown = attr.uid.is_some() || attr.gid.is_some();
                let me = self.clone();
                let ino = self
                    .store
                    .write(move |tx| {
                        let writers = |f: &Fid| me.opens.writers(f) > 0;
                        let ino = mdd::setattr(tx, &fid, &attr, t, &writers, &cred, writable)?;
                        if chown && ino.attr.is_reg() {
                            // The objects take the owner once this is durable (`owner`).
                            owner::log_owner(tx, &ino)?;
                        }
                        Ok(ino)
                    })
                    .await?;
                if chown && ino.attr.is_reg() {
                    self.owner_kick.notify_one();
                }
                if sized {
                    // The client made the objects match this size before asking.
                    self.opens.size_set(&fid);
                    self.changed_data(fid, ctx.conn_id).await;
                }
                Ok(Reply::Inode(self.info(ino)?))
            }
            r @ Request::Create { .. } => match self.dne_create_route(&r)? {
                dne::CreateRoute::Plain => {
                    match dne::reserve::retry_held(|| self.create(&ctx, r.clone(), None)).await {
                        // The name's inode moved to another MDT meanwhile.
                        Err(mdd::REMOTE) => match self.dne_create_route(&r)? {
                            dne::CreateRoute::Remote(fid) => Ok(Reply::RemoteFid(fid)),
                            _ => Err(Errno::EAGAIN),
                        },
                        other => other,
                    }
                }
                dne::CreateRoute::Dne => self.dne_dispatch(&ctx, r).await,
                dne::CreateRoute::Remote(fid) => Ok(Reply::RemoteFid(fid)),
            },
            Request::DomSync { fid } => {
                self.dom_sync(fid).await?;
                Ok(Reply::Ok)
            }
            Request::DomFallocate {
                fid,
                offset,
                len,
                mode,
            } => {
                self.dom_fallocate(fid, offset, len, mode).await?;
                Ok(Reply::Ok)
            }
            Request::AddComponents {
                fid,
                components,
                cred,
            } => {
                self.may_change_layout(&fid, &cred)?;
                self.add_components(fid, components).await
            }
            Request::DelComponents {
                fid,
                id,
                flags,
                neg,
                cred,
            } => {
                self.may_change_layout(&fid, &cred)?;
                self.del_components(fid, id, flags, neg).await
            }
            Request::CreateVolatile { fid, layout, cred } => {
                self.may(&fid, &cred, perm::MAY_WRITE)?;
                self.create_volatile(&ctx, fid, layout).await
            }
            r @ Request::SwapLayouts { .. } => self.swap_request(r, false).await,
            Request::Mirror { fid, op, cred } => self.mirror_request(fid, op, &cred, false).await,
            Request::Open { fid, flags, cred } => self.open(&ctx, fid, flags, &cred).await,
            Request::Close { handle, wrote } => {
                if self.opens.held_by_other(handle, ctx.conn_id) {
                    // Another client's handle (or this client's old connection's, which
                    // its MdtConnect took over).
                    return Err(Errno::EBADF);
                }
                Ok(match self.close(handle, wrote, false).await? {
                    // An erasure-coded file's layout: the client codes parity if it is still
                    // stale; none: other writers hold the file, whose closes see to it.
                    Some(l) => Reply::Layout(l),
                    None => Reply::Ok,
                })
            }
            Request::AppendLock { fid, handle } => {
                if !self.opens.is_writer(handle, &fid, ctx.conn_id) {
                    return Err(Errno::EBADF);
                }
                // A wait held here must not keep a stopping MDT alive.
                let mut stopping = self.shutdown.subscribe();
                // Kept only by a client a callback reaches.
                let keep = self.callbacks.polls(ctx.conn_id);
                let call_back = |conn: u64| {
                    let _ = self.callbacks.post(fid, &[conn]);
                };
                tokio::select! {
                    () = self.appends.take(fid, handle, ctx.conn_id, keep, call_back) => {}
                    _ = stopping.wait_for(|s| *s) => return Err(Errno::ESHUTDOWN),
                }
                // Closed while it waited: the close gave back nothing this took.
                if !self.opens.is_writer(handle, &fid, ctx.conn_id) {
                    self.appends.release(&fid, handle);
                    return Err(Errno::EBADF);
                }
                match self.getattr(&fid) {
                    Ok(inode) => Ok(Reply::AppendLocked { inode, keep }),
                    Err(e) => {
                        self.appends.release(&fid, handle);
                        Err(e)
                    }
                }
            }
            Request::AppendReclaim { fid, handle } => {
                if !self.opens.is_writer(handle, &fid, ctx.conn_id) {
                    return Err(Errno::EBADF);
                }
                if !self.appends.reclaim(fid, handle, ctx.conn_id) {
                    tracing::warn!(target: "mdt", "MDT{:04x}: file {fid}: a replayed append lock of connection {} is held by another handle: not taken", self.index, ctx.conn_id);
                    return Err(Errno::EBUSY);
                }
                Ok(Reply::Ok)
            }
            Request::AppendUnlock { fid, handle } => {
                if self.opens.held_by_other(handle, ctx.conn_id) {
                    return Err(Errno::EBADF);
                }
                self.appends.release(&fid, handle);
                Ok(Reply::Ok)
            }
            Request::Flock {
                fid,
                handle,
                owner,
                node,
                op,
            } => {
                let who = flock::Owner {
                    conn: ctx.conn_id,
                    owner,
                    node,
                };
                self.flock(fid, handle, who, op)
            }
            Request::EcParitySynced {
                fid,
                handle,
                layout_gen,
                cred,
            } => {
                self.ec_parity_synced(ctx.conn_id, fid, handle, layout_gen, &cred)
                    .await
            }
            Request::WaitCallbacks { acked } => {
                // A poll held here must not keep a stopping MDT (and its store) alive.
                let mut stopping = self.shutdown.subscribe();
                let b = tokio::select! {
                    b = self.callbacks.poll(ctx.conn_id, acked) => b,
                    _ = stopping.wait_for(|s| *s) => return Err(Errno::ESHUTDOWN),
                };
                Ok(Reply::Callbacks {
                    upto: b.upto,
                    fids: b.fids,
                    all: b.all,
                })
            }
            Request::Sync { fid, changed } => {
                self.store.sync().await?;
                if let Some(fid) = fid {
                    self.sync_name_mdts(&fid).await?;
                    if changed {
                        self.changed_data(fid, ctx.conn_id).await;
                    }
                }
                Ok(Reply::Ok)
            }
            Request::Unlink {
                parent,
                name,
                dir,
                cred,
            } => {
                let t = now();
                let n = name.clone();
                let c = cred.clone();
                let r: Removed = match self
                    .store
                    .write(move |tx| mdd::unlink(tx, &parent, &n, dir, t, &is_open, &c))
                    .await
                {
                    Err(mdd::REMOTE) => {
                        return self
                            .dne_unlink(parent, name, dir, &cred)
                            .await
                            .map(|_| Reply::Ok);
                    }
                    r => r?,
                };
                if !r.destroy.is_empty() {
                    self.llog_kick.notify_one();
                }
                Ok(Reply::Ok)
            }
            Request::Rename {
                src_parent,
                src_name,
                dst_parent,
                dst_name,
                flags,
                cred,
            } => {
                if !self.is_local(&src_parent) {
                    return self
                        .dne_rename(src_parent, src_name, dst_parent, dst_name, flags, &cred)
                        .await
                        .map(|_| Reply::Ok);
                }
                let t = now();
                let held = self.dne.reserved.clone();
                let several_mdts = self.dne.mdt_count() > 1;
                let r = match dne::reserve::retry_held(|| {
                    let (sn, dn) = (src_name.clone(), dst_name.clone());
                    let (held, is_open) = (held.clone(), is_open.clone());
                    let cred = cred.clone();
                    self.store.write(move |tx| {
                        held.check(&dst_parent, &dn)?;
                        if several_mdts
                            && Mdt::rename_moves_dir(tx, &src_parent, &sn, &dst_parent, &dn, flags)?
                        {
                            return Err(mdd::REMOTE);
                        }
                        mdd::rename(
                            tx,
                            &src_parent,
                            &sn,
                            &dst_parent,
                            &dn,
                            flags,
                            t,
                            &is_open,
                            &cred,
                        )
                    })
                })
                .await
                {
                    Err(mdd::REMOTE) => {
                        return self
                            .dne_rename(src_parent, src_name, dst_parent, dst_name, flags, &cred)
                            .await
                            .map(|_| Reply::Ok);
                    }
                    r => r?,
                };
                if !r.destroy.is_empty() {
                    self.llog_kick.notify_one();
                }
                Ok(Reply::Ok)
            }
            Request::Link {
                fid,
                parent,
                name,
                cred,
            } => {
                let t = now();
                let held = self.dne.reserved.clone();
                let r = dne::reserve::retry_held(|| {
                    let (n, held, cred) = (name.clone(), held.clone(), cred.clone());
                    self.store.write(move |tx| {
                        held.check(&parent, &n)?;
                        mdd::link(tx, &fid, &parent, &n, t, &cred)
                    })
                })
                .await;
                match r {
                    Err(mdd::REMOTE) => {
                        Ok(Reply::Inode(self.dne_link(fid, parent, name, &cred).await?))
                    }
                    r => Ok(Reply::Inode(self.info(r?)?)),
                }
            }
            Request::Readdir {
                fid,
                cookie,
                max,
                cred,
            } => self.readdir(fid, cookie, max, &cred),
            Request::Readlink { fid } => {
                let mut v = self.view()?;
                let ino = mdd::get_inode(&mut v, &fid)?;
                ino.symlink.map(Reply::Data).ok_or(Errno::EINVAL)
            }
            Request::GetXattr { fid, name, cred } => {
                mdd::check_xattr_name(&name)?;
                let mut v = self.view()?;
                let ino = mdd::get_inode(&mut v, &fid)?;
                perm::may_xattr(&mut v, &cred, &ino.attr, &name, false)?;
                v.get(Table::Xattrs, &records::xattr_key(&fid, &name))?
                    .map(Reply::Data)
                    .ok_or(Errno::ENODATA)
            }
            Request::ListXattr { fid, cred } => {
                let mut v = self.view()?;
                mdd::get_inode(&mut v, &fid)?;
                let rows = v.range(
                    Table::Xattrs,
                    &fid.to_bytes(),
                    &records::xattr_prefix_end(&fid),
                    65536,
                )?;
                Ok(Reply::Names(
                    rows.into_iter()
                        .map(|(k, _)| k[16..].to_vec())
                        // Names of the MDT's own (a NUL first) are not the client's.
                        .filter(|n| n.first() != Some(&0) && perm::lists_xattr(&cred, n))
                        .collect(),
                ))
            }
            Request::SetXattr {
                fid,
                name,
                value,
                flags,
                cred,
            } => {
                let t = now();
                self.store
                    .write(move |tx| mdd::set_xattr(tx, &fid, &name, &value, flags, t, &cred))
                    .await?;
                Ok(Reply::Ok)
            }
            Request::RemoveXattr { fid, name, cred } => {
                let t = now();
                self.store
                    .write(move |tx| mdd::remove_xattr(tx, &fid, &name, t, &cred))
                    .await?;
                Ok(Reply::Ok)
            }
            Request::Access { fid, cred, mask } => {
                self.may(&fid, &cred, mask)?;
                Ok(Reply::Ok)
            }
            Request::SetLayout { fid, layout, cred } => {
                self.may_change_layout(&fid, &cred)?;
                self.set_layout(fid, layout).await
            }
            Request::GetDefaultLayout { fid } => {
                let mut v = self.view()?;
                let ino = mdd::get_inode(&mut v, &fid)?;
                Ok(Reply::Layout(ino.default_layout))
            }
            Request::LayoutIntent { fid, end } => self.layout_intent(fid, end).await,
            Request::Fid2Path { fid } => Ok(Reply::Path(self.dne_fid2path(fid).await?)),
            Request::Lfsck(r) => {
                if !r.within_bounds() {
                    return Err(Errno::EINVAL);
                }
                let l = self.lfsck.get().cloned().ok_or(Errno::ENOTSUP)?;
                Ok(Reply::Lfsck(l.handle(r).await?))
            }
            r => self.dne_dispatch(&ctx, r).await,
        }
    }
}

impl Mdt {
    /// Whether `cred` has `mask` on local object `fid` (see [`perm::check`]).
    pub(crate) fn may(&self, fid: &Fid, cred: &Cred, mask: u32) -> Result<(), Errno> {
        let mut v = self.view()?;
        let ino = mdd::get_inode(&mut v, fid)?;
        perm::check(&mut v, cred, &ino.attr, mask)
    }

    /// A layout (a file's, or a directory's default) is changed by the owner or
    /// CAP_FOWNER (Lustre's `mdd_xattr_sanity_check` for `lustre.lov`).
    pub(crate) fn may_change_layout(&self, fid: &Fid, cred: &Cred) -> Result<(), Errno> {
        let mut v = self.view()?;
        let ino = mdd::get_inode(&mut v, fid)?;
        if !perm::owner_or_capable(cred, &ino.attr) {
            return Err(Errno::EPERM);
        }
        Ok(())
    }
}

/// Requests that run while the MDT recovers: the servers' own (DNE, LFSCK; one list,
/// [`Request::needs_server_role`]), syncs, pings, recovery status and cache callbacks.
/// Every other request waits until the replays are in.
fn runs_during_recovery(req: &Request) -> bool {
    req.needs_server_role()
        || matches!(
            req,
            Request::Ping
                | Request::Statfs
                | Request::Sync { .. }
                | Request::WaitCallbacks { .. }
                | Request::DneStatus
                // A client's replay takes its locks again, after its reopens.
                | Request::Flock {
                    op: FlockOp::Reclaim(_),
                    ..
                }
                | Request::AppendReclaim { .. }
        )
}

/// Requests that add names, inodes or xattrs: refused on a nearly full MDT.
fn grows_namespace(req: &Request) -> bool {
    matches!(
        req,
        Request::Create { .. }
            | Request::Mkdir { .. }
            | Request::Link { .. }
            | Request::SetXattr { .. }
            | Request::CreateVolatile { .. }
    )
}

impl Service for Mdt {
    /// A DoM read over [`dom::MAX_DOM_READ`] is refused before the server reserves its
    /// reply.
    fn admit(&self, req: &Request) -> Result<(), Errno> {
        match req {
            Request::DomRead { len, .. } => dom::check_read(*len),
            r => match r.cred() {
                Some(c) if c.groups.len() > MAX_GROUPS => Err(Errno::EINVAL),
                _ => Ok(()),
            },
        }
    }

    async fn handle(
        self: Arc<Self>,
        ctx: RequestCtx,
        req: Request,
        bulk: Bytes,
    ) -> Result<(Reply, Bytes), Errno> {
        let trace = tracing::enabled!(target: "mdt::req", tracing::Level::TRACE);
        let shown = if trace {
            format!("{req:?}")
        } else {
            String::new()
        };
        self.health().ensure()?;
        let r = match req {
            Request::MdtConnect { client } => {
                self.exports.bind(&ctx, client, |old, new| {
                    let n = self.opens.rebind(old, new);
                    self.flocks.rebind(old, new);
                    if n > 0 {
                        tracing::debug!(target: "mdt", "MDT{:04x}: client {client:#x} reconnected: {n} open handle(s) kept", self.index);
                    }
                })?;
                self.mds_connect(client).await
            }
            Request::Replay {
                client,
                transno,
                req,
                outcome,
            } => {
                self.exports.check(&ctx, client)?;
                let rx = self
                    .recovery
                    .queue(client, transno, ctx, *req, bulk, outcome)?;
                match rx.await {
                    Ok(r) => r.map(|r| (r, Bytes::new())),
                    Err(_) => Err(Errno::ESHUTDOWN),
                }
            }
            Request::Reopen {
                client,
                handle,
                fid,
                flags,
                mut cred,
            } => {
                self.exports.check(&ctx, client)?;
                let standing = self.recovery.standing(client);
                if standing == recovery::Standing::Stale {
                    return Err(Errno::ESTALE);
                }
                if self.opens.held_as(handle, &fid, ctx.conn_id) {
                    // Reopened over a connection lost since, whose handles this one
                    // took over at its MdtConnect.
                    return Ok((Reply::Ok, Bytes::new()));
                }
                if standing == recovery::Standing::Recovered {
                    // Its reopens came before its end of replay: this one failed then.
                    return Err(Errno::EBADF);
                }
                self.squash.apply(&mut cred, ctx.peer.ip());
                let r = self
                    .open_handle(&ctx, fid, flags, &cred, Some(handle))
                    .await;
                // No such file (yet): another client's replay may make it.
                if matches!(r, Err(Errno::ESTALE))
                    && self.recovery.defer_reopen(recovery::DeferredReopen {
                        client,
                        ctx,
                        handle,
                        fid,
                        flags,
                        cred,
                    })
                {
                    tracing::debug!(target: "mdt", "MDT{:04x}: client {client:#x} reopens {fid} after the replays", self.index);
                    return Ok((Reply::Ok, Bytes::new()));
                }
                if let Err(e) = &r {
                    tracing::warn!(target: "mdt", "MDT{:04x}: client {client:#x} could not reopen {fid}: {e}", self.index);
                }
                r.map(|r| (r, Bytes::new()))
            }
            Request::MdtDisconnect { client } => {
                self.exports.check(&ctx, client)?;
                recovery::forget_clients(&self.store, vec![client]).await?;
                self.replies.forget(client);
                self.exports.leave(ctx.conn_id);
                Ok((Reply::Ok, Bytes::new()))
            }
            Request::ReplayDone { client } => {
                self.exports.check(&ctx, client)?;
                self.recovery.replay_done(client).await?;
                Ok((
                    Reply::Recovered {
                        last_committed: self.store.last_committed(),
                    },
                    Bytes::new(),
                ))
            }
            Request::Tracked { client, xid, req } => {
                self.exports.check(&ctx, client)?;
                self.recovery.wait_ended().await;
                if let Some(saved) = self.replies.lookup(client, xid) {
                    // A resend of a request that ran: its answer, not a second run.
                    return Ok((saved, Bytes::new()));
                }
                // A DoM write changes no record: it takes a number of its own, after its
                // bytes are written, so a commit past it syncs them (`DomCommit`).
                let dom_write = match &*req {
                    Request::DomWrite { fid, .. } => Some(*fid),
                    _ => None,
                };
                let me = self.clone();
                let (r, transno) = nacre_osd::mdstore::track_transno(async move {
                    let r = me.clone().dispatch_bulk(ctx, *req, bulk).await;
                    if let (Ok(_), Some(fid)) = (&r, dom_write) {
                        me.dom_commit.number(&me.store, fid).await?;
                    }
                    r
                })
                .await;
                let (reply, bulk) = r?;
                let reply = Reply::Tracked {
                    transno,
                    last_committed: self.store.last_committed(),
                    reply: Box::new(reply),
                };
                let seq = self.replies.save(client, xid, &reply);
                if transno > 0
                    && let Err(e) =
                        recovery::persist_reply(&self.store, client, seq, xid, &reply).await
                {
                    // The change is made and answered; only a resend after a restart
                    // would run it again.
                    tracing::warn!(target: "mdt", "MDT{:04x}: cannot keep the answer to request {xid} of client {client:016x}: {e}", self.index);
                }
                Ok((reply, bulk))
            }
            req => {
                if !runs_during_recovery(&req) {
                    self.recovery.wait_ended().await;
                }
                self.clone().dispatch_bulk(ctx, req, bulk).await
            }
        };
        if let Err(e) = &r {
            // A storage error may mean the storage is going.
            self.health().after_failed_request(*e).await;
        }
        if trace {
            tracing::trace!(target: "mdt::req", "{shown} -> {:?}", r.as_ref().map(|(reply, _)| reply));
        }
        r
    }

    async fn disconnected(self: Arc<Self>, ctx: RequestCtx) {
        self.callbacks.disconnected(ctx.conn_id);
        let conn = ctx.conn_id;
        match self.exports.unbind(conn) {
            exports::Ended::Close => self.close_handles_of(conn).await,
            exports::Ended::Parked { client, dropped } => {
                if let Some(d) = dropped {
                    self.close_handles_of(d).await;
                }
                if self.opens.handles_of(conn).is_empty() {
                    // Nothing waits for the client.
                    self.exports.expire(client, conn);
                    return;
                }
                // Its reconnect takes them over (MdtConnect); otherwise they are closed
                // when the grace ends.
                let mut stopping = self.shutdown.subscribe();
                let grace = self.exports.grace();
                tokio::spawn(async move {
                    tokio::select! {
                        _ = tokio::time::sleep(grace) => {}
                        _ = stopping.wait_for(|s| *s) => return,
                    }
                    if self.exports.expire(client, conn) {
                        let n = self.opens.handles_of(conn).len();
                        tracing::info!(target: "mdt", "MDT{:04x}: client {client:#x} did not reconnect within {}s: closing its {n} open handle(s)", self.index, grace.as_secs());
                        self.close_handles_of(conn).await;
                    }
                });
            }
        }
    }
}
