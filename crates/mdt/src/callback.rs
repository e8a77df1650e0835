//! Data-change callbacks: the part of Lustre's lock manager (LDLM) that keeps clients'
//! caches coherent.
//!
//! In Lustre a client caches a file's pages under a lock, and a writer's conflicting lock
//! request sends a *blocking AST* to every holder, which drops its pages before the writer
//! goes on. Here the MDT plays that role for whole files: when a client reports a change
//! of a file's data (the close of a handle that wrote, `fsync`, a truncate), every other
//! client holding the file open is told to drop what it cached of it, and the reporting
//! call returns only once they have answered (or [`CALLBACK_WAIT`] passed). So after a
//! writer's `close` or `fsync` returns, a read anywhere returns the new bytes, open
//! descriptors and mappings included.
//!
//! Servers never open connections to clients: each client keeps one long poll
//! (`WaitCallbacks`) in flight on each MDT, which returns the callbacks queued for its
//! connection and, with the next poll, acknowledges them. A connection that never polls
//! (a client without a cache to drop) is never waited for.

use nacre_core::Fid;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Callbacks queued for one connection; beyond this the queue is replaced by one "drop
/// everything" callback, so a client that stopped polling cannot grow the MDT's memory.
pub const CALLBACK_QUEUE_MAX: usize = 1024;
/// How long a poll is held when nothing is queued; the client waits longer for it.
pub const CALLBACK_HOLD: Duration = nacre_rpc::msg::WAIT_CALLBACKS_HOLD;
/// How long a changing call waits for a client to answer its callback before going on
/// without it (Lustre would evict such a client; this one only costs itself stale data).
pub const CALLBACK_WAIT: Duration = Duration::from_secs(5);
/// A connection that has not polled for this long is not waited for: its poll loop is
/// gone (its client hung or stopped caching).
const POLL_LAPSE: Duration = Duration::from_secs(15);
/// Connections tracked at most (each holds at most one queue of bounded size).
pub const MAX_CALLBACK_CONNS: usize = 1 << 16;

/// What a poll returns: callbacks up to sequence `upto`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Batch {
    pub upto: u64,
    pub fids: Vec<Fid>,
    /// The queue overflowed: drop everything cached.
    pub all: bool,
}

struct ConnQueue {
    /// Sequence of the last callback queued.
    queued: u64,
    /// Sequence the client last said it handled.
    acked: u64,
    pending: VecDeque<(u64, Fid)>,
    overflow: bool,
    /// A poll is waiting right now.
    polling: bool,
    last_poll: Instant,
    /// Wakes the poll (callbacks queued) and the waiting writers (acks, disconnect).
    changed: Arc<Notify>,
}

impl ConnQueue {
    fn live(&self) -> bool {
        self.polling || self.last_poll.elapsed() < POLL_LAPSE
    }
}

#[derive(Default)]
pub struct Callbacks {
    conns: Mutex<HashMap<u64, ConnQueue>>,
    /// Callbacks sent (`mdt.*.callbacks` counters).
    pub sent: AtomicU64,
    /// Callbacks a client did not answer within [`CALLBACK_WAIT`].
    pub timed_out: AtomicU64,
}

impl Callbacks {
    /// Queues a callback for `fid` to each of `conns` that polls; returns the sequences
    /// to wait for.
    pub fn post(&self, fid: Fid, conns: &[u64]) -> Vec<(u64, u64)> {
        let mut waits = Vec::new();
        let mut m = self.conns.lock();
        for id in conns {
            let Some(q) = m.get_mut(id) else { continue };
            if !q.live() {
                continue;
            }
            q.queued += 1;
            if q.pending.len() >= CALLBACK_QUEUE_MAX {
                q.pending.clear();
                q.overflow = true;
            }
            if !q.overflow {
                q.pending.push_back((q.queued, fid));
            }
            q.changed.notify_waiters();
            waits.push((*id, q.queued));
            self.sent.fetch_add(1, Ordering::Relaxed);
        }
        waits
    }

    /// Waits until every `(connection, sequence)` is acknowledged, its connection is gone,
    /// or [`CALLBACK_WAIT`] passed.
    pub async fn wait(&self, waits: &[(u64, u64)]) {
        if waits.is_empty() {
            return;
        }
        let deadline = tokio::time::Instant::now() + CALLBACK_WAIT;
        for &(id, seq) in waits {
            loop {
                let changed = {
                    let m = self.conns.lock();
                    match m.get(&id) {
                        Some(q) if q.acked < seq => q.changed.clone(),
                        _ => break,
                    }
                };
                let notified = changed.notified();
                // Checked again now that the wake-up is armed.
                if self.conns.lock().get(&id).is_none_or(|q| q.acked >= seq) {
                    break;
                }
                if tokio::time::timeout_at(deadline, notified).await.is_err() {
                    self.timed_out.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(target: "mdt", "a client did not answer a cache callback within {} s", CALLBACK_WAIT.as_secs());
                    break;
                }
            }
        }
    }

