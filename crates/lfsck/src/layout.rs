//! The layout component on an MDT (Lustre's `lfsck_layout` master): checks that the OST
//! objects its files' layouts reference and the objects' back-references (filter fids)
//! agree, and finds OST objects no layout references.
//!
//! Phase 1 reads the object table in windows, as the namespace component does, and asks
//! each OST about the objects of the window's files in one batch per OST
//! ([`LfsckRequest::Probe`]). Per stripe:
//!
//! | the OST says | and | it is | repair |
//! | --- | --- | --- | --- |
//! | not created (above LAST_ID) | | dangling | recreated empty with `-c` |
//! | no file, though created with one (lost, or removed) | | dangling | recreated empty with `-c` |
//! | no file, created lazily by an older store (never written, or removed) | the file's exact size says the stripe holds data | dangling | recreated empty with `-c` |
//! | filter fid names another file, which claims the object too | | multiply referenced | this file gets a copy of the object |
//! | filter fid names another file (which does not claim it) or another stripe | | unmatched pair | the filter fid is set to this file and stripe |
//! | an owner that is not the file's | | inconsistent owner | the object takes the file's owner |
//!
//! Dangling stripes wait for phase 2: an orphan whose filter fid names that very stripe
//! is put back into it (Lustre's `-d`, always on), and only the stripes left are
//! recreated. Phase 2 starts once every participant MDT finished phase 1, pages through
//! every OST's objects that hold data ([`LfsckRequest::Objects`]; each OST passes over the
//! objects this run's probes found referenced, see [`crate::ost`]), and takes those whose
//! filter fid names a file of this MDT (MDT0 also takes those whose filter fid names no
//! MDT). An object the file it names does not reference is an orphan: re-attached to a
//! dangling stripe of its file, or to the hole a rebuild left where it was lost; else (with `-o`), when its file is gone or has lost its
//! whole layout, the file's layout is rebuilt from all its orphans once the listing is
//! done (each object keeps its component's shape beside the filter fid, see
//! [`crate::rebuild`]), in the file itself or in a file of the same FID in
//! `.lustre/lost+found/MDTxxxx` named `[parent FID]-R-<n>` (`<n>` the first number free,
//! as Lustre names them); an orphan that fits no
//! rebuilt layout gets a new file of its own there, named `[parent FID]-R-<n>`, or
//! `[parent FID]-[object FID]-C-<n>` when its file holds another object there.
//! A LAST_ID behind the highest object of its sequence, or behind the objects an MDT was
//! told are precreated, is put back (`repaired_others`, flag `crashed_lastid`).
//!
//! An object that has an owner (given by a chown of its file, see `nacre_mdt::owner`)
//! and whose owner is not its file's is an inconsistent owner: it takes the file's. An
//! object never given one has nothing to compare, as in Lustre.
//!
//! A dry run (`-n`) counts what would be repaired and changes nothing. Phase 1's
//! position is checkpointed as the namespace component's is; phase 2 starts its listing
//! again when resumed, and dangling stripes found before a crash are found again by the
//! next run.

use crate::control::{
    AdaptiveWindow, End, Halt, Live, Pace, Throttle, bounded, end_status, halted, or_halt,
};
use crate::mdt::{Bookmark, LAYOUT, MdtLfsck};
use crate::namespace::SCRUB_WINDOW_SIZE;
use crate::namespace::facts::{local_claims, mdt_of};
use crate::namespace::repair::lost_found_dir;
use crate::rebuild;
use bytes::Bytes;
use nacre_core::layout::{DEFAULT_STRIPE_SIZE, LCME_FL_INIT, Layout};
use nacre_core::{Component, Errno, Fid, FileKind, OstLayout, StripeObject, Timespec};
use nacre_lustreapi::lfsck::{self as api, LayoutInconsistency, LfsckStatus};
use nacre_mdt::Mdt;
use nacre_mdt::mdd;
use nacre_mdt::records::{self, Inode};
use nacre_osd::Table;
use nacre_rpc::lfsck::{
    Event, LfsckReply, LfsckRequest, MAX_BATCH, NsFact, NsQuery, ObjCursor, ObjPresence, ObjState,
    OrphanObj, OstRepair, Outcome, Probe,
};
use nacre_rpc::msg::{Cred, Reply, Request};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;
use tokio::sync::{mpsc, watch};

/// The smallest adaptive window of MDT objects.
const WINDOW_MIN: usize = 64;
/// The largest adaptive window: its probes fit a few batches per OST.
const WINDOW_MAX: usize = 16384;
/// Dangling stripes kept for phase 2 (each a few dozen bytes); past it a dangling stripe
/// is handled at once, without waiting for an orphan that could fill it.
const DANGLING_MAX: usize = 65536;
/// Objects remembered as referenced by a layout whose filter fid did not name it (so
/// phase 2 does not take them for orphans in a dry run, which leaves the filter fid
/// wrong); past it, the run ends partial.
const MISMATCHED_MAX: usize = 65536;
/// Probe batches of one window in flight at once: enough for every OST of a large
/// window at the same time, few enough that a window's replies (up to [`MAX_BATCH`]
/// states each) stay within a few MiB.
const PROBES_IN_FLIGHT: usize = 16;
/// Bytes one read of an object copy moves (a copy for a multiply-referenced object).
const COPY_CHUNK: u32 = 4 << 20;
/// Orphans kept to rebuild their files' layouts from (each about a hundred bytes); past
/// it an orphan goes to lost+found alone.
const REBUILD_MAX: usize = 65536;

/// One stripe of a file, as phase 1 checks it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ref {
    pub(crate) file: Fid,
    pub(crate) comp: usize,
    pub(crate) stripe: u32,
    pub(crate) so: StripeObject,
    /// The file's exact size says this stripe holds data.
    pub(crate) expect_data: bool,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    /// The shape of its component, which its object keeps beside the filter fid.
    pub(crate) layout: Option<OstLayout>,
}

