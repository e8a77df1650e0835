//! Data-on-MDT writes after a power cut of the MDT, in the style of `replay-single.sh`
//! (`replay_barrier`, write, `fail mds`): files whose first MiB lives on the MDT are
//! written, overwritten and appended to without a sync through handles still open (a
//! last close has the MDT sync the file's objects), the MDT's power goes before its next
//! checkpoint, it restarts, and the client that wrote, alive throughout, reopens the
//! handles and replays the writes in transno order with the namespace changes around
//! them: every byte it was told was written is there, for it and for a new client, and
//! the stopped file system passes `nacre check`. With `mdc.*.replay_tracking=0` the same
//! writes are lost, which is what shows the replay brought them back.

use crate::common;

use bytes::Bytes;
use common::cluster::{FILE, pattern, rw};
use common::power_cut::{
    ReplayRig, assert_contents, content, require_power_cut, set_param_p_and_wait, write_at,
};
use common::procs::ServeCluster;
use nacre_client::Client;
use nacre_client::file::OpenFile;
use nacre_core::layout::EOF;
use nacre_core::{Component, Errno, Fid, Layout};
use nacre_rpc::msg::{Cred, LayoutRequest};
use std::sync::Arc;
use std::time::Duration;

/// The DoM component's end: every write below stays on the MDT.
const DOM: u64 = 1 << 20;

/// The MDT checkpoints only when asked (every 10 minutes), so what a test leaves unsynced
/// is still uncommitted when the power goes.
async fn no_own_checkpoints(rig: &ReplayRig, c: &Client) {
    let name = format!("osd-nacre.{}-MDT0000.checkpoint_interval", rig.cl.fsname);
    set_param_p_and_wait(c, &name, "600").await;
}

/// A new file in the root with a DoM component, synced empty (name and layout durable).
async fn dom_file(c: &Arc<Client>, name: &str) -> Fid {
    let layout = Layout::composite(vec![
        Component::dom(DOM),
        Component::raid0(DOM, EOF, 1, 1 << 20, -1),
    ]);
    let (info, _) = c
        .create(
            Fid::ROOT,
            name.as_bytes(),
            FILE,
            0,
            &Cred::root(),
            None,
            LayoutRequest::Explicit(layout),
            None,
            true,
        )
        .await
        .expect("create");
    assert!(
        info.layout
            .as_ref()
            .is_some_and(|l| l.dom_object().is_some()),
        "{name}: no DoM component"
    );
    c.sync_dir(Fid::ROOT).await.expect("fsyncdir");
    info.attr.fid
}

/// The two files, what each must hold, and the handles that wrote them (open still).
struct Files {
    /// Synced with data, then overwritten in the middle and appended to, unsynced.
    overwritten: (Fid, Vec<u8>),
    /// Synced empty, then written whole, unsynced.
    fresh: (Fid, Vec<u8>),
    handles: Vec<OpenFile>,
}

async fn setup_and_write(c: &Arc<Client>, tag: &str) -> Files {
    let over = dom_file(c, &format!("{tag}-overwritten")).await;
    let fresh = dom_file(c, &format!("{tag}-fresh")).await;
    let mut base = pattern(256 << 10, 1);
    write_at(c, over, 0, &base, true).await;
    let (h1, _) = c.open(over, rw(), &Cred::root()).await.expect("open");
    let mid = pattern(64 << 10, 2);
    c.write(&h1, 100_000, Bytes::copy_from_slice(&mid))
        .await
        .expect("overwrite");
    base[100_000..100_000 + mid.len()].copy_from_slice(&mid);
    let tail = pattern(300_000, 3);
    c.write(&h1, base.len() as u64, Bytes::copy_from_slice(&tail))
        .await
        .expect("append");
    base.extend_from_slice(&tail);
    let (h2, _) = c.open(fresh, rw(), &Cred::root()).await.expect("open");
    let whole = pattern(700_000, 4);
    c.write(&h2, 0, Bytes::copy_from_slice(&whole))
        .await
        .expect("write");
    // Sent and answered, not synced.
    for h in [&h1, &h2] {
        c.flush(h).await.expect("flush");
    }
    Files {
        overwritten: (over, base),
        fresh: (fresh, whole),
        handles: vec![h1, h2],
    }
}

