//! Replay recovery after a power cut of the MDT, in the style of Lustre's
//! `replay-single.sh` (`replay_barrier`, then `fail mds`): each modifying operation runs
//! with no `fsync` at all, the MDT's power goes right after the replies (before any
//! checkpoint), the MDT restarts, and the same client, alive throughout, reconnects and
//! replays: every acknowledged operation is there, `recovery_status` says COMPLETE with
//! the replayed count, and the stopped file system passes `nacre check`. A client that
//! does not come back is evicted when the window ends, and the other's replays apply.

use crate::common;

use bytes::Bytes;
use common::cluster::{DIR, FILE, create, pattern, rw};
use common::power_cut::{ReplayRig, require_power_cut, status_field};
use nacre_client::Client;
use nacre_client::file::OpenFile;
use nacre_core::attr::SetAttr;
use nacre_core::{Errno, Fid};
use nacre_rpc::msg::{Cred, LayoutRequest};
use std::sync::Arc;

/// Bytes of the file the truncate cuts.
const DATA: usize = 1 << 20;
const TRUNC: u64 = 100_000;

fn cred() -> Cred {
    Cred::root()
}

async fn lookup(c: &Client, dir: Fid, name: &str) -> Option<nacre_rpc::msg::InodeInfo> {
    match c.lookup(dir, name.as_bytes(), &cred()).await {
        Ok(i) => Some(i),
        Err(Errno::ENOENT) => None,
        Err(e) => panic!("lookup {name}: {e}"),
    }
}

/// Everything the operations need, committed (synced) before them.
struct Setup {
    dir: Fid,
    other: Fid,
    unlinked: Fid,
    renamed: Fid,
    moved: Fid,
    linked: Fid,
    chmoded: Fid,
    xattred: Fid,
    truncated: Fid,
}

async fn setup(c: &Arc<Client>, tag: &str) -> Setup {
    let dir = create(c, Fid::ROOT, format!("{tag}-dir").as_bytes(), DIR)
        .await
        .expect("dir")
        .attr
        .fid;
    let other = create(c, Fid::ROOT, format!("{tag}-other").as_bytes(), DIR)
        .await
        .expect("other")
        .attr
        .fid;
    let f = |n: &'static str| async move { create(c, dir, n.as_bytes(), FILE).await.expect(n).attr.fid };
    let unlinked = f("unlinked").await;
    let renamed = f("renamed").await;
    let moved = f("moved").await;
    let linked = f("linked").await;
    let chmoded = f("chmoded").await;
    let xattred = f("xattred").await;
    let truncated = f("truncated").await;
    let (h, _) = c.open(truncated, rw(), &cred()).await.expect("open");
    c.write(&h, 0, Bytes::from(pattern(DATA, 1)))
        .await
        .expect("write");
    c.fsync(&h).await.expect("fsync");
    c.release(&h).await.expect("close");
    for d in [dir, other, Fid::ROOT] {
        c.sync_dir(d).await.expect("fsyncdir");
    }
    Setup {
        dir,
        other,
        unlinked,
        renamed,
        moved,
        linked,
        chmoded,
        xattred,
        truncated,
    }
}

/// Every modifying operation once, nothing synced; the truncate only with `truncate` (a
/// lost one would leave a size past its punched objects, which only its replay mends).
async fn operate(c: &Arc<Client>, s: &Setup, truncate: bool) -> Fid {
    let created = create(c, s.dir, b"created", FILE)
        .await
        .expect("create")
        .attr
        .fid;
    create(c, s.dir, b"made", DIR).await.expect("mkdir");
    c.unlink(s.dir, b"unlinked", &cred()).await.expect("unlink");
    c.rename(s.dir, b"renamed", s.dir, b"renamed2", 0, &cred())
        .await
        .expect("rename");
    c.rename(s.dir, b"moved", s.other, b"moved2", 0, &cred())
        .await
        .expect("rename across directories");
    c.link(s.linked, s.other, b"link2", &cred())
        .await
        .expect("link");
    let a = SetAttr {
        mode: Some(0o600),
        uid: Some(7),
        gid: Some(8),
        ..SetAttr::default()
    };
    c.setattr(s.chmoded, a, &cred(), None)
        .await
        .expect("setattr");
    c.setxattr(s.xattred, b"user.k", b"value", 0, &cred())
        .await
        .expect("setxattr");
    if truncate {
        let (h, _) = c.open(s.truncated, rw(), &cred()).await.expect("open");
        let t = SetAttr {
            size: Some(TRUNC),
            ..SetAttr::default()
        };
        c.setattr(s.truncated, t, &cred(), None)
            .await
            .expect("truncate");
        c.release(&h).await.expect("close");
    }
    created
}

/// Every operation of [`operate`] is there (`kept`) or none is.
async fn verify(c: &Arc<Client>, s: &Setup, created: Fid, kept: bool, what: &str) {
    let has = |d: Fid, n: &'static str| async move { lookup(c, d, n).await };
    let created_now = has(s.dir, "created").await;
    assert_eq!(created_now.is_some(), kept, "{what}: create");
    if let Some(i) = created_now {
        assert_eq!(
            i.attr.fid, created,
            "{what}: the replayed create made another FID"
        );
    }
    let made = has(s.dir, "made").await;
    assert_eq!(
        made.as_ref().is_some_and(|i| i.attr.is_dir()),
        kept,
        "{what}: mkdir"
    );
    assert_eq!(
        has(s.dir, "unlinked").await.is_none(),
        kept,
        "{what}: unlink"
    );
    assert_eq!(
        c.getattr(s.unlinked).await.is_err(),
        kept,
        "{what}: the unlinked inode"
    );
    let r = has(s.dir, "renamed2").await;
    assert_eq!(r.is_some(), kept, "{what}: rename");
    assert_eq!(
        has(s.dir, "renamed").await.is_none(),
        kept,
        "{what}: rename"
    );
    if let Some(i) = r {
        assert_eq!(i.attr.fid, s.renamed, "{what}: rename");
    }
    let m = has(s.other, "moved2").await;
    assert_eq!(m.is_some(), kept, "{what}: rename across directories");
    assert_eq!(
        has(s.dir, "moved").await.is_none(),
        kept,
        "{what}: rename across"
    );
    if let Some(i) = m {
        assert_eq!(i.attr.fid, s.moved, "{what}: rename across directories");
    }
    let l = has(s.other, "link2").await;
    assert_eq!(l.is_some(), kept, "{what}: link");
    let nlink = c.getattr(s.linked).await.expect("getattr").attr.nlink;
    assert_eq!(nlink, 1 + u32::from(kept), "{what}: link count");
    let a = c.getattr(s.chmoded).await.expect("getattr").attr;
    assert_eq!(
        (a.mode & 0o7777, a.uid, a.gid) == (0o600, 7, 8),
        kept,
        "{what}: setattr {:o} {} {}",
        a.mode,
        a.uid,
        a.gid
    );
    match c.getxattr(s.xattred, b"user.k", &cred()).await {
        Ok(v) => {
            assert!(kept, "{what}: setxattr of a lost client came back");
            assert_eq!(v, b"value", "{what}: setxattr");
        }
        Err(Errno::ENODATA) => assert!(!kept, "{what}: the setxattr was lost"),
        Err(e) => panic!("{what}: getxattr: {e}"),
    }
    let size = c.getattr(s.truncated).await.expect("getattr").attr.size;
    if kept {
        assert_eq!(size, TRUNC, "{what}: truncate");
    }
}

