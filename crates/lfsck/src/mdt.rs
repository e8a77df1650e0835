//! LFSCK on an MDT (Lustre's `lfsck_instance` of an MDT device): starts, stops and
//! reports its components, runs them, keeps their records in the MDT's store, answers
//! other MDTs' questions and repairs, and hands out what its components need.
//!
//! A run's components are independent tasks: the OI scrub first (the others look
//! objects up through the index it checks), then namespace and layout side by side,
//! each with its own scan of the object table and its own windows, so a slow OST does
//! not hold the namespace check back and a large directory does not hold the layout
//! check back (the seed study's finding about Lustre's shared pipeline). A coupled run
//! (`mdd.*.lfsck_coupled=1`) puts them back in Lustre's lockstep, for comparison.

use crate::control::{self, Halt, Live, Record, RepairLog, bounded, now_secs};
use crate::{layout, namespace, oi};
use nacre_core::{Errno, Fid, TargetName};
use nacre_lustreapi::lfsck::{
    self as api, LayoutStatus, LfsckStatus, NamespaceStatus, ScrubFile, ScrubStatus, TYPE_LAYOUT,
    TYPE_NAMESPACE, TYPE_SCRUB,
};
use nacre_mdt::Mdt;
use nacre_osd::Table;
use nacre_rpc::lfsck::{
    BoxFuture, ComponentState, Event, LfsckReply, LfsckRequest, LfsckService, NsFact, Outcome,
    StartArgs,
};
use nacre_rpc::msg::{Reply, Request};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, watch};

/// Types this MDT runs.
pub const MDT_TYPES: u16 = TYPE_SCRUB | TYPE_NAMESPACE | TYPE_LAYOUT;

/// How long a stopping MDT waits for its run to save its place.
const PAUSE_WAIT: Duration = Duration::from_secs(10);

const KEY_BOOKMARK: &[u8] = b"lfsck.bookmark";
const KEY_NAMESPACE: &[u8] = b"lfsck.namespace";
const KEY_LAYOUT: &[u8] = b"lfsck.layout";
const KEY_SCRUB: &[u8] = b"lfsck.oi_scrub";

/// A run's parameters (Lustre's bookmark), kept so a resumed run goes on as it began.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bookmark {
    /// `LPF_*`.
    pub param: u16,
    pub speed_limit: u32,
    pub async_windows: u32,
    /// Type bits of the run.
    pub types: u16,
    pub root: Option<Fid>,
    pub mdts: Vec<u32>,
    pub sponsor: Option<u32>,
}

/// The records of this MDT's components, and their progress while they run.
#[derive(Default)]
pub struct MdtState {
    pub bookmark: Bookmark,
    pub ns: NamespaceStatus,
    pub ns_live: Option<Live>,
    pub lo: LayoutStatus,
    pub lo_live: Option<Live>,
    /// The OI scrub's record (`osd-*.*.oi_scrub`).
    pub scrub: ScrubFile,
    pub scrub_live: Option<Live>,
}

/// A component: its name, the key its record is saved under, and where its record and
/// live progress are in [`MdtState`].
pub(crate) struct Component<R> {
    pub name: &'static str,
    key: &'static [u8],
    slot: fn(&mut MdtState) -> (&mut R, &mut Option<Live>),
}

fn namespace_slot(st: &mut MdtState) -> (&mut NamespaceStatus, &mut Option<Live>) {
    (&mut st.ns, &mut st.ns_live)
}

fn layout_slot(st: &mut MdtState) -> (&mut LayoutStatus, &mut Option<Live>) {
    (&mut st.lo, &mut st.lo_live)
}

pub(crate) const NAMESPACE: Component<NamespaceStatus> = Component {
    name: "namespace",
    key: KEY_NAMESPACE,
    slot: namespace_slot,
};

pub(crate) const LAYOUT: Component<LayoutStatus> = Component {
    name: "layout",
    key: KEY_LAYOUT,
    slot: layout_slot,
};

