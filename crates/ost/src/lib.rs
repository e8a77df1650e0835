//! The object storage target (Lustre's ofd): serves object reads, writes, truncates,
//! fallocates, destroys, syncs and statfs over the wire, and precreates objects for the MDTs.
//!
//! It owns the request handling for one OST; the bytes live in [`nacre_osd::ObjStore`]. File
//! I/O runs on tokio's blocking pool so a slow disk never stalls the connection tasks.
//!
//! Checksums (Lustre's `tgt_brw_write` checks): a write that carries checksums has each
//! piece checked before it is written; a bulk damaged on the way is refused with EBADMSG
//! and counted (`bulk_checksum_errors`), and the client sends it again. The store keeps each
//! block's checksum and checks every read against it; data that fails is ECKSUM on the
//! wire (EIO to applications), logged with the object, file and offset, and counted
//! (`checksum_errors`). A read that asks for checksums gets those of the bytes it
//! carries, for the client to check. Scrub ([`nacre_osd::scrub`]) checks everything in
//! the background. The OST's parameters, as `lctl` shows them under
//! `obdfilter.<target>.`, are declared here ([`Ost::params`]).
//!
//! Grants ([`grant`]): each client connection is promised space before it caches writes;
//! a write reply carries new grant, a write cached against grant is taken from it, other
//! writes must fit in the space nobody was promised (ENOSPC before anything is written),
//! and a connection's grant goes back when it ends (`obdfilter.*.tot_granted`,
//! `tot_pending`).
//!
//! Recovery ([`recovery`]): a client's writes, punches and fallocates carry transnos and
//! are kept by the client until the OST commits them (every few seconds, one `syncfs`);
//! after a restart that lost them, the clients replay them in transno order before
//! anything else runs (`obdfilter.*.recovery_status`).
//!
//! An OST whose storage failed (see [`nacre_osd::health`]: its directory removed, its
//! device returning errors) answers every request with EIO until it is restarted, rather
//! than serve from files that are gone.

pub mod exports;
pub mod fid2path;
pub mod grant;
pub mod recovery;

use bytes::Bytes;
use nacre_core::cksum::ChecksumType;
use nacre_core::fid::DATA_SEQ_WIDTH;
use nacre_core::{Errno, Fid};
use nacre_osd::scrub::Scrub;
use nacre_osd::{Health, ObjError, ObjStore};
use nacre_rpc::lfsck::LfsckService;
use nacre_rpc::msg::{
    BulkCksum, ClientUuid, ORPHAN_CLEANUP_MAX, ObjAttr, Reply, Request, StatFs, WriteGrant,
};
use nacre_rpc::server::{RequestCtx, Service};
use nacre_rpc::target::{Recovery, Step};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Largest read one request may ask for (matches the frame bulk limit with room to spare).
pub const MAX_READ: u32 = 32 << 20;
/// Objects one precreate request may add.
pub const MAX_PRECREATE: u32 = nacre_rpc::msg::OST_MAX_PRECREATE;

/// A read's length within [`MAX_READ`].
fn check_read(len: u32) -> Result<(), Errno> {
    if len > MAX_READ {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// Makes an object durable; one that is gone has nothing to keep.
fn sync_object(s: &ObjStore, obj: &Fid) -> Result<(), Errno> {
    match s.sync(obj) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(e) => Err(e),
    }
}

/// An object's size, blocks and data change for a glimpse (`None`: not known here).
fn object_attr(s: &ObjStore, obj: &Fid) -> Option<ObjAttr> {
    s.getattr(obj).ok().map(|(size, blocks, mtime)| ObjAttr {
        size,
        blocks,
        mtime,
    })
}

pub struct Ost {
    pub index: u32,
    store: Arc<ObjStore>,
    scrub: Arc<Scrub>,
    /// Write bulks refused because they arrived damaged.
    bulk_checksum_errors: AtomicU64,
    /// The checker, attached once the OST has started ([`Ost::set_lfsck`]).
    lfsck: std::sync::OnceLock<Arc<dyn LfsckService>>,
    /// Space promised to each client connection.
    grants: grant::Grants,
    /// Transnos, commits and the records of clients with uncommitted changes.
    txn: Arc<recovery::Transactions>,
    /// Replay recovery after a restart.
    recovery: Recovery,
    /// The client each connection said it is ([`Request::OstConnect`]).
    exports: exports::Exports,
}

/// Requests that run while the OST recovers: the servers' own ([`Request::needs_server_role`]),
/// pings and statfs. Every other request waits until the replays are in, so no client
/// reads what a replay is about to change.
fn runs_during_recovery(req: &Request) -> bool {
    req.needs_server_role() || matches!(req, Request::Ping | Request::Statfs | Request::OstStatfs)
}

/// One OST parameter: its name after `obdfilter.<target>.`, value, and whether `lctl
/// set_param` may change it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OstParam {
    pub name: String,
    pub value: String,
    pub writable: bool,
}