/// `replay-single.sh` tests 0-8 and 20 at once: create, mkdir, unlink, rename within and
/// across directories, link, setattr, setxattr and truncate, each answered and none
/// synced; the MDT loses its unsynced journal; the same client replays all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_client_replays_every_acknowledged_operation_after_a_power_cut() {
    if !require_power_cut() {
        return;
    }
    let mut rig = tokio::task::block_in_place(|| ReplayRig::new("rpsingle", "mdt0"));
    let c = rig.cl.mount("replay-a").await;
    let s = setup(&c, "a").await;
    let created = operate(&c, &s, true).await;
    tokio::task::block_in_place(|| rig.cut());
    verify(&c, &s, created, true, "after the MDT's power cut").await;
    let st = tokio::task::block_in_place(|| rig.recovery_status());
    assert_eq!(status_field(&st, "status"), "COMPLETE", "{st}");
    assert_eq!(status_field(&st, "completed_clients"), "1/1", "{st}");
    let replayed: u64 = status_field(&st, "replayed_requests")
        .parse()
        .expect("count");
    // Ten operations (the truncate's open and close are not replayed); a request the
    // journal kept before the cut is not replayed.
    assert!(
        (1..=10).contains(&replayed),
        "replayed_requests {replayed}:\n{st}"
    );
    // New work goes on after recovery.
    create(&c, s.dir, b"after", FILE)
        .await
        .expect("create after recovery");
    c.unmount();
    tokio::task::block_in_place(|| rig.stop_and_check());
}

/// Two clients change the namespace; one of them is gone when the MDT comes back: it is
/// evicted when the recovery window ends (a log line says so), its unsynced changes are
/// lost, and the live client's replays still apply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_come_back_is_evicted_and_the_other_replays() {
    if !require_power_cut() {
        return;
    }
    let mut rig = tokio::task::block_in_place(|| ReplayRig::new("rpevict", "mdt0"));
    let a = rig.cl.mount("replay-a").await;
    let b = rig.cl.mount("replay-b").await;
    let fsname = rig.cl.fsname.clone();
    for (n, v) in [("recovery_time_soft", "2"), ("recovery_time_hard", "6")] {
        a.set_param_persistent(&format!("mdt.{fsname}-MDT0000.{n}"), Some(v))
            .await
            .expect("set_param -P");
    }
    let sa = setup(&a, "a").await;
    let sb = setup(&b, "b").await;
    let ca = operate(&a, &sa, true).await;
    let cb = operate(&b, &sb, false).await;
    // b goes away and never comes back.
    b.unmount();
    drop(b);
    tokio::task::block_in_place(|| rig.cut());
    verify(&a, &sa, ca, true, "the live client").await;
    verify(&a, &sb, cb, false, "the evicted client").await;
    let st = tokio::task::block_in_place(|| rig.recovery_status());
    assert_eq!(status_field(&st, "status"), "COMPLETE", "{st}");
    assert_eq!(status_field(&st, "completed_clients"), "1/2", "{st}");
    let log = std::fs::read_to_string(rig.cl.logs.join("mdt0.log")).expect("log");
    assert!(
        log.contains("recovery window ended: evicting client"),
        "no eviction in the MDT's log:\n{log}"
    );
    // The power cut took the evicted client's chown back on the MDT; its owner never
    // went to the file's OST object, which the MDT passes on only once the chown is
    // durable (the owner log, as Lustre's osp_sync), so no object is owned ahead of its
    // file.
    let text = tokio::task::block_in_place(|| common::lfsck_run(&["-t", "layout"], "layout"));
    let owners = common::counter(&text, "repaired_inconsistent_owner");
    assert_eq!(owners, 0, "{text}");
    a.unmount();
    tokio::task::block_in_place(|| rig.stop_and_check());
}

