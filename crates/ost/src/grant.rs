//! Grants (Lustre's `tgt_grant.c`): space this OST promises to each client connection
//! (export) before the client caches a write, so a write the client acknowledged from its
//! cache always fits here.
//!
//! The OST never promises more than it has: `tot_granted + tot_pending + reserve <= free`
//! whenever a grant is given. A write the client cached against its grant is taken from that
//! export's grant (its bytes were counted as promised, and are now on the way to the disk);
//! any other write must fit in the space nobody was promised, or it gets ENOSPC before
//! anything is written. Each grant given is at most a share of what is left
//! ([`GRANT_SHARE`]), so grants shrink as the disk fills and a few clients cannot hold all
//! of it. An export's grant goes back when its connection ends (disconnect or eviction).

use nacre_core::Errno;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// Space kept out of grants: the per-block overhead of small writes (a 100-byte write
/// takes a whole block), the checksum tables and directory blocks of new objects. A
/// 64th of the disk, within these bounds.
pub const RESERVE_MIN: u64 = 4 << 20;
pub const RESERVE_MAX: u64 = 1 << 30;
/// One grant is at most this fraction (1/N) of the space nobody was promised: with a full
/// disk close, each grant is small, and what one idle client holds stays small.
pub const GRANT_SHARE: u64 = 4;
/// The most one reply adds (Lustre's grant chunk, two 4 MiB RPCs): a streaming client gets
/// more than each write takes, so its grant grows to what it asks for, while a client
/// that stops has little left over.
pub const GRANT_CHUNK: u64 = 8 << 20;
/// The most one export may hold: a client's whole dirty cache and a few RPCs, more is
/// never used (clients ask for what their `max_dirty_mb` can hold).
pub const GRANT_MAX: u64 = 2 << 30;

/// Free and total bytes of the disk, as the store reports them.
#[derive(Clone, Copy, Debug)]
pub struct Space {
    pub avail: u64,
    pub total: u64,
}

impl Space {
    fn reserve(&self) -> u64 {
        (self.total / 64).clamp(RESERVE_MIN, RESERVE_MAX)
    }
}

#[derive(Default)]
struct Books {
    /// Grant held by each export, by connection id.
    exports: HashMap<u64, u64>,
    /// Sum of `exports`.
    tot_granted: u64,
    /// Bytes of writes admitted and not yet finished (not yet seen in the free space).
    tot_pending: u64,
}

impl Books {
    /// Space nobody was promised and no write in progress will take.
    fn left(&self, space: Space) -> u64 {
        space
            .avail
            .saturating_sub(self.tot_granted + self.tot_pending + space.reserve())
    }

    fn check(&self) {
        debug_assert_eq!(
            self.exports.values().sum::<u64>(),
            self.tot_granted,
            "tot_granted is the sum of the exports' grants"
        );
    }
}

/// The grant accounting of one OST, or of every OST of this process on one disk.
#[derive(Default)]
pub struct Grants {
    books: Arc<Mutex<Books>>,
}

/// Books of the OSTs this process serves, by the device their objects are on: OSTs
/// sharing a disk (`nacre up` keeps all its targets in one directory) must not each
/// promise the same free space.
static BY_DEVICE: Mutex<Option<HashMap<u64, std::sync::Weak<Mutex<Books>>>>> = Mutex::new(None);

impl Grants {
    /// The accounting for an OST whose objects are on device `dev`, shared with the other
    /// OSTs of this process on it.
    pub fn on_device(dev: u64) -> Grants {
        let mut g = BY_DEVICE.lock();
        let m = g.get_or_insert_with(HashMap::new);
        m.retain(|_, w| w.strong_count() > 0);
        if let Some(books) = m.get(&dev).and_then(std::sync::Weak::upgrade) {
            return Grants { books };
        }
        let books = Arc::new(Mutex::new(Books::default()));
        m.insert(dev, Arc::downgrade(&books));
        Grants { books }
    }
}

/// A write admitted: its bytes count in `tot_pending` until it is dropped, whatever the
/// write's outcome.
pub struct PendingWrite {
    books: Arc<Mutex<Books>>,
    bytes: u64,
    /// Connection and grant taken from it, for [`PendingWrite::refund`].
    conn: u64,
    taken: u64,
}

impl PendingWrite {
    /// The write was refused before anything was written (a bulk damaged on the way): the
    /// grant it took goes back to its connection, if still there, for the write sent again.
    pub fn refund(self) {
        let mut b = self.books.lock();
        if let Some(g) = b.exports.get_mut(&self.conn) {
            *g += self.taken;
            b.tot_granted += self.taken;
        }
        b.check();
    }
}

impl Drop for PendingWrite {
    fn drop(&mut self) {
        let mut b = self.books.lock();
        debug_assert!(
            b.tot_pending >= self.bytes,
            "pending bytes counted out twice"
        );
        b.tot_pending = b.tot_pending.saturating_sub(self.bytes);
    }
}

