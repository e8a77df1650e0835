//! In-process delivery, as LNet's `lo` LND delivers messages a node sends to itself.
//!
//! `nacre up` runs the MGS, MDTs, OSTs and the mounting client in one process; without this
//! every request would still cross loopback TCP: encoded, checksummed, copied into the
//! kernel and out again, and handed between threads twice. A server registers here under
//! its listening address when it starts serving; an [`Import`](crate::Import) whose target
//! address is registered, for the same file system and key, hands requests to the service
//! directly, bulk data included, without a copy. Everything else a connection gives stays
//! the same: the handshake's identity (a key mismatch falls back to TCP, which refuses it),
//! per-client request bounds (`max_rpcs_in_flight`), the server's memory budget and
//! request stats, timeouts, and handlers that run to completion even if the caller gives
//! up. When the server stops serving it leaves the registry, and imports go back to TCP
//! (and find it gone, as a remote client would).
//!
//! `NACRE_LO=0` in the environment turns this off, to measure or test the TCP path alone.

use crate::auth::PeerRole;
use crate::conn::InFlight;
use crate::error::RpcError;
use crate::msg::{Reply, Request};
use crate::server::{RequestCtx, ServerConfig, Service};
use bytes::Bytes;
use nacre_core::Errno;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, LazyLock, Weak};
use std::task::Poll;
use std::time::Duration;

type HandlerResult = Result<(Reply, Bytes), Errno>;
type Handled = Pin<Box<dyn Future<Output = HandlerResult> + Send>>;
type Done = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A service behind a type-erased handle.
trait Handler: Send + Sync {
    fn admit(&self, req: &Request) -> Result<(), Errno>;
    fn handle(&self, ctx: RequestCtx, req: Request, bulk: Bytes) -> Handled;
    fn disconnected(&self, ctx: RequestCtx) -> Done;
}

struct Svc<S>(Arc<S>);

impl<S: Service> Handler for Svc<S> {
    fn admit(&self, req: &Request) -> Result<(), Errno> {
        self.0.admit(req)
    }

    fn handle(&self, ctx: RequestCtx, req: Request, bulk: Bytes) -> Handled {
        Box::pin(self.0.clone().handle(ctx, req, bulk))
    }

    fn disconnected(&self, ctx: RequestCtx) -> Done {
        Box::pin(self.0.clone().disconnected(ctx))
    }
}

/// A target served in this process.
pub struct LocalTarget {
    cfg: Arc<ServerConfig>,
    addr: SocketAddr,
    /// `addr` as the registry's key.
    name: String,
    handler: Box<dyn Handler>,
    /// The runtime serving the target: its handlers run there, not on the caller's, so a
    /// client whose runtime ends (a library client dropped) does not cut server work
    /// short midway, such as a store commit another request waits for.
    rt: Option<tokio::runtime::Handle>,
}

static REGISTRY: LazyLock<Mutex<HashMap<String, Arc<LocalTarget>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));
/// Targets registered: a process serving none (a plain client) skips the registry.
static REGISTERED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Whether this process serves any target at all.
pub fn any_registered() -> bool {
    REGISTERED.load(std::sync::atomic::Ordering::Acquire) > 0
}

/// Whether in-process delivery is allowed (`NACRE_LO=0` turns it off).
fn enabled() -> bool {
    static ON: LazyLock<bool> =
        LazyLock::new(|| std::env::var("NACRE_LO").map_or(true, |v| v != "0"));
    *ON
}

