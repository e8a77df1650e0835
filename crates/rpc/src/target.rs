//! Target recovery, shared by the MDTs and the OSTs (Lustre's `ldlm_lib.c`
//! `target_recovery_*`, part of ptlrpc): after a restart that may have lost what the
//! target had not committed, the clients it recorded reconnect and replay their
//! uncommitted requests, which this applies in global transno order.
//!
//! - Known clients reconnect within the window (`recovery_time_soft` after the last sign
//!   of life, never past `recovery_time_hard`);
//! - their replays apply in transno order: the lowest queued one goes when it is the next
//!   transno, or when every client still expected is waiting on a replay of its own (a
//!   gap: the transno belonged to a request nobody replays);
//! - the target holds every other request until recovery ends;
//! - clients that miss the window are evicted, with a log line, and their records go.
//!
//! The target owns its records (`last_rcvd`), its commits and the driver that applies
//! each replay; this owns the window, the queue and `recovery_status`.

use crate::msg::{ClientUuid, Cred, OpenFlags, ReplayOutcome, Reply, Request};
use crate::server::RequestCtx;
use bytes::Bytes;
use nacre_core::{Errno, Fid};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{Notify, oneshot, watch};

/// Lustre's `obd_timeout` as nacre uses it for the recovery window: the soft and hard
/// windows are 3 and 9 times this (Lustre's defaults). 3 s keeps the hard window (27 s)
/// below a client's 30 s request deadline, so a request held through a whole recovery is
/// still answered.
pub const OBD_TIMEOUT: Duration = Duration::from_secs(3);
/// `recovery_time_soft` by default: how long the MDT waits for clients after the last one
/// showed up or replayed something.
pub const RECOVERY_TIME_SOFT: Duration = Duration::from_secs(3 * OBD_TIMEOUT.as_secs());
/// `recovery_time_hard` by default: recovery never lasts longer.
pub const RECOVERY_TIME_HARD: Duration = Duration::from_secs(9 * OBD_TIMEOUT.as_secs());
/// The largest `recovery_time_soft` or `recovery_time_hard` (a day, as for every time
/// tunable).
pub const RECOVERY_TIME_MAX_SECS: u64 = 86_400;

/// A `recovery_time_soft`/`recovery_time_hard` value for parameter `name`: seconds from 1
/// to [`RECOVERY_TIME_MAX_SECS`].
pub fn parse_recovery_time(name: &str, value: &str) -> Result<u64, String> {
    value
        .trim()
        .parse()
        .ok()
        .filter(|v| (1..=RECOVERY_TIME_MAX_SECS).contains(v))
        .ok_or_else(|| {
            format!(
                "{name}: '{}' is not a number of seconds from 1 to {RECOVERY_TIME_MAX_SECS}",
                value.trim()
            )
        })
}

/// Replays queued at once: each client sends one at a time and waits for its answer, so
/// this bounds the number of clients in recovery; a replay beyond it is refused (EBUSY)
/// and the client is evicted rather than the queue grown.
pub const REPLAY_QUEUE_MAX: usize = 65536;

/// Recovery's phase, as `recovery_status` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// No recovery since start: no client was recorded.
    Inactive,
    Recovering,
    Complete,
}

/// Where a client stands in a start's recovery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// Recovery waits for its replays and reopens.
    Replaying,
    /// It ended its replay (or recovery is over with it recovered): what it sends again
    /// was applied already.
    Recovered,
    /// Not one of this start's clients, or evicted: it may not replay.
    Stale,
}

fn standing(st: &State, client: ClientUuid) -> Standing {
    if !st.known.contains(&client) || st.evicted.contains(&client) {
        Standing::Stale
    } else if st.status == Status::Recovering && !st.done.contains(&client) {
        Standing::Replaying
    } else {
        Standing::Recovered
    }
}

/// A replay waiting for its turn.
pub struct Queued {
    pub client: ClientUuid,
    pub ctx: RequestCtx,
    pub req: Request,
    /// The request's bulk (an OST write's data).
    pub bulk: Bytes,
    pub outcome: Option<ReplayOutcome>,
    pub done: oneshot::Sender<Result<Reply, Errno>>,
}

