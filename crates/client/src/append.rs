//! `O_APPEND` writes across clients: the client's side of the MDT's append locks
//! (`nacre_mdt::append`), Lustre's `[0, EOF]` lock for an append.
//!
//! An append takes the file's lock on its MDT, learns the end of file (from the OSTs
//! where the MDT's size is not exact), writes there and waits for the bytes to land. A
//! lock the MDT lets this client keep stays with the handle, and so does the end of file
//! its last append left: the next append through it asks nobody, until the MDT calls the
//! lock back (another handle wants it, or another client changed the file), this client
//! changes the file otherwise, the handle closes or the MDT connection is replaced.
//!
//! One append per file at a time on this client ([`FileAppends::turn`]): the lock is one
//! handle's, and a callback gives it back only between appends.
//!
//! A kept lock is in the MDC's replay list ([`crate::replay::ReplayList::append_kept`]): a
//! restarted MDT gets it back in the replay, so bytes appended under it that wait in
//! write-behind land (at the reconnect's callback of every kept lock) before another
//! client reads the end of file.

use crate::Client;
use crate::file::OpenFile;
use bytes::Bytes;
use nacre_core::attr::SetAttr;
use nacre_core::{Errno, Fid};
use nacre_rpc::msg::{Cred, Reply, Request};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// Per file, this client's appends.
#[derive(Default)]
pub(crate) struct AppendLocks {
    files: Mutex<HashMap<Fid, Arc<FileAppends>>>,
}

#[derive(Default)]
pub(crate) struct FileAppends {
    /// Held through an append, and by whoever gives a kept lock back.
    turn: tokio::sync::Mutex<Option<Kept>>,
}

/// A lock this client keeps after an append.
#[derive(Clone, Copy, Debug)]
struct Kept {
    handle: u64,
    /// The end of file the last append left.
    eof: u64,
    /// The file's change count on this client after that append: another change here
    /// (a write through another handle, a truncate, a callback) makes `eof` a guess.
    changes: u64,
    /// The MDT connection it was granted on: a new one (the MDT restarted) may not know it.
    generation: u64,
}

impl AppendLocks {
    fn of(&self, fid: Fid) -> Arc<FileAppends> {
        self.files.lock().entry(fid).or_default().clone()
    }

    fn get(&self, fid: &Fid) -> Option<Arc<FileAppends>> {
        self.files.lock().get(fid).cloned()
    }

    /// Forgets `fid`'s entry if it keeps no lock and nobody else is using it.
    fn tidy(&self, fid: &Fid) {
        let mut files = self.files.lock();
        let idle = files.get(fid).is_some_and(|a| {
            Arc::strong_count(a) == 1 && a.turn.try_lock().is_ok_and(|k| k.is_none())
        });
        if idle {
            files.remove(fid);
        }
    }

    fn all(&self) -> Vec<(Fid, Arc<FileAppends>)> {
        self.files
            .lock()
            .iter()
            .map(|(f, a)| (*f, a.clone()))
            .collect()
    }
}

impl Client {
    /// An `O_APPEND` write: `data` goes at the end of the file as every client sees it,
    /// not at the end this client cached. Returns where the bytes went. Under a lock this
    /// client keeps they may wait in write-behind, as any write's do: they land before
    /// the lock goes back. Otherwise they have landed when it returns.
    pub async fn append(&self, f: &OpenFile, data: Bytes) -> Result<u64, Errno> {
        if !f.flags.write {
            return Err(Errno::EBADF);
        }
        let file = self.appends.of(f.fid);
        let mut kept = file.turn.lock().await;
        let mdt = self.mdt_of(&f.fid);
        let generation = self.mdc(mdt)?.generation();
        let reusable = kept.filter(|k| k.handle == f.handle && k.generation == generation);
        if let Some(k) = kept.take()
            && reusable.is_none()
        {
            // Another handle's (the lock is a handle's), or from before a reconnect.
            self.flush_fid(&f.fid).await;
            self.append_unlock(f.fid, k.handle).await;
        }
        let mut keep = reusable.is_some();
        let at = match reusable {
            Some(k) if k.changes == self.local_changes.of(&f.fid) => Ok(k.eof),
            // The lock is still ours; the file changed here since.
            Some(_) => self.getattr(f.fid).await.map(|i| i.attr.size),
            None => {
                let lock = Request::AppendLock {
                    fid: f.fid,
                    handle: f.handle,
                };
                match self.md_call(mdt, lock).await? {
                    Reply::AppendLocked { inode, keep: k } => {
                        keep = k;
                        // This client's own writes land first (`complete` waits for them).
                        self.complete(inode).await.map(|info| {
                            if let Some(l) = info.layout {
                                f.set_layout(l);
                            }
                            info.attr.size
                        })
                    }
                    _ => Err(Errno::EPROTO),
                }
            }
        };
        let len = data.len() as u64;
        let appended = match at {
            Ok(at) => {
                async {
                    self.write(f, at, data).await?;
                    // A kept lock goes back only after this client's writes landed.
                    if !keep {
                        self.flush(f).await?;
                    }
                    Ok(at)
                }
                .await
            }
            Err(e) => Err(e),
        };
        match appended {
            Ok(at) if keep => {
                *kept = Some(Kept {
                    handle: f.handle,
                    eof: at + len,
                    changes: self.local_changes.of(&f.fid),
                    generation,
                });
                // Bytes appended under it may wait in write-behind: a restart of the MDT
                // must not give the lock to another client before they land.
                if let Ok(r) = self.mdc_replay(mdt) {
                    r.append_kept(f.fid, f.handle);
                }
            }
            _ => {
                // Earlier appends under a kept lock may still be on their way: the next
                // appender's end of file must count them (their errors stay the handle's).
                self.flush_fid(&f.fid).await;
                self.append_unlock(f.fid, f.handle).await;
            }
        }
        appended
    }

