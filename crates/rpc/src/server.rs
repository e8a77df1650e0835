//! The server side: accept, authenticate, dispatch to a [`Service`], reply.
//!
//! Each connection gets a reader that decodes frames and runs each request in its own task
//! (bounded per connection, so one client cannot queue unbounded work), and a writer task
//! that sends replies in completion order. A peer that fails the handshake is told why and
//! logged (at a bounded rate), and never reaches the service.
//!
//! Before authentication a peer gets little: a handshake frame of [`auth::MAX_HELLO`]
//! bytes at most, [`HANDSHAKE_TIMEOUT`] to finish, and one of [`MAX_PENDING_HANDSHAKES`]
//! slots per target; a connection beyond them is closed at once. After it, a request's
//! sizes are checked (the frame's, then its reply's against the wire's limit and the
//! target's own in [`Service::admit`]) before it reserves any of the process's
//! [`MemoryBudget`]; one that fails is answered with an error and costs nothing.

use crate::auth::{self, ClientHello, Key, PeerRole, ServerHello, ServerVerdict};
use crate::conn::{FrameWriter, write_frame};
use crate::frame::{self, FLAG_HANDSHAKE, FLAG_REPLY};
use crate::memory::{MemoryBudget, Reservation};
use crate::msg::{self, Reply, Request};
use crate::reconnect::{RECONNECT_WAIT, Succession, Successions};
use bytes::Bytes;
use nacre_core::Errno;
use parking_lot::Mutex;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};

/// Requests of one connection that may run at once; the reader stops reading beyond this,
/// which pushes back on the client through TCP.
pub const MAX_REQUESTS_PER_CONN: usize = 256;
/// A peer must finish the handshake within this.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections of one target still in their handshake. A handshake takes one round trip,
/// so even a whole cluster's clients reconnecting at once rarely hold more than a few; a
/// connection beyond the bound is closed at once (the client retries), so peers that never
/// authenticate cannot hold more than this many tasks and buffers of the target.
pub const MAX_PENDING_HANDSHAKES: usize = 64;
/// At most one line per target per this about refused peers, then a count of those not
/// shown (as Lustre's console rate limit): a scanner or a client with the wrong key would
/// otherwise write a line per connection.
pub const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// What a handler knows about the caller.
#[derive(Clone, Debug)]
pub struct RequestCtx {
    pub peer: SocketAddr,
    /// The name the client gave at the handshake.
    pub client: String,
    /// Which key the peer proved: a client is refused the servers' own requests.
    pub role: PeerRole,
    /// Unique per connection for the life of the server.
    pub conn_id: u64,
}

/// A target's request handler.
pub trait Service: Send + Sync + 'static {
    /// Checks a decoded request against this target's own maxima (the largest read it
    /// serves, ...). It runs before the server reserves memory for the request's reply;
    /// an error is the reply, and the request is neither reserved for nor handled.
    fn admit(&self, _req: &Request) -> Result<(), Errno> {
        Ok(())
    }

    fn handle(
        self: Arc<Self>,
        ctx: RequestCtx,
        req: Request,
        bulk: Bytes,
    ) -> impl Future<Output = Result<(Reply, Bytes), Errno>> + Send;

    /// The connection is gone: release what it held (open handles, ...).
    fn disconnected(self: Arc<Self>, _ctx: RequestCtx) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// Identity of the target being served.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub fsname: String,
    /// `testfs-MDT0000`, announced to peers.
    pub target: String,
    pub key: Key,
    /// Request and reply bytes all requests being handled may hold: the memory budget of
    /// the process's servers, shared by every target it runs.
    pub memory: Arc<MemoryBudget>,
    /// Requests handled, by opcode (`mdt.*.md_stats`, `obdfilter.*.stats`).
    pub stats: Arc<crate::stats::OpStats>,
    /// The c-Network fault switch: while on, replies are dropped.
    pub net: Arc<crate::fault::NetFault>,
    /// The target's service time estimate ([`crate::at`]), sent with every reply and
    /// raised by early replies (`*.*.timeouts`).
    pub service_at: Arc<crate::at::AdaptiveTimeout>,
}

/// Refused requests of client peers, logged at a bounded rate by every target alike.
static ROLE_REFUSALS: std::sync::LazyLock<RefusalLog> =
    std::sync::LazyLock::new(|| RefusalLog::new(REFUSAL_LOG_INTERVAL));

/// Refuses a servers' own request (see [`Request::needs_server_role`]) from a peer that
/// proved only the client key: EPERM, and a line at a bounded rate.
pub(crate) fn check_role(target: &str, ctx: &RequestCtx, req: &Request) -> Result<(), Errno> {
    if ctx.role == PeerRole::Server || !req.needs_server_role() {
        return Ok(());
    }
    ROLE_REFUSALS.refused(
        target,
        ctx.peer,
        &format!(
            "client '{}' sent a servers' own request (opcode {}): EPERM",
            ctx.client,
            req.opcode()
        ),
    );
    Err(Errno::EPERM)
}

/// Checks a decoded request's reply against the wire's limit and the target's own, before
/// anything is reserved for it: the bytes its reply will carry.
pub(crate) fn reply_bytes(
    admit: impl FnOnce(&Request) -> Result<(), Errno>,
    req: &Request,
) -> Result<u64, Errno> {
    let reply = req.reply_bulk_bytes();
    if reply > u64::from(frame::MAX_BULK) {
        // No reply frame could carry it.
        return Err(Errno::EINVAL);
    }
    admit(req)?;
    Ok(reply)
}

static NEXT_CONN: AtomicU64 = AtomicU64::new(1);

