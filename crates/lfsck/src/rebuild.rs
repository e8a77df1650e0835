//! A lost file's layout, rebuilt from its orphan OST objects (Lustre's
//! `lfsck_layout_recreate_parent` and `lfsck_layout_extend_recovered_lovea`): each object
//! keeps, beside its filter fid, the shape of the component it is a stripe of
//! ([`OstLayout`]), so the objects of one file say between them which components it had,
//! how many stripes each, and which object sat in which slot.
//!
//! Planning is pure (this module); the layout component stores the file. As in Lustre,
//! a slot no object was found for is left a hole ([`StripeObject::DUMMY`], the layout
//! flagged `LOV_PATTERN_F_HOLE`): its bytes were lost, so reading or writing them fails
//! with EIO rather than returning zeros, and an orphan of that slot found later fills
//! it. Objects that do not fit one consistent layout (two in one slot, a component whose
//! objects disagree about its shape, extents that overlap within a mirror, mirrored and
//! unmirrored components in one file) are not guessed at: each goes to lost+found alone.
//!
//! A mirrored (FLR) file's objects name their mirror in the component id, so its mirrors
//! come back too. Which mirror held the newest data is not on the objects; the one whose
//! objects imply the largest file (the lowest id among equals) is taken as in sync and the
//! others are marked stale, so reads use that one copy and `lfs mirror resync` makes the
//! others equal to it. An erasure-coded file's parity mirror cannot be told from a data
//! mirror by its objects (Lustre's `ost_layout` has no flag for it either): it comes back
//! as a stale mirror, never read, and a resync makes it a copy of the data.

use nacre_core::layout::{
    COMPONENT_SEQ_MASK, EOF, LCM_FL_WRITE_PENDING, LCME_FL_INIT, LCME_FL_STALE, MIN_STRIPE_SIZE,
    mirror_id_of, pflr_id,
};
use nacre_core::{Component, Layout, OstLayout, StripeObject};
use std::collections::{BTreeMap, HashMap};

/// One orphan object of a lost file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    /// Its stripe index (the filter fid's `ver`).
    pub(crate) stripe: u32,
    pub(crate) obj: StripeObject,
    pub(crate) layout: OstLayout,
    /// Bytes in the object.
    pub(crate) size: u64,
}

/// One component of a rebuilt layout: its shape and the object of each slot found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PlannedComp {
    pub(crate) layout: OstLayout,
    pub(crate) slots: Vec<Option<StripeObject>>,
}

/// A rebuilt layout's plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Components in file order, without overlaps.
    pub(crate) comps: Vec<PlannedComp>,
    /// Pieces that fit no consistent layout.
    pub(crate) rest: Vec<Piece>,
    /// Sizes of the pieces placed, by object.
    sizes: HashMap<StripeObject, u64>,
}

/// Plans a layout from the orphan objects of one file. The first piece of a component
/// (in object order, so two runs plan alike) sets its shape; pieces that disagree wait
/// in `rest`.
pub(crate) fn plan(mut pieces: Vec<Piece>) -> Plan {
    pieces.sort_by_key(|p| (p.layout.comp_start, p.layout.comp_id, p.stripe, p.obj.fid));
    let mut p = Plan::default();
    let mut by_id: BTreeMap<u32, PlannedComp> = BTreeMap::new();
    for piece in pieces {
        let l = piece.layout;
        if !l.is_sane() || !l.holds_stripe(piece.stripe) {
            p.rest.push(piece);
            continue;
        }
        let c = by_id.entry(l.comp_id).or_insert_with(|| PlannedComp {
            layout: l,
            slots: vec![None; l.stripe_count as usize],
        });
        let slot = c.slots.get_mut(piece.stripe as usize);
        match slot {
            Some(s @ None) if c.layout == l => {
                *s = Some(piece.obj);
                p.sizes.insert(piece.obj, piece.size);
            }
            _ => p.rest.push(piece),
        }
    }
    let mut comps: Vec<PlannedComp> = by_id.into_values().collect();
    // Mirror by mirror, each in file order.
    comps.sort_by_key(|c| {
        let id = c.layout.comp_id;
        (mirror_id_of(id), c.layout.comp_start, id)
    });
    // Mirrored components beside unmirrored ones are not one file's: the unmirrored win.
    let unmirrored = comps.iter().any(|c| mirror_id_of(c.layout.comp_id) == 0);
    let mut end = 0u64;
    let mut mirror = None;
    for c in comps {
        let m = mirror_id_of(c.layout.comp_id);
        if mirror != Some(m) {
            mirror = Some(m);
            end = 0;
        }
        if c.layout.comp_start < end || (unmirrored && m != 0) {
            // Overlaps a component already placed: its objects go alone.
            for (stripe, obj) in c.slots.iter().enumerate() {
                if let Some(obj) = obj {
                    let size = p.sizes.remove(obj).unwrap_or(0);
                    p.rest.push(Piece {
                        stripe: stripe as u32,
                        obj: *obj,
                        layout: c.layout,
                        size,
                    });
                }
            }
            continue;
        }
        end = c.layout.comp_end;
        p.comps.push(c);
    }
    p
}

