//! POSIX byte-range lock rules (`fcntl`; `flock` is a whole-file one), in one place for
//! the MDT that holds the locks (`nacre_mdt::flock`) and the client that keeps its own for
//! their replay after a restart of the MDT (`nacre_client::flock`).
//!
//! An owner's locks never conflict with each other: its new lock over a range replaces
//! what it held there (splitting a lock it cuts through), and its ranges of one mode that
//! touch merge, so an owner's locks are disjoint and maximal. A read lock conflicts with
//! another owner's write lock over a shared byte; a write lock with any.

use serde::{Deserialize, Serialize};

/// A byte-range lock's mode (`fcntl`'s `F_RDLCK`, `F_WRLCK`, `F_UNLCK`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FlockMode {
    Read,
    Write,
    Unlock,
}

/// A byte-range lock: `start..=end` (`end` inclusive, as in FUSE and the kernel's
/// `struct file_lock`; `u64::MAX` or `i64::MAX` for "to the end"), taken by process `pid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileLock {
    pub mode: FlockMode,
    pub start: u64,
    pub end: u64,
    pub pid: u32,
}

impl FileLock {
    /// A range the MDT may hold or test: EINVAL when it ends before it starts (the
    /// client turns `fcntl`'s start and length into an inclusive end; nothing else could
    /// make one).
    pub fn check(&self) -> Result<(), crate::Errno> {
        if self.start > self.end {
            return Err(crate::Errno::EINVAL);
        }
        Ok(())
    }

    /// Whether the two ranges share a byte.
    pub fn overlaps(&self, other: &FileLock) -> bool {
        self.start <= other.end && other.start <= self.end
    }

    /// Whether `self`, another owner's lock, keeps `wanted` from being taken.
    pub fn conflicts_with(&self, wanted: &FileLock) -> bool {
        wanted.mode != FlockMode::Unlock
            && self.mode != FlockMode::Unlock
            && self.overlaps(wanted)
            && (self.mode == FlockMode::Write || wanted.mode == FlockMode::Write)
    }
}

/// One owner's locks after it sets `lock` (which may be an unlock) over `mine`, and
/// whether any of them went, shrank or turned from write to read (which may let another
/// owner's waiting lock in). `mine` must be disjoint and maximal, as this returns them.
pub fn apply(mine: &[FileLock], lock: &FileLock) -> (Vec<FileLock>, bool) {
    debug_assert!(lock.start <= lock.end);
    let mut next = Vec::with_capacity(mine.len() + 2);
    let mut weakened = false;
    for h in mine {
        if !h.overlaps(lock) {
            next.push(*h);
            continue;
        }
        // The part over the range is replaced.
        if lock.mode == FlockMode::Unlock
            || (h.mode == FlockMode::Write && lock.mode == FlockMode::Read)
        {
            weakened = true;
        }
        if h.start < lock.start {
            next.push(FileLock {
                end: lock.start - 1,
                ..*h
            });
        }
        if h.end > lock.end {
            next.push(FileLock {
                start: lock.end + 1,
                ..*h
            });
        }
    }
    if lock.mode != FlockMode::Unlock {
        let (mut start, mut end) = (lock.start, lock.end);
        // The owner's locks of one mode never touch, so only the one just left of the
        // range and the one just right of it can merge with it.
        next.retain(|h| {
            let touches =
                h.end.checked_add(1) == Some(start) || end.checked_add(1) == Some(h.start);
            if h.mode == lock.mode && touches {
                start = start.min(h.start);
                end = end.max(h.end);
                false
            } else {
                true
            }
        });
        next.push(FileLock {
            start,
            end,
            ..*lock
        });
    }
    next.sort_by_key(|l| l.start);
    (next, weakened)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lk(mode: FlockMode, start: u64, end: u64) -> FileLock {
        FileLock {
            mode,
            start,
            end,
            pid: 7,
        }
    }

    #[test]
    fn a_range_that_ends_before_it_starts_is_einval() {
        assert_eq!(lk(FlockMode::Read, 5, 4).check(), Err(crate::Errno::EINVAL));
        assert_eq!(lk(FlockMode::Write, 5, 5).check(), Ok(()));
        assert_eq!(lk(FlockMode::Unlock, 0, u64::MAX).check(), Ok(()));
    }

    fn ranges(v: &[FileLock]) -> Vec<(FlockMode, u64, u64)> {
        v.iter().map(|l| (l.mode, l.start, l.end)).collect()
    }

    #[test]
    fn an_unlock_in_the_middle_splits_and_filling_the_hole_merges() {
        let (v, w) = apply(&[], &lk(FlockMode::Write, 0, 99));
        assert!(!w);
        let (v, w) = apply(&v, &lk(FlockMode::Unlock, 40, 59));
        assert!(w);
        assert_eq!(
            ranges(&v),
            vec![(FlockMode::Write, 0, 39), (FlockMode::Write, 60, 99)]
        );
        let (v, w) = apply(&v, &lk(FlockMode::Write, 40, 59));
        assert!(!w);
        assert_eq!(ranges(&v), vec![(FlockMode::Write, 0, 99)]);
    }

    #[test]
    fn a_read_lock_inside_a_write_lock_weakens_it_and_splits_it_in_three() {
        let (v, _) = apply(&[], &lk(FlockMode::Write, 0, 99));
        let (v, w) = apply(&v, &lk(FlockMode::Read, 10, 19));
        assert!(w);
        assert_eq!(
            ranges(&v),
            vec![
                (FlockMode::Write, 0, 9),
                (FlockMode::Read, 10, 19),
                (FlockMode::Write, 20, 99)
            ]
        );
        // A write over all of it merges back to one.
        let (v, w) = apply(&v, &lk(FlockMode::Write, 0, 99));
        assert!(!w);
        assert_eq!(ranges(&v), vec![(FlockMode::Write, 0, 99)]);
    }

    #[test]
    fn the_last_byte_of_the_file_does_not_overflow() {
        let (v, _) = apply(&[], &lk(FlockMode::Read, 100, u64::MAX));
        let (v, _) = apply(&v, &lk(FlockMode::Read, 0, 99));
        assert_eq!(ranges(&v), vec![(FlockMode::Read, 0, u64::MAX)]);
        let (v, _) = apply(&v, &lk(FlockMode::Unlock, 0, u64::MAX));
        assert!(v.is_empty());
    }

    #[test]
    fn conflicts_need_a_shared_byte_and_a_writer() {
        let w = lk(FlockMode::Write, 10, 19);
        let r = lk(FlockMode::Read, 15, 30);
        assert!(w.conflicts_with(&r));
        assert!(r.conflicts_with(&w));
        assert!(!r.conflicts_with(&lk(FlockMode::Read, 0, 100)));
        assert!(!w.conflicts_with(&lk(FlockMode::Write, 20, 30)));
        assert!(!w.conflicts_with(&lk(FlockMode::Unlock, 0, 100)));
    }
}
