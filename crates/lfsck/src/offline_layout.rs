//! The layout checks on the stores of a stopped file system (`nacre check`): the layout
//! LFSCK's phase 1 and phase 2 as a dry run ([`crate::layout`] says what each class is),
//! reading every MDT's files and every OST's objects directly instead of asking the
//! targets.
//!
//! - **dangling**: a stripe whose object has no file (lost, or never created), or, on a
//!   sequence an older store made lazily, no file where the file's exact size says data;
//! - **unmatched pair**: an object whose filter fid names another file or stripe, which
//!   does not reference it;
//! - **multiply referenced**: an object more than one stripe references;
//! - **inconsistent owner**: an object given an owner that is not its file's;
//! - **orphan**: an object that was written (it has data or a filter fid) and that no
//!   layout references;
//! - **LAST_ID behind**: a sequence whose LAST_ID is below its highest object.
//!
//! Objects precreated and never handed out are empty files without a filter fid, and
//! the objects of unlinked files wait in the unlink llog for their destroy; neither are
//! orphans.

use crate::layout::{Ref, Verdict, stripes_of, verdict};
use nacre_core::{Errno, Fid, StripeObject};
use nacre_mdt::records::{self, Inode};
use nacre_osd::objstore::OBJ_SUBDIRS;
use nacre_osd::{ObjStore, ReadView, Table};
use nacre_rpc::lfsck::ObjPresence;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;

/// Objects probed at a time (a stat and two xattr reads each).
const PROBE_BATCH: usize = 4096;

/// What the layout checks found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LayoutReport {
    /// Stripes checked, and objects listed.
    pub stripes: u64,
    pub objects: u64,
    /// (file, stripe, object).
    pub dangling: Vec<(Fid, u32, StripeObject)>,
    /// (file, stripe, object, the filter fid it has).
    pub unmatched: Vec<(Fid, u32, StripeObject, Fid)>,
    /// (object, the files that reference it).
    pub multiply_referenced: Vec<(StripeObject, Vec<Fid>)>,
    /// (file, object, the object's owner).
    pub bad_owner: Vec<(Fid, StripeObject, (u32, u32))>,
    /// (object, its filter fid, its size).
    pub orphans: Vec<(StripeObject, Option<Fid>, u64)>,
    /// (OST, sequence, LAST_ID, highest object).
    pub last_id_behind: Vec<(u32, u64, u32, u32)>,
    /// OSTs the layouts use that were not given, or could not be read: their stripes
    /// are not checked.
    pub unchecked_osts: Vec<u32>,
}

impl LayoutReport {
    pub fn is_clean(&self) -> bool {
        self.dangling.is_empty()
            && self.unmatched.is_empty()
            && self.multiply_referenced.is_empty()
            && self.bad_owner.is_empty()
            && self.orphans.is_empty()
            && self.last_id_behind.is_empty()
    }

    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "layout: {} stripes, {} OST objects; {} dangling, {} unmatched pairs, {} multiply-referenced objects, {} inconsistent owners, {} orphan objects, {} LAST_IDs behind",
            self.stripes,
            self.objects,
            self.dangling.len(),
            self.unmatched.len(),
            self.multiply_referenced.len(),
            self.bad_owner.len(),
            self.orphans.len(),
            self.last_id_behind.len()
        );
        for (f, i, so) in &self.dangling {
            let _ = writeln!(
                s,
                "  dangling: {f} stripe {i}: object {} on OST{:04x}",
                so.fid, so.ost_idx
            );
        }
        for (f, i, so, ff) in &self.unmatched {
            let _ = writeln!(
                s,
                "  unmatched pair: {f} stripe {i}: object {} on OST{:04x} names {ff}",
                so.fid, so.ost_idx
            );
        }
        for (so, files) in &self.multiply_referenced {
            let names: Vec<String> = files.iter().map(Fid::to_string).collect();
            let _ = writeln!(
                s,
                "  multiply referenced: object {} on OST{:04x} by {}",
                so.fid,
                so.ost_idx,
                names.join(", ")
            );
        }
        for (f, so, (u, g)) in &self.bad_owner {
            let _ = writeln!(
                s,
                "  inconsistent owner: {f}: object {} on OST{:04x} owned by {u}:{g}",
                so.fid, so.ost_idx
            );
        }
        for (so, ff, size) in &self.orphans {
            let ff = ff.map_or("none".to_string(), |f| f.to_string());
            let _ = writeln!(
                s,
                "  orphan: object {} on OST{:04x} ({size} bytes), filter fid {ff}",
                so.fid, so.ost_idx
            );
        }
        for (ost, seq, last, max) in &self.last_id_behind {
            let _ = writeln!(
                s,
                "  LAST_ID behind: OST{ost:04x} sequence {seq:#x}: LAST_ID {last}, object {max}"
            );
        }
        for ost in &self.unchecked_osts {
            let _ = writeln!(s, "  not checked: OST{ost:04x}");
        }
        s
    }
}

