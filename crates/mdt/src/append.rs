//! Append locks: one `O_APPEND` writer per file at a time, across clients.
//!
//! Each client's kernel appends at the end of file it cached, so two clients appending to
//! one file (a shared log) would write over each other's records. Lustre takes a
//! `[0, EOF]` extent lock for every append, whose grant makes the other clients' writes
//! land first. Here a client appends under the file's append lock: it takes the lock
//! (the reply carries the file's inode; the end of file it then reads, glimpsed where the
//! MDT's size is not exact, stays the end while it holds the lock), writes, and waits for
//! its bytes to land.
//!
//! A client that polls for callbacks may keep the lock after its append (Lustre's lock
//! cache), and with it the end of file, so a lone appender asks nothing of the MDT for its
//! next append. Another handle's take calls the holder back (the file's data-change
//! callback, which also tells it the file changed), and the holder gives the lock back
//! once its append in progress landed. A client that does not poll cannot be called back:
//! it gets the lock for one append and gives it back.
//!
//! A lock belongs to an open handle open for writing, so a close gives it back, and with
//! it a client's eviction (which closes its handles). A holder that keeps it
//! [`APPEND_HOLD_MAX`] past its grant, or past being called back (a client hung), loses it
//! to the next taker, with a warning. The table holds at most one entry per write handle,
//! and handles are bounded by [`crate::open::MAX_OPEN_HANDLES`].
//!
//! The table is not stored: after a restart a client that kept a lock takes it again in
//! its replay, after its handle's reopen ([`AppendLocks::reclaim`]), before any other
//! client may ask for it. Bytes it appended under the lock and had not sent then land
//! before another client reads the end of file, as they would have without the restart.

use nacre_core::Fid;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Longest a handle keeps a file's append lock against another taker, from its grant
/// (a lock given for one append) or from its callback (a kept lock): a client's write and
/// its wait for the bytes to land, with Lustre's `obd_timeout` (100 s) to spare.
pub const APPEND_HOLD_MAX: Duration = Duration::from_secs(100);

#[derive(Clone, Copy, Debug)]
struct Holder {
    handle: u64,
    /// The holder's connection, which a callback reaches.
    conn: u64,
    /// The holder may keep it after its append, until called back.
    kept: bool,
    /// Called back already.
    called: bool,
    /// The grant, or the callback once called.
    since: Instant,
}

/// Files' append locks on this MDT.
pub struct AppendLocks {
    held: Mutex<HashMap<Fid, Holder>>,
    /// Wakes the takers waiting when a lock is given back.
    released: Notify,
    /// [`APPEND_HOLD_MAX`], shorter in tests.
    hold_max: Duration,
}

impl Default for AppendLocks {
    fn default() -> Self {
        AppendLocks {
            held: Mutex::default(),
            released: Notify::new(),
            hold_max: APPEND_HOLD_MAX,
        }
    }
}

