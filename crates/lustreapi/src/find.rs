//! `lfs find`: its options (parsed as `getopt_long_only` does, so `-type f` and
//! `--type f`, `-name` and `--name` all work, with `!` negating the next option) and the
//! predicate they build, evaluated over one directory entry at a time.
//!
//! Comparisons follow liblustreapi's `find_value_cmp`: `+N` means more than N, `-N` less
//! than N, and a bare N matches within one unit (sizes round up as in find(1), times
//! count whole days unless another unit is given).

use crate::cnum::{c_prefix, parse_c_long, parse_c_ulong};
use crate::error::{Error, Result};
use crate::fnmatch::Wildcard;
use crate::getopt::{HasArg, LongOpt, OptSpec, Parsed, getopt, lo, owned};
use crate::getstripe::{NumFilter, comp_end_cmp, find_value_cmp, resolve_target_index};
use crate::setstripe::{parse_component_flags, parse_hash_type};
use crate::size::parse_size;
use nacre_core::Errno;
use nacre_core::attr::FileKind;
use nacre_core::layout::{EOF, LCME_FL_EXTENSION, LCME_FL_INIT, Layout, MAX_STRIPE_COUNT};
use nacre_core::lmv::{LMV_HASH_FLAG_MIGRATION, LMV_HASH_TYPE_MASK, Lmv};

const CMD: &str = "lfs find";
const LMV_HASH_FLAG_LOST_LMV: u32 = 0x1000_0000;
const LMV_HASH_FLAG_BAD_TYPE: u32 = 0x2000_0000;
/// `FP_DEFAULT_TIME_MARGIN`: a bare `-mtime N` counts whole days.
const DEFAULT_TIME_MARGIN: i64 = 24 * 60 * 60;

/// One entry as `lfs find` sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FindEntry {
    /// The entry's name (its last path component).
    pub name: String,
    pub kind: FileKind,
    pub size: u64,
    /// Seconds since the epoch.
    pub mtime: i64,
    pub atime: i64,
    pub ctime: i64,
    pub uid: u32,
    pub gid: u32,
    /// A file's layout, or a directory's default layout; `None` when it has none.
    pub layout: Option<Layout>,
    /// The MDT of the inode.
    pub mdt_index: u32,
    /// A directory's striping; `None` for plain directories and non-directories.
    pub lmv: Option<Lmv>,
    /// How far below the starting path (which is depth 0).
    pub depth: u32,
}

impl FindEntry {
    /// A regular file with no layout and zero times.
    pub fn new(name: impl Into<String>, kind: FileKind) -> FindEntry {
        FindEntry {
            name: name.into(),
            kind,
            size: 0,
            mtime: 0,
            atime: 0,
            ctime: 0,
            uid: 0,
            gid: 0,
            layout: None,
            mdt_index: 0,
            lmv: None,
            depth: 0,
        }
    }
}

/// A time limit `-mtime [+-]N[smhdwy]` sets: `now - offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TimeLimit {
    /// Seconds before now.
    offset: i64,
    /// 1: older (`+N`), -1: newer (`-N`), 0: within the margin.
    sign: i32,
    exclude: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TimeKind {
    A,
    M,
    C,
}

/// The predicate of a `lfs find` command line; all checks must pass.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FindPredicate {
    name: Option<(Wildcard, bool)>,
    kind: Option<(FileKind, bool)>,
    size: Option<NumFilter>,
    stripe_count: Option<NumFilter>,
    stripe_size: Option<NumFilter>,
    comp_count: Option<NumFilter>,
    comp_flags: Option<(u32, u32)>,
    comp_start: Option<NumFilter>,
    comp_end: Option<NumFilter>,
    /// Pattern bits of `-L` and whether negated.
    layout: Option<(u32, bool)>,
    pool: Option<(String, bool)>,
    osts: Option<(Vec<u32>, bool)>,
    mdts: Option<(Vec<u32>, bool)>,
    mdt_count: Option<NumFilter>,
    /// Hash types as `1 << type`, included flags, excluded flags, negated.
    mdt_hash: Option<(u32, u32, u32, bool)>,
    uid: Option<(u32, bool)>,
    gid: Option<(u32, bool)>,
    atime: Option<TimeLimit>,
    mtime: Option<TimeLimit>,
    ctime: Option<TimeLimit>,
    time_margin: i64,
    min_depth: u32,
    max_depth: Option<u32>,
}

