//! File locks across clients: `fcntl` byte-range locks and `flock(2)` (Lustre's LDLM
//! flock locks, `ldlm_flock.c`), one table per MDT for the files it holds.
//!
//! A lock belongs to an owner: a client connection and the lock owner its kernel names (a
//! process's file table for `fcntl` locks, an open file description for `flock`, which
//! the kernel emulates with whole-file POSIX locks). How an owner's own locks combine and
//! which conflict is [`nacre_core::flock`]'s, shared with the client.
//!
//! Nothing waits on the MDT: a request that meets a conflict is answered at once with the
//! lock in the way. A waiting one (`F_SETLKW`) is remembered, and when a lock of the file
//! goes or shrinks, the waiters' clients are called back (the file's data-change
//! callback) and ask again; so a request holds no slot of its client's `max_rpcs_in_flight`.
//! A wait that would close a cycle of owners each waiting for the next is EDEADLK (Lustre's
//! `ldlm_flock_deadlock`). A waiter that stops asking (interrupted, or its client gone) is
//! forgotten after [`WAIT_FRESH`].
//!
//! An owner's locks go with its `close` of any descriptor of the file (the client sends
//! [`FlockOp::ReleaseOwner`](nacre_rpc::msg::FlockOp)), and when the MDT closes a handle
//! the owner took a lock through: at its client's close, at an eviction, or when the
//! export's grace ends. They follow a reconnected client's handles to its new connection,
//! and after a restart of the MDT its clients take them again in their replay
//! ([`FlockOp::Reclaim`](nacre_rpc::msg::FlockOp), as Lustre replays its flock locks).
//! The table holds at most [`MAX_FILE_LOCKS`] locks; past it a new one is ENOLCK.

use nacre_core::flock::{FileLock, FlockMode, apply};
use nacre_core::{Errno, Fid};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Bound on the locks one MDT holds; a lock past it is ENOLCK.
pub const MAX_FILE_LOCKS: usize = 1 << 20;

/// How long a waiter counts (for deadlock detection and callbacks) after its last ask: a
/// waiting client asks again at least every `nacre_client::flock::RETRY_MAX`.
pub const WAIT_FRESH: Duration = Duration::from_secs(5);

/// Who holds a lock: a client connection and its kernel's lock owner, and the client's
/// node (its kernel): a process's locks through two mounts on one node have two owners,
/// but one process waits in both, which deadlock detection must see.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Owner {
    pub conn: u64,
    pub owner: u64,
    pub node: u64,
}

/// Bound on the handles one owner's locks of one file remember (a process rarely opens
/// one file more often); past it the oldest is forgotten, and only `close` of a
/// remembered one (or the owner's own release) gives the locks back.
pub const OWNER_HANDLES_MAX: usize = 8;

/// One owner's locks of one file.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Held {
    who: Owner,
    /// The open handles it took locks through: the MDT's close of any gives them back.
    handles: Vec<u64>,
    /// Disjoint and maximal ([`nacre_core::flock::apply`]).
    locks: Vec<FileLock>,
}

/// An owner waiting for another's lock.
#[derive(Clone, Copy, Debug)]
struct Wait {
    fid: Fid,
    /// The waiting process (0: unknown).
    pid: u32,
    blocker: Owner,
    /// The process that took the lock in the way.
    blocker_pid: u32,
    asked: Instant,
}

#[derive(Default)]
struct Inner {
    files: HashMap<Fid, Vec<Held>>,
    count: usize,
    waiting: HashMap<Owner, Wait>,
}

/// The file locks of one MDT.
pub struct FileLocks {
    inner: Mutex<Inner>,
    /// [`MAX_FILE_LOCKS`], smaller in tests.
    max: usize,
}

impl Default for FileLocks {
    fn default() -> Self {
        FileLocks::with_max(MAX_FILE_LOCKS)
    }
}

/// What [`FileLocks::set`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetOutcome {
    /// The lock in the way; `None` when taken or given back.
    pub conflict: Option<FileLock>,
    /// Connections waiting on the file that should ask again: a lock of it went or shrank.
    pub wake: Vec<u64>,
}

