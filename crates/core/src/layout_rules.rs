//! Lustre's layout rules, in one place for both sides: `lfs` checks a layout before it
//! sends it, and the MDT's `lod` checks every layout a client sends (create, directory
//! default, component add, migrate), so a client that bypasses `lfs` gets the same EINVAL
//! and nothing is stored. This follows Lustre's `lod_verify_striping` and the checks of
//! `llapi_layout`. Where Lustre adjusts rather than refuses (a stripe count above the
//! number of OSTs becomes that number; a Data-on-MDT component above
//! `lod.*.dom_stripesize` is cut to it), these rules accept and the MDT adjusts.

use crate::Errno;
use crate::attr::XATTR_SIZE_MAX;
pub use crate::layout::mirror_id_of;
use crate::layout::{
    Component, EOF, LCME_FL_INIT, Layout, MAX_DOM_SIZE, MAX_MIRROR_COUNT, MAX_STRIPE_COUNT,
    MIN_STRIPE_SIZE, OstLayout, Pattern, STRIPE_COUNT_ALL, STRIPE_OFFSET_ANY,
};

pub use crate::pool::MAX_POOL_NAME;

/// The most bytes a layout may take as Lustre stores it (its LOV EA): ldiskfs keeps it in
/// an xattr. One component of 2,000 stripes takes 48,112; the bound keeps a client from
/// making a file of a million components.
pub const MAX_LAYOUT_BYTES: usize = XATTR_SIZE_MAX;
/// `lov_comp_md_v1`, `lov_comp_md_entry_v1`, `lov_mds_md_v1`, `lov_mds_md_v3` (with a
/// pool name) and `lov_ost_data_v1`: the sizes `lov_comp_md_size` adds up.
const LCM_BYTES: usize = 32;
const LCME_BYTES: usize = 48;
const LMM_V1_BYTES: usize = 32;
const LMM_V3_BYTES: usize = 48;
const LOST_DATA_BYTES: usize = 24;

/// Bytes of `layout`'s LOV EA once every component is instantiated
/// (`lov_comp_md_size`): a component counts the objects it has, or its OST list, or else
/// the stripes it asks for: every OST `ctx` knows for -1, the default 1 for 0, and at
/// most the OSTs `ctx` knows (the MDT gives no more). Without the OST count, one stripe:
/// the fewest the MDT could give, so no layout a file system accepts is refused in itself.
pub fn lov_ea_size(layout: &Layout, ctx: &LayoutCtx) -> usize {
    let osts = ctx.osts.as_ref().map_or(1, |o| o.len().max(1));
    let stripes = |c: &Component| -> usize {
        if c.pattern == Pattern::Mdt {
            return 0;
        }
        if !c.objects.is_empty() {
            return c.objects.len();
        }
        if !c.ost_list.is_empty() {
            return c.ost_list.len();
        }
        let asked = match c.stripe_count {
            STRIPE_COUNT_ALL => osts,
            n => usize::try_from(n).unwrap_or(0).max(1),
        };
        asked.min(osts)
    };
    let one = |c: &Component| -> usize {
        let lmm = if c.pool.is_empty() {
            LMM_V1_BYTES
        } else {
            LMM_V3_BYTES
        };
        stripes(c)
            .saturating_mul(LOST_DATA_BYTES)
            .saturating_add(lmm)
    };
    if !layout.composite {
        return layout
            .components
            .iter()
            .fold(0, |n: usize, c| n.saturating_add(one(c)));
    }
    layout.components.iter().fold(LCM_BYTES, |n, c| {
        n.saturating_add(LCME_BYTES).saturating_add(one(c))
    })
}

/// What [`validate`] knows about the file system.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LayoutCtx {
    /// Indexes of the OSTs that exist. `None`: unknown, target checks are skipped.
    pub osts: Option<Vec<u32>>,
    /// The file system's OST pools, for a layout asked for now (`None`: not checked; a
    /// stored or replayed layout is not held to pools changed since).
    pub pools: Option<Vec<crate::pool::OstPool>>,
}

