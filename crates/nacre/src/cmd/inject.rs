//! `nacre inject`: fault injection on a live file system, the LFSCK study's PFault as a
//! command. It picks files under a directory of a nacre mount (walking it through the
//! mount's control socket), then asks the process serving each affected target, through
//! that process's control socket, to break one thing there (see [`crate::inject_ctl`]).

use crate::cmd::lfs::call;
use crate::ctl::{self, MountEntry};
use crate::ctl_server::{CtlReply, CtlRequest};
use crate::inject_ctl::{InjectOp, InjectedItem};
use anyhow::{Context, Result, anyhow, bail};
use nacre_core::{Errno, Fid, StripeObject, TargetName};
use nacre_rpc::msg::InodeInfo;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use std::path::{Path, PathBuf};

/// Directories a walk descends into at most, so a loop (a damaged tree) cannot keep it
/// going forever.
const MAX_WALK_DIRS: usize = 1_000_000;
/// The oids of the parents `orphan-ost-object` invents are a file's oid with these bits
/// flipped, as `corrupt_filter_fid` does: a FID of the same sequence no file has.
const INVENTED_OID_BITS: u32 = 0x00ff_0000;
/// How much the link count `change-nlink` sets is off by.
const NLINK_OFF_BY: u32 = 6;

/// What `nacre inject --help` says first.
pub const LONG_ABOUT: &str = "Breaks, on purpose, what LFSCK and nacre's fault handling are there for, on a \
running file system (`nacre up` or `nacre serve` processes on this node): CLASS on COUNT files under PATH (the \
first COUNT in path order, or COUNT at random with --seed), or a fault model on the targets of --target. Every \
item broken is printed with its path and FID, and a dry run (`nacre lctl lfsck_start -n`) then counts exactly \
that many.\n\n\
PATH is a directory on a nacre mount of this node; the targets to act on must be served by a process on this \
node (all of them with `nacre up`).";

/// The examples and the list of classes, after the options.
pub const EXAMPLES: &str = "\
Examples (on a `nacre up /tmp/fs --mount /mnt/nacre` file system):
  nacre inject corrupt-filter-fid /mnt/nacre/data -n 10      # the first 10 files' stripe 0 objects
  nacre inject corrupt-linkea /mnt/nacre/data -n 5 --seed 7  # 5 files chosen at random, repeatably
  nacre lctl lfsck_start -n -t all && nacre lctl lfsck_query -w  # a dry run counts exactly those
  nacre lctl lfsck_start -t all -c -o                             # repair; a second run finds 0
  nacre inject rewind-last-id --target OST0001
  nacre inject a-DevFail --target OST0000,OST0001             # every OSS's storage fails ...
  nacre inject a-DevFail --target OST0000,OST0001 --clear     # ... and comes back
  nacre inject c-Network --target MDT0000                     # the MDS's replies are lost

