//! Namespace operations (Lustre's lmv + mdc): each request goes to the MDT that owns the
//! FID it names, or for a name, the MDT of the directory object holding it (a striped
//! directory's stripe, see [`crate::lmv`]); the reply's attributes get their size from the
//! OSTs when the MDT's size is not exact.

use crate::replay::ReplayList;
use crate::{Client, rpc_errno};
use bytes::Bytes;
use nacre_core::attr::SetAttr;
use nacre_core::fid::mdt_of_seq;
use nacre_core::{Errno, Fid, Layout, TargetName};
use nacre_rpc::RpcError;
use nacre_rpc::import::Import;
use nacre_rpc::msg::{Cred, Dirent, InodeInfo, LayoutRequest, OpenFlags, Reply, Request, StatFs};
use std::time::Duration;

/// What a bounded ping says of its target: answered, or ENOTCONN when it could not be
/// reached or did not answer in time (Lustre's "inactive"), or the error it answered with.
fn ping_state(r: Result<Result<(), RpcError>, tokio::time::error::Elapsed>) -> Result<(), Errno> {
    match r {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) if e.is_transport() => Err(Errno::ENOTCONN),
        Ok(Err(e)) => Err(e.errno()),
        Err(_) => Err(Errno::ENOTCONN),
    }
}

/// How long `lfs check` waits for each target's ping: a target that answers in no more
/// than this is "active", so the command ends within it however many targets are down.
pub const TARGET_CHECK_BOUND: Duration = Duration::from_secs(5);

/// Has the MDT commit rather than keep more: a sync covers every reply so far.
async fn mdt_commit(imp: &Import, rep: &ReplayList) -> Result<(), Errno> {
    let upto = rep.last_transno();
    let sync = Request::Sync {
        fid: None,
        changed: false,
    };
    imp.call(&sync, Bytes::new()).await.map_err(rpc_errno)?;
    rep.committed(upto);
    Ok(())
}

/// What a create with an open intent found.
#[derive(Debug)]
pub struct CreateOutcome {
    pub inode: InodeInfo,
    /// The open handle, when the create asked to open.
    pub handle: Option<u64>,
    /// The MDT made the file (rather than opening one already there).
    pub created: bool,
}

impl Client {
    /// The MDT holding `fid`.
    pub fn mdt_of(&self, fid: &Fid) -> u32 {
        mdt_of_seq(fid.seq).unwrap_or(0)
    }

    /// A metadata request with bulk data in or out (Data-on-MDT I/O, read-on-open).
    pub(crate) async fn md_call_bulk(
        &self,
        mdt: u32,
        req: Request,
        bulk: Bytes,
    ) -> Result<(Reply, Bytes), Errno> {
        let imp = self.mdc(mdt)?;
        imp.call(&req, bulk).await.map_err(rpc_errno)
    }

    pub(crate) async fn md_call(&self, mdt: u32, req: Request) -> Result<Reply, Errno> {
        if crate::replay::is_replayable(&req) && self.tunables.replay_tracking() {
            return self.md_call_tracked(mdt, req).await;
        }
        let imp = self.mdc(mdt)?;
        imp.call(&req, Bytes::new())
            .await
            .map(|(r, _)| r)
            .map_err(rpc_errno)
    }

    /// A modifying request: sent with this mount's identity and a request number, and
    /// kept for replay until the MDT says it is committed.
    async fn md_call_tracked(&self, mdt: u32, req: Request) -> Result<Reply, Errno> {
        let imp = self.mdc(mdt)?;
        let rep = self.mdc_replay(mdt)?;
        if rep.is_full() {
            mdt_commit(&imp, &rep).await?;
        }
        rep.call_tracked(&imp, req, Bytes::new())
            .await
            .map(|(r, _)| r)
            .map_err(rpc_errno)
    }

    /// A Data-on-MDT write: with `mdc.*.replay_tracking`, tracked as a namespace change is
    /// and kept with its data until the MDT commits it, so it survives a power cut of the
    /// MDT. Past [`crate::replay::KEPT_DOM_BYTES_MAX`] kept, the MDT commits first.
    pub(crate) async fn dom_write_call(
        &self,
        mdt: u32,
        imp: &Import,
        req: &Request,
        bulk: Bytes,
    ) -> Result<(Reply, Bytes), RpcError> {
        if !self.tunables.replay_tracking() {
            return imp.call(req, bulk).await;
        }
        let rep = self.mdc_replay(mdt).map_err(RpcError::Errno)?;
        if rep.is_full() || rep.kept_bytes() >= crate::replay::KEPT_DOM_BYTES_MAX {
            mdt_commit(imp, &rep).await.map_err(RpcError::Errno)?;
        }
        rep.call_tracked(imp, req.clone(), bulk).await
    }