impl LayoutCtx {
    /// A file system whose OSTs are numbered `0..count`.
    pub fn with_ost_count(count: u32) -> LayoutCtx {
        LayoutCtx {
            osts: Some((0..count).collect()),
            pools: None,
        }
    }

    fn ost_exists(&self, idx: u32) -> bool {
        self.osts.as_ref().is_none_or(|o| o.contains(&idx))
    }
}

/// Why a layout is not valid. Components are numbered from 1 in layout order.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("the layout has no component")]
    NoComponents,
    #[error("a plain layout must have exactly one component covering [0, EOF), not {0}")]
    PlainShape(String),
    #[error("component {comp}: the first component of a mirror must start at 0, not {start}")]
    FirstNotAtZero { comp: usize, start: u64 },
    #[error(
        "component {comp}: extent starting at {start} overlaps the previous component, which ends at {prev_end}"
    )]
    Overlap {
        comp: usize,
        start: u64,
        prev_end: u64,
    },
    #[error(
        "component {comp}: extent starting at {start} leaves a gap after the previous component, which ends at {prev_end} (extents must be contiguous)"
    )]
    Gap {
        comp: usize,
        start: u64,
        prev_end: u64,
    },
    #[error(
        "component {comp}: end {end} is not after its start {start} (extents must be increasing)"
    )]
    NotIncreasing { comp: usize, start: u64, end: u64 },
    #[error("component {comp}: end {end} is not a multiple of 64KiB")]
    EndNotAligned { comp: usize, end: u64 },
    #[error("component {comp}: start {start} is not a multiple of 64KiB")]
    StartNotAligned { comp: usize, start: u64 },
    #[error("component {comp}: an instantiated component has a stripe size, not 0")]
    NoStripeSize { comp: usize },
    #[error("component {comp}: stripe size {size} is not a multiple of 64KiB")]
    StripeSizeNotAligned { comp: usize, size: u32 },
    #[error("component {comp}: end {end} is not a multiple of its stripe size {size}")]
    EndNotStripeAligned { comp: usize, end: u64, size: u32 },
    #[error(
        "component {comp}: a Data-on-MDT component must be the first component of the file (or mirror)"
    )]
    DomNotFirst { comp: usize },
    #[error("more than one Data-on-MDT component (components {first} and {second})")]
    MultipleDom { first: usize, second: usize },
    #[error("component {comp}: Data-on-MDT size {size} is over the 1GiB limit")]
    DomTooLarge { comp: usize, size: u64 },
    #[error("component {comp}: a Data-on-MDT component cannot have a pool ('{pool}')")]
    DomPool { comp: usize, pool: String },
    #[error("component {comp}: Data-on-MDT stripe size {size} must equal the component end {end}")]
    DomStripeSize { comp: usize, size: u32, end: u64 },
    #[error(
        "component {comp}: stripe count {count} is invalid (use -1 for all OSTs, 0 for the default, or 1 to 2000)"
    )]
    InvalidStripeCount { comp: usize, count: i32 },
    #[error("component {comp}: stripe offset {offset} is invalid (use -1 or an OST index)")]
    InvalidStripeOffset { comp: usize, offset: i32 },
    #[error("component {comp}: OST index {ost} does not exist")]
    UnknownOst { comp: usize, ost: u32 },
    #[error("component {comp}: stripe offset {offset} is not in pool '{pool}'")]
    OffsetNotInPool {
        comp: usize,
        offset: i32,
        pool: String,
    },
    #[error("component {comp}: OST index {ost} is listed twice")]
    DuplicateOst { comp: usize, ost: u32 },
    #[error("component {comp}: stripe count {count} does not match the {listed} OSTs listed")]
    OstListCount {
        comp: usize,
        count: i32,
        listed: usize,
    },
    #[error("component {comp}: stripe offset {offset} is not in the OST list")]
    OffsetNotInList { comp: usize, offset: i32 },
    #[error("component {comp}: pool name '{pool}' is longer than 15 characters")]
    PoolNameTooLong { comp: usize, pool: String },
    #[error("component {comp}: pool name {pool:?} contains a NUL byte")]
    PoolNameInvalid { comp: usize, pool: String },
    #[error("too many mirrors: {count} (at most {MAX_MIRROR_COUNT})")]
    TooManyMirrors { count: usize },
    #[error(
        "component {comp}: Data-on-MDT in a mirrored file is not supported (mirrors are on OSTs)"
    )]
    MirrorDom { comp: usize },
    #[error("component {comp}: mirror {mirror} ends at {end}; every mirror must extend to EOF")]
    IncompleteMirror { comp: usize, mirror: u32, end: u64 },
    #[error(
        "the layout takes {bytes} bytes as Lustre stores it, over the {MAX_LAYOUT_BYTES}-byte limit (fewer components or stripes)"
    )]
    TooLarge { bytes: usize },
    #[error(transparent)]
    Ec(#[from] crate::ec::EcError),
}