struct State {
    status: Status,
    /// When recovery started (wall clock for `recovery_start`, monotonic for the window).
    started: Option<(SystemTime, Instant)>,
    duration: Option<Duration>,
    last_activity: Instant,
    /// Clients recorded at start: those recovery waits for.
    known: BTreeSet<ClientUuid>,
    connected: BTreeSet<ClientUuid>,
    /// Sent [`Request::ReplayDone`].
    done: BTreeSet<ClientUuid>,
    evicted: BTreeSet<ClientUuid>,
    queue: BTreeMap<u64, Queued>,
    queued_by: HashMap<ClientUuid, usize>,
    /// The transno expected next (one past `last_committed` at start, then past each
    /// replay applied).
    next_transno: u64,
    last_transno: u64,
    replayed: u64,
    /// Every client recorded, recovery or not (so a new client's record is written once).
    recorded: BTreeSet<ClientUuid>,
    /// Reopens of files not there yet, tried again once every replay is applied.
    deferred: Vec<DeferredReopen>,
}

/// Reopens waiting for the replays at most; past it a reopen that finds no file fails.
pub const DEFERRED_REOPENS_MAX: usize = 1 << 16;

/// A client's reopen of a file that did not exist when it came: another client's replay,
/// later in transno order, may create it (a file one client created and another opened
/// before the MDT lost both). Lustre replays opens after every request with a transno.
pub struct DeferredReopen {
    pub client: ClientUuid,
    pub ctx: RequestCtx,
    pub handle: u64,
    pub fid: Fid,
    pub flags: OpenFlags,
    pub cred: Cred,
}

/// What the recovery driver does next.
pub enum Step {
    Apply(u64, Box<Queued>),
    Evict(Vec<ClientUuid>),
    Finish,
    Wait(Instant),
}

pub struct Recovery {
    /// This start of the MDT (Lustre's target instance): new at every start.
    pub instance: u64,
    soft: AtomicU64,
    hard: AtomicU64,
    st: Mutex<State>,
    wake: Notify,
    ended: watch::Sender<bool>,
}

impl Recovery {
    /// Recovery state for a start with `recorded` clients and the store's
    /// `last_committed`: recovering when any client was recorded.
    pub fn new(recorded: BTreeSet<ClientUuid>, last_committed: u64) -> Recovery {
        let now = Instant::now();
        let instance = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1;
        let recovering = !recorded.is_empty();
        Recovery {
            instance,
            soft: AtomicU64::new(RECOVERY_TIME_SOFT.as_millis() as u64),
            hard: AtomicU64::new(RECOVERY_TIME_HARD.as_millis() as u64),
            st: Mutex::new(State {
                status: if recovering {
                    Status::Recovering
                } else {
                    Status::Inactive
                },
                started: recovering.then(|| (SystemTime::now(), now)),
                duration: None,
                last_activity: now,
                known: recorded.clone(),
                connected: BTreeSet::new(),
                done: BTreeSet::new(),
                evicted: BTreeSet::new(),
                queue: BTreeMap::new(),
                queued_by: HashMap::new(),
                next_transno: last_committed + 1,
                last_transno: last_committed,
                replayed: 0,
                recorded,
                deferred: Vec::new(),
            }),
            wake: Notify::new(),
            ended: watch::channel(!recovering).0,
        }
    }

    pub fn is_recovering(&self) -> bool {
        !*self.ended.borrow()
    }

    /// `true` once recovery is over, for a task that watches for it among other things.
    pub fn ended_signal(&self) -> watch::Receiver<bool> {
        self.ended.subscribe()
    }

    /// Waits until recovery is over (at once when it is).
    pub async fn wait_ended(&self) {
        let mut rx = self.ended.subscribe();
        let _ = rx.wait_for(|e| *e).await;
    }

    /// `recovery_time_soft` / `recovery_time_hard` in seconds.
    pub fn window(&self) -> (u64, u64) {
        (
            self.soft.load(Ordering::Acquire) / 1000,
            self.hard.load(Ordering::Acquire) / 1000,
        )
    }

    pub fn set_soft(&self, secs: u64) {
        self.soft.store(secs * 1000, Ordering::Release);
        self.wake.notify_one();
    }

    pub fn set_hard(&self, secs: u64) {
        self.hard.store(secs * 1000, Ordering::Release);
        self.wake.notify_one();
    }

    /// A client connected: `Ok(true)` when its record must be written (a client not seen
    /// before), after any recovery under way has ended (new clients wait for it).
    pub async fn connect(&self, client: ClientUuid) -> bool {
        {
            let mut st = self.st.lock();
            if st.status == Status::Recovering
                && st.known.contains(&client)
                && !st.evicted.contains(&client)
            {
                st.connected.insert(client);
                st.last_activity = Instant::now();
                drop(st);
                self.wake.notify_one();
                return false;
            }
        }
        self.wait_ended().await;
        !self.st.lock().recorded.contains(&client)
    }

