//! Changing a file's layout after it was created: adding and deleting components
//! (`lfs setstripe --component-add/--component-del`) and swapping layouts with a volatile
//! file (`lfs migrate`); [`Mdt::change_layout`], the one transaction every layout change
//! after create goes through (here, FLR in `flr.rs`, erasure coding in `ec.rs`).
//!
//! Migration keeps the file's FID: the client creates a volatile (unnamed) file with the new
//! layout, copies the data into it, then asks for a swap. The swap is one transaction that
//! checks the file's layout generation is still the one the copy started from (no
//! concurrent change), exchanges the layouts, and destroys the volatile file, which now
//! owns the old objects. A failure anywhere before the swap leaves the old layout intact;
//! the volatile file vanishes at its last close, or at the next start as an orphan.

use crate::mdd;
use crate::open::OpenHandle;
use crate::records::Inode;
use crate::{Mdt, now};
use nacre_core::layout::{EOF, LCME_FL_INIT, Pattern};
use nacre_core::{Attr, Component, Errno, Fid, Layout};
use nacre_osd::{Table, Tx};
use nacre_rpc::lfsck::OstRepair;
use nacre_rpc::msg::Reply;
use nacre_rpc::server::RequestCtx;
use std::collections::BTreeMap;

impl Mdt {
    /// One change of `fid`'s layout in one transaction: `f` changes the layout (and the
    /// attributes, or other records through `tx`) and says whether it changed anything;
    /// a change moves the layout generation, which clients and resyncs compare against,
    /// and is stored. A file without a layout is EINVAL.
    pub(crate) async fn change_layout<T, F>(&self, fid: Fid, f: F) -> Result<(Inode, T), Errno>
    where
        T: Send + 'static,
        F: FnOnce(&mut Tx<'_, '_>, &mut Layout, &mut Attr) -> Result<(bool, T), Errno>
            + Send
            + 'static,
    {
        self.store()
            .write(move |tx| {
                let mut ino = mdd::get_inode(tx, &fid)?;
                let Inode { layout, attr, .. } = &mut ino;
                let layout = layout.as_mut().ok_or(Errno::EINVAL)?;
                let (changed, out) = f(tx, layout, attr)?;
                if changed {
                    layout.layout_gen += 1;
                    mdd::put_inode(tx, &ino)?;
                }
                Ok((ino, out))
            })
            .await
    }

    /// Appends components to a composite file whose last component does not reach EOF.
    pub(crate) async fn add_components(
        &self,
        fid: Fid,
        mut comps: Vec<Component>,
    ) -> Result<Reply, Errno> {
        if comps.is_empty() {
            return Err(Errno::EINVAL);
        }
        for c in &mut comps {
            if c.pattern == Pattern::Mdt {
                // Data-on-MDT can only be the first component.
                return Err(Errno::EINVAL);
            }
            c.flags &= !LCME_FL_INIT;
            c.objects.clear();
            c.dom_object = None;
        }
        let params = self.lod().params();
        let ctx = self.lod().new_layout_ctx();
        let t = now();
        let (ino, ()) = self
            .change_layout(fid, move |_, layout, attr| {
                if !layout.composite {
                    return Err(Errno::EINVAL);
                }
                let mut end = layout.max_size();
                if end == EOF {
                    return Err(Errno::EINVAL);
                }
                let first_id = layout.next_component_id();
                let mut prev = layout
                    .components
                    .iter()
                    .rev()
                    .find(|c| c.pattern == Pattern::Raid0)
                    .map(|c| (c.stripe_count, c.stripe_size));
                for (id, mut c) in (first_id..).zip(comps) {
                    if c.start != end {
                        return Err(Errno::EINVAL);
                    }
                    crate::lod::fill_raid0(&mut c, prev, &params);
                    prev = Some((c.stripe_count, c.stripe_size));
                    c.id = id;
                    end = c.end;
                    layout.components.push(c);
                }
                // The whole layout, as it would be stored, follows Lustre's rules; a
                // refusal here aborts the transaction, so nothing is stored.
                crate::lod::check_layout(layout, &ctx)?;
                attr.ctime = t;
                Ok((true, ()))
            })
            .await?;
        Ok(Reply::Inode(self.info_of(ino)?))
    }