    /// Fills in the size from the OSTs when the MDT's is not exact.
    pub async fn complete(&self, mut info: InodeInfo) -> Result<InodeInfo, Errno> {
        let fid = info.attr.fid;
        if self.has_dirty(&fid) {
            // Our own writes still on the way: let them land, then ask again (the MDT
            // holds Data-on-MDT bytes and their size).
            self.flush_fid(&fid).await;
            info = match self
                .md_call(self.mdt_of(&fid), Request::Getattr { fid })
                .await?
            {
                Reply::Inode(i) => i,
                _ => return Err(Errno::EPROTO),
            };
        }
        if !info.size_authoritative
            && let Some(l) = &info.layout
        {
            self.glimpse(l, &mut info.attr).await?;
        }
        Ok(info)
    }

    /// [`Client::complete`] for the answer of a change the MDT has made that touched no
    /// object (`chown`, `chmod`, `utimes`): the change
    /// stands whatever the OSTs say, so an OST that stopped answering is not waited for,
    /// and a size they cannot give now leaves the MDT's (Lustre's client keeps the size it
    /// has there) instead of turning a change that was made into an error. The size is
    /// then a lower bound, marked not authoritative; the next `getattr` asks again.
    async fn complete_made(&self, info: InodeInfo) -> Result<InodeInfo, Errno> {
        let fid = info.attr.fid;
        if self.has_dirty(&fid) {
            return self.complete(info).await;
        }
        if info.size_authoritative {
            return Ok(info);
        }
        let Some(l) = &info.layout else {
            return Ok(info);
        };
        let mut attr = info.attr.clone();
        match self.glimpse_as(l, &mut attr, true).await {
            Ok(()) => Ok(InodeInfo { attr, ..info }),
            Err(e) => {
                tracing::debug!(target: "client", "file {fid}: changed, but its size is unknown for now: {e}");
                Ok(info)
            }
        }
    }

    /// Whether `cred` has `mask` (r 4, w 2, x 1) on `fid`, as its MDT decides.
    pub async fn access(&self, fid: Fid, cred: &Cred, mask: u32) -> Result<(), Errno> {
        let req = Request::Access {
            fid,
            cred: cred.clone(),
            mask,
        };
        self.md_call(self.mdt_of(&fid), req).await.map(|_| ())
    }

    /// A truncate through no writable handle needs write permission: asked first, so a
    /// refused one changes no object.
    async fn may_truncate(&self, fid: Fid, cred: &Cred, handle: Option<u64>) -> Result<(), Errno> {
        if handle.is_some() {
            // The MDT checks the handle with the size change.
            return Ok(());
        }
        self.access(fid, cred, 2).await
    }

    pub async fn lookup(&self, parent: Fid, name: &[u8], cred: &Cred) -> Result<InodeInfo, Errno> {
        let r = self
            .at_name(parent, name, |mdt, dir| {
                let req = Request::Lookup {
                    parent: dir,
                    name: name.to_vec(),
                    cred: cred.clone(),
                };
                async move { self.md_call(mdt, req).await }
            })
            .await?;
        match r {
            Reply::Inode(i) => self.merge_stripes(self.complete(i).await?).await,
            Reply::RemoteFid(fid) => self.getattr(fid).await,
            _ => Err(Errno::EPROTO),
        }
    }

    pub async fn getattr(&self, fid: Fid) -> Result<InodeInfo, Errno> {
        if self.has_dirty(&fid) {
            self.flush_fid(&fid).await;
        }
        match self
            .md_call(self.mdt_of(&fid), Request::Getattr { fid })
            .await?
        {
            Reply::Inode(i) => self.merge_stripes(self.complete(i).await?).await,
            _ => Err(Errno::EPROTO),
        }
    }

    /// Changes attributes; a size change truncates or extends the OST objects first.
    /// `handle`: the change goes through this open handle (`ftruncate`), which is
    /// enough to truncate when it is open for writing.
    pub async fn setattr(
        &self,
        fid: Fid,
        attr: SetAttr,
        cred: &Cred,
        handle: Option<u64>,
    ) -> Result<InodeInfo, Errno> {
        self.setattr_known(fid, attr, cred, handle, None).await
    }