/// A run's context.
struct Cx<'a> {
    eng: &'a Arc<MdtLfsck>,
    mdt: &'a Arc<Mdt>,
    dryrun: bool,
    create_ostobj: bool,
    orphan: bool,
    failout: bool,
    /// OSTs that did not answer this run.
    gone: HashSet<u32>,
    partial: bool,
    /// Dangling stripes waiting for phase 2, by (file, stripe).
    dangling: BTreeMap<(Fid, u32), Ref>,
    /// Objects referenced by a layout whose filter fid names something else.
    mismatched: HashSet<(u32, Fid)>,
    /// Highest object seen per (OST, sequence), and its LAST_ID (every MDT lists every
    /// OST, so each puts back a LAST_ID it finds behind; the second finds it done).
    last_ids: HashMap<(u32, u64), (u32, u32)>,
    /// Orphans of lost files (or files that lost their layout), by file, rebuilt after
    /// the listing; [`REBUILD_MAX`] in all.
    rebuild: BTreeMap<Fid, Vec<(u32, OrphanObj)>>,
    rebuild_len: usize,
    /// This run, to the OSTs: its start in nanoseconds (never 0). The objects its probes
    /// find referenced are marked accessed by it, and its listing passes over them.
    run: u64,
}

/// Runs the layout component; returns how it ended.
pub(crate) async fn run(
    eng: &Arc<MdtLfsck>,
    mdt: &Arc<Mdt>,
    bm: &Bookmark,
    mut halt: watch::Receiver<Halt>,
    pace: Option<Pace>,
) -> LfsckStatus {
    let mut cx = Cx {
        eng,
        mdt,
        dryrun: bm.param & api::LPF_DRYRUN != 0,
        create_ostobj: bm.param & api::LPF_CREATE_OSTOBJ != 0,
        orphan: bm.param & api::LPF_OST_ORPHAN != 0,
        failout: bm.param & api::LPF_FAILOUT != 0,
        gone: HashSet::new(),
        partial: false,
        dangling: BTreeMap::new(),
        mismatched: HashSet::new(),
        last_ids: HashMap::new(),
        rebuild: BTreeMap::new(),
        rebuild_len: 0,
        run: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64 | 1),
    };
    let r = or_halt(halt.clone(), async {
        phase1(&mut cx, &mut halt, pace).await?;
        eng.enter_phase2(mdt, &LAYOUT).await;
        eng.notify_peers(Event::LayoutPhase1Done).await;
        let gone = eng.wait_peers(api::TYPE_LAYOUT, &mut halt).await;
        if let Some(h) = halted(&halt) {
            return Err(End::Halted(h));
        }
        if !gone.is_empty() {
            cx.partial = true;
        }
        phase2(&mut cx, &mut halt).await
    })
    .await;
    // Where it ended (or stopped) is the last checkpoint: a resumed run starts there.
    eng.checkpoint(mdt, &LAYOUT).await;
    end_status(r, cx.partial, &eng.dev, "layout")
}

/// Phase 1: every file of this MDT, window by window from the last checkpoint.
/// Coupled (`mdd.*.lfsck_coupled`), its windows are fixed, and with `pace` it keeps in
/// step with the other component's phase 1.
async fn phase1(
    cx: &mut Cx<'_>,
    halt: &mut watch::Receiver<Halt>,
    mut pace: Option<Pace>,
) -> Result<(), End> {
    let eng = cx.eng;
    let mut pos = eng.state.lock().lo.pos_last_checkpoint;
    let adaptive = eng.adaptive.load(Ordering::Relaxed) && !eng.coupled.load(Ordering::Relaxed);
    let mut win = AdaptiveWindow::new(SCRUB_WINDOW_SIZE, WINDOW_MIN, WINDOW_MAX, adaptive);
    let mut throttle = Throttle::new(eng.speed_limit.clone());
    loop {
        if let Some(p) = &pace {
            p.turn(halt).await;
        }
        if let Some(h) = halted(halt) {
            return Err(End::Halted(h));
        }
        let t0 = Instant::now();
        let store = cx.mdt.store().clone();
        let n = throttle.cap(win.value);
        let (refs, count, last, failed) =
            tokio::task::spawn_blocking(move || read_window(&store, pos, n))
                .await
                .map_err(|_| End::Failed(Errno::EIO))?
                .map_err(End::Failed)?;
        if count == 0 {
            return Ok(());
        }
        if failed > 0 {
            let mut st = eng.state.lock();
            st.lo.failed_phase1 += failed;
            if st.lo.pos_first_inconsistent == 0 {
                st.lo.pos_first_inconsistent = pos + 1;
            }
            if cx.failout {
                return Err(End::Failed(Errno::EIO));
            }
        }
        check_refs(cx, refs).await?;
        pos = last;
        let due = {
            let mut st = eng.state.lock();
            let live = st.lo_live.get_or_insert_with(Live::new);
            live.new_checked += count;
            live.position = api::LfsckPosition::at(pos);
            live.checkpoint_due()
        };
        if due {
            eng.checkpoint(cx.mdt, &LAYOUT).await;
        }
        win.observe(count as usize, t0.elapsed());
        if let Some(p) = pace.as_mut() {
            p.window_done();
        }
        throttle.after(count, halt).await;
    }
}

/// The stripes of up to `n` objects after inode number `pos`: (stripes, objects read,
/// last inode number, objects that could not be read).
fn read_window(
    store: &nacre_osd::MdStore,
    pos: u64,
    n: usize,
) -> Result<(Vec<Ref>, u64, u64, u64), Errno> {
    let v = store.read()?;
    let rows = v.range(
        Table::Inodes,
        &records::inode_key(pos.saturating_add(1)),
        &records::inode_key(u64::MAX),
        n,
    )?;
    let mut refs = Vec::new();
    let (mut count, mut last, mut failed) = (0u64, pos, 0u64);
    for (k, val) in rows {
        let Some(nr) = records::parse_inode_key(&k) else {
            continue;
        };
        count += 1;
        last = last.max(nr);
        let ino = match Inode::decode(&val, v.crash_gen()) {
            Ok(i) => i,
            Err(_) => {
                failed += 1;
                continue;
            }
        };
        stripes_of(&ino, &mut refs);
    }
    Ok((refs, count, last, failed))
}

