//! Permission checks (Lustre's `mdd_permission.c`): every namespace and attribute
//! operation asks here whether the caller's [`Cred`] may do it, with the rules and errors
//! of the Linux VFS, so a client that does not check (the native client library, a client
//! holding the key) gets what the kernel would have said: `generic_permission` with POSIX
//! ACLs and capability overrides, `may_delete` with the sticky bit, `setattr_prepare`'s
//! chown/chmod/utimes rules, `xattr_permission`'s namespaces, `may_open`.
//!
//! A check reads the object's access ACL only when it can matter: not for the owner, not
//! when the mode has no group bits, not when a capability decides anyway.

use crate::records;
use nacre_core::acl::{self, Acl};
use nacre_core::attr::privileges_to_kill;
use nacre_core::attr::{SetAttr, SetTime};
use nacre_core::{Attr, Errno, Fid};
use nacre_osd::{KvRead, Table};
use nacre_rpc::msg::{Cred, OpenFlags, cap};
use std::sync::atomic::{AtomicBool, Ordering};

pub const MAY_EXEC: u32 = 1;
pub const MAY_WRITE: u32 = 2;
pub const MAY_READ: u32 = 4;

const S_ISUID: u32 = libc::S_ISUID;
const S_ISGID: u32 = libc::S_ISGID;
const S_ISVTX: u32 = libc::S_ISVTX;
const S_IXGRP: u32 = libc::S_IXGRP;

/// Whether this process's MDTs check permissions (see [`set_enforced`]).
static ENFORCED: AtomicBool = AtomicBool::new(true);

/// Turns every permission check of this process's MDTs off (everyone may do anything)
/// or on again. Nothing a client or `lctl` sends reaches it: only `nacre bench checks`
/// turns the checks off, in the process it brings its own file system up in, to measure
/// what they cost.
pub fn set_enforced(on: bool) {
    if ENFORCED.swap(on, Ordering::Relaxed) != on {
        if on {
            tracing::info!(target: "mdt", "permission checks on again");
        } else {
            tracing::warn!(target: "mdt", "permission checks OFF: every caller may do anything");
        }
    }
}

fn enforced() -> bool {
    ENFORCED.load(Ordering::Relaxed)
}

/// The stored ACL `name` (access or default) of `fid`, if it has one.
pub fn stored_acl<R: KvRead>(r: &mut R, fid: &Fid, name: &[u8]) -> Result<Option<Acl>, Errno> {
    match r.get(Table::Xattrs, &records::xattr_key(fid, name))? {
        Some(v) => Acl::decode(&v).map(Some).map_err(|_| {
            tracing::error!(target: "mdt", "corrupt ACL {} of {fid}", String::from_utf8_lossy(name));
            Errno::EIO
        }),
        None => Ok(None),
    }
}

/// Whether a capability grants `mask` whatever the mode and ACL say (the second half of
/// `generic_permission`): DAC_READ_SEARCH reads files and reads and searches
/// directories, DAC_OVERRIDE does everything except execute a file with no x bit.
fn overridden(cred: &Cred, attr: &Attr, mask: u32) -> bool {
    if attr.is_dir() {
        return (mask & MAY_WRITE == 0 && cred.capable(cap::DAC_READ_SEARCH))
            || cred.capable(cap::DAC_OVERRIDE);
    }
    (mask == MAY_READ && cred.capable(cap::DAC_READ_SEARCH))
        || ((mask & MAY_EXEC == 0 || attr.mode & 0o111 != 0) && cred.capable(cap::DAC_OVERRIDE))
}

