//! Running one [`DneUpdate`] against this MDT's store, in its three parts.
//!
//! - prepare: checks, and the changes that can still be undone (a name inserted or
//!   removed, a link added, a directory closed to new entries). Errors here abort the
//!   whole operation; [`CONFLICT`] means "the namespace changed since the coordinator
//!   looked", and the coordinator plans again.
//! - commit: what cannot be undone (the last link of an inode dropped, a directory
//!   destroyed). It never fails on namespace state: what it finds already done it skips.
//! - abort: undoes a prepare, skipping what is already undone.
//!
//! On the coordinator, prepare and commit of its own updates run back to back in the
//! transaction that commits the operation.

use crate::mdd::{self, LINK_MAX};
use crate::records::{self, Inode, dirent_key};
use nacre_core::{Errno, Fid, FileKind, StripeObject, Timespec};
use nacre_osd::{Table, Tx};
use nacre_rpc::msg::{DneObject, DneUpdate};

use super::reserve::Reservations;

/// The namespace changed under a distributed operation: plan it again.
pub const CONFLICT: Errno = Errno::EAGAIN;

/// Xattr under which a directory stripe records its master and index. The leading NUL
/// keeps it out of reach of clients (xattr names from the VFS are C strings).
pub const STRIPE_XATTR: &[u8] = b"\0dne.stripe_of";

/// What a commit left to do outside the transaction.
#[derive(Default)]
pub struct Effects {
    /// OST objects logged for destruction.
    pub destroyed: Vec<StripeObject>,
}

fn dir_mut(tx: &mut Tx, fid: &Fid) -> Result<Inode, Errno> {
    let d = mdd::get_inode(tx, fid)?;
    if !d.attr.is_dir() {
        return Err(Errno::ENOTDIR);
    }
    Ok(d)
}

fn touch_dir(d: &mut Inode, now: Timespec, nlink_delta: i64) {
    d.attr.mtime = now;
    d.attr.ctime = now;
    d.attr.nlink = (i64::from(d.attr.nlink) + nlink_delta).max(2) as u32;
}

fn dir_delta(kind: FileKind) -> i64 {
    i64::from(kind == FileKind::Directory)
}

fn put_name(
    tx: &mut Tx,
    parent: &Fid,
    name: &[u8],
    fid: &Fid,
    kind: FileKind,
) -> Result<(), Errno> {
    mdd::put_dirent(tx, parent, name, fid, kind, 0)
}

/// The inode a [`DneObject`] describes, with no links yet.
pub fn object_inode(o: &DneObject) -> Inode {
    Inode {
        attr: o.attr.clone(),
        layout: None,
        lmv: o.lmv.clone(),
        default_layout: o.default_layout.clone(),
        default_lmv: o.default_lmv.clone(),
        link: None,
        symlink: None,
        lsom_valid: true,
        ino: 0,
    }
}

/// The master and index of a directory stripe, if `fid` is one.
pub fn stripe_of<R: nacre_osd::KvRead>(r: &mut R, fid: &Fid) -> Result<Option<(Fid, u32)>, Errno> {
    Ok(
        r.get(Table::Xattrs, &records::xattr_key(fid, STRIPE_XATTR))?
            .and_then(|v| postcard::from_bytes(&v).ok()),
    )
}