    /// [`Client::setattr`]; `known`: the file as the caller got it just now, with this
    /// client's writes landed (an open's answer), which a size change then need not ask for.
    async fn setattr_known(
        &self,
        fid: Fid,
        attr: SetAttr,
        cred: &Cred,
        handle: Option<u64>,
        known: Option<InodeInfo>,
    ) -> Result<InodeInfo, Errno> {
        if let Some(size) = attr.size {
            // The MDT decides who may truncate: ask it before touching the objects.
            self.may_truncate(fid, cred, handle).await?;
            self.local_changes.bump(&fid);
            // getattr first lets this client's writes still on the way land, so none of
            // them lands after the truncate.
            let info = match known {
                Some(i) if !self.has_dirty(&fid) => i,
                _ => self.getattr(fid).await?,
            };
            if info.attr.is_dir() {
                return Err(Errno::EISDIR);
            }
            if handle.is_none() && info.layout.as_ref().is_some_and(nacre_core::ec::is_ec) {
                return Box::pin(self.ec_truncate_by_path(fid, attr, cred)).await;
            }
            if let Some(l) = &info.layout {
                if size > l.max_file_size() {
                    return Err(Errno::EFBIG);
                }
                self.truncate_objects(fid, l, size).await?;
            }
        }
        let req = Request::Setattr {
            fid,
            attr: attr.clone(),
            cred: cred.clone(),
            handle,
        };
        let info = match self.md_call(self.mdt_of(&fid), req).await? {
            // A size change went through the objects: its answer's size is theirs, asked
            // as any getattr asks.
            Reply::Inode(i) if attr.size.is_some() => {
                self.merge_stripes(self.complete(i).await?).await?
            }
            Reply::Inode(i) => self.merge_stripes(self.complete_made(i).await?).await?,
            _ => return Err(Errno::EPROTO),
        };
        if info.lmv.is_some() && attr.size.is_none() {
            // The stripes carry the times a striped directory shows (the newest wins).
            self.to_stripes(fid, |s| Request::Setattr {
                fid: s,
                attr: attr.clone(),
                cred: cred.clone(),
                handle: None,
            })
            .await?;
            return self.getattr(fid).await;
        }
        Ok(info)
    }

    /// A size change of erasure-coded `fid` with no handle (`truncate -s`): it goes
    /// through a handle opened for write, as `ftruncate` does, so the MDT marks the parity
    /// stale before any object is cut and the close codes it again from what is left (a
    /// row cut short no longer matches the parity coded from the bytes cut).
    async fn ec_truncate_by_path(
        &self,
        fid: Fid,
        attr: SetAttr,
        cred: &Cred,
    ) -> Result<InodeInfo, Errno> {
        let flags = OpenFlags {
            write: true,
            ..OpenFlags::default()
        };
        // The open's answer is the file as it is now: the truncate through the handle
        // needs no getattr of its own.
        let (f, info) = self.open(fid, flags, cred).await?;
        let r = self
            .setattr_known(fid, attr, cred, Some(f.handle), Some(info))
            .await;
        let closed = self.release(&f).await;
        r?;
        closed?;
        // The close moved the layout on (parity in sync again).
        self.getattr(fid).await
    }

    /// Creates a file, directory, device, fifo, socket or symlink; opens it when `open`.
    #[allow(clippy::too_many_arguments)]
    pub async fn create(
        &self,
        parent: Fid,
        name: &[u8],
        mode: u32,
        rdev: u32,
        cred: &Cred,
        symlink: Option<&[u8]>,
        layout: LayoutRequest,
        open: Option<OpenFlags>,
        exclusive: bool,
    ) -> Result<(InodeInfo, Option<u64>), Errno> {
        self.create_or_open(
            parent, name, mode, rdev, cred, symlink, layout, open, exclusive,
        )
        .await
        .map(|c| (c.inode, c.handle))
    }