/// A parsed `lfs find` command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FindRequest {
    pub paths: Vec<String>,
    pub predicate: FindPredicate,
    /// `-print0`/`-0`: end names with NUL instead of newline.
    pub print0: bool,
}

impl FindRequest {
    /// How a matching path is printed.
    pub fn format(&self, path: &str) -> String {
        let end = if self.print0 { '\0' } else { '\n' };
        format!("{path}{end}")
    }
}

const OPT_COMP_COUNT: u32 = 256;
const OPT_COMP_FLAGS: u32 = 257;
const OPT_COMP_START: u32 = 258;
const OPT_POOL: u32 = 259;
const OPT_UNSUPPORTED: u32 = 260;
const OPT_IGNORED: u32 = 261;

const fn c(ch: char) -> u32 {
    ch as u32
}

const LONG: &[LongOpt] = &[
    lo("atime", HasArg::Required, c('A')),
    lo("attrs", HasArg::Required, OPT_UNSUPPORTED),
    lo("blocks", HasArg::Required, c('b')),
    lo("btime", HasArg::Required, c('B')),
    lo("Btime", HasArg::Required, c('B')),
    lo("crtime", HasArg::Required, c('B')),
    lo("comp-count", HasArg::Required, OPT_COMP_COUNT),
    lo("component-count", HasArg::Required, OPT_COMP_COUNT),
    lo("comp-flags", HasArg::Required, OPT_COMP_FLAGS),
    lo("component-flags", HasArg::Required, OPT_COMP_FLAGS),
    lo("comp-start", HasArg::Required, OPT_COMP_START),
    lo("component-start", HasArg::Required, OPT_COMP_START),
    lo("mirror-state", HasArg::Required, OPT_UNSUPPORTED),
    lo("newer", HasArg::Required, OPT_UNSUPPORTED),
    lo("stripe-count", HasArg::Required, c('c')),
    lo("stripe_count", HasArg::Required, c('c')),
    lo("ctime", HasArg::Required, c('C')),
    lo("mindepth", HasArg::Required, c('d')),
    lo("maxdepth", HasArg::Required, c('D')),
    lo("comp-end", HasArg::Required, c('E')),
    lo("component-end", HasArg::Required, c('E')),
    lo("foreign", HasArg::Optional, OPT_UNSUPPORTED),
    lo("gid", HasArg::Required, c('g')),
    lo("group", HasArg::Required, c('G')),
    lo("help", HasArg::No, c('h')),
    lo("mdt-hash", HasArg::Required, c('H')),
    lo("stripe-index", HasArg::Required, c('i')),
    lo("stripe_index", HasArg::Required, c('i')),
    lo("skip", HasArg::Required, OPT_UNSUPPORTED),
    lo("lazy", HasArg::No, c('l')),
    lo("layout", HasArg::Required, c('L')),
    lo("links", HasArg::Required, OPT_UNSUPPORTED),
    lo("ls", HasArg::No, OPT_UNSUPPORTED),
    lo("mdt", HasArg::Required, c('m')),
    lo("mdt-index", HasArg::Required, c('m')),
    lo("mdt_index", HasArg::Required, c('m')),
    lo("mtime", HasArg::Required, c('M')),
    lo("name", HasArg::Required, c('n')),
    lo("mirror-count", HasArg::Required, c('N')),
    lo("obd", HasArg::Required, c('O')),
    lo("ost", HasArg::Required, c('O')),
    lo("perm", HasArg::Required, OPT_UNSUPPORTED),
    lo("pool", HasArg::Required, OPT_POOL),
    lo("print0", HasArg::No, c('0')),
    lo("threads", HasArg::Required, OPT_IGNORED),
    lo("print", HasArg::No, c('P')),
    lo("printf", HasArg::Required, OPT_UNSUPPORTED),
    lo("projid", HasArg::Required, OPT_UNSUPPORTED),
    lo("size", HasArg::Required, c('s')),
    lo("stripe-size", HasArg::Required, c('S')),
    lo("stripe_size", HasArg::Required, c('S')),
    lo("type", HasArg::Required, c('t')),
    lo("mdt-count", HasArg::Required, c('T')),
    lo("uid", HasArg::Required, c('u')),
    lo("user", HasArg::Required, c('U')),
    lo("xattr", HasArg::Required, OPT_UNSUPPORTED),
    lo("extension-size", HasArg::Required, c('z')),
    lo("ext-size", HasArg::Required, c('z')),
];

