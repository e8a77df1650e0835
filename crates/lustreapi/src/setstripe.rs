//! `lfs setstripe` and `lfs migrate`: their option syntax (as `lfs.c` hands it to
//! `getopt_long`), the layout a command line describes (plain or composite, with
//! Data-on-MDT) and the component add/delete requests. The layout rules themselves
//! ([`validate`]) live in `nacre_core::layout_rules`, shared with the MDT, and are
//! re-exported here.

use crate::cnum::{parse_c_long, parse_c_ulong};
use crate::error::{Error, Result};
use crate::getopt::{HasArg, LongOpt, OptSpec, Parsed, getopt, lo, owned};
use crate::size::parse_size;
use nacre_core::Errno;
use nacre_core::layout::{
    COMPONENT_FLAG_NAMES, Component, EOF, LCME_FL_NOSYNC, LCME_FL_PREF_RW, Layout, MAX_DOM_SIZE,
    MAX_MIRROR_COUNT, MAX_STRIPE_COUNT, MIN_STRIPE_SIZE, pflr_id,
};
use nacre_core::lmv::HashType;
use serde::{Deserialize, Serialize};

const CMD: &str = "lfs setstripe";
const MIGRATE: &str = "lfs migrate";

/// `LOV_V1_INSANE_STRIPE_INDEX`: the largest index `-i` accepts.
pub const MAX_STRIPE_INDEX: i64 = 0xffe0 - 1;
/// `LCME_ID_MAX`.
pub const MAX_COMPONENT_ID: u64 = 0x7fff_ffff;
use nacre_core::layout_rules::check_structure;
pub use nacre_core::layout_rules::{LayoutCtx, LayoutError, MAX_POOL_NAME, mirror_id_of, validate};

/// Which component(s) a `--component-del` or `--component-set` acts on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ComponentSelector {
    /// `-I ID`.
    Id(u32),
    /// `--component-flags F`: components with all of `flags` set and none of `neg_flags`
    /// (`^init` selects the components not yet instantiated).
    Flags { flags: u32, neg_flags: u32 },
}

impl ComponentSelector {
    pub fn matches(&self, c: &Component) -> bool {
        match self {
            ComponentSelector::Id(id) => c.id == *id,
            ComponentSelector::Flags { flags, neg_flags } => {
                c.flags & flags == *flags && c.flags & neg_flags == 0
            }
        }
    }
}

/// What a `lfs setstripe` command line asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SetstripeAction {
    /// Create each FILE with this layout, or make it each DIR's default layout. Values
    /// left unset are 0 (count, size) or -1 (offset): the file system default applies.
    /// Component ids are 0: the MDT numbers them when it creates the file.
    SetLayout(Layout),
    /// `-d`: delete each directory's default layout.
    DeleteDefault,
    /// `--component-add`: append these components to each file. Their extents start at
    /// 0; [`rebase_added_components`] moves them after the file's last component.
    AddComponents(Vec<Component>),
    /// `--component-del`.
    DeleteComponents(ComponentSelector),
    /// `--component-set`: set (`flags`) or clear (`neg_flags`) component flags.
    SetComponentFlags {
        selector: ComponentSelector,
        flags: u32,
        neg_flags: u32,
    },
    /// `--yaml FILE`: the layout comes from a template file (`lfs getstripe -y` output).
    FromYaml(String),
    /// `--copy FILE`: the layout is copied from another file.
    CopyLayout(String),
}

/// A parsed `lfs setstripe` command line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetstripeRequest {
    pub action: SetstripeAction,
    /// `--mode`: permission bits of the files created.
    pub mode: Option<u32>,
    pub paths: Vec<String>,
}