impl Ost {
    /// The OST of `store`, with the recovery state kept in its target directory: in
    /// recovery when a client may have changes to replay.
    pub fn new(index: u32, store: ObjStore) -> std::io::Result<Ost> {
        let (txn, recorded) = recovery::Transactions::load(store.target_dir())?;
        // What changed after the last commit's sync began may be torn by a crash.
        store.set_torn_window(txn.synced_from(), std::time::SystemTime::now());
        let recovery = Recovery::new(recorded, txn.last_committed());
        if recovery.is_recovering() {
            tracing::info!(target: "ost", "OST{index:04x}: in recovery, waiting for its clients");
        }
        let store = Arc::new(store);
        let grants = match std::fs::metadata(store.root()) {
            Ok(m) => grant::Grants::on_device(std::os::unix::fs::MetadataExt::dev(&m)),
            Err(e) => {
                tracing::warn!(target: "ost", "OST{index:04x}: {}: {e}; its grants are counted alone", store.root().display());
                grant::Grants::default()
            }
        };
        Ok(Ost {
            index,
            scrub: Scrub::new(store.clone()),
            store,
            bulk_checksum_errors: AtomicU64::new(0),
            lfsck: std::sync::OnceLock::new(),
            grants,
            txn: Arc::new(txn),
            recovery,
            exports: exports::Exports::default(),
        })
    }

    pub fn store(&self) -> &Arc<ObjStore> {
        &self.store
    }

    pub fn scrub(&self) -> &Arc<Scrub> {
        &self.scrub
    }

    /// Write bulks refused because they arrived damaged.
    pub fn bulk_checksum_errors(&self) -> u64 {
        self.bulk_checksum_errors.load(Ordering::Relaxed)
    }

    /// The OST's parameters (`obdfilter.<target>.NAME`).
    pub fn params(&self) -> Vec<OstParam> {
        let p = |name: &str, value: String, writable: bool| OstParam {
            name: name.to_string(),
            value,
            writable,
        };
        let mut v = vec![
            // 1: written data goes through (and stays in) the page cache; 0: large
            // aligned writes go straight to the disk.
            p(
                "writethrough_cache_enable",
                u8::from(!self.store.direct_io()).to_string(),
                true,
            ),
            p("checksum_type", ChecksumType::Crc32c.list(), false),
            // Bad blocks found at rest by reads and changes (scrub counts its own).
            p(
                "checksum_errors",
                self.store.checksum_errors().to_string(),
                false,
            ),
            p(
                "bulk_checksum_errors",
                self.bulk_checksum_errors().to_string(),
                false,
            ),
            // Blocks a crash tore before a commit covered them, taken as they were.
            p(
                "checksum_torn_retaken",
                self.store.torn_retaken().to_string(),
                false,
            ),
            // Such blocks reported bad to a reader with another copy, which repairs them.
            p(
                "checksum_torn_reported",
                self.store.torn_reported().to_string(),
                false,
            ),
            // 1: a write naming another file than the object's filter fid is refused.
            p(
                "lfsck_verify_pfid",
                u8::from(self.store.verify_pfid()).to_string(),
                true,
            ),
            p(
                "verify_pfid_refused",
                self.store.pfid_refused().to_string(),
                false,
            ),
            p("tot_granted", self.grants.tot_granted().to_string(), false),
            p("tot_pending", self.grants.tot_pending().to_string(), false),
            p("health_check", self.health_check(), false),
            p("scrub_status", self.scrub.status(), false),
            p("recovery_status", self.recovery.status_text(), false),
            p(
                "recovery_time_soft",
                self.recovery.window().0.to_string(),
                true,
            ),
            p(
                "recovery_time_hard",
                self.recovery.window().1.to_string(),
                true,
            ),
            p(
                "last_committed",
                self.txn.last_committed().to_string(),
                false,
            ),
            p(
                "commit_interval",
                self.txn.commit_interval().as_secs().to_string(),
                true,
            ),
            p("scrub_bad_blocks", self.scrub.bad_blocks(), false),
        ];
        for (name, value) in self.scrub.params() {
            v.push(p(&format!("scrub_{name}"), value.to_string(), true));
        }
        v
    }

