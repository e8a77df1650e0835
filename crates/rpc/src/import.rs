//! An import: a client's lasting link to one named target, as Lustre calls it.
//!
//! It resolves the target's address from the MGS configuration, connects on first use,
//! and after a lost connection reconnects (the address may have changed if the target
//! restarted). Idempotent requests are resent until the recovery deadline; others fail at
//! once with the transport error, since they may already have run. Nothing waits forever:
//! every path ends in a reply or an error within the deadline.
//!
//! A [`ConnectHook`] runs first on every new connection, before other requests use it:
//! the MDC connects and replays there, as Lustre's import goes through its CONNECTING
//! and REPLAY states before FULL.

use crate::conn::{Conn, ConnConfig};
use crate::error::RpcError;
use crate::lo::LocalLink;
use crate::msg::{FsConfig, Reply, Request};
use bytes::Bytes;
use nacre_core::{TargetKind, TargetName};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How long an import keeps trying to reach its target before failing a request (EIO).
pub const DEFAULT_RECOVERY_TIMEOUT: Duration = Duration::from_secs(30);
const BACKOFF_START: Duration = Duration::from_millis(20);
const BACKOFF_MAX: Duration = Duration::from_millis(1000);

/// One new connection of an import, for its [`ConnectHook`].
pub enum NewLink<'a> {
    Tcp(&'a Conn),
    Lo(&'a LocalLink),
}

impl NewLink<'_> {
    pub async fn call(&self, req: &Request, timeout: Duration) -> Result<Reply, RpcError> {
        self.call_bulk(req, Bytes::new(), timeout).await
    }

    /// [`NewLink::call`] of a request with a bulk (a replayed write's data).
    pub async fn call_bulk(
        &self,
        req: &Request,
        bulk: Bytes,
        timeout: Duration,
    ) -> Result<Reply, RpcError> {
        match self {
            NewLink::Tcp(c) => c.call_with_timeout(req, bulk, timeout).await,
            NewLink::Lo(l) => l.call(req, bulk, timeout).await,
        }
        .map(|(r, _)| r)
    }
}

/// What runs on each new connection before it carries other requests. An error leaves the
/// connection unused: the request that made it meets the error as a transport failure and
/// is retried (or failed) as any other.
pub trait ConnectHook: Send + Sync + 'static {
    fn connected<'a>(
        &'a self,
        link: NewLink<'a>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), RpcError>> + Send + 'a>>;
}

pub struct Import {
    target: TargetName,
    cfg: ConnConfig,
    config: watch::Receiver<FsConfig>,
    conn: tokio::sync::Mutex<Option<Conn>>,
    recovery: parking_lot::Mutex<Duration>,
    max_in_flight: std::sync::atomic::AtomicUsize,
    stats: crate::stats::OpStats,
    /// The target itself, when this process serves it ([`crate::lo`]).
    local: parking_lot::Mutex<Option<Arc<LocalLink>>>,
    /// Connections made so far: a new one is a new export on the target, which holds
    /// nothing the old one was given (grant).
    generation: std::sync::atomic::AtomicU64,
    /// Set when a request meets a transport error, cleared by the next answer: a reader
    /// with another copy (an FLR mirror) goes there instead of waiting out the recovery.
    failing: std::sync::atomic::AtomicBool,
    /// Woken when `failing` is set, so such a reader goes at once.
    failing_started: tokio::sync::Notify,
    /// A background reconnect ([`Import::reconnect_in_background`]) is running.
    reconnecting: std::sync::atomic::AtomicBool,
    /// Connections tried so far, made or not (Lustre's `connection_attempts`).
    connect_attempts: std::sync::atomic::AtomicU64,
    hook: std::sync::OnceLock<Arc<dyn ConnectHook>>,
    /// A new in-process link may not have had its connect hook run yet (set under
    /// `local`'s lock when a link is made, cleared once the current one's hook ran).
    lo_hook_due: std::sync::atomic::AtomicBool,
    /// The in-process link whose connect hook ran. Its lock is held while a hook runs, so
    /// other callers wait for the connect instead of sending ahead of it (as the TCP
    /// path's callers wait under `conn`): a request before `MdtConnect` is refused.
    lo_hooked: tokio::sync::Mutex<std::sync::Weak<LocalLink>>,
    /// This import's id in its hello: a target serves a new connection of it only once
    /// the old one's requests are done ([`crate::reconnect`]). Random, never 0.
    id: u64,
    /// Rate limit of the "connect failed" lines: a retry loop against a target whose
    /// connect hook keeps failing would write one per backoff step.
    connect_log: nacre_core::log_limit::LogLimit,
    /// The target's service time and the network's latency as seen from here, which set
    /// each request's deadline ([`crate::at`]); kept across connections, as Lustre's
    /// `imp_at`.
    at: Arc<crate::at::ImportAt>,
}