/// Resend (Lustre's `recovery-small.sh` test 11-ish, a lost reply): the same request
/// number sent twice runs once; the second answer is the first's, not EEXIST.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resent_request_gets_its_first_answer_back() {
    use nacre_rpc::msg::{LayoutRequest, Reply, Request};
    let tmp = tempfile::tempdir().expect("tmp");
    let cl = common::cluster::start(tmp.path(), "rpresend", 1, 1).await;
    // Client-role peers, as mounts are: a server's requests are not bound to a client.
    let c = common::cluster::mount_as_client(&cl).await;
    let imp = c.mdcs()[0].clone();
    let me = c.mdc_replay(0).expect("replay list").client;
    let req = Request::Tracked {
        client: me,
        xid: 42,
        req: Box::new(Request::Create {
            parent: Fid::ROOT,
            name: b"once".to_vec(),
            mode: FILE,
            rdev: 0,
            cred: cred(),
            symlink: None,
            layout: LayoutRequest::Inherit,
            open: None,
            exclusive: true,
        }),
    };
    let fid_of = |r: Reply| match r {
        Reply::Tracked { reply, transno, .. } => match *reply {
            Reply::Created { inode, .. } => {
                assert!(transno > 0, "a create without a transno");
                inode.attr.fid
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    };
    let first = fid_of(imp.call(&req, Bytes::new()).await.expect("first").0);
    let again = imp.call(&req, Bytes::new()).await.expect("resend");
    assert_eq!(fid_of(again.0), first, "the resend made another file");
    // Another client (another connection) naming this one's uuid: refused, so it can
    // neither read this client's saved answers, nor run requests in its name, nor drop
    // its record (Lustre's exports: a uuid belongs to the connection that connected as it).
    let other = common::cluster::mount_as_client(&cl).await;
    let oimp = other.mdcs()[0].clone();
    let refused = |r: Result<(Reply, Bytes), nacre_rpc::error::RpcError>| match r {
        Err(e) => assert_eq!(e.errno(), Errno::EPERM, "{e}"),
        Ok((r, _)) => panic!("an impostor was answered: {r:?}"),
    };
    refused(oimp.call(&req, Bytes::new()).await);
    refused(
        oimp.call(&Request::MdtDisconnect { client: me }, Bytes::new())
            .await,
    );
    refused(
        oimp.call(&Request::ReplayDone { client: me }, Bytes::new())
            .await,
    );
    // The owner still gets its answer.
    let again = imp.call(&req, Bytes::new()).await.expect("still its own");
    assert_eq!(fid_of(again.0), first);
    other.unmount();
    c.unmount();
    cl.stop().await;
}

/// `replay-single.sh` test 53-style: a request ran and was committed, its answer never
/// reached the client, and then the MDT lost power and restarted. The client's resend
/// after recovery gets the first answer back (the MDT keeps answers on disk beside
/// `last_rcvd`, as Lustre's `reply_data`), not a second run: before, the in-memory answer
/// was gone and the exclusive create ran again and failed with EEXIST. A request whose
/// change the power cut took runs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resend_after_the_mdt_restarted_gets_its_first_answer_back() {
    use nacre_rpc::msg::{Reply, Request};
    if !require_power_cut() {
        return;
    }
    let mut rig = tokio::task::block_in_place(|| ReplayRig::new("rpresnd", "mdt0"));
    let c = rig.cl.mount("replay-r").await;
    let imp = c.mdcs()[0].clone();
    let me = c.mdc_replay(0).expect("replay list").client;
    // Request numbers far above the client's own.
    let create = |xid: u64, name: &str| Request::Tracked {
        client: me,
        xid,
        req: Box::new(Request::Create {
            parent: Fid::ROOT,
            name: name.as_bytes().to_vec(),
            mode: FILE,
            rdev: 0,
            cred: cred(),
            symlink: None,
            layout: LayoutRequest::Inherit,
            open: None,
            exclusive: true,
        }),
    };
    let fid_of = |what: &str, r: Result<(Reply, Bytes), nacre_rpc::error::RpcError>| match r {
        Ok((Reply::Tracked { reply, .. }, _)) => match *reply {
            Reply::Created { inode, .. } => inode.attr.fid,
            other => panic!("{what}: {other:?}"),
        },
        Ok((other, _)) => panic!("{what}: {other:?}"),
        Err(e) => panic!("{what}: {e}"),
    };
    let (kept, lost) = (create(1 << 40, "kept"), create((1 << 40) + 1, "lost"));
    let first = fid_of("create", imp.call(&kept, Bytes::new()).await);
    c.sync_dir(Fid::ROOT).await.expect("sync");
    fid_of("create", imp.call(&lost, Bytes::new()).await);
    tokio::task::block_in_place(|| rig.cut());
    let again = fid_of(
        "the resend of a committed create",
        imp.call(&kept, Bytes::new()).await,
    );
    assert_eq!(again, first, "the resend made another file");
    // Ran again if the cut took it, or answered as the first time if it was kept.
    let made = fid_of(
        "the resend of a create the cut may have taken",
        imp.call(&lost, Bytes::new()).await,
    );
    assert_eq!(
        lookup(&c, Fid::ROOT, "lost").await.map(|i| i.attr.fid),
        Some(made)
    );
    assert_eq!(
        lookup(&c, Fid::ROOT, "kept").await.map(|i| i.attr.fid),
        Some(first)
    );
    c.unmount();
    tokio::task::block_in_place(|| rig.stop_and_check());
}

/// A client that unmounted cleanly told the MDT (Lustre's disconnect): a restart of the
/// MDT does not wait for it. With the default window (9 s soft) a recovery that waited
/// would hold the first request for seconds; here it ends as soon as the MDT is up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_unmounted_is_not_waited_for() {
    if !require_power_cut() {
        return;
    }
    let mut rig = tokio::task::block_in_place(|| ReplayRig::new("rpgone", "mdt0"));
    let a = rig.cl.mount("replay-a").await;
    let s = setup(&a, "a").await;
    a.disconnect().await;
    a.unmount();
    drop(a);
    tokio::task::block_in_place(|| rig.cut());
    let t0 = std::time::Instant::now();
    let b = rig.cl.mount("replay-b").await;
    create(&b, s.dir, b"after", FILE)
        .await
        .expect("create after the restart");
    let took = t0.elapsed();
    let st = tokio::task::block_in_place(|| rig.recovery_status());
    // No client to wait for: no recovery at all.
    assert_eq!(status_field(&st, "status"), "INACTIVE", "{st}");
    assert!(
        took < std::time::Duration::from_secs(5),
        "the restarted MDT waited {took:?} for a client that had unmounted:\n{st}"
    );
    b.disconnect().await;
    b.unmount();
    tokio::task::block_in_place(|| rig.stop_and_check());
}

/// The bytes a file held open through the MDT's power cut reads back.
async fn read_back(c: &Arc<Client>, f: &OpenFile, want: &[u8], what: &str) {
    let got = c
        .read(f, 0, want.len() as u64)
        .await
        .unwrap_or_else(|e| panic!("{what}: read after the MDT's power cut: {e}"));
    assert!(
        got[..] == want[..],
        "{what}: {} bytes read back, first difference at {:?}",
        got.len(),
        got.iter().zip(want).position(|(a, b)| a != b)
    );
}

