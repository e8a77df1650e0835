//! Hard links up to Lustre's limit: each link costs the same however many the file has
//! (its linkEA is one key per link, not one record rewritten whole), link 65,001 is EMLINK,
//! and fid2path and the namespace checker still see every link.

use crate::common;

use common::cluster::{DIR, FILE, create, mount, start};
use nacre_client::Client;
use nacre_core::Errno;
use nacre_core::Fid;
use nacre_mdt::mdd::LINK_MAX;
use nacre_rpc::msg::{Cred, InodeInfo};
use std::sync::Arc;
use std::time::Instant;

/// Concurrent link requests while filling the file up (the MDT commits them in groups).
const LINKERS: u32 = 8;

/// Link number `i` of `f`, alternating between the two directories.
async fn link(c: Arc<Client>, f: Fid, dirs: [Fid; 2], i: u32) -> Result<InodeInfo, Errno> {
    let name = format!("l{i:05}").into_bytes();
    c.link(f, dirs[(i % 2) as usize], &name, &Cred::root())
        .await
}

/// Links `from..from + 1000` one after the other; links per second.
async fn timed(c: &Arc<Client>, f: Fid, dirs: [Fid; 2], from: u32) -> f64 {
    let t = Instant::now();
    for i in from..from + 1000 {
        link(c.clone(), f, dirs, i).await.expect("link");
    }
    1000.0 / t.elapsed().as_secs_f64()
}

/// Links `from..to` from [`LINKERS`] tasks.
async fn fill(c: &Arc<Client>, f: Fid, dirs: [Fid; 2], from: u32, to: u32) {
    let tasks: Vec<_> = (0..LINKERS)
        .map(|k| {
            let c = c.clone();
            tokio::spawn(async move {
                let mut i = from + k;
                while i < to {
                    link(c.clone(), f, dirs, i).await.expect("link");
                    i += LINKERS;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("linker");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn link_limit_is_lustres_and_every_link_stays_recorded() {
    let tmp = tempfile::tempdir().expect("tmp");
    let cluster = start(tmp.path(), "lnfs", 1, 1).await;
    let c = mount(&cluster).await;
    let cred = Cred::root();
    let dirs = [
        create(&c, c.root(), b"d0", DIR)
            .await
            .expect("mkdir")
            .attr
            .fid,
        create(&c, c.root(), b"d1", DIR)
            .await
            .expect("mkdir")
            .attr
            .fid,
    ];
    let f = create(&c, dirs[0], b"f", FILE)
        .await
        .expect("create")
        .attr
        .fid;
    // Links 1..LINK_MAX besides the file's own name: runs of 1000 one after the other
    // timed on a fresh file and past 20,000 links (figures, not asserted), the rest
    // concurrent.
    let fresh = timed(&c, f, dirs, 1).await;
    fill(&c, f, dirs, 1001, 20_001).await;
    let at_20k = timed(&c, f, dirs, 20_001).await;
    eprintln!("links/s: {fresh:.0} on a fresh file, {at_20k:.0} past 20,000 links");
    fill(&c, f, dirs, 21_001, LINK_MAX).await;

    let st = c.getattr(f).await.expect("stat");
    assert_eq!(st.attr.nlink, LINK_MAX);
    assert_eq!(
        link(c.clone(), f, dirs, LINK_MAX).await.err(),
        Some(Errno::EMLINK)
    );
    assert_eq!(
        c.getattr(f).await.expect("stat").attr.nlink,
        LINK_MAX,
        "a refused link left a trace"
    );

    // fid2path finds a name that leads back to the file, also once the first name is gone.
    for _ in 0..2 {
        let p = c.fid2path(f).await.expect("fid2path");
        let p = String::from_utf8(p).expect("utf8");
        let (d, n) = p.rsplit_once('/').expect("a path with a directory");
        let d = c
            .lookup(c.root(), d.as_bytes(), &Cred::root())
            .await
            .expect("dir")
            .attr
            .fid;
        assert_eq!(
            c.lookup(d, n.as_bytes(), &Cred::root())
                .await
                .expect("name")
                .attr
                .fid,
            f,
            "{p}"
        );
        c.unlink(d, n.as_bytes(), &cred).await.expect("unlink");
    }
    assert_eq!(c.getattr(f).await.expect("stat").attr.nlink, LINK_MAX - 2);
    // Room for one more again.
    link(c.clone(), f, dirs, LINK_MAX)
        .await
        .expect("a link below the limit");
    cluster.stop().await;

    let rep = nacre::check::check_local(tmp.path()).expect("check");
    assert!(rep.is_clean(), "{}", rep.summary());
    assert_eq!((rep.dirs, rep.files), (3, 1));
}
