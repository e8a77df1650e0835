//! A client's connection to one target: many requests in flight, replies matched by xid.
//!
//! A caller writes its frame itself, under the connection's write lock (one syscall for a
//! small frame), and one task reads replies and hands each to its waiting caller: two task
//! switches fewer per request than a separate writer task. The number of requests in flight is bounded by a
//! semaphore (`max_rpcs_in_flight`), the outgoing queue by a bounded channel, and every call
//! by a deadline, so a dead server costs a caller at most one timeout, never a hang. The
//! deadline adapts to the target ([`crate::at`]): its service estimate plus the network's
//! latency, extended by the target's early replies while it works, never past `at_max`.

use crate::at::{self, ImportAt};
use crate::auth::{self, ClientHello, Key, ServerHello, ServerVerdict};
use crate::error::RpcError;
use crate::frame::{self, FLAG_EARLY, FLAG_HANDSHAKE, FLAG_REPLY, Frame, Header};
use crate::msg::{self, Reply, Request};
use bytes::Bytes;
use nacre_core::Errno;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{Semaphore, oneshot};

/// Default bound on requests in flight per connection (Lustre's `max_rpcs_in_flight` is 8 for
/// bulk; metadata and small requests benefit from more).
pub const DEFAULT_MAX_IN_FLIGHT: usize = 64;
/// Default bound on a request's first deadline (its target's early replies may extend it).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Deadline for TCP connect plus handshake.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How to reach and authenticate with a target.
#[derive(Clone, Debug)]
pub struct ConnConfig {
    pub fsname: String,
    /// Name of this client in the server's logs.
    pub client: String,
    pub key: Key,
    pub max_in_flight: usize,
    /// The longest a request waits for its target's first word: its adaptive deadline
    /// ([`crate::at`]) or, with adaptive timeouts off, `timeout`, is never longer. An early
    /// reply from a target still at work extends it.
    pub timeout: Duration,
}

/// The write half of a connection, shared by everyone who sends on it. A frame is written
/// whole or the connection is closed: a writer cancelled half-way would leave the peer a
/// torn frame, so its guard shuts the socket down instead.
pub(crate) struct FrameWriter {
    half: tokio::sync::Mutex<OwnedWriteHalf>,
    broken: AtomicBool,
}

impl FrameWriter {
    pub(crate) fn new(half: OwnedWriteHalf) -> FrameWriter {
        FrameWriter {
            half: tokio::sync::Mutex::new(half),
            broken: AtomicBool::new(false),
        }
    }

    pub(crate) fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Acquire)
    }

    /// Writes one frame.
    pub(crate) async fn send(
        &self,
        header: &Header,
        body: &[u8],
        bulk: &[u8],
    ) -> std::io::Result<()> {
        let mut w = self.half.lock().await;
        if self.is_broken() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "connection closed",
            ));
        }
        struct Guard<'a>(&'a FrameWriter, bool);
        impl Drop for Guard<'_> {
            fn drop(&mut self) {
                if !self.1 {
                    self.0.broken.store(true, Ordering::Release);
                }
            }
        }
        let mut guard = Guard(self, false);
        let mut head = Vec::with_capacity(frame::HEADER_LEN + body.len());
        head.extend_from_slice(&header.encode());
        head.extend_from_slice(body);
        let r = async {
            w.write_all(&head).await?;
            if !bulk.is_empty() {
                w.write_all(bulk).await?;
            }
            Ok::<(), std::io::Error>(())
        }
        .await;
        match r {
            Ok(()) => {
                guard.1 = true;
                Ok(())
            }
            Err(e) => {
                let _ = w.shutdown().await;
                Err(e)
            }
        }
    }

    /// Closes the write side (the peer sees end of stream).
    pub(crate) async fn close(&self) {
        self.broken.store(true, Ordering::Release);
        let _ = self.half.lock().await.shutdown().await;
    }
}

type Waiter = oneshot::Sender<Result<Frame, RpcError>>;

/// A request waiting for its reply.
struct Pending {
    waiter: Waiter,
    /// The deadline an early reply gave, in milliseconds after the request went; 0 while
    /// none came. Its caller looks here when its own deadline passes.
    extended_ms: u64,
}

struct Inner {
    peer: String,
    target: String,
    writer: FrameWriter,
    pending: Mutex<HashMap<u64, Pending>>,
    /// The target's service and latency estimates, kept across reconnects by the import.
    at: Arc<ImportAt>,
    next_xid: AtomicU64,
    in_flight: InFlight,
    closed: AtomicBool,
    close_reason: Mutex<String>,
    timeout: Duration,
}