/// `replay-single.sh` tests 12, 13 and 14 at once (open, unlink |X| close; open, chmod 0
/// |X| write, close; open(O_CREAT), unlink |X| close): files the live client holds open
/// through the MDT's power cut are reopened in its replay, so an unlinked one keeps its
/// data until its close (whether the unlink was committed or replayed), and a handle
/// whose file was made mode 0 after it opened still writes and closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_held_open_through_a_power_cut_are_reopened_in_the_replay() {
    if !require_power_cut() {
        return;
    }
    let mut rig = tokio::task::block_in_place(|| ReplayRig::new("rpopen", "mdt0"));
    let c = rig.cl.mount("replay-a").await;
    let dir = create(&c, Fid::ROOT, b"open-dir", DIR)
        .await
        .expect("dir")
        .attr
        .fid;
    let user = Cred::user(500, 500, Vec::new(), 0);
    let owned = create(&c, dir, b"owned", FILE)
        .await
        .expect("create")
        .attr
        .fid;
    let chown = SetAttr {
        uid: Some(500),
        gid: Some(500),
        mode: Some(0o600),
        ..SetAttr::default()
    };
    c.setattr(owned, chown, &cred(), None).await.expect("chown");
    // Test 12: opened, unlinked, and the unlink committed: an orphan at the restart.
    let committed = create(&c, dir, b"committed", FILE)
        .await
        .expect("create")
        .attr
        .fid;
    let (hc, _) = c.open(committed, rw(), &cred()).await.expect("open");
    let dc = pattern(DATA, 3);
    c.write(&hc, 0, Bytes::from(dc.clone()))
        .await
        .expect("write");
    c.flush(&hc).await.expect("flush");
    c.unlink(dir, b"committed", &cred()).await.expect("unlink");
    for d in [dir, Fid::ROOT] {
        c.sync_dir(d).await.expect("fsyncdir");
    }
    // Test 14: created open, written, unlinked; nothing of it committed.
    let (info, h) = c
        .create(
            dir,
            b"born",
            FILE,
            0,
            &cred(),
            None,
            LayoutRequest::Inherit,
            Some(rw()),
            true,
        )
        .await
        .expect("create open");
    let hb = OpenFile::new(info.attr.fid, h.expect("handle"), rw(), info.layout.clone());
    let db = pattern(DATA, 4);
    c.write(&hb, 0, Bytes::from(db.clone()))
        .await
        .expect("write");
    c.flush(&hb).await.expect("flush");
    c.unlink(dir, b"born", &cred()).await.expect("unlink");
    // Test 13: opened by its owner, then mode 0.
    let (ho, _) = c.open(owned, rw(), &user).await.expect("open as owner");
    let zero = SetAttr {
        mode: Some(0),
        ..SetAttr::default()
    };
    c.setattr(owned, zero, &cred(), None)
        .await
        .expect("chmod 0");
    let kept = c.mdc_replay(0).expect("mdc").open_handles();
    assert_eq!(kept, 3, "open handles kept for replay");

    tokio::task::block_in_place(|| rig.cut());

    // A getattr waits for the end of the recovery, after which the MDT removes the
    // orphans nobody reopened; then time for their objects' destroy to reach the OST.
    c.getattr(dir).await.expect("getattr after the recovery");
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    read_back(&c, &hc, &dc, "open, unlink (committed)").await;
    read_back(&c, &hb, &db, "create open, unlink (replayed)").await;
    let reopened = c
        .mdc_replay(0)
        .expect("mdc")
        .reopened
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(reopened, 3, "handles reopened");
    c.write(&ho, 0, Bytes::from_static(b"written after the cut"))
        .await
        .expect("write through the kept handle");
    for f in [&hc, &hb, &ho] {
        c.release(f).await.expect("close after the cut");
    }
    assert_eq!(c.mdc_replay(0).expect("mdc").open_handles(), 0);
    let a = c.getattr(owned).await.expect("getattr").attr;
    assert_eq!(a.mode & 0o7777, 0, "the replayed chmod");
    assert_eq!(
        a.size, 21,
        "the write after the cut, through the reopened handle"
    );
    assert!(
        lookup(&c, dir, "born").await.is_none(),
        "the replayed unlink"
    );
    let st = tokio::task::block_in_place(|| rig.recovery_status());
    assert_eq!(status_field(&st, "status"), "COMPLETE", "{st}");
    c.unmount();
    // The unlinked files went at their last close: nacre check finds neither an orphan
    // nor an object left behind.
    tokio::task::block_in_place(|| rig.stop_and_check());
}

/// One client created a file and another opened it, and the MDT lost both before they
/// were committed: after the restart the second client's reopen may come before the
/// first client's replay of the create. The reopen waits for the replays (Lustre replays
/// opens after every request with a transno) instead of failing with ESTALE, which a
/// client takes for its eviction. Sent by hand, in that order, over two connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reopen_of_a_file_another_clients_replay_makes_waits_for_it() {
    use nacre_rpc::msg::{OpenFlags, ReplayOutcome, Reply, Request};
    let tmp = tempfile::tempdir().expect("tmp");
    let mut cl = common::cluster::start(tmp.path(), "rpreopen", 1, 1).await;
    let connect = |addr: String, key: nacre_rpc::Key| by_hand(addr, "rpreopen", key);
    let mdt_addr =
        |cl: &nacre::local::LocalCluster| cl.mdts[0].as_ref().expect("MDT0").addr.to_string();
    let (a, b): (u64, u64) = (0xa11ce, 0xb0b);
    let hello = |client| Request::MdtConnect { client };
    // Both clients are recorded; a file made now tells which FIDs MDT0 gives.
    let key = cl.key.client_key();
    for c in [a, b] {
        let conn = connect(mdt_addr(&cl), key.clone()).await;
        conn.call(&hello(c), Bytes::new()).await.expect("connect");
    }
    let m = common::cluster::mount(&cl).await;
    let probe = create(&m, Fid::ROOT, b"probe", DIR)
        .await
        .expect("probe")
        .attr
        .fid;
    // It says goodbye: recovery does not wait for it.
    m.disconnect().await;
    let made = Fid::new(probe.seq, probe.oid + 1000, 0);
    // A restart with both clients recorded: recovery waits for them.
    cl.stop_mdt(0).await;
    cl.start_mdt(0).await.expect("restart");
    let mdt = cl.mdts[0]
        .as_ref()
        .and_then(|s| s.mdt())
        .expect("mdt")
        .clone();
    assert!(mdt.recovery.is_recovering());
    let next = mdt.store().last_transno() + 1;

    // b reopens the directory a's replay will make, then ends its replay.
    let cb = connect(mdt_addr(&cl), key.clone()).await;
    cb.call(&hello(b), Bytes::new()).await.expect("b connects");
    let reopen = Request::Reopen {
        client: b,
        handle: 77,
        fid: made,
        flags: OpenFlags {
            read: true,
            ..OpenFlags::default()
        },
        cred: cred(),
    };
    let r = cb.call(&reopen, Bytes::new()).await;
    assert!(
        r.is_ok(),
        "the reopen failed instead of waiting: {:?}",
        r.err()
    );
    let b_done = tokio::spawn(async move {
        let r = cb
            .call(&Request::ReplayDone { client: b }, Bytes::new())
            .await;
        (cb, r)
    });

    // a replays the mkdir, then ends its replay.
    let ca = connect(mdt_addr(&cl), key.clone()).await;
    ca.call(&hello(a), Bytes::new()).await.expect("a connects");
    let replay = Request::Replay {
        client: a,
        transno: next,
        req: Box::new(Request::Create {
            parent: Fid::ROOT,
            name: b"made".to_vec(),
            mode: DIR,
            rdev: 0,
            cred: cred(),
            symlink: None,
            layout: LayoutRequest::Inherit,
            open: None,
            exclusive: true,
        }),
        outcome: Some(ReplayOutcome {
            fid: made,
            layout: None,
        }),
    };
    ca.call(&replay, Bytes::new()).await.expect("a's replay");
    let (r, _) = ca
        .call(&Request::ReplayDone { client: a }, Bytes::new())
        .await
        .expect("a's end of replay");
    assert!(matches!(r, Reply::Recovered { .. }), "{r:?}");
    let (cb, r) = b_done.await.expect("task");
    r.expect("b's end of replay");
    assert!(!mdt.recovery.is_recovering());
    assert!(
        mdt.is_open(&made),
        "b's reopen was not made after the replays"
    );
    // b's handle is its own: it closes it.
    cb.call(
        &Request::Close {
            handle: 77,
            wrote: false,
        },
        Bytes::new(),
    )
    .await
    .expect("b closes its reopened handle");
    assert!(!mdt.is_open(&made));
    drop(mdt);
    cl.stop().await;
}