/// Keeps a target registered; dropping it unregisters the target. The registry holds the
/// only lasting reference to the service, so a stopped target's resources (its store, its
/// files) are released even while clients in this process live on.
pub struct Registration {
    key: String,
    target: Weak<LocalTarget>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut r = REGISTRY.lock();
        if r.get(&self.key)
            .is_some_and(|t| std::ptr::eq(Arc::as_ptr(t), self.target.as_ptr()))
        {
            r.remove(&self.key);
        }
        REGISTERED.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// Registers `svc`, listening on `addr`, for clients in this process.
pub fn register<S: Service>(
    addr: SocketAddr,
    cfg: Arc<ServerConfig>,
    svc: Arc<S>,
) -> Option<Registration> {
    if !enabled() {
        return None;
    }
    let key = addr.to_string();
    let target = Arc::new(LocalTarget {
        cfg,
        addr,
        name: key.clone(),
        handler: Box::new(Svc(svc)),
        rt: tokio::runtime::Handle::try_current().ok(),
    });
    let weak = Arc::downgrade(&target);
    REGISTRY.lock().insert(key.clone(), target);
    REGISTERED.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    Some(Registration { key, target: weak })
}

/// The target registered at `addr`, if it serves file system `fsname` as `target`, and the
/// role `key` has there (none: the key is neither of its two).
pub fn lookup(
    addr: &str,
    fsname: &str,
    target: &str,
    key: &crate::Key,
) -> Option<(Arc<LocalTarget>, PeerRole)> {
    if !enabled() {
        return None;
    }
    let t = REGISTRY.lock().get(addr).cloned()?;
    if t.cfg.fsname != fsname || t.cfg.target != target {
        return None;
    }
    let role = PeerRole::of(&t.cfg.key, key)?;
    Some((t, role))
}

/// One client's link to a local target: what a connection is over TCP.
pub struct LocalLink {
    target: Weak<LocalTarget>,
    /// The registry key and the target's name, for checks and messages.
    key: String,
    name: String,
    ctx: RequestCtx,
    /// `max_rpcs_in_flight`, as a connection bounds it.
    in_flight: InFlight,
    /// Handlers still running whose callers stopped waiting (timed out).
    abandoned: Arc<Abandoned>,
    /// The client's estimates of the target ([`crate::at`]), fed with each answer.
    at: Arc<crate::at::ImportAt>,
}

/// Handlers whose callers gave up. A caller told its request failed must not see it finish
/// after a newer one: the link serves nothing new until they are done, as a target serves a
/// TCP client's new connection only once the old one's requests are ([`crate::reconnect`]).
#[derive(Default)]
struct Abandoned {
    running: std::sync::atomic::AtomicUsize,
    idle: tokio::sync::Notify,
}

/// A handler's task while its caller waits; dropped before it ends, the task is
/// [`Abandoned`].
struct Watched<'a> {
    task: Option<tokio::task::JoinHandle<HandlerResult>>,
    abandoned: &'a Arc<Abandoned>,
    rt: Option<&'a tokio::runtime::Handle>,
    /// A long poll: given up on, it is ended instead (it changes nothing).
    poll: bool,
}

impl Watched<'_> {
    async fn wait(
        &mut self,
        timeout: Duration,
    ) -> Result<Result<HandlerResult, tokio::task::JoinError>, tokio::time::error::Elapsed> {
        let Some(task) = self.task.as_mut() else {
            return Ok(Ok(Err(Errno::EIO)));
        };
        let r = tokio::time::timeout(timeout, task).await;
        if r.is_ok() {
            self.task = None;
        }
        r
    }
}

impl Drop for Watched<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.task.take()
            && !t.is_finished()
        {
            if self.poll {
                t.abort();
            } else {
                self.abandoned.add(t, self.rt);
            }
        }
    }
}

impl Abandoned {
    /// Counts `task` until it ends; watched from `rt` (the server's runtime, where it runs)
    /// so a caller's runtime that ends cannot leave it counted for good.
    fn add(
        self: &Arc<Self>,
        task: tokio::task::JoinHandle<HandlerResult>,
        rt: Option<&tokio::runtime::Handle>,
    ) {
        self.running
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        let me = self.clone();
        let watch = async move {
            let _ = task.await;
            if me.running.fetch_sub(1, std::sync::atomic::Ordering::AcqRel) == 1 {
                me.idle.notify_waiters();
            }
        };
        match rt {
            Some(rt) => drop(rt.spawn(watch)),
            None => drop(tokio::spawn(watch)),
        }
    }

    /// Waits until no abandoned handler runs; false if `bound` passed first.
    async fn wait_idle(&self, bound: Duration) -> bool {
        // Every in-process request passes here: nothing to arm when nothing was abandoned.
        if self.running.load(std::sync::atomic::Ordering::Acquire) == 0 {
            return true;
        }
        let idle = async {
            loop {
                let n = self.idle.notified();
                let mut n = std::pin::pin!(n);
                // Registered before the count is read, so a wake in between is not lost.
                n.as_mut().enable();
                if self.running.load(std::sync::atomic::Ordering::Acquire) == 0 {
                    return;
                }
                n.await;
            }
        };
        tokio::time::timeout(bound, idle).await.is_ok()
    }
}

