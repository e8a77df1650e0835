//! `nacre lfs`: Lustre's `lfs` commands with Lustre's syntax and output, acting on mounted
//! nacre file systems through each mount's control socket.

use crate::ctl::{self, MountEntry};
use crate::ctl_server::{Child, CtlReply, CtlRequest};
use anyhow::{Result, anyhow, bail};
use nacre_core::layout_rules::{LayoutCtx, validate};
use nacre_core::target::TargetKind;
use nacre_core::{Errno, Fid, Layout};
use nacre_lustreapi as lapi;
use nacre_lustreapi::find::FindEntry;
use nacre_lustreapi::getstripe::{FsDefaults, StripeEntry, StripeEntryKind};
use nacre_lustreapi::setstripe::{ComponentSelector, MigrateRequest, SetstripeAction};
use nacre_rpc::msg::InodeInfo;
use std::path::{Path, PathBuf};

pub const USAGE: &str = "usage: nacre lfs COMMAND [ARGS]\n\
commands (Lustre's syntax and output):\n  \
df [-h] [-H] [-i] [-v] [PATH]            space and inodes per MDT and OST\n  \
osts [PATH] | mdts [PATH]                the OSTs or MDTs of each mount (or PATH's)\n  \
getname [-n|-i] [PATH...]                each mount's FSNAME-INSTANCE (-n: fsname, -i: instance)\n  \
pool_list FSNAME[.POOL] | PATH           the OST pools of a file system, or one pool's OSTs\n  \
check osts|mdts|mgts|servers [PATH]      ping the targets: 'DEVICE active.' or 'inactive.'\n  \
getstripe [-v] [-y] [-d] [-c] [-S] [-i] [-L] [-I ID] ... PATH...   show layouts\n  \
setstripe [-c N] [-S SIZE] [-i IDX] [-o LIST] [-E END [-L mdt] ...] PATH   set a layout or directory default\n  \
setstripe -d DIR                         remove a directory's default layout\n  \
setstripe -N[COUNT] [opts] [-N ...] FILE  a mirrored file (FLR), as lfs mirror create\n  \
mirror create -N[COUNT] [opts] ... FILE  a mirrored file\n  \
mirror extend|split|resync|verify|read|write ...  FLR mirrors (lfs mirror --help)\n  \
path2fid PATH...                         the FID of each path\n  \
fid2path MOUNT FID...                    the path of each FID\n  \
find DIR... [-type f|d|l] [-name P] [-L mdt|raid0] [--size [+-]N] [-c N] [-S N] [-O IDX] [--mdt IDX] ...   search\n  \
migrate [setstripe options] FILE...      rewrite files into a new layout, keeping their FID\n";

/// Sends a control request and turns an error reply into an errno-carrying error.
pub fn call(m: &MountEntry, req: &CtlRequest) -> Result<CtlReply, (Errno, String)> {
    match ctl::call::<_, CtlReply>(&m.socket, req) {
        Ok(CtlReply::Error { errno, message }) => Err((Errno(errno), message)),
        Ok(r) => Ok(r),
        Err(e) => Err((Errno::EIO, format!("{e:#}"))),
    }
}

/// Attributes of `rel` on mount `m`, and the index of the MDT holding it.
pub(super) fn stat(
    m: &MountEntry,
    rel: &Path,
) -> Result<(nacre_rpc::msg::InodeInfo, u32), (Errno, String)> {
    match call(
        m,
        &CtlRequest::Stat {
            path: rel.to_path_buf(),
        },
    )? {
        CtlReply::Inode { info, mdt } => Ok((info, mdt)),
        _ => Err((Errno::EPROTO, "unexpected reply".into())),
    }
}

/// Calls `f` on each entry of directory `rel` with its attributes: one control call per
/// page of entries.
pub(super) fn for_children(
    m: &MountEntry,
    rel: &Path,
    mut f: impl FnMut(Child) -> Result<(), (Errno, String)>,
) -> Result<(), (Errno, String)> {
    let mut cookie = 0;
    loop {
        let req = CtlRequest::ListStat {
            path: rel.to_path_buf(),
            cookie,
        };
        let CtlReply::Children {
            children,
            cookie: next,
            eof,
        } = call(m, &req)?
        else {
            return Err((Errno::EPROTO, "unexpected reply".into()));
        };
        // A page that moves nothing would repeat forever.
        let stuck = children.is_empty() && next == cookie;
        for c in children {
            f(c)?;
        }
        if eof || stuck {
            return Ok(());
        }
        cookie = next;
    }
}

/// A directory's default layout.
fn default_layout(m: &MountEntry, rel: &Path) -> Result<Option<Layout>, (Errno, String)> {
    match call(
        m,
        &CtlRequest::GetDefaultLayout {
            path: rel.to_path_buf(),
        },
    )? {
        CtlReply::Layout(l) => Ok(l),
        _ => Err((Errno::EPROTO, "unexpected reply".into())),
    }
}

fn unexpected() -> anyhow::Error {
    anyhow!("unexpected reply from the client")
}

pub fn run(args: &[String]) -> Result<i32> {
    let Some((cmd, rest)) = args.split_first() else {
        print!("{USAGE}{}", super::lfs_dne::USAGE);
        return Ok(0);
    };
    match cmd.as_str() {
        "df" => df(rest),
        "osts" => tgts(TargetKind::Ost, rest),
        "mdts" => tgts(TargetKind::Mdt, rest),
        "getname" => getname(rest),
        "pool_list" => pool_list(rest),
        "check" => check(rest),
        "getstripe" | "find-stripe" => getstripe(rest),
        "setstripe" => setstripe(rest),
        "mirror" => mirror(rest),
        "path2fid" => path2fid(rest),
        "find" => find(rest),
        "migrate" => migrate(rest),
        "fid2path" => fid2path(rest),
        "mkdir" | "setdirstripe" | "setdirstripe_default" => {
            super::lfs_dne::setdirstripe(cmd, rest)
        }
        "getdirstripe" => super::lfs_dne::getdirstripe(rest),
        "help" | "--help" | "-h" => {
            print!("{USAGE}{}", super::lfs_dne::USAGE);
            Ok(0)
        }
        other => bail!("lfs: unknown command '{other}'\n{USAGE}"),
    }
}