/// A parsed `lfs migrate` command line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MigrateRequest {
    /// Move file data into a new layout (same FID).
    Ost(OstMigrate),
    /// `-m IDX[,IDX..]`: move directories and their inodes to other MDTs (new FIDs).
    Mdt(MdtMigrate),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OstMigrate {
    /// The new layout; `None` keeps each file's current layout (`lfs migrate FILE`
    /// restripes with the same layout, objects reallocated).
    pub layout: Option<Layout>,
    /// `--yaml FILE` or `--copy FILE`.
    pub template: Option<SetstripeAction>,
    /// `-n`: give up if the file is in use, instead of blocking access (`-b`, default).
    pub non_block: bool,
    /// `-D`: buffered rather than direct IO.
    pub non_direct: bool,
    pub verbose: bool,
    /// `-W`: bandwidth limit in bytes per second.
    pub bandwidth: Option<u64>,
    /// `-0`/`--null`: file names come NUL-separated on stdin.
    pub null: bool,
    /// `--files-from`.
    pub files_from: Option<String>,
    pub paths: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MdtMigrate {
    /// Target MDTs; the first is the starting MDT (`-1`: chosen by space).
    pub mdts: Vec<i64>,
    /// `-c`: stripe count of migrated directories.
    pub stripe_count: Option<i64>,
    /// `-H`.
    pub hash: Option<HashType>,
    /// `-d`: only DIR itself and its direct non-directory children.
    pub directory_only: bool,
    /// `--clear-fixed`: do not mark migrated directories `fixed`.
    pub clear_fixed: bool,
    pub verbose: bool,
    pub paths: Vec<String>,
}

// Long-only option codes, as lfs.c numbers them after the short letters.
const OPT_COMP_ADD: u32 = 256;
const OPT_COMP_DEL: u32 = 257;
const OPT_COMP_FLAGS: u32 = 258;
const OPT_COMP_SET: u32 = 259;
const OPT_NO_VERIFY: u32 = 260;
const OPT_FLAGS: u32 = 261;
const OPT_FOREIGN: u32 = 262;
const OPT_MIRROR_ID: u32 = 263;
const OPT_MODE: u32 = 264;
const OPT_COPY: u32 = 265;
const OPT_RESTRIPE: u32 = 266;
const OPT_STATS: u32 = 267;
const OPT_STATS_INTERVAL: u32 = 268;
const OPT_FILES_FROM: u32 = 269;
const OPT_LUSTRE_DIR: u32 = 270;
const OPT_EC: u32 = 271;
const OPT_CLEAR_FIXED: u32 = 272;

const fn c(ch: char) -> u32 {
    ch as u32
}

const LONG: &[LongOpt] = &[
    lo("comp-add", HasArg::No, OPT_COMP_ADD),
    lo("component-add", HasArg::No, OPT_COMP_ADD),
    lo("comp-del", HasArg::No, OPT_COMP_DEL),
    lo("component-del", HasArg::No, OPT_COMP_DEL),
    lo("comp-flags", HasArg::Required, OPT_COMP_FLAGS),
    lo("component-flags", HasArg::Required, OPT_COMP_FLAGS),
    lo("comp-set", HasArg::No, OPT_COMP_SET),
    lo("component-set", HasArg::No, OPT_COMP_SET),
    lo("no-verify", HasArg::No, OPT_NO_VERIFY),
    lo("flags", HasArg::Required, OPT_FLAGS),
    lo("foreign", HasArg::Optional, OPT_FOREIGN),
    lo("mirror-id", HasArg::Required, OPT_MIRROR_ID),
    lo("mode", HasArg::Required, OPT_MODE),
    lo("copy", HasArg::Required, OPT_COPY),
    lo("restripe", HasArg::No, OPT_RESTRIPE),
    lo("stats", HasArg::No, OPT_STATS),
    lo("stats-interval", HasArg::Required, OPT_STATS_INTERVAL),
    lo("files-from", HasArg::Required, OPT_FILES_FROM),
    lo("lustre-dir", HasArg::Required, OPT_LUSTRE_DIR),
    lo("null", HasArg::No, c('0')),
    lo("auto-stripe", HasArg::No, c('A')),
    lo("block", HasArg::No, c('b')),
    lo("stripe-count", HasArg::Required, c('c')),
    lo("stripe_count", HasArg::Required, c('c')),
    lo("mdt-count", HasArg::Required, c('c')),
    lo("overstripe-count", HasArg::Required, c('C')),
    lo("mdt-overcount", HasArg::Required, c('C')),
    lo("delete", HasArg::No, c('d')),
    lo("destroy", HasArg::No, c('d')),
    lo("directory", HasArg::No, c('d')),
    lo("non-direct", HasArg::No, c('D')),
    lo("comp-end", HasArg::Required, c('E')),
    lo("component-end", HasArg::Required, c('E')),
    lo("ec", HasArg::Required, OPT_EC),
    lo("ec-stripe-count", HasArg::Required, OPT_EC),
    lo("ec-expert", HasArg::Required, OPT_EC),
    lo("file", HasArg::Required, c('f')),
    lo("fid", HasArg::No, c('F')),
    lo("help", HasArg::No, c('h')),
    lo("mdt-hash", HasArg::Required, c('H')),
    lo("stripe-index", HasArg::Required, c('i')),
    lo("stripe_index", HasArg::Required, c('i')),
    lo("comp-id", HasArg::Required, c('I')),
    lo("component-id", HasArg::Required, c('I')),
    lo("auto-cap", HasArg::Required, c('K')),
    lo("layout", HasArg::Required, c('L')),
    lo("mdt", HasArg::Required, c('m')),
    lo("mdt-index", HasArg::Required, c('m')),
    lo("mdt_index", HasArg::Required, c('m')),
    lo("min-free", HasArg::Required, c('M')),
    lo("non-block", HasArg::No, c('n')),
    lo("mirror-count", HasArg::Optional, c('N')),
    lo("ost", HasArg::Required, c('o')),
    lo("ost-list", HasArg::Required, c('o')),
    lo("ost_list", HasArg::Required, c('o')),
    lo("pool", HasArg::Required, c('p')),
    lo("stripe-size", HasArg::Required, c('S')),
    lo("stripe_size", HasArg::Required, c('S')),
    lo("verbose", HasArg::No, c('v')),
    lo("bandwidth-limit", HasArg::Required, c('W')),
    lo("xattr", HasArg::Required, c('x')),
    lo("max-free", HasArg::Required, c('X')),
    lo("yaml", HasArg::Required, c('y')),
    lo("ext-size", HasArg::Required, c('z')),
    lo("extension-size", HasArg::Required, c('z')),
    lo("clear-fixed", HasArg::No, OPT_CLEAR_FIXED),
];

const SHORT: &str = "0Abc:C:dDE:f:FhH:i:I:K:m:M:N::no:p:L:s:S:vx:X:W:y:z:";

/// The stripe options of the component being described (`struct lfs_setstripe_args`).
#[derive(Clone, Debug, Default)]
struct Lsa {
    /// 0 until `-E` is given.
    comp_end: u64,
    stripe_size: Option<u64>,
    stripe_count: Option<i64>,
    stripe_off: Option<i64>,
    comp_flags: u32,
    comp_neg_flags: u32,
    dom: bool,
    tgts: Vec<u32>,
    pool: Option<String>,
    /// `--ec D+P`: this component is erasure coded (not carried to the next one).
    ec: Option<(u8, u8)>,
}

impl Lsa {
    /// `setstripe_args_specified`.
    fn specified(&self) -> bool {
        self.stripe_size.is_some()
            || self.stripe_count.is_some()
            || self.stripe_off.is_some()
            || self.dom
            || self.comp_end != 0
    }

    /// `setstripe_args_init_inherit`: the next component keeps stripe count, stripe size
    /// (unless this one was Data-on-MDT, whose size is its end) and pool.
    fn inherit(&self) -> Lsa {
        Lsa {
            stripe_size: if self.dom { None } else { self.stripe_size },
            stripe_count: self.stripe_count,
            pool: self.pool.clone(),
            ..Lsa::default()
        }
    }
}

/// `comp_str2flags`: `init,^stale` into (flags, negated flags).
pub fn parse_component_flags(s: &str) -> std::result::Result<(u32, u32), String> {
    if s.is_empty() {
        return Err("empty component flags".to_string());
    }
    let (mut flags, mut neg) = (0u32, 0u32);
    for name in s.split(',').filter(|n| !n.is_empty()) {
        let (negated, bare) = match name.strip_prefix('^') {
            Some(b) => (true, b),
            None => (false, name),
        };
        let bits = COMPONENT_FLAG_NAMES
            .iter()
            .find(|(_, n)| *n == bare)
            .map(|(b, _)| *b)
            .ok_or_else(|| format!("component flag '{name}' not supported"))?;
        if negated {
            neg |= bits;
        } else {
            flags |= bits;
        }
    }
    if flags == 0 && neg == 0 {
        return Err(format!("invalid component flags '{s}'"));
    }
    if flags & neg != 0 {
        return Err(format!("component flags '{s}' both set and exclude a flag"));
    }
    Ok((flags, neg))
}

/// `parse_targets`: `1,2-4,7` into indexes, appended to `into`. Returns whether an index
/// was already present (overstriping).
pub(crate) fn parse_targets(arg: &str, into: &mut Vec<u32>, max: usize) -> Option<bool> {
    let mut dup = false;
    for item in arg.split(',') {
        let (lo, hi) = match split_range(item) {
            Some((a, b)) => (parse_c_long(a)?, parse_c_long(b)?),
            None => {
                let v = parse_c_long(item)?;
                (v, v)
            }
        };
        if lo < 0 || hi < lo || hi > i64::from(u32::MAX) {
            return None;
        }
        for idx in lo..=hi {
            let idx = idx as u32;
            if into.len() >= max {
                return None;
            }
            dup |= into.contains(&idx);
            into.push(idx);
        }
    }
    Some(dup)
}

/// `"2-4"` into `("2", "4")`; a leading sign belongs to the first number.
fn split_range(item: &str) -> Option<(&str, &str)> {
    let body_start = usize::from(item.starts_with(['-', '+']));
    let pos = item[body_start..].find('-')? + body_start;
    Some((&item[..pos], &item[pos + 1..]))
}

/// `arg_is_eof`: `-1`, `eof`, `EOF` (Lustre compares only the prefix).
fn arg_is_eof(arg: &str) -> bool {
    arg.starts_with("-1") || arg.starts_with("EOF") || arg.starts_with("eof")
}

/// Which command is being parsed: the same parser serves both, as in `lfs.c`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Opc {
    Setstripe,
    Migrate,
}

