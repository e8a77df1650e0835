//! LFSCK on an OST (the slave side of Lustre's layout LFSCK): answers the MDTs' probes of
//! the objects their layouts reference, lists the objects that have been written so the MDTs
//! can find orphans among them, and makes the repairs the MDTs ask for (a filter fid, a
//! lost object recreated, LAST_ID put back).
//!
//! Each MDT drives its own layout check and pages through the OSTs' objects at its own
//! pace, so a slow MDT never holds an OST's other MDTs back. What the OST keeps between
//! requests is soft state, per MDT and run, that only saves work: the objects the run's
//! phase 1 found referenced (Lustre's accessed bitmap, `lfsck_rbtree`), which its
//! phase-2 listing passes over without reading them, and the subdirectory the listing is
//! in. A restarted OST has neither, and its listing then reads every object, as it
//! would for any object phase 1 did not vouch for.

use nacre_core::{Errno, Fid, OstLayout};
use nacre_osd::objstore::Absent;
use nacre_osd::objstore::OBJ_SUBDIRS;
use nacre_osd::{ObjProbe, ObjStore};
use nacre_rpc::lfsck::{
    BoxFuture, LfsckReply, LfsckRequest, LfsckService, ObjCursor, ObjPresence, ObjState, OrphanObj,
    OstRepair, Outcome, Probe,
};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// Words of accessed bitmap (64 objects each, some 24 bytes with the map's overhead) an
/// OST keeps over all MDTs' runs: 64M objects in about 24 MiB. Past it, objects go
/// unmarked, and the listing reads them as it reads any other.
pub const ACCESSED_WORDS_MAX: usize = 1 << 20;
/// MDTs an OST keeps a run's accessed objects and listing position for; one more drops
/// them all (they only save work).
pub const ACCESSED_MDTS_MAX: usize = 256;
/// Object names one listing page passes at most, listed or not: bounds a request when
/// phase 1 vouched for nearly every object and few are left to list.
pub const LIST_PASS_MAX: usize = 1 << 18;

/// The checker's side of one OST.
pub struct OstLfsck {
    pub index: u32,
    store: Arc<ObjStore>,
    accessed: Mutex<Accessed>,
    /// Per MDT: the subdirectory its run's listing is in, read once for all the pages
    /// that fall in it.
    listing: Mutex<HashMap<u32, SubdirNames>>,
}

/// The names of one object subdirectory, as a run's listing read them.
struct SubdirNames {
    run: u64,
    seq: u64,
    subdir: u32,
    oids: Arc<Vec<u32>>,
}

type BitWords = HashMap<(u64, u32), u64>;

/// Objects each MDT's current layout run found referenced by one of its stripes in
/// phase 1 (filter fid naming that stripe, or never written), by sequence and word of
/// 64 object ids.
#[derive(Default)]
struct Accessed {
    /// By MDT: its run, and its words by (sequence, object id / 64).
    runs: HashMap<u32, (u64, BitWords)>,
    words: usize,
}

impl Accessed {
    /// Marks `objs` as accessed by run `run` of MDT `mdt`; a new run drops the last one's.
    fn mark(&mut self, mdt: u32, run: u64, objs: impl Iterator<Item = Fid>) {
        if !self.runs.contains_key(&mdt) && self.runs.len() >= ACCESSED_MDTS_MAX {
            self.runs.clear();
            self.words = 0;
        }
        let (r, words) = self.runs.entry(mdt).or_default();
        if *r != run {
            self.words -= words.len();
            words.clear();
            *r = run;
        }
        for f in objs {
            let key = (f.seq, f.oid / 64);
            let bit = 1u64 << (f.oid % 64);
            if let Some(w) = words.get_mut(&key) {
                *w |= bit;
            } else if self.words < ACCESSED_WORDS_MAX {
                words.insert(key, bit);
                self.words += 1;
            }
        }
        debug_assert!(self.words <= ACCESSED_WORDS_MAX);
    }