/// `[+-]N` with a unit: '+' is "more than" (-1), '-' "less than" (1).
fn signed(arg: &str) -> (i32, &str) {
    match arg.as_bytes().first() {
        Some(b'+') => (-1, &arg[1..]),
        Some(b'-') => (1, &arg[1..]),
        _ => (0, arg),
    }
}

fn count_filter(arg: &str, max: u64, what: &str, exclude: bool) -> Result<NumFilter> {
    let (sign, body) = signed(arg);
    let value = parse_c_ulong(body)
        .filter(|&v| v <= max && !body.trim_start().starts_with('-'))
        .ok_or_else(|| Error::usage(CMD, format!("bad {what} '{body}'")))?;
    Ok(NumFilter {
        value,
        sign,
        units: 1,
        exclude,
    })
}

/// `llapi_lov_string_pattern`: `raid0,mdt` into pattern bits (names match by prefix).
fn parse_layout_names(arg: &str) -> Option<u32> {
    const NAMES: &[(u32, &str)] = &[
        (0x2 | 0x100 | 0x400, "bad"),
        (0x1, "raid0"),
        (0x2, "raid1"),
        (0x4, "parity"),
        (0x100, "mdt"),
        (0x200, "overstriped"),
        (0x200, "overstriping"),
        (0x400, "foreign"),
        (0x800, "compress"),
        (0x4000_0000, "hole"),
        (0x8000_0000, "released"),
        (0xffff_ffff, "default"),
    ];
    let mut bits = 0;
    for item in arg.split(',').filter(|s| !s.is_empty()) {
        bits |= NAMES.iter().find(|(_, n)| item.starts_with(n))?.0;
    }
    Some(bits)
}

/// `set_time`: the seconds `[+-]N[smhdwy]...` stands for, and the comparison margin.
fn parse_time(arg: &str, margin: &mut i64) -> Result<(i32, i64)> {
    let (sign, body) = match arg.as_bytes().first() {
        Some(b'+') => (1, &arg[1..]),
        Some(b'-') => (-1, &arg[1..]),
        _ => (0, arg),
    };
    let mut total: i64 = 0;
    let mut rest = body;
    loop {
        let (val, after) = match c_prefix(rest, 0) {
            Some((neg, v, after)) => {
                let v = i64::try_from(v).map_err(|_| bad_time(rest))?;
                (if neg { -v } else { v }, after)
            }
            None => (0, rest),
        };
        let unit_char = after.chars().next();
        let mut unit: i64 = 1;
        match unit_char {
            Some('y') | Some('w') => {
                if unit_char == Some('y') {
                    unit *= 52;
                }
                unit *= 7;
                // A year's margin is 8 days; a week's stays one day.
                if *margin == DEFAULT_TIME_MARGIN {
                    *margin *= 1 + unit / 52;
                }
                if unit_char == Some('y') {
                    unit += 1;
                }
                unit *= 24 * 60 * 60;
            }
            None | Some('d') => unit *= 24 * 60 * 60,
            Some('h') => unit *= 60 * 60,
            Some('m') => unit *= 60,
            Some('s') => {}
            Some(_) => return Err(bad_time(rest)),
        }
        if *margin == 0 || (unit_char.is_some() && unit < *margin) {
            *margin = unit;
        }
        total = val
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| Error::usage(CMD, format!("bad time '{arg}': too large")))?;
        match unit_char {
            Some(u) if after.len() > u.len_utf8() => rest = &after[u.len_utf8()..],
            _ => break,
        }
    }
    Ok((sign, total))
}