fn lapi_err(e: lapi::Error) -> anyhow::Error {
    if e.is_usage() {
        anyhow!("{e}\n{USAGE}")
    } else {
        anyhow!("{e}")
    }
}

/// The mounts a command that takes at most one PATH looks at: PATH's, else every one.
fn mounts_of(cmd: &str, args: &[String]) -> Result<Vec<MountEntry>> {
    let mounts = match args {
        [] => ctl::mounts()?,
        [p] => vec![ctl::find_mount(Path::new(p))?.0],
        _ => bail!("lfs {cmd}: one PATH at most\n{USAGE}"),
    };
    if mounts.is_empty() {
        bail!("lfs {cmd}: no nacre file system is mounted on this node");
    }
    Ok(mounts)
}

/// `lfs osts` / `lfs mdts`: each mount's targets of that kind, in Lustre's words.
fn tgts(kind: TargetKind, args: &[String]) -> Result<i32> {
    let cmd = if kind == TargetKind::Mdt {
        "mdts"
    } else {
        "osts"
    };
    for m in mounts_of(cmd, args)? {
        let CtlReply::Targets(all) =
            call(&m, &CtlRequest::Targets).map_err(|(_, msg)| anyhow!(msg))?
        else {
            return Err(unexpected());
        };
        print!("{}", lapi::tgts::tgt_list(kind, &m.fsname, &all));
    }
    Ok(0)
}

/// `lfs getname [-n|-i] [PATH...]`: the name (`FSNAME-INSTANCE`) of each mount; the
/// instance is the one in the mount's `llite.*` parameter names.
fn getname(args: &[String]) -> Result<i32> {
    let (mut only_fsname, mut only_instance) = (false, false);
    let mut paths = Vec::new();
    for a in args {
        match a.as_str() {
            "-n" | "--fsname" => only_fsname = true,
            "-i" | "--instance" => only_instance = true,
            "-h" | "--help" => {
                print!("{USAGE}");
                return Ok(0);
            }
            o if o.starts_with('-') => bail!("lfs getname: unrecognized option '{o}'\n{USAGE}"),
            p => paths.push(p.to_string()),
        }
    }
    let listed: Vec<(MountEntry, bool)> = if paths.is_empty() {
        ctl::mounts()?.into_iter().map(|m| (m, true)).collect()
    } else {
        let several = paths.len() > 1;
        paths
            .iter()
            .map(|p| ctl::find_mount(Path::new(p)).map(|(m, _)| (m, several)))
            .collect::<Result<_>>()?
    };
    if listed.is_empty() {
        bail!("lfs getname: no nacre file system is mounted on this node");
    }
    for (m, with_mountpoint) in listed {
        let instance = instance_of(&m).map_err(|e| anyhow!("lfs getname: {e:#}"))?;
        let mountpoint = m.mountpoint.to_string_lossy();
        print!(
            "{}",
            lapi::tgts::getname_line(
                &m.fsname,
                &instance,
                only_fsname,
                only_instance,
                with_mountpoint.then_some(&*mountpoint),
            )
        );
    }
    Ok(0)
}

/// The instance of mount `m` (Lustre's superblock address): the one in its `llite.*`
/// parameter names.
fn instance_of(m: &MountEntry) -> Result<String> {
    let req = CtlRequest::GetParams {
        pattern: "llite.*.stats".into(),
        within: false,
    };
    let CtlReply::Params(params) = call(m, &req).map_err(|(_, msg)| anyhow!(msg))? else {
        return Err(unexpected());
    };
    let prefix = format!("llite.{}-", m.fsname);
    params
        .iter()
        .find_map(|p| p.name.strip_prefix(&prefix)?.split('.').next())
        .map(str::to_string)
        .ok_or_else(|| {
            anyhow!(
                "cannot get instance for '{}': the mount names no llite device",
                m.mountpoint.display()
            )
        })
}

/// `lfs check osts|mdts|mds|mgts|servers|all [PATH]`: pings the targets of each mount
/// (or PATH's) and prints `DEVICE active.` or `DEVICE inactive.` for each, OSCs, then
/// MDCs, then the MGC (`llapi_target_check`). Each ping is bounded
/// (`nacre_client::md::TARGET_CHECK_BOUND`), so a down target cannot hold the command.
fn check(args: &[String]) -> Result<i32> {
    use lapi::tgts::{CheckType, check_line, client_device, parse_check};
    let Some((word, rest)) = args.split_first() else {
        bail!("lfs check: server type must be specified\n{USAGE}");
    };
    if rest.len() > 1 {
        bail!("lfs check: server type must be specified\n{USAGE}");
    }
    let types = parse_check(word)
        .ok_or_else(|| anyhow!("lfs check: unrecognized option '{word}'\n{USAGE}"))?;
    let mounts = match rest.first() {
        Some(p) => vec![ctl::find_mount(Path::new(p))?.0],
        None => ctl::mounts()?,
    };
    if mounts.is_empty() {
        bail!("lfs check: cannot find mounted Lustre filesystem: No such device");
    }
    let mut mgcs_shown: Vec<String> = Vec::new();
    for m in mounts {
        let instance = instance_of(&m).map_err(|e| anyhow!("lfs check: {e:#}"))?;
        let CtlReply::Checked { targets, mgc, mgs } =
            call(&m, &CtlRequest::Check).map_err(|(_, msg)| anyhow!(msg))?
        else {
            return Err(unexpected());
        };
        for t in &types {
            let devices: Vec<(String, Result<(), Errno>)> = match t {
                CheckType::Osc | CheckType::Mdc => {
                    let kind = if *t == CheckType::Osc {
                        TargetKind::Ost
                    } else {
                        TargetKind::Mdt
                    };
                    targets
                        .iter()
                        .filter(|(n, _)| n.kind == kind)
                        .map(|(n, r)| (client_device(&m.fsname, *n, &instance), *r))
                        .collect()
                }
                // One MGC serves every mount of a node's file system.
                CheckType::Mgc if mgcs_shown.contains(&mgc) => Vec::new(),
                CheckType::Mgc => {
                    mgcs_shown.push(mgc.clone());
                    vec![(mgc.clone(), mgs)]
                }
            };
            for (dev, r) in devices {
                match check_line(&dev, r) {
                    Ok(line) => print!("{line}"),
                    Err(line) => eprintln!("{line}"),
                }
            }
        }
    }
    Ok(0)
}

