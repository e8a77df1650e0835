//! The namespace component on an MDT: phase 1 over the object table, then (once every
//! participant MDT finished its phase 1) phase 2 over the objects phase 1 traced. See
//! [`check`] for what is checked and how it is repaired.
//!
//! Phase 1 reads the object table in windows of inodes from store snapshots, on
//! blocking threads; facts from other MDTs are fetched in batches between rounds, and
//! repairs made after each window, so a window's reads never wait on the network. Its
//! position (the last inode number done) is saved every [`CHECKPOINT_INTERVAL`], and a
//! stopped or crashed run resumes there. Phase 2 reads its work from the trace table,
//! which phase 1 fills in the same store, so it resumes too.
//!
//! [`CHECKPOINT_INTERVAL`]: crate::control::CHECKPOINT_INTERVAL

pub mod check;
pub mod facts;
pub mod repair;

use crate::control::{
    AdaptiveWindow, End, Halt, Live, Pace, Throttle, bounded, end_status, halted, or_halt,
};
use crate::mdt::{Bookmark, MdtLfsck, NAMESPACE};
use check::{Finding, Kind, Opts, Repair, Scan};
use facts::{Busy, FactCache, LocalObj, OnlineFacts, mdt_of, obj_facts};
use nacre_core::{Errno, Fid, Timespec};
use nacre_lustreapi::lfsck::{self as api, LfsckStatus, NamespaceStatus};
use nacre_mdt::Mdt;
use nacre_mdt::mdd;
use nacre_mdt::records::{self, Inode};
use nacre_osd::{MdStore, Table};
use nacre_rpc::lfsck::{Event, LfsckReply, LfsckRequest, NsFact, NsQuery, NsRepair, Outcome};
use nacre_rpc::msg::DneUpdate;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;
use tokio::sync::watch;

/// Lustre's `SCRUB_WINDOW_SIZE`: objects read per window when windows do not adapt, and
/// where an adaptive window starts.
pub const SCRUB_WINDOW_SIZE: usize = 1024;
/// The smallest adaptive window: a window is never so small that its round trips to
/// other MDTs dominate.
const WINDOW_MIN: usize = 64;
/// The largest adaptive window: one window's decoded inodes stay within a few MiB.
const WINDOW_MAX: usize = 16384;
/// Rounds of questions to other MDTs one window may need (a name, then the object it
/// names, then that object's own name): past them the objects left count as failed.
const MAX_ROUNDS: usize = 4;
/// Trace rows read per phase-2 step.
const TRACE_PAGE: usize = 1024;
/// Trace rows read per phase-2 step under a speed limit, at least: an object's rows
/// (one per link it lacks) stay on one page.
const TRACE_PAGE_MIN: usize = 64;
/// Links as `(parent, name)`.
pub type Links = Vec<(Fid, Vec<u8>)>;

/// What one window of phase 1 (or one page of phase 2) found.
#[derive(Default)]
struct Round {
    scan: Scan,
    /// Objects (inode numbers) whose checks wait for facts from other MDTs.
    deferred: Vec<u64>,
    wanted: Vec<(u32, NsQuery)>,
    /// Inodes read.
    count: u64,
    /// The last inode number read.
    last: u64,
    failed: u64,
}

/// A run's context.
struct Cx<'a> {
    eng: &'a Arc<MdtLfsck>,
    mdt: &'a Arc<Mdt>,
    opts: Opts,
    failout: bool,
    /// MDTs that did not answer this run.
    gone: HashSet<u32>,
    partial: bool,
}

