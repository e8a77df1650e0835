//! `lfs df`: its options and its report, as `showdf`/`mntdf` in `lfs.c` print it — one
//! row per MDT then per OST, a blank line, the `filesystem_summary:` row and a blank
//! line; usage percentages rounded up as df(1) does; `-h`/`-H` human units; `-i` inodes.
//!
//! Block counts are taken in bytes ([`TargetStat`]); without `-h` they are printed in
//! KiB (truncated), as Lustre prints `os_blocks * os_bsize >> 10`.

use crate::cnum::parse_c_long;
use crate::error::{Error, Result};
use crate::getopt::{HasArg, LongOpt, OptSpec, Parsed, getopt, lo, owned};
use nacre_core::target::TargetKind;
use std::fmt::Write;

const CMD: &str = "lfs df";

/// `os_state` bits of a target (`enum obd_statfs_state`).
pub mod state {
    pub const DEGRADED: u32 = 0x1;
    pub const READONLY: u32 = 0x2;
    pub const NOCREATE: u32 = 0x4;
    pub const ENOSPC: u32 = 0x20;
    pub const ENOINO: u32 = 0x40;
    pub const SUM: u32 = 0x100;
    pub const NONROT: u32 = 0x200;
}

/// The statistics of one target, as `OST_STATFS` returns them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetStat {
    /// `testfs-MDT0000`; printed as `testfs-MDT0000_UUID`.
    pub name: String,
    pub kind: TargetKind,
    pub index: u32,
    /// Total, free and available-to-users space, in bytes.
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    /// Total and free inodes (objects, for an OST).
    pub files: u64,
    pub ffree: u64,
    /// [`state`] bits.
    pub state: u32,
    /// An inactive (disconnected or deactivated) target prints `inactive device`.
    pub active: bool,
    /// The OST pools the target belongs to (`-p`).
    pub pools: Vec<String>,
}

/// A column of `--output`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DfField {
    Uuid,
    BTotal,
    BUsed,
    BFree,
    BAvail,
    BPct,
    ITotal,
    IUsed,
    IFree,
    IPct,
    MntDir,
    State,
}

impl DfField {
    /// `showdf_str2field`.
    pub fn parse(name: &str) -> Option<DfField> {
        Some(match name {
            "uuid" | "source" | "device" => DfField::Uuid,
            "btotal" | "size" | "total" => DfField::BTotal,
            "bused" | "used" => DfField::BUsed,
            "bfree" | "free" => DfField::BFree,
            "bavail" | "avail" => DfField::BAvail,
            "bpct" | "pcent" | "usepct" | "pct" => DfField::BPct,
            "itotal" | "inodes" => DfField::ITotal,
            "iused" => DfField::IUsed,
            "ifree" | "iavail" => DfField::IFree,
            "ipct" | "ipcent" | "iusepct" => DfField::IPct,
            "target" => DfField::MntDir,
            "state" => DfField::State,
            _ => return None,
        })
    }
}

/// The parsed options of `lfs df`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DfOptions {
    /// `-h` (1024) or `-H` (1000): human-readable sizes.
    pub human_base: Option<u32>,
    /// `-i`: inodes instead of blocks.
    pub inodes: bool,
    /// `-v`: inactive targets too, and informational state letters.
    pub verbose: bool,
    /// `-l`: do not wait for unreachable targets.
    pub lazy: bool,
    /// `-p [FSNAME.]POOL`.
    pub pool: Option<String>,
    /// `-m[IDX]`: MDTs (only IDX).
    pub mdt: Option<Option<u32>>,
    /// `-o[IDX]`: OSTs (only IDX).
    pub ost: Option<Option<u32>>,
    /// `--output`: the columns, in order; empty for the default set.
    pub fields: Vec<DfField>,
    pub no_header: bool,
    pub only_summary: bool,
}

/// A parsed `lfs df` command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DfRequest {
    pub options: DfOptions,
    /// Paths on the file systems to report; empty for every mounted one.
    pub paths: Vec<String>,
}

const fn c(ch: char) -> u32 {
    ch as u32
}