    /// Sets parameter `name` (after `obdfilter.<target>.`).
    pub fn set_param(&self, name: &str, value: &str) -> Result<(), String> {
        let flag = || match value.trim() {
            "0" => Ok(false),
            "1" => Ok(true),
            v => Err(format!("{name}: '{v}' is not 0 or 1")),
        };
        if name == "writethrough_cache_enable" {
            let v: u64 = value
                .trim()
                .parse()
                .map_err(|_| format!("{name}: '{}' is not a number", value.trim()))?;
            self.store.set_direct_io(v == 0);
            return Ok(());
        }
        if name == "commit_interval" {
            return self.txn.set_commit_interval(value);
        }
        if let Some(which) = name.strip_prefix("recovery_time_") {
            let v = nacre_rpc::target::parse_recovery_time(name, value)?;
            match which {
                "soft" => self.recovery.set_soft(v),
                "hard" => self.recovery.set_hard(v),
                _ => return Err(format!("{name}: read-only or unknown parameter")),
            }
            return Ok(());
        }
        if name == "lfsck_verify_pfid" {
            self.store.set_verify_pfid(flag()?);
            return Ok(());
        }
        match name.strip_prefix("scrub_") {
            Some(s) if nacre_osd::scrub::PARAMS.iter().any(|p| p.name == s) => {
                self.scrub.set_param(s, value)
            }
            _ => Err(format!("{name}: read-only or unknown parameter")),
        }
    }

    /// Attaches the checker; requests for it go there from now on.
    pub fn set_lfsck(&self, l: Arc<dyn LfsckService>) {
        if self.lfsck.set(l).is_err() {
            tracing::warn!(target: "ost", "OST{:04x}: a checker is already attached", self.index);
        }
    }

    /// The OST is stopping: a running check saves where it was.
    pub async fn stop(&self) {
        if let Some(l) = self.lfsck.get() {
            l.clone().stopping().await;
        }
        // A clean stop leaves nothing for clients to replay.
        if !self.recovery.is_recovering()
            && let Err(e) = self.txn.commit_at_stop(&self.store).await
        {
            tracing::warn!(target: "ost", "OST{:04x}: cannot commit at stop: {e}", self.index);
        }
        // A precreate still making files on a blocking thread would go on after the
        // target stopped; this waits for it to end.
        let store = self.store.clone();
        let _ = tokio::task::spawn_blocking(move || store.close()).await;
    }

    /// Space promised to client connections.
    pub fn grants(&self) -> &grant::Grants {
        &self.grants
    }

    /// Free and total bytes of the disk, for grants.
    #[allow(clippy::unnecessary_cast)]
    fn space(&self) -> Result<grant::Space, Errno> {
        let st = self.store.statfs()?;
        let frsize = st.f_frsize as u64;
        Ok(grant::Space {
            avail: st.f_bavail as u64 * frsize,
            total: st.f_blocks as u64 * frsize,
        })
    }

    /// The health of this OST's storage; its failure and reason, once failed.
    pub fn health(&self) -> &Arc<Health> {
        self.store.health()
    }

    /// `obdfilter.*.health_check`: `healthy` or `NOT HEALTHY: reason`.
    pub fn health_check(&self) -> String {
        self.health().status()
    }