impl Import {
    pub fn new(target: TargetName, cfg: ConnConfig, config: watch::Receiver<FsConfig>) -> Import {
        let rif = cfg.max_in_flight;
        Import {
            target,
            cfg,
            config,
            max_in_flight: std::sync::atomic::AtomicUsize::new(rif),
            conn: tokio::sync::Mutex::new(None),
            recovery: parking_lot::Mutex::new(DEFAULT_RECOVERY_TIMEOUT),
            stats: crate::stats::OpStats::default(),
            local: parking_lot::Mutex::new(None),
            generation: std::sync::atomic::AtomicU64::new(0),
            failing: std::sync::atomic::AtomicBool::new(false),
            failing_started: tokio::sync::Notify::new(),
            reconnecting: std::sync::atomic::AtomicBool::new(false),
            connect_attempts: std::sync::atomic::AtomicU64::new(0),
            hook: std::sync::OnceLock::new(),
            lo_hook_due: std::sync::atomic::AtomicBool::new(false),
            lo_hooked: tokio::sync::Mutex::new(std::sync::Weak::new()),
            id: rand::random::<u64>().max(1),
            connect_log: nacre_core::log_limit::LogLimit::default(),
            at: Arc::new(crate::at::ImportAt::new(match target.kind {
                TargetKind::Mdt => crate::at::MDS_REQUEST_PORTAL,
                TargetKind::Ost => crate::at::OST_IO_PORTAL,
                TargetKind::Mgs => crate::at::MGS_REQUEST_PORTAL,
            })),
        }
    }

    /// Sets what runs first on each new connection (once; later calls are ignored).
    pub fn set_connect_hook(&self, hook: Arc<dyn ConnectHook>) {
        let _ = self.hook.set(hook);
    }

    /// The deadline of the next request on this import: the adaptive one (or `timeout`
    /// with adaptive timeouts off), never longer than the configured bound.
    pub fn request_timeout(&self) -> Duration {
        let p = crate::at::AT.params();
        Duration::from_secs(u64::from(self.at.request_timeout(&p))).min(self.cfg.timeout)
    }

    /// The estimates behind this import's deadlines (`{mdc,osc,mgc}.*.timeouts`).
    pub fn at(&self) -> &crate::at::ImportAt {
        &self.at
    }

    /// The in-process link to the target, if this process serves it.
    fn local_link(&self) -> Option<Arc<LocalLink>> {
        if !crate::lo::any_registered() {
            return None;
        }
        let mut g = self.local.lock();
        if let Some(l) = g.as_ref() {
            if l.is_current() {
                return Some(l.clone());
            }
            *g = None;
        }
        let addr = self.address()?;
        let full = self.target.full(&self.cfg.fsname);
        let (t, role) = crate::lo::lookup(&addr, &self.cfg.fsname, &full, &self.cfg.key)?;
        let rif = self
            .max_in_flight
            .load(std::sync::atomic::Ordering::Acquire);
        let l = Arc::new(LocalLink::new(t, &self.cfg.client, role, rif).tracked(self.at.clone()));
        *g = Some(l.clone());
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        self.lo_hook_due
            .store(true, std::sync::atomic::Ordering::Release);
        Some(l)
    }

