//! Erasure coding's layout rules (Lustre's EC "phase 0", `lfs setstripe --ec D+P`), shared by
//! `lfs` and the MDT's lod, which checks them on every layout a client sends.
//!
//! An erasure-coded file is a data mirror and a parity mirror. For each data component the
//! parity mirror has a component with the same extent, flagged `parity`, whose pattern
//! carries `dstripe_count` (D) and `cstripe_count` (P). The data component's stripes are cut
//! into RAID sets of at most D stripes in stripe order; each set has P parity stripes (a set
//! of one stripe has one). Parity stripe `j` of a set holds, at every object offset, the
//! code of the set's data objects at that same object offset (shorter objects read as
//! zeros), so the codec works on object ranges and never needs the stripe size.
//!
//! Offline EC, as in Lustre: a write makes the parity components `stale` and a resync
//! recomputes them; reads reconstruct from parity only while it is in sync.

use crate::layout::{
    Component, LCME_FL_INIT, LCME_FL_PARITY, LCME_FL_STALE, Layout, Pattern, pflr_id,
};
use std::ops::Range;

/// Fewest data stripes of a RAID set.
pub const EC_DATA_MIN: u32 = 2;
/// Most data stripes of a RAID set without `--ec-expert`.
pub const EC_DATA_MAX: u32 = 32;
/// Most parity stripes of a RAID set without `--ec-expert` (and never more than D).
pub const EC_PARITY_MAX: u32 = 4;

/// Why an EC geometry or layout is refused (EINVAL, from `lfs` and from the MDT).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EcError {
    #[error("invalid EC geometry '{0}': expected DATA+PARITY (or DATA:PARITY)")]
    Syntax(String),
    #[error("EC data stripe count {0} is out of range ({EC_DATA_MIN} to {EC_DATA_MAX})")]
    DataCount(u32),
    #[error("EC parity stripe count {parity} is out of range (1 to min({data}, {EC_PARITY_MAX}))")]
    ParityCount { data: u32, parity: u32 },
    #[error("component {comp}: a parity component has no data component with its extent")]
    NoDataComponent { comp: usize },
    #[error("component {comp}: a Data-on-MDT component cannot be erasure coded")]
    DomData { comp: usize },
    #[error("component {comp}: flag 'parity' and the parity pattern must go together")]
    ParityFlag { comp: usize },
    #[error("erasure coding needs every parity component in one mirror of its own")]
    ParityMirror,
}

/// Parses `D+P` or `D:P` (`lfs setstripe --ec`) and checks Lustre's limits.
pub fn parse_geometry(s: &str) -> Result<(u8, u8), EcError> {
    let (d, p) = s
        .split_once('+')
        .or_else(|| s.split_once(':'))
        .ok_or_else(|| EcError::Syntax(s.to_string()))?;
    let num = |v: &str| {
        v.trim()
            .parse::<u32>()
            .map_err(|_| EcError::Syntax(s.to_string()))
    };
    let (d, p) = (num(d)?, num(p)?);
    check_geometry(d, p)?;
    // Both fit: the limits are far below 256.
    Ok((d as u8, p as u8))
}

/// Lustre's limits: D from 2 to 32, P from 1 to min(D, 4).
pub fn check_geometry(data: u32, parity: u32) -> Result<(), EcError> {
    if !(EC_DATA_MIN..=EC_DATA_MAX).contains(&data) {
        return Err(EcError::DataCount(data));
    }
    if parity < 1 || parity > data.min(EC_PARITY_MAX) {
        return Err(EcError::ParityCount { data, parity });
    }
    Ok(())
}

/// The parity template of data component `data` in mirror `mirror`: same extent and stripe
/// size; its stripe count comes from the data component once that has objects.
pub fn parity_template(data: &Component, mirror: u32, d: u8, p: u8) -> Component {
    let mut c = Component::raid0(data.start, data.end, 0, data.stripe_size, -1);
    c.pattern = Pattern::Parity {
        dstripe_count: d,
        cstripe_count: p,
    };
    c.flags = LCME_FL_PARITY;
    c.pool = data.pool.clone();
    c.id = pflr_id(mirror, 0);
    c
}

/// Whether the layout is erasure coded (has parity components).
pub fn is_ec(l: &Layout) -> bool {
    l.components.iter().any(Component::is_parity)
}