impl Plan {
    /// The layout: the slots found, a hole where none was. Where no object says what the
    /// file began with, its first bytes were lost: a file's first component is made with
    /// the file, so it was either on the lost MDT object (Data-on-MDT) or on objects lost
    /// too; it becomes a hole, read and written as EIO, not zeros. A gap between
    /// components (one never instantiated) becomes a component without objects, read as
    /// zeros. `None`: nothing planned.
    pub(crate) fn layout(&self) -> Option<Layout> {
        let mut comps = Vec::new();
        let mut at = 0u64;
        let mut mirror = None;
        for c in &self.comps {
            let l = c.layout;
            let m = mirror_id_of(l.comp_id);
            if mirror != Some(m) {
                mirror = Some(m);
                at = 0;
            }
            if l.comp_start > at {
                let mut g = gap(at, l.comp_start, l.comp_id);
                if at == 0 {
                    g.objects = vec![StripeObject::DUMMY];
                    g.flags = LCME_FL_INIT;
                }
                comps.push(g);
            }
            let mut comp = Component::raid0(
                l.comp_start,
                l.comp_end,
                i32::try_from(l.stripe_count).ok()?,
                l.stripe_size,
                -1,
            );
            comp.id = l.comp_id;
            comp.flags = LCME_FL_INIT;
            comp.objects = c
                .slots
                .iter()
                .map(|s| s.unwrap_or(StripeObject::DUMMY))
                .collect();
            at = l.comp_end;
            comps.push(comp);
        }
        let first = comps.first()?;
        let plain = comps.len() == 1 && first.id == 0 && first.start == 0 && first.end == EOF;
        if !plain && comps.iter().any(|c| c.id == 0) {
            // A plain layout's objects beside a composite one's: not one file's layout.
            return None;
        }
        let mut out = Layout::plain(1, first.stripe_size, -1);
        out.composite = !plain;
        out.components = comps;
        if out.is_mirrored() {
            // One mirror in sync: the one whose objects say the file is longest.
            let keep = out
                .mirror_ids()
                .into_iter()
                .max_by_key(|&m| (self.size(&out.mirror(m)), std::cmp::Reverse(m)))?;
            for c in &mut out.components {
                if c.mirror_id() != keep {
                    c.flags |= LCME_FL_STALE;
                }
            }
            out.set_flr_state(LCM_FL_WRITE_PENDING);
        }
        Some(out)
    }

    /// The file size the placed objects of `layout`'s components in sync imply.
    pub(crate) fn size(&self, layout: &Layout) -> u64 {
        let mut size = 0;
        for c in layout.components.iter().filter(|c| !c.is_stale()) {
            for (i, o) in c.objects.iter().enumerate() {
                if let Some(n) = self.sizes.get(o) {
                    size = size.max(c.file_size_from_object(i, *n));
                }
            }
        }
        size
    }
}

