//! `lfs getstripe`: its options, and the text liblustreapi prints for plain and composite
//! layouts, Data-on-MDT components, directory default layouts, YAML (`-y`), single-field
//! queries (`-c`, `-S`, `-i`, ...), and the listing of a directory's entries.
//!
//! The printer follows `lov_dump_user_lmm_header`, `lov_dump_user_lmm_v1v3`,
//! `lov_dump_comp_v1` and `cb_getstripe` field by field: label padding, separators,
//! blank lines and the quirks users' scripts rely on (a directory default on one line,
//! the values of the last instantiated component for single-field queries).

use crate::cnum::{parse_c_long, parse_c_ulong};
use crate::dirstripe::{LmvView, dump_lmv};
use crate::error::{Error, Result};
use crate::getopt::{HasArg, LongOpt, OptSpec, Parsed, getopt, lo, owned};
use crate::setstripe::{MAX_COMPONENT_ID, mirror_id_of, parse_component_flags};
use crate::size::parse_size;
use nacre_core::fid::Fid;
use nacre_core::layout::{
    Component, DEFAULT_STRIPE_SIZE, EOF, LCME_FL_EXTENSION, LCME_FL_INIT, LCME_FL_NOSYNC,
    LOV_MAGIC_COMP_V1, LOV_MAGIC_V1, LOV_MAGIC_V3, LOV_PATTERN_MDT, Layout, Pattern, StripeObject,
    flags_to_string,
};
use nacre_core::lmv::LmvTemplate;
use nacre_core::target::TargetName;
use std::fmt::Write;

const CMD: &str = "lfs getstripe";

/// `enum llapi_layout_verbose`: which fields to print.
pub(crate) mod verbose {
    pub const STRIPE_COUNT: u32 = 0x1;
    pub const STRIPE_SIZE: u32 = 0x2;
    pub const STRIPE_OFFSET: u32 = 0x4;
    pub const POOL: u32 = 0x8;
    pub const DETAIL: u32 = 0x10;
    pub const OBJID: u32 = 0x20;
    pub const GENERATION: u32 = 0x40;
    pub const MDTINDEX: u32 = 0x80;
    pub const PATTERN: u32 = 0x100;
    pub const COMP_COUNT: u32 = 0x200;
    pub const COMP_FLAGS: u32 = 0x400;
    pub const COMP_START: u32 = 0x800;
    pub const COMP_END: u32 = 0x1000;
    pub const COMP_ID: u32 = 0x2000;
    pub const DFID: u32 = 0x4000;
    pub const HASH_TYPE: u32 = 0x8000;
    pub const MIRROR_COUNT: u32 = 0x10000;
    pub const MIRROR_ID: u32 = 0x20000;
    pub const EXT_SIZE: u32 = 0x40000;
    pub const INHERIT: u32 = 0x80000;
    pub const INHERIT_RR: u32 = 0x100000;
    pub const EC_COUNT: u32 = 0x1000000;
    pub const DEFAULT: u32 = STRIPE_COUNT
        | STRIPE_SIZE
        | STRIPE_OFFSET
        | POOL
        | OBJID
        | GENERATION
        | PATTERN
        | HASH_TYPE
        | COMP_COUNT
        | COMP_FLAGS
        | COMP_START
        | COMP_END
        | COMP_ID
        | MIRROR_COUNT
        | MIRROR_ID
        | EXT_SIZE
        | INHERIT
        | INHERIT_RR
        | EC_COUNT;
    pub const COMP_OPTS: u32 = COMP_COUNT | COMP_ID | COMP_START | COMP_END | COMP_FLAGS;
}
use verbose as v;

/// `LOV_USER_MAGIC_SPECIFIC`: a default layout with an explicit OST list.
pub const LOV_MAGIC_SPECIFIC: u32 = 0x0BD5_0BD0;

/// A numeric filter with `lfs find`'s sign convention: `+N` more, `-N` less.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NumFilter {
    pub value: u64,
    /// -1: greater than (`+N`); 1: less than (`-N`); 0: equal (within `units`).
    pub sign: i32,
    pub units: u64,
    pub exclude: bool,
}

/// `find_value_cmp`: 1 when `file` passes the filter, -1 when it does not.
pub(crate) fn find_value_cmp(file: u64, limit: u64, sign: i32, negopt: bool, margin: u64) -> i32 {
    let ret = if sign > 0 {
        if file.saturating_add(margin) <= limit {
            1
        } else {
            -1
        }
    } else if sign == 0 {
        if file <= limit && file.saturating_add(margin) > limit {
            1
        } else {
            -1
        }
    } else if file > limit {
        1
    } else {
        -1
    };
    if negopt { -ret } else { ret }
}

/// The parsed options of `lfs getstripe`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GetstripeOptions {
    /// `VERBOSE_*` bits.
    pub(crate) verbose: u32,
    /// How deep to descend: 0 the path only, 1 a directory's entries, -1 everything.
    pub(crate) max_depth: i32,
    pub yaml: bool,
    pub raw: bool,
    pub hex_idx: bool,
    pub no_follow: bool,
    /// `-D`: show a directory's default directory striping (LMV).
    pub default_lmv: bool,
    /// `-O OST`: only layouts with an object on this OST (a UUID, target name or index).
    pub obd: Option<String>,
    pub comp_id: Option<u32>,
    /// `--component-flags=F`: (flags, negated flags).
    pub comp_flags: Option<(u32, u32)>,
    pub comp_start: Option<NumFilter>,
    pub comp_end: Option<NumFilter>,
    pub mirror_index: Option<NumFilter>,
    pub mirror_id: Option<NumFilter>,
}

impl Default for GetstripeOptions {
    fn default() -> Self {
        GetstripeOptions {
            verbose: v::DEFAULT,
            max_depth: 1,
            yaml: false,
            raw: false,
            hex_idx: false,
            no_follow: false,
            default_lmv: false,
            obd: None,
            comp_id: None,
            comp_flags: None,
            comp_start: None,
            comp_end: None,
            mirror_index: None,
            mirror_id: None,
        }
    }
}

impl GetstripeOptions {
    /// Whether `-v` was given.
    pub fn is_verbose(&self) -> bool {
        self.verbose & v::DETAIL != 0
    }