fn df(args: &[String]) -> Result<i32> {
    let req = lapi::df::parse_df(args).map_err(lapi_err)?;
    let mounts: Vec<MountEntry> = if req.paths.is_empty() {
        ctl::mounts()?
    } else {
        req.paths
            .iter()
            .map(|p| ctl::find_mount(Path::new(p)).map(|(m, _)| m))
            .collect::<Result<_>>()?
    };
    if mounts.is_empty() {
        bail!("lfs df: no nacre file system is mounted on this node");
    }
    for m in mounts {
        let CtlReply::Df(stats) = call(&m, &CtlRequest::Df).map_err(|(_, msg)| anyhow!(msg))?
        else {
            return Err(unexpected());
        };
        // Which pools each OST is in matters to `--pool` only.
        let pools = match req.options.pool {
            Some(_) => pools_of(&m).map_err(|(_, msg)| anyhow!(msg))?,
            None => Vec::new(),
        };
        let targets: Vec<lapi::df::TargetStat> = stats
            .into_iter()
            .map(|(t, s)| {
                let s = s.unwrap_or_default();
                let bs = u64::from(s.bsize.max(1));
                lapi::df::TargetStat {
                    name: t.full(&m.fsname),
                    kind: t.kind,
                    index: t.index,
                    blocks: s.blocks * bs,
                    bfree: s.bfree * bs,
                    bavail: s.bavail * bs,
                    files: s.files,
                    ffree: s.ffree,
                    state: 0,
                    active: s.bsize != 0,
                    pools: pools
                        .iter()
                        .filter(|p| t.kind == TargetKind::Ost && p.osts.contains(&t.index))
                        .map(|p| p.name.clone())
                        .collect(),
                }
            })
            .collect();
        print!(
            "{}",
            lapi::df::df(&req.options, &m.mountpoint.to_string_lossy(), &targets)
                .map_err(lapi_err)?
        );
    }
    Ok(0)
}

fn entry_for(
    m: &MountEntry,
    rel: &Path,
    shown: &str,
    depth: i32,
) -> Result<StripeEntry, (Errno, String)> {
    let (info, mdt) = stat(m, rel)?;
    let default_layout = if info.attr.is_dir() {
        default_layout(m, rel)?
    } else {
        None
    };
    entry_of(m, rel, shown, info, mdt, default_layout, depth)
}

/// `getstripe`'s view of an entry whose attributes are known; a directory's entries down
/// to `depth` more levels come a page per control call.
fn entry_of(
    m: &MountEntry,
    rel: &Path,
    shown: &str,
    info: InodeInfo,
    mdt: u32,
    default_layout: Option<Layout>,
    depth: i32,
) -> Result<StripeEntry, (Errno, String)> {
    if !info.attr.is_dir() {
        return Ok(StripeEntry::file(shown, info.attr.fid, mdt, info.layout));
    }
    let mut entries = Vec::new();
    if depth != 0 {
        for_children(m, rel, |c| {
            let name = String::from_utf8_lossy(&c.name).into_owned();
            let child_shown = format!("{}/{}", shown.trim_end_matches('/'), name);
            entries.push(entry_of(
                m,
                &rel.join(&name),
                &child_shown,
                c.info,
                c.mdt,
                c.default_layout,
                depth - 1,
            )?);
            Ok(())
        })?;
    }
    Ok(StripeEntry {
        path: shown.to_string(),
        fid: info.attr.fid,
        mdt_index: mdt,
        kind: StripeEntryKind::Dir {
            default_layout,
            default_lmv: None,
            entries,
        },
    })
}

fn getstripe(args: &[String]) -> Result<i32> {
    let req = lapi::getstripe::parse_getstripe(args).map_err(lapi_err)?;
    let mut rc = 0;
    for p in &req.paths {
        let (m, rel) = match ctl::find_mount(Path::new(p)) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("lfs getstripe: {e:#}");
                rc = 2;
                continue;
            }
        };
        match entry_for(&m, &rel, p, req.options.max_depth()) {
            Ok(entry) => print!(
                "{}",
                lapi::getstripe::getstripe(&req.options, &entry, &FsDefaults::default())
            ),
            Err((e, _)) => {
                eprintln!("lfs getstripe: cannot get layout of '{p}': {e}");
                rc = e.code();
            }
        }
    }
    Ok(rc)
}