    /// The client's record was written.
    pub fn recorded(&self, client: ClientUuid) {
        self.st.lock().recorded.insert(client);
    }

    /// Queues a replay; the answer comes when it has been applied. ESTALE to a client
    /// recovery does not wait for (evicted, or unknown): it must not replay.
    pub fn queue(
        &self,
        client: ClientUuid,
        transno: u64,
        ctx: RequestCtx,
        req: Request,
        bulk: Bytes,
        outcome: Option<ReplayOutcome>,
    ) -> Result<oneshot::Receiver<Result<Reply, Errno>>, Errno> {
        let (done, rx) = oneshot::channel();
        let mut st = self.st.lock();
        match standing(&st, client) {
            Standing::Stale => return Err(Errno::ESTALE),
            Standing::Recovered => {
                // Sent again after a lost answer to its end of replay: everything it
                // replayed before that was applied.
                let _ = done.send(Ok(Reply::Ok));
                return Ok(rx);
            }
            Standing::Replaying => {}
        }
        if transno < st.next_transno {
            // Already on disk (at or below `last_committed` at start), or applied in this
            // recovery: the same client replaying again after its connection was lost in
            // the middle of its replay. Replays apply in transno order, so applying it
            // again would undo what later ones did.
            let _ = done.send(Ok(Reply::Ok));
            return Ok(rx);
        }
        if let Some(q) = st.queue.get_mut(&transno) {
            if q.client != client {
                return Err(Errno::EBUSY);
            }
            // Sent again over a new connection while the first is still queued: the
            // answer goes to the new one.
            q.ctx = ctx;
            q.done = done;
            st.last_activity = Instant::now();
            return Ok(rx);
        }
        if st.queue.len() >= REPLAY_QUEUE_MAX {
            return Err(Errno::EBUSY);
        }
        st.connected.insert(client);
        st.last_activity = Instant::now();
        *st.queued_by.entry(client).or_default() += 1;
        st.queue.insert(
            transno,
            Queued {
                client,
                ctx,
                req,
                bulk,
                outcome,
                done,
            },
        );
        drop(st);
        self.wake.notify_one();
        Ok(rx)
    }

    /// Where `client` stands in this start's recovery; a replaying client's call counts
    /// as its activity.
    pub fn standing(&self, client: ClientUuid) -> Standing {
        let mut st = self.st.lock();
        let s = standing(&st, client);
        if s == Standing::Replaying {
            st.connected.insert(client);
            st.last_activity = Instant::now();
        }
        s
    }

    /// Keeps a reopen that found no file for after the replays; false (it fails now) when
    /// recovery is not waiting for its client or [`DEFERRED_REOPENS_MAX`] wait already.
    pub fn defer_reopen(&self, r: DeferredReopen) -> bool {
        let mut st = self.st.lock();
        if st.status != Status::Recovering
            || standing(&st, r.client) != Standing::Replaying
            || st.deferred.len() >= DEFERRED_REOPENS_MAX
        {
            return false;
        }
        st.last_activity = Instant::now();
        st.deferred.push(r);
        true
    }

    /// The reopens kept for after the replays, but those of evicted clients.
    pub fn take_deferred_reopens(&self) -> Vec<DeferredReopen> {
        let mut st = self.st.lock();
        let all = std::mem::take(&mut st.deferred);
        all.into_iter()
            .filter(|r| !st.evicted.contains(&r.client))
            .collect()
    }

    /// The client replayed all it had; the answer comes when recovery ends.
    pub async fn replay_done(&self, client: ClientUuid) -> Result<(), Errno> {
        {
            let mut st = self.st.lock();
            if st.evicted.contains(&client) {
                return Err(Errno::ESTALE);
            }
            if st.status == Status::Recovering && st.known.contains(&client) {
                st.done.insert(client);
                st.connected.insert(client);
                st.last_activity = Instant::now();
            }
        }
        self.wake.notify_one();
        self.wait_ended().await;
        if self.st.lock().evicted.contains(&client) {
            return Err(Errno::ESTALE);
        }
        Ok(())
    }

