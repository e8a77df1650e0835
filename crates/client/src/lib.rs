//! The client library: what Lustre splits into llite's engine, lmv/mdc and lov/osc.
//!
//! - mount: connect to the MGS, fetch the configuration, follow its changes;
//! - [`md`] (lmv + mdc): namespace requests, each sent to the MDT that owns the FID;
//!   [`lmv`]: striped directories (names sent to their stripe, merged attributes and
//!   entries);
//! - [`io`] (lov + osc): a file's bytes, split by its layout into per-object requests issued
//!   in parallel (bounded by `max_rpcs_in_flight`), and file size from the objects;
//! - [`grant`] (osc): space each OST promised, without which a write is not cached;
//! - [`file`]: open files and what a writer must report at close;
//! - [`callback`]: the MDTs' calls to drop what is cached of a file another client changed.
//!
//! The FUSE mount and the benchmarks' native backend are both thin layers over [`Client`].

pub mod append;
pub mod callback;
pub mod cksum;
pub mod ec;
pub mod ec_shards;
pub mod file;
pub mod flock;
pub mod grant;
pub mod io;
pub mod lmv;
pub mod md;
pub mod migrate;
pub mod mirror;
pub mod readahead;
pub mod replay;
pub mod stats;
pub mod tunables;
pub mod writeback;

use nacre_core::{Errno, Fid, TargetKind, TargetName};
use nacre_rpc::conn::{ConnConfig, DEFAULT_TIMEOUT};
use nacre_rpc::mgc::Mgc;
use nacre_rpc::msg::FsConfig;
use nacre_rpc::{Import, Key, RpcError};
use parking_lot::RwLock;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
pub use tunables::Tunables;

/// How to mount.
#[derive(Clone, Debug)]
pub struct MountSpec {
    /// MGS address, `host:port`.
    pub mgs: String,
    pub fsname: String,
    pub key: Key,
    /// This client's name in servers' logs.
    pub client_name: String,
}

