//! A read larger than the OST serves is refused before the server reserves memory for it,
//! over TCP and in process, and never stalls other clients of the process.

use bytes::Bytes;
use nacre_core::{Errno, Fid, TargetName};
use nacre_osd::{ObjStore, ObjStoreConfig};
use nacre_ost::{MAX_READ, Ost};
use nacre_rpc::conn::{Conn, ConnConfig};
use nacre_rpc::memory::MemoryBudget;
use nacre_rpc::msg::{FsConfig, Request, TargetInfo};
use nacre_rpc::server::{ServerConfig, serve};
use nacre_rpc::{Import, Key, RpcError};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

const SEQ: u64 = 0x240000400;
/// Longer than any of these calls takes on an idle machine; a frozen budget never answers.
const BOUND: Duration = Duration::from_secs(3);

fn conn_cfg(key: &Key, client: &str) -> ConnConfig {
    ConnConfig {
        fsname: "boundfs".into(),
        client: client.into(),
        key: key.clone(),
        max_in_flight: 8,
        timeout: Duration::from_secs(30),
    }
}

/// Another client's write and read of 1 MiB, each within [`BOUND`].
async fn other_client_io(c: &Conn, seed: u8) {
    let obj = Fid::new(SEQ, 1, 0);
    let data = Bytes::from(vec![seed; 1 << 20]);
    let w = Request::OstWrite {
        obj,
        parent: Fid::new(0x200000401, 3, 0),
        offset: 0,
        cksum: None,
        grant: Default::default(),
        layout: None,
    };
    tokio::time::timeout(BOUND, c.call(&w, data.clone()))
        .await
        .expect("another client's write stalled")
        .expect("write");
    let r = Request::OstRead {
        obj,
        offset: 0,
        len: 1 << 20,
        cksum: None,
        torn: nacre_core::cksum::TornBlocks::Take,
        verify: nacre_core::cksum::ReadVerify::Target,
    };
    let (_, got) = tokio::time::timeout(BOUND, c.call(&r, Bytes::new()))
        .await
        .expect("another client's read stalled")
        .expect("read");
    assert_eq!(got, data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_reads_are_refused_and_stall_no_one() {
    let dir = tempfile::tempdir().expect("tmp");
    let health = nacre_osd::Health::open("rbfs-OST0000", dir.path()).expect("health");
    let store = ObjStore::open(dir.path(), ObjStoreConfig::default(), health).expect("store");
    store.precreate(SEQ, 4).expect("precreate");
    let ost = Arc::new(Ost::new(0, store).expect("ost"));
    let key = Key::generate();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let memory = MemoryBudget::new(0);
    let cfg = Arc::new(ServerConfig {
        fsname: "boundfs".into(),
        target: "boundfs-OST0000".into(),
        key: key.clone(),
        memory: memory.clone(),
        stats: Default::default(),
        net: Default::default(),
        service_at: Default::default(),
    });
    let (_sd, sd_rx) = watch::channel(false);
    tokio::spawn(serve(listener, cfg, ost, sd_rx));

    let attacker = Conn::connect(&addr, &conn_cfg(&key, "attacker"))
        .await
        .expect("connect");
    let other = Conn::connect(&addr, &conn_cfg(&key, "other"))
        .await
        .expect("connect");
    other_client_io(&other, 1).await;

    // Over TCP: 4 GiB asked for. The other client goes on while it is answered.
    let huge = Request::OstRead {
        obj: Fid::new(SEQ, 2, 0),
        offset: 0,
        len: u32::MAX,
        cksum: None,
        torn: nacre_core::cksum::TornBlocks::Take,
        verify: nacre_core::cksum::ReadVerify::Target,
    };
    let pending = {
        let a = attacker.clone();
        let huge = huge.clone();
        tokio::spawn(async move { tokio::time::timeout(BOUND, a.call(&huge, Bytes::new())).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    other_client_io(&other, 2).await;
    let r = pending
        .await
        .expect("join")
        .expect("no reply to a 4 GiB read");
    assert_eq!(r.err(), Some(RpcError::Errno(Errno::EINVAL)));

    // Just over the OST's maximum while the budget is nearly all taken: refused at once,
    // not left waiting for memory it must never get.
    let held = memory
        .reserve(memory.available_bytes() - (8 << 20))
        .await
        .expect("hold");
    let over = Request::OstRead {
        obj: Fid::new(SEQ, 2, 0),
        offset: 0,
        len: MAX_READ + 1,
        cksum: None,
        torn: nacre_core::cksum::TornBlocks::Take,
        verify: nacre_core::cksum::ReadVerify::Target,
    };
    let r = tokio::time::timeout(BOUND, attacker.call(&over, Bytes::new()))
        .await
        .expect("a read over MAX_READ waited for memory");
    assert_eq!(r.err(), Some(RpcError::Errno(Errno::EINVAL)));
    other_client_io(&other, 3).await;
    drop(held);

    // In process (lo): the same answer, and the other client goes on.
    let name = TargetName::ost(0);
    let fs = FsConfig {
        fsname: "boundfs".into(),
        osts: vec![TargetInfo {
            name,
            addr: addr.clone(),
            active: true,
        }],
        ..FsConfig::default()
    };
    let (_tx, rx) = watch::channel(fs);
    assert!(
        nacre_rpc::lo::lookup(&addr, "boundfs", "boundfs-OST0000", &key).is_some(),
        "the OST is not served in process"
    );
    let local = Import::new(name, conn_cfg(&key, "local"), rx);
    let pending = tokio::spawn(async move {
        let r = tokio::time::timeout(BOUND, local.call(&huge, Bytes::new())).await;
        (r, local)
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    other_client_io(&other, 4).await;
    let (r, _local) = pending.await.expect("join");
    let r = r.expect("no in-process reply to a 4 GiB read");
    assert_eq!(r.err(), Some(RpcError::Errno(Errno::EINVAL)));
}