/// The data components alone: what every plain I/O path reads and writes.
pub fn data_layout(l: &Layout) -> Layout {
    Layout {
        components: l
            .components
            .iter()
            .filter(|c| !c.is_parity())
            .cloned()
            .collect(),
        ..l.clone()
    }
}

/// The parity component covering data component `data`, if any.
pub fn parity_of<'a>(l: &'a Layout, data: &Component) -> Option<&'a Component> {
    l.components
        .iter()
        .find(|c| c.is_parity() && c.start == data.start && c.end == data.end)
}

/// The data component a parity component codes.
pub fn data_of<'a>(l: &'a Layout, parity: &Component) -> Option<&'a Component> {
    l.components
        .iter()
        .find(|c| !c.is_parity() && c.start == parity.start && c.end == parity.end)
}

/// One RAID set of a component: its data stripes and parity stripes (indexes into the data
/// and the parity component's objects).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaidSet {
    pub data: Range<usize>,
    pub parity: Range<usize>,
}

/// The RAID sets of `stripes` data stripes with geometry D+P: sets of D in stripe order,
/// the last smaller; P parity stripes each (a one-stripe set has one).
pub fn raid_sets(stripes: usize, d: u8, p: u8) -> Vec<RaidSet> {
    let (d, p) = (usize::from(d.max(1)), usize::from(p.max(1)));
    let mut sets = Vec::new();
    let mut at = 0;
    let mut pat = 0;
    while at < stripes {
        let k = d.min(stripes - at);
        let pk = if k == 1 { 1 } else { p };
        sets.push(RaidSet {
            data: at..at + k,
            parity: pat..pat + pk,
        });
        at += k;
        pat += pk;
    }
    sets
}

/// How many parity stripes `stripes` data stripes need.
pub fn parity_count(stripes: usize, d: u8, p: u8) -> usize {
    raid_sets(stripes, d, p).last().map_or(0, |s| s.parity.end)
}

/// Whether every parity component overlapping `[start, end)` is in sync.
pub fn parity_in_sync(l: &Layout, start: u64, end: u64) -> bool {
    l.components
        .iter()
        .filter(|c| c.is_parity() && c.start < end && c.end > start)
        .all(|c| !c.is_stale())
}

/// Marks every instantiated parity component stale (a write changed the data); whether
/// anything changed.
pub fn mark_parity_stale(l: &mut Layout) -> bool {
    let mut changed = false;
    for c in l.components.iter_mut().filter(|c| c.is_parity()) {
        if c.flags & LCME_FL_STALE == 0 {
            c.flags |= LCME_FL_STALE;
            changed = true;
        }
    }
    changed
}

/// Clears `stale` on every parity component (parity recomputed); whether anything changed.
pub fn clear_parity_stale(l: &mut Layout) -> bool {
    let mut changed = false;
    for c in l.components.iter_mut().filter(|c| c.is_parity()) {
        if c.flags & LCME_FL_STALE != 0 {
            c.flags &= !LCME_FL_STALE;
            changed = true;
        }
    }
    changed
}

/// Checks the EC parts of a layout: each parity component has the flag and the pattern
/// together, a valid geometry, and a raid0 data component with its extent in another
/// mirror; the parity components are one mirror of their own.
pub fn check(l: &Layout) -> Result<(), EcError> {
    let mut parity_mirror = None;
    for (i, c) in l.components.iter().enumerate() {
        let comp = i + 1;
        let flagged = c.flags & LCME_FL_PARITY != 0;
        let Some((d, p)) = c.ec_counts() else {
            if flagged {
                return Err(EcError::ParityFlag { comp });
            }
            continue;
        };
        if !flagged {
            return Err(EcError::ParityFlag { comp });
        }
        check_geometry(u32::from(d), u32::from(p))?;
        match parity_mirror {
            None => parity_mirror = Some(c.mirror_id()),
            Some(m) if m != c.mirror_id() => return Err(EcError::ParityMirror),
            Some(_) => {}
        }
        let data = data_of(l, c).ok_or(EcError::NoDataComponent { comp })?;
        if data.mirror_id() == c.mirror_id() {
            return Err(EcError::ParityMirror);
        }
        if data.pattern == Pattern::Mdt {
            return Err(EcError::DomData { comp });
        }
    }
    if let Some(m) = parity_mirror
        && l.components
            .iter()
            .any(|c| c.mirror_id() == m && !c.is_parity())
    {
        return Err(EcError::ParityMirror);
    }
    Ok(())
}