/// A component without objects over `[start, end)` in the mirror of `next_id`, with an
/// id no found component has.
fn gap(start: u64, end: u64, next_id: u32) -> Component {
    // Extents are multiples of the smallest stripe size, so it divides any gap.
    let mut c = Component::raid0(start, end, 1, MIN_STRIPE_SIZE, -1);
    let seq = next_id.wrapping_add(0x8000) & COMPONENT_SEQ_MASK;
    c.id = pflr_id(mirror_id_of(next_id), seq);
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use nacre_core::Fid;
    use nacre_core::layout_rules::check_structure;

    fn obj(ost: u32, oid: u32) -> StripeObject {
        StripeObject {
            ost_idx: ost,
            fid: Fid::new(0x100010000 + u64::from(ost), oid, 0),
        }
    }

    fn shape(count: u32, start: u64, end: u64, id: u32) -> OstLayout {
        OstLayout {
            stripe_size: 1 << 20,
            stripe_count: count,
            comp_start: start,
            comp_end: end,
            comp_id: id,
        }
    }

    fn piece(stripe: u32, o: StripeObject, l: OstLayout, size: u64) -> Piece {
        Piece {
            stripe,
            obj: o,
            layout: l,
            size,
        }
    }

    #[test]
    fn a_plain_file_with_every_object_comes_back_whole() {
        let l = shape(4, 0, EOF, 0);
        let pieces = (0..4)
            .map(|i| piece(3 - i, obj(i, 10), l, 1 << 20))
            .collect();
        let p = plan(pieces);
        assert!(p.rest.is_empty() && !p.layout().expect("layout").has_hole());
        let layout = p.layout().expect("layout");
        assert!(!layout.has_hole());
        assert_eq!(check_structure(&layout), Ok(()));
        assert!(!layout.composite);
        let c = &layout.components[0];
        assert_eq!(
            c.objects,
            vec![obj(3, 10), obj(2, 10), obj(1, 10), obj(0, 10)]
        );
        assert_eq!(p.size(&layout), 4 << 20);
    }

    #[test]
    fn missing_slots_are_holes_and_the_size_comes_from_what_is_left() {
        let l = shape(4, 0, EOF, 0);
        let p = plan(vec![
            piece(0, obj(0, 1), l, 1 << 20),
            piece(1, obj(1, 1), l, 5),
        ]);
        let holes: Vec<usize> = p.layout().expect("layout").components[0]
            .objects
            .iter()
            .enumerate()
            .filter(|(_, o)| o.is_dummy())
            .map(|(i, _)| i)
            .collect();
        assert_eq!(holes, vec![2, 3]);
        let layout = p.layout().expect("layout");
        assert_eq!(check_structure(&layout), Ok(()));
        let c = &layout.components[0];
        assert_eq!(c.objects.len(), 4, "the stripe count is kept");
        assert!(c.objects[2].is_dummy() && c.objects[3].is_dummy());
        assert!(layout.has_hole());
        assert_eq!(
            c.pattern_bits(),
            nacre_core::layout::LOV_PATTERN_RAID0 | nacre_core::layout::LOV_PATTERN_F_HOLE
        );
        assert_eq!(layout.objects().count(), 2, "holes name no object");
        assert_eq!(p.size(&layout), (1 << 20) + 5);
    }

    #[test]
    fn pfl_components_are_put_in_order_a_lost_start_is_a_hole_and_a_gap_reads_as_zeros() {
        let a = shape(1, 1 << 20, 4 << 20, 2);
        let b = shape(2, 8 << 20, EOF, 4);
        let p = plan(vec![
            piece(1, obj(1, 3), b, 1 << 20),
            piece(0, obj(0, 2), a, 2 << 20),
            piece(0, obj(0, 3), b, 5 << 20),
        ]);
        assert!(p.rest.is_empty());
        let layout = p.layout().expect("layout");
        assert_eq!(check_structure(&layout), Ok(()), "{layout:?}");
        assert!(layout.composite);
        let ext: Vec<(u64, u64, usize)> = layout
            .components
            .iter()
            .map(|c| (c.start, c.end, c.objects.len()))
            .collect();
        assert_eq!(
            ext,
            vec![
                (0, 1 << 20, 1),
                (1 << 20, 4 << 20, 1),
                (4 << 20, 8 << 20, 0),
                (8 << 20, EOF, 2)
            ]
        );
        // The first MiB (a Data-on-MDT part, or a first component's objects) is lost: a
        // hole. The gap after [1M, 4M) was never instantiated: no objects, zeros.
        assert!(layout.components[0].objects[0].is_dummy());
        assert!(layout.components[0].has_hole());
        assert_eq!(layout.components[0].flags & LCME_FL_INIT, LCME_FL_INIT);
        assert!(!layout.components[2].has_hole());
        assert_eq!(layout.objects().count(), 3, "holes name no object");
        let ids: std::collections::BTreeSet<u32> = layout.components.iter().map(|c| c.id).collect();
        assert_eq!(ids.len(), 4, "ids stay unique");
        // Objects of a later component start sparse (RAID0 over the file offset): 5 MiB
        // in stripe 0 of [8M, EOF) end at file offset 9M; 1 MiB in its stripe 1 lies
        // below the component.
        assert_eq!(p.size(&layout), 9 << 20);
    }

    #[test]
    fn objects_that_disagree_go_alone() {
        let l = shape(2, 0, EOF, 0);
        let other = shape(3, 0, EOF, 0);
        let over = shape(1, 0, 1 << 20, 5);
        // A mirror's object beside an unmirrored file's.
        let mirror = shape(1, 0, EOF, pflr_id(2, 1));
        let p = plan(vec![
            piece(0, obj(0, 1), l, 1),
            piece(0, obj(1, 1), l, 1),
            piece(1, obj(1, 2), other, 1),
            piece(0, obj(0, 9), over, 1),
            piece(0, obj(0, 4), mirror, 1),
            piece(5, obj(0, 5), l, 1),
        ]);
        assert_eq!(p.comps.len(), 1);
        assert_eq!(p.rest.len(), 5, "{:?}", p.rest);
        let layout = p.layout().expect("layout");
        assert_eq!(check_structure(&layout), Ok(()));
        assert!(layout.components[0].objects[1].is_dummy());
    }

    #[test]
    fn a_mirrored_files_mirrors_come_back_one_in_sync() {
        // Two mirrors, each [0, 1M) + [1M, EOF); mirror 2 lost its first component.
        let m1a = shape(1, 0, 1 << 20, pflr_id(1, 1));
        let m1b = shape(2, 1 << 20, EOF, pflr_id(1, 2));
        let m2b = shape(1, 1 << 20, EOF, pflr_id(2, 4));
        let p = plan(vec![
            piece(0, obj(0, 1), m1a, 1 << 20),
            piece(0, obj(1, 1), m1b, 1 << 20),
            piece(1, obj(2, 1), m1b, 5),
            piece(0, obj(3, 1), m2b, 5),
        ]);
        assert!(p.rest.is_empty(), "{:?}", p.rest);
        let layout = p.layout().expect("layout");
        assert_eq!(check_structure(&layout), Ok(()), "{layout:?}");
        assert!(layout.is_mirrored());
        assert_eq!(layout.mirror_ids(), vec![1, 2]);
        // Mirror 1 is whole and says 1 MiB + 5 (its [1M, EOF) stripe 1 holds 5 bytes);
        // mirror 2's 5 bytes lie below its component. Mirror 2 has a hole where its start
        // was.
        let m2 = layout.mirror(2);
        assert!(m2.components[0].objects[0].is_dummy(), "{m2:?}");
        assert_eq!(m2.components[0].mirror_id(), 2, "the hole is mirror 2's");
        assert!(layout.mirror(1).components.iter().all(|c| !c.is_stale()));
        assert!(m2.components.iter().all(|c| c.is_stale()));
        assert_eq!(layout.flr_state(), LCM_FL_WRITE_PENDING);
        assert_eq!(layout.read_mirrors(0, EOF), vec![1]);
        assert_eq!(p.size(&layout), (1 << 20) + 5);
    }

    #[test]
    fn the_mirror_that_says_the_file_is_longest_is_the_one_in_sync() {
        let m1 = shape(1, 0, EOF, pflr_id(1, 1));
        let m2 = shape(1, 0, EOF, pflr_id(2, 2));
        let p = plan(vec![
            piece(0, obj(0, 1), m1, 100),
            piece(0, obj(1, 1), m2, 200),
        ]);
        let layout = p.layout().expect("layout");
        assert_eq!(layout.read_mirrors(0, EOF), vec![2]);
        assert_eq!(p.size(&layout), 200);
        // Equal: the lowest id.
        let p = plan(vec![
            piece(0, obj(0, 1), m1, 100),
            piece(0, obj(1, 1), m2, 100),
        ]);
        assert_eq!(p.layout().expect("layout").read_mirrors(0, EOF), vec![1]);
    }
}