    /// Runs the connect hook on the in-process link `link` unless it ran already; callers
    /// that come meanwhile wait for it. An error leaves it due for the next caller.
    async fn lo_connect(&self, link: &Arc<LocalLink>) -> Result<(), RpcError> {
        let mut hooked = self.lo_hooked.lock().await;
        if std::ptr::eq(hooked.as_ptr(), Arc::as_ptr(link)) {
            return Ok(());
        }
        if let Some(h) = self.hook.get() {
            h.connected(NewLink::Lo(link)).await?;
        }
        *hooked = Arc::downgrade(link);
        // Due no more unless a newer link replaced this one meanwhile (a link is made,
        // and marked due, under this lock).
        let local = self.local.lock();
        if local.as_ref().is_some_and(|l| Arc::ptr_eq(l, link)) {
            self.lo_hook_due
                .store(false, std::sync::atomic::Ordering::Release);
        }
        Ok(())
    }

    /// Changes whenever a new connection (a new export on the target) replaces the last.
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn target(&self) -> TargetName {
        self.target
    }

    pub fn set_recovery_timeout(&self, d: Duration) {
        *self.recovery.lock() = d;
    }

    pub fn recovery_timeout(&self) -> Duration {
        *self.recovery.lock()
    }

    /// The target's address in the current configuration, if it is registered and active.
    pub fn address(&self) -> Option<String> {
        let c = self.config.borrow();
        let list = match self.target.kind {
            TargetKind::Mdt => &c.mdts,
            TargetKind::Ost => &c.osts,
            TargetKind::Mgs => return None,
        };
        list.iter()
            .find(|t| t.name == self.target && t.active)
            .map(|t| t.addr.clone())
    }

