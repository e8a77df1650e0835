//! `nacre lfs mkdir`, `setdirstripe` and `getdirstripe`: directory striping over MDTs
//! (DNE), with Lustre's syntax and output. (`lfs find --mdt` lives with `lfs find`.)

use super::lfs::{call, stat};
use crate::ctl::{self, MountEntry};
use crate::ctl_server::{CtlReply, CtlRequest};
use anyhow::{Result, anyhow};
use nacre_core::lmv::LmvTemplate;
use nacre_core::{Errno, FileKind};
use nacre_lustreapi as lapi;
use nacre_lustreapi::dirstripe::{DirStripeEntry, DirStripeOp, SetdirstripeRequest};
use nacre_rpc::msg::DirLayoutRequest;
use std::io::Write;
use std::path::Path;

pub const USAGE: &str = "  \
mkdir [-i IDX[,IDX..]|-1] [-c COUNT] [-H fnv_1a_64|all_char|crush|crush2] [-o MODE] DIR   a remote or striped directory\n  \
setdirstripe [-D] [-d] [-i IDX] [-c COUNT] [-H HASH] [-X MAX_INHERIT] DIR   the same, or a default for new subdirectories\n  \
getdirstripe [-D] [-y] [-r] [-c] [-i] [-H] [-v] DIR...   show directory striping\n";

fn err_of(e: lapi::Error) -> anyhow::Error {
    if e.is_usage() {
        anyhow!("{e}\nusage: nacre lfs COMMAND [ARGS]\n{USAGE}")
    } else {
        anyhow!("{e}")
    }
}

fn mdt_count(m: &MountEntry) -> Result<u32, (Errno, String)> {
    match call(m, &CtlRequest::Info)? {
        CtlReply::Info { mdts, .. } => Ok(mdts),
        _ => Err((Errno::EPROTO, "unexpected reply".into())),
    }
}

fn creds() -> (u32, u32) {
    // SAFETY: these calls cannot fail.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

fn umask() -> u32 {
    // SAFETY: umask cannot fail; it is set back at once.
    unsafe {
        let m = libc::umask(0o022);
        libc::umask(m);
        m
    }
}

/// `lfs mkdir` and `lfs setdirstripe`.
pub fn setdirstripe(cmd: &str, args: &[String]) -> Result<i32> {
    let req = if cmd == "mkdir" {
        lapi::dirstripe::parse_mkdir(args)
    } else {
        lapi::dirstripe::parse_setdirstripe(args)
    }
    .map_err(err_of)?;
    for w in &req.warnings {
        eprintln!("{w}");
    }
    let mut rc = 0;
    for p in &req.paths {
        if let Err((e, msg)) = setdirstripe_one(&req, Path::new(p)) {
            eprintln!("lfs {cmd}: dirstripe error on '{p}': {msg}");
            rc = e.code();
        }
    }
    Ok(rc)
}

fn setdirstripe_one(req: &SetdirstripeRequest, path: &Path) -> Result<(), (Errno, String)> {
    let (m, rel) = ctl::find_mount(path).map_err(|e| (Errno::ENOENT, format!("{e:#}")))?;
    let n = mdt_count(&m)?;
    if req.op != DirStripeOp::DeleteDefault {
        req.validate(n).map_err(|e| (e.errno(), e.to_string()))?;
    }
    let r = match req.op {
        DirStripeOp::Create => {
            let (uid, gid) = creds();
            call(
                &m,
                &CtlRequest::Mkdir {
                    path: rel,
                    layout: DirLayoutRequest {
                        stripe_count: req.stripe_count,
                        stripe_offset: req.stripe_offset,
                        mdts: req.mdts.clone(),
                        hash_type: req.hash_type(),
                    },
                    mode: req.mode.unwrap_or(0o777 & !umask()),
                    uid,
                    gid,
                },
            )
        }
        DirStripeOp::SetDefault => call(
            &m,
            &CtlRequest::SetDefaultLmv {
                path: rel,
                lmv: Some(req.template()),
            },
        ),
        DirStripeOp::DeleteDefault => call(
            &m,
            &CtlRequest::SetDefaultLmv {
                path: rel,
                lmv: None,
            },
        ),
    };
    r.map(|_| ()).map_err(|(e, msg)| {
        let why = match e {
            Errno::EIO | Errno::ETIMEDOUT => format!("{msg} (an MDT it needs may be down)"),
            _ if msg.is_empty() => e.describe(),
            _ => msg,
        };
        (e, why)
    })
}

fn default_lmv(m: &MountEntry, rel: &Path) -> Result<Option<LmvTemplate>, (Errno, String)> {
    match call(
        m,
        &CtlRequest::GetDefaultLmv {
            path: rel.to_path_buf(),
        },
    )? {
        CtlReply::DefaultLmv(l) => Ok(l),
        _ => Err((Errno::EPROTO, "unexpected reply".into())),
    }
}

/// Names of a directory's subdirectories, read a page per call.
fn subdir_names(m: &MountEntry, rel: &Path) -> Result<Vec<Vec<u8>>, (Errno, String)> {
    let mut out = Vec::new();
    let mut cookie = 0;
    loop {
        let req = CtlRequest::List {
            path: rel.to_path_buf(),
            cookie,
        };
        match call(m, &req)? {
            CtlReply::Entries {
                entries,
                cookie: next,
                eof,
            } => {
                out.extend(
                    entries
                        .into_iter()
                        .filter(|e| e.kind == FileKind::Directory)
                        .map(|e| e.name),
                );
                if eof {
                    return Ok(out);
                }
                if next == cookie {
                    return Err((Errno::EPROTO, "directory listing made no progress".into()));
                }
                cookie = next;
            }
            _ => return Err((Errno::EPROTO, "unexpected reply".into())),
        }
    }
}

fn dir_entry(
    m: &MountEntry,
    rel: &Path,
    shown: &str,
    recursive: bool,
) -> Result<DirStripeEntry, (Errno, String)> {
    let (info, mdt) = stat(m, rel)?;
    if !info.attr.is_dir() {
        return Err((Errno::ENOTDIR, "not a directory".into()));
    }
    let mut subdirs = Vec::new();
    if recursive {
        for name in subdir_names(m, rel)? {
            let name = String::from_utf8_lossy(&name).into_owned();
            let child = format!("{}/{}", shown.trim_end_matches('/'), name);
            subdirs.push(dir_entry(m, &rel.join(&name), &child, true)?);
        }
    }
    Ok(DirStripeEntry {
        path: shown.to_string(),
        fid: info.attr.fid,
        mdt_index: mdt,
        lmv: info.lmv,
        default_lmv: default_lmv(m, rel)?,
        subdirs,
    })
}

/// `lfs getdirstripe`.
pub fn getdirstripe(args: &[String]) -> Result<i32> {
    let req = lapi::dirstripe::parse_getdirstripe(args).map_err(err_of)?;
    let mut rc = 0;
    let mut out = std::io::stdout().lock();
    for p in &req.paths {
        let r = ctl::find_mount(Path::new(p))
            .map_err(|e| (Errno::ENOENT, format!("{e:#}")))
            .and_then(|(m, rel)| dir_entry(&m, &rel, p, req.options.recursive));
        match r {
            Ok(d) => {
                let _ = out.write_all(lapi::dirstripe::getdirstripe(&req.options, &d).as_bytes());
            }
            Err((e, msg)) => {
                eprintln!("lfs getdirstripe: cannot get dirstripe of '{p}': {msg}");
                rc = e.code();
            }
        }
    }
    Ok(rc)
}