impl MountSpec {
    /// Parses `HOST:PORT:/fsname` (Lustre's `mgsnid:/fsname`).
    pub fn parse(spec: &str, key: Key, client_name: &str) -> Result<MountSpec, String> {
        let (addr, fs) = spec
            .rsplit_once(":/")
            .ok_or_else(|| format!("mount spec '{spec}' is not HOST:PORT:/FSNAME"))?;
        if fs.is_empty() || fs.contains('/') {
            return Err(format!("mount spec '{spec}': bad file system name '{fs}'"));
        }
        if !addr.contains(':') {
            return Err(format!(
                "mount spec '{spec}': the MGS address needs a port (HOST:PORT)"
            ));
        }
        Ok(MountSpec {
            mgs: addr.to_string(),
            fsname: fs.to_string(),
            key,
            client_name: client_name.to_string(),
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("cannot reach the MGS at {addr}: {source}")]
    Mgs { addr: String, source: RpcError },
    #[error("the MGS at {addr} answered unexpectedly")]
    Protocol { addr: String },
    #[error("file system '{0}' has no MDT registered yet")]
    NoMdt(String),
}

/// A mounted file system.
pub struct Client {
    pub fsname: String,
    spec: MountSpec,
    config: watch::Receiver<FsConfig>,
    mgc: Arc<Mgc>,
    mdcs: RwLock<Vec<Arc<Import>>>,
    /// Each MDC's replay list, by MDT index.
    mdc_replays: RwLock<Vec<Arc<replay::ReplayList>>>,
    /// Each OSC's replay list, by OST index.
    osc_replays: RwLock<Vec<Arc<replay::ReplayList>>>,
    /// One round of commits of kept writes at a time ([`Client::ost_call`]).
    commit_round: tokio::sync::Mutex<()>,
    /// This mount's identity on the MDTs (Lustre's client UUID).
    uuid: u64,
    oscs: RwLock<Vec<Arc<Import>>>,
    pub tunables: Arc<Tunables>,
    /// Data changes this client made (write, truncate, fallocate) or was told of by an
    /// MDT's callback, by file, so content a handle cached (read-on-open, readahead) is
    /// dropped when the file changes.
    pub(crate) local_changes: LocalChanges,
    /// Append locks this client keeps, and appends in progress (see [`append`]).
    pub(crate) appends: append::AppendLocks,
    /// `fcntl`/`flock` lock owners of this client, and the wake of waiting locks ([`flock`]).
    pub(crate) flocks: flock::LockOwners,
    /// What the mount drops when an MDT says a file changed (the kernel's pages).
    pub(crate) cache_hook: RwLock<Option<callback::CacheHook>>,
    /// Turns true at unmount: background loops end.
    stopping: watch::Sender<bool>,
    /// Bytes held by readahead windows, bounded by `llite.*.max_read_ahead_mb`.
    pub(crate) ra_bytes: std::sync::atomic::AtomicU64,
    /// Shards of degraded erasure-coded reads, for the reads that follow.
    pub(crate) ec_shards: ec_shards::ShardCache,
    /// Rows decoded by degraded erasure-coded reads, for the row's other lost stripes.
    pub(crate) ec_rows: ec_shards::RowCache,
    /// Degraded reads of erasure-coded files and the rows they decoded.
    pub ec_stats: ec::EcStats,
    /// Write-behind data, bounded by `osc.*.max_dirty_mb`.
    pub(crate) dirty: writeback::DirtyCache,
    /// Space each OST promised for cached writes (`osc.*.cur_grant_bytes`).
    pub(crate) grants: grant::OscGrants,
    /// Bulk RPCs per OST (`osc.*.rpc_stats`).
    pub rpc_stats: stats::RpcStats,
    /// Checksum errors by target (`osc.*.checksum_errors`, `osc.*.corrupt_reads`).
    pub cksum_stats: cksum::CksumStats,
    /// Damage injected into bulks, for tests (Lustre's checksum fail_loc values).
    pub checksum_faults: cksum::ChecksumFaults,
    /// Rate limit of the lines degraded reads write per chunk.
    pub(crate) degraded_log: nacre_core::log_limit::LogLimit,
    /// Rate limit of the lines reads of missing objects write.
    pub(crate) missing_log: nacre_core::log_limit::LogLimit,
    /// `llite.*.stats`: the calls the mount (or any caller) made, by [`VfsOp`].
    pub llite_stats: nacre_rpc::stats::OpStats,
    /// This client itself, for background work that outlives a call.
    me: std::sync::OnceLock<std::sync::Weak<Client>>,
    /// Stripe layouts of striped directories seen (see [`lmv`]).
    lmvs: parking_lot::Mutex<std::collections::HashMap<Fid, Arc<nacre_core::lmv::Lmv>>>,
}

impl Client {
    /// Mounts: fetches the configuration from the MGS and prepares imports for every target.
    pub async fn mount(spec: MountSpec) -> Result<Arc<Client>, MountError> {
        let cc = ConnConfig {
            fsname: spec.fsname.clone(),
            client: spec.client_name.clone(),
            key: spec.key.clone(),
            max_in_flight: 8,
            timeout: Duration::from_secs(60),
        };
        let mgc = Mgc::connect(&spec.mgs, cc)
            .await
            .map_err(|source| MountError::Mgs {
                addr: spec.mgs.clone(),
                source,
            })?;
        let config = mgc.config();
        let cfg = config.borrow().clone();
        if cfg.mdts.is_empty() {
            return Err(MountError::NoMdt(spec.fsname.clone()));
        }
        let client = Arc::new(Client {
            fsname: spec.fsname.clone(),
            spec: spec.clone(),
            config: config.clone(),
            mgc,
            mdcs: RwLock::new(Vec::new()),
            mdc_replays: RwLock::new(Vec::new()),
            osc_replays: RwLock::new(Vec::new()),
            commit_round: tokio::sync::Mutex::new(()),
            uuid: rand::random::<u64>() | 1,
            oscs: RwLock::new(Vec::new()),
            tunables: Arc::new(Tunables::default()),
            local_changes: LocalChanges::default(),
            appends: append::AppendLocks::default(),
            flocks: flock::LockOwners::default(),
            cache_hook: RwLock::new(None),
            stopping: watch::channel(false).0,
            ra_bytes: std::sync::atomic::AtomicU64::new(0),
            ec_shards: ec_shards::ShardCache::default(),
            ec_rows: ec_shards::RowCache::default(),
            ec_stats: ec::EcStats::default(),
            dirty: writeback::DirtyCache::default(),
            grants: grant::OscGrants::default(),
            rpc_stats: stats::RpcStats::default(),
            cksum_stats: cksum::CksumStats::default(),
            checksum_faults: cksum::ChecksumFaults::default(),
            degraded_log: nacre_core::log_limit::LogLimit::default(),
            missing_log: nacre_core::log_limit::LogLimit::default(),
            llite_stats: nacre_rpc::stats::OpStats::default(),
            me: std::sync::OnceLock::new(),
            lmvs: Default::default(),
        });
        // Set before the imports are made: their callback loops hold it.
        let _ = client.me.set(Arc::downgrade(&client));
        client.apply_config(&cfg);
        tokio::spawn(apply_changes(Arc::downgrade(&client), config));
        Ok(client)
    }

    /// Has `rep` tell this client when an eviction lost kept changes of files.
    fn tell_lost(&self, rep: &replay::ReplayList) {
        if let Some(me) = self.me.get() {
            let me = me.clone();
            rep.on_lost(Box::new(move |files| {
                if let Some(c) = me.upgrade() {
                    c.lost_with_eviction(files);
                }
            }));
        }
    }

    /// An eviction lost kept changes of `files`: every handle still open that wrote one
    /// of them reports EIO at its next `fsync` or close, as Lustre's evicted client does,
    /// rather than a success for data that is gone.
    fn lost_with_eviction(&self, files: &[Fid]) {
        for fid in files {
            let n = self.dirty.fail(fid, Errno::EIO);
            tracing::error!(target: "client", "file {fid}: unsynced changes lost with the eviction; {n} open handle(s) will report EIO");
        }
    }

    /// Makes imports for targets that appeared and applies persistent parameters.
    fn apply_config(&self, cfg: &FsConfig) {
        let make = |t: TargetName| {
            let cc = ConnConfig {
                fsname: self.spec.fsname.clone(),
                client: self.spec.client_name.clone(),
                key: self.spec.key.clone(),
                max_in_flight: if t.kind == nacre_core::TargetKind::Mdt {
                    self.tunables.mdc_max_rpcs_in_flight()
                } else {
                    self.tunables.max_rpcs_in_flight()
                },
                timeout: DEFAULT_TIMEOUT,
            };
            let imp = Arc::new(Import::new(t, cc, self.config.clone()));
            imp.set_recovery_timeout(self.tunables.recovery_timeout());
            imp
        };
        {
            let mut m = self.mdcs.write();
            while m.len() < cfg.mdts.len() {
                let idx = m.len() as u32;
                let imp = make(TargetName::mdt(idx));
                let rep = Arc::new(replay::ReplayList::new(
                    self.uuid,
                    TargetKind::Mdt,
                    imp.request_timeout(),
                ));
                imp.set_connect_hook(rep.clone());
                self.tell_lost(&rep);
                self.mdc_replays.write().push(rep.clone());
                tokio::spawn(replay::ping_while_kept(
                    imp.clone(),
                    rep,
                    self.stopping.subscribe(),
                ));
                if let Some(me) = self.me.get() {
                    tokio::spawn(callback::follow(
                        me.clone(),
                        imp.clone(),
                        self.stopping.subscribe(),
                    ));
                }
                m.push(imp);
            }
        }
        {
            let mut o = self.oscs.write();
            while o.len() < cfg.osts.len() {
                let idx = o.len() as u32;
                let imp = make(TargetName::ost(idx));
                let rep = Arc::new(replay::ReplayList::new(
                    self.uuid,
                    TargetKind::Ost,
                    imp.request_timeout(),
                ));
                imp.set_connect_hook(rep.clone());
                self.tell_lost(&rep);
                self.osc_replays.write().push(rep.clone());
                tokio::spawn(replay::ping_while_kept(
                    imp.clone(),
                    rep,
                    self.stopping.subscribe(),
                ));
                o.push(imp);
            }
        }
        for (name, value) in &cfg.params {
            self.tunables.apply_persistent(name, value, &self.fsname);
        }
        if !cfg.params.is_empty() {
            self.refresh_imports();
        }
    }

    /// This client as an `Arc` (it always lives in one once mounted).
    pub(crate) fn arc(&self) -> Option<Arc<Client>> {
        self.me.get().and_then(std::sync::Weak::upgrade)
    }

    pub fn config(&self) -> FsConfig {
        self.config.borrow().clone()
    }

    /// The configuration as it changes.
    pub fn config_watch(&self) -> watch::Receiver<FsConfig> {
        self.config.clone()
    }

    pub fn root(&self) -> Fid {
        Fid::ROOT
    }

    pub fn mdt_count(&self) -> usize {
        self.mdcs.read().len()
    }

    pub fn ost_count(&self) -> usize {
        self.oscs.read().len()
    }

    pub(crate) fn mdc(&self, idx: u32) -> Result<Arc<Import>, Errno> {
        self.mdcs
            .read()
            .get(idx as usize)
            .cloned()
            .ok_or(Errno::EIO)
    }

    /// MDT `idx`'s replay list.
    pub fn mdc_replay(&self, idx: u32) -> Result<Arc<replay::ReplayList>, Errno> {
        self.mdc_replays
            .read()
            .get(idx as usize)
            .cloned()
            .ok_or(Errno::EIO)
    }

    /// OST `idx`'s replay list.
    pub fn osc_replay(&self, idx: u32) -> Result<Arc<replay::ReplayList>, Errno> {
        self.osc_replays
            .read()
            .get(idx as usize)
            .cloned()
            .ok_or(Errno::EIO)
    }

    pub(crate) fn osc(&self, idx: u32) -> Result<Arc<Import>, Errno> {
        self.oscs
            .read()
            .get(idx as usize)
            .cloned()
            .ok_or(Errno::EIO)
    }

    /// Bytes of written data not yet on the OSTs (`osc.*.cur_dirty_bytes`).
    pub fn dirty_bytes(&self) -> u64 {
        self.dirty.dirty_bytes()
    }

    /// The imports of all OSTs, for statfs and tunables.
    pub fn oscs(&self) -> Vec<Arc<Import>> {
        self.oscs.read().clone()
    }

    pub fn mdcs(&self) -> Vec<Arc<Import>> {
        self.mdcs.read().clone()
    }

    /// The link to the MGS (`mgc.*` parameters).
    /// This mount's identity on the MDTs (Lustre's client UUID).
    pub fn uuid(&self) -> u64 {
        self.uuid
    }

    pub fn mgc(&self) -> &Mgc {
        &self.mgc
    }

    /// `lctl set_param -P`: records a parameter on the MGS for every node.
    pub async fn set_param_persistent(&self, name: &str, value: Option<&str>) -> Result<(), Errno> {
        self.mgc.set_param(name, value).await.map_err(|e| e.errno())
    }

    /// `lctl pool_*` through the MGS (see `nacre_core::pool::apply`).
    pub async fn pool(&self, pool: &str, op: nacre_core::pool::PoolOp) -> Result<(), Errno> {
        self.mgc.pool(pool, op).await.map_err(|e| e.errno())
    }

    /// Applies a changed recovery timeout to every import.
    pub fn refresh_imports(&self) {
        let t = self.tunables.recovery_timeout();
        let rif = self.tunables.max_rpcs_in_flight();
        for i in self.mdcs().iter().chain(self.oscs().iter()) {
            i.set_recovery_timeout(t);
        }
        // Connections follow osc.* and mdc.*.max_rpcs_in_flight at once, live ones included.
        for i in self.oscs() {
            tokio::spawn(async move { i.set_max_in_flight(rif).await });
        }
        let mdc_rif = self.tunables.mdc_max_rpcs_in_flight();
        for i in self.mdcs() {
            tokio::spawn(async move { i.set_max_in_flight(mdc_rif).await });
        }
    }

    pub fn unmount(&self) {
        self.stopping.send_replace(true);
        self.mgc.stop();
    }

    /// Tells every MDT this client is leaving (before [`Client::unmount`]), so an MDT
    /// that restarts later does not wait out its recovery window for it, and has every OST
    /// it keeps writes for commit them (after this, nobody could replay them). Each target
    /// gets [`DISCONNECT_TIMEOUT`]; one that does not answer keeps the record, and its next
    /// recovery waits for the window, as after a client crash.
    pub async fn disconnect(&self) {
        let commits = self.osc_kept().into_iter().map(|(ost, imp)| async move {
            match tokio::time::timeout(DISCONNECT_TIMEOUT, self.commit_ost(ost, &imp)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(target: "client", "commit on {}: {e}: writes it did not sync may be lost to a power cut", imp.target()),
                Err(_) => tracing::warn!(target: "client", "commit on {}: no answer within {DISCONNECT_TIMEOUT:?}: writes it did not sync may be lost to a power cut", imp.target()),
            }
        });
        futures::future::join_all(commits).await;
        let calls = self.mdcs().into_iter().map(|imp| {
            let req = nacre_rpc::msg::Request::MdtDisconnect { client: self.uuid };
            async move {
                match tokio::time::timeout(DISCONNECT_TIMEOUT, imp.call(&req, bytes::Bytes::new())).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => tracing::warn!(target: "client", "disconnect from {}: {e}", imp.target()),
                    Err(_) => tracing::warn!(target: "client", "disconnect from {}: no answer within {DISCONNECT_TIMEOUT:?}", imp.target()),
                }
            }
        });
        futures::future::join_all(calls).await;
    }
}

/// Applies each new configuration (new targets, persistent parameters).
async fn apply_changes(client: std::sync::Weak<Client>, mut config: watch::Receiver<FsConfig>) {
    while config.changed().await.is_ok() {
        let c = config.borrow_and_update().clone();
        let Some(cl) = client.upgrade() else { return };
        cl.apply_config(&c);
    }
}

pub(crate) fn rpc_errno(e: RpcError) -> Errno {
    if let RpcError::Disconnected { .. } | RpcError::Timeout { .. } = &e {
        tracing::warn!(target: "client", "{e}");
    }
    e.errno()
}

/// How long an unmounting client waits for each MDT to take its disconnect.
pub const DISCONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Slots of [`LocalChanges`]: a fixed table, however many files the client touches.
const CHANGE_SLOTS: usize = 256;

/// Change counters by FID hash: files that share a slot only cost each other a refetch of
/// what they cached, and the table never grows.
pub(crate) struct LocalChanges([std::sync::atomic::AtomicU64; CHANGE_SLOTS]);

impl Default for LocalChanges {
    fn default() -> Self {
        LocalChanges(std::array::from_fn(|_| {
            std::sync::atomic::AtomicU64::new(0)
        }))
    }
}

impl LocalChanges {
    fn slot(&self, fid: &Fid) -> &std::sync::atomic::AtomicU64 {
        let h = (fid.seq ^ u64::from(fid.oid).rotate_left(32) ^ u64::from(fid.ver))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        &self.0[(h >> 56) as usize % CHANGE_SLOTS]
    }