fn bad_time(s: &str) -> Error {
    Error::usage(CMD, format!("bad time string '{s}': Invalid argument"))
}

/// `-O`/`-m` lists: indexes, ranges (`0-3`) and target names.
fn parse_index_list(arg: &str, what: &str) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    let bad = || Error::usage(CMD, format!("invalid {what} '{arg}'"));
    for item in arg.split(',').filter(|s| !s.is_empty()) {
        let range = item.split_once('-').filter(|(a, b)| {
            !a.is_empty()
                && a.bytes().all(|c| c.is_ascii_digit())
                && !b.is_empty()
                && b.bytes().all(|c| c.is_ascii_digit())
        });
        if let Some((a, b)) = range {
            let (a, b): (u32, u32) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
            if b.saturating_sub(a) > MAX_STRIPE_COUNT * 32 {
                return Err(bad());
            }
            out.extend(a..=b);
        } else {
            out.push(resolve_target_index(item).ok_or_else(bad)?);
        }
    }
    Ok(out)
}

/// Parses the arguments of `lfs find`.
pub fn parse_find<S: AsRef<str>>(args: &[S]) -> Result<FindRequest> {
    let spec = OptSpec {
        short: "0A:b:B:c:C:d:D:E:g:G:hH:i:k:lL:m:M:n:N:O:Ppqrs:S:t:T:u:U:z:",
        long: LONG,
        in_order: true,
        long_only: true,
    };
    let mut p = FindPredicate {
        time_margin: DEFAULT_TIME_MARGIN,
        ..FindPredicate::default()
    };
    let mut paths = Vec::new();
    let (mut path_done, mut neg_opt, mut print0) = (false, 0u8, false);
    for item in getopt(CMD, &spec, &owned(args))? {
        neg_opt = neg_opt.saturating_sub(1);
        let (val, arg, text) = match item {
            Parsed::Operand(o) if o == "!" => {
                if !paths.is_empty() {
                    path_done = true;
                }
                neg_opt = 2;
                continue;
            }
            Parsed::Operand(o) => {
                if path_done {
                    return Err(Error::usage(
                        CMD,
                        "filename|dirname must either precede options or follow options",
                    ));
                }
                paths.push(o);
                continue;
            }
            Parsed::Opt { val, arg, text } => (val, arg.unwrap_or_default(), text),
        };
        if !paths.is_empty() {
            path_done = true;
        }
        let neg = neg_opt > 0;
        match (val, char::from_u32(val).unwrap_or('\0')) {
            (_, 'A') | (_, 'M') | (_, 'C') => {
                let kind = match char::from_u32(val) {
                    Some('A') => TimeKind::A,
                    Some('M') => TimeKind::M,
                    _ => TimeKind::C,
                };
                let (sign, offset) = parse_time(&arg, &mut p.time_margin)?;
                let slot = match kind {
                    TimeKind::A => &mut p.atime,
                    TimeKind::M => &mut p.mtime,
                    TimeKind::C => &mut p.ctime,
                };
                let mut lim = TimeLimit {
                    offset,
                    sign,
                    exclude: neg,
                };
                if let Some(prev) = slot.filter(|prev| prev.sign * sign == -1) {
                    // "-mtime +M -mtime -N" is a range: the newer limit, widened to
                    // reach the older one.
                    p.time_margin = (offset - prev.offset).abs();
                    lim.offset = offset.min(prev.offset);
                    lim.sign = 0;
                }
                *slot = Some(lim);
            }
            (_, 'B') | (_, 'b') | (_, 'N') | (_, 'z') | (_, 'k') | (OPT_UNSUPPORTED, _) => {
                return Err(Error::Invalid {
                    cmd: CMD,
                    msg: format!("'{text}' is not supported"),
                    errno: Errno::ENOTSUP,
                });
            }
            (OPT_IGNORED, _) | (_, 'l') | (_, 'P') | (_, 'p') | (_, 'q') | (_, 'r') => {}
            (OPT_COMP_COUNT, _) => {
                p.comp_count = Some(count_filter(
                    &arg,
                    u64::from(u32::MAX),
                    "component count",
                    neg,
                )?);
            }
            (OPT_COMP_FLAGS, _) => {
                let (f, n) = parse_component_flags(&arg)
                    .map_err(|_| Error::usage(CMD, format!("bad component flags '{arg}'")))?;
                p.comp_flags = Some(if neg { (n, f) } else { (f, n) });
            }
            (OPT_COMP_START, _) => {
                let (sign, body) = signed(&arg);
                let s = parse_size(body, 1, false)
                    .map_err(|_| Error::usage(CMD, format!("bad component start '{body}'")))?;
                p.comp_start = Some(NumFilter {
                    value: s.bytes,
                    sign,
                    units: s.units,
                    exclude: neg,
                });
            }
            (_, 'E') => {
                let (sign, body) = signed(&arg);
                let f = if body.starts_with("-1")
                    || body.starts_with("EOF")
                    || body.starts_with("eof")
                {
                    NumFilter {
                        value: EOF,
                        sign,
                        units: 1,
                        exclude: neg,
                    }
                } else {
                    let s = parse_size(body, 1, false)
                        .map_err(|_| Error::usage(CMD, format!("bad component end '{body}'")))?;
                    let value = if s.bytes < 4096 {
                        s.bytes * 1024
                    } else {
                        s.bytes
                    };
                    NumFilter {
                        value,
                        sign,
                        units: s.units,
                        exclude: neg,
                    }
                };
                p.comp_end = Some(f);
            }
            (_, 'c') => {
                p.stripe_count = Some(count_filter(
                    &arg,
                    u64::from(MAX_STRIPE_COUNT),
                    "stripe_count",
                    neg,
                )?);
            }
            (_, 'd') => {
                let n = parse_c_ulong(&arg)
                    .filter(|&n| n <= 2048)
                    .ok_or_else(|| Error::usage(CMD, format!("bad mindepth '{arg}'")))?;
                p.min_depth = n as u32;
            }
            (_, 'D') => {
                let n = parse_c_long(&arg)
                    .filter(|&n| (0..=i64::from(u32::MAX)).contains(&n))
                    .ok_or_else(|| Error::usage(CMD, format!("bad maxdepth '{arg}'")))?;
                p.max_depth = Some(n as u32);
            }
            (_, 'g') | (_, 'G') => {
                let id = parse_c_long(&arg)
                    .filter(|&n| (0..i64::from(u32::MAX)).contains(&n))
                    .ok_or_else(|| Error::usage(CMD, format!("invalid group/GID '{arg}'")))?;
                p.gid = Some((id as u32, neg));
            }
            (_, 'u') | (_, 'U') => {
                let id = parse_c_long(&arg)
                    .filter(|&n| (0..i64::from(u32::MAX)).contains(&n))
                    .ok_or_else(|| Error::usage(CMD, format!("invalid username/UID '{arg}'")))?;
                p.uid = Some((id as u32, neg));
            }
            (_, 'H') => {
                let (types, inflags, exflags) = parse_mdt_hash(&arg)?;
                p.mdt_hash = Some((types, inflags, exflags, neg));
            }
            (_, 'L') => {
                let bits = parse_layout_names(&arg)
                    .ok_or_else(|| Error::usage(CMD, format!("invalid layout '{arg}'")))?;
                p.layout = Some((bits, neg));
            }
            (_, 'i') | (_, 'O') => {
                let mut list = p.osts.take().map(|(l, _)| l).unwrap_or_default();
                list.extend(parse_index_list(&arg, "OST")?);
                p.osts = Some((list, neg));
            }
            (_, 'm') => {
                let mut list = p.mdts.take().map(|(l, _)| l).unwrap_or_default();
                list.extend(parse_index_list(&arg, "MDT")?);
                p.mdts = Some((list, neg));
            }
            (_, 'n') => p.name = Some((Wildcard::new(&arg), neg)),
            (OPT_POOL, _) => {
                if arg.len() > crate::setstripe::MAX_POOL_NAME {
                    return Err(Error::usage(
                        CMD,
                        format!("Pool name {arg} is too long (max 15)"),
                    ));
                }
                p.pool = Some((arg, neg));
            }
            (_, '0') => print0 = true,
            (_, 's') => {
                let (sign, body) = signed(&arg);
                // Without a unit, find(1) counts 512-byte blocks.
                let s = parse_size(body, 512, false)
                    .map_err(|_| Error::usage(CMD, format!("bad file size '{body}'")))?;
                p.size = Some(NumFilter {
                    value: s.bytes,
                    sign,
                    units: s.units,
                    exclude: neg,
                });
            }
            (_, 'S') => {
                let (sign, body) = signed(&arg);
                let s = parse_size(body, 1, false)
                    .map_err(|_| Error::usage(CMD, format!("bad stripe_size '{body}'")))?;
                let value = if s.bytes < 4096 {
                    s.bytes * 1024
                } else {
                    s.bytes
                };
                p.stripe_size = Some(NumFilter {
                    value,
                    sign,
                    units: s.units,
                    exclude: neg,
                });
            }
            (_, 't') => {
                let kind = match arg.chars().next() {
                    Some('b') => FileKind::BlockDevice,
                    Some('c') => FileKind::CharDevice,
                    Some('d') => FileKind::Directory,
                    Some('f') => FileKind::Regular,
                    Some('l') => FileKind::Symlink,
                    Some('p') => FileKind::Fifo,
                    Some('s') => FileKind::Socket,
                    _ => return Err(Error::usage(CMD, format!("bad type '{arg}'"))),
                };
                p.kind = Some((kind, neg));
            }
            (_, 'T') => {
                p.mdt_count = Some(count_filter(
                    &arg,
                    u64::from(u32::MAX) - 1,
                    "mdt_count",
                    neg,
                )?);
            }
            (_, 'h') => return Err(Error::usage(CMD, "help requested")),
            _ => return Err(Error::usage(CMD, format!("unrecognized option '{text}'"))),
        }
    }
    if paths.is_empty() {
        return Err(Error::usage(CMD, "no filename|pathname"));
    }
    if let Some(max) = p.max_depth
        && p.min_depth > max
    {
        return Err(Error::usage(
            CMD,
            format!("mindepth {} > maxdepth {max}", p.min_depth),
        ));
    }
    Ok(FindRequest {
        paths,
        predicate: p,
        print0,
    })
}