    /// A client's poll on connection `id`: records that it handled everything up to
    /// `acked`, then returns what is queued beyond, at once or as soon as something is,
    /// or nothing after [`CALLBACK_HOLD`].
    pub async fn poll(&self, id: u64, acked: u64) -> Batch {
        let deadline = tokio::time::Instant::now() + CALLBACK_HOLD;
        loop {
            let changed = {
                let mut m = self.conns.lock();
                if !m.contains_key(&id) && m.len() >= MAX_CALLBACK_CONNS {
                    // Too many connections polling: this one is served without callbacks.
                    return Batch::default();
                }
                let q = m.entry(id).or_insert_with(|| ConnQueue {
                    queued: 0,
                    acked: 0,
                    pending: VecDeque::new(),
                    overflow: false,
                    polling: false,
                    last_poll: Instant::now(),
                    changed: Arc::new(Notify::new()),
                });
                q.last_poll = Instant::now();
                if acked > q.acked && acked <= q.queued {
                    q.acked = acked;
                    while q.pending.front().is_some_and(|(s, _)| *s <= acked) {
                        q.pending.pop_front();
                    }
                    if q.acked == q.queued {
                        q.overflow = false;
                    }
                    q.changed.notify_waiters();
                }
                if q.queued > q.acked {
                    q.polling = false;
                    return Batch {
                        upto: q.queued,
                        fids: if q.overflow {
                            Vec::new()
                        } else {
                            q.pending.iter().map(|(_, f)| *f).collect()
                        },
                        all: q.overflow,
                    };
                }
                q.polling = true;
                q.changed.clone()
            };
            let notified = changed.notified();
            let quiet = {
                let m = self.conns.lock();
                m.get(&id).is_some_and(|q| q.queued == q.acked)
            };
            if quiet && tokio::time::timeout_at(deadline, notified).await.is_err() {
                if let Some(q) = self.conns.lock().get_mut(&id) {
                    q.polling = false;
                    q.last_poll = Instant::now();
                    return Batch {
                        upto: q.queued,
                        ..Batch::default()
                    };
                }
                return Batch::default();
            }
        }
    }

    /// The connection is gone: nobody waits for it any more.
    pub fn disconnected(&self, id: u64) {
        if let Some(q) = self.conns.lock().remove(&id) {
            q.changed.notify_waiters();
        }
    }

    /// Whether connection `id` polls: a callback queued for it now reaches its client.
    pub fn polls(&self, id: u64) -> bool {
        self.conns.lock().get(&id).is_some_and(ConnQueue::live)
    }

    /// Connections polling now.
    pub fn polling(&self) -> usize {
        self.conns.lock().values().filter(|q| q.live()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fid(n: u32) -> Fid {
        Fid::new(0x200000400, n, 0)
    }

    #[tokio::test]
    async fn a_change_reaches_a_polling_client_and_the_writer_waits_for_its_answer() {
        let cb = Arc::new(Callbacks::default());
        // Client 7 polls once (registers) and gets nothing yet.
        let c = cb.clone();
        let first = tokio::spawn(async move { c.poll(7, 0).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        // Client 9 never polls: not waited for.
        let waits = cb.post(fid(1), &[7, 9]);
        assert_eq!(waits, vec![(7, 1)]);
        let got = first.await.expect("poll");
        assert_eq!(
            got,
            Batch {
                upto: 1,
                fids: vec![fid(1)],
                all: false
            }
        );
        // The writer waits until the next poll acknowledges.
        let c = cb.clone();
        let writer = tokio::spawn(async move {
            let t = Instant::now();
            c.wait(&waits).await;
            t.elapsed()
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!writer.is_finished(), "the writer must wait for the answer");
        let c = cb.clone();
        let next = tokio::spawn(async move { c.poll(7, 1).await });
        let waited = writer.await.expect("writer");
        assert!(waited >= Duration::from_millis(100) && waited < CALLBACK_WAIT);
        assert_eq!(cb.timed_out.load(Ordering::Relaxed), 0);
        cb.disconnected(7);
        next.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_client_costs_the_writer_one_bounded_wait() {
        let cb = Callbacks::default();
        let _ = tokio::time::timeout(Duration::from_millis(1), cb.poll(3, 0)).await;
        let waits = cb.post(fid(2), &[3]);
        assert_eq!(waits.len(), 1);
        let t = tokio::time::Instant::now();
        cb.wait(&waits).await;
        assert_eq!(t.elapsed(), CALLBACK_WAIT);
        assert_eq!(cb.timed_out.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn a_full_queue_becomes_one_drop_everything() {
        let cb = Callbacks::default();
        let _ = tokio::time::timeout(Duration::from_millis(1), cb.poll(5, 0)).await;
        for n in 0..(CALLBACK_QUEUE_MAX as u32 + 10) {
            cb.post(fid(n), &[5]);
        }
        let b = cb.poll(5, 0).await;
        assert!(b.all);
        assert!(b.fids.is_empty());
        assert_eq!(b.upto, CALLBACK_QUEUE_MAX as u64 + 10);
        // Acknowledged: the queue is ordinary again.
        let _ = tokio::time::timeout(Duration::from_millis(1), cb.poll(5, b.upto)).await;
        cb.post(fid(1), &[5]);
        let b2 = cb.poll(5, b.upto).await;
        assert!(!b2.all);
        assert_eq!(b2.fids, vec![fid(1)]);
    }

    #[tokio::test]
    async fn a_disconnect_releases_the_writer() {
        let cb = Arc::new(Callbacks::default());
        let _ = tokio::time::timeout(Duration::from_millis(1), cb.poll(4, 0)).await;
        let waits = cb.post(fid(3), &[4]);
        let c = cb.clone();
        let writer = tokio::spawn(async move { c.wait(&waits).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        cb.disconnected(4);
        tokio::time::timeout(Duration::from_secs(1), writer)
            .await
            .expect("released at once")
            .expect("writer");
    }
}