    /// Records a change of `fid`'s data.
    pub(crate) fn bump(&self, fid: &Fid) {
        self.slot(fid)
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// Records a change of every file's data.
    pub(crate) fn bump_all(&self) {
        for s in &self.0 {
            s.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        }
    }

    /// A value that differs from any earlier one once `fid` changed.
    pub(crate) fn of(&self, fid: &Fid) -> u64 {
        self.slot(fid).load(std::sync::atomic::Ordering::Acquire)
    }
}

#[cfg(test)]
mod local_changes_tests {
    use super::*;

    #[test]
    fn a_change_shows_on_its_file_only() {
        let c = LocalChanges::default();
        let a = Fid::new(0x200000400, 1, 0);
        // Another file in another slot (neighbouring FIDs must spread).
        let b = (2..64)
            .map(|oid| Fid::new(0x200000400, oid, 0))
            .find(|f| !std::ptr::eq(c.slot(f), c.slot(&a)))
            .expect("FIDs spread over the slots");
        let (a0, b0) = (c.of(&a), c.of(&b));
        c.bump(&a);
        assert_ne!(c.of(&a), a0);
        assert_eq!(c.of(&b), b0);
        let used: std::collections::HashSet<_> = (0..1000)
            .map(|oid| c.slot(&Fid::new(0x200000400, oid, 0)) as *const _)
            .collect();
        assert!(used.len() > CHANGE_SLOTS / 2, "{} slots used", used.len());
    }
}
