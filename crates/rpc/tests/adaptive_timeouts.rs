//! Adaptive timeouts over TCP (Lustre's AT): a server still at work near a request's
//! deadline (in its handler or waiting for memory) answers early and the client waits on; `at_max` bounds how long; with
//! adaptive timeouts off a request waits its fixed deadline only.
//!
//! Its own test binary: it changes this process's tunables ([`nacre_rpc::at::AT`]).

use bytes::Bytes;
use nacre_core::Errno;
use nacre_rpc::Key;
use nacre_rpc::at::{AT, DEFAULT_AT_EXTRA, ImportAt, MDS_REQUEST_PORTAL};
use nacre_rpc::conn::{Conn, ConnConfig};
use nacre_rpc::error::RpcError;
use nacre_rpc::memory::MemoryBudget;
use nacre_rpc::msg::{Reply, Request};
use nacre_rpc::server::{RequestCtx, ServerConfig, Service, serve};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Answers `OstRead` after `len` milliseconds.
struct Slow;

impl Service for Slow {
    async fn handle(
        self: Arc<Self>,
        _ctx: RequestCtx,
        req: Request,
        _bulk: Bytes,
    ) -> Result<(Reply, Bytes), Errno> {
        match req {
            Request::OstRead { len, .. } => {
                tokio::time::sleep(Duration::from_millis(u64::from(len))).await;
                Ok((Reply::Ok, Bytes::new()))
            }
            _ => Err(Errno::ENOSYS),
        }
    }
}

fn slow(ms: u32) -> Request {
    Request::OstRead {
        obj: nacre_core::Fid::new(0x100000000, 1, 0),
        offset: 0,
        len: ms,
        cksum: None,
        torn: nacre_core::cksum::TornBlocks::Take,
        verify: nacre_core::cksum::ReadVerify::Target,
    }
}

async fn start(key: &Key) -> (String, Arc<ServerConfig>, watch::Sender<bool>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let cfg = Arc::new(ServerConfig {
        fsname: "atfs".into(),
        target: "atfs-MDT0000".into(),
        key: key.clone(),
        memory: MemoryBudget::new(64 << 20),
        stats: Default::default(),
        net: Default::default(),
        service_at: Default::default(),
    });
    let (tx, rx) = watch::channel(false);
    tokio::spawn(serve(listener, cfg.clone(), Arc::new(Slow), rx));
    (addr, cfg, tx)
}

/// Calls `req` with a first deadline of `deadline`; the outcome and how long it took.
async fn timed(conn: &Conn, req: &Request, deadline: Duration) -> (Result<(), RpcError>, Duration) {
    let t = Instant::now();
    let r = conn
        .call_with_timeout(req, Bytes::new(), deadline)
        .await
        .map(|_| ());
    (r, t.elapsed())
}

/// One test, as its cases change the process's tunables in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn early_replies_extend_a_deadline_up_to_at_max_and_not_with_at_off() {
    let key = Key::generate();
    let (addr, scfg, _sd) = start(&key).await;
    let cfg = ConnConfig {
        fsname: "atfs".into(),
        client: "client-at".into(),
        key,
        max_in_flight: 8,
        timeout: Duration::from_secs(120),
    };
    let at = Arc::new(ImportAt::new(MDS_REQUEST_PORTAL));
    let conn = Conn::connect_tracked(&addr, &cfg, 0, at.clone())
        .await
        .expect("connect");
    let p = AT.params();

    // A 2.5 s request with a 1.5 s deadline: the server asks for more time at 0.5 s (half of the 1 s the wire carries) and
    // the answer comes.
    let (r, took) = timed(&conn, &slow(2500), Duration::from_millis(1500)).await;
    r.expect("answered after an early reply");
    assert!(took >= Duration::from_millis(2500), "{took:?}");
    // The server counted the time it asked for; the client took its estimate from the
    // reply, and its next deadline from that.
    let asked = DEFAULT_AT_EXTRA;
    assert!(
        scfg.service_at.get(&p) >= asked,
        "{}",
        scfg.service_at.get(&p)
    );
    assert!(at.service.get(&p) >= asked, "{}", at.service.get(&p));
    assert_eq!(
        conn.request_timeout(),
        Duration::from_secs(u64::from(at.request_timeout(&p))),
        "the adaptive deadline, within the configured 120 s"
    );
    assert!(conn.request_timeout() >= Duration::from_secs(u64::from(asked) + 5));

    // A request that waits for memory (the budget all held elsewhere for 2.5 s) is given
    // more time as a slow handler is: with a 1.5 s deadline it is answered, not timed out.
    let all = scfg.memory.total_bytes();
    let held = scfg.memory.reserve(all).await.expect("the whole budget");
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(2500)).await;
        drop(held);
    });
    let (r, took) = timed(&conn, &slow(1), Duration::from_millis(1500)).await;
    r.expect("answered after waiting for memory");
    assert!(took >= Duration::from_millis(2400), "{took:?}");
    release.await.expect("release");

    // at_max bounds what early replies give: a 6 s request with a 2 s deadline and
    // at_max=3 times out at about 3 s after it went.
    AT.set("at_max", "3").expect("at_max");
    let (r, took) = timed(&conn, &slow(6000), Duration::from_secs(2)).await;
    assert!(matches!(r, Err(RpcError::Timeout { .. })), "{r:?}");
    assert!(
        took >= Duration::from_millis(2900) && took < Duration::from_secs(5),
        "{took:?}"
    );
    AT.set("at_max", "600").expect("at_max");

    // With adaptive timeouts off the server asks for nothing and the client waits its
    // deadline only.
    AT.set("at_max", "0").expect("off");
    let (r, took) = timed(&conn, &slow(2500), Duration::from_millis(1500)).await;
    assert!(matches!(r, Err(RpcError::Timeout { .. })), "{r:?}");
    assert!(took < Duration::from_millis(2400), "{took:?}");
    // ... and a request's deadline is the `timeout` tunable, within the configured bound.
    AT.set("timeout", "7").expect("timeout");
    assert_eq!(conn.request_timeout(), Duration::from_secs(7));
    AT.set("at_max", "600").expect("at_max");
}
