//! Layout policy (Lustre's lod): what layout a new file gets and which OST objects fill it.
//!
//! A new file takes the layout asked for, else its directory's default, else the root's,
//! else the file system default (`lod.*.stripecount`, `stripesize`, `stripeoffset`), with
//! unset fields filled as Lustre fills them. Objects are allocated round-robin over the
//! OSTs that are reachable and not full, starting at the requested index if there is one;
//! a component naming an OST pool (`lfs setstripe -p`) takes only the pool's OSTs, as
//! Lustre's `lod_find_pool` confines allocation, and a pool the configuration does not
//! have confines nothing.

use crate::osp::Osp;
use nacre_core::layout::{
    Component, DEFAULT_DOM_STRIPESIZE, DEFAULT_STRIPE_COUNT, DEFAULT_STRIPE_SIZE, LCM_FL_RDONLY,
    LCME_FL_INIT, LCME_FL_STALE, Layout, MIN_STRIPE_SIZE, Pattern, pflr_id,
};
use nacre_core::layout_rules::{LayoutCtx, validate};
use nacre_core::pool::OstPool;
use nacre_core::{Errno, StripeObject};
use parking_lot::{Mutex, RwLock};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The file system default layout and Data-on-MDT limit (`lod.*` parameters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LodParams {
    pub stripe_count: i32,
    pub stripe_size: u32,
    pub stripe_offset: i32,
    pub dom_stripesize: u64,
}

impl Default for LodParams {
    fn default() -> Self {
        LodParams {
            stripe_count: DEFAULT_STRIPE_COUNT,
            stripe_size: DEFAULT_STRIPE_SIZE,
            stripe_offset: -1,
            dom_stripesize: DEFAULT_DOM_STRIPESIZE,
        }
    }
}

pub struct Lod {
    /// One proxy per OST, by index; grows when OSTs join.
    osps: RwLock<Vec<Arc<Osp>>>,
    params: Mutex<LodParams>,
    /// The file system's OST pools, as the MGS's configuration has them.
    pools: RwLock<Vec<OstPool>>,
    rr: AtomicUsize,
}

impl Lod {
    pub fn new(osps: Vec<Arc<Osp>>) -> Lod {
        Lod {
            osps: RwLock::new(osps),
            params: Mutex::new(LodParams::default()),
            pools: RwLock::new(Vec::new()),
            // Spread the first files of different MDTs over different OSTs.
            rr: AtomicUsize::new(rand::random::<u16>() as usize),
        }
    }

    pub fn params(&self) -> LodParams {
        *self.params.lock()
    }

    pub fn set_params(&self, p: LodParams) {
        *self.params.lock() = p;
    }

    /// Follows the configuration's pools (`lctl pool_*`).
    pub fn set_pools(&self, pools: &[OstPool]) {
        *self.pools.write() = pools.to_vec();
    }

    /// The OST pools this MDT follows.
    pub fn pools(&self) -> Vec<OstPool> {
        self.pools.read().clone()
    }

    /// The members of the pool `name` names, if the configuration has such a pool
    /// (`lod_find_pool`: none for "" or a reserved name such as "ignore").
    pub fn pool_members(&self, name: &str) -> Option<Vec<u32>> {
        nacre_core::pool::named(&self.pools.read(), name).map(|p| p.osts.clone())
    }

    pub fn ost_count(&self) -> usize {
        self.osps.read().len()
    }

    pub fn osps(&self) -> Vec<Arc<Osp>> {
        self.osps.read().clone()
    }

    pub fn osp(&self, idx: u32) -> Option<Arc<Osp>> {
        self.osps.read().get(idx as usize).cloned()
    }

    /// Adds the proxy of a newly joined OST (indices arrive in order).
    pub fn add_osp(&self, osp: Arc<Osp>) {
        let mut v = self.osps.write();
        if osp.ost_idx as usize == v.len() {
            v.push(osp);
        }
    }

    /// The layout a new file gets: the first of `explicit`, `parent_default`,
    /// `root_default`, the file system default; with unset fields filled in.
    pub fn resolve(
        &self,
        explicit: Option<&Layout>,
        parent_default: Option<&Layout>,
        root_default: Option<&Layout>,
    ) -> Result<Layout, Errno> {
        let p = self.params();
        if let Some(l) = explicit {
            self.check(l)?;
        }
        let mut l = explicit
            .or(parent_default)
            .or(root_default)
            .cloned()
            .unwrap_or_else(|| Layout::plain(p.stripe_count, p.stripe_size, p.stripe_offset));
        if explicit.is_some() {
            self.inherit_pool(&mut l, parent_default.or(root_default));
        }
        l.layout_gen = 0;
        apply_dom_limit(&mut l, p.dom_stripesize)?;
        let mut prev: Option<(i32, u32)> = None;
        let mirrored = l.is_mirrored();
        for (i, c) in l.components.iter_mut().enumerate() {
            c.flags &= !(LCME_FL_INIT | LCME_FL_STALE);
            c.objects.clear();
            c.dom_object = None;
            // As lod_gen_component_id: the mirror id the client gave, and a sequence the
            // MDT numbers, unique in the file whatever the client sent (mirror 1's first
            // component of two is 65537, mirror 2's 131074).
            if l.composite {
                c.id = pflr_id(c.mirror_id(), i as u32 + 1);
            }
            match c.pattern {
                Pattern::Mdt => {
                    c.stripe_size = u32::try_from(c.end).unwrap_or(u32::MAX);
                    c.stripe_count = 0;
                }
                Pattern::Raid0 => {
                    fill_raid0(c, prev, &p);
                    prev = Some((c.stripe_count, c.stripe_size));
                }
                // Its stripe count comes from its data component's objects.
                Pattern::Parity { .. } => c.stripe_count = 0,
            }
        }
        // A new mirrored file has every mirror in sync.
        l.flags = if mirrored { LCM_FL_RDONLY } else { 0 };
        Ok(l)
    }

    /// As `lod_ah_init` fills a plain layout a client gave: with no pool named, the file
    /// takes the pool of the default it would otherwise have had (its directory's, else
    /// the root's), unless it asks for a first OST outside that pool
    /// (`lod_qos_set_pool` drops the pool then). `-p ignore` keeps a file out of it.
    fn inherit_pool(&self, l: &mut Layout, default: Option<&Layout>) {
        if l.composite || l.components.len() != 1 || !l.components[0].pool.is_empty() {
            return;
        }
        let Some(def) = default.and_then(|d| d.components.first()) else {
            return;
        };
        if def.pool.is_empty() || nacre_core::pool::is_reserved(&def.pool) {
            return;
        }
        let c = &mut l.components[0];
        if c.pattern == Pattern::Mdt || !c.ost_list.is_empty() {
            return;
        }
        if c.stripe_offset >= 0
            && self
                .pool_members(&def.pool)
                .is_some_and(|m| !m.contains(&(c.stripe_offset as u32)))
        {
            return;
        }
        c.pool = def.pool.clone();
    }

    /// Instantiates what a new file gets at create: its first component, and for a
    /// mirrored file the first component of every mirror (as Lustre's
    /// `lod_prepare_create` instantiates every component starting at 0), each mirror's
    /// objects on OSTs the other mirrors do not use where there are enough OSTs. On
    /// failure the objects taken are given back.
    pub async fn instantiate_at_create(&self, l: &mut Layout) -> Result<(), Errno> {
        // Each mirror's first component starts at 0 (a file without mirrors has one).
        let firsts: Vec<usize> = (0..l.components.len())
            .filter(|&i| l.components[i].start == 0)
            .collect();
        for i in firsts {
            if let Err(e) = self.instantiate_in(l, i).await {
                let taken: Vec<StripeObject> = l.objects().copied().collect();
                self.give_back(&taken);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Lustre's layout rules (`lod_verify_striping`) for a layout a client sent: EINVAL
    /// when one is broken. A stripe count above the OSTs passes: [`Lod::instantiate`] gives
    /// the file every OST instead.
    pub fn check(&self, l: &Layout) -> Result<(), Errno> {
        check_layout(l, &self.new_layout_ctx())
    }

    /// What the layout rules know of this file system for any layout, a stored or
    /// replayed one too: its OSTs.
    pub fn layout_ctx(&self) -> LayoutCtx {
        LayoutCtx::with_ost_count(u32::try_from(self.ost_count()).unwrap_or(u32::MAX))
    }

    /// What a layout a client asks for now must meet: its OSTs and its pools (a first
    /// OST inside the component's pool).
    pub fn new_layout_ctx(&self) -> LayoutCtx {
        LayoutCtx {
            pools: Some(self.pools()),
            ..self.layout_ctx()
        }
    }

    /// Usable OSTs: reachable, not full, and not drained (`max_create_count=0`).
    pub fn usable(&self, o: &Osp) -> bool {
        o.is_reachable() && !o.is_full() && o.takes_new_objects()
    }

    /// Allocates the objects of a raid0 component and marks it instantiated.
    pub async fn instantiate(&self, c: &mut Component) -> Result<(), Errno> {
        self.instantiate_avoiding(c, &[]).await
    }

    /// [`Lod::instantiate`], placing no object on an OST in `avoid` (those holding another
    /// mirror's copy) unless the other OSTs cannot give the component its stripes.
    pub async fn instantiate_avoiding(
        &self,
        c: &mut Component,
        avoid: &[u32],
    ) -> Result<(), Errno> {
        if c.is_init() {
            return Ok(());
        }
        if c.pattern == Pattern::Mdt {
            c.flags |= LCME_FL_INIT;
            return Ok(());
        }
        let osps = self.osps();
        let n = osps.len();
        if n == 0 {
            return Err(Errno::ENOSPC);
        }
        let objects = if !c.ost_list.is_empty() {
            let mut objs = Vec::with_capacity(c.ost_list.len());
            for &idx in &c.ost_list {
                let osp = osps.get(idx as usize).ok_or(Errno::EINVAL)?;
                match osp.take().await {
                    Ok(o) => objs.push(o),
                    Err(e) => {
                        self.give_back(&objs);
                        return Err(e);
                    }
                }
            }
            objs
        } else {
            // The OSTs this component may use: its pool's, or all.
            let cands: Vec<&Arc<Osp>> = match self.pool_members(&c.pool) {
                Some(members) => osps
                    .iter()
                    .filter(|o| members.contains(&o.ost_idx))
                    .collect(),
                None => osps.iter().collect(),
            };
            let n = cands.len();
            if n == 0 {
                tracing::warn!(target: "lod", "pool {} has no OSTs to allocate from", c.pool);
                return Err(Errno::ENOSPC);
            }
            let usable = cands.iter().filter(|o| self.usable(o)).count();
            let want = match c.stripe_count {
                -1 => usable.max(1),
                k if k > 0 => (k as usize).min(n),
                _ => 1,
            };
            let start = match usize::try_from(c.stripe_offset)
                .ok()
                .and_then(|off| cands.iter().position(|o| o.ost_idx as usize == off))
            {
                Some(at) => at,
                None => self.rr.fetch_add(1, Ordering::Relaxed) % n,
            };
            let mut objs: Vec<StripeObject> = Vec::with_capacity(want);
            let mut last_err = Errno::ENOSPC;
            let spare = cands
                .iter()
                .filter(|o| self.usable(o) && !avoid.contains(&o.ost_idx))
                .count();
            // Passes over usable OSTs, then ones that wait on the others; OSTs of other
            // mirrors only when the rest cannot give every stripe.
            let passes: &[(bool, bool)] = if spare >= want {
                &[(true, true), (false, true)]
            } else {
                &[(true, true), (true, false), (false, false)]
            };
            for &(usable_only, avoiding) in passes {
                for k in 0..n {
                    if objs.len() >= want {
                        break;
                    }
                    let osp = cands[(start + k) % n];
                    if objs.iter().any(|o| o.ost_idx == osp.ost_idx) {
                        continue;
                    }
                    if usable_only && !self.usable(osp) {
                        continue;
                    }
                    if avoiding && avoid.contains(&osp.ost_idx) {
                        continue;
                    }
                    match osp.take().await {
                        Ok(o) => objs.push(o),
                        Err(e) => last_err = e,
                    }
                }
            }
            if objs.is_empty() {
                return Err(last_err);
            }
            objs
        };
        c.objects = objects;
        c.flags |= LCME_FL_INIT;
        Ok(())
    }

    /// Objects a replayed create used again: out of the pools for good.
    pub fn note_used(&self, objs: &[StripeObject]) {
        for o in objs {
            if let Some(osp) = self.osp(o.ost_idx)
                && o.fid.seq == osp.seq()
            {
                osp.note_used(o.fid.oid);
            }
        }
    }

    /// The sequence this MDT allocates from on each OST, for
    /// [`OwnSequences::check`].
    pub fn own_sequences(&self) -> OwnSequences {
        OwnSequences(self.osps.read().iter().map(|o| o.seq()).collect())
    }

    /// Returns objects of a create that failed to their pools.
    pub fn give_back(&self, objs: &[StripeObject]) {
        for o in objs {
            if let Some(osp) = self.osp(o.ost_idx) {
                osp.give_back(std::slice::from_ref(o));
            }
        }
    }

    /// The DoM size a new layout may use on this MDT.
    pub fn dom_limit(&self) -> u64 {
        self.params().dom_stripesize
    }
}

/// The sequence this MDT allocates from on each OST, by OST index.
pub struct OwnSequences(Vec<u64>);

impl OwnSequences {
    /// Checks that each of `objs` is an object this MDT hands out: on an OST it has, in
    /// its own sequence there. A replay says which objects its first run gave; a client
    /// must not make the MDT take another MDT's objects, or ones of a sequence nobody
    /// allocated from. Holes a rebuild left (dummy objects) name none.
    pub fn check(&self, objs: &[StripeObject]) -> Result<(), Errno> {
        for o in objs.iter().filter(|o| !o.is_dummy()) {
            let own = o.fid.oid > 0 && self.0.get(o.ost_idx as usize) == Some(&o.fid.seq);
            if !own {
                tracing::warn!(target: "lod", "refused a replayed layout: object {} on OST{:04x} is not one this MDT hands out", o.fid, o.ost_idx);
                return Err(Errno::EINVAL);
            }
        }
        Ok(())
    }
}

/// The OSTs holding objects of mirrors other than component `i`'s.
pub fn other_mirrors_osts(l: &Layout, i: usize) -> Vec<u32> {
    let m = l.components[i].mirror_id();
    let mut v: Vec<u32> = l
        .components
        .iter()
        .filter(|c| c.mirror_id() != m)
        .flat_map(|c| {
            c.objects
                .iter()
                .filter(|o| !o.is_dummy())
                .map(|o| o.ost_idx)
        })
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// [`validate`] with the errno the MDT answers.
pub fn check_layout(l: &Layout, ctx: &LayoutCtx) -> Result<(), Errno> {
    validate(l, ctx).map_err(|e| {
        tracing::debug!("layout refused: {e}");
        e.errno()
    })
}

/// A default stripe size for a component ending at `end`: the default, halved until it
/// divides the end (extents are 64 KiB multiples, so this stops at 64 KiB at worst).
pub fn fit_stripe_size(default: u32, end: u64) -> u32 {
    let mut s = default.max(MIN_STRIPE_SIZE);
    if end == nacre_core::layout::EOF {
        return s;
    }
    while s > MIN_STRIPE_SIZE && !end.is_multiple_of(u64::from(s)) {
        s /= 2;
    }
    s
}

/// Applies `lod.*.dom_stripesize` to a new file's layout, as Lustre's MDT does: a DoM
/// component larger than the limit is cut to it (the next component starts there); with a
/// limit of 0 the DoM component is dropped, and a layout that was only DoM fails (EFBIG).
pub fn apply_dom_limit(l: &mut Layout, limit: u64) -> Result<(), Errno> {
    let Some(first) = l.components.first() else {
        return Ok(());
    };
    if first.pattern != Pattern::Mdt {
        return Ok(());
    }
    if limit == 0 {
        if l.components.len() == 1 {
            return Err(Errno::EFBIG);
        }
        l.components.remove(0);
        if let Some(next) = l.components.first_mut() {
            next.start = 0;
        }
        return Ok(());
    }
    if first.end > limit {
        l.components[0].end = limit;
        l.components[0].stripe_size = u32::try_from(limit).unwrap_or(u32::MAX);
        if let Some(next) = l.components.get_mut(1) {
            next.start = limit;
        }
    }
    Ok(())
}

/// Fills a template's unset fields without allocating (for `getstripe -D` style display).
/// Fills a raid0 component's unset stripe count and size, as `lfs setstripe` carries
/// settings forward: from the raid0 component before it (`prev`: count, size), else the
/// file system's default; a carried stripe size shrinks until it divides the component's
/// end. Used for new files and for components added later, so both get the same rule.
/// A size that was given is kept: [`Lod::check`] refused it already if it was bad.
pub fn fill_raid0(c: &mut Component, prev: Option<(i32, u32)>, p: &LodParams) {
    debug_assert_eq!(c.pattern, Pattern::Raid0);
    let (pc, ps) = prev.unwrap_or((p.stripe_count, p.stripe_size));
    if c.stripe_count == 0 {
        c.stripe_count = pc;
    }
    if c.stripe_size == 0 {
        c.stripe_size = fit_stripe_size(ps, c.end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nacre_core::layout::{Component, EOF};

    fn dom_pfl(dom_end: u64) -> Layout {
        Layout::composite(vec![
            Component::dom(dom_end),
            Component::raid0(dom_end, EOF, 1, 0, -1),
        ])
    }

    #[test]
    fn default_stripe_sizes_fit_component_ends() {
        assert_eq!(fit_stripe_size(4 << 20, 1 << 20), 1 << 20);
        assert_eq!(fit_stripe_size(4 << 20, 8 << 20), 4 << 20);
        assert_eq!(fit_stripe_size(4 << 20, 3 << 16), 64 << 10);
        assert_eq!(fit_stripe_size(4 << 20, EOF), 4 << 20);
    }

    #[test]
    fn unset_stripe_settings_come_from_the_component_before() {
        let p = LodParams::default();
        let mut c = Component::raid0(0, 6 << 20, 0, 0, -1);
        fill_raid0(&mut c, None, &p);
        assert_eq!((c.stripe_count, c.stripe_size), (p.stripe_count, 2 << 20));
        let mut c = Component::raid0(6 << 20, EOF, 0, 0, -1);
        fill_raid0(&mut c, Some((3, 1 << 20)), &p);
        assert_eq!((c.stripe_count, c.stripe_size), (3, 1 << 20));
        let mut c = Component::raid0(0, EOF, 2, 1 << 20, -1);
        fill_raid0(&mut c, None, &p);
        assert_eq!((c.stripe_count, c.stripe_size), (2, 1 << 20));
    }

    #[test]
    fn dom_limit_cuts_drops_and_refuses() {
        let mut l = dom_pfl(4 << 20);
        apply_dom_limit(&mut l, 1 << 20).expect("cut");
        assert_eq!(l.components[0].end, 1 << 20);
        assert_eq!(l.components[0].stripe_size, 1 << 20);
        assert_eq!(l.components[1].start, 1 << 20);

        let mut l = dom_pfl(1 << 20);
        apply_dom_limit(&mut l, 0).expect("drop");
        assert_eq!(l.components.len(), 1);
        assert_eq!(l.components[0].pattern, Pattern::Raid0);
        assert_eq!(l.components[0].start, 0);

        let mut only = Layout::composite(vec![Component::dom(1 << 20)]);
        assert_eq!(apply_dom_limit(&mut only, 0), Err(Errno::EFBIG));

        let mut small = dom_pfl(64 << 10);
        apply_dom_limit(&mut small, 1 << 20).expect("under the limit");
        assert_eq!(small.components[0].end, 64 << 10);

        let mut plain = Layout::plain(1, 1 << 20, -1);
        apply_dom_limit(&mut plain, 0).expect("no DoM");
        assert_eq!(plain.components.len(), 1);
    }
}
