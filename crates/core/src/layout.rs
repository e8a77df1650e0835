//! File layouts: where a file's bytes live.
//!
//! Every layout is a list of [`Component`]s with half-open extents `[start, end)`. A plain
//! Lustre layout (`lov_mds_md_v1`) is one component covering `[0, EOF)` with `composite` unset;
//! a composite (PFL) layout (`lov_comp_md_v1`) has several. A component's pattern is `raid0`
//! (stripes over OST objects) or `mdt` (Data-on-MDT: the bytes live with the inode). See
//! `lustre-reference.md` §2 for the on-disk fields this mirrors.

use crate::fid::Fid;
use serde::{Deserialize, Serialize};

pub const LOV_MAGIC_V1: u32 = 0x0BD1_0BD0;
pub const LOV_MAGIC_V3: u32 = 0x0BD3_0BD0;
pub const LOV_MAGIC_COMP_V1: u32 = 0x0BD6_0BD0;

/// Largest object an OST stores: ldiskfs' (ext4 with 4 KiB blocks) largest file, 16 TiB
/// less one block, which every OST's object store can hold. (Lustre learns each OST's
/// limit at connect, `ocd_maxbytes`; other local file systems allow more.)
pub const OST_OBJECT_MAX_BYTES: u64 = (1 << 44) - 4096;

/// `lmm_pattern` values.
pub const LOV_PATTERN_RAID0: u32 = 0x1;
pub const LOV_PATTERN_MDT: u32 = 0x100;
/// Some stripe's object is lost: its slot is a dummy ([`StripeObject::DUMMY`]).
pub const LOV_PATTERN_F_HOLE: u32 = 0x4000_0000;
pub const LOV_PATTERN_OVERSTRIPING: u32 = 0x200;

/// Component flags (`lcme_flags`), with the names `lfs` prints.
pub const LCME_FL_STALE: u32 = 0x1;
pub const LCME_FL_PREF_RD: u32 = 0x2;
pub const LCME_FL_PREF_WR: u32 = 0x4;
pub const LCME_FL_OFFLINE: u32 = 0x8;
pub const LCME_FL_INIT: u32 = 0x10;
pub const LCME_FL_NOSYNC: u32 = 0x20;
pub const LCME_FL_EXTENSION: u32 = 0x40;
pub const LCME_FL_PARITY: u32 = 0x80;
pub const LCME_FL_COMPRESS: u32 = 0x100;
pub const LCME_FL_PARTIAL: u32 = 0x200;
pub const LCME_FL_NOCOMPR: u32 = 0x400;
pub const LCME_FL_IS_LINK_ID: u32 = 0x4000_0000;
/// `prefer`: both preferred-for-read and preferred-for-write.
pub const LCME_FL_PREF_RW: u32 = LCME_FL_PREF_RD | LCME_FL_PREF_WR;
/// In the order of liblustreapi's `comp_flags_table`; a name matches only when all of its
/// bits are set, so `prefer` (0x6) is printed instead of `prefrd,prefwr`.
pub const COMPONENT_FLAG_NAMES: &[(u32, &str)] = &[
    (LCME_FL_INIT, "init"),
    (LCME_FL_STALE, "stale"),
    (LCME_FL_PREF_RW, "prefer"),
    (LCME_FL_PREF_RD, "prefrd"),
    (LCME_FL_PREF_WR, "prefwr"),
    (LCME_FL_OFFLINE, "offline"),
    (LCME_FL_NOSYNC, "nosync"),
    (LCME_FL_EXTENSION, "extension"),
    (LCME_FL_PARITY, "parity"),
    (LCME_FL_COMPRESS, "compress"),
    (LCME_FL_PARTIAL, "partial"),
    (LCME_FL_NOCOMPR, "nocompr"),
    (LCME_FL_IS_LINK_ID, "link_id"),
];

/// FLR state of a mirrored file (`lcm_flags & LCM_FL_FLR_MASK`): every mirror in sync.
pub const LCM_FL_RDONLY: u16 = 0x1;
/// A mirror was written and the others are marked stale.
pub const LCM_FL_WRITE_PENDING: u16 = 0x2;
/// A resync is under way.
pub const LCM_FL_SYNC_PENDING: u16 = 0x3;
pub const LCM_FL_FLR_MASK: u16 = 0xb;
/// `LUSTRE_MIRROR_COUNT_MAX` (and `lod.*.mirror_count_max`'s default).
pub const MAX_MIRROR_COUNT: u32 = 16;
/// A component's mirror id sits in bits 16-30 of its `lcme_id` (`pflr_id`).
pub const MIRROR_ID_SHIFT: u32 = 16;
/// The mirror id's bits, once shifted down.
const MIRROR_ID_MASK: u32 = 0x7fff;
/// The per-file sequence part of an `lcme_id`.
pub const COMPONENT_SEQ_MASK: u32 = 0xffff;

/// `pflr_id`: the `lcme_id` of sequence `seq` in mirror `mirror`.
pub fn pflr_id(mirror: u32, seq: u32) -> u32 {
    ((mirror & MIRROR_ID_MASK) << MIRROR_ID_SHIFT) | (seq & COMPONENT_SEQ_MASK)
}

/// `mirror_id_of`: the mirror id in an `lcme_id`.
pub fn mirror_id_of(lcme_id: u32) -> u32 {
    (lcme_id >> MIRROR_ID_SHIFT) & MIRROR_ID_MASK
}