/// Runs the namespace component; returns how it ended.
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
        opts: Opts {
            dryrun: bm.param & api::LPF_DRYRUN != 0,
            create_mdtobj: bm.param & api::LPF_CREATE_MDTOBJ != 0,
        },
        failout: bm.param & api::LPF_FAILOUT != 0,
        gone: HashSet::new(),
        partial: false,
    };
    let r = or_halt(halt.clone(), async {
        dne_records(&mut cx).await?;
        phase1(&mut cx, &mut halt, pace).await?;
        eng.enter_phase2(mdt, &NAMESPACE).await;
        eng.notify_peers(Event::NamespacePhase1Done).await;
        let gone = eng.wait_peers(api::TYPE_NAMESPACE, &mut halt).await;
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
    eng.checkpoint(mdt, &NAMESPACE).await;
    end_status(r, cx.partial, &eng.dev, "namespace")
}

/// Empties the namespace trace (a run started with `-r`).
pub async fn clear_trace(mdt: &Mdt) -> Result<(), Errno> {
    loop {
        let rows = mdt
            .store()
            .read()?
            .range(Table::LfsckTrace, &[], &[0xff; 17], 4096)?;
        if rows.is_empty() {
            return Ok(());
        }
        mdt.store()
            .write(move |tx| {
                for (k, _) in rows {
                    tx.delete(Table::LfsckTrace, &k)?;
                }
                Ok(())
            })
            .await?;
    }
}

/// Distributed-operation records no recovery can finish.
async fn dne_records(cx: &mut Cx<'_>) -> Result<(), End> {
    let count = cx.mdt.mdt_count();
    let findings = {
        let mut v = cx.mdt.store().read().map_err(End::Failed)?;
        check::dne_records(&mut v, count).map_err(End::Failed)?
    };
    apply_findings(cx, findings, false).await;
    Ok(())
}

/// Phase 1: every object of this MDT, window by window from the last checkpoint.
/// Coupled (`mdd.*.lfsck_coupled`), its windows are fixed, and with `pace` it keeps in
/// step with the other component's phase 1.
async fn phase1(
    cx: &mut Cx<'_>,
    halt: &mut watch::Receiver<Halt>,
    mut pace: Option<Pace>,
) -> Result<(), End> {
    let eng = cx.eng;
    let mut pos = eng.state.lock().ns.pos_last_checkpoint.oit_cookie;
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
        let mut round = scan_round(
            cx,
            What::From(pos, throttle.cap(win.value)),
            &FactCache::new(),
        )
        .await?;
        if round.count == 0 {
            return Ok(());
        }
        let mut scan = std::mem::take(&mut round.scan);
        let mut failed = round.failed;
        // Checks that need another MDT's facts: ask, and run them again.
        let mut cache = FactCache::new();
        let mut deferred = std::mem::take(&mut round.deferred);
        let mut wanted = std::mem::take(&mut round.wanted);
        for _ in 0..MAX_ROUNDS {
            if deferred.is_empty() {
                break;
            }
            fetch_facts(cx, &wanted, &mut cache).await;
            let r = scan_round(cx, What::Only(std::mem::take(&mut deferred)), &cache).await?;
            scan.merge(r.scan);
            failed += r.failed;
            deferred = r.deferred;
            wanted = r.wanted;
        }
        if !deferred.is_empty() {
            failed += deferred.len() as u64;
            cx.partial = true;
        }
        write_trace(cx.mdt, &scan.trace)
            .await
            .map_err(End::Failed)?;
        {
            let mut st = eng.state.lock();
            let ns = &mut st.ns;
            ns.dirs_checked += scan.dirs;
            ns.striped_dirs_scanned += scan.striped_dirs;
            ns.striped_shards_scanned += scan.shards;
            ns.mul_linked_checked += scan.mul_linked;
            ns.items_failed += failed;
            if failed > 0 && ns.pos_first_inconsistent.is_zero() {
                ns.pos_first_inconsistent = api::LfsckPosition::at(pos + 1);
            }
        }
        if failed > 0 && cx.failout {
            return Err(End::Failed(Errno::EIO));
        }
        apply_findings(cx, scan.findings, false).await;
        pos = round.last;
        let n = round.count;
        let due = {
            let mut st = eng.state.lock();
            let live = st.ns_live.get_or_insert_with(Live::new);
            live.new_checked += n;
            live.position = api::LfsckPosition::at(pos);
            live.checkpoint_due()
        };
        if due {
            eng.checkpoint(cx.mdt, &NAMESPACE).await;
        }
        win.observe(n as usize, t0.elapsed());
        if let Some(p) = pace.as_mut() {
            p.window_done();
        }
        throttle.after(n, halt).await;
    }
}

enum What {
    /// A window: up to `n` objects after inode number `pos`.
    From(u64, usize),
    /// These objects again.
    Only(Vec<u64>),
}

/// Reads and checks a window (phase 1) on a blocking thread.
async fn scan_round(cx: &Cx<'_>, what: What, cache: &FactCache) -> Result<Round, End> {
    let store = cx.mdt.store().clone();
    let me = cx.mdt.index;
    let opts = cx.opts;
    let cache = cache.clone();
    let gone = cx.gone.clone();
    tokio::task::spawn_blocking(move || scan_round_sync(&store, me, what, opts, &cache, &gone))
        .await
        .map_err(|_| End::Failed(Errno::EIO))?
        .map_err(End::Failed)
}

