//! Peers that never authenticate cost a server next to nothing: 64 connections that
//! announce the largest frame the wire allows as their handshake and then stall.
//!
//! Its own test binary: the allocator below counts every byte this process holds.

use bytes::Bytes;
use nacre_core::Errno;
use nacre_rpc::Key;
use nacre_rpc::conn::{Conn, ConnConfig};
use nacre_rpc::frame::{self, FLAG_HANDSHAKE, Header};
use nacre_rpc::memory::MemoryBudget;
use nacre_rpc::msg::{Reply, Request};
use nacre_rpc::server::{RequestCtx, ServerConfig, Service, serve};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Bytes allocated and not yet freed, and the most there ever were.
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

struct Counting;

fn grew(n: usize) {
    let now = LIVE.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, size: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, size) };
        if !q.is_null() {
            LIVE.fetch_sub(l.size(), Ordering::Relaxed);
            grew(size);
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

struct Pong;

impl Service for Pong {
    async fn handle(
        self: Arc<Self>,
        _ctx: RequestCtx,
        req: Request,
        _bulk: Bytes,
    ) -> Result<(Reply, Bytes), Errno> {
        match req {
            Request::Ping => Ok((
                Reply::Pong {
                    target: "pong".into(),
                },
                Bytes::new(),
            )),
            _ => Err(Errno::ENOSYS),
        }
    }
}

/// Resident set of this process, from /proc.
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_unauthenticated_peers_cost_little_memory() {
    let key = Key::generate();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let cfg = Arc::new(ServerConfig {
        fsname: "floodfs".into(),
        target: "floodfs-OST0000".into(),
        key: key.clone(),
        memory: MemoryBudget::new(0),
        stats: Default::default(),
        net: Default::default(),
        service_at: Default::default(),
    });
    let (_sd, sd_rx) = watch::channel(false);
    tokio::spawn(serve(listener, cfg, Arc::new(Pong), sd_rx));
    let ccfg = ConnConfig {
        fsname: "floodfs".into(),
        client: "client".into(),
        key,
        max_in_flight: 8,
        timeout: Duration::from_secs(5),
    };
    // Warm up: a whole handshake and request, so what is counted next is the flood alone.
    let c = Conn::connect(&addr, &ccfg).await.expect("connect");
    c.call(&Request::Ping, Bytes::new()).await.expect("ping");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let rss_before = rss_bytes();

    let header = |body_len, bulk_len| {
        Header {
            opcode: 0,
            xid: 0,
            flags: FLAG_HANDSHAKE,
            body_len,
            bulk_len,
            timeout: 0,
            service_time: 0,
            cksum: 0,
        }
        .encode()
    };
    // 64 peers in their handshake, each having sent part of the largest hello there is.
    let mut pending = Vec::new();
    for _ in 0..64 {
        let mut s = TcpStream::connect(&addr).await.expect("connect");
        s.write_all(&header(nacre_rpc::auth::MAX_HELLO, 0))
            .await
            .expect("header");
        s.write_all(&[0u8; 100]).await.expect("part of the body");
        pending.push(s);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(pending);
    tokio::time::sleep(Duration::from_millis(200)).await;
    // 64 peers whose handshake header claims the largest frame the wire allows, 80 MiB
    // that never come. The server's hello is left unread.
    let mut flood = Vec::new();
    for _ in 0..64 {
        let mut s = TcpStream::connect(&addr).await.expect("connect");
        s.write_all(&header(frame::MAX_BODY, frame::MAX_BULK))
            .await
            .expect("header");
        flood.push(s);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let extra = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    let rss_after = rss_bytes();
    eprintln!(
        "64 + 64 stalled handshakes: at most {} KiB more allocated, RSS {} -> {} KiB",
        extra >> 10,
        rss_before >> 10,
        rss_after >> 10
    );
    assert!(
        extra < 16 << 20,
        "unauthenticated peers made the process allocate {} MiB",
        extra >> 20
    );
    // The server still serves clients with the key.
    c.call(&Request::Ping, Bytes::new()).await.expect("ping");
    drop(flood);
}