/// A connection id unique for the life of the process.
pub(crate) fn next_conn_id() -> u64 {
    NEXT_CONN.fetch_add(1, Ordering::Relaxed)
}

/// Refused peers of one target, logged at most once per `interval`.
struct RefusalLog {
    interval: Duration,
    /// When a line was last written, and refusals not shown since.
    state: Mutex<(Option<Instant>, u64)>,
}

impl RefusalLog {
    fn new(interval: Duration) -> RefusalLog {
        RefusalLog {
            interval,
            state: Mutex::new((None, 0)),
        }
    }

    fn refused(&self, target: &str, peer: SocketAddr, reason: &str) {
        let skipped = {
            let mut st = self.state.lock();
            let now = Instant::now();
            if st.0.is_some_and(|t| now.duration_since(t) < self.interval) {
                st.1 += 1;
                return;
            }
            st.0 = Some(now);
            std::mem::take(&mut st.1)
        };
        if skipped > 0 {
            tracing::warn!(target: "rpc", "{target}: refused {peer}: {reason} (skipped {skipped} previous similar messages)");
        } else {
            tracing::warn!(target: "rpc", "{target}: refused {peer}: {reason}");
        }
    }
}

/// Serves until `shutdown` turns true.
///
/// Clients in this process reach the service directly while it serves: it is in the
/// in-process registry ([`crate::lo`]) from this call on, before the returned future first
/// runs. Its address is published (to the MGS) once this returns, and a client that
/// learned it must find the service there at once; one that found only the TCP listener
/// would bind its uuid to a TCP connection and then move it to the in-process link, and
/// requests still on the TCP connection would be refused as naming another's client.
pub fn serve<S: Service>(
    listener: TcpListener,
    cfg: Arc<ServerConfig>,
    svc: Arc<S>,
    shutdown: watch::Receiver<bool>,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let lo = match listener.local_addr() {
        Ok(addr) => crate::lo::register(addr, cfg.clone(), svc.clone()),
        Err(_) => None,
    };
    serve_registered(listener, cfg, svc, shutdown, lo)
}