/// The OST stripes of a regular file.
pub(crate) fn stripes_of(ino: &Inode, out: &mut Vec<Ref>) {
    if FileKind::from_mode(ino.attr.mode) != Some(FileKind::Regular) {
        return;
    }
    let Some(l) = &ino.layout else { return };
    for (ci, c) in l.components.iter().enumerate() {
        for (i, so) in c.objects.iter().enumerate() {
            // A stripe lost and left a hole by a rebuild: no object to check.
            if so.is_dummy() {
                continue;
            }
            out.push(Ref {
                file: ino.attr.fid,
                comp: ci,
                stripe: i as u32,
                so: *so,
                expect_data: ino.lsom_valid && c.object_size_for_file_size(i, ino.attr.size) > 0,
                uid: ino.attr.uid,
                gid: ino.attr.gid,
                layout: c.ost_layout(),
            });
        }
    }
}

/// A call to OST `idx`, bounded by [`crate::control::RPC_TIMEOUT`].
async fn call_ost(mdt: &Mdt, idx: u32, req: Request, bulk: Bytes) -> Result<(Reply, Bytes), Errno> {
    let osp = mdt.lod().osp(idx).ok_or(Errno::ENODEV)?;
    bounded(async { osp.import.call(&req, bulk).await.map_err(|e| e.errno()) }).await
}

async fn lfsck_ost(mdt: &Mdt, idx: u32, req: LfsckRequest) -> Result<LfsckReply, Errno> {
    match call_ost(mdt, idx, Request::Lfsck(req), Bytes::new()).await? {
        (Reply::Lfsck(r), _) => Ok(r),
        _ => Err(Errno::EPROTO),
    }
}

/// Probes a window's stripes, every OST's batches at once (so a window costs the slowest
/// OST's round trip, not the sum of all of theirs, and more OSTs do not slow the scan),
/// and checks each stripe in the window's order.
async fn check_refs(cx: &mut Cx<'_>, refs: Vec<Ref>) -> Result<(), End> {
    let mut by_ost: BTreeMap<u32, Vec<Ref>> = BTreeMap::new();
    for r in refs {
        by_ost.entry(r.so.ost_idx).or_default().push(r);
    }
    let mut batches: Vec<(u32, &[Ref])> = Vec::new();
    for (ost, refs) in &by_ost {
        for chunk in refs.chunks(MAX_BATCH) {
            if cx.gone.contains(ost) {
                cx.eng.state.lock().lo.skipped += chunk.len() as u64;
            } else {
                batches.push((*ost, chunk));
            }
        }
    }
    let (me, run) = (cx.mdt.index, cx.run);
    let mut in_flight = VecDeque::new();
    for (ost, chunk) in batches {
        let objs = chunk
            .iter()
            .map(|r| Probe {
                obj: r.so.fid,
                parent: r.file.with_ver(r.stripe),
            })
            .collect();
        let mdt = cx.mdt.clone();
        let probe = tokio::spawn(async move {
            lfsck_ost(&mdt, ost, LfsckRequest::Probe { mdt: me, run, objs }).await
        });
        in_flight.push_back((ost, chunk, probe));
        if in_flight.len() >= PROBES_IN_FLIGHT
            && let Some((ost, chunk, probe)) = in_flight.pop_front()
        {
            probed(cx, ost, chunk, probe.await.unwrap_or(Err(Errno::EIO))).await;
        }
    }
    while let Some((ost, chunk, probe)) = in_flight.pop_front() {
        probed(cx, ost, chunk, probe.await.unwrap_or(Err(Errno::EIO))).await;
    }
    Ok(())
}

/// Checks a batch of stripes of OST `ost` with what the OST said of them.
async fn probed(cx: &mut Cx<'_>, ost: u32, chunk: &[Ref], reply: Result<LfsckReply, Errno>) {
    match reply {
        Ok(LfsckReply::Probed(states)) if states.len() == chunk.len() => {
            for (r, s) in chunk.iter().zip(states) {
                check_one(cx, r, &s).await;
            }
        }
        other => {
            if cx.gone.insert(ost) {
                tracing::warn!(target: "lfsck", "{}: OST{ost:04x} did not answer ({:?}): its objects are left unchecked this run", cx.eng.dev, other.err());
            }
            cx.partial = true;
            cx.eng.state.lock().lo.skipped += chunk.len() as u64;
        }
    }
}

/// What one stripe's object is, from what its OST says of it: the online check and
/// `nacre check` ([`crate::offline_layout`]) judge a stripe alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Fine,
    Dangling,
    /// Its filter fid names the file, and its owner is not the file's.
    OwnerDiffers((u32, u32)),
    /// Its filter fid names another file or stripe.
    FilterFid(Fid),
}

pub(crate) fn verdict(r: &Ref, s: &ObjState) -> Verdict {
    let want = r.file.with_ver(r.stripe);
    match s.presence {
        ObjPresence::NotCreated | ObjPresence::Lost => Verdict::Dangling,
        ObjPresence::Empty if r.expect_data => Verdict::Dangling,
        ObjPresence::Empty => Verdict::Fine,
        // Another file's or stripe's filter fid, or else this stripe's own object (or one
        // that has none yet: filter fids come with the first write, and one only punched
        // has none), with only its owner to check.
        ObjPresence::File => match s.ff.filter(|ff| *ff != want) {
            None => match s.owner.filter(|o| *o != (r.uid, r.gid)) {
                Some(o) => Verdict::OwnerDiffers(o),
                None => Verdict::Fine,
            },
            Some(ff) => Verdict::FilterFid(ff),
        },
    }
}

/// Checks one stripe against what its OST says of the object.
async fn check_one(cx: &mut Cx<'_>, r: &Ref, s: &ObjState) {
    let want = r.file.with_ver(r.stripe);
    match verdict(r, s) {
        Verdict::Fine => {}
        Verdict::Dangling => dangling(cx, r).await,
        Verdict::OwnerDiffers(_) => owner_differs(cx, r).await,
        Verdict::FilterFid(ff) => {
            let other = ff.with_ver(0);
            let shared = other != r.file
                && claims(cx, other, r.so.ost_idx, r.so.fid, ff.ver).await == Some(true);
            if cx.mismatched.len() < MISMATCHED_MAX {
                cx.mismatched.insert((r.so.ost_idx, r.so.fid));
            } else {
                cx.partial = true;
            }
            if shared {
                let o = if cx.dryrun {
                    Outcome::Repaired
                } else {
                    copy_object(cx, r, s.size).await
                };
                done(cx, LayoutInconsistency::MultipleReferenced, o, r, false).await;
            } else {
                let o = ost_repair(
                    cx,
                    r.so.ost_idx,
                    OstRepair::SetFilterFid {
                        obj: r.so.fid,
                        old: Some(ff),
                        parent: want,
                        layout: r.layout,
                    },
                )
                .await;
                done(cx, LayoutInconsistency::UnmatchedPair, o, r, false).await;
            }
        }
    }
}