    /// As [`Client::create`], saying whether the MDT made the file or opened one that
    /// was already there (a create without `O_EXCL` racing another).
    #[allow(clippy::too_many_arguments)]
    pub async fn create_or_open(
        &self,
        parent: Fid,
        name: &[u8],
        mode: u32,
        rdev: u32,
        cred: &Cred,
        symlink: Option<&[u8]>,
        layout: LayoutRequest,
        open: Option<OpenFlags>,
        exclusive: bool,
    ) -> Result<CreateOutcome, Errno> {
        let r = self
            .at_name(parent, name, |mdt, dir| {
                let req = Request::Create {
                    parent: dir,
                    name: name.to_vec(),
                    mode,
                    rdev,
                    cred: cred.clone(),
                    symlink: symlink.map(<[u8]>::to_vec),
                    layout: layout.clone(),
                    open,
                    exclusive,
                };
                async move { self.md_call(mdt, req).await }
            })
            .await?;
        let flags = open.unwrap_or_default();
        match r {
            Reply::Created { inode, handle } => {
                self.remember_lmv(&inode);
                if let Some(h) = handle {
                    self.keep_open(inode.attr.fid, h, flags, cred);
                }
                Ok(CreateOutcome {
                    inode,
                    handle,
                    created: true,
                })
            }
            Reply::Opened { inode, handle, .. } => {
                self.keep_open(inode.attr.fid, handle, flags, cred);
                Ok(CreateOutcome {
                    inode: self.complete(inode).await?,
                    handle: Some(handle),
                    created: false,
                })
            }
            // An existing name whose inode is on another MDT: open it there.
            Reply::RemoteFid(fid) => {
                let req = Request::Open {
                    fid,
                    flags,
                    cred: cred.clone(),
                };
                match self.md_call(self.mdt_of(&fid), req).await? {
                    Reply::Opened { inode, handle, .. } => {
                        self.keep_open(fid, handle, flags, cred);
                        Ok(CreateOutcome {
                            inode: self.complete(inode).await?,
                            handle: Some(handle),
                            created: false,
                        })
                    }
                    _ => Err(Errno::EPROTO),
                }
            }
            _ => Err(Errno::EPROTO),
        }
    }

    pub async fn unlink(&self, parent: Fid, name: &[u8], cred: &Cred) -> Result<(), Errno> {
        self.remove(parent, name, false, cred).await
    }

    pub async fn rmdir(&self, parent: Fid, name: &[u8], cred: &Cred) -> Result<(), Errno> {
        self.remove(parent, name, true, cred).await
    }

    async fn remove(&self, parent: Fid, name: &[u8], dir: bool, cred: &Cred) -> Result<(), Errno> {
        self.at_name(parent, name, |mdt, pdir| {
            let req = Request::Unlink {
                parent: pdir,
                name: name.to_vec(),
                dir,
                cred: cred.clone(),
            };
            async move { self.md_call(mdt, req).await }
        })
        .await
        .map(|_| ())
    }

    pub async fn rename(
        &self,
        sp: Fid,
        sn: &[u8],
        dp: Fid,
        dn: &[u8],
        flags: u32,
        cred: &Cred,
    ) -> Result<(), Errno> {
        // The target directory's MDT runs the rename (across MDTs when the source is
        // elsewhere); both names go to their stripes.
        let go = |src: Fid| async move {
            self.at_name(dp, dn, |mdt, ddir| {
                let req = Request::Rename {
                    src_parent: src,
                    src_name: sn.to_vec(),
                    dst_parent: ddir,
                    dst_name: dn.to_vec(),
                    flags,
                    cred: cred.clone(),
                };
                async move { self.md_call(mdt, req).await }
            })
            .await
        };
        let (_, sdir) = self.name_target(sp, sn);
        match go(sdir).await {
            Err(crate::lmv::STRIPED) if sdir == sp => {
                // The source directory is striped and was not known to be.
                self.getattr(sp).await?;
                let (_, sdir) = self.name_target(sp, sn);
                go(sdir).await.map(|_| ())
            }
            r => r.map(|_| ()),
        }
    }

    pub async fn link(
        &self,
        fid: Fid,
        parent: Fid,
        name: &[u8],
        cred: &Cred,
    ) -> Result<InodeInfo, Errno> {
        let r = self
            .at_name(parent, name, |mdt, dir| {
                let req = Request::Link {
                    fid,
                    parent: dir,
                    name: name.to_vec(),
                    cred: cred.clone(),
                };
                async move { self.md_call(mdt, req).await }
            })
            .await?;
        match r {
            Reply::Inode(i) => self.complete(i).await,
            _ => Err(Errno::EPROTO),
        }
    }

