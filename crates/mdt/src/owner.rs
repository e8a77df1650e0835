//! The owner of a file's OST objects (Lustre's `lod_attr_set` of a chown, passed to each
//! stripe through its OSP): the objects take the file's owner, as a quota on the OSTs
//! would count it.
//!
//! As Lustre's `osp_sync` does with its setattr llog records, a chown writes an *owner
//! record* in its own transaction, and the MDT's log pass passes the owner on only once
//! that transaction is on stable storage: a power cut of the MDT that takes a chown back
//! never leaves the objects owned ahead of their file. An OST that does not answer keeps
//! the record for the next pass, so its objects get the owner when it is back, after a
//! restart of the MDT too. A record is keyed by its file, so repeated chowns of one file
//! wait as one, and its value is the owner the chown set: a pass drops it only if no
//! chown changed it meanwhile.
//!
//! A layout swap (`lfs migrate`, `lfs mirror split`) writes the same record, naming also
//! the file whose objects the file took over: the pass points those objects' filter fids
//! at the file too, for the OSTs that did not answer the swap's own request. The OSTs
//! refuse a client's write naming another file than an object's filter fid, so nothing
//! else would put them right before LFSCK.
//!
//! LFSCK's owner repair and the pass must not cross, or the OSTs could end with the owner
//! the file had before: both hold the file's [`OwnerLocks`] stripe while they read the
//! owner and send it, and LFSCK leaves alone a file whose owner is still on its way.

use crate::Mdt;
use crate::mdd;
use crate::records::{Inode, prefix_end};
use nacre_core::{Errno, Fid};
use nacre_osd::{KvRead, Table, Tx};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Mutex, MutexGuard, watch};

/// Keys of owner records in the store's meta table: this, then the file's FID.
const OWNER_LOG: &[u8] = b"owner_log.";
/// Owner records one log pass reads: the files whose objects it sends owners to.
pub const OWNER_LOG_BATCH: usize = 256;
/// How soon records an OST did not take are tried again.
pub const OWNER_LOG_RETRY: Duration = Duration::from_secs(5);

fn owner_key(fid: &Fid) -> Vec<u8> {
    let mut k = OWNER_LOG.to_vec();
    k.extend_from_slice(&fid.to_bytes());
    k
}

fn owner_value(uid: u32, gid: u32) -> [u8; 8] {
    let mut v = [0; 8];
    v[..4].copy_from_slice(&uid.to_be_bytes());
    v[4..].copy_from_slice(&gid.to_be_bytes());
    v
}

/// A record of a layout swap also names the file whose objects the file took over
/// (see [`log_owner_from`]).
fn record_value(uid: u32, gid: u32, from: Option<Fid>) -> Vec<u8> {
    let mut v = owner_value(uid, gid).to_vec();
    if let Some(f) = from {
        v.extend_from_slice(&f.to_bytes());
    }
    v
}

fn decode_from(v: &[u8]) -> Option<Fid> {
    v.get(8..24).and_then(Fid::from_bytes)
}

fn decode_owner(v: &[u8]) -> Option<(u32, u32)> {
    let uid = u32::from_be_bytes(v.get(..4)?.try_into().ok()?);
    let gid = u32::from_be_bytes(v.get(4..8)?.try_into().ok()?);
    Some((uid, gid))
}

/// In a chown's transaction: `ino`, with its new owner, has OST objects to pass it to.
/// A swap's record not passed on yet keeps the file it names.
pub fn log_owner(tx: &mut Tx, ino: &Inode) -> Result<(), Errno> {
    let key = owner_key(&ino.fid());
    let from = tx.get(Table::Meta, &key)?.as_deref().and_then(decode_from);
    put_record(tx, ino, from)
}

/// After a layout swap: `ino` took over the objects of `from`, which must name `ino` in
/// their filter fids (`Mdt::replace_parents` asks at once; the log pass asks again
/// until every OST has), and carry its owner.
pub fn log_owner_from(tx: &mut Tx, ino: &Inode, from: Fid) -> Result<(), Errno> {
    put_record(tx, ino, Some(from))
}