/// `generic_permission`: EACCES unless the caller has every bit of `mask` (MAY_READ,
/// MAY_WRITE, MAY_EXEC) on the object, by its owner bits, its access ACL, its group or
/// other bits, or a capability.
pub fn check<R: KvRead>(r: &mut R, cred: &Cred, attr: &Attr, mask: u32) -> Result<(), Errno> {
    let mask = mask & 0o7;
    if mask == 0 || !enforced() || overridden(cred, attr, mask) {
        return Ok(());
    }
    let mode = attr.mode;
    let ok = if cred.uid == attr.uid {
        mask & !(mode >> 6) & 0o7 == 0
    } else {
        let acl = if mode & 0o070 != 0 {
            stored_acl(r, &attr.fid, acl::XATTR_ACCESS)?
        } else {
            None
        };
        match acl {
            Some(a) => a.permits(cred.uid, attr.uid, |g| cred.in_group(g), attr.gid, mask),
            None => {
                let bits = if cred.in_group(attr.gid) {
                    mode >> 3
                } else {
                    mode
                };
                mask & !bits & 0o7 == 0
            }
        }
    };
    if ok { Ok(()) } else { Err(Errno::EACCES) }
}

/// The owner, or CAP_FOWNER (`inode_owner_or_capable`).
pub fn owner_or_capable(cred: &Cred, attr: &Attr) -> bool {
    cred.uid == attr.uid || cred.capable(cap::FOWNER) || !enforced()
}

/// Search permission on a directory a name is looked up in (`may_lookup`).
pub fn may_lookup<R: KvRead>(r: &mut R, cred: &Cred, dir: &Attr) -> Result<(), Errno> {
    check(r, cred, dir, MAY_EXEC)
}

/// Adding a name to a directory (`may_create`).
pub fn may_create<R: KvRead>(r: &mut R, cred: &Cred, dir: &Attr) -> Result<(), Errno> {
    check(r, cred, dir, MAY_WRITE | MAY_EXEC)
}

/// A sticky directory's rule: only the owner of the directory or of the entry, or
/// CAP_FOWNER, removes or renames the entry (`check_sticky`).
pub fn sticky_denies(cred: &Cred, dir: &Attr, child_uid: u32) -> bool {
    dir.mode & S_ISVTX != 0
        && cred.uid != dir.uid
        && cred.uid != child_uid
        && !cred.capable(cap::FOWNER)
        && enforced()
}

/// Removing (or renaming away) an entry owned by `child_uid` (`may_delete`): EACCES
/// without write and search permission on the directory, EPERM by the sticky bit.
pub fn may_delete<R: KvRead>(
    r: &mut R,
    cred: &Cred,
    dir: &Attr,
    child_uid: u32,
) -> Result<(), Errno> {
    may_create(r, cred, dir)?;
    if sticky_denies(cred, dir, child_uid) {
        return Err(Errno::EPERM);
    }
    Ok(())
}

/// Opening an existing object (`may_open`): read for reading, write for writing or
/// truncating.
pub fn may_open<R: KvRead>(
    r: &mut R,
    cred: &Cred,
    attr: &Attr,
    flags: &OpenFlags,
) -> Result<(), Errno> {
    let mut mask = 0;
    if flags.read {
        mask |= MAY_READ;
    }
    if flags.write || flags.truncate {
        mask |= MAY_WRITE;
    }
    if attr.is_dir() && mask & MAY_WRITE != 0 {
        return Err(Errno::EISDIR);
    }
    check(r, cred, attr, mask)
}

/// A new entry's set-group-ID bit in a set-group-ID directory: kept only for a member of
/// the directory's group or CAP_FSETID (`mode_strip_sgid`).
pub fn strip_sgid_on_create(cred: &Cred, dir: &Attr, mode: u32) -> u32 {
    let is_dir = mode & libc::S_IFMT == libc::S_IFDIR;
    if is_dir || dir.mode & S_ISGID == 0 || mode & (S_ISGID | S_IXGRP) != (S_ISGID | S_IXGRP) {
        return mode;
    }
    if cred.in_group(dir.gid) || cred.capable(cap::FSETID) {
        return mode;
    }
    mode & !S_ISGID
}