/// An object whose owner is not its file's, as the scan saw them. Under the file's owner
/// lock, so the owner log passes no owner on meanwhile, the file's owner and the
/// object's are read again: a chown since the scan read them, or one whose owner the log
/// has yet to pass on, is no inconsistency. The object
/// takes the file's owner (the MDT is trusted, as in Lustre).
async fn owner_differs(cx: &mut Cx<'_>, r: &Ref) {
    let mdt = cx.mdt.clone();
    let _g = mdt.owner_locks.lock(&r.file).await;
    let file_owner = {
        let Ok(mut v) = mdt.store().read() else {
            return;
        };
        // A chown's owner still on its way through the owner log is no inconsistency.
        if nacre_mdt::owner::owner_pending(&mut v, &r.file).unwrap_or(true) {
            return;
        }
        match mdd::get_inode(&mut v, &r.file) {
            Ok(i) => (i.attr.uid, i.attr.gid),
            // Gone since the scan: nothing to compare.
            Err(_) => return,
        }
    };
    // Run 0: a second look at the owner, which marks nothing.
    let probe = LfsckRequest::Probe {
        mdt: mdt.index,
        run: 0,
        objs: vec![Probe {
            obj: r.so.fid,
            parent: r.file.with_ver(r.stripe),
        }],
    };
    let obj_owner = match lfsck_ost(&mdt, r.so.ost_idx, probe).await {
        Ok(LfsckReply::Probed(s)) => s.first().and_then(|s| s.owner),
        _ => return,
    };
    if obj_owner.is_none_or(|o| o == file_owner) {
        return;
    }
    let o = ost_repair(
        cx,
        r.so.ost_idx,
        OstRepair::SetOwner {
            obj: r.so.fid,
            uid: file_owner.0,
            gid: file_owner.1,
        },
    )
    .await;
    done(cx, LayoutInconsistency::InconsistentOwner, o, r, false).await;
}

/// Whether `file` (on any MDT) holds object `obj` of OST `ost` as stripe `stripe`.
async fn claims(cx: &Cx<'_>, file: Fid, ost: u32, obj: Fid, stripe: u32) -> Option<bool> {
    let m = mdt_of(&file);
    if m == cx.mdt.index {
        let mut v = cx.mdt.store().read().ok()?;
        return local_claims(&mut v, &file, ost, &obj, stripe)
            .ok()
            .flatten();
    }
    let q = NsQuery::Claims {
        parent: file,
        ost,
        obj,
        stripe,
    };
    match cx.eng.call_mdt(m, LfsckRequest::NsFacts(vec![q])).await {
        Ok(LfsckReply::NsFacts(f)) => match f.first() {
            Some(NsFact::Claims(c)) => *c,
            _ => None,
        },
        _ => None,
    }
}

/// A dangling stripe: kept for phase 2, where an orphan may fill it.
async fn dangling(cx: &mut Cx<'_>, r: &Ref) {
    if cx.dangling.len() < DANGLING_MAX {
        cx.dangling.insert((r.file, r.stripe), *r);
    } else {
        settle_dangling(cx, r).await;
    }
}

/// A dangling stripe no orphan filled: recreated empty with `-c`, else reported.
async fn settle_dangling(cx: &mut Cx<'_>, r: &Ref) {
    if !cx.create_ostobj {
        let what = describe(cx.mdt, r.file).await;
        cx.eng.repairs.push(
            &cx.eng.dev,
            format!(
                "layout: found dangling (not repaired, no -c): {what} stripe {} object {} on OST{:04x}",
                r.stripe, r.so.fid, r.so.ost_idx
            ),
        );
        return;
    }
    let o = ost_repair(
        cx,
        r.so.ost_idx,
        OstRepair::Create {
            obj: r.so.fid,
            parent: r.file.with_ver(r.stripe),
            uid: r.uid,
            gid: r.gid,
        },
    )
    .await;
    done(cx, LayoutInconsistency::Dangling, o, r, true).await;
}

/// Counts and logs what became of a repair.
async fn done(cx: &Cx<'_>, what: LayoutInconsistency, o: Outcome, r: &Ref, phase2: bool) {
    let path = describe(cx.mdt, r.file).await;
    let at = format!(
        "{path} stripe {} object {} on OST{:04x}",
        r.stripe, r.so.fid, r.so.ost_idx
    );
    count(cx, what, o, phase2, &at);
}

fn count(cx: &Cx<'_>, what: LayoutInconsistency, o: Outcome, phase2: bool, at: &str) {
    let verb = if cx.dryrun { "found" } else { "repaired" };
    match o {
        Outcome::Repaired => {
            {
                let mut st = cx.eng.state.lock();
                st.lo.count(what);
                if cx.dryrun {
                    st.lo.flags |= api::FLAG_INCONSISTENT;
                }
            }
            cx.eng
                .repairs
                .push(&cx.eng.dev, format!("layout: {verb} {}: {at}", what.name()));
        }
        Outcome::Unneeded => {}
        Outcome::Failed(e) => {
            {
                let mut st = cx.eng.state.lock();
                if phase2 {
                    st.lo.failed_phase2 += 1;
                } else {
                    st.lo.failed_phase1 += 1;
                }
            }
            tracing::warn!(target: "lfsck", "{}: layout: cannot repair {}: {at}: {e}", cx.eng.dev, what.name());
        }
    }
}

/// "path FID" of a file, for the repair log.
async fn describe(mdt: &Arc<Mdt>, fid: Fid) -> String {
    match bounded(mdt.fid2path(fid)).await {
        Ok(p) => format!("/{} {fid}", String::from_utf8_lossy(&p)),
        Err(_) => format!("(no path) {fid}"),
    }
}