impl Opc {
    fn cmd(self) -> &'static str {
        match self {
            Opc::Setstripe => CMD,
            Opc::Migrate => MIGRATE,
        }
    }
}

/// One `-N[COUNT]` of `lfs setstripe -N` / `lfs mirror create` (`struct mirror_args`).
#[derive(Clone, Debug, Default)]
struct MirrorArgs {
    count: u32,
    /// No stripe option followed this `-N`: the mirror takes the previous one's layout.
    inherit: bool,
    /// `--flags` (`prefer`, `prefrd`, `prefwr`, `nosync`) for every component.
    flags: u32,
    components: Vec<Component>,
}

#[derive(Default)]
struct State {
    lsa: Lsa,
    /// `-N` seen: the stripe options describe mirrors.
    mirrors: Vec<MirrorArgs>,
    components: Vec<Component>,
    /// `--ec` of each of `components`.
    ec: Vec<Option<(u8, u8)>>,
    delete: bool,
    comp_add: bool,
    comp_del: bool,
    comp_set: bool,
    comp_id: u32,
    yaml: Option<String>,
    copy: Option<String>,
    mode: Option<u32>,
    // migrate only
    block: bool,
    non_block: bool,
    non_direct: bool,
    verbose: bool,
    mdt_mode: bool,
    mdt_tgts: Vec<u32>,
    mdt_off: Option<i64>,
    hash: Option<HashType>,
    clear_fixed: bool,
    directory_only: bool,
    bandwidth: Option<u64>,
    null: bool,
    files_from: Option<String>,
}

fn unsupported(cmd: &'static str, what: &str) -> Error {
    Error::Invalid {
        cmd,
        msg: format!("{what} is not supported"),
        errno: Errno::ENOTSUP,
    }
}

/// Adds the component `lsa` describes after the ones already built
/// (`comp_args_to_layout`).
fn build_component(cmd: &'static str, st: &mut State) -> Result<()> {
    let prev_end = st.components.last().map_or(0, |c| c.end);
    let lsa = &mut st.lsa;
    let end = lsa.comp_end;
    if prev_end > end {
        return Err(Error::invalid(
            cmd,
            format!("component extent [{prev_end}, {end}) ends before it starts"),
        ));
    }
    if lsa.dom {
        // Values a YAML template or the user may repeat harmlessly.
        if lsa.stripe_count == Some(0) {
            lsa.stripe_count = None;
        }
        if lsa.stripe_size == Some(end) {
            lsa.stripe_size = None;
        }
        if matches!(lsa.stripe_off, Some(0) | Some(-1)) {
            lsa.stripe_off = None;
        }
        let dom_err = |msg: String| Error::invalid(cmd, msg);
        if let Some(c) = lsa.stripe_count {
            return Err(dom_err(format!(
                "Option 'stripe-count' can't be specified with Data-on-MDT component: {c}"
            )));
        }
        if let Some(s) = lsa.stripe_size
            && s != end - prev_end
        {
            return Err(dom_err(format!(
                "Option 'stripe-size' can't be specified with Data-on-MDT component: {s}"
            )));
        }
        if !lsa.tgts.is_empty() {
            return Err(dom_err(format!(
                "Option 'ost-list' can't be specified with Data-on-MDT component: '{}'",
                lsa.tgts.len()
            )));
        }
        if let Some(o) = lsa.stripe_off {
            return Err(dom_err(format!(
                "Option 'stripe-offset' can't be specified with Data-on-MDT component: {o}"
            )));
        }
        if let Some(p) = &lsa.pool {
            return Err(dom_err(format!(
                "Option 'pool' can't be specified with Data-on-MDT component: '{p}'"
            )));
        }
        // A Data-on-MDT component is one stripe up to its end.
        let size = u32::try_from(end).map_err(|_| {
            Error::invalid(
                cmd,
                format!("Set stripe size {end} failed: Invalid argument"),
            )
        })?;
        let mut comp = Component::dom(end);
        comp.start = prev_end;
        comp.stripe_size = size;
        comp.flags = lsa.comp_flags;
        lsa.stripe_size = Some(end);
        if lsa.ec.is_some() {
            return Err(Error::invalid(
                cmd,
                "--ec can't be specified with a Data-on-MDT component",
            ));
        }
        st.components.push(comp);
        st.ec.push(None);
        return Ok(());
    }
    check_stripe_count_vs_list(cmd, lsa)?;
    let mut comp = Component::raid0(
        prev_end,
        end,
        lsa.stripe_count.map_or(0, |c| c as i32),
        lsa.stripe_size.map_or(0, |s| s as u32),
        lsa.stripe_off.map_or(-1, |o| o as i32),
    );
    comp.flags = lsa.comp_flags;
    comp.pool = lsa.pool.clone().unwrap_or_default();
    if !lsa.tgts.is_empty() {
        let off = lsa.stripe_off.unwrap_or(-1);
        if !lsa.tgts.iter().any(|&t| i64::from(t) == off) {
            return Err(Error::invalid(
                cmd,
                format!("Invalid stripe offset '{off}', not in the target list"),
            ));
        }
        comp.ost_list = lsa.tgts.clone();
        comp.stripe_count = lsa.tgts.len() as i32;
    }
    st.components.push(comp);
    st.ec.push(lsa.ec);
    Ok(())
}