/// `mdthash_input`: hash type names and `migrating`/`bad_type`/`lost_lmv` flags (`^` to
/// exclude; as in `lfs`, a flag also matches by its first letter).
fn parse_mdt_hash(arg: &str) -> Result<(u32, u32, u32)> {
    const FLAGS: &[(&str, u32)] = &[
        ("migrating", LMV_HASH_FLAG_MIGRATION),
        ("bad_type", LMV_HASH_FLAG_BAD_TYPE),
        ("badtype", LMV_HASH_FLAG_BAD_TYPE),
        ("lost_lmv", LMV_HASH_FLAG_LOST_LMV),
        ("lostlmv", LMV_HASH_FLAG_LOST_LMV),
    ];
    let (mut types, mut inflags, mut exflags) = (0u32, 0u32, 0u32);
    for name in arg.split(',').filter(|s| !s.is_empty()) {
        let mut found = false;
        for (fname, bit) in FLAGS {
            let first = fname.as_bytes()[0];
            if name == *fname || name.as_bytes()[0] == first {
                inflags |= bit;
                found = true;
            } else if let Some(n) = name.strip_prefix('^')
                && (n == *fname || n.as_bytes().first() == Some(&first))
            {
                exflags |= bit;
                found = true;
            }
        }
        if !found {
            let t = parse_hash_type(name)
                .ok_or_else(|| Error::usage(CMD, format!("invalid mdt_hash value '{name}'")))?;
            types |= 1 << (t as u32);
        }
    }
    if inflags & exflags != 0 {
        return Err(Error::usage(
            CMD,
            format!("include and exclude same flag '{arg}'"),
        ));
    }
    Ok((types, inflags, exflags))
}

