//! A client's new connection waits for its old one's requests, as Lustre's
//! `target_handle_connect` refuses a reconnect while the old export still has RPCs running.
//!
//! A request whose caller gave up (it timed out) may still be running on the target, or still
//! be on its way in the old connection's socket. If the client then reconnected and sent
//! newer requests, the old one could finish after them: a truncate the application was told
//! had failed would cut the data it wrote again afterwards, and a stale write would land on
//! newer bytes. So each [`Import`](crate::Import) names itself with a random id in its
//! hello, and a target keeps the latest connection of each: a new one stops the old one's
//! reading (what the old one had not read is never run) and serves nothing until every
//! request the old one started has finished, or refuses itself after [`RECONNECT_WAIT`]
//! (the client connects again later). Connections without an id (tools, older peers) are
//! not tracked.
//!
//! Bounded by the live connections: an entry ends when its connection has drained.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How long a new connection waits for the requests of the connection it replaces before
/// it is closed unserved. Requests that take this long are stuck (an OST they wait on is
/// gone); the client retries its connect until its own deadline.
pub const RECONNECT_WAIT: Duration = Duration::from_secs(60);

/// One tracked connection.
struct Track {
    /// Set when a newer connection of the same import replaces this one.
    stop: watch::Sender<bool>,
    /// Set once this connection and every one it replaced have no request running.
    drained: watch::Sender<bool>,
}

/// The latest connection of each import, per target.
#[derive(Default)]
pub struct Successions {
    latest: Mutex<HashMap<(IpAddr, u64), Arc<Track>>>,
}

/// A tracked connection's place in its import's line of connections.
pub struct Succession {
    /// The node it came from and its import id: an id is a client's claim, so a peer on
    /// another node naming it starts a line of its own instead of stopping the client's.
    import: (IpAddr, u64),
    track: Arc<Track>,
    previous: Option<Arc<Track>>,
    stop: watch::Receiver<bool>,
}

impl Successions {
    /// A new connection from `node` of `import` (0: untracked, `None`); the one it
    /// replaces, if any, is told to stop reading.
    pub fn begin(&self, node: IpAddr, import: u64) -> Option<Succession> {
        if import == 0 {
            return None;
        }
        let import = (node, import);
        let (stop, stop_rx) = watch::channel(false);
        let (drained, _) = watch::channel(false);
        let track = Arc::new(Track { stop, drained });
        let previous = self.latest.lock().insert(import, track.clone());
        if let Some(p) = &previous {
            p.stop.send_replace(true);
        }
        Some(Succession {
            import,
            track,
            previous,
            stop: stop_rx,
        })
    }

    /// Connections tracked now.
    pub fn len(&self) -> usize {
        self.latest.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The connection ended and drained: its entry goes (unless a newer one took it).
    fn end(&self, s: &Succession) {
        let mut g = self.latest.lock();
        if g.get(&s.import).is_some_and(|t| Arc::ptr_eq(t, &s.track)) {
            g.remove(&s.import);
        }
    }
}

impl Succession {
    /// Waits until every request of the connections this one replaces has finished: true,
    /// or false when `bound` passed first or this connection was itself replaced meanwhile.
    pub async fn previous_drained(&mut self, bound: Duration) -> bool {
        let Some(p) = &self.previous else {
            return true;
        };
        let mut drained = p.drained.subscribe();
        let mut stop = self.stop.clone();
        tokio::select! {
            r = drained.wait_for(|d| *d) => r.is_ok(),
            _ = stop.wait_for(|s| *s) => false,
            () = tokio::time::sleep(bound) => false,
        }
    }

    /// Resolves once a newer connection of the same import has replaced this one, for a
    /// request of this connection to watch (a long poll ends then).
    pub fn replaced_signal(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut stop = self.stop.clone();
        async move {
            if stop.wait_for(|s| *s).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// This connection has no request running any more: once those it replaced have none
    /// either, it counts as drained (a newer connection waiting on it goes on).
    pub async fn finish(self, all: &Successions) {
        if let Some(p) = &self.previous {
            // Not bounded: the chain must not claim requests done that are still running;
            // each of them ends by itself (a handler has its own timeouts).
            let _ = p.drained.subscribe().wait_for(|d| *d).await;
        }
        self.track.drained.send_replace(true);
        all.end(&self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_new_connection_waits_for_the_whole_line_before_it() {
        let all = Arc::new(Successions::default());
        let node: IpAddr = [10, 0, 0, 1].into();
        assert!(all.begin(node, 0).is_none(), "id 0 is untracked");
        let mut first = all.begin(node, 7).expect("tracked");
        assert!(first.previous_drained(Duration::from_millis(1)).await);
        let mut second = all.begin(node, 7).expect("tracked");
        // The first is told to stop reading.
        tokio::time::timeout(Duration::from_secs(1), first.replaced_signal())
            .await
            .expect("first replaced");
        assert!(!second.previous_drained(Duration::from_millis(20)).await);
        // A third replaces the second before the first drained: the second ends (nothing
        // ran on it), but the third still waits for the first.
        let mut third = all.begin(node, 7).expect("tracked");
        assert!(!second.previous_drained(Duration::from_secs(5)).await);
        let all2 = all.clone();
        let second_done = tokio::spawn(async move { second.finish(&all2).await });
        assert!(!third.previous_drained(Duration::from_millis(50)).await);
        assert!(!second_done.is_finished());
        first.finish(&all).await;
        assert!(third.previous_drained(Duration::from_secs(5)).await);
        // The same id from another node replaces nothing of this line.
        let mut other = all.begin([10, 0, 0, 2].into(), 7).expect("tracked");
        assert!(other.previous_drained(Duration::from_millis(1)).await);
        other.finish(&all).await;
        second_done.await.expect("second finished");
        assert_eq!(all.len(), 1, "only the third is live");
        third.finish(&all).await;
        assert!(all.is_empty());
    }
}