    /// Until `shutdown`: streams that stopped give back the blocks reserved ahead of them
    /// once idle (see `ObjStore::release_idle`), and the storage is checked (see
    /// [`Health::monitor`]); scrub runs beside.
    pub async fn housekeeping(self: Arc<Self>, shutdown: tokio::sync::watch::Receiver<bool>) {
        tokio::spawn(self.scrub.clone().run(shutdown.clone()));
        let (shutdown_commits, shutdown_recover) = (shutdown.clone(), shutdown.clone());
        let health = self.health().clone().monitor(shutdown.clone());
        let release = async {
            let mut shutdown = shutdown;
            loop {
                let store = self.store.clone();
                let due = tokio::select! {
                    due = store.next_idle_release() => due,
                    _ = shutdown.changed() => return,
                };
                tokio::select! {
                    _ = tokio::time::sleep_until(due.into()) => {}
                    _ = shutdown.changed() => return,
                }
                // A write since may have moved the due time on: release_idle gives back
                // only what is idle by then, and the loop asks again.
                let _ = tokio::task::spawn_blocking(move || store.release_idle()).await;
            }
        };
        let commits = async {
            let mut shutdown = shutdown_commits;
            let mut last = tokio::time::Instant::now();
            loop {
                // Looked at every second, so a changed interval counts from the last commit.
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = shutdown.changed() => return,
                }
                // A commit during recovery would drop the records of the clients it waits
                // for (they have nothing above `last_committed` yet); its own commit ends it.
                if last.elapsed() < self.txn.commit_interval() || self.recovery.is_recovering() {
                    continue;
                }
                last = tokio::time::Instant::now();
                if let Err(e) = self.txn.commit(&self.store).await {
                    tracing::warn!(target: "ost", "OST{:04x}: commit failed: {e}", self.index);
                }
            }
        };
        tokio::join!(
            health,
            release,
            commits,
            self.clone().recover(shutdown_recover)
        );
    }

    /// Recovery's driver: applies replays in transno order, evicts clients that miss the
    /// window, and ends with everything replayed committed.
    async fn recover(self: Arc<Self>, mut stopping: tokio::sync::watch::Receiver<bool>) {
        if !self.recovery.is_recovering() {
            return;
        }
        let me = format!("OST{:04x}", self.index);
        loop {
            if *stopping.borrow() {
                return;
            }
            match self.recovery.next_step() {
                Step::Apply(transno, q) => {
                    let r = self
                        .clone()
                        .dispatch(q.ctx, q.req, q.bulk, true)
                        .await
                        .map(|(r, _)| r);
                    if let Err(e) = &r {
                        tracing::warn!(target: "ost", "{me}: replay of transno {transno} from client {:016x} failed: {e}", q.client);
                    }
                    let _ = q.done.send(r);
                }
                Step::Evict(gone) => {
                    for c in gone {
                        tracing::warn!(target: "ost", "{me}: recovery window ended: evicting client {c:016x}, which did not reconnect; its uncommitted writes are lost");
                    }
                }
                Step::Wait(until) => {
                    tokio::select! {
                        _ = self.recovery.wait(until) => {}
                        _ = stopping.changed() => {}
                    }
                }
                Step::Finish => break,
            }
        }
        self.txn.advance(self.recovery.last_replayed());
        if let Err(e) = self.txn.commit(&self.store).await {
            tracing::error!(target: "ost", "{me}: cannot commit the replayed writes: {e}");
        }
        let (recovered, evicted, replayed, _) = self.recovery.finish();
        tracing::info!(target: "ost", "{me}: recovery over: {recovered} clients recovered, {evicted} evicted, {replayed} requests replayed");
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&ObjStore) -> Result<T, Errno> + Send + 'static,
    ) -> Result<T, Errno> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|_| Errno::EIO)?
    }

    // statvfs's field types differ between targets (u32 or u64): the casts are needed there.
    #[allow(clippy::unnecessary_cast)]
    /// The disk's space; `bavail` counts only what nobody was promised (Lustre's OFD
    /// subtracts dirty and pending bytes; grants and the reserve go too here), so an OST
    /// whose space is all granted looks full to the MDT's allocator.
    fn statfs(&self) -> Result<StatFs, Errno> {
        let st = self.store.statfs()?;
        let frsize = st.f_frsize as u64;
        let space = grant::Space {
            avail: st.f_bavail as u64 * frsize,
            total: st.f_blocks as u64 * frsize,
        };
        Ok(StatFs {
            bsize: 4096,
            blocks: st.f_blocks as u64 * frsize / 4096,
            bfree: st.f_bfree as u64 * frsize / 4096,
            bavail: self.grants.unpromised(space) / 4096,
            files: st.f_files as u64,
            ffree: st.f_ffree as u64,
            namelen: 255,
        })
    }
}