/// [`serve`]'s accept loop; the registration `_lo` ends with it.
async fn serve_registered<S: Service>(
    listener: TcpListener,
    cfg: Arc<ServerConfig>,
    svc: Arc<S>,
    mut shutdown: watch::Receiver<bool>,
    _lo: Option<crate::lo::Registration>,
) {
    let handshakes = Arc::new(Semaphore::new(MAX_PENDING_HANDSHAKES));
    let refusals = Arc::new(RefusalLog::new(REFUSAL_LOG_INTERVAL));
    let successions = Arc::new(Successions::default());
    loop {
        tokio::select! {
            res = listener.accept() => {
                match res {
                    Ok((stream, peer)) => {
                        let Ok(slot) = handshakes.clone().try_acquire_owned() else {
                            drop(stream);
                            refusals.refused(&cfg.target, peer, "too many handshakes in progress");
                            continue;
                        };
                        let cfg = cfg.clone();
                        let svc = svc.clone();
                        let sd = shutdown.clone();
                        let refusals = refusals.clone();
                        let successions = successions.clone();
                        tokio::spawn(async move {
                            let conn = serve_conn(stream, peer, cfg.clone(), svc, sd, slot, &successions);
                            if let Err(reason) = conn.await {
                                refusals.refused(&cfg.target, peer, &reason);
                            }
                        });
                    }
                    Err(e) => {
                        tracing::warn!(target: "rpc", "{}: accept failed: {e}", cfg.target);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
            _ = shutdown.changed() => {
                if *shutdown.borrow() {
                    return;
                }
            }
        }
    }
}

/// The server's side of the handshake on a fresh connection: the client's name, role and
/// import id ([`crate::reconnect`]) once it has proved it holds the file system key or the
/// client key, or why it was refused. Generic over the stream so the fuzzer can drive it
/// from bytes.
pub async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    cfg: &ServerConfig,
) -> Result<(String, PeerRole, u64), String> {
    let nonce = auth::nonce();
    let hello = ServerHello {
        fsname: cfg.fsname.clone(),
        target: cfg.target.clone(),
        nonce: nonce.to_vec(),
    };
    let hello = msg::encode(&hello).map_err(|e| format!("cannot encode hello: {e}"))?;
    write_frame(stream, 0, FLAG_HANDSHAKE, &hello, &[])
        .await
        .map_err(|e| format!("handshake write failed: {e}"))?;
    let f = frame::read_small_frame(stream, auth::MAX_HELLO)
        .await
        .map_err(|e| format!("handshake read failed: {e}"))?;
    let answer: ClientHello =
        msg::decode(&f.body).map_err(|e| format!("malformed client hello: {e}"))?;
    let client_key = cfg.key.client_key();
    let outcome = if answer.fsname != cfg.fsname {
        Err(auth::refusal_for_fsname(&cfg.fsname, &answer.fsname))
    } else {
        // The key the peer proved, of the two this server knows.
        [
            (&cfg.key, PeerRole::Server),
            (&client_key, PeerRole::Client),
        ]
        .into_iter()
        .find(|(k, _)| {
            auth::mac_eq(
                &answer.proof,
                &k.client_proof(&nonce, &answer.nonce, &cfg.fsname),
            )
        })
        .ok_or_else(|| {
            format!(
                "client does not hold the key of file system '{}'",
                cfg.fsname
            )
        })
    };
    let verdict = match &outcome {
        // Answered under the key the peer holds, the only one it can check.
        Ok((key, _)) => ServerVerdict::Accepted {
            proof: key
                .server_proof(&nonce, &answer.nonce, &cfg.fsname)
                .to_vec(),
        },
        Err(reason) => ServerVerdict::Refused {
            reason: reason.clone(),
        },
    };
    let encoded = msg::encode(&verdict).map_err(|e| format!("cannot encode verdict: {e}"))?;
    write_frame(stream, 0, FLAG_HANDSHAKE, &encoded, &[])
        .await
        .map_err(|e| format!("handshake write failed: {e}"))?;
    match outcome {
        Ok((_, role)) => Ok((answer.client, role, answer.import)),
        Err(reason) => Err(format!("{reason} (client '{}')", answer.client)),
    }
}

async fn serve_conn<S: Service>(
    mut stream: TcpStream,
    peer: SocketAddr,
    cfg: Arc<ServerConfig>,
    svc: Arc<S>,
    mut shutdown: watch::Receiver<bool>,
    handshake_slot: tokio::sync::OwnedSemaphorePermit,
    successions: &Successions,
) -> Result<(), String> {
    let _ = stream.set_nodelay(true);
    if cfg.net.dropping() {
        // Unreachable: the handshake is never answered.
        return Err("network fault injected: not answering".to_string());
    }
    let (client, role, import) =
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(&mut stream, &cfg)).await {
            Ok(r) => r?,
            Err(_) => return Err("handshake timed out".to_string()),
        };
    drop(handshake_slot);
    let mut succession = successions.begin(peer.ip(), import);
    if let Some(s) = succession.as_mut() {
        let drained = tokio::select! {
            d = s.previous_drained(RECONNECT_WAIT) => d,
            _ = shutdown.changed() => false,
        };
        if !drained {
            // Nothing of this connection ran: it may go without waiting, but the line
            // counts it drained only once the connection it replaced is.
            drop(stream);
            if let Some(s) = succession {
                s.finish(successions).await;
            }
            return Err(format!(
                "{client} reconnected while requests of its previous connection still ran; closed unserved"
            ));
        }
    }
    let ctx = RequestCtx {
        peer,
        client,
        role,
        conn_id: next_conn_id(),
    };
    tracing::debug!(target: "rpc", "{}: connected {} ({})", cfg.target, ctx.client, peer);
    let (mut rd, wr) = stream.into_split();
    // Each handler writes its own reply: no writer task to hop through.
    let writer = Arc::new(FrameWriter::new(wr));
    let limit = Arc::new(Semaphore::new(MAX_REQUESTS_PER_CONN));
    // Set when nothing more is read from the connection: its held long polls end.
    let reading_ended = watch::Sender::new(false);
    // A newer connection of the same import stops this one's reading: what it had not read
    // yet never runs ([`crate::reconnect`]). Once it resolves the loop ends, so it is never
    // polled again.
    let replaced = {
        let signal = succession.as_ref().map(Succession::replaced_signal);
        async move {
            match signal {
                Some(s) => s.await,
                None => std::future::pending().await,
            }
        }
    };
    tokio::pin!(replaced);
    loop {
        let permit = match limit.clone().acquire_owned().await {
            Ok(p) => p,
            Err(_) => break,
        };
        let header = tokio::select! {
            h = frame::read_header(&mut rd) => h,
            _ = shutdown.changed() => break,
            () = &mut replaced => break,
        };
        let header = match header {
            Ok(h) => h,
            Err(frame::FrameError::Closed) => break,
            Err(e) => {
                tracing::warn!(target: "rpc", "{}: dropping {}: {e}", cfg.target, peer);
                break;
            }
        };
        // A request's service time, and its deadline, count from here.
        let arrived = std::time::Instant::now();
        // A request that waits for memory asks its client for more time as a slow handler
        // does.
        let mut early = EarlyReplies::new(writer.clone(), &header, arrived, &cfg);
        // Reserve the request's bytes before reading them, so a burst of large requests
        // waits for memory instead of exhausting it. The header's limits keep this within
        // the budget.
        let mem = match early
            .run(
                cfg.memory
                    .reserve(u64::from(header.body_len) + u64::from(header.bulk_len)),
            )
            .await
        {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(target: "rpc", "{}: dropping {}: {e}", cfg.target, peer);
                break;
            }
        };
        let payload = tokio::select! {
            f = frame::read_payload(&mut rd, header) => f,
            () = &mut replaced => break,
        };
        let frame = match payload {
            Ok(f) => f,
            Err(frame::FrameError::Closed) => break,
            Err(e) => {
                tracing::warn!(target: "rpc", "{}: dropping {}: {e}", cfg.target, peer);
                break;
            }
        };
        let xid = frame.header.xid;
        let opcode = frame.header.opcode;
        // What the handler gets: the request and its bulk, or the error that answers it.
        let (decoded, bulk, mem): (Result<Request, Errno>, Bytes, Reservation) =
            match msg::decode::<Request>(&frame.body) {
                Err(e) => {
                    tracing::warn!(target: "rpc", "undecodable request (opcode {opcode}): {e}");
                    (Err(Errno::EPROTO), Bytes::new(), Reservation::none())
                }
                Ok(req) => match check_role(&cfg.target, &ctx, &req)
                    .and_then(|()| reply_bytes(|r| svc.admit(r), &req))
                {
                    Err(e) => (Err(e), Bytes::new(), Reservation::none()),
                    Ok(0) => (Ok(req), frame.bulk, mem),
                    Ok(_) if !frame.bulk.is_empty() => {
                        // A request answered with bulk brings none.
                        (Err(Errno::EPROTO), Bytes::new(), Reservation::none())
                    }
                    Ok(reply) => {
                        // Its own bytes go back before its reply's are reserved: a read
                        // never holds part of the budget while it waits for the rest.
                        drop(frame);
                        drop(mem);
                        match early.run(cfg.memory.reserve(reply)).await {
                            Ok(m) => (Ok(req), Bytes::new(), m),
                            Err(e) => {
                                tracing::warn!(target: "rpc", "{}: {e}", cfg.target);
                                (Err(Errno::ENOMEM), Bytes::new(), Reservation::none())
                            }
                        }
                    }
                },
            };
        let writer = writer.clone();
        let svc = svc.clone();
        let ctx = ctx.clone();
        let stats = cfg.stats.clone();
        let net = cfg.net.clone();
        let service_at = cfg.service_at.clone();
        let quick = decoded.as_ref().map_or(true, Request::is_quick);
        // A long poll ends, unanswered, when a newer connection replaces this one (it
        // changes nothing, and the new connection waits for what this one still runs) or
        // when this one's peer is gone: the end of a connection is seen, and the client's
        // export parked, when its last request is done, not a poll's hold later.
        let poll_end = match &decoded {
            Ok(r) if r.is_long_poll() => {
                let replaced = succession.as_ref().map(|s| s.replaced_signal());
                let mut gone = reading_ended.subscribe();
                Some(async move {
                    let gone = async move {
                        let _ = gone.wait_for(|g| *g).await;
                    };
                    match replaced {
                        Some(replaced) => tokio::select! {
                            () = replaced => {}
                            () = gone => {}
                        },
                        None => gone.await,
                    }
                })
            }
            _ => None,
        };
        let work = async move {
            let _permit = permit;
            let _mem = mem;
            let start = std::time::Instant::now();
            let (reply, bulk) = match decoded {
                Ok(req) => {
                    let handled = svc.handle(ctx, req, bulk);
                    let r = match poll_end {
                        Some(end) => tokio::select! {
                            r = handled => r,
                            () = end => return,
                        },
                        None => early.run(handled).await,
                    };
                    match r {
                        Ok(r) => r,
                        Err(e) => (Reply::Error(e), Bytes::new()),
                    }
                }
                Err(e) => (Reply::Error(e), Bytes::new()),
            };
            stats.record(opcode, start.elapsed());
            let p = crate::at::AT.params();
            let service_time = crate::at::wire_secs(arrived.elapsed());
            service_at.measure(&p, u32::from(service_time));
            if net.dropping() {
                return;
            }
            // A reply that cannot be encoded goes back as that error, without its bulk.
            let (body, bulk) = match msg::encode(&reply) {
                Ok(body) => (body, bulk),
                Err(e) => match msg::encode(&Reply::Error(e)) {
                    Ok(body) => (body, Bytes::new()),
                    Err(_) => return,
                },
            };
            let estimate = u16::try_from(service_at.get(&p)).unwrap_or(u16::MAX);
            let header = frame::make_timed_header(
                opcode,
                xid,
                FLAG_REPLY,
                (estimate, service_time),
                &body,
                &bulk,
            );
            let _ = writer.send(&header, &body, &bulk).await;
        };
        if quick {
            // A short read-only request (or an error answer) is answered here: a task for
            // it would cost more than the work.
            work.await;
        } else {
            tokio::spawn(work);
        }
    }
    let _ = reading_ended.send(true);
    // Replies still being written finish first; then the write side closes.
    let _ = limit.acquire_many(MAX_REQUESTS_PER_CONN as u32).await;
    writer.close().await;
    svc.disconnected(ctx).await;
    if let Some(s) = succession {
        s.finish(successions).await;
    }
    Ok(())
}

