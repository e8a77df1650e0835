//! `lctl pool_new/pool_destroy/pool_add/pool_remove/pool_list` and `lfs pool_list`: their
//! arguments (`parse_pool_cmd_args`, `extract_ost_list`, `check_and_complete_ostname`) and
//! what they print (`check_pool_cmd_result`, `pool_cmd_interpret_err`, `llapi_poollist`).
//! The rules for pool names and what each command refuses are `nacre_core::pool`'s.

use crate::{Error, Result};
use nacre_core::Errno;
use nacre_core::pool::{MAX_POOL_NAME, OstPool, PoolOp};

/// `LUSTRE_MAXFSNAME`.
pub const MAX_FSNAME: usize = 8;
/// The most OSTs one `pool_add`/`pool_remove` may name once its ranges are expanded: an
/// OST index has four hex digits, so `OST[0-ffff]` names every possible one.
pub const MAX_OST_LIST: usize = 0x1_0000;

/// Which pool command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolCmd {
    New,
    Destroy,
    Add,
    Remove,
    List,
}

impl PoolCmd {
    /// The command of an `lctl` word.
    pub fn of(word: &str) -> Option<PoolCmd> {
        Some(match word {
            "pool_new" => PoolCmd::New,
            "pool_destroy" => PoolCmd::Destroy,
            "pool_add" => PoolCmd::Add,
            "pool_remove" => PoolCmd::Remove,
            "pool_list" => PoolCmd::List,
            _ => return None,
        })
    }

    /// The `lctl` word.
    pub fn name(self) -> &'static str {
        match self {
            PoolCmd::New => "pool_new",
            PoolCmd::Destroy => "pool_destroy",
            PoolCmd::Add => "pool_add",
            PoolCmd::Remove => "pool_remove",
            PoolCmd::List => "pool_list",
        }
    }
}

/// A parsed pool command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolRequest {
    pub cmd: PoolCmd,
    /// `-n`/`--nowait`: do not wait for the change to reach this node's client.
    pub nowait: bool,
    /// The argument as given (`FSNAME.POOL`, or for `pool_list` also `FSNAME` or a path).
    pub full: String,
    pub fsname: String,
    /// Empty for `pool_list FSNAME` and for a path.
    pub pool: String,
    /// The OSTs of `pool_add`/`pool_remove`, by index, in the order given.
    pub osts: Vec<u32>,
}

impl PoolRequest {
    /// The MGS operation for one OST of this request (`None` for `pool_list`).
    pub fn op(&self, ost: Option<u32>) -> Option<PoolOp> {
        match (self.cmd, ost) {
            (PoolCmd::New, _) => Some(PoolOp::New),
            (PoolCmd::Destroy, _) => Some(PoolOp::Destroy),
            (PoolCmd::Add, Some(o)) => Some(PoolOp::Add(o)),
            (PoolCmd::Remove, Some(o)) => Some(PoolOp::Remove(o)),
            _ => None,
        }
    }
}

/// The usage line of each command, as `lctl help pool_new` prints it.
pub fn usage(cmd: PoolCmd) -> &'static str {
    match cmd {
        PoolCmd::New => "usage: pool_new [-n|--nowait] <fsname>.<poolname>",
        PoolCmd::Destroy => "usage: pool_destroy [-n|--nowait] <fsname>.<poolname>",
        PoolCmd::Add => "usage: pool_add [-n|--nowait] <fsname>.<poolname> <ostname indexed list>",
        PoolCmd::Remove => {
            "usage: pool_remove [-n|--nowait] <fsname>.<poolname> <ostname indexed list>"
        }
        PoolCmd::List => "usage: pool_list  <fsname>[.<poolname>] | <pathname>",
    }
}

