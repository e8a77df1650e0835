//! Replay recovery after a power cut of an OST, in the style of Lustre's
//! `replay-ost-single.sh`: writes, overwrites, appends and truncates are answered and
//! never synced, the OST's power goes right after the replies (before its next commit),
//! the OST restarts, and the client that wrote, alive throughout, reconnects and replays
//! them: every byte it was told was written is there, for it and for a new client;
//! `obdfilter.*.recovery_status` says COMPLETE with the replayed count; the stopped file
//! system passes `nacre check`. With `osc.*.replay_tracking=0` the same writes are lost,
//! which is what shows the replay brought them back. The power also goes in the middle of
//! a write and of a read (tests 3 and 4 of `replay-ost-single.sh`): both go on through
//! the restart and every byte is right afterwards.

use crate::common;

use bytes::Bytes;
use common::cluster::{FILE, create, pattern, rw};
use common::power_cut::{
    ReplayRig, assert_contents, content, require_power_cut, set_param_p_and_wait, status_field,
    write_at,
};
use nacre_client::Client;
use nacre_core::Fid;
use nacre_core::attr::SetAttr;
use nacre_rpc::msg::Cred;
use std::sync::Arc;

/// Bytes of the files written before the cut: several write RPCs each.
const DATA: usize = 3 << 20;
/// Where the truncated file is cut.
const TRUNC: u64 = 100_000;

fn cred() -> Cred {
    Cred::root()
}

/// The OST commits only when asked (its own commits 10 minutes apart), so what a test
/// leaves unsynced is still uncommitted when the power goes.
async fn no_own_commits(rig: &ReplayRig, c: &Client) {
    let name = format!("obdfilter.{}-OST0000.commit_interval", rig.cl.fsname);
    set_param_p_and_wait(c, &name, "600").await;
}

/// A new file in the root.
async fn new_file(c: &Client, name: &str) -> Fid {
    create(c, Fid::ROOT, name.as_bytes(), FILE)
        .await
        .expect("create")
        .attr
        .fid
}

/// The files and what each must hold after the operations.
struct Files {
    /// Synced, then partly overwritten and appended to without a sync.
    overwritten: (Fid, Vec<u8>),
    /// Written whole without a sync.
    fresh: (Fid, Vec<u8>),
    /// Synced, then truncated without a sync.
    truncated: (Fid, Vec<u8>),
    /// Synced, then grown by a `posix_fallocate` past its end without a sync, through a
    /// handle held open through the cut (a last close has the MDT sync the objects). Its
    /// replay must apply cleanly; the power-cut disk keeps an unsynced fallocate's size,
    /// so this file cannot show that the replay is what keeps it.
    fallocated: (Fid, Vec<u8>),
    held: Vec<nacre_client::file::OpenFile>,
}

/// Makes the files, synced as [`operate`] expects.
async fn setup(c: &Arc<Client>, tag: &str) -> Files {
    let over = new_file(c, &format!("{tag}-overwritten")).await;
    let fresh = new_file(c, &format!("{tag}-fresh")).await;
    let trunc = new_file(c, &format!("{tag}-truncated")).await;
    let falloc = new_file(c, &format!("{tag}-fallocated")).await;
    let base = pattern(DATA, 1);
    write_at(c, over, 0, &base, true).await;
    write_at(c, trunc, 0, &base, true).await;
    write_at(c, falloc, 0, &base, true).await;
    for d in [Fid::ROOT] {
        c.sync_dir(d).await.expect("fsyncdir");
    }
    Files {
        overwritten: (over, base.clone()),
        fresh: (fresh, Vec::new()),
        truncated: (trunc, base.clone()),
        fallocated: (falloc, base),
        held: Vec::new(),
    }
}

/// Changes every file without a sync, and what each must then hold.
async fn operate(c: &Arc<Client>, f: &mut Files) {
    // The truncate first: the OST syncs a punched object before the MDT trusts its
    // size, which could make the writes before it durable too.
    let (h, _) = c.open(f.truncated.0, rw(), &cred()).await.expect("open");
    let t = SetAttr {
        size: Some(TRUNC),
        ..SetAttr::default()
    };
    c.setattr(f.truncated.0, t, &cred(), None)
        .await
        .expect("truncate");
    c.release(&h).await.expect("close");
    f.truncated.1.truncate(TRUNC as usize);
    // An overwrite across RPCs in the middle, then an append past the end.
    let mid = pattern(1 << 20, 2);
    let off = 512 << 10;
    write_at(c, f.overwritten.0, off as u64, &mid, false).await;
    f.overwritten.1[off..off + mid.len()].copy_from_slice(&mid);
    let tail = pattern(300_000, 3);
    write_at(c, f.overwritten.0, DATA as u64, &tail, false).await;
    f.overwritten.1.extend_from_slice(&tail);
    // Written to the OST and held open: a last close would have the MDT sync the object
    // (to trust its size), racing the cut.
    let fresh = pattern(DATA, 4);
    let (h, _) = c.open(f.fresh.0, rw(), &cred()).await.expect("open");
    c.write(&h, 0, Bytes::from(fresh.clone()))
        .await
        .expect("write");
    c.flush(&h).await.expect("flush");
    f.held.push(h);
    // posix_fallocate past the end: the file grows by allocated zeros.
    let (h, _) = c.open(f.fallocated.0, rw(), &cred()).await.expect("open");
    c.fallocate(&h, DATA as u64, 1 << 20, 0)
        .await
        .expect("fallocate");
    f.held.push(h);
    f.fallocated.1.resize(DATA + (1 << 20), 0);
    f.fresh.1 = fresh;
}