/// LFSCK on one MDT.
pub struct MdtLfsck {
    mdt: Weak<Mdt>,
    pub index: u32,
    /// `fs-MDT0000`.
    pub dev: String,
    pub state: Mutex<MdtState>,
    /// `mdd.*.lfsck_speed_limit`.
    pub speed_limit: Arc<AtomicU32>,
    /// `mdd.*.lfsck_async_windows`.
    pub async_windows: Arc<AtomicU32>,
    /// Windows adapt to the slower side (nacre); off: fixed, as Lustre's.
    pub adaptive: Arc<AtomicBool>,
    /// `mdd.*.lfsck_coupled`: fixed windows, and namespace and layout phase 1 in
    /// lockstep, as Lustre runs them ([`control::Pace`]); off (the default): each at its
    /// own pace.
    pub coupled: Arc<AtomicBool>,
    /// Asks the run under way to end; taken by whoever asks.
    run: Mutex<Option<watch::Sender<Halt>>>,
    /// The end of the last run started, kept after `run` is taken: whoever finds the run
    /// already being ended (a stop, then the MDT stopping) waits for it too.
    last_done: Mutex<Option<watch::Receiver<bool>>>,
    /// Peers reported progress: whoever waits for peers looks again.
    pub peer_news: Notify,
    pub repairs: RepairLog,
}

/// Saves `v` under `key` in the MDT's store.
async fn save<T: Serialize>(mdt: &Mdt, key: &'static [u8], v: &T) -> Result<(), Errno> {
    let b = postcard::to_allocvec(v).map_err(|_| Errno::EIO)?;
    mdt.store()
        .write(move |tx| tx.put(Table::Meta, key, &b))
        .await
}

/// The record under `key`, or a fresh one when there is none. One that cannot be read or
/// decoded (a damaged store, or a record of another version) is logged and started
/// afresh, as Lustre resets a component file whose magic is wrong.
fn load<T: for<'a> Deserialize<'a> + Default>(mdt: &Mdt, key: &[u8]) -> T {
    let name = String::from_utf8_lossy(key);
    let raw = match mdt.store().read().and_then(|v| v.get(Table::Meta, key)) {
        Ok(Some(b)) => b,
        Ok(None) => return T::default(),
        Err(e) => {
            tracing::warn!(target: "lfsck", "MDT{:04x}: cannot read the record {name}: {e}; it starts afresh", mdt.index);
            return T::default();
        }
    };
    postcard::from_bytes(&raw).unwrap_or_else(|e| {
        tracing::warn!(target: "lfsck", "MDT{:04x}: the record {name} cannot be decoded ({e}); it starts afresh", mdt.index);
        T::default()
    })
}

impl MdtLfsck {
    /// The checker of `mdt`, with the records a previous run left. A run the process
    /// died in shows as crashed; one the MDT stopped in (paused), or one that crashed,
    /// resumes from its last checkpoint when it ran on this MDT alone.
    pub fn attach(mdt: &Arc<Mdt>) -> Arc<MdtLfsck> {
        let mut st = MdtState {
            bookmark: load(mdt, KEY_BOOKMARK),
            ns: load(mdt, KEY_NAMESPACE),
            ns_live: None,
            lo: load(mdt, KEY_LAYOUT),
            lo_live: None,
            scrub: load(mdt, KEY_SCRUB),
            scrub_live: None,
        };
        let mut resume = false;
        if st.scrub.status == ScrubStatus::Scanning {
            st.scrub.status = ScrubStatus::Crashed;
            resume = true;
        }
        if st.scrub.status == ScrubStatus::Paused {
            resume = true;
        }
        if st.ns.status.is_running() {
            st.ns.status = LfsckStatus::Crashed;
            resume = true;
        }
        if st.lo.status.is_running() {
            st.lo.status = LfsckStatus::Crashed;
            resume = true;
        }
        if st.ns.status == LfsckStatus::Paused || st.lo.status == LfsckStatus::Paused {
            resume = true;
        }
        let me = Arc::new(MdtLfsck {
            mdt: Arc::downgrade(mdt),
            index: mdt.index,
            dev: mdt.target().full(&mdt.fsname),
            speed_limit: Arc::new(AtomicU32::new(st.bookmark.speed_limit)),
            async_windows: Arc::new(AtomicU32::new(if st.bookmark.async_windows == 0 {
                api::ASYNC_WIN_DEFAULT
            } else {
                st.bookmark.async_windows
            })),
            adaptive: Arc::new(AtomicBool::new(true)),
            coupled: Arc::new(AtomicBool::new(false)),
            state: Mutex::new(st),
            run: Mutex::new(None),
            last_done: Mutex::new(None),
            peer_news: Notify::new(),
            repairs: RepairLog::default(),
        });
        mdt.set_lfsck(me.clone());
        let local_run = me.state.lock().bookmark.param & api::LPF_ALL_TGT == 0;
        if mdt.oi_rebuilt > 0 {
            // The MDT rebuilt a lost index before it served (see `mdd::rebuild_lost_oi`);
            // the record says so until a scrub completes.
            let mut st = me.state.lock();
            st.scrub.flags |= api::SF_RECREATED | api::SF_AUTO;
            st.scrub.items_updated += mdt.oi_rebuilt;
        }
        if resume && local_run {
            let m = me.clone();
            let bm = me.state.lock().bookmark.clone();
            tokio::spawn(async move {
                let args = StartArgs {
                    valid: 0,
                    speed_limit: bm.speed_limit,
                    active: bm.types,
                    flags: bm.param & !api::LPF_RESET,
                    async_windows: bm.async_windows as u16,
                    root: bm.root,
                    mdts: bm.mdts.clone(),
                    sponsor: bm.sponsor,
                };
                match m.start(args).await {
                    Ok(_) => {
                        tracing::info!(target: "lfsck", "{}: resuming the interrupted check", m.dev)
                    }
                    Err(e) => {
                        tracing::warn!(target: "lfsck", "{}: cannot resume the interrupted check: {e}", m.dev)
                    }
                }
            });
        }
        me
    }

