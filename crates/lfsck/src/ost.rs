//! LFSCK on an OST (the slave side of Lustre's layout LFSCK): answers the MDTs' probes of
//! the objects their layouts reference, lists the objects that have been written so the MDTs
//! can find orphans among them, and makes the repairs the MDTs ask for (a filter fid, a
//! lost object recreated, LAST_ID put back).
//!
//! It keeps no state of its own between requests: each MDT drives its own layout check
//! and pages through the OSTs' objects at its own pace, so a slow MDT never holds an
//! OST's other MDTs back.

use nacre_core::{Errno, Fid, OstLayout};
use nacre_osd::objstore::Absent;
use nacre_osd::objstore::OBJ_SUBDIRS;
use nacre_osd::{ObjProbe, ObjStore};
use nacre_rpc::lfsck::{
    BoxFuture, LfsckReply, LfsckRequest, LfsckService, ObjCursor, ObjPresence, ObjState, OrphanObj,
    OstRepair, Outcome,
};
use std::sync::Arc;

/// The checker's side of one OST.
pub struct OstLfsck {
    pub index: u32,
    store: Arc<ObjStore>,
}

impl OstLfsck {
    pub fn new(index: u32, store: Arc<ObjStore>) -> Arc<OstLfsck> {
        Arc::new(OstLfsck { index, store })
    }

    async fn handle_req(self: Arc<Self>, req: LfsckRequest) -> Result<LfsckReply, Errno> {
        let store = self.store.clone();
        match req {
            LfsckRequest::Probe { objs, .. } => {
                blocking(store, move |s| {
                    let fids: Vec<Fid> = objs.iter().map(|p| p.obj).collect();
                    Ok(LfsckReply::Probed(probe_batch(s, &fids)?))
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
            LfsckRequest::Objects { from, max } => {
                blocking(store, move |s| list(s, from, max as usize)).await
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

/// A page of objects that have files, from `from` on: whole subdirectories at a time
/// until `max` objects, the last one cut at `max`.
pub fn list(s: &ObjStore, from: ObjCursor, max: usize) -> Result<LfsckReply, Errno> {
    let seqs = s.sequences()?;
    let mut objs = Vec::new();
    let mut last_ids = Vec::new();
    for seq in seqs.into_iter().filter(|q| *q >= from.seq) {
        let first_dir = if seq == from.seq { from.subdir } else { 0 };
        last_ids.push((seq, s.last_id(seq)?));
        for d in first_dir..OBJ_SUBDIRS {
            let after = if seq == from.seq && d == from.subdir {
                from.after
            } else {
                0
            };
            for oid in s.objects_in(seq, d)?.into_iter().filter(|o| *o > after) {
                if objs.len() == max {
                    return Ok(LfsckReply::Objects {
                        objs,
                        next: Some(ObjCursor {
                            seq,
                            subdir: d,
                            after: oid - 1,
                        }),
                        last_ids,
                    });
                }
                let obj = Fid::new(seq, oid, 0);
                let p = match s.probe_batch(&[obj]) {
                    Ok(p) => p,
                    Err(Errno::ENOENT) => continue,
                    Err(e) => return Err(e),
                };
                // No size: gone since the listing (a destroy). Never written: precreated
                // and not handed out, or its file's never written stripe; nothing in it to
                // re-attach, and no file named to ask.
                let Some(&probe) = p.first().filter(|p| !p.never_written()) else {
                    continue;
                };
                let ObjProbe {
                    size: Some(size),
                    ff,
                    layout,
                    owner,
                } = probe
                else {
                    continue;
                };
                objs.push(OrphanObj {
                    obj,
                    ff,
                    layout,
                    owner,
                    size,
                });
            }
        }
    }
    Ok(LfsckReply::Objects {
        objs,
        next: None,
        last_ids,
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
