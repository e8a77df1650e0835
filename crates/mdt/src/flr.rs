//! File Level Redundancy on the MDT (Lustre's lod FLR state machine): which mirrors a
//! write goes to, stale marking, resync, and adding and splitting mirrors.
//!
//! A mirrored file is read-only (`ro`, every mirror in sync) until a write. The writer's
//! intent names the mirrors the write goes to; every other mirror's components overlapping
//! the write become stale, and the file write-pending (`wp`). A resync (`lfs mirror
//! resync`) holds the file as a lease does: it starts only with no writer open, makes the
//! file sync-pending (`sp`), copies in-sync data over the stale components, and at its end
//! clears their stale flags, unless a writer opened the file or the layout changed
//! meanwhile. The rules on the layout itself are in [`nacre_core::Layout`]
//! (`stale_for_write`, `clear_stale`); this module applies them in one transaction each.

use crate::mdd;
use crate::{Mdt, now, perm};
use nacre_core::layout::{
    LCM_FL_RDONLY, LCM_FL_SYNC_PENDING, LCM_FL_WRITE_PENDING, LCME_FL_PREF_RW, LCME_FL_STALE,
    Pattern, StaleError, pflr_id,
};
use nacre_core::{Component, Errno, Fid};
use nacre_rpc::msg::{Cred, MirrorOp, Reply};

fn refused(fid: Fid, e: StaleError) -> Errno {
    tracing::debug!(target: "mdt", "file {fid}: mirror write refused: {e}");
    Errno::EINVAL
}

impl Mdt {
    /// A `Mirror` request, checked against the caller's rights: a layout change (extend,
    /// split) is the owner's, as `lfs setstripe` is; the rest, and a split's victim, need
    /// write access. With `replay`, the replay of one answered before a crash (see
    /// [`Mdt::resync_done`]).
    pub(crate) async fn mirror_request(
        &self,
        fid: Fid,
        op: MirrorOp,
        cred: &Cred,
        replay: bool,
    ) -> Result<Reply, Errno> {
        match &op {
            MirrorOp::Extend { .. } | MirrorOp::Split { .. } => {
                self.may_change_layout(&fid, cred)?
            }
            _ => self.may(&fid, cred, perm::MAY_WRITE)?,
        }
        if let MirrorOp::Split {
            victim: Some(v), ..
        } = &op
        {
            self.may(v, cred, perm::MAY_WRITE)?;
        }
        match op {
            MirrorOp::Write { start, end, keep } => self.mirror_write(fid, start, end, keep).await,
            MirrorOp::ResyncStart => self.resync_start(fid).await,
            MirrorOp::ResyncDone { layout_gen, ids } => {
                self.resync_done(fid, layout_gen, ids, replay).await
            }
            MirrorOp::Extend { components } => self.mirror_extend(fid, components).await,
            MirrorOp::Split { mirror_id, victim } => {
                self.mirror_split(fid, mirror_id, victim).await
            }
        }
    }

    /// Lustre's write intent on a mirrored file: the write goes to `keep`, the rest of the
    /// range goes stale. Nothing is stored when nothing changes.
    async fn mirror_write(
        &self,
        fid: Fid,
        start: u64,
        end: u64,
        keep: Vec<u32>,
    ) -> Result<Reply, Errno> {
        if start > end {
            return Err(Errno::EINVAL);
        }
        let t = now();
        let (ino, ()) = self
            .change_layout(fid, move |_, layout, attr| {
                if !layout.is_mirrored() {
                    return Err(Errno::EINVAL);
                }
                let changed = layout
                    .stale_for_write(&keep, start, end)
                    .map_err(|e| refused(fid, e))?;
                if changed {
                    attr.ctime = t;
                    tracing::info!(target: "mdt", "file {fid}: written to mirror(s) {keep:?} in [{start}, {end}): other mirrors stale there");
                }
                Ok((changed, ()))
            })
            .await?;
        Ok(Reply::Inode(self.info_of(ino)?))
    }

    /// A resync begins: refused while the file is open for writing; the file becomes
    /// sync-pending and write opens from now on are counted (the resync's end must see
    /// none). A file with nothing stale is answered as it is.
    async fn resync_start(&self, fid: Fid) -> Result<Reply, Errno> {
        if self.writers_of(&fid) > 0 {
            return Err(Errno::EBUSY);
        }
        self.opens_table().begin_migration(fid);
        let res = self
            .change_layout(fid, |_, layout, _| {
                if !layout.is_mirrored() {
                    return Err(Errno::EINVAL);
                }
                let stale = layout.has_stale();
                if stale {
                    layout.set_flr_state(LCM_FL_SYNC_PENDING);
                }
                Ok((stale, ()))
            })
            .await;
        match res {
            Ok((ino, ())) => Ok(Reply::Inode(self.info_of(ino)?)),
            Err(e) => {
                self.opens_table().end_migration(&fid);
                Err(e)
            }
        }
    }

