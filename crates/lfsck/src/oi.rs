//! The OI scrub (Lustre's `osd_scrub` in osd-ldiskfs): checks an MDT's object index
//! (FID -> local inode number) against the inodes' own FIDs, on a live target, and
//! rebuilds what is missing or wrong, including an index that was lost altogether.
//!
//! Two passes, each a batch at a time under the speed limit:
//! 1. every inode, in inode-number order from the last checkpoint: the index must map
//!    the inode's own FID (kept in the inode, as ldiskfs keeps it in the LMA) to it;
//!    an entry that is missing or names another inode is (re)written;
//! 2. every index entry: one naming an inode that does not exist, or one whose FID is
//!    not that inode's, is removed.
//!
//! Each repair is made in a transaction that reads the inode and the entry again, so a
//! create, unlink or rename racing with the scan is never undone. A dry run (`-n`)
//! counts what it would repair; it remembers the FIDs pass 1 would rewrite (at most
//! [`DRY_RUN_MEMORY`]) so pass 2 does not count the same entry again.
//!
//! An MDT whose index is empty while it has inodes (the table was deleted, or the store
//! was restored from a file-level backup) rebuilds it before it serves
//! (`nacre_mdt::mdd::rebuild_lost_oi`); the scrub's record then shows `recreated,auto`
//! until a scrub completes, as Lustre's does for recreated OI files.

use crate::control::{End, Halt, Live, Throttle, halted};
use crate::mdt::MdtLfsck;
use nacre_core::{Errno, Fid};
use nacre_lustreapi::lfsck::{
    SF_AUTO, SF_INCONSISTENT, SF_RECREATED, SP_DRYRUN, ScrubFile, ScrubStatus,
};
use nacre_mdt::{Mdt, mdd, records};
use nacre_osd::Table;
use std::collections::HashSet;
use std::sync::Arc;
use tokio::sync::watch;

/// Inodes or index entries read per batch: one read transaction and at most one write.
pub const OI_SCRUB_BATCH: usize = 1024;
/// FIDs a dry run remembers from pass 1; past it, pass 2 may count an entry pass 1
/// already counted (the log says so).
pub const DRY_RUN_MEMORY: usize = 1 << 20;
/// Inode keys are 8-byte inode numbers; every one sorts below this.
const INODE_END: [u8; 9] = [0xff; 9];
/// Index keys are 16-byte FIDs; every one sorts below this.
const OI_END: [u8; 17] = [0xff; 17];

/// Opens a run on `rec` with `dryrun`: it resumes one that did not finish (and had the
/// same dry-run setting) unless `reset`; returns its live progress.
pub(crate) fn begin(rec: &mut ScrubFile, dryrun: bool, reset: bool, now: i64) -> Live {
    let param = if dryrun { SP_DRYRUN } else { 0 };
    let resume = !reset
        && !matches!(rec.status, ScrubStatus::Init | ScrubStatus::Completed)
        && rec.param & SP_DRYRUN == param;
    if !resume {
        *rec = ScrubFile {
            success_count: rec.success_count,
            time_last_complete: rec.time_last_complete,
            flags: rec.flags & (SF_RECREATED | SF_AUTO | SF_INCONSISTENT),
            ..ScrubFile::default()
        };
    }
    rec.oi_files = 1;
    rec.param = param;
    rec.status = ScrubStatus::Scanning;
    rec.time_latest_start = now;
    rec.pos_latest_start = rec.pos_last_checkpoint;
    let mut live = Live::new();
    live.position.oit_cookie = rec.pos_last_checkpoint;
    live
}

/// Adds the progress since the last checkpoint to `rec`.
pub(crate) fn fold(rec: &mut ScrubFile, live: &mut Live, now: i64) {
    rec.items_checked += live.new_checked;
    rec.run_time += live.elapsed();
    rec.pos_last_checkpoint = live.position.oit_cookie;
    rec.time_last_checkpoint = now;
    live.new_checked = 0;
    live.since = std::time::Instant::now();
}

/// The run ended with `status`.
pub(crate) fn finish(rec: &mut ScrubFile, status: ScrubStatus, now: i64) {
    rec.status = status;
    if status == ScrubStatus::Completed {
        rec.time_last_complete = now;
        rec.success_count += 1;
        rec.pos_last_checkpoint = 0;
        if rec.param & SP_DRYRUN == 0 {
            // Everything found was repaired: the index is whole again.
            rec.flags &= !(SF_INCONSISTENT | SF_RECREATED | SF_AUTO);
        }
    }
}

/// What one batch found: entries to write (FID -> inode) or remove, and failures.
#[derive(Default)]
struct Batch {
    write: Vec<(Fid, u64)>,
    remove: Vec<Vec<u8>>,
    failed: u64,
    count: usize,
}