fn put_record(tx: &mut Tx, ino: &Inode, from: Option<Fid>) -> Result<(), Errno> {
    if ino
        .layout
        .as_ref()
        .is_none_or(|l| l.objects().next().is_none())
    {
        return Ok(());
    }
    tx.put(
        Table::Meta,
        &owner_key(&ino.fid()),
        &record_value(ino.attr.uid, ino.attr.gid, from),
    )
}

/// Whether `fid`'s owner is still on its way to its objects.
pub fn owner_pending<R: KvRead>(r: &mut R, fid: &Fid) -> Result<bool, Errno> {
    Ok(r.get(Table::Meta, &owner_key(fid))?.is_some())
}

/// Owner records waiting, at most `limit`: each file with the owner its chown set.
pub fn pending<R: KvRead>(r: &mut R, limit: usize) -> Result<Vec<(Fid, Vec<u8>)>, Errno> {
    Ok(
        r.range(Table::Meta, OWNER_LOG, &prefix_end(OWNER_LOG), limit)?
            .into_iter()
            .filter_map(|(k, v)| Some((Fid::from_bytes(&k[OWNER_LOG.len()..])?, v)))
            .collect(),
    )
}

/// What a log pass left behind.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct OwnerPass {
    /// Owner records read (at most [`OWNER_LOG_BATCH`]).
    pub read: usize,
    /// Records left for a later pass: an OST did not answer.
    pub left: usize,
}

/// Stripes of [`OwnerLocks`]: chowns of files in different stripes go on side by side.
pub const OWNER_LOCK_STRIPES: usize = 64;

/// Serialises, per file, passing its owner to its objects.
pub struct OwnerLocks([Mutex<()>; OWNER_LOCK_STRIPES]);

impl Default for OwnerLocks {
    fn default() -> Self {
        OwnerLocks(std::array::from_fn(|_| Mutex::new(())))
    }
}

impl OwnerLocks {
    fn stripe(fid: &Fid) -> usize {
        let h = fid.seq ^ u64::from(fid.oid).rotate_left(17) ^ u64::from(fid.ver);
        (h % OWNER_LOCK_STRIPES as u64) as usize
    }

    pub async fn lock(&self, fid: &Fid) -> MutexGuard<'_, ()> {
        self.0[Self::stripe(fid)].lock().await
    }

    /// The stripes of all of `fids`, taken in stripe order (so two holders of several
    /// never wait on each other).
    pub async fn lock_all<'a>(
        &self,
        fids: impl Iterator<Item = &'a Fid>,
    ) -> Vec<MutexGuard<'_, ()>> {
        let stripes: std::collections::BTreeSet<usize> = fids.map(Self::stripe).collect();
        let mut held = Vec::with_capacity(stripes.len());
        for s in stripes {
            held.push(self.0[s].lock().await);
        }
        held
    }
}