fn creds() -> (u32, u32) {
    // SAFETY: these calls cannot fail.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// `lfs mirror --help`: Lustre's usage lines, and what each subcommand is for.
pub const MIRROR_USAGE: &str = "usage: lfs mirror SUBCOMMAND [OPTIONS] MIRRORED_FILE...\n\
File Level Redundancy: a mirrored file keeps several copies (mirrors) of its data, each\n\
on its own OSTs. With llite.*.mirror_write_mode=delayed (Lustre's behaviour) a write goes\n\
to one mirror and the others become 'stale' (getstripe: lcme_flags stale, lcm_flags wp)\n\
until 'lfs mirror resync'; with immediate (the default) every mirror gets each write,\n\
and only a mirror whose OST fails goes stale. Reads use an in-sync mirror and fail over.\n\
\n\
  create -N[COUNT] [setstripe options] [-N ...] FILE\n\
        create a mirrored file (as lfs setstripe -N)\n\
  extend -N[COUNT] [setstripe options] [-N ...] FILE...\n\
        add mirrors to existing files and copy the data into them\n\
  split {--mirror-id|-I MIRROR_ID} [--destroy|-d] [-f NEW_FILE] FILE\n\
        take a mirror out of a file: into NEW_FILE (default FILE.mirror~ID), or destroyed\n\
  resync [--only MIRROR_ID[,...]] FILE...\n\
        copy in-sync data over stale components and clear 'stale' (lcm_flags back to ro);\n\
        refused (EBUSY) while the file is open for writing; of an erasure-coded file\n\
        (--ec), recompute its stale parity\n\
  verify [--only MIRROR_ID[,...]] [--stale|-s] [--verbose|-v] FILE...\n\
        compare the mirrors chunk by chunk; exit status EUCLEAN if they differ, ESTALE if a\n\
        mirror is stale; with --stale, mark the mirrors that differ stale (then resync)\n\
  read --mirror-id|-N MIRROR_ID --outfile|-o OUTPUT_FILE FILE\n\
        read one mirror alone (no fail-over): what that copy holds\n\
  write --mirror-id|-N MIRROR_ID --inputfile|-i INPUT_FILE FILE\n\
        write into one mirror alone; the others are left as they are\n";

/// `lfs mirror SUBCOMMAND`.
fn mirror(args: &[String]) -> Result<i32> {
    let Some((sub, rest)) = args.split_first() else {
        bail!("lfs mirror: a subcommand is needed\n{MIRROR_USAGE}");
    };
    if rest.iter().any(|a| a == "--help" || a == "-h") || sub == "--help" || sub == "help" {
        print!("{MIRROR_USAGE}");
        return Ok(0);
    }
    match sub.as_str() {
        "create" => {
            let req = lapi::setstripe::parse_mirror_create(rest).map_err(lapi_err)?;
            apply_setstripe(req)
        }
        "extend" => mirror_extend(rest),
        "resync" => mirror_resync(rest),
        "verify" => mirror_verify(rest),
        "read" | "write" => mirror_rw(sub, rest),
        "split" => mirror_split(rest),
        other => bail!("lfs mirror: unknown subcommand '{other}'\n{MIRROR_USAGE}"),
    }
}

/// `--only 1,2`: mirror ids.
fn mirror_ids(cmd: &str, v: &str) -> Result<Vec<u32>> {
    v.split(',')
        .map(|x| {
            x.trim()
                .parse::<u32>()
                .ok()
                .filter(|&n| n > 0 && n <= nacre_core::layout::MAX_MIRROR_COUNT * 4096)
                .ok_or_else(|| anyhow!("{cmd}: bad mirror ids '{v}'.\n{MIRROR_USAGE}"))
        })
        .collect()
}

/// Options of a mirror subcommand: `(flags seen, values by option, files)`. `takes` lists
/// the options with a value; a value may follow as the next word or after `=`.
struct MirrorArgs {
    flags: Vec<String>,
    values: Vec<(String, String)>,
    files: Vec<String>,
}

fn mirror_args(cmd: &str, args: &[String], takes: &[&str], flags: &[&str]) -> Result<MirrorArgs> {
    let mut out = MirrorArgs {
        flags: Vec::new(),
        values: Vec::new(),
        files: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if n.starts_with('-') => (n.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        if takes.contains(&name.as_str()) {
            let v = match inline {
                Some(v) => v,
                None => it.next().cloned().ok_or_else(|| {
                    anyhow!("{cmd}: option '{name}' requires an argument\n{MIRROR_USAGE}")
                })?,
            };
            out.values.push((name, v));
        } else if flags.contains(&name.as_str()) {
            out.flags.push(name);
        } else if a.starts_with('-') && a.len() > 1 {
            bail!("{cmd}: unrecognized option '{a}'\n{MIRROR_USAGE}");
        } else {
            out.files.push(a.clone());
        }
    }
    if out.files.is_empty() {
        bail!("{cmd}: no file name given.\n{MIRROR_USAGE}");
    }
    Ok(out)
}

impl MirrorArgs {
    fn value(&self, names: &[&str]) -> Option<&str> {
        self.values
            .iter()
            .rev()
            .find(|(n, _)| names.contains(&n.as_str()))
            .map(|(_, v)| v.as_str())
    }

    fn count(&self, names: &[&str]) -> usize {
        self.flags
            .iter()
            .filter(|f| names.contains(&f.as_str()))
            .count()
    }
}

/// Runs `f` on each file's mount and path, printing `cmd: 'FILE': error` on failure;
/// the exit status is the last error's errno.
fn each_file(
    cmd: &str,
    files: &[String],
    mut f: impl FnMut(&str, &MountEntry, &Path) -> Result<i32, (Errno, String)>,
) -> i32 {
    let mut rc = 0;
    for p in files {
        let res = ctl::find_mount(Path::new(p))
            .map_err(|e| (Errno::ENOENT, format!("{e:#}")))
            .and_then(|(m, rel)| f(p, &m, &rel));
        match res {
            Ok(0) => {}
            Ok(code) => rc = code,
            Err((e, msg)) => {
                eprintln!("{cmd}: '{p}': {msg}");
                rc = e.code();
            }
        }
    }
    rc
}

fn mirror_resync(args: &[String]) -> Result<i32> {
    const CMD: &str = "lfs mirror resync";
    let a = mirror_args(CMD, args, &["--only"], &[])?;
    let only = match a.value(&["--only"]) {
        Some(v) => mirror_ids(CMD, v)?,
        None => Vec::new(),
    };
    if !only.is_empty() && a.files.len() > 1 {
        bail!("{CMD}: '--only' cannot be used upon multiple files.\n{MIRROR_USAGE}");
    }
    Ok(each_file(CMD, &a.files, |_, m, rel| {
        let req = CtlRequest::MirrorResync {
            path: rel.to_path_buf(),
            only: only.clone(),
        };
        call(m, &req).map(|_| 0)
    }))
}

/// `[start, end)` as Lustre's `DEXT` prints it (`%#llx`: no `0x` before 0).
fn dext(start: u64, end: u64) -> String {
    let x = |v: u64| {
        if v == 0 {
            "0".to_string()
        } else {
            format!("{v:#x}")
        }
    };
    format!("[{}, {})", x(start), x(end))
}

fn mirror_verify(args: &[String]) -> Result<i32> {
    const CMD: &str = "lfs mirror verify";
    let a = mirror_args(
        CMD,
        args,
        &["--only", "-o"],
        &["-v", "--verbose", "-s", "--stale", "-vv"],
    )?;
    let only = match a.value(&["--only", "-o"]) {
        Some(v) => mirror_ids(CMD, v)?,
        None => Vec::new(),
    };
    if !only.is_empty() && only.len() < 2 {
        bail!("{CMD}: at least 2 mirror ids needed with '--only' option.\n{MIRROR_USAGE}");
    }
    if !only.is_empty() && a.files.len() > 1 {
        bail!("{CMD}: '--only' cannot be used upon multiple files.\n{MIRROR_USAGE}");
    }
    let verbose = a.count(&["-v", "--verbose"]) + 2 * a.count(&["-vv"]);
    let stale = a.count(&["-s", "--stale"]) > 0;
    Ok(each_file(CMD, &a.files, |p, m, rel| {
        let req = CtlRequest::MirrorVerify {
            path: rel.to_path_buf(),
            only: only.clone(),
            stale,
        };
        let CtlReply::Verified(v) = call(m, &req)? else {
            return Err((Errno::EPROTO, "unexpected reply".into()));
        };
        let mut rc = 0;
        if v.size == 0 && verbose > 0 {
            println!("{CMD}: '{p}' file size is 0.");
        }
        if only.is_empty() && !v.stale.is_empty() {
            println!("CRC-32 checksum value for chunk {}:", dext(0, v.size));
            for s in &v.stale {
                println!("Mirror {s}:\t(stale)");
            }
            rc = Errno::ESTALE.code();
        }
        for c in &v.chunks {
            let ids: Vec<String> = c.mirrors.iter().map(|(m, _)| m.to_string()).collect();
            if c.mirrors.len() < 2 {
                if verbose > 0 {
                    match c.mirrors.first() {
                        Some((m, _)) => println!(
                            "{CMD}: '{p}' chunk {} is only valid in mirror {m}: skipped",
                            dext(c.start, c.end)
                        ),
                        None => eprintln!(
                            "{CMD}: '{p}' chunk {} is invalid in all of the mirrors: skipped",
                            dext(c.start, c.end)
                        ),
                    }
                }
                continue;
            }
            let (first, first_r) = &c.mirrors[0];
            for (mid, r) in &c.mirrors {
                if let Err(e) = r {
                    eprintln!("{CMD}: error reading from mirror {mid}: {e}");
                    rc = e.code();
                }
            }
            for (mid, r) in &c.mirrors[1..] {
                if let (Ok(a0), Ok(ai)) = (first_r, r)
                    && a0 != ai
                {
                    eprintln!(
                        "{CMD}: chunk {} has different checksum value on mirror {first}:{a0:x} and mirror {mid}:{ai:x}: {}",
                        dext(c.start, c.end),
                        Errno(libc::EUCLEAN)
                    );
                    rc = Errno(libc::EUCLEAN).code();
                }
            }
            if verbose > 0 && c.agrees() {
                println!(
                    "Verifying chunk {} on mirror: {} PASS",
                    dext(c.start, c.end),
                    ids.join(" ")
                );
            }
        }
        if stale && rc != 0 && rc != Errno::ESTALE.code() {
            println!("Successfully marked inconsistent mirrors as stale in '{p}'");
        }
        Ok(rc)
    }))
}

fn mirror_rw(sub: &str, args: &[String]) -> Result<i32> {
    let cmd = format!("lfs mirror {sub}");
    let (io_opt, io_long) = if sub == "read" {
        ("-o", "--outfile")
    } else {
        ("-i", "--inputfile")
    };
    let a = mirror_args(&cmd, args, &["-N", "--mirror-id", io_opt, io_long], &[])?;
    let id = a
        .value(&["-N", "--mirror-id"])
        .ok_or_else(|| anyhow!("{cmd}: no mirror id is specified\n{MIRROR_USAGE}"))?;
    let id = *mirror_ids(&cmd, id)?
        .first()
        .ok_or_else(|| anyhow!("{cmd}: bad mirror id\n{MIRROR_USAGE}"))?;
    if a.files.len() != 1 {
        bail!("{cmd}: only one file can be given\n{MIRROR_USAGE}");
    }
    // The mount process opens the other file itself: standard output or input are
    // reached through this process's descriptors.
    let io = match a.value(&[io_opt, io_long]) {
        Some(f) => std::path::absolute(f)?,
        None if sub == "read" => PathBuf::from(format!("/proc/{}/fd/1", std::process::id())),
        None => PathBuf::from(format!("/proc/{}/fd/0", std::process::id())),
    };
    Ok(each_file(&cmd, &a.files, |_, m, rel| {
        let path = rel.to_path_buf();
        let req = if sub == "read" {
            CtlRequest::MirrorRead {
                path,
                id,
                out: io.clone(),
            }
        } else {
            CtlRequest::MirrorWrite {
                path,
                id,
                input: io.clone(),
            }
        };
        call(m, &req).map(|_| 0)
    }))
}

fn mirror_split(args: &[String]) -> Result<i32> {
    const CMD: &str = "lfs mirror split";
    let a = mirror_args(CMD, args, &["--mirror-id", "-f"], &["-d", "--destroy"])?;
    let id = a
        .value(&["--mirror-id"])
        .ok_or_else(|| anyhow!("{CMD}: no mirror id is specified\n{MIRROR_USAGE}"))?;
    let id = *mirror_ids(CMD, id)?
        .first()
        .ok_or_else(|| anyhow!("{CMD}: bad mirror id\n{MIRROR_USAGE}"))?;
    let destroy = a.count(&["-d", "--destroy"]) > 0;
    let new_file = a.value(&["-f"]).map(str::to_string);
    if destroy && new_file.is_some() {
        bail!("{CMD}: '-d' and '-f' cannot be used together\n{MIRROR_USAGE}");
    }
    Ok(each_file(CMD, &a.files, |p, m, rel| {
        let new_file = match (&new_file, destroy) {
            (_, true) => None,
            (Some(f), false) => Some(
                ctl::find_mount(Path::new(f))
                    .map_err(|e| (Errno::ENOENT, format!("{e:#}")))?
                    .1,
            ),
            (None, false) => {
                let victim = format!("{p}.mirror~{id}");
                Some(
                    ctl::find_mount(Path::new(&victim))
                        .map_err(|e| (Errno::ENOENT, format!("{e:#}")))?
                        .1,
                )
            }
        };
        let req = CtlRequest::MirrorSplit {
            path: rel.to_path_buf(),
            id,
            new_file,
        };
        call(m, &req).map(|_| 0)
    }))
}

fn mirror_extend(args: &[String]) -> Result<i32> {
    const CMD: &str = "lfs mirror extend";
    let req = lapi::setstripe::parse_mirror_create(args).map_err(lapi_err)?;
    let SetstripeAction::SetLayout(layout) = &req.action else {
        bail!("{CMD}: give the new mirrors with -N\n{MIRROR_USAGE}");
    };
    let components = template(layout.clone()).components;
    Ok(each_file(CMD, &req.paths, |_, m, rel| {
        let components = pools_exist(m, &components)?;
        let r = CtlRequest::MirrorExtend {
            path: rel.to_path_buf(),
            components,
        };
        call(m, &r).map(|_| 0)
    }))
}

fn setstripe(args: &[String]) -> Result<i32> {
    let req = lapi::setstripe::parse_setstripe(args).map_err(lapi_err)?;
    apply_setstripe(req)
}

fn apply_setstripe(req: lapi::setstripe::SetstripeRequest) -> Result<i32> {
    let mut rc = 0;
    for p in &req.paths {
        let path = PathBuf::from(p);
        let (m, rel) = ctl::find_mount(&path)?;
        let res = match &req.action {
            SetstripeAction::SetLayout(layout) => {
                set_layout(&m, &rel, layout, req.mode.unwrap_or(0o644))
            }
            SetstripeAction::DeleteDefault => match stat(&m, &rel) {
                Ok((info, _)) if !info.attr.is_dir() => {
                    Err((Errno::ENOTDIR, "not a directory".into()))
                }
                Ok(_) => call(
                    &m,
                    &CtlRequest::SetDefaultLayout {
                        path: rel.clone(),
                        layout: None,
                    },
                )
                .map(|_| ()),
                Err(e) => Err(e),
            },
            SetstripeAction::AddComponents(comps) => add_components(&m, &rel, comps.clone()),
            SetstripeAction::DeleteComponents(sel) => {
                let (id, flags, neg) = match sel {
                    ComponentSelector::Id(id) => (Some(*id), 0, 0),
                    ComponentSelector::Flags { flags, neg_flags } => (None, *flags, *neg_flags),
                };
                call(
                    &m,
                    &CtlRequest::DelComponents {
                        path: rel.clone(),
                        id,
                        flags,
                        neg,
                    },
                )
                .map(|_| ())
            }
            SetstripeAction::FromYaml(file) => match read_yaml_layout(file) {
                Ok(l) => set_layout(&m, &rel, &l, req.mode.unwrap_or(0o644)),
                Err(e) => Err(e),
            },
            SetstripeAction::CopyLayout(src) => match layout_of_path(src) {
                Ok(l) => set_layout(&m, &rel, &l, req.mode.unwrap_or(0o644)),
                Err(e) => Err(e),
            },
            other => Err((
                Errno::ENOTSUP,
                format!("{} is not supported", action_name(other)),
            )),
        };
        if let Err((e, msg)) = res {
            eprintln!("lfs setstripe: setstripe error for '{p}': {msg}");
            rc = e.code();
        }
    }
    Ok(rc)
}

fn add_components(
    m: &MountEntry,
    rel: &Path,
    comps: Vec<nacre_core::Component>,
) -> Result<(), (Errno, String)> {
    let comps = pools_exist(m, &comps)?;
    let (info, _) = stat(m, rel)?;
    let existing = info
        .layout
        .ok_or((Errno::EINVAL, "the file has no layout".to_string()))?;
    let comps = lapi::setstripe::rebase_added_components(&existing, comps)
        .map_err(|e| (e.errno(), e.to_string()))?;
    let mut whole = existing.clone();
    whole.components.extend(comps.iter().cloned());
    check_rules(m, &whole)?;
    call(
        m,
        &CtlRequest::AddComponents {
            path: rel.to_path_buf(),
            components: comps,
        },
    )
    .map(|_| ())
}

/// Checks a layout a user gave before it is sent: Lustre's rules for this file system's OST
/// count, and that each pool it names exists and has OSTs (`llapi_file_open_param`). The
/// layout comes back with `FSNAME.POOL` names cut to the pool's, as lfs sends them.
fn check_given_layout(m: &MountEntry, layout: &Layout) -> Result<Layout, (Errno, String)> {
    check_rules(m, layout)?;
    let mut l = layout.clone();
    l.components = pools_exist(m, &layout.components)?;
    Ok(l)
}

/// Lustre's layout rules, with this file system's OST count.
fn check_rules(m: &MountEntry, layout: &Layout) -> Result<(), (Errno, String)> {
    let osts = ost_count(m)?;
    validate(layout, &LayoutCtx::with_ost_count(osts)).map_err(|e| (e.errno(), e.to_string()))
}

/// The OST pools of `m`'s file system, as its client knows them.
fn pools_of(m: &MountEntry) -> Result<Vec<nacre_core::pool::OstPool>, (Errno, String)> {
    match call(m, &CtlRequest::Pools)? {
        CtlReply::Pools(pools) => Ok(pools),
        _ => Err((Errno::EPROTO, "unexpected reply".into())),
    }
}

/// `comps` with each pool name checked as `llapi_file_open_param` checks it: a
/// `FSNAME.POOL` name must be of this file system (and is cut to `POOL`), and the pool
/// must exist and have OSTs. "ignore" (no pool) passes.
fn pools_exist(
    m: &MountEntry,
    comps: &[nacre_core::Component],
) -> Result<Vec<nacre_core::Component>, (Errno, String)> {
    let mut out = comps.to_vec();
    if out
        .iter()
        .all(|c| c.pool.is_empty() || nacre_core::pool::is_ignored(&c.pool))
    {
        return Ok(out);
    }
    let pools = pools_of(m)?;
    for c in out.iter_mut() {
        if c.pool.is_empty() || nacre_core::pool::is_ignored(&c.pool) {
            continue;
        }
        if let (fs, Some(pool)) = nacre_core::pool::split_full_name(&c.pool) {
            if fs != m.fsname {
                return Err((
                    Errno::EINVAL,
                    format!("Pool '{}' is not on filesystem '{}'", c.pool, m.fsname),
                ));
            }
            c.pool = pool.to_string();
        }
        match nacre_core::pool::find(&pools, &c.pool) {
            Some(p) if !p.osts.is_empty() => {}
            found => {
                let why = if found.is_some() {
                    "has no OSTs"
                } else {
                    "does not exist"
                };
                return Err((
                    Errno::EINVAL,
                    format!("pool '{}.{}' {why}", m.fsname, c.pool),
                ));
            }
        }
    }
    Ok(out)
}

/// `lfs pool_list FSNAME[.POOL] | PATH`: the pools of a mounted file system, or one
/// pool's OSTs (`llapi_poollist`).
fn pool_list(args: &[String]) -> Result<i32> {
    use lapi::pool::{PoolCmd, parse};
    let r = parse(PoolCmd::List, args).map_err(lapi_err)?;
    let (pools, fsname, pool) = if r.full.starts_with('/') {
        let (m, _) = ctl::find_mount(Path::new(&r.full))?;
        let pools = pools_of(&m).map_err(|(_, msg)| anyhow!(msg))?;
        (pools, m.fsname, String::new())
    } else {
        // A client of the file system, else (lctl on a server node) its MGS's process:
        // a process with neither answers ENOTCONN, and the next is asked.
        let procs: Vec<MountEntry> = ctl::mounts()?
            .into_iter()
            .chain(ctl::servers()?)
            .filter(|m| m.fsname == r.fsname)
            .collect();
        let mut found = Err((
            Errno::ENODEV,
            format!("Lustre filesystem '{}' not found", r.fsname),
        ));
        for m in &procs {
            found = pools_of(m);
            if !matches!(&found, Err((e, _)) if *e == Errno::ENOTCONN) {
                break;
            }
        }
        let pools = found.map_err(|(_, msg)| anyhow!(msg))?;
        (pools, r.fsname.clone(), r.pool.clone())
    };
    match lapi::pool::list(&fsname, &pool, &pools) {
        Ok(text) => {
            print!("{text}");
            Ok(0)
        }
        Err(e) => {
            eprintln!("lfs pool_list: {}.{pool}: {}", fsname, e.describe());
            Ok(e.code())
        }
    }
}

fn ost_count(m: &MountEntry) -> Result<u32, (Errno, String)> {
    match call(m, &CtlRequest::Info)? {
        CtlReply::Info { osts, .. } => Ok(osts),
        _ => Err((Errno::EPROTO, "unexpected reply".into())),
    }
}

fn read_yaml_layout(file: &str) -> Result<Layout, (Errno, String)> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| (Errno::from(e), format!("cannot read {file}")))?;
    lapi::setstripe::parse_layout_yaml(&text).map_err(|e| (e.errno(), e.to_string()))
}