/// A read's reply: its bytes without a copy, and their checksums if asked for.
pub fn read_reply(out: nacre_osd::ReadOut, cksum: Option<ChecksumType>) -> (Reply, Bytes) {
    let (start, len) = (out.start, out.len);
    let reply = match cksum {
        // Nothing read (past the end, an object never written) has no pieces.
        Some(kind) => Reply::Checksummed(BulkCksum {
            kind,
            sums: out.sums.unwrap_or_default(),
        }),
        None => Reply::Ok,
    };
    (reply, Bytes::from(out.buf).slice(start..start + len))
}

impl Service for Ost {
    /// A read over [`MAX_READ`] is refused before the server reserves its reply.
    fn admit(&self, req: &Request) -> Result<(), Errno> {
        match req {
            Request::OstRead { len, .. } => check_read(*len),
            _ => Ok(()),
        }
    }

    async fn handle(
        self: Arc<Self>,
        ctx: RequestCtx,
        req: Request,
        bulk: Bytes,
    ) -> Result<(Reply, Bytes), Errno> {
        self.health().ensure()?;
        if !req.objects_within_bounds() {
            return Err(Errno::EINVAL);
        }
        let r = self.clone().recovery_or_dispatch(ctx, req, bulk).await;
        if let Err(e) = r {
            // A storage error may mean the storage is going.
            self.health().after_failed_request(e).await;
        }
        r
    }

    /// The client connection is gone: its grant is free again.
    async fn disconnected(self: Arc<Self>, ctx: RequestCtx) {
        self.grants.release(ctx.conn_id);
        self.exports.unbind(ctx.conn_id);
    }
}

impl Ost {
    /// The client `conn` said it is at its [`Request::OstConnect`]: a request naming
    /// another is refused.
    fn check_export(&self, ctx: &RequestCtx, client: ClientUuid) -> Result<(), Errno> {
        self.exports.check(ctx, client)
    }

    /// Recovery's requests and tracked changes; every other request once recovery allows.
    async fn recovery_or_dispatch(
        self: Arc<Self>,
        ctx: RequestCtx,
        req: Request,
        bulk: Bytes,
    ) -> Result<(Reply, Bytes), Errno> {
        let none = Bytes::new();
        match req {
            Request::OstConnect { client } => {
                self.exports.bind(&ctx, client)?;
                // A client recovery does not wait for connects once it has ended.
                let _ = self.recovery.connect(client).await;
                Ok((
                    Reply::TargetConnected {
                        instance: self.recovery.instance,
                        last_committed: self.txn.last_committed(),
                    },
                    none,
                ))
            }
            Request::Replay {
                client,
                transno,
                req,
                outcome: _,
            } => {
                self.check_export(&ctx, client)?;
                if !req.is_ost_replayable() {
                    return Err(Errno::EPROTO);
                }
                let rx = self
                    .recovery
                    .queue(client, transno, ctx, *req, bulk, None)?;
                match rx.await {
                    Ok(r) => r.map(|r| (r, none)),
                    Err(_) => Err(Errno::ESHUTDOWN),
                }
            }
            Request::ReplayDone { client } => {
                self.check_export(&ctx, client)?;
                self.recovery.replay_done(client).await?;
                Ok((
                    Reply::Recovered {
                        last_committed: self.txn.last_committed(),
                    },
                    none,
                ))
            }
            Request::OstCommit => {
                // Not during recovery (see the commit loop in `housekeeping`).
                self.recovery.wait_ended().await;
                let last_committed = self.txn.commit(&self.store).await?;
                Ok((Reply::Committed { last_committed }, none))
            }
            Request::Tracked {
                client,
                xid: _,
                req,
            } => {
                self.check_export(&ctx, client)?;
                self.recovery.wait_ended().await;
                if !req.is_ost_replayable() {
                    // A ping for `last_committed`, or a request with nothing to replay.
                    let (reply, bulk) = self.clone().dispatch(ctx, *req, bulk, false).await?;
                    return Ok((
                        Reply::Tracked {
                            transno: 0,
                            last_committed: self.txn.last_committed(),
                            reply: Box::new(reply),
                        },
                        bulk,
                    ));
                }
                if self.txn.start(client) {
                    let txn = self.txn.clone();
                    let made = tokio::task::spawn_blocking(move || txn.record(client))
                        .await
                        .map_err(|_| Errno::EIO)
                        .and_then(|r| r);
                    if let Err(e) = made {
                        self.txn.done(client, false);
                        tracing::error!(target: "ost", "OST{:04x}: cannot record client {client:016x}: {e}", self.index);
                        return Err(e);
                    }
                }
                let r = self.clone().dispatch(ctx, *req, bulk, false).await;
                let transno = self.txn.done(client, r.is_ok());
                let (reply, bulk) = r?;
                Ok((
                    Reply::Tracked {
                        transno,
                        last_committed: self.txn.last_committed(),
                        reply: Box::new(reply),
                    },
                    bulk,
                ))
            }
            req => {
                if !runs_during_recovery(&req) {
                    self.recovery.wait_ended().await;
                }
                self.dispatch(ctx, req, bulk, false).await
            }
        }
    }