/// Makes repair `op` on OST `ost`: in a dry run, only counts it as made.
async fn ost_repair(cx: &mut Cx<'_>, ost: u32, op: OstRepair) -> Outcome {
    if cx.dryrun {
        // Counted as the repair it would be; nothing is sent.
        return Outcome::Repaired;
    }
    if cx.gone.contains(&ost) {
        return Outcome::Failed(Errno::ENOTCONN);
    }
    match lfsck_ost(cx.mdt, ost, LfsckRequest::OstRepair(vec![op])).await {
        Ok(LfsckReply::Outcomes(o)) => o.first().copied().unwrap_or(Outcome::Failed(Errno::EPROTO)),
        Ok(_) => Outcome::Failed(Errno::EPROTO),
        Err(e) => Outcome::Failed(e),
    }
}

/// Gives stripe `r` a copy of the object it shares with another file: a new object on
/// the same OST with the same bytes, then the layout points at it.
async fn copy_object(cx: &mut Cx<'_>, r: &Ref, size: u64) -> Outcome {
    let Some(osp) = cx.mdt.lod().osp(r.so.ost_idx) else {
        return Outcome::Failed(Errno::ENODEV);
    };
    let new = match osp.take().await {
        Ok(o) => o,
        Err(e) => return Outcome::Failed(e),
    };
    let parent = r.file.with_ver(r.stripe);
    let mut off = 0u64;
    while off < size {
        let len = COPY_CHUNK.min(u32::try_from(size - off).unwrap_or(COPY_CHUNK));
        let read = Request::OstRead {
            obj: r.so.fid,
            offset: off,
            len,
            cksum: None,
            torn: nacre_core::cksum::TornBlocks::Take,
            verify: nacre_core::cksum::ReadVerify::Target,
        };
        let data = match call_ost(cx.mdt, r.so.ost_idx, read, Bytes::new()).await {
            Ok((_, b)) => b,
            Err(e) => return Outcome::Failed(e),
        };
        if data.is_empty() {
            break;
        }
        let n = data.len() as u64;
        // The checker's own copy: not cached by any client, so no grant of one.
        let write = Request::OstWrite {
            obj: new.fid,
            parent,
            offset: off,
            cksum: None,
            grant: Default::default(),
            layout: r.layout,
        };
        if let Err(e) = call_ost(cx.mdt, r.so.ost_idx, write, data).await {
            return Outcome::Failed(e);
        }
        off += n;
    }
    set_slot(cx.mdt, r.file, r.comp, r.stripe, r.so, new).await
}

/// Stripe `stripe` of component `comp` of `file` becomes `new`, if it still is `old`.
async fn set_slot(
    mdt: &Mdt,
    file: Fid,
    comp: usize,
    stripe: u32,
    old: StripeObject,
    new: StripeObject,
) -> Outcome {
    let r = mdt
        .store()
        .write(move |tx| {
            let mut i = mdd::get_inode(tx, &file)?;
            let Some(l) = i.layout.as_mut() else {
                return Ok(false);
            };
            let Some(slot) = l
                .components
                .get_mut(comp)
                .and_then(|c| c.objects.get_mut(stripe as usize))
            else {
                return Ok(false);
            };
            if *slot != old {
                return Ok(false);
            }
            *slot = new;
            l.layout_gen = l.layout_gen.wrapping_add(1);
            i.attr.ctime = Timespec::now();
            mdd::put_inode(tx, &i)?;
            Ok(true)
        })
        .await;
    match r {
        Ok(true) => Outcome::Repaired,
        Ok(false) => Outcome::Unneeded,
        Err(e) => Outcome::Failed(e),
    }
}

/// Phase 2: every OST's objects that hold data, for orphans and LAST_ID; then the
/// dangling stripes no orphan filled.
async fn phase2(cx: &mut Cx<'_>, halt: &mut watch::Receiver<Halt>) -> Result<(), End> {
    let mut throttle = Throttle::new(cx.eng.speed_limit.clone());
    let osts = cx.mdt.lod().ost_count() as u32;
    // What this MDT was told is created on each OST (its precreated objects not handed
    // out yet): LAST_ID must cover it, or those would not exist on the OST. Taken before
    // the listing, whose LAST_IDs are read later: a precreation meanwhile raises both.
    let told: Vec<(u32, u64, u32)> = (0..osts)
        .filter_map(|ost| {
            cx.mdt
                .lod()
                .osp(ost)
                .map(|o| (ost, o.seq(), o.prealloc().1))
        })
        .collect();
    // Every OST lists its objects at once, a few pages ahead of the check.
    let listings: Vec<(u32, mpsc::Receiver<Result<Page, Errno>>)> = (0..osts)
        .filter(|ost| !cx.gone.contains(ost))
        .map(|ost| {
            (
                ost,
                list_objects(cx.mdt.clone(), ost, cx.run, cx.eng.speed_limit.clone()),
            )
        })
        .collect();
    for (ost, mut pages) in listings {
        loop {
            if let Some(h) = halted(halt) {
                return Err(End::Halted(h));
            }
            let (objs, last_ids, highest) = match pages.recv().await {
                None => break,
                Some(Ok(p)) => p,
                Some(Err(e)) => {
                    tracing::warn!(target: "lfsck", "{}: OST{ost:04x} did not list its objects ({e}): its orphans are left unchecked this run", cx.eng.dev);
                    cx.gone.insert(ost);
                    cx.partial = true;
                    break;
                }
            };
            for (seq, last) in last_ids {
                cx.last_ids.entry((ost, seq)).or_insert((0, last)).1 = last;
            }
            for (seq, top) in highest {
                if let Some(e) = cx.last_ids.get_mut(&(ost, seq)) {
                    e.0 = e.0.max(top);
                }
            }
            let n = objs.len() as u64;
            let (objs, held) = held_by_their_files(cx.mdt, ost, objs).await?;
            for (o, held) in objs.iter().zip(held) {
                if let Some(e) = cx.last_ids.get_mut(&(ost, o.obj.seq)) {
                    e.0 = e.0.max(o.obj.oid);
                }
                if !held {
                    check_object(cx, ost, o).await;
                }
            }
            {
                let mut st = cx.eng.state.lock();
                let live = st.lo_live.get_or_insert_with(Live::new);
                live.new_checked += n;
                live.phase2_fid = objs.last().map_or(Fid::ZERO, |o| o.obj);
            }
            throttle.after(n, halt).await;
        }
    }
    for (ost, seq, created) in told {
        if let Some(e) = cx.last_ids.get_mut(&(ost, seq)) {
            e.0 = e.0.max(created);
        }
    }
    last_id_behind(cx).await;
    let lost = std::mem::take(&mut cx.rebuild);
    for (file, objs) in lost {
        if let Some(h) = halted(halt) {
            return Err(End::Halted(h));
        }
        rebuild_layout(cx, file, objs).await;
    }
    let left: Vec<Ref> = std::mem::take(&mut cx.dangling).into_values().collect();
    for r in left {
        settle_dangling(cx, &r).await;
    }
    Ok(())
}