    /// The driver's next step.
    pub fn next_step(&self) -> Step {
        let mut st = self.st.lock();
        let now = Instant::now();
        let expected = |st: &State, c: &ClientUuid| !st.evicted.contains(c) && !st.done.contains(c);
        if let Some(&first) = st.queue.keys().next() {
            let all_waiting = st
                .known
                .iter()
                .filter(|c| expected(&st, c))
                .all(|c| st.queued_by.get(c).copied().unwrap_or(0) > 0);
            if first <= st.next_transno || all_waiting {
                let Some(q) = st.queue.remove(&first) else {
                    return Step::Wait(now);
                };
                if let Some(n) = st.queued_by.get_mut(&q.client) {
                    *n = n.saturating_sub(1);
                }
                st.next_transno = first + 1;
                st.last_transno = st.last_transno.max(first);
                st.replayed += 1;
                st.last_activity = now;
                return Step::Apply(first, Box::new(q));
            }
        } else if st.known.iter().all(|c| !expected(&st, c)) {
            return Step::Finish;
        }
        let soft = Duration::from_millis(self.soft.load(Ordering::Acquire));
        let hard = Duration::from_millis(self.hard.load(Ordering::Acquire));
        let start = st.started.map_or(now, |s| s.1);
        let deadline = (st.last_activity + soft).min(start + hard);
        if now < deadline {
            return Step::Wait(deadline);
        }
        // The window is over: whoever is expected and has nothing queued is gone.
        let gone: Vec<ClientUuid> = st
            .known
            .iter()
            .filter(|c| expected(&st, c) && st.queued_by.get(c).copied().unwrap_or(0) == 0)
            .copied()
            .collect();
        if gone.is_empty() {
            // Only clients with replays queued are left: apply them.
            st.last_activity = now;
            return Step::Wait(now);
        }
        for c in &gone {
            st.evicted.insert(*c);
        }
        Step::Evict(gone)
    }

    pub async fn wait(&self, until: Instant) {
        let _ = tokio::time::timeout_at(until.into(), self.wake.notified()).await;
    }

    /// Recovery is over: later requests run.
    pub fn finish(&self) -> (usize, usize, u64, u64) {
        let mut st = self.st.lock();
        st.status = Status::Complete;
        st.duration = st.started.map(|s| s.1.elapsed());
        for c in st.evicted.clone() {
            st.recorded.remove(&c);
        }
        let recovered = st.known.len() - st.evicted.len();
        let out = (recovered, st.evicted.len(), st.replayed, st.last_transno);
        drop(st);
        self.ended.send_replace(true);
        out
    }

    /// The highest transno replayed.
    pub fn last_replayed(&self) -> u64 {
        self.st.lock().last_transno
    }

    /// The clients evicted (their records are removed at the end).
    pub fn evicted(&self) -> Vec<ClientUuid> {
        self.st.lock().evicted.iter().copied().collect()
    }