/// Runs the OI scrub of `mdt` to its end, a stop, or a failure.
pub(crate) async fn run(
    eng: &Arc<MdtLfsck>,
    mdt: &Arc<Mdt>,
    dryrun: bool,
    mut halt: watch::Receiver<Halt>,
) -> ScrubStatus {
    let mut dry_seen: HashSet<Fid> = HashSet::new();
    let r = async {
        inodes_pass(eng, mdt, dryrun, &mut halt, &mut dry_seen).await?;
        index_pass(eng, mdt, dryrun, &mut halt, &dry_seen).await
    }
    .await;
    eng.scrub_checkpoint(mdt).await;
    match r {
        Ok(()) => ScrubStatus::Completed,
        Err(End::Halted(Halt::Pause)) => ScrubStatus::Paused,
        Err(End::Halted(_)) => ScrubStatus::Stopped,
        Err(End::Failed(e)) => {
            tracing::warn!(target: "lfsck", "{}: OI scrub failed: {e}", eng.dev);
            ScrubStatus::Failed
        }
    }
}

/// Reads one batch of `table` from `start` (at most `n` rows) on a blocking thread.
async fn read_batch(
    mdt: &Arc<Mdt>,
    table: Table,
    start: Vec<u8>,
    n: usize,
) -> Result<(Vec<(Vec<u8>, Vec<u8>)>, nacre_osd::ReadView), End> {
    let m = mdt.clone();
    tokio::task::spawn_blocking(move || {
        let v = m.store().read()?;
        let end: &[u8] = if table == Table::Oi {
            &OI_END
        } else {
            &INODE_END
        };
        let rows = v.range(table, &start, end, n)?;
        Ok::<_, Errno>((rows, v))
    })
    .await
    .map_err(|_| End::Failed(Errno::EIO))?
    .map_err(End::Failed)
}

/// Pass 1: the index entry of every inode.
async fn inodes_pass(
    eng: &Arc<MdtLfsck>,
    mdt: &Arc<Mdt>,
    dryrun: bool,
    halt: &mut watch::Receiver<Halt>,
    dry_seen: &mut HashSet<Fid>,
) -> Result<(), End> {
    let mut pos = eng.state.lock().scrub.pos_last_checkpoint;
    let mut throttle = Throttle::new(eng.speed_limit.clone());
    loop {
        if let Some(h) = halted(halt) {
            return Err(End::Halted(h));
        }
        let n = throttle.cap(OI_SCRUB_BATCH);
        let (rows, mut view) =
            read_batch(mdt, Table::Inodes, records::inode_key(pos).to_vec(), n).await?;
        let mut b = Batch {
            count: rows.len(),
            ..Batch::default()
        };
        let Some(last) = rows.last().and_then(|(k, _)| records::parse_inode_key(k)) else {
            return Ok(());
        };
        for (k, v) in &rows {
            // 16-byte keys are inodes of a store made before the index: the MDT moves
            // them at start, so none is left here.
            let Some(ino) = records::parse_inode_key(k).filter(|_| k.len() == 8) else {
                continue;
            };
            let fid = match records::Inode::decode(v, view.crash_gen()) {
                Ok(i) => i.fid(),
                Err(e) => {
                    tracing::warn!(target: "lfsck", "{}: OI scrub: inode {ino} cannot be decoded: {e}", eng.dev);
                    b.failed += 1;
                    continue;
                }
            };
            match mdd::oi_lookup(&mut view, &fid) {
                Ok(Some(at)) if at == ino => {}
                Ok(_) => b.write.push((fid, ino)),
                Err(e) => {
                    tracing::warn!(target: "lfsck", "{}: OI scrub: index entry of {fid} unreadable: {e}", eng.dev);
                    b.write.push((fid, ino));
                }
            }
        }
        drop(view);
        let updated = if dryrun {
            for (fid, _) in &b.write {
                if dry_seen.len() < DRY_RUN_MEMORY {
                    dry_seen.insert(*fid);
                }
            }
            b.write.len() as u64
        } else {
            write_entries(eng, mdt, std::mem::take(&mut b.write)).await?
        };
        pos = last.saturating_add(1);
        account(eng, mdt, b.count as u64, updated, b.failed, pos, dryrun).await;
        if last == u64::MAX {
            return Ok(());
        }
        throttle.after(b.count as u64, halt).await;
    }
}