/// What a request needs to ask its client for more time (Lustre's early replies), while
/// it waits for memory and while its handler runs: one clock for both, so time already
/// asked for is not asked for again.
struct EarlyReplies {
    writer: Arc<FrameWriter>,
    opcode: u16,
    xid: u64,
    arrived: std::time::Instant,
    service: Arc<crate::at::AdaptiveTimeout>,
    net: Arc<crate::fault::NetFault>,
    clock: crate::at::EarlyClock,
}

impl EarlyReplies {
    /// For a request that came in at `arrived` with the client's deadline `asked`
    /// (seconds after it sent it; 0: none).
    fn new(
        writer: Arc<FrameWriter>,
        header: &frame::Header,
        arrived: std::time::Instant,
        cfg: &ServerConfig,
    ) -> EarlyReplies {
        let p = crate::at::AT.params();
        let timeout = std::time::Duration::from_secs(u64::from(header.timeout));
        EarlyReplies {
            writer,
            opcode: header.opcode,
            xid: header.xid,
            arrived,
            service: cfg.service_at.clone(),
            net: cfg.net.clone(),
            clock: crate::at::EarlyClock::new(&p, arrived, timeout),
        }
    }

    /// Runs `work`; while it outlasts the client's deadline less `at_early_margin`,
    /// answers early with a later deadline ([`crate::at::early_deadline`]), until no
    /// more time can be added (`at_max`). Then the client may time the request out.
    async fn run<T>(&mut self, work: impl std::future::Future<Output = T>) -> T {
        let mut work = std::pin::pin!(work);
        while !self.clock.is_final() {
            let p = crate::at::AT.params();
            tokio::select! {
                r = &mut work => return r,
                () = tokio::time::sleep_until(self.clock.next(&p).into()) => {}
            }
            let p = crate::at::AT.params();
            let Some(later) = self.clock.extend(&self.service, &p) else {
                break;
            };
            if self.net.dropping() {
                continue;
            }
            let asked = u16::try_from(later).unwrap_or(u16::MAX);
            let spent = crate::at::wire_secs(self.arrived.elapsed());
            let header = frame::make_timed_header(
                self.opcode,
                self.xid,
                FLAG_REPLY | frame::FLAG_EARLY,
                (asked, spent),
                &[],
                &[],
            );
            tracing::debug!(target: "rpc", "early reply to xid {}: {later}s", self.xid);
            // A connection that cannot carry it cannot carry the reply either.
            let _ = self.writer.send(&header, &[], &[]).await;
        }
        work.await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::{Conn, ConnConfig};
    use crate::error::RpcError;

    struct Echo;

    impl Service for Echo {
        async fn handle(
            self: Arc<Self>,
            ctx: RequestCtx,
            req: Request,
            bulk: Bytes,
        ) -> Result<(Reply, Bytes), Errno> {
            match req {
                Request::Ping => Ok((Reply::Pong { target: ctx.client }, bulk)),
                Request::OstRead { len, .. } => {
                    // Slow replies must not block fast ones on the same connection.
                    if len == 1 {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                    }
                    Ok((Reply::Ok, Bytes::from(vec![7u8; len as usize])))
                }
                _ => Err(Errno::ENOSYS),
            }
        }
    }

    async fn start(key: Key) -> (String, watch::Sender<bool>) {
        start_with(key, MemoryBudget::new(256 << 20)).await
    }

    async fn start_with(key: Key, memory: Arc<MemoryBudget>) -> (String, watch::Sender<bool>) {
        start_service(key, memory, Arc::new(Echo)).await
    }

    async fn start_service<S: Service>(
        key: Key,
        memory: Arc<MemoryBudget>,
        svc: Arc<S>,
    ) -> (String, watch::Sender<bool>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let cfg = Arc::new(ServerConfig {
            fsname: "testfs".into(),
            target: "testfs-OST0000".into(),
            key,
            memory,
            stats: Default::default(),
            net: Default::default(),
            service_at: Default::default(),
        });
        let (sd_tx, sd_rx) = watch::channel(false);
        tokio::spawn(serve(listener, cfg, svc, sd_rx));
        (addr, sd_tx)
    }

    fn cfg(key: Key) -> ConnConfig {
        ConnConfig {
            fsname: "testfs".into(),
            client: "client-a".into(),
            key,
            max_in_flight: 8,
            timeout: Duration::from_secs(5),
        }
    }

    /// Records what ran, in the order it ended: `OstRead` of length 1 is slow.
    #[derive(Default)]
    struct Ordered(parking_lot::Mutex<Vec<&'static str>>);

    impl Service for Ordered {
        async fn handle(
            self: Arc<Self>,
            _ctx: RequestCtx,
            req: Request,
            _bulk: Bytes,
        ) -> Result<(Reply, Bytes), Errno> {
            match req {
                Request::OstRead { len: 1, .. } => {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    self.0.lock().push("slow");
                }
                Request::Statfs => self.0.lock().push("statfs"),
                Request::WaitCallbacks { .. } => {
                    // A long poll with nothing to return.
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    self.0.lock().push("poll");
                }
                _ => return Err(Errno::ENOSYS),
            }
            Ok((Reply::Ok, Bytes::new()))
        }
    }

    /// A client that gave up on a request and reconnected is served on its new connection
    /// only once that request has finished; what it sent on the old connection after the
    /// new one was made never runs. Connections that name no import are not ordered.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reconnect_is_served_after_the_old_connections_requests() {
        let key = Key::generate();
        let svc = Arc::new(Ordered::default());
        let (addr, _sd) =
            start_service(key.clone(), MemoryBudget::new(64 << 20), svc.clone()).await;
        let slow = Request::OstRead {
            obj: nacre_core::Fid::new(0x100000000, 1, 0),
            offset: 0,
            len: 1,
            cksum: None,
            torn: nacre_core::cksum::TornBlocks::Take,
            verify: nacre_core::cksum::ReadVerify::Target,
        };
        let c = cfg(key.clone());
        let old = Conn::connect_import(&addr, &c, 42).await.expect("connect");
        let r = old
            .call_with_timeout(&slow, Bytes::new(), Duration::from_millis(50))
            .await;
        assert!(matches!(r, Err(RpcError::Timeout { .. })), "{r:?}");
        let new = Conn::connect_import(&addr, &c, 42)
            .await
            .expect("reconnect");
        new.call(&Request::Statfs, Bytes::new())
            .await
            .expect("statfs on the new connection");
        assert_eq!(*svc.0.lock(), ["slow", "statfs"]);
        // The old connection reads nothing more: a request sent on it now never runs.
        let r = old
            .call_with_timeout(&Request::Statfs, Bytes::new(), Duration::from_millis(300))
            .await;
        assert!(r.is_err(), "the replaced connection ran a request: {r:?}");
        assert_eq!(*svc.0.lock(), ["slow", "statfs"]);
        // A long poll held on the old connection does not hold the reconnect: it ends.
        let polling = Conn::connect_import(&addr, &c, 43).await.expect("connect");
        let poll = tokio::spawn(async move {
            polling
                .call_with_timeout(
                    &Request::WaitCallbacks { acked: 0 },
                    Bytes::new(),
                    Duration::from_secs(60),
                )
                .await
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let t = Instant::now();
        let again = Conn::connect_import(&addr, &c, 43)
            .await
            .expect("reconnect");
        again
            .call(&Request::Statfs, Bytes::new())
            .await
            .expect("statfs after the poll's connection was replaced");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        let ended = tokio::time::timeout(Duration::from_secs(5), poll).await;
        assert!(
            matches!(ended, Ok(Ok(Err(_)))),
            "the replaced connection's poll: {ended:?}"
        );
        assert_eq!(*svc.0.lock(), ["slow", "statfs", "statfs"]);
        // Untracked connections (id 0) run side by side.
        let a = Conn::connect(&addr, &c).await.expect("connect");
        let b = Conn::connect(&addr, &c).await.expect("connect");
        let _ = a
            .call_with_timeout(&slow, Bytes::new(), Duration::from_millis(50))
            .await;
        b.call(&Request::Statfs, Bytes::new())
            .await
            .expect("statfs");
        a.call(&Request::Statfs, Bytes::new())
            .await
            .expect("statfs");
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(
            *svc.0.lock(),
            ["slow", "statfs", "statfs", "statfs", "statfs", "slow"]
        );
    }

    #[tokio::test]
    async fn echo_with_bulk_and_errors() {
        let key = Key::generate();
        let (addr, _sd) = start(key.clone()).await;
        let c = Conn::connect(&addr, &cfg(key)).await.expect("connect");
        assert_eq!(c.target(), "testfs-OST0000");
        let (r, b) = c
            .call(&Request::Ping, Bytes::from_static(b"xyz"))
            .await
            .expect("ping");
        assert_eq!(
            r,
            Reply::Pong {
                target: "client-a".into()
            }
        );
        assert_eq!(&b[..], b"xyz");
        let e = c.call(&Request::Statfs, Bytes::new()).await.err();
        assert_eq!(e, Some(RpcError::Errno(Errno::ENOSYS)));
        // A 4 MiB bulk reply.
        let (_, b) = c
            .call(
                &Request::OstRead {
                    obj: nacre_core::Fid::ROOT,
                    offset: 0,
                    len: 4 << 20,
                    cksum: None,
                    torn: nacre_core::cksum::TornBlocks::Take,
                    verify: nacre_core::cksum::ReadVerify::Target,
                },
                Bytes::new(),
            )
            .await
            .expect("read");
        assert_eq!(b.len(), 4 << 20);
    }

    #[tokio::test]
    async fn requests_overlap_on_one_connection() {
        let key = Key::generate();
        let (addr, _sd) = start(key.clone()).await;
        let c = Conn::connect(&addr, &cfg(key)).await.expect("connect");
        let slow = {
            let c = c.clone();
            tokio::spawn(async move {
                c.call(
                    &Request::OstRead {
                        obj: nacre_core::Fid::ROOT,
                        offset: 0,
                        len: 1,
                        cksum: None,
                        torn: nacre_core::cksum::TornBlocks::Take,
                        verify: nacre_core::cksum::ReadVerify::Target,
                    },
                    Bytes::new(),
                )
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let t = std::time::Instant::now();
        c.call(&Request::Ping, Bytes::new()).await.expect("ping");
        assert!(
            t.elapsed() < Duration::from_millis(250),
            "fast call waited for slow one"
        );
        slow.await.expect("join").expect("slow call");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn request_memory_is_bounded_and_returned() {
        let key = Key::generate();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let memory = MemoryBudget::new(0);
        let full = memory.available_bytes();
        let scfg = Arc::new(ServerConfig {
            fsname: "testfs".into(),
            target: "testfs-OST0000".into(),
            key: key.clone(),
            memory: memory.clone(),
            stats: Default::default(),
            net: Default::default(),
            service_at: Default::default(),
        });
        let (_sd, sd_rx) = watch::channel(false);
        tokio::spawn(serve(listener, scfg, Arc::new(Echo), sd_rx));
        let mut c = cfg(key);
        c.max_in_flight = 64;
        let conn = Conn::connect(&addr, &c).await.expect("connect");
        // Far more reply bytes than the budget: requests wait for memory, none fails.
        let calls: Vec<_> = (0..40)
            .map(|_| {
                let conn = conn.clone();
                tokio::spawn(async move {
                    let req = Request::OstRead {
                        obj: nacre_core::Fid::ROOT,
                        offset: 0,
                        len: 16 << 20,
                        cksum: None,
                        torn: nacre_core::cksum::TornBlocks::Take,
                        verify: nacre_core::cksum::ReadVerify::Target,
                    };
                    conn.call(&req, Bytes::new()).await.map(|(_, b)| b.len())
                })
            })
            .collect();
        for c in calls {
            assert_eq!(c.await.expect("join").expect("read"), 16 << 20);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(memory.available_bytes(), full, "every permit comes back");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_flight_bound_changes_on_a_live_connection() {
        let key = Key::generate();
        let (addr, _sd) = start(key.clone()).await;
        let c = Conn::connect(&addr, &cfg(key)).await.expect("connect");
        c.set_max_in_flight(1);
        tokio::time::sleep(Duration::from_millis(20)).await;
        let slow = {
            let c = c.clone();
            tokio::spawn(async move {
                let req = Request::OstRead {
                    obj: nacre_core::Fid::ROOT,
                    offset: 0,
                    len: 1,
                    cksum: None,
                    torn: nacre_core::cksum::TornBlocks::Take,
                    verify: nacre_core::cksum::ReadVerify::Target,
                };
                c.call(&req, Bytes::new()).await
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let t = std::time::Instant::now();
        c.call(&Request::Ping, Bytes::new()).await.expect("ping");
        assert!(
            t.elapsed() >= Duration::from_millis(200),
            "one in flight: the ping waits for the slow call"
        );
        slow.await.expect("join").expect("slow");
        c.set_max_in_flight(4);
        let slow = {
            let c = c.clone();
            tokio::spawn(async move {
                let req = Request::OstRead {
                    obj: nacre_core::Fid::ROOT,
                    offset: 0,
                    len: 1,
                    cksum: None,
                    torn: nacre_core::cksum::TornBlocks::Take,
                    verify: nacre_core::cksum::ReadVerify::Target,
                };
                c.call(&req, Bytes::new()).await
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let t = std::time::Instant::now();
        c.call(&Request::Ping, Bytes::new()).await.expect("ping");
        assert!(
            t.elapsed() < Duration::from_millis(200),
            "four in flight: the ping passes"
        );
        slow.await.expect("join").expect("slow");
    }

    #[tokio::test]
    async fn wrong_key_is_refused_clearly() {
        let (addr, _sd) = start(Key::generate()).await;
        let e = Conn::connect(&addr, &cfg(Key::generate()))
            .await
            .expect_err("must fail");
        let msg = e.to_string();
        assert!(matches!(e, RpcError::Auth { .. }), "{msg}");
        assert!(msg.contains("does not hold the key"), "{msg}");
    }

    #[tokio::test]
    async fn wrong_fsname_is_refused() {
        let key = Key::generate();
        let (addr, _sd) = start(key.clone()).await;
        let mut c = cfg(key);
        c.fsname = "other".into();
        let e = Conn::connect(&addr, &c).await.expect_err("must fail");
        assert!(e.to_string().contains("'testfs', not 'other'"), "{e}");
    }

    #[tokio::test]
    async fn server_going_away_fails_calls_instead_of_hanging() {
        let key = Key::generate();
        let (addr, sd) = start(key.clone()).await;
        let c = Conn::connect(&addr, &cfg(key)).await.expect("connect");
        let slow = {
            let c = c.clone();
            tokio::spawn(async move {
                c.call(
                    &Request::OstRead {
                        obj: nacre_core::Fid::ROOT,
                        offset: 0,
                        len: 1,
                        cksum: None,
                        torn: nacre_core::cksum::TornBlocks::Take,
                        verify: nacre_core::cksum::ReadVerify::Target,
                    },
                    Bytes::new(),
                )
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        sd.send(true).expect("shutdown");
        let r = tokio::time::timeout(Duration::from_secs(3), slow)
            .await
            .expect("no hang")
            .expect("join");
        // Either the reply made it before shutdown or the call failed as a transport error.
        if let Err(e) = r {
            assert!(e.is_transport(), "{e}");
        }
        // After it, a call on the old connection fails at once as a transport error.
        let e = tokio::time::timeout(Duration::from_secs(3), c.call(&Request::Ping, Bytes::new()))
            .await
            .expect("no hang after shutdown")
            .expect_err("the server is gone");
        assert!(e.is_transport(), "{e}");
    }

    #[tokio::test]
    async fn garbage_peer_does_not_crash_server() {
        use tokio::io::AsyncWriteExt;
        let key = Key::generate();
        let (addr, _sd) = start(key.clone()).await;
        let mut s = TcpStream::connect(&addr).await.expect("connect");
        let _ = s.write_all(&[0xAB; 200]).await;
        // The server hangs up on it rather than waiting for more.
        let mut buf = [0u8; 64];
        let closed = tokio::time::timeout(Duration::from_secs(3), async {
            use tokio::io::AsyncReadExt;
            loop {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "a garbage peer is disconnected");
        drop(s);
        let c = Conn::connect(&addr, &cfg(key))
            .await
            .expect("server still serves");
        c.call(&Request::Ping, Bytes::new()).await.expect("ping");
    }

    /// Opens a connection and answers the handshake by hand, so a test can send frames a
    /// well-behaved `Conn` never would.
    async fn raw_connect(addr: &str, key: &Key) -> TcpStream {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        let hello = frame::read_frame(&mut s).await.expect("server hello");
        let hello: ServerHello = msg::decode(&hello.body).expect("decode hello");
        let nonce = auth::nonce();
        let answer = ClientHello {
            fsname: "testfs".into(),
            client: "raw".into(),
            nonce: nonce.to_vec(),
            proof: key.client_proof(&hello.nonce, &nonce, "testfs").to_vec(),
            import: 0,
        };
        write_frame(
            &mut s,
            0,
            FLAG_HANDSHAKE,
            &msg::encode(&answer).expect("encode"),
            &[],
        )
        .await
        .expect("client hello");
        let verdict = frame::read_frame(&mut s).await.expect("verdict");
        let verdict: ServerVerdict = msg::decode(&verdict.body).expect("decode verdict");
        assert!(
            matches!(verdict, ServerVerdict::Accepted { .. }),
            "{verdict:?}"
        );
        s
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn padded_reads_cannot_hold_the_budget_while_waiting_for_their_replies() {
        use tokio::io::AsyncWriteExt;
        let key = Key::generate();
        // The smallest budget: 160 MiB.
        let (addr, _sd) = start_with(key.clone(), MemoryBudget::new(0)).await;
        // Reads whose bodies are padded to 15 MiB (the decoder ignores what follows a
        // message). Ten headers take 150 MiB of the budget before any body arrives...
        let read = Request::OstRead {
            obj: nacre_core::Fid::ROOT,
            offset: 0,
            len: 20 << 20,
            cksum: None,
            torn: nacre_core::cksum::TornBlocks::Take,
            verify: nacre_core::cksum::ReadVerify::Target,
        };
        let mut body = msg::encode(&read).expect("encode");
        body.resize(15 << 20, 0);
        let mut peers = Vec::new();
        for i in 0..10 {
            let mut s = raw_connect(&addr, &key).await;
            let h = frame::make_header(read.opcode(), i, 0, &body, &[]);
            s.write_all(&h.encode()).await.expect("header");
            peers.push(s);
        }
        // ...and no reply's 20 MiB fits beside them: each read must give back its own
        // bytes rather than keep them while it waits for its reply's.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let readers: Vec<_> = peers
            .into_iter()
            .map(|mut s| {
                let body = body.clone();
                tokio::spawn(async move {
                    s.write_all(&body).await.expect("body");
                    frame::read_frame(&mut s).await.expect("reply").bulk.len()
                })
            })
            .collect();
        for r in readers {
            let got = tokio::time::timeout(Duration::from_secs(20), r)
                .await
                .expect("padded reads deadlocked the memory budget")
                .expect("join");
            assert_eq!(got, 20 << 20);
        }
        // A read that brings bulk of its own would need both at once: refused.
        let mut s = raw_connect(&addr, &key).await;
        let body = msg::encode(&read).expect("encode");
        let h = frame::make_header(read.opcode(), 99, 0, &body, b"x");
        s.write_all(&h.encode()).await.expect("header");
        s.write_all(&body).await.expect("body");
        s.write_all(b"x").await.expect("bulk");
        let f = frame::read_frame(&mut s).await.expect("reply");
        let reply: Reply = msg::decode(&f.body).expect("decode");
        assert_eq!(reply, Reply::Error(Errno::EPROTO));
        // And an ordinary client is served after them.
        let c = Conn::connect(&addr, &cfg(key)).await.expect("connect");
        c.call(&Request::Ping, Bytes::new()).await.expect("ping");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_too_large_for_a_frame_fails_alone() {
        let key = Key::generate();
        let (addr, _sd) = start(key.clone()).await;
        let c = Conn::connect(&addr, &cfg(key)).await.expect("connect");
        let big = Bytes::from(vec![0u8; frame::MAX_BULK as usize + 1]);
        let e = c.call(&Request::Ping, big).await.err();
        assert_eq!(e, Some(RpcError::Errno(Errno::EFBIG)));
        // The connection is not torn down for it.
        c.call(&Request::Ping, Bytes::new())
            .await
            .expect("the connection survives");
        assert!(!c.is_closed());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn pending_handshakes_are_bounded_and_time_out() {
        use tokio::io::AsyncReadExt;
        let key = Key::generate();
        let (addr, _sd) = start(key.clone()).await;
        // Peers that take their server hello and say nothing more.
        let mut idle = Vec::new();
        for _ in 0..MAX_PENDING_HANDSHAKES {
            let mut s = TcpStream::connect(&addr).await.expect("connect");
            tokio::time::timeout(Duration::from_secs(2), frame::read_frame(&mut s))
                .await
                .expect("hello in time")
                .expect("hello");
            idle.push(s);
        }
        // One more is closed at once, before any hello.
        let mut extra = TcpStream::connect(&addr).await.expect("connect");
        let mut buf = [0u8; 64];
        let n = tokio::time::timeout(Duration::from_secs(1), extra.read(&mut buf))
            .await
            .expect("the connection over the bound is left open")
            .unwrap_or(0);
        assert_eq!(n, 0, "the connection over the bound got a hello");
        // A client with the key is told to come back, not that it is refused.
        let e = Conn::connect(&addr, &cfg(key.clone()))
            .await
            .expect_err("no handshake slot is free");
        assert!(e.is_transport(), "{e}");
        // Each pending handshake ends after its deadline; then clients are served again.
        tokio::time::sleep(HANDSHAKE_TIMEOUT + Duration::from_millis(500)).await;
        for mut s in idle {
            let n = tokio::time::timeout(Duration::from_secs(1), s.read(&mut buf))
                .await
                .expect("a stalled handshake outlived its deadline")
                .unwrap_or(0);
            assert_eq!(n, 0);
        }
        let c = Conn::connect(&addr, &cfg(key)).await.expect("connect");
        c.call(&Request::Ping, Bytes::new()).await.expect("ping");
    }

    /// Log lines written while it lives, on this thread.
    struct Captured {
        buf: Arc<parking_lot::Mutex<Vec<u8>>>,
        _guard: tracing::subscriber::DefaultGuard,
    }

    impl Captured {
        fn start() -> Captured {
            let buf = Arc::new(parking_lot::Mutex::new(Vec::new()));
            let sink = buf.clone();
            let sub = tracing_subscriber::fmt()
                .with_ansi(false)
                .with_writer(move || Sink(sink.clone()))
                .finish();
            Captured {
                buf,
                _guard: tracing::subscriber::set_default(sub),
            }
        }

        fn lines_with(&self, what: &str) -> Vec<String> {
            String::from_utf8_lossy(&self.buf.lock())
                .lines()
                .filter(|l| l.contains(what))
                .map(str::to_string)
                .collect()
        }
    }

    struct Sink(Arc<parking_lot::Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().extend_from_slice(b);
            Ok(b.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    // One thread: the server's tasks log where the capture is.
    #[tokio::test]
    async fn refused_peers_are_logged_at_a_bounded_rate() {
        let log = Captured::start();
        let (addr, _sd) = start(Key::generate()).await;
        for _ in 0..100 {
            let e = Conn::connect(&addr, &cfg(Key::generate()))
                .await
                .expect_err("wrong key");
            assert!(matches!(e, RpcError::Auth { .. }), "{e}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let lines = log.lines_with("refused");
        assert_eq!(lines.len(), 1, "{lines:#?}");
        assert!(lines[0].contains("does not hold the key"), "{lines:#?}");
    }

    #[test]
    fn refusal_lines_count_what_they_skipped() {
        let log = Captured::start();
        let limit = RefusalLog::new(Duration::from_millis(200));
        let peer: SocketAddr = "192.0.2.1:988".parse().expect("addr");
        for _ in 0..100 {
            limit.refused("t-OST0000", peer, "wrong key");
        }
        std::thread::sleep(Duration::from_millis(250));
        limit.refused("t-OST0000", peer, "wrong key");
        let lines = log.lines_with("refused");
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(!lines[0].contains("skipped"), "{lines:#?}");
        assert!(
            lines[1].contains("skipped 99 previous similar messages"),
            "{lines:#?}"
        );
    }
}
