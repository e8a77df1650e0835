//! Directory striping (DNE): `lfs mkdir` / `lfs setdirstripe` options and their checks
//! against the file system's MDTs, and what `lfs getdirstripe` prints (as
//! `lmv_dump_user_lmm` does), including the `-D` default directory layout.

use crate::cnum::{parse_c_long_base, parse_c_ulong};
use crate::error::{Error, Result};
use crate::getopt::{HasArg, LongOpt, OptSpec, Parsed, getopt, lo, owned};
use crate::getstripe::{c_alt_hex, resolve_target_index, verbose as v};
use crate::setstripe::{parse_hash_type, parse_targets};
use nacre_core::fid::Fid;
use nacre_core::lmv::{
    HashType, LMV_HASH_FLAG_FIXED, LMV_HASH_FLAG_MIGRATION, LMV_HASH_FLAG_OVERSTRIPED,
    LMV_HASH_TYPE_MASK, LMV_MAGIC_V1, LMV_MAX_STRIPE_COUNT, Lmv, LmvTemplate,
};
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// `LMV_USER_MAGIC`: a default directory layout.
pub const LMV_USER_MAGIC: u32 = 0x0CD3_0CD0;
const LMV_HASH_FLAG_LOST_LMV: u32 = 0x1000_0000;
const LMV_HASH_FLAG_BAD_TYPE: u32 = 0x2000_0000;
const LMV_HASH_FLAG_KNOWN: u32 = 0xbf00_0000;
/// `LMV_INHERIT_MAX`: the most levels a default may be inherited.
pub const MAX_INHERIT: i64 = 250;
/// `LMV_INHERIT_RR_MAX`.
pub const MAX_INHERIT_RR: i64 = 250;
/// At most this many stripes of an overstriped directory per MDT.
pub const MAX_STRIPES_PER_MDT: i64 = 5;

/// What a `lfs mkdir`/`lfs setdirstripe` command does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DirStripeOp {
    /// Create each DIR with this striping.
    Create,
    /// `-D`: set each DIR's default directory layout.
    SetDefault,
    /// `-d`: delete each DIR's default directory layout.
    DeleteDefault,
}

/// A parsed `lfs mkdir`/`lfs setdirstripe` command line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetdirstripeRequest {
    pub op: DirStripeOp,
    /// `-i IDX[,IDX..]`: the MDTs, in stripe order, when listed explicitly.
    pub mdts: Vec<u32>,
    /// The starting MDT; -1: the least full (QoS) or round-robin.
    pub stripe_offset: i32,
    /// 0 or 1: a plain directory; -1: every MDT; N stripes. With `overstriped`, a
    /// negative -N means N stripes on every MDT.
    pub stripe_count: i32,
    /// `-C`: more than one stripe per MDT.
    pub overstriped: bool,
    /// `-H`; `None`: the server's default (`lod.*.mdt_hash`).
    pub hash: Option<HashType>,
    /// Levels a default is inherited: -1 unlimited, 0 not inherited (`-X`).
    pub max_inherit: i32,
    /// Levels new directories are spread round-robin (`--max-inherit-rr`); defaults only.
    pub max_inherit_rr: Option<i32>,
    /// `-o MODE`.
    pub mode: Option<u32>,
    /// What `lfs` warns about without refusing (unrecommended inheritance depths).
    pub warnings: Vec<String>,
    pub paths: Vec<String>,
}

impl SetdirstripeRequest {
    /// The `lmv_hash_type` to store: the type plus the overstriped flag.
    pub fn hash_type(&self) -> u32 {
        let t = self.hash.map_or(0, |h| h as u32);
        if self.overstriped {
            t | LMV_HASH_FLAG_OVERSTRIPED
        } else {
            t
        }
    }

    /// The default layout `-D` stores.
    pub fn template(&self) -> LmvTemplate {
        LmvTemplate {
            stripe_count: self.stripe_count,
            stripe_offset: self.stripe_offset,
            hash_type: self.hash_type(),
            max_inherit: self.max_inherit,
            max_inherit_rr: self.max_inherit_rr.unwrap_or(0),
        }
    }