/// End of file, as a component end.
pub const EOF: u64 = u64::MAX;
/// Every stripe size and component end is a multiple of this (`LOV_MIN_STRIPE_SIZE`).
pub const MIN_STRIPE_SIZE: u32 = 64 * 1024;
/// `LOV_MAX_STRIPE_COUNT`.
pub const MAX_STRIPE_COUNT: u32 = 2000;
/// Lustre master's default stripe size (`LOV_DESC_STRIPE_SIZE_DEFAULT`).
pub const DEFAULT_STRIPE_SIZE: u32 = 4 << 20;
/// Lustre's default stripe count.
pub const DEFAULT_STRIPE_COUNT: i32 = 1;
/// `lfs` refuses a Data-on-MDT component larger than this.
pub const MAX_DOM_SIZE: u64 = 1 << 30;
/// Default `lod.*.dom_stripesize`.
pub const DEFAULT_DOM_STRIPESIZE: u64 = 1 << 20;
/// Stripe count meaning "every OST".
pub const STRIPE_COUNT_ALL: i32 = -1;
/// Stripe offset meaning "the MDS chooses".
pub const STRIPE_OFFSET_ANY: i32 = -1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Pattern {
    /// Striped over OST objects.
    Raid0,
    /// Data-on-MDT: one "stripe", on the file's MDT.
    Mdt,
    /// The parity stripes of an erasure-coded component (flag `parity`): each RAID set of at
    /// most `dstripe_count` data stripes of the data component with the same extent has
    /// `cstripe_count` parity stripes (see [`crate::ec`]). Lustre keeps the two counts in
    /// `lcme_dstripe_count`/`lcme_cstripe_count` beside a raid0 pattern; here they ride in
    /// the pattern, so records stored before erasure coding decode unchanged. Printed as
    /// `raid0`, as Lustre prints it.
    Parity {
        dstripe_count: u8,
        cstripe_count: u8,
    },
}

impl Pattern {
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Raid0 | Pattern::Parity { .. } => "raid0",
            Pattern::Mdt => "mdt",
        }
    }

    pub fn bits(self) -> u32 {
        match self {
            Pattern::Raid0 | Pattern::Parity { .. } => LOV_PATTERN_RAID0,
            Pattern::Mdt => LOV_PATTERN_MDT,
        }
    }

    pub fn parse(s: &str) -> Option<Pattern> {
        match s {
            "raid0" => Some(Pattern::Raid0),
            "mdt" => Some(Pattern::Mdt),
            _ => None,
        }
    }
}

/// One OST object of a component: which OST and the object's own FID.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StripeObject {
    pub ost_idx: u32,
    pub fid: Fid,
}

impl StripeObject {
    /// A slot whose object was lost and not recreated (Lustre's dummy `lov_ost_data`, all
    /// zeros, in a layout flagged `LOV_PATTERN_F_HOLE`): LFSCK leaves one where it rebuilds
    /// a lost file's layout without that stripe's object, so reads and writes of the
    /// stripe fail with EIO instead of returning zeros for bytes that were lost.
    pub const DUMMY: StripeObject = StripeObject {
        ost_idx: 0,
        fid: Fid::ZERO,
    };

    pub fn is_dummy(&self) -> bool {
        self.fid.is_zero()
    }
}

/// One component of a layout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Component {
    /// `lcme_id`: unique in the file, never reused; 0 in plain layouts and templates.
    pub id: u32,
    /// `lcme_flags` (`LCME_FL_*`).
    pub flags: u32,
    pub start: u64,
    /// Exclusive end; [`EOF`] for "to the end of the file".
    pub end: u64,
    pub pattern: Pattern,
    /// Bytes per stripe; for `mdt` equal to the component end.
    pub stripe_size: u32,
    /// Requested stripes: `-1` every OST, `0` the default. Once instantiated,
    /// `objects.len()` is the real count.
    pub stripe_count: i32,
    /// First OST, or `-1` for "the MDS chooses".
    pub stripe_offset: i32,
    /// An explicit OST list (`lfs setstripe -o`), in stripe order.
    pub ost_list: Vec<u32>,
    pub pool: String,
    /// The stripe objects, in stripe order; empty until instantiated.
    pub objects: Vec<StripeObject>,
    /// For a Data-on-MDT component: the MDT-local object holding its bytes. Keeping the
    /// bytes under their own FID (not the file's) lets a layout swap (`lfs migrate`) move
    /// them with the layout in one transaction.
    pub dom_object: Option<Fid>,
}

impl Component {
    /// A raid0 component template, not yet instantiated.
    pub fn raid0(
        start: u64,
        end: u64,
        stripe_count: i32,
        stripe_size: u32,
        stripe_offset: i32,
    ) -> Component {
        Component {
            id: 0,
            flags: 0,
            start,
            end,
            pattern: Pattern::Raid0,
            stripe_size,
            stripe_count,
            stripe_offset,
            ost_list: Vec::new(),
            pool: String::new(),
            objects: Vec::new(),
            dom_object: None,
        }
    }

    /// A Data-on-MDT component `[0, end)`.
    pub fn dom(end: u64) -> Component {
        Component {
            id: 0,
            flags: 0,
            start: 0,
            end,
            pattern: Pattern::Mdt,
            stripe_size: u32::try_from(end).unwrap_or(u32::MAX),
            stripe_count: 0,
            stripe_offset: -1,
            ost_list: Vec::new(),
            pool: String::new(),
            objects: Vec::new(),
            dom_object: None,
        }
    }