    pub fn mdt(&self) -> Result<Arc<Mdt>, Errno> {
        self.mdt.upgrade().ok_or(Errno::ESHUTDOWN)
    }

    /// `mdd.*.lfsck_namespace`.
    pub fn namespace_text(&self) -> String {
        let st = self.state.lock();
        let live = st.ns_live.map(|l| l.scan());
        st.ns.format(now_secs(), live.as_ref())
    }

    /// `mdd.*.lfsck_layout`.
    pub fn layout_text(&self) -> String {
        let st = self.state.lock();
        let live = st.lo_live.map(|l| l.scan());
        st.lo.format(now_secs(), live.as_ref())
    }

    /// `osd-*.*.oi_scrub`.
    pub fn oi_scrub_text(&self) -> String {
        let st = self.state.lock();
        let live = st.scrub_live.map(|l| l.scrub());
        st.scrub.format(now_secs(), live.as_ref())
    }

    /// Whether a run is going on.
    pub fn running(&self) -> bool {
        self.run.lock().is_some() && self.last_done.lock().as_ref().is_some_and(|d| !*d.borrow())
    }

    /// This MDT's components, for `lfsck_query`.
    pub fn components(&self) -> Vec<ComponentState> {
        let st = self.state.lock();
        vec![
            ComponentState {
                kind: TYPE_NAMESPACE,
                status: st.ns.status.index() as u8,
                repaired: st.ns.repaired(),
            },
            ComponentState {
                kind: TYPE_LAYOUT,
                status: st.lo.status.index() as u8,
                repaired: st.lo.repaired_total(),
            },
        ]
    }