/// The layout of an existing file, as a template (`--copy`).
fn layout_of_path(src: &str) -> Result<Layout, (Errno, String)> {
    let (m, rel) =
        ctl::find_mount(Path::new(src)).map_err(|e| (Errno::ENOENT, format!("{e:#}")))?;
    let (info, _) = stat(&m, &rel)?;
    let l = if info.attr.is_dir() {
        default_layout(&m, &rel)?.ok_or((Errno::ENODATA, format!("{src} has no default layout")))?
    } else {
        info.layout
            .ok_or((Errno::ENODATA, format!("{src} has no layout")))?
    };
    Ok(template(l))
}

/// A layout stripped of objects and ids: what a new file would be created with.
fn template(mut l: Layout) -> Layout {
    for c in &mut l.components {
        c.objects.clear();
        c.dom_object = None;
        c.flags &= !(nacre_core::layout::LCME_FL_INIT | nacre_core::layout::LCME_FL_STALE);
        // The mirror id stays; the MDT numbers the components.
        c.id = nacre_core::layout::pflr_id(c.mirror_id(), 0);
    }
    l.layout_gen = 0;
    l
}

fn action_name(a: &SetstripeAction) -> &'static str {
    match a {
        SetstripeAction::SetLayout(_) => "setting a layout",
        SetstripeAction::DeleteDefault => "--delete",
        SetstripeAction::AddComponents(_) => "--component-add",
        SetstripeAction::DeleteComponents(_) => "--component-del",
        SetstripeAction::SetComponentFlags { .. } => "--component-set",
        SetstripeAction::FromYaml(_) => "--yaml",
        SetstripeAction::CopyLayout(_) => "--copy",
    }
}