    /// One batch of directory entries after `cookie`, and whether it was the last.
    pub async fn readdir(
        &self,
        fid: Fid,
        cookie: u64,
        max: u32,
        cred: &Cred,
    ) -> Result<(Vec<Dirent>, bool), Errno> {
        if let Some(l) = self.cached_lmv(&fid) {
            return self.readdir_striped(&l, cookie, max, cred).await;
        }
        let req = Request::Readdir {
            fid,
            cookie,
            max,
            cred: cred.clone(),
        };
        match self.md_call(self.mdt_of(&fid), req).await {
            Ok(Reply::Dirents { entries, eof }) => Ok((entries, eof)),
            Ok(_) => Err(Errno::EPROTO),
            Err(crate::lmv::STRIPED) => {
                self.getattr(fid).await?;
                match self.cached_lmv(&fid) {
                    Some(l) => self.readdir_striped(&l, cookie, max, cred).await,
                    None => Err(Errno::EIO),
                }
            }
            Err(e) => Err(e),
        }
    }

    pub async fn readlink(&self, fid: Fid) -> Result<Vec<u8>, Errno> {
        match self
            .md_call(self.mdt_of(&fid), Request::Readlink { fid })
            .await?
        {
            Reply::Data(d) => Ok(d),
            _ => Err(Errno::EPROTO),
        }
    }

    pub async fn getxattr(&self, fid: Fid, name: &[u8], cred: &Cred) -> Result<Vec<u8>, Errno> {
        match self
            .md_call(
                self.mdt_of(&fid),
                Request::GetXattr {
                    fid,
                    name: name.to_vec(),
                    cred: cred.clone(),
                },
            )
            .await?
        {
            Reply::Data(d) => Ok(d),
            _ => Err(Errno::EPROTO),
        }
    }

    pub async fn listxattr(&self, fid: Fid, cred: &Cred) -> Result<Vec<Vec<u8>>, Errno> {
        let req = Request::ListXattr {
            fid,
            cred: cred.clone(),
        };
        match self.md_call(self.mdt_of(&fid), req).await? {
            Reply::Names(n) => Ok(n),
            _ => Err(Errno::EPROTO),
        }
    }

    pub async fn setxattr(
        &self,
        fid: Fid,
        name: &[u8],
        value: &[u8],
        flags: i32,
        cred: &Cred,
    ) -> Result<(), Errno> {
        self.md_call(
            self.mdt_of(&fid),
            Request::SetXattr {
                fid,
                name: name.to_vec(),
                value: value.to_vec(),
                flags,
                cred: cred.clone(),
            },
        )
        .await?;
        if name.starts_with(b"system.posix_acl_") && self.cached_lmv(&fid).is_some() {
            // Names are checked in a striped directory's stripes: they carry its ACLs.
            self.to_stripes(fid, |s| Request::SetXattr {
                fid: s,
                name: name.to_vec(),
                value: value.to_vec(),
                flags: 0,
                cred: cred.clone(),
            })
            .await?;
        }
        Ok(())
    }