/// Flags `--flags` may give a mirror.
const MIRROR_FLAGS: u32 = LCME_FL_PREF_RW | LCME_FL_NOSYNC;

/// Closes the mirror being described (at the next `-N` or the end of the options): its
/// stripe options become its components, or it inherits the previous mirror's layout when
/// it has none. Stripe options before the first `-N` are an error.
fn wrap_up_mirror(cmd: &'static str, st: &mut State) -> Result<()> {
    let described = st.lsa.specified() || !st.components.is_empty();
    let Some(m) = st.mirrors.last_mut() else {
        if described {
            return Err(Error::usage(
                cmd,
                "stripe options must follow -N when creating a mirrored file",
            ));
        }
        return Ok(());
    };
    if !described {
        m.inherit = true;
        return Ok(());
    }
    if st.lsa.comp_end == 0 {
        st.lsa.comp_end = EOF;
    }
    build_component(cmd, st)?;
    st.lsa = Lsa::default();
    let comps = std::mem::take(&mut st.components);
    if let Some(m) = st.mirrors.last_mut() {
        m.components = comps;
    }
    Ok(())
}

/// The composite layout of the mirrors described: each `-N COUNT` repeated, components
/// carrying their mirror id (1, 2, ...) in `lcme_id`, the MDT numbering their sequence.
fn mirrored_layout(cmd: &'static str, st: &mut State) -> Result<Layout> {
    wrap_up_mirror(cmd, st)?;
    if st.ec.iter().any(Option::is_some) {
        return Err(unsupported(cmd, "--ec with -N"));
    }
    // The mirror count's limit is a layout rule: `check_structure` below.
    let mut components = Vec::new();
    let mut prev: Vec<Component> = vec![Component::raid0(0, EOF, 0, 0, -1)];
    let mut mirror_id = 0;
    for m in &st.mirrors {
        let base = if m.inherit {
            prev.clone()
        } else {
            m.components.clone()
        };
        for _ in 0..m.count {
            mirror_id += 1;
            for c in &base {
                let mut c = c.clone();
                c.id = pflr_id(mirror_id, 0);
                c.flags = (c.flags & !MIRROR_FLAGS) | m.flags;
                components.push(c);
            }
        }
        prev = base;
    }
    let layout = Layout {
        composite: true,
        layout_gen: 0,
        flags: 0,
        components,
    };
    check_structure(&layout)?;
    Ok(layout)
}

/// `lsa_args_stripe_count_check`: `-c` must agree with an `-o` list.
fn check_stripe_count_vs_list(cmd: &'static str, lsa: &Lsa) -> Result<()> {
    let n = lsa.tgts.len();
    if n == 0 {
        return Ok(());
    }
    if n >= MAX_STRIPE_COUNT as usize {
        return Err(Error::invalid(cmd, format!("Invalid nr_tgts({n})")));
    }
    if let Some(c) = lsa.stripe_count
        && c > 0
        && c as usize != n
    {
        return Err(Error::invalid(
            cmd,
            format!("stripe_count({c}) != nr_tgts({n})"),
        ));
    }
    Ok(())
}