/// Prepares `u`; returns what its undo needs: the nlink a `KillDir` took away, or 1 when
/// an `AddLink` or `Relink` added the link (rather than finding it there). `hold` is set
/// on a participant, whose removed names stay reserved until the operation is decided.
pub fn prepare(
    tx: &mut Tx,
    u: &DneUpdate,
    res: &Reservations,
    hold: bool,
) -> Result<Option<u32>, Errno> {
    match u {
        DneUpdate::CreateObject(o) => {
            let fid = o.attr.fid;
            if mdd::exists(tx, &fid)? {
                // FIDs are allocated once; an existing one is this very object.
                return Ok(None);
            }
            let mut ino = object_inode(o);
            for (p, n) in &o.links {
                mdd::add_link(tx, &mut ino, p, n)?;
            }
            mdd::put_inode(tx, &ino)?;
            if let Some(s) = &o.stripe_of {
                let v = postcard::to_allocvec(s).map_err(|_| Errno::EIO)?;
                tx.put(Table::Xattrs, &records::xattr_key(&fid, STRIPE_XATTR), &v)?;
            }
            for (name, value) in &o.xattrs {
                mdd::check_xattr_name(name)?;
                tx.put(Table::Xattrs, &records::xattr_key(&fid, name), value)?;
            }
            Ok(None)
        }
        DneUpdate::InsertName {
            parent,
            name,
            fid,
            kind,
            now,
        } => {
            mdd::check_name(name)?;
            let mut d = dir_mut(tx, parent)?;
            if d.attr.nlink == 0 {
                return Err(Errno::ENOENT);
            }
            if d.lmv.is_some() {
                return Err(mdd::STRIPED);
            }
            res.check(parent, name)?;
            // Strict even for the same FID: a name is made by one operation only (a
            // resent prepare never gets here, its pending record answers it).
            if mdd::lookup(tx, parent, name)?.is_some() {
                return Err(Errno::EEXIST);
            }
            put_name(tx, parent, name, fid, *kind)?;
            touch_dir(&mut d, *now, dir_delta(*kind));
            mdd::put_inode(tx, &d)?;
            Ok(None)
        }
        DneUpdate::DeleteName {
            parent,
            name,
            fid,
            kind,
            now,
        } => {
            let mut d = dir_mut(tx, parent)?;
            if d.lmv.is_some() {
                return Err(mdd::STRIPED);
            }
            match mdd::lookup(tx, parent, name)? {
                Some((f, _)) if f == *fid => {}
                Some(_) => return Err(CONFLICT),
                None => return Err(Errno::ENOENT),
            }
            tx.delete(Table::Dirents, &dirent_key(parent, name))?;
            touch_dir(&mut d, *now, -dir_delta(*kind));
            mdd::put_inode(tx, &d)?;
            if hold {
                res.take(parent, name);
            }
            Ok(None)
        }
        DneUpdate::SetName {
            parent,
            name,
            old,
            new,
            now,
        } => {
            let mut d = dir_mut(tx, parent)?;
            if d.attr.nlink == 0 {
                return Err(Errno::ENOENT);
            }
            if d.lmv.is_some() {
                return Err(mdd::STRIPED);
            }
            match mdd::lookup(tx, parent, name)? {
                Some((f, _)) if f == old.0 => {}
                Some(_) => return Err(CONFLICT),
                None => return Err(CONFLICT),
            }
            put_name(tx, parent, name, &new.0, new.1)?;
            touch_dir(&mut d, *now, dir_delta(new.1) - dir_delta(old.1));
            mdd::put_inode(tx, &d)?;
            Ok(None)
        }
        DneUpdate::AddLink {
            fid,
            parent,
            name,
            now,
        } => {
            let mut ino = mdd::get_inode(tx, fid)?;
            if ino.attr.is_dir() {
                return Err(Errno::EPERM);
            }
            if ino.attr.nlink == 0 {
                return Err(Errno::ENOENT);
            }
            if ino.attr.nlink >= LINK_MAX {
                return Err(Errno::EMLINK);
            }
            // A link entry without its name belongs to another operation in flight.
            if mdd::has_link(tx, &ino, parent, name)? {
                return Err(CONFLICT);
            }
            mdd::add_link(tx, &mut ino, parent, name)?;
            ino.attr.nlink += 1;
            ino.attr.ctime = *now;
            mdd::put_inode(tx, &ino)?;
            Ok(Some(1))
        }
        DneUpdate::DropLink { fid, .. } => {
            // Dropped at commit: until then the inode keeps one link too many, which is
            // safe (a name never points to a destroyed inode).
            let ino = mdd::get_inode(tx, fid).map_err(|_| CONFLICT)?;
            if ino.attr.nlink == 0 {
                return Err(CONFLICT);
            }
            Ok(None)
        }
        DneUpdate::Relink { fid, to, now, .. } => {
            let mut ino = mdd::get_inode(tx, fid).map_err(|_| CONFLICT)?;
            if mdd::has_link(tx, &ino, &to.0, &to.1)? {
                return Err(CONFLICT);
            }
            mdd::add_link(tx, &mut ino, &to.0, &to.1)?;
            ino.attr.ctime = *now;
            mdd::put_inode(tx, &ino)?;
            Ok(Some(1))
        }
        DneUpdate::KillDir { fid, now } => {
            let mut ino = mdd::get_inode(tx, fid).map_err(|_| CONFLICT)?;
            if !ino.attr.is_dir() {
                return Err(Errno::ENOTDIR);
            }
            if ino.attr.nlink == 0 {
                // Being removed by another operation.
                return Err(Errno::ENOENT);
            }
            if mdd::dir_has_entries(tx, fid)? {
                return Err(Errno::ENOTEMPTY);
            }
            let before = ino.attr.nlink;
            ino.attr.nlink = 0;
            ino.attr.ctime = *now;
            mdd::put_inode(tx, &ino)?;
            Ok(Some(before))
        }
    }
}