fn set_layout(
    m: &MountEntry,
    rel: &Path,
    layout: &Layout,
    mode: u32,
) -> Result<(), (Errno, String)> {
    let layout = &check_given_layout(m, layout)?;
    match stat(m, rel) {
        Ok((info, _)) if info.attr.is_dir() => call(
            m,
            &CtlRequest::SetDefaultLayout {
                path: rel.to_path_buf(),
                layout: Some(layout.clone()),
            },
        )
        .map(|_| ()),
        Ok(_) => Err((Errno::EEXIST, "stripe already set".into())),
        Err((Errno::ENOENT, _)) => {
            let (uid, gid) = creds();
            call(
                m,
                &CtlRequest::CreateFile {
                    path: rel.to_path_buf(),
                    layout: layout.clone(),
                    mode,
                    uid,
                    gid,
                },
            )
            .map(|_| ())
        }
        Err(e) => Err(e),
    }
}

fn path2fid(args: &[String]) -> Result<i32> {
    let paths: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if paths.is_empty() {
        bail!("lfs path2fid: no path given\nusage: lfs path2fid PATH...");
    }
    let mut rc = 0;
    for p in &paths {
        let r =
            ctl::find_mount(Path::new(p.as_str())).map_err(|e| (Errno::ENOENT, format!("{e:#}")));
        match r.and_then(|(m, rel)| stat(&m, &rel)) {
            Ok((info, _)) if paths.len() == 1 => println!("{}", info.attr.fid),
            Ok((info, _)) => println!("{p}: {}", info.attr.fid),
            Err((e, msg)) => {
                eprintln!("lfs path2fid: cannot get fid for '{p}': {msg}");
                rc = e.code();
            }
        }
    }
    Ok(rc)
}

