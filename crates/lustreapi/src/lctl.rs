//! `lctl get_param`, `set_param` and `list_param`: parameter names (`TYPE.INSTANCE.PARAM`)
//! matched component by component with glob(7) wildcards, the options of the three
//! commands, and how values are printed (`name=value`, multi-line values, `-n`, `-N`).

use crate::error::{Error, Result};
use crate::fnmatch::Wildcard;
use crate::getopt::{HasArg, LongOpt, OptSpec, Parsed, getopt, lo, owned};

/// Splits a dotted parameter name into its tree components, as `jt_clean_path` does: a
/// NID (`192.168.1.1@tcp`) after `.exports.` or in an `MGC` device name keeps its dots,
/// and backslashes are dropped.
pub fn split_param_name(name: &str) -> Vec<String> {
    let path: String = name.chars().filter(|&c| c != '\\').collect();
    let bytes = path.as_bytes();
    // Where a NID starts and ends, when the name holds one.
    let mut nid: Option<(usize, usize)> = None;
    if path.contains('@') {
        let start = path
            .find(".exports.")
            .map(|i| i + ".exports.".len())
            .or_else(|| path.find(".MGC").map(|i| i + 1));
        if let Some(s) = start
            && let Some(at) = path[s..].find('@')
        {
            let end = path[s + at..].find('.').map_or(path.len(), |d| s + at + d);
            nid = Some((s, end));
        }
    }
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut i = 0;
    while i < bytes.len() {
        let ch = path[i..].chars().next().unwrap_or('.');
        if ch == '.' {
            out.push(std::mem::take(&mut cur));
            i += 1;
            if let Some((s, e)) = nid
                && i == s
            {
                cur.push_str(&path[s..e]);
                i = e;
            }
            continue;
        }
        cur.push(ch);
        i += ch.len_utf8();
    }
    out.push(cur);
    out
}

/// A parameter pattern such as `osc.testfs-OST000?-osc-*.max_rpcs_in_flight`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamPattern {
    source: String,
    components: Vec<Wildcard>,
}

impl ParamPattern {
    pub fn new(pattern: &str) -> ParamPattern {
        ParamPattern {
            source: pattern.to_string(),
            components: split_param_name(pattern)
                .iter()
                .map(|c| Wildcard::new(c))
                .collect(),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether the pattern names exactly one parameter (no wildcard).
    pub fn is_literal(&self) -> bool {
        !self.components.iter().any(Wildcard::has_wildcards)
    }

    /// Whether the dotted parameter `name` matches, component for component. As with
    /// glob(3), a wildcard does not match a leading '.' of a component.
    pub fn matches(&self, name: &str) -> bool {
        let comps = split_param_name(name);
        self.matches_components(&comps)
    }

    pub fn matches_components<S: AsRef<str>>(&self, comps: &[S]) -> bool {
        comps.len() == self.components.len()
            && self
                .components
                .iter()
                .zip(comps)
                .all(|(w, c)| w.matches_bytes(c.as_ref().as_bytes(), true))
    }

    /// Whether `name` matches or lies below a match (what `-R` lists).
    pub fn matches_within(&self, name: &str) -> bool {
        let comps = split_param_name(name);
        comps.len() >= self.components.len()
            && self.matches_components(&comps[..self.components.len()])
    }
}

/// What kind of node a parameter is, for `-F` (`/` directory, `@` link, `=` writable).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    Dir,
    Link,
    File { writable: bool },
}

/// Output options shared by `get_param` and `list_param`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParamOutput {
    /// Print the name (off with `-n`).
    pub show_name: bool,
    /// Print only the name (`-N`, and always for `list_param`).
    pub only_name: bool,
    /// `-F`: mark directories, links and writable parameters.
    pub show_type: bool,
    /// `-H`: prefix each line of a multi-line value with `name=`.
    pub header: bool,
    /// `-y`.
    pub yaml: bool,
    /// `-R`.
    pub recursive: bool,
    /// `-D`: directories only.
    pub only_dir: bool,
    /// `-t`: tunables only (no statistics).
    pub tunable: bool,
    /// `-r` / `-w`: readable / writable only.
    pub readable: bool,
    pub writable: bool,
    /// `-L`: do not follow links.
    pub no_links: bool,
    /// `-p`: print file system paths rather than names.
    pub path: bool,
}

/// A parsed `lctl get_param` or `lctl list_param` command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamQuery {
    pub output: ParamOutput,
    pub patterns: Vec<ParamPattern>,
}

/// A parsed `lctl set_param` command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetParamRequest {
    /// `-P`: record in the MGS configuration, for every node, now and after remounts.
    pub permanent: bool,
    /// `-d` (with `-P`): delete the permanent setting.
    pub delete: bool,
    /// Echo `name=value` for each parameter set (off with `-n`).
    pub show_name: bool,
    /// `-C[FSNAME]`: write the client's local parameter file.
    pub client: Option<Option<String>>,
    /// `-F`: arguments are YAML files.
    pub file: bool,
    /// `(name, value)`; the value is `None` only for deletions.
    pub params: Vec<(String, Option<String>)>,
}