async fn verify(c: &Arc<Client>, f: &Files, what: &str) {
    let files = [
        ("overwritten", &f.overwritten),
        ("fresh", &f.fresh),
        ("truncated", &f.truncated),
        ("fallocated", &f.fallocated),
    ];
    assert_contents(c, &files, what).await;
}

/// `replay-ost-single.sh` test 1 with the power cut of `replay-single.sh`: writes,
/// an overwrite, an append and a truncate are answered and none synced; the OST loses its
/// unsynced writes; the client that made them replays all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_client_replays_its_writes_after_a_power_cut_of_the_ost() {
    if !require_power_cut() {
        return;
    }
    let mut rig = tokio::task::block_in_place(|| ReplayRig::new("rpost", "ost0"));
    let c = rig.cl.mount("ost-replay-a").await;
    no_own_commits(&rig, &c).await;
    let mut f = setup(&c, "a").await;
    operate(&c, &mut f).await;
    assert!(
        c.osc_replay(0).expect("osc").kept() > 0,
        "the writes were committed before the cut: nothing to replay"
    );
    tokio::task::block_in_place(|| rig.cut());
    verify(&c, &f, "the writer, after the OST's power cut").await;
    tokio::task::block_in_place(|| rig.assert_recovered(1, 1));
    let other = rig.cl.mount("ost-replay-b").await;
    verify(&other, &f, "another client, after the recovery").await;
    for h in &f.held {
        c.release(h).await.expect("close after the recovery");
    }
    // New writes go on after recovery.
    let after = create(&c, Fid::ROOT, b"after", FILE)
        .await
        .expect("create after recovery")
        .attr
        .fid;
    write_at(&c, after, 0, b"after the recovery", true).await;
    c.disconnect().await;
    c.unmount();
    other.unmount();
    tokio::task::block_in_place(|| rig.stop_and_check());
}

/// The same writes untracked (`osc.*.replay_tracking=0`): the power cut loses them, so the
/// test above sees the replay's work, not writes that happened to reach the disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untracked_writes_are_lost_to_a_power_cut_of_the_ost() {
    if !require_power_cut() {
        return;
    }
    let mut rig = tokio::task::block_in_place(|| ReplayRig::new("rpostoff", "ost0"));
    let c = rig.cl.mount("ost-replay-off").await;
    c.tunables
        .set("osc", "replay_tracking", 0)
        .expect("replay_tracking=0");
    let mut f = setup(&c, "a").await;
    operate(&c, &mut f).await;
    assert_eq!(c.osc_replay(0).expect("osc").kept(), 0, "nothing kept");
    tokio::task::block_in_place(|| rig.cut());
    let other = rig.cl.mount("ost-replay-off-b").await;
    // Lost: an error or other bytes (the object's file was precreated, durably, empty).
    if let Ok(fresh) = content(&other, f.fresh.0).await {
        assert!(
            fresh != f.fresh.1,
            "an unsynced, untracked write survived the power cut"
        );
    }
    c.unmount();
    other.unmount();
    tokio::task::block_in_place(|| rig.cl.stop_all());
}