    /// A resync ends: components `ids` are in sync again if no writer opened the file and
    /// the layout is still generation `gen_`; otherwise (EBUSY), or with no `ids`, the file
    /// goes back to write-pending with its stale components as they were.
    /// A `replay` of an end answered before a crash was undisturbed then: a restarted MDT
    /// has no record of the resync's start when that was committed before the crash, so
    /// only the layout generation is checked.
    pub(crate) async fn resync_done(
        &self,
        fid: Fid,
        gen_: u32,
        ids: Vec<u32>,
        replay: bool,
    ) -> Result<Reply, Errno> {
        let undisturbed = self.opens_table().end_migration(&fid) || replay;
        let (ino, done) = self
            .change_layout(fid, move |_, layout, _| {
                let done = undisturbed && layout.layout_gen == gen_ && !ids.is_empty();
                if done {
                    layout.clear_stale(&ids);
                } else if layout.has_stale() {
                    layout.set_flr_state(LCM_FL_WRITE_PENDING);
                } else {
                    layout.set_flr_state(LCM_FL_RDONLY);
                }
                Ok((true, done || !undisturbed))
            })
            .await?;
        if !done {
            return Err(Errno::EBUSY);
        }
        Ok(Reply::Inode(self.info_of(ino)?))
    }

    /// `lfs mirror extend`: `comps` (their mirror ids 1, 2, ... relative to each other)
    /// become new mirrors after the file's own, stale and not instantiated; a resync
    /// instantiates and fills them. A file without mirrors becomes mirror 1.
    async fn mirror_extend(&self, fid: Fid, mut comps: Vec<Component>) -> Result<Reply, Errno> {
        if comps.is_empty() || comps.iter().any(|c| c.pattern != Pattern::Raid0) {
            return Err(Errno::EINVAL);
        }
        for c in &mut comps {
            c.flags &= LCME_FL_PREF_RW;
            c.flags |= LCME_FL_STALE;
            c.objects.clear();
            c.dom_object = None;
        }
        let params = self.lod().params();
        let ctx = self.lod().new_layout_ctx();
        let t = now();
        let (ino, ()) = self
            .change_layout(fid, move |_, layout, attr| {
                if !attr.is_reg() {
                    return Err(Errno::EINVAL);
                }
                layout.add_mirrors(comps, |c, prev| crate::lod::fill_raid0(c, prev, &params));
                crate::lod::check_layout(layout, &ctx)?;
                layout.set_flr_state(LCM_FL_WRITE_PENDING);
                attr.ctime = t;
                Ok((true, ()))
            })
            .await?;
        Ok(Reply::Inode(self.info_of(ino)?))
    }

    /// `lfs mirror split`: mirror `m` leaves the file. Its objects are destroyed, or
    /// become `victim`'s (an empty regular file on this MDT, whose own objects are
    /// destroyed). The last mirror in sync over some range cannot leave.
    async fn mirror_split(&self, fid: Fid, m: u32, victim: Option<Fid>) -> Result<Reply, Errno> {
        if victim == Some(fid) {
            return Err(Errno::EINVAL);
        }
        let t = now();
        let (ino, ()) = self
            .change_layout(fid, move |tx, layout, attr| {
                if !layout.is_mirrored() || !layout.mirror_ids().contains(&m) {
                    return Err(Errno::EINVAL);
                }
                let (gone, kept): (Vec<Component>, Vec<Component>) = layout
                    .components
                    .drain(..)
                    .partition(|c| c.mirror_id() == m);
                layout.components = kept;
                // Every stale range left must still have a mirror in sync.
                let orphaned = layout
                    .components
                    .iter()
                    .filter(|c| c.is_stale())
                    .any(|c| layout.read_mirrors(c.start, c.end).is_empty());
                if orphaned || gone.iter().any(|c| c.pattern != Pattern::Raid0) {
                    return Err(Errno::EINVAL);
                }
                if layout.is_mirrored() {
                    let state = if layout.has_stale() {
                        LCM_FL_WRITE_PENDING
                    } else {
                        LCM_FL_RDONLY
                    };
                    layout.set_flr_state(state);
                } else {
                    layout.set_flr_state(0);
                }
                attr.ctime = t;
                let gone_objs: Vec<_> = gone
                    .iter()
                    .flat_map(|c| c.objects.iter().copied())
                    .filter(|o| !o.is_dummy())
                    .collect();
                match victim {
                    None => {
                        if !gone_objs.is_empty() {
                            mdd::log_destroy(tx, &fid, &gone_objs)?;
                        }
                    }
                    Some(v) => {
                        let mut vino = mdd::get_inode(tx, &v)?;
                        if !vino.attr.is_reg() || vino.attr.size != 0 {
                            return Err(Errno::EINVAL);
                        }
                        let old: Vec<_> = vino
                            .layout
                            .as_ref()
                            .map(|l| l.objects().copied().collect())
                            .unwrap_or_default();
                        if !old.is_empty() {
                            mdd::log_destroy(tx, &v, &old)?;
                        }
                        let gen_ = vino.layout.as_ref().map_or(0, |l| l.layout_gen);
                        let mut comps = gone;
                        for (i, c) in comps.iter_mut().enumerate() {
                            c.id = pflr_id(0, i as u32 + 1);
                            c.flags &= !(LCME_FL_STALE | LCME_FL_PREF_RW);
                        }
                        vino.layout = Some(nacre_core::Layout {
                            composite: true,
                            layout_gen: gen_ + 1,
                            flags: 0,
                            components: comps,
                        });
                        vino.lsom_valid = false;
                        vino.attr.ctime = t;
                        mdd::put_inode(tx, &vino)?;
                    }
                }
                Ok((true, ()))
            })
            .await?;
        self.kick_llog();
        if let Some(v) = victim {
            // The mirror's objects are the victim's now, under new component ids.
            let vino = self
                .store
                .read()
                .and_then(|mut r| mdd::get_inode(&mut r, &v))?;
            self.replace_parents(&vino, fid).await;
        }
        Ok(Reply::Inode(self.info_of(ino)?))
    }
}
