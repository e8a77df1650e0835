//! POSIX ACLs (POSIX.1e draft 17, as Linux implements them): the binary form of the
//! `system.posix_acl_access` and `system.posix_acl_default` xattrs (`posix_acl_xattr.h`)
//! and the rules that tie an ACL to a file's mode bits.
//!
//! ```text
//! header: a_version u32 = 2
//! entry:  e_tag u16, e_perm u16, e_id u32        (all little-endian)
//! ```
//! Entries are in tag order: the owner, named users, the owning group, named groups, the
//! mask, others. While a file has an access ACL, its mode's group bits are the mask (or
//! the owning group's entry when there is no mask), so a chmod changes the ACL too.

use crate::Errno;
use crate::attr::XATTR_SIZE_MAX;

pub const XATTR_ACCESS: &[u8] = b"system.posix_acl_access";
pub const XATTR_DEFAULT: &[u8] = b"system.posix_acl_default";

/// `POSIX_ACL_XATTR_VERSION`.
const VERSION: u32 = 2;
const HEADER: usize = 4;
const ENTRY: usize = 8;
/// Entries an ACL may have: what an xattr of [`XATTR_SIZE_MAX`] holds.
pub const MAX_ENTRIES: usize = (XATTR_SIZE_MAX - HEADER) / ENTRY;

pub const USER_OBJ: u16 = 0x01;
pub const USER: u16 = 0x02;
pub const GROUP_OBJ: u16 = 0x04;
pub const GROUP: u16 = 0x08;
pub const MASK: u16 = 0x10;
pub const OTHER: u16 = 0x20;
/// `ACL_UNDEFINED_ID`: the id of entries that name nobody.
pub const UNDEFINED_ID: u32 = u32::MAX;

const RWX: u16 = 0o7;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AclEntry {
    pub tag: u16,
    /// `r` 4, `w` 2, `x` 1.
    pub perm: u16,
    pub id: u32,
}

/// A checked ACL, in the order its xattr holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acl {
    pub entries: Vec<AclEntry>,
}

impl Acl {
    /// Parses and checks an ACL xattr as the kernel does (`posix_acl_from_xattr`,
    /// `posix_acl_valid`): EINVAL for a wrong version, size, tag, permission or order.
    /// An ACL of no entries (a bare header) parses as empty.
    pub fn decode(b: &[u8]) -> Result<Acl, Errno> {
        if b.len() < HEADER || !(b.len() - HEADER).is_multiple_of(ENTRY) {
            return Err(Errno::EINVAL);
        }
        if u32::from_le_bytes([b[0], b[1], b[2], b[3]]) != VERSION {
            return Err(Errno::ENOTSUP);
        }
        let n = (b.len() - HEADER) / ENTRY;
        if n > MAX_ENTRIES {
            return Err(Errno::E2BIG);
        }
        let entries: Vec<AclEntry> = b[HEADER..]
            .chunks_exact(ENTRY)
            .map(|e| AclEntry {
                tag: u16::from_le_bytes([e[0], e[1]]),
                perm: u16::from_le_bytes([e[2], e[3]]),
                id: u32::from_le_bytes([e[4], e[5], e[6], e[7]]),
            })
            .collect();
        let acl = Acl { entries };
        if !acl.entries.is_empty() {
            acl.check()?;
        }
        Ok(acl)
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(HEADER + ENTRY * self.entries.len());
        v.extend_from_slice(&VERSION.to_le_bytes());
        for e in &self.entries {
            v.extend_from_slice(&e.tag.to_le_bytes());
            v.extend_from_slice(&e.perm.to_le_bytes());
            let id = if matches!(e.tag, USER | GROUP) {
                e.id
            } else {
                UNDEFINED_ID
            };
            v.extend_from_slice(&id.to_le_bytes());
        }
        v
    }

    /// `posix_acl_valid`: one owner, owning group and other entry, in tag order, and a
    /// mask whenever named entries exist.
    fn check(&self) -> Result<(), Errno> {
        // The tag expected next: the kernel's state machine.
        let mut state = USER_OBJ;
        let mut needs_mask = false;
        for e in &self.entries {
            if e.perm & !RWX != 0 {
                return Err(Errno::EINVAL);
            }
            state = match (e.tag, state) {
                (USER_OBJ, USER_OBJ) => USER,
                (USER, USER) => {
                    needs_mask = true;
                    USER
                }
                (GROUP_OBJ, USER) => GROUP,
                (GROUP, GROUP) => {
                    needs_mask = true;
                    GROUP
                }
                (MASK, GROUP) => OTHER,
                (OTHER, OTHER) => 0,
                (OTHER, GROUP) if !needs_mask => 0,
                _ => return Err(Errno::EINVAL),
            };
        }
        if state == 0 {
            Ok(())
        } else {
            Err(Errno::EINVAL)
        }
    }