impl FindPredicate {
    /// Whether the walk should read the entries of a directory at `depth`.
    pub fn descend(&self, depth: u32) -> bool {
        self.max_depth.is_none_or(|m| depth < m)
    }

    pub fn max_depth(&self) -> Option<u32> {
        self.max_depth
    }

    pub fn min_depth(&self) -> u32 {
        self.min_depth
    }

    /// Whether `entry` is printed, `now` being the time `lfs find` started (seconds).
    pub fn matches(&self, entry: &FindEntry, now: i64) -> bool {
        if entry.depth < self.min_depth || self.max_depth.is_some_and(|m| entry.depth > m) {
            return false;
        }
        if let Some((w, neg)) = &self.name
            && w.matches(&entry.name) == *neg
        {
            return false;
        }
        if let Some((k, neg)) = self.kind
            && (entry.kind == k) == neg
        {
            return false;
        }
        let is_dir = entry.kind == FileKind::Directory;
        if self.mdt_count.is_some() || self.mdt_hash.is_some() {
            if !is_dir {
                return false;
            }
            let count = entry.lmv.as_ref().map_or(0, |l| l.stripes.len() as u64);
            let hash = entry.lmv.as_ref().map_or(0, |l| l.hash_type);
            if let Some(f) = self.mdt_count
                && find_value_cmp(count, f.value, f.sign, f.exclude, 1) == -1
            {
                return false;
            }
            if let Some((types, inflags, exflags, neg)) = self.mdt_hash {
                if types != 0 {
                    let found = (1u32 << (hash & LMV_HASH_TYPE_MASK).min(31)) & types != 0;
                    if found == neg {
                        return false;
                    }
                }
                let flags = hash & !LMV_HASH_TYPE_MASK;
                if (inflags != 0 && flags & inflags == 0) || flags & exflags != 0 {
                    return false;
                }
            }
        }
        let layout = entry.layout.as_ref();
        if let Some(f) = self.stripe_size
            && find_value_cmp(
                last_init(layout, |c| u64::from(c.stripe_size)),
                f.value,
                f.sign,
                f.exclude,
                f.units,
            ) == -1
        {
            return false;
        }
        if let Some(f) = self.stripe_count
            && find_value_cmp(stripe_count(layout), f.value, f.sign, f.exclude, 1) == -1
        {
            return false;
        }
        if let Some((bits, neg)) = self.layout {
            // Entries without a layout match neither -L nor ! -L.
            let Some(l) = layout else {
                return false;
            };
            let found = l.components.iter().any(|c| c.pattern_bits() & bits != 0);
            if found == neg {
                return false;
            }
        }
        if let Some((list, neg)) = &self.osts {
            if entry.kind != FileKind::Regular {
                return false;
            }
            let on = layout.is_some_and(|l| {
                l.components.iter().any(|c| {
                    (!l.composite || c.is_init())
                        && c.objects.iter().any(|o| list.contains(&o.ost_idx))
                })
            });
            if on == *neg {
                return false;
            }
        }
        if let Some((list, neg)) = &self.mdts
            && list.contains(&entry.mdt_index) == *neg
        {
            return false;
        }
        if let Some((uid, neg)) = self.uid
            && (entry.uid == uid) == neg
        {
            return false;
        }
        if let Some((gid, neg)) = self.gid
            && (entry.gid == gid) == neg
        {
            return false;
        }
        if let Some((pool, neg)) = &self.pool
            && pool_matches(layout, pool) == *neg
        {
            return false;
        }
        if !self.comp_matches(layout, is_dir) {
            return false;
        }
        for (lim, t) in [
            (self.atime, entry.atime),
            (self.mtime, entry.mtime),
            (self.ctime, entry.ctime),
        ] {
            if let Some(lim) = lim {
                let Some(limit) = now.checked_sub(lim.offset).filter(|l| *l >= 0) else {
                    return false;
                };
                if time_cmp(t, limit, lim.sign, lim.exclude, self.time_margin) == -1 {
                    return false;
                }
            }
        }
        if let Some(f) = self.size
            && find_value_cmp(entry.size, f.value, f.sign, f.exclude, f.units) == -1
        {
            return false;
        }
        true
    }