    pub async fn removexattr(&self, fid: Fid, name: &[u8], cred: &Cred) -> Result<(), Errno> {
        self.md_call(
            self.mdt_of(&fid),
            Request::RemoveXattr {
                fid,
                name: name.to_vec(),
                cred: cred.clone(),
            },
        )
        .await?;
        if name.starts_with(b"system.posix_acl_") && self.cached_lmv(&fid).is_some() {
            let r = self
                .to_stripes(fid, |s| Request::RemoveXattr {
                    fid: s,
                    name: name.to_vec(),
                    cred: cred.clone(),
                })
                .await;
            match r {
                Ok(()) | Err(Errno::ENODATA) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Sets a directory's default layout (`None` removes it).
    pub async fn set_default_layout(
        &self,
        dir: Fid,
        layout: Option<Layout>,
        cred: &Cred,
    ) -> Result<(), Errno> {
        self.md_call(
            self.mdt_of(&dir),
            Request::SetLayout {
                fid: dir,
                layout: layout.clone(),
                cred: cred.clone(),
            },
        )
        .await?;
        // Files of a striped directory are created in its stripes.
        self.to_stripes(dir, |s| Request::SetLayout {
            fid: s,
            layout: layout.clone(),
            cred: cred.clone(),
        })
        .await
    }

    pub async fn get_default_layout(&self, dir: Fid) -> Result<Option<Layout>, Errno> {
        match self
            .md_call(self.mdt_of(&dir), Request::GetDefaultLayout { fid: dir })
            .await?
        {
            Reply::Layout(l) => Ok(l),
            _ => Err(Errno::EPROTO),
        }
    }

    /// Asks the MDT to instantiate every component of `fid` below `end`.
    pub async fn layout_intent(&self, fid: Fid, end: u64) -> Result<Layout, Errno> {
        match self
            .md_call(self.mdt_of(&fid), Request::LayoutIntent { fid, end })
            .await?
        {
            Reply::Layout(Some(l)) => Ok(l),
            _ => Err(Errno::EPROTO),
        }
    }

    pub async fn fid2path(&self, fid: Fid) -> Result<Vec<u8>, Errno> {
        match self
            .md_call(self.mdt_of(&fid), Request::Fid2Path { fid })
            .await?
        {
            Reply::Path(p) => Ok(p),
            _ => Err(Errno::EPROTO),
        }
    }

    /// Every target, MDTs first, and whether the configuration has it active (registered,
    /// not stopped): Lustre's ACTIVE or INACTIVE in `lfs osts`.
    pub fn target_states(&self) -> Vec<(TargetName, bool)> {
        self.mdcs()
            .into_iter()
            .chain(self.oscs())
            .map(|i| (i.target(), i.address().is_some()))
            .collect()
    }

    /// `lfs check`: pings every MDT and OST at once, each answer awaited at most `bound`
    /// (see [`TARGET_CHECK_BOUND`]).
    /// A target the configuration has no address for, or that does not answer in time
    /// or cannot be reached, is ENOTCONN (Lustre's "inactive"); MDTs first.
    pub async fn check_targets(&self, bound: Duration) -> Vec<(TargetName, Result<(), Errno>)> {
        let imports: Vec<_> = self.mdcs().into_iter().chain(self.oscs()).collect();
        let pings = imports.iter().map(|i| async move {
            if i.address().is_none() {
                return (i.target(), Err(Errno::ENOTCONN));
            }
            let r = tokio::time::timeout(bound, i.call(&Request::Ping, Bytes::new())).await;
            (i.target(), ping_state(r.map(|r| r.map(|_| ()))))
        });
        futures::future::join_all(pings).await
    }

    /// `lfs check mgts`: [`Client::check_targets`] for the MGS.
    pub async fn check_mgs(&self, bound: Duration) -> Result<(), Errno> {
        ping_state(tokio::time::timeout(bound, self.mgc().ping()).await)
    }

    /// statfs of every target, MDTs first (for `lfs df`).
    pub async fn target_statfs(&self) -> Vec<(TargetName, Result<StatFs, Errno>)> {
        let imports: Vec<_> = self.mdcs().into_iter().chain(self.oscs()).collect();
        // All at once; a target the configuration marks down (stopped, not yet back) is
        // left out as soon as it is, as Lustre's lov_statfs skips inactive OSTs, instead
        // of holding `df` for the recovery timeout.
        let calls = imports.iter().map(|i| async move {
            let req = match i.target().kind {
                nacre_core::TargetKind::Ost => Request::OstStatfs,
                _ => Request::Statfs,
            };
            let r = tokio::select! {
                r = i.call(&req, Bytes::new()) => match r {
                    Ok((Reply::Statfs(s), _)) => Ok(s),
                    Ok(_) => Err(Errno::EPROTO),
                    Err(e) => Err(e.errno()),
                },
                () = i.deactivated() => Err(Errno::ENOTCONN),
            };
            (i.target(), r)
        });
        futures::future::join_all(calls).await
    }

    /// The file system's statfs: space from the OSTs, inodes from the MDTs.
    pub async fn statfs(&self) -> Result<StatFs, Errno> {
        let all = self.target_statfs().await;
        let mut s = StatFs {
            bsize: 4096,
            namelen: 255,
            ..StatFs::default()
        };
        let mut any_ost = false;
        for (t, r) in &all {
            let Ok(st) = r else { continue };
            match t.kind {
                nacre_core::TargetKind::Ost => {
                    any_ost = true;
                    s.blocks += st.blocks;
                    s.bfree += st.bfree;
                    s.bavail += st.bavail;
                }
                nacre_core::TargetKind::Mdt => {
                    s.files += st.files;
                    s.ffree += st.ffree;
                }
                nacre_core::TargetKind::Mgs => {}
            }
        }
        if !any_ost {
            for (t, r) in &all {
                if let (nacre_core::TargetKind::Mdt, Ok(st)) = (t.kind, r) {
                    s.blocks += st.blocks;
                    s.bfree += st.bfree;
                    s.bavail += st.bavail;
                }
            }
        }
        if all.iter().all(|(_, r)| r.is_err()) {
            return Err(Errno::EIO);
        }
        Ok(s)
    }
}