impl Grants {
    /// Admits a write of `bytes` from connection `conn`: taken from its grant when the
    /// client cached it against grant (`from_grant`), the rest from space nobody was
    /// promised. ENOSPC, and nothing taken, when it does not fit.
    pub fn admit(
        &self,
        conn: u64,
        bytes: u64,
        from_grant: bool,
        space: Space,
    ) -> Result<PendingWrite, Errno> {
        let mut b = self.books.lock();
        let held = b.exports.get(&conn).copied().unwrap_or(0);
        let taken = if from_grant { held.min(bytes) } else { 0 };
        let short = bytes - taken;
        if short > 0 && short > b.left(space) {
            return Err(Errno::ENOSPC);
        }
        if taken > 0 {
            b.tot_granted -= taken;
            // Kept at 0 until the connection ends, so a refund knows it is still there.
            b.exports.insert(conn, held - taken);
        }
        b.tot_pending += bytes;
        b.check();
        Ok(PendingWrite {
            books: self.books.clone(),
            bytes,
            conn,
            taken,
        })
    }

    /// Gives connection `conn` more grant, up to `want` in all, within a share of the space
    /// nobody was promised; returns what was added.
    pub fn give(&self, conn: u64, want: u64, space: Space) -> u64 {
        let mut b = self.books.lock();
        let held = b.exports.get(&conn).copied().unwrap_or(0);
        let more = want
            .min(GRANT_MAX)
            .saturating_sub(held)
            .min(GRANT_CHUNK)
            .min(b.left(space) / GRANT_SHARE);
        // Whole pages: a client caches page by page.
        let more = more & !4095;
        if more > 0 {
            *b.exports.entry(conn).or_default() += more;
            b.tot_granted += more;
        }
        b.check();
        more
    }

    /// The connection is gone (disconnect, eviction): its grant is free again.
    pub fn release(&self, conn: u64) {
        let mut b = self.books.lock();
        if let Some(g) = b.exports.remove(&conn) {
            b.tot_granted -= g;
        }
        b.check();
    }

    /// Space nobody was promised: free space less grants, writes in progress and the
    /// reserve. What statfs reports as available, so the MDT places no new objects on an
    /// OST whose space is all promised.
    pub fn unpromised(&self, space: Space) -> u64 {
        self.books.lock().left(space)
    }

    /// `obdfilter.*.tot_granted`.
    pub fn tot_granted(&self) -> u64 {
        self.books.lock().tot_granted
    }

    /// `obdfilter.*.tot_pending`.
    pub fn tot_pending(&self) -> u64 {
        self.books.lock().tot_pending
    }

    /// Grant held by connection `conn`.
    pub fn granted_to(&self, conn: u64) -> u64 {
        self.books.lock().exports.get(&conn).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    const MIB: u64 = 1 << 20;

    #[test]
    fn grants_never_exceed_free_space_and_go_back_on_disconnect() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(12);
        let g = Grants::default();
        let total = 200 * MIB;
        let mut avail = 150 * MIB;
        let mut pending = Vec::new();
        for _ in 0..5000 {
            let conn = rng.gen_range(0..4u64);
            let space = Space { avail, total };
            match rng.gen_range(0..4) {
                0 => {
                    g.give(conn, rng.gen_range(0..64 * MIB), space);
                }
                1 | 2 => {
                    let n = rng.gen_range(1..8 * MIB);
                    let from = rng.gen_bool(0.7);
                    let held = g.granted_to(conn);
                    match g.admit(conn, n, from, space) {
                        Ok(w) => {
                            // The write reaches the disk.
                            avail = avail.saturating_sub(n);
                            pending.push(w);
                        }
                        Err(e) => {
                            assert_eq!(e, Errno::ENOSPC);
                            assert!(!from || held < n, "a write within its grant refused");
                        }
                    }
                }
                _ => {
                    // Some writes finish.
                    let keep = rng.gen_range(0..=pending.len());
                    pending.truncate(keep);
                }
            }
            // What is promised always fits in what is free, the reserve aside (here a
            // write reaches the disk as it is admitted).
            let reserve = Space { avail, total }.reserve();
            assert!(
                g.tot_granted() + reserve <= avail,
                "granted {} reserve {reserve} free {avail}",
                g.tot_granted()
            );
        }
        pending.clear();
        assert_eq!(g.tot_pending(), 0, "finished writes count out");
        for conn in 0..4 {
            g.release(conn);
        }
        assert_eq!(g.tot_granted(), 0, "disconnects give every grant back");
    }

    #[test]
    fn a_write_within_grant_is_taken_even_when_the_disk_is_otherwise_full() {
        let g = Grants::default();
        let total = 100 * MIB;
        let space = Space {
            avail: 40 * MIB,
            total,
        };
        let got = g.give(1, 64 * MIB, space);
        assert!(got > 0 && got <= (40 * MIB - RESERVE_MIN) / GRANT_SHARE);
        // Another client takes everything left.
        let mut rest = Vec::new();
        while let Ok(w) = g.admit(2, MIB, false, space) {
            rest.push(w);
        }
        assert_eq!(
            g.admit(2, MIB, true, space).err(),
            Some(Errno::ENOSPC),
            "no grant, no room"
        );
        let w = g
            .admit(1, got, true, space)
            .expect("the granted write fits");
        assert_eq!(g.granted_to(1), 0);
        drop(w);
    }
}