/// Commits a prepared `u`.
pub fn commit(
    tx: &mut Tx,
    u: &DneUpdate,
    is_open: &dyn Fn(&Fid) -> bool,
    fx: &mut Effects,
) -> Result<(), Errno> {
    match u {
        DneUpdate::DropLink {
            fid,
            parent,
            name,
            now,
        } => {
            let Ok(mut ino) = mdd::get_inode(tx, fid) else {
                return Ok(());
            };
            if !mdd::has_link(tx, &ino, parent, name)? {
                return Ok(());
            }
            let r = mdd::drop_link(tx, &mut ino, parent, name, *now, is_open)?;
            fx.destroyed.extend(r.destroy);
            Ok(())
        }
        DneUpdate::Relink { fid, from, to, .. } => {
            let Ok(mut ino) = mdd::get_inode(tx, fid) else {
                return Ok(());
            };
            if mdd::has_link(tx, &ino, &to.0, &to.1)?
                && mdd::remove_link(tx, &mut ino, &from.0, &from.1)?
            {
                mdd::put_inode(tx, &ino)?;
            }
            Ok(())
        }
        DneUpdate::KillDir { fid, .. } => {
            if let Ok(ino) = mdd::get_inode(tx, fid)
                && ino.attr.nlink == 0
            {
                fx.destroyed.extend(mdd::destroy_inode(tx, &ino)?);
            }
            Ok(())
        }
        DneUpdate::CreateObject(_)
        | DneUpdate::InsertName { .. }
        | DneUpdate::DeleteName { .. }
        | DneUpdate::SetName { .. }
        | DneUpdate::AddLink { .. } => Ok(()),
    }
}

/// Undoes a prepared `u`; `undo` is what its prepare returned.
pub fn abort(
    tx: &mut Tx,
    u: &DneUpdate,
    undo: Option<u32>,
    is_open: &dyn Fn(&Fid) -> bool,
    fx: &mut Effects,
) -> Result<(), Errno> {
    match u {
        DneUpdate::CreateObject(o) => {
            if let Ok(ino) = mdd::get_inode(tx, &o.attr.fid) {
                // Never named: it has no data and nobody can hold it open.
                mdd::destroy_inode(tx, &ino)?;
            }
            Ok(())
        }
        DneUpdate::InsertName {
            parent,
            name,
            fid,
            kind,
            now,
        } => {
            if let Some((f, _)) = mdd::lookup(tx, parent, name)?
                && f == *fid
            {
                tx.delete(Table::Dirents, &dirent_key(parent, name))?;
                if let Ok(mut d) = dir_mut(tx, parent) {
                    touch_dir(&mut d, *now, -dir_delta(*kind));
                    mdd::put_inode(tx, &d)?;
                }
            }
            Ok(())
        }
        DneUpdate::DeleteName {
            parent,
            name,
            fid,
            kind,
            now,
        } => {
            if mdd::lookup(tx, parent, name)?.is_none()
                && let Ok(mut d) = dir_mut(tx, parent)
            {
                put_name(tx, parent, name, fid, *kind)?;
                touch_dir(&mut d, *now, dir_delta(*kind));
                mdd::put_inode(tx, &d)?;
            }
            Ok(())
        }
        DneUpdate::SetName {
            parent,
            name,
            old,
            new,
            now,
        } => {
            if let Some((f, _)) = mdd::lookup(tx, parent, name)?
                && f == new.0
                && let Ok(mut d) = dir_mut(tx, parent)
            {
                put_name(tx, parent, name, &old.0, old.1)?;
                touch_dir(&mut d, *now, dir_delta(old.1) - dir_delta(new.1));
                mdd::put_inode(tx, &d)?;
            }
            Ok(())
        }
        DneUpdate::AddLink {
            fid,
            parent,
            name,
            now,
        } => {
            if undo.is_some()
                && let Ok(mut ino) = mdd::get_inode(tx, fid)
                && mdd::has_link(tx, &ino, parent, name)?
            {
                // The link counted a reference that never became a name: give it back.
                // If the other names went meanwhile, this was the last one.
                let r = mdd::drop_link(tx, &mut ino, parent, name, *now, is_open)?;
                fx.destroyed.extend(r.destroy);
            }
            Ok(())
        }
        DneUpdate::Relink { fid, to, .. } => {
            // Whatever happened to the old link meanwhile, the new one was never named.
            if undo.is_some()
                && let Ok(mut ino) = mdd::get_inode(tx, fid)
                && mdd::remove_link(tx, &mut ino, &to.0, &to.1)?
            {
                mdd::put_inode(tx, &ino)?;
            }
            Ok(())
        }
        DneUpdate::DropLink { .. } => Ok(()),
        DneUpdate::KillDir { fid, .. } => {
            if let (Some(n), Ok(mut ino)) = (undo, mdd::get_inode(tx, fid))
                && ino.attr.nlink == 0
            {
                ino.attr.nlink = n.max(2);
                mdd::put_inode(tx, &ino)?;
            }
            Ok(())
        }
    }
}

