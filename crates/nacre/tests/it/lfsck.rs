//! LFSCK on a live file system, one inconsistency class at a time: inject N, a dry run
//! reports exactly N, a repair fixes N, a second run finds nothing, `nacre check` sees
//! the same before and nothing after, and the files nobody touched keep their contents.

use crate::common;

use common::lfsck::{Fs, counts, layout_repaired, repaired, repaired_all};
use nacre_core::{Fid, FileKind};
use nacre_lfsck::inject;
use nacre_lustreapi::lfsck::{LPF_CREATE_MDTOBJ, LPF_DRYRUN, LPF_OST_ORPHAN, NamespaceStatus};
use nacre_rpc::msg::{Cred, DirLayoutRequest};

const N: usize = 5;

/// The dry run, the repair and the second run, with the counters each must show.
async fn roundtrip(fs: &Fs, flags: u16, want: &[(&'static str, u64)]) {
    let dry = fs.lfsck(0, LPF_DRYRUN | flags).await;
    assert_eq!(repaired(&dry), counts(want), "dry run");
    let fix = fs.lfsck(0, flags).await;
    assert_eq!(repaired(&fix), counts(want), "repair");
    let again = fs.lfsck(0, flags).await;
    assert_eq!(repaired(&again), counts(&[]), "second run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_file_system_has_nothing_to_repair() {
    let fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 20).await;
    let st = fs.lfsck(0, 0).await;
    assert_eq!(repaired(&st), counts(&[]));
    // Every object was checked: the root, the directory, the files.
    assert_eq!(st.items_checked, 22);
    assert_eq!(st.dirs_checked, 2);
    fs.verify(&kept).await;
    fs.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dangling_names_are_reported_and_recreated_with_create_mdtobj() {
    let mut fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 10).await;
    let (d, v) = fs.victims("victims", N).await;
    for f in &v {
        inject::remove_object(fs.mdt(0), *f).await.expect("inject");
    }
    let rep = fs.check().await;
    assert_eq!(rep.dangling.len(), N, "{}", rep.summary());
    // Without -C a dangling name is reported, not counted as repaired.
    let plain = fs.lfsck(0, 0).await;
    assert_eq!(repaired(&plain), counts(&[]));
    roundtrip(&fs, LPF_CREATE_MDTOBJ, &[("dangling", N as u64)]).await;
    // The names lead to (empty) files again.
    for (i, want) in v.iter().enumerate() {
        let info =
            fs.c.lookup(d, format!("v{i}").as_bytes(), &nacre_rpc::msg::Cred::root())
                .await
                .expect("lookup");
        assert_eq!(info.attr.fid, *want);
    }
    fs.verify(&kept).await;
    // The removed files' OST objects are orphans now: the recreated files are empty and
    // reference none. A layout run with -o rebuilds their layouts from the objects
    // (sanity-lfsck.sh 18a), and the names read as they did.
    let rep = fs.check().await;
    let layout = rep.layout.as_ref().expect("layouts checked");
    assert_eq!(layout.orphans.len(), N, "{}", rep.summary());
    let st = fs.lfsck_layout(0, LPF_OST_ORPHAN).await;
    assert_eq!(layout_repaired(&st), counts(&[("orphan", N as u64)]));
    for (i, f) in v.iter().enumerate() {
        assert_eq!(fs.read(*f).await, format!("victim {i}").as_bytes());
    }
    let rep = fs.check().await;
    assert!(rep.is_clean(), "{}", rep.summary());
    fs.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_names_are_put_back_from_the_linkea() {
    let mut fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 10).await;
    let (d, v) = fs.victims("victims", N).await;
    for i in 0..N {
        inject::remove_name(fs.mdt(0), d, format!("v{i}").as_bytes())
            .await
            .expect("inject");
    }
    let rep = fs.check().await;
    assert_eq!(rep.orphans.len(), N, "{}", rep.summary());
    roundtrip(&fs, 0, &[("lost_dirent", N as u64)]).await;
    for (i, want) in v.iter().enumerate() {
        let info =
            fs.c.lookup(d, format!("v{i}").as_bytes(), &nacre_rpc::msg::Cred::root())
                .await
                .expect("lookup");
        assert_eq!(info.attr.fid, *want);
        assert_eq!(fs.read(*want).await, format!("victim {i}").as_bytes());
    }
    fs.verify(&kept).await;
    let rep = fs.check().await;
    assert!(rep.is_clean(), "{}", rep.summary());
    fs.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forgotten_and_corrupt_linkea_entries_are_rebuilt_from_the_names() {
    let mut fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 10).await;
    let (_, v) = fs.victims("victims", N).await;
    for f in &v[..2] {
        inject::drop_links(fs.mdt(0), *f).await.expect("inject");
    }
    for f in &v[2..] {
        inject::corrupt_link_name(fs.mdt(0), *f)
            .await
            .expect("inject");
    }
    let rep = fs.check().await;
    // Two names missing from their linkEA; three missing and three linkEA entries that
    // name nothing.
    assert_eq!(rep.bad_links.len(), 2 + 2 * (N - 2), "{}", rep.summary());
    roundtrip(&fs, 0, &[("linkea", (2 + 2 * (N - 2)) as u64)]).await;
    fs.verify(&kept).await;
    let rep = fs.check().await;
    assert!(rep.is_clean(), "{}", rep.summary());
    fs.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_go_to_lost_and_found() {
    let mut fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 10).await;
    let (d, v) = fs.victims("victims", N).await;
    for i in 0..N {
        inject::orphan_object(fs.mdt(0), d, format!("v{i}").as_bytes())
            .await
            .expect("inject");
    }
    let rep = fs.check().await;
    assert_eq!(rep.orphans.len(), N, "{}", rep.summary());
    roundtrip(&fs, 0, &[("local_lost_found_moved", N as u64)]).await;
    // Each is in .lustre/lost+found/MDT0000 under its FID, contents intact.
    let lpf =
        fs.c.lookup(Fid::LOST_FOUND, b"MDT0000", &nacre_rpc::msg::Cred::root())
            .await
            .expect("lost+found");
    for (i, f) in v.iter().enumerate() {
        let name = format!("{f}-O-0");
        let info =
            fs.c.lookup(lpf.attr.fid, name.as_bytes(), &nacre_rpc::msg::Cred::root())
                .await
                .expect("in lost+found");
        assert_eq!(info.attr.fid, *f);
        assert_eq!(fs.read(*f).await, format!("victim {i}").as_bytes());
    }
    fs.verify(&kept).await;
    let rep = fs.check().await;
    assert!(rep.is_clean(), "{}", rep.summary());
    fs.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extra_names_of_directories_are_removed() {
    let mut fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 10).await;
    let root = fs.c.root();
    let d = fs.mkdir(root, "dirs").await;
    for i in 0..N {
        let sub = fs.mkdir(d, &format!("sub{i}")).await;
        inject::add_name(
            fs.mdt(0),
            root,
            format!("alias{i}").as_bytes(),
            sub,
            FileKind::Directory,
        )
        .await
        .expect("inject");
    }
    let rep = fs.check().await;
    assert_eq!(rep.multiply_referenced.len(), N, "{}", rep.summary());
    // Each extra name also counted a subdirectory the root does not have.
    roundtrip(&fs, 0, &[("multiple_referenced", N as u64), ("nlinks", 1)]).await;
    assert!(
        fs.c.lookup(root, b"alias0", &nacre_rpc::msg::Cred::root())
            .await
            .is_err()
    );
    fs.verify(&kept).await;
    let rep = fs.check().await;
    assert!(rep.is_clean(), "{}", rep.summary());
    fs.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entry_types_follow_their_objects() {
    let mut fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 10).await;
    let (d, _) = fs.victims("victims", N).await;
    for i in 0..N {
        inject::set_dirent_type(fs.mdt(0), d, format!("v{i}").as_bytes(), FileKind::Fifo)
            .await
            .expect("inject");
    }
    let rep = fs.check().await;
    assert_eq!(rep.bad_types.len(), N, "{}", rep.summary());
    roundtrip(&fs, 0, &[("bad_file_type", N as u64)]).await;
    fs.verify(&kept).await;
    let rep = fs.check().await;
    assert!(rep.is_clean(), "{}", rep.summary());
    fs.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn link_counts_follow_the_names() {
    let mut fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 10).await;
    let (d, v) = fs.victims("victims", N).await;
    for f in &v[..3] {
        inject::set_nlink(fs.mdt(0), *f, 7).await.expect("inject");
    }
    let sub = fs.mkdir(d, "sub").await;
    let _ = sub;
    inject::set_nlink(fs.mdt(0), d, 9).await.expect("inject");
    inject::set_nlink(fs.mdt(0), sub, 5).await.expect("inject");
    let rep = fs.check().await;
    assert_eq!(rep.bad_nlink.len(), 5, "{}", rep.summary());
    roundtrip(&fs, 0, &[("nlinks", 5)]).await;
    assert_eq!(fs.c.getattr(v[0]).await.expect("stat").attr.nlink, 1);
    assert_eq!(fs.c.getattr(d).await.expect("stat").attr.nlink, 3);
    fs.verify(&kept).await;
    let rep = fs.check().await;
    assert!(rep.is_clean(), "{}", rep.summary());
    fs.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coupled_and_decoupled_runs_find_the_same_inconsistencies() {
    let fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 40).await;
    let (_, v) = fs.victims("victims", N).await;
    for f in &v[..3] {
        inject::set_nlink(fs.mdt(0), *f, 7).await.expect("inject");
    }
    for f in &v[3..] {
        let so = inject::stripe_object(fs.mdt(0), *f, 0)
            .await
            .expect("stripe");
        inject::corrupt_filter_fid(fs.ost(so.ost_idx), so.fid).expect("inject");
    }
    // A speed limit of 200 objects/s makes windows of 20: the 48 objects take several
    // windows, so a coupled run goes through its lockstep more than once.
    for coupled in [false, true, false, true] {
        let (ns, lo) = fs.lfsck_both(0, LPF_DRYRUN, 200, coupled).await;
        let how = if coupled { "coupled" } else { "decoupled" };
        assert_eq!(repaired(&ns), counts(&[("nlinks", 3)]), "{how}");
        assert_eq!(
            layout_repaired(&lo),
            counts(&[("unmatched_pair", (N - 3) as u64)]),
            "{how}"
        );
        assert_eq!(ns.items_checked, 48, "{how}: namespace objects");
        assert_eq!(lo.checked_phase1, 48, "{how}: layout objects");
    }
    fs.verify(&kept).await;
    fs.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_fids_in_dirents_are_rebuilt_from_the_inode() {
    let mut fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 10).await;
    let (d, v) = fs.victims("victims", N).await;
    for i in 0..N {
        inject::corrupt_dirent_fid(fs.mdt(0), d, format!("v{i}").as_bytes())
            .await
            .expect("inject");
    }
    let rep = fs.check().await;
    assert_eq!(rep.bad_dirents.len(), N, "{}", rep.summary());
    roundtrip(&fs, 0, &[("dirent", N as u64)]).await;
    for (i, want) in v.iter().enumerate() {
        let info =
            fs.c.lookup(d, format!("v{i}").as_bytes(), &nacre_rpc::msg::Cred::root())
                .await
                .expect("lookup");
        assert_eq!(info.attr.fid, *want);
    }
    fs.verify(&kept).await;
    let rep = fs.check().await;
    assert!(rep.is_clean(), "{}", rep.summary());
    fs.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directories_with_a_wrong_parent_in_their_linkea_are_unmatched_pairs() {
    let mut fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 10).await;
    let root = fs.c.root();
    let d = fs.mkdir(root, "dirs").await;
    for i in 0..N {
        let sub = fs.mkdir(d, &format!("sub{i}")).await;
        inject::set_dir_link(fs.mdt(0), sub, root, format!("nowhere{i}").as_bytes())
            .await
            .expect("inject");
    }
    let rep = fs.check().await;
    assert_eq!(rep.bad_links.len(), N, "{}", rep.summary());
    roundtrip(&fs, 0, &[("unmatched_pairs", N as u64)]).await;
    fs.verify(&kept).await;
    let rep = fs.check().await;
    assert!(rep.is_clean(), "{}", rep.summary());
    fs.stop().await;
}

/// The dry run, the repair and the second run on every MDT (`-A`).
async fn roundtrip_all(fs: &Fs, flags: u16, want: &[(&'static str, u64)]) {
    // Each MDT's status and counters, for the failure message.
    let each = |all: &[NamespaceStatus]| -> Vec<String> {
        all.iter()
            .enumerate()
            .map(|(i, ns)| format!("MDT{i:04x} {:?} {:?}", ns.status, repaired(ns)))
            .collect()
    };
    let dry = fs.lfsck_all(LPF_DRYRUN | flags).await;
    assert_eq!(
        repaired_all(&dry),
        counts(want),
        "dry run: {:?}",
        each(&dry)
    );
    let fix = fs.lfsck_all(flags).await;
    assert_eq!(repaired_all(&fix), counts(want), "repair: {:?}", each(&fix));
    let again = fs.lfsck_all(flags).await;
    assert_eq!(
        repaired_all(&again),
        counts(&[]),
        "second run: {:?}",
        each(&again)
    );
}

async fn striped(fs: &Fs, name: &str, files: usize) -> (Fid, nacre_core::lmv::Lmv) {
    let info =
        fs.c.mkdir_with_layout(
            fs.c.root(),
            name.as_bytes(),
            0o755,
            &Cred::root(),
            DirLayoutRequest {
                stripe_count: 2,
                stripe_offset: 0,
                mdts: vec![],
                hash_type: 0,
            },
        )
        .await
        .expect("striped mkdir");
    let master = info.attr.fid;
    for i in 0..files {
        fs.write(
            master,
            &format!("f{i}"),
            format!("striped {i}").as_bytes(),
            1,
        )
        .await;
    }
    (master, info.lmv.expect("lmv"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn striped_directory_lmv_slots_are_taken_back_by_their_stripes() {
    let mut fs = Fs::new(2, 2).await;
    let kept = fs.populate("keep", 10).await;
    let mut masters = Vec::new();
    for i in 0..N {
        let (m, _) = striped(&fs, &format!("s{i}"), 4).await;
        inject::corrupt_lmv_slot(fs.mdt(0), m, 1)
            .await
            .expect("inject");
        masters.push(m);
    }
    let rep = fs.check().await;
    assert_eq!(rep.bad_stripes.len(), N, "{}", rep.summary());
    roundtrip_all(&fs, 0, &[("striped_dirs", N as u64)]).await;
    for (i, m) in masters.iter().enumerate() {
        for j in 0..4 {
            let f =
                fs.c.lookup(
                    *m,
                    format!("f{j}").as_bytes(),
                    &nacre_rpc::msg::Cred::root(),
                )
                .await
                .expect("lookup");
            assert_eq!(
                fs.read(f.attr.fid).await,
                format!("striped {j}").as_bytes(),
                "s{i}/f{j}"
            );
        }
    }
    fs.verify(&kept).await;
    let rep = fs.check().await;
    assert!(rep.is_clean(), "{}", rep.summary());
    fs.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripes_recording_the_wrong_index_are_told_by_their_master() {
    let mut fs = Fs::new(2, 2).await;
    let kept = fs.populate("keep", 10).await;
    for i in 0..N {
        let (m, lmv) = striped(&fs, &format!("s{i}"), 2).await;
        let (mdt, s1) = lmv.stripes[1];
        inject::set_stripe_of(fs.mdt(mdt), s1, m, 0)
            .await
            .expect("inject");
    }
    let rep = fs.check().await;
    assert_eq!(rep.bad_stripes.len(), N, "{}", rep.summary());
    roundtrip_all(&fs, 0, &[("striped_shards", N as u64)]).await;
    fs.verify(&kept).await;
    let rep = fs.check().await;
    assert!(rep.is_clean(), "{}", rep.summary());
    fs.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_in_the_wrong_stripe_move_to_the_stripe_their_hash_picks() {
    let mut fs = Fs::new(2, 2).await;
    let kept = fs.populate("keep", 10).await;
    let (m, lmv) = striped(&fs, "s", 0).await;
    let mut moved = Vec::new();
    let mut i = 0;
    while moved.len() < N {
        let name = format!("n{i}");
        i += 1;
        let f = fs.write(m, &name, name.as_bytes(), 1).await;
        let idx = lmv.hash().stripe_index(name.as_bytes(), 2) as usize;
        let (from_mdt, from) = lmv.stripes[idx];
        let (to_mdt, to) = lmv.stripes[1 - idx];
        let obj_mdt = nacre_core::fid::mdt_of_seq(f.seq).unwrap_or(0);
        inject::misplace_name(
            fs.mdt(from_mdt),
            fs.mdt(to_mdt),
            fs.mdt(obj_mdt),
            from,
            name.as_bytes(),
            to,
        )
        .await
        .expect("inject");
        moved.push((name, f));
    }
    let rep = fs.check().await;
    assert_eq!(rep.misplaced_names.len(), N, "{}", rep.summary());
    roundtrip_all(&fs, 0, &[("name_hash", N as u64)]).await;
    for (name, f) in &moved {
        let info =
            fs.c.lookup(m, name.as_bytes(), &nacre_rpc::msg::Cred::root())
                .await
                .expect("lookup");
        assert_eq!(info.attr.fid, *f);
        assert_eq!(fs.read(*f).await, name.as_bytes());
    }
    fs.verify(&kept).await;
    let rep = fs.check().await;
    assert!(rep.is_clean(), "{}", rep.summary());
    fs.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_entries_get_their_linkea_back_from_the_mdt_holding_the_name() {
    let mut fs = Fs::new(2, 2).await;
    let kept = fs.populate("keep", 10).await;
    let root = fs.c.root();
    let mut remote = Vec::new();
    for i in 0..N {
        let info =
            fs.c.mkdir_with_layout(
                root,
                format!("r{i}").as_bytes(),
                0o755,
                &Cred::root(),
                DirLayoutRequest {
                    stripe_count: 1,
                    stripe_offset: 1,
                    mdts: vec![],
                    hash_type: 0,
                },
            )
            .await
            .expect("remote mkdir");
        assert_eq!(nacre_core::fid::mdt_of_seq(info.attr.fid.seq), Some(1));
        inject::drop_links(fs.mdt(1), info.attr.fid)
            .await
            .expect("inject");
        remote.push(info.attr.fid);
    }
    let rep = fs.check().await;
    assert_eq!(rep.bad_links.len(), N, "{}", rep.summary());
    roundtrip_all(&fs, 0, &[("agent_entries", N as u64)]).await;
    // `..` of each works again (it comes from the linkEA).
    for f in &remote {
        let up =
            fs.c.lookup(*f, b"..", &nacre_rpc::msg::Cred::root())
                .await
                .expect("dotdot");
        assert_eq!(up.attr.fid, root);
    }
    fs.verify(&kept).await;
    let rep = fs.check().await;
    assert!(rep.is_clean(), "{}", rep.summary());
    fs.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_prepared_for_a_coordinator_that_does_not_exist_are_undone() {
    let mut fs = Fs::new(2, 2).await;
    let kept = fs.populate("keep", 10).await;
    let base = nacre_core::fid::super_seq_start(1) + 1000;
    for i in 0..N {
        inject::stale_dne_record(fs.mdt(1), 7, Fid::new(base, i as u32 + 1, 0))
            .await
            .expect("inject");
    }
    let rep = fs.check().await;
    assert_eq!(rep.pending, N as u64, "{}", rep.summary());
    roundtrip_all(&fs, 0, &[("dne_records", N as u64)]).await;
    fs.verify(&kept).await;
    let rep = fs.check().await;
    assert!(rep.is_clean(), "{}", rep.summary());
    fs.stop().await;
}

/// A directory loop is invisible to the online checks (every name and linkEA agrees);
/// `nacre check` sees it from the root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_offline_checker_finds_directories_cut_off_from_the_root() {
    let mut fs = Fs::new(1, 2).await;
    let root = fs.c.root();
    let a = fs.mkdir(root, "a").await;
    let b = fs.mkdir(a, "b").await;
    inject::loop_dirs(fs.mdt(0), root, b"a")
        .await
        .expect("inject");
    let rep = fs.check().await;
    let mut want = vec![a, b];
    want.sort();
    assert_eq!(rep.disconnected, want, "{}", rep.summary());
    // The root lost a subdirectory it still counts, b gained one it does not.
    assert_eq!(rep.bad_nlink.len(), 2, "{}", rep.summary());
    assert!(!rep.is_clean());
    fs.stop().await;
}

/// Waits while MDT `i`'s checker runs, at most a minute.
async fn wait_done(fs: &Fs, i: u32) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while fs.checker(i).running() {
        assert!(std::time::Instant::now() < end, "LFSCK did not end");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_run_resumes_where_it_was_and_a_paused_one_after_a_restart() {
    use nacre_lustreapi::lfsck::{LSV_SPEED_LIMIT, LfsckStatus, TYPE_NAMESPACE};
    use nacre_rpc::lfsck::StartArgs;
    let mut fs = Fs::new(1, 1).await;
    let d = fs.mkdir(fs.c.root(), "many").await;
    for i in 0..300 {
        fs.write(d, &format!("f{i}"), b"", 1).await;
    }
    let total = 302; // the files, their directory, the root
    let slow = StartArgs {
        active: TYPE_NAMESPACE,
        valid: LSV_SPEED_LIMIT,
        speed_limit: 60,
        ..StartArgs::default()
    };
    // -s: at 60 objects a second the scan is still going after a second.
    fs.checker(0).start(slow.clone()).await.expect("start");
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let text = fs.checker(0).namespace_text();
    assert!(text.contains("status: scanning-phase1\n"), "{text}");
    assert!(text.contains("real_time_speed_phase1: "), "{text}");
    fs.checker(0).stop(false).await.expect("stop");
    let st = fs.checker(0).state.lock().ns.clone();
    assert_eq!(st.status, LfsckStatus::Stopped);
    let pos = st.pos_last_checkpoint.oit_cookie;
    assert!(st.items_checked > 0 && st.items_checked < total, "{st:?}");
    assert!(pos > 0);
    // Started again without -r: from the checkpoint, counting on.
    let fast = StartArgs {
        speed_limit: 0,
        ..slow.clone()
    };
    fs.checker(0).start(fast.clone()).await.expect("resume");
    wait_done(&fs, 0).await;
    let st = fs.checker(0).state.lock().ns.clone();
    assert_eq!(st.status, LfsckStatus::Completed);
    assert_eq!(st.pos_latest_start.oit_cookie, pos);
    assert_eq!(st.items_checked, total, "every object once");

    // An MDT that stops mid-run pauses the check; it resumes when the MDT is back.
    fs.checker(0)
        .start(StartArgs {
            flags: nacre_lustreapi::lfsck::LPF_RESET,
            ..slow
        })
        .await
        .expect("start");
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    fs.cl.as_mut().expect("cluster").stop_mdt(0).await;
    fs.cl
        .as_mut()
        .expect("cluster")
        .start_mdt(0)
        .await
        .expect("restart");
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    // It resumed at the speed it was given: lift the limit.
    fs.checker(0)
        .speed_limit
        .store(0, std::sync::atomic::Ordering::Relaxed);
    wait_done(&fs, 0).await;
    let st = fs.checker(0).state.lock().ns.clone();
    assert_eq!(st.status, LfsckStatus::Completed, "{st:?}");
    assert!(
        st.pos_latest_start.oit_cookie > 0,
        "resumed from its checkpoint"
    );
    assert_eq!(st.items_checked, total);
    fs.stop().await;
}

/// `lctl lfsck_start`, `lfsck_query -w` and `get_param mdd.*.lfsck_namespace` on a file
/// system brought up with `nacre up` and mounted, while a client keeps creating and
/// writing files: the run completes, repairs nothing, and the kept files read back.
#[test]
fn lctl_checks_a_mounted_file_system_while_a_client_writes() {
    const WRITES_WHILE_CHECKING: u32 = 300;
    if !common::require_fuse() {
        return;
    }
    let fs = common::UpFs::new(&[]);
    let d = fs.path("busy");
    std::fs::create_dir(&d).expect("mkdir");
    for i in 0..200 {
        std::fs::write(d.join(format!("f{i}")), format!("kept {i}")).expect("write");
    }
    // A bounded number of new files: a scan that meets objects created faster than
    // its speed limit lets it check would otherwise chase them.
    let writer = {
        let d = d.clone();
        std::thread::spawn(move || {
            for n in 0..WRITES_WHILE_CHECKING {
                std::fs::write(d.join(format!("w{n}")), vec![7u8; 4096])
                    .expect("a write while the check runs");
            }
        })
    };
    // Slowed down (-s) so the writer overlaps the scan.
    let out = common::ok(&["lctl", "lfsck_start", "-t", "namespace", "-s", "500"]);
    assert!(out.starts_with("Started LFSCK on the device "), "{out}");
    assert!(out.ends_with("-MDT0000: scrub namespace\n"), "{out}");
    let q = common::ok(&["lctl", "lfsck_query", "-w", "-t", "namespace"]);
    writer.join().expect("writer");
    assert!(q.contains("namespace_mdts_completed: 1\n"), "{q}");
    assert!(q.contains("namespace_repaired: 0\n"), "{q}");
    let text = common::ok(&["lctl", "get_param", "-n", "mdd.*.lfsck_namespace"]);
    let keys: Vec<&str> = text
        .lines()
        .map(|l| l.split(':').next().unwrap_or_default())
        .collect();
    // Lustre's fields, in Lustre's order.
    assert_eq!(
        keys[..6],
        ["name", "magic", "version", "status", "flags", "param"],
        "{text}"
    );
    assert!(text.contains("status: completed\n"), "{text}");
    let repaired: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("_repaired: ") && !l.ends_with(": 0"))
        .collect();
    assert!(repaired.is_empty(), "false repairs: {repaired:?}\n{text}");
    let checked = text
        .lines()
        .find_map(|l| l.strip_prefix("checked_phase1: "))
        .and_then(|v| v.parse::<u64>().ok())
        .expect("checked_phase1");
    assert!(checked >= 202, "{text}");
    for i in 0..200 {
        let got = std::fs::read_to_string(d.join(format!("f{i}"))).expect("read");
        assert_eq!(got, format!("kept {i}"));
    }
    for n in 0..WRITES_WHILE_CHECKING {
        assert_eq!(
            std::fs::metadata(d.join(format!("w{n}")))
                .expect("written")
                .len(),
            4096
        );
    }
    fs.down();
}

/// `lctl lfsck_start -t layout`, `lfsck_query -w` and `get_param mdd.*.lfsck_layout` on a
/// file system brought up with `nacre up` and mounted, while a client keeps writing: the
/// run completes and repairs nothing.
#[test]
fn lctl_checks_layouts_of_a_mounted_file_system_while_a_client_writes() {
    const WRITES_WHILE_CHECKING: u32 = 300;
    if !common::require_fuse() {
        return;
    }
    let fs = common::UpFs::new(&[]);
    let d = fs.path("busy");
    std::fs::create_dir(&d).expect("mkdir");
    for i in 0..200 {
        std::fs::write(d.join(format!("f{i}")), format!("kept {i}")).expect("write");
    }
    let writer = {
        let d = d.clone();
        std::thread::spawn(move || {
            for n in 0..WRITES_WHILE_CHECKING {
                std::fs::write(d.join(format!("w{n}")), vec![7u8; 4096])
                    .expect("a write while the check runs");
            }
        })
    };
    let out = common::ok(&["lctl", "lfsck_start", "-t", "layout", "-s", "500"]);
    assert!(out.ends_with("layout\n"), "{out}");
    let q = common::ok(&["lctl", "lfsck_query", "-w", "-t", "layout"]);
    writer.join().expect("writer");
    assert!(q.contains("layout_mdts_completed: 1\n"), "{q}");
    assert!(q.contains("layout_repaired: 0\n"), "{q}");
    let text = common::ok(&["lctl", "get_param", "-n", "mdd.*.lfsck_layout"]);
    assert!(text.starts_with("name: lfsck_layout\n"), "{text}");
    assert!(text.contains("status: completed\n"), "{text}");
    let repaired: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("repaired_") && !l.ends_with(": 0"))
        .collect();
    assert!(repaired.is_empty(), "false repairs: {repaired:?}\n{text}");
    for i in 0..200 {
        let got = std::fs::read_to_string(d.join(format!("f{i}"))).expect("read");
        assert_eq!(got, format!("kept {i}"));
    }
    fs.down();
}
