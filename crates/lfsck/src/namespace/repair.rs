//! Making namespace repairs on this MDT's store. Each runs as one transaction that first
//! checks the inconsistency is still there (the file system is live: a client may have
//! fixed or changed it since the check saw it) and that no distributed operation in
//! flight holds the object or name; otherwise it does nothing.

use super::facts::{Busy, mdt_of, stripe_xattr_key};
use crate::control::bounded;
use nacre_core::{Attr, Errno, Fid, FileKind, Timespec};
use nacre_mdt::Mdt;
use nacre_mdt::dne::exec::STRIPE_XATTR;
use nacre_mdt::mdd::{self, CreateArgs};
use nacre_mdt::records::{self, Inode};
use nacre_osd::{Table, Tx};
use nacre_rpc::lfsck::{DirentFact, LfsckReply, LfsckRequest, NsFact, NsQuery, NsRepair, Outcome};
use nacre_rpc::msg::{Cred, DirLayoutRequest, Reply, Request};
use std::sync::Arc;

/// Name of the `.lustre` directory under the root.
pub const DOT_LUSTRE_NAME: &[u8] = b".lustre";
/// Name of `lost+found` under `.lustre`.
pub const LOST_FOUND_NAME: &[u8] = b"lost+found";

/// An outcome from a transaction result: a repair that found nothing to do says
/// `Unneeded` through [`NOTHING`].
const NOTHING: Errno = Errno::EALREADY;

fn outcome(r: Result<(), Errno>) -> Outcome {
    match r {
        Ok(()) => Outcome::Repaired,
        Err(NOTHING) => Outcome::Unneeded,
        Err(e) => Outcome::Failed(e),
    }
}

fn busy_fid(tx: &mut Tx, fid: &Fid) -> Result<bool, Errno> {
    Ok(Busy::read(tx)?.fids.contains(fid))
}

fn busy_name(tx: &mut Tx, parent: &Fid, name: &[u8]) -> Result<bool, Errno> {
    Ok(Busy::read(tx)?.holds_name(parent, name))
}

/// Adds `fid` to the namespace trace (phase 2 looks at it again).
pub fn trace_put(tx: &mut Tx, fid: &Fid) -> Result<(), Errno> {
    tx.put(Table::LfsckTrace, &fid.to_bytes(), &[])
}

/// Records, for phase 2, that name `parent/name` points at `fid`.
pub fn trace_link(tx: &mut Tx, fid: &Fid, parent: &Fid, name: &[u8]) -> Result<(), Errno> {
    trace_put(tx, fid)?;
    let mut k = fid.to_bytes().to_vec();
    k.extend_from_slice(&parent.to_bytes());
    k.extend_from_slice(name);
    tx.put(Table::LfsckTrace, &k, &[])
}

/// Subdirectories of local directory `dir`, by its entries' types.
fn count_subdirs(tx: &mut Tx, dir: &Fid) -> Result<u32, Errno> {
    let mut n = 0u32;
    let mut start = records::dirent_start(dir, 0);
    let end = records::dirent_end(dir);
    loop {
        let rows = tx.range(Table::Dirents, &start, &end, 4096)?;
        for (_, v) in &rows {
            if records::parse_dirent(v)?.kind == FileKind::Directory {
                n += 1;
            }
        }
        match rows.last() {
            Some((k, _)) if rows.len() == 4096 => {
                start = k.clone();
                start.push(0);
            }
            _ => return Ok(n),
        }
    }
}

/// Whether a local name `parent/name` points at `fid` now.
fn names(tx: &mut Tx, parent: &Fid, name: &[u8], fid: &Fid) -> Result<bool, Errno> {
    Ok(mdd::lookup(tx, parent, name)?.is_some_and(|(f, _)| f == *fid))
}

