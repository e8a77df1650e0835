//! `nacre lctl`: Lustre's `get_param`, `set_param` and `list_param` over the parameters of
//! every nacre process on this node (clients and the servers of `nacre up`), and
//! `set_param -P` through the MGS for every node.

use crate::cmd::lfs::call;
use crate::ctl::{self, MountEntry};
use crate::ctl_server::{CtlReply, CtlRequest};
use crate::params::ParamValue;
use anyhow::{Result, anyhow, bail};
use nacre_core::{Errno, Fid};
use nacre_lustreapi as lapi;
use nacre_lustreapi::lctl::{ParamKind, ParamPattern};
use nacre_rpc::lfsck::StartArgs;
use std::path::Path;

pub const USAGE: &str = "usage: nacre lctl COMMAND [ARGS]\n\
commands (Lustre's syntax and output):\n  \
get_param [-n] [-N] [-F] PATTERN...      show parameters (glob patterns per dotted component)\n  \
set_param [-n] NAME=VALUE...             change parameters on this node until restart\n  \
set_param -P NAME=VALUE...               record through the MGS, for every node now and later\n  \
set_param -P -d NAME...                  delete such a record\n  \
list_param [-F] PATTERN...               list parameter names\n  \
dl [-t] [-y]                             the devices of this node (device_list)\n  \
lfsck_start [-M DEV] [-A] [-t TYPES] ... start the online checker (lfsck_start -h)\n  \
lfsck_stop [-M DEV] [-A]                 stop it\n  \
lfsck_query [-M DEV] [-t TYPES] [-w]     every target's checker status\n  \
pool_new [-n] FSNAME.POOL                make an OST pool (on the MGS's node)\n  \
pool_add [-n] FSNAME.POOL OST...         add OSTs: OST0001, FSNAME-OST0001_UUID, OST[0-3,6]\n  \
pool_remove [-n] FSNAME.POOL OST...      take OSTs out of a pool\n  \
pool_destroy [-n] FSNAME.POOL            remove an empty pool\n  \
pool_list FSNAME[.POOL] | PATH           the pools of a file system, or one pool's OSTs\n\
examples:\n  nacre lctl get_param osc.*.max_rpcs_in_flight\n  \
nacre lctl set_param lod.*.dom_stripesize=65536\n  nacre lctl set_param -P llite.*.max_read_ahead_mb=128\n  \
nacre lctl pool_new nacre.flash && nacre lctl pool_add nacre.flash OST[0-1]\n  \
nacre lfs setstripe -p flash -c 2 /mnt/nacre/fast\n";

fn processes() -> Result<Vec<MountEntry>> {
    let mut m = ctl::servers()?;
    m.extend(ctl::mounts()?);
    if m.is_empty() {
        bail!("lctl: no nacre client or server runs on this node");
    }
    Ok(m)
}