fn scan_round_sync(
    store: &MdStore,
    me: u32,
    what: What,
    opts: Opts,
    cache: &FactCache,
    gone: &HashSet<u32>,
) -> Result<Round, Errno> {
    let mut v = store.read()?;
    let busy = Busy::read(&mut v)?;
    let mut round = Round::default();
    let objs: Vec<(u64, Result<Inode, Errno>)> = match what {
        What::From(pos, n) => {
            let rows = v.range(
                Table::Inodes,
                &records::inode_key(pos.saturating_add(1)),
                &records::inode_key(u64::MAX),
                n,
            )?;
            rows.into_iter()
                .filter_map(|(k, val)| {
                    let nr = records::parse_inode_key(&k)?;
                    Some((nr, Inode::decode(&val, v.crash_gen())))
                })
                .collect()
        }
        What::Only(inos) => inos
            .into_iter()
            .filter_map(|nr| match mdd::inode_at(&mut v, nr) {
                Ok(Some(i)) => Some((nr, Ok(i))),
                Ok(None) => None,
                Err(e) => Some((nr, Err(e))),
            })
            .collect(),
    };
    for (nr, ino) in objs {
        round.count += 1;
        round.last = round.last.max(nr);
        let Ok(mut ino) = ino else {
            round.failed += 1;
            continue;
        };
        ino.ino = nr;
        let facts = match obj_facts(&mut v, &ino, &busy) {
            Ok(f) => f,
            Err(_) => {
                round.failed += 1;
                continue;
            }
        };
        let x = LocalObj { ino, facts };
        let mut wanted = Vec::new();
        let mut one = Scan::default();
        let mut f = OnlineFacts {
            me,
            view: &mut v,
            busy: &busy,
            cache,
            wanted: &mut wanted,
            gone,
        };
        match check::phase1(&mut f, &x, &opts, &mut one) {
            Ok(true) => round.scan.merge(one),
            Ok(false) if wanted.is_empty() => round.failed += 1,
            Ok(false) => {
                round.deferred.push(nr);
                for w in wanted {
                    if !round.wanted.contains(&w) {
                        round.wanted.push(w);
                    }
                }
            }
            Err(e) => {
                tracing::debug!(target: "lfsck", "MDT{me:04x}: checking {}: {e}", x.facts.fid);
                round.failed += 1;
            }
        }
    }
    Ok(round)
}

/// Asks each MDT its questions, in batches; an MDT that does not answer is left out of
/// the rest of the run.
async fn fetch_facts(cx: &mut Cx<'_>, wanted: &[(u32, NsQuery)], cache: &mut FactCache) {
    let mut by_mdt: std::collections::BTreeMap<u32, Vec<NsQuery>> = Default::default();
    for (m, q) in wanted {
        if !cx.gone.contains(m) && !cache.contains_key(&(*m, q.clone())) {
            by_mdt.entry(*m).or_default().push(q.clone());
        }
    }
    for (m, qs) in by_mdt {
        for chunk in qs.chunks(nacre_rpc::lfsck::MAX_BATCH) {
            match cx
                .eng
                .call_mdt(m, LfsckRequest::NsFacts(chunk.to_vec()))
                .await
            {
                Ok(LfsckReply::NsFacts(facts)) if facts.len() == chunk.len() => {
                    for (q, f) in chunk.iter().zip(facts) {
                        cache.insert((m, q.clone()), f);
                    }
                }
                other => {
                    tracing::warn!(target: "lfsck", "{}: MDT{m:04x} did not answer ({:?}): its part of the namespace is left unchecked this run", cx.eng.dev, other.err());
                    cx.gone.insert(m);
                    cx.partial = true;
                    break;
                }
            }
        }
    }
}

/// Writes phase-2 work into the trace table.
async fn write_trace(mdt: &Mdt, fids: &[Fid]) -> Result<(), Errno> {
    if fids.is_empty() {
        return Ok(());
    }
    let fids = fids.to_vec();
    mdt.store()
        .write(move |tx| {
            for f in &fids {
                repair::trace_put(tx, f)?;
            }
            Ok(())
        })
        .await
}

