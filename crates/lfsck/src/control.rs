//! What every component needs while it runs: live progress for the status files, the
//! speed limit, when to save a checkpoint, the stop signal, bounded calls to other
//! targets, and the log of repairs.

use nacre_core::{Errno, Fid};
use nacre_lustreapi::lfsck::{
    FLAG_INCOMPLETE, FLAG_SCANNED_ONCE, LPF_DRYRUN, LayoutStatus, LfsckPosition, LfsckStatus,
    LiveScan, LiveScrub, NamespaceStatus,
};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How often a running component saves its position and counters. Lustre saves every
/// 60 s (`SCRUB_CHECKPOINT_INTERVAL`); a save here is one small store write, so a crash
/// loses at most a few seconds of scanning.
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(5);
/// Longest wait for one request to another target. A target that does not answer within
/// it is left out of the rest of the run (the run ends "partial"), so an unreachable
/// target costs one timeout per run, never a hang.
pub const RPC_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a participant waits without hearing from a peer it waits for (it asks every
/// [`PEER_POLL`]) before going on without it.
pub const PEER_SILENCE: Duration = Duration::from_secs(30);
/// How often a participant asks a peer it waits for how far it is.
pub const PEER_POLL: Duration = Duration::from_millis(500);
/// Repairs kept for `lfsck_repairs` (each is also logged); older ones drop out.
pub const REPAIR_LOG_MAX: usize = 4096;

/// The wall clock in seconds, as the status files print times.
pub fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A running component's progress since its last checkpoint.
#[derive(Clone, Copy, Debug)]
pub struct Live {
    pub since: Instant,
    pub new_checked: u64,
    pub position: LfsckPosition,
    pub phase2_fid: Fid,
}

impl Live {
    pub fn new() -> Live {
        Live {
            since: Instant::now(),
            new_checked: 0,
            position: LfsckPosition::default(),
            phase2_fid: Fid::ZERO,
        }
    }

    /// Seconds since the last checkpoint (what the run time has not counted yet).
    pub fn elapsed(&self) -> i64 {
        self.since.elapsed().as_secs() as i64
    }

    pub fn scan(&self) -> LiveScan {
        LiveScan {
            new_checked: self.new_checked,
            since_checkpoint: self.elapsed(),
            position: self.position,
            phase2_fid: self.phase2_fid,
        }
    }

    pub fn scrub(&self) -> LiveScrub {
        LiveScrub {
            new_checked: self.new_checked,
            since_checkpoint: self.elapsed(),
            position: self.position.oit_cookie,
            in_prior: false,
            full_speed: true,
            partial_scan: false,
        }
    }

    /// Whether a checkpoint is due.
    pub fn checkpoint_due(&self) -> bool {
        self.since.elapsed() >= CHECKPOINT_INTERVAL
    }
}

impl Default for Live {
    fn default() -> Self {
        Live::new()
    }
}

/// Steps per second a limited scan takes (see [`Throttle::cap`]).
const THROTTLE_STEPS_PER_SEC: usize = 10;

/// Keeps a scan at or under `lfsck_speed_limit` items per second (0: no limit). The
/// limit may change while it runs.
pub struct Throttle {
    limit: Arc<AtomicU32>,
    start: tokio::time::Instant,
    done: u64,
    seen_limit: u32,
}

impl Throttle {
    pub fn new(limit: Arc<AtomicU32>) -> Throttle {
        let seen_limit = limit.load(Ordering::Relaxed);
        Throttle {
            limit,
            start: tokio::time::Instant::now(),
            done: 0,
            seen_limit,
        }
    }

    /// The most items to take in one step: under a limit, a tenth of a second's worth, so
    /// the scan keeps to it within a step instead of reading a whole window at once.
    pub fn cap(&self, window: usize) -> usize {
        match self.limit.load(Ordering::Relaxed) {
            0 => window,
            l => window.min((l as usize / THROTTLE_STEPS_PER_SEC).max(1)),
        }
    }

    /// After `n` more items: sleeps as long as the scan is ahead of the limit, or until
    /// `stop`.
    pub async fn after(&mut self, n: u64, stop: &mut watch::Receiver<Halt>) {
        let limit = self.limit.load(Ordering::Relaxed);
        if limit != self.seen_limit {
            // A new limit counts from now.
            self.seen_limit = limit;
            self.start = tokio::time::Instant::now();
            self.done = 0;
        }
        self.done += n;
        if limit == 0 {
            return;
        }
        let due = Duration::from_secs_f64(self.done as f64 / f64::from(limit));
        let ahead = due.saturating_sub(self.start.elapsed());
        if !ahead.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(ahead) => {}
                _ = stop.wait_for(|s| *s != Halt::Go) => {}
            }
        }
    }
}