    /// Whether `-m` asks for the MDT index instead of the layout.
    pub fn wants_mdt_index(&self) -> bool {
        self.verbose & v::MDTINDEX != 0
    }

    /// 0: only the named paths; 1: also a directory's entries; -1: recursively.
    pub fn max_depth(&self) -> i32 {
        self.max_depth
    }

    /// The OST index `-O` names: `testfs-OST0002_UUID`, `OST0002` or `2`.
    pub fn obd_index(&self) -> Option<u32> {
        let o = self.obd.as_deref()?;
        resolve_target_index(o)
    }

    fn any_comp_filter(&self) -> bool {
        self.comp_id.is_some()
            || self.comp_flags.is_some()
            || self.comp_start.is_some()
            || self.comp_end.is_some()
    }
}

/// `testfs-OST0002_UUID`, `OST0002`, `2` or `0x2` into 2.
pub(crate) fn resolve_target_index(s: &str) -> Option<u32> {
    if let Some(t) = TargetName::parse(s) {
        return Some(t.index);
    }
    parse_c_long(s).and_then(|v| u32::try_from(v).ok())
}

/// A parsed `lfs getstripe` command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GetstripeRequest {
    pub options: GetstripeOptions,
    pub paths: Vec<String>,
}

const OPT_COMP_COUNT: u32 = 256;
const OPT_COMP_FLAGS: u32 = 257;
const OPT_COMP_START: u32 = 258;
const OPT_HEX_IDX: u32 = 259;
const OPT_MIRROR_INDEX: u32 = 260;
const OPT_MIRROR_ID: u32 = 261;
const OPT_NO_FOLLOW: u32 = 262;

const fn c(ch: char) -> u32 {
    ch as u32
}

const LONG: &[LongOpt] = &[
    lo("comp-count", HasArg::No, OPT_COMP_COUNT),
    lo("component-count", HasArg::No, OPT_COMP_COUNT),
    lo("comp-flags", HasArg::Optional, OPT_COMP_FLAGS),
    lo("component-flags", HasArg::Optional, OPT_COMP_FLAGS),
    lo("comp-start", HasArg::Optional, OPT_COMP_START),
    lo("component-start", HasArg::Optional, OPT_COMP_START),
    lo("stripe-count", HasArg::No, c('c')),
    lo("stripe_count", HasArg::No, c('c')),
    lo("directory", HasArg::No, c('d')),
    lo("default", HasArg::No, c('D')),
    lo("comp-end", HasArg::Optional, c('E')),
    lo("component-end", HasArg::Optional, c('E')),
    lo("fid", HasArg::No, c('F')),
    lo("generation", HasArg::No, c('g')),
    lo("help", HasArg::No, c('h')),
    lo("hex-idx", HasArg::No, OPT_HEX_IDX),
    lo("stripe-index", HasArg::No, c('i')),
    lo("stripe_index", HasArg::No, c('i')),
    lo("comp-id", HasArg::Optional, c('I')),
    lo("component-id", HasArg::Optional, c('I')),
    lo("layout", HasArg::No, c('L')),
    lo("mdt", HasArg::No, c('m')),
    lo("mdt-index", HasArg::No, c('m')),
    lo("mdt_index", HasArg::No, c('m')),
    lo("mirror-count", HasArg::No, c('N')),
    lo("mirror-index", HasArg::Required, OPT_MIRROR_INDEX),
    lo("mirror-id", HasArg::Required, OPT_MIRROR_ID),
    lo("no-follow", HasArg::No, OPT_NO_FOLLOW),
    lo("obd", HasArg::Required, c('O')),
    lo("ost", HasArg::Required, c('O')),
    lo("pool", HasArg::No, c('p')),
    lo("quiet", HasArg::No, c('q')),
    lo("recursive", HasArg::No, c('r')),
    lo("raw", HasArg::No, c('R')),
    lo("stripe-size", HasArg::No, c('S')),
    lo("stripe_size", HasArg::No, c('S')),
    lo("verbose", HasArg::No, c('v')),
    lo("yaml", HasArg::No, c('y')),
    lo("extension-size", HasArg::No, c('z')),
    lo("ext-size", HasArg::No, c('z')),
];

/// `+N`/`-N` as `lfs getstripe --component-start` reads them.
fn signed_size(cmd: &'static str, arg: &str, what: &str, eof_ok: bool) -> Result<NumFilter> {
    let (sign, body) = match arg.as_bytes().first() {
        Some(b'+') => (-1, &arg[1..]),
        Some(b'-') => (1, &arg[1..]),
        _ => (0, arg),
    };
    if eof_ok && (body.starts_with("-1") || body.starts_with("EOF") || body.starts_with("eof")) {
        return Ok(NumFilter {
            value: EOF,
            sign,
            units: 1,
            exclude: false,
        });
    }
    let p = parse_size(body, 1, false)
        .map_err(|_| Error::usage(cmd, format!("bad {what} '{body}'")))?;
    let mut value = p.bytes;
    // The component-end filter assumes KiB for small bare numbers, as -E does.
    if eof_ok && value < 4096 {
        value *= 1024;
    }
    Ok(NumFilter {
        value,
        sign,
        units: p.units,
        exclude: false,
    })
}

fn mirror_filter(cmd: &'static str, arg: &str, what: &str, negated: bool) -> Result<NumFilter> {
    let (sign, body) = match arg.as_bytes().first() {
        Some(b'+') => (-1, &arg[1..]),
        Some(b'-') => (1, &arg[1..]),
        _ => (0, arg),
    };
    let val = parse_c_ulong(body)
        .filter(|&v| v <= u64::from(u16::MAX) && !(v == 0 && sign == 0 && !negated))
        .ok_or_else(|| Error::usage(cmd, format!("invalid {what} '{body}'")))?;
    Ok(NumFilter {
        value: val,
        sign,
        units: 1,
        exclude: negated,
    })
}