const LONG: &[LongOpt] = &[
    lo("human-readable", HasArg::No, c('h')),
    lo("si", HasArg::No, c('H')),
    lo("inodes", HasArg::No, c('i')),
    lo("lazy", HasArg::No, c('l')),
    lo("mdt", HasArg::Optional, c('m')),
    lo("no-header", HasArg::No, c('N')),
    lo("only-summary", HasArg::No, c('s')),
    lo("ost", HasArg::Optional, c('o')),
    lo("output", HasArg::Required, c('u')),
    lo("pool", HasArg::Required, c('p')),
    lo("verbose", HasArg::No, c('v')),
];

/// Parses the arguments of `lfs df`.
pub fn parse_df<S: AsRef<str>>(args: &[S]) -> Result<DfRequest> {
    let spec = OptSpec {
        short: "hHilm::Nso::p:u:v",
        long: LONG,
        in_order: false,
        long_only: false,
    };
    let mut o = DfOptions::default();
    let mut paths = Vec::new();
    for item in getopt(CMD, &spec, &owned(args))? {
        let (val, arg, text) = match item {
            Parsed::Operand(p) => {
                paths.push(p);
                continue;
            }
            Parsed::Opt { val, arg, text } => (val, arg, text),
        };
        let index = |arg: Option<String>, what: &str| -> Result<Option<u32>> {
            match arg {
                None => Ok(None),
                Some(a) => parse_c_long(&a)
                    .filter(|&i| (0..0xffe0).contains(&i))
                    .map(|i| Some(i as u32))
                    .ok_or_else(|| Error::usage(CMD, format!("invalid {what} index '{a}'"))),
            }
        };
        match char::from_u32(val).unwrap_or('\0') {
            'h' => o.human_base = Some(1024),
            'H' => o.human_base = Some(1000),
            'i' => o.inodes = true,
            'l' => o.lazy = true,
            'm' => o.mdt = Some(index(arg, "MDT")?),
            'N' => o.no_header = true,
            's' => o.only_summary = true,
            'o' => o.ost = Some(index(arg, "OST")?),
            'p' => o.pool = arg,
            'u' => {
                for name in arg.unwrap_or_default().split(',').filter(|s| !s.is_empty()) {
                    let f = DfField::parse(name).ok_or_else(|| {
                        Error::usage(CMD, format!("unknown field '{name}' for --output option"))
                    })?;
                    o.fields.push(f);
                }
            }
            'v' => o.verbose = true,
            _ => return Err(Error::usage(CMD, format!("unrecognized option '{text}'"))),
        }
    }
    Ok(DfRequest { options: o, paths })
}

/// `obd_statfs_ratio`: used / (used + available), rounded up.
fn ratio(used: u64, avail: u64) -> i32 {
    let (used, avail) = (used as f64, avail as f64);
    let r = if avail + used > 0.0 {
        used / (used + avail) * 100.0
    } else {
        0.0
    };
    if r - r.trunc() > 0.0 {
        r as i32 + 1
    } else {
        r as i32
    }
}

/// One row's numbers, in the units `showdf` starts from.
struct Row {
    blocks: u64,
    bfree: u64,
    bavail: u64,
    files: u64,
    ffree: u64,
    state: u32,
}

struct Fmt<'a> {
    o: &'a DfOptions,
}