    /// Runs one request; `replayed`: a replay after a restart (see
    /// [`ObjStore::write_replayed`]).
    async fn dispatch(
        self: Arc<Self>,
        ctx: RequestCtx,
        req: Request,
        bulk: Bytes,
        replayed: bool,
    ) -> Result<(Reply, Bytes), Errno> {
        let none = Bytes::new();
        match req {
            Request::Ping => Ok((
                Reply::Pong {
                    target: format!("OST{:04x}", self.index),
                },
                none,
            )),
            Request::OstWrite {
                obj,
                parent,
                offset,
                cksum,
                grant: WriteGrant { from_grant, want },
                layout,
            } => {
                let end = offset.checked_add(bulk.len() as u64).ok_or(Errno::EFBIG)?;
                // A layout kept beside the filter fid is what a lost file is rebuilt from:
                // one that cannot hold this stripe is refused, not stored.
                if layout.is_some_and(|l| !l.is_sane() || !l.holds_stripe(parent.ver)) {
                    return Err(Errno::EINVAL);
                }
                let len = bulk.len();
                // Admitted before anything is written; counted in until it is done.
                let pending =
                    self.grants
                        .admit(ctx.conn_id, len as u64, from_grant, self.space()?)?;
                let r = self
                    .blocking(move |s| {
                        let sums = cksum.as_ref().map(|c| c.sums.as_slice());
                        let write = if replayed {
                            ObjStore::write_replayed
                        } else {
                            ObjStore::write_placed
                        };
                        Ok(write(
                            s,
                            &obj,
                            &parent,
                            layout,
                            offset,
                            &bulk,
                            sums,
                            sums.is_some(),
                        ))
                    })
                    .await?;
                match r {
                    Ok(n) => {
                        // Written: the bytes are in the free space now.
                        drop(pending);
                        let grant = match want {
                            0 => 0,
                            _ => self.grants.give(ctx.conn_id, want, self.space()?),
                        };
                        Ok((Reply::OstWritten { written: n, grant }, none))
                    }
                    Err(e @ ObjError::Damaged { .. }) => {
                        pending.refund();
                        // Lustre's "BAD WRITE CHECKSUM"; the client sends it again.
                        self.bulk_checksum_errors.fetch_add(1, Ordering::Relaxed);
                        tracing::error!(
                            target: "ost",
                            "OST{:04x}: BAD WRITE CHECKSUM from {} ({}): file {} object {obj} extent [{offset}-{}] of {len} bytes: {e}",
                            self.index,
                            ctx.client,
                            ctx.peer,
                            Fid::new(parent.seq, parent.oid, 0),
                            end.saturating_sub(1),
                        );
                        Err(Errno::EBADMSG)
                    }
                    // Refused before a byte was written (the object names another
                    // file): the client sends it again, against the same grant.
                    Err(ObjError::Errno(Errno::EINPROGRESS)) => {
                        pending.refund();
                        Err(Errno::EINPROGRESS)
                    }
                    Err(e) => Err(e.into()),
                }
            }
            Request::OstRead {
                obj,
                offset,
                len,
                cksum,
                torn,
                verify,
            } => {
                check_read(len)?;
                let sums = cksum.map(|_| verify);
                let out = self
                    .blocking(move |s| {
                        Ok(s.read_checked(&obj, offset, len as usize, sums, torn)?)
                    })
                    .await?;
                Ok(read_reply(out, cksum))
            }
            Request::OstGetattr { objs } => {
                let attrs = self
                    .blocking(move |s| Ok(objs.iter().map(|o| object_attr(s, o)).collect()))
                    .await?;
                Ok((Reply::ObjAttrs(attrs), none))
            }
            Request::OstFiemap { obj } => {
                let ext = self.blocking(move |s| s.extents(&obj)).await?;
                Ok((Reply::ObjExtents(ext), none))
            }
            Request::OstPunch { obj, size } => {
                self.blocking(move |s| Ok(s.punch(&obj, size)?)).await?;
                Ok((Reply::Ok, none))
            }
            Request::OstFallocate {
                obj,
                parent,
                offset,
                len,
                mode,
            } => {
                self.blocking(move |s| Ok(s.fallocate(&obj, &parent, offset, len, mode)?))
                    .await?;
                Ok((Reply::Ok, none))
            }
            Request::OstDestroy { objs } => {
                // Durable before the answer: the MDT drops its destroy record on it.
                self.blocking(move |s| s.destroy_durably(&objs)).await?;
                Ok((Reply::Ok, none))
            }
            Request::OstSetOwner { objs, uid, gid } => {
                // Durable before the answer: the MDT drops its owner record on it.
                self.blocking(move |s| {
                    let mut changed = false;
                    for o in &objs {
                        changed |= s.set_owner(o, uid, gid)?;
                    }
                    if changed { s.sync_all() } else { Ok(()) }
                })
                .await?;
                Ok((Reply::Ok, none))
            }
            Request::OstSync { objs } => {
                self.blocking(move |s| {
                    for o in &objs {
                        sync_object(s, o)?;
                    }
                    Ok(())
                })
                .await?;
                Ok((Reply::Ok, none))
            }
            Request::OstSyncGetattr { objs } => {
                let attrs = self
                    .blocking(move |s| {
                        objs.iter()
                            .map(|o| {
                                sync_object(s, o)?;
                                Ok(object_attr(s, o))
                            })
                            .collect()
                    })
                    .await?;
                Ok((Reply::ObjAttrs(attrs), none))
            }
            Request::OstStatfs | Request::Statfs => Ok((Reply::Statfs(self.statfs()?), none)),
            Request::OstPrecreate { seq, last } => {
                if last > DATA_SEQ_WIDTH || seq < nacre_core::fid::FID_SEQ_NORMAL {
                    return Err(Errno::EINVAL);
                }
                let cur = self.blocking(move |s| s.last_id(seq)).await?;
                if last.saturating_sub(cur) > MAX_PRECREATE {
                    return Err(Errno::EINVAL);
                }
                let id = self.blocking(move |s| s.precreate(seq, last)).await?;
                Ok((Reply::LastId(id), none))
            }
            Request::OstGetLastId { seq } => {
                let id = self.blocking(move |s| s.last_id(seq)).await?;
                Ok((Reply::LastId(id), none))
            }
            Request::OstCleanOrphans { seq, from } => {
                if seq < nacre_core::fid::FID_SEQ_NORMAL || from == 0 {
                    return Err(Errno::EINVAL);
                }
                let last = self.blocking(move |s| s.last_id(seq)).await?;
                if last.saturating_sub(from) >= ORPHAN_CLEANUP_MAX {
                    tracing::warn!(target: "ost", "OST{:04x}: not resetting objects {from}..={last} of sequence {seq:#x}: more than {ORPHAN_CLEANUP_MAX}", self.index);
                    return Err(Errno::EOVERFLOW);
                }
                self.blocking(move |s| s.clean_orphans(seq, from)).await?;
                Ok((Reply::LastId(last), none))
            }
            Request::Lfsck(r) => {
                if !r.within_bounds() {
                    return Err(Errno::EINVAL);
                }
                let l = self.lfsck.get().cloned().ok_or(Errno::ENOTSUP)?;
                Ok((Reply::Lfsck(l.handle(r).await?), none))
            }
            _ => Err(Errno::EPROTO),
        }
    }
}