/// Parses the arguments of `lfs getstripe`.
pub fn parse_getstripe<S: AsRef<str>>(args: &[S]) -> Result<GetstripeRequest> {
    let spec = OptSpec {
        short: "cdDE::FghiI::LmMNO:pqrRSvyz",
        long: LONG,
        in_order: true,
        long_only: false,
    };
    let mut o = GetstripeOptions {
        verbose: 0,
        ..GetstripeOptions::default()
    };
    let (mut quiet, mut recursive) = (false, false);
    let mut paths = Vec::new();
    let (mut path_done, mut neg_opt) = (false, 0u8);
    for item in getopt(CMD, &spec, &owned(args))? {
        neg_opt = neg_opt.saturating_sub(1);
        let (val, arg, text) = match item {
            Parsed::Operand(p) if p == "!" => {
                if !paths.is_empty() {
                    path_done = true;
                }
                neg_opt = 2;
                continue;
            }
            Parsed::Operand(p) => {
                if path_done {
                    return Err(Error::usage(
                        CMD,
                        "filename|dirname must either precede options or follow options",
                    ));
                }
                paths.push(p);
                continue;
            }
            Parsed::Opt { val, arg, text } => (val, arg, text),
        };
        if !paths.is_empty() {
            path_done = true;
        }
        let detail = o.verbose & v::DETAIL != 0;
        // A single-field option shows only that field and does not list entries,
        // unless -v already asked for everything.
        let mut field = |bit: u32| {
            if !detail {
                o.verbose |= bit;
                o.max_depth = 0;
            }
        };
        match (val, char::from_u32(val).unwrap_or('\0')) {
            (_, 'c') => field(v::STRIPE_COUNT),
            (_, 'F') => field(v::DFID),
            (_, 'g') => field(v::GENERATION),
            (_, 'i') => field(v::STRIPE_OFFSET),
            (_, 'L') => field(v::PATTERN),
            (_, 'N') => field(v::MIRROR_COUNT),
            (_, 'p') => field(v::POOL),
            (_, 'S') => field(v::STRIPE_SIZE),
            (_, 'z') => field(v::EXT_SIZE),
            (OPT_COMP_COUNT, _) => {
                o.verbose |= v::COMP_COUNT;
                o.max_depth = 0;
            }
            (OPT_COMP_FLAGS, _) => match arg {
                Some(a) => {
                    let f = parse_component_flags(&a)
                        .map_err(|_| Error::usage(CMD, format!("bad component flags '{a}'.")))?;
                    o.comp_flags = Some(f);
                }
                None => {
                    o.verbose |= v::COMP_FLAGS;
                    o.max_depth = 0;
                }
            },
            (OPT_COMP_START, _) => match arg {
                Some(a) => o.comp_start = Some(signed_size(CMD, &a, "component start", false)?),
                None => {
                    o.verbose |= v::COMP_START;
                    o.max_depth = 0;
                }
            },
            (_, 'E') => match arg {
                Some(a) => o.comp_end = Some(signed_size(CMD, &a, "component end", true)?),
                None => {
                    o.verbose |= v::COMP_END;
                    o.max_depth = 0;
                }
            },
            (_, 'I') => match arg {
                Some(a) => {
                    let id = parse_c_ulong(&a)
                        .filter(|&i| i != 0 && i <= MAX_COMPONENT_ID && !a.starts_with('-'))
                        .ok_or_else(|| Error::usage(CMD, format!("bad component id '{a}'")))?;
                    o.comp_id = Some(id as u32);
                }
                None => {
                    o.max_depth = 0;
                    o.verbose |= v::COMP_ID;
                }
            },
            (OPT_MIRROR_INDEX, _) => {
                if o.mirror_id.is_some() {
                    return Err(Error::usage(
                        CMD,
                        "can't specify both mirror index and mirror ID",
                    ));
                }
                let a = arg.unwrap_or_default();
                o.mirror_index = Some(mirror_filter(CMD, &a, "mirror index", neg_opt > 0)?);
            }
            (OPT_MIRROR_ID, _) => {
                if o.mirror_index.is_some() {
                    return Err(Error::usage(
                        CMD,
                        "can't specify both mirror index and mirror ID",
                    ));
                }
                let a = arg.unwrap_or_default();
                o.mirror_id = Some(mirror_filter(CMD, &a, "mirror ID", neg_opt > 0)?);
            }
            (OPT_NO_FOLLOW, _) => o.no_follow = true,
            (OPT_HEX_IDX, _) => o.hex_idx = true,
            (_, 'd') => o.max_depth = 0,
            (_, 'D') => o.default_lmv = true,
            (_, 'm') | (_, 'M') => {
                if !detail {
                    o.max_depth = 0;
                }
                o.verbose |= v::MDTINDEX;
            }
            (_, 'O') => {
                if o.obd.is_some() {
                    return Err(Error::usage(CMD, "only one obduuid allowed"));
                }
                o.obd = arg;
            }
            (_, 'q') => quiet = true,
            (_, 'r') => recursive = true,
            (_, 'R') => o.raw = true,
            (_, 'v') => o.verbose = v::DEFAULT | v::DETAIL,
            (_, 'y') => o.yaml = true,
            (_, 'h') => return Err(Error::usage(CMD, "help requested")),
            _ => return Err(Error::usage(CMD, format!("unrecognized option '{text}'"))),
        }
    }
    if paths.is_empty() {
        return Err(Error::usage(CMD, "no filename|pathname"));
    }
    if recursive {
        o.max_depth = -1;
    } else if o.verbose & v::DETAIL != 0 {
        o.max_depth = 1;
    }
    if o.verbose == 0 {
        o.verbose = v::DEFAULT;
    }
    if quiet {
        o.verbose = v::OBJID;
    }
    Ok(GetstripeRequest { options: o, paths })
}

/// The file system's default striping (`lov.*.stripecount`, `lov.*.stripesize`), shown
/// for directory defaults that leave them unset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FsDefaults {
    pub stripe_count: i32,
    pub stripe_size: u32,
}

impl Default for FsDefaults {
    fn default() -> Self {
        FsDefaults {
            stripe_count: 1,
            stripe_size: DEFAULT_STRIPE_SIZE,
        }
    }
}