    /// What the kernel's `file_remove_privs` does before a write through its cache, for a
    /// write that bypasses it (an `O_APPEND` descriptor's): clears the set-id bits a writer
    /// without CAP_FSETID must ([`nacre_core::attr::privileges_to_kill`]). The mode comes
    /// from the MDT, which lets anyone who may write the file clear them.
    pub async fn kill_setid(&self, fid: Fid, cred: &Cred) -> Result<(), Errno> {
        let attr = match self
            .md_call(self.mdt_of(&fid), Request::Getattr { fid })
            .await?
        {
            Reply::Inode(i) => i.attr,
            _ => return Err(Errno::EPROTO),
        };
        let mode = attr.mode & !nacre_core::attr::privileges_to_kill(attr.mode);
        if mode != attr.mode {
            let change = SetAttr {
                mode: Some(mode),
                ..SetAttr::default()
            };
            self.setattr(fid, change, cred, None).await?;
        }
        Ok(())
    }

    async fn append_unlock(&self, fid: Fid, handle: u64) {
        if let Ok(r) = self.mdc_replay(self.mdt_of(&fid)) {
            r.append_released(fid, handle);
        }
        let unlock = Request::AppendUnlock { fid, handle };
        if let Err(e) = self.md_call(self.mdt_of(&fid), unlock).await {
            // The handle's close gives it back, or the MDT's bound.
            tracing::warn!(target: "client", "file {fid}: append lock not given back: {e}");
        }
    }

    /// The MDT called `fids` back (all with `None`): kept locks go back once the append
    /// in progress, if any, landed. In the background: the callback poll goes on.
    pub(crate) fn append_callback(self: &Arc<Self>, fids: Option<&[Fid]>) {
        let files: Vec<(Fid, Arc<FileAppends>)> = match fids {
            Some(fids) => fids
                .iter()
                .filter_map(|f| self.appends.get(f).map(|a| (*f, a)))
                .collect(),
            None => self.appends.all(),
        };
        for (fid, file) in files {
            let me = self.clone();
            tokio::spawn(async move {
                // The turn is held until the MDT has the lock back: an append that took
                // it meanwhile would find it still held by its handle, and lose it to
                // this unlock.
                let mut kept = file.turn.lock().await;
                if let Some(k) = kept.take() {
                    // The next appender's end of file counts what was appended here.
                    me.flush_fid(&fid).await;
                    me.append_unlock(fid, k.handle).await;
                }
                drop(kept);
                drop(file);
                me.appends.tidy(&fid);
            });
        }
    }

    /// Handle `handle` of `fid` closes: the MDT's close gives back a lock it keeps.
    pub(crate) async fn append_closing(&self, fid: Fid, handle: u64) {
        let Some(file) = self.appends.get(&fid) else {
            return;
        };
        {
            let mut kept = file.turn.lock().await;
            if kept.is_some_and(|k| k.handle == handle) {
                *kept = None;
                if let Ok(r) = self.mdc_replay(self.mdt_of(&fid)) {
                    r.append_released(fid, handle);
                }
            }
        }
        drop(file);
        self.appends.tidy(&fid);
    }
}