    pub fn is_init(&self) -> bool {
        self.flags & LCME_FL_INIT != 0
    }

    pub fn contains(&self, off: u64) -> bool {
        off >= self.start && off < self.end
    }

    /// Where file offset `off` lives: (stripe index, offset in that stripe's object).
    ///
    /// RAID0 over the absolute file offset, as Lustre maps composite files, so objects of a
    /// later component start sparse.
    pub fn map(&self, off: u64) -> (usize, u64) {
        debug_assert_eq!(self.pattern, Pattern::Raid0);
        let s = u64::from(self.stripe_size.max(1));
        let c = self.objects.len().max(1) as u64;
        let stripe_no = off / s;
        let idx = (stripe_no % c) as usize;
        let obj_off = (stripe_no / c) * s + off % s;
        (idx, obj_off)
    }

    /// The file offset of byte `obj_off` of stripe `idx`: the inverse of [`Component::map`].
    pub fn unmap(&self, idx: usize, obj_off: u64) -> u64 {
        let s = u64::from(self.stripe_size.max(1));
        let c = self.objects.len().max(1) as u64;
        let stripe_in_obj = obj_off / s;
        (stripe_in_obj * c + idx as u64) * s + obj_off % s
    }

    /// The file size an object of `obj_size` bytes at stripe `idx` implies (0 if empty),
    /// clipped to this component's extent.
    pub fn file_size_from_object(&self, idx: usize, obj_size: u64) -> u64 {
        if obj_size == 0 {
            return 0;
        }
        let last = self.unmap(idx, obj_size - 1);
        if last < self.start {
            return 0;
        }
        (last + 1).min(self.end)
    }

    /// The object size stripe `idx` must have so the file is exactly `size` bytes long
    /// (for truncate): bytes of this stripe that lie below `size`.
    pub fn object_size_for_file_size(&self, idx: usize, size: u64) -> u64 {
        if size <= self.start {
            // Nothing of this component remains, but the object may still hold bytes
            // mapped below the component start (it never does: objects start sparse).
            return 0;
        }
        let size = size.min(self.end);
        let s = u64::from(self.stripe_size.max(1));
        let c = self.objects.len().max(1) as u64;
        // Number of full stripe rows below `size`, and the partial stripe.
        let stripe_no = size / s;
        let within = size % s;
        let rows = stripe_no / c;
        let col = (stripe_no % c) as usize;
        let mut obj = rows * s;
        match idx.cmp(&col) {
            std::cmp::Ordering::Less => obj += s,
            std::cmp::Ordering::Equal => obj += within,
            std::cmp::Ordering::Greater => {}
        }
        obj
    }

    /// The mirror this component belongs to (0 in a file without mirrors).
    pub fn mirror_id(&self) -> u32 {
        mirror_id_of(self.id)
    }

    pub fn is_stale(&self) -> bool {
        self.flags & LCME_FL_STALE != 0
    }

    /// Whether some stripe's object is lost (a dummy slot, `LOV_PATTERN_F_HOLE`).
    pub fn has_hole(&self) -> bool {
        self.objects.iter().any(StripeObject::is_dummy)
    }

    /// `lmm_pattern` as stored: the pattern, with `LOV_PATTERN_F_HOLE` where a stripe's
    /// object is lost.
    pub fn pattern_bits(&self) -> u32 {
        let hole = if self.has_hole() {
            LOV_PATTERN_F_HOLE
        } else {
            0
        };
        self.pattern.bits() | hole
    }

    /// A component of erasure-code parity (flag `parity`).
    pub fn is_parity(&self) -> bool {
        self.flags & LCME_FL_PARITY != 0 || matches!(self.pattern, Pattern::Parity { .. })
    }

    /// `lcme_dstripe_count` and `lcme_cstripe_count` of a parity component.
    pub fn ec_counts(&self) -> Option<(u8, u8)> {
        match self.pattern {
            Pattern::Parity {
                dstripe_count,
                cstripe_count,
            } => Some((dstripe_count, cstripe_count)),
            _ => None,
        }
    }

    /// Printed flags, as `lfs getstripe` shows `lcme_flags`.
    pub fn flags_string(&self) -> String {
        flags_to_string(self.flags)
    }
}

/// What an OST object keeps of its file's layout beside its filter fid (Lustre's
/// `struct ost_layout` in `filter_fid`): enough for the layout LFSCK to rebuild the layout
/// of a file whose MDT object is lost from the file's orphan objects alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OstLayout {
    pub stripe_size: u32,
    pub stripe_count: u32,
    pub comp_start: u64,
    pub comp_end: u64,
    /// `lcme_id` of the component (0 in a plain layout).
    pub comp_id: u32,
}

impl OstLayout {
    /// The mirror id of the object's component (0 outside a mirrored or erasure-coded
    /// file: an EC file is a data and a parity mirror).
    pub fn mirror_id(&self) -> u32 {
        mirror_id_of(self.comp_id)
    }

    /// Bytes of its on-disk form.
    pub const BYTES: usize = 28;

