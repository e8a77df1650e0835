//! OST pools: named sets of OSTs a layout component can be confined to (Lustre's
//! `lctl pool_new fs.flash`, `pool_add fs.flash OST[0-1]`, `lfs setstripe -p flash`).
//!
//! The MGS keeps the pools in the file system's configuration and applies changes with
//! [`apply`]; every MDT's `lod` allocates a pooled component's objects from its members
//! only; `lfs` checks a pool exists before it sends a layout naming it. The rules (names,
//! what each command refuses and with which errno) live here so the three agree.

use crate::Errno;
use serde::{Deserialize, Serialize};

/// `LOV_MAXPOOLNAME`: the longest pool name (a layout stores it in 16 bytes with its NUL).
pub const MAX_POOL_NAME: usize = 15;
/// Pools one file system may have. Lustre has no fixed limit; nacre keeps its
/// configuration (which every node holds and every change resends) bounded.
pub const MAX_POOLS: usize = 256;
/// `LOV_POOL_IGNORE`: a component that asks for no pool even where its directory has one.
pub const POOL_IGNORE: &str = "ignore";
/// `LOV_POOL_INHERIT`: take the pool of the parent or root directory.
pub const POOL_INHERIT: &str = "inherit";
/// `LOV_POOL_NONE`: deprecated spelling of [`POOL_INHERIT`].
pub const POOL_NONE: &str = "none";

/// `lov_pool_is_ignored`.
pub fn is_ignored(name: &str) -> bool {
    name == POOL_IGNORE
}

/// `lov_pool_is_reserved`: names that mean something other than a pool.
pub fn is_reserved(name: &str) -> bool {
    matches!(name, POOL_IGNORE | POOL_INHERIT | POOL_NONE)
}

/// One pool: its name and the indexes of its OSTs, ascending, each once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OstPool {
    pub name: String,
    pub osts: Vec<u32>,
}

/// What `lctl pool_*` asks of the MGS.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PoolOp {
    /// `pool_new`.
    New,
    /// `pool_destroy`: only an empty pool.
    Destroy,
    /// `pool_add`: one OST, by index.
    Add(u32),
    /// `pool_remove`.
    Remove(u32),
}

/// A pool name as `lctl pool_new` accepts it (`parse_pool_cmd_args`, the MGS's check):
/// 1 to [`MAX_POOL_NAME`] bytes of letters, digits, `_` and `-`, and not a reserved name.
/// ENAMETOOLONG when too long, EINVAL otherwise.
pub fn check_name(name: &str) -> Result<(), Errno> {
    if name.len() > MAX_POOL_NAME {
        return Err(Errno::ENAMETOOLONG);
    }
    let chars_ok = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if name.is_empty() || !chars_ok || is_reserved(name) {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// Splits `FSNAME.POOL` (what `lctl pool_*` takes) into its parts; the pool part may be
/// absent (`pool_list FSNAME`).
pub fn split_full_name(full: &str) -> (&str, Option<&str>) {
    match full.split_once('.') {
        Some((fs, pool)) => (fs, Some(pool)),
        None => (full, None),
    }
}

/// Finds a pool by name.
pub fn find<'a>(pools: &'a [OstPool], name: &str) -> Option<&'a OstPool> {
    pools.iter().find(|p| p.name == name)
}

/// The pool a layout component naming `name` is confined to (`lod_find_pool`): none for
/// no name, a reserved one such as "ignore", or a pool the file system does not have.
pub fn named<'a>(pools: &'a [OstPool], name: &str) -> Option<&'a OstPool> {
    if name.is_empty() || is_reserved(name) {
        return None;
    }
    find(pools, name)
}