/// Whether a mode change only clears set-user-ID and set-group-ID bits: what a kernel
/// sends when a write or truncate by someone else removes the privileges of a file
/// (Lustre's LA_KILL_SUID / LA_KILL_SGID), which anyone who may write the file may do.
fn kills_privileges_only(old: u32, new: u32) -> bool {
    let (old, new) = (old & 0o7777, new & 0o7777);
    old != new && new & !old == 0 && (old ^ new) & !(S_ISUID | S_ISGID) == 0
}

/// Checks a setattr against `old` and adjusts it as the kernel's `setattr_prepare` and
/// Lustre's `mdd_fix_attr` do: chown needs CAP_CHOWN (or is the owner's no-op), chgrp
/// the owner's membership of the new group (or CAP_CHOWN), chmod the owner or
/// CAP_FOWNER (and loses set-group-ID for a non-member), explicit times the owner or
/// CAP_FOWNER, times set to now write permission, a size change write permission
/// unless `writable_handle` (a handle open for writing is enough, POSIX `ftruncate`).
/// Changing owner or group of a file, or its size without CAP_FSETID, clears its
/// set-user-ID bit (and set-group-ID with group execute).
pub fn fix_setattr<R: KvRead>(
    r: &mut R,
    cred: &Cred,
    old: &Attr,
    a: &mut SetAttr,
    writable_handle: bool,
) -> Result<(), Errno> {
    if !enforced() {
        return Ok(());
    }
    let may_write = |r: &mut R| {
        if writable_handle {
            Ok(())
        } else {
            check(r, cred, old, MAY_WRITE)
        }
    };
    if a.size.is_some() {
        if old.is_dir() {
            return Err(Errno::EISDIR);
        }
        may_write(r)?;
    }
    if let Some(uid) = a.uid
        && !((cred.uid == old.uid && uid == old.uid) || cred.capable(cap::CHOWN))
    {
        return Err(Errno::EPERM);
    }
    if let Some(gid) = a.gid
        && !((cred.uid == old.uid && (gid == old.gid || cred.in_group(gid)))
            || cred.capable(cap::CHOWN))
    {
        return Err(Errno::EPERM);
    }
    if let Some(mode) = a.mode {
        if kills_privileges_only(old.mode, mode) && !owner_or_capable(cred, old) {
            may_write(r).map_err(|_| Errno::EPERM)?;
        } else {
            if !owner_or_capable(cred, old) {
                return Err(Errno::EPERM);
            }
            let gid = a.gid.unwrap_or(old.gid);
            if !cred.in_group(gid) && !cred.capable(cap::FSETID) {
                a.mode = Some(mode & !S_ISGID);
            }
        }
    }
    let explicit = |t: Option<SetTime>| matches!(t, Some(SetTime::At(_)));
    if explicit(a.atime) || explicit(a.mtime) {
        if !owner_or_capable(cred, old) {
            return Err(Errno::EPERM);
        }
    } else if (a.atime.is_some() || a.mtime.is_some()) && !owner_or_capable(cred, old) {
        check(r, cred, old, MAY_WRITE)?;
    }
    if old.is_dir() {
        return Ok(());
    }
    let mut kill = 0;
    if a.uid.is_some() || a.gid.is_some() {
        // chown and chgrp, whoever asks (`chown_common`); set-group-ID without group
        // execute stays for a member or CAP_FSETID.
        kill |= privileges_to_kill(old.mode);
        if old.mode & S_ISGID != 0 && !cred.in_group(old.gid) && !cred.capable(cap::FSETID) {
            kill |= S_ISGID;
        }
    }
    if a.size.is_some() && old.is_reg() && !cred.capable(cap::FSETID) {
        kill |= privileges_to_kill(old.mode);
    }
    if kill != 0 {
        let base = a.mode.unwrap_or(old.mode & 0o7777);
        if base & kill != 0 {
            a.mode = Some(base & !kill);
        }
    }
    Ok(())
}