fn fid2path(args: &[String]) -> Result<i32> {
    let pos: Vec<&String> = args
        .iter()
        .filter(|a| !a.starts_with('-') || a.starts_with("-0x"))
        .collect();
    let Some((mnt, fids)) = pos.split_first() else {
        bail!("lfs fid2path: usage: lfs fid2path MOUNT FID...");
    };
    if fids.is_empty() {
        bail!("lfs fid2path: no FID given\nusage: lfs fid2path MOUNT FID...");
    }
    let (m, _) = ctl::find_mount(Path::new(mnt.as_str()))?;
    let mut rc = 0;
    for f in fids {
        let fid: Fid = match f.parse() {
            Ok(fid) => fid,
            Err(e) => {
                eprintln!("lfs fid2path: {e}");
                rc = Errno::EINVAL.code();
                continue;
            }
        };
        match call(&m, &CtlRequest::Fid2Path { fid }) {
            Ok(CtlReply::Path(p)) => {
                if fids.len() > 1 {
                    print!("{fid} ");
                }
                println!("{}", m.mountpoint.join(p).display())
            }
            Ok(_) => return Err(unexpected()),
            Err((e, msg)) => {
                eprintln!("lfs fid2path: cannot find {fid}: {msg}");
                rc = e.code();
            }
        }
    }
    Ok(rc)
}