    /// Refuses MDT indexes that do not exist and stripe counts beyond the MDT count.
    pub fn validate(&self, mdt_count: u32) -> Result<()> {
        let cmd = "lfs setdirstripe";
        let no_mdt = |idx: i64| {
            Error::invalid(
                cmd,
                format!("MDT index {idx} does not exist (the file system has {mdt_count} MDTs)"),
            )
        };
        for &m in &self.mdts {
            if m >= mdt_count {
                return Err(no_mdt(i64::from(m)));
            }
        }
        if self.stripe_offset >= 0 && self.stripe_offset as u32 >= mdt_count {
            return Err(no_mdt(i64::from(self.stripe_offset)));
        }
        let count = i64::from(self.stripe_count);
        let limit = if self.overstriped {
            MAX_STRIPES_PER_MDT * i64::from(mdt_count)
        } else {
            i64::from(mdt_count)
        };
        if count > limit {
            let what = if self.overstriped {
                format!("{MAX_STRIPES_PER_MDT} stripes on each of the {mdt_count} MDTs")
            } else {
                format!("the {mdt_count} MDTs of the file system")
            };
            return Err(Error::invalid(
                cmd,
                format!("stripe count {count} is more than {what}"),
            ));
        }
        if !self.overstriped && self.mdts.len() > 1 {
            for (k, m) in self.mdts.iter().enumerate() {
                if self.mdts[..k].contains(m) {
                    return Err(Error::invalid(
                        cmd,
                        format!("MDT index {m} is listed twice"),
                    ));
                }
            }
        }
        Ok(())
    }
}

const OPT_FLAGS: u32 = 256;
const OPT_FOREIGN: u32 = 257;
const OPT_INHERIT_RR: u32 = 258;
const OPT_HEX_IDX: u32 = 259;

const fn c(ch: char) -> u32 {
    ch as u32
}

const SET_LONG: &[LongOpt] = &[
    lo("count", HasArg::Required, c('c')),
    lo("mdt-count", HasArg::Required, c('c')),
    lo("mdt-overcount", HasArg::Required, c('C')),
    lo("delete", HasArg::No, c('d')),
    lo("default", HasArg::No, c('D')),
    lo("default_stripe", HasArg::No, c('D')),
    lo("flags", HasArg::Required, OPT_FLAGS),
    lo("foreign", HasArg::Optional, OPT_FOREIGN),
    lo("help", HasArg::No, c('h')),
    lo("mdt-hash", HasArg::Required, c('H')),
    lo("mdt-index", HasArg::Required, c('m')),
    lo("mdt", HasArg::Required, c('m')),
    lo("index", HasArg::Required, c('i')),
    lo("mode", HasArg::Required, c('o')),
    lo("hash-type", HasArg::Required, c('t')),
    lo("xattr", HasArg::Required, c('x')),
    lo("max-inherit", HasArg::Required, c('X')),
    lo("max-inherit-rr", HasArg::Required, OPT_INHERIT_RR),
];

/// Parses the arguments of `lfs mkdir`.
pub fn parse_mkdir<S: AsRef<str>>(args: &[S]) -> Result<SetdirstripeRequest> {
    parse_dirstripe("lfs mkdir", &owned(args))
}

/// Parses the arguments of `lfs setdirstripe`.
pub fn parse_setdirstripe<S: AsRef<str>>(args: &[S]) -> Result<SetdirstripeRequest> {
    parse_dirstripe("lfs setdirstripe", &owned(args))
}