    /// Deletes the last component (by id), or every uninstantiated one (`^init`).
    pub(crate) async fn del_components(
        &self,
        fid: Fid,
        id: Option<u32>,
        flags: u32,
        neg: u32,
    ) -> Result<Reply, Errno> {
        if id.is_none() && !(flags == 0 && neg == LCME_FL_INIT) {
            // Lustre accepts only `^init` as a flag selector for deletion.
            return Err(Errno::EINVAL);
        }
        let t = now();
        let (ino, ()) = self
            .change_layout(fid, move |tx, layout, attr| {
                if !layout.composite {
                    return Err(Errno::EINVAL);
                }
                let removed: Vec<Component> = match id {
                    Some(id) => {
                        let last = layout.components.last().ok_or(Errno::EINVAL)?;
                        if last.id != id {
                            // Only the last component may go, so extents stay contiguous.
                            return Err(if layout.components.iter().any(|c| c.id == id) {
                                Errno::EINVAL
                            } else {
                                Errno::ENOENT
                            });
                        }
                        layout.components.pop().into_iter().collect()
                    }
                    None => {
                        let keep = layout.components.iter().take_while(|c| c.is_init()).count();
                        layout.components.split_off(keep)
                    }
                };
                if removed.is_empty() {
                    return Err(Errno::ENOENT);
                }
                if layout.components.is_empty() {
                    // A file keeps at least one component.
                    return Err(Errno::EINVAL);
                }
                let objs: Vec<_> = removed
                    .iter()
                    .flat_map(|c| c.objects.iter().copied())
                    .collect();
                if !objs.is_empty() {
                    mdd::log_destroy(tx, &fid, &objs)?;
                }
                attr.size = attr.size.min(layout.max_size());
                attr.ctime = t;
                Ok((true, ()))
            })
            .await?;
        self.kick_llog();
        Ok(Reply::Inode(self.info_of(ino)?))
    }

    /// An unnamed file next to `fid` with `layout` (first component instantiated), open for
    /// writing by the caller.
    pub(crate) async fn create_volatile(
        &self,
        ctx: &RequestCtx,
        fid: Fid,
        layout: Layout,
    ) -> Result<Reply, Errno> {
        let orig = {
            let mut v = self.store().read()?;
            mdd::get_inode(&mut v, &fid)?
        };
        if !orig.attr.is_reg() {
            return Err(Errno::EINVAL);
        }
        if self.writers_of(&fid) > 0 {
            // An open writer would write around the copy.
            return Err(Errno::EBUSY);
        }
        let mut l = self.lod().resolve(Some(&layout), None, None)?;
        self.lod().instantiate_at_create(&mut l).await?;
        let objs: Vec<_> = l.objects().copied().collect();
        let idx = self.index;
        let t = now();
        let res = self
            .store()
            .write(move |tx| {
                let vfid = mdd::alloc_fid(tx, idx)?;
                mdd::assign_dom_object(tx, idx, &mut l)?;
                let ino = crate::records::Inode {
                    attr: Attr {
                        fid: vfid,
                        mode: orig.attr.mode,
                        nlink: 0,
                        uid: orig.attr.uid,
                        gid: orig.attr.gid,
                        atime: t,
                        mtime: t,
                        ctime: t,
                        btime: t,
                        ..Attr::default()
                    },
                    layout: Some(l),
                    lmv: None,
                    default_layout: None,
                    default_lmv: None,
                    link: None,
                    symlink: None,
                    lsom_valid: false,
                    ino: 0,
                };
                mdd::put_inode(tx, &ino)?;
                // Unnamed: an orphan until swapped in and destroyed, or cleaned at start.
                tx.put(Table::Orphans, &vfid.to_bytes(), &[])?;
                if let Some(l) = &ino.layout {
                    mdd::note_objects_used(tx, &l.objects().copied().collect::<Vec<_>>())?;
                }
                Ok(ino)
            })
            .await;
        let ino = match res {
            Ok(i) => i,
            Err(e) => {
                self.lod().give_back(&objs);
                return Err(e);
            }
        };
        let handle = self.register_open(OpenHandle {
            fid: ino.fid(),
            conn_id: ctx.conn_id,
            write: true,
        })?;
        self.opens_table().begin_migration(fid);
        Ok(Reply::Opened {
            inode: self.info_of(ino)?,
            handle,
            data_cksum: None,
        })
    }