fn gather(pattern: &ParamPattern, within: bool) -> Result<Vec<ParamValue>> {
    let mut out: Vec<ParamValue> = Vec::new();
    for m in processes()? {
        let req = CtlRequest::GetParams {
            pattern: pattern.as_str().to_string(),
            within,
        };
        match call(&m, &req) {
            Ok(CtlReply::Params(ps)) => {
                for p in ps {
                    if !out.iter().any(|q| q.name == p.name) {
                        out.push(p);
                    }
                }
            }
            Ok(_) => return Err(anyhow!("unexpected reply from {}", m.socket.display())),
            Err((_, msg)) => eprintln!("lctl: {}: {msg}", m.mountpoint.display()),
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

fn usage_err(e: lapi::Error) -> anyhow::Error {
    if e.is_usage() {
        anyhow!("{e}\n{USAGE}")
    } else {
        anyhow!("{e}")
    }
}

pub fn run(args: &[String]) -> Result<i32> {
    let Some((cmd, rest)) = args.split_first() else {
        print!("{USAGE}");
        return Ok(0);
    };
    match cmd.as_str() {
        "get_param" => {
            let q = lapi::lctl::parse_get_param(rest).map_err(usage_err)?;
            let mut rc = 0;
            for pat in &q.patterns {
                let found = gather(pat, false)?;
                if found.is_empty() {
                    eprintln!(
                        "error: get_param: param_path '{}': No such file or directory",
                        pat.as_str()
                    );
                    rc = 2;
                }
                for p in found {
                    let kind = ParamKind::File {
                        writable: p.writable,
                    };
                    let shown = lapi::lctl::param_display_name(&p.name, kind, &q.output);
                    print!(
                        "{}",
                        lapi::lctl::format_get_param(&q.output, &shown, &p.value)
                    );
                }
            }
            Ok(rc)
        }
        "list_param" => {
            let q = lapi::lctl::parse_list_param(rest).map_err(usage_err)?;
            let mut rc = 0;
            for pat in &q.patterns {
                let found = gather(pat, true)?;
                if found.is_empty() {
                    eprintln!(
                        "error: list_param: param_path '{}': No such file or directory",
                        pat.as_str()
                    );
                    rc = 2;
                }
                // Names at the depth of the pattern: devices for `osc.*`, parameters for `osc.*.*`.
                let depth = lapi::lctl::split_param_name(pat.as_str()).len();
                let mut shown: Vec<(String, ParamKind)> = Vec::new();
                for p in found {
                    let comps = lapi::lctl::split_param_name(&p.name);
                    let (name, kind) = if comps.len() > depth {
                        (comps[..depth].join("."), ParamKind::Dir)
                    } else {
                        (
                            p.name.clone(),
                            ParamKind::File {
                                writable: p.writable,
                            },
                        )
                    };
                    if !shown.iter().any(|(n, _)| *n == name) {
                        shown.push((name, kind));
                    }
                }
                for (name, kind) in shown {
                    print!("{}", lapi::lctl::format_list_param(&q.output, &name, kind));
                }
            }
            Ok(rc)
        }
        "dl" | "device_list" => device_list(rest),
        "set_param" => set_param(rest),
        "lfsck_start" => lfsck_start(rest),
        "lfsck_stop" => lfsck_stop(rest),
        "lfsck_query" => lfsck_query(rest),
        "--version" => {
            println!("lctl {}", env!("CARGO_PKG_VERSION"));
            Ok(0)
        }
        "help" | "--help" | "-h" => {
            print!("{USAGE}");
            Ok(0)
        }
        other => match lapi::pool::PoolCmd::of(other) {
            Some(cmd) => pool(cmd, rest),
            None => bail!("lctl: unknown command '{other}'\n{USAGE}"),
        },
    }
}

/// `lctl dl [-t] [-y]`: the devices of every nacre process on this node, numbered in
/// the order the processes list them (a node-wide service such as `OSS` once).
fn device_list(args: &[String]) -> Result<i32> {
    let o = lapi::devices::parse_dl(args).map_err(usage_err)?;
    let mut devs: Vec<lapi::devices::Device> = Vec::new();
    for m in processes()? {
        match call(&m, &CtlRequest::Devices) {
            Ok(CtlReply::Devices(ds)) => {
                for d in ds {
                    if !devs.iter().any(|o| o.class == d.class && o.name == d.name) {
                        devs.push(d);
                    }
                }
            }
            Ok(_) => return Err(anyhow!("unexpected reply from {}", m.socket.display())),
            Err((_, msg)) => eprintln!("lctl: {}: {msg}", m.mountpoint.display()),
        }
    }
    print!("{}", lapi::devices::format_dl(&devs, o));
    Ok(0)
}

fn set_param(args: &[String]) -> Result<i32> {
    let r = lapi::lctl::parse_set_param(args).map_err(usage_err)?;
    let procs = processes()?;
    let mut rc = 0;
    for (name, value) in &r.params {
        if r.permanent {
            // The MGS served on this node keeps it; else a client holding the file
            // system key can send it to the MGS (one holding the client key is refused).
            let value = if r.delete { None } else { value.clone() };
            let req = CtlRequest::SetParamPersistent {
                name: name.clone(),
                value,
            };
            let mut last: Option<(Errno, String)> = None;
            let mut done = false;
            for m in ctl::servers()?.iter().chain(ctl::mounts()?.iter()) {
                match call(m, &req) {
                    Ok(_) => {
                        done = true;
                        break;
                    }
                    // Not the MGS's process and no client to send it with: the next.
                    Err((e, _)) if e == Errno::ENOTCONN => {}
                    Err(err) => last = Some(err),
                }
            }
            if !done {
                let (e, msg) = last.unwrap_or((
                    Errno::ENOTCONN,
                    "no nacre process on this node serves the MGS or mounts the file system"
                        .to_string(),
                ));
                eprintln!("error: set_param: {name}: {msg}");
                rc = e.code();
            }
            continue;
        }
        let Some(value) = value else { continue };
        let mut any = false;
        for m in &procs {
            match call(
                m,
                &CtlRequest::SetParam {
                    pattern: name.clone(),
                    value: value.clone(),
                },
            ) {
                Ok(CtlReply::Set(names)) => {
                    for n in names {
                        any = true;
                        print!("{}", lapi::lctl::format_set_param(&r, &n, value));
                    }
                }
                Ok(_) => {}
                Err((e, msg)) => {
                    eprintln!("error: set_param: {msg}");
                    rc = e.code();
                    any = true;
                }
            }
        }
        if !any {
            eprintln!("error: set_param: param_path '{name}': No such file or directory");
            rc = 2;
        }
    }
    Ok(rc)
}

/// How long a pool command waits for its change to reach this node's client
/// (`check_pool_cmd_result`: twice the MGC's requeue time and 2 s).
const POOL_WAIT: std::time::Duration = std::time::Duration::from_secs(12);

/// `lctl pool_new/pool_destroy/pool_add/pool_remove/pool_list` (`jt_pool_cmd`).
fn pool(cmd: lapi::pool::PoolCmd, args: &[String]) -> Result<i32> {
    use lapi::pool::{PoolCmd, describe_error, result_line};
    let r = match lapi::pool::parse(cmd, args) {
        Ok(r) => r,
        Err(e) if e.is_usage() => {
            eprintln!("{}", lapi::pool::usage(cmd));
            return Ok(Errno::EINVAL.code());
        }
        Err(e) => {
            eprintln!("{e}");
            return Ok(e.errno().code());
        }
    };
    if cmd == PoolCmd::List {
        let mut lfs_args = vec!["pool_list".to_string()];
        lfs_args.extend(args.iter().cloned());
        return super::lfs::run(&lfs_args);
    }
    let ops: Vec<(Option<u32>, nacre_core::pool::PoolOp)> = match cmd {
        PoolCmd::Add | PoolCmd::Remove => r
            .osts
            .iter()
            .filter_map(|&o| r.op(Some(o)).map(|op| (Some(o), op)))
            .collect(),
        _ => r.op(None).map(|op| (None, op)).into_iter().collect(),
    };
    let procs: Vec<MountEntry> = ctl::servers()?
        .into_iter()
        .chain(ctl::mounts()?)
        .filter(|m| m.fsname == r.fsname)
        .collect();
    if procs.is_empty() {
        eprintln!(
            "{}: Lustre filesystem '{}' not found on this node",
            cmd.name(),
            r.fsname
        );
        return Ok(Errno::ENODEV.code());
    }
    let mut rc = 0;
    let mut done: Vec<(Option<u32>, nacre_core::pool::PoolOp)> = Vec::new();
    for (ost, op) in ops {
        let req = CtlRequest::Pool {
            pool: r.pool.clone(),
            op: op.clone(),
        };
        let mut result: Result<(), (Errno, String)> = Err((Errno::ENOTCONN, String::new()));
        for m in &procs {
            match call(m, &req) {
                Ok(_) => {
                    result = Ok(());
                    break;
                }
                // Not the MGS's process and no client to send it with: the next.
                Err((e, _)) if e == Errno::ENOTCONN => {}
                Err(err) => {
                    result = Err(err);
                    break;
                }
            }
        }
        match result {
            Ok(()) => done.push((ost, op)),
            Err((e, msg)) => {
                if e == Errno::EPERM || e == Errno::ENOTCONN {
                    let msg = if msg.is_empty() {
                        "no nacre process on this node serves the MGS or mounts the file system"
                            .to_string()
                    } else {
                        msg
                    };
                    eprintln!("{}: {msg}", cmd.name());
                } else {
                    eprintln!("{}", describe_error(cmd, &r.fsname, &r.pool, ost, e));
                }
                rc = e.code();
            }
        }
    }
    if r.nowait || done.is_empty() {
        return Ok(rc);
    }
    // As `check_pool_cmd_result`: wait until this node's client sees each change.
    let Some(client) = ctl::mounts()?.into_iter().find(|m| m.fsname == r.fsname) else {
        eprintln!(
            "Warning, no client of \"{}\" on this node, unable to check pool updates on clients.",
            r.fsname
        );
        return Ok(rc);
    };
    let deadline = std::time::Instant::now() + POOL_WAIT;
    let visible = |op: &nacre_core::pool::PoolOp| -> bool {
        matches!(call(&client, &CtlRequest::Pools), Ok(CtlReply::Pools(pools)) if lapi::pool::op_visible(&pools, &r.pool, op))
    };
    for (ost, op) in &done {
        let mut seen = visible(op);
        while !seen && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
            seen = visible(op);
        }
        eprint!("{}", result_line(cmd, &r.fsname, &r.pool, *ost, seen));
    }
    Ok(rc)
}

/// Sends `req` to every process on this node until one serves the device; the reply, or
/// the first error other than "no such device".
fn lfsck_call(req: &CtlRequest) -> Result<CtlReply, (Errno, String)> {
    let procs = processes().map_err(|e| (Errno::ENODEV, format!("{e:#}")))?;
    let mut last = (
        Errno::ENODEV,
        "Fail to get device name: no MDT device on this node. You can specify the device explicitly via '-M' option.".to_string(),
    );
    for m in &procs {
        match call(m, req) {
            Ok(r) => return Ok(r),
            Err((e, msg)) if e == Errno::ENODEV || e == Errno::ENOTCONN => last = (e, msg),
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

fn lfsck_fail(e: (Errno, String)) -> Result<i32> {
    eprintln!("{}", e.1);
    Ok(e.0.code())
}

/// The FID of a directory on a nacre mount, for `--path`.
fn path_fid(path: &str) -> Result<Fid> {
    let (m, rel) = ctl::find_mount(Path::new(path))?;
    match call(&m, &CtlRequest::Stat { path: rel }) {
        Ok(CtlReply::Inode { info, .. }) if info.attr.is_dir() => Ok(info.attr.fid),
        Ok(CtlReply::Inode { .. }) => bail!("{path}: Not a directory"),
        Ok(_) => bail!("{path}: unexpected reply"),
        Err((_, msg)) => bail!("{path}: {msg}"),
    }
}

fn lfsck_start(args: &[String]) -> Result<i32> {
    let r = lapi::lfsck::parse_start(args).map_err(usage_err)?;
    if r.help {
        print!("{}", lapi::lfsck::START_USAGE);
        return Ok(0);
    }
    let root = r.path.as_deref().map(path_fid).transpose()?;
    let req = CtlRequest::LfsckStart {
        device: r.device.clone(),
        args: StartArgs {
            valid: r.valid,
            speed_limit: r.speed_limit,
            active: r.active,
            flags: r.flags,
            async_windows: r.async_windows,
            root,
            mdts: Vec::new(),
            sponsor: None,
        },
    };
    match lfsck_call(&req) {
        Ok(CtlReply::LfsckStarted { device, active }) => {
            print!("{}", lapi::lfsck::format_started(&device, active));
            Ok(0)
        }
        Ok(_) => bail!("lfsck_start: unexpected reply"),
        Err(e) => lfsck_fail(e),
    }
}

fn lfsck_stop(args: &[String]) -> Result<i32> {
    let r = lapi::lfsck::parse_stop(args).map_err(usage_err)?;
    if r.help {
        print!("{}", lapi::lfsck::STOP_USAGE);
        return Ok(0);
    }
    let req = CtlRequest::LfsckStop {
        device: r.device.clone(),
        all: r.all,
    };
    match lfsck_call(&req) {
        Ok(CtlReply::LfsckStopped { device }) => {
            println!("Stopped LFSCK on the device {device}.");
            Ok(0)
        }
        Ok(_) => bail!("lfsck_stop: unexpected reply"),
        Err(e) => lfsck_fail(e),
    }
}

/// How often `lfsck_query -w` looks again.
const QUERY_WAIT_POLL: std::time::Duration = std::time::Duration::from_millis(500);

fn lfsck_query(args: &[String]) -> Result<i32> {
    let r = lapi::lfsck::parse_query(args).map_err(usage_err)?;
    if r.help {
        print!("{}", lapi::lfsck::QUERY_USAGE);
        return Ok(0);
    }
    let req = CtlRequest::LfsckQuery {
        device: r.device.clone(),
        types: r.types,
    };
    loop {
        match lfsck_call(&req) {
            Ok(CtlReply::LfsckQuery(q)) => {
                if r.wait && q.running() {
                    std::thread::sleep(QUERY_WAIT_POLL);
                    continue;
                }
                print!("{}", q.format(r.types));
                return Ok(0);
            }
            Ok(_) => bail!("lfsck_query: unexpected reply"),
            Err(e) => return lfsck_fail(e),
        }
    }
}