fn parse_common(opc: Opc, args: &[String]) -> Result<(State, Vec<String>)> {
    let cmd = opc.cmd();
    let spec = OptSpec {
        short: SHORT,
        long: LONG,
        in_order: false,
        long_only: false,
    };
    let mut st = State::default();
    let mut paths = Vec::new();
    let migrate = opc == Opc::Migrate;
    for item in getopt(cmd, &spec, args)? {
        let (val, arg, text) = match item {
            Parsed::Operand(p) => {
                paths.push(p);
                continue;
            }
            Parsed::Opt { val, arg, text } => (val, arg.unwrap_or_default(), text),
        };
        let ch = char::from_u32(val).unwrap_or('\0');
        match (val, ch) {
            (OPT_COMP_ADD, _) => st.comp_add = true,
            (OPT_COMP_DEL, _) => st.comp_del = true,
            (OPT_COMP_SET, _) => st.comp_set = true,
            (OPT_COMP_FLAGS, _) => {
                let (f, n) = parse_component_flags(&arg).map_err(|m| Error::usage(cmd, m))?;
                st.lsa.comp_flags = f;
                st.lsa.comp_neg_flags = n;
            }
            (OPT_MODE, _) => {
                let m = u32::from_str_radix(&arg, 8)
                    .map_err(|_| Error::usage(cmd, format!("bad mode '{arg}'")))?;
                st.mode = Some(m);
            }
            (OPT_COPY, _) => st.copy = Some(arg),
            (OPT_CLEAR_FIXED, _) => {
                if !migrate {
                    return Err(Error::usage(
                        cmd,
                        "--clear-fixed valid only for migrate command",
                    ));
                }
                st.clear_fixed = true;
            }
            (OPT_FILES_FROM, _) if migrate => st.files_from = Some(arg),
            (_, '0') if migrate => st.null = true,
            (_, 'N') if !migrate => {
                let count = match arg.as_str() {
                    "" => 1,
                    a => parse_c_ulong(a)
                        .filter(|&n| n >= 1 && n <= u64::from(MAX_MIRROR_COUNT))
                        .ok_or_else(|| Error::usage(cmd, format!("bad mirror count: {a}")))?
                        as u32,
                };
                wrap_up_mirror(cmd, &mut st)?;
                st.mirrors.push(MirrorArgs {
                    count,
                    ..MirrorArgs::default()
                });
            }
            (OPT_FLAGS, _) if !migrate => {
                let (f, n) = parse_component_flags(&arg).map_err(|m| Error::usage(cmd, m))?;
                if n != 0 || f & !MIRROR_FLAGS != 0 {
                    return Err(Error::usage(
                        cmd,
                        format!(
                            "{arg}: only 'prefer', 'prefrd', 'prefwr' and 'nosync' apply to a mirror"
                        ),
                    ));
                }
                let Some(m) = st.mirrors.last_mut() else {
                    return Err(Error::usage(cmd, "--flags must follow -N"));
                };
                m.flags |= f;
            }
            (OPT_NO_VERIFY, _) | (OPT_FLAGS, _) | (OPT_MIRROR_ID, _) | (_, 'N') | (_, 'f') => {
                return Err(unsupported(cmd, "mirroring (FLR)"));
            }
            (OPT_FOREIGN, _) | (_, 'x') => return Err(unsupported(cmd, "a foreign layout")),
            (OPT_EC, _) if text.trim_start_matches('-') == "ec" && !migrate => {
                let g = nacre_core::ec::parse_geometry(&arg)
                    .map_err(|e| Error::invalid(cmd, e.to_string()))?;
                st.lsa.ec = Some(g);
            }
            (OPT_EC, _) => return Err(unsupported(cmd, format!("'{text}'").as_str())),
            (OPT_RESTRIPE, _) | (_, 'A') | (_, 'K') | (_, 'M') | (_, 'X') => {
                return Err(unsupported(cmd, format!("'{text}'").as_str()));
            }
            (OPT_STATS, _) | (OPT_STATS_INTERVAL, _) | (OPT_LUSTRE_DIR, _) | (_, 'F') => {
                return Err(unsupported(cmd, format!("'{text}'").as_str()));
            }
            (_, 'z') => return Err(unsupported(cmd, "a self-extending layout (-z)")),
            (_, 'C') => {
                if st.lsa.dom {
                    return Err(Error::usage(
                        cmd,
                        "-C|--overstripe-count incompatible with DoM layout",
                    ));
                }
                return Err(unsupported(cmd, "overstriping (-C)"));
            }
            (_, 'b') => {
                if !migrate {
                    return Err(Error::usage(
                        cmd,
                        "-b|--block valid only for migrate command",
                    ));
                }
                st.block = true;
            }
            (_, 'n') => {
                if !migrate {
                    return Err(Error::usage(
                        cmd,
                        "-n|--non-block valid only for migrate command",
                    ));
                }
                st.non_block = true;
            }
            (_, 'D') => {
                if !migrate {
                    return Err(Error::usage(
                        cmd,
                        "-D|--non-direct is valid only for migrate or mirror command",
                    ));
                }
                st.non_direct = true;
            }
            (_, 'v') => {
                if !migrate {
                    return Err(Error::usage(
                        cmd,
                        "-v|--verbose valid only for migrate command",
                    ));
                }
                st.verbose = true;
            }
            (_, 'W') => {
                if !migrate {
                    return Err(Error::usage(
                        cmd,
                        "--bandwidth is valid only for migrate and mirror mode",
                    ));
                }
                let bw = parse_size(&arg, 1 << 20, false)
                    .map_err(|_| Error::usage(cmd, format!("bad value for bandwidth '{arg}'")))?;
                st.bandwidth = Some(bw.bytes);
            }
            (_, 'H') => {
                if !migrate {
                    return Err(Error::usage(
                        cmd,
                        "--mdt-hash is valid only for migrate command",
                    ));
                }
                st.hash =
                    Some(parse_hash_type(&arg).ok_or_else(|| {
                        Error::usage(cmd, format!("bad stripe hash type '{arg}'"))
                    })?);
            }
            (_, 'm') => {
                if !migrate {
                    return Err(Error::usage(
                        cmd,
                        "-m|--mdt-index is valid only for migrate command",
                    ));
                }
                st.mdt_mode = true;
                if arg.trim() == "-1" {
                    st.mdt_off.get_or_insert(-1);
                    continue;
                }
                parse_targets(&arg, &mut st.mdt_tgts, MAX_STRIPE_COUNT as usize)
                    .ok_or_else(|| Error::usage(cmd, format!("invalid MDT target(s) '{arg}'")))?;
                if st.mdt_off.is_none() {
                    st.mdt_off = st.mdt_tgts.first().map(|&t| i64::from(t));
                }
            }
            (_, 'c') => {
                let count = parse_c_ulong(&arg)
                    .map(|v| v as i64)
                    .filter(|&v| (-1..=i64::from(MAX_STRIPE_COUNT)).contains(&v))
                    .ok_or_else(|| Error::usage(cmd, format!("invalid stripe count '{arg}'")))?;
                st.lsa.stripe_count = Some(count);
            }
            (_, 'd') => {
                if migrate {
                    st.directory_only = true;
                } else {
                    st.delete = true;
                }
            }
            (_, 'E') => {
                if st.lsa.comp_end != 0 {
                    build_component(cmd, &mut st)?;
                    st.lsa = st.lsa.inherit();
                }
                st.lsa.comp_end = if arg_is_eof(&arg) {
                    EOF
                } else {
                    let bad = || Error::usage(cmd, format!("invalid component end '{arg}'"));
                    let mut end = parse_size(&arg, 1, false).map_err(|_| bad())?.bytes;
                    // A bare number this small can only mean KiB.
                    if end < 4096 {
                        end *= 1024;
                    }
                    if end % u64::from(MIN_STRIPE_SIZE) != 0 {
                        return Err(bad());
                    }
                    end
                };
            }
            (_, 'i') => {
                let off = parse_c_long(&arg)
                    .filter(|&v| (-1..=MAX_STRIPE_INDEX).contains(&v))
                    .ok_or_else(|| Error::usage(cmd, format!("invalid stripe offset '{arg}'")))?;
                st.lsa.stripe_off = (off != -1).then_some(off);
                if migrate && st.mdt_mode {
                    st.mdt_off = Some(off);
                }
            }
            (_, 'I') => {
                let id = parse_c_ulong(&arg)
                    .filter(|&v| {
                        v != 0 && v <= MAX_COMPONENT_ID && !arg.trim_start().starts_with('-')
                    })
                    .ok_or_else(|| Error::usage(cmd, format!("invalid component ID '{arg}'")))?;
                st.comp_id = id as u32;
            }
            (_, 'L') => match arg.as_str() {
                "mdt" => {
                    if !st.components.is_empty() {
                        return Err(Error::invalid(
                            cmd,
                            "'mdt' layout can be only the first one",
                        ));
                    }
                    if st.lsa.comp_end > MAX_DOM_SIZE {
                        return Err(Error::Invalid {
                            cmd,
                            msg: "'mdt' layout size is too big".to_string(),
                            errno: Errno::EFBIG,
                        });
                    }
                    st.lsa.dom = true;
                    st.lsa.stripe_size = None;
                }
                "raid0" => {}
                other => {
                    return Err(Error::invalid(
                        cmd,
                        format!(
                            "layout '{other}' is unknown, supported layouts are: 'mdt', 'raid0'"
                        ),
                    ));
                }
            },
            (_, 'o') => {
                if st.lsa.dom {
                    return Err(Error::usage(cmd, "-o|--ost incompatible with DoM layout"));
                }
                let dup = parse_targets(&arg, &mut st.lsa.tgts, MAX_STRIPE_COUNT as usize)
                    .ok_or_else(|| Error::usage(cmd, format!("invalid OST target(s) '{arg}'")))?;
                if dup {
                    // More than one stripe on an OST is overstriping.
                    return Err(unsupported(cmd, "overstriping (an OST listed twice in -o)"));
                }
                if st.lsa.stripe_off.is_none() {
                    st.lsa.stripe_off = st.lsa.tgts.first().map(|&t| i64::from(t));
                }
            }
            (_, 'p') => {
                // "" and "inherit"/"none" mean: take the parent's or root's pool.
                st.lsa.pool = match arg.as_str() {
                    "" | "inherit" | "none" => None,
                    p => Some(p.to_string()),
                };
            }
            (_, 'S') => {
                let bad = || Error::usage(cmd, format!("invalid stripe size '{arg}'"));
                let mut size = parse_size(&arg, 1, false).map_err(|_| bad())?.bytes;
                // A bare number this small can only mean KiB.
                if size < 4096 {
                    size *= 1024;
                }
                if size % u64::from(MIN_STRIPE_SIZE) != 0 || size > u64::from(u32::MAX) {
                    return Err(bad());
                }
                st.lsa.stripe_size = Some(size);
            }
            (_, 'y') => st.yaml = Some(arg),
            (_, 'h') => return Err(Error::usage(cmd, "help requested")),
            _ => return Err(Error::usage(cmd, format!("unrecognized option '{text}'"))),
        }
    }
    Ok((st, paths))
}