/// A path `lfs getstripe` is asked about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StripeEntry {
    /// As it is to be printed (`/mnt/lustre/dir/file`).
    pub path: String,
    /// The inode's FID (`lmm_fid`, `lmm_seq`, `lmm_object_id`).
    pub fid: Fid,
    /// The MDT holding the inode (`-m`, and `lmm_mdt_index` of a DoM component).
    pub mdt_index: u32,
    pub kind: StripeEntryKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StripeEntryKind {
    /// A regular file (or other non-directory); `None`: it has no layout.
    File { layout: Option<Layout> },
    /// A directory: its default file layout, its default directory striping (for `-D`),
    /// and its entries in readdir order (listed unless `-d`).
    Dir {
        default_layout: Option<Layout>,
        default_lmv: Option<LmvTemplate>,
        entries: Vec<StripeEntry>,
    },
}

impl StripeEntry {
    pub fn file(path: impl Into<String>, fid: Fid, mdt_index: u32, layout: Option<Layout>) -> Self {
        StripeEntry {
            path: path.into(),
            fid,
            mdt_index,
            kind: StripeEntryKind::File { layout },
        }
    }

    pub fn dir(
        path: impl Into<String>,
        fid: Fid,
        mdt_index: u32,
        default_layout: Option<Layout>,
    ) -> Self {
        StripeEntry {
            path: path.into(),
            fid,
            mdt_index,
            kind: StripeEntryKind::Dir {
                default_layout,
                default_lmv: None,
                entries: Vec::new(),
            },
        }
    }
}

/// `enum lov_dump_flags`.
#[derive(Clone, Copy, Default)]
struct Ldf {
    is_dir: bool,
    raw: bool,
    indent: bool,
    skip_objs: bool,
    yaml: bool,
    extension: bool,
    hex: bool,
}

/// A `lov_user_md` as the printer sees it.
struct Lum {
    magic: u32,
    pattern: u32,
    /// The file's FID, stored as the layout's `lmm_oi`.
    oi: Fid,
    /// `lmm_oi` holds `FID_SEQ_LOV_DEFAULT`: a layout made up from defaults.
    oi_default: bool,
    stripe_size: u32,
    stripe_count: i32,
    stripe_offset: i32,
    layout_gen: u32,
    pool: String,
    objects: Vec<StripeObject>,
}

/// `lov_user_md_size`: header plus one 24-byte `lov_user_ost_data` per object.
fn lum_size(magic: u32, objects: usize) -> u32 {
    let header: u32 = if magic == LOV_MAGIC_V1 { 32 } else { 48 };
    // u32 arithmetic, wrapping like the C structure sizes it mirrors.
    header.wrapping_add(24u32.wrapping_mul(objects as u32))
}

impl Lum {
    fn from_component(c: &Component, fid: Fid, mdt_index: u32, is_dir: bool) -> Lum {
        let is_dom = c.pattern == Pattern::Mdt;
        let magic = if is_dir && !c.ost_list.is_empty() {
            LOV_MAGIC_SPECIFIC
        } else if !c.pool.is_empty() {
            LOV_MAGIC_V3
        } else {
            LOV_MAGIC_V1
        };
        let objects = if is_dir {
            // A default layout keeps its -o list as objects with no FID.
            c.ost_list
                .iter()
                .map(|&ost_idx| StripeObject {
                    ost_idx,
                    fid: Fid::ZERO,
                })
                .collect()
        } else if c.is_init() || !c.objects.is_empty() {
            c.objects.clone()
        } else {
            Vec::new()
        };
        let stripe_count = if is_dom {
            0
        } else if !is_dir && !objects.is_empty() {
            objects.len() as i32
        } else {
            c.stripe_count
        };
        Lum {
            magic,
            pattern: c.pattern_bits(),
            oi: fid,
            oi_default: false,
            stripe_size: c.stripe_size,
            stripe_count,
            // The MDT fills in its own index for a file's DoM component.
            stripe_offset: if is_dom && !is_dir {
                mdt_index as i32
            } else {
                c.stripe_offset
            },
            layout_gen: 0,
            pool: c.pool.clone(),
            objects,
        }
    }

    /// What `cb_getstripe` fakes for a directory without a default layout.
    fn fake_default(raw: bool) -> Lum {
        Lum {
            magic: LOV_MAGIC_V1,
            pattern: 0,
            oi: Fid::ZERO,
            oi_default: !raw,
            stripe_size: 0,
            stripe_count: 0,
            stripe_offset: -1,
            layout_gen: 0,
            pool: String::new(),
            objects: Vec::new(),
        }
    }

    fn size(&self) -> u32 {
        lum_size(self.magic, self.objects.len())
    }
}

/// `llapi_lov_pattern_string`.
fn pattern_string(pattern: u32) -> String {
    const NAMES: &[(u32, &str)] = &[
        (0x2 | 0x100 | 0x400, "bad"),
        (0x1, "raid0"),
        (0x2, "raid1"),
        (0x4, "parity"),
        (0x100, "mdt"),
        (0x200, "overstriped"),
        (0x400, "foreign"),
        (0x800, "compress"),
        (0x4000_0000, "hole"),
        (0x8000_0000, "released"),
    ];
    let mut rest = pattern;
    let mut parts: Vec<String> = Vec::new();
    for (bits, name) in NAMES {
        if rest == 0 {
            break;
        }
        if rest & bits == *bits {
            parts.push((*name).to_string());
            rest &= !bits;
        }
    }
    if rest != 0 {
        // liblustreapi writes this over the start of its buffer, dropping the names.
        let comma = if parts.is_empty() { "" } else { "," };
        return format!("{comma}unknown_{rest:x}");
    }
    parts.join(",")
}

/// C's `%#Nx`: `0` (not `0x0`) for zero, right-aligned in `width`.
pub(crate) fn c_alt_hex(v: u64, width: usize) -> String {
    let s = if v == 0 {
        "0".to_string()
    } else {
        format!("{v:#x}")
    };
    format!("{s:>width$}")
}

/// `fid_seq_is_rsvd(seq) || fid_seq_is_mdt0(seq)`: groups printed in decimal.
fn group_is_decimal(seq: u64) -> bool {
    seq <= 11
}

/// `ostid_id`/`ostid_seq` of an object, from its FID: IDIF objects show their legacy
/// object id and group 0.
fn object_id_group(fid: Fid) -> (u64, u64) {
    if (0x1_0000_0000..=0x1_ffff_ffff).contains(&fid.seq) {
        let id = (u64::from(fid.ver) << 48) | ((fid.seq & 0xffff) << 32) | u64::from(fid.oid);
        (id, 0)
    } else {
        (u64::from(fid.oid), fid.seq)
    }
}