    /// Starts a run (`lfsck_start` on this MDT). With `-A` (and no sponsor), this MDT
    /// is the sponsor and starts every other MDT too.
    pub async fn start(self: &Arc<Self>, a: StartArgs) -> Result<u16, Errno> {
        let mdt = self.mdt()?;
        if self.running() {
            return Err(Errno::EALREADY);
        }
        let mut active = a.active & api::TYPES_SUPPORTED;
        let (types, bm) = {
            let mut st = self.state.lock();
            if active == 0 {
                // The types of the last run that did not finish, else all.
                let incomplete =
                    !matches!(st.ns.status, LfsckStatus::Init | LfsckStatus::Completed)
                        || !matches!(st.lo.status, LfsckStatus::Init | LfsckStatus::Completed)
                        || !matches!(st.scrub.status, ScrubStatus::Init | ScrubStatus::Completed);
                active = if incomplete && st.bookmark.types != 0 {
                    st.bookmark.types
                } else {
                    api::TYPES_SUPPORTED
                };
            }
            let types = active & MDT_TYPES;
            let mut bm = st.bookmark.clone();
            // Flags of this run: those a switch gave, the rest start afresh.
            bm.param = a.flags & !(api::LPF_WAIT);
            if a.valid & api::LSV_SPEED_LIMIT != 0 {
                bm.speed_limit = a.speed_limit;
            }
            if a.valid & api::LSV_ASYNC_WINDOWS != 0 {
                bm.async_windows = u32::from(a.async_windows);
            }
            bm.types = active;
            bm.root = a.root;
            bm.sponsor = a.sponsor;
            bm.mdts = if a.mdts.is_empty() {
                if a.flags & api::LPF_ALL_TGT != 0 {
                    (0..mdt.mdt_count()).collect()
                } else {
                    vec![self.index]
                }
            } else {
                a.mdts.clone()
            };
            st.bookmark = bm.clone();
            let now = now_secs();
            let reset = a.flags & api::LPF_RESET != 0;
            if types & TYPE_SCRUB != 0 {
                let dry = bm.param & api::LPF_DRYRUN != 0;
                st.scrub_live = Some(oi::begin(&mut st.scrub, dry, reset, now));
            }
            if types & TYPE_NAMESPACE != 0 {
                let (rec, live) = (NAMESPACE.slot)(&mut st);
                *live = Some(rec.begin(bm.param, reset, now));
            }
            if types & TYPE_LAYOUT != 0 {
                let (rec, live) = (LAYOUT.slot)(&mut st);
                *live = Some(rec.begin(bm.param, reset, now));
            }
            (types, bm)
        };
        self.speed_limit.store(bm.speed_limit, Ordering::Relaxed);
        if bm.async_windows != 0 {
            self.async_windows
                .store(bm.async_windows, Ordering::Relaxed);
        }
        self.save_all(&mdt).await?;
        if types & TYPE_NAMESPACE != 0 && a.flags & api::LPF_RESET != 0 {
            // A fresh run starts with an empty trace.
            namespace::clear_trace(&mdt).await?;
        }
        let (halt, halt_rx) = watch::channel(Halt::Go);
        let (done_tx, done) = watch::channel(false);
        *self.last_done.lock() = Some(done);
        *self.run.lock() = Some(halt);
        // The sponsor of a run on all targets starts the other MDTs.
        if a.flags & api::LPF_BROADCAST != 0 && a.sponsor.is_none() {
            let peer_args = StartArgs {
                flags: a.flags & !api::LPF_BROADCAST,
                sponsor: Some(self.index),
                mdts: bm.mdts.clone(),
                active,
                ..a.clone()
            };
            for m in bm.mdts.iter().copied().filter(|m| *m != self.index) {
                match self
                    .call_mdt(m, LfsckRequest::Start(peer_args.clone()))
                    .await
                {
                    Ok(_) | Err(Errno::EALREADY) => {}
                    Err(e) => {
                        tracing::warn!(target: "lfsck", "{}: cannot start LFSCK on MDT{m:04x}: {e}", self.dev)
                    }
                }
            }
        }
        let me = self.clone();
        tokio::spawn(async move {
            me.run_all(mdt, types, bm, halt_rx).await;
            let _ = done_tx.send(true);
        });
        Ok(active)
    }

    async fn run_all(
        self: Arc<Self>,
        mdt: Arc<Mdt>,
        types: u16,
        bm: Bookmark,
        halt: watch::Receiver<Halt>,
    ) {
        // The OI scrub first: the others find objects through the index it checks.
        if types & TYPE_SCRUB != 0 {
            let dry = bm.param & api::LPF_DRYRUN != 0;
            let status = oi::run(&self, &mdt, dry, halt.clone()).await;
            {
                let mut st = self.state.lock();
                oi::finish(&mut st.scrub, status, now_secs());
                st.scrub_live = None;
            }
            if let Err(e) = self.save_all(&mdt).await {
                tracing::warn!(target: "lfsck", "{}: cannot save the OI scrub record: {e}", self.dev);
            }
            tracing::info!(target: "lfsck", "{}: OI scrub {}", self.dev, status.name());
            let end = match status {
                ScrubStatus::Completed => None,
                ScrubStatus::Paused => Some(LfsckStatus::Paused),
                ScrubStatus::Stopped => Some(LfsckStatus::Stopped),
                _ => Some(LfsckStatus::Failed),
            };
            if let Some(end) = end {
                // The other components end as the scrub did, before they began.
                if types & TYPE_NAMESPACE != 0 {
                    self.finish(&mdt, &NAMESPACE, end).await;
                }
                if types & TYPE_LAYOUT != 0 {
                    self.finish(&mdt, &LAYOUT, end).await;
                }
                return;
            }
        }
        // Namespace and layout side by side, each at its own pace unless coupled.
        let both = TYPE_NAMESPACE | TYPE_LAYOUT;
        let (ns_pace, lo_pace) = if types & both == both && self.coupled.load(Ordering::Relaxed) {
            let (a, b) = control::Pace::pair();
            (Some(a), Some(b))
        } else {
            (None, None)
        };
        let ns = async {
            if types & TYPE_NAMESPACE != 0 {
                let status = namespace::run(&self, &mdt, &bm, halt.clone(), ns_pace).await;
                self.finish(&mdt, &NAMESPACE, status).await;
            }
        };
        let lo = async {
            if types & TYPE_LAYOUT != 0 {
                let status = layout::run(&self, &mdt, &bm, halt.clone(), lo_pace).await;
                self.finish(&mdt, &LAYOUT, status).await;
            }
        };
        tokio::join!(ns, lo);
    }

