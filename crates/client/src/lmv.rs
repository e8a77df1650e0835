//! Striped directories on the client (Lustre's lmv): a name of a striped directory is
//! sent straight to the MDT of the stripe its hash picks, a striped directory's attributes
//! are merged from its stripes, and its entries are merged from theirs.
//!
//! The client learns a directory's stripe layout (LMV) from any reply that describes the
//! directory and keeps it: a FID is never reused and a layout never changes, so the cache
//! never goes stale. A request that reaches the master object of a striped directory the
//! client did not know about is refused with [`STRIPED`]; the client then fetches the
//! layout and sends the request again, to the stripe.
//!
//! Readdir cookies are the names' hashes (as on one MDT), and a striped directory's
//! entries are merged in hash order across its stripes, so a cookie means the same place
//! whichever stripe it came from: resuming after it neither repeats nor skips an entry
//! that existed throughout, whatever is created or removed meanwhile.

use crate::{Client, rpc_errno};
use bytes::Bytes;
use futures::future::join_all;
use nacre_core::lmv::{Lmv, LmvTemplate};
use nacre_core::{Errno, Fid};
use nacre_rpc::msg::{Cred, DirLayoutRequest, Dirent, InodeInfo, Reply, Request};
use std::sync::Arc;

/// The MDT's "this directory is striped: ask its stripe" answer.
pub const STRIPED: Errno = Errno::EREMCHG;
/// Striped-directory layouts remembered; the cache starts over past this.
pub const LMV_CACHE_MAX: usize = 65536;

impl Client {
    /// Remembers the stripe layout of a directory the client has seen.
    pub(crate) fn remember_lmv(&self, info: &InodeInfo) {
        if let Some(l) = &info.lmv {
            let mut c = self.lmvs.lock();
            if c.len() >= LMV_CACHE_MAX {
                c.clear();
            }
            c.entry(info.attr.fid)
                .or_insert_with(|| Arc::new(l.clone()));
        }
    }

    pub fn cached_lmv(&self, dir: &Fid) -> Option<Arc<Lmv>> {
        self.lmvs.lock().get(dir).cloned()
    }

    /// Fetches a directory's layout from its MDT (after a [`STRIPED`] answer).
    async fn fetch_lmv(&self, dir: Fid) -> Result<Option<Arc<Lmv>>, Errno> {
        match self
            .md_call(self.mdt_of(&dir), Request::Getattr { fid: dir })
            .await?
        {
            Reply::Inode(i) => {
                self.remember_lmv(&i);
                Ok(self.cached_lmv(&dir))
            }
            _ => Err(Errno::EPROTO),
        }
    }

    /// `fsyncdir(2)`: the names in `dir` on stable storage, on every MDT holding a stripe
    /// of it (one synced journal write each, shared with concurrent callers).
    pub async fn sync_dir(&self, dir: Fid) -> Result<(), Errno> {
        let lmv = match self.cached_lmv(&dir) {
            Some(l) => Some(l),
            None => self.fetch_lmv(dir).await?,
        };
        let mut mdts = vec![self.mdt_of(&dir)];
        if let Some(l) = lmv {
            mdts.extend(l.stripes.iter().map(|(m, _)| *m));
        }
        mdts.sort_unstable();
        mdts.dedup();
        let calls = mdts.into_iter().map(|m| async move {
            let req = Request::Sync {
                fid: None,
                changed: false,
            };
            match self.md_call(m, req).await? {
                Reply::Ok => Ok(()),
                _ => Err(Errno::EPROTO),
            }
        });
        futures::future::try_join_all(calls).await.map(|_| ())
    }

    /// Where a name of directory `dir` lives: the MDT and the directory object (the
    /// stripe of a striped directory, else the directory itself).
    pub fn name_target(&self, dir: Fid, name: &[u8]) -> (u32, Fid) {
        match self.cached_lmv(&dir).and_then(|l| l.stripe_for(name)) {
            Some((mdt, stripe)) => (mdt, stripe),
            None => (self.mdt_of(&dir), dir),
        }
    }

    /// Runs `f` with the MDT and directory object holding `name` of `dir`, once more
    /// with the stripe when the MDT says the directory is striped.
    pub(crate) async fn at_name<T, F, Fut>(&self, dir: Fid, name: &[u8], f: F) -> Result<T, Errno>
    where
        F: Fn(u32, Fid) -> Fut,
        Fut: std::future::Future<Output = Result<T, Errno>>,
    {
        let (mdt, obj) = self.name_target(dir, name);
        match f(mdt, obj).await {
            Err(STRIPED) if obj == dir => {
                if self.fetch_lmv(dir).await?.is_none() {
                    // Another directory of the request is the striped one (rename).
                    return Err(STRIPED);
                }
                let (mdt, obj) = self.name_target(dir, name);
                f(mdt, obj).await
            }
            r => r,
        }
    }