/// Runs prepare then commit of `updates` in one transaction (the coordinator's own part).
pub fn apply_local(
    tx: &mut Tx,
    res: &Reservations,
    updates: &[DneUpdate],
    is_open: &dyn Fn(&Fid) -> bool,
    fx: &mut Effects,
) -> Result<(), Errno> {
    for u in updates {
        prepare(tx, u, res, false)?;
    }
    for u in updates {
        commit(tx, u, is_open, fx)?;
    }
    Ok(())
}

/// Prepares `updates` and records them under (`coord`, `op`). Preparing an operation
/// already recorded does nothing (a resent request).
pub fn prepare_all(
    tx: &mut Tx,
    res: &Reservations,
    coord: u32,
    op: u64,
    updates: Vec<DneUpdate>,
) -> Result<(), Errno> {
    if super::log::get_pending(tx, coord, op)?.is_some() {
        return Ok(());
    }
    let mut killed = Vec::new();
    for (i, u) in updates.iter().enumerate() {
        match prepare(tx, u, res, true) {
            Ok(Some(n)) => killed.push((u.object(), n)),
            Ok(None) => {}
            Err(e) => {
                // The transaction rolls back: so do the names it took.
                release_names(res, &updates[..i]);
                return Err(e);
            }
        }
    }
    let r = super::log::put_pending(
        tx,
        &super::log::Pending {
            coord,
            op,
            updates: updates.clone(),
            killed,
            since_ms: super::log::now_ms(),
        },
    );
    if r.is_err() {
        release_names(res, &updates);
    }
    r
}

/// Commits what (`coord`, `op`) prepared and forgets it; nothing recorded: done already.
pub fn commit_all(
    tx: &mut Tx,
    res: &Reservations,
    coord: u32,
    op: u64,
    is_open: &dyn Fn(&Fid) -> bool,
    fx: &mut Effects,
) -> Result<(), Errno> {
    let Some(p) = super::log::get_pending(tx, coord, op)? else {
        return Ok(());
    };
    for u in &p.updates {
        commit(tx, u, is_open, fx)?;
    }
    tx.delete(Table::DnePending, &super::log::pending_key(coord, op))?;
    release_names(res, &p.updates);
    Ok(())
}

/// Undoes what (`coord`, `op`) prepared, last update first, and forgets it.
pub fn abort_all(
    tx: &mut Tx,
    res: &Reservations,
    coord: u32,
    op: u64,
    is_open: &dyn Fn(&Fid) -> bool,
    fx: &mut Effects,
) -> Result<(), Errno> {
    let Some(p) = super::log::get_pending(tx, coord, op)? else {
        return Ok(());
    };
    for u in p.updates.iter().rev() {
        let killed = p
            .killed
            .iter()
            .find(|(f, _)| *f == u.object())
            .map(|(_, n)| *n);
        abort(tx, u, killed, is_open, fx)?;
    }
    tx.delete(Table::DnePending, &super::log::pending_key(coord, op))?;
    release_names(res, &p.updates);
    Ok(())
}

/// Names `updates` hold on a participant while undecided.
pub fn held_names(updates: &[DneUpdate]) -> impl Iterator<Item = (&Fid, &[u8])> {
    updates.iter().filter_map(|u| match u {
        DneUpdate::DeleteName { parent, name, .. } => Some((parent, name.as_slice())),
        _ => None,
    })
}

fn release_names(res: &Reservations, updates: &[DneUpdate]) {
    for (p, n) in held_names(updates) {
        res.release(p, n);
    }
}