/// Makes one repair on this MDT's store (`me`).
pub fn apply_tx(tx: &mut Tx, me: u32, op: &NsRepair, now: Timespec) -> Result<(), Errno> {
    match op {
        NsRepair::AddLink { fid, parent, name } => {
            let mut i = mdd::get_inode(tx, fid).map_err(|_| NOTHING)?;
            if busy_fid(tx, fid)? || mdd::has_link(tx, &i, parent, name)? {
                return Err(NOTHING);
            }
            mdd::add_link(tx, &mut i, parent, name)?;
            mdd::put_inode(tx, &i)?;
            trace_put(tx, fid)
        }
        NsRepair::RemoveLink { fid, parent, name } => {
            let mut i = mdd::get_inode(tx, fid).map_err(|_| NOTHING)?;
            if busy_fid(tx, fid)?
                || busy_name(tx, parent, name)?
                || (mdt_of(parent) == me && names(tx, parent, name, fid)?)
            {
                return Err(NOTHING);
            }
            if !mdd::remove_link(tx, &mut i, parent, name)? {
                return Err(NOTHING);
            }
            mdd::put_inode(tx, &i).map(|_| ())
        }
        NsRepair::SetDirLink { fid, parent, name } => {
            let mut i = mdd::get_inode(tx, fid).map_err(|_| NOTHING)?;
            let want = vec![(*parent, name.clone())];
            if !i.attr.is_dir() || mdd::all_links(tx, &i)? == want || busy_fid(tx, fid)? {
                return Err(NOTHING);
            }
            mdd::set_links(tx, &mut i, want)?;
            mdd::put_inode(tx, &i).map(|_| ())
        }
        NsRepair::SetNlink { fid, old, nlink } => {
            let mut i = mdd::get_inode(tx, fid).map_err(|_| NOTHING)?;
            if busy_fid(tx, fid)? {
                return Err(NOTHING);
            }
            let want = if i.attr.is_dir() {
                // Counted again here: entries may have come and gone since the check.
                if i.attr.nlink == 0 {
                    return Err(NOTHING);
                }
                if i.lmv.is_some() {
                    2
                } else {
                    2 + count_subdirs(tx, fid)?
                }
            } else {
                if i.attr.nlink != *old {
                    return Err(NOTHING);
                }
                *nlink
            };
            if i.attr.nlink == want || want == 0 {
                return Err(NOTHING);
            }
            i.attr.nlink = want;
            mdd::put_inode(tx, &i).map(|_| ())
        }
        NsRepair::InsertName {
            parent,
            name,
            fid,
            kind,
        } => {
            let mut p = mdd::live_plain_dir(tx, parent).map_err(|_| NOTHING)?;
            if mdd::lookup(tx, parent, name)?.is_some() || busy_name(tx, parent, name)? {
                return Err(NOTHING);
            }
            mdd::put_dirent(tx, parent, name, fid, *kind, 0)?;
            if *kind == FileKind::Directory {
                p.attr.nlink += 1;
            }
            p.attr.mtime = now;
            p.attr.ctime = now;
            mdd::put_inode(tx, &p).map(|_| ())
        }
        NsRepair::DeleteName { parent, name, fid } => {
            let Some(rec) = mdd::lookup_rec(tx, parent, name)? else {
                return Err(NOTHING);
            };
            if rec.fid != *fid || busy_name(tx, parent, name)? {
                return Err(NOTHING);
            }
            tx.delete(Table::Dirents, &records::dirent_key(parent, name))?;
            if let Ok(mut p) = mdd::get_inode(tx, parent) {
                if rec.kind == FileKind::Directory {
                    p.attr.nlink = p.attr.nlink.saturating_sub(1).max(2);
                }
                p.attr.mtime = now;
                p.attr.ctime = now;
                mdd::put_inode(tx, &p)?;
            }
            Ok(())
        }
        NsRepair::SetName {
            parent,
            name,
            old,
            new,
            kind,
        } => {
            let Some(rec) = mdd::lookup_rec(tx, parent, name)? else {
                return Err(NOTHING);
            };
            if rec.fid != *old || busy_name(tx, parent, name)? {
                return Err(NOTHING);
            }
            let ino = if mdt_of(new) == me {
                mdd::oi_lookup(tx, new)?.unwrap_or(0)
            } else {
                0
            };
            if rec.fid == *new && rec.kind == *kind && rec.ino == ino {
                return Err(NOTHING);
            }
            mdd::put_dirent(tx, parent, name, new, *kind, ino)
        }
        NsRepair::CreateObject {
            fid,
            kind,
            parent,
            name,
            uid,
            gid,
            stripe_of,
        } => {
            if mdd::exists(tx, fid)? {
                return Err(NOTHING);
            }
            let is_dir = *kind == FileKind::Directory;
            let perm = if is_dir { 0o755 } else { 0o644 };
            let ino = Inode {
                attr: Attr {
                    fid: *fid,
                    mode: kind.mode_bits() | perm,
                    nlink: if is_dir { 2 } else { 1 },
                    uid: *uid,
                    gid: *gid,
                    atime: now,
                    mtime: now,
                    ctime: now,
                    btime: now,
                    ..Attr::default()
                },
                layout: None,
                lmv: None,
                default_layout: None,
                default_lmv: None,
                link: Some((*parent, name.clone())),
                symlink: None,
                lsom_valid: true,
                ino: 0,
            };
            let nr = mdd::put_inode(tx, &ino)?;
            if let Some(s) = stripe_of {
                let v = postcard::to_allocvec(s).map_err(|_| Errno::EIO)?;
                tx.put(Table::Xattrs, &records::xattr_key(fid, STRIPE_XATTR), &v)?;
            }
            // The name that pointed nowhere now holds the new inode's number too.
            if mdt_of(parent) == me
                && let Some(rec) = mdd::lookup_rec(tx, parent, name)?
                && rec.fid == *fid
            {
                mdd::put_dirent(tx, parent, name, fid, rec.kind, nr)?;
            }
            Ok(())
        }
        NsRepair::SetStripeOf { fid, master, index } => {
            let i = mdd::get_inode(tx, fid).map_err(|_| NOTHING)?;
            if !i.attr.is_dir() || busy_fid(tx, fid)? {
                return Err(NOTHING);
            }
            let cur = nacre_mdt::dne::exec::stripe_of(tx, fid)?;
            if cur == Some((*master, *index)) {
                return Err(NOTHING);
            }
            let v = postcard::to_allocvec(&(*master, *index)).map_err(|_| Errno::EIO)?;
            tx.put(Table::Xattrs, &stripe_xattr_key(fid), &v)
        }
        NsRepair::SetLmvSlot {
            master,
            index,
            old,
            stripe,
            mdt,
        } => {
            let mut m = mdd::get_inode(tx, master).map_err(|_| NOTHING)?;
            if busy_fid(tx, master)? {
                return Err(NOTHING);
            }
            let Some(slot) = m
                .lmv
                .as_mut()
                .and_then(|l| l.stripes.get_mut(*index as usize))
            else {
                return Err(NOTHING);
            };
            if slot.1 != *old {
                return Err(NOTHING);
            }
            *slot = (*mdt, *stripe);
            mdd::put_inode(tx, &m).map(|_| ())
        }
        NsRepair::Trace { fid, parent, name } => trace_link(tx, fid, parent, name),
        NsRepair::LostFound => ensure_lost_found(tx, now),
    }
}