Classes (what a dry run of `lctl lfsck_start` counts for each):
  layout (lfsck_layout):
    remove-ost-object    stripe 0 object removed                      dangling
    truncate-ost-object  stripe 0 object emptied, size says data      dangling (1)
    corrupt-filter-fid   stripe 0 object's filter fid names nothing   unmatched_pair
    change-ost-owner     stripe 0 object owned by uid+1:gid+1         inconsistent_owner
    share-object         2nd file of a pair holds the 1st's object    multiple_referenced
    detach-ost-object    layout names an object never created         orphan (put back)
    orphan-ost-object    a new object for a file that does not exist  orphan (2)
    rewind-last-id       LAST_ID of each sequence of --target set to 1  others
  namespace (lfsck_namespace):
    delete-dirent        a file's name removed                        lost_dirent
    corrupt-linkea       a file's linkEA emptied                      linkea
    orphan-inode         name removed and linkEA emptied              local_lost_found_moved
    flip-dirent-type     the entry's type set to FIFO                 bad_file_type
    corrupt-dirent-fid   the FID in the entry is garbage              dirent
    change-nlink         the link count off by 6                      nlinks
    corrupt-lmv-slot     a striped directory's slot 1 names nothing   striped_dirs
  object index (oi_scrub):
    drop-oi-entry        a file's OI entry removed                    updated
    drop-oi              the whole OI of --target (default MDT0000)   updated, one per inode
  data (not LFSCK's: checksums and the scrub find these):
    bit-flip             one bit of stripe 0 object at a random place
Fault models (the PFault table), on --target MGS, MDTxxxx, OSTxxxx (comma list):
    a-DevFail            the target's storage fails: every request EIO (`health_check`)
    c-Network            the target's replies are dropped: clients time out
  Both stay until `--clear`. b-Inconsist is every class above.
(1) counted once the MDT has recorded the file's exact size (Lazy Size-on-MDT).
(2) counted by a run with -o (`lfsck_start -n -o`), which puts it in lost+found.
Classes meet: a file whose OI entry is dropped has its objects counted as orphans by a
layout run with -o until the OI scrub puts the entry back; repair one class before the next.";

/// What `nacre inject` breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Class {
    RemoveOstObject,
    TruncateOstObject,
    CorruptFilterFid,
    ChangeOstOwner,
    ShareObject,
    DetachOstObject,
    OrphanOstObject,
    RewindLastId,
    DeleteDirent,
    #[value(alias = "corrupt-linkEA")]
    CorruptLinkea,
    OrphanInode,
    FlipDirentType,
    CorruptDirentFid,
    ChangeNlink,
    CorruptLmvSlot,
    DropOiEntry,
    DropOi,
    BitFlip,
    /// The target's storage fails
    #[value(name = "a-DevFail", alias = "dev-fail", alias = "devfail")]
    DevFail,
    /// The target's replies are dropped
    #[value(name = "c-Network", alias = "network")]
    Network,
}

impl Class {
    fn name(self) -> String {
        use clap::ValueEnum;
        self.to_possible_value()
            .map_or_else(|| format!("{self:?}"), |v| v.get_name().to_string())
    }

    /// Classes that act on targets rather than on files.
    fn on_targets(self) -> bool {
        matches!(
            self,
            Class::RewindLastId | Class::DropOi | Class::DevFail | Class::Network
        )
    }
}

/// `nacre inject`'s arguments (its help: [`LONG_ABOUT`], [`EXAMPLES`]).
#[derive(clap::Args, Debug)]
pub struct InjectArgs {
    /// What to break (see the list below)
    #[arg(value_enum)]
    pub class: Class,
    /// A directory on a nacre mount: the files under it are the candidates
    pub path: Option<PathBuf>,
    /// How many items to break
    #[arg(short = 'n', long = "count", default_value_t = 1)]
    pub count: usize,
    /// Choose the items at random from this seed (the same seed picks the same items)
    #[arg(long)]
    pub seed: Option<u64>,
    /// Targets of a fault model, rewind-last-id or drop-oi: MGS, MDT0000, OST0001, ...
    #[arg(short = 't', long, value_delimiter = ',')]
    pub target: Vec<String>,
    /// Undo a fault model (a-DevFail, c-Network) on --target
    #[arg(long)]
    pub clear: bool,
}

/// A file or directory found under PATH.
struct Found {
    /// As the user would name it (the mount point joined).
    path: PathBuf,
    parent: Fid,
    parent_mdt: u32,
    parent_striped: bool,
    name: Vec<u8>,
    info: InodeInfo,
    mdt: u32,
}

impl Found {
    fn fid(&self) -> Fid {
        self.info.attr.fid
    }

    fn stripe0(&self) -> Option<StripeObject> {
        self.info
            .layout
            .as_ref()?
            .components
            .first()?
            .objects
            .first()
            .copied()
    }

    /// A plain file whose name lives in a plain directory on the same MDT as its inode.
    fn local_file(&self) -> bool {
        self.info.attr.is_reg() && !self.parent_striped && self.parent_mdt == self.mdt
    }

    /// A file whose stripe 0 object holds data, with its size known to the MDT.
    fn has_data(&self) -> bool {
        self.info.attr.is_reg()
            && self.info.attr.size > 0
            && self.info.size_authoritative
            && self.stripe0().is_some()
    }
}

fn mdt_name(i: u32) -> String {
    TargetName::mdt(i).short()
}

fn ost_name(i: u32) -> String {
    TargetName::ost(i).short()
}

/// Every process of this node that may serve targets.
fn processes() -> Result<Vec<MountEntry>> {
    let mut m = ctl::servers()?;
    m.extend(ctl::mounts()?);
    if m.is_empty() {
        bail!("inject: no nacre server or mount runs on this node");
    }
    Ok(m)
}