impl LocalLink {
    pub fn new(
        target: Arc<LocalTarget>,
        client: &str,
        role: PeerRole,
        max_in_flight: usize,
    ) -> LocalLink {
        let ctx = RequestCtx {
            peer: target.addr,
            client: client.to_string(),
            role,
            conn_id: crate::server::next_conn_id(),
        };
        LocalLink {
            target: Arc::downgrade(&target),
            key: target.name.clone(),
            name: target.cfg.target.clone(),
            ctx,
            in_flight: InFlight::new(max_in_flight),
            abandoned: Arc::default(),
            at: Arc::new(crate::at::ImportAt::new(0)),
        }
    }

    /// Keeps this link's deadlines in `at`, its import's estimates of the target.
    pub fn tracked(mut self, at: Arc<crate::at::ImportAt>) -> LocalLink {
        self.at = at;
        self
    }

    /// Whether this link's target is still the one registered (it has not stopped).
    pub fn is_current(&self) -> bool {
        REGISTRY
            .lock()
            .get(&self.key)
            .is_some_and(|t| std::ptr::eq(Arc::as_ptr(t), self.target.as_ptr()))
    }

    pub fn set_max_in_flight(&self, n: usize) {
        self.in_flight.resize(n);
    }

    /// Hands `req` to the service and waits for its reply, at most `timeout`; an errno
    /// reply becomes `RpcError::Errno`, as over TCP.
    pub async fn call(
        &self,
        req: &Request,
        bulk: Bytes,
        timeout: Duration,
    ) -> Result<(Reply, Bytes), RpcError> {
        let peer = || self.name.clone();
        let called = std::time::Instant::now();
        let t = self
            .target
            .upgrade()
            .ok_or_else(|| RpcError::Disconnected {
                peer: peer(),
                reason: "the target stopped".into(),
            })?;
        // The sizes a frame could not carry fail here as they fail before a TCP client
        // sends; then the target's own maxima, before anything is reserved.
        if crate::frame::check_lengths(0, bulk.len()).is_err() {
            return Err(RpcError::Errno(Errno::EFBIG));
        }
        crate::server::check_role(&t.cfg.target, &self.ctx, req)?;
        let reply = crate::server::reply_bytes(|r| t.handler.admit(r), req)?;
        if reply > 0 && !bulk.is_empty() {
            // A request answered with bulk brings none, as over TCP.
            return Err(RpcError::Errno(Errno::EPROTO));
        }
        if !self.abandoned.wait_idle(timeout).await {
            // Not run: requests this client was told had failed are still running.
            return Err(RpcError::Timeout {
                peer: peer(),
                secs: timeout.as_secs(),
            });
        }
        let permit = self
            .in_flight
            .acquire()
            .await
            .ok_or_else(|| RpcError::Disconnected {
                peer: peer(),
                reason: "link closed".into(),
            })?;
        // The server's memory budget covers local requests as it covers remote ones, in
        // one reservation (within the budget: both parts are checked above).
        let mem = t
            .cfg
            .memory
            .reserve(bulk.len() as u64 + reply)
            .await
            .map_err(|e| {
                tracing::warn!(target: "rpc", "{}: {e}", t.cfg.target);
                RpcError::Errno(Errno::ENOMEM)
            })?;
        let opcode = req.opcode();
        let quick = req.is_quick();
        let poll = req.is_long_poll();
        let stats = t.cfg.stats.clone();
        let service_at = t.cfg.service_at.clone();
        let fut = t.handler.handle(self.ctx.clone(), req.clone(), bulk);
        let work = async move {
            let _permit = permit;
            let _mem = mem;
            let start = std::time::Instant::now();
            let r = fut.await;
            stats.record(opcode, start.elapsed());
            let secs = crate::at::wire_secs(start.elapsed());
            service_at.measure(&crate::at::AT.params(), u32::from(secs));
            r
        };
        let r = if quick {
            // Read-only and short: not worth a task, and safe to drop midway.
            tokio::time::timeout(timeout, work).await
        } else {
            // Polled once here: a handler that needs not wait (an uncontended commit) is
            // done without a thread switch. One that waits goes on as its own task, so a
            // caller that stops waiting does not cut it short.
            let mut work = Box::pin(work);
            let first = std::future::poll_fn(|cx| {
                // In the server's runtime: what the handler spawns or arms goes there.
                let _server = t.rt.as_ref().map(|h| h.enter());
                // A handler that panics answers EIO, as one running as a task does.
                Poll::Ready(std::panic::catch_unwind(std::panic::AssertUnwindSafe(
                    || work.as_mut().poll(cx),
                )))
            })
            .await;
            let failed = |why: &dyn std::fmt::Display| {
                tracing::error!(target: "rpc", "{}: handler failed: {why}", t.cfg.target);
                Errno::EIO
            };
            match first {
                Ok(Poll::Ready(r)) => Ok(r),
                Ok(Poll::Pending) => {
                    let task = match &t.rt {
                        Some(rt) => rt.spawn(work),
                        None => tokio::spawn(work),
                    };
                    // Counted as abandoned if this caller stops waiting, by its timeout or
                    // by being dropped.
                    let mut watched = Watched {
                        task: Some(task),
                        abandoned: &self.abandoned,
                        rt: t.rt.as_ref(),
                        poll,
                    };
                    // A handler still at work near the deadline gets more time, as a
                    // remote one asks for it with an early reply (a long poll ends on
                    // its own first).
                    let p = crate::at::AT.params();
                    let mut clock = crate::at::EarlyClock::new(&p, called, timeout);
                    if poll {
                        clock = clock.closed();
                    }
                    loop {
                        let left = clock
                            .next(&p)
                            .saturating_duration_since(std::time::Instant::now());
                        match watched.wait(left).await {
                            Ok(Ok(r)) => break Ok(r),
                            Ok(Err(e)) => break Ok(Err(failed(&e))),
                            Err(e) if clock.is_final() => break Err(e),
                            Err(_) => {
                                clock.extend(&t.cfg.service_at, &p);
                            }
                        }
                    }
                }
                Err(_) => Ok(Err(failed(&"panicked"))),
            }
        };
        if t.cfg.net.dropping() {
            // The reply is lost (the c-Network fault): the caller waits out its timeout,
            // as it would for a remote server.
            tokio::time::sleep(timeout.saturating_sub(called.elapsed())).await;
            return Err(RpcError::Timeout {
                peer: peer(),
                secs: timeout.as_secs(),
            });
        }
        if r.is_ok() {
            let p = crate::at::AT.params();
            let estimate = u16::try_from(t.cfg.service_at.get(&p)).unwrap_or(u16::MAX);
            let spent = called.elapsed();
            self.at
                .replied(&p, spent, estimate, crate::at::wire_secs(spent));
        }
        match r {
            Ok(Ok((Reply::Error(e), _))) | Ok(Err(e)) => Err(RpcError::Errno(e)),
            Ok(Ok(r)) => Ok(r),
            Err(_) => Err(RpcError::Timeout {
                peer: peer(),
                secs: timeout.as_secs(),
            }),
        }
    }
}