/// For each object of a page of OST `ost`, whether the file of this MDT its filter fid
/// names references it (nothing to check, the common case), read from one view of the
/// store on a blocking thread; the others go through [`check_object`].
async fn held_by_their_files(
    mdt: &Arc<Mdt>,
    ost: u32,
    objs: Vec<OrphanObj>,
) -> Result<(Vec<OrphanObj>, Vec<bool>), End> {
    let store = mdt.store().clone();
    let me = mdt.index;
    tokio::task::spawn_blocking(move || {
        let held = match store.read() {
            Ok(mut v) => objs
                .iter()
                .map(|o| {
                    let Some(p) = o.ff.map(|f| f.with_ver(0)) else {
                        return false;
                    };
                    let so = StripeObject {
                        ost_idx: ost,
                        fid: o.obj,
                    };
                    mdt_of(&p) == me
                        && mdd::get_inode(&mut v, &p).is_ok_and(|i| {
                            i.layout
                                .as_ref()
                                .is_some_and(|l| l.objects().any(|x| *x == so))
                        })
                })
                .collect(),
            Err(_) => vec![false; objs.len()],
        };
        (objs, held)
    })
    .await
    .map_err(|_| End::Failed(Errno::EIO))
}

/// A page of an OST's object listing: the objects, LAST_ID of each sequence it touched,
/// and the highest object of each it passed.
type Page = (Vec<OrphanObj>, Vec<(u64, u32)>, Vec<(u64, u32)>);

/// Pages of one OST's listing fetched ahead of the check: the next pages arrive while
/// one is checked; a page is at most [`MAX_BATCH`] objects of a few dozen bytes.
const LIST_AHEAD: usize = 2;

/// Lists OST `ost`'s objects that hold data and that run `run`'s phase 1 did not find
/// referenced, page by page, into a channel [`LIST_AHEAD`] pages deep; it ends after the
/// last page, a failed call (sent on), or when the check stops reading.
fn list_objects(
    mdt: Arc<Mdt>,
    ost: u32,
    run: u64,
    speed_limit: Arc<std::sync::atomic::AtomicU32>,
) -> mpsc::Receiver<Result<Page, Errno>> {
    let (tx, rx) = mpsc::channel(LIST_AHEAD);
    tokio::spawn(async move {
        // Only for its page size: under a speed limit, a tenth of a second's worth.
        let pace = Throttle::new(speed_limit);
        let mut from = Some(ObjCursor::default());
        while let Some(cur) = from {
            let max = pace.cap(MAX_BATCH) as u32;
            let req = LfsckRequest::Objects {
                mdt: mdt.index,
                run,
                from: cur,
                max,
            };
            let page = match lfsck_ost(&mdt, ost, req).await {
                Ok(LfsckReply::Objects {
                    objs,
                    next,
                    last_ids,
                    highest,
                }) => {
                    from = next;
                    Ok((objs, last_ids, highest))
                }
                Ok(_) => Err(Errno::EPROTO),
                Err(e) => Err(e),
            };
            let failed = page.is_err();
            if tx.send(page).await.is_err() || failed {
                return;
            }
        }
    });
    rx
}

/// Puts back each LAST_ID (of an OST sequence) that fell behind its highest object, so
/// the OST never hands out an object that exists, or refuses one this MDT handed out.
async fn last_id_behind(cx: &mut Cx<'_>) {
    let mut behind: Vec<((u32, u64), (u32, u32))> = cx
        .last_ids
        .iter()
        .filter(|(_, (max, last))| max > last)
        .map(|(k, v)| (*k, *v))
        .collect();
    behind.sort_unstable();
    for ((ost, seq), (max, last)) in behind {
        let o = ost_repair(cx, ost, OstRepair::SetLastId { seq, last: max }).await;
        if o == Outcome::Repaired {
            cx.eng.state.lock().lo.flags |= api::FLAG_CRASHED_LASTID;
        }
        let at = format!("OST{ost:04x} sequence {seq:#x}: LAST_ID {last} behind object {max}");
        count(cx, LayoutInconsistency::Others, o, true, &at);
    }
}