    fn is_marked(&self, mdt: u32, run: u64, seq: u64, oid: u32) -> bool {
        self.runs.get(&mdt).is_some_and(|(r, words)| {
            *r == run
                && words
                    .get(&(seq, oid / 64))
                    .is_some_and(|w| w & (1 << (oid % 64)) != 0)
        })
    }

    fn forget(&mut self, mdt: u32, run: u64) {
        if self.runs.get(&mdt).is_some_and(|(r, _)| *r == run)
            && let Some((_, words)) = self.runs.remove(&mdt)
        {
            self.words -= words.len();
        }
    }
}

/// Whether phase 1 may vouch for an object it probed: it has a file, and its filter fid
/// names the stripe that probed it, or it has none and was never written (which the
/// listing would leave out anyway). Anything else is for the listing to read again.
fn vouched(p: &Probe, st: &ObjState) -> bool {
    st.presence == ObjPresence::File
        && match st.ff {
            Some(ff) => ff == p.parent,
            None => st.size == 0,
        }
}

impl OstLfsck {
    pub fn new(index: u32, store: Arc<ObjStore>) -> Arc<OstLfsck> {
        Arc::new(OstLfsck {
            index,
            store,
            accessed: Mutex::new(Accessed::default()),
            listing: Mutex::new(HashMap::new()),
        })
    }

    async fn handle_req(self: Arc<Self>, req: LfsckRequest) -> Result<LfsckReply, Errno> {
        let store = self.store.clone();
        match req {
            LfsckRequest::Probe { mdt, run, objs } => {
                let me = self.clone();
                blocking(store, move |_| {
                    Ok(LfsckReply::Probed(me.probe(mdt, run, &objs)?))
                })
                .await
            }
            LfsckRequest::OstRepair(ops) => {
                blocking(store, move |s| {
                    Ok(LfsckReply::Outcomes(
                        ops.iter().map(|op| repair(s, op)).collect(),
                    ))
                })
                .await
            }
            LfsckRequest::Objects {
                mdt,
                run,
                from,
                max,
            } => {
                let me = self.clone();
                blocking(store, move |_| me.list(mdt, run, from, max as usize)).await
            }
            LfsckRequest::Query => Ok(LfsckReply::State(Vec::new())),
            _ => Err(Errno::ENOTSUP),
        }
    }
}

/// Runs `f` on the store on a blocking thread (object files are read and written there).
async fn blocking(
    store: Arc<ObjStore>,
    f: impl FnOnce(&ObjStore) -> Result<LfsckReply, Errno> + Send + 'static,
) -> Result<LfsckReply, Errno> {
    tokio::task::spawn_blocking(move || f(&store))
        .await
        .map_err(|_| Errno::EIO)?
}

/// What the OST knows of each of `objs`: whether it has a file, its size, filter fid
/// and owner. A FID that cannot name an object of this OST was never created.
pub fn probe_batch(s: &ObjStore, objs: &[Fid]) -> Result<Vec<ObjState>, Errno> {
    let not_created = ObjState {
        presence: ObjPresence::NotCreated,
        ff: None,
        owner: None,
        size: 0,
    };
    let valid: Vec<Fid> = objs
        .iter()
        .copied()
        .filter(ObjStore::valid_object)
        .collect();
    let mut probed = s.probe_batch(&valid)?.into_iter();
    let mut out = Vec::with_capacity(objs.len());
    for obj in objs {
        if !ObjStore::valid_object(obj) {
            out.push(not_created);
            continue;
        }
        let p = probed.next().ok_or(Errno::EIO)?;
        let presence = match p.size {
            Some(_) => ObjPresence::File,
            None => match s.absent(obj)? {
                Absent::NotCreated => ObjPresence::NotCreated,
                Absent::Empty => ObjPresence::Empty,
                Absent::Lost => ObjPresence::Lost,
            },
        };
        out.push(ObjState {
            presence,
            ff: p.ff,
            owner: p.owner,
            size: p.size.unwrap_or(0),
        });
    }
    Ok(out)
}