/// Why a run is asked to end early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Halt {
    Go,
    /// `lfsck_stop`.
    Stop,
    /// The target is stopping: resume when it starts again.
    Pause,
}

/// How a component's run ended early.
pub(crate) enum End {
    Halted(Halt),
    Failed(Errno),
}

/// Why the run is asked to end, if it is.
pub(crate) fn halted(halt: &watch::Receiver<Halt>) -> Option<Halt> {
    match *halt.borrow() {
        Halt::Go => None,
        h => Some(h),
    }
}

/// `run` (a component's phases), unless the run is asked to end first: then it is
/// dropped where it waits, so a stop or pause is not held up by a request to a target
/// that does not answer (up to [`RPC_TIMEOUT`] each). Its position moves only once a
/// window is done, so a resumed run starts with the window it was in; a repair cut
/// short is one a crash could have cut too, and the next run finds what is left of it.
pub(crate) async fn or_halt(
    mut asked: watch::Receiver<Halt>,
    run: impl std::future::Future<Output = Result<(), End>>,
) -> Result<(), End> {
    let halted = async {
        let asked = asked.wait_for(|h| *h != Halt::Go).await.map(|h| *h);
        match asked {
            Ok(h) => h,
            // Nobody can ask any more: the run goes to its end.
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        r = run => r,
        h = halted => Err(End::Halted(h)),
    }
}

/// The status a component's run (`what` on `dev`) ends with; a run that went to its end
/// without some target is partial.
pub(crate) fn end_status(r: Result<(), End>, partial: bool, dev: &str, what: &str) -> LfsckStatus {
    match r {
        Ok(()) if partial => LfsckStatus::Partial,
        Ok(()) => LfsckStatus::Completed,
        Err(End::Halted(Halt::Pause)) => LfsckStatus::Paused,
        Err(End::Halted(_)) => LfsckStatus::Stopped,
        Err(End::Failed(e)) => {
            tracing::warn!(target: "lfsck", "{dev}: {what} check failed: {e}");
            LfsckStatus::Failed
        }
    }
}

/// The fields every component's record has (Lustre's `lfsck_namespace` and
/// `lfsck_layout` share them), so starting, checkpointing and ending a run is written
/// once for all components.
pub(crate) struct Head<'a> {
    pub status: &'a mut LfsckStatus,
    pub flags: &'a mut u32,
    pub param: &'a mut u16,
    pub success_count: &'a mut u32,
    pub time_last_complete: &'a mut i64,
    pub time_latest_start: &'a mut i64,
    pub time_last_checkpoint: &'a mut i64,
    pub checked_phase1: &'a mut u64,
    pub checked_phase2: &'a mut u64,
    pub run_time_phase1: &'a mut i64,
    pub run_time_phase2: &'a mut i64,
}

/// A component's record.
pub(crate) trait Record: Default {
    fn head(&mut self) -> Head<'_>;
    /// Where phase 1's last checkpoint is.
    fn checkpoint_pos(&self) -> LfsckPosition;
    fn set_checkpoint_pos(&mut self, p: LfsckPosition);
    fn set_start_pos(&mut self, p: LfsckPosition);