    /// Saves the bookmark and every component's record.
    pub async fn save_all(&self, mdt: &Mdt) -> Result<(), Errno> {
        let (bm, ns, lo, scrub) = {
            let st = self.state.lock();
            (
                st.bookmark.clone(),
                st.ns.clone(),
                st.lo.clone(),
                st.scrub.clone(),
            )
        };
        save(mdt, KEY_BOOKMARK, &bm).await?;
        save(mdt, KEY_NAMESPACE, &ns).await?;
        save(mdt, KEY_LAYOUT, &lo).await?;
        save(mdt, KEY_SCRUB, &scrub).await
    }

    /// Saves the OI scrub's progress and counters (a checkpoint).
    pub(crate) async fn scrub_checkpoint(&self, mdt: &Mdt) {
        let rec = {
            let mut st = self.state.lock();
            let MdtState {
                scrub, scrub_live, ..
            } = &mut *st;
            let Some(live) = scrub_live.as_mut() else {
                return;
            };
            oi::fold(scrub, live, now_secs());
            scrub.clone()
        };
        if let Err(e) = save(mdt, KEY_SCRUB, &rec).await {
            tracing::warn!(target: "lfsck", "{}: OI scrub checkpoint failed: {e}", self.dev);
        }
    }

    /// Saves component `c`'s record.
    async fn save_record<R: Record + Clone + Serialize>(
        &self,
        mdt: &Mdt,
        c: &Component<R>,
    ) -> Result<(), Errno> {
        let rec = (c.slot)(&mut self.state.lock()).0.clone();
        save(mdt, c.key, &rec).await
    }

    /// Saves component `c`'s progress and counters (a checkpoint).
    pub(crate) async fn checkpoint<R: Record + Clone + Serialize>(
        &self,
        mdt: &Mdt,
        c: &Component<R>,
    ) {
        {
            let mut st = self.state.lock();
            let (rec, live) = (c.slot)(&mut st);
            let Some(live) = live.as_mut() else {
                return;
            };
            rec.fold(live, now_secs());
        }
        if let Err(e) = self.save_record(mdt, c).await {
            tracing::warn!(target: "lfsck", "{}: {} checkpoint failed: {e}", self.dev, c.name);
        }
    }

    /// Closes component `c`'s phase 1 (its last checkpoint) and opens phase 2.
    pub(crate) async fn enter_phase2<R: Record + Clone + Serialize>(
        &self,
        mdt: &Mdt,
        c: &Component<R>,
    ) {
        self.checkpoint(mdt, c).await;
        let mut st = self.state.lock();
        let (rec, live) = (c.slot)(&mut st);
        *live = Some(rec.open_phase2());
    }

    /// Component `c`'s run ended with `status`: its record says so and is saved.
    async fn finish<R: Record>(&self, mdt: &Mdt, c: &Component<R>, status: LfsckStatus) {
        {
            let mut st = self.state.lock();
            let (rec, live) = (c.slot)(&mut st);
            rec.finish(status, now_secs());
            *live = None;
        }
        if let Err(e) = self.save_all(mdt).await {
            tracing::warn!(target: "lfsck", "{}: cannot save the {} record: {e}", self.dev, c.name);
        }
        tracing::info!(target: "lfsck", "{}: {} check {}", self.dev, c.name, status.name());
    }

    /// Stops the run (`lfsck_stop`), waiting until it has saved its place; with `all`,
    /// every participant too. A run paused by its MDT stopping meanwhile is stopped
    /// too: it does not resume when the MDT starts again.
    pub async fn stop(self: &Arc<Self>, all: bool) -> Result<(), Errno> {
        let was = self.halt(Halt::Stop).await || self.stop_paused().await?;
        if all {
            let peers: Vec<u32> = self
                .state
                .lock()
                .bookmark
                .mdts
                .iter()
                .copied()
                .filter(|m| *m != self.index)
                .collect();
            // All at once: a gone MDT costs one request timeout, not one each.
            let stops = peers
                .into_iter()
                .map(|m| self.call_mdt(m, LfsckRequest::Stop { all: false }));
            futures::future::join_all(stops).await;
        }
        if was { Ok(()) } else { Err(Errno::EALREADY) }
    }