impl LayoutError {
    /// What the MDT answers, as `lod_verify_striping` does for every rule here.
    pub fn errno(&self) -> Errno {
        match self {
            LayoutError::MirrorDom { .. } => Errno::ENOTSUP,
            // What setxattr answers for a value over `XATTR_SIZE_MAX`.
            LayoutError::TooLarge { .. } => Errno::E2BIG,
            _ => Errno::EINVAL,
        }
    }
}

/// Checks everything that does not depend on the file system.
pub fn check_structure(layout: &Layout) -> std::result::Result<(), LayoutError> {
    validate(layout, &LayoutCtx::default())
}

/// Refuses the layouts Lustre refuses: extents that do not start at 0, overlap, leave
/// gaps or do not increase; ends and stripe sizes that are not multiples of 64 KiB (or of
/// the stripe size); a Data-on-MDT component that is not first, is repeated or is over
/// 1 GiB; stripe counts beyond `LOV_MAX_STRIPE_COUNT`; stripe offsets and OST indexes that
/// do not exist; pool names Lustre cannot store. A stripe size is a `u32`, so always below
/// Lustre's 4 GiB limit. A stripe count above the file system's OSTs is accepted: the MDT
/// gives the file every OST, as Lustre does.
pub fn validate(layout: &Layout, ctx: &LayoutCtx) -> std::result::Result<(), LayoutError> {
    let comps = &layout.components;
    if comps.is_empty() {
        return Err(LayoutError::NoComponents);
    }
    // First, so a huge layout costs no more than this sum.
    let bytes = lov_ea_size(layout, ctx);
    if bytes > MAX_LAYOUT_BYTES {
        return Err(LayoutError::TooLarge { bytes });
    }
    if !layout.composite {
        let c = &comps[0];
        if comps.len() != 1 || c.start != 0 || c.end != EOF || c.pattern == Pattern::Mdt {
            let shape = if comps.len() != 1 {
                format!("{} components", comps.len())
            } else if c.pattern == Pattern::Mdt {
                "a Data-on-MDT component (use -E with -L mdt)".to_string()
            } else {
                format!("[{}, {})", c.start, c.end)
            };
            return Err(LayoutError::PlainShape(shape));
        }
    }
    // Mirrors are runs of components sharing a mirror id.
    let mut mirrors: Vec<(u32, Vec<usize>)> = Vec::new();
    for (i, c) in comps.iter().enumerate() {
        let m = c.mirror_id();
        match mirrors.iter_mut().find(|(id, _)| *id == m) {
            Some((_, v)) => v.push(i),
            None => mirrors.push((m, vec![i])),
        }
    }
    if mirrors.len() > MAX_MIRROR_COUNT as usize {
        return Err(LayoutError::TooManyMirrors {
            count: mirrors.len(),
        });
    }
    if mirrors.len() > 1
        && let Some(i) = comps.iter().position(|c| c.pattern == Pattern::Mdt)
    {
        return Err(LayoutError::MirrorDom { comp: i + 1 });
    }
    for (mirror, idx) in &mirrors {
        let mut dom_seen: Option<usize> = None;
        for (k, &i) in idx.iter().enumerate() {
            let c = &comps[i];
            let comp = i + 1;
            if k == 0 {
                if c.start != 0 {
                    return Err(LayoutError::FirstNotAtZero {
                        comp,
                        start: c.start,
                    });
                }
            } else {
                let prev_end = comps[idx[k - 1]].end;
                if c.start < prev_end {
                    return Err(LayoutError::Overlap {
                        comp,
                        start: c.start,
                        prev_end,
                    });
                }
                if c.start > prev_end {
                    return Err(LayoutError::Gap {
                        comp,
                        start: c.start,
                        prev_end,
                    });
                }
            }
            check_extent(c, comp)?;
            if c.pattern == Pattern::Mdt {
                if let Some(first) = dom_seen {
                    return Err(LayoutError::MultipleDom {
                        first: first + 1,
                        second: comp,
                    });
                }
                dom_seen = Some(i);
                if k != 0 {
                    return Err(LayoutError::DomNotFirst { comp });
                }
                if c.end > MAX_DOM_SIZE {
                    return Err(LayoutError::DomTooLarge { comp, size: c.end });
                }
                // `lod_verify_striping`: "DoM component cannot have pool assigned".
                if !c.pool.is_empty() {
                    return Err(LayoutError::DomPool {
                        comp,
                        pool: c.pool.clone(),
                    });
                }
                if u64::from(c.stripe_size) != c.end {
                    return Err(LayoutError::DomStripeSize {
                        comp,
                        size: c.stripe_size,
                        end: c.end,
                    });
                }
                continue;
            }
            check_raid0(c, comp, ctx)?;
        }
        let last = &comps[idx[idx.len() - 1]];
        if last.is_parity() {
            // A parity mirror follows its data mirror's extents (checked below).
            continue;
        }
        // The parity mirror of an erasure-coded file is no copy: it does not make the data
        // mirror one of several.
        let copies = mirrors
            .iter()
            .filter(|(_, v)| !comps[v[0]].is_parity())
            .count();
        if copies > 1 && last.end != EOF {
            return Err(LayoutError::IncompleteMirror {
                comp: idx[idx.len() - 1] + 1,
                mirror: *mirror,
                end: last.end,
            });
        }
    }
    crate::ec::check(layout)?;
    Ok(())
}