/// `check_hashtype`: a name, or the number of a known type (`atoi`, as `lfs` reads it).
pub(crate) fn parse_hash_type(s: &str) -> Option<HashType> {
    match crate::cnum::atoi(s) {
        1 => Some(HashType::AllChar),
        2 => Some(HashType::Fnv1a64),
        3 => Some(HashType::Crush),
        4 => Some(HashType::Crush2),
        _ => match s {
            "all_char" => Some(HashType::AllChar),
            "fnv_1a_64" => Some(HashType::Fnv1a64),
            "crush" => Some(HashType::Crush),
            "crush2" => Some(HashType::Crush2),
            _ => None,
        },
    }
}

/// The checks `lfs` makes once every option is read, shared by setstripe and migrate.
fn finish_checks(cmd: &'static str, st: &State) -> Result<()> {
    let layout_given = !st.components.is_empty();
    let specified = st.lsa.specified() || st.hash.is_some();
    if st.comp_set && st.comp_id == 0 && st.lsa.pool.is_none() {
        return Err(Error::usage(
            cmd,
            "--component-set doesn't have component-id or mirror-id set",
        ));
    }
    let exclusive = [st.delete, st.comp_set, st.comp_del, st.comp_add];
    if exclusive.iter().filter(|b| **b).count() > 1 {
        return Err(Error::usage(
            cmd,
            "options --component-set, --component-del, --component-add and -d are mutually exclusive",
        ));
    }
    if st.delete && (specified || st.comp_id != 0 || st.lsa.comp_flags != 0 || layout_given) {
        return Err(Error::usage(
            cmd,
            "option -d is mutually exclusive with -s, -c, -o, -p, -I, -F and -E options",
        ));
    }
    if (st.comp_set || st.comp_del) && (specified || layout_given) {
        return Err(Error::usage(
            cmd,
            "options --component-del and --component-set are mutually exclusive when used with -c, -E, -o, -p, or -s",
        ));
    }
    if st.comp_del && st.comp_id != 0 && st.lsa.comp_flags != 0 {
        return Err(Error::usage(
            cmd,
            "options -I and -F are mutually exclusive when used with --component-del",
        ));
    }
    if st.comp_add && !layout_given {
        return Err(Error::usage(
            cmd,
            "option -E must be specified with --component-add",
        ));
    }
    if st.yaml.is_some() && st.copy.is_some() {
        return Err(Error::invalid(
            cmd,
            "can't specify --yaml and --copy together",
        ));
    }
    if (st.yaml.is_some() || st.copy.is_some()) && (specified || layout_given) {
        return Err(Error::invalid(
            cmd,
            "can't specify --yaml or --copy with -c, -S, -i, -o, -p or -E options.",
        ));
    }
    if st.non_block && st.block {
        return Err(Error::usage(
            cmd,
            "options --non-block and --block are mutually exclusive",
        ));
    }
    if !st.comp_del && !st.comp_set && st.comp_id != 0 {
        return Err(Error::usage(
            cmd,
            "option -I can only be used with --component-del or --component-set or lfs mirror split",
        ));
    }
    Ok(())
}

/// The plain (`lov_user_md`) layout of a command line without `-E`.
fn plain_layout(cmd: &'static str, lsa: &Lsa) -> Result<Layout> {
    check_stripe_count_vs_list(cmd, lsa)?;
    if lsa.dom {
        return Err(Error::invalid(
            cmd,
            "Invalid pattern: '-L mdt', must be specified with -E",
        ));
    }
    let mut layout = Layout::plain(
        lsa.stripe_count.map_or(0, |c| c as i32),
        lsa.stripe_size.map_or(0, |s| s as u32),
        lsa.stripe_off.map_or(-1, |o| o as i32),
    );
    let comp = &mut layout.components[0];
    comp.pool = lsa.pool.clone().unwrap_or_default();
    if !lsa.tgts.is_empty() {
        comp.ost_list = lsa.tgts.clone();
        comp.stripe_count = lsa.tgts.len() as i32;
        let off = lsa.stripe_off.unwrap_or(-1);
        if !lsa.tgts.iter().any(|&t| i64::from(t) == off) {
            return Err(Error::invalid(
                cmd,
                format!("Invalid stripe offset '{off}', not in the target list"),
            ));
        }
    }
    Ok(layout)
}

/// The layout the stripe options describe: composite if `-E` was used.
fn described_layout(cmd: &'static str, st: &mut State) -> Result<Option<Layout>> {
    if st.lsa.comp_end != 0 {
        build_component(cmd, st)?;
    }
    if st.components.is_empty() {
        return Ok(None);
    }
    let mut components = std::mem::take(&mut st.components);
    let ec = std::mem::take(&mut st.ec);
    if ec.iter().any(Option::is_some) {
        if st.comp_add {
            return Err(unsupported(cmd, "--ec with --component-add"));
        }
        components = nacre_core::ec::with_parity(components, &ec);
    }
    let layout = Layout {
        composite: true,
        layout_gen: 0,
        flags: 0,
        components,
    };
    check_structure(&layout)?;
    Ok(Some(layout))
}