/// Checks the layouts of the files on the MDT stores `views` against the OST stores
/// `osts` (by OST index; `None` where an OST's store is not at hand).
pub fn check_layout(
    views: &mut [ReadView],
    osts: &[Option<ObjStore>],
) -> Result<LayoutReport, Errno> {
    let mut rep = LayoutReport::default();
    // Every stripe of every file, by OST.
    let mut by_ost: BTreeMap<u32, Vec<Ref>> = BTreeMap::new();
    for v in views.iter_mut() {
        let crash_gen = v.crash_gen();
        v.for_each(
            Table::Inodes,
            &records::inode_key(0),
            &records::inode_key(u64::MAX),
            |_, val| {
                let mut refs = Vec::new();
                stripes_of(&Inode::decode(val, crash_gen)?, &mut refs);
                for r in refs {
                    by_ost.entry(r.so.ost_idx).or_default().push(r);
                }
                Ok(())
            },
        )?;
    }
    // Objects of unlinked files waiting for their destroy (the unlink llog): no layout
    // references them any more, and they are not orphans.
    let mut destroying: HashSet<StripeObject> = HashSet::new();
    for v in views.iter_mut() {
        v.for_each(Table::Llog, &[], &[0xff; 9], |_, val| {
            let (_, objs) = nacre_mdt::mdd::decode_llog(val).ok_or(Errno::EIO)?;
            destroying.extend(objs);
            Ok(())
        })?;
    }
    // Files whose chown's owner is still on its way to their objects (the owner log):
    // an object owned otherwise is no inconsistency.
    let mut owner_pending: HashSet<Fid> = HashSet::new();
    for v in views.iter_mut() {
        owner_pending.extend(
            nacre_mdt::owner::pending(v, usize::MAX)?
                .into_iter()
                .map(|(f, _)| f),
        );
    }
    let mut claims: HashMap<StripeObject, Vec<Fid>> = HashMap::new();
    for r in by_ost.values().flatten() {
        claims.entry(r.so).or_default().push(r.file);
    }
    let mut shared: HashSet<StripeObject> = HashSet::new();
    for (ost, refs) in &by_ost {
        let Some(store) = osts.get(*ost as usize).and_then(Option::as_ref) else {
            rep.unchecked_osts.push(*ost);
            continue;
        };
        for chunk in refs.chunks(PROBE_BATCH) {
            let fids: Vec<Fid> = chunk.iter().map(|r| r.so.fid).collect();
            // What the OST answers an MDT's probe, read here from its store.
            for (r, st) in chunk.iter().zip(crate::ost::probe_batch(store, &fids)?) {
                rep.stripes += 1;
                if st.presence == ObjPresence::File && claims[&r.so].len() > 1 {
                    shared.insert(r.so);
                    continue;
                }
                match verdict(r, &st) {
                    Verdict::Fine => {}
                    Verdict::Dangling => rep.dangling.push((r.file, r.stripe, r.so)),
                    Verdict::OwnerDiffers(_) if owner_pending.contains(&r.file) => {}
                    Verdict::OwnerDiffers(o) => rep.bad_owner.push((r.file, r.so, o)),
                    Verdict::FilterFid(ff) => rep.unmatched.push((r.file, r.stripe, r.so, ff)),
                }
            }
        }
    }
    // Objects that exist and that more than one stripe references (a name that nothing
    // exists under is dangling for each, not shared).
    for so in shared {
        if let Some(files) = claims.remove(&so) {
            rep.multiply_referenced.push((so, files));
        }
    }
    rep.multiply_referenced
        .sort_by_key(|(so, _)| (so.ost_idx, so.fid));
    for (ost, store) in osts.iter().enumerate() {
        let Some(store) = store else { continue };
        orphans_and_last_ids(ost as u32, store, &by_ost, &destroying, &mut rep)?;
    }
    Ok(rep)
}

/// Lists OST `ost`'s objects: the written ones no layout references are orphans, and
/// each sequence's LAST_ID must cover its highest object.
fn orphans_and_last_ids(
    ost: u32,
    store: &ObjStore,
    by_ost: &BTreeMap<u32, Vec<Ref>>,
    destroying: &HashSet<StripeObject>,
    rep: &mut LayoutReport,
) -> Result<(), Errno> {
    let referenced: HashSet<Fid> = by_ost
        .get(&ost)
        .map(|refs| refs.iter().map(|r| r.so.fid).collect())
        .unwrap_or_default();
    for seq in store.sequences()? {
        let last = store.last_id(seq)?;
        // The highest written object: an empty one without a filter fid past LAST_ID is
        // what a precreate cut short left, and is made again by the next one.
        let mut max = 0u32;
        for d in 0..OBJ_SUBDIRS {
            let oids = store.objects_in(seq, d)?;
            for chunk in oids.chunks(PROBE_BATCH) {
                let fids: Vec<Fid> = chunk.iter().map(|o| Fid::new(seq, *o, 0)).collect();
                for (obj, p) in fids.iter().zip(store.probe_batch(&fids)?) {
                    let Some(size) = p.size else { continue };
                    rep.objects += 1;
                    if p.never_written() {
                        continue;
                    }
                    max = max.max(obj.oid);
                    if referenced.contains(obj) {
                        continue;
                    }
                    let so = StripeObject {
                        ost_idx: ost,
                        fid: *obj,
                    };
                    if !destroying.contains(&so) {
                        rep.orphans.push((so, p.ff, size));
                    }
                }
            }
        }
        if max > last {
            rep.last_id_behind.push((ost, seq, last, max));
        }
    }
    Ok(())
}