/// Pass 2: every index entry names an inode that has its FID.
async fn index_pass(
    eng: &Arc<MdtLfsck>,
    mdt: &Arc<Mdt>,
    dryrun: bool,
    halt: &mut watch::Receiver<Halt>,
    dry_seen: &HashSet<Fid>,
) -> Result<(), End> {
    let mut start: Vec<u8> = Vec::new();
    let mut throttle = Throttle::new(eng.speed_limit.clone());
    if dryrun && dry_seen.len() >= DRY_RUN_MEMORY {
        tracing::warn!(target: "lfsck", "{}: OI scrub dry run: more than {DRY_RUN_MEMORY} entries to rewrite; the count of stale entries may include some of them", eng.dev);
    }
    loop {
        if let Some(h) = halted(halt) {
            return Err(End::Halted(h));
        }
        let n = throttle.cap(OI_SCRUB_BATCH);
        let (rows, mut view) = read_batch(mdt, Table::Oi, start.clone(), n).await?;
        if rows.is_empty() {
            return Ok(());
        }
        let mut b = Batch::default();
        for (k, v) in &rows {
            let stale = match (Fid::from_bytes(k), records::parse_oi_value(v)) {
                (Some(fid), Ok(ino)) => match mdd::inode_at(&mut view, ino) {
                    Ok(Some(i)) => i.fid() != fid && !(dryrun && dry_seen.contains(&fid)),
                    Ok(None) => !(dryrun && dry_seen.contains(&fid)),
                    // Pass 1 counted an inode it could not read.
                    Err(_) => false,
                },
                _ => true,
            };
            if stale {
                b.remove.push(k.clone());
            }
        }
        drop(view);
        // The next batch starts just after this one's last key.
        if let Some((k, _)) = rows.last() {
            start = k.clone();
            start.push(0);
        }
        let updated = if dryrun {
            b.remove.len() as u64
        } else {
            remove_entries(eng, mdt, std::mem::take(&mut b.remove)).await?
        };
        let pos = eng.state.lock().scrub.pos_last_checkpoint;
        account(eng, mdt, 0, updated, 0, pos, dryrun).await;
        throttle.after(rows.len() as u64, halt).await;
    }
}

/// Writes index entries pass 1 found wrong, each only if the inode still has that FID
/// and the entry is still wrong; returns how many it wrote.
async fn write_entries(
    eng: &Arc<MdtLfsck>,
    mdt: &Arc<Mdt>,
    entries: Vec<(Fid, u64)>,
) -> Result<u64, End> {
    if entries.is_empty() {
        return Ok(0);
    }
    let done = mdt
        .store()
        .write(move |tx| {
            let mut done = Vec::new();
            for (fid, ino) in entries {
                let still = mdd::inode_at(tx, ino)?.is_some_and(|i| i.fid() == fid);
                if still && mdd::oi_lookup(tx, &fid)? != Some(ino) {
                    tx.put(Table::Oi, &fid.to_bytes(), &records::oi_value(ino))?;
                    done.push((fid, ino));
                }
            }
            Ok(done)
        })
        .await
        .map_err(End::Failed)?;
    for (fid, ino) in &done {
        eng.repairs.push(
            &eng.dev,
            format!("oi_scrub: index entry of {fid} set to inode {ino}"),
        );
    }
    Ok(done.len() as u64)
}

/// Removes index entries pass 2 found stale, each only if it is still stale; returns how
/// many it removed.
async fn remove_entries(
    eng: &Arc<MdtLfsck>,
    mdt: &Arc<Mdt>,
    keys: Vec<Vec<u8>>,
) -> Result<u64, End> {
    if keys.is_empty() {
        return Ok(0);
    }
    let done = mdt
        .store()
        .write(move |tx| {
            let mut done = Vec::new();
            for k in keys {
                let Some(v) = tx.get(Table::Oi, &k)? else {
                    continue;
                };
                let stale = match (Fid::from_bytes(&k), records::parse_oi_value(&v)) {
                    (Some(fid), Ok(ino)) => mdd::inode_at(tx, ino)?.is_none_or(|i| i.fid() != fid),
                    _ => true,
                };
                if stale {
                    tx.delete(Table::Oi, &k)?;
                    done.push((Fid::from_bytes(&k), records::parse_oi_value(&v).ok()));
                }
            }
            Ok(done)
        })
        .await
        .map_err(End::Failed)?;
    for (fid, ino) in &done {
        let fid = fid.map_or_else(|| "an undecodable FID".to_string(), |f| f.to_string());
        let ino = ino.map_or_else(
            || "an undecodable inode number".to_string(),
            |i| format!("inode {i}"),
        );
        eng.repairs.push(
            &eng.dev,
            format!("oi_scrub: stale index entry of {fid} (naming {ino}) removed"),
        );
    }
    Ok(done.len() as u64)
}

/// Counts a batch into the live progress and the record, and checkpoints when due.
async fn account(
    eng: &Arc<MdtLfsck>,
    mdt: &Arc<Mdt>,
    checked: u64,
    updated: u64,
    failed: u64,
    pos: u64,
    dryrun: bool,
) {
    let due = {
        let mut st = eng.state.lock();
        if updated > 0 {
            if st.scrub.pos_first_inconsistent == 0 {
                st.scrub.pos_first_inconsistent = pos.max(1);
            }
            if dryrun {
                st.scrub.flags |= SF_INCONSISTENT;
            }
        }
        st.scrub.items_updated += updated;
        st.scrub.items_failed += failed;
        match st.scrub_live.as_mut() {
            Some(live) => {
                live.new_checked += checked;
                live.position.oit_cookie = pos;
                live.checkpoint_due()
            }
            None => false,
        }
    };
    if due {
        eng.scrub_checkpoint(mdt).await;
    }
}