/// Parses the arguments of `lfs setstripe` (everything after the command name).
///
/// ```
/// use nacre_lustreapi::setstripe::{parse_setstripe, SetstripeAction};
/// let req = parse_setstripe(&["-E", "1M", "-L", "mdt", "-E", "eof", "-c", "4", "f"]).unwrap();
/// let SetstripeAction::SetLayout(layout) = req.action else { panic!() };
/// assert_eq!(layout.components.len(), 2);
/// ```
pub fn parse_setstripe<S: AsRef<str>>(args: &[S]) -> Result<SetstripeRequest> {
    let (mut st, paths) = parse_common(Opc::Setstripe, &owned(args))?;
    if !st.mirrors.is_empty() {
        return mirror_create_request(CMD, st, paths);
    }
    // Stripe options must be turned into components before the checks look at them.
    let composite = if st.lsa.comp_end != 0 || !st.components.is_empty() {
        described_layout(CMD, &mut st)?
    } else {
        None
    };
    if let Some(l) = &composite {
        st.components = l.components.clone();
    }
    finish_checks(CMD, &st)?;
    if paths.is_empty() {
        return Err(Error::usage(CMD, "FILE must be specified"));
    }
    let action = if st.delete {
        SetstripeAction::DeleteDefault
    } else if st.comp_del {
        let (f, n) = (st.lsa.comp_flags, st.lsa.comp_neg_flags);
        SetstripeAction::DeleteComponents(component_del_selector(st.comp_id, f, n)?)
    } else if st.comp_set {
        let selector = ComponentSelector::Id(st.comp_id);
        SetstripeAction::SetComponentFlags {
            selector,
            flags: st.lsa.comp_flags,
            neg_flags: st.lsa.comp_neg_flags,
        }
    } else if let Some(y) = st.yaml {
        SetstripeAction::FromYaml(y)
    } else if let Some(c) = st.copy {
        SetstripeAction::CopyLayout(c)
    } else if st.comp_add {
        SetstripeAction::AddComponents(composite.map(|l| l.components).unwrap_or_default())
    } else if let Some(l) = composite {
        SetstripeAction::SetLayout(l)
    } else {
        let mut l = plain_layout(CMD, &st.lsa)?;
        if let Some(g) = st.lsa.ec {
            // `-c N --ec D+P`: the plain layout becomes its data mirror beside a parity
            // mirror, as Lustre does.
            l = Layout {
                components: nacre_core::ec::with_parity(l.components, &[Some(g)]),
                ..Layout::composite(Vec::new())
            };
        }
        check_structure(&l)?;
        SetstripeAction::SetLayout(l)
    };
    Ok(SetstripeRequest {
        action,
        mode: st.mode,
        paths,
    })
}

/// `lfs setstripe -N ...` and `lfs mirror create`: a new mirrored file (or a directory's
/// mirrored default layout).
fn mirror_create_request(
    cmd: &'static str,
    mut st: State,
    paths: Vec<String>,
) -> Result<SetstripeRequest> {
    if st.delete || st.comp_add || st.comp_del || st.comp_set || st.comp_id != 0 {
        return Err(Error::usage(
            cmd,
            "-N cannot be used with -d, --component-add, --component-del, --component-set or -I",
        ));
    }
    if st.yaml.is_some() || st.copy.is_some() {
        return Err(Error::usage(cmd, "-N cannot be used with --yaml or --copy"));
    }
    let layout = mirrored_layout(cmd, &mut st)?;
    if paths.is_empty() {
        return Err(Error::usage(cmd, "FILE must be specified"));
    }
    Ok(SetstripeRequest {
        action: SetstripeAction::SetLayout(layout),
        mode: st.mode,
        paths,
    })
}

/// Parses `lfs mirror create` (everything after `create`): `-N[COUNT]` with per-mirror
/// setstripe options, as `lfs setstripe -N`; at least one `-N`.
pub fn parse_mirror_create<S: AsRef<str>>(args: &[S]) -> Result<SetstripeRequest> {
    const MIRROR_CREATE: &str = "lfs mirror create";
    let (st, paths) = parse_common(Opc::Setstripe, &owned(args))?;
    if st.mirrors.is_empty() {
        return Err(Error::usage(
            MIRROR_CREATE,
            "no mirror specified (use -N to give one)",
        ));
    }
    mirror_create_request(MIRROR_CREATE, st, paths)
}

/// `lfs_component_del`'s rules for what may be deleted.
fn component_del_selector(id: u32, flags: u32, neg: u32) -> Result<ComponentSelector> {
    if flags != 0 && neg != 0 {
        return Err(Error::invalid(
            CMD,
            "cannot specify both positive and negative flags",
        ));
    }
    if flags == 0 && neg == 0 && id == 0 {
        return Err(Error::invalid(
            CMD,
            "neither flags nor component ID is specified",
        ));
    }
    if flags != 0 || neg != 0 {
        if id != 0 {
            return Err(Error::invalid(
                CMD,
                "cannot specify component ID and flags at the same time",
            ));
        }
        return Ok(ComponentSelector::Flags {
            flags,
            neg_flags: neg,
        });
    }
    Ok(ComponentSelector::Id(id))
}

/// Parses the arguments of `lfs migrate`.
pub fn parse_migrate<S: AsRef<str>>(args: &[S]) -> Result<MigrateRequest> {
    let (mut st, paths) = parse_common(Opc::Migrate, &owned(args))?;
    if paths.is_empty() && !st.null && st.files_from.is_none() {
        return Err(Error::usage(
            MIGRATE,
            "at least one of FILE/--null/--files-from=LIST_FILE must be specified",
        ));
    }
    if st.comp_add || st.comp_del || st.comp_set || st.comp_id != 0 {
        return Err(Error::usage(
            MIGRATE,
            "--component-add, --component-del, --component-set and -I are not valid for migrate",
        ));
    }
    if st.mdt_mode {
        let Some(off) = st.mdt_off else {
            return Err(Error::usage(MIGRATE, "migrate should specify MDT index"));
        };
        let n = st.mdt_tgts.len();
        if let Some(c) = st.lsa.stripe_count
            && n > 1
            && c > 0
            && c as usize != n
        {
            return Err(Error::usage(
                MIGRATE,
                format!("stripe count {c} doesn't match the number of MDTs: {n}"),
            ));
        }
        let mut mdts: Vec<i64> = st.mdt_tgts.iter().map(|&t| i64::from(t)).collect();
        if mdts.is_empty() {
            mdts.push(off);
        } else if mdts[0] != off {
            // An explicit -i names the starting MDT.
            mdts.retain(|&m| m != off);
            mdts.insert(0, off);
        }
        return Ok(MigrateRequest::Mdt(MdtMigrate {
            mdts,
            stripe_count: st.lsa.stripe_count,
            hash: st.hash,
            directory_only: st.directory_only,
            clear_fixed: st.clear_fixed,
            verbose: st.verbose,
            paths,
        }));
    }
    if st.hash.is_some() {
        return Err(Error::usage(
            MIGRATE,
            "--mdt-hash is valid only with -m|--mdt-index",
        ));
    }
    let composite = described_layout(MIGRATE, &mut st)?;
    if let Some(l) = &composite {
        st.components = l.components.clone();
    }
    finish_checks(MIGRATE, &st)?;
    let template = match (st.yaml.take(), st.copy.take()) {
        (Some(y), _) => Some(SetstripeAction::FromYaml(y)),
        (_, Some(c)) => Some(SetstripeAction::CopyLayout(c)),
        _ => None,
    };
    let layout = match composite {
        Some(l) => Some(l),
        // Without stripe options the file keeps its layout.
        None if template.is_none()
            && (st.lsa.specified() || st.lsa.pool.is_some() || !st.lsa.tgts.is_empty()) =>
        {
            let l = plain_layout(MIGRATE, &st.lsa)?;
            check_structure(&l)?;
            Some(l)
        }
        None => None,
    };
    Ok(MigrateRequest::Ost(OstMigrate {
        layout,
        template,
        non_block: st.non_block,
        non_direct: st.non_direct,
        verbose: st.verbose,
        bandwidth: st.bandwidth,
        null: st.null,
        files_from: st.files_from,
        paths,
    }))
}