/// `find`'s view of an entry whose attributes are known.
fn find_entry(
    info: &InodeInfo,
    mdt: u32,
    default_layout: Option<Layout>,
    name: &str,
    depth: u32,
) -> Result<(FindEntry, bool), (Errno, String)> {
    let a = &info.attr;
    let kind = a
        .kind()
        .ok_or((Errno::EIO, "unknown file type".to_string()))?;
    let is_dir = a.is_dir();
    let mut e = FindEntry::new(name, kind);
    e.size = a.size;
    e.mtime = a.mtime.sec;
    e.atime = a.atime.sec;
    e.ctime = a.ctime.sec;
    e.uid = a.uid;
    e.gid = a.gid;
    e.layout = if is_dir {
        default_layout
    } else {
        info.layout.clone()
    };
    e.mdt_index = mdt;
    e.lmv = info.lmv.clone();
    e.depth = depth;
    Ok((e, is_dir))
}

/// Prints `entry` if it matches and walks below it: a page of a directory's entries, with
/// their attributes, per control call.
#[allow(clippy::too_many_arguments)]
fn find_walk(
    m: &MountEntry,
    req: &lapi::find::FindRequest,
    rel: &Path,
    shown: &str,
    (entry, is_dir): (FindEntry, bool),
    depth: u32,
    now: i64,
    out: &mut dyn std::io::Write,
) -> Result<(), (Errno, String)> {
    if req.predicate.matches(&entry, now) {
        let _ = out.write_all(req.format(shown).as_bytes());
    }
    if !is_dir || !req.predicate.descend(depth) {
        return Ok(());
    }
    for_children(m, rel, |c| {
        let child = String::from_utf8_lossy(&c.name).into_owned();
        let child_shown = format!("{}/{child}", shown.trim_end_matches('/'));
        let e = find_entry(&c.info, c.mdt, c.default_layout, &child, depth + 1)?;
        match find_walk(
            m,
            req,
            &rel.join(&child),
            &child_shown,
            e,
            depth + 1,
            now,
            out,
        ) {
            // A directory removed during the walk is not an error worth stopping for.
            Err((Errno::ENOENT, _)) => Ok(()),
            r => r,
        }
    })
}

fn find(args: &[String]) -> Result<i32> {
    let req = lapi::find::parse_find(args).map_err(lapi_err)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut rc = 0;
    for p in &req.paths {
        let (m, rel) = match ctl::find_mount(Path::new(p)) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("lfs find: {e:#}");
                rc = 2;
                continue;
            }
        };
        let name = Path::new(p.as_str())
            .file_name()
            .map_or_else(|| p.to_string(), |n| n.to_string_lossy().into_owned());
        let top = stat(&m, &rel).and_then(|(info, mdt)| {
            let dl = if info.attr.is_dir() {
                default_layout(&m, &rel)?
            } else {
                None
            };
            find_entry(&info, mdt, dl, &name, 0)
        });
        if let Err((e, msg)) = top.and_then(|t| find_walk(&m, &req, &rel, p, t, 0, now, &mut out)) {
            eprintln!("lfs find: {p}: {msg}");
            rc = e.code();
        }
    }
    use std::io::Write;
    let _ = out.flush();
    Ok(rc)
}

fn migrate(args: &[String]) -> Result<i32> {
    let m = match lapi::setstripe::parse_migrate(args).map_err(lapi_err)? {
        MigrateRequest::Ost(m) => m,
        MigrateRequest::Mdt(_) => {
            bail!("lfs migrate: moving directories between MDTs (-m) is not supported")
        }
    };
    let mut paths = m.paths.clone();
    if m.null || m.files_from.is_some() {
        let text = match &m.files_from {
            Some(f) if f != "-" => std::fs::read(f)?,
            _ => {
                use std::io::Read;
                let mut b = Vec::new();
                std::io::stdin().read_to_end(&mut b)?;
                b
            }
        };
        let sep = if m.null { b'\0' } else { b'\n' };
        paths.extend(
            text.split(|c| *c == sep)
                .filter(|p| !p.is_empty())
                .map(|p| String::from_utf8_lossy(p).into_owned()),
        );
    }
    if paths.is_empty() {
        bail!("lfs migrate: no file given\n{USAGE}");
    }
    let mut rc = 0;
    for p in &paths {
        let res = (|| {
            let (mnt, rel) =
                ctl::find_mount(Path::new(p)).map_err(|e| (Errno::ENOENT, format!("{e:#}")))?;
            let (info, _) = stat(&mnt, &rel)?;
            if !info.attr.is_reg() {
                return Err((Errno::EINVAL, "not a regular file".to_string()));
            }
            let layout = match (&m.layout, &m.template) {
                (Some(l), _) => l.clone(),
                (None, Some(SetstripeAction::FromYaml(f))) => read_yaml_layout(f)?,
                (None, Some(SetstripeAction::CopyLayout(f))) => layout_of_path(f)?,
                _ => template(
                    info.layout
                        .clone()
                        .ok_or((Errno::EINVAL, "no layout".to_string()))?,
                ),
            };
            // A layout kept from the file itself passes with whatever pool it names,
            // even one destroyed since (the MDT then confines nothing).
            let layout = if m.layout.is_some() || m.template.is_some() {
                check_given_layout(&mnt, &layout)?
            } else {
                check_rules(&mnt, &layout)?;
                layout
            };
            call(&mnt, &CtlRequest::Migrate { path: rel, layout }).map(|_| ())
        })();
        match res {
            Ok(()) if m.verbose => println!("{p}"),
            Ok(()) => {}
            Err((e, msg)) => {
                eprintln!("lfs migrate: cannot migrate '{p}': {msg}");
                rc = e.code();
            }
        }
    }
    Ok(rc)
}