impl Fmt<'_> {
    /// `print_field_value`: `%11llu`, or `%8.1f` plus a unit letter with `-h`/`-H`.
    fn value(&self, out: &mut String, value: u64) {
        match self.o.human_base {
            Some(base) => {
                let suffix: &[u8] = if base == 1000 {
                    b"kMGTPEZY"
                } else {
                    b"KMGTPEZY"
                };
                let mut v = value as f64;
                let mut radix = 0;
                while v > f64::from(base) {
                    v /= f64::from(base);
                    radix += 1;
                }
                if radix > 0 {
                    let _ = write!(out, "{v:8.1}{}", char::from(suffix[radix - 1]));
                } else {
                    let _ = write!(out, "{value:11}");
                }
            }
            None => {
                let _ = write!(out, "{value:11}");
            }
        }
    }

    /// `print_os_state`: error states always, informational ones with `-v`.
    fn state(&self, out: &mut String, mut st: u32) {
        const NAMES: &[(u32, char, bool)] = &[
            (0x1, 'D', true),
            (0x2, 'R', true),
            (0x4, 'N', true),
            (0x8, '?', true),
            (0x10, '?', true),
            (0x20, 'S', true),
            (0x40, 'I', true),
            (0x100, 'a', false),
            (0x200, 'f', false),
        ];
        while st != 0 {
            let Some(&(bit, name, err)) = NAMES.iter().find(|(b, _, _)| st & b != 0) else {
                // Unknown bits, in octal so they are not mistaken for 'a' or 'f'.
                let _ = write!(out, "(0{st:o})");
                break;
            };
            if err || self.o.verbose {
                out.push(name);
            }
            st ^= bit;
        }
    }

    /// `showdf` for one row.
    fn row(
        &self,
        out: &mut String,
        fields: &[DfField],
        uuid: &str,
        r: &Row,
        mnt: &str,
        tag: Option<String>,
    ) {
        let shift = if self.o.human_base.is_some() { 0 } else { 10 };
        for (i, f) in fields.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            match f {
                DfField::Uuid => {
                    let _ = write!(out, "{uuid:<20}");
                }
                DfField::BTotal => self.value(out, r.blocks >> shift),
                DfField::BUsed => self.value(out, r.blocks.saturating_sub(r.bfree) >> shift),
                DfField::BFree => self.value(out, r.bfree >> shift),
                DfField::BAvail => self.value(out, r.bavail >> shift),
                DfField::BPct => {
                    let _ = write!(
                        out,
                        "{:3}%",
                        ratio(r.blocks.saturating_sub(r.bfree), r.bavail)
                    );
                }
                DfField::ITotal => self.value(out, r.files),
                DfField::IUsed => self.value(out, r.files.saturating_sub(r.ffree)),
                DfField::IFree => self.value(out, r.ffree),
                DfField::IPct => {
                    let _ = write!(
                        out,
                        "{:3}%",
                        ratio(r.files.saturating_sub(r.ffree), r.ffree)
                    );
                }
                DfField::MntDir => {
                    let _ = write!(out, " {mnt}");
                    if let Some(t) = &tag {
                        out.push_str(t);
                    }
                }
                DfField::State => self.state(out, r.state),
            }
        }
        out.push('\n');
    }

    fn header(&self, out: &mut String, fields: &[DfField]) {
        for f in fields {
            let cell = match f {
                DfField::Uuid => format!("{:<20} ", "UUID"),
                DfField::BTotal => {
                    format!(
                        "{:>11} ",
                        if self.o.human_base.is_some() {
                            "bytes"
                        } else {
                            "1K-blocks"
                        }
                    )
                }
                DfField::BUsed => format!("{:>11} ", "Used"),
                DfField::BFree => format!("{:>11} ", "Free"),
                DfField::BAvail => format!("{:>11} ", "Available"),
                DfField::BPct => format!("{:>4} ", "Use%"),
                DfField::ITotal => format!("{:>11} ", "Inodes"),
                DfField::IUsed => format!("{:>11} ", "IUsed"),
                DfField::IFree => format!("{:>11} ", "IFree"),
                DfField::IPct => format!("{:>4} ", "IUse%"),
                DfField::MntDir => " Mounted on".to_string(),
                DfField::State => String::new(),
            };
            out.push_str(&cell);
        }
        out.push('\n');
    }
}