fn idx_fmt(hex: bool, v: i64) -> String {
    if hex {
        c_alt_hex(v as u64, 0)
    } else {
        v.to_string()
    }
}

struct Printer<'a> {
    o: &'a GetstripeOptions,
    fs: &'a FsDefaults,
    out: String,
}

impl Printer<'_> {
    fn p(&mut self, s: &str) {
        self.out.push_str(s);
    }

    /// `lov_dump_user_lmm_header`.
    fn lmm_header(
        &mut self,
        lum: &Lum,
        path: &str,
        dir_fid: Fid,
        verbose: u32,
        depth: i32,
        f: Ldf,
    ) {
        let prefix = if f.is_dir { "" } else { "lmm_" };
        let space = if f.indent { "      " } else { "" };
        let mut sep = "";
        let dir_sep = |yaml: bool| if !yaml && f.is_dir { " " } else { "\n" };
        if f.is_dir && lum.oi_default && !f.indent && verbose & v::DETAIL != 0 {
            self.p("(Default) ");
        }
        if !f.yaml && !f.indent && depth != 0 && (verbose != v::OBJID || !f.is_dir) {
            self.p(&format!("{path}\n"));
        }
        if verbose & v::DETAIL != 0 && !f.is_dir {
            self.p(&format!(
                "{space}{prefix}magic:         0x{:08X}\n",
                lum.magic
            ));
            self.p(&format!(
                "{space}{prefix}seq:           {}\n",
                c_alt_hex(lum.oi.seq, 0)
            ));
            self.p(&format!(
                "{space}{prefix}object_id:     {}\n",
                c_alt_hex(u64::from(lum.oi.oid), 0)
            ));
        }
        if verbose & (v::DETAIL | v::DFID) != 0 {
            if verbose & !v::DFID != 0 {
                self.p(&format!("{space}lmm_fid:           "));
            }
            let fid = if f.is_dir {
                dir_fid
            } else {
                lum.oi.with_ver(0)
            };
            if f.yaml {
                self.p(&format!("{}\n", fid.bare()));
            } else {
                self.p(&format!("{fid}\n"));
            }
        }
        if verbose & v::STRIPE_COUNT != 0 {
            if verbose & !v::STRIPE_COUNT != 0 {
                self.p(&format!("{space}{prefix}stripe_count:  "));
            }
            let count = if f.is_dir
                && !f.raw
                && lum.stripe_count == 0
                && lum.pattern & LOV_PATTERN_MDT == 0
            {
                self.fs.stripe_count
            } else if f.extension {
                0
            } else {
                // Printed through an __s16, so 0xffff is -1.
                lum.stripe_count as i16 as i32
            };
            self.p(&count.to_string());
            sep = dir_sep(f.yaml);
        }
        if (verbose & v::STRIPE_SIZE != 0 && !f.extension)
            || (verbose & v::EXT_SIZE != 0 && f.extension)
        {
            self.p(sep);
            if f.extension && verbose & !v::EXT_SIZE != 0 {
                self.p(&format!("{space}{prefix}extension_size: "));
            }
            if !f.extension && verbose & !v::STRIPE_SIZE != 0 {
                self.p(&format!("{space}{prefix}stripe_size:   "));
            }
            let size = if f.is_dir && !f.raw && lum.stripe_size == 0 {
                u64::from(self.fs.stripe_size)
            } else if f.extension {
                // The extension size is kept in KiB.
                u64::from(lum.stripe_size) * 1024
            } else {
                u64::from(lum.stripe_size)
            };
            self.p(&size.to_string());
            sep = dir_sep(f.yaml);
        }
        if verbose & v::PATTERN != 0 {
            self.p(sep);
            if verbose & !v::PATTERN != 0 {
                self.p(&format!("{space}{prefix}pattern:       "));
            }
            self.p(&pattern_string(lum.pattern));
            sep = dir_sep(f.yaml);
        }
        if verbose & v::GENERATION != 0 && !f.is_dir {
            self.p(sep);
            if verbose & !v::GENERATION != 0 {
                self.p(&format!("{space}{prefix}layout_gen:    "));
            }
            let gen_ = if f.skip_objs { 0 } else { lum.layout_gen };
            self.p(&gen_.to_string());
            sep = "\n";
        }
        if verbose & v::STRIPE_OFFSET != 0 {
            self.p(sep);
            let is_dom = lum.pattern & LOV_PATTERN_MDT != 0;
            if verbose & !v::STRIPE_OFFSET != 0 {
                let label = if is_dom {
                    "mdt_index:     "
                } else {
                    "stripe_offset: "
                };
                self.p(&format!("{space}{prefix}{label}"));
            }
            let from_field = f.is_dir || f.skip_objs || is_dom || lum.objects.is_empty();
            let s = if from_field {
                // The field is a u16: 0xffff (-1) means "any".
                if lum.stripe_offset == -1 || lum.stripe_offset == 0xffff {
                    "-1".to_string()
                } else {
                    idx_fmt(f.hex, i64::from(lum.stripe_offset))
                }
            } else {
                idx_fmt(f.hex, i64::from(lum.objects[0].ost_idx))
            };
            self.p(&s);
            sep = dir_sep(f.yaml);
        }
        if verbose & v::POOL != 0 && !lum.pool.is_empty() && (lum.pool != "ignore" || f.raw) {
            self.p(sep);
            if verbose & !v::POOL != 0 {
                self.p(&format!("{space}{prefix}pool:          "));
            }
            let pool = lum.pool.clone();
            self.p(&pool);
            sep = dir_sep(f.yaml);
        }
        if !sep.is_empty() {
            self.p("\n");
        }
    }

    /// `lov_dump_user_lmm_v1v3`.
    #[allow(clippy::too_many_arguments)]
    fn lmm_v1v3(
        &mut self,
        lum: &Lum,
        path: &str,
        dir_fid: Fid,
        obd: Option<u32>,
        depth: i32,
        verbose: u32,
        f: Ldf,
    ) {
        if let Some(idx) = obd {
            let on_it = !f.skip_objs && !f.is_dir && lum.objects.iter().any(|o| o.ost_idx == idx);
            if !on_it {
                return;
            }
        }
        self.lmm_header(lum, path, dir_fid, verbose, depth, f);
        let released_or_dom = lum.pattern & 0x8000_0000 != 0 || lum.pattern & LOV_PATTERN_MDT != 0;
        if !f.skip_objs
            && verbose & v::OBJID != 0
            && ((!f.is_dir && !released_or_dom) || (f.is_dir && lum.magic == LOV_MAGIC_SPECIFIC))
        {
            if f.indent {
                self.p("      lmm_objects:\n");
            } else if f.yaml {
                self.p("lmm_objects:\n");
            } else {
                self.p("\tobdidx\t\t objid\t\t objid\t\t group\n");
            }
            for (i, o) in lum.objects.iter().enumerate() {
                if obd.is_some_and(|x| x != o.ost_idx) {
                    continue;
                }
                let idx = o.ost_idx;
                if f.yaml {
                    let idx_s = if f.hex {
                        c_alt_hex(u64::from(idx), 0)
                    } else {
                        idx.to_string()
                    };
                    self.p(&format!("      - l_ost_idx: {idx_s}\n"));
                    self.p(&format!("        l_fid:     {}\n", o.fid.bare()));
                } else if f.indent {
                    let idx_s = if f.hex {
                        c_alt_hex(u64::from(idx), 5)
                    } else {
                        format!("{idx:>3}")
                    };
                    self.p(&format!(
                        "      - {i:>3}: {{ l_ost_idx: {idx_s}, l_fid: {} }}\n",
                        o.fid
                    ));
                } else if f.is_dir {
                    self.p(&format!(
                        "\t{idx:>6}\t{:>14}\t{:>13}\t{:>14}\n",
                        "N/A", "N/A", "N/A"
                    ));
                } else {
                    let (oid, gr) = object_id_group(o.fid);
                    let idx_s = if f.hex {
                        c_alt_hex(u64::from(idx), 6)
                    } else {
                        format!("{idx:>6}")
                    };
                    let group = if group_is_decimal(gr) {
                        format!("{gr:>14}")
                    } else {
                        c_alt_hex(gr, 14)
                    };
                    let mark = if obd == Some(idx) { " *" } else { "" };
                    self.p(&format!(
                        "\t{idx_s}\t{oid:>14}\t{}\t{group}{mark}\n",
                        c_alt_hex(oid, 13)
                    ));
                }
            }
        }
        if !f.yaml {
            self.p("\n");
        }
    }
}