    /// Marks paused components stopped and saves them; whether there were any. An error
    /// if they could not be saved (the MDT stopped meanwhile): they would resume.
    async fn stop_paused(&self) -> Result<bool, Errno> {
        let paused = {
            let mut g = self.state.lock();
            let st = &mut *g;
            let mut any = false;
            for s in [&mut st.ns.status, &mut st.lo.status] {
                if *s == LfsckStatus::Paused {
                    *s = LfsckStatus::Stopped;
                    any = true;
                }
            }
            if st.scrub.status == ScrubStatus::Paused {
                st.scrub.status = ScrubStatus::Stopped;
                any = true;
            }
            any
        };
        if paused {
            self.save_all(&*self.mdt()?).await?;
        }
        Ok(paused)
    }

    /// Asks the run to end and waits for it (at most [`PAUSE_WAIT`]); whether one ran.
    /// A run another caller is ending is waited for too (returning false), so the MDT
    /// does not stop under its last save.
    async fn halt(&self, how: Halt) -> bool {
        let halt = self.run.lock().take();
        let Some(mut done) = self.last_done.lock().clone() else {
            return false;
        };
        let asked = match halt {
            Some(h) if !*done.borrow() => h.send(how).is_ok(),
            _ => false,
        };
        let _ = tokio::time::timeout(PAUSE_WAIT, done.wait_for(|d| *d)).await;
        asked
    }

    /// A call to another MDT, bounded by [`control::RPC_TIMEOUT`].
    pub async fn call_mdt(&self, idx: u32, req: LfsckRequest) -> Result<LfsckReply, Errno> {
        let mdt = self.mdt()?;
        let px = mdt.mdt_proxy(idx)?;
        match bounded(async { px.call(&Request::Lfsck(req)).await.map_err(|e| e.errno()) }).await? {
            Reply::Lfsck(r) => Ok(r),
            _ => Err(Errno::EPROTO),
        }
    }

    /// Tells every other participant MDT that this one finished `event`.
    pub async fn notify_peers(&self, event: Event) {
        let peers: Vec<u32> = self
            .state
            .lock()
            .bookmark
            .mdts
            .iter()
            .copied()
            .filter(|m| *m != self.index)
            .collect();
        let from = TargetName::mdt(self.index);
        for m in peers {
            let _ = self.call_mdt(m, LfsckRequest::Notify { from, event }).await;
        }
    }

    /// Waits until every other participant MDT has finished the first phase of component
    /// `kind` (its status moved past phase 1), left the run, or stayed silent for
    /// [`control::PEER_SILENCE`]. Returns the MDTs it went on without.
    pub async fn wait_peers(&self, kind: u16, halt: &mut watch::Receiver<Halt>) -> Vec<u32> {
        let mut waiting: Vec<u32> = self
            .state
            .lock()
            .bookmark
            .mdts
            .iter()
            .copied()
            .filter(|m| *m != self.index)
            .collect();
        let mut heard: std::collections::HashMap<u32, Instant> =
            waiting.iter().map(|m| (*m, Instant::now())).collect();
        let mut gone = Vec::new();
        while !waiting.is_empty() {
            if *halt.borrow() != Halt::Go {
                break;
            }
            let mut still = Vec::new();
            for m in waiting {
                match self.call_mdt(m, LfsckRequest::Query).await {
                    Ok(LfsckReply::State(cs)) => {
                        heard.insert(m, Instant::now());
                        let s = cs
                            .iter()
                            .find(|c| c.kind == kind)
                            .and_then(|c| LfsckStatus::ALL.get(c.status as usize).copied());
                        match s {
                            Some(LfsckStatus::ScanningPhase1) => still.push(m),
                            Some(
                                LfsckStatus::ScanningPhase2
                                | LfsckStatus::Completed
                                | LfsckStatus::Partial,
                            ) => {}
                            _ => gone.push(m),
                        }
                    }
                    _ => {
                        if heard
                            .get(&m)
                            .is_some_and(|t| t.elapsed() >= control::PEER_SILENCE)
                        {
                            tracing::warn!(target: "lfsck", "{}: MDT{m:04x} does not answer: going on without it", self.dev);
                            gone.push(m);
                        } else {
                            still.push(m);
                        }
                    }
                }
            }
            waiting = still;
            if !waiting.is_empty() {
                tokio::select! {
                    _ = tokio::time::sleep(control::PEER_POLL) => {}
                    _ = self.peer_news.notified() => {}
                    _ = halt.changed() => {}
                }
            }
        }
        gone
    }