/// `parse_pool_cmd_args` and `extract_ost_list`: the arguments after the command word.
pub fn parse<S: AsRef<str>>(cmd: PoolCmd, args: &[S]) -> Result<PoolRequest> {
    let name = cmd.name();
    let mut args: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
    if matches!(args.first(), Some(&("-h" | "--help"))) || args.is_empty() {
        return Err(Error::usage(name, usage(cmd)));
    }
    let nowait = matches!(args.first(), Some(&("-n" | "--nowait")));
    if nowait {
        args.remove(0);
    }
    let Some((&full, osts)) = args.split_first() else {
        return Err(Error::usage(name, usage(cmd)));
    };
    if matches!(cmd, PoolCmd::Add | PoolCmd::Remove) && osts.is_empty() {
        return Err(Error::usage(name, usage(cmd)));
    }
    let invalid = |errno: Errno, msg: String| Error::Invalid {
        cmd: name,
        msg,
        errno,
    };
    // `lfs pool_list /mnt/lustre`: the caller finds the file system of the path.
    if cmd == PoolCmd::List && full.starts_with('/') {
        return Ok(PoolRequest {
            cmd,
            nowait,
            full: full.to_string(),
            fsname: String::new(),
            pool: String::new(),
            osts: Vec::new(),
        });
    }
    let (fsname, pool) = match nacre_core::pool::split_full_name(full) {
        (_, None) if cmd != PoolCmd::List => {
            return Err(invalid(Errno::EINVAL, Errno::EINVAL.describe()));
        }
        parts => parts,
    };
    if fsname.is_empty() {
        return Err(invalid(Errno::EINVAL, Errno::EINVAL.describe()));
    }
    if fsname.len() > MAX_FSNAME {
        return Err(invalid(Errno::ENAMETOOLONG, "fsname is too long".into()));
    }
    let pool = match pool {
        None => String::new(),
        Some("") => return Err(invalid(Errno::EINVAL, Errno::EINVAL.describe())),
        Some(p) if p.len() > MAX_POOL_NAME => {
            return Err(invalid(Errno::ENAMETOOLONG, "poolname is too long".into()));
        }
        Some(p) if nacre_core::pool::is_reserved(p) => {
            return Err(invalid(Errno::EINVAL, format!("poolname cannot be '{p}'")));
        }
        Some(p) => p.to_string(),
    };
    let mut list = Vec::new();
    for rule in osts {
        expand_ost_rule(fsname, rule, &mut list)
            .map_err(|e| invalid(e, "Wrong format for OST list".into()))?;
    }
    Ok(PoolRequest {
        cmd,
        nowait,
        full: full.to_string(),
        fsname: fsname.to_string(),
        pool,
        osts: list,
    })
}

/// `get_array_idx` then `check_and_complete_ostname` for one argument: `OST0001`,
/// `FSNAME-OST0001_UUID`, or a rule with a bracketed list of hex indexes and ranges
/// (`OST[0-3]`, `OST[0,2,4-8/2]`), appended to `out` as OST indexes.
pub fn expand_ost_rule(
    fsname: &str,
    rule: &str,
    out: &mut Vec<u32>,
) -> std::result::Result<(), Errno> {
    let names: Vec<String> = match (rule.find('['), rule.find(']')) {
        (Some(open), Some(close)) if open < close => {
            let (head, tail) = (&rule[..open], &rule[close + 1..]);
            let mut v = Vec::new();
            for part in rule[open + 1..close].split(',') {
                let (range, step) = match part.split_once('/') {
                    Some((r, s)) => (r, s.parse::<u32>().map_err(|_| Errno::EINVAL)?),
                    None => (part, 1),
                };
                let hex = |s: &str| u32::from_str_radix(s.trim(), 16).map_err(|_| Errno::EINVAL);
                let (lo, hi) = match range.split_once('-') {
                    Some((lo, hi)) => (hex(lo)?, hex(hi)?),
                    None => (hex(range)?, hex(range)?),
                };
                if hi < lo || step == 0 {
                    return Err(Errno::EINVAL);
                }
                let mut i = lo;
                while i <= hi {
                    if out.len() + v.len() >= MAX_OST_LIST {
                        return Err(Errno::E2BIG);
                    }
                    v.push(format!("{head}{i:04x}{tail}"));
                    i = match i.checked_add(step) {
                        Some(n) => n,
                        None => break,
                    };
                }
            }
            v
        }
        _ => vec![rule.to_string()],
    };
    for n in names {
        if out.len() >= MAX_OST_LIST {
            return Err(Errno::E2BIG);
        }
        out.push(ost_index(fsname, &n)?);
    }
    Ok(())
}

/// `check_and_complete_ostname`: the index of `OSTxxxx[_UUID]` or
/// `FSNAME-OSTxxxx[_UUID]` (four hex digits).
fn ost_index(fsname: &str, name: &str) -> std::result::Result<u32, Errno> {
    let rest = match name.split_once('-') {
        None => name,
        Some((fs, rest)) if fs == fsname => rest,
        Some(_) => return Err(Errno::EINVAL),
    };
    let digits = rest.strip_prefix("OST").ok_or(Errno::EINVAL)?;
    let hex = digits.get(..4).ok_or(Errno::EINVAL)?;
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Errno::EINVAL);
    }
    let suffix = &digits[4..];
    if !(suffix.is_empty() || suffix == "_UUID") {
        return Err(Errno::EINVAL);
    }
    u32::from_str_radix(hex, 16).map_err(|_| Errno::EINVAL)
}

/// The OST's name as the pool commands print it (`FSNAME-OSTxxxx_UUID`).
pub fn ost_uuid(fsname: &str, ost: u32) -> String {
    format!("{fsname}-OST{ost:04x}_UUID")
}