/// The parity mirror's components for data components `data` (all of one mirror), as
/// `lfs setstripe --ec` adds them: those of `ec` (per data component, `None` for none).
pub fn with_parity(data: Vec<Component>, ec: &[Option<(u8, u8)>]) -> Vec<Component> {
    let mirror = data.iter().map(Component::mirror_id).max().unwrap_or(0) + 1;
    let data_mirror = if mirror == 1 { 1 } else { mirror - 1 };
    let mut out: Vec<Component> = data
        .into_iter()
        .map(|mut c| {
            c.id = pflr_id(data_mirror, 0);
            c
        })
        .collect();
    let parity_mirror = data_mirror + 1;
    let parity: Vec<Component> = out
        .iter()
        .zip(ec)
        .filter_map(|(c, g)| g.map(|(d, p)| parity_template(c, parity_mirror, d, p)))
        .collect();
    out.extend(parity);
    out
}

/// Whether parity of component `c` can be instantiated (its data component is).
pub fn data_ready(l: &Layout, c: &Component) -> bool {
    data_of(l, c).is_some_and(|d| d.flags & LCME_FL_INIT != 0 && !d.objects.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::EOF;

    #[test]
    fn geometry_limits_are_lustres() {
        assert_eq!(parse_geometry("4+2"), Ok((4, 2)));
        assert_eq!(parse_geometry("8:2"), Ok((8, 2)));
        assert_eq!(parse_geometry("32+4"), Ok((32, 4)));
        assert_eq!(parse_geometry("1+1"), Err(EcError::DataCount(1)));
        assert_eq!(parse_geometry("33+1"), Err(EcError::DataCount(33)));
        assert!(matches!(
            parse_geometry("4+5"),
            Err(EcError::ParityCount { .. })
        ));
        assert!(matches!(
            parse_geometry("2+3"),
            Err(EcError::ParityCount { .. })
        ));
        assert!(matches!(
            parse_geometry("4+0"),
            Err(EcError::ParityCount { .. })
        ));
        assert!(matches!(parse_geometry("4x2"), Err(EcError::Syntax(_))));
        assert!(matches!(parse_geometry("+2"), Err(EcError::Syntax(_))));
    }

    #[test]
    fn raid_sets_cut_stripes_by_d() {
        // 16 stripes with 8+2: two sets.
        let s = raid_sets(16, 8, 2);
        assert_eq!(s.len(), 2);
        assert_eq!((s[1].data.clone(), s[1].parity.clone()), (8..16, 2..4));
        // 5 stripes with 4+2: a set of 4 and one of 1 with one parity stripe.
        let s = raid_sets(5, 4, 2);
        assert_eq!(s[1].data, 4..5);
        assert_eq!(s[1].parity, 2..3);
        assert_eq!(parity_count(5, 4, 2), 3);
        assert_eq!(parity_count(1, 4, 2), 1);
        assert_eq!(parity_count(4, 4, 2), 2);
    }

    #[test]
    fn parity_components_pair_with_data() {
        let data = vec![Component::raid0(0, EOF, 4, 1 << 20, -1)];
        let comps = with_parity(data, &[Some((4, 2))]);
        assert_eq!(comps.len(), 2);
        assert_eq!(comps[1].mirror_id(), 2);
        assert_eq!(comps[1].ec_counts(), Some((4, 2)));
        let l = Layout {
            components: comps,
            ..Layout::composite(Vec::new())
        };
        assert_eq!(check(&l), Ok(()));
        assert!(is_ec(&l));
        assert_eq!(data_layout(&l).components.len(), 1);
        let mut bad = l.clone();
        bad.components[1].flags = 0;
        assert_eq!(check(&bad), Err(EcError::ParityFlag { comp: 2 }));
        let mut bad = l.clone();
        bad.components[1].end = 1 << 20;
        assert_eq!(check(&bad), Err(EcError::NoDataComponent { comp: 2 }));
        let mut s = l.clone();
        assert!(parity_in_sync(&s, 0, 10));
        assert!(mark_parity_stale(&mut s));
        assert!(!parity_in_sync(&s, 0, 10));
        assert!(clear_parity_stale(&mut s));
        assert!(parity_in_sync(&s, 0, 10));
    }
}