    /// A striped directory's attributes: the master's, with the stripes' subdirectory
    /// counts, sizes and newest times folded in (as Lustre's `lmv_merge_attr`).
    pub(crate) async fn merge_stripes(&self, mut info: InodeInfo) -> Result<InodeInfo, Errno> {
        let Some(l) = info.lmv.clone() else {
            return Ok(info);
        };
        self.remember_lmv(&info);
        let asks = l.stripes.iter().map(|&(mdt, fid)| async move {
            match self.md_call(mdt, Request::Getattr { fid }).await? {
                Reply::Inode(i) => Ok(i),
                _ => Err(Errno::EPROTO),
            }
        });
        let a = &mut info.attr;
        for s in join_all(asks).await {
            let s = s?.attr;
            a.nlink = a.nlink.saturating_add(s.nlink.saturating_sub(2));
            a.blocks += s.blocks;
            a.atime = a.atime.max(s.atime);
            a.mtime = a.mtime.max(s.mtime);
            a.ctime = a.ctime.max(s.ctime);
        }
        Ok(info)
    }

    /// Entries of a striped directory after `cookie`, merged in hash order.
    pub(crate) async fn readdir_striped(
        &self,
        lmv: &Lmv,
        cookie: u64,
        max: u32,
    ) -> Result<(Vec<Dirent>, bool), Errno> {
        let asks = lmv.stripes.iter().map(|&(mdt, fid)| async move {
            match self
                .md_call(mdt, Request::Readdir { fid, cookie, max })
                .await?
            {
                Reply::Dirents { entries, eof } => Ok((entries, eof)),
                _ => Err(Errno::EPROTO),
            }
        });
        let mut all = Vec::new();
        // Entries above the lowest last cookie of an unfinished stripe are not known yet
        // for that stripe: stop there, and resume from there next time.
        let mut complete_to = u64::MAX;
        let mut eof = true;
        for r in join_all(asks).await {
            let (ents, done) = r?;
            if !done {
                eof = false;
                if let Some(last) = ents.last() {
                    complete_to = complete_to.min(last.cookie);
                }
            }
            all.extend(ents);
        }
        all.retain(|e| e.cookie <= complete_to);
        all.sort_by(|a, b| a.cookie.cmp(&b.cookie).then_with(|| a.name.cmp(&b.name)));
        let max = max.max(1) as usize;
        if all.len() > max {
            // Keep a group of equal cookies whole: the next call resumes after it.
            let cut = all[max - 1].cookie;
            let keep = all.iter().take_while(|e| e.cookie <= cut).count();
            all.truncate(keep);
            eof = false;
        }
        Ok((all, eof))
    }

    /// `lfs mkdir` with a stripe layout: a remote directory (`-i`), a striped one (`-c`).
    pub async fn mkdir_with_layout(
        &self,
        parent: Fid,
        name: &[u8],
        mode: u32,
        cred: &Cred,
        layout: DirLayoutRequest,
    ) -> Result<InodeInfo, Errno> {
        let r = self
            .at_name(parent, name, |mdt, dir| {
                let req = Request::Mkdir {
                    parent: dir,
                    name: name.to_vec(),
                    mode,
                    cred: cred.clone(),
                    layout: layout.clone(),
                };
                async move { self.md_call(mdt, req).await }
            })
            .await?;
        match r {
            Reply::Created { inode, .. } => {
                self.remember_lmv(&inode);
                Ok(inode)
            }
            _ => Err(Errno::EPROTO),
        }
    }

    /// The directory objects a per-directory setting must reach: a striped directory's
    /// master and every stripe (files and subdirectories are created in the stripes).
    async fn dir_objects(&self, dir: Fid) -> Result<Vec<(u32, Fid)>, Errno> {
        let lmv = match self.cached_lmv(&dir) {
            Some(l) => Some(l),
            None => self.fetch_lmv(dir).await?,
        };
        let mut out = vec![(self.mdt_of(&dir), dir)];
        if let Some(l) = lmv {
            out.extend(l.stripes.iter().copied());
        }
        Ok(out)
    }

    /// `lfs setdirstripe -D` (`None`: `-d`).
    pub async fn set_default_lmv(&self, dir: Fid, lmv: Option<LmvTemplate>) -> Result<(), Errno> {
        for (mdt, fid) in self.dir_objects(dir).await? {
            self.md_call(
                mdt,
                Request::SetDefaultLmv {
                    fid,
                    lmv: lmv.clone(),
                },
            )
            .await?;
        }
        Ok(())
    }

    pub async fn get_default_lmv(&self, dir: Fid) -> Result<Option<LmvTemplate>, Errno> {
        match self
            .md_call(self.mdt_of(&dir), Request::GetDefaultLmv { fid: dir })
            .await?
        {
            Reply::DefaultLmv(l) => Ok(l),
            _ => Err(Errno::EPROTO),
        }
    }

    /// Sends a directory-wide request to a striped directory's stripes after its master.
    pub(crate) async fn to_stripes(
        &self,
        dir: Fid,
        make: impl Fn(Fid) -> Request,
    ) -> Result<(), Errno> {
        let objs = self.dir_objects(dir).await?;
        for (mdt, fid) in objs.into_iter().skip(1) {
            self.md_call(mdt, make(fid)).await?;
        }
        Ok(())
    }

    /// Distributed operations each MDT has not finished: (prepared here for another
    /// MDT, committed here with participants to tell). For tests and `lctl`.
    pub async fn dne_status(&self) -> Vec<Result<(u64, u64), Errno>> {
        let mut out = Vec::new();
        for imp in self.mdcs() {
            out.push(match imp.call(&Request::DneStatus, Bytes::new()).await {
                Ok((Reply::DneStatus { pending, committed }, _)) => Ok((pending, committed)),
                Ok(_) => Err(Errno::EPROTO),
                Err(e) => Err(rpc_errno(e)),
            });
        }
        out
    }
}