    /// Big-endian, in Lustre's field order.
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        b[0..4].copy_from_slice(&self.stripe_size.to_be_bytes());
        b[4..8].copy_from_slice(&self.stripe_count.to_be_bytes());
        b[8..16].copy_from_slice(&self.comp_start.to_be_bytes());
        b[16..24].copy_from_slice(&self.comp_end.to_be_bytes());
        b[24..28].copy_from_slice(&self.comp_id.to_be_bytes());
        b
    }

    /// `None` unless `b` is exactly one encoded layout.
    pub fn from_bytes(b: &[u8]) -> Option<OstLayout> {
        let b: &[u8; Self::BYTES] = b.try_into().ok()?;
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut v = [0u8; 8];
            v.copy_from_slice(&b[i..i + 8]);
            u64::from_be_bytes(v)
        };
        Some(OstLayout {
            stripe_size: u32_at(0),
            stripe_count: u32_at(4),
            comp_start: u64_at(8),
            comp_end: u64_at(16),
            comp_id: u32_at(24),
        })
    }

    /// Within the rules a stored layout's components keep
    /// ([`check_ost_layout`](crate::layout_rules::check_ost_layout)): a rebuild trusts
    /// nothing else, and an OST refuses any other.
    pub fn is_sane(&self) -> bool {
        crate::layout_rules::check_ost_layout(self).is_ok()
    }

    /// Stripe `stripe` fits this layout.
    pub fn holds_stripe(&self, stripe: u32) -> bool {
        stripe < self.stripe_count
    }
}

impl Component {
    /// The [`OstLayout`] each object of this instantiated OST component keeps; `None` for
    /// a component without OST objects.
    pub fn ost_layout(&self) -> Option<OstLayout> {
        // Parity is rebuilt from the data, not from its objects.
        if self.pattern != Pattern::Raid0 || self.is_parity() || self.objects.is_empty() {
            return None;
        }
        Some(OstLayout {
            stripe_size: self.stripe_size,
            stripe_count: u32::try_from(self.objects.len()).ok()?,
            comp_start: self.start,
            comp_end: self.end,
            comp_id: self.id,
        })
    }
}

/// `init,stale`, `0` when empty, unknown bits in hex.
pub fn flags_to_string(flags: u32) -> String {
    if flags == 0 {
        return "0".to_string();
    }
    let mut parts = Vec::new();
    let mut rest = flags;
    for (bits, name) in COMPONENT_FLAG_NAMES {
        if rest & bits == *bits {
            parts.push((*name).to_string());
            rest &= !bits;
        }
    }
    if rest != 0 {
        parts.push(format!("{rest:#x}"));
    }
    parts.join(",")
}

/// A file's layout (or a directory's default layout template).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// Composite (`lov_comp_md_v1`) rather than plain (`lov_mds_md_v1`).
    pub composite: bool,
    /// `lcm_layout_gen`: bumped on every change.
    pub layout_gen: u32,
    /// `lcm_flags`.
    pub flags: u16,
    pub components: Vec<Component>,
}

impl Layout {
    /// A plain RAID0 layout.
    pub fn plain(stripe_count: i32, stripe_size: u32, stripe_offset: i32) -> Layout {
        Layout {
            composite: false,
            layout_gen: 0,
            flags: 0,
            components: vec![Component::raid0(
                0,
                EOF,
                stripe_count,
                stripe_size,
                stripe_offset,
            )],
        }
    }

    /// A composite layout from component templates; ids are assigned 1, 2, ...
    pub fn composite(mut components: Vec<Component>) -> Layout {
        for (i, c) in components.iter_mut().enumerate() {
            c.id = i as u32 + 1;
        }
        Layout {
            composite: true,
            layout_gen: 0,
            flags: 0,
            components,
        }
    }

    /// The component holding file offset `off`.
    pub fn component_at(&self, off: u64) -> Option<&Component> {
        self.components.iter().find(|c| c.contains(off))
    }

    pub fn component_index_at(&self, off: u64) -> Option<usize> {
        self.components.iter().position(|c| c.contains(off))
    }

    /// End of the last component: the layout's own extent.
    pub fn max_size(&self) -> u64 {
        self.components.last().map_or(0, |c| c.end)
    }

    /// Largest size a file with this layout can reach: the layout's extent, or less where
    /// some component's objects would pass [`OST_OBJECT_MAX_BYTES`] (Lustre's
    /// `lov_stripe_maxbytes`); a write, truncate or fallocate past it is EFBIG. For a
    /// component not yet instantiated, its stripe count decides (at least one object).
    pub fn max_file_size(&self) -> u64 {
        let m = OST_OBJECT_MAX_BYTES;
        for c in &self.components {
            if c.pattern != Pattern::Raid0 {
                continue;
            }
            let s = u64::from(c.stripe_size.max(1));
            let count = if c.objects.is_empty() {
                u64::try_from(c.stripe_count).unwrap_or(1).max(1)
            } else {
                c.objects.len() as u64
            };
            // The first byte whose object offset reaches `m` (see `Component::map`).
            let limit = (m / s)
                .saturating_mul(s)
                .saturating_mul(count)
                .saturating_add(m % s);
            if limit < c.end {
                return limit.max(c.start);
            }
        }
        self.max_size()
    }

    /// The MDT-local object holding the Data-on-MDT bytes, once instantiated.
    pub fn dom_object(&self) -> Option<Fid> {
        self.dom().and_then(|c| c.dom_object)
    }