impl Mdt {
    /// Passes owners on for up to [`OWNER_LOG_BATCH`] files with an owner record, once
    /// their chowns are on stable storage, one request per OST and owner, and drops the
    /// records of the files done.
    pub(crate) async fn owner_log_pass(&self) -> Result<OwnerPass, Errno> {
        let recs = pending(&mut self.view()?, OWNER_LOG_BATCH)?;
        if recs.is_empty() {
            return Ok(OwnerPass::default());
        }
        // Every record the view showed was committed at or before `seen`; the journal's
        // next sync or checkpoint makes them durable (a chown forces neither).
        let seen = self.store.last_transno();
        self.store.committed_through(seen).await;
        // In stripe order, so two passes (or a pass and LFSCK) cannot wait on each other.
        let _locks = self.owner_locks.lock_all(recs.iter().map(|(f, _)| f)).await;
        let mut v = self.view()?;
        // Per OST and owner, the objects to give it, and the files they belong to.
        type Group = (Vec<Fid>, Vec<usize>);
        let mut groups: BTreeMap<(u32, u32, u32), Group> = BTreeMap::new();
        // Per OST, the filter fids of swapped files to put right, and the files.
        let mut parents: BTreeMap<u32, (Vec<nacre_rpc::lfsck::OstRepair>, Vec<usize>)> =
            BTreeMap::new();
        for (i, (fid, val)) in recs.iter().enumerate() {
            // The owner the record holds, which is durable; a later chown's, which may
            // not be yet, waits for its own record's pass.
            let Some((uid, gid)) = decode_owner(val) else {
                tracing::warn!(target: "mdt", "file {fid}: dropping an owner record that does not decode; LFSCK's layout check repairs its objects' owner");
                continue;
            };
            let ino = match mdd::get_inode(&mut v, fid) {
                Ok(ino) => ino,
                // Removed since: its objects go with it.
                Err(Errno::ENOENT) => continue,
                Err(e) => return Err(e),
            };
            for o in ino.layout.iter().flat_map(|l| l.objects()) {
                let g = groups.entry((o.ost_idx, uid, gid)).or_default();
                g.0.push(o.fid);
                if g.1.last() != Some(&i) {
                    g.1.push(i);
                }
            }
            if let Some(from) = decode_from(val) {
                for (ost, reps) in crate::layout_change::parent_repairs(&ino, from) {
                    let g = parents.entry(ost).or_default();
                    g.0.extend(reps);
                    if g.1.last() != Some(&i) {
                        g.1.push(i);
                    }
                }
            }
        }
        drop(v);
        let parent_calls = parents.into_iter().map(|(ost, (reps, files))| async move {
            let r = match self.lod.osp(ost) {
                Some(osp) if !osp.is_reachable() => Err(Errno::ENOTCONN),
                Some(osp) => match osp.replace_parents(reps).await {
                    Ok(0) => Ok(()),
                    Ok(_) => Err(Errno::EAGAIN),
                    Err(e) => Err(e),
                },
                None => Err(Errno::ENODEV),
            };
            (ost, files, r)
        });
        let calls = groups
            .into_iter()
            .map(|((ost, uid, gid), (objs, files))| async move {
                let r = match self.lod.osp(ost) {
                    // Not waited for while it is known to be down: the locks are held.
                    Some(osp) if !osp.is_reachable() => Err(Errno::ENOTCONN),
                    Some(osp) => osp.set_owner(objs, uid, gid).await,
                    None => Err(Errno::ENODEV),
                };
                (ost, files, r)
            });
        let mut failed = vec![false; recs.len()];
        let (owners, parents) = futures::join!(
            futures::future::join_all(calls),
            futures::future::join_all(parent_calls)
        );
        for (ost, files, r) in owners.into_iter().chain(parents) {
            if let Err(e) = r {
                tracing::debug!(target: "mdt", "owners or parents of {} file(s) on OST{ost:04x} deferred: {e}", files.len());
                for i in files {
                    failed[i] = true;
                }
            }
        }
        let done: Vec<(Vec<u8>, Vec<u8>)> = recs
            .iter()
            .enumerate()
            .filter(|(i, _)| !failed[*i])
            .map(|(_, (fid, val))| (owner_key(fid), val.clone()))
            .collect();
        let left = recs.len() - done.len();
        self.store
            .write(move |tx| {
                for (k, val) in done {
                    // A chown since the records were read set another owner: keep it.
                    if tx.get(Table::Meta, &k)?.as_deref() == Some(val.as_slice()) {
                        tx.delete(Table::Meta, &k)?;
                    }
                }
                Ok(())
            })
            .await?;
        Ok(OwnerPass {
            read: recs.len(),
            left,
        })
    }

    /// Until `shutdown`: log passes when a chown kicks it, and every
    /// [`OWNER_LOG_RETRY`] for records an OST did not take (or left from before a
    /// restart).
    pub(crate) async fn owner_loop(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = self.owner_kick.notified() => {}
                _ = tokio::time::sleep(OWNER_LOG_RETRY) => {}
                _ = shutdown.changed() => return,
            }
            loop {
                let pass = tokio::select! {
                    p = self.owner_log_pass() => p,
                    _ = shutdown.changed() => return,
                };
                match pass {
                    // A full batch, not all refused: there may be more.
                    Ok(p) if p.read == OWNER_LOG_BATCH && p.left < p.read => {}
                    Ok(_) => break,
                    Err(e) => {
                        tracing::warn!(target: "mdt", "MDT{:04x}: passing owners to OST objects: {e}", self.index);
                        break;
                    }
                }
            }
        }
    }
}