    /// Lustre's `recovery_status`, in `lprocfs_recovery_status_seq_show`'s order.
    pub fn status_text(&self) -> String {
        let st = self.st.lock();
        let mut s = String::new();
        let status = match st.status {
            Status::Inactive => "INACTIVE",
            Status::Recovering => "RECOVERING",
            Status::Complete => "COMPLETE",
        };
        s.push_str(&format!("status: {status}\n"));
        if st.status == Status::Inactive {
            return s;
        }
        let start = st
            .started
            .and_then(|(w, _)| w.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs());
        let known = st.known.len();
        let evicted = st.evicted.len();
        match st.status {
            Status::Complete => {
                let d = st.duration.map_or(0, |d| d.as_secs());
                s.push_str(&format!("recovery_start: {start}\n"));
                s.push_str(&format!("recovery_duration: {d}\n"));
                s.push_str(&format!("completed_clients: {}/{known}\n", known - evicted));
                s.push_str(&format!("replayed_requests: {}\n", st.replayed));
                s.push_str(&format!("last_transno: {}\n", st.last_transno));
                s.push_str("VBR: DISABLED\n");
                s.push_str("IR: DISABLED\n");
            }
            _ => {
                let (soft, hard) = self.window();
                let left = st
                    .started
                    .map(|(_, i)| {
                        let deadline = (st.last_activity + Duration::from_secs(soft))
                            .min(i + Duration::from_secs(hard));
                        deadline.saturating_duration_since(Instant::now()).as_secs()
                    })
                    .unwrap_or(0);
                s.push_str(&format!("recovery_start: {start}\n"));
                s.push_str(&format!("time_remaining: {left}\n"));
                s.push_str(&format!(
                    "connected_clients: {}/{known}\n",
                    st.connected.len()
                ));
                s.push_str(&format!(
                    "req_replay_clients: {}\n",
                    st.queued_by.values().filter(|n| **n > 0).count()
                ));
                s.push_str("lock_repay_clients: 0\n");
                s.push_str(&format!("completed_clients: {}\n", st.done.len()));
                s.push_str(&format!("evicted_clients: {evicted}\n"));
                s.push_str(&format!("replayed_requests: {}\n", st.replayed));
                s.push_str(&format!("queued_requests: {}\n", st.queue.len()));
                s.push_str(&format!("next_transno: {}\n", st.next_transno));
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::PeerRole;

    fn ctx(conn_id: u64) -> RequestCtx {
        RequestCtx {
            peer: "10.0.0.1:1234".parse().expect("addr"),
            client: "test".into(),
            role: PeerRole::Client,
            conn_id,
        }
    }

    fn unlink() -> Request {
        Request::Unlink {
            parent: Fid::ROOT,
            name: b"f".to_vec(),
            dir: false,
            cred: Cred::root(),
        }
    }

    fn applied(r: &Recovery) -> Option<u64> {
        match r.next_step() {
            Step::Apply(t, q) => {
                let _ = q.done.send(Ok(Reply::Ok));
                Some(t)
            }
            _ => None,
        }
    }

    /// Lustre's replay of a request the target already has (`transno <=
    /// last_committed`, or applied earlier in this recovery) is answered without
    /// running it again.
    #[test]
    fn a_replay_sent_again_after_a_lost_connection_applies_once() {
        let (a, b) = (1, 2);
        let r = Recovery::new([a, b].into_iter().collect(), 9);
        assert!(r.is_recovering());
        // At or below last_committed at start: answered at once.
        let mut rx = r
            .queue(a, 9, ctx(1), unlink(), Bytes::new(), None)
            .expect("queue 9");
        assert!(matches!(rx.try_recv(), Ok(Ok(Reply::Ok))));
        let _rx10 = r
            .queue(a, 10, ctx(1), unlink(), Bytes::new(), None)
            .expect("queue 10");
        assert_eq!(applied(&r), Some(10));
        let _rx11 = r
            .queue(b, 11, ctx(2), unlink(), Bytes::new(), None)
            .expect("queue 11");
        assert_eq!(applied(&r), Some(11));
        // a lost its connection after 10 and replays from the start again: 10 is not
        // applied again (it would undo 11).
        let mut rx = r
            .queue(a, 10, ctx(3), unlink(), Bytes::new(), None)
            .expect("queue 10 again");
        assert!(matches!(rx.try_recv(), Ok(Ok(Reply::Ok))));
        assert_eq!(applied(&r), None, "nothing left to apply");
        // 12, queued over the lost connection and sent again over the new one: one
        // entry, answered on the new one.
        let mut old = r
            .queue(a, 12, ctx(1), unlink(), Bytes::new(), None)
            .expect("queue 12");
        let mut new = r
            .queue(a, 12, ctx(3), unlink(), Bytes::new(), None)
            .expect("queue 12 again");
        // Another client naming the same transno is refused.
        assert_eq!(
            r.queue(b, 12, ctx(2), unlink(), Bytes::new(), None).err(),
            Some(Errno::EBUSY)
        );
        assert_eq!(applied(&r), Some(12));
        assert_eq!(applied(&r), None);
        assert!(old.try_recv().is_err(), "the old connection gets no answer");
        assert!(matches!(new.try_recv(), Ok(Ok(Reply::Ok))));
        // a ends its replay, loses the answer and replays again: answered, not applied,
        // and not told it was evicted; after the recovery too. A stranger may not replay.
        assert_eq!(r.standing(a), Standing::Replaying);
        // (What `replay_done` records before it waits for the end.)
        r.st.lock().done.insert(a);
        assert_eq!(r.standing(a), Standing::Recovered);
        let mut rx = r
            .queue(a, 13, ctx(3), unlink(), Bytes::new(), None)
            .expect("after its end");
        assert!(matches!(rx.try_recv(), Ok(Ok(Reply::Ok))));
        assert_eq!(applied(&r), None);
        assert_eq!(r.standing(99), Standing::Stale);
        assert_eq!(
            r.queue(99, 14, ctx(4), unlink(), Bytes::new(), None).err(),
            Some(Errno::ESTALE)
        );
        r.finish();
        assert_eq!(r.standing(a), Standing::Recovered);
        assert_eq!(r.standing(b), Standing::Recovered);
    }
}