    fn find(&self, tag: u16) -> Option<&AclEntry> {
        self.entries.iter().find(|e| e.tag == tag)
    }

    /// The mode an access ACL implies, and whether the ACL says more than a mode can
    /// (`posix_acl_equiv_mode`): `mode`'s other bits are kept.
    pub fn equiv_mode(&self, mode: u32) -> (u32, bool) {
        let mut bits = 0u32;
        let mut extended = false;
        for e in &self.entries {
            let p = u32::from(e.perm & RWX);
            match e.tag {
                USER_OBJ => bits |= p << 6,
                GROUP_OBJ => bits |= p << 3,
                OTHER => bits |= p,
                MASK => {
                    bits = (bits & !0o070) | (p << 3);
                    extended = true;
                }
                _ => extended = true,
            }
        }
        ((mode & !0o777) | bits, extended)
    }

    /// A chmod's effect on an access ACL (`__posix_acl_chmod`): the owner, the mask (or
    /// the owning group without one) and others take the new mode's bits.
    pub fn chmod(&mut self, mode: u32) {
        let has_mask = self.find(MASK).is_some();
        for e in &mut self.entries {
            match e.tag {
                USER_OBJ => e.perm = ((mode >> 6) & 0o7) as u16,
                GROUP_OBJ if !has_mask => e.perm = ((mode >> 3) & 0o7) as u16,
                MASK => e.perm = ((mode >> 3) & 0o7) as u16,
                OTHER => e.perm = (mode & 0o7) as u16,
                _ => {}
            }
        }
    }

    /// A new entry's access ACL from its directory's default (`posix_acl_create_masq`):
    /// the requested mode masks the owner, the mask (or owning group) and others, and
    /// the mode takes what is left. Returns the new mode and whether the ACL says more
    /// than the mode (only then is it stored).
    pub fn create_masq(&mut self, mode: u32) -> (u32, bool) {
        let mut m = mode;
        let mut extended = false;
        let mut group_obj = None;
        let mut mask = None;
        for (i, e) in self.entries.iter_mut().enumerate() {
            match e.tag {
                USER_OBJ => {
                    e.perm &= ((m >> 6) & 0o7) as u16;
                    m &= (u32::from(e.perm) << 6) | !0o700;
                }
                USER | GROUP => extended = true,
                GROUP_OBJ => group_obj = Some(i),
                OTHER => {
                    e.perm &= (m & 0o7) as u16;
                    m &= u32::from(e.perm) | !0o007;
                }
                MASK => {
                    mask = Some(i);
                    extended = true;
                }
                _ => {}
            }
        }
        if let Some(i) = mask.or(group_obj) {
            let e = &mut self.entries[i];
            e.perm &= ((m >> 3) & 0o7) as u16;
            m &= (u32::from(e.perm) << 3) | !0o070;
        }
        ((mode & !0o777) | (m & 0o777), extended)
    }