    /// Opens a run with `param` (`LPF_*`): the record starts afresh (keeping its history)
    /// unless the run resumes the last one, which did not finish and was no dry run
    /// where this one is not (or the other way round). Returns its live progress.
    fn begin(&mut self, param: u16, reset: bool, now: i64) -> Live {
        let resume = !reset && {
            let h = self.head();
            !matches!(*h.status, LfsckStatus::Init | LfsckStatus::Completed)
                && *h.param & LPF_DRYRUN == param & LPF_DRYRUN
        };
        if !resume {
            let mut fresh = Self::default();
            {
                let (old, new) = (self.head(), fresh.head());
                *new.success_count = *old.success_count;
                *new.time_last_complete = *old.time_last_complete;
                *new.flags = *old.flags & FLAG_SCANNED_ONCE;
            }
            *self = fresh;
        }
        let pos = self.checkpoint_pos();
        self.set_start_pos(pos);
        let h = self.head();
        *h.param = param;
        *h.status = LfsckStatus::ScanningPhase1;
        *h.time_latest_start = now;
        Live {
            position: pos,
            ..Live::new()
        }
    }

    /// Adds the progress since the last checkpoint to the counters of the phase the run
    /// is in (and phase 1's position).
    fn fold(&mut self, live: &mut Live, now: i64) {
        let (n, t, pos) = (live.new_checked, live.elapsed(), live.position);
        live.new_checked = 0;
        live.since = Instant::now();
        let phase1 = *self.head().status == LfsckStatus::ScanningPhase1;
        if phase1 {
            self.set_checkpoint_pos(pos);
        }
        let h = self.head();
        if phase1 {
            *h.checked_phase1 += n;
            *h.run_time_phase1 += t;
        } else {
            *h.checked_phase2 += n;
            *h.run_time_phase2 += t;
        }
        *h.time_last_checkpoint = now;
    }

    /// Phase 1 is done (its last checkpoint folded in): phase 2 starts.
    fn open_phase2(&mut self) -> Live {
        let h = self.head();
        *h.status = LfsckStatus::ScanningPhase2;
        *h.flags |= FLAG_SCANNED_ONCE;
        Live::new()
    }

    /// The run ended with `status`; one that went to its end starts from the beginning
    /// next time.
    fn finish(&mut self, status: LfsckStatus, now: i64) {
        let done = matches!(status, LfsckStatus::Completed | LfsckStatus::Partial);
        {
            let h = self.head();
            *h.status = status;
            if status == LfsckStatus::Partial {
                *h.flags |= FLAG_INCOMPLETE;
            }
            if done {
                *h.time_last_complete = now;
                *h.success_count += u32::from(status == LfsckStatus::Completed);
            }
        }
        if done {
            self.set_checkpoint_pos(LfsckPosition::default());
        }
    }
}

impl Record for NamespaceStatus {
    fn head(&mut self) -> Head<'_> {
        Head {
            status: &mut self.status,
            flags: &mut self.flags,
            param: &mut self.param,
            success_count: &mut self.success_count,
            time_last_complete: &mut self.time_last_complete,
            time_latest_start: &mut self.time_latest_start,
            time_last_checkpoint: &mut self.time_last_checkpoint,
            checked_phase1: &mut self.items_checked,
            checked_phase2: &mut self.objs_checked_phase2,
            run_time_phase1: &mut self.run_time_phase1,
            run_time_phase2: &mut self.run_time_phase2,
        }
    }
    fn checkpoint_pos(&self) -> LfsckPosition {
        self.pos_last_checkpoint
    }
    fn set_checkpoint_pos(&mut self, p: LfsckPosition) {
        self.pos_last_checkpoint = p;
    }
    fn set_start_pos(&mut self, p: LfsckPosition) {
        self.pos_latest_start = p;
    }
}

impl Record for LayoutStatus {
    fn head(&mut self) -> Head<'_> {
        Head {
            status: &mut self.status,
            flags: &mut self.flags,
            param: &mut self.param,
            success_count: &mut self.success_count,
            time_last_complete: &mut self.time_last_complete,
            time_latest_start: &mut self.time_latest_start,
            time_last_checkpoint: &mut self.time_last_checkpoint,
            checked_phase1: &mut self.checked_phase1,
            checked_phase2: &mut self.checked_phase2,
            run_time_phase1: &mut self.run_time_phase1,
            run_time_phase2: &mut self.run_time_phase2,
        }
    }
    // The layout record keeps the object-table cookie only (Lustre's `lfsck_layout`).
    fn checkpoint_pos(&self) -> LfsckPosition {
        LfsckPosition::at(self.pos_last_checkpoint)
    }
    fn set_checkpoint_pos(&mut self, p: LfsckPosition) {
        self.pos_last_checkpoint = p.oit_cookie;
    }
    fn set_start_pos(&mut self, p: LfsckPosition) {
        self.pos_latest_start = p.oit_cookie;
    }
}