    /// Connections tried so far, made or not (Lustre's `connection_attempts`).
    pub fn connect_attempts(&self) -> u64 {
        self.connect_attempts
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Waits until the configuration marks the target down (deregistered, or stopped and
    /// not yet back); at once if it does. Never, once nobody follows the MGS.
    pub async fn deactivated(&self) {
        let mut changed = self.config.clone();
        loop {
            changed.borrow_and_update();
            if self.address().is_none() {
                return;
            }
            if changed.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    /// Whether a connection is up right now.
    pub async fn is_connected(&self) -> bool {
        if self.local_link().is_some() {
            return true;
        }
        self.conn
            .lock()
            .await
            .as_ref()
            .is_some_and(|c| !c.is_closed())
    }

    /// The bound on requests in flight this import applies.
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Sets the bound on requests in flight (`max_rpcs_in_flight`), now and for later
    /// connections.
    pub async fn set_max_in_flight(&self, n: usize) {
        self.max_in_flight
            .store(n.max(1), std::sync::atomic::Ordering::Release);
        if let Some(l) = self.local.lock().as_ref() {
            l.set_max_in_flight(n);
        }
        if let Some(c) = self.conn.lock().await.as_ref() {
            c.set_max_in_flight(n);
        }
    }

    /// The TCP connection, made if there is none; `None` when the target turns out to be
    /// served in this process. A caller that found no in-process link may wait here while
    /// a restarted target's address is published: connecting over TCP then would bind the
    /// client's uuid to a second export beside the in-process link's, and the target
    /// refuses whatever the link sends after that (EPROTO).
    async fn connection(&self) -> Result<Option<Conn>, RpcError> {
        let mut g = self.conn.lock().await;
        if let Some(c) = g.as_ref()
            && !c.is_closed()
        {
            return Ok(Some(c.clone()));
        }
        // Looked for again only before a new connection, not on every request.
        if self.local_link().is_some() {
            return Ok(None);
        }
        self.connect_attempts
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        let addr = self.address().ok_or_else(|| RpcError::Disconnected {
            peer: self.target.short(),
            reason: format!("{} is not registered with the MGS or is down", self.target),
        })?;
        let mut cfg = self.cfg.clone();
        cfg.max_in_flight = self
            .max_in_flight
            .load(std::sync::atomic::Ordering::Acquire);
        let c = Conn::connect_tracked(&addr, &cfg, self.id, self.at.clone()).await?;
        if let Some(h) = self.hook.get() {
            // Under the lock: other requests wait for the connect and replay.
            h.connected(NewLink::Tcp(&c))
                .await
                .map_err(|e| self.connect_failed(e))?;
        }
        *g = Some(c.clone());
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Ok(Some(c))
    }

    /// Holds the lock TCP connects are made under, as a caller that is making one does.
    #[cfg(test)]
    pub(crate) async fn hold_tcp_connect(&self) -> tokio::sync::MutexGuard<'_, Option<Conn>> {
        self.conn.lock().await
    }

    /// A connect hook's error, as the transport error the request that connected meets.
    fn connect_failed(&self, e: RpcError) -> RpcError {
        if let Some(held) = self.connect_log.allow() {
            tracing::warn!(target: "rpc", "{}: connect failed: {e}{}", self.target, nacre_core::log_limit::held_note(held));
        }
        RpcError::Disconnected {
            peer: self.target.short(),
            reason: format!("connect to {} failed: {e}", self.target),
        }
    }

    /// Drops the current connection (after a protocol error, or to force a reconnect).
    pub async fn reset(&self) {
        *self.conn.lock().await = None;
    }

    /// Sends `req`; resends idempotent requests across reconnects until the deadline.
    /// Requests sent through this import, by opcode (`mdc.*.stats`, `osc.*.stats`).
    pub fn stats(&self) -> &crate::stats::OpStats {
        &self.stats
    }

    /// Whether the target stopped answering (its last request met a transport error and
    /// no answer came since).
    pub fn is_failing(&self) -> bool {
        self.failing.load(std::sync::atomic::Ordering::Acquire)
    }

    /// While the target is failing, keeps one ping going to it in the background (Lustre's
    /// pinger reconnecting a disconnected import), unless one already is: its answer
    /// clears the failing mark. Callers that skip a failing target because they have
    /// another copy (a mirror, parity) never call it themselves, so without this they
    /// would skip it long after it is back. A ping gives up after the recovery timeout;
    /// the next caller that skips the target starts another.
    pub fn reconnect_in_background(self: &Arc<Self>) {
        use std::sync::atomic::Ordering;
        if !self.is_failing() || self.reconnecting.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            self.reconnecting.store(false, Ordering::Release);
            return;
        };
        let imp = self.clone();
        rt.spawn(async move {
            let r = imp.call(&Request::Ping, Bytes::new()).await;
            tracing::debug!(target: "rpc", "{}: background reconnect: {}", imp.target, if r.is_ok() { "answered" } else { "no answer" });
            imp.reconnecting.store(false, Ordering::Release);
        });
    }

    /// Waits until the target is failing ([`Import::is_failing`]); at once if it is.
    pub async fn failing(&self) {
        loop {
            let started = self.failing_started.notified();
            let mut started = std::pin::pin!(started);
            // Registered before the flag is read, so a wake in between is not lost.
            started.as_mut().enable();
            if self.is_failing() {
                return;
            }
            started.await;
        }
    }

    pub async fn call(&self, req: &Request, bulk: Bytes) -> Result<(Reply, Bytes), RpcError> {
        self.call_within(req, bulk, Duration::ZERO).await
    }

    /// [`Import::call`] with a deadline of at least `at_least`, for a request the target
    /// may hold that long (a long poll) whatever the recovery timeout.
    pub async fn call_within(
        &self,
        req: &Request,
        bulk: Bytes,
        at_least: Duration,
    ) -> Result<(Reply, Bytes), RpcError> {
        let start = Instant::now();
        let within = self.recovery_timeout().max(at_least);
        let r = self.call_inner(req, bulk, within).await;
        if !matches!(&r, Err(e) if e.is_transport() || matches!(e, RpcError::Disconnected { .. })) {
            self.failing
                .store(false, std::sync::atomic::Ordering::Release);
        }
        self.stats.record(req.opcode(), start.elapsed());
        r
    }

    async fn call_inner(
        &self,
        req: &Request,
        bulk: Bytes,
        within: Duration,
    ) -> Result<(Reply, Bytes), RpcError> {
        let deadline = Instant::now() + within;
        let mut backoff = BACKOFF_START;
        loop {
            if let Some(link) = self.local_link() {
                if self.lo_hook_due.load(std::sync::atomic::Ordering::Acquire)
                    && let Err(e) = self.lo_connect(&link).await
                {
                    let e = self.connect_failed(e);
                    if Instant::now() >= deadline {
                        return Err(e);
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    continue;
                }
                let left = deadline
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1));
                return link.call(req, bulk, left.min(self.request_timeout())).await;
            }
            let res = match self.connection().await {
                // Served in process after all: the loop's first branch takes it.
                Ok(None) => continue,
                Ok(Some(c)) => {
                    let left = deadline
                        .saturating_duration_since(Instant::now())
                        .max(Duration::from_millis(1));
                    let r = c
                        .call_with_timeout(req, bulk.clone(), left.min(self.request_timeout()))
                        .await;
                    if let Err(e) = &r
                        && e.is_transport()
                    {
                        self.reset().await;
                    }
                    // A non-idempotent request that may have run is not sent again.
                    if matches!(&r, Err(e) if e.is_transport()) && !req.is_idempotent() {
                        return r;
                    }
                    r
                }
                Err(e) => Err(e),
            };
            match res {
                Err(e) if e.is_transport() && Instant::now() < deadline => {
                    if !self.failing.swap(true, std::sync::atomic::Ordering::AcqRel) {
                        self.failing_started.notify_waiters();
                    }
                    tracing::debug!(target: "rpc", "{}: {e}; retrying", self.target);
                    // Wake early if the MGS announces a new address: one newer than the
                    // configuration just read (a clone of a receiver that never marked
                    // the last update seen wakes at once), and once nobody follows the MGS
                    // any more (it is gone, or the client is going) `changed` returns at
                    // once, so the pause is slept out. Either way the import spun a core
                    // until its deadline.
                    let mut changed = self.config.clone();
                    changed.borrow_and_update();
                    let paused = Instant::now();
                    if let Ok(Err(_)) = tokio::time::timeout(backoff, changed.changed()).await {
                        tokio::time::sleep(backoff.saturating_sub(paused.elapsed())).await;
                    }
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
                Err(e) if e.is_transport() => {
                    return Err(RpcError::Disconnected {
                        peer: self.target.short(),
                        reason: format!(
                            "no answer from {} within {}s: {e}",
                            self.target,
                            within.as_secs()
                        ),
                    });
                }
                other => return other,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::TargetInfo;

    /// A target nobody answers for, after the configuration last changed and then (with
    /// `mgs_gone`) nobody updates it any more (the client's MGS follower has ended): the
    /// import retries with its backoff until the deadline, a few attempts, not a spin.
    async fn unreachable_target_is_retried_with_backoff(mgs_gone: bool) {
        // A port that was just free: connections are refused at once.
        let addr = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr").to_string()
        };
        let target = TargetName::ost(0);
        let config = FsConfig {
            fsname: "spinfs".into(),
            osts: vec![TargetInfo {
                name: target,
                addr,
                active: true,
            }],
            ..FsConfig::default()
        };
        let (tx, rx) = watch::channel(config);
        // The MGS marks another target down: the import's receiver has not seen it.
        tx.send_modify(|c| c.generation += 1);
        let _tx = (!mgs_gone).then_some(tx);
        let cfg = ConnConfig {
            fsname: "spinfs".into(),
            client: "client".into(),
            key: crate::auth::Key::generate(),
            max_in_flight: 8,
            timeout: Duration::from_secs(1),
        };
        let imp = Import::new(target, cfg, rx);
        let recovery = Duration::from_secs(1);
        imp.set_recovery_timeout(recovery);
        let t = Instant::now();
        let r = imp.call(&Request::Ping, Bytes::new()).await;
        assert!(matches!(r, Err(RpcError::Disconnected { .. })), "{r:?}");
        assert!(t.elapsed() >= recovery, "gave up early: {:?}", t.elapsed());
        assert!(
            t.elapsed() < recovery + BACKOFF_MAX * 2,
            "past its deadline: {:?}",
            t.elapsed()
        );
        // 20, 40, ... 640 ms pauses fill a second: 7 or 8 attempts.
        let n = imp.connect_attempts();
        assert!(
            (2..=10).contains(&n),
            "{n} connection attempts in {recovery:?}"
        );
    }

    #[tokio::test]
    async fn an_unreachable_target_is_retried_with_backoff() {
        unreachable_target_is_retried_with_backoff(false).await;
    }

    #[tokio::test]
    async fn an_unreachable_target_is_retried_with_backoff_after_the_mgs_is_gone() {
        unreachable_target_is_retried_with_backoff(true).await;
    }
}