/// The server trusts a replay no more than a new request: a replayed create whose layout
/// names an object this MDT never hands out (another sequence of the OST, as another
/// MDT's objects are) is refused, the name is not made, and recovery ends as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_create_naming_objects_this_mdt_never_gave_is_refused() {
    use nacre_rpc::msg::{ReplayOutcome, Reply, Request};
    let tmp = tempfile::tempdir().expect("tmp");
    let mut cl = common::cluster::start(tmp.path(), "rpforge", 1, 1).await;
    let connect = |addr: String, key: nacre_rpc::Key| by_hand(addr, "rpforge", key);
    let mdt_addr =
        |cl: &nacre::local::LocalCluster| cl.mdts[0].as_ref().expect("MDT0").addr.to_string();
    let a: u64 = 0xf0e;
    let hello = Request::MdtConnect { client: a };
    let key = cl.key.client_key();
    let conn = connect(mdt_addr(&cl), key.clone()).await;
    conn.call(&hello, Bytes::new()).await.expect("connect");
    // A real file gives a FID and a layout of this MDT's; the forged replay moves its
    // object to the next sequence of the same OST.
    let m = common::cluster::mount(&cl).await;
    let real = create(&m, Fid::ROOT, b"real", FILE).await.expect("real");
    let mut layout = m
        .getattr(real.attr.fid)
        .await
        .expect("getattr")
        .layout
        .expect("a layout");
    let so = layout
        .components
        .iter_mut()
        .flat_map(|c| c.objects.iter_mut())
        .next()
        .expect("an object");
    so.fid.seq += 1;
    m.disconnect().await;
    let made = Fid::new(real.attr.fid.seq, real.attr.fid.oid + 1000, 0);
    cl.stop_mdt(0).await;
    cl.start_mdt(0).await.expect("restart");
    let mdt = cl.mdts[0]
        .as_ref()
        .and_then(|s| s.mdt())
        .expect("mdt")
        .clone();
    assert!(mdt.recovery.is_recovering());
    let next = mdt.store().last_transno() + 1;
    let ca = connect(mdt_addr(&cl), key).await;
    ca.call(&hello, Bytes::new()).await.expect("a connects");
    let replay = Request::Replay {
        client: a,
        transno: next,
        req: Box::new(Request::Create {
            parent: Fid::ROOT,
            name: b"forged".to_vec(),
            mode: FILE,
            rdev: 0,
            cred: cred(),
            symlink: None,
            layout: LayoutRequest::Inherit,
            open: None,
            exclusive: true,
        }),
        outcome: Some(ReplayOutcome {
            fid: made,
            layout: Some(layout),
        }),
    };
    let r = ca.call(&replay, Bytes::new()).await;
    assert_eq!(
        r.as_ref().err().map(|e| e.errno()),
        Some(Errno::EINVAL),
        "{r:?}"
    );
    let (r, _) = ca
        .call(&Request::ReplayDone { client: a }, Bytes::new())
        .await
        .expect("a's end of replay");
    assert!(matches!(r, Reply::Recovered { .. }), "{r:?}");
    assert!(!mdt.recovery.is_recovering());
    drop(mdt);
    let m = common::cluster::mount(&cl).await;
    assert!(lookup(&m, Fid::ROOT, "forged").await.is_none());
    assert!(lookup(&m, Fid::ROOT, "real").await.is_some());
    m.disconnect().await;
    cl.stop().await;
}

/// A connection of a client made by hand (its requests written out in the test).
async fn by_hand(addr: String, fsname: &str, key: nacre_rpc::Key) -> nacre_rpc::Conn {
    nacre_rpc::Conn::connect(
        &addr,
        &nacre_rpc::conn::ConnConfig {
            fsname: fsname.into(),
            client: "by-hand".into(),
            key,
            max_in_flight: 8,
            timeout: std::time::Duration::from_secs(30),
        },
    )
    .await
    .expect("connect")
}

/// A file whose layout is two components, `[0, 1M)` and `[1M, end)`.
async fn create_pfl(c: &Client, name: &[u8], end: u64) -> Fid {
    use nacre_core::layout::{Component, Layout};
    let l = Layout::composite(vec![
        Component::raid0(0, 1 << 20, 1, 1 << 20, -1),
        Component::raid0(1 << 20, end, 1, 1 << 20, -1),
    ]);
    c.create(
        Fid::ROOT,
        name,
        FILE,
        0,
        &cred(),
        None,
        LayoutRequest::Explicit(l),
        None,
        true,
    )
    .await
    .expect("create")
    .0
    .attr
    .fid
}

/// `fid`'s layout, as `c` sees it now.
async fn layout_of(c: &Client, fid: Fid) -> nacre_core::Layout {
    c.getattr(fid)
        .await
        .expect("getattr")
        .layout
        .expect("a layout")
}

/// The objects of `fid`'s instantiated components, by component id.
async fn component_objects(c: &Client, fid: Fid) -> Vec<(u32, Vec<Fid>)> {
    let l = layout_of(c, fid).await;
    l.components
        .iter()
        .filter(|c| c.is_init())
        .map(|c| (c.id, c.objects.iter().map(|o| o.fid).collect()))
        .collect()
}