impl FileLocks {
    pub fn with_max(max: usize) -> FileLocks {
        FileLocks {
            inner: Mutex::default(),
            max,
        }
    }

    /// `F_GETLK`: the first lock of another owner that conflicts with `lock`.
    pub fn test(&self, fid: &Fid, who: Owner, lock: &FileLock) -> Option<FileLock> {
        if lock.mode == FlockMode::Unlock {
            return None;
        }
        let g = self.inner.lock();
        let list = g.files.get(fid)?;
        conflict(list, who, lock).map(|(l, _)| l)
    }

    /// `F_SETLK`/`F_SETLKW`: takes, changes or gives back `lock` for `who`, through
    /// `handle`. With `wait`, a conflict is remembered (its client is called back when a
    /// lock of the file goes), and one that would deadlock is EDEADLK.
    pub fn set(
        &self,
        fid: Fid,
        who: Owner,
        handle: u64,
        lock: FileLock,
        wait: bool,
    ) -> Result<SetOutcome, Errno> {
        lock.check()?;
        let mut g = self.inner.lock();
        let g = &mut *g;
        let now = Instant::now();
        g.waiting
            .retain(|_, w| now.saturating_duration_since(w.asked) < WAIT_FRESH);
        let list = g.files.get(&fid).map_or(&[][..], |l| l.as_slice());
        if let Some((conflict, blocker)) = conflict(list, who, &lock) {
            if wait {
                let me = (who, lock.pid);
                if deadlocks(&g.waiting, me, (blocker, conflict.pid)) {
                    g.waiting.remove(&who);
                    return Err(Errno::EDEADLK);
                }
                if g.waiting.len() >= self.max && !g.waiting.contains_key(&who) {
                    return Err(Errno::ENOLCK);
                }
                g.waiting.insert(
                    who,
                    Wait {
                        fid,
                        pid: lock.pid,
                        blocker,
                        blocker_pid: conflict.pid,
                        asked: now,
                    },
                );
            }
            return Ok(SetOutcome {
                conflict: Some(conflict),
                wake: Vec::new(),
            });
        }
        let at = list.iter().position(|h| h.who == who);
        let mine = at.map_or(&[][..], |i| list[i].locks.as_slice());
        let (locks, weakened) = apply(mine, &lock);
        let count = g.count - mine.len() + locks.len();
        if count > self.max && locks.len() > mine.len() {
            return Err(Errno::ENOLCK);
        }
        g.count = count;
        let list = g.files.entry(fid).or_default();
        match at {
            Some(i) if locks.is_empty() => {
                list.swap_remove(i);
            }
            Some(i) => {
                let h = &mut list[i];
                h.locks = locks;
                if !h.handles.contains(&handle) {
                    if h.handles.len() >= OWNER_HANDLES_MAX {
                        h.handles.remove(0);
                    }
                    h.handles.push(handle);
                }
            }
            None if locks.is_empty() => {}
            None => list.push(Held {
                who,
                handles: vec![handle],
                locks,
            }),
        }
        if list.is_empty() {
            g.files.remove(&fid);
        }
        g.waiting.remove(&who);
        let wake = if weakened {
            waiters(&g.waiting, &fid)
        } else {
            Vec::new()
        };
        Ok(SetOutcome {
            conflict: None,
            wake,
        })
    }

    /// Gives back every lock `who` holds on `fid`; the connections to call back.
    pub fn release_owner(&self, fid: &Fid, who: Owner) -> Vec<u64> {
        self.release_where(fid, |h| h.who == who)
    }

    /// Gives back the locks taken through `handle` on `fid` (closed); the connections to
    /// call back.
    pub fn release_handle(&self, fid: &Fid, handle: u64) -> Vec<u64> {
        self.release_where(fid, |h| h.handles.contains(&handle))
    }

