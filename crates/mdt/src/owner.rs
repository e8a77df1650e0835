//! The owner of a file's OST objects (Lustre's `lod_attr_set` of a chown, passed to each
//! stripe through its OSP): the MDT gives the objects the file's new owner after the
//! change commits, as a quota on the OSTs would count it. An OST that does not answer
//! keeps the old owner until LFSCK's layout check finds and repairs it (the class
//! `inconsistent_owner`).
//!
//! A chown passing the owner on and LFSCK repairing it must not cross, or the OSTs could
//! end with the owner the file had before: both hold the file's [`OwnerLocks`] stripe
//! while they read the owner and send it.

use crate::Mdt;
use crate::records::Inode;
use nacre_core::{Errno, Fid};
use std::collections::BTreeMap;
use tokio::sync::{Mutex, MutexGuard};

/// Stripes of [`OwnerLocks`]: chowns of files in different stripes go on side by side.
pub const OWNER_LOCK_STRIPES: usize = 64;

/// Serialises, per file, passing its owner to its objects.
pub struct OwnerLocks([Mutex<()>; OWNER_LOCK_STRIPES]);

impl Default for OwnerLocks {
    fn default() -> Self {
        OwnerLocks(std::array::from_fn(|_| Mutex::new(())))
    }
}

impl OwnerLocks {
    pub async fn lock(&self, fid: &Fid) -> MutexGuard<'_, ()> {
        let h = fid.seq ^ u64::from(fid.oid).rotate_left(17) ^ u64::from(fid.ver);
        self.0[(h % OWNER_LOCK_STRIPES as u64) as usize]
            .lock()
            .await
    }
}

impl Mdt {
    /// Gives the OST objects of `ino` its owner, OST by OST at once. Objects on an OST
    /// that fails keep their old owner (logged); the first error is returned.
    pub async fn pass_owner(&self, ino: &Inode) -> Result<(), Errno> {
        let Some(layout) = &ino.layout else {
            return Ok(());
        };
        let mut by_ost: BTreeMap<u32, Vec<Fid>> = BTreeMap::new();
        for o in layout.objects() {
            by_ost.entry(o.ost_idx).or_default().push(o.fid);
        }
        let (uid, gid) = (ino.attr.uid, ino.attr.gid);
        let calls = by_ost.into_iter().map(|(ost, objs)| async move {
            let osp = self.lod.osp(ost).ok_or(Errno::ENODEV)?;
            osp.set_owner(objs, uid, gid).await.inspect_err(|e| {
                tracing::warn!(target: "mdt", "file {}: OST{ost:04x} keeps the old owner of its objects ({e}); LFSCK's layout check repairs it", ino.attr.fid);
            })
        });
        futures::future::join_all(calls)
            .await
            .into_iter()
            .collect::<Result<Vec<()>, Errno>>()
            .map(|_| ())
    }
}