    /// Gives `fid` the layout of `volatile` if `fid` is unchanged since generation `gen_`.
    /// With `replay`, the replay of a swap answered before a crash: the copy it ended was
    /// checked for writers then, and what this MDT knew of it in memory died with it. The
    /// volatile file is there (the copy's `fsync` committed it) unless the crash took it
    /// back too, and the generation check still applies: replays run in transno order
    /// from the state the crash left, as the swap first ran.
    pub(crate) async fn swap_layouts(
        &self,
        fid: Fid,
        volatile: Fid,
        gen_: u32,
        replay: bool,
    ) -> Result<Reply, Errno> {
        if !replay && !self.opens_table().end_migration(&fid) {
            // Someone opened the file for writing during the copy: their writes would be lost.
            return Err(Errno::EBUSY);
        }
        let t = now();
        let ino = self
            .store()
            .write(move |tx| {
                let mut ino = mdd::get_inode(tx, &fid)?;
                let mut vol = mdd::get_inode(tx, &volatile)?;
                if vol.attr.nlink != 0 || !ino.attr.is_reg() {
                    return Err(Errno::EINVAL);
                }
                let cur_gen = ino.layout.as_ref().map_or(0, |l| l.layout_gen);
                if cur_gen != gen_ {
                    return Err(Errno::EBUSY);
                }
                let mut new_layout = vol.layout.take().ok_or(Errno::EINVAL)?;
                new_layout.layout_gen = cur_gen + 1;
                vol.layout = ino.layout.take();
                ino.layout = Some(new_layout);
                ino.attr.ctime = t;
                // The copy wrote the same bytes: the size is what the file had.
                mdd::put_inode(tx, &ino)?;
                // The volatile file leaves with the old objects.
                mdd::destroy_inode(tx, &vol)?;
                Ok(ino)
            })
            .await?;
        self.kick_llog();
        self.replace_parents(&ino, volatile).await;
        Ok(Reply::Inode(self.info_of(ino)?))
    }

    /// After a swap, the objects `ino` took over from `volatile` (the file whose objects
    /// they were: a migration's volatile file, or the file a mirror split off) name `ino`
    /// in their filter fids, with their component's layout, and carry its owner. Lustre
    /// does this in the swap's transaction; here it follows the commit, OST by OST at
    /// once; their owner follows through the owner log ([`crate::owner`]), and so do
    /// their parents where an OST did not answer: the OSTs refuse a client's write
    /// naming another file than the object's filter fid (`lfsck_verify_pfid`), so the
    /// write waits for the log to put them right.
    pub(crate) async fn replace_parents(&self, ino: &Inode, volatile: Fid) {
        let fid = ino.attr.fid;
        let by_ost = parent_repairs(ino, volatile);
        let calls = by_ost.into_iter().map(|(ost, objs)| async move {
            let n = objs.len();
            let r = match self.lod.osp(ost) {
                Some(osp) => osp.replace_parents(objs).await,
                None => Err(Errno::ENODEV),
            };
            match r {
                Ok(0) => {}
                Ok(k) => tracing::warn!(target: "mdt", "file {fid}: {k} of its {n} object(s) on OST{ost:04x} still name the volatile file {volatile}; the owner log tries again"),
                Err(e) => tracing::warn!(target: "mdt", "file {fid}: its objects on OST{ost:04x} still name the volatile file {volatile} ({e}); the owner log tries again"),
            }
        });
        futures::future::join_all(calls).await;
        // The owner, as a chown passes it on, and the parents again where an OST did not
        // answer: from the owner log, once durable.
        let logged = ino.clone();
        match self
            .store
            .write(move |tx| crate::owner::log_owner_from(tx, &logged, volatile))
            .await
        {
            Ok(()) => self.owner_kick.notify_one(),
            Err(e) => {
                tracing::warn!(target: "mdt", "file {fid}: its new objects keep their old owner ({e}); LFSCK's layout check repairs them")
            }
        }
    }
}

/// The repairs, per OST, that point the objects `ino` took over from `volatile` at `ino`
/// (see [`Mdt::replace_parents`]).
pub(crate) fn parent_repairs(ino: &Inode, volatile: Fid) -> BTreeMap<u32, Vec<OstRepair>> {
    let mut by_ost: BTreeMap<u32, Vec<OstRepair>> = BTreeMap::new();
    let Some(layout) = &ino.layout else {
        return by_ost;
    };
    let fid = ino.attr.fid;
    for c in &layout.components {
        let placed = c.ost_layout();
        for (i, o) in c.objects.iter().enumerate() {
            if o.is_dummy() {
                continue;
            }
            let stripe = u32::try_from(i).unwrap_or(u32::MAX);
            by_ost
                .entry(o.ost_idx)
                .or_default()
                .push(OstRepair::SetFilterFid {
                    obj: o.fid,
                    old: Some(volatile.with_ver(stripe)),
                    parent: fid.with_ver(stripe),
                    layout: placed,
                });
        }
    }
    by_ost
}