    fn release_where(&self, fid: &Fid, gone: impl Fn(&Held) -> bool) -> Vec<u64> {
        let mut g = self.inner.lock();
        let Some(list) = g.files.get_mut(fid) else {
            return Vec::new();
        };
        let mut removed = 0;
        list.retain(|h| {
            let go = gone(h);
            if go {
                removed += h.locks.len();
            }
            !go
        });
        if list.is_empty() {
            g.files.remove(fid);
        }
        if removed == 0 {
            return Vec::new();
        }
        g.count -= removed;
        waiters(&g.waiting, fid)
    }

    /// Moves the locks of connection `old` to `new` (their client reconnected, and its
    /// handles moved with it).
    pub fn rebind(&self, old: u64, new: u64) {
        if old == new {
            return;
        }
        let mut g = self.inner.lock();
        for h in g.files.values_mut().flatten() {
            if h.who.conn == old {
                h.who.conn = new;
            }
        }
        g.waiting.retain(|w, _| w.conn != old);
    }

    /// Locks held now.
    pub fn len(&self) -> usize {
        self.inner.lock().count
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The first lock of another owner than `who` that keeps it from taking `lock`, and its
/// owner.
fn conflict(list: &[Held], who: Owner, lock: &FileLock) -> Option<(FileLock, Owner)> {
    list.iter().filter(|h| h.who != who).find_map(|h| {
        h.locks
            .iter()
            .find(|l| l.conflicts_with(lock))
            .map(|l| (*l, h.who))
    })
}

/// Whether owner `me.0` (process `me.1`) waiting for owner `blocker.0` (whose lock process
/// `blocker.1` took) closes a cycle: the blocker waits, through others, for it. An owner
/// stands for its process too (pid 0 is none), so a cycle through another process back to
/// this one through another mount is seen, as Linux sees it on one file system. A process
/// waiting directly for its own lock through another mount is not taken for a deadlock:
/// another of its threads may hold it and let go. The chain is at most as long as the
/// table of waiters.
fn deadlocks(waiting: &HashMap<Owner, Wait>, me: (Owner, u32), blocker: (Owner, u32)) -> bool {
    let same_process =
        |a: (Owner, u32), b: (Owner, u32)| a.1 != 0 && a.0.node == b.0.node && a.1 == b.1;
    let mut at = blocker;
    let mut through_another = false;
    for _ in 0..=waiting.len() {
        if at.0 == me.0 {
            return true;
        }
        if !same_process(at, me) {
            through_another = true;
        } else if through_another {
            return true;
        }
        let next = waiting.get(&at.0).or_else(|| {
            waiting
                .iter()
                .find(|(o, w)| **o != me.0 && same_process((**o, w.pid), at))
                .map(|(_, w)| w)
        });
        match next {
            Some(w) => at = (w.blocker, w.blocker_pid),
            None => return false,
        }
    }
    false
}

/// Connections with an owner waiting on `fid`.
fn waiters(waiting: &HashMap<Owner, Wait>, fid: &Fid) -> Vec<u64> {
    let mut conns: Vec<u64> = waiting
        .iter()
        .filter(|(_, w)| w.fid == *fid)
        .map(|(o, _)| o.conn)
        .collect();
    conns.sort_unstable();
    conns.dedup();
    conns
}

#[cfg(test)]
mod tests {
    use super::*;

    const FID: Fid = Fid {
        seq: 0x200000401,
        oid: 1,
        ver: 0,
    };
    const A: Owner = Owner {
        conn: 1,
        owner: 10,
        node: 1,
    };
    const B: Owner = Owner {
        conn: 2,
        owner: 10,
        node: 2,
    };
    const C: Owner = Owner {
        conn: 2,
        owner: 11,
        node: 2,
    };

    fn lk(mode: FlockMode, start: u64, end: u64) -> FileLock {
        FileLock {
            mode,
            start,
            end,
            pid: 7,
        }
    }

    fn held(t: &FileLocks, who: Owner) -> Vec<(FlockMode, u64, u64)> {
        let g = t.inner.lock();
        g.files
            .get(&FID)
            .into_iter()
            .flatten()
            .filter(|h| h.who == who)
            .flat_map(|h| h.locks.iter())
            .map(|l| (l.mode, l.start, l.end))
            .collect()
    }

    #[test]
    fn a_write_lock_keeps_another_owner_out_and_its_own_owner_in() {
        let t = FileLocks::default();
        let o = t
            .set(FID, A, 1, lk(FlockMode::Write, 0, 99), false)
            .unwrap();
        assert_eq!(o.conflict, None);
        let o = t
            .set(FID, B, 2, lk(FlockMode::Read, 50, 50), false)
            .unwrap();
        assert_eq!(o.conflict, Some(lk(FlockMode::Write, 0, 99)));
        assert_eq!(t.test(&FID, B, &lk(FlockMode::Read, 100, 200)), None);
        // The same owner converts its own lock.
        let o = t.set(FID, A, 1, lk(FlockMode::Read, 0, 99), false).unwrap();
        assert_eq!(o.conflict, None);
        assert_eq!(held(&t, A), vec![(FlockMode::Read, 0, 99)]);
        // Read locks share.
        let o = t
            .set(FID, B, 2, lk(FlockMode::Read, 50, 50), false)
            .unwrap();
        assert_eq!(o.conflict, None);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn an_unlock_in_the_middle_splits_and_touching_ranges_merge() {
        let t = FileLocks::default();
        t.set(FID, A, 1, lk(FlockMode::Write, 0, 99), false)
            .unwrap();
        t.set(FID, A, 1, lk(FlockMode::Unlock, 40, 59), false)
            .unwrap();
        assert_eq!(
            held(&t, A),
            vec![(FlockMode::Write, 0, 39), (FlockMode::Write, 60, 99)]
        );
        assert_eq!(t.len(), 2);
        // Filling the hole merges all three.
        t.set(FID, A, 1, lk(FlockMode::Write, 40, 59), false)
            .unwrap();
        assert_eq!(held(&t, A), vec![(FlockMode::Write, 0, 99)]);
        // A read lock inside a write lock splits it into three of two modes.
        t.set(FID, A, 1, lk(FlockMode::Read, 10, 19), false)
            .unwrap();
        assert_eq!(
            held(&t, A),
            vec![
                (FlockMode::Write, 0, 9),
                (FlockMode::Read, 10, 19),
                (FlockMode::Write, 20, 99)
            ]
        );
        // To the end of the file, with no overflow at the last byte.
        t.set(FID, A, 1, lk(FlockMode::Write, 100, u64::MAX), false)
            .unwrap();
        t.set(FID, A, 1, lk(FlockMode::Unlock, 0, u64::MAX), false)
            .unwrap();
        assert!(t.is_empty());
        assert!(t.inner.lock().files.is_empty());
    }

    #[test]
    fn a_waiter_is_called_back_when_the_lock_goes_and_a_cycle_is_edeadlk() {
        let t = FileLocks::default();
        let other = Fid { oid: 2, ..FID };
        t.set(FID, A, 1, lk(FlockMode::Write, 0, 0), false).unwrap();
        t.set(other, C, 3, lk(FlockMode::Write, 0, 0), false)
            .unwrap();
        // C waits for A.
        let o = t.set(FID, C, 3, lk(FlockMode::Write, 0, 0), true).unwrap();
        assert!(o.conflict.is_some());
        // A waiting for C closes the cycle.
        assert_eq!(
            t.set(other, A, 1, lk(FlockMode::Write, 0, 0), true),
            Err(Errno::EDEADLK)
        );
        // Without waiting it is only a conflict.
        let o = t
            .set(other, A, 1, lk(FlockMode::Write, 0, 0), false)
            .unwrap();
        assert!(o.conflict.is_some());
        // A's unlock calls C's connection back, and C gets the lock.
        let o = t
            .set(FID, A, 1, lk(FlockMode::Unlock, 0, 0), false)
            .unwrap();
        assert_eq!(o.wake, vec![C.conn]);
        let o = t.set(FID, C, 3, lk(FlockMode::Write, 0, 0), true).unwrap();
        assert_eq!(o.conflict, None);
        assert!(t.inner.lock().waiting.is_empty());
    }

    #[test]
    fn one_process_waiting_through_two_mounts_is_one_in_the_cycle() {
        let t = FileLocks::default();
        let other = Fid { oid: 2, ..FID };
        // Process 100 and process 200 of one node, each with an owner per mount.
        let p1 = Owner {
            conn: 5,
            owner: 1,
            node: 9,
        };
        let p2 = Owner {
            conn: 6,
            owner: 2,
            node: 9,
        };
        let c1 = Owner {
            conn: 5,
            owner: 3,
            node: 9,
        };
        let c2 = Owner {
            conn: 6,
            owner: 4,
            node: 9,
        };
        let pl = |pid, mode| FileLock {
            pid,
            ..lk(mode, 0, 9)
        };
        t.set(other, p2, 1, pl(100, FlockMode::Write), false)
            .unwrap();
        t.set(FID, c1, 2, pl(200, FlockMode::Write), false).unwrap();
        // 100 waits, through mount 5, for 200's lock.
        let o = t.set(FID, p1, 3, pl(100, FlockMode::Write), true).unwrap();
        assert!(o.conflict.is_some());
        // 200 waiting, through mount 6, for 100's lock closes the cycle.
        assert_eq!(
            t.set(other, c2, 4, pl(200, FlockMode::Write), true),
            Err(Errno::EDEADLK)
        );
        // A thread waiting through one mount for its own process's lock through another
        // is no deadlock: another thread may let go.
        let t2 = Owner {
            conn: 6,
            owner: 7,
            node: 9,
        };
        let o = t.set(FID, t2, 5, pl(200, FlockMode::Write), true).unwrap();
        assert!(o.conflict.is_some());
        // On another node the same pids are other processes.
        let elsewhere = Owner { node: 8, ..c2 };
        let o = t
            .set(other, elsewhere, 4, pl(200, FlockMode::Write), true)
            .unwrap();
        assert!(o.conflict.is_some());
    }

    #[test]
    fn locks_go_with_their_owner_or_their_handle() {
        let t = FileLocks::default();
        t.set(FID, A, 1, lk(FlockMode::Read, 0, 9), false).unwrap();
        t.set(FID, A, 5, lk(FlockMode::Read, 20, 29), false)
            .unwrap();
        t.set(FID, B, 2, lk(FlockMode::Read, 0, 9), false).unwrap();
        t.set(FID, B, 2, lk(FlockMode::Write, 40, 49), true)
            .unwrap();
        let o = t.set(FID, C, 3, lk(FlockMode::Write, 0, 0), true).unwrap();
        assert!(o.conflict.is_some());
        // POSIX: the close of any descriptor an owner locked through gives back all its
        // locks of the file.
        assert_eq!(t.release_handle(&FID, 5), vec![C.conn]);
        assert!(held(&t, A).is_empty());
        assert_eq!(t.len(), 2);
        t.set(FID, A, 1, lk(FlockMode::Read, 0, 9), false).unwrap();
        t.release_owner(&FID, A);
        assert!(held(&t, A).is_empty());
        assert_eq!(t.len(), 2);
        // A reconnected client keeps its locks under its new connection.
        t.rebind(B.conn, 9);
        assert!(held(&t, B).is_empty());
        assert_eq!(held(&t, Owner { conn: 9, ..B }).len(), 2);
        assert_eq!(t.release_handle(&FID, 2), Vec::<u64>::new());
        assert!(t.is_empty());
    }

    #[test]
    fn past_the_bound_a_new_lock_is_enolck_and_bad_ranges_einval() {
        let t = FileLocks::with_max(2);
        t.set(FID, A, 1, lk(FlockMode::Write, 0, 9), false).unwrap();
        t.set(FID, A, 1, lk(FlockMode::Write, 20, 29), false)
            .unwrap();
        assert_eq!(
            t.set(FID, A, 1, lk(FlockMode::Write, 40, 49), false),
            Err(Errno::ENOLCK)
        );
        // Merging, converting and giving back still work at the bound.
        t.set(FID, A, 1, lk(FlockMode::Write, 10, 19), false)
            .unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(
            t.set(FID, A, 1, lk(FlockMode::Write, 5, 4), false),
            Err(Errno::EINVAL)
        );
    }
}