/// The xattr namespaces' rules (`xattr_permission`, `posix_acl_xattr_set`): `trusted.*`
/// needs CAP_SYS_ADMIN (reading it without is ENODATA, as if absent), writing
/// `security.*` too; ACLs and Lustre's own (`lustre.*`) are written by the owner or
/// CAP_FOWNER only; `user.*` exists on files and directories only (not in a sticky
/// directory someone else owns) and follows read or write permission.
pub fn may_xattr<R: KvRead>(
    r: &mut R,
    cred: &Cred,
    attr: &Attr,
    name: &[u8],
    write: bool,
) -> Result<(), Errno> {
    if !enforced() {
        return Ok(());
    }
    if name.starts_with(b"trusted.") {
        if !cred.capable(cap::SYS_ADMIN) {
            return Err(if write { Errno::EPERM } else { Errno::ENODATA });
        }
        return Ok(());
    }
    if name.starts_with(b"security.") {
        if write && !cred.capable(cap::SYS_ADMIN) {
            return Err(Errno::EPERM);
        }
        return Ok(());
    }
    if name.starts_with(b"system.") || name.starts_with(b"lustre.") {
        if write && !owner_or_capable(cred, attr) {
            return Err(Errno::EPERM);
        }
        return Ok(());
    }
    if !attr.is_reg() && !attr.is_dir() {
        return Err(if write { Errno::EPERM } else { Errno::ENODATA });
    }
    if write && attr.is_dir() && attr.mode & S_ISVTX != 0 && !owner_or_capable(cred, attr) {
        return Err(Errno::EPERM);
    }
    check(r, cred, attr, if write { MAY_WRITE } else { MAY_READ })
}