/// Whether an object that holds data is an orphan of a file of this MDT, and what to do
/// with it.
async fn check_object(cx: &mut Cx<'_>, ost: u32, o: &OrphanObj) {
    let parent = o.ff.map(|f| f.with_ver(0));
    let stripe = o.ff.map_or(0, |f| f.ver);
    let mdts = cx.mdt.mdt_count();
    let owner = parent.map_or(0, |p| {
        let m = mdt_of(&p);
        if m < mdts && !p.is_zero() { m } else { 0 }
    });
    if owner != cx.mdt.index || cx.mismatched.contains(&(ost, o.obj)) {
        return;
    }
    let so = StripeObject {
        ost_idx: ost,
        fid: o.obj,
    };
    // The file it names, read now (files come and go while the check runs).
    let file = match parent {
        Some(p) if mdt_of(&p) == cx.mdt.index => {
            let Ok(mut v) = cx.mdt.store().read() else {
                return;
            };
            match mdd::get_inode(&mut v, &p) {
                Ok(i) => Some(i),
                Err(Errno::ENOENT) => None,
                Err(_) => return,
            }
        }
        _ => None,
    };
    if let Some(i) = &file
        && i.layout
            .as_ref()
            .is_some_and(|l| l.objects().any(|x| *x == so))
    {
        return;
    }
    let r = Ref {
        file: parent.unwrap_or(Fid::ZERO),
        comp: 0,
        stripe,
        so,
        expect_data: false,
        uid: 0,
        gid: 0,
        layout: o.layout,
    };
    // A dangling stripe of its file, on the same OST or not: it goes back there.
    if let Some(p) = parent
        && let Some(d) = cx.dangling.get(&(p, stripe)).copied()
    {
        let o = if cx.dryrun {
            Outcome::Repaired
        } else {
            set_slot(cx.mdt, p, d.comp, stripe, d.so, so).await
        };
        if o == Outcome::Repaired {
            cx.dangling.remove(&(p, stripe));
        }
        done(cx, LayoutInconsistency::Orphan, o, &r, true).await;
        return;
    }
    // The hole a rebuild left for this very stripe (Lustre's
    // lfsck_layout_extend_recovered_lovea): the object goes back there.
    if let (Some(p), Some(i), Some(l)) = (parent, &file, o.layout)
        && let Some(ci) = hole_for(i, &l, stripe)
    {
        let out = if cx.dryrun {
            Outcome::Repaired
        } else {
            set_slot(cx.mdt, p, ci, stripe, StripeObject::DUMMY, so).await
        };
        done(cx, LayoutInconsistency::Orphan, out, &r, true).await;
        return;
    }
    // The file is gone, or has lost its whole layout: with -o, its orphans rebuild it
    // once the listing is done.
    if cx.orphan
        && let (Some(p), Some(_)) = (parent, o.layout)
        && !p.is_zero()
        && file.as_ref().is_none_or(references_nothing)
        && cx.rebuild_len < REBUILD_MAX
    {
        cx.rebuild_len += 1;
        cx.rebuild.entry(p).or_default().push((ost, *o));
        return;
    }
    alone(cx, ost, o, file.is_some()).await;
}

/// The component of `i` whose slot `stripe` is a hole and whose shape is `l`, the one
/// an orphan's filter fid says it was a stripe of.
fn hole_for(i: &Inode, l: &OstLayout, stripe: u32) -> Option<usize> {
    i.layout.as_ref()?.components.iter().position(|c| {
        c.ost_layout().is_some_and(|cl| cl == *l)
            && c.objects
                .get(stripe as usize)
                .is_some_and(StripeObject::is_dummy)
    })
}

/// A file whose layout names no object at all (none, or lost): what its orphans can
/// rebuild without taking anything from it.
fn references_nothing(i: &Inode) -> bool {
    i.layout
        .as_ref()
        .is_none_or(|l| l.objects().next().is_none() && l.dom_object().is_none())
}

/// An orphan that goes to lost+found as a file of its own (with `-o`; reported without).
async fn alone(cx: &mut Cx<'_>, ost: u32, o: &OrphanObj, file_exists: bool) {
    let parent = o.ff.map(|f| f.with_ver(0));
    let so = StripeObject {
        ost_idx: ost,
        fid: o.obj,
    };
    // Lustre's names: `-<n>` is the first number free in lost+found.
    let prefix = match (parent, file_exists) {
        (Some(p), true) => format!("{p}-{}-C", o.obj),
        (Some(p), false) => format!("{p}-R"),
        (None, _) => format!("{}-R", o.obj),
    };
    if !cx.orphan {
        cx.eng.repairs.push(
            &cx.eng.dev,
            format!(
                "layout: found orphan (not repaired, no -o): object {} on OST{ost:04x}, filter fid {}",
                o.obj,
                o.ff.map_or("none".to_string(), |f| f.to_string())
            ),
        );
        return;
    }
    let (out, name) = if cx.dryrun {
        (Outcome::Repaired, format!("{prefix}-<n>"))
    } else {
        match to_lost_found(cx, so, o, &prefix).await {
            Ok(name) => (Outcome::Repaired, name),
            Err(e) => (Outcome::Failed(e), format!("{prefix}-<n>")),
        }
    };
    let at = format!(
        "object {} on OST{ost:04x} as .lustre/lost+found/MDT{:04x}/{name}",
        o.obj, cx.mdt.index
    );
    count(cx, LayoutInconsistency::Orphan, out, true, &at);
}

/// Rebuilds the layout of `file` from its orphans (see [`crate::rebuild`]): into the
/// file if it still exists (it lost its layout), else into a file of the same FID in
/// this MDT's lost+found named `[FID]-R-<n>` (mode 0400, owned as its objects
/// are), as Lustre's LFSCK recreates a lost parent. Each orphan placed counts as one
/// repaired orphan; those that fit no consistent layout go to lost+found alone.
async fn rebuild_layout(cx: &mut Cx<'_>, file: Fid, objs: Vec<(u32, OrphanObj)>) {
    let pieces = objs
        .iter()
        .filter_map(|(ost, o)| {
            Some(rebuild::Piece {
                stripe: o.ff?.ver,
                obj: StripeObject {
                    ost_idx: *ost,
                    fid: o.obj,
                },
                layout: o.layout?,
                size: o.size,
            })
        })
        .collect();
    let plan = rebuild::plan(pieces);
    let owner = objs.iter().find_map(|(_, o)| o.owner).unwrap_or((0, 0));
    let placed: Vec<(u32, u32, Fid)> = plan
        .comps
        .iter()
        .flat_map(|c| {
            c.slots
                .iter()
                .enumerate()
                .filter_map(|(s, o)| o.map(|o| (o.ost_idx, s as u32, o.fid)))
        })
        .collect();
    // Stripes lost, a lost start included: the holes of the layout.
    let mut holes = 0;
    let out = if placed.is_empty() {
        Outcome::Unneeded
    } else if cx.dryrun {
        Outcome::Repaired
    } else {
        match plan.layout() {
            Some(layout) => {
                let size = plan.size(&layout);
                holes = layout
                    .components
                    .iter()
                    .flat_map(|c| &c.objects)
                    .filter(|o| o.is_dummy())
                    .count();
                put_layout(cx, file, layout, size, owner).await
            }
            None => Outcome::Failed(Errno::EINVAL),
        }
    };
    if out == Outcome::Repaired && holes > 0 {
        tracing::warn!(target: "lfsck", "{}: layout: lost file {file} rebuilt with {holes} stripes lost (a hole in its layout: reading or writing them fails with EIO)", cx.eng.dev);
    }
    let rebuilt = out == Outcome::Repaired;
    if let Outcome::Failed(e) = out {
        tracing::warn!(target: "lfsck", "{}: layout: cannot rebuild the layout of lost file {file} from {} objects: {e}; they go to lost+found alone", cx.eng.dev, placed.len());
    }
    let path = match rebuilt {
        true => describe(cx.mdt, file).await,
        false => String::new(),
    };
    let mut left = Vec::new();
    for (ost, o) in &objs {
        if rebuilt && placed.iter().any(|(po, _, pf)| po == ost && *pf == o.obj) {
            let stripe = o.ff.map_or(0, |f| f.ver);
            let at = format!(
                "object {} on OST{ost:04x} as stripe {stripe} of {path} (layout rebuilt)",
                o.obj
            );
            count(
                cx,
                LayoutInconsistency::Orphan,
                Outcome::Repaired,
                true,
                &at,
            );
        } else {
            left.push((*ost, o));
        }
    }
    let exists = rebuilt || {
        let v = cx.mdt.store().read();
        v.is_ok_and(|mut v| mdd::get_inode(&mut v, &file).is_ok())
    };
    for (ost, o) in left {
        alone(cx, ost, o, exists).await;
    }
}

