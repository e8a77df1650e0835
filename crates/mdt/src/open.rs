//! Open handles: which client holds which file open, and how.
//!
//! The MDT tracks opens (as Lustre's MDT does with its open handles) for two reasons: a file
//! unlinked while open must keep its inode and objects until the last close, and the size
//! the MDT stores is exact only while nobody holds the file open for writing.
//!
//! Size state per file, in memory (a restart forgets it, which is safe: the persisted
//! `lsom_valid` flag is cleared whenever a writer opens, so a restarted MDT glimpses):
//! - *dirty*: some writer wrote (or vanished) since the size was last known; once the last
//!   writer closes, the MDT settles the size from the objects (see `Mdt::settle`). Only a
//!   settle that committed its size, or a truncate, ends it: one that gave up (an OST away)
//!   leaves the file dirty but no longer *settling*, so the next stat queues it again;
//! - *clean*: the last writer wrote nothing, so the stored size is still exact even though
//!   `lsom_valid` was cleared on disk when it opened.

use nacre_core::Fid;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenHandle {
    pub fid: Fid,
    pub conn_id: u64,
    pub write: bool,
}

#[derive(Default, Debug, Clone)]
struct Counts {
    opens: u32,
    writers: u32,
    /// Connections holding the file open, with their opens: who caches its pages.
    conns: Vec<(u64, u32)>,
}

/// A file written since its size was last known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Dirty {
    /// The generation of the last size event (a truncate, a new write), so a settle
    /// started before one does not commit a stale size.
    generation: u64,
    /// A settle is on its way, or will be at the last writer's close. One that gave up
    /// clears it: the size is still unknown, and nothing settles it until a stat asks.
    settling: bool,
}

/// Bound on open handles per MDT; beyond it opens fail with ENFILE.
pub const MAX_OPEN_HANDLES: usize = 1 << 20;

#[derive(Default)]
pub struct OpenTable {
    next: AtomicU64,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    handles: HashMap<u64, OpenHandle>,
    counts: HashMap<Fid, Counts>,
    /// Written since the size was last known.
    dirty: HashMap<Fid, Dirty>,
    /// The last generation given out. One counter for all files: a file whose entry went
    /// and came back never reuses a number a settle still in flight holds.
    last_gen: u64,
    /// Size exact in memory although not flagged so on disk.
    clean: std::collections::HashSet<Fid>,
    /// Files being migrated: write opens since the migration began (it must see none).
    migrating: HashMap<Fid, u64>,
    /// Write handles of erasure-coded files whose parity was in sync before they opened,
    /// with the layout generation their open left (see [`OpenTable::ec_untouched_gen`]).
    ec_gens: HashMap<u64, u32>,
}

/// Files whose clean state is remembered; beyond this the set is dropped (costing glimpses).
pub const MAX_CLEAN: usize = 1 << 20;

impl OpenTable {
    pub fn new() -> OpenTable {
        OpenTable {
            // Start somewhere unpredictable so stale handles from a previous run do not match.
            next: AtomicU64::new(rand::random::<u32>() as u64 + 1),
            inner: Mutex::new(Inner::default()),
        }
    }