/// `replay-single.sh`'s layout cases (`test_90`-style PFL writes): a write past a PFL
/// file's first component makes the MDT instantiate the next one (a layout intent), and
/// the data goes to the objects it gave. The MDT loses that change in its power cut; the
/// live client replays it with the objects its write used, so the file reads back whole
/// from the same objects, where a new instantiation would point at empty ones. The layout
/// changes made beside it (a directory's default layout, a component added, one deleted)
/// are replayed too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layout_a_write_instantiated_is_replayed_with_its_objects() {
    if !require_power_cut() {
        return;
    }
    use nacre_core::layout::{Component, EOF, Layout};
    let mut rig = tokio::task::block_in_place(|| ReplayRig::new("rplayout", "mdt0"));
    let c = rig.cl.mount("replay-layout").await;
    let pfl = Layout::composite(vec![
        Component::raid0(0, 1 << 20, 1, 1 << 20, -1),
        Component::raid0(1 << 20, EOF, 1, 1 << 20, -1),
    ]);
    let (info, _) = c
        .create(
            Fid::ROOT,
            b"pfl",
            FILE,
            0,
            &cred(),
            None,
            LayoutRequest::Explicit(pfl),
            None,
            true,
        )
        .await
        .expect("create");
    let fid = info.attr.fid;
    c.sync_dir(Fid::ROOT).await.expect("fsyncdir");
    assert_eq!(
        component_objects(&c, fid).await.len(),
        1,
        "only the first component is made with the file"
    );
    // Layout changes that run again the same way: a directory's default layout, a
    // component added to one file and one deleted from another.
    let dir = create(&c, Fid::ROOT, b"striped-by-default", DIR)
        .await
        .expect("mkdir")
        .attr
        .fid;
    let added = create_pfl(&c, b"added", 2 << 20).await;
    let trimmed = create_pfl(&c, b"trimmed", EOF).await;
    c.sync_dir(Fid::ROOT).await.expect("fsyncdir");
    let default = Layout::composite(vec![Component::raid0(0, EOF, 1, 4 << 20, -1)]);
    c.set_default_layout(dir, Some(default), &cred())
        .await
        .expect("set the default layout");
    c.add_components(
        added,
        vec![Component::raid0(2 << 20, EOF, 1, 2 << 20, -1)],
        &cred(),
    )
    .await
    .expect("add a component");
    c.del_components(trimmed, Some(2), 0, 0, &cred())
        .await
        .expect("delete a component");
    let comps = |fid: Fid| {
        let c = c.clone();
        async move {
            let l = layout_of(&c, fid).await;
            l.components
                .iter()
                .map(|k| (k.id, k.start, k.end, k.stripe_size))
                .collect::<Vec<_>>()
        }
    };
    let changed = (comps(added).await, comps(trimmed).await);
    assert_eq!(changed.0.len(), 3, "the component was added");
    assert_eq!(changed.1.len(), 1, "the component was deleted");
    let data = pattern(3 << 20, 9);
    let (h, _) = c.open(fid, rw(), &cred()).await.expect("open");
    c.write(&h, 0, Bytes::from(data.clone()))
        .await
        .expect("write");
    c.release(&h).await.expect("close");
    let before = component_objects(&c, fid).await;
    assert_eq!(
        before.len(),
        2,
        "the write instantiated the second component"
    );
    tokio::task::block_in_place(|| rig.cut());
    assert_eq!(
        component_objects(&c, fid).await,
        before,
        "the replayed layout has other objects"
    );
    assert_eq!(
        (comps(added).await, comps(trimmed).await),
        changed,
        "a component change was lost"
    );
    let d = c
        .get_default_layout(dir)
        .await
        .expect("the default layout")
        .expect("the directory's default layout was lost");
    assert_eq!(d.components[0].stripe_size, 4 << 20);
    let (h, _) = c
        .open(fid, rw(), &cred())
        .await
        .expect("open after the cut");
    read_back(&c, &h, &data, "a PFL file").await;
    c.release(&h).await.expect("close");
    let st = tokio::task::block_in_place(|| rig.recovery_status());
    assert_eq!(status_field(&st, "status"), "COMPLETE", "{st}");
    // New files still get objects of their own.
    let (info, _) = c
        .create(
            Fid::ROOT,
            b"after",
            FILE,
            0,
            &cred(),
            None,
            LayoutRequest::Inherit,
            None,
            true,
        )
        .await
        .expect("create after recovery");
    let new = component_objects(&c, info.attr.fid).await;
    assert!(
        new.iter()
            .flat_map(|(_, o)| o)
            .all(|o| before.iter().all(|(_, b)| !b.contains(o))),
        "a new file got an object the replayed layout holds: {new:?} {before:?}"
    );
    c.unmount();
    tokio::task::block_in_place(|| rig.stop_and_check());
}

/// The stale flags of each mirror of `fid`'s layout, by mirror id.
async fn stale_mirrors(c: &Client, fid: Fid) -> Vec<(u32, bool)> {
    let l = layout_of(c, fid).await;
    l.mirror_ids()
        .into_iter()
        .map(|m| (m, l.mirror(m).components.iter().any(|k| k.is_stale())))
        .collect()
}

/// A file of two mirrors (`lfs setstripe -N2`), written whole to both (the default,
/// immediate mode) and synced with its name: its mirrors in sync and committed.
async fn mirrored_file(c: &Arc<Client>, name: &[u8], data: &[u8]) -> Fid {
    use nacre_core::layout::{Component, EOF, Layout, pflr_id};
    let comps = (1..=2)
        .map(|m| {
            let mut k = Component::raid0(0, EOF, 1, 65536, -1);
            k.id = pflr_id(m, 0);
            k
        })
        .collect();
    let two_mirrors = Layout {
        components: comps,
        ..Layout::composite(Vec::new())
    };
    let fid = c
        .create(
            Fid::ROOT,
            name,
            FILE,
            0,
            &cred(),
            None,
            LayoutRequest::Explicit(two_mirrors),
            None,
            true,
        )
        .await
        .expect("create")
        .0
        .attr
        .fid;
    common::power_cut::write_at(c, fid, 0, data, true).await;
    c.sync_dir(Fid::ROOT).await.expect("fsyncdir");
    assert_eq!(
        stale_mirrors(c, fid).await,
        vec![(1, false), (2, false)],
        "the mirrors are not in sync"
    );
    fid
}

/// A plain file of `data` in the root, written, synced and closed.
async fn synced_file(c: &Arc<Client>, name: &[u8], data: &[u8]) -> Fid {
    let fid = create(c, Fid::ROOT, name, FILE)
        .await
        .expect("create")
        .attr
        .fid;
    common::power_cut::write_at(c, fid, 0, data, true).await;
    fid
}

/// Writes `data` at 0 of `fid` through a handle of its own, unsynced, and closes.
async fn write_unsynced(c: &Arc<Client>, fid: Fid, data: &[u8]) {
    let (h, _) = c.open(fid, rw(), &cred()).await.expect("open");
    c.write(&h, 0, Bytes::copy_from_slice(data))
        .await
        .expect("write");
    c.release(&h).await.expect("close");
}