    /// Whether the caller may have `want` (r 4, w 2, x 1) by this access ACL
    /// (`posix_acl_permission`); the caller is not the file's owner (the owner's bits
    /// are the mode's) and capabilities are the caller's business.
    pub fn permits(
        &self,
        uid: u32,
        owner: u32,
        in_group: impl Fn(u32) -> bool,
        owning_group: u32,
        want: u32,
    ) -> bool {
        let want = (want & 0o7) as u16;
        let mask = self.find(MASK).map_or(RWX, |m| m.perm);
        let mut found = false;
        for e in &self.entries {
            match e.tag {
                USER_OBJ if owner == uid => return e.perm & want == want,
                USER if e.id == uid => return e.perm & mask & want == want,
                GROUP_OBJ if in_group(owning_group) => {
                    found = true;
                    if e.perm & want == want {
                        return e.perm & mask & want == want;
                    }
                }
                GROUP if in_group(e.id) => {
                    found = true;
                    if e.perm & want == want {
                        return e.perm & mask & want == want;
                    }
                }
                OTHER => return !found && e.perm & want == want,
                _ => {}
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(tag: u16, perm: u16, id: u32) -> AclEntry {
        AclEntry { tag, perm, id }
    }

    fn acl(entries: &[AclEntry]) -> Acl {
        Acl {
            entries: entries.to_vec(),
        }
    }

    #[test]
    fn round_trips_and_rejects_what_the_kernel_rejects() {
        let a = acl(&[
            e(USER_OBJ, 6, UNDEFINED_ID),
            e(USER, 6, 1),
            e(GROUP_OBJ, 4, UNDEFINED_ID),
            e(MASK, 6, UNDEFINED_ID),
            e(OTHER, 0, UNDEFINED_ID),
        ]);
        assert_eq!(Acl::decode(&a.encode()), Ok(a.clone()));
        // A named entry needs a mask; order matters; perms are rwx only.
        let no_mask = acl(&[a.entries[0], a.entries[1], a.entries[2], a.entries[4]]);
        assert_eq!(Acl::decode(&no_mask.encode()), Err(Errno::EINVAL));
        let swapped = acl(&[a.entries[2], a.entries[0], a.entries[3], a.entries[4]]);
        assert_eq!(Acl::decode(&swapped.encode()), Err(Errno::EINVAL));
        let mut bad = a.clone();
        bad.entries[0].perm = 8;
        assert_eq!(Acl::decode(&bad.encode()), Err(Errno::EINVAL));
        assert_eq!(Acl::decode(&[2, 0, 0, 0, 1]), Err(Errno::EINVAL));
        assert_eq!(Acl::decode(&[1, 0, 0, 0]), Err(Errno::ENOTSUP));
        assert_eq!(Acl::decode(&[2, 0, 0, 0]).map(|a| a.entries.len()), Ok(0));
    }

    #[test]
    fn the_mask_limits_named_entries_and_the_owning_group() {
        // user::rw- user:daemon(1):rw- group::r-- mask::r-- other::---
        let a = acl(&[
            e(USER_OBJ, 6, UNDEFINED_ID),
            e(USER, 6, 1),
            e(GROUP_OBJ, 4, UNDEFINED_ID),
            e(MASK, 4, UNDEFINED_ID),
            e(OTHER, 0, UNDEFINED_ID),
        ]);
        let none = |_: u32| false;
        assert!(a.permits(1, 2, none, 2, 4));
        assert!(!a.permits(1, 2, none, 2, 2), "masked to r--");
        assert!(
            a.permits(2, 2, none, 2, 6),
            "the owner's entry is not masked"
        );
        assert!(!a.permits(3, 2, none, 2, 4), "others get ---");
        // A matching group entry without the wanted bit denies, others do not apply.
        let g = acl(&[
            e(USER_OBJ, 6, UNDEFINED_ID),
            e(GROUP_OBJ, 0, UNDEFINED_ID),
            e(MASK, 7, UNDEFINED_ID),
            e(OTHER, 6, UNDEFINED_ID),
        ]);
        assert!(!g.permits(5, 2, |gid| gid == 9, 9, 4));
        assert!(g.permits(5, 2, |_| false, 9, 4));
    }

    #[test]
    fn chmod_and_create_follow_the_mode() {
        let mut a = acl(&[
            e(USER_OBJ, 7, UNDEFINED_ID),
            e(GROUP_OBJ, 5, UNDEFINED_ID),
            e(GROUP, 5, 2),
            e(MASK, 5, UNDEFINED_ID),
            e(OTHER, 5, UNDEFINED_ID),
        ]);
        // setfacl -d -m g:bin:r-x d; touch d/f (0666): rw-r--r--+ with mask r--.
        let mut c = a.clone();
        let (mode, ext) = c.create_masq(0o100666);
        assert_eq!((mode, ext), (0o100644, true));
        assert_eq!(c.find(MASK).map(|m| m.perm), Some(4));
        assert_eq!(c.find(GROUP_OBJ).map(|m| m.perm), Some(5));
        assert_eq!(c.equiv_mode(0o100000), (0o100644, true));
        a.chmod(0o750);
        assert_eq!(a.equiv_mode(0), (0o750, true));
        assert_eq!(
            a.find(GROUP_OBJ).map(|m| m.perm),
            Some(5),
            "kept under the mask"
        );
    }
}