const OPT_COLOR: u32 = 'c' as u32;

const fn c(ch: char) -> u32 {
    ch as u32
}

const OUT_LONG: &[LongOpt] = &[
    lo("dshbak", HasArg::No, c('b')),
    lo("color", HasArg::Optional, OPT_COLOR),
    lo("dir-only", HasArg::No, c('D')),
    lo("directory-only", HasArg::No, c('D')),
    lo("classify", HasArg::No, c('F')),
    lo("header", HasArg::No, c('H')),
    lo("links", HasArg::No, c('l')),
    lo("no-links", HasArg::No, c('L')),
    lo("merge", HasArg::No, c('m')),
    lo("no-merge", HasArg::No, c('M')),
    lo("no-name", HasArg::No, c('n')),
    lo("only-name", HasArg::No, c('N')),
    lo("name-only", HasArg::No, c('N')),
    lo("module", HasArg::No, c('o')),
    lo("path", HasArg::No, c('p')),
    lo("readable", HasArg::No, c('r')),
    lo("recursive", HasArg::No, c('R')),
    lo("tunable", HasArg::No, c('t')),
    lo("writable", HasArg::No, c('w')),
    lo("yaml", HasArg::No, c('y')),
];

fn parse_output(
    cmd: &'static str,
    short: &str,
    args: &[String],
    mut o: ParamOutput,
) -> Result<ParamQuery> {
    let spec = OptSpec {
        short,
        long: OUT_LONG,
        in_order: false,
        long_only: false,
    };
    let mut patterns = Vec::new();
    for item in getopt(cmd, &spec, args)? {
        let (val, arg, text) = match item {
            Parsed::Operand(p) => {
                patterns.push(p);
                continue;
            }
            Parsed::Opt { val, arg, text } => (val, arg, text),
        };
        match char::from_u32(val).unwrap_or('\0') {
            'b' | 'm' | 'M' | 'o' => {}
            'c' => match arg.as_deref() {
                None | Some("always" | "yes" | "never" | "no" | "auto") => {}
                Some(other) => return Err(Error::usage(cmd, format!("invalid color '{other}'"))),
            },
            'D' => o.only_dir = true,
            'F' => o.show_type = true,
            'H' => o.header = true,
            'l' => o.no_links = false,
            'L' => o.no_links = true,
            'n' => o.show_name = false,
            'N' => o.only_name = true,
            'p' => o.path = true,
            'r' => o.readable = true,
            'R' => o.recursive = true,
            't' => o.tunable = true,
            'w' => o.writable = true,
            'y' => o.yaml = true,
            _ => return Err(Error::usage(cmd, format!("unrecognized option '{text}'"))),
        }
    }
    if patterns.is_empty() {
        return Err(Error::usage(cmd, "no parameter given"));
    }
    let patterns = patterns
        .iter()
        .map(|p| {
            // With -F a trailing type mark may be pasted back from earlier output.
            let p = if o.show_type {
                p.trim_end_matches(['@', '=', '/'])
            } else {
                p.as_str()
            };
            ParamPattern::new(p)
        })
        .collect();
    Ok(ParamQuery {
        output: o,
        patterns,
    })
}

/// Parses the arguments of `lctl get_param`.
pub fn parse_get_param<S: AsRef<str>>(args: &[S]) -> Result<ParamQuery> {
    let o = ParamOutput {
        show_name: true,
        ..ParamOutput::default()
    };
    parse_output("lctl get_param", "bc:FHlLmMnNoprRtwy", &owned(args), o)
}

/// Parses the arguments of `lctl list_param`.
pub fn parse_list_param<S: AsRef<str>>(args: &[S]) -> Result<ParamQuery> {
    let o = ParamOutput {
        show_name: true,
        only_name: true,
        ..ParamOutput::default()
    };
    parse_output("lctl list_param", "bc::DFlLmMoprRtw", &owned(args), o)
}

const SET_LONG: &[LongOpt] = &[
    lo("client", HasArg::Optional, c('C')),
    lo("delete", HasArg::No, c('d')),
    lo("file", HasArg::No, c('F')),
    lo("noname", HasArg::No, c('n')),
    lo("module", HasArg::No, c('o')),
    lo("perm", HasArg::No, c('P')),
    lo("permanent", HasArg::No, c('P')),
    lo("threads", HasArg::Optional, c('t')),
];