/// Phase 2: the traced objects.
async fn phase2(cx: &mut Cx<'_>, halt: &mut watch::Receiver<Halt>) -> Result<(), End> {
    let mut throttle = Throttle::new(cx.eng.speed_limit.clone());
    let mut start: Vec<u8> = Vec::new();
    loop {
        if let Some(h) = halted(halt) {
            return Err(End::Halted(h));
        }
        let page = throttle.cap(TRACE_PAGE).max(TRACE_PAGE_MIN);
        let rows = cx
            .mdt
            .store()
            .read()
            .and_then(|v| v.range(Table::LfsckTrace, &start, &[0xff; 17], page))
            .map_err(End::Failed)?;
        if rows.is_empty() {
            return Ok(());
        }
        // Group the rows by object; a group the page cut in two waits for the next page.
        let full = rows.len() == page;
        let mut groups: Vec<(Fid, Links, Vec<Vec<u8>>)> = Vec::new();
        for (k, _) in &rows {
            let Some(fid) = Fid::from_bytes(k) else {
                continue;
            };
            if groups.last().is_none_or(|g| g.0 != fid) {
                groups.push((fid, Vec::new(), Vec::new()));
            }
            let Some(g) = groups.last_mut() else { continue };
            g.2.push(k.clone());
            if k.len() > 32
                && let Some(p) = Fid::from_bytes(&k[16..32])
            {
                g.1.push((p, k[32..].to_vec()));
            }
        }
        if full && groups.len() > 1 {
            groups.pop();
        }
        if let Some(g) = groups.last()
            && let Some(k) = g.2.last()
        {
            start = k.clone();
            start.push(0);
        }
        let n = groups.len() as u64;
        let last_fid = groups.last().map_or(Fid::ZERO, |g| g.0);
        let keys: Vec<Vec<u8>> = groups.iter().flat_map(|g| g.2.clone()).collect();
        let work: Traced = groups.into_iter().map(|(f, l, _)| (f, l)).collect();
        let (scan, failed) = check_traced(cx, work).await?;
        cx.eng.state.lock().ns.objs_failed_phase2 += failed;
        apply_findings(cx, scan.findings, true).await;
        cx.eng.state.lock().ns.mul_linked_checked += scan.mul_linked;
        cx.mdt
            .store()
            .write(move |tx| {
                for k in keys {
                    tx.delete(Table::LfsckTrace, &k)?;
                }
                Ok(())
            })
            .await
            .map_err(End::Failed)?;
        {
            let mut st = cx.eng.state.lock();
            let live = st.ns_live.get_or_insert_with(Live::new);
            live.new_checked += n;
            live.phase2_fid = last_fid;
        }
        throttle.after(n, halt).await;
    }
}

/// Runs phase 2's checks on traced objects, asking other MDTs what they need.
async fn check_traced(cx: &mut Cx<'_>, work: Traced) -> Result<(Scan, u64), End> {
    let mut cache = FactCache::new();
    let mut out = Scan::default();
    let mut failed = 0u64;
    let mut todo = work;
    for round in 0..=MAX_ROUNDS {
        if todo.is_empty() {
            break;
        }
        let store = cx.mdt.store().clone();
        let me = cx.mdt.index;
        let opts = cx.opts;
        let c = cache.clone();
        let gone = cx.gone.clone();
        let batch = std::mem::take(&mut todo);
        let (scan, deferred, wanted, bad) = tokio::task::spawn_blocking(move || {
            check_traced_sync(&store, me, batch, opts, &c, &gone)
        })
        .await
        .map_err(|_| End::Failed(Errno::EIO))?
        .map_err(End::Failed)?;
        out.merge(scan);
        failed += bad;
        todo = deferred;
        if todo.is_empty() {
            break;
        }
        if round == MAX_ROUNDS {
            failed += todo.len() as u64;
            cx.partial = true;
            break;
        }
        fetch_facts(cx, &wanted, &mut cache).await;
    }
    Ok((out, failed))
}

type Traced = Vec<(Fid, Links)>;
/// What checking traced objects found, the objects left for facts from other MDTs, the
/// questions for those, and how many failed.
type TracedRound = (Scan, Traced, Vec<(u32, NsQuery)>, u64);