/// A composite layout (`lov_comp_md_v1`) as the printer sees it, or a plain one dressed
/// as a one-entry composite (`lov_forge_comp_v1`).
struct Comp {
    magic: u32,
    size: u32,
    layout_gen: u32,
    flags: u16,
    /// Stored as mirrors - 1.
    mirror_count: u16,
    entries: Vec<Entry>,
}

struct Entry {
    id: u32,
    flags: u32,
    start: u64,
    end: u64,
    offset: u32,
    size: u32,
    lum: Lum,
    /// `lcme_dstripe_count` and `lcme_cstripe_count` of a parity component.
    ec: Option<(u8, u8)>,
}

impl Comp {
    fn from_layout(l: &Layout, fid: Fid, mdt_index: u32, is_dir: bool) -> Comp {
        let n = l.components.len() as u32;
        let mut offset = 32u32.wrapping_add(48u32.wrapping_mul(n));
        let mut entries = Vec::new();
        for c in &l.components {
            let lum = Lum::from_component(c, fid, mdt_index, is_dir);
            let size = lum.size();
            entries.push(Entry {
                ec: c.ec_counts(),
                id: c.id,
                flags: c.flags,
                start: c.start,
                end: c.end,
                offset,
                size,
                lum,
            });
            offset = offset.wrapping_add(size);
        }
        let mut mirrors: Vec<u32> = l.components.iter().map(|c| mirror_id_of(c.id)).collect();
        mirrors.sort_unstable();
        mirrors.dedup();
        Comp {
            magic: LOV_MAGIC_COMP_V1,
            size: offset,
            layout_gen: if is_dir { 0 } else { l.layout_gen },
            flags: l.flags,
            mirror_count: mirrors.len().saturating_sub(1) as u16,
            entries,
        }
    }

    fn forged(lum: Lum, is_dir: bool) -> Comp {
        let off: u32 = 32 + 48;
        let size = if is_dir {
            lum_size(lum.magic, 0)
        } else {
            lum.size()
        };
        Comp {
            magic: lum.magic,
            size: off.wrapping_add(size),
            layout_gen: if is_dir { 0 } else { lum.layout_gen },
            flags: 0,
            mirror_count: 0,
            entries: vec![Entry {
                id: 0,
                flags: if is_dir { 0 } else { LCME_FL_INIT },
                start: 0,
                end: EOF,
                offset: off,
                size,
                lum,
                ec: None,
            }],
        }
    }
}

/// `llapi_layout_flags_string`: the FLR state.
fn layout_flags_string(flags: u16) -> &'static str {
    match flags & 0xf {
        1 => "ro",
        2 => "wp",
        3 => "sp",
        9 => "ro,pccro",
        10 => "wp,pccro",
        11 => "sp,pccro",
        _ => "0",
    }
}