/// Sends `op` for `target` to the process of this node that serves it.
fn send(procs: &[MountEntry], target: &str, op: &InjectOp) -> Result<Vec<InjectedItem>> {
    let req = CtlRequest::Inject {
        target: target.to_string(),
        op: op.clone(),
    };
    for m in procs {
        match call(m, &req) {
            Ok(CtlReply::Injected(items)) => return Ok(items),
            Ok(_) => bail!("{target}: unexpected reply from {}", m.socket.display()),
            Err((e, _)) if e == Errno::ENODEV || e == Errno::ENOTCONN => continue,
            Err((_, msg)) => bail!("{msg}"),
        }
    }
    bail!("{target}: no process on this node serves it")
}

/// Every entry under `rel` on mount `m`, in path order.
fn walk(m: &MountEntry, rel: &Path) -> Result<Vec<Found>> {
    let (top, top_mdt) =
        crate::cmd::lfs::stat(m, rel).map_err(|(_, msg)| anyhow!("{}: {msg}", rel.display()))?;
    if !top.attr.is_dir() {
        bail!("{}: Not a directory", m.mountpoint.join(rel).display());
    }
    let mut out = Vec::new();
    let mut dirs = vec![(rel.to_path_buf(), top, top_mdt)];
    let mut seen = 0usize;
    while let Some((dir, info, mdt)) = dirs.pop() {
        seen += 1;
        if seen > MAX_WALK_DIRS {
            bail!("more than {MAX_WALK_DIRS} directories under the path");
        }
        let mut cookie = 0;
        loop {
            let req = CtlRequest::ListStat {
                path: dir.clone(),
                cookie,
            };
            let (children, next, eof) = match call(m, &req) {
                Ok(CtlReply::Children {
                    children,
                    cookie,
                    eof,
                }) => (children, cookie, eof),
                Ok(_) => bail!("{}: unexpected reply", dir.display()),
                Err((_, msg)) => bail!("{}: {msg}", dir.display()),
            };
            for c in children {
                use std::os::unix::ffi::OsStrExt;
                let crel = dir.join(std::ffi::OsStr::from_bytes(&c.name));
                if c.info.attr.is_dir() {
                    dirs.push((crel.clone(), c.info.clone(), c.mdt));
                }
                out.push(Found {
                    path: m.mountpoint.join(&crel),
                    parent: info.attr.fid,
                    parent_mdt: mdt,
                    parent_striped: info.lmv.is_some(),
                    name: c.name,
                    info: c.info,
                    mdt: c.mdt,
                });
            }
            if eof {
                break;
            }
            cookie = next;
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// One line per item: the file's path and FID, then what was broken where (the object's
/// FID when it is not the file's).
fn print_item(class: Class, path: &str, file: Fid, target: &str, it: &InjectedItem) {
    let obj = match it.fid {
        Some(f) if f != file => format!(" {f}"),
        _ => String::new(),
    };
    let detail = if it.detail.is_empty() {
        String::new()
    } else {
        format!(" ({})", it.detail)
    };
    println!(
        "{}: {path} {file}: {}{obj} on {target}{detail}",
        class.name(),
        it.what
    );
}

pub fn run(a: &InjectArgs) -> Result<i32> {
    let procs = processes()?;
    if a.class.on_targets() {
        return run_on_targets(a, &procs);
    }
    let Some(path) = &a.path else {
        bail!(
            "{} needs PATH, a directory on a nacre mount",
            a.class.name()
        );
    };
    let (m, rel) = ctl::find_mount(path)?;
    let all = walk(&m, &rel).with_context(|| format!("cannot walk {}", path.display()))?;
    let fits: Vec<&Found> = all.iter().filter(|f| fits(a.class, f)).collect();
    let need = if a.class == Class::ShareObject {
        2 * a.count
    } else {
        a.count
    };
    if fits.len() < need {
        bail!(
            "{}: {} of the {} entries under {} fit {} (need {need}): {}",
            a.class.name(),
            fits.len(),
            all.len(),
            path.display(),
            a.class.name(),
            wants(a.class)
        );
    }
    let mut picked = fits;
    if let Some(seed) = a.seed {
        picked.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
    }
    picked.truncate(need);
    let mut done = 0usize;
    if a.class == Class::ShareObject {
        for pair in picked.chunks(2) {
            let (fa, fb) = (pair[0], pair[1]);
            let target = mdt_name(fa.mdt);
            let items = send(
                &procs,
                &target,
                &InjectOp::ShareObject {
                    a: fa.fid(),
                    b: fb.fid(),
                },
            )?;
            let shown = format!("{} (object of {})", fb.path.display(), fa.path.display());
            if let Some(it) = items.first() {
                print_item(a.class, &shown, fb.fid(), &target, it);
            }
            // The second file's own object would be an orphan besides: it goes.
            if let Some(InjectedItem { fid: Some(obj), .. }) = items.get(1)
                && let Some(so) = fb.stripe0()
            {
                match send(
                    &procs,
                    &ost_name(so.ost_idx),
                    &InjectOp::RemoveOstObject { obj: *obj },
                ) {
                    Ok(_) => {}
                    Err(e) => tracing::debug!("{e:#}"),
                }
            }
            done += 1;
        }
    } else {
        for (i, f) in picked.iter().enumerate() {
            let (target, op) = op_for(a, f, i as u32)?;
            let items = send(&procs, &target, &op)?;
            for it in &items {
                print_item(a.class, &f.path.display().to_string(), f.fid(), &target, it);
            }
            done += 1;
        }
    }
    println!(
        "injected {done} {} under {}",
        a.class.name(),
        path.display()
    );
    Ok(0)
}

/// Whether `f` can take `class`.
fn fits(class: Class, f: &Found) -> bool {
    match class {
        Class::DeleteDirent
        | Class::OrphanInode
        | Class::FlipDirentType
        | Class::CorruptDirentFid => f.local_file() && f.info.attr.nlink == 1,
        Class::CorruptLinkea => f.info.attr.is_reg() && f.info.attr.nlink == 1,
        Class::ChangeNlink | Class::DropOiEntry => f.info.attr.is_reg(),
        Class::CorruptLmvSlot => f.info.lmv.as_ref().is_some_and(|l| l.stripes.len() > 1),
        // Objects are made with their files, so any one removed is found lost.
        Class::RemoveOstObject => f.info.attr.is_reg() && f.stripe0().is_some(),
        Class::TruncateOstObject
        | Class::CorruptFilterFid
        | Class::ChangeOstOwner
        | Class::DetachOstObject
        | Class::BitFlip
        | Class::ShareObject
        | Class::OrphanOstObject => f.has_data(),
        Class::RewindLastId | Class::DropOi | Class::DevFail | Class::Network => false,
    }
}

/// What a class needs of a file, for the message when too few fit.
fn wants(class: Class) -> &'static str {
    match class {
        Class::DeleteDirent
        | Class::OrphanInode
        | Class::FlipDirentType
        | Class::CorruptDirentFid => {
            "regular files with one name, in a plain directory of their own MDT"
        }
        Class::CorruptLinkea => "regular files with one name",
        Class::CorruptLmvSlot => "directories striped over two MDTs or more",
        Class::ChangeNlink | Class::DropOiEntry => "regular files",
        Class::RemoveOstObject => "regular files with an OST object",
        _ => "regular files holding data whose size the MDT knows (closed a moment ago or more)",
    }
}

/// The target and request that break `f` (the `i`th picked).
fn op_for(a: &InjectArgs, f: &Found, i: u32) -> Result<(String, InjectOp)> {
    let mdt = mdt_name(f.mdt);
    let pmdt = mdt_name(f.parent_mdt);
    let (parent, name) = (f.parent, f.name.clone());
    let stripe0 = || {
        f.stripe0()
            .ok_or_else(|| anyhow!("{}: no stripe 0 object", f.path.display()))
    };
    Ok(match a.class {
        Class::DeleteDirent => (pmdt, InjectOp::RemoveName { parent, name }),
        Class::OrphanInode => (pmdt, InjectOp::OrphanInode { parent, name }),
        Class::FlipDirentType => (pmdt, InjectOp::FlipDirentType { parent, name }),
        Class::CorruptDirentFid => (pmdt, InjectOp::CorruptDirentFid { parent, name }),
        Class::CorruptLinkea => (mdt, InjectOp::DropLinks { fid: f.fid() }),
        Class::ChangeNlink => (
            mdt,
            InjectOp::SetNlink {
                fid: f.fid(),
                nlink: f.info.attr.nlink + NLINK_OFF_BY,
            },
        ),
        Class::CorruptLmvSlot => (
            mdt,
            InjectOp::CorruptLmvSlot {
                fid: f.fid(),
                index: 1,
            },
        ),
        Class::DropOiEntry => (mdt, InjectOp::DropOiEntry { fid: f.fid() }),
        Class::DetachOstObject => (mdt, InjectOp::DetachObject { fid: f.fid() }),
        Class::OrphanOstObject => {
            let so = stripe0()?;
            let fid = f.fid();
            let parent = Fid::new(fid.seq, (fid.oid ^ INVENTED_OID_BITS).wrapping_add(i), 0);
            (
                mdt,
                InjectOp::OrphanOstObject {
                    ost: so.ost_idx,
                    parent,
                    data: format!("orphan data {i} beside {}\n", f.path.display()).into_bytes(),
                },
            )
        }
        Class::RemoveOstObject => {
            let so = stripe0()?;
            (
                ost_name(so.ost_idx),
                InjectOp::RemoveOstObject { obj: so.fid },
            )
        }
        Class::TruncateOstObject => {
            let so = stripe0()?;
            (
                ost_name(so.ost_idx),
                InjectOp::TruncateOstObject { obj: so.fid },
            )
        }
        Class::CorruptFilterFid => {
            let so = stripe0()?;
            (
                ost_name(so.ost_idx),
                InjectOp::CorruptFilterFid { obj: so.fid },
            )
        }
        Class::ChangeOstOwner => {
            let so = stripe0()?;
            (
                ost_name(so.ost_idx),
                InjectOp::ChangeOstOwner {
                    obj: so.fid,
                    uid: f.info.attr.uid.wrapping_add(1),
                    gid: f.info.attr.gid.wrapping_add(1),
                },
            )
        }
        Class::BitFlip => {
            let so = stripe0()?;
            (
                ost_name(so.ost_idx),
                InjectOp::FlipBit {
                    obj: so.fid,
                    seed: a.seed.unwrap_or(0).wrapping_add(u64::from(i)),
                },
            )
        }
        Class::ShareObject
        | Class::RewindLastId
        | Class::DropOi
        | Class::DevFail
        | Class::Network => bail!("{}: not a per-file class", a.class.name()),
    })
}

/// Normalises a target name as the user gave it (`mgs`, `OST1`, `fs-OST0001`).
fn target_name(s: &str) -> Result<String> {
    if s.eq_ignore_ascii_case("mgs") || s.ends_with("-MGS") {
        return Ok("MGS".to_string());
    }
    TargetName::parse(&s.to_ascii_uppercase())
        .map(|t| t.short())
        .ok_or_else(|| anyhow!("{s}: not a target name (MGS, MDT0000, OST0001, ...)"))
}

fn run_on_targets(a: &InjectArgs, procs: &[MountEntry]) -> Result<i32> {
    let mut targets = a
        .target
        .iter()
        .map(|t| target_name(t))
        .collect::<Result<Vec<_>>>()?;
    if targets.is_empty() {
        match a.class {
            Class::DropOi => targets.push(mdt_name(0)),
            _ => bail!(
                "{} needs --target (MGS, MDT0000, OST0001, ... or a comma list)",
                a.class.name()
            ),
        }
    }
    if a.clear && !matches!(a.class, Class::DevFail | Class::Network) {
        bail!("--clear undoes a-DevFail or c-Network only");
    }
    let op = match a.class {
        Class::RewindLastId => InjectOp::RewindLastId,
        Class::DropOi => InjectOp::DropOi,
        Class::DevFail => InjectOp::DevFail { clear: a.clear },
        Class::Network => InjectOp::Network { clear: a.clear },
        _ => bail!("{}: not a target class", a.class.name()),
    };
    for t in &targets {
        for it in send(procs, t, &op)? {
            let fid = it.fid.map(|f| format!(" {f}")).unwrap_or_default();
            let detail = if it.detail.is_empty() {
                String::new()
            } else {
                format!(" ({})", it.detail)
            };
            println!("{}: {t}:{fid} {}{detail}", a.class.name(), it.what);
        }
    }
    Ok(0)
}