fn parse_dirstripe(cmd: &'static str, args: &[String]) -> Result<SetdirstripeRequest> {
    let spec = OptSpec {
        short: "c:C:dDi:hH:m:o:t:T:x:X:",
        long: SET_LONG,
        in_order: false,
        long_only: false,
    };
    let (mut count, mut offset): (Option<i64>, Option<i64>) = (None, None);
    let (mut overstriped, mut delete, mut default) = (false, false, false);
    let mut hash = None;
    let mut mdts: Vec<u32> = Vec::new();
    let (mut max_inherit, mut max_inherit_rr): (Option<i64>, Option<i64>) = (None, None);
    let mut mode = None;
    let mut paths = Vec::new();
    for item in getopt(cmd, &spec, args)? {
        let (val, arg, text) = match item {
            Parsed::Operand(p) => {
                paths.push(p);
                continue;
            }
            Parsed::Opt { val, arg, text } => (val, arg.unwrap_or_default(), text),
        };
        match (val, char::from_u32(val).unwrap_or('\0')) {
            (_, 'C') | (_, 'c') | (_, 'T') => {
                if val == c('C') {
                    overstriped = true;
                }
                let min = if overstriped {
                    -MAX_STRIPES_PER_MDT
                } else {
                    -1
                };
                let n = parse_c_ulong(&arg)
                    .map(|v| v as i64)
                    .filter(|&n| n >= min && n <= i64::from(LMV_MAX_STRIPE_COUNT))
                    .ok_or_else(|| Error::usage(cmd, format!("invalid stripe count '{arg}'")))?;
                count = Some(n);
            }
            (_, 'd') => {
                delete = true;
                default = true;
            }
            (_, 'D') => default = true,
            (_, 'H') | (_, 't') => {
                hash = Some(parse_hash_type(&arg).ok_or_else(|| {
                    Error::usage(cmd, format!("bad directory hash type '{arg}'"))
                })?);
            }
            (_, 'i') | (_, 'm') => {
                let before = mdts.len();
                if arg.trim() == "-1" {
                    offset.get_or_insert(-1);
                    continue;
                }
                let dup = parse_targets(&arg, &mut mdts, LMV_MAX_STRIPE_COUNT as usize)
                    .ok_or_else(|| Error::usage(cmd, format!("invalid MDT target(s) '{arg}'")))?;
                overstriped |= dup;
                if offset.is_none() && mdts.len() > before {
                    offset = Some(i64::from(mdts[0]));
                }
            }
            (_, 'o') => {
                let m = u32::from_str_radix(&arg, 8)
                    .map_err(|_| Error::usage(cmd, format!("bad MODE '{arg}'")))?;
                mode = Some(m);
            }
            (_, 'X') => {
                let n = parse_c_long_base(&arg, 10)
                    .filter(|&n| n >= -2)
                    .ok_or_else(|| Error::usage(cmd, format!("invalid max-inherit '{arg}'")))?;
                if n > MAX_INHERIT {
                    return Err(Error::usage(
                        cmd,
                        format!("max-inherit {n} exceeds maximum {MAX_INHERIT}"),
                    ));
                }
                // -2 is lfs's own "unset".
                max_inherit = (n != -2).then_some(n);
            }
            (OPT_INHERIT_RR, _) => {
                if !default {
                    return Err(Error::usage(
                        cmd,
                        "'--max-inherit-rr' must be specified with '-D'",
                    ));
                }
                let n = parse_c_long_base(&arg, 10)
                    .filter(|&n| n >= -2)
                    .ok_or_else(|| Error::usage(cmd, format!("invalid max-inherit-rr '{arg}'")))?;
                if n > MAX_INHERIT_RR {
                    return Err(Error::usage(
                        cmd,
                        format!("max-inherit-rr {n} exceeds maximum {MAX_INHERIT_RR}"),
                    ));
                }
                max_inherit_rr = (n != -2).then_some(n);
            }
            (OPT_FLAGS, _) | (OPT_FOREIGN, _) | (_, 'x') => {
                return Err(Error::Invalid {
                    cmd,
                    msg: "foreign directories are not supported".to_string(),
                    errno: nacre_core::Errno::ENOTSUP,
                });
            }
            (_, 'h') => return Err(Error::usage(cmd, "help requested")),
            _ => return Err(Error::usage(cmd, format!("unrecognized option '{text}'"))),
        }
    }
    if paths.is_empty() {
        return Err(Error::usage(cmd, "DIR must be specified"));
    }
    if delete && (offset.is_some() || count.is_some()) {
        return Err(Error::usage(cmd, "cannot specify -d with -c or -i options"));
    }
    if !delete && offset.is_none() && count.is_none() {
        // Nothing asked: one stripe on the least used MDT.
        offset = Some(-1);
        count = Some(1);
    }
    let mut warnings = Vec::new();
    let striped = count.is_some_and(|n| !(0..=1).contains(&n));
    if default && striped {
        let n = count.unwrap_or(0);
        match max_inherit {
            Some(-1) => warnings.push(format!(
                "{cmd}: unrecommended max-inherit=-1 when default stripe-count={n}"
            )),
            Some(m) if m > 5 => warnings.push(format!(
                "{cmd}: unrecommended max-inherit={m} when default stripe-count={n}"
            )),
            _ => {}
        }
    }
    if default && mdts.len() > 1 && count.is_none() {
        return Err(Error::usage(
            cmd,
            "trying to create unrecommended default striped directory layout,\n\t'-D -i x,y,z' will stripe every new directory across all MDTs,\n\tadd -c with the number of MDTs to do this anyway",
        ));
    }
    if max_inherit_rr.is_some() && offset.is_some_and(|o| o != -1) {
        return Err(Error::usage(
            cmd,
            format!(
                "max-inherit-rr needs mdt-index=-1, not {}",
                offset.unwrap_or(-1)
            ),
        ));
    }
    if default && offset == Some(-1) && matches!(count, None | Some(0)) {
        count = Some(1);
    }
    let n = count.unwrap_or(0);
    let mut max_inherit = match max_inherit {
        Some(m) => m as i32,
        // Plain defaults are inherited forever, striped ones three levels.
        None if matches!(count, None | Some(0) | Some(1)) => -1,
        None => 3,
    };
    if overstriped {
        max_inherit = 2;
    }
    if mdts.len() > 1 {
        if n > 0 && n as usize != mdts.len() {
            return Err(Error::usage(
                cmd,
                format!(
                    "stripe count {n} doesn't match the number of MDTs: {}",
                    mdts.len()
                ),
            ));
        }
        count = Some(mdts.len() as i64);
    }
    let op = if delete {
        DirStripeOp::DeleteDefault
    } else if default {
        DirStripeOp::SetDefault
    } else {
        DirStripeOp::Create
    };
    Ok(SetdirstripeRequest {
        op,
        mdts,
        stripe_offset: offset.unwrap_or(-1) as i32,
        stripe_count: count.unwrap_or(0) as i32,
        overstriped,
        hash,
        max_inherit,
        max_inherit_rr: if default {
            Some(max_inherit_rr.unwrap_or(0) as i32)
        } else {
            None
        },
        mode,
        warnings,
        paths,
    })
}