impl Printer<'_> {
    fn comp_header(&mut self, comp: &Comp, path: &str, f: Ldf) {
        let verbose = self.o.verbose;
        let depth = self.o.max_depth;
        if depth != 0 && (verbose != v::OBJID || !f.is_dir) && !f.yaml {
            self.p(&format!("{path}\n"));
        }
        if verbose & v::DETAIL != 0 {
            self.p("composite_header:\n");
            self.p(&format!("  lcm_magic:         0x{:08X}\n", comp.magic));
            self.p(&format!("  lcm_size:          {}\n", comp.size));
            let flags = if f.is_dir {
                if comp.mirror_count > 0 {
                    "mirrored"
                } else {
                    ""
                }
            } else {
                layout_flags_string(comp.flags)
            };
            self.p(&format!("  lcm_flags:         {flags}\n"));
        }
        let ind = if f.yaml { "" } else { "  " };
        let is_comp = comp.magic == LOV_MAGIC_COMP_V1;
        if verbose & v::GENERATION != 0 {
            if verbose & !v::GENERATION != 0 {
                self.p(&format!("{ind}lcm_layout_gen:    "));
            }
            self.p(&format!("{}\n", comp.layout_gen));
        }
        if verbose & v::MIRROR_COUNT != 0 {
            if verbose & !v::MIRROR_COUNT != 0 {
                self.p(&format!("{ind}lcm_mirror_count:  "));
            }
            let m = if is_comp {
                u32::from(comp.mirror_count) + 1
            } else {
                1
            };
            self.p(&format!("{m}\n"));
        }
        if verbose & v::COMP_COUNT != 0 {
            if verbose & !v::COMP_COUNT != 0 {
                self.p(&format!("{ind}lcm_entry_count:   "));
            }
            let n = if is_comp { comp.entries.len() } else { 0 };
            self.p(&format!("{n}\n"));
        }
        if verbose & v::DETAIL != 0 || f.yaml {
            self.p("components:\n");
        }
    }

    fn comp_entry(&mut self, e: &Entry, f: Ldf) {
        let verbose = self.o.verbose;
        let mut sep = "";
        if verbose & v::COMP_ID != 0 || f.yaml {
            if verbose & v::DETAIL != 0 || f.yaml {
                self.p("  - lcme_id:             ");
            } else if verbose & !v::COMP_ID != 0 {
                self.p("    lcme_id:             ");
            }
            if e.id != 0 {
                self.p(&e.id.to_string());
            } else {
                self.p("N/A");
            }
            sep = "\n";
        }
        if verbose & v::MIRROR_ID != 0 {
            self.p(sep);
            if verbose & !v::MIRROR_ID != 0 {
                self.p("    lcme_mirror_id:      ");
            }
            if e.id != 0 {
                self.p(&mirror_id_of(e.id).to_string());
            } else {
                self.p("N/A");
            }
            sep = "\n";
        }
        if verbose & v::COMP_FLAGS != 0 {
            self.p(sep);
            if verbose & !v::COMP_FLAGS != 0 {
                self.p("    lcme_flags:          ");
            }
            self.p(&flags_to_string(e.flags));
            sep = "\n";
            if e.flags & LCME_FL_NOSYNC != 0 {
                self.p(sep);
                if verbose & !v::COMP_FLAGS != 0 {
                    self.p("    lcme_timestamp:      ");
                }
                // No timestamp is recorded with the flag: the epoch, in UTC.
                if f.yaml {
                    self.p("0");
                } else {
                    self.p("'1970-01-01T00:00:00+0000'");
                }
            }
        }
        if verbose & v::COMP_START != 0 {
            self.p(sep);
            if verbose & !v::COMP_START != 0 {
                self.p("    lcme_extent.e_start: ");
            }
            self.p(&e.start.to_string());
            sep = "\n";
        }
        if verbose & v::COMP_END != 0 {
            self.p(sep);
            if verbose & !v::COMP_END != 0 {
                self.p("    lcme_extent.e_end:   ");
            }
            if e.end == EOF {
                self.p("EOF");
            } else {
                self.p(&e.end.to_string());
            }
            sep = "\n";
            if let Some((d, p)) = e.ec
                && verbose & !v::COMP_END != 0
            {
                self.p(sep);
                self.p(&format!("    lcme_dstripe_count:  {d}\n"));
                self.p(&format!("    lcme_cstripe_count:  {p}"));
            }
        }
        if f.yaml {
            self.p(sep);
            self.p("    sub_layout:\n");
        } else if verbose & v::DETAIL != 0 {
            self.p(sep);
            self.p(&format!("    lcme_offset:         {}\n", e.offset));
            self.p(&format!("    lcme_size:           {}\n", e.size));
            self.p("    sub_layout:\n");
        } else {
            self.p(sep);
        }
    }

    /// `print_last_init_comp`: single-field queries show the last instantiated component.
    fn last_init_only(&self) -> bool {
        let o = self.o;
        if o.verbose & v::DEFAULT == v::DEFAULT {
            return false;
        }
        !(o.any_comp_filter() || o.mirror_id.is_some() || o.mirror_index.is_some())
    }

    fn entry_selected(&self, e: &Entry, mirror_index: &mut u32, mirror_id: &mut u32) -> bool {
        let o = self.o;
        if let Some((fl, neg)) = o.comp_flags
            && (e.flags & fl != fl || e.flags & neg != 0)
        {
            return false;
        }
        if o.comp_id.is_some_and(|id| id != e.id) {
            return false;
        }
        if let Some(s) = o.comp_start
            && find_value_cmp(e.start, s.value, s.sign, false, s.units) == -1
        {
            return false;
        }
        if let Some(end) = o.comp_end
            && comp_end_cmp(e.end, &end) == -1
        {
            return false;
        }
        let m = mirror_id_of(e.id);
        if let Some(mi) = o.mirror_index {
            if *mirror_id != m {
                *mirror_index += 1;
                *mirror_id = m;
            }
            if find_value_cmp(u64::from(*mirror_index), mi.value, mi.sign, mi.exclude, 1) == -1 {
                return false;
            }
        } else if let Some(mid) = o.mirror_id {
            *mirror_id = m;
            if find_value_cmp(u64::from(m), mid.value, mid.sign, mid.exclude, 1) == -1 {
                return false;
            }
        }
        true
    }

    /// `lov_dump_comp_v1`.
    fn comp(&mut self, comp: &Comp, path: &str, dir_fid: Fid, mut f: Ldf) {
        let obd = self
            .o
            .obd
            .as_ref()
            .map(|_| self.o.obd_index().unwrap_or(u32::MAX));
        if let Some(idx) = obd {
            let any = !f.is_dir
                && comp.entries.iter().any(|e| {
                    e.flags & LCME_FL_INIT != 0 && e.lum.objects.iter().any(|o| o.ost_idx == idx)
                });
            if !any {
                return;
            }
        }
        self.comp_header(comp, path, f);
        f.indent = true;
        let verbose = self.o.verbose;
        let depth = self.o.max_depth;
        let last_only = self.last_init_only();
        let (mut mirror_index, mut mirror_id) = (0u32, 0u32);
        let mut i = 0;
        while i < comp.entries.len() {
            let e = &comp.entries[i];
            if !self.entry_selected(e, &mut mirror_index, &mut mirror_id) {
                i += 1;
                continue;
            }
            if last_only {
                if e.flags & LCME_FL_INIT != 0 {
                    i += 1;
                    continue;
                }
                if verbose & v::EXT_SIZE != 0 {
                    if e.flags & LCME_FL_EXTENSION != 0 {
                        // The extension space belongs to the component before it.
                        i += 1;
                    } else {
                        i += 1;
                        continue;
                    }
                }
                break;
            }
            if e.flags & LCME_FL_INIT != 0 {
                f.skip_objs =
                    obd.is_some_and(|idx| !e.lum.objects.iter().any(|o| o.ost_idx == idx));
            } else {
                f.skip_objs = true;
            }
            if obd.is_some() && f.skip_objs {
                i += 1;
                continue;
            }
            self.comp_entry(e, f);
            let ext = Ldf {
                extension: e.flags & LCME_FL_EXTENSION != 0,
                ..f
            };
            self.lmm_v1v3(&e.lum, path, dir_fid, obd, depth, verbose, ext);
            i += 1;
        }
        if last_only && !comp.entries.is_empty() {
            // Templates have no instantiated component: show the last one.
            let k = if i == 0 {
                comp.entries.len() - 1
            } else {
                (i - 1).min(comp.entries.len() - 1)
            };
            f.skip_objs = false;
            let e = &comp.entries[k];
            self.comp_entry(e, f);
            let ext = Ldf {
                extension: e.flags & LCME_FL_EXTENSION != 0,
                ..f
            };
            self.lmm_v1v3(&e.lum, path, dir_fid, obd, depth, verbose, ext);
        }
    }

    /// `has_any_comp_options`.
    fn any_comp_options(&self) -> bool {
        let o = self.o;
        if o.any_comp_filter() {
            return true;
        }
        if o.verbose & !v::DETAIL == v::DEFAULT {
            return false;
        }
        o.verbose & v::COMP_OPTS != 0
    }

    /// `llapi_lov_dump_user_lmm` for a layout.
    fn layout(&mut self, layout: Option<&Layout>, e: &StripeEntry, is_dir: bool) {
        let f = Ldf {
            is_dir,
            raw: self.o.raw,
            yaml: self.o.yaml,
            hex: self.o.hex_idx,
            ..Ldf::default()
        };
        let obd = self
            .o
            .obd
            .as_ref()
            .map(|_| self.o.obd_index().unwrap_or(u32::MAX));
        match layout {
            Some(l) if l.composite => {
                let comp = Comp::from_layout(l, e.fid, e.mdt_index, is_dir);
                self.comp(&comp, &e.path, e.fid, f);
            }
            _ => {
                let lum = match layout.and_then(|l| l.components.first()) {
                    Some(c) => {
                        let mut lum = Lum::from_component(c, e.fid, e.mdt_index, is_dir);
                        lum.layout_gen = layout.map_or(0, |l| l.layout_gen);
                        lum
                    }
                    None => Lum::fake_default(self.o.raw),
                };
                if self.any_comp_options() {
                    let comp = Comp::forged(lum, is_dir);
                    self.comp(&comp, &e.path, e.fid, f);
                } else {
                    self.lmm_v1v3(
                        &lum,
                        &e.path,
                        e.fid,
                        obd,
                        self.o.max_depth,
                        self.o.verbose,
                        f,
                    );
                }
            }
        }
    }
}