/// A bound on requests in flight (`max_rpcs_in_flight`) that can change while requests run.
pub(crate) struct InFlight {
    sem: Arc<Semaphore>,
    limit: std::sync::atomic::AtomicUsize,
}

impl InFlight {
    pub(crate) fn new(n: usize) -> InFlight {
        let n = n.max(1);
        InFlight {
            sem: Arc::new(Semaphore::new(n)),
            limit: std::sync::atomic::AtomicUsize::new(n),
        }
    }

    /// Waits for a slot; `None` once the bound is closed.
    pub(crate) async fn acquire(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.sem.clone().acquire_owned().await.ok()
    }

    pub(crate) fn resize(&self, n: usize) {
        let n = n.max(1);
        let old = self.limit.swap(n, Ordering::AcqRel);
        if n > old {
            self.sem.add_permits(n - old);
        } else if n < old {
            // Take the surplus permits out of circulation as requests finish.
            let sem = self.sem.clone();
            let less = (old - n) as u32;
            tokio::spawn(async move {
                if let Ok(p) = sem.acquire_many(less).await {
                    p.forget();
                }
            });
        }
    }
}

/// A connection; cheap to clone, closed when the last clone is dropped.
#[derive(Clone)]
pub struct Conn {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Conn({} at {})", self.inner.target, self.inner.peer)
    }
}

impl Conn {
    /// Connects to `addr`, proves we hold the key and checks that the server does too.
    pub async fn connect(addr: &str, cfg: &ConnConfig) -> Result<Conn, RpcError> {
        Self::connect_import(addr, cfg, 0).await
    }

    /// [`Conn::connect`] for import `import` (nonzero): the target serves this connection
    /// only once the requests of the import's previous connection have finished
    /// ([`crate::reconnect`]).
    pub async fn connect_import(
        addr: &str,
        cfg: &ConnConfig,
        import: u64,
    ) -> Result<Conn, RpcError> {
        Self::connect_tracked(addr, cfg, import, Arc::new(ImportAt::new(0))).await
    }

    /// [`Conn::connect_import`] keeping its deadlines in `at`, the import's estimates of
    /// the target.
    pub async fn connect_tracked(
        addr: &str,
        cfg: &ConnConfig,
        import: u64,
        at: Arc<ImportAt>,
    ) -> Result<Conn, RpcError> {
        let peer = addr.to_string();
        let res = tokio::time::timeout(CONNECT_TIMEOUT, Self::handshake(addr, cfg, import)).await;
        let (stream, target) = match res {
            Ok(r) => r?,
            Err(_) => {
                return Err(RpcError::Timeout {
                    peer,
                    secs: CONNECT_TIMEOUT.as_secs(),
                });
            }
        };
        let (rd, wr) = stream.into_split();
        let inner = Arc::new(Inner {
            peer: peer.clone(),
            target,
            writer: FrameWriter::new(wr),
            pending: Mutex::new(HashMap::new()),
            at,
            next_xid: AtomicU64::new(1),
            in_flight: InFlight::new(cfg.max_in_flight),
            closed: AtomicBool::new(false),
            close_reason: Mutex::new(String::new()),
            timeout: cfg.timeout,
        });
        tokio::spawn(read_loop(rd, Arc::downgrade(&inner)));
        Ok(Conn { inner })
    }

