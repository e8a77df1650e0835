//! A client's export outlives one connection, in the style of Lustre's `recovery-small.sh`
//! (a dropped connection, then the client reconnects to the same MDT, which kept running):
//! what the client held open is still open after the reconnect. An open-unlinked file in
//! particular keeps its data, since the MDT destroys an unlinked file at its last close,
//! and before, a lost connection closed every handle it carried. A handle is its
//! opener's: another client's close of it is refused.

use crate::common;

use bytes::Bytes;
use common::cluster::{FILE, create, pattern, rw};
use common::procs::ServeCluster;
use nacre_core::{Errno, Fid};
use nacre_rpc::RpcError;
use nacre_rpc::msg::{Cred, Request};
use std::time::Duration;

const DATA: usize = 1 << 20;

/// An MGS, one MDT and one OST, each a `nacre serve` process, started.
fn one_mdt_one_ost(dir: &std::path::Path, fsname: &str) -> ServeCluster {
    let mut cl = ServeCluster::format(
        fsname,
        &dir.join("mgs"),
        &[dir.join("mdt0")],
        &[dir.join("ost0")],
    );
    cl.start_all();
    cl
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_unlinked_file_keeps_its_data_across_a_reconnect() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut cl = tokio::task::block_in_place(|| one_mdt_one_ost(tmp.path(), "reconn"));
    let c = cl.mount_as_client("reconn-a").await;
    let f = create(&c, Fid::ROOT, b"held", FILE)
        .await
        .expect("create")
        .attr
        .fid;
    let (h, _) = c.open(f, rw(), &Cred::root()).await.expect("open");
    let data = pattern(DATA, 5);
    c.write(&h, 0, Bytes::from(data.clone()))
        .await
        .expect("write");
    c.fsync(&h).await.expect("fsync");
    c.unlink(Fid::ROOT, b"held", &Cred::root())
        .await
        .expect("unlink while open");
    let before = c
        .read(&h, 0, DATA as u64)
        .await
        .expect("read before the reconnect");
    assert!(before[..] == data[..]);
    // Another client may not close it (a handle is its opener's, not anyone's who
    // guesses its number).
    let other = cl.mount_as_client("reconn-b").await;
    let close = Request::Close {
        handle: h.handle,
        wrote: false,
    };
    match other.mdcs()[0].call(&close, Bytes::new()).await {
        Err(RpcError::Errno(Errno::EBADF)) => {}
        r => panic!("another client's close of the handle: {r:?}"),
    }
    let num_exports = || {
        tokio::task::block_in_place(|| {
            common::param(&format!("mdt.{}-MDT0000.num_exports", cl.fsname))
        })
    };
    assert_eq!(num_exports(), "2");
    other.disconnect().await;
    other.unmount();
    // The client drops its connection to the MDT and makes a new one; the MDT sees the
    // old one end (a network fault would look the same to it).
    let generation: Vec<u64> = c.mdcs().iter().map(|m| m.generation()).collect();
    for m in c.mdcs() {
        m.reset().await;
    }
    c.statfs().await.expect("statfs over a new connection");
    assert!(
        c.mdcs()
            .iter()
            .zip(&generation)
            .all(|(m, g)| m.generation() != *g),
        "the client did not reconnect"
    );
    // Time for the MDT to end the old connection and, had it closed the handle, for its
    // destroy of the file's objects to reach the OST.
    tokio::time::sleep(Duration::from_secs(3)).await;
    // One export: the client took its parked one over, and the other said goodbye.
    assert_eq!(num_exports(), "1");
    let back = match c.read(&h, 0, DATA as u64).await {
        Ok(b) => b,
        Err(e) => {
            let log = std::fs::read_to_string(cl.logs.join("mdt0.log")).unwrap_or_default();
            panic!("read after the reconnect: {e}\n== mdt0.log\n{log}");
        }
    };
    assert!(
        back[..] == data[..],
        "the open-unlinked file lost its data across the reconnect ({} bytes read, first \
         difference at {:?})",
        back.len(),
        back.iter().zip(&data).position(|(a, b)| a != b)
    );
    // Written through the kept handle, closed by it: the close is the last, and the file
    // goes (nacre check finds no orphan left behind).
    c.write(&h, 0, Bytes::from_static(b"still open"))
        .await
        .expect("write after reconnect");
    c.release(&h).await.expect("close after reconnect");
    common::cluster::quiesce_within(&c, Duration::from_secs(10)).await;
    c.unmount();
    tokio::task::block_in_place(|| {
        cl.stop_all();
        let rep = cl.check();
        assert!(rep.is_clean(), "nacre check: {}", rep.summary());
    });
}

/// A client that goes away without a goodbye and does not come back has its open handles
/// closed when `mdt.*.export_grace` ends, and no sooner: its export is counted until then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_come_back_loses_its_handles_after_the_export_grace() {
    const GRACE: u64 = 3;
    let tmp = tempfile::tempdir().expect("tmp");
    let mut cl = tokio::task::block_in_place(|| one_mdt_one_ost(tmp.path(), "gone"));
    let c = cl.mount_as_client("gone-a").await;
    let name = format!("mdt.{}-MDT0000.export_grace", cl.fsname);
    let refused =
        tokio::task::block_in_place(|| common::fail(&["lctl", "set_param", &format!("{name}=0")]));
    assert!(refused.contains("out of range"), "{refused}");
    tokio::task::block_in_place(|| common::ok(&["lctl", "set_param", &format!("{name}={GRACE}")]));
    let num_exports = || {
        tokio::task::block_in_place(|| {
            common::param(&format!("mdt.{}-MDT0000.num_exports", cl.fsname))
        })
    };
    let wait_param = |n: &str, want: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let got = tokio::task::block_in_place(|| common::param(n));
            if got == want {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{n} is {got}, not {want}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait_param(&name, &GRACE.to_string());
    let gone = cl.mount_as_client("gone-b").await;
    let f = create(&gone, Fid::ROOT, b"held", FILE)
        .await
        .expect("create")
        .attr
        .fid;
    let (_h, _) = gone.open(f, rw(), &Cred::root()).await.expect("open");
    gone.unlink(Fid::ROOT, b"held", &Cred::root())
        .await
        .expect("unlink while open");
    assert_eq!(num_exports(), "2");
    // Gone without a goodbye (its connections end as a crashed node's do).
    gone.unmount();
    for m in gone.mdcs() {
        m.reset().await;
    }
    drop(gone);
    let ended = std::time::Instant::now();
    wait_param(&format!("mdt.{}-MDT0000.num_exports", cl.fsname), "1");
    let waited = ended.elapsed();
    assert!(
        waited >= Duration::from_secs(GRACE - 1),
        "the export went after {waited:?}, before its grace of {GRACE}s"
    );
    // The grace starts when the connection ends, not when the MDT's hold of the client's
    // callback poll (10 s) would have.
    assert!(
        waited < Duration::from_secs(GRACE + 3),
        "the export went after {waited:?}, its grace being {GRACE}s"
    );
    // Its last close destroyed the open-unlinked file: the checker finds no orphan.
    c.disconnect().await;
    c.unmount();
    tokio::task::block_in_place(|| {
        cl.stop_all();
        let rep = cl.check();
        assert!(rep.is_clean(), "nacre check: {}", rep.summary());
    });
}