    /// Whether any OST object exists (a glimpse is needed for the size).
    pub fn has_ost_objects(&self) -> bool {
        self.components.iter().any(|c| !c.objects.is_empty())
    }

    /// The Data-on-MDT component, if the layout has one.
    pub fn dom(&self) -> Option<&Component> {
        self.components
            .first()
            .filter(|c| c.pattern == Pattern::Mdt)
    }

    /// The size of the Data-on-MDT extent (0 when there is none).
    pub fn dom_size(&self) -> u64 {
        self.dom().map_or(0, |c| c.end)
    }

    /// Next unused component sequence (the low bits of `lcme_id`; the mirror id goes
    /// above them).
    pub fn next_component_id(&self) -> u32 {
        self.components
            .iter()
            .map(|c| c.id & COMPONENT_SEQ_MASK)
            .max()
            .unwrap_or(0)
            + 1
    }

    /// Gives each uninstantiated component the objects `from` instantiated it with (the
    /// same component: id and extent), as a layout intent does, first run or replayed;
    /// returns the objects taken. Components already instantiated keep theirs.
    pub fn adopt_instantiated(&mut self, from: &Layout) -> Vec<StripeObject> {
        let mut taken = Vec::new();
        for c in self.components.iter_mut().filter(|c| !c.is_init()) {
            let same = from
                .components
                .iter()
                .find(|n| n.id == c.id && n.is_init() && (n.start, n.end) == (c.start, c.end));
            if let Some(n) = same {
                c.objects = n.objects.clone();
                c.flags |= LCME_FL_INIT;
                taken.extend(n.objects.iter().copied());
            }
        }
        taken
    }

    /// Every OST object of every instantiated component; not the dummy slots of a layout
    /// with holes, which name no object.
    pub fn objects(&self) -> impl Iterator<Item = &StripeObject> {
        self.components
            .iter()
            .flat_map(|c| c.objects.iter())
            .filter(|o| !o.is_dummy())
    }

    /// Whether some stripe's object is lost (`LOV_PATTERN_F_HOLE`).
    pub fn has_hole(&self) -> bool {
        self.components.iter().any(Component::has_hole)
    }

    /// The last instantiated component (what single-field `getstripe` options report).
    pub fn last_init(&self) -> Option<&Component> {
        self.components.iter().rev().find(|c| c.is_init())
    }

    /// File size, blocks and latest data change implied by the objects' own sizes, blocks
    /// and modification times (`attrs` answers for each object, `None` if missing).
    pub fn merge_object_attrs(
        &self,
        attrs: impl Fn(&StripeObject) -> Option<(u64, u64, crate::Timespec)>,
    ) -> (u64, u64, crate::Timespec) {
        let mut size = 0u64;
        let mut blocks = 0u64;
        let mut mtime = crate::Timespec::default();
        for c in &self.components {
            // Parity objects take space but say nothing of the file's size.
            let parity = c.is_parity();
            for (idx, o) in c.objects.iter().enumerate() {
                if o.is_dummy() {
                    continue;
                }
                if let Some((s, b, m)) = attrs(o) {
                    if !parity {
                        size = size.max(c.file_size_from_object(idx, s));
                    }
                    blocks += b;
                    mtime = mtime.max(m);
                }
            }
        }
        (size, blocks, mtime)
    }

    /// The mirror ids of the layout, in the order their first components appear.
    pub fn mirror_ids(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = Vec::new();
        for c in &self.components {
            if !ids.contains(&c.mirror_id()) {
                ids.push(c.mirror_id());
            }
        }
        ids
    }

    /// `lfs mirror extend`'s merge (`lod_layout_convert`, then the new mirrors after
    /// the last): a file not mirrored yet becomes mirror 1 (its instantiated components
    /// marked so), and each of `comps` joins the mirror its own mirror id (taken as one
    /// when zero) names past the last, under the next component ids. `fill` completes
    /// each new component, given the stripe count and size of the component before it in
    /// the same new mirror.
    pub fn add_mirrors(
        &mut self,
        comps: Vec<Component>,
        mut fill: impl FnMut(&mut Component, Option<(i32, u32)>),
    ) {
        if !self.is_mirrored() {
            self.composite = true;
            for (i, c) in self.components.iter_mut().enumerate() {
                c.id = pflr_id(1, i as u32 + 1);
                if !c.objects.is_empty() || c.dom_object.is_some() {
                    c.flags |= LCME_FL_INIT;
                }
            }
        }
        let base = self.mirror_ids().into_iter().max().unwrap_or(0);
        let first = self.next_component_id();
        let mut prev: Option<(u32, (i32, u32))> = None;
        for (seq, mut c) in (first..).zip(comps) {
            let m = base + c.mirror_id().max(1);
            let p = prev.filter(|(pm, _)| *pm == m).map(|(_, p)| p);
            fill(&mut c, p);
            prev = Some((m, (c.stripe_count, c.stripe_size)));
            c.id = pflr_id(m, seq);
            self.components.push(c);
        }
    }

    /// Whether the file has more than one mirror (FLR).
    pub fn is_mirrored(&self) -> bool {
        let first = self.components.first().map(Component::mirror_id);
        self.components.iter().any(|c| Some(c.mirror_id()) != first)
    }

