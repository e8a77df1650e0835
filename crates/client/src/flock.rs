//! `fcntl` and `flock` locks across clients: the client's side of its MDTs' lock tables
//! (`nacre_mdt::flock`, Lustre's LDLM flock locks).
//!
//! A lock is asked of the file's MDT. One that must wait (`F_SETLKW`) asks again when the
//! MDT calls this client back about the file (a lock of it went), and at least every
//! [`RETRY_MAX`] in case a callback was lost; between asks it checks whether its caller
//! was interrupted, so a signal ends the wait with EINTR within [`INTERRUPT_POLL`] of it
//! arriving. No request is held on the MDT while a lock waits.
//!
//! Locks order data as NFS's do (Lustre's extent locks give the same to any reader):
//! before a lock is given back, this client's written data of the file lands on its
//! OSTs, and once a lock is granted, what this client cached of the file is dropped, so
//! whoever holds a lock reads what the previous holder wrote.

use crate::Client;
use crate::file::OpenFile;
use nacre_core::{Errno, Fid};
use nacre_rpc::msg::{FileLock, FlockMode, FlockOp, Reply, Request};
use parking_lot::Mutex;
use std::collections::HashSet;
use std::time::Duration;

/// Longest a waiting lock goes without asking its MDT again (a lost callback costs no
/// more); below the MDT's `WAIT_FRESH`, so the MDT keeps counting it as a waiter.
pub const RETRY_MAX: Duration = Duration::from_secs(1);

/// How often a waiting lock checks whether its caller was interrupted.
pub const INTERRUPT_POLL: Duration = Duration::from_millis(100);

/// This node for the MDTs' deadlock detection: its kernel (boot id) and the pid namespace
/// the kernel reports lock pids in (this process's), so that one process locking through
/// two mounts is seen as one. FNV-1a, stable across builds.
pub fn node_id() -> u64 {
    static NODE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *NODE.get_or_init(|| {
        use std::os::unix::fs::MetadataExt;
        // Without either, nodes are told apart less well: deadlock detection may then
        // take processes of two nodes with one pid for one. Said once, not hidden.
        let boot = std::fs::read("/proc/sys/kernel/random/boot_id").unwrap_or_else(|e| {
            tracing::warn!(target: "client", "no boot id for lock deadlock detection: {e}");
            Vec::new()
        });
        let pid_ns = std::fs::metadata("/proc/self/ns/pid").map_or_else(
            |e| {
                tracing::warn!(target: "client", "no pid namespace for lock deadlock detection: {e}");
                0
            },
            |m| m.ino(),
        );
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in boot.iter().chain(pid_ns.to_le_bytes().iter()) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h
    })
}

/// Files and lock owners that took a lock through this client: a `close` by that owner
/// gives its locks back on the MDT; any other `close` asks the MDT nothing.
#[derive(Default)]
pub(crate) struct LockOwners {
    taken: Mutex<HashSet<(Fid, u64)>>,
    /// Woken by every MDT callback: a waiting lock asks again.
    released: tokio::sync::Notify,
}

impl LockOwners {
    /// An MDT called this client back about some files: waiting locks ask again.
    pub(crate) fn wake(&self) {
        self.released.notify_waiters();
    }
}

impl Client {
    /// `F_GETLK`: the lock of another owner that would keep `owner` from taking `lock`.
    pub async fn flock_test(
        &self,
        f: &OpenFile,
        owner: u64,
        lock: FileLock,
    ) -> Result<Option<FileLock>, Errno> {
        match self.flock_call(f, owner, FlockOp::Test(lock)).await? {
            Reply::Flock { conflict } => Ok(conflict),
            _ => Err(Errno::EPROTO),
        }
    }

    /// `F_SETLK` and, with `wait`, `F_SETLKW`: takes, changes or gives back `lock` for
    /// `owner`. A conflict is EAGAIN without `wait`; with it, the call returns when the
    /// lock is taken, EDEADLK when waiting would deadlock, or EINTR once `interrupted`
    /// says the caller was.
    pub async fn flock_set(
        &self,
        f: &OpenFile,
        owner: u64,
        lock: FileLock,
        wait: bool,
        interrupted: impl Fn() -> bool,
    ) -> Result<(), Errno> {
        if lock.mode == FlockMode::Unlock {
            // What was written under the lock lands before anyone else can take it.
            self.flush_fid(&f.fid).await;
        }
        loop {
            let released = self.flocks.released.notified();
            let mut released = std::pin::pin!(released);
            // Registered before the ask, so a callback between its answer and the wait
            // is not lost.
            released.as_mut().enable();
            let op = FlockOp::Set { lock, wait };
            let conflict = match self.flock_call(f, owner, op).await? {
                Reply::Flock { conflict } => conflict,
                _ => return Err(Errno::EPROTO),
            };
            if conflict.is_none() {
                // Kept for the replay after a restart of the MDT, as the MDT keeps it.
                if let Ok(r) = self.mdc_replay(self.mdt_of(&f.fid)) {
                    r.locked(f.fid, owner, f.handle, &lock);
                }
                if lock.mode != FlockMode::Unlock {
                    self.flocks.taken.lock().insert((f.fid, owner));
                    // The previous holder's writes landed before it let go: read them.
                    self.drop_cached(Some(vec![f.fid])).await;
                }
                return Ok(());
            }
            if !wait {
                return Err(Errno::EAGAIN);
            }
            let until = tokio::time::Instant::now() + RETRY_MAX;
            loop {
                if interrupted() {
                    return Err(Errno::EINTR);
                }
                let next = (tokio::time::Instant::now() + INTERRUPT_POLL).min(until);
                tokio::select! {
                    () = released.as_mut() => break,
                    () = tokio::time::sleep_until(next) => {
                        if next >= until {
                            break;
                        }
                    }
                }
            }
        }
    }

    /// Whether `owner` took a lock of `fid` through this client since its last `close`
    /// of the file: its next `close` must give the locks back.
    pub fn flock_taken(&self, fid: &Fid, owner: u64) -> bool {
        self.flocks.taken.lock().contains(&(*fid, owner))
    }

    /// The last close of an open file, whose `flock` locks `owner` names: the MDT's close
    /// of the handle gives them back (and the replay list drops them with the handle), so
    /// only this client's note of the owner goes; no request of its own.
    pub fn flock_forget_owner(&self, f: &OpenFile, owner: u64) {
        self.flocks.taken.lock().remove(&(f.fid, owner));
    }

    /// A `close` by `owner` of a descriptor of the file: every lock it holds on the file
    /// goes (POSIX), its written data landed first. Asks the MDT nothing unless `owner`
    /// took a lock of the file through this client.
    pub async fn flock_release_owner(&self, f: &OpenFile, owner: u64) -> Result<(), Errno> {
        if !self.flocks.taken.lock().remove(&(f.fid, owner)) {
            return Ok(());
        }
        self.flush_fid(&f.fid).await;
        if let Ok(r) = self.mdc_replay(self.mdt_of(&f.fid)) {
            r.unlocked_owner(f.fid, owner);
        }
        match self.flock_call(f, owner, FlockOp::ReleaseOwner).await? {
            Reply::Flock { .. } => Ok(()),
            _ => Err(Errno::EPROTO),
        }
    }

    async fn flock_call(&self, f: &OpenFile, owner: u64, op: FlockOp) -> Result<Reply, Errno> {
        let req = Request::Flock {
            fid: f.fid,
            handle: f.handle,
            owner,
            node: node_id(),
            op,
        };
        self.md_call(self.mdt_of(&f.fid), req).await
    }
}