/// An `lmv_user_md` as `lmv_dump_user_lmm` sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LmvView {
    magic: u32,
    stripe_count: i32,
    stripe_offset: i32,
    hash_type: u32,
    max_inherit: i32,
    max_inherit_rr: i32,
    objects: Vec<(u32, Fid)>,
}

impl LmvView {
    /// A directory's own striping; a plain directory shows 0 stripes on its MDT.
    pub(crate) fn from_lmv(lmv: Option<&Lmv>, mdt_index: u32) -> LmvView {
        match lmv {
            Some(l) => LmvView {
                magic: LMV_MAGIC_V1,
                stripe_count: l.stripes.len() as i32,
                stripe_offset: l.master_mdt as i32,
                hash_type: l.hash_type,
                max_inherit: 0,
                max_inherit_rr: 0,
                objects: l.stripes.clone(),
            },
            None => LmvView {
                magic: LMV_MAGIC_V1,
                stripe_count: 0,
                stripe_offset: mdt_index as i32,
                hash_type: 0,
                max_inherit: 0,
                max_inherit_rr: 0,
                objects: Vec::new(),
            },
        }
    }

    /// A default directory layout; none shows what `lfs` makes up (0 stripes, any MDT,
    /// unlimited inheritance).
    pub(crate) fn from_default(t: Option<&LmvTemplate>) -> LmvView {
        let t = t.cloned().unwrap_or(LmvTemplate {
            stripe_count: 0,
            stripe_offset: -1,
            hash_type: 0,
            max_inherit: -1,
            max_inherit_rr: 0,
        });
        LmvView {
            magic: LMV_USER_MAGIC,
            stripe_count: t.stripe_count,
            stripe_offset: t.stripe_offset,
            hash_type: t.hash_type,
            max_inherit: t.max_inherit,
            max_inherit_rr: t.max_inherit_rr,
            objects: Vec::new(),
        }
    }
}