    pub fn open(&self, h: OpenHandle) -> Option<u64> {
        let mut g = self.inner.lock();
        if g.handles.len() >= MAX_OPEN_HANDLES {
            return None;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        Self::insert(&mut g, id, h);
        Some(id)
    }

    /// Opens `h` under the number `id` it had before a restart (open replay); `None` if
    /// that number is taken or the table is full. Numbers given out later are above it.
    pub fn open_as(&self, id: u64, h: OpenHandle) -> Option<u64> {
        let mut g = self.inner.lock();
        if g.handles.len() >= MAX_OPEN_HANDLES || g.handles.contains_key(&id) {
            return None;
        }
        self.next.fetch_max(id.checked_add(1)?, Ordering::Relaxed);
        Self::insert(&mut g, id, h);
        Some(id)
    }

    fn insert(g: &mut Inner, id: u64, h: OpenHandle) {
        g.handles.insert(id, h);
        let c = g.counts.entry(h.fid).or_default();
        c.opens += 1;
        match c.conns.iter_mut().find(|(id, _)| *id == h.conn_id) {
            Some((_, n)) => *n += 1,
            None => c.conns.push((h.conn_id, 1)),
        }
        if h.write {
            c.writers += 1;
            g.clean.remove(&h.fid);
            if let Some(n) = g.migrating.get_mut(&h.fid) {
                *n += 1;
            }
        }
    }

    /// Write handle `id` of an erasure-coded file opened with its parity in sync; its
    /// open left the layout at generation `layout_gen`. A close that wrote nothing may put parity
    /// back in sync while the generation is still `layout_gen`.
    pub fn set_ec_gen(&self, id: u64, layout_gen: u32) {
        let mut g = self.inner.lock();
        if g.handles.contains_key(&id) {
            g.ec_gens.insert(id, layout_gen);
        }
    }

    /// The generation [`OpenTable::set_ec_gen`] recorded for handle `id`, taken.
    pub fn ec_untouched_gen(&self, id: u64) -> Option<u32> {
        self.inner.lock().ec_gens.remove(&id)
    }

    /// Removes a handle; returns it and whether it was the last open of its file.
    pub fn close(&self, id: u64) -> Option<(OpenHandle, bool, u32)> {
        let mut g = self.inner.lock();
        let h = g.handles.remove(&id)?;
        // Never more generations kept than handles open.
        g.ec_gens.remove(&id);
        let (last, writers) = match g.counts.get_mut(&h.fid) {
            Some(c) => {
                c.opens -= 1;
                if h.write {
                    c.writers -= 1;
                }
                if let Some(i) = c.conns.iter().position(|(id, _)| *id == h.conn_id) {
                    c.conns[i].1 -= 1;
                    if c.conns[i].1 == 0 {
                        c.conns.swap_remove(i);
                    }
                }
                (c.opens == 0, c.writers)
            }
            None => (true, 0),
        };
        if last {
            g.counts.remove(&h.fid);
        }
        Some((h, last, writers))
    }

    /// A migration of `fid` begins: count write opens from now on.
    pub fn begin_migration(&self, fid: Fid) {
        self.inner.lock().migrating.insert(fid, 0);
    }

    /// A migration ends; whether no writer opened the file meanwhile (and none is open).
    pub fn end_migration(&self, fid: &Fid) -> bool {
        let mut g = self.inner.lock();
        let writes = g.migrating.remove(fid);
        let busy = g.counts.get(fid).is_some_and(|c| c.writers > 0);
        writes == Some(0) && !busy
    }

    /// Records that `fid`'s data changed (a write, a vanished writer, a truncate).
    pub fn mark_dirty(&self, fid: Fid) {
        let mut g = self.inner.lock();
        g.clean.remove(&fid);
        Self::dirty_anew(&mut g, fid);
    }

    /// Marks `fid` dirty under a new generation, a settle on its way; returns it.
    fn dirty_anew(g: &mut Inner, fid: Fid) -> u64 {
        g.last_gen += 1;
        let generation = g.last_gen;
        g.dirty.insert(
            fid,
            Dirty {
                generation,
                settling: true,
            },
        );
        generation
    }

    /// The generation a settle of `fid` starts at, if it is dirty; a settle is then on its
    /// way.
    pub fn begin_settle(&self, fid: &Fid) -> Option<u64> {
        let mut g = self.inner.lock();
        let d = g.dirty.get_mut(fid)?;
        d.settling = true;
        Some(d.generation)
    }

    fn dirty_gen(g: &Inner, fid: &Fid) -> Option<u64> {
        g.dirty.get(fid).map(|d| d.generation)
    }

    /// Whether a settle that started at `generation` may still record its size: nothing
    /// happened since and no writer is open.
    pub fn may_settle(&self, fid: &Fid, generation: u64) -> bool {
        let g = self.inner.lock();
        let busy = g.counts.get(fid).is_some_and(|c| c.writers > 0);
        !busy && Self::dirty_gen(&g, fid) == Some(generation)
    }

    /// Clears dirtiness once a settle committed its size (if still current), or found
    /// nothing left to settle (the file gone).
    ///
    /// Only then: a file no longer dirty is one whose stored size is exact, which a last
    /// writer's close that wrote nothing keeps ([`OpenTable::mark_clean`]).
    pub fn settled(&self, fid: &Fid, generation: u64) {
        let mut g = self.inner.lock();
        let busy = g.counts.get(fid).is_some_and(|c| c.writers > 0);
        if !busy && Self::dirty_gen(&g, fid) == Some(generation) {
            g.dirty.remove(fid);
        }
    }

    /// A settle at `generation` gave up (an OST away, an error): the file stays dirty, with
    /// no settle on its way, so the next stat queues one ([`OpenTable::needs_resettle`]).
    pub fn settle_gave_up(&self, fid: &Fid, generation: u64) {
        let mut g = self.inner.lock();
        if let Some(d) = g.dirty.get_mut(fid)
            && d.generation == generation
        {
            d.settling = false;
        }
    }

    pub fn mark_clean(&self, fid: Fid) {
        let mut g = self.inner.lock();
        if g.clean.len() >= MAX_CLEAN {
            g.clean.clear();
        }
        g.clean.insert(fid);
    }

    pub fn is_clean(&self, fid: &Fid) -> bool {
        self.inner.lock().clean.contains(fid)
    }

    /// A truncate set an exact size: nothing is dirty any more.
    pub fn size_set(&self, fid: &Fid) {
        let mut g = self.inner.lock();
        g.last_gen += 1;
        let generation = g.last_gen;
        if let Some(d) = g.dirty.get_mut(fid) {
            // Invalidate any settle in flight; the size stays unknown while writers remain.
            d.generation = generation;
        }
        let busy = g.counts.get(fid).is_some_and(|c| c.writers > 0);
        if !busy {
            g.dirty.remove(fid);
        }
        g.clean.remove(fid);
    }

    /// Whether `fid`'s size is neither exact (`lsom_valid`, or clean in memory) nor on its
    /// way to be (a writer open, or a settle on its way).
    pub fn needs_resettle(&self, fid: &Fid, lsom_valid: bool) -> bool {
        Self::unsettled(&self.inner.lock(), fid, lsom_valid)
    }

    fn unsettled(g: &Inner, fid: &Fid, lsom_valid: bool) -> bool {
        let writers = g.counts.get(fid).map_or(0, |c| c.writers);
        !lsom_valid
            && writers == 0
            && g.dirty.get(fid).is_none_or(|d| !d.settling)
            && !g.clean.contains(fid)
    }

    /// Marks `fid` dirty for a settle of its own when it [needs one](Self::needs_resettle);
    /// returns the settle's generation.
    pub fn begin_resettle(&self, fid: Fid, lsom_valid: bool) -> Option<u64> {
        let mut g = self.inner.lock();
        if !Self::unsettled(&g, &fid, lsom_valid) {
            return None;
        }
        Some(Self::dirty_anew(&mut g, fid))
    }

    /// Whether the stored size may be trusted: no writer open, nothing unsettled.
    pub fn size_trusted(&self, fid: &Fid, lsom_valid: bool) -> bool {
        let g = self.inner.lock();
        let writers = g.counts.get(fid).map_or(0, |c| c.writers);
        writers == 0 && !g.dirty.contains_key(fid) && (lsom_valid || g.clean.contains(fid))
    }

    /// Whether handle `id` is open for writing on `fid` by connection `conn_id`.
    pub fn is_writer(&self, id: u64, fid: &Fid, conn_id: u64) -> bool {
        self.handle(id)
            .is_some_and(|h| h.write && h.fid == *fid && h.conn_id == conn_id)
    }

    /// Handle `id`, if open.
    fn handle(&self, id: u64) -> Option<OpenHandle> {
        self.inner.lock().handles.get(&id).copied()
    }

    pub fn is_open(&self, fid: &Fid) -> bool {
        self.inner.lock().counts.contains_key(fid)
    }

    /// Connections other than `except` that hold `fid` open.
    pub fn holders(&self, fid: &Fid, except: u64) -> Vec<u64> {
        self.inner
            .lock()
            .counts
            .get(fid)
            .map_or_else(Vec::new, |c| {
                c.conns
                    .iter()
                    .filter(|(id, _)| *id != except)
                    .map(|(id, _)| *id)
                    .collect()
            })
    }

    pub fn writers(&self, fid: &Fid) -> u32 {
        self.inner.lock().counts.get(fid).map_or(0, |c| c.writers)
    }

    /// Whether handle `id` is open on `fid` by connection `conn_id`.
    pub fn held_as(&self, id: u64, fid: &Fid, conn_id: u64) -> bool {
        self.handle(id)
            .is_some_and(|h| h.fid == *fid && h.conn_id == conn_id)
    }

    /// Whether handle `id` is open and was opened over another connection than `conn_id`
    /// (a client may close only its own).
    pub fn held_by_other(&self, id: u64, conn_id: u64) -> bool {
        self.handle(id).is_some_and(|h| h.conn_id != conn_id)
    }

    /// Moves the handles of connection `old` to `new` (their client reconnected); returns
    /// how many moved.
    pub fn rebind(&self, old: u64, new: u64) -> usize {
        if old == new {
            return 0;
        }
        let mut g = self.inner.lock();
        let Inner {
            handles, counts, ..
        } = &mut *g;
        let mut moved = 0;
        for h in handles.values_mut().filter(|h| h.conn_id == old) {
            h.conn_id = new;
            moved += 1;
            let Some(c) = counts.get_mut(&h.fid) else {
                continue;
            };
            let Some(i) = c.conns.iter().position(|(id, _)| *id == old) else {
                continue;
            };
            let (_, n) = c.conns.swap_remove(i);
            match c.conns.iter_mut().find(|(id, _)| *id == new) {
                Some((_, m)) => *m += n,
                None => c.conns.push((new, n)),
            }
        }
        moved
    }

    /// Files open now.
    pub fn open_fids(&self) -> std::collections::HashSet<Fid> {
        self.inner.lock().counts.keys().copied().collect()
    }

    /// Handles of a connection that went away.
    pub fn handles_of(&self, conn_id: u64) -> Vec<u64> {
        self.inner
            .lock()
            .handles
            .iter()
            .filter(|(_, h)| h.conn_id == conn_id)
            .map(|(id, _)| *id)
            .collect()
    }

    pub fn len(&self) -> usize {
        self.inner.lock().handles.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A handle made again under its old number (open replay) takes that number, which
    /// later opens never reuse.
    #[test]
    fn a_reopened_handle_keeps_its_number_and_new_ones_come_after_it() {
        let t = OpenTable::new();
        let f = Fid::new(0x200000401, 1, 0);
        let h = |conn_id| OpenHandle {
            fid: f,
            conn_id,
            write: true,
        };
        let old = u64::from(u32::MAX) + 10;
        assert_eq!(t.open_as(old, h(1)), Some(old));
        assert_eq!(t.open_as(old, h(2)), None, "taken");
        let new = t.open(h(2)).expect("open");
        assert!(new > old);
        assert!(t.is_writer(old, &f, 1));
        assert_eq!(t.writers(&f), 2);
        assert_eq!(t.open_as(u64::MAX, h(1)), None, "no number after it");
    }

    /// A reconnected client's handles move to its new connection: it is the holder the
    /// callbacks go to, its writes count, and it (not the old connection) closes them.
    #[test]
    fn handles_moved_to_a_new_connection_keep_their_file_open_for_it() {
        let t = OpenTable::new();
        let (f, g) = (Fid::new(0x200000401, 1, 0), Fid::new(0x200000401, 2, 0));
        let open = |fid, conn_id, write| {
            t.open(OpenHandle {
                fid,
                conn_id,
                write,
            })
            .expect("open")
        };
        let (a, b, c) = (open(f, 1, true), open(f, 1, false), open(g, 1, false));
        let other = open(f, 2, false);
        assert_eq!(t.rebind(1, 3), 3);
        assert_eq!(t.rebind(1, 4), 0, "nothing left on the old connection");
        let mut holders = t.holders(&f, 0);
        holders.sort_unstable();
        assert_eq!(holders, vec![2, 3]);
        assert_eq!(t.holders(&g, 0), vec![3]);
        assert!(t.is_writer(a, &f, 3));
        assert!(!t.is_writer(a, &f, 1));
        assert!(t.held_by_other(a, 1) && !t.held_by_other(a, 3));
        assert_eq!(t.writers(&f), 1);
        for h in [a, b, c] {
            t.close(h).expect("close");
        }
        assert_eq!(t.holders(&f, 0), vec![2]);
        assert!(!t.is_open(&g));
        t.close(other).expect("close");
        assert!(t.is_empty() && !t.is_open(&f));
    }

    #[test]
    fn an_ec_generation_is_kept_for_an_open_handle_and_taken_once() {
        let t = OpenTable::new();
        let f = Fid::new(0x200000401, 9, 0);
        let h = t
            .open(OpenHandle {
                fid: f,
                conn_id: 1,
                write: true,
            })
            .expect("open");
        t.set_ec_gen(h + 1, 7);
        assert_eq!(
            t.ec_untouched_gen(h + 1),
            None,
            "kept for a handle not open"
        );
        t.set_ec_gen(h, 7);
        assert_eq!(t.ec_untouched_gen(h), Some(7));
        assert_eq!(t.ec_untouched_gen(h), None);
        // A handle closed without taking it leaves nothing behind.
        t.set_ec_gen(h, 8);
        t.close(h).expect("close");
        assert!(t.inner.lock().ec_gens.is_empty());
    }

    #[test]
    fn counts_opens_and_writers() {
        let t = OpenTable::new();
        let f = Fid::new(0x200000401, 9, 0);
        let a = t
            .open(OpenHandle {
                fid: f,
                conn_id: 1,
                write: true,
            })
            .expect("open");
        let b = t
            .open(OpenHandle {
                fid: f,
                conn_id: 2,
                write: false,
            })
            .expect("open");
        assert!(t.is_open(&f));
        assert_eq!(t.writers(&f), 1);
        assert_eq!(t.handles_of(1), vec![a]);
        assert_eq!(t.holders(&f, 1), vec![2]);
        assert_eq!(t.holders(&f, 3).len(), 2);
        let (_, last, writers) = t.close(a).expect("close");
        assert!(!last);
        assert_eq!(writers, 0);
        assert!(t.holders(&f, 2).is_empty());
        let (_, last, _) = t.close(b).expect("close");
        assert!(last);
        assert!(!t.is_open(&f));
        assert!(t.close(b).is_none());
    }

    /// A settle that gave up leaves the size unknown: not trusted, queued by the next
    /// stat, and still settled at the next writer's last close, even one that wrote
    /// nothing (which keeps only a size that was exact).
    #[test]
    fn a_settle_that_gave_up_leaves_the_file_dirty_and_unsettled() {
        let t = OpenTable::new();
        let f = Fid::new(0x200000401, 11, 0);
        t.mark_dirty(f);
        let g = t.begin_settle(&f).expect("dirty");
        assert!(!t.needs_resettle(&f, false), "a settle is on its way");
        t.settle_gave_up(&f, g);
        assert!(!t.size_trusted(&f, false));
        assert!(t.needs_resettle(&f, false), "a stat must queue it again");
        let w = t
            .open(OpenHandle {
                fid: f,
                conn_id: 1,
                write: true,
            })
            .expect("open");
        assert!(!t.needs_resettle(&f, false), "a writer is open");
        t.close(w).expect("close");
        assert_eq!(t.begin_settle(&f), Some(g), "the close settles it");
        assert!(!t.needs_resettle(&f, false));
        t.settled(&f, g);
        assert!(t.begin_settle(&f).is_none());
    }

    /// A settle that started before a truncate, and a write after it, must not record its
    /// size: the generation it holds is never given out again, even though the truncate
    /// (with no writer open) dropped the file's entry in between.
    #[test]
    fn a_settle_from_before_a_truncate_and_a_new_write_is_stale() {
        let t = OpenTable::new();
        let f = Fid::new(0x200000401, 10, 0);
        t.mark_dirty(f);
        let stale = t.begin_settle(&f).expect("dirty");
        assert!(t.may_settle(&f, stale));
        t.size_set(&f);
        assert!(
            t.begin_settle(&f).is_none(),
            "a truncate with no writer open settles"
        );
        t.mark_dirty(f);
        let current = t.begin_settle(&f).expect("dirty");
        assert_ne!(current, stale);
        assert!(
            !t.may_settle(&f, stale),
            "the old settle would record its size"
        );
        assert!(t.may_settle(&f, current));
    }
}