/// Places components parsed from `--component-add` after the last component of the
/// file's current layout (`layout_adjust_first_extent`) and numbers them.
pub fn rebase_added_components(
    existing: &Layout,
    mut added: Vec<Component>,
) -> std::result::Result<Vec<Component>, Error> {
    if !existing.composite {
        return Err(Error::invalid(CMD, "not a composite file"));
    }
    let prev_end = existing.max_size();
    if prev_end == EOF {
        return Err(Error::invalid(
            CMD,
            "the last component already extends to EOF, nothing can be added",
        ));
    }
    let Some(first) = added.first_mut() else {
        return Err(Error::usage(
            CMD,
            "option -E must be specified with --component-add",
        ));
    };
    if first.start > prev_end || first.end <= prev_end {
        return Err(Error::invalid(
            CMD,
            format!(
                "first extent [{}, {}) not adjacent with extent end {prev_end}",
                first.start, first.end
            ),
        ));
    }
    first.start = prev_end;
    // New ids follow the largest in use; ids above LCME_ID_MAX are reserved.
    let mut id = existing.components.iter().map(|c| c.id).max().unwrap_or(0);
    for c in &mut added {
        id = id
            .checked_add(1)
            .filter(|&i| u64::from(i) <= MAX_COMPONENT_ID)
            .ok_or_else(|| Error::invalid(CMD, "no component id left in this layout"))?;
        c.id = id;
    }
    let mut whole = existing.clone();
    whole.components.extend(added.iter().cloned());
    check_structure(&whole)?;
    Ok(added)
}

/// `LCME_TEMPLATE_FLAGS`: the component flags a template may carry to a new file.
const LCME_TEMPLATE_FLAGS: u32 = 0x2 | 0x4 | 0x20 | 0x40 | 0x80 | 0x400;

/// Builds the layout described by a YAML template, i.e. the output of `lfs getstripe -y`
/// (`lfs setstripe --yaml FILE`). As in `lfs`, each component takes its count, size,
/// offset, pool and OST list (`l_ost_idx`) from the template; instantiation state and
/// object FIDs are ignored.
pub fn parse_layout_yaml(text: &str) -> Result<Layout> {
    const Y: &str = "lfs setstripe --yaml";
    let mut st = State::default();
    let mut in_component = false;
    let mut composite = false;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let line = line.strip_prefix("- ").unwrap_or(line).trim_start();
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if value.is_empty() {
            continue;
        }
        let key = key.trim();
        let key = key.strip_prefix("lmm_").unwrap_or(key);
        let bad = || Error::invalid(Y, format!("line {}: bad value '{value}' for {key}", n + 1));
        let number = crate::cnum::parse_c_long(value);
        match key {
            "lcme_id" => {
                if in_component {
                    build_component(Y, &mut st)?;
                }
                st.lsa = Lsa::default();
                in_component = true;
                composite = true;
            }
            "lcm_mirror_count" if number.is_some_and(|m| m > 1) => {
                return Err(unsupported(Y, "a mirrored (FLR) template"));
            }
            // A second component starting at 0 begins another mirror.
            "lcme_extent.e_start" if number == Some(0) && !st.components.is_empty() => {
                return Err(unsupported(Y, "a mirrored (FLR) template"));
            }
            "lcme_extent.e_end" => {
                st.lsa.comp_end = match value {
                    "EOF" | "eof" | "-1" => EOF,
                    _ => number.and_then(|v| u64::try_from(v).ok()).ok_or_else(bad)?,
                };
            }
            "lcme_flags" if number.is_none() => {
                let (f, _) = parse_component_flags(value).map_err(|m| Error::invalid(Y, m))?;
                st.lsa.comp_flags = f & LCME_TEMPLATE_FLAGS;
            }
            "stripe_count" => st.lsa.stripe_count = Some(number.ok_or_else(bad)?),
            "stripe_size" => {
                st.lsa.stripe_size =
                    Some(number.and_then(|v| u64::try_from(v).ok()).ok_or_else(bad)?);
            }
            "stripe_offset" => {
                let off = number.ok_or_else(bad)?;
                st.lsa.stripe_off = (off != -1).then_some(off);
            }
            "pool" => st.lsa.pool = Some(value.to_string()),
            "pattern" => match value {
                "mdt" => st.lsa.dom = true,
                "raid0" => {}
                _ => return Err(unsupported(Y, format!("pattern '{value}'").as_str())),
            },
            "l_ost_idx" => {
                let idx = number.and_then(|v| u32::try_from(v).ok()).ok_or_else(bad)?;
                st.lsa.tgts.push(idx);
            }
            "extension_size" => return Err(unsupported(Y, "a self-extending layout")),
            _ => {}
        }
    }
    let layout = if composite {
        if in_component {
            build_component(Y, &mut st)?;
        }
        Layout {
            composite: true,
            layout_gen: 0,
            flags: 0,
            components: std::mem::take(&mut st.components),
        }
    } else {
        plain_layout(Y, &st.lsa)?
    };
    check_structure(&layout)?;
    Ok(layout)
}