/// `lmv_hash_type` as printed: the type name and its flags.
pub fn hash_type_string(hash_type: u32) -> String {
    const NAMES: [&str; 5] = ["none", "all_char", "fnv_1a_64", "crush", "crush2"];
    let t = hash_type & LMV_HASH_TYPE_MASK;
    let flags = hash_type & !LMV_HASH_TYPE_MASK;
    let mut s = match NAMES.get(t as usize) {
        Some(n) => (*n).to_string(),
        None => c_alt_hex(u64::from(t), 0),
    };
    for (bit, name) in [
        (LMV_HASH_FLAG_OVERSTRIPED, "overstriped"),
        (LMV_HASH_FLAG_MIGRATION, "migrating"),
        (LMV_HASH_FLAG_BAD_TYPE, "bad_type"),
        (LMV_HASH_FLAG_LOST_LMV, "lost_lmv"),
        (LMV_HASH_FLAG_FIXED, "fixed"),
    ] {
        if flags & bit != 0 {
            s.push(',');
            s.push_str(name);
        }
    }
    if flags & !LMV_HASH_FLAG_KNOWN != 0 {
        let _ = write!(s, ",unknown_{:04x}", flags & !LMV_HASH_FLAG_KNOWN);
    }
    s
}

/// `lmv_dump_user_lmm`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn dump_lmv(
    out: &mut String,
    lum: &LmvView,
    path: &str,
    dir_fid: Fid,
    obd: Option<u32>,
    depth: i32,
    verbose: u32,
    yaml: bool,
    hex: bool,
) {
    let is_default = lum.magic == LMV_USER_MAGIC;
    let prefix = if is_default { "(Default)" } else { "" };
    if let Some(idx) = obd {
        let hit = if lum.stripe_count == 0 {
            i64::from(idx) == i64::from(lum.stripe_offset)
        } else {
            let hit = lum.objects.iter().any(|(m, _)| *m == idx);
            if hit {
                let _ = writeln!(out, "{prefix}{path}");
            }
            hit
        };
        if !hit {
            return;
        }
    }
    let ysep = if yaml { "\n" } else { " " };
    let mut sep = "";
    if depth != 0 && verbose != v::OBJID {
        let _ = writeln!(out, "{prefix}{path}");
    }
    if verbose & (v::DETAIL | v::DFID) != 0 {
        if verbose & !v::DFID != 0 {
            out.push_str("lmv_fid: ");
            if yaml {
                out.push_str("          ");
            }
        }
        out.push_str(&dir_fid.bare());
        sep = ysep;
    }
    if verbose & v::DETAIL != 0 {
        out.push_str(sep);
        let _ = write!(
            out,
            "lmv_magic: {}{}",
            if yaml { "        " } else { "" },
            c_alt_hex(u64::from(lum.magic), 0)
        );
        sep = ysep;
    }
    if verbose & v::STRIPE_COUNT != 0 {
        out.push_str(sep);
        if verbose & !v::STRIPE_COUNT != 0 {
            out.push_str(if yaml {
                "lmv_stripe_count:  "
            } else {
                "lmv_stripe_count: "
            });
        }
        let _ = write!(out, "{}", lum.stripe_count);
        sep = ysep;
    }
    if verbose & v::STRIPE_OFFSET != 0 {
        out.push_str(sep);
        if verbose & !v::STRIPE_OFFSET != 0 {
            out.push_str("lmv_stripe_offset: ");
        }
        if hex {
            out.push_str(&c_alt_hex(u64::from(lum.stripe_offset as u32), 0));
        } else {
            let _ = write!(out, "{}", lum.stripe_offset);
        }
        sep = ysep;
    }
    if verbose & v::HASH_TYPE != 0 {
        out.push_str(sep);
        if verbose & !v::HASH_TYPE != 0 {
            out.push_str(if yaml {
                "lmv_hash_type:     "
            } else {
                "lmv_hash_type: "
            });
        }
        out.push_str(&hash_type_string(lum.hash_type));
        sep = ysep;
    }
    if verbose & v::INHERIT != 0 && is_default {
        out.push_str(sep);
        if verbose & !v::INHERIT != 0 {
            out.push_str(if yaml {
                "lmv_max_inherit:   "
            } else {
                "lmv_max_inherit: "
            });
        }
        let _ = write!(out, "{}", lum.max_inherit);
        sep = ysep;
    }
    if verbose & v::INHERIT_RR != 0 && is_default {
        out.push_str(sep);
        if verbose & !v::INHERIT_RR != 0 {
            out.push_str("lmv_max_inherit_rr: ");
        }
        let _ = write!(out, "{}", lum.max_inherit_rr);
    }
    if verbose & v::OBJID != 0 && !is_default {
        out.push('\n');
        if yaml {
            out.push_str("lmv_objects:\n");
        } else if lum.stripe_count > 0 {
            out.push_str("mdtidx\t\t FID[seq:oid:ver]\n");
        }
        let row = |out: &mut String, idx: u32, fid: Fid, mark: &str| {
            if yaml {
                let i = if hex {
                    c_alt_hex(u64::from(idx), 0)
                } else {
                    idx.to_string()
                };
                let _ = write!(
                    out,
                    "      - l_mdt_idx: {i}\n        l_fid:     {}\n",
                    fid.bare()
                );
            } else {
                let i = if hex {
                    c_alt_hex(u64::from(idx), 6)
                } else {
                    format!("{idx:>6}")
                };
                let _ = writeln!(out, "{i}\t\t {fid}\t\t{mark}");
            }
        };
        if lum.stripe_count == 0 && yaml {
            row(out, lum.stripe_offset as u32, dir_fid, "");
        }
        for &(idx, fid) in &lum.objects {
            if obd.is_none_or(|o| o == idx) {
                row(out, idx, fid, if obd == Some(idx) { " *" } else { "" });
            }
        }
    }
    if verbose & v::OBJID == 0 || is_default {
        out.push('\n');
    }
}