    async fn handshake(
        addr: &str,
        cfg: &ConnConfig,
        import: u64,
    ) -> Result<(TcpStream, String), RpcError> {
        let peer = addr.to_string();
        let disc = |reason: String| RpcError::Disconnected {
            peer: peer.clone(),
            reason,
        };
        if cfg.client.len() > auth::MAX_CLIENT_NAME {
            return Err(RpcError::Protocol {
                peer,
                reason: format!(
                    "client name '{}' is longer than {} bytes",
                    cfg.client,
                    auth::MAX_CLIENT_NAME
                ),
            });
        }
        let mut stream = TcpStream::connect(addr)
            .await
            .map_err(|e| disc(e.to_string()))?;
        stream.set_nodelay(true).map_err(|e| disc(e.to_string()))?;
        let hello = frame::read_small_frame(&mut stream, auth::MAX_HELLO)
            .await
            .map_err(|e| handshake_error(&peer, e))?;
        let hello: ServerHello = msg::decode(&hello.body).map_err(|e| RpcError::Protocol {
            peer: peer.clone(),
            reason: format!("bad server hello: {e}"),
        })?;
        if hello.fsname != cfg.fsname {
            return Err(RpcError::Auth {
                peer,
                reason: format!(
                    "server serves file system '{}', not '{}'",
                    hello.fsname, cfg.fsname
                ),
            });
        }
        let client_nonce = auth::nonce();
        let answer = ClientHello {
            fsname: cfg.fsname.clone(),
            client: cfg.client.clone(),
            nonce: client_nonce.to_vec(),
            proof: cfg
                .key
                .client_proof(&hello.nonce, &client_nonce, &cfg.fsname)
                .to_vec(),
            import,
        };
        let answer = msg::encode(&answer).map_err(|e| disc(format!("cannot encode hello: {e}")))?;
        write_frame(&mut stream, 0, FLAG_HANDSHAKE, &answer, &[])
            .await
            .map_err(|e| disc(e.to_string()))?;
        let verdict = frame::read_small_frame(&mut stream, auth::MAX_HELLO)
            .await
            .map_err(|e| handshake_error(&peer, e))?;
        let verdict: ServerVerdict =
            msg::decode(&verdict.body).map_err(|e| RpcError::Protocol {
                peer: peer.clone(),
                reason: format!("bad server verdict: {e}"),
            })?;
        match verdict {
            ServerVerdict::Refused { reason } => Err(RpcError::Auth {
                peer,
                reason: format!("server refused the connection: {reason}"),
            }),
            ServerVerdict::Accepted { proof } => {
                let expect = cfg
                    .key
                    .server_proof(&hello.nonce, &client_nonce, &cfg.fsname);
                if auth::mac_eq(&proof, &expect) {
                    Ok((stream, hello.target))
                } else {
                    Err(RpcError::Auth {
                        peer,
                        reason: "server does not hold this file system's key".to_string(),
                    })
                }
            }
        }
    }

    pub fn peer(&self) -> &str {
        &self.inner.peer
    }

    /// Target name the server announced (`testfs-OST0001`).
    pub fn target(&self) -> &str {
        &self.inner.target
    }

    /// Changes the bound on requests in flight (`max_rpcs_in_flight`) of a live connection.
    pub fn set_max_in_flight(&self, n: usize) {
        self.inner.in_flight.resize(n);
    }

    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire) || self.inner.writer.is_broken()
    }

    /// Sends a request and waits for its reply; an errno reply becomes `RpcError::Errno`.
    pub async fn call(&self, req: &Request, bulk: Bytes) -> Result<(Reply, Bytes), RpcError> {
        self.call_with_timeout(req, bulk, self.request_timeout())
            .await
    }

    /// The deadline of the next request: the adaptive one, within the configured bound.
    pub fn request_timeout(&self) -> Duration {
        let p = at::AT.params();
        Duration::from_secs(u64::from(self.inner.at.request_timeout(&p))).min(self.inner.timeout)
    }

    pub async fn call_with_timeout(
        &self,
        req: &Request,
        bulk: Bytes,
        timeout: Duration,
    ) -> Result<(Reply, Bytes), RpcError> {
        let inner = &self.inner;
        let body = msg::encode(req)?;
        // A frame the server would refuse fails alone here, instead of making the server
        // drop the connection and every request on it.
        if frame::check_lengths(body.len(), bulk.len()).is_err() {
            return Err(RpcError::Errno(Errno::EFBIG));
        }
        let _permit = inner
            .in_flight
            .acquire()
            .await
            .ok_or_else(|| self.disconnected())?;
        if self.is_closed() {
            return Err(self.disconnected());
        }
        let xid = inner.next_xid.fetch_add(1, Ordering::Relaxed);
        let p = at::AT.params();
        // The server is told the deadline, so it asks for more time before it passes; a
        // deadline under a second (0) is one the caller set to give up early, which the
        // server leaves alone.
        let told = if p.off() { 0 } else { at::wire_secs(timeout) };
        let header = frame::make_timed_header(req.opcode(), xid, 0, (told, 0), &body, &bulk);
        let (wtx, mut wrx) = oneshot::channel();
        let sent_at = std::time::Instant::now();
        inner.pending.lock().insert(
            xid,
            Pending {
                waiter: wtx,
                extended_ms: 0,
            },
        );
        let sent = tokio::time::timeout(timeout, inner.writer.send(&header, &body, &bulk)).await;
        match sent {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                inner.pending.lock().remove(&xid);
                *inner.close_reason.lock() = e.to_string();
                return Err(self.disconnected());
            }
            Err(_) => {
                inner.pending.lock().remove(&xid);
                return Err(self.timed_out(timeout));
            }
        }
        let mut deadline = sent_at + timeout;
        let frame = loop {
            match tokio::time::timeout_at(deadline.into(), &mut wrx).await {
                Ok(Ok(r)) => break r?,
                Ok(Err(_)) => return Err(self.disconnected()),
                Err(_) => {
                    let mut pending = inner.pending.lock();
                    // An early reply moved the deadline: wait on.
                    let ext = pending.get(&xid).map_or(0, |p| p.extended_ms);
                    let later = sent_at + Duration::from_millis(ext);
                    if ext > 0 && later > deadline {
                        deadline = later;
                        continue;
                    }
                    pending.remove(&xid);
                    return Err(self.timed_out(sent_at.elapsed()));
                }
            }
        };
        inner.at.replied(
            &p,
            sent_at.elapsed(),
            frame.header.timeout,
            frame.header.service_time,
        );
        let reply: Reply = msg::decode(&frame.body).map_err(|e| RpcError::Protocol {
            peer: inner.peer.clone(),
            reason: format!("undecodable reply to {:?}: {e}", req.opcode()),
        })?;
        match reply {
            Reply::Error(e) => Err(RpcError::Errno(e)),
            r => Ok((r, frame.bulk)),
        }
    }

    fn disconnected(&self) -> RpcError {
        let reason = self.inner.close_reason.lock().clone();
        RpcError::Disconnected {
            peer: self.inner.peer.clone(),
            reason: if reason.is_empty() {
                "connection closed".to_string()
            } else {
                reason
            },
        }
    }

    fn timed_out(&self, timeout: Duration) -> RpcError {
        RpcError::Timeout {
            peer: self.inner.peer.clone(),
            secs: timeout.as_secs(),
        }
    }
}