/// `find_comp_end_cmp`: EOF compares as the largest end.
pub(crate) fn comp_end_cmp(end: u64, f: &NumFilter) -> i32 {
    if f.value == EOF {
        let m = match f.sign {
            0 if end == EOF => 1,
            s if s > 0 => {
                if end == EOF {
                    -1
                } else {
                    1
                }
            }
            _ => -1,
        };
        return if f.exclude { -m } else { m };
    }
    let margin = if end == EOF { 0 } else { f.units };
    find_value_cmp(end, f.value, f.sign, f.exclude, margin)
}

/// What `lfs getstripe` prints for `entry` (and, unless limited by `-d`, single-field
/// options or the lack of `-r`, the entries below it).
pub fn getstripe(opts: &GetstripeOptions, entry: &StripeEntry, fs: &FsDefaults) -> String {
    let mut pr = Printer {
        o: opts,
        fs,
        out: String::new(),
    };
    visit(&mut pr, entry, 0);
    pr.out
}

fn visit(pr: &mut Printer, e: &StripeEntry, depth: i32) {
    let o = pr.o;
    if o.verbose & v::MDTINDEX != 0 {
        // cb_get_mdt_index
        let idx = idx_fmt(o.hex_idx, i64::from(e.mdt_index));
        if o.verbose & v::DETAIL == 0 {
            pr.p(&format!("{idx}\n"));
        } else {
            let _ = write!(pr.out, "{}\nmdt_index:\t{idx}\n", e.path);
        }
    } else {
        match &e.kind {
            StripeEntryKind::File { layout } => {
                if o.default_lmv {
                    // A file has no directory striping to show.
                } else if let Some(l) = layout {
                    pr.layout(Some(l), e, false);
                } else if o.obd.is_none() {
                    let _ = writeln!(pr.out, "{} has no stripe info", e.path);
                }
            }
            StripeEntryKind::Dir {
                default_layout,
                default_lmv,
                ..
            } => {
                if o.default_lmv {
                    if default_lmv.is_none() && o.raw {
                        // Nothing to fake without defaults.
                    } else {
                        let view = LmvView::from_default(default_lmv.as_ref());
                        let obd = o.obd.as_ref().map(|_| o.obd_index().unwrap_or(u32::MAX));
                        dump_lmv(
                            &mut pr.out,
                            &view,
                            &e.path,
                            e.fid,
                            obd,
                            o.max_depth,
                            o.verbose,
                            o.yaml,
                            o.hex_idx,
                        );
                    }
                } else {
                    pr.layout(default_layout.as_ref(), e, true);
                }
            }
        }
    }
    if depth == o.max_depth {
        return;
    }
    if let StripeEntryKind::Dir { entries, .. } = &e.kind {
        for child in entries {
            visit(pr, child, depth + 1);
        }
    }
}