/// Parses the arguments of `lctl set_param`: `NAME=VALUE` or `NAME VALUE` pairs, and
/// with `-P -d` bare names.
pub fn parse_set_param<S: AsRef<str>>(args: &[S]) -> Result<SetParamRequest> {
    let cmd = "lctl set_param";
    let spec = OptSpec {
        short: "C::dFnoPt::",
        long: SET_LONG,
        in_order: false,
        long_only: false,
    };
    let mut r = SetParamRequest {
        permanent: false,
        delete: false,
        show_name: true,
        client: None,
        file: false,
        params: Vec::new(),
    };
    let mut rest = Vec::new();
    for item in getopt(cmd, &spec, &owned(args))? {
        let (val, arg, text) = match item {
            Parsed::Operand(p) => {
                rest.push(p);
                continue;
            }
            Parsed::Opt { val, arg, text } => (val, arg, text),
        };
        match char::from_u32(val).unwrap_or('\0') {
            'C' => {
                if r.permanent {
                    return Err(Error::usage(cmd, "-C cannot be used with -P"));
                }
                let fsname = arg.map(|a| a.strip_prefix('=').map(str::to_string).unwrap_or(a));
                r.client = Some(fsname);
            }
            'd' => r.delete = true,
            'F' => r.file = true,
            'n' => r.show_name = false,
            'o' => {}
            'P' => {
                if r.client.is_some() {
                    return Err(Error::usage(cmd, "-P cannot be used with -C"));
                }
                r.permanent = true;
            }
            't' => {
                if let Some(n) = arg
                    && crate::cnum::atoi(&n) < 2
                {
                    return Err(Error::usage(cmd, format!("invalid thread count '{n}'")));
                }
            }
            _ => return Err(Error::usage(cmd, format!("unrecognized option '{text}'"))),
        }
    }
    if r.delete && !r.permanent && r.client.is_none() {
        // lfs warns and then deletes the permanent setting.
        r.permanent = true;
    }
    if rest.is_empty() {
        return Err(Error::usage(cmd, "no parameter given"));
    }
    if r.file {
        r.params = rest.into_iter().map(|f| (f, None)).collect();
        return Ok(r);
    }
    let mut i = 0;
    while i < rest.len() {
        let a = &rest[i];
        if r.delete {
            r.params
                .push((a.split('=').next().unwrap_or(a).to_string(), None));
            i += 1;
            continue;
        }
        match a.split_once('=') {
            Some((name, value)) => {
                if value.is_empty() {
                    return Err(Error::invalid(
                        cmd,
                        format!("setting {name}: Invalid argument"),
                    ));
                }
                r.params.push((name.to_string(), Some(value.to_string())));
                i += 1;
            }
            None => {
                let Some(value) = rest.get(i + 1) else {
                    return Err(Error::invalid(
                        cmd,
                        format!("setting {a}: Invalid argument"),
                    ));
                };
                r.params.push((a.clone(), Some(value.clone())));
                i += 2;
            }
        }
    }
    Ok(r)
}

/// A parameter's name as printed, with the `-F` type mark.
pub fn param_display_name(name: &str, kind: ParamKind, o: &ParamOutput) -> String {
    if !o.show_type {
        return name.to_string();
    }
    let mark = match kind {
        ParamKind::Dir => "/",
        ParamKind::Link => "@",
        ParamKind::File { writable: true } => "=",
        ParamKind::File { writable: false } => "",
    };
    format!("{name}{mark}")
}

/// What `lctl get_param` prints for one parameter (`print_param_internal`). A trailing
/// newline of the value is dropped first, as `lctl` does when reading it.
pub fn format_get_param(o: &ParamOutput, name: &str, value: &str) -> String {
    let value = value.strip_suffix('\n').unwrap_or(value);
    if !o.show_name && value.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    if (o.yaml || o.header) && value.contains('\n') {
        let mut lines = value.split('\n');
        let first = lines.next().unwrap_or_default();
        out.push_str(name);
        out.push_str(if o.yaml { ": " } else { "=" });
        out.push_str(first);
        out.push('\n');
        for line in lines {
            if !o.yaml {
                out.push_str(name);
                out.push('=');
            }
            out.push_str(line);
            out.push('\n');
        }
        return out;
    }
    if o.show_name {
        out.push_str(name);
    }
    if !o.only_name && o.show_name {
        out.push_str(if o.yaml { ": " } else { "=" });
        // Multi-line values start on their own line.
        if value.contains('\n') {
            out.push('\n');
        }
    }
    if !o.only_name {
        out.push_str(value);
    }
    out.push('\n');
    out
}

/// What `lctl list_param` prints for one parameter.
pub fn format_list_param(o: &ParamOutput, name: &str, kind: ParamKind) -> String {
    format!("{}\n", param_display_name(name, kind, o))
}

/// What `lctl set_param` echoes after setting one parameter locally.
pub fn format_set_param(r: &SetParamRequest, name: &str, value: &str) -> String {
    if r.show_name && !r.permanent && r.client.is_none() {
        format!("{name}={value}\n")
    } else {
        String::new()
    }
}

/// The `NAME=VALUE` record `-P` sends to the MGS (`NAME=` to delete).
pub fn permanent_record(name: &str, value: Option<&str>) -> String {
    format!("{name}={}", value.unwrap_or(""))
}
