//! The journal's syncs, pipelined behind the executor (group commit as jbd2 runs it).
//!
//! A transaction that must be durable before its reply (an `fsync`'s sync, a
//! `write_sync`, every transaction under `sync_journal`) is journaled and committed like
//! any other; its reply then waits here, on the sync thread, while the executor goes on
//! journaling later batches. One `fdatasync` covers every waiter queued when it began, so
//! concurrent callers share one synced journal write, and a create never queues behind
//! somebody else's sync. (The executor used to sync inline: under an fsync-per-file load
//! every create waited for the sync in progress, about 0.4 ms here.)
//!
//! A waiter's changes are visible to readers before they are durable, as every
//! unsynced transaction's are: a crash that loses them loses all that followed them in
//! the journal too. A failed journal sync fails the store ([`crate::health::Health`]):
//! after an `fdatasync` error the kernel may have dropped the pages it could not write,
//! so nothing journaled since the last good sync can be vouched for.

use super::{BEFORE_COMMIT_KEY, Numbered, Shared, Table, time_bytes};
use nacre_core::Errno;
use parking_lot::{Condvar, Mutex};
use std::any::Any;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use tokio::sync::oneshot;

/// A committed transaction whose reply waits for the journal's next sync.
pub(super) struct Waiter {
    pub reply: oneshot::Sender<Numbered>,
    pub answer: Box<dyn Any + Send>,
    pub transno: u64,
    /// The last transaction journaled with it: the sync must cover this far.
    pub through: u64,
}

/// Replies waiting for a sync. Bounded by the store's queue slots: each waiter's caller
/// holds one until its reply ([`super::MdStoreConfig::queue_depth`]).
#[derive(Default)]
pub(super) struct Syncer {
    state: Mutex<SyncState>,
    cv: Condvar,
}

#[derive(Default)]
struct SyncState {
    waiting: Vec<Waiter>,
    stop: bool,
}

impl Syncer {
    /// Queues replies for the next sync.
    pub fn push(&self, waiters: Vec<Waiter>) {
        if waiters.is_empty() {
            return;
        }
        self.state.lock().waiting.extend(waiters);
        self.cv.notify_one();
    }

    /// Ends the sync thread once it has answered every waiter queued so far.
    pub fn stop(&self) {
        self.state.lock().stop = true;
        self.cv.notify_one();
    }

    /// Replies waiting now (for tests).
    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        self.state.lock().waiting.len()
    }

    /// Every waiter queued, once there is one; `None` once stopped with none left.
    fn take(&self) -> Option<Vec<Waiter>> {
        let mut st = self.state.lock();
        while st.waiting.is_empty() {
            if st.stop {
                return None;
            }
            self.cv.wait(&mut st);
        }
        Some(std::mem::take(&mut st.waiting))
    }
}

/// The sync thread: takes the waiters queued, syncs once for all of them, answers them.
pub(super) fn sync_thread(shared: Weak<Shared>, syncer: Arc<Syncer>) {
    while let Some(waiters) = syncer.take() {
        let synced = match shared.upgrade() {
            Some(s) => s.sync_journaled(),
            None => Err(Errno::ESHUTDOWN),
        };
        for w in waiters {
            if let Ok(through) = synced {
                debug_assert!(
                    w.through <= through,
                    "a sync answered a waiter it did not cover"
                );
            }
            let _ = w.reply.send(synced.map(|_| (w.answer, w.transno)));
        }
    }
}

impl Shared {
    /// Makes every transaction journaled so far durable: first what they vouch for
    /// outside the store (DoM data), then the journal. Returns the transno it covers.
    /// Nothing to do when a sync or a checkpoint already covered it.
    pub(super) fn sync_journaled(&self) -> Result<u64, Errno> {
        let (through, began) = {
            // A checkpoint's own before-commit work and this one take turns: neither may
            // move `last_committed` while the other is still syncing what it took. Once
            // this work is done, what it took is durable and the turn can go.
            let _turn = self.commit_turn.lock();
            // Read before the before-commit work takes its list: a DoM change is listed
            // before its transaction takes a number, so all of them up to here are
            // listed. Later ones are not covered, so `through` is not read again.
            let through = self.journaled.load(Ordering::Acquire);
            if self.committed.0.load(Ordering::Acquire) >= through {
                return Ok(through);
            }
            (through, self.run_before_commit()?)
        };
        if let Some(t) = began {
            self.record_before_commit(t);
        }
        self.stats.journal_syncs.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = self.journal_sync.sync_data() {
            self.health.fail(format!("journal sync failed: {e}"));
            return Err(Errno::EIO);
        }
        // Durable only in a journal that is still the target's: a removed one syncs too.
        self.health.verify()?;
        self.committed.advance(through);
        Ok(through)
    }

    /// Journals when this sync's before-commit work began, in a batch of its own ahead
    /// of the sync, so what survives a crash names the work behind the last sync (an
    /// older record would only take more blocks as torn). Not after the store closed:
    /// its last checkpoint recorded its own work. Called without the commit turn, which
    /// a checkpoint takes while it holds the executor.
    fn record_before_commit(&self, began: std::time::SystemTime) {
        if self.queue.lock().closed {
            return;
        }
        let put = (
            Table::Meta,
            BEFORE_COMMIT_KEY.to_vec(),
            time_bytes(began).to_vec(),
        );
        self.with_executor(|e| {
            {
                let mut d = self.deferred.lock();
                match d.iter().position(|(_, k, _)| k == BEFORE_COMMIT_KEY) {
                    Some(i) => d[i] = put,
                    None => d.push(put),
                }
            }
            // A failed batch fails the store, and the sync after it says so.
            e.commit_batch(self, &mut Vec::new());
        });
    }
}