/// A pool's members as its `lod.*.pools.NAME` / `lov.*.pools.NAME` file lists them: one
/// OST UUID per line.
pub fn members(fsname: &str, osts: &[u32]) -> String {
    osts.iter()
        .map(|&o| format!("{}\n", ost_uuid(fsname, o)))
        .collect()
}

/// `pool_cmd_interpret_err`: what `lctl` says when the MGS refused a pool command.
pub fn describe_error(
    cmd: PoolCmd,
    fsname: &str,
    pool: &str,
    ost: Option<u32>,
    e: Errno,
) -> String {
    let name = cmd.name();
    let full = format!("{fsname}.{pool}");
    let ost = ost.map(|o| ost_uuid(fsname, o)).unwrap_or_default();
    match (cmd, e) {
        (_, Errno::ENAMETOOLONG) => format!(
            "{name}: either the pool or file system name is too long (max pool name len is {MAX_POOL_NAME} and file system name is {MAX_FSNAME})"
        ),
        (_, Errno::EINVAL) => format!(
            "{name}: can contain only alphanumeric characters, underscores, and dashes besides the required '.'"
        ),
        (PoolCmd::New | PoolCmd::Destroy, Errno::EEXIST) => {
            format!("{name}: pool {full} already exists")
        }
        (PoolCmd::New | PoolCmd::Destroy, Errno::ENOENT) => {
            format!("{name}: pool {full} not found")
        }
        (PoolCmd::New | PoolCmd::Destroy, Errno::ENOTEMPTY) => {
            format!("{name}: pool {full} not empty, please remove all members")
        }
        (PoolCmd::Add | PoolCmd::Remove, Errno::ENOMEDIUM) => {
            format!("{name}: pool {full} not found")
        }
        (PoolCmd::Add | PoolCmd::Remove, Errno::EEXIST) => {
            format!("{name}: {ost} is already in pool {full}")
        }
        (PoolCmd::Add | PoolCmd::Remove, Errno::ENODEV) => {
            format!("{name}: {ost} is not part of the '{fsname}' fs.")
        }
        (PoolCmd::Add | PoolCmd::Remove, Errno::ENOENT) => {
            format!("{name}: {ost} not found in pool {full}")
        }
        (PoolCmd::Add | PoolCmd::Remove, _) => format!("{name} {full} {ost}: {}", e.describe()),
        _ => format!("{name} {full}: {}", e.describe()),
    }
}

/// `check_pool_cmd_result`: the line printed once the change is seen on this node's
/// client (`seen`), or the warning when it is not within the wait.
pub fn result_line(cmd: PoolCmd, fsname: &str, pool: &str, ost: Option<u32>, seen: bool) -> String {
    let ost = ost.map(|o| ost_uuid(fsname, o)).unwrap_or_default();
    match (cmd, seen) {
        (PoolCmd::New, true) => format!("Pool {fsname}.{pool} created\n"),
        (PoolCmd::New, false) => format!("Warning, pool {fsname}.{pool} not found\n"),
        (PoolCmd::Destroy, true) => format!("Pool {fsname}.{pool} destroyed\n"),
        (PoolCmd::Destroy, false) => format!("Warning, pool {fsname}.{pool} still found\n"),
        (PoolCmd::Add, true) => format!("OST {ost} added to pool {fsname}.{pool}\n"),
        (PoolCmd::Add, false) => format!("Warning, OST {ost} not found in pool {fsname}.{pool}\n"),
        (PoolCmd::Remove, true) => format!("OST {ost} removed from pool {fsname}.{pool}\n"),
        (PoolCmd::Remove, false) => {
            format!("Warning, OST {ost} still found in pool {fsname}.{pool}\n")
        }
        (PoolCmd::List, _) => String::new(),
    }
}

/// Whether `pools` shows the effect of `op` on `pool` (what `check_pool_cmd_result`
/// waits for with `llapi_search_ost`).
pub fn op_visible(pools: &[OstPool], pool: &str, op: &PoolOp) -> bool {
    let found = nacre_core::pool::find(pools, pool);
    match op {
        PoolOp::New => found.is_some(),
        PoolOp::Destroy => found.is_none(),
        PoolOp::Add(o) => found.is_some_and(|p| p.osts.contains(o)),
        PoolOp::Remove(o) => !found.is_some_and(|p| p.osts.contains(o)),
    }
}