/// The recent repairs of a target, newest last, each with the path and FID it touched.
#[derive(Default)]
pub struct RepairLog {
    lines: Mutex<VecDeque<String>>,
}

impl RepairLog {
    pub fn push(&self, dev: &str, line: String) {
        tracing::info!(target: "lfsck", "{dev}: {line}");
        let mut l = self.lines.lock();
        if l.len() >= REPAIR_LOG_MAX {
            l.pop_front();
        }
        l.push_back(line);
    }

    pub fn text(&self) -> String {
        let l = self.lines.lock();
        let mut s = String::new();
        for line in l.iter() {
            s.push_str(line);
            s.push('\n');
        }
        s
    }

    pub fn clear(&self) {
        self.lines.lock().clear();
    }
}

/// Runs `f` within [`RPC_TIMEOUT`]; a call that takes longer is ETIMEDOUT.
pub async fn bounded<T>(
    f: impl std::future::Future<Output = Result<T, Errno>>,
) -> Result<T, Errno> {
    match tokio::time::timeout(RPC_TIMEOUT, f).await {
        Ok(r) => r,
        Err(_) => Err(Errno::ETIMEDOUT),
    }
}

/// A window that adapts to the slower side of a pipeline (the seed study's proposal, in
/// place of Lustre's fixed `SCRUB_WINDOW_SIZE` and `LFSCK_ASYNC_WIN_DEFAULT`): it doubles
/// while the side it feeds keeps up (each round finishes within `target` and throughput
/// grows), and halves when a round takes longer than `target`, so the scan neither
/// starves a slow peer's pipeline nor floods it.
#[derive(Clone, Copy, Debug)]
pub struct AdaptiveWindow {
    pub value: usize,
    pub min: usize,
    pub max: usize,
    /// Off: the window stays at its initial value (Lustre's behaviour, for comparison).
    pub adaptive: bool,
    last_rate: f64,
}

/// How long one round of a window may take before the window shrinks: short enough that
/// stop and checkpoints stay prompt, long enough to amortise a round trip.
pub const WINDOW_ROUND_TARGET: Duration = Duration::from_millis(200);

impl AdaptiveWindow {
    pub fn new(initial: usize, min: usize, max: usize, adaptive: bool) -> AdaptiveWindow {
        let min = min.max(1);
        let max = max.max(min);
        AdaptiveWindow {
            value: initial.clamp(min, max),
            min,
            max,
            adaptive,
            last_rate: 0.0,
        }
    }

    /// After a round that handled `items` in `took`.
    pub fn observe(&mut self, items: usize, took: Duration) {
        if !self.adaptive || items == 0 {
            return;
        }
        let rate = items as f64 / took.as_secs_f64().max(1e-6);
        if took > WINDOW_ROUND_TARGET {
            self.value = (self.value / 2).max(self.min);
        } else if rate >= self.last_rate * 0.9 && items >= self.value {
            self.value = (self.value * 2).min(self.max);
        }
        self.last_rate = rate;
    }
}

/// Lustre's coupling of namespace and layout: one object-table iteration feeds both
/// components, its window (`SCRUB_WINDOW_SIZE`) and the layout's in-flight requests
/// (`LFSCK_ASYNC_WIN_DEFAULT`) fixed, so the slower component holds the faster one back.
/// A coupled run (`mdd.*.lfsck_coupled=1`) gives each component's phase 1 one side of a
/// pair: a side may start its next window only while it is at most one window ahead of
/// the other. nacre runs decoupled by default; coupled is there to measure what
/// decoupling buys.
pub struct Pace {
    /// Windows each side finished; `u64::MAX` once it left phase 1.
    sides: Arc<[watch::Sender<u64>; 2]>,
    me: usize,
    windows: u64,
}