/// The parsed options of `lfs getdirstripe`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GetdirstripeOptions {
    pub(crate) verbose: u32,
    /// `-D`: the default directory layout rather than the directory's own.
    pub default: bool,
    pub yaml: bool,
    pub raw: bool,
    pub hex_idx: bool,
    pub recursive: bool,
    /// `-O MDT`: only directories with a stripe on this MDT.
    pub obd: Option<String>,
}

/// A parsed `lfs getdirstripe` command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GetdirstripeRequest {
    pub options: GetdirstripeOptions,
    pub paths: Vec<String>,
}

const GET_LONG: &[LongOpt] = &[
    lo("mdt-count", HasArg::No, c('c')),
    lo("default", HasArg::No, c('D')),
    lo("fid", HasArg::No, c('F')),
    lo("help", HasArg::No, c('h')),
    lo("mdt-hash", HasArg::No, c('H')),
    lo("hex-idx", HasArg::No, OPT_HEX_IDX),
    lo("mdt-index", HasArg::No, c('i')),
    lo("obd", HasArg::Required, c('O')),
    lo("recursive", HasArg::No, c('r')),
    lo("raw", HasArg::No, c('R')),
    lo("verbose", HasArg::No, c('v')),
    lo("max-inherit", HasArg::No, c('X')),
    lo("max-inherit-rr", HasArg::No, OPT_INHERIT_RR),
    lo("yaml", HasArg::No, c('y')),
];