    /// `find_check_comp_options`.
    fn comp_matches(&self, layout: Option<&Layout>, is_dir: bool) -> bool {
        if self.comp_count.is_none()
            && self.comp_flags.is_none()
            && self.comp_start.is_none()
            && self.comp_end.is_none()
        {
            return true;
        }
        let Some(l) = layout else {
            return false;
        };
        // A plain layout is one component [0, EOF), instantiated unless a template.
        let forged;
        let entries: Vec<(u32, u64, u64)> = if l.composite {
            l.components
                .iter()
                .map(|c| (c.flags, c.start, c.end))
                .collect()
        } else {
            forged = vec![(if is_dir { 0 } else { LCME_FL_INIT }, 0, EOF)];
            forged
        };
        if entries.is_empty() {
            return false;
        }
        if let Some(f) = self.comp_count {
            let n = if l.composite { entries.len() as u64 } else { 0 };
            if find_value_cmp(n, f.value, f.sign, f.exclude, 1) == -1 {
                return false;
            }
        }
        let mut ret = 1;
        for &(flags, start, end) in &entries {
            if let Some((fl, neg)) = self.comp_flags {
                ret = 1;
                if flags & fl != fl || flags & neg != 0 {
                    ret = -1;
                    continue;
                }
            }
            if let Some(f) = self.comp_start {
                ret = find_value_cmp(start, f.value, f.sign, f.exclude, f.units);
                if ret == -1 {
                    continue;
                }
            }
            if let Some(f) = self.comp_end {
                ret = comp_end_cmp(end, &f);
                if ret == -1 {
                    continue;
                }
            }
            break;
        }
        ret != -1
    }
}