/// Whether `listxattr` shows `name` to the caller: `trusted.*` only to CAP_SYS_ADMIN.
pub fn lists_xattr(cred: &Cred, name: &[u8]) -> bool {
    !name.starts_with(b"trusted.") || cred.capable(cap::SYS_ADMIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoAcl;
    impl KvRead for NoAcl {
        fn crash_gen(&self) -> u64 {
            0
        }
        fn get(&mut self, _: Table, _: &[u8]) -> Result<Option<Vec<u8>>, Errno> {
            Ok(None)
        }
        fn range(
            &mut self,
            _: Table,
            _: &[u8],
            _: &[u8],
            _: usize,
        ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, Errno> {
            Ok(Vec::new())
        }
    }

    fn file(mode: u32, uid: u32, gid: u32) -> Attr {
        Attr {
            mode: libc::S_IFREG | mode,
            uid,
            gid,
            ..Attr::default()
        }
    }

    fn user(uid: u32, gid: u32, groups: &[u32]) -> Cred {
        Cred::user(uid, gid, groups.to_vec(), 0)
    }

    #[test]
    fn mode_bits_then_capabilities() {
        let f = file(0o640, 1, 2);
        let r = &mut NoAcl;
        assert_eq!(check(r, &user(1, 9, &[]), &f, MAY_READ | MAY_WRITE), Ok(()));
        assert_eq!(check(r, &user(3, 9, &[2]), &f, MAY_READ), Ok(()));
        assert_eq!(
            check(r, &user(3, 9, &[2]), &f, MAY_WRITE),
            Err(Errno::EACCES)
        );
        assert_eq!(check(r, &user(3, 9, &[]), &f, MAY_READ), Err(Errno::EACCES));
        // The owner class decides for the owner even when others have more.
        assert_eq!(
            check(r, &user(1, 9, &[]), &file(0o077, 1, 2), MAY_READ),
            Err(Errno::EACCES)
        );
        let dac = Cred::user(3, 9, Vec::new(), 1 << cap::DAC_OVERRIDE);
        assert_eq!(check(r, &dac, &f, MAY_WRITE), Ok(()));
        // DAC_OVERRIDE executes only what some x bit allows.
        assert_eq!(check(r, &dac, &f, MAY_EXEC), Err(Errno::EACCES));
        let rs = Cred::user(3, 9, Vec::new(), 1 << cap::DAC_READ_SEARCH);
        assert_eq!(check(r, &rs, &f, MAY_READ), Ok(()));
        assert_eq!(check(r, &rs, &f, MAY_WRITE), Err(Errno::EACCES));
    }

    #[test]
    fn setattr_rules() {
        let r = &mut NoAcl;
        let f = file(0o2755, 1, 2);
        let owner = user(1, 1, &[]);
        let other = user(3, 3, &[]);
        let mut a = SetAttr {
            mode: Some(0o2700),
            ..SetAttr::default()
        };
        // The owner outside the file's group loses set-group-ID.
        assert_eq!(fix_setattr(r, &owner, &f, &mut a, false), Ok(()));
        assert_eq!(a.mode, Some(0o700));
        let mut a = SetAttr {
            mode: Some(0o700),
            ..SetAttr::default()
        };
        assert_eq!(fix_setattr(r, &other, &f, &mut a, false), Err(Errno::EPERM));
        let mut a = SetAttr {
            uid: Some(3),
            ..SetAttr::default()
        };
        assert_eq!(fix_setattr(r, &owner, &f, &mut a, false), Err(Errno::EPERM));
        let mut a = SetAttr {
            gid: Some(7),
            ..SetAttr::default()
        };
        assert_eq!(fix_setattr(r, &user(1, 1, &[7]), &f, &mut a, false), Ok(()));
        assert_eq!(a.mode, Some(0o755), "chgrp clears set-group-ID with g+x");
        let mut a = SetAttr {
            size: Some(0),
            ..SetAttr::default()
        };
        assert_eq!(
            fix_setattr(r, &other, &f, &mut a, false),
            Err(Errno::EACCES)
        );
        assert_eq!(fix_setattr(r, &other, &f, &mut a, true), Ok(()));
        assert_eq!(
            a.mode,
            Some(0o755),
            "a truncate by someone else kills privileges"
        );
        let mut a = SetAttr {
            mtime: Some(SetTime::Now),
            ..SetAttr::default()
        };
        assert_eq!(
            fix_setattr(r, &other, &f, &mut a, false),
            Err(Errno::EACCES)
        );
        let mut a = SetAttr {
            mtime: Some(SetTime::At(Default::default())),
            ..SetAttr::default()
        };
        assert_eq!(fix_setattr(r, &other, &f, &mut a, false), Err(Errno::EPERM));
        // A writer (not the owner) may clear set-user-ID (the kernel's killpriv).
        let w = file(0o4666, 1, 2);
        let mut a = SetAttr {
            mode: Some(0o666),
            ..SetAttr::default()
        };
        assert_eq!(fix_setattr(r, &other, &w, &mut a, false), Ok(()));
    }

    #[test]
    fn sticky_and_xattr_namespaces() {
        let r = &mut NoAcl;
        let mut dir = file(0o1777, 1, 1);
        dir.mode = libc::S_IFDIR | 0o1777;
        assert_eq!(may_delete(r, &user(3, 3, &[]), &dir, 3), Ok(()));
        assert_eq!(may_delete(r, &user(3, 3, &[]), &dir, 4), Err(Errno::EPERM));
        assert_eq!(may_delete(r, &user(1, 3, &[]), &dir, 4), Ok(()));
        let f = file(0o644, 1, 1);
        let u = user(3, 3, &[]);
        assert_eq!(may_xattr(r, &u, &f, b"user.a", false), Ok(()));
        assert_eq!(may_xattr(r, &u, &f, b"user.a", true), Err(Errno::EACCES));
        assert_eq!(
            may_xattr(r, &u, &f, b"trusted.a", false),
            Err(Errno::ENODATA)
        );
        assert_eq!(may_xattr(r, &u, &f, b"trusted.a", true), Err(Errno::EPERM));
        assert_eq!(
            may_xattr(r, &u, &f, acl::XATTR_ACCESS, true),
            Err(Errno::EPERM)
        );
        assert!(!lists_xattr(&u, b"trusted.a"));
    }
}