    /// Counts a sponsor's view of every participant for `lfsck_query`.
    pub async fn query_all(&self, types: u16) -> api::QueryCounts {
        let mut q = api::QueryCounts::default();
        let mdts = self.mdt().map(|m| m.mdt_count()).unwrap_or(1);
        for m in 0..mdts {
            let cs = if m == self.index {
                Ok(self.components())
            } else {
                match self.call_mdt(m, LfsckRequest::Query).await {
                    Ok(LfsckReply::State(cs)) => Ok(cs),
                    Ok(_) => Err(Errno::EPROTO),
                    Err(e) => Err(e),
                }
            };
            add_states(&mut q, types, true, cs);
        }
        q
    }

    async fn handle_req(self: Arc<Self>, req: LfsckRequest) -> Result<LfsckReply, Errno> {
        match req {
            LfsckRequest::Start(a) => {
                let active = self.start(a).await?;
                Ok(LfsckReply::Started { active })
            }
            LfsckRequest::Stop { all } => {
                self.stop(all).await?;
                Ok(LfsckReply::Outcomes(Vec::new()))
            }
            LfsckRequest::Query => Ok(LfsckReply::State(self.components())),
            LfsckRequest::Notify { .. } => {
                self.peer_news.notify_waiters();
                Ok(LfsckReply::Outcomes(Vec::new()))
            }
            LfsckRequest::NsFacts(qs) => {
                let mdt = self.mdt()?;
                let facts: Vec<NsFact> = tokio::task::spawn_blocking(move || {
                    let mut v = mdt.store().read()?;
                    let busy = namespace::facts::Busy::read(&mut v)?;
                    Ok::<_, Errno>(
                        qs.iter()
                            .map(|q| namespace::facts::answer(&mut v, q, &busy))
                            .collect(),
                    )
                })
                .await
                .map_err(|_| Errno::EIO)??;
                Ok(LfsckReply::NsFacts(facts))
            }
            LfsckRequest::NsRepair(ops) => {
                let mdt = self.mdt()?;
                let mut out = Vec::with_capacity(ops.len());
                for op in ops {
                    let r: Outcome = namespace::repair::apply(&mdt, op).await;
                    out.push(r);
                }
                Ok(LfsckReply::Outcomes(out))
            }
            LfsckRequest::Probe { .. }
            | LfsckRequest::OstRepair(_)
            | LfsckRequest::Objects { .. }
            | LfsckRequest::Orphans { .. } => Err(Errno::ENOTSUP),
        }
    }
}

/// Adds one target's answer to query counts: its components, or "unknown" if it did not
/// answer.
pub fn add_states(
    q: &mut api::QueryCounts,
    types: u16,
    is_mdt: bool,
    cs: Result<Vec<ComponentState>, Errno>,
) {
    for t in [TYPE_LAYOUT, TYPE_NAMESPACE] {
        if types & t == 0 || (!is_mdt && t == TYPE_NAMESPACE) {
            continue;
        }
        match &cs {
            Ok(cs) => match cs.iter().find(|c| c.kind == t) {
                Some(c) => q.add(
                    t,
                    is_mdt,
                    LfsckStatus::ALL
                        .get(c.status as usize)
                        .copied()
                        .unwrap_or_default(),
                    c.repaired,
                ),
                None => q.add(t, is_mdt, LfsckStatus::Init, 0),
            },
            Err(_) => q.add_unknown(t, is_mdt),
        }
    }
}

impl LfsckService for MdtLfsck {
    fn handle(self: Arc<Self>, req: LfsckRequest) -> BoxFuture<'static, Result<LfsckReply, Errno>> {
        Box::pin(self.handle_req(req))
    }

    fn stopping(self: Arc<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            if self.halt(Halt::Pause).await {
                tracing::info!(target: "lfsck", "{}: check paused; it resumes when the MDT starts again", self.dev);
            }
        })
    }
}