/// Layout changes that later writes depend on are replayed: a mirrored file's write
/// intent (Lustre's delayed mode: the data goes to one mirror and the MDT marks the other
/// stale over the range), a mirror split off (`lfs mirror split`) before a write to the
/// mirror left, and a layout swap (`lfs migrate`) before a write to the new objects. The
/// MDT's power cut takes them back while the OST keeps the data; without the replays the
/// mirror the write missed would be called in sync while it holds the old bytes (a read
/// could return either), and the migrated file would go back to its old objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layout_changes_writes_depend_on_are_replayed() {
    if !require_power_cut() {
        return;
    }
    let mut rig = tokio::task::block_in_place(|| ReplayRig::new("rpmirror", "mdt0"));
    let c = rig.cl.mount("replay-mirror").await;
    let old = pattern(200_000, 1);
    let intent = mirrored_file(&c, b"write-intent", &old).await;
    let split = mirrored_file(&c, b"split", &old).await;
    let new = pattern(200_000, 2);
    // A plain file, synced, migrated to another stripe size, then written. (The
    // migration's copy syncs, so it goes first: the changes after it stay uncommitted.)
    let migrated = synced_file(&c, b"migrated", &old).await;
    c.sync_dir(Fid::ROOT).await.expect("fsyncdir");
    const MIGRATED_STRIPE: u32 = 128 << 10;
    let to = nacre_core::Layout::plain(1, MIGRATED_STRIPE, -1);
    c.migrate(migrated, to, &cred()).await.expect("migrate");
    write_unsynced(&c, migrated, &new).await;
    let stripe = || async { layout_of(&c, migrated).await.components[0].stripe_size };
    assert_eq!(stripe().await, MIGRATED_STRIPE, "not migrated");
    c.mirror_split(split, 2, None).await.expect("split");
    write_unsynced(&c, split, &new).await;
    c.tunables
        .set_str("llite", "mirror_write_mode", "delayed")
        .expect("delayed mode");
    write_unsynced(&c, intent, &new).await;
    let before = (
        stale_mirrors(&c, intent).await,
        stale_mirrors(&c, split).await,
    );
    assert_eq!(
        before.0.iter().filter(|(_, stale)| *stale).count(),
        1,
        "a delayed-mode write left no mirror stale: {before:?}"
    );
    assert_eq!(before.1, vec![(1, false)], "the split left other mirrors");
    tokio::task::block_in_place(|| rig.cut());
    assert_eq!(
        stale_mirrors(&c, intent).await,
        before.0,
        "the write intent was lost: a mirror holding the old bytes is in sync"
    );
    assert_eq!(
        stale_mirrors(&c, split).await,
        before.1,
        "the split was lost: the mirror split off, which the write missed, is back in sync"
    );
    assert_eq!(
        stripe().await,
        MIGRATED_STRIPE,
        "the swap was lost: the migrated file is back on its old objects"
    );
    for (fid, name) in [
        (intent, "write-intent"),
        (split, "split"),
        (migrated, "migrated"),
    ] {
        let got = common::integrity::read_file(&c, fid, new.len() as u64)
            .await
            .expect("read after the cut");
        assert!(got == new, "{name} does not read as written");
    }
    tokio::task::block_in_place(|| rig.assert_recovered(1, 3));
    c.unmount();
    tokio::task::block_in_place(|| rig.stop_and_check());
}

/// `lfs mirror extend` and `lfs mirror resync` acknowledged before a power cut of the MDT
/// are replayed: the extended file keeps its new mirror, filled and in sync (the extend,
/// its resync's start, layout intent and end all replayed), and the resynced file's mirror
/// a delayed-mode write left stale is in sync again (the resync's start committed while
/// it copied, so only its end is replayed, to a restarted MDT that has no record of the
/// start). Without their replays the first would be back to one mirror (the OST keeps the
/// copy's objects, pointed at by nothing) and the second would have its mirror stale once
/// more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_extend_and_resync_are_replayed() {
    use nacre_core::layout::{Component, EOF, LCM_FL_SYNC_PENDING, pflr_id};
    if !require_power_cut() {
        return;
    }
    let mut rig = tokio::task::block_in_place(|| ReplayRig::new("rpextend", "mdt0"));
    let c = rig.cl.mount("replay-extend").await;
    // Large enough that the resync copies for a while.
    let old = pattern(24 << 20, 3);
    let new = pattern(24 << 20, 4);
    // Both files synced with their names first.
    let extended = synced_file(&c, b"extended", &old).await;
    let resynced = mirrored_file(&c, b"resynced", &old).await;
    c.tunables
        .set_str("llite", "mirror_write_mode", "delayed")
        .expect("delayed mode");
    write_unsynced(&c, resynced, &new).await;
    assert_eq!(
        stale_mirrors(&c, resynced)
            .await
            .iter()
            .filter(|(_, stale)| *stale)
            .count(),
        1,
        "a delayed-mode write left no mirror stale"
    );
    let committer = {
        let c = c.clone();
        tokio::spawn(async move {
            loop {
                let l = layout_of(&c, resynced).await;
                if l.flr_state() == LCM_FL_SYNC_PENDING {
                    c.sync_dir(Fid::ROOT).await.expect("commit");
                    return true;
                }
                if !l.has_stale() {
                    return false;
                }
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        })
    };
    c.mirror_resync(resynced, &[])
        .await
        .expect("lfs mirror resync");
    assert!(
        committer.await.expect("join"),
        "the resync ended before its start could be committed"
    );
    // The extend last: the resync's commit above would take it too.
    let mut mirror = Component::raid0(0, EOF, 1, 65536, -1);
    mirror.id = pflr_id(1, 0);
    c.mirror_extend(extended, vec![mirror])
        .await
        .expect("lfs mirror extend");
    let in_sync = vec![(1, false), (2, false)];
    for fid in [extended, resynced] {
        assert_eq!(stale_mirrors(&c, fid).await, in_sync, "before the cut");
    }
    tokio::task::block_in_place(|| rig.cut());
    assert_eq!(
        stale_mirrors(&c, extended).await,
        in_sync,
        "the extend or its resync was lost"
    );
    assert_eq!(
        stale_mirrors(&c, resynced).await,
        in_sync,
        "the resync was lost: the mirror it filled is stale again"
    );
    for (fid, want, name) in [(extended, &old, "extended"), (resynced, &new, "resynced")] {
        let v = c.mirror_verify(fid, &[]).await.expect("lfs mirror verify");
        assert!(
            v.in_sync(),
            "{name}: the mirrors differ after the cut: {v:?}"
        );
        for m in [1, 2] {
            let (got, _) = c
                .mirror_read(fid, m, 0, want.len() as u64)
                .await
                .expect("lfs mirror read");
            assert!(
                got[..] == want[..],
                "{name}: mirror {m} does not read as written"
            );
        }
    }
    // The extend, its resync's start, layout intent and end, and the other resync's end.
    tokio::task::block_in_place(|| rig.assert_recovered(1, 5));
    c.unmount();
    tokio::task::block_in_place(|| rig.stop_and_check());
}

