//! The client's side of the MDTs' cache callbacks (Lustre's blocking ASTs): one long poll
//! per MDT returns the files this client holds open that another client changed; the
//! client drops what it cached of them (readahead, read-on-open content, and through the
//! [`CacheHook`] the kernel's pages) and acknowledges with its next poll, which is what
//! the changing client's `close` or `fsync` waits for. See `nacre_mdt::callback`.

use crate::Client;
use bytes::Bytes;
use nacre_core::Fid;
use nacre_rpc::Import;
use nacre_rpc::msg::{Reply, Request};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::watch;

/// What to drop: these files, or (`None`) everything.
pub type CacheHook = Arc<dyn Fn(Option<&[Fid]>) + Send + Sync>;

/// Pause after a failed poll (target down, reconnecting) before the next.
const RETRY_PAUSE: Duration = Duration::from_secs(1);
/// How long a poll is waited for: the MDT's hold and a round trip under load. A shorter
/// recovery timeout would time every idle poll out, and with it the connection.
const POLL_WAIT: Duration = Duration::from_secs(nacre_rpc::msg::WAIT_CALLBACKS_HOLD.as_secs() + 5);

impl Client {
    /// Sets what is called (on a blocking thread) to drop cached data of files another
    /// client changed, before the change is acknowledged.
    pub fn set_cache_hook(&self, hook: CacheHook) {
        *self.cache_hook.write() = Some(hook);
    }

    /// Drops what this client caches of `fids` (of everything with `None`).
    pub(crate) async fn drop_cached(&self, fids: Option<Vec<Fid>>) {
        match &fids {
            Some(v) => v.iter().for_each(|f| self.local_changes.bump(f)),
            None => self.local_changes.bump_all(),
        }
        let hook = self.cache_hook.read().clone();
        if let Some(h) = hook {
            // The kernel's invalidation waits for pages that reads in flight hold.
            let _ = tokio::task::spawn_blocking(move || h(fids.as_deref())).await;
        }
    }
}

/// Polls one MDT for callbacks until the client is unmounted or dropped.
pub(crate) async fn follow(
    client: Weak<Client>,
    imp: Arc<Import>,
    mut stop: watch::Receiver<bool>,
) {
    let mut acked = 0;
    let mut generation = imp.generation();
    loop {
        if *stop.borrow() {
            return;
        }
        if imp.generation() != generation {
            // A new connection: callbacks queued for the old one while it was down are
            // lost (the MDT's queue is per connection), so nothing cached of this MDT's
            // files can be trusted. The new queue counts from 0.
            let first = generation == 0;
            generation = imp.generation();
            acked = 0;
            if !first && let Some(c) = client.upgrade() {
                tracing::debug!(target: "client", "{}: reconnected: dropping cached data", imp.target());
                c.append_callback(None);
                c.drop_cached(None).await;
            }
        }
        let req = Request::WaitCallbacks { acked };
        let poll = imp.call_within(&req, Bytes::new(), POLL_WAIT);
        let r = tokio::select! {
            r = poll => r,
            _ = stop.changed() => return,
        };
        match r {
            Ok((Reply::Callbacks { upto, fids, all }, _)) => {
                let Some(c) = client.upgrade() else { return };
                // A lock of one of these files may have gone: waiting locks ask again.
                c.flocks.wake();
                if all {
                    c.append_callback(None);
                    c.drop_cached(None).await;
                } else if !fids.is_empty() {
                    c.append_callback(Some(&fids));
                    c.drop_cached(Some(fids)).await;
                }
                acked = upto;
            }
            Ok(_) => {
                tracing::warn!(target: "client", "{}: unexpected reply to a callback poll", imp.target());
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            Err(e) => {
                if client.strong_count() == 0 {
                    return;
                }
                tracing::debug!(target: "client", "{}: callback poll: {e}", imp.target());
                tokio::select! {
                    _ = tokio::time::sleep(RETRY_PAUSE) => {}
                    _ = stop.changed() => return,
                }
            }
        }
    }
}