fn handshake_error(peer: &str, e: frame::FrameError) -> RpcError {
    match e {
        // A server refuses with a verdict; one that just closes is busy (all its
        // handshake slots taken) or stopping: worth another try.
        frame::FrameError::Closed => RpcError::Disconnected {
            peer: peer.to_string(),
            reason: "server closed the connection during the handshake".to_string(),
        },
        frame::FrameError::BadMagic(_) | frame::FrameError::BadVersion(_) => RpcError::Protocol {
            peer: peer.to_string(),
            reason: e.to_string(),
        },
        other => RpcError::Disconnected {
            peer: peer.to_string(),
            reason: other.to_string(),
        },
    }
}

/// Writes one frame directly (handshake only; later frames go through the writer task).
pub(crate) async fn write_frame<W: tokio::io::AsyncWrite + Unpin>(
    w: &mut W,
    xid: u64,
    flags: u32,
    body: &[u8],
    bulk: &[u8],
) -> std::io::Result<()> {
    let h = frame::make_header(0, xid, flags, body, bulk);
    w.write_all(&h.encode()).await?;
    w.write_all(body).await?;
    w.write_all(bulk).await?;
    w.flush().await
}

/// A server still at work on a request asks for time until `timeout` seconds after the
/// request went (Lustre's `ptlrpc_at_recv_early_reply`), plus the network's latency: the
/// request's deadline moves there, never past this side's `at_max` after it went (a server
/// cannot hold a client forever), and not at all with adaptive timeouts off here.
fn early_reply(inner: &Inner, header: &Header) {
    let p = at::AT.params();
    if p.off() {
        return;
    }
    let mut pending = inner.pending.lock();
    let Some(req) = pending.get_mut(&header.xid) else {
        return;
    };
    let secs =
        (u64::from(header.timeout) + u64::from(inner.at.net_latency.get(&p))).min(u64::from(p.max));
    req.extended_ms = req.extended_ms.max(secs.saturating_mul(1000).max(1));
    tracing::debug!(target: "rpc", "{}: early reply to xid {}: deadline {secs}s after it went", inner.target, header.xid);
}

async fn read_loop(mut rd: OwnedReadHalf, inner: std::sync::Weak<Inner>) {
    let reason = loop {
        let frame = match frame::read_frame(&mut rd).await {
            Ok(f) => f,
            Err(e) => break e.to_string(),
        };
        let Some(inner) = inner.upgrade() else {
            return;
        };
        if frame.header.flags & FLAG_REPLY == 0 {
            break format!("unexpected non-reply frame xid {}", frame.header.xid);
        }
        if frame.header.flags & FLAG_EARLY != 0 {
            early_reply(&inner, &frame.header);
            continue;
        }
        let pending = inner.pending.lock().remove(&frame.header.xid);
        if let Some(p) = pending {
            let _ = p.waiter.send(Ok(frame));
        }
    };
    if let Some(inner) = inner.upgrade() {
        *inner.close_reason.lock() = reason.clone();
        inner.closed.store(true, Ordering::Release);
        let waiters: Vec<Waiter> = inner
            .pending
            .lock()
            .drain()
            .map(|(_, p)| p.waiter)
            .collect();
        for w in waiters {
            let _ = w.send(Err(RpcError::Disconnected {
                peer: inner.peer.clone(),
                reason: reason.clone(),
            }));
        }
    }
}