fn check_traced_sync(
    store: &MdStore,
    me: u32,
    work: Traced,
    opts: Opts,
    cache: &FactCache,
    gone: &HashSet<u32>,
) -> Result<TracedRound, Errno> {
    let mut v = store.read()?;
    let busy = Busy::read(&mut v)?;
    let mut out = Scan::default();
    let mut deferred = Vec::new();
    let mut all_wanted = Vec::new();
    let mut failed = 0;
    for (fid, extra) in work {
        let x = match facts::local_object(&mut v, &fid, 0, &busy) {
            Ok(Some(x)) => x,
            Ok(None) => continue,
            Err(_) => {
                failed += 1;
                continue;
            }
        };
        let mut wanted = Vec::new();
        let mut one = Scan::default();
        let mut f = OnlineFacts {
            me,
            view: &mut v,
            busy: &busy,
            cache,
            wanted: &mut wanted,
            gone,
        };
        match check::phase2(&mut f, &x, &extra, &opts, &mut one) {
            Ok(true) => out.merge(one),
            Ok(false) if wanted.is_empty() => failed += 1,
            Ok(false) => {
                deferred.push((fid, extra));
                for w in wanted {
                    if !all_wanted.contains(&w) {
                        all_wanted.push(w);
                    }
                }
            }
            Err(_) => failed += 1,
        }
    }
    Ok((out, deferred, all_wanted, failed))
}

/// Makes (or, in a dry run, counts) the repairs of `findings`, logging each.
async fn apply_findings(cx: &Cx<'_>, findings: Vec<Finding>, phase2: bool) {
    for f in findings {
        let outcome = if cx.opts.dryrun {
            // A dry run changes nothing, except telling phase 2 (here or on another
            // MDT) about a link the repair would have made.
            if let Some((mdt, fid, parent, name)) = &f.dry_trace {
                let op = NsRepair::Trace {
                    fid: *fid,
                    parent: *parent,
                    name: name.clone(),
                };
                let _ = ns_repair(cx, *mdt, op).await;
            }
            Outcome::Repaired
        } else if matches!(f.repair, Repair::None) {
            // Reported only (a dangling name without -C).
            let what = describe(cx.mdt, &f).await;
            cx.eng.repairs.push(
                &cx.eng.dev,
                format!("namespace: found {} (not repaired): {what}", f.kind.name()),
            );
            continue;
        } else {
            make(cx, &f.repair).await
        };
        let verb = if cx.opts.dryrun { "found" } else { "repaired" };
        match outcome {
            Outcome::Repaired => {
                count(cx, &f, phase2);
                let what = describe(cx.mdt, &f).await;
                cx.eng.repairs.push(
                    &cx.eng.dev,
                    format!("namespace: {verb} {}: {what}", f.kind.name()),
                );
            }
            Outcome::Unneeded => {}
            Outcome::Failed(e) => {
                let what = describe(cx.mdt, &f).await;
                let mut st = cx.eng.state.lock();
                if phase2 {
                    st.ns.objs_failed_phase2 += 1;
                } else {
                    st.ns.items_failed += 1;
                }
                drop(st);
                if matches!(f.repair, Repair::None) {
                    continue;
                }
                tracing::warn!(target: "lfsck", "{}: namespace: cannot repair {}: {what}: {e}", cx.eng.dev, f.kind.name());
            }
        }
    }
}

/// Makes one repair.
async fn make(cx: &Cx<'_>, r: &Repair) -> Outcome {
    match r {
        Repair::Ns { mdt, op } => ns_repair(cx, *mdt, op.clone()).await,
        Repair::None => Outcome::Failed(Errno::EPERM),
        Repair::MoveName {
            stripe,
            to,
            name,
            fid,
            kind,
        } => {
            let now = Timespec::now();
            let updates = vec![
                DneUpdate::DeleteName {
                    parent: *stripe,
                    name: name.clone(),
                    fid: *fid,
                    kind: *kind,
                    now,
                },
                DneUpdate::InsertName {
                    parent: *to,
                    name: name.clone(),
                    fid: *fid,
                    kind: *kind,
                    now,
                },
                DneUpdate::Relink {
                    fid: *fid,
                    from: (*stripe, name.clone()),
                    to: (*to, name.clone()),
                    now,
                },
            ];
            match cx.mdt.run_distributed(updates).await {
                Ok(()) => Outcome::Repaired,
                Err(e) => Outcome::Failed(e),
            }
        }
        Repair::LostDirent {
            parent,
            name,
            fid,
            kind,
            stale,
        } => {
            let op = NsRepair::InsertName {
                parent: *parent,
                name: name.clone(),
                fid: *fid,
                kind: *kind,
            };
            match ns_repair(cx, mdt_of(parent), op).await {
                Outcome::Repaired => {
                    let _ = repair::drop_stale_links(cx.mdt, *fid, stale.clone()).await;
                    Outcome::Repaired
                }
                o => o,
            }
        }
        Repair::LostFound { fid, kind, stale } => {
            repair::move_to_lost_found(cx.mdt, *fid, *kind, stale.clone()).await
        }
        Repair::AbortPending { coord, op } => match cx.mdt.abort_prepared(*coord, *op).await {
            Ok(()) => Outcome::Repaired,
            Err(e) => Outcome::Failed(e),
        },
        Repair::NarrowCommitted { op, left } => {
            cx.mdt.narrow_committed(*op, left.clone()).await;
            Outcome::Repaired
        }
    }
}