/// The rules of one component's own extent: it increases, and ends on a 64 KiB boundary.
fn check_extent(c: &Component, comp: usize) -> std::result::Result<(), LayoutError> {
    if c.end <= c.start {
        return Err(LayoutError::NotIncreasing {
            comp,
            start: c.start,
            end: c.end,
        });
    }
    if c.end != EOF && !c.end.is_multiple_of(u64::from(MIN_STRIPE_SIZE)) {
        return Err(LayoutError::EndNotAligned { comp, end: c.end });
    }
    Ok(())
}

/// Checks the component an OST object says it belongs to ([`OstLayout`]) by the rules
/// every component of a stored layout passes, so that a writer cannot tag an object with
/// one the MDT would have refused, and a rebuild makes none. An instantiated component
/// has an actual stripe size and count (0 and -1 mean a default only before creation),
/// and a start where a previous component's end could be.
pub fn check_ost_layout(l: &OstLayout) -> std::result::Result<(), LayoutError> {
    let count = i32::try_from(l.stripe_count)
        .ok()
        .filter(|n| *n >= 1)
        .ok_or(LayoutError::InvalidStripeCount {
            comp: 1,
            count: i32::try_from(l.stripe_count).unwrap_or(i32::MAX),
        })?;
    if l.stripe_size == 0 {
        return Err(LayoutError::NoStripeSize { comp: 1 });
    }
    if !l.comp_start.is_multiple_of(u64::from(MIN_STRIPE_SIZE)) {
        return Err(LayoutError::StartNotAligned {
            comp: 1,
            start: l.comp_start,
        });
    }
    let c = Component::raid0(
        l.comp_start,
        l.comp_end,
        count,
        l.stripe_size,
        STRIPE_OFFSET_ANY,
    );
    check_extent(&c, 1)?;
    check_raid0(&c, 1, &LayoutCtx::default())
}

