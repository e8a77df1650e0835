//! The OI scrub on a live MDT (`lctl lfsck_start -t scrub`): index entries that are
//! missing, name another file's inode, or name no inode at all are each found by a dry
//! run, repaired, and not found again; an index deleted whole is rebuilt, online by the
//! scrub and at start by the MDT; files nobody touched keep their contents throughout.

use crate::common;

use common::lfsck::Fs;
use nacre_core::Fid;
use nacre_lfsck::inject;
use nacre_lustreapi::lfsck::{LPF_DRYRUN, SF_AUTO, SF_INCONSISTENT, SF_RECREATED};
use nacre_rpc::msg::Cred;

/// Files whose index entries are broken, one way or another.
const N: usize = 5;

/// Whether `fid` finds its own inode (a name finds it by inode number, as an ext4
/// directory entry does; a FID only through the index).
async fn found(fs: &Fs, fid: Fid) -> bool {
    fs.c.getattr(fid).await.is_ok_and(|i| i.attr.fid == fid)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_wrong_and_stale_index_entries_are_repaired() {
    let mut fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 10).await;
    let (d, v) = fs.victims("victims", N).await;
    let clean = fs.oi_scrub(0, 0).await;
    assert_eq!(clean.items_updated, 0, "a clean index");
    // 1 + 10 + 1 + 5 inodes: the root, the kept files and their directory, the victims.
    assert!(clean.items_checked >= 17, "{clean:?}");
    inject::drop_oi_entry(fs.mdt(0), v[0])
        .await
        .expect("inject");
    inject::drop_oi_entry(fs.mdt(0), v[1])
        .await
        .expect("inject");
    inject::misdirect_oi_entry(fs.mdt(0), v[2], v[4])
        .await
        .expect("inject");
    inject::misdirect_oi_entry(fs.mdt(0), v[3], v[4])
        .await
        .expect("inject");
    inject::stale_oi_entry(fs.mdt(0), Fid::new(0x2_0000_0bad, 1, 0))
        .await
        .expect("inject");
    for (i, f) in v.iter().enumerate().take(4) {
        assert!(!found(&fs, *f).await, "v{i} still found by FID");
    }
    let dry = fs.oi_scrub(0, LPF_DRYRUN).await;
    assert_eq!(dry.items_updated, N as u64, "dry run: {dry:?}");
    assert_ne!(dry.flags & SF_INCONSISTENT, 0, "dry run flags");
    assert!(!found(&fs, v[0]).await, "a dry run repaired");
    let fix = fs.oi_scrub(0, 0).await;
    assert_eq!(fix.items_updated, N as u64, "repair: {fix:?}");
    assert_eq!(fix.flags & SF_INCONSISTENT, 0, "repair flags");
    let again = fs.oi_scrub(0, 0).await;
    assert_eq!(again.items_updated, 0, "second run: {again:?}");
    for (i, f) in v.iter().enumerate() {
        let info =
            fs.c.lookup(d, format!("v{i}").as_bytes(), &Cred::root())
                .await
                .expect("lookup after repair");
        assert_eq!(info.attr.fid, *f);
        assert!(found(&fs, *f).await, "v{i} not found by FID after repair");
        assert_eq!(fs.read(*f).await, format!("victim {i}").as_bytes());
    }
    fs.verify(&kept).await;
    let text = fs.checker(0).oi_scrub_text();
    assert!(text.contains("status: completed"), "{text}");
    assert!(fs.checker(0).repairs.text().contains("oi_scrub"));
    let rep = fs.check().await;
    assert!(rep.is_clean(), "{}", rep.summary());
    fs.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_deleted_on_a_live_mdt_is_rebuilt_by_the_scrub() {
    let fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 20).await;
    let gone = inject::drop_oi(fs.mdt(0)).await.expect("inject");
    // The root, the directory and its 20 files at least.
    assert!(gone >= 22, "{gone}");
    assert!(!found(&fs, kept[0].fid).await, "found without an index");
    let dry = fs.oi_scrub(0, LPF_DRYRUN).await;
    assert_eq!(dry.items_updated, gone, "dry run");
    let fix = fs.oi_scrub(0, 0).await;
    assert_eq!(fix.items_updated, gone, "repair");
    assert_eq!(fs.oi_scrub(0, 0).await.items_updated, 0, "second run");
    fs.verify(&kept).await;
    fs.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_lost_while_stopped_is_rebuilt_before_the_mdt_serves() {
    let mut fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 20).await;
    let gone = inject::drop_oi(fs.mdt(0)).await.expect("inject");
    // Stop and start again (with `nacre check` between): the MDT finds no index.
    let _ = fs.check().await;
    // Nothing was made again: the old root and everything under it are there.
    fs.verify(&kept).await;
    assert_eq!(fs.mdt(0).oi_rebuilt, gone, "entries rebuilt at start");
    let st = fs.checker(0).state.lock().scrub.clone();
    assert_eq!(
        st.flags & (SF_RECREATED | SF_AUTO),
        SF_RECREATED | SF_AUTO,
        "{st:?}"
    );
    let after = fs.oi_scrub(0, 0).await;
    assert_eq!(after.items_updated, 0, "{after:?}");
    assert_eq!(after.flags & (SF_RECREATED | SF_AUTO), 0, "{after:?}");
    let rep = fs.check().await;
    assert!(rep.is_clean(), "{}", rep.summary());
    fs.stop().await;
}