/// A repair on MDT `mdt` (this one or another).
async fn ns_repair(cx: &Cx<'_>, mdt: u32, op: NsRepair) -> Outcome {
    if mdt == cx.mdt.index {
        return repair::apply(cx.mdt, op).await;
    }
    if cx.gone.contains(&mdt) {
        return Outcome::Failed(Errno::ENOTCONN);
    }
    match cx.eng.call_mdt(mdt, LfsckRequest::NsRepair(vec![op])).await {
        Ok(LfsckReply::Outcomes(o)) => o.first().copied().unwrap_or(Outcome::Failed(Errno::EPROTO)),
        Ok(_) => Outcome::Failed(Errno::EPROTO),
        Err(e) => Outcome::Failed(e),
    }
}

/// Counts a finding under its counter.
fn count(cx: &Cx<'_>, f: &Finding, phase2: bool) {
    let mut st = cx.eng.state.lock();
    let ns: &mut NamespaceStatus = &mut st.ns;
    let c = match f.kind {
        Kind::Dirent => &mut ns.dirent_repaired,
        Kind::Linkea => &mut ns.linkea_repaired,
        Kind::Nlink => &mut ns.objs_nlink_repaired,
        Kind::UnmatchedPair => &mut ns.unmatched_pairs_repaired,
        Kind::Dangling => &mut ns.dangling_repaired,
        Kind::MultipleReferenced => &mut ns.mul_ref_repaired,
        Kind::BadType => &mut ns.bad_type_repaired,
        Kind::LostDirent => &mut ns.lost_dirent_repaired,
        Kind::LostFound => &mut ns.local_lpf_moved,
        Kind::StripedDir => &mut ns.striped_dirs_repaired,
        Kind::StripedShard => &mut ns.striped_shards_repaired,
        Kind::NameHash => &mut ns.name_hash_repaired,
        Kind::AgentEntry => &mut ns.agent_entries_repaired,
        Kind::DneRecord => &mut ns.dne_records_repaired,
    };
    *c += 1;
    if phase2 {
        ns.objs_repaired_phase2 += 1;
    } else {
        ns.items_repaired += 1;
    }
    if cx.opts.dryrun {
        ns.flags |= api::FLAG_INCONSISTENT;
        if ns.pos_first_inconsistent.is_zero() {
            let pos = st.ns_live.map(|l| l.position).unwrap_or_default();
            st.ns.pos_first_inconsistent = pos;
        }
    }
}

/// "path FID" of what a finding touched, for the repair log.
async fn describe(mdt: &Arc<Mdt>, f: &Finding) -> String {
    let path = match &f.at {
        Some((dir, name)) => {
            let p = bounded(mdt.fid2path(*dir)).await;
            let name = String::from_utf8_lossy(name);
            match p {
                Ok(p) if p.is_empty() => format!("/{name}"),
                Ok(p) => format!("/{}/{name}", String::from_utf8_lossy(&p)),
                Err(_) => format!("{dir}/{name}"),
            }
        }
        None => match bounded(mdt.fid2path(f.fid)).await {
            Ok(p) => format!("/{}", String::from_utf8_lossy(&p)),
            Err(_) => "(no path)".to_string(),
        },
    };
    format!("{path} {}", f.fid)
}

/// Answers another MDT's question about this MDT's names and objects.
pub fn answer_all(store: &MdStore, qs: &[NsQuery]) -> Result<Vec<NsFact>, Errno> {
    let mut v = store.read()?;
    let busy = Busy::read(&mut v)?;
    Ok(qs.iter().map(|q| facts::answer(&mut v, q, &busy)).collect())
}
