//! The coordinator side of distributed operations (mkdir of remote and striped
//! directories, unlink, rename and link across MDTs) and the requests MDTs send each
//! other. See the module above for the protocol and its invariants.

use super::exec::{self, CONFLICT, Effects};
use super::log::{self, Committed};
use super::proxy::ProxyError;
use super::qos;
use super::reserve::{MAX_ATTEMPTS, RESERVED, pause};
use crate::Mdt;
use crate::fail;
use crate::mdd::{self, MAX_DEPTH};
use crate::perm;
use futures::future::join_all;
use nacre_core::lmv::{
    HashType, LMV_HASH_FLAG_OVERSTRIPED, LMV_HASH_TYPE_MASK, LMV_MAX_STRIPE_COUNT, Lmv, LmvTemplate,
};
use nacre_core::{Attr, Errno, Fid, FileKind, Timespec};
use nacre_osd::Table;
use nacre_rpc::msg::{
    Cred, DirLayoutRequest, DneObject, DneOpState, DneUpdate, InodeInfo, Reply, Request,
};
use nacre_rpc::server::RequestCtx;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a coordinator holds a `DneResolve` for an operation still running here.
const RESOLVE_WAIT: Duration = Duration::from_secs(5);
/// How long MDT QoS waits for another MDT's statfs.
const QOS_STATFS_WAIT: Duration = Duration::from_secs(1);
/// Most stripes on one MDT (`max_stripes_per_mdt`).
const MAX_STRIPES_PER_MDT: u32 = 5;

/// The default a new subdirectory inherits from `t` (one level used up).
pub fn inherit(t: &LmvTemplate) -> Option<LmvTemplate> {
    match t.max_inherit {
        -1 => Some(t.clone()),
        n if n > 1 => Some(LmvTemplate {
            max_inherit: n - 1,
            ..t.clone()
        }),
        _ => None,
    }
}

/// A directory's default layout turned into a request for a new subdirectory.
pub fn layout_of(t: &LmvTemplate) -> DirLayoutRequest {
    DirLayoutRequest {
        stripe_count: t.stripe_count,
        stripe_offset: t.stripe_offset,
        mdts: Vec::new(),
        hash_type: t.hash_type,
    }
}

/// Where a Create request goes (see [`Mdt::dne_create_route`]).
pub(crate) enum CreateRoute {
    Plain,
    Dne,
    Remote(Fid),
}

fn is_dir(k: FileKind) -> bool {
    k == FileKind::Directory
}