/// `llapi_poollist`: `Pools from FSNAME:` and `FSNAME.POOL` per pool; with a pool,
/// `Pool: FSNAME.POOL` and its members' UUIDs. ENOENT for a pool that does not exist.
pub fn list(fsname: &str, pool: &str, pools: &[OstPool]) -> std::result::Result<String, Errno> {
    if pool.is_empty() {
        let mut out = format!("Pools from {fsname}:\n");
        for p in pools {
            out.push_str(&format!("{fsname}.{}\n", p.name));
        }
        return Ok(out);
    }
    let p = nacre_core::pool::find(pools, pool).ok_or(Errno::ENOENT)?;
    Ok(format!(
        "Pool: {fsname}.{pool}\n{}",
        members(fsname, &p.osts)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ost_lists_expand_as_lctl_does() {
        let r = parse(
            PoolCmd::Add,
            &["fs.flash", "OST[0-2]", "fs-OST000a_UUID", "OST[c,e-10/2]"],
        )
        .expect("parse");
        assert_eq!(r.osts, vec![0, 1, 2, 10, 12, 14, 16]);
        assert_eq!((r.fsname.as_str(), r.pool.as_str()), ("fs", "flash"));
        let r = parse(PoolCmd::Remove, &["-n", "fs.flash", "OST0003"]).expect("parse");
        assert!(r.nowait);
        assert_eq!(r.osts, vec![3]);
        for bad in [
            "OST1",
            "other-OST0001",
            "MDT0000",
            "OST[2-1]",
            "OST[0-1/0]",
            "OST00011",
        ] {
            let e = parse(PoolCmd::Add, &["fs.flash", bad]).expect_err(bad);
            assert_eq!(e.errno(), Errno::EINVAL, "{bad}");
        }
        let e = parse(PoolCmd::Add, &["fs.flash", "OST[0-ffff]", "OST0000"]).expect_err("too many");
        assert_eq!(e.errno(), Errno::E2BIG);
    }

    #[test]
    fn names_and_arguments_are_checked_before_the_mgs() {
        assert!(
            parse(PoolCmd::New, &[] as &[&str])
                .expect_err("none")
                .is_usage()
        );
        assert!(
            parse(PoolCmd::Add, &["fs.flash"])
                .expect_err("no osts")
                .is_usage()
        );
        assert_eq!(
            parse(PoolCmd::New, &["fs"]).expect_err("no dot").errno(),
            Errno::EINVAL
        );
        assert_eq!(
            parse(PoolCmd::New, &["fs."]).expect_err("empty").errno(),
            Errno::EINVAL
        );
        assert_eq!(
            parse(PoolCmd::New, &["fs.ignore"])
                .expect_err("reserved")
                .errno(),
            Errno::EINVAL
        );
        assert_eq!(
            parse(PoolCmd::New, &["fs.a234567890123456"])
                .expect_err("long")
                .errno(),
            Errno::ENAMETOOLONG
        );
        assert_eq!(
            parse(PoolCmd::New, &["fsname_too_long.p"])
                .expect_err("long fs")
                .errno(),
            Errno::ENAMETOOLONG
        );
        let l = parse(PoolCmd::List, &["fs"]).expect("list");
        assert_eq!((l.fsname.as_str(), l.pool.as_str()), ("fs", ""));
        let l = parse(PoolCmd::List, &["/mnt/fs"]).expect("path");
        assert_eq!(l.full, "/mnt/fs");
    }

    #[test]
    fn output_is_lustres() {
        let pools = vec![
            OstPool {
                name: "flash".into(),
                osts: vec![0, 2],
            },
            OstPool {
                name: "slow".into(),
                osts: vec![],
            },
        ];
        assert_eq!(
            list("fs", "", &pools).expect("list"),
            "Pools from fs:\nfs.flash\nfs.slow\n"
        );
        assert_eq!(
            list("fs", "flash", &pools).expect("list"),
            "Pool: fs.flash\nfs-OST0000_UUID\nfs-OST0002_UUID\n"
        );
        assert_eq!(list("fs", "gone", &pools), Err(Errno::ENOENT));
        assert_eq!(
            result_line(PoolCmd::Add, "fs", "flash", Some(2), true),
            "OST fs-OST0002_UUID added to pool fs.flash\n"
        );
        assert_eq!(
            describe_error(PoolCmd::Destroy, "fs", "flash", None, Errno::ENOTEMPTY),
            "pool_destroy: pool fs.flash not empty, please remove all members"
        );
        assert_eq!(
            describe_error(PoolCmd::Add, "fs", "flash", Some(9), Errno::ENODEV),
            "pool_add: fs-OST0009_UUID is not part of the 'fs' fs."
        );
        assert!(op_visible(&pools, "flash", &PoolOp::Add(2)));
        assert!(!op_visible(&pools, "flash", &PoolOp::Remove(2)));
        assert!(op_visible(&pools, "gone", &PoolOp::Destroy));
    }
}