    /// One mirror alone: a layout of only mirror `id`'s components, which every I/O path
    /// of an unmirrored file handles as it is.
    pub fn mirror(&self, id: u32) -> Layout {
        Layout {
            composite: self.composite,
            layout_gen: self.layout_gen,
            flags: self.flags,
            components: self
                .components
                .iter()
                .filter(|c| c.mirror_id() == id)
                .cloned()
                .collect(),
        }
    }

    /// Whether any component of mirror `id` overlapping `[start, end)` is stale.
    pub fn mirror_stale_in(&self, id: u32, start: u64, end: u64) -> bool {
        self.components
            .iter()
            .any(|c| c.mirror_id() == id && c.start < end && c.end > start && c.is_stale())
    }

    /// The mirrors a read of `[start, end)` may use, best first: in sync over the range,
    /// preferred for reads (`prefer`, `prefrd`) before the rest, then by mirror id.
    pub fn read_mirrors(&self, start: u64, end: u64) -> Vec<u32> {
        let mut ids: Vec<u32> = self
            .mirror_ids()
            .into_iter()
            .filter(|&m| !self.mirror_stale_in(m, start, end))
            .collect();
        let preferred = |m: u32| {
            self.components
                .iter()
                .any(|c| c.mirror_id() == m && c.flags & LCME_FL_PREF_RD != 0)
        };
        ids.sort_by_key(|&m| (!preferred(m), m));
        ids
    }

    /// The FLR state in `lcm_flags` (`LCM_FL_RDONLY`, `_WRITE_PENDING`, `_SYNC_PENDING`;
    /// 0 for a file without mirrors).
    pub fn flr_state(&self) -> u16 {
        self.flags & LCM_FL_FLR_MASK
    }

    pub fn set_flr_state(&mut self, state: u16) {
        self.flags = (self.flags & !LCM_FL_FLR_MASK) | state;
    }

    /// Whether any component is stale.
    pub fn has_stale(&self) -> bool {
        self.components.iter().any(Component::is_stale)
    }

    /// The mirrors a write of `[start, end)` may go to: those in sync over the range,
    /// preferred for writes (`prefer`, `prefwr`) first, then a mirror with no stale
    /// component at all (the one earlier writes went to), then by id.
    pub fn write_mirrors(&self, start: u64, end: u64) -> Vec<u32> {
        let mut ids: Vec<u32> = self
            .mirror_ids()
            .into_iter()
            .filter(|&m| !self.mirror_stale_in(m, start, end))
            .collect();
        let preferred = |m: u32| {
            self.components
                .iter()
                .any(|c| c.mirror_id() == m && c.flags & LCME_FL_PREF_WR != 0)
        };
        ids.sort_by_key(|&m| (!preferred(m), self.mirror_stale_in(m, 0, EOF), m));
        ids
    }

    /// Whether a write of `[start, end)` must first tell the MDT which mirrors it goes to
    /// (Lustre's write intent on an FLR file): more than one mirror is in sync over the
    /// range, or the file is not in the write-pending state yet.
    pub fn needs_write_intent(&self, start: u64, end: u64) -> bool {
        self.is_mirrored()
            && (self.write_mirrors(start, end).len() > 1
                || self.flr_state() != LCM_FL_WRITE_PENDING)
    }

    /// A write of `[start, end)` went (or goes) to the mirrors in `keep` only: every
    /// component of another mirror overlapping the range becomes stale, and the file
    /// becomes write-pending (as Lustre's lod does on a write intent). Each mirror kept must
    /// exist and be in sync over the range. Returns whether a component changed.
    pub fn stale_for_write(
        &mut self,
        keep: &[u32],
        start: u64,
        end: u64,
    ) -> Result<bool, StaleError> {
        if keep.is_empty() {
            return Err(StaleError::NoMirror);
        }
        let ids = self.mirror_ids();
        for &m in keep {
            if !ids.contains(&m) {
                return Err(StaleError::NoSuchMirror(m));
            }
            if self.mirror_stale_in(m, start, end) {
                return Err(StaleError::Stale(m));
            }
        }
        let mut changed = false;
        for c in &mut self.components {
            if !keep.contains(&c.mirror_id()) && c.start < end && c.end > start && !c.is_stale() {
                c.flags |= LCME_FL_STALE;
                changed = true;
            }
        }
        if self.has_stale() && self.flr_state() != LCM_FL_WRITE_PENDING {
            self.set_flr_state(LCM_FL_WRITE_PENDING);
            changed = true;
        }
        Ok(changed)
    }

    /// Components `ids` hold the in-sync data again (the end of a resync): their stale flag
    /// goes, and the file is read-only (every mirror in sync) once none is left stale.
    pub fn clear_stale(&mut self, ids: &[u32]) {
        for c in &mut self.components {
            if ids.contains(&c.id) {
                c.flags &= !LCME_FL_STALE;
            }
        }
        let state = if self.has_stale() {
            LCM_FL_WRITE_PENDING
        } else {
            LCM_FL_RDONLY
        };
        self.set_flr_state(state);
    }

    /// Whether every component below `end` has been instantiated.
    pub fn instantiated_to(&self, end: u64) -> bool {
        self.components
            .iter()
            .filter(|c| c.start < end)
            .all(|c| c.is_init())
    }
}

