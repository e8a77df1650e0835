//! A Data-on-MDT read larger than the MDT serves is refused before the server reserves
//! memory for it, over TCP and in process, and never stalls other clients of the process
//! (the MDT's own, nor an OST's served beside it).

use bytes::Bytes;
use nacre_core::{Errno, Fid, TargetName};
use nacre_mdt::dom::MAX_DOM_READ;
use nacre_mdt::{Mdt, MdtConfig};
use nacre_osd::{MdStoreConfig, ObjStore, ObjStoreConfig};
use nacre_ost::Ost;
use nacre_rpc::conn::{Conn, ConnConfig};
use nacre_rpc::memory::MemoryBudget;
use nacre_rpc::msg::{FsConfig, Request, TargetInfo};
use nacre_rpc::server::{ServerConfig, serve};
use nacre_rpc::{Import, Key, RpcError};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

const FS: &str = "domfs";
const SEQ: u64 = 0x240000400;
/// Longer than any of these calls takes on an idle machine; a frozen budget never answers.
const BOUND: Duration = Duration::from_secs(3);

fn conn_cfg(key: &Key, client: &str) -> ConnConfig {
    ConnConfig {
        fsname: FS.into(),
        client: client.into(),
        key: key.clone(),
        max_in_flight: 8,
        timeout: Duration::from_secs(30),
    }
}

/// Another client's metadata request to the MDT and 1 MiB written to and read from the
/// OST, each within [`BOUND`].
async fn other_client_io(mdt: &Conn, ost: &Conn, seed: u8) {
    tokio::time::timeout(
        BOUND,
        mdt.call(&Request::Getattr { fid: Fid::ROOT }, Bytes::new()),
    )
    .await
    .expect("another client's getattr stalled")
    .expect("getattr");
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
    tokio::time::timeout(BOUND, ost.call(&w, data.clone()))
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
    let (_, got) = tokio::time::timeout(BOUND, ost.call(&r, Bytes::new()))
        .await
        .expect("another client's read stalled")
        .expect("read");
    assert_eq!(got, data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_dom_reads_are_refused_and_stall_no_one() {
    let dir = tempfile::tempdir().expect("tmp");
    let key = Key::generate();
    let memory = MemoryBudget::new(0);
    let server = |target: &str| {
        Arc::new(ServerConfig {
            fsname: FS.into(),
            target: target.into(),
            key: key.clone(),
            memory: memory.clone(),
            stats: Default::default(),
            net: Default::default(),
            service_at: Default::default(),
        })
    };
    let (_sd, sd_rx) = watch::channel(false);

    let health = |name: &str, d: &std::path::Path| {
        std::fs::create_dir_all(d).expect("mkdir");
        nacre_osd::Health::open(name, d).expect("health")
    };
    let ost_dir = dir.path().join("ost0");
    let store = ObjStore::open(
        &ost_dir,
        ObjStoreConfig::default(),
        health("domfs-OST0000", &ost_dir),
    )
    .expect("store");
    store.precreate(SEQ, 4).expect("precreate");
    let ost_listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let ost_addr = ost_listener.local_addr().expect("addr").to_string();
    tokio::spawn(serve(
        ost_listener,
        server("domfs-OST0000"),
        Arc::new(Ost::new(0, store).expect("ost")),
        sd_rx.clone(),
    ));

    let mdt_listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let mdt_addr = mdt_listener.local_addr().expect("addr").to_string();
    let fs = FsConfig {
        fsname: FS.into(),
        mdts: vec![TargetInfo {
            name: TargetName::mdt(0),
            addr: mdt_addr.clone(),
            active: true,
        }],
        osts: vec![TargetInfo {
            name: TargetName::ost(0),
            addr: ost_addr.clone(),
            active: true,
        }],
        ..FsConfig::default()
    };
    let (_cfg_tx, cfg_rx) = watch::channel(fs);
    let mdt = Mdt::start(
        MdtConfig {
            fsname: FS.into(),
            index: 0,
            dir: dir.path().join("mdt0"),
            store: MdStoreConfig::default(),
            conn: conn_cfg(&key, "domfs-MDT0000"),
            health: health("domfs-MDT0000", &dir.path().join("mdt0")),
        },
        cfg_rx.clone(),
    )
    .await
    .expect("start the MDT");
    tokio::spawn(serve(mdt_listener, server("domfs-MDT0000"), mdt, sd_rx));

    let attacker = Conn::connect(&mdt_addr, &conn_cfg(&key, "attacker"))
        .await
        .expect("connect");
    let other_mdt = Conn::connect(&mdt_addr, &conn_cfg(&key, "other"))
        .await
        .expect("connect");
    let other_ost = Conn::connect(&ost_addr, &conn_cfg(&key, "other"))
        .await
        .expect("connect");
    other_client_io(&other_mdt, &other_ost, 1).await;

    // Over TCP: 4 GiB asked for. The other client goes on while it is answered.
    let huge = Request::DomRead {
        fid: Fid::ROOT,
        offset: 0,
        len: u32::MAX,
        cksum: None,
    };
    let pending = {
        let a = attacker.clone();
        let huge = huge.clone();
        tokio::spawn(async move { tokio::time::timeout(BOUND, a.call(&huge, Bytes::new())).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    other_client_io(&other_mdt, &other_ost, 2).await;
    let r = pending
        .await
        .expect("join")
        .expect("no reply to a 4 GiB read");
    assert_eq!(r.err(), Some(RpcError::Errno(Errno::EINVAL)));

    // Just over the MDT's maximum while the budget is nearly all taken: refused at once,
    // not left waiting for memory it must never get.
    let held = memory
        .reserve(memory.available_bytes() - (8 << 20))
        .await
        .expect("hold");
    let over = Request::DomRead {
        fid: Fid::ROOT,
        offset: 0,
        len: MAX_DOM_READ + 1,
        cksum: None,
    };
    let r = tokio::time::timeout(BOUND, attacker.call(&over, Bytes::new()))
        .await
        .expect("a read over MAX_DOM_READ waited for memory");
    assert_eq!(r.err(), Some(RpcError::Errno(Errno::EINVAL)));
    other_client_io(&other_mdt, &other_ost, 3).await;
    drop(held);

    // In process (lo): the same answer, and the other client goes on.
    assert!(
        nacre_rpc::lo::lookup(&mdt_addr, FS, "domfs-MDT0000", &key).is_some(),
        "the MDT is not served in process"
    );
    let local = Import::new(TargetName::mdt(0), conn_cfg(&key, "local"), cfg_rx);
    let pending = tokio::spawn(async move {
        let r = tokio::time::timeout(BOUND, local.call(&huge, Bytes::new())).await;
        (r, local)
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    other_client_io(&other_mdt, &other_ost, 4).await;
    let (r, _local) = pending.await.expect("join");
    let r = r.expect("no in-process reply to a 4 GiB read");
    assert_eq!(r.err(), Some(RpcError::Errno(Errno::EINVAL)));
}