/// Makes `.lustre` and `.lustre/lost+found` on MDT0 if they are missing.
pub fn ensure_lost_found(tx: &mut Tx, now: Timespec) -> Result<(), Errno> {
    let mut made = false;
    for (fid, parent, name, mode) in [
        (Fid::DOT_LUSTRE, Fid::ROOT, DOT_LUSTRE_NAME, 0o755),
        (Fid::LOST_FOUND, Fid::DOT_LUSTRE, LOST_FOUND_NAME, 0o700),
    ] {
        if mdd::exists(tx, &fid)? {
            continue;
        }
        let a = CreateArgs {
            parent,
            name: name.to_vec(),
            mode: libc::S_IFDIR | mode,
            rdev: 0,
            cred: nacre_rpc::msg::Cred::root(),
            symlink: None,
            layout: None,
            fid: Some(fid),
            now,
            open_for_write: false,
        };
        mdd::create(tx, 0, a, false)?;
        made = true;
    }
    if made { Ok(()) } else { Err(NOTHING) }
}

/// Makes one repair on `mdt`'s store.
pub async fn apply(mdt: &Arc<Mdt>, op: NsRepair) -> Outcome {
    let me = mdt.index;
    let now = Timespec::now();
    outcome(
        mdt.store()
            .write(move |tx| apply_tx(tx, me, &op, now))
            .await,
    )
}

/// The name of this MDT's directory under `.lustre/lost+found`.
pub fn lpf_name(mdt: u32) -> Vec<u8> {
    format!("MDT{mdt:04x}").into_bytes()
}

async fn ask_mdt0(mdt: &Mdt, req: LfsckRequest) -> Result<LfsckReply, Errno> {
    let px = mdt.mdt_proxy(0)?;
    match bounded(async { px.call(&Request::Lfsck(req)).await.map_err(|e| e.errno()) }).await? {
        Reply::Lfsck(r) => Ok(r),
        _ => Err(Errno::EPROTO),
    }
}