/// A replayed request's caller is squashed as it was the first time: root's create
/// under `mdt.*.root_squash` makes a file of the squashed owner, and its replay after a
/// power cut of the MDT makes the same file, not one of root's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_create_is_squashed_as_it_first_was() {
    use common::power_cut::set_param_p_and_wait;
    const NOBODY: u32 = 65534;
    if !require_power_cut() {
        return;
    }
    let mut rig = tokio::task::block_in_place(|| ReplayRig::new("rpsquash", "mdt0"));
    let c = rig.cl.mount("replay-squash").await;
    // A directory squashed root may write in, committed with its name.
    let dir = create(&c, Fid::ROOT, b"open", libc::S_IFDIR | 0o777)
        .await
        .expect("mkdir")
        .attr
        .fid;
    c.sync_dir(Fid::ROOT).await.expect("fsyncdir");
    let squash = format!("mdt.{}-MDT0000.root_squash", rig.cl.fsname);
    set_param_p_and_wait(&c, &squash, &format!("{NOBODY}:{NOBODY}")).await;
    let fid = create(&c, dir, b"by-root", FILE)
        .await
        .expect("create as squashed root")
        .attr
        .fid;
    let owner = |a: &nacre_core::Attr| (a.uid, a.gid);
    let before = owner(&c.getattr(fid).await.expect("getattr").attr);
    assert_eq!(before, (NOBODY, NOBODY), "root was not squashed");
    tokio::task::block_in_place(|| rig.cut());
    let after = owner(&c.getattr(fid).await.expect("getattr after the cut").attr);
    assert_eq!(after, before, "the replayed create was not squashed");
    tokio::task::block_in_place(|| rig.assert_recovered(1, 1));
    c.unmount();
    tokio::task::block_in_place(|| rig.stop_and_check());
}

/// `fcntl` locks survive a power cut of the MDT (Lustre replays its flock locks): a
/// client holding a write lock and a read lock takes both again in its replay, after its
/// handle's reopen, so another client is still kept out after the restart; once the
/// holder lets go the other gets the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_held_through_a_power_cut_are_taken_again_in_the_replay() {
    use nacre_core::flock::{FileLock, FlockMode};
    if !require_power_cut() {
        return;
    }
    let mut rig = tokio::task::block_in_place(|| ReplayRig::new("rplock", "mdt0"));
    let a = rig.cl.mount("replay-a").await;
    let b = rig.cl.mount("replay-b").await;
    let fid = create(&a, Fid::ROOT, b"locked", FILE)
        .await
        .expect("create")
        .attr
        .fid;
    a.sync_dir(Fid::ROOT).await.expect("fsyncdir");
    let lk = |mode, start, end| FileLock {
        mode,
        start,
        end,
        pid: 1,
    };
    let (ha, _) = a.open(fid, rw(), &cred()).await.expect("open on a");
    let (hb, _) = b.open(fid, rw(), &cred()).await.expect("open on b");
    const OWNER_A: u64 = 0xa;
    const OWNER_B: u64 = 0xb;
    a.flock_set(&ha, OWNER_A, lk(FlockMode::Write, 0, 99), false, || false)
        .await
        .expect("write lock on a");
    a.flock_set(&ha, OWNER_A, lk(FlockMode::Read, 200, 299), false, || false)
        .await
        .expect("read lock on a");
    assert_eq!(a.mdc_replay(0).expect("mdc").locks_kept(), 2);
    assert_eq!(
        b.flock_set(&hb, OWNER_B, lk(FlockMode::Read, 50, 50), false, || false)
            .await,
        Err(Errno::EAGAIN)
    );

    tokio::task::block_in_place(|| rig.cut());

    // b's ask waits for the end of the recovery, by when a's locks are back.
    assert_eq!(
        b.flock_set(&hb, OWNER_B, lk(FlockMode::Read, 50, 50), false, || false)
            .await,
        Err(Errno::EAGAIN),
        "a's write lock after the restart"
    );
    let relocked = a
        .mdc_replay(0)
        .expect("mdc")
        .relocked
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(relocked, 2, "locks taken again");
    let held = b
        .flock_test(&hb, OWNER_B, lk(FlockMode::Write, 250, 250))
        .await
        .expect("getlk");
    assert_eq!(held, Some(lk(FlockMode::Read, 200, 299)), "a's read lock");
    b.flock_set(&hb, OWNER_B, lk(FlockMode::Read, 250, 250), false, || false)
        .await
        .expect("a read lock shares a's");
    // a's close gives its locks back.
    a.flock_release_owner(&ha, OWNER_A).await.expect("release");
    a.release(&ha).await.expect("close on a");
    b.flock_set(&hb, OWNER_B, lk(FlockMode::Write, 0, 99), false, || false)
        .await
        .expect("b's lock once a let go");
    b.release(&hb).await.expect("close on b");
    a.unmount();
    b.unmount();
    tokio::task::block_in_place(|| rig.stop_and_check());
}

/// A client keeps the append lock of a shared log after an append, its bytes still in
/// write-behind, and the MDT restarts. Its replay takes the lock again (after the log's
/// reopen), so another client's append after the recovery waits for those bytes and
/// lands after them, not at the end of file the OST had before they came: both records
/// are there, whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_append_lock_is_taken_again_after_an_mdt_restart() {
    use nacre_rpc::msg::OpenFlags;
    let tmp = tempfile::tempdir().expect("tmp");
    let mut cl = common::cluster::start(tmp.path(), "rpappend", 1, 1).await;
    let a = common::cluster::mount(&cl).await;
    let b = common::cluster::mount(&cl).await;
    let log = create(&a, Fid::ROOT, b"log", FILE)
        .await
        .expect("create")
        .attr
        .fid;
    let appending = OpenFlags {
        write: true,
        append: true,
        ..OpenFlags::default()
    };
    let (fa, _) = a.open(log, appending, &cred()).await.expect("open on a");
    // The MDT lets a client keep the lock once its callback poll is in.
    let ra = a.mdc_replay(0).expect("a's MDC");
    let t = std::time::Instant::now();
    let first = loop {
        let at = a
            .append(&fa, Bytes::from_static(b"A-first\n"))
            .await
            .expect("a appends");
        if ra.appends_kept() == 1 {
            break at;
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(10),
            "the MDT never let a keep its append lock"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    cl.stop_mdt(0).await;
    cl.start_mdt(0).await.expect("restart");
    let both = OpenFlags {
        read: true,
        ..appending
    };
    let (fb, _) = b.open(log, both, &cred()).await.expect("open on b");
    let at = b
        .append(&fb, Bytes::from_static(b"B-after\n"))
        .await
        .expect("b appends");
    assert_eq!(at, first + 8, "b's record is not right after a's last");
    assert_eq!(
        ra.relocked.load(std::sync::atomic::Ordering::Relaxed),
        1,
        "a's replay did not take its append lock again"
    );
    a.fsync(&fa).await.expect("fsync on a");
    b.fsync(&fb).await.expect("fsync on b");
    let mut want = b"A-first\n".repeat(first as usize / 8 + 1);
    want.extend_from_slice(b"B-after\n");
    let got = b
        .read(&fb, 0, want.len() as u64 + 100)
        .await
        .expect("read on b");
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&want)
    );
    a.release(&fa).await.expect("close on a");
    b.release(&fb).await.expect("close on b");
    a.unmount();
    b.unmount();
}