impl Drop for LocalLink {
    fn drop(&mut self) {
        // The client is gone: the service releases what it held, as after a disconnect
        // (a stopped service has nothing left to release).
        if self.is_current()
            && let Some(t) = self.target.upgrade()
            && let Some(rt) =
                t.rt.clone()
                    .or_else(|| tokio::runtime::Handle::try_current().ok())
        {
            rt.spawn(t.handler.disconnected(self.ctx.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::Import;
    use crate::auth::Key;
    use crate::conn::ConnConfig;
    use crate::error::RpcError;
    use crate::memory::MemoryBudget;
    use crate::msg::{FsConfig, Reply, Request, TargetInfo};
    use crate::server::{RequestCtx, ServerConfig, Service, serve};
    use bytes::Bytes;
    use nacre_core::{Errno, TargetName};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;
    use tokio::net::TcpListener;
    use tokio::sync::watch;

    /// Answers with the peer it sees, so a test can tell lo (the server's own address)
    /// from TCP (the client's port); counts disconnects.
    #[derive(Default)]
    struct Peer {
        gone: AtomicU64,
        /// Slow requests that ran to their end.
        finished: AtomicU64,
        /// What ran, in the order it ended.
        order: parking_lot::Mutex<Vec<&'static str>>,
    }

    impl Service for Peer {
        async fn handle(
            self: Arc<Self>,
            ctx: RequestCtx,
            req: Request,
            bulk: Bytes,
        ) -> Result<(Reply, Bytes), Errno> {
            match req {
                Request::Ping => {
                    self.order.lock().push("ping");
                    Ok((
                        Reply::Pong {
                            target: ctx.peer.to_string(),
                        },
                        bulk,
                    ))
                }
                Request::OstRead { len, .. } => {
                    // As slow as it asks, in milliseconds.
                    tokio::time::sleep(Duration::from_millis(u64::from(len))).await;
                    Ok((Reply::Ok, bulk))
                }
                Request::Statfs => {
                    // Slow: outlives a caller that gives up.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    self.finished.fetch_add(1, Ordering::Relaxed);
                    self.order.lock().push("slow");
                    Err(Errno::ENOSPC)
                }
                _ => Err(Errno::ENOSYS),
            }
        }

        async fn disconnected(self: Arc<Self>, _ctx: RequestCtx) {
            self.gone.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn import(addr: &str, key: Key) -> Import {
        let name = TargetName::ost(0);
        let cfg = FsConfig {
            fsname: "lofs".into(),
            osts: vec![TargetInfo {
                name,
                addr: addr.to_string(),
                active: true,
            }],
            ..FsConfig::default()
        };
        let (_tx, rx) = watch::channel(cfg);
        let imp = Import::new(
            name,
            ConnConfig {
                fsname: "lofs".into(),
                client: "client-lo".into(),
                key,
                max_in_flight: 4,
                timeout: Duration::from_secs(5),
            },
            rx,
        );
        imp.set_recovery_timeout(Duration::from_millis(300));
        imp
    }

    /// A `Peer` served on loopback, registered for in-process delivery: its address, its
    /// config, and the serving task (stopped through `shutdown`).
    async fn start(
        key: &Key,
        svc: Arc<Peer>,
        shutdown: watch::Receiver<bool>,
    ) -> (String, Arc<ServerConfig>, tokio::task::JoinHandle<()>) {
        assert!(
            super::enabled(),
            "in-process delivery is off (NACRE_LO=0): these tests are of it"
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let cfg = Arc::new(ServerConfig {
            fsname: "lofs".into(),
            target: "lofs-OST0000".into(),
            key: key.clone(),
            memory: MemoryBudget::new(64 << 20),
            stats: Default::default(),
            net: Default::default(),
            service_at: Default::default(),
        });
        let serving = serve(listener, cfg.clone(), svc, shutdown);
        // Registered before the task first runs: a client told the address (the MGS
        // publishes it once the target's serve returns) finds the service in process, not
        // only its TCP listener.
        assert!(
            super::REGISTRY.lock().contains_key(&addr),
            "not registered when serve returned"
        );
        let task = tokio::spawn(serving);
        (addr, cfg, task)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_key_is_refused_the_servers_requests_in_process_and_over_tcp() {
        let key = Key::generate();
        let svc = Arc::new(Peer::default());
        let (_sd_tx, sd_rx) = watch::channel(false);
        let (addr, _cfg, _task) = start(&key, svc.clone(), sd_rx).await;
        let destroy = Request::OstDestroy {
            objs: vec![nacre_core::Fid::new(0x100000000, 1, 0)],
        };
        let wrapped = Request::Tracked {
            client: 1,
            xid: 7,
            req: Box::new(destroy.clone()),
        };
        // In process.
        let client = import(&addr, key.client_key());
        let (r, _) = client
            .call(&Request::Ping, Bytes::new())
            .await
            .expect("ping");
        assert_eq!(
            r,
            Reply::Pong {
                target: addr.clone()
            },
            "not delivered in process"
        );
        for req in [&destroy, &wrapped] {
            let e = client.call(req, Bytes::new()).await.err();
            assert_eq!(e, Some(RpcError::Errno(Errno::EPERM)), "{req:?}");
        }
        // The servers' key reaches the service, which does not know the request.
        let server = import(&addr, key.clone());
        let e = server.call(&destroy, Bytes::new()).await.err();
        assert_eq!(e, Some(RpcError::Errno(Errno::ENOSYS)));
        // Over TCP.
        let conn_cfg = |key: Key| ConnConfig {
            fsname: "lofs".into(),
            client: "client-tcp".into(),
            key,
            max_in_flight: 4,
            timeout: Duration::from_secs(5),
        };
        let c = crate::Conn::connect(&addr, &conn_cfg(key.client_key()))
            .await
            .expect("a client key is accepted");
        let (r, _) = c.call(&Request::Ping, Bytes::new()).await.expect("ping");
        assert_ne!(
            r,
            Reply::Pong {
                target: addr.clone()
            },
            "not over TCP"
        );
        for req in [&destroy, &wrapped] {
            let e = c.call(req, Bytes::new()).await.err();
            assert_eq!(e, Some(RpcError::Errno(Errno::EPERM)), "{req:?}");
        }
        let s = crate::Conn::connect(&addr, &conn_cfg(key.clone()))
            .await
            .expect("connect");
        let e = s.call(&destroy, Bytes::new()).await.err();
        assert_eq!(e, Some(RpcError::Errno(Errno::ENOSYS)));
        // A key derived from the client key is neither.
        let refused = crate::Conn::connect(&addr, &conn_cfg(key.client_key().client_key())).await;
        assert!(
            matches!(refused, Err(RpcError::Auth { .. })),
            "{:?}",
            refused.err()
        );
    }

    /// A restarted target's address is published while a caller that found no in-process
    /// link waits to connect over TCP (another caller is connecting): it goes in process
    /// too. Over TCP it would bind the client's uuid to a second export, and the target
    /// would refuse what the in-process link sends next.
    #[tokio::test(flavor = "current_thread")]
    async fn a_caller_waiting_to_connect_when_the_target_appears_in_process_goes_in_process() {
        let key = Key::generate();
        let svc = Arc::new(Peer::default());
        let (_sd_tx, sd_rx) = watch::channel(false);
        let (addr, _cfg, _task) = start(&key, svc.clone(), sd_rx).await;
        let name = TargetName::ost(0);
        let config = |active: bool| FsConfig {
            fsname: "lofs".into(),
            osts: vec![TargetInfo {
                name,
                addr: addr.clone(),
                active,
            }],
            ..FsConfig::default()
        };
        // The target is down in the configuration the caller first reads.
        let (tx, rx) = watch::channel(config(false));
        let imp = Arc::new(Import::new(
            name,
            ConnConfig {
                fsname: "lofs".into(),
                client: "client-lo".into(),
                key: key.clone(),
                max_in_flight: 4,
                timeout: Duration::from_secs(5),
            },
            rx,
        ));
        imp.set_recovery_timeout(Duration::from_secs(5));
        let held = imp.hold_tcp_connect().await;
        let caller = tokio::spawn({
            let imp = imp.clone();
            async move { imp.call(&Request::Ping, Bytes::new()).await }
        });
        // One thread: the caller runs until it waits for the lock.
        tokio::task::yield_now().await;
        assert!(!caller.is_finished());
        tx.send_replace(config(true));
        drop(held);
        let (r, _) = caller.await.expect("caller").expect("ping");
        assert_eq!(
            r,
            Reply::Pong {
                target: addr.clone()
            },
            "went over TCP"
        );
        assert!(
            imp.hold_tcp_connect().await.is_none(),
            "a TCP connection was made"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn same_process_requests_skip_tcp_until_the_target_stops() {
        let key = Key::generate();
        let svc = Arc::new(Peer::default());
        let (sd_tx, sd_rx) = watch::channel(false);
        let (addr, cfg, task) = start(&key, svc.clone(), sd_rx).await;

        // Same key: delivered in process, bulk and errors as over TCP, counted by the server.
        let imp = import(&addr, key.clone());
        let (r, b) = imp
            .call(&Request::Ping, Bytes::from_static(b"bulk"))
            .await
            .expect("ping");
        assert_eq!(
            r,
            Reply::Pong {
                target: addr.clone()
            },
            "not delivered in process"
        );
        assert_eq!(&b[..], b"bulk");
        assert!(imp.is_connected().await);
        let e = imp.call(&Request::Statfs, Bytes::new()).await.err();
        assert_eq!(e, Some(RpcError::Errno(Errno::ENOSPC)));
        assert_eq!(svc.finished.load(Ordering::Relaxed), 1);
        // A caller that gives up midway does not cut the handler short.
        let gave_up = tokio::time::timeout(
            Duration::from_millis(50),
            imp.call(&Request::Statfs, Bytes::new()),
        )
        .await;
        assert!(gave_up.is_err(), "the slow request answered within 50 ms");
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(svc.finished.load(Ordering::Relaxed), 2);
        assert!(
            cfg.stats
                .samples()
                .iter()
                .any(|o| o.opcode == 0 && o.count == 1)
        );

        // Another key never reaches the service in process: TCP refuses it.
        let wrong = import(&addr, Key::generate());
        match wrong.call(&Request::Ping, Bytes::new()).await {
            Err(RpcError::Auth { .. }) => {}
            other => panic!("a wrong key got {other:?}"),
        }

        // A dropped client is a disconnect.
        drop(imp);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(svc.gone.load(Ordering::Relaxed), 1);

        // A stopped target is gone for clients in this process too, and its service is
        // no longer held by them.
        let imp = import(&addr, key.clone());
        imp.call(&Request::Ping, Bytes::new()).await.expect("ping");
        let _ = sd_tx.send(true);
        task.await.expect("serve");
        match imp.call(&Request::Ping, Bytes::new()).await {
            Err(e) if e.is_transport() => {}
            other => panic!("a stopped target answered {other:?}"),
        }
        assert_eq!(
            Arc::strong_count(&svc),
            1,
            "the stopped service is still referenced"
        );
    }

    /// Notes in the service's order when it ran, after a pause: a slow connect.
    struct SlowHook(Arc<Peer>);

    impl crate::import::ConnectHook for SlowHook {
        fn connected<'a>(
            &'a self,
            _link: crate::import::NewLink<'a>,
        ) -> std::pin::Pin<Box<dyn Future<Output = Result<(), RpcError>> + Send + 'a>> {
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                self.0.order.lock().push("connected");
                Ok(())
            })
        }
    }

    /// Callers that come while an in-process link's connect hook runs wait for it, as
    /// over TCP: the MDT refuses (EPERM) a tracked request that comes before the
    /// client's `MdtConnect`, and a new file system's first mkdir under load got that.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_wait_for_the_connect_hook_of_a_new_in_process_link() {
        let key = Key::generate();
        let svc = Arc::new(Peer::default());
        let (_sd_tx, sd_rx) = watch::channel(false);
        let (addr, _cfg, _task) = start(&key, svc.clone(), sd_rx).await;
        let imp = Arc::new(import(&addr, key.clone()));
        imp.set_recovery_timeout(Duration::from_secs(5));
        imp.set_connect_hook(Arc::new(SlowHook(svc.clone())));
        let calls: Vec<_> = (0..4)
            .map(|_| {
                let imp = imp.clone();
                tokio::spawn(async move { imp.call(&Request::Ping, Bytes::new()).await })
            })
            .collect();
        for c in calls {
            c.await.expect("task").expect("ping");
        }
        assert_eq!(
            *svc.order.lock(),
            ["connected", "ping", "ping", "ping", "ping"],
            "a request went ahead of the connect, or the hook ran twice"
        );
        // Once connected, the hook does not run again.
        imp.call(&Request::Ping, Bytes::new()).await.expect("ping");
        assert_eq!(svc.order.lock().len(), 6);
    }

    /// A handler that outlasts its caller's deadline is given more time, as a remote one
    /// asks for it with an early reply (Lustre's adaptive timeouts): the caller gets its
    /// answer, and the target's service estimate, and with it the next deadline, grows.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_handler_past_its_deadline_is_given_more_time() {
        let key = Key::generate();
        let svc = Arc::new(Peer::default());
        let (_sd_tx, sd_rx) = watch::channel(false);
        let (addr, cfg, _task) = start(&key, svc.clone(), sd_rx).await;
        let imp = import(&addr, key.clone());
        // A deadline of 1.5 s for a request that takes 2.5 s.
        imp.set_recovery_timeout(Duration::from_millis(1500));
        let slow = Request::OstRead {
            obj: nacre_core::Fid::new(0x100000000, 1, 0),
            offset: 0,
            len: 2500,
            cksum: None,
            torn: nacre_core::cksum::TornBlocks::Take,
            verify: nacre_core::cksum::ReadVerify::Target,
        };
        let t = std::time::Instant::now();
        imp.call(&slow, Bytes::new())
            .await
            .expect("answered after an early reply");
        assert!(
            t.elapsed() >= Duration::from_millis(2500),
            "{:?}",
            t.elapsed()
        );
        let p = crate::at::AT.params();
        let asked = crate::at::DEFAULT_AT_EXTRA;
        assert!(
            cfg.service_at.get(&p) >= asked,
            "{}",
            cfg.service_at.get(&p)
        );
        assert!(
            imp.at().service.get(&p) >= asked,
            "{}",
            imp.at().service.get(&p)
        );
        // A caller that gives up within a second means it: not extended.
        imp.set_recovery_timeout(Duration::from_millis(300));
        match imp.call(&slow, Bytes::new()).await {
            Err(RpcError::Timeout { .. }) => {}
            other => panic!("a 300 ms deadline gave {other:?}"),
        }
    }

    /// A request the caller gave up on (its timeout passed) still runs; the next request of
    /// the same client runs only after it, so the caller never sees an operation it was
    /// told had failed land after a newer one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_given_up_on_ends_before_the_next_one_of_its_client_runs() {
        let key = Key::generate();
        let svc = Arc::new(Peer::default());
        let (_sd_tx, sd_rx) = watch::channel(false);
        let (addr, _cfg, _task) = start(&key, svc.clone(), sd_rx).await;
        let imp = import(&addr, key.clone());
        imp.set_recovery_timeout(Duration::from_millis(60));
        match imp.call(&Request::Statfs, Bytes::new()).await {
            Err(RpcError::Timeout { .. }) => {}
            other => panic!("the slow request gave {other:?}"),
        }
        assert_eq!(svc.finished.load(Ordering::Relaxed), 0, "not still running");
        imp.set_recovery_timeout(Duration::from_secs(5));
        imp.call(&Request::Ping, Bytes::new()).await.expect("ping");
        assert_eq!(*svc.order.lock(), ["slow", "ping"]);
        // A caller dropped midway counts as one that gave up.
        let dropped = tokio::time::timeout(
            Duration::from_millis(50),
            imp.call(&Request::Statfs, Bytes::new()),
        )
        .await;
        assert!(dropped.is_err(), "the slow request answered within 50 ms");
        imp.call(&Request::Ping, Bytes::new()).await.expect("ping");
        assert_eq!(*svc.order.lock(), ["slow", "ping", "slow", "ping"]);
        // A link whose abandoned request outlasts the next caller's deadline fails that
        // caller without running its request.
        imp.set_recovery_timeout(Duration::from_millis(60));
        let _ = imp.call(&Request::Statfs, Bytes::new()).await;
        imp.set_recovery_timeout(Duration::from_millis(30));
        match imp.call(&Request::Ping, Bytes::new()).await {
            Err(RpcError::Timeout { .. }) => {}
            other => panic!("ran beside an abandoned request: {other:?}"),
        }
        imp.set_recovery_timeout(Duration::from_secs(5));
        imp.call(&Request::Ping, Bytes::new()).await.expect("ping");
        assert_eq!(
            *svc.order.lock(),
            ["slow", "ping", "slow", "ping", "slow", "ping"]
        );
    }

    /// A library client runs its own runtime; when that runtime ends (the client is
    /// dropped), handlers it started on a target of this process go on to their end in
    /// the target's runtime. Run on the caller's runtime, they were cut short, and a store
    /// commit cut short that way left every later write of the MDT waiting.
    #[test]
    fn handlers_outlive_the_runtime_of_the_caller() {
        let server = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("server runtime");
        let key = Key::generate();
        let svc = Arc::new(Peer::default());
        let (sd_tx, sd_rx) = watch::channel(false);
        let (addr, _, task) = server.block_on(start(&key, svc.clone(), sd_rx));

        let client = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("client runtime");
        client.block_on(async {
            let imp = import(&addr, key.clone());
            let gave_up = tokio::time::timeout(
                Duration::from_millis(50),
                imp.call(&Request::Statfs, Bytes::new()),
            )
            .await;
            assert!(gave_up.is_err(), "the slow request answered within 50 ms");
        });
        // The client's runtime ends with the slow handler midway.
        client.shutdown_timeout(Duration::from_secs(1));
        server.block_on(async {
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while svc.finished.load(Ordering::Relaxed) == 0 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the handler was cut short with its caller's runtime"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let _ = sd_tx.send(true);
            task.await.expect("serve");
        });
    }
}