/// Why a write's mirrors cannot be the ones asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StaleError {
    #[error("no mirror to write to")]
    NoMirror,
    #[error("no mirror {0}")]
    NoSuchMirror(u32),
    #[error("mirror {0} is stale over the range")]
    Stale(u32),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn striped(count: usize, size: u32) -> Component {
        let mut c = Component::raid0(0, EOF, count as i32, size, 0);
        c.objects = (0..count)
            .map(|i| StripeObject {
                ost_idx: i as u32,
                fid: Fid::new(0x300000400, i as u32 + 1, 0),
            })
            .collect();
        c.flags = LCME_FL_INIT;
        c
    }

    #[test]
    fn a_layout_adopts_only_the_same_components_instantiated_elsewhere() {
        let uninit = |start, end| Component::raid0(start, end, 1, 1 << 20, -1);
        let mut cur = Layout::composite(vec![uninit(0, 1 << 20), uninit(1 << 20, EOF)]);
        cur.components[0].objects = striped(1, 1 << 20).objects;
        cur.components[0].flags = LCME_FL_INIT;
        let kept = cur.components[0].objects.clone();
        let mut from = cur.clone();
        for (i, c) in from.components.iter_mut().enumerate() {
            c.objects = vec![StripeObject {
                ost_idx: 0,
                fid: Fid::new(0x300000400, 100 + i as u32, 0),
            }];
            c.flags = LCME_FL_INIT;
        }
        // Another component under the same id (a different extent) is not the same one.
        let mut other = from.clone();
        other.components[1].start = 2 << 20;
        assert!(cur.clone().adopt_instantiated(&other).is_empty());
        let taken = cur.adopt_instantiated(&from);
        assert_eq!(taken, from.components[1].objects);
        assert_eq!(
            cur.components[0].objects, kept,
            "an instantiated one keeps its own"
        );
        assert!(cur.components.iter().all(Component::is_init));
        assert!(
            cur.adopt_instantiated(&from).is_empty(),
            "nothing left to adopt"
        );
    }

    #[test]
    fn ost_layout_round_trips_and_refuses_what_no_layout_has() {
        let mut c = striped(4, 1 << 20);
        c.id = 3;
        c.start = 1 << 20;
        let l = c.ost_layout().expect("an OST component");
        assert_eq!(l.stripe_count, 4);
        assert_eq!(l.comp_id, 3);
        assert_eq!(OstLayout::from_bytes(&l.to_bytes()), Some(l));
        assert!(l.is_sane() && l.holds_stripe(3) && !l.holds_stripe(4));
        assert_eq!(OstLayout::from_bytes(&l.to_bytes()[..27]), None);
        for bad in [
            OstLayout {
                stripe_size: 4096,
                ..l
            },
            OstLayout {
                stripe_count: 0,
                ..l
            },
            OstLayout {
                stripe_count: MAX_STRIPE_COUNT + 1,
                ..l
            },
            OstLayout {
                comp_end: l.comp_start,
                ..l
            },
            OstLayout {
                comp_end: (3 << 20) + 65536,
                ..l
            },
            OstLayout {
                stripe_size: 0,
                ..l
            },
            OstLayout {
                comp_start: 4096,
                ..l
            },
            OstLayout {
                stripe_count: u32::MAX,
                ..l
            },
        ] {
            assert!(!bad.is_sane(), "{bad:?}");
        }
        assert_eq!(Component::dom(1 << 20).ost_layout(), None);
        assert_eq!(Component::raid0(0, EOF, 2, 1 << 20, -1).ost_layout(), None);
    }

    #[test]
    fn raid0_map_matches_reference_formula() {
        let c = striped(4, 1 << 20);
        assert_eq!(c.map(0), (0, 0));
        assert_eq!(c.map((1 << 20) + 5), (1, 5));
        assert_eq!(c.map(4 << 20), (0, 1 << 20));
        assert_eq!(c.map((9 << 20) + 7), (1, (2 << 20) + 7));
    }

    #[test]
    fn unmap_inverts_map() {
        let c = striped(3, 65536);
        for off in [0u64, 1, 65535, 65536, 200_000, 10_000_000, 123_456_789] {
            let (idx, obj) = c.map(off);
            assert_eq!(c.unmap(idx, obj), off);
        }
    }

    #[test]
    fn sizes_from_objects() {
        let c = striped(2, 65536);
        // 100000 bytes: stripe 0 holds [0,64K), stripe 1 holds [64K,100000).
        let size = 100_000u64;
        let o0 = c.object_size_for_file_size(0, size);
        let o1 = c.object_size_for_file_size(1, size);
        assert_eq!(o0, 65536);
        assert_eq!(o1, 100_000 - 65536);
        assert_eq!(
            c.file_size_from_object(0, o0)
                .max(c.file_size_from_object(1, o1)),
            size
        );
        assert_eq!(c.file_size_from_object(1, 0), 0);
        // Truncate into the second row.
        let size = 3 * 65536 + 10;
        assert_eq!(c.object_size_for_file_size(0, size), 65536 + 65536);
        assert_eq!(c.object_size_for_file_size(1, size), 65536 + 10);
    }

    #[test]
    fn file_size_stops_where_an_object_would_pass_its_limit() {
        let m = OST_OBJECT_MAX_BYTES;
        // One stripe: the object is the file.
        let one = Layout::plain(1, 4 << 20, -1);
        assert_eq!(one.max_file_size(), m);
        // Four stripes of 1 MiB: four times as much, and no byte below maps past `m`.
        let four = Layout {
            components: vec![striped(4, 1 << 20)],
            ..Layout::plain(4, 1 << 20, -1)
        };
        let lim = four.max_file_size();
        assert!(lim > 3 * m && lim <= 4 * m, "{lim}");
        let c = &four.components[0];
        assert!(c.map(lim - 1).1 < m);
        assert!(c.map(lim).1 >= m);
        // A component that ends below the limit does not limit the file.
        let pfl = Layout::composite(vec![
            Component::raid0(0, 1 << 20, 1, 1 << 20, -1),
            Component::raid0(1 << 20, EOF, 1, 1 << 20, -1),
        ]);
        assert_eq!(pfl.max_file_size(), m);
    }

    #[test]
    fn composite_lookup() {
        let mut l = Layout::composite(vec![
            Component::dom(1 << 20),
            Component::raid0(1 << 20, EOF, -1, 4 << 20, -1),
        ]);
        assert_eq!(l.components[1].id, 2);
        assert_eq!(l.component_at(5).map(|c| c.pattern), Some(Pattern::Mdt));
        assert_eq!(l.component_at(1 << 20).map(|c| c.id), Some(2));
        assert_eq!(l.dom_size(), 1 << 20);
        assert!(!l.instantiated_to(1));
        l.components[0].flags |= LCME_FL_INIT;
        assert!(l.instantiated_to(1 << 20));
        assert!(!l.instantiated_to((1 << 20) + 1));
        assert_eq!(l.next_component_id(), 3);
    }

    fn mirrored() -> Layout {
        let mut comps = vec![
            Component::raid0(0, 1 << 20, 1, 1 << 20, -1),
            Component::raid0(1 << 20, EOF, 1, 1 << 20, -1),
            Component::raid0(0, EOF, 1, 1 << 20, -1),
        ];
        comps[0].id = pflr_id(1, 1);
        comps[1].id = pflr_id(1, 2);
        comps[2].id = pflr_id(2, 3);
        Layout {
            components: comps,
            ..Layout::composite(Vec::new())
        }
    }

    #[test]
    fn mirrors_are_views_of_their_components() {
        let l = mirrored();
        assert_eq!(pflr_id(2, 3), 131075);
        assert!(l.is_mirrored());
        assert!(!Layout::plain(1, 1 << 20, -1).is_mirrored());
        assert_eq!(l.mirror_ids(), vec![1, 2]);
        assert_eq!(l.mirror(1).components.len(), 2);
        assert_eq!(
            l.mirror(2).component_at(5 << 20).map(|c| c.id),
            Some(131075)
        );
        assert_eq!(l.read_mirrors(0, 10), vec![1, 2]);
        let mut s = l.clone();
        s.components[1].flags |= LCME_FL_STALE;
        assert_eq!(s.read_mirrors(0, 10), vec![1, 2]);
        assert_eq!(s.read_mirrors(0, 2 << 20), vec![2]);
        let mut p = l.clone();
        p.components[2].flags |= LCME_FL_PREF_RW;
        assert_eq!(p.read_mirrors(0, 10), vec![2, 1]);
    }

    #[test]
    fn a_write_to_one_mirror_makes_the_others_stale_until_resync() {
        let mut l = mirrored();
        l.flags = LCM_FL_RDONLY;
        assert!(l.needs_write_intent(0, 10));
        assert_eq!(l.write_mirrors(0, 10), vec![1, 2]);
        // A write inside mirror 1's first component: mirror 2's only component goes stale.
        assert_eq!(l.stale_for_write(&[1], 0, 10), Ok(true));
        assert_eq!(l.flr_state(), LCM_FL_WRITE_PENDING);
        assert!(l.components[2].is_stale() && !l.components[1].is_stale());
        assert_eq!(l.write_mirrors(0, 10), vec![1]);
        assert!(!l.needs_write_intent(0, 10));
        // Again: nothing changes.
        assert_eq!(l.stale_for_write(&[1], 5, 20), Ok(false));
        // A stale mirror cannot be the one written.
        assert_eq!(l.stale_for_write(&[2], 0, 10), Err(StaleError::Stale(2)));
        assert_eq!(
            l.stale_for_write(&[3], 0, 10),
            Err(StaleError::NoSuchMirror(3))
        );
        l.clear_stale(&[pflr_id(2, 3)]);
        assert_eq!(l.flr_state(), LCM_FL_RDONLY);
        assert!(!l.has_stale());
        // Mirror 2 written past 1 MiB: only mirror 1's second component goes stale, and
        // mirror 2 (with no stale component) is the one later writes prefer.
        assert_eq!(l.stale_for_write(&[2], 2 << 20, 3 << 20), Ok(true));
        assert!(l.components[1].is_stale() && !l.components[0].is_stale());
        assert_eq!(l.write_mirrors(0, 10), vec![2, 1]);
        assert!(l.needs_write_intent(0, 10));
    }

    #[test]
    fn flag_names() {
        assert_eq!(flags_to_string(0), "0");
        assert_eq!(flags_to_string(LCME_FL_INIT | LCME_FL_STALE), "init,stale");
        assert_eq!(flags_to_string(0x1000), "0x1000");
        assert_eq!(flags_to_string(LCME_FL_PREF_RD | LCME_FL_PREF_WR), "prefer");
        assert_eq!(
            flags_to_string(LCME_FL_INIT | LCME_FL_PREF_WR),
            "init,prefwr"
        );
        assert_eq!(flags_to_string(LCME_FL_STALE | 0x1000), "stale,0x1000");
    }
}