/// Applies `op` on pool `name` to `pools`, for a file system whose OSTs are `osts`.
/// The errnos are the ones `lctl` explains (`pool_cmd_interpret_err`): EEXIST for a pool
/// that exists or an OST already in it, ENOENT for a pool to destroy that does not exist
/// or an OST not in it, ENOMEDIUM for a pool to add to or remove from that does not
/// exist, ENOTEMPTY for destroying a pool with members, ENODEV for an OST the file system
/// does not have; ENOSPC past [`MAX_POOLS`].
pub fn apply(pools: &mut Vec<OstPool>, name: &str, op: &PoolOp, osts: &[u32]) -> Result<(), Errno> {
    check_name(name)?;
    let at = pools.iter().position(|p| p.name == name);
    match (op, at) {
        (PoolOp::New, Some(_)) => Err(Errno::EEXIST),
        (PoolOp::New, None) if pools.len() >= MAX_POOLS => Err(Errno::ENOSPC),
        (PoolOp::New, None) => {
            pools.push(OstPool {
                name: name.to_string(),
                osts: Vec::new(),
            });
            pools.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(())
        }
        (PoolOp::Destroy, None) => Err(Errno::ENOENT),
        (PoolOp::Destroy, Some(i)) if !pools[i].osts.is_empty() => Err(Errno::ENOTEMPTY),
        (PoolOp::Destroy, Some(i)) => {
            pools.remove(i);
            Ok(())
        }
        (PoolOp::Add(_) | PoolOp::Remove(_), None) => Err(Errno::ENOMEDIUM),
        (PoolOp::Add(ost), Some(i)) => {
            if !osts.contains(ost) {
                return Err(Errno::ENODEV);
            }
            let members = &mut pools[i].osts;
            match members.binary_search(ost) {
                Ok(_) => Err(Errno::EEXIST),
                Err(at) => {
                    members.insert(at, *ost);
                    Ok(())
                }
            }
        }
        (PoolOp::Remove(ost), Some(i)) => {
            let members = &mut pools[i].osts;
            match members.binary_search(ost) {
                Ok(at) => {
                    members.remove(at);
                    Ok(())
                }
                Err(_) if !osts.contains(ost) => Err(Errno::ENODEV),
                Err(_) => Err(Errno::ENOENT),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_lctl() {
        assert_eq!(check_name("flash"), Ok(()));
        assert_eq!(check_name("a_b-9"), Ok(()));
        assert_eq!(check_name("a234567890123456"), Err(Errno::ENAMETOOLONG));
        assert_eq!(check_name("a23456789012345"), Ok(()));
        for bad in ["", "a.b", "a b", "ignore", "inherit", "none", "é"] {
            assert_eq!(check_name(bad), Err(Errno::EINVAL), "{bad:?}");
        }
        assert_eq!(split_full_name("fs.flash"), ("fs", Some("flash")));
        assert_eq!(split_full_name("fs"), ("fs", None));
    }

    #[test]
    fn each_command_refuses_as_lustre_does() {
        let osts = [0, 1, 2, 3];
        let mut p = Vec::new();
        assert_eq!(
            apply(&mut p, "flash", &PoolOp::Add(0), &osts),
            Err(Errno::ENOMEDIUM)
        );
        assert_eq!(
            apply(&mut p, "flash", &PoolOp::Destroy, &osts),
            Err(Errno::ENOENT)
        );
        apply(&mut p, "flash", &PoolOp::New, &osts).expect("new");
        assert_eq!(
            apply(&mut p, "flash", &PoolOp::New, &osts),
            Err(Errno::EEXIST)
        );
        apply(&mut p, "flash", &PoolOp::Add(2), &osts).expect("add");
        apply(&mut p, "flash", &PoolOp::Add(0), &osts).expect("add");
        assert_eq!(p[0].osts, vec![0, 2], "members are kept in order");
        assert_eq!(
            apply(&mut p, "flash", &PoolOp::Add(2), &osts),
            Err(Errno::EEXIST)
        );
        assert_eq!(
            apply(&mut p, "flash", &PoolOp::Add(7), &osts),
            Err(Errno::ENODEV)
        );
        assert_eq!(
            apply(&mut p, "flash", &PoolOp::Remove(1), &osts),
            Err(Errno::ENOENT)
        );
        assert_eq!(
            apply(&mut p, "flash", &PoolOp::Remove(9), &osts),
            Err(Errno::ENODEV)
        );
        assert_eq!(
            apply(&mut p, "flash", &PoolOp::Destroy, &osts),
            Err(Errno::ENOTEMPTY)
        );
        apply(&mut p, "flash", &PoolOp::Remove(0), &osts).expect("remove");
        apply(&mut p, "flash", &PoolOp::Remove(2), &osts).expect("remove");
        apply(&mut p, "flash", &PoolOp::Destroy, &osts).expect("destroy");
        assert!(p.is_empty());
        assert_eq!(
            apply(&mut p, "bad.name", &PoolOp::New, &osts),
            Err(Errno::EINVAL)
        );
    }

    #[test]
    fn the_number_of_pools_is_bounded() {
        let mut p = Vec::new();
        for i in 0..MAX_POOLS {
            apply(&mut p, &format!("p{i}"), &PoolOp::New, &[]).expect("new");
        }
        assert_eq!(
            apply(&mut p, "one_more", &PoolOp::New, &[]),
            Err(Errno::ENOSPC)
        );
        assert!(find(&p, "p7").is_some());
    }
}