impl Pace {
    /// The two sides of one coupled run.
    pub fn pair() -> (Pace, Pace) {
        let sides = Arc::new([watch::channel(0).0, watch::channel(0).0]);
        let side = |me| Pace {
            sides: sides.clone(),
            me,
            windows: 0,
        };
        (side(0), side(1))
    }

    /// Waits, before this side's next window, until the other side has finished as many
    /// windows as this one (or left phase 1), or the run is asked to end.
    pub async fn turn(&self, halt: &mut watch::Receiver<Halt>) {
        let mut other = self.sides[1 - self.me].subscribe();
        let done = self.windows;
        tokio::select! {
            _ = other.wait_for(|n| *n >= done) => {}
            _ = halt.wait_for(|h| *h != Halt::Go) => {}
        }
    }

    /// This side finished a window.
    pub fn window_done(&mut self) {
        self.windows += 1;
        self.sides[self.me].send_replace(self.windows);
    }
}

impl Drop for Pace {
    /// A side that leaves phase 1, however it ends, no longer holds the other back.
    fn drop(&mut self) {
        self.sides[self.me].send_replace(u64::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_grows_while_rounds_are_quick_and_shrinks_when_slow() {
        let mut w = AdaptiveWindow::new(64, 16, 4096, true);
        for _ in 0..10 {
            let v = w.value;
            w.observe(v, Duration::from_millis(5));
        }
        assert_eq!(w.value, 4096);
        w.observe(4096, Duration::from_secs(1));
        assert_eq!(w.value, 2048);
        let mut fixed = AdaptiveWindow::new(1024, 16, 4096, false);
        fixed.observe(1024, Duration::from_secs(5));
        assert_eq!(fixed.value, 1024);
    }

    #[tokio::test(start_paused = true)]
    async fn throttle_keeps_to_the_limit() {
        let limit = Arc::new(AtomicU32::new(100));
        let mut t = Throttle::new(limit.clone());
        let (_tx, mut rx) = watch::channel(Halt::Go);
        let start = tokio::time::Instant::now();
        for _ in 0..10 {
            t.after(50, &mut rx).await;
        }
        // 500 items at 100/s: about 5 s.
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(4900) && took <= Duration::from_millis(5100),
            "{took:?}"
        );
        limit.store(0, Ordering::Relaxed);
        let start = tokio::time::Instant::now();
        t.after(1_000_000, &mut rx).await;
        assert!(start.elapsed() < Duration::from_millis(10));
    }

    #[tokio::test]
    async fn a_coupled_side_waits_for_the_slower_one_until_it_leaves() {
        let (mut fast, slow) = Pace::pair();
        let (_tx, mut halt) = watch::channel(Halt::Go);
        // Both at window 0: the fast side may do one window ahead.
        fast.turn(&mut halt).await;
        fast.window_done();
        // A second window must wait for the slow side.
        let waited = tokio::time::timeout(Duration::from_millis(50), fast.turn(&mut halt)).await;
        assert!(waited.is_err(), "the fast side ran two windows ahead");
        // The slow side leaving phase 1 lets the fast one run freely.
        drop(slow);
        for _ in 0..10 {
            tokio::time::timeout(Duration::from_secs(1), fast.turn(&mut halt))
                .await
                .expect("a side left alone must not wait");
            fast.window_done();
        }
    }

    #[tokio::test]
    async fn a_coupled_side_does_not_wait_once_the_run_is_stopped() {
        let (mut a, _b) = Pace::pair();
        let (tx, mut halt) = watch::channel(Halt::Go);
        a.window_done();
        tx.send_replace(Halt::Stop);
        tokio::time::timeout(Duration::from_secs(1), a.turn(&mut halt))
            .await
            .expect("a stopped run must not wait for the other side");
    }

    #[test]
    fn repair_log_is_bounded() {
        let l = RepairLog::default();
        for i in 0..REPAIR_LOG_MAX + 10 {
            l.push("t", format!("r{i}"));
        }
        let text = l.text();
        assert_eq!(text.lines().count(), REPAIR_LOG_MAX);
        assert!(text.starts_with("r10\n"));
    }
}
