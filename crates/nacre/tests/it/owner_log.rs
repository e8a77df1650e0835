//! A chown's owner reaches the file's OST objects through the MDT's owner log (Lustre's
//! `osp_sync` of setattr records): only once the chown is on stable storage, so a power
//! cut that takes the chown back leaves no object owned ahead of its file, and to an OST
//! that was down as soon as it is back, after a restart of the MDT too.

use crate::common;

use bytes::Bytes;
use common::cluster::{FILE, mount, pattern, rw};
use nacre::local::{self, LocalCluster};
use nacre::node::ServerTuning;
use nacre_core::{Layout, SetAttr, StripeObject};
use nacre_osd::MdStoreConfig;
use nacre_rpc::msg::{Cred, LayoutRequest};
use std::time::{Duration, Instant};

/// Longer than a log pass takes with every target up (and than the retry of one an OST
/// refused).
const OWNER_WAIT: Duration = Duration::from_secs(20);

fn owner_of(cl: &LocalCluster, so: &StripeObject) -> Option<(u32, u32)> {
    cl.osts[so.ost_idx as usize]
        .as_ref()
        .and_then(|s| s.ost())
        .expect("ost")
        .store()
        .owner(&so.fid)
        .expect("owner")
}

async fn wait_owner(cl: &LocalCluster, so: &StripeObject, want: (u32, u32)) {
    let end = Instant::now() + OWNER_WAIT;
    while owner_of(cl, so) != Some(want) {
        assert!(
            Instant::now() < end,
            "object {} on OST{} has owner {:?}, not {want:?}, after {OWNER_WAIT:?}",
            so.fid,
            so.ost_idx,
            owner_of(cl, so)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chowns_owner_reaches_the_objects_once_durable_and_waits_for_a_down_ost() {
    let dir = tempfile::tempdir().expect("tmp");
    local::format(dir.path(), "ownfs", 1, 2, 0).expect("format");
    // No checkpoint makes the chown durable behind the test's back.
    let tuning = ServerTuning {
        store: MdStoreConfig {
            checkpoint_interval: Duration::from_secs(3600),
            ..MdStoreConfig::default()
        },
        ..ServerTuning::default()
    };
    let mut cl = LocalCluster::start(dir.path(), tuning)
        .await
        .expect("start");
    let c = mount(&cl).await;
    let cred = Cred::root();
    let (fi, h) = c
        .create(
            c.root(),
            b"f",
            FILE,
            0o644,
            &cred,
            None,
            LayoutRequest::Explicit(Layout::plain(2, 65536, -1)),
            Some(rw()),
            true,
        )
        .await
        .expect("create");
    let fid = fi.attr.fid;
    let objs: Vec<StripeObject> = fi
        .layout
        .clone()
        .expect("layout")
        .objects()
        .copied()
        .collect();
    assert_eq!(objs.len(), 2);
    let f = nacre_client::file::OpenFile::new(fid, h.expect("handle"), rw(), fi.layout.clone());
    c.write(&f, 0, Bytes::from(pattern(256 << 10, 3)))
        .await
        .expect("write");
    c.release(&f).await.expect("close");
    // The MDT settles the size once the writer is gone; until then a setattr's answer
    // asks the OSTs for it, and one of them is about to stop.
    let end = Instant::now() + OWNER_WAIT;
    while !c.getattr(fid).await.expect("stat").size_authoritative {
        assert!(Instant::now() < end, "the size never settled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for so in &objs {
        assert_eq!(owner_of(&cl, so), None, "an owner nobody gave");
    }

    // OST1 is down when the chown comes.
    let down = objs
        .iter()
        .find(|o| o.ost_idx == 1)
        .expect("an object on OST1");
    let up = objs
        .iter()
        .find(|o| o.ost_idx == 0)
        .expect("an object on OST0");
    cl.stop_ost(1).await;
    let want = (1234, 5678);
    let chown = SetAttr {
        uid: Some(want.0),
        gid: Some(want.1),
        ..Default::default()
    };
    c.setattr(fid, chown, &cred, None).await.expect("chown");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        owner_of(&cl, up),
        None,
        "the owner reached an object before its chown was durable"
    );
    let mdt = cl.mdts[0]
        .as_ref()
        .and_then(|s| s.mdt())
        .expect("mdt")
        .clone();
    assert!(
        nacre_mdt::owner::owner_pending(&mut mdt.store().read().expect("view"), &fid)
            .expect("read")
    );
    // Durable now (what an fsync or the next checkpoint does): the OST that is up gets it.
    mdt.store().sync().await.expect("sync");
    wait_owner(&cl, up, want).await;
    assert!(
        nacre_mdt::owner::owner_pending(&mut mdt.store().read().expect("view"), &fid)
            .expect("read"),
        "the record went while OST1 had not taken the owner"
    );
    drop(mdt);

    // The MDT restarts before OST1 is back: the record is on disk, and OST1 gets the
    // owner once it is.
    c.disconnect().await;
    cl.stop_mdt(0).await;
    cl.start_mdt(0).await.expect("restart the MDT");
    cl.start_ost(1).await.expect("restart OST1");
    wait_owner(&cl, down, want).await;
    let mdt = cl.mdts[0]
        .as_ref()
        .and_then(|s| s.mdt())
        .expect("mdt")
        .clone();
    let end = Instant::now() + OWNER_WAIT;
    while nacre_mdt::owner::owner_pending(&mut mdt.store().read().expect("view"), &fid)
        .expect("read")
    {
        assert!(Instant::now() < end, "the owner record outlived its pass");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(owner_of(&cl, up), Some(want));
    drop(mdt);
    cl.stop().await;
}
