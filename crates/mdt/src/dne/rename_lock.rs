//! The file system's rename lock (Lustre's "big filesystem lock" on MDT0): a rename that
//! moves a directory to another directory holds it from its loop check to its commit, so
//! no two such renames can each see a tree without the loop the other is about to make.
//!
//! MDT0 keeps the lock; other MDTs take it with `DneRenameLock`. A holder that dies keeps
//! it at most [`LEASE`]; if MDT0 restarts, the lock starts free.

use super::proxy::MdtProxy;
use crate::Mdt;
use nacre_core::Errno;
use nacre_rpc::msg::{Reply, Request};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OwnedMutexGuard;

/// Longest a holder may keep the lock.
pub const LEASE: Duration = Duration::from_secs(30);
/// Longest a taker waits for it before giving up (EBUSY).
pub const LOCK_WAIT: Duration = Duration::from_secs(20);

/// The lock, held; released when dropped.
pub enum RenameGuard {
    Local(#[allow(dead_code)] OwnedMutexGuard<()>),
    Remote {
        proxy: Arc<MdtProxy>,
        holder: u32,
        token: u64,
    },
}

impl Drop for RenameGuard {
    fn drop(&mut self) {
        if let RenameGuard::Remote {
            proxy,
            holder,
            token,
        } = self
        {
            let (proxy, holder, token) = (proxy.clone(), *holder, *token);
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let req = Request::DneRenameLock {
                        holder,
                        token,
                        acquire: false,
                    };
                    if let Err(e) = proxy.call(&req).await {
                        tracing::warn!(target: "mdt::dne", "giving back the rename lock: {e:?} (its lease ends it)");
                    }
                });
            }
        }
    }
}

impl Mdt {
    /// Takes the file system's rename lock.
    pub(crate) async fn dne_rename_lock(&self) -> Result<RenameGuard, Errno> {
        if self.index == 0 {
            let g = tokio::time::timeout(LOCK_WAIT, self.dne.global_rename.clone().lock_owned())
                .await
                .map_err(|_| Errno::EBUSY)?;
            return Ok(RenameGuard::Local(g));
        }
        let proxy = self.dne_proxy(0)?;
        let token = self.dne.new_op();
        let req = Request::DneRenameLock {
            holder: self.index,
            token,
            acquire: true,
        };
        match proxy.call(&req).await {
            Ok(Reply::Ok) => Ok(RenameGuard::Remote {
                proxy,
                holder: self.index,
                token,
            }),
            Ok(_) => Err(Errno::EPROTO),
            Err(e) => Err(e.errno()),
        }
    }

    /// MDT0's side of `DneRenameLock`.
    pub(crate) async fn dne_rename_lock_request(
        &self,
        holder: u32,
        token: u64,
        acquire: bool,
    ) -> Result<(), Errno> {
        if self.index != 0 {
            return Err(Errno::EINVAL);
        }
        if !acquire {
            if let Some(tx) = self.dne.rename_holders.lock().remove(&(holder, token)) {
                let _ = tx.send(());
            }
            return Ok(());
        }
        let g = tokio::time::timeout(LOCK_WAIT, self.dne.global_rename.clone().lock_owned())
            .await
            .map_err(|_| Errno::EBUSY)?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let holders = self.dne.rename_holders.clone();
        holders.lock().insert((holder, token), tx);
        tokio::spawn(async move {
            let _g = g;
            if tokio::time::timeout(LEASE, rx).await.is_err() {
                holders.lock().remove(&(holder, token));
                tracing::warn!(target: "mdt::dne", "MDT{holder:04x} kept the rename lock past its lease: released");
            }
        });
        Ok(())
    }
}