/// Parses the arguments of `lfs getdirstripe`.
pub fn parse_getdirstripe<S: AsRef<str>>(args: &[S]) -> Result<GetdirstripeRequest> {
    let cmd = "lfs getdirstripe";
    let spec = OptSpec {
        short: "cDFhHimO:rRtTvXy",
        long: GET_LONG,
        in_order: false,
        long_only: false,
    };
    let mut o = GetdirstripeOptions {
        verbose: 0,
        default: false,
        yaml: false,
        raw: false,
        hex_idx: false,
        recursive: false,
        obd: None,
    };
    let mut paths = Vec::new();
    for item in getopt(cmd, &spec, &owned(args))? {
        let (val, arg, text) = match item {
            Parsed::Operand(p) => {
                paths.push(p);
                continue;
            }
            Parsed::Opt { val, arg, text } => (val, arg, text),
        };
        match (val, char::from_u32(val).unwrap_or('\0')) {
            (_, 'c') | (_, 'T') => o.verbose |= v::STRIPE_COUNT,
            (_, 'D') => o.default = true,
            (_, 'F') => o.verbose |= v::DFID,
            (_, 'H') | (_, 't') => o.verbose |= v::HASH_TYPE,
            (OPT_HEX_IDX, _) => o.hex_idx = true,
            (_, 'i') | (_, 'm') => o.verbose |= v::STRIPE_OFFSET,
            (_, 'O') => {
                if o.obd.is_some() {
                    return Err(Error::usage(cmd, "only one obduuid allowed"));
                }
                o.obd = arg;
            }
            (_, 'r') => o.recursive = true,
            (_, 'R') => o.raw = true,
            (_, 'v') => o.verbose |= v::DEFAULT | v::DETAIL,
            (_, 'X') => o.verbose |= v::INHERIT,
            (OPT_INHERIT_RR, _) => o.verbose |= v::INHERIT_RR,
            (_, 'y') => o.yaml = true,
            (_, 'h') => return Err(Error::usage(cmd, "help requested")),
            _ => return Err(Error::usage(cmd, format!("unrecognized option '{text}'"))),
        }
    }
    if paths.is_empty() {
        return Err(Error::usage(cmd, "DIR must be specified"));
    }
    if o.verbose == 0 {
        o.verbose = v::DEFAULT;
    }
    Ok(GetdirstripeRequest { options: o, paths })
}

/// A directory `lfs getdirstripe` is asked about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirStripeEntry {
    pub path: String,
    pub fid: Fid,
    /// The MDT of the directory's master inode.
    pub mdt_index: u32,
    /// Its striping; `None` for a plain directory.
    pub lmv: Option<Lmv>,
    /// Its default directory layout (`-D`).
    pub default_lmv: Option<LmvTemplate>,
    /// Subdirectories, for `-r`.
    pub subdirs: Vec<DirStripeEntry>,
}

/// What `lfs getdirstripe` prints for `dir` (and its subdirectories with `-r`).
pub fn getdirstripe(opts: &GetdirstripeOptions, dir: &DirStripeEntry) -> String {
    let mut out = String::new();
    let depth = if opts.recursive { -1 } else { 0 };
    let obd = opts
        .obd
        .as_ref()
        .map(|o| resolve_target_index(o).unwrap_or(u32::MAX));
    let mut stack = vec![dir];
    while let Some(d) = stack.pop() {
        let view = if opts.default {
            if d.default_lmv.is_none() && opts.raw {
                None
            } else {
                Some(LmvView::from_default(d.default_lmv.as_ref()))
            }
        } else {
            Some(LmvView::from_lmv(d.lmv.as_ref(), d.mdt_index))
        };
        if let Some(view) = view {
            dump_lmv(
                &mut out,
                &view,
                &d.path,
                d.fid,
                obd,
                depth,
                opts.verbose,
                opts.yaml,
                opts.hex_idx,
            );
        }
        if opts.recursive {
            stack.extend(d.subdirs.iter().rev());
        }
    }
    out
}