/// What `lfs df` prints for the file system mounted at `mount`, given its targets.
pub fn df(opts: &DfOptions, mount: &str, targets: &[TargetStat]) -> Result<String> {
    let fields: Vec<DfField> = if !opts.fields.is_empty() {
        opts.fields.clone()
    } else if opts.inodes {
        vec![
            DfField::Uuid,
            DfField::ITotal,
            DfField::IUsed,
            DfField::IFree,
            DfField::IPct,
            DfField::MntDir,
            DfField::State,
        ]
    } else {
        vec![
            DfField::Uuid,
            DfField::BTotal,
            DfField::BUsed,
            DfField::BAvail,
            DfField::BPct,
            DfField::MntDir,
            DfField::State,
        ]
    };
    let pool = match &opts.pool {
        None => None,
        Some(p) => match p.split_once('.') {
            Some((fs, pool)) => {
                let fsname = targets
                    .first()
                    .and_then(|t| t.name.rsplit_once('-'))
                    .map(|(f, _)| f);
                if fsname.is_some_and(|f| f != fs) {
                    return Err(Error::Invalid {
                        cmd: CMD,
                        msg: "filesystem name incorrect".to_string(),
                        errno: nacre_core::Errno::ENODEV,
                    });
                }
                Some(pool.to_string())
            }
            None => Some(p.clone()),
        },
    };
    // Neither -m nor -o: both kinds.
    let (want_mdt, want_ost) = match (opts.mdt, opts.ost) {
        (None, None) => (true, true),
        (m, o) => (m.is_some(), o.is_some()),
    };
    let mdt_idx = opts.mdt.flatten();
    let ost_idx = opts.ost.flatten();
    let show_headers =
        mdt_idx.is_none() && ost_idx.is_none() && !opts.no_header && !opts.only_summary;
    let only_summary = mdt_idx.is_none() && ost_idx.is_none() && opts.only_summary;
    let f = Fmt { o: opts };
    let mut out = String::new();
    if show_headers {
        f.header(&mut out, &fields);
    }
    let mut sum = Row {
        blocks: 0,
        bfree: 0,
        bavail: 0,
        files: 0,
        ffree: 0,
        state: 0,
    };
    let (mut ost_files, mut ost_ffree) = (0u64, 0u64);
    for (kind, label, wanted, only) in [
        (TargetKind::Mdt, "MDT", want_mdt, mdt_idx),
        (TargetKind::Ost, "OST", want_ost, ost_idx),
    ] {
        if !wanted {
            continue;
        }
        let mut list: Vec<&TargetStat> = targets
            .iter()
            .filter(|t| t.kind == kind && only.is_none_or(|i| i == t.index))
            .collect();
        list.sort_by_key(|t| t.index);
        let mut have_ost = false;
        for t in list {
            if !t.active && !opts.verbose {
                continue;
            }
            // With OSTs, MDT space is not file data space: the summary counts OSTs only.
            if kind == TargetKind::Ost && !have_ost {
                have_ost = true;
                sum.blocks = 0;
                sum.bfree = 0;
                sum.bavail = 0;
            }
            if kind == TargetKind::Ost && pool.as_ref().is_some_and(|p| !t.pools.contains(p)) {
                continue;
            }
            if !only_summary {
                if t.active {
                    let r = Row {
                        blocks: t.blocks,
                        bfree: t.bfree,
                        bavail: t.bavail,
                        files: t.files,
                        ffree: t.ffree,
                        state: t.state,
                    };
                    let uuid = format!("{}_UUID", t.name);
                    f.row(
                        &mut out,
                        &fields,
                        &uuid,
                        &r,
                        mount,
                        Some(format!("[{label}:{}]", t.index)),
                    );
                } else {
                    let _ = writeln!(
                        out,
                        "{:<20}: inactive device",
                        format!("{label}{:04x}", t.index)
                    );
                }
            }
            if !t.active {
                continue;
            }
            if kind == TargetKind::Mdt {
                sum.files = sum.files.saturating_add(t.files);
                sum.ffree = sum.ffree.saturating_add(t.ffree);
            } else {
                ost_files = ost_files.saturating_add(t.files);
                ost_ffree = ost_ffree.saturating_add(t.ffree);
            }
            sum.blocks = sum.blocks.saturating_add(t.blocks);
            sum.bfree = sum.bfree.saturating_add(t.bfree);
            sum.bavail = sum.bavail.saturating_add(t.bavail);
        }
    }
    // Fewer free OST objects than free MDT inodes limit how many files can be made.
    if ost_files != 0 && ost_ffree < sum.ffree {
        sum.files = sum
            .files
            .saturating_sub(sum.ffree)
            .saturating_add(ost_ffree);
        sum.ffree = ost_ffree;
    }
    if show_headers || only_summary {
        if !only_summary {
            out.push('\n');
        }
        f.row(&mut out, &fields, "filesystem_summary:", &sum, mount, None);
        if !only_summary {
            out.push('\n');
        }
    }
    Ok(out)
}
