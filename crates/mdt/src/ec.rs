//! Erasure coding on the MDT: where lod puts a parity component's objects, and the parity
//! state (`stale` on the parity components) that opens for write set and a client that
//! recomputed parity clears. The layout rules themselves are [`nacre_core::ec`].

use crate::Mdt;
use crate::lod::Lod;
use crate::perm;
use nacre_core::ec::{clear_parity_stale, data_of, is_ec, mark_parity_stale, raid_sets};
use nacre_core::layout::LCME_FL_INIT;
use nacre_core::{Errno, Fid, Layout, StripeObject};
use nacre_rpc::msg::{Cred, Reply};

impl Lod {
    /// Instantiates component `i` of `l`: a parity component from its data component's
    /// objects (which must be instantiated first, as they come first in the layout), any
    /// other on OSTs the other mirrors do not use where it can.
    pub async fn instantiate_in(&self, l: &mut Layout, i: usize) -> Result<(), Errno> {
        if l.components[i].is_parity() {
            return self.instantiate_parity(l, i).await;
        }
        let avoid = crate::lod::other_mirrors_osts(l, i);
        self.instantiate_avoiding(&mut l.components[i], &avoid)
            .await
    }

    /// Each RAID set's parity stripes go to OSTs holding none of that set's data stripes
    /// (else one lost OST would take a data stripe and its parity together), preferring
    /// OSTs the file does not use at all, usable ones first. Too few OSTs is ENOSPC.
    async fn instantiate_parity(&self, l: &mut Layout, i: usize) -> Result<(), Errno> {
        let c = &l.components[i];
        if c.is_init() {
            return Ok(());
        }
        let (d, p) = c.ec_counts().ok_or(Errno::EINVAL)?;
        let data = data_of(l, c).ok_or(Errno::EINVAL)?;
        if !data.is_init() || data.objects.is_empty() {
            return Err(Errno::EINVAL);
        }
        let data_osts: Vec<u32> = data.objects.iter().map(|o| o.ost_idx).collect();
        let osps = self.osps();
        if osps.is_empty() {
            return Err(Errno::ENOSPC);
        }
        let start = rand::random::<u16>() as usize % osps.len();
        let mut objs: Vec<StripeObject> = Vec::new();
        for set in raid_sets(data_osts.len(), d, p) {
            let set_osts = &data_osts[set.data.clone()];
            let want = set.parity.len();
            let mut chosen: Vec<u32> = Vec::with_capacity(want);
            // Passes: usable and unused by the file; usable; any.
            for pass in 0..3 {
                for k in 0..osps.len() {
                    if chosen.len() >= want {
                        break;
                    }
                    let osp = &osps[(start + k) % osps.len()];
                    let idx = osp.ost_idx;
                    if set_osts.contains(&idx) || chosen.contains(&idx) {
                        continue;
                    }
                    let used = data_osts.contains(&idx) || objs.iter().any(|o| o.ost_idx == idx);
                    let ok = match pass {
                        0 => self.usable(osp) && !used,
                        1 => self.usable(osp),
                        _ => true,
                    };
                    if !ok {
                        continue;
                    }
                    match osp.take().await {
                        Ok(o) => {
                            chosen.push(idx);
                            objs.push(o);
                        }
                        Err(e) => {
                            tracing::debug!(target: "mdt", "parity object on OST{idx:04x}: {e}");
                        }
                    }
                }
            }
            if chosen.len() < want {
                self.give_back(&objs);
                tracing::debug!(target: "mdt", "EC {d}+{p}: {want} parity stripes need OSTs outside the set {set_osts:?}");
                return Err(Errno::ENOSPC);
            }
        }
        let stripe_size = data.stripe_size;
        let c = &mut l.components[i];
        c.stripe_size = stripe_size;
        c.stripe_count = i32::try_from(objs.len()).unwrap_or(i32::MAX);
        c.objects = objs;
        c.flags |= LCME_FL_INIT;
        Ok(())
    }
}

impl Mdt {
    /// A client recomputed the parity of `fid` from its data (`lfs mirror resync`, or at
    /// the close of handle `handle` with `llite.*.ec_parity_on_close`): parity is current
    /// again unless another writer holds the file open (EBUSY: its writes may not be in the
    /// parity), or the layout changed since the client read it (ESTALE).
    pub(crate) async fn ec_parity_synced(
        &self,
        conn_id: u64,
        fid: Fid,
        handle: Option<u64>,
        layout_gen: u32,
        cred: &Cred,
    ) -> Result<Reply, Errno> {
        let own = handle.is_some_and(|h| self.opens.is_writer(h, &fid, conn_id));
        if !own {
            // As for `lfs mirror resync`: only a writer of the file says its parity is good.
            self.may(&fid, cred, perm::MAY_WRITE)?;
        }
        if self.writers_of(&fid) > u32::from(own) {
            return Err(Errno::EBUSY);
        }
        let (ino, ()) = self
            .change_layout(fid, move |_, l, _| {
                if !is_ec(l) {
                    return Err(Errno::EINVAL);
                }
                if l.layout_gen != layout_gen {
                    return Err(Errno::ESTALE);
                }
                Ok((clear_parity_stale(l), ()))
            })
            .await?;
        Ok(Reply::Layout(ino.layout))
    }
}

impl Mdt {
    /// The close of a write handle of `fid` that wrote nothing, opened while parity was in
    /// sync and leaving the layout at generation `layout_gen`; `writers` are those still open.
    /// With no other writer and the layout still at `layout_gen` (no size change, no other write
    /// open, no layout change since), the data is what the parity was coded from: parity is
    /// in sync again without being coded. Returns the layout as it is now, or `None` while
    /// other writers hold the file (the last one's close sees to the parity).
    pub(crate) async fn ec_untouched_close(
        &self,
        fid: Fid,
        layout_gen: u32,
        writers: u32,
    ) -> Result<Option<Layout>, Errno> {
        if writers > 0 {
            return Ok(None);
        }
        let (ino, ()) = self
            .change_layout(fid, move |_, l, _| {
                let untouched = is_ec(l) && l.layout_gen == layout_gen;
                Ok((untouched && clear_parity_stale(l), ()))
            })
            .await?;
        ino.layout.ok_or(Errno::EINVAL).map(Some)
    }
}

/// A change that may reach an erasure-coded file's data (an open for write, a create that
/// opens, a size change): its parity components become stale in the change's own
/// transaction, before any write or punch can reach the data (Lustre marks them at the
/// write intent). The layout generation moves even when parity was stale already, so a
/// recomputation that began before the change cannot clear it (see
/// [`Mdt::ec_parity_synced`]).
pub(crate) fn stale_on_data_change(l: &mut Layout) {
    if is_ec(l) {
        mark_parity_stale(l);
        l.layout_gen += 1;
    }
}