/// Makes one repair, checking first that it is still needed. A new filter fid is synced
/// before it is reported: the MDT's layout swap points the objects it moved at their file
/// this way, and a power cut of the OST must not give them back to the volatile file.
pub fn repair(s: &ObjStore, op: &OstRepair) -> Outcome {
    let set_filter = |obj: &Fid, parent: &Fid, layout: Option<&OstLayout>| {
        s.set_placed_filter_fid(obj, parent, layout)
            .and_then(|()| s.sync(obj))
    };
    let r = match *op {
        OstRepair::SetFilterFid {
            obj,
            old,
            parent,
            layout,
        } => match s.probe(&obj) {
            Ok((Some(_), ff)) if ff == Some(parent) && layout.is_none() => {
                return Outcome::Unneeded;
            }
            Ok((Some(_), ff)) if ff == Some(parent) => match s.filter_layout(&obj) {
                Ok(l) if l == layout => return Outcome::Unneeded,
                Ok(_) => set_filter(&obj, &parent, layout.as_ref()),
                Err(e) => Err(e),
            },
            Ok((Some(_), ff)) if ff != old => return Outcome::Unneeded,
            Ok((Some(_), _)) => set_filter(&obj, &parent, layout.as_ref()),
            Ok((None, _)) => Err(Errno::ENOENT),
            Err(e) => Err(e),
        },
        OstRepair::Create {
            obj,
            parent,
            uid,
            gid,
        } => match s.probe(&obj) {
            Ok((Some(_), _)) => return Outcome::Unneeded,
            // Recreated with its file's owner, as Lustre's LFSCK makes it.
            Ok((None, _)) => s
                .recreate(&obj, &parent)
                .and_then(|()| s.set_owner(&obj, uid, gid).map(|_| ())),
            Err(e) => Err(e),
        },
        OstRepair::SetLastId { seq, last } => match s.last_id(seq) {
            Ok(cur) if cur >= last => return Outcome::Unneeded,
            Ok(_) => s.set_last_id(seq, last),
            Err(e) => Err(e),
        },
        OstRepair::SetOwner { obj, uid, gid } => match s.owner(&obj) {
            Ok(Some(o)) if o == (uid, gid) => return Outcome::Unneeded,
            Ok(_) => match s.set_owner(&obj, uid, gid) {
                Ok(true) => Ok(()),
                // Its file is gone since the probe: nothing left to own.
                Ok(false) => return Outcome::Unneeded,
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        },
    };
    match r {
        Ok(()) => Outcome::Repaired,
        Err(e) => Outcome::Failed(e),
    }
}

impl OstLfsck {
    /// What the OST knows of each of `objs`, probed by run `run` of MDT `mdt`; those it
    /// may vouch for are marked accessed by the run (`run` 0 marks nothing).
    fn probe(&self, mdt: u32, run: u64, objs: &[Probe]) -> Result<Vec<ObjState>, Errno> {
        let fids: Vec<Fid> = objs.iter().map(|p| p.obj).collect();
        let states = probe_batch(&self.store, &fids)?;
        if run != 0 {
            let ok = objs.iter().zip(&states).filter(|(p, st)| vouched(p, st));
            self.accessed.lock().mark(mdt, run, ok.map(|(p, _)| p.obj));
        }
        Ok(states)
    }

    /// A page of objects that have files, from `from` on, for run `run` of MDT `mdt`:
    /// up to `max` objects, passing over those its phase 1 vouched for, and at most
    /// [`LIST_PASS_MAX`] names in all. The listing's end drops the run's marks.
    fn list(&self, mdt: u32, run: u64, from: ObjCursor, max: usize) -> Result<LfsckReply, Errno> {
        let s = &*self.store;
        let seqs = s.sequences()?;
        let mut objs = Vec::new();
        let mut last_ids = Vec::new();
        let mut highest = Vec::new();
        let mut passed = 0usize;
        for seq in seqs.into_iter().filter(|q| *q >= from.seq) {
            let first_dir = if seq == from.seq { from.subdir } else { 0 };
            let mut top = 0u32;
            for d in first_dir..OBJ_SUBDIRS {
                let after = if seq == from.seq && d == from.subdir {
                    from.after
                } else {
                    0
                };
                let oids = self.subdir_names(mdt, run, seq, d)?;
                let first = oids.partition_point(|o| *o <= after);
                let mut rest = &oids[first..];
                while let Some(&next_oid) = rest.first() {
                    if objs.len() == max || passed == LIST_PASS_MAX {
                        // LAST_ID read after the objects passed: one created meanwhile
                        // is below it, not taken for one LAST_ID fell behind.
                        last_ids.push((seq, s.last_id(seq)?));
                        if top > 0 {
                            highest.push((seq, top));
                        }
                        return Ok(LfsckReply::Objects {
                            objs,
                            // `next_oid` > `after` >= 0.
                            next: Some(ObjCursor {
                                seq,
                                subdir: d,
                                after: next_oid - 1,
                            }),
                            last_ids,
                            highest,
                        });
                    }
                    // As many unmarked names as the page has room for, probed in one
                    // batch (one open of the subdirectory); the marked ones passed over.
                    let room = max - objs.len();
                    let mut chunk = Vec::with_capacity(room);
                    let mut taken = 0;
                    {
                        let acc = self.accessed.lock();
                        for &oid in rest {
                            if chunk.len() == room || passed == LIST_PASS_MAX {
                                break;
                            }
                            passed += 1;
                            taken += 1;
                            if acc.is_marked(mdt, run, seq, oid) {
                                top = top.max(oid);
                            } else {
                                chunk.push(Fid::new(seq, oid, 0));
                            }
                        }
                    }
                    rest = &rest[taken..];
                    for (obj, p) in chunk.iter().zip(s.probe_batch(&chunk)?) {
                        if let Some(o) = listed(*obj, p) {
                            top = top.max(obj.oid);
                            objs.push(o);
                        }
                    }
                }
            }
            last_ids.push((seq, s.last_id(seq)?));
            if top > 0 {
                highest.push((seq, top));
            }
        }
        self.accessed.lock().forget(mdt, run);
        self.listing.lock().remove(&mdt);
        Ok(LfsckReply::Objects {
            objs,
            next: None,
            last_ids,
            highest,
        })
    }

    /// The object ids in subdirectory `subdir` of `seq`, read once per run's pass.
    fn subdir_names(
        &self,
        mdt: u32,
        run: u64,
        seq: u64,
        subdir: u32,
    ) -> Result<Arc<Vec<u32>>, Errno> {
        if let Some(n) = self.listing.lock().get(&mdt)
            && (n.run, n.seq, n.subdir) == (run, seq, subdir)
        {
            return Ok(n.oids.clone());
        }
        let oids = Arc::new(self.store.objects_in(seq, subdir)?);
        let mut l = self.listing.lock();
        if !l.contains_key(&mdt) && l.len() >= ACCESSED_MDTS_MAX {
            l.clear();
        }
        l.insert(
            mdt,
            SubdirNames {
                run,
                seq,
                subdir,
                oids: oids.clone(),
            },
        );
        Ok(oids)
    }
}

/// An object of the listing as phase 2 gets it, or `None` when there is nothing in it
/// to re-attach: gone since the listing was read (a destroy, no size), or never written
/// (precreated and not handed out, or its file's never written stripe).
fn listed(obj: Fid, p: ObjProbe) -> Option<OrphanObj> {
    if p.never_written() {
        return None;
    }
    Some(OrphanObj {
        obj,
        ff: p.ff,
        layout: p.layout,
        owner: p.owner,
        size: p.size?,
    })
}

impl LfsckService for OstLfsck {
    fn handle(self: Arc<Self>, req: LfsckRequest) -> BoxFuture<'static, Result<LfsckReply, Errno>> {
        Box::pin(self.handle_req(req))
    }

    fn stopping(self: Arc<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nacre_osd::{Health, ObjStoreConfig};

    const SEQ: u64 = 0x240000400;

    fn parent(oid: u32) -> Fid {
        Fid::new(0x200000401, oid, 0)
    }

    /// The objects of a whole listing for `run`, in pages of `max`, and the highest
    /// object it passed.
    fn list_all(l: &OstLfsck, run: u64, max: usize) -> (Vec<u32>, u32) {
        let (mut oids, mut top, mut from) = (Vec::new(), 0, Some(ObjCursor::default()));
        while let Some(cur) = from {
            match l.list(0, run, cur, max).expect("list") {
                LfsckReply::Objects {
                    objs,
                    next,
                    highest,
                    ..
                } => {
                    assert!(objs.len() <= max);
                    oids.extend(objs.iter().map(|o| o.obj.oid));
                    top = highest.iter().map(|h| h.1).fold(top, u32::max);
                    from = next;
                }
                other => panic!("{other:?}"),
            }
        }
        oids.sort_unstable();
        (oids, top)
    }

    #[test]
    fn a_listing_passes_over_what_its_runs_probes_vouched_for() {
        let d = tempfile::tempdir().expect("tmp");
        let health = Health::open("test-OST0000", d.path()).expect("health");
        let store =
            Arc::new(ObjStore::open(d.path(), ObjStoreConfig::default(), health).expect("open"));
        store.precreate(SEQ, 200).expect("precreate");
        for oid in 1..=100 {
            store
                .write(&Fid::new(SEQ, oid, 0), &parent(oid), 0, b"data")
                .expect("write");
        }
        let l = OstLfsck::new(0, store);
        // Objects 1-50 probed by their own stripes, 51-60 by another file's, 150 never
        // written (vouched for, and left out by any listing anyway).
        let probes: Vec<Probe> = (1..=60)
            .map(|oid| Probe {
                obj: Fid::new(SEQ, oid, 0),
                parent: if oid <= 50 {
                    parent(oid)
                } else {
                    parent(oid + 1000)
                },
            })
            .chain([Probe {
                obj: Fid::new(SEQ, 150, 0),
                parent: parent(150),
            }])
            .collect();
        let states = l.probe(0, 7, &probes).expect("probe");
        assert!(states[..60].iter().all(|s| s.presence == ObjPresence::File));
        // Run 7 lists what its probes did not vouch for, in pages across subdirectories;
        // LAST_ID must still cover the objects it passed over (150, referenced though
        // never written, is the highest).
        assert_eq!(list_all(&l, 7, 7), ((51..=100).collect(), 150));
        // Its marks went with its listing's end, and another run never sees them.
        assert_eq!(list_all(&l, 7, 1000).0, (1..=100).collect::<Vec<_>>());
        l.probe(0, 8, &probes).expect("probe");
        assert_eq!(list_all(&l, 9, 1000).0, (1..=100).collect::<Vec<_>>());
        // Run 0 marks nothing.
        l.probe(0, 0, &probes).expect("probe");
        assert_eq!(list_all(&l, 0, 1000).0, (1..=100).collect::<Vec<_>>());
    }

    #[test]
    fn accessed_marks_stop_at_their_bound() {
        let mut a = Accessed::default();
        // One word per object: the bound is reached and never passed.
        let objs = (0..ACCESSED_WORDS_MAX as u64 + 10)
            .map(|i| Fid::new(SEQ + i / 1024, (i % 1024) as u32 * 64, 0));
        a.mark(0, 1, objs);
        assert_eq!(a.words, ACCESSED_WORDS_MAX);
        assert!(a.is_marked(0, 1, SEQ, 0));
        assert!(!a.is_marked(0, 2, SEQ, 0));
        // A new run of the same MDT gives its words back.
        a.mark(0, 2, [Fid::new(SEQ, 1, 0)].into_iter());
        assert_eq!(a.words, 1);
        a.forget(0, 2);
        assert_eq!((a.words, a.runs.len()), (0, 0));
    }
}