async fn verify(c: &Arc<Client>, f: &Files, what: &str) {
    let files = [("overwritten", &f.overwritten), ("fresh", &f.fresh)];
    assert_contents(c, &files, what).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_client_replays_its_dom_writes_after_a_power_cut_of_the_mdt() {
    if !require_power_cut() {
        return;
    }
    let mut rig = tokio::task::block_in_place(|| ReplayRig::new("rpdom", "mdt0"));
    let c = rig.cl.mount("dom-replay-a").await;
    no_own_checkpoints(&rig, &c).await;
    let f = setup_and_write(&c, "a").await;
    let kept = c.mdc_replay(0).expect("mdc").kept_bytes();
    assert!(
        kept >= 700_000 + 300_000 + (64 << 10),
        "the DoM writes were not all kept for replay: {kept} bytes"
    );
    tokio::task::block_in_place(|| rig.cut());
    verify(&c, &f, "the writer, after the MDT's power cut").await;
    tokio::task::block_in_place(|| rig.assert_recovered(1, 3));
    let other = rig.cl.mount("dom-replay-b").await;
    verify(&other, &f, "another client, after the recovery").await;
    for h in &f.handles {
        c.release(h).await.expect("close after the recovery");
    }
    verify(&other, &f, "another client, after the writer's close").await;
    // DoM writes go on after the recovery, and a sync commits them.
    let after = dom_file(&c, "after").await;
    write_at(&c, after, 0, b"after the recovery", true).await;
    assert_eq!(
        content(&other, after).await.expect("read"),
        b"after the recovery"
    );
    c.unmount();
    other.unmount();
    tokio::task::block_in_place(|| rig.stop_and_check());
}

/// The same writes untracked (`mdc.*.replay_tracking=0`): the power cut loses them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untracked_dom_writes_are_lost_to_a_power_cut_of_the_mdt() {
    if !require_power_cut() {
        return;
    }
    let mut rig = tokio::task::block_in_place(|| ReplayRig::new("rpdomoff", "mdt0"));
    let c = rig.cl.mount("dom-replay-off").await;
    no_own_checkpoints(&rig, &c).await;
    c.tunables
        .set("mdc", "replay_tracking", 0)
        .expect("replay_tracking=0");
    let f = setup_and_write(&c, "a").await;
    assert_eq!(c.mdc_replay(0).expect("mdc").kept(), 0, "nothing kept");
    tokio::task::block_in_place(|| rig.cut());
    let other = rig.cl.mount("dom-replay-off-b").await;
    // Lost: the file is there (synced empty), its unsynced bytes are not.
    let fresh = content(&other, f.fresh.0).await.expect("read");
    assert!(
        fresh != f.fresh.1,
        "an unsynced, untracked DoM write survived the power cut"
    );
    c.unmount();
    other.unmount();
    tokio::task::block_in_place(|| rig.cl.stop_all());
}

/// A DoM block the MDT's crash tore (changed after the last commit that synced DoM data
/// began: its bytes reached the disk and its checksum did not, or the reverse) reads as the
/// disk kept it after the restart, counted in `mdt.*.dom_checksum_torn_retaken`, rather
/// than failing every read; a block synced by an earlier commit that fails its checksum
/// is corruption, EIO, as before. The crash is a `kill -9` of the MDT's `nacre serve`
/// process, the tear a bit flipped in each object's data with its checksum left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dom_block_the_mdts_crash_tore_reads_as_kept_and_older_damage_is_eio() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut cl = tokio::task::block_in_place(|| {
        let mut cl = ServeCluster::format(
            "domtorn",
            &tmp.path().join("mgs"),
            &[tmp.path().join("mdt0")],
            &[tmp.path().join("ost0")],
        );
        cl.start_all();
        cl
    });
    let c = cl.mount("dom-torn-a").await;
    let mdt = format!("{}-MDT0000", cl.fsname);
    set_param_p_and_wait(&c, &format!("osd-nacre.{mdt}.checkpoint_interval"), "600").await;
    // The crash must not be undone by a replay of the late write.
    c.tunables
        .set("mdc", "replay_tracking", 0)
        .expect("replay_tracking=0");
    let (old_len, late_len) = (64 << 10, 96 << 10);
    let old = dom_file(&c, "old").await;
    write_at(&c, old, 0, &pattern(old_len, 1), true).await;
    // Past the margin: the next commit's sync of DoM data begins well after "old" changed.
    tokio::time::sleep(nacre_osd::objstore::TORN_MARGIN + Duration::from_millis(500)).await;
    let late = dom_file(&c, "late").await;
    // Written and answered, not synced; the handle stays open (a last close syncs).
    let (h, _) = c.open(late, rw(), &Cred::root()).await.expect("open");
    c.write(&h, 0, Bytes::from(pattern(late_len, 2)))
        .await
        .expect("write");
    c.flush(&h).await.expect("flush");
    tokio::task::block_in_place(|| cl.kill("mdt0"));
    let objects = nacre_osd::inject::objects_with_data(&tmp.path().join("mdt0").join("dom"))
        .expect("DoM objects");
    let path_of = |len: usize| {
        let found: Vec<_> = objects.iter().filter(|o| o.2 == len as u64).collect();
        assert_eq!(found.len(), 1, "DoM objects of {len} bytes: {objects:?}");
        found[0].1.clone()
    };
    const AT: u64 = 5000;
    for len in [old_len, late_len] {
        nacre_osd::inject::flip_bit(&path_of(len), AT, 3).expect("flip");
    }
    tokio::task::block_in_place(|| cl.start("mdt0"));
    let other = cl.mount("dom-torn-b").await;
    let mut want = pattern(late_len, 2);
    want[AT as usize] ^= 1 << 3;
    let got = content(&other, late)
        .await
        .expect("a block the crash tore reads as kept");
    assert!(
        got == want,
        "the torn DoM file does not read as the disk kept it"
    );
    assert_eq!(
        content(&other, old).await.err(),
        Some(Errno::EIO),
        "damage to DoM data an earlier commit synced was not caught"
    );
    let counter = |name: &str| -> u64 {
        let v = tokio::task::block_in_place(|| common::param(&format!("mdt.{mdt}.{name}")));
        v.parse().unwrap_or_else(|_| panic!("{name}: {v}"))
    };
    assert_eq!(counter("dom_checksum_torn_retaken"), 1);
    assert!(counter("dom_checksum_errors") >= 1);
    // Taken means rewritten: the torn block reads again without being taken again.
    assert!(content(&other, late).await.expect("read again") == want);
    assert_eq!(counter("dom_checksum_torn_retaken"), 1);
    c.unmount();
    other.unmount();
    tokio::task::block_in_place(|| cl.stop_all());
}