/// Times compare as `find_value_cmp` does with the shared margin.
fn time_cmp(file: i64, limit: i64, sign: i32, exclude: bool, margin: i64) -> i32 {
    let (file, limit, margin) = (i128::from(file), i128::from(limit), i128::from(margin));
    let ret = if sign > 0 {
        if file + margin <= limit { 1 } else { -1 }
    } else if sign == 0 {
        if file <= limit && file + margin > limit {
            1
        } else {
            -1
        }
    } else if file > limit {
        1
    } else {
        -1
    };
    if exclude { -ret } else { ret }
}

/// The value of the last instantiated, non-extension component (single-field semantics).
fn last_init(layout: Option<&Layout>, f: impl Fn(&nacre_core::layout::Component) -> u64) -> u64 {
    let Some(l) = layout else {
        return 0;
    };
    if !l.composite {
        return l.components.first().map_or(0, &f);
    }
    l.components
        .iter()
        .rfind(|c| c.is_init() && c.flags & LCME_FL_EXTENSION == 0)
        .map_or(0, f)
}

/// `find_get_stripe_count`: real stripes once instantiated.
fn stripe_count(layout: Option<&Layout>) -> u64 {
    last_init(layout, |c| {
        if !c.objects.is_empty() {
            c.objects.len() as u64
        } else {
            // A requested count of -1 reads back as 0xffff.
            u64::from(c.stripe_count as u16)
        }
    })
}

/// `find_check_pool`: "" finds layouts without a pool, "*" any pool.
fn pool_matches(layout: Option<&Layout>, pool: &str) -> bool {
    let Some(l) = layout else {
        return false;
    };
    l.components
        .iter()
        .filter(|c| !l.composite || c.is_init())
        .any(|c| {
            if pool == "*" {
                !c.pool.is_empty()
            } else {
                c.pool == pool
            }
        })
}