impl AppendLocks {
    /// Takes `fid`'s lock for `handle` of connection `conn`, which may keep it (`keep`)
    /// until called back; waits while another handle holds it, calling a holder that kept
    /// it back once (`call_back(conn)`). A handle that holds it already (its request sent
    /// again after a lost reply) has it.
    pub async fn take(
        &self,
        fid: Fid,
        handle: u64,
        conn: u64,
        keep: bool,
        call_back: impl Fn(u64),
    ) {
        let hold_max = self.hold_max;
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            let (wait, call) = {
                let mut held = self.held.lock();
                let now = Instant::now();
                let (wait, call) = match held.get_mut(&fid) {
                    None => (None, None),
                    Some(h) if h.handle == handle => {
                        h.kept = keep;
                        return;
                    }
                    Some(h) => {
                        let mut call = None;
                        if h.kept && !h.called {
                            h.called = true;
                            h.since = now;
                            call = Some(h.conn);
                        }
                        let age = now.saturating_duration_since(h.since);
                        if age >= hold_max {
                            tracing::warn!(target: "mdt", "file {fid}: handle {:#x} kept the append lock {}s past its {}: given to handle {handle:#x}", h.handle, age.as_secs(), if h.called { "callback" } else { "grant" });
                            (None, None)
                        } else {
                            (Some(hold_max - age), call)
                        }
                    }
                };
                if wait.is_none() {
                    let h = Holder {
                        handle,
                        conn,
                        kept: keep,
                        called: false,
                        since: now,
                    };
                    held.insert(fid, h);
                }
                (wait, call)
            };
            if let Some(c) = call {
                call_back(c);
            }
            let Some(wait) = wait else { return };
            let _ = tokio::time::timeout(wait, released).await;
        }
    }

    /// Takes `fid`'s lock again for `handle` of connection `conn`, kept, as it held it
    /// before this MDT restarted (the client's replay): at once, never waiting; `false`
    /// when another handle holds it (taken since the restart, or claimed twice).
    pub fn reclaim(&self, fid: Fid, handle: u64, conn: u64) -> bool {
        let mut held = self.held.lock();
        if held.get(&fid).is_some_and(|h| h.handle != handle) {
            return false;
        }
        held.insert(
            fid,
            Holder {
                handle,
                conn,
                kept: true,
                called: false,
                since: Instant::now(),
            },
        );
        true
    }

    /// Gives `fid`'s lock back if `handle` holds it; whether it did.
    pub fn release(&self, fid: &Fid, handle: u64) -> bool {
        let mut held = self.held.lock();
        let mine = held.get(fid).is_some_and(|h| h.handle == handle);
        if mine {
            held.remove(fid);
            drop(held);
            self.released.notify_waiters();
        }
        mine
    }

    /// Locks held now.
    pub fn len(&self) -> usize {
        self.held.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn fid(n: u32) -> Fid {
        Fid::new(0x200000400, n, 0)
    }

    #[tokio::test]
    async fn a_second_handle_waits_until_the_first_gives_the_lock_back() {
        let locks = Arc::new(AppendLocks::default());
        locks.take(fid(1), 10, 1, false, |_| {}).await;
        // Another file's lock is free.
        locks.take(fid(2), 11, 1, false, |_| {}).await;
        let second = {
            let locks = locks.clone();
            tokio::spawn(async move { locks.take(fid(1), 12, 2, false, |_| {}).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!second.is_finished(), "took a lock another handle holds");
        // Only the holder gives it back.
        assert!(!locks.release(&fid(1), 12));
        assert!(locks.release(&fid(1), 10));
        tokio::time::timeout(Duration::from_secs(5), second)
            .await
            .expect("the waiter took the lock given back")
            .expect("join");
        assert!(locks.release(&fid(1), 12));
        assert!(locks.release(&fid(2), 11));
        assert!(locks.is_empty());
    }

    /// A lock taken again in a replay is kept: the next taker calls its holder back and
    /// waits for it; a second claim by another handle is refused.
    #[tokio::test]
    async fn a_reclaimed_lock_is_kept_until_its_holder_gives_it_back() {
        let locks = Arc::new(AppendLocks::default());
        assert!(locks.reclaim(fid(1), 10, 7));
        assert!(locks.reclaim(fid(1), 10, 7), "the same handle twice");
        assert!(!locks.reclaim(fid(1), 11, 8), "another handle's claim");
        let calls = Arc::new(Mutex::new(Vec::new()));
        let taker = {
            let (locks, calls) = (locks.clone(), calls.clone());
            tokio::spawn(async move {
                locks
                    .take(fid(1), 11, 8, false, move |c| calls.lock().push(c))
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!taker.is_finished(), "took a reclaimed lock");
        assert_eq!(*calls.lock(), vec![7]);
        assert!(locks.release(&fid(1), 10));
        tokio::time::timeout(Duration::from_secs(5), taker)
            .await
            .expect("taken once given back")
            .expect("join");
        assert!(locks.release(&fid(1), 11));
    }

    #[tokio::test]
    async fn the_holder_takes_it_again_at_once() {
        let locks = AppendLocks::default();
        locks.take(fid(1), 10, 1, true, |_| {}).await;
        tokio::time::timeout(
            Duration::from_secs(1),
            locks.take(fid(1), 10, 1, true, |_| panic!("called back")),
        )
        .await
        .expect("a resent take by the holder waits for nobody");
        assert_eq!(locks.len(), 1);
    }

    #[tokio::test]
    async fn a_lock_held_past_its_bound_goes_to_the_next_taker() {
        let locks = AppendLocks {
            hold_max: Duration::from_millis(100),
            ..AppendLocks::default()
        };
        locks.take(fid(1), 10, 1, false, |_| {}).await;
        let t = Instant::now();
        tokio::time::timeout(
            Duration::from_secs(5),
            locks.take(fid(1), 11, 2, false, |_| {}),
        )
        .await
        .expect("the stale holder lost the lock");
        assert!(t.elapsed() >= Duration::from_millis(90), "taken early");
        assert!(!locks.release(&fid(1), 10), "the stale holder still had it");
        assert!(locks.release(&fid(1), 11));
    }

    /// A kept lock is called back once, on its holder's connection, and the taker has it
    /// when the holder gives it back; a holder that never does loses it past the bound,
    /// counted from the callback.
    #[tokio::test]
    async fn a_kept_lock_is_called_back_once_and_taken_when_given_back() {
        let locks = Arc::new(AppendLocks {
            hold_max: Duration::from_secs(1),
            ..AppendLocks::default()
        });
        locks.take(fid(1), 10, 7, true, |_| {}).await;
        let calls = Arc::new(Mutex::new(Vec::new()));
        let taker = {
            let (locks, calls) = (locks.clone(), calls.clone());
            tokio::spawn(async move {
                locks
                    .take(fid(1), 11, 8, true, move |c| calls.lock().push(c))
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!taker.is_finished());
        assert_eq!(*calls.lock(), vec![7], "the holder's connection, once");
        assert!(locks.release(&fid(1), 10));
        tokio::time::timeout(Duration::from_secs(5), taker)
            .await
            .expect("taken once given back")
            .expect("join");
        let t = Instant::now();
        let calls = Arc::new(Mutex::new(0));
        let c2 = calls.clone();
        tokio::time::timeout(
            Duration::from_secs(5),
            locks.take(fid(1), 12, 9, false, move |_| *c2.lock() += 1),
        )
        .await
        .expect("a holder that never gives it back loses it");
        assert!(t.elapsed() >= Duration::from_millis(900));
        assert_eq!(*calls.lock(), 1);
        assert!(locks.release(&fid(1), 12));
    }
}