/// `replay-ost-single.sh` tests 3 and 4: the OST's power goes while a client writes a
/// file in pieces, none synced, and while another reads a synced one. The writer's calls
/// wait for the OST (resent across its restart), the reader's too; afterwards both files
/// hold exactly what was written, for the writer and for a new client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ost_fails_during_a_write_and_a_read() {
    if !require_power_cut() {
        return;
    }
    const PIECE: usize = 1 << 20;
    const PIECES: usize = 24;
    let mut rig = tokio::task::block_in_place(|| ReplayRig::new("rpostio", "ost0"));
    let c = rig.cl.mount("ost-io-writer").await;
    let r = rig.cl.mount("ost-io-reader").await;
    no_own_commits(&rig, &c).await;
    let (written, read) = (new_file(&c, "written").await, new_file(&c, "read").await);
    let synced = pattern(PIECE * PIECES, 5);
    write_at(&c, read, 0, &synced, true).await;
    let want = pattern(PIECE * PIECES, 6);
    let (cut_tx, cut_rx) = tokio::sync::oneshot::channel::<()>();
    let writer = {
        let (c, want) = (c.clone(), want.clone());
        tokio::spawn(async move {
            let (h, _) = c.open(written, rw(), &cred()).await.expect("open");
            let mut cut_tx = Some(cut_tx);
            for (i, piece) in want.chunks(PIECE).enumerate() {
                c.write(&h, (i * PIECE) as u64, Bytes::copy_from_slice(piece))
                    .await
                    .unwrap_or_else(|e| panic!("write of piece {i}: {e}"));
                if i == PIECES / 2 {
                    // Half written, and what the client cached of it answered by the OST
                    // (written there, not synced): the power goes now.
                    while c.dirty_bytes() > (4 << 20) {
                        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                    }
                    if let Some(tx) = cut_tx.take() {
                        let _ = tx.send(());
                    }
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            c.release(&h).await.expect("close");
        })
    };
    let reader = {
        let r = r.clone();
        tokio::spawn(async move {
            let mut rounds = 0;
            // Reads until the writer is done, through the outage.
            loop {
                let got = content(&r, read).await.expect("read during the outage");
                assert!(got == synced, "a read returned other bytes");
                rounds += 1;
                if rounds >= 20 {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        })
    };
    cut_rx.await.expect("the writer reached the cut");
    tokio::task::block_in_place(|| rig.cut());
    writer.await.expect("writer");
    reader.await.expect("reader");
    let got = content(&c, written).await.expect("read back");
    assert!(got == want, "the writer reads other bytes back");
    let other = rig.cl.mount("ost-io-after").await;
    let got = content(&other, written).await.expect("read by another");
    assert!(got == want, "another client reads other bytes");
    for cl in [&c, &r, &other] {
        cl.disconnect().await;
        cl.unmount();
    }
    tokio::task::block_in_place(|| rig.stop_and_check());
}

/// Two clients overwrite the same bytes one after the other (each closing before the
/// next writes), nothing synced, and the OST's power goes: their replays apply in transno
/// order, across clients, so the later write wins as it did. Then a client that wrote
/// and is gone when the OST comes back is evicted at the end of the window (a log line
/// says so), nobody replays its unsynced write, and the live client's replays still apply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replays_of_two_clients_apply_in_transno_order_and_a_gone_one_is_evicted() {
    if !require_power_cut() {
        return;
    }
    const MIB: usize = 1 << 20;
    let mut rig = tokio::task::block_in_place(|| ReplayRig::new("rpost2", "ost0"));
    let a = rig.cl.mount("ost-two-a").await;
    let b = rig.cl.mount("ost-two-b").await;
    no_own_commits(&rig, &a).await;
    let shared = new_file(&a, "shared").await;
    let mut want = pattern(3 * MIB, 1);
    write_at(&a, shared, 0, &want, true).await;
    let first = pattern(2 * MIB, 2);
    write_at(&a, shared, 0, &first, false).await;
    want[..2 * MIB].copy_from_slice(&first);
    let second = pattern(2 * MIB, 3);
    write_at(&b, shared, MIB as u64, &second, false).await;
    want[MIB..3 * MIB].copy_from_slice(&second);
    tokio::task::block_in_place(|| rig.cut());
    let c = rig.cl.mount("ost-two-c").await;
    for (who, cl) in [("the first writer", &a), ("another client", &c)] {
        let got = content(cl, shared).await.expect("read");
        assert!(
            got == want,
            "{who}: the overlapping writes came back in another order"
        );
    }
    let st = tokio::task::block_in_place(|| rig.recovery_status());
    assert_eq!(status_field(&st, "completed_clients"), "2/2", "{st}");

    // A client that is gone when the OST comes back.
    let fsname = rig.cl.fsname.clone();
    for (n, v) in [("recovery_time_soft", "2"), ("recovery_time_hard", "6")] {
        b.set_param_persistent(&format!("obdfilter.{fsname}-OST0000.{n}"), Some(v))
            .await
            .expect("set_param -P");
    }
    let (gone_file, live_file) = (
        new_file(&a, "of-the-gone").await,
        new_file(&b, "of-the-live").await,
    );
    let gone_data = pattern(2 * MIB, 4);
    let live_data = pattern(2 * MIB, 5);
    write_at(&a, gone_file, 0, &gone_data, false).await;
    write_at(&b, live_file, 0, &live_data, false).await;
    assert!(
        a.osc_replay(0).expect("osc").kept() > 0,
        "the gone client's write was committed before the cut"
    );
    a.unmount();
    drop(a);
    tokio::task::block_in_place(|| rig.cut());
    let got = content(&b, live_file).await.expect("read");
    assert!(got == live_data, "the live client's write was not replayed");
    // Nobody replays the gone client's write: each block of it is there or lost (another
    // client's record, synced after it, may have carried some to the disk), and a block
    // whose checksum the cut kept without its data is EIO, never other bytes. Its size is
    // the one the MDT settled after the last close: the full size when the settle synced
    // the objects before the cut, what the OST kept when the MDT (stopped for the cut)
    // settled only after the OST came back; never more than was written.
    match content(&b, gone_file).await {
        Ok(got) => {
            assert!(
                got.len() <= gone_data.len(),
                "the gone client's file grew to {} bytes past the {} it wrote",
                got.len(),
                gone_data.len()
            );
            for (i, (g, w)) in got.chunks(4096).zip(gone_data.chunks(4096)).enumerate() {
                assert!(
                    g == w || g.iter().all(|&x| x == 0),
                    "block {i} of the gone client's file is neither its data nor lost"
                );
            }
        }
        Err(e) => assert_eq!(e, nacre_core::Errno::EIO, "the gone client's file"),
    }
    let st = tokio::task::block_in_place(|| rig.recovery_status());
    assert_eq!(status_field(&st, "completed_clients"), "1/2", "{st}");
    let log = std::fs::read_to_string(rig.cl.logs.join("ost0.log")).expect("log");
    assert!(
        log.contains("recovery window ended: evicting client"),
        "no eviction in the OST's log:\n{log}"
    );
    for cl in [&b, &c] {
        cl.disconnect().await;
        cl.unmount();
    }
    tokio::task::block_in_place(|| rig.stop_and_check());
}

/// A client that lives but misses the OST's recovery window (frozen through it, as a
/// node that hangs) is evicted when the window ends: its unsynced writes are lost, and
/// the application hears of it: the handle that made them gets EIO from `fsync`, never a
/// silent success (Lustre's evicted client). A new handle writes and syncs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_misses_the_window_is_evicted_and_its_writer_gets_eio() {
    if !require_power_cut() {
        return;
    }
    let mut rig = tokio::task::block_in_place(|| ReplayRig::new("rpostev", "ost0"));
    let helper = rig.cl.mount("ost-ev-helper").await;
    no_own_commits(&rig, &helper).await;
    let fsname = rig.cl.fsname.clone();
    for (n, v) in [("recovery_time_soft", "1"), ("recovery_time_hard", "3")] {
        helper
            .set_param_persistent(&format!("obdfilter.{fsname}-OST0000.{n}"), Some(v))
            .await
            .expect("set_param -P");
    }
    // The client to freeze runs on a runtime of its own whose one worker can be stopped:
    // its connections, timers and pings all stand still, as a hung node's do.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let spec = nacre_client::MountSpec::parse(&rig.cl.spec(), rig.cl.key(), "ost-ev-frozen")
        .expect("spec");
    let c = rt
        .spawn(async move { Client::mount(spec).await })
        .await
        .expect("join")
        .expect("mount");
    let f = new_file(&c, "evicted").await;
    let (h, _) = c.open(f, rw(), &cred()).await.expect("open");
    let data = pattern(2 << 20, 7);
    c.write(&h, 0, Bytes::copy_from_slice(&data))
        .await
        .expect("write");
    c.flush(&h).await.expect("flush");
    assert!(
        c.osc_replay(0).expect("osc").kept() > 0,
        "the write was committed before the cut"
    );
    let (thaw, frozen) = std::sync::mpsc::channel::<()>();
    let (stopped, stopped_rx) = std::sync::mpsc::channel::<()>();
    rt.spawn(async move {
        let _ = stopped.send(());
        // Holds the runtime's only worker until thawed.
        let _ = frozen.recv();
    });
    tokio::task::block_in_place(|| {
        stopped_rx.recv().expect("frozen");
        rig.cut();
    });
    // The window ends without the frozen client.
    let mut st = String::new();
    for _ in 0..400 {
        st = tokio::task::block_in_place(|| rig.recovery_status());
        if status_field(&st, "status") == "COMPLETE" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status_field(&st, "status"), "COMPLETE", "{st}");
    assert_eq!(status_field(&st, "completed_clients"), "0/1", "{st}");
    thaw.send(()).expect("thaw");
    assert_eq!(
        c.fsync(&h).await,
        Err(nacre_core::Errno::EIO),
        "fsync after the eviction lost the handle's writes"
    );
    let _ = c.release(&h).await;
    // The client works again: a new handle writes and syncs.
    let after = new_file(&c, "after-eviction").await;
    write_at(&c, after, 0, b"after the eviction", true).await;
    assert_eq!(
        content(&helper, after).await.expect("read"),
        b"after the eviction"
    );
    c.unmount();
    helper.unmount();
    drop(c);
    tokio::task::block_in_place(|| {
        rt.shutdown_timeout(std::time::Duration::from_secs(5));
        rig.stop_and_check()
    });
}