/// This MDT's `.lustre/lost+found/MDTxxxx` (made if missing): local to this MDT, named
/// on MDT0.
pub async fn lost_found_dir(mdt: &Arc<Mdt>) -> Result<Fid, Errno> {
    let name = lpf_name(mdt.index);
    if mdt.index == 0 {
        let now = Timespec::now();
        return mdt
            .store()
            .write(move |tx| {
                match ensure_lost_found(tx, now) {
                    Ok(()) | Err(NOTHING) => {}
                    Err(e) => return Err(e),
                }
                if let Some((f, _)) = mdd::lookup(tx, &Fid::LOST_FOUND, &name)? {
                    return Ok(f);
                }
                let a = CreateArgs {
                    parent: Fid::LOST_FOUND,
                    name,
                    mode: libc::S_IFDIR | 0o700,
                    rdev: 0,
                    cred: nacre_rpc::msg::Cred::root(),
                    symlink: None,
                    layout: None,
                    fid: None,
                    now,
                    open_for_write: false,
                };
                match mdd::create(tx, 0, a, false)? {
                    mdd::Created::New(i) | mdd::Created::Existing(i) => Ok(i.fid()),
                }
            })
            .await;
    }
    let q = NsQuery::Entry {
        parent: Fid::LOST_FOUND,
        name: name.clone(),
    };
    if let LfsckReply::NsFacts(f) = ask_mdt0(mdt, LfsckRequest::NsFacts(vec![q])).await?
        && let Some(NsFact::Entry(DirentFact::Present { fid, .. })) = f.first()
    {
        return Ok(*fid);
    }
    ask_mdt0(mdt, LfsckRequest::NsRepair(vec![NsRepair::LostFound])).await?;
    // A directory of this MDT under lost+found on MDT0: a remote mkdir, which MDT0
    // coordinates as it does for clients.
    let px = mdt.mdt_proxy(0)?;
    let req = Request::Mkdir {
        parent: Fid::LOST_FOUND,
        name,
        mode: 0o700,
        cred: Cred::root(),
        layout: DirLayoutRequest {
            stripe_count: 1,
            stripe_offset: mdt.index as i32,
            mdts: vec![],
            hash_type: 0,
        },
    };
    match bounded(async { px.call(&req).await.map_err(|e| e.errno()) }).await? {
        Reply::Inode(i) => Ok(i.attr.fid),
        _ => Err(Errno::EPROTO),
    }
}

/// Moves local object `fid`, which no name reaches, into this MDT's lost+found as
/// `[FID]-<kind>-N`, dropping its `stale` links.
pub async fn move_to_lost_found(
    mdt: &Arc<Mdt>,
    fid: Fid,
    kind: char,
    stale: Vec<(Fid, Vec<u8>)>,
) -> Outcome {
    let lpf = match lost_found_dir(mdt).await {
        Ok(f) => f,
        Err(e) => return Outcome::Failed(e),
    };
    let me = mdt.index;
    let now = Timespec::now();
    let r = mdt
        .store()
        .write(move |tx| {
            let mut x = mdd::get_inode(tx, &fid).map_err(|_| NOTHING)?;
            let links = mdd::all_links(tx, &x)?;
            if busy_fid(tx, &fid)? || links.iter().any(|l| !stale.contains(l)) {
                return Err(NOTHING);
            }
            // A stale link that came back (a local name) makes it named after all.
            for (p, n) in &links {
                if mdt_of(p) == me && names(tx, p, n, &fid)? {
                    return Err(NOTHING);
                }
            }
            let mut lp = mdd::live_plain_dir(tx, &lpf)?;
            let mut idx = 0u32;
            let name = loop {
                let n = format!("{fid}-{kind}-{idx}").into_bytes();
                if mdd::lookup(tx, &lpf, &n)?.is_none() {
                    break n;
                }
                idx += 1;
            };
            let fk = x.kind().ok_or(Errno::EIO)?;
            mdd::put_dirent(tx, &lpf, &name, &fid, fk, x.ino)?;
            if fk == FileKind::Directory {
                lp.attr.nlink += 1;
            } else {
                x.attr.nlink = 1;
            }
            lp.attr.mtime = now;
            lp.attr.ctime = now;
            mdd::put_inode(tx, &lp)?;
            mdd::set_links(tx, &mut x, vec![(lpf, name)])?;
            x.attr.ctime = now;
            mdd::put_inode(tx, &x).map(|_| ())
        })
        .await;
    outcome(r)
}

/// Drops `stale` links of local object `fid` and, for a file, sets its link count to the
/// links left (after its lost name was put back).
pub async fn drop_stale_links(mdt: &Arc<Mdt>, fid: Fid, stale: Vec<(Fid, Vec<u8>)>) -> Outcome {
    let r = mdt
        .store()
        .write(move |tx| {
            let mut x = mdd::get_inode(tx, &fid).map_err(|_| NOTHING)?;
            let mut links = mdd::all_links(tx, &x)?;
            let before = (links.len(), x.attr.nlink);
            links.retain(|l| !stale.contains(l));
            let left = links.len();
            if !x.attr.is_dir() {
                x.attr.nlink = (left as u32).max(1);
            }
            if (left, x.attr.nlink) == before {
                return Err(NOTHING);
            }
            mdd::set_links(tx, &mut x, links)?;
            mdd::put_inode(tx, &x).map(|_| ())
        })
        .await;
    outcome(r)
}