fn check_raid0(
    c: &Component,
    comp: usize,
    ctx: &LayoutCtx,
) -> std::result::Result<(), LayoutError> {
    if c.stripe_size != 0 {
        if !c.stripe_size.is_multiple_of(MIN_STRIPE_SIZE) {
            return Err(LayoutError::StripeSizeNotAligned {
                comp,
                size: c.stripe_size,
            });
        }
        if c.end != EOF && !c.end.is_multiple_of(u64::from(c.stripe_size)) {
            return Err(LayoutError::EndNotStripeAligned {
                comp,
                end: c.end,
                size: c.stripe_size,
            });
        }
    }
    if c.stripe_count < STRIPE_COUNT_ALL || c.stripe_count > MAX_STRIPE_COUNT as i32 {
        return Err(LayoutError::InvalidStripeCount {
            comp,
            count: c.stripe_count,
        });
    }
    if c.stripe_offset < STRIPE_OFFSET_ANY {
        return Err(LayoutError::InvalidStripeOffset {
            comp,
            offset: c.stripe_offset,
        });
    }
    if c.pool.len() > MAX_POOL_NAME {
        return Err(LayoutError::PoolNameTooLong {
            comp,
            pool: c.pool.clone(),
        });
    }
    if c.pool.contains('\0') {
        return Err(LayoutError::PoolNameInvalid {
            comp,
            pool: c.pool.clone(),
        });
    }
    for (k, &ost) in c.ost_list.iter().enumerate() {
        if c.ost_list[..k].contains(&ost) {
            return Err(LayoutError::DuplicateOst { comp, ost });
        }
        if !ctx.ost_exists(ost) {
            return Err(LayoutError::UnknownOst { comp, ost });
        }
    }
    if !c.ost_list.is_empty() {
        if c.stripe_count > 0 && c.stripe_count as usize != c.ost_list.len() {
            return Err(LayoutError::OstListCount {
                comp,
                count: c.stripe_count,
                listed: c.ost_list.len(),
            });
        }
        if c.stripe_offset >= 0 && !c.ost_list.contains(&(c.stripe_offset as u32)) {
            return Err(LayoutError::OffsetNotInList {
                comp,
                offset: c.stripe_offset,
            });
        }
    }
    if c.stripe_offset >= 0 && !ctx.ost_exists(c.stripe_offset as u32) {
        return Err(LayoutError::UnknownOst {
            comp,
            ost: c.stripe_offset as u32,
        });
    }
    // `lod_verify_striping`: a first OST asked for must be in the component's pool; an
    // instantiated component was placed already (Lustre's `is_from_disk`).
    if c.stripe_offset >= 0
        && c.flags & LCME_FL_INIT == 0
        && let Some(pool) = ctx
            .pools
            .as_deref()
            .and_then(|pools| crate::pool::named(pools, &c.pool))
        && !pool.osts.contains(&(c.stripe_offset as u32))
    {
        return Err(LayoutError::OffsetNotInPool {
            comp,
            offset: c.stripe_offset,
            pool: c.pool.clone(),
        });
    }
    if c.flags & LCME_FL_INIT != 0 {
        for o in &c.objects {
            if !ctx.ost_exists(o.ost_idx) {
                return Err(LayoutError::UnknownOst {
                    comp,
                    ost: o.ost_idx,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `count` components of 64 KiB each (the last to EOF), `stripes` stripes each.
    fn many(count: u64, stripes: i32) -> Layout {
        Layout::composite(
            (0..count)
                .map(|i| {
                    let end = if i + 1 == count {
                        EOF
                    } else {
                        (i + 1) * u64::from(MIN_STRIPE_SIZE)
                    };
                    Component::raid0(
                        i * u64::from(MIN_STRIPE_SIZE),
                        end,
                        stripes,
                        MIN_STRIPE_SIZE,
                        -1,
                    )
                })
                .collect(),
        )
    }

    #[test]
    fn a_layout_lustre_could_not_store_is_refused_with_e2big() {
        let ctx = LayoutCtx::with_ost_count(4);
        // Lustre's sizes: a header, then an entry and a lov_mds_md with its objects each.
        assert_eq!(lov_ea_size(&Layout::plain(1, 1 << 20, -1), &ctx), 32 + 24);
        assert_eq!(lov_ea_size(&many(2, -1), &ctx), 32 + 2 * (48 + 32 + 4 * 24));
        // A stripe count over the OSTs gets every OST, so it counts as their number.
        assert_eq!(
            lov_ea_size(&many(2, 2000), &ctx),
            lov_ea_size(&many(2, -1), &ctx)
        );
        let big = LayoutCtx::with_ost_count(2000);
        assert_eq!(
            lov_ea_size(&Layout::plain(-1, 1 << 20, -1), &big),
            32 + 2000 * 24
        );
        assert_eq!(validate(&many(1, 2000), &big), Ok(()));
        // Two components of 2,000 stripes, or a thousand components, do not fit.
        let e = validate(&many(2, 2000), &big).expect_err("too large");
        assert_eq!(
            e,
            LayoutError::TooLarge {
                bytes: 32 + 2 * (48 + 32 + 2000 * 24)
            }
        );
        assert_eq!(e.errno(), Errno::E2BIG);
        // 4 stripes: 176 bytes a component, so 372 fit and 373 do not.
        assert_eq!(validate(&many(372, -1), &ctx), Ok(()));
        assert!(matches!(
            validate(&many(373, -1), &ctx),
            Err(LayoutError::TooLarge { .. })
        ));
        // Without the OST count (a client's own check) every component counts one
        // stripe, the fewest the MDT could give: what a file system accepts, the check
        // of the layout in itself accepts too.
        assert_eq!(validate(&many(2, 2000), &LayoutCtx::default()), Ok(()));
        assert_eq!(validate(&many(629, 2000), &LayoutCtx::default()), Ok(()));
        assert!(validate(&many(630, 1), &LayoutCtx::default()).is_err());
        assert!(validate(&many(100_000, 1), &LayoutCtx::default()).is_err());
    }

    #[test]
    fn a_data_on_mdt_component_with_a_pool_is_refused() {
        let mut l = Layout::composite(vec![
            Component::dom(1 << 20),
            Component::raid0(1 << 20, EOF, 1, 1 << 20, -1),
        ]);
        l.components[1].pool = "flash".into();
        assert_eq!(validate(&l, &LayoutCtx::default()), Ok(()));
        l.components[0].pool = "flash".into();
        let e = validate(&l, &LayoutCtx::default()).expect_err("pool on DoM");
        assert!(matches!(e, LayoutError::DomPool { comp: 1, .. }), "{e:?}");
        assert_eq!(e.errno(), Errno::EINVAL);
    }

    #[test]
    fn a_first_ost_outside_the_pool_is_refused_unless_placed_already() {
        use crate::pool::OstPool;
        let mut ctx = LayoutCtx::with_ost_count(4);
        let mut l = Layout::plain(1, 1 << 20, 0);
        l.components[0].pool = "flash".into();
        // Pools not known (a stored layout, or lfs): not checked.
        assert_eq!(validate(&l, &ctx), Ok(()));
        ctx.pools = Some(vec![OstPool {
            name: "flash".into(),
            osts: vec![1, 3],
        }]);
        let e = validate(&l, &ctx).expect_err("offset 0 outside the pool");
        assert!(
            matches!(
                e,
                LayoutError::OffsetNotInPool {
                    comp: 1,
                    offset: 0,
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(e.errno(), Errno::EINVAL);
        l.components[0].stripe_offset = 3;
        assert_eq!(validate(&l, &ctx), Ok(()));
        // A pool the file system does not have, or "ignore", confines nothing.
        l.components[0].stripe_offset = 0;
        for name in ["gone", "ignore"] {
            l.components[0].pool = name.into();
            assert_eq!(validate(&l, &ctx), Ok(()), "{name}");
        }
        // An instantiated component was placed already.
        l.components[0].pool = "flash".into();
        l.components[0].flags = LCME_FL_INIT;
        assert_eq!(validate(&l, &ctx), Ok(()));
    }
}