/// Stores a rebuilt layout: into `file` if it exists and still names no object, else
/// into a new file of that FID in lost+found.
async fn put_layout(
    cx: &mut Cx<'_>,
    file: Fid,
    mut layout: Layout,
    size: u64,
    owner: (u32, u32),
) -> Outcome {
    let lpf = match lost_found_dir(cx.mdt).await {
        Ok(f) => f,
        Err(e) => return Outcome::Failed(e),
    };
    let me = cx.mdt.index;
    let now = Timespec::now();
    let r = cx
        .mdt
        .store()
        .write(move |tx| {
            match mdd::get_inode(tx, &file) {
                Ok(mut i) => {
                    if !references_nothing(&i) {
                        return Ok(false);
                    }
                    if let Some(old) = &i.layout {
                        layout.layout_gen = old.layout_gen.wrapping_add(1);
                    }
                    i.layout = Some(layout);
                    i.attr.size = i.attr.size.max(size);
                    i.lsom_valid = true;
                    i.attr.ctime = now;
                    mdd::put_inode(tx, &i)?;
                    return Ok(true);
                }
                Err(Errno::ENOENT) => {}
                Err(e) => return Err(e),
            }
            let name = free_name(tx, &lpf, &format!("{file}-R"))?;
            let a = mdd::CreateArgs {
                parent: lpf,
                name,
                mode: libc::S_IFREG | 0o400,
                rdev: 0,
                cred: Cred::root(),
                symlink: None,
                layout: Some(layout),
                fid: Some(file),
                now,
                open_for_write: false,
            };
            let mut i = match mdd::create(tx, me, a, false)? {
                mdd::Created::New(i) => i,
                mdd::Created::Existing(_) => return Ok(false),
            };
            i.attr.size = size;
            i.attr.uid = owner.0;
            i.attr.gid = owner.1;
            i.lsom_valid = true;
            mdd::put_inode(tx, &i)?;
            Ok(true)
        })
        .await;
    match r {
        Ok(true) => Outcome::Repaired,
        Ok(false) => Outcome::Unneeded,
        Err(e) => Outcome::Failed(e),
    }
}

/// The first of `prefix-0`, `prefix-1`, ... that `lpf` does not hold yet (Lustre's
/// `lfsck_layout_recreate_parent`).
fn free_name<R: nacre_osd::KvRead>(tx: &mut R, lpf: &Fid, prefix: &str) -> Result<Vec<u8>, Errno> {
    let mut idx = 0u32;
    loop {
        let name = format!("{prefix}-{idx}").into_bytes();
        if mdd::lookup(tx, lpf, &name)?.is_none() {
            return Ok(name);
        }
        idx += 1;
    }
}

/// Gives an orphan a new file in this MDT's lost+found, its only stripe.
/// Returns the name it was given.
async fn to_lost_found(
    cx: &mut Cx<'_>,
    so: StripeObject,
    o: &OrphanObj,
    prefix: &str,
) -> Result<String, Errno> {
    let lpf = lost_found_dir(cx.mdt).await?;
    let me = cx.mdt.index;
    let size = o.size;
    let mut layout = Layout::plain(1, DEFAULT_STRIPE_SIZE, so.ost_idx as i32);
    if let Some(c) = layout.components.first_mut() {
        c.objects = vec![so];
        c.flags |= LCME_FL_INIT;
    }
    let lone = layout.components.first().and_then(Component::ost_layout);
    let now = Timespec::now();
    let prefix = prefix.to_string();
    let (fid, name) = cx
        .mdt
        .store()
        .write(move |tx| {
            let name = free_name(tx, &lpf, &prefix)?;
            let a = mdd::CreateArgs {
                parent: lpf,
                name: name.clone(),
                mode: libc::S_IFREG | 0o600,
                rdev: 0,
                cred: Cred::root(),
                symlink: None,
                layout: Some(layout),
                fid: None,
                now,
                open_for_write: false,
            };
            let mut i = match mdd::create(tx, me, a, false)? {
                mdd::Created::New(i) | mdd::Created::Existing(i) => i,
            };
            i.attr.size = size;
            i.lsom_valid = true;
            mdd::put_inode(tx, &i)?;
            Ok((i.attr.fid, name))
        })
        .await?;
    match ost_repair(
        cx,
        so.ost_idx,
        OstRepair::SetFilterFid {
            obj: so.fid,
            old: o.ff,
            parent: fid.with_ver(0),
            layout: lone,
        },
    )
    .await
    {
        Outcome::Failed(e) => Err(e),
        _ => Ok(String::from_utf8_lossy(&name).into_owned()),
    }
}