impl Mdt {
    fn open_check(self: &Arc<Self>) -> impl Fn(&Fid) -> bool + Send + 'static {
        let me = self.clone();
        move |f: &Fid| me.opens.is_open(f)
    }

    fn dne_effects(&self, fx: Effects) {
        if !fx.destroyed.is_empty() {
            self.llog_kick.notify_one();
        }
    }

    /// Runs `updates` as one operation: locally in one transaction when they all live
    /// here, else with prepare, commit point and commit across the MDTs involved.
    pub(crate) async fn dne_run(self: &Arc<Self>, updates: Vec<DneUpdate>) -> Result<(), Errno> {
        let mut groups: BTreeMap<u32, Vec<DneUpdate>> = BTreeMap::new();
        for u in updates {
            groups.entry(self.mdt_of(&u.object())).or_default().push(u);
        }
        let local = groups.remove(&self.index).unwrap_or_default();
        let is_open = self.open_check();
        let res = self.dne.reserved.clone();
        if groups.is_empty() {
            let fx = self
                .store
                .write(move |tx| {
                    let mut fx = Effects::default();
                    exec::apply_local(tx, &res, &local, &is_open, &mut fx)?;
                    Ok(fx)
                })
                .await?;
            self.dne_effects(fx);
            return Ok(());
        }
        let op = self.dne.new_op();
        let (decided, _) = tokio::sync::watch::channel(DneOpState::InProgress);
        self.dne.inflight.lock().insert(op, decided);
        let r = self.dne_run_op(op, local, groups).await;
        // Normally decided at the commit point already; this covers every other exit.
        if let Some(d) = self.dne.inflight.lock().remove(&op) {
            let _ = d.send(if r.is_ok() {
                DneOpState::Committed
            } else {
                DneOpState::Aborted
            });
        }
        r
    }

    async fn dne_run_op(
        self: &Arc<Self>,
        op: u64,
        local: Vec<DneUpdate>,
        remote: BTreeMap<u32, Vec<DneUpdate>>,
    ) -> Result<(), Errno> {
        let coord = self.index;
        let participants: Vec<u32> = remote.keys().copied().collect();
        // 1. prepare everywhere else, in parallel.
        let prepares = remote.into_iter().map(|(mdt, updates)| async move {
            let r = match self.dne_proxy(mdt) {
                Ok(px) => px
                    .call(&Request::DnePrepare { coord, op, updates })
                    .await
                    .and_then(|r| match r {
                        Reply::Ok => Ok(()),
                        _ => Err(ProxyError::Errno(Errno::EPROTO)),
                    }),
                Err(e) => Err(ProxyError::Errno(e)),
            };
            (mdt, r)
        });
        let mut prepared = Vec::new();
        let mut failure: Option<Errno> = None;
        for (mdt, r) in join_all(prepares).await {
            match r {
                Ok(()) => prepared.push(mdt),
                Err(ProxyError::Errno(e)) => {
                    // A definite answer wins over a conflict, which wins over nothing.
                    if failure.is_none() || failure == Some(CONFLICT) {
                        failure = Some(e);
                    }
                }
                Err(ProxyError::Unreachable(why)) => {
                    tracing::warn!(target: "mdt::dne", "MDT{coord:04x}: op {op:#x}: MDT{mdt:04x} unreachable: {why}");
                    // It may have prepared: its own recovery will ask us and abort.
                    failure.get_or_insert(Errno::EIO);
                }
            }
        }
        if let Some(e) = failure {
            self.dne_abort_remote(op, &prepared).await;
            return Err(e);
        }
        fail::point("dne.coord.prepared", coord);
        // 2. the commit point: our own updates and the record, in one transaction, synced
        // before any participant is told to commit (a power cut must not take the record
        // back once a participant may have finished its part).
        let is_open = self.open_check();
        let res = self.dne.reserved.clone();
        let rec = log::encode_committed(&Committed {
            participants: participants.clone(),
            since_ms: log::now_ms(),
        })?;
        let res = self
            .store
            .write_sync(move |tx| {
                let mut fx = Effects::default();
                exec::apply_local(tx, &res, &local, &is_open, &mut fx)?;
                tx.put(Table::DneCommitted, &log::committed_key(op), &rec)?;
                Ok(fx)
            })
            .await;
        let fx = match res {
            Ok(fx) => fx,
            Err(e) => {
                self.dne_abort_remote(op, &prepared).await;
                return Err(e);
            }
        };
        if let Some(d) = self.dne.inflight.lock().remove(&op) {
            let _ = d.send(DneOpState::Committed);
        }
        self.dne_effects(fx);
        fail::point("dne.coord.committed", coord);
        // 3. commit everywhere else; what does not answer now, recovery finishes.
        let left = self.dne_commit_remote(op, &participants).await;
        fail::point("dne.coord.remote_committed", coord);
        self.dne_forget_or_keep(op, left).await;
        Ok(())
    }

    /// Sends the commit of `op` to `mdts`; returns those that did not confirm.
    pub(crate) async fn dne_commit_remote(&self, op: u64, mdts: &[u32]) -> Vec<u32> {
        let coord = self.index;
        let calls = mdts.iter().map(|&mdt| async move {
            let ok = match self.dne_proxy(mdt) {
                Ok(px) => matches!(
                    px.call(&Request::DneCommit { coord, op }).await,
                    Ok(Reply::Ok)
                ),
                Err(_) => false,
            };
            (mdt, ok)
        });
        join_all(calls)
            .await
            .into_iter()
            .filter(|(_, ok)| !ok)
            .map(|(m, _)| m)
            .collect()
    }

    /// Drops the committed record of `op` when nobody is left to tell, else narrows it.
    pub(crate) async fn dne_forget_or_keep(&self, op: u64, left: Vec<u32>) {
        let r = self
            .store
            .write(move |tx| {
                let k = log::committed_key(op);
                if left.is_empty() {
                    tx.delete(Table::DneCommitted, &k)?;
                } else if let Some(v) = tx.get(Table::DneCommitted, &k)? {
                    let mut c = log::decode_committed(&v)?;
                    c.participants = left;
                    tx.put(Table::DneCommitted, &k, &log::encode_committed(&c)?)?;
                }
                Ok(())
            })
            .await;
        if let Err(e) = r {
            tracing::warn!(target: "mdt::dne", "MDT{:04x}: op {op:#x}: updating its record: {e}", self.index);
        }
    }

    async fn dne_abort_remote(&self, op: u64, mdts: &[u32]) {
        let coord = self.index;
        let calls = mdts.iter().map(|&mdt| async move {
            if let Ok(px) = self.dne_proxy(mdt)
                && let Err(e) = px.call(&Request::DneAbort { coord, op }).await
            {
                // Its recovery asks us later and aborts then.
                tracing::warn!(target: "mdt::dne", "MDT{coord:04x}: op {op:#x}: abort on MDT{mdt:04x}: {e:?}");
            }
        });
        join_all(calls).await;
    }

    /// What a coordinator says about its operation `op`.
    pub(crate) async fn dne_resolve(&self, op: u64) -> Result<DneOpState, Errno> {
        let rx = self.dne.inflight.lock().get(&op).map(|s| s.subscribe());
        if let Some(mut rx) = rx {
            return Ok(
                match tokio::time::timeout(
                    RESOLVE_WAIT,
                    rx.wait_for(|s| *s != DneOpState::InProgress),
                )
                .await
                {
                    Ok(Ok(s)) => *s,
                    // Timed out, or decided and dropped in between: ask again later.
                    _ => DneOpState::InProgress,
                },
            );
        }
        let v = self.view()?;
        Ok(
            if v.get(Table::DneCommitted, &log::committed_key(op))?
                .is_some()
            {
                DneOpState::Committed
            } else {
                DneOpState::Aborted
            },
        )
    }

    /// An inode's attributes, wherever it lives.
    pub(crate) async fn dne_getattr(&self, fid: Fid) -> Result<InodeInfo, Errno> {
        if self.is_local(&fid) {
            let mut v = self.view()?;
            return mdd::get_inode(&mut v, &fid).and_then(|i| self.info(i));
        }
        match self
            .dne_proxy(self.mdt_of(&fid))?
            .call(&Request::Getattr { fid })
            .await
        {
            Ok(Reply::Inode(i)) => Ok(i),
            Ok(_) => Err(Errno::EPROTO),
            Err(ProxyError::Errno(Errno::ESTALE)) => Err(Errno::ENOENT),
            Err(e) => Err(e.errno()),
        }
    }

    /// Whether `cred` has `mask` on `fid`, asked of the MDT that holds it.
    async fn dne_permission(&self, fid: Fid, cred: &Cred, mask: u32) -> Result<(), Errno> {
        if self.is_local(&fid) {
            return self.may(&fid, cred, mask);
        }
        let req = Request::DnePermission {
            fid,
            cred: cred.clone(),
            mask,
        };
        match self.dne_proxy(self.mdt_of(&fid))?.call(&req).await {
            Ok(Reply::Ok) => Ok(()),
            Ok(_) => Err(Errno::EPROTO),
            Err(e) => Err(e.errno()),
        }
    }

    /// The entry `name` of directory `parent`, wherever the directory lives.
    async fn dne_entry(&self, parent: Fid, name: &[u8]) -> Result<Option<(Fid, FileKind)>, Errno> {
        if self.is_local(&parent) {
            let mut v = self.view()?;
            return local_entry(&mut v, &parent, name);
        }
        let req = Request::DneLookup {
            parent,
            name: name.to_vec(),
        };
        match self.dne_proxy(self.mdt_of(&parent))?.call(&req).await {
            Ok(Reply::Entry { fid, kind }) => Ok(Some((fid, kind))),
            Ok(_) => Err(Errno::EPROTO),
            Err(ProxyError::Errno(Errno::ENOENT)) => Ok(None),
            Err(e) => Err(e.errno()),
        }
    }

    /// The first link of an inode (none for the root) and, for a directory stripe, its
    /// master; wherever it lives.
    async fn dne_links(
        &self,
        fid: Fid,
    ) -> Result<(Vec<(Fid, Vec<u8>)>, Option<(Fid, u32)>), Errno> {
        if self.is_local(&fid) {
            let mut v = self.view()?;
            let ino = mdd::get_inode(&mut v, &fid)?;
            return Ok((
                ino.link.into_iter().collect(),
                exec::stripe_of(&mut v, &fid)?,
            ));
        }
        match self
            .dne_proxy(self.mdt_of(&fid))?
            .call(&Request::DneLinks { fid })
            .await
        {
            Ok(Reply::Links { links, stripe_of }) => Ok((links, stripe_of)),
            Ok(_) => Err(Errno::EPROTO),
            Err(e) => Err(e.errno()),
        }
    }

    /// Whether `anc` is `fid` or above it, walking first links up to the root across MDTs.
    async fn dne_is_ancestor(&self, anc: Fid, fid: Fid) -> Result<bool, Errno> {
        let mut cur = fid;
        for _ in 0..MAX_DEPTH {
            if cur == anc {
                return Ok(true);
            }
            if cur == Fid::ROOT {
                return Ok(false);
            }
            let (links, _) = self.dne_links(cur).await?;
            match links.first() {
                Some((p, _)) => cur = *p,
                None => return Ok(false),
            }
        }
        Err(Errno::ELOOP)
    }

    /// `path` of `fid` from the root, across MDTs; directory stripes add no component.
    pub(crate) async fn dne_fid2path(&self, fid: Fid) -> Result<Vec<u8>, Errno> {
        let mut parts: Vec<Vec<u8>> = Vec::new();
        let mut cur = fid;
        for _ in 0..MAX_DEPTH {
            if cur == Fid::ROOT {
                parts.reverse();
                return Ok(parts.join(&b'/'));
            }
            let (links, stripe) = self.dne_links(cur).await?;
            let (p, n) = links.first().ok_or(Errno::ENOENT)?;
            if stripe.is_none() {
                parts.push(n.clone());
            }
            cur = *p;
        }
        Err(Errno::ELOOP)
    }

    /// The MDTs the stripes of a new directory go to.
    async fn dne_place(&self, l: &DirLayoutRequest) -> Result<Vec<u32>, Errno> {
        let n_mdts = self.dne.mdt_count();
        let over = l.hash_type & LMV_HASH_FLAG_OVERSTRIPED != 0;
        // One index is where the stripes start (`-c 4 -i 1`), a list is every stripe's MDT.
        if l.mdts.len() == 1 && l.stripe_count != 1 {
            let l = DirLayoutRequest {
                stripe_offset: l.mdts[0] as i32,
                mdts: Vec::new(),
                ..l.clone()
            };
            return Box::pin(self.dne_place(&l)).await;
        }
        if !l.mdts.is_empty() {
            if l.mdts.iter().any(|&m| m >= n_mdts) {
                return Err(Errno::EINVAL);
            }
            if l.stripe_count > 1 && l.stripe_count as usize != l.mdts.len() {
                return Err(Errno::EINVAL);
            }
            if !over {
                for (k, m) in l.mdts.iter().enumerate() {
                    if l.mdts[..k].contains(m) {
                        return Err(Errno::EINVAL);
                    }
                }
            }
            return Ok(l.mdts.clone());
        }
        let count = match l.stripe_count {
            0 | 1 => 1,
            -1 => n_mdts,
            n if n < -1 && over => n.unsigned_abs() * n_mdts,
            n if n > 1 => n as u32,
            _ => return Err(Errno::EINVAL),
        };
        let limit = if over {
            n_mdts * MAX_STRIPES_PER_MDT
        } else {
            n_mdts
        };
        if count > limit || count > LMV_MAX_STRIPE_COUNT {
            return Err(Errno::EINVAL);
        }
        let start = match l.stripe_offset {
            -1 => self.dne_qos_pick().await,
            o if o >= 0 && (o as u32) < n_mdts => o as u32,
            _ => return Err(Errno::EINVAL),
        };
        Ok((0..count).map(|i| (start + i) % n_mdts).collect())
    }

    /// An MDT for a new directory by space and load (`-i -1`).
    async fn dne_qos_pick(&self) -> u32 {
        let fresh = {
            let q = self.dne.qos.lock();
            q.1.as_ref()
                .filter(|(at, _)| at.elapsed() < Duration::from_secs(qos::QOS_MAXAGE_SECS))
                .map(|(_, s)| s.clone())
        };
        let stats = match fresh {
            Some(s) => s,
            None => {
                let n = self.dne.mdt_count();
                let asks = (0..n).map(|i| async move {
                    let st = if i == self.index {
                        self.statfs().ok()
                    } else {
                        // A down MDT must not hold up a mkdir: it is simply not chosen.
                        match self.dne_proxy(i) {
                            Ok(px) => match tokio::time::timeout(
                                QOS_STATFS_WAIT,
                                px.call(&Request::Statfs),
                            )
                            .await
                            {
                                Ok(Ok(Reply::Statfs(s))) => Some(s),
                                _ => None,
                            },
                            Err(_) => None,
                        }
                    };
                    st.map(|s| qos::MdtSpace {
                        index: i,
                        bavail: s.bavail.saturating_mul(u64::from(s.bsize)),
                        ffree: s.ffree,
                    })
                });
                let s: Vec<_> = join_all(asks).await.into_iter().flatten().collect();
                self.dne.qos.lock().1 = Some((Instant::now(), s.clone()));
                s
            }
        };
        let mut q = self.dne.qos.lock();
        qos::choose(
            &stats,
            qos::QOS_THRESHOLD_RR,
            &mut q.0,
            rand::random::<u64>(),
        )
        .unwrap_or(self.index)
    }

    /// mkdir with a stripe layout: plain here, remote, or striped.
    pub(crate) async fn dne_mkdir(
        self: &Arc<Self>,
        parent: Fid,
        name: Vec<u8>,
        mode: u32,
        cred: &Cred,
        layout: &DirLayoutRequest,
        child_default: Option<LmvTemplate>,
    ) -> Result<InodeInfo, Errno> {
        mdd::check_name(&name)?;
        let htype = layout.hash_type & LMV_HASH_TYPE_MASK;
        let hash_type = match htype {
            0 => HashType::Fnv1a64 as u32 | (layout.hash_type & !LMV_HASH_TYPE_MASK),
            t if HashType::from_id(t).is_some_and(|h| h != HashType::None) => layout.hash_type,
            _ => return Err(Errno::EINVAL),
        };
        let (pino, mode, xattrs) = {
            let mut v = self.view()?;
            let p = mdd::live_plain_dir(&mut v, &parent)?;
            perm::may_lookup(&mut v, cred, &p.attr)?;
            if mdd::lookup(&mut v, &parent, &name)?.is_some() {
                return Err(Errno::EEXIST);
            }
            perm::may_create(&mut v, cred, &p.attr)?;
            let (mode, xattrs) =
                mdd::inherit_acls(&mut v, &parent, libc::S_IFDIR | (mode & 0o7777), cred.umask)?;
            (p, mode, xattrs)
        };
        let mdts = self.dne_place(layout).await?;
        let mut mode = mode;
        let mut gid = cred.gid;
        if pino.attr.mode & libc::S_ISGID != 0 {
            gid = pino.attr.gid;
            mode |= libc::S_ISGID;
        }
        let now = Timespec::now();
        let attr = |fid: Fid| Attr {
            fid,
            mode,
            nlink: 2,
            uid: cred.uid,
            gid,
            atime: now,
            mtime: now,
            ctime: now,
            btime: now,
            ..Attr::default()
        };
        let default_layout = if parent == Fid::ROOT {
            None
        } else {
            pino.default_layout.clone()
        };
        let mut updates = Vec::new();
        let (master, lmv) = if mdts.len() == 1 {
            let fid = self.dne_alloc_fids(mdts[0], 1).await?[0];
            (fid, None)
        } else {
            let master = self.dne_alloc_fids(mdts[0], 1).await?[0];
            let mut stripes = Vec::with_capacity(mdts.len());
            for (i, &m) in mdts.iter().enumerate() {
                let f = self.dne_alloc_fids(m, 1).await?[0];
                stripes.push((m, f));
                updates.push(DneUpdate::CreateObject(DneObject {
                    attr: attr(f),
                    lmv: None,
                    default_layout: default_layout.clone(),
                    default_lmv: child_default.clone(),
                    links: vec![(master, format!("{f}:{i}").into_bytes())],
                    stripe_of: Some((master, i as u32)),
                    xattrs: xattrs.clone(),
                }));
            }
            let lmv = Lmv {
                master_mdt: mdts[0],
                hash_type,
                layout_version: 0,
                stripes,
            };
            (master, Some(lmv))
        };
        let obj = DneObject {
            attr: attr(master),
            lmv: lmv.clone(),
            default_layout,
            default_lmv: child_default,
            links: vec![(parent, name.clone())],
            stripe_of: None,
            xattrs,
        };
        updates.push(DneUpdate::CreateObject(obj.clone()));
        updates.push(DneUpdate::InsertName {
            parent,
            name,
            fid: master,
            kind: FileKind::Directory,
            now,
        });
        super::reserve::retry_held(|| self.dne_run(updates.clone())).await?;
        Ok(InodeInfo {
            attr: obj.attr,
            layout: None,
            lmv,
            size_authoritative: true,
        })
    }

    /// `KillDir` of a directory and of every stripe it has.
    async fn dne_kill_dir(
        &self,
        fid: Fid,
        now: Timespec,
        out: &mut Vec<DneUpdate>,
    ) -> Result<(), Errno> {
        let info = self.dne_getattr(fid).await?;
        if !info.attr.is_dir() {
            return Err(CONFLICT);
        }
        if let Some(l) = &info.lmv {
            for (_, s) in &l.stripes {
                out.push(DneUpdate::KillDir { fid: *s, now });
            }
        }
        out.push(DneUpdate::KillDir { fid, now });
        Ok(())
    }

    /// unlink/rmdir of a name whose inode is on another MDT, or of a striped directory.
    pub(crate) async fn dne_unlink(
        self: &Arc<Self>,
        parent: Fid,
        name: Vec<u8>,
        want_dir: bool,
        cred: &Cred,
    ) -> Result<(), Errno> {
        let name = &name;
        retry_conflicts(move || async move {
            let now = Timespec::now();
            let (cfid, kind, dir) = {
                let mut v = self.view()?;
                let dir = mdd::get_inode(&mut v, &parent)?;
                if dir.attr.is_dir() {
                    perm::may_lookup(&mut v, cred, &dir.attr)?;
                }
                let (f, k) = local_entry(&mut v, &parent, name)?.ok_or(Errno::ENOENT)?;
                perm::may_create(&mut v, cred, &dir.attr)?;
                (f, k, dir)
            };
            // The sticky bit needs the entry's owner, wherever it lives (a name left
            // pointing at nothing is removed: that repairs the namespace).
            match self.dne_getattr(cfid).await {
                Ok(c) if perm::sticky_denies(cred, &dir.attr, c.attr.uid) => {
                    return Err(Errno::EPERM);
                }
                Ok(_) | Err(Errno::ENOENT) => {}
                Err(e) => return Err(e),
            }
            if want_dir && !is_dir(kind) {
                return Err(Errno::ENOTDIR);
            }
            if !want_dir && is_dir(kind) {
                return Err(Errno::EISDIR);
            }
            let mut updates = vec![DneUpdate::DeleteName {
                parent,
                name: name.clone(),
                fid: cfid,
                kind,
                now,
            }];
            if is_dir(kind) {
                match self.dne_kill_dir(cfid, now, &mut updates).await {
                    Ok(()) => {}
                    // A name left pointing at nothing (after a crash the checker reports):
                    // removing it repairs the namespace.
                    Err(Errno::ENOENT) => {}
                    Err(e) => return Err(e),
                }
            } else {
                updates.push(DneUpdate::DropLink {
                    fid: cfid,
                    parent,
                    name: name.clone(),
                    now,
                });
            }
            self.dne_run(updates).await
        })
        .await
    }

    /// rename when anything involved lives on another MDT; `dp` is local.
    pub(crate) async fn dne_rename(
        self: &Arc<Self>,
        sp: Fid,
        sn: Vec<u8>,
        dp: Fid,
        dn: Vec<u8>,
        flags: u32,
        cred: &Cred,
    ) -> Result<(), Errno> {
        use mdd::{RENAME_EXCHANGE, RENAME_NOREPLACE};
        if flags & !(RENAME_NOREPLACE | RENAME_EXCHANGE) != 0
            || flags == RENAME_NOREPLACE | RENAME_EXCHANGE
        {
            return Err(Errno::EINVAL);
        }
        for n in [&sn, &dn] {
            if n.as_slice() == b"." || n.as_slice() == b".." {
                return Err(Errno::EBUSY);
            }
            mdd::check_name(n)?;
        }
        if !self.is_local(&dp) {
            return Err(Errno::EPROTO);
        }
        let exchange = flags & RENAME_EXCHANGE != 0;
        let (sn, dn) = (&sn, &dn);
        retry_conflicts(move || async move {
            let now = Timespec::now();
            let (target, dattr) = {
                let mut v = self.view()?;
                let d = mdd::live_plain_dir(&mut v, &dp)?;
                perm::may_lookup(&mut v, cred, &d.attr)?;
                (mdd::lookup(&mut v, &dp, dn)?, d.attr)
            };
            self.dne_permission(sp, cred, perm::MAY_EXEC).await?;
            let (sfid, sk) = self.dne_entry(sp, sn).await?.ok_or(Errno::ENOENT)?;
            if target.map(|t| t.0) == Some(sfid) {
                return Ok(());
            }
            self.dne_rename_permission(cred, (sp, sfid), (&dattr, target), flags)
                .await?;
            let moves_dir =
                sp != dp && (is_dir(sk) || (exchange && target.is_some_and(|t| is_dir(t.1))));
            // Loop checks walk the tree: one such rename at a time in the file system.
            let _guard = if moves_dir {
                Some(self.dne_rename_lock().await?)
            } else {
                None
            };
            if is_dir(sk) && sp != dp && self.dne_is_ancestor(sfid, dp).await? {
                return Err(Errno::EINVAL);
            }
            let mut ups = Vec::new();
            if exchange {
                let (tfid, tk) = target.ok_or(Errno::ENOENT)?;
                if is_dir(tk) && sp != dp && self.dne_is_ancestor(tfid, sp).await? {
                    return Err(Errno::EINVAL);
                }
                ups.push(DneUpdate::SetName {
                    parent: sp,
                    name: sn.clone(),
                    old: (sfid, sk),
                    new: (tfid, tk),
                    now,
                });
                ups.push(DneUpdate::SetName {
                    parent: dp,
                    name: dn.clone(),
                    old: (tfid, tk),
                    new: (sfid, sk),
                    now,
                });
                ups.push(DneUpdate::Relink {
                    fid: tfid,
                    from: (dp, dn.clone()),
                    to: (sp, sn.clone()),
                    now,
                });
            } else {
                ups.push(DneUpdate::DeleteName {
                    parent: sp,
                    name: sn.clone(),
                    fid: sfid,
                    kind: sk,
                    now,
                });
                match target {
                    Some((tfid, tk)) => {
                        if flags & RENAME_NOREPLACE != 0 {
                            return Err(Errno::EEXIST);
                        }
                        if is_dir(sk) && !is_dir(tk) {
                            return Err(Errno::ENOTDIR);
                        }
                        if !is_dir(sk) && is_dir(tk) {
                            return Err(Errno::EISDIR);
                        }
                        ups.push(DneUpdate::SetName {
                            parent: dp,
                            name: dn.clone(),
                            old: (tfid, tk),
                            new: (sfid, sk),
                            now,
                        });
                        if is_dir(tk) {
                            match self.dne_kill_dir(tfid, now, &mut ups).await {
                                Ok(()) | Err(Errno::ENOENT) => {}
                                Err(e) => return Err(e),
                            }
                        } else {
                            ups.push(DneUpdate::DropLink {
                                fid: tfid,
                                parent: dp,
                                name: dn.clone(),
                                now,
                            });
                        }
                    }
                    None => ups.push(DneUpdate::InsertName {
                        parent: dp,
                        name: dn.clone(),
                        fid: sfid,
                        kind: sk,
                        now,
                    }),
                }
            }
            ups.push(DneUpdate::Relink {
                fid: sfid,
                from: (sp, sn.clone()),
                to: (dp, dn.clone()),
                now,
            });
            self.dne_run(ups).await
        })
        .await
    }

    /// A hard link in a local directory to an inode on another MDT.
    pub(crate) async fn dne_link(
        self: &Arc<Self>,
        fid: Fid,
        parent: Fid,
        name: Vec<u8>,
        cred: &Cred,
    ) -> Result<InodeInfo, Errno> {
        mdd::check_name(&name)?;
        let name = &name;
        retry_conflicts(move || async move {
            {
                let mut v = self.view()?;
                let d = mdd::live_plain_dir(&mut v, &parent)?;
                perm::may_lookup(&mut v, cred, &d.attr)?;
                if mdd::lookup(&mut v, &parent, name)?.is_some() {
                    return Err(Errno::EEXIST);
                }
                perm::may_create(&mut v, cred, &d.attr)?;
            }
            let info = self.dne_getattr(fid).await?;
            if info.attr.is_dir() {
                return Err(Errno::EPERM);
            }
            let kind = info.attr.kind().ok_or(Errno::EIO)?;
            let now = Timespec::now();
            let ups = vec![
                DneUpdate::AddLink {
                    fid,
                    parent,
                    name: name.clone(),
                    now,
                },
                DneUpdate::InsertName {
                    parent,
                    name: name.clone(),
                    fid,
                    kind,
                    now,
                },
            ];
            self.dne_run(ups).await
        })
        .await?;
        self.dne_getattr(fid).await
    }

    /// `vfs_rename`'s checks for a rename across MDTs, each asked of the MDT holding the
    /// object: the source may leave `sp` (search and write there, the sticky bit), the
    /// target may be replaced in the local target directory or a name made there, and a
    /// directory changing parent must be writable.
    async fn dne_rename_permission(
        &self,
        cred: &Cred,
        (sp, sfid): (Fid, Fid),
        (dattr, target): (&Attr, Option<(Fid, FileKind)>),
        flags: u32,
    ) -> Result<(), Errno> {
        self.dne_permission(sp, cred, perm::MAY_WRITE | perm::MAY_EXEC)
            .await?;
        let sattr = self.dne_getattr(sfid).await?.attr;
        let spattr = self.dne_getattr(sp).await?.attr;
        if perm::sticky_denies(cred, &spattr, sattr.uid) {
            return Err(Errno::EPERM);
        }
        {
            let mut v = self.view()?;
            perm::may_create(&mut v, cred, dattr)?;
        }
        let moves = sp != dattr.fid;
        if let Some((tfid, tk)) = target {
            let t = self.dne_getattr(tfid).await?.attr;
            if perm::sticky_denies(cred, dattr, t.uid) {
                return Err(Errno::EPERM);
            }
            if moves && flags & mdd::RENAME_EXCHANGE != 0 && is_dir(tk) {
                self.dne_permission(tfid, cred, perm::MAY_WRITE).await?;
            }
        }
        if moves && sattr.is_dir() {
            self.dne_permission(sfid, cred, perm::MAY_WRITE).await?;
        }
        Ok(())
    }

    /// Whether a rename must go the DNE way although both names are here: in a file
    /// system of several MDTs, a directory moving to another directory takes the file
    /// system's rename lock for its loop check (the walk up may cross MDTs). Asked inside
    /// the rename's own transaction, so a name that turns into a directory just before
    /// cannot move without the lock.
    pub(crate) fn rename_moves_dir<R: nacre_osd::KvRead>(
        tx: &mut R,
        sp: &Fid,
        sn: &[u8],
        dp: &Fid,
        dn: &[u8],
        flags: u32,
    ) -> Result<bool, Errno> {
        if sp == dp {
            return Ok(false);
        }
        let src = mdd::lookup(tx, sp, sn)?;
        let dst = if flags & mdd::RENAME_EXCHANGE != 0 {
            mdd::lookup(tx, dp, dn)?
        } else {
            None
        };
        Ok([src, dst].iter().flatten().any(|(_, k)| is_dir(*k)))
    }

    /// The root's default file layout as MDT0 has it (cached; refreshed by recovery).
    pub(crate) fn dne_root_default_layout(&self) -> Option<nacre_core::Layout> {
        self.dne
            .root_layout
            .lock()
            .as_ref()
            .and_then(|(_, l)| l.clone())
    }

    /// DNE's part of request dispatch: new requests, and the Create of a directory under
    /// a default directory layout or of a name whose inode lives elsewhere.
    pub(crate) async fn dne_dispatch(
        self: &Arc<Self>,
        ctx: &RequestCtx,
        req: Request,
    ) -> Result<Reply, Errno> {
        let _ = ctx;
        match req {
            Request::Mkdir {
                parent,
                name,
                mode,
                cred,
                layout,
            } => {
                let inherited = {
                    let mut v = self.view()?;
                    mdd::get_inode(&mut v, &parent)?
                        .default_lmv
                        .as_ref()
                        .and_then(inherit)
                };
                let inode = self
                    .dne_mkdir(parent, name, mode, &cred, &layout, inherited)
                    .await?;
                Ok(Reply::Created {
                    inode,
                    handle: None,
                })
            }
            Request::GetDefaultLmv { fid } => {
                let mut v = self.view()?;
                Ok(Reply::DefaultLmv(mdd::get_inode(&mut v, &fid)?.default_lmv))
            }
            Request::SetDefaultLmv { fid, lmv, cred } => {
                self.may_change_layout(&fid, &cred)?;
                if let Some(t) = &lmv {
                    let n = self.dne.mdt_count() as i32;
                    if t.stripe_offset >= n
                        || t.stripe_offset < -1
                        || t.stripe_count < -(MAX_STRIPES_PER_MDT as i32)
                    {
                        return Err(Errno::EINVAL);
                    }
                    if HashType::from_id(t.hash_type).is_none() {
                        return Err(Errno::EINVAL);
                    }
                }
                let now = Timespec::now();
                self.store
                    .write(move |tx| {
                        let mut ino = mdd::get_inode(tx, &fid)?;
                        if !ino.attr.is_dir() {
                            return Err(Errno::ENOTDIR);
                        }
                        ino.default_lmv = lmv;
                        ino.attr.ctime = now;
                        mdd::put_inode(tx, &ino)
                    })
                    .await?;
                Ok(Reply::Ok)
            }
            Request::DnePrepare { coord, op, updates } => {
                // Synced before the coordinator hears of it: it may commit on the strength
                // of this prepare, which a power cut must then not take back.
                let res = self.dne.reserved.clone();
                self.store
                    .write_sync(move |tx| exec::prepare_all(tx, &res, coord, op, updates))
                    .await?;
                fail::point("dne.part.prepared", self.index);
                Ok(Reply::Ok)
            }
            Request::DneCommit { coord, op } => {
                self.dne_participant_commit(coord, op).await?;
                Ok(Reply::Ok)
            }
            Request::DneAbort { coord, op } => {
                self.dne_participant_abort(coord, op).await?;
                Ok(Reply::Ok)
            }
            Request::DneResolve { op } => Ok(Reply::DneState(self.dne_resolve(op).await?)),
            Request::DneSeqGrant { to } => {
                let me = self.index;
                let s = self
                    .store
                    .write(move |tx| super::pool::grant_seq(tx, me, to))
                    .await?;
                Ok(Reply::Seq(s))
            }
            Request::DneLookup { parent, name } => {
                let mut v = self.view()?;
                match local_entry(&mut v, &parent, &name)? {
                    Some((fid, kind)) => Ok(Reply::Entry { fid, kind }),
                    None => Err(Errno::ENOENT),
                }
            }
            Request::DneLinks { fid } => {
                let mut v = self.view()?;
                let ino = mdd::get_inode(&mut v, &fid)?;
                // The first link only: however many links a file has, the walks up to the
                // root need one, and the reply stays small.
                Ok(Reply::Links {
                    stripe_of: exec::stripe_of(&mut v, &fid)?,
                    links: ino.link.into_iter().collect(),
                })
            }
            Request::DneRenameLock {
                holder,
                token,
                acquire,
            } => {
                self.dne_rename_lock_request(holder, token, acquire).await?;
                Ok(Reply::Ok)
            }
            Request::DnePermission { fid, cred, mask } => {
                self.may(&fid, &cred, mask)?;
                Ok(Reply::Ok)
            }
            Request::DneStatus => {
                let v = self.view()?;
                Ok(Reply::DneStatus {
                    pending: v.count(Table::DnePending)?,
                    committed: v.count(Table::DneCommitted)?,
                })
            }
            Request::Create {
                parent,
                name,
                mode,
                cred,
                ..
            } => {
                // Only directories under a default layout and opens of remote inodes
                // come here (see `dne_create_hook`).
                let kind = FileKind::from_mode(mode).ok_or(Errno::EINVAL)?;
                if kind != FileKind::Directory {
                    return Err(Errno::EPROTO);
                }
                let t = {
                    let mut v = self.view()?;
                    mdd::get_inode(&mut v, &parent)?
                        .default_lmv
                        .ok_or(Errno::EPROTO)?
                };
                let inode = self
                    .dne_mkdir(parent, name, mode, &cred, &layout_of(&t), inherit(&t))
                    .await?;
                Ok(Reply::Created {
                    inode,
                    handle: None,
                })
            }
            _ => Err(Errno::EPROTO),
        }
    }

    /// Where a Create goes: a directory whose parent has a default directory layout is
    /// made the DNE way; an open of an existing name whose inode is on another MDT is
    /// answered with its FID.
    pub(crate) fn dne_create_route(&self, req: &Request) -> Result<CreateRoute, Errno> {
        let Request::Create {
            parent,
            name,
            mode,
            open,
            exclusive,
            ..
        } = req
        else {
            return Ok(CreateRoute::Plain);
        };
        let mut v = self.view()?;
        if FileKind::from_mode(*mode) == Some(FileKind::Directory) {
            let p = mdd::get_inode(&mut v, parent)?;
            return Ok(if p.default_lmv.is_some() {
                CreateRoute::Dne
            } else {
                CreateRoute::Plain
            });
        }
        if open.is_some()
            && !exclusive
            && let Some((fid, _)) = mdd::lookup(&mut v, parent, name)?
            && !self.is_local(&fid)
        {
            return Ok(CreateRoute::Remote(fid));
        }
        Ok(CreateRoute::Plain)
    }

    pub(crate) async fn dne_participant_commit(
        self: &Arc<Self>,
        coord: u32,
        op: u64,
    ) -> Result<(), Errno> {
        let is_open = self.open_check();
        let res = self.dne.reserved.clone();
        // Synced before the coordinator hears of it: it then forgets the operation, and a
        // pending record a power cut brought back would be resolved as aborted.
        let fx = self
            .store
            .write_sync(move |tx| {
                let mut fx = Effects::default();
                exec::commit_all(tx, &res, coord, op, &is_open, &mut fx)?;
                Ok(fx)
            })
            .await?;
        self.dne_effects(fx);
        fail::point("dne.part.committed", self.index);
        Ok(())
    }

    pub(crate) async fn dne_participant_abort(
        self: &Arc<Self>,
        coord: u32,
        op: u64,
    ) -> Result<(), Errno> {
        let res = self.dne.reserved.clone();
        let is_open = self.open_check();
        let fx = self
            .store
            .write(move |tx| {
                let mut fx = Effects::default();
                exec::abort_all(tx, &res, coord, op, &is_open, &mut fx)?;
                Ok(fx)
            })
            .await?;
        self.dne_effects(fx);
        fail::point("dne.part.aborted", self.index);
        Ok(())
    }
}

/// Plans and runs a distributed operation again while it meets a namespace that changed
/// since it looked ([`CONFLICT`]) or a name a pending operation holds ([`RESERVED`]),
/// pausing a little longer each time; EBUSY if that lasts.
pub(crate) async fn retry_conflicts<T, F, Fut>(mut attempt: F) -> Result<T, Errno>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Errno>>,
{
    for n in 0..MAX_ATTEMPTS {
        tokio::time::sleep(pause(n)).await;
        match attempt().await {
            Err(CONFLICT | RESERVED) => continue,
            r => return r,
        }
    }
    Err(Errno::EBUSY)
}

/// The entry `name` of local directory `parent`, with the checks a name lookup makes.
fn local_entry<R: nacre_osd::KvRead>(
    v: &mut R,
    parent: &Fid,
    name: &[u8],
) -> Result<Option<(Fid, FileKind)>, Errno> {
    let p = mdd::get_inode(v, parent)?;
    if !p.attr.is_dir() {
        return Err(Errno::ENOTDIR);
    }
    if p.lmv.is_some() {
        return Err(mdd::STRIPED);
    }
    mdd::lookup(v, parent, name)
}
