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
//! objects disagree about its shape, extents that overlap, a mirror's or parity's
//! stripes) are not guessed at: each goes to lost+found alone.

use nacre_core::layout::{EOF, LCME_FL_INIT, MIN_STRIPE_SIZE, mirror_id_of};
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
        if !l.is_sane() || !l.holds_stripe(piece.stripe) || mirror_id_of(l.comp_id) != 0 {
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
    comps.sort_by_key(|c| (c.layout.comp_start, c.layout.comp_id));
    let mut end = 0u64;
    for c in comps {
        if c.layout.comp_start < end {
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
    /// Slots no object was found for, as (component, stripe).
    pub(crate) fn missing(&self) -> Vec<(usize, u32)> {
        let mut out = Vec::new();
        for (ci, c) in self.comps.iter().enumerate() {
            for (s, o) in c.slots.iter().enumerate() {
                if o.is_none() {
                    out.push((ci, s as u32));
                }
            }
        }
        out
    }

    /// The layout: the slots found, a hole where none was. A gap between components (one
    /// never instantiated, or a Data-on-MDT part lost with the file) becomes a component
    /// without objects, read as zeros. `None`: nothing planned.
    pub(crate) fn layout(&self) -> Option<Layout> {
        let mut comps = Vec::new();
        let mut at = 0u64;
        for c in &self.comps {
            let l = c.layout;
            if l.comp_start > at {
                comps.push(gap(at, l.comp_start, l.comp_id));
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
        Some(out)
    }

    /// The file size the placed objects imply.
    pub(crate) fn size(&self, layout: &Layout) -> u64 {
        let mut size = 0;
        for c in &layout.components {
            for (i, o) in c.objects.iter().enumerate() {
                if let Some(n) = self.sizes.get(o) {
                    size = size.max(c.file_size_from_object(i, *n));
                }
            }
        }
        size
    }
}

/// A component without objects over `[start, end)`, with an id no found component has.
fn gap(start: u64, end: u64, next_id: u32) -> Component {
    // Extents are multiples of the smallest stripe size, so it divides any gap.
    let mut c = Component::raid0(start, end, 1, MIN_STRIPE_SIZE, -1);
    c.id = next_id.wrapping_add(0x8000) & nacre_core::layout::COMPONENT_SEQ_MASK;
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
        assert!(p.rest.is_empty() && p.missing().is_empty());
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
        assert_eq!(p.missing(), vec![(0, 2), (0, 3)]);
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
    fn pfl_components_are_put_in_order_and_a_gap_reads_as_a_hole() {
        let a = shape(1, 1 << 20, 4 << 20, 2);
        let b = shape(2, 4 << 20, EOF, 3);
        let p = plan(vec![
            piece(1, obj(1, 3), b, 1 << 20),
            piece(0, obj(0, 2), a, 2 << 20),
            piece(0, obj(0, 3), b, 3 << 20),
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
            vec![(0, 1 << 20, 0), (1 << 20, 4 << 20, 1), (4 << 20, EOF, 2)]
        );
        let ids: std::collections::BTreeSet<u32> = layout.components.iter().map(|c| c.id).collect();
        assert_eq!(ids.len(), 3, "ids stay unique");
        // Objects of a later component start sparse (RAID0 over the file offset): 3 MiB
        // in stripe 0 of [4M, EOF) end at file offset 5M; 1 MiB in its stripe 1 lies
        // below the component.
        assert_eq!(p.size(&layout), 5 << 20);
    }

    #[test]
    fn objects_that_disagree_go_alone() {
        let l = shape(2, 0, EOF, 0);
        let other = shape(3, 0, EOF, 0);
        let over = shape(1, 0, 1 << 20, 5);
        let mirror = shape(1, 0, EOF, nacre_core::layout::pflr_id(2, 1));
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
}
