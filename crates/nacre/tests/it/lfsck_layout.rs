//! The layout LFSCK on a live file system, one inconsistency class at a time (the
//! scenarios of Lustre's sanity-lfsck.sh 11, 14–18): inject N, a dry run reports exactly
//! N, a repair fixes N, a second run finds nothing, and the files nobody touched keep
//! their contents.

use crate::common;

use bytes::Bytes;

use common::lfsck::{Fs, Kept, counts, layout_repaired};
use nacre_core::Fid;
use nacre_lfsck::inject;
use nacre_lustreapi::lfsck::{LPF_CREATE_OSTOBJ, LPF_DRYRUN, LPF_OST_ORPHAN};
use nacre_rpc::msg::Cred;
use std::collections::BTreeMap;

const N: usize = 5;

/// Waits until the MDT trusts the sizes of `files` (settled after their last close): a
/// stripe is known to hold data only from an exact size.
/// A settle after an OST was stopped waits out a request to it (up to the 30 s recovery
/// timeout) on a loaded two-core machine. One that failed is tried again when the file
/// is next looked at, so the wait stats the files still unsettled, as `ls -l` would.
async fn settled(fs: &Fs, files: &[Fid]) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let mut next_stat = std::time::Instant::now();
    loop {
        let unsettled: Vec<Fid> = {
            let mut v = fs.mdt(0).store().read().expect("read");
            files
                .iter()
                .filter(|f| !nacre_mdt::mdd::get_inode(&mut v, f).is_ok_and(|i| i.lsom_valid))
                .copied()
                .collect()
        };
        if unsettled.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < end,
            "sizes never settled: {unsettled:?}"
        );
        if std::time::Instant::now() >= next_stat {
            for f in &unsettled {
                // A glimpse that fails (an OST still coming back) is tried at the next.
                let _ = fs.c.getattr(*f).await;
            }
            next_stat = std::time::Instant::now() + std::time::Duration::from_secs(1);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// What `nacre check` finds on the stopped stores: the classes of its layout checks that
/// it counted, and how many of each.
async fn offline(fs: &mut Fs) -> BTreeMap<&'static str, usize> {
    let rep = fs.check().await;
    let l = rep.layout.expect("the layouts were checked");
    assert!(l.unchecked_osts.is_empty(), "{}", l.summary());
    [
        ("dangling", l.dangling.len()),
        ("unmatched_pair", l.unmatched.len()),
        ("multiple_referenced", l.multiply_referenced.len()),
        ("inconsistent_owner", l.bad_owner.len()),
        ("orphan", l.orphans.len()),
        ("last_id_behind", l.last_id_behind.len()),
    ]
    .into_iter()
    .filter(|(_, n)| *n > 0)
    .collect()
}

/// What every case ends with: the files nobody touched read back as written, `nacre
/// check` on the stopped stores finds nothing wrong with the namespace or the layouts
/// the repairs left, and the file system stops.
async fn end(mut fs: Fs, kept: &[Kept]) {
    fs.verify(kept).await;
    let rep = fs.check().await;
    assert!(rep.is_clean(), "{}", rep.summary());
    fs.stop().await;
}

/// The dry run, the repair and the second run, with the counters each must show.
async fn roundtrip(fs: &Fs, flags: u16, want: &[(&'static str, u64)]) {
    let dry = fs.lfsck_layout(0, LPF_DRYRUN | flags).await;
    assert_eq!(layout_repaired(&dry), counts(want), "dry run");
    let fix = fs.lfsck_layout(0, flags).await;
    assert_eq!(layout_repaired(&fix), counts(want), "repair");
    let again = fs.lfsck_layout(0, flags).await;
    assert_eq!(layout_repaired(&again), counts(&[]), "second run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_file_system_has_no_layout_inconsistency() {
    let fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 20).await;
    let st = fs.lfsck_layout(0, LPF_CREATE_OSTOBJ | LPF_OST_ORPHAN).await;
    assert_eq!(layout_repaired(&st), counts(&[]));
    // The root, the directory and the files in phase 1. Phase 1 found every object
    // holding data referenced by its stripe, so the orphan scan passes over all of them
    // (Lustre's accessed bitmap) and checks none.
    assert_eq!(st.checked_phase1, 22);
    assert_eq!(st.checked_phase2, 0);
    let text = fs.checker(0).layout_text();
    let keys: Vec<&str> = text.lines().filter_map(|l| l.split(':').next()).collect();
    assert_eq!(
        keys,
        [
            "name",
            "magic",
            "version",
            "status",
            "flags",
            "param",
            "last_completed_time",
            "time_since_last_completed",
            "latest_start_time",
            "time_since_latest_start",
            "last_checkpoint_time",
            "time_since_last_checkpoint",
            "latest_start_position",
            "last_checkpoint_position",
            "first_failure_position",
            "success_count",
            "repaired_dangling",
            "repaired_unmatched_pair",
            "repaired_multiple_referenced",
            "repaired_orphan",
            "repaired_inconsistent_owner",
            "repaired_others",
            "skipped",
            "failed_phase1",
            "failed_phase2",
            "checked_phase1",
            "checked_phase2",
            "run_time_phase1",
            "run_time_phase2",
            "average_speed_phase1",
            "average_speed_phase2",
            "real_time_speed_phase1",
            "real_time_speed_phase2",
            "current_position",
        ]
    );
    assert!(text.contains("status: completed\n"), "{text}");
    assert!(text.contains("param: orphan,create_ostobj\n"), "{text}");
    end(fs, &kept).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dangling_references_are_reported_and_recreated_with_create_ostobj() {
    let mut fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 10).await;
    let (_, v) = fs.victims("victims", N).await;
    settled(&fs, &v).await;
    for f in &v {
        let so = inject::stripe_object(fs.mdt(0), *f, 0)
            .await
            .expect("stripe");
        inject::remove_ost_object(fs.ost(so.ost_idx), so.fid).expect("inject");
    }
    assert_eq!(offline(&mut fs).await, BTreeMap::from([("dangling", N)]));
    // Without -c a dangling reference is reported, not repaired.
    let plain = fs.lfsck_layout(0, 0).await;
    assert_eq!(layout_repaired(&plain), counts(&[]));
    assert!(
        fs.checker(0)
            .repairs
            .text()
            .contains("found dangling (not repaired, no -c)")
    );
    roundtrip(&fs, LPF_CREATE_OSTOBJ, &[("dangling", N as u64)]).await;
    // Each object is back, empty, and names its file.
    for f in &v {
        let so = inject::stripe_object(fs.mdt(0), *f, 0)
            .await
            .expect("stripe");
        let (size, ff) = fs.ost(so.ost_idx).probe(&so.fid).expect("probe");
        assert_eq!(size, Some(0));
        assert_eq!(ff, Some(f.with_ver(0)));
    }
    end(fs, &kept).await;
}

/// Objects are created with their files, so a lost one is found whatever its file's
/// size says: here the stripe never written of small two-stripe files, whose sizes the
/// MDT has not settled (a layout check used to need an exact size to tell a lost object
/// from one never written).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_object_never_written_is_dangling_too() {
    let mut fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 10).await;
    let d = fs.mkdir(fs.c.root(), "victims").await;
    let mut v = Vec::new();
    for i in 0..N {
        let data = format!("victim {i}").into_bytes();
        v.push((fs.write(d, &format!("v{i}"), &data, 2).await, data));
    }
    for (f, _) in &v {
        let so = inject::stripe_object(fs.mdt(0), *f, 1)
            .await
            .expect("stripe");
        assert_eq!(
            fs.ost(so.ost_idx).probe(&so.fid).expect("probe"),
            (Some(0), None),
            "stripe 1 of {f} was written"
        );
        inject::remove_ost_object(fs.ost(so.ost_idx), so.fid).expect("inject");
    }
    assert_eq!(offline(&mut fs).await, BTreeMap::from([("dangling", N)]));
    roundtrip(&fs, LPF_CREATE_OSTOBJ, &[("dangling", N as u64)]).await;
    for (f, data) in &v {
        let so = inject::stripe_object(fs.mdt(0), *f, 1)
            .await
            .expect("stripe");
        let (size, ff) = fs.ost(so.ost_idx).probe(&so.fid).expect("probe");
        assert_eq!(size, Some(0));
        assert_eq!(ff, Some(f.with_ver(1)));
        assert_eq!(&fs.read(*f).await, data);
    }
    end(fs, &kept).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmatched_filter_fids_are_pointed_back_at_their_files() {
    let mut fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 10).await;
    let (_, v) = fs.victims("victims", N).await;
    for f in &v {
        let so = inject::stripe_object(fs.mdt(0), *f, 0)
            .await
            .expect("stripe");
        inject::corrupt_filter_fid(fs.ost(so.ost_idx), so.fid).expect("inject");
    }
    assert_eq!(
        offline(&mut fs).await,
        BTreeMap::from([("unmatched_pair", N)])
    );
    roundtrip(&fs, LPF_OST_ORPHAN, &[("unmatched_pair", N as u64)]).await;
    for (i, f) in v.iter().enumerate() {
        let so = inject::stripe_object(fs.mdt(0), *f, 0)
            .await
            .expect("stripe");
        let (_, ff) = fs.ost(so.ost_idx).probe(&so.fid).expect("probe");
        assert_eq!(ff, Some(f.with_ver(0)));
        assert_eq!(fs.read(*f).await, format!("victim {i}").as_bytes());
    }
    end(fs, &kept).await;
}

/// sanity-lfsck.sh 16: a chown gives the file's objects its owner (once it is durable);
/// one whose passing to
/// the OST was lost (`OBD_FAIL_LFSCK_BAD_OWNER`) leaves an object owned by someone else,
/// which the layout check finds and gives the file's owner. Objects never given an owner
/// (files nobody chowned, as the population here) are not counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_owner_a_chown_did_not_reach_is_repaired() {
    let mut fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 10).await;
    let (_, v) = fs.victims("victims", N).await;
    let owner = |i: usize| (1000 + i as u32, 2000 + i as u32);
    for (i, f) in v.iter().enumerate() {
        let (uid, gid) = owner(i);
        let attr = nacre_core::SetAttr {
            uid: Some(uid),
            gid: Some(gid),
            ..Default::default()
        };
        fs.c.setattr(*f, attr, &Cred::root(), None)
            .await
            .expect("chown");
    }
    // The owners go to the objects once the chowns are durable (the owner log).
    fs.mdt(0).store().sync().await.expect("sync");
    for (i, f) in v.iter().enumerate() {
        let so = inject::stripe_object(fs.mdt(0), *f, 0)
            .await
            .expect("stripe");
        let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
        // The owner on the object, and the log's record of it gone (a file whose
        // record waits is not counted by the checkers).
        while fs.ost(so.ost_idx).owner(&so.fid).expect("owner") != Some(owner(i))
            || nacre_mdt::owner::owner_pending(&mut fs.mdt(0).store().read().expect("view"), f)
                .expect("read")
        {
            assert!(
                std::time::Instant::now() < end,
                "the chown did not reach the object"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    // Nothing to repair while every object has its file's owner.
    let clean = fs.lfsck_layout(0, LPF_DRYRUN).await;
    assert_eq!(layout_repaired(&clean), counts(&[]));
    for f in &v {
        let so = inject::stripe_object(fs.mdt(0), *f, 0)
            .await
            .expect("stripe");
        inject::change_ost_owner(fs.ost(so.ost_idx), so.fid, 1, 1).expect("inject");
    }
    assert_eq!(
        offline(&mut fs).await,
        BTreeMap::from([("inconsistent_owner", N)])
    );
    roundtrip(&fs, 0, &[("inconsistent_owner", N as u64)]).await;
    for (i, f) in v.iter().enumerate() {
        let so = inject::stripe_object(fs.mdt(0), *f, 0)
            .await
            .expect("stripe");
        assert_eq!(
            fs.ost(so.ost_idx).owner(&so.fid).expect("owner"),
            Some(owner(i))
        );
        assert_eq!(fs.read(*f).await, format!("victim {i}").as_bytes());
    }
    end(fs, &kept).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_object_is_copied_for_the_second_file() {
    let mut fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 10).await;
    let (d, v) = fs.victims("victims", N).await;
    let mut pairs = Vec::new();
    for (i, a) in v.iter().enumerate() {
        let b = fs.write(d, &format!("share{i}"), b"", 1).await;
        inject::share_object(fs.mdt(0), *a, b, 0)
            .await
            .expect("inject");
        pairs.push((*a, b));
    }
    assert_eq!(
        offline(&mut fs).await,
        BTreeMap::from([("multiple_referenced", N)])
    );
    roundtrip(&fs, LPF_OST_ORPHAN, &[("multiple_referenced", N as u64)]).await;
    for (i, (a, b)) in pairs.iter().enumerate() {
        let sa = inject::stripe_object(fs.mdt(0), *a, 0).await.expect("a");
        let sb = inject::stripe_object(fs.mdt(0), *b, 0).await.expect("b");
        assert_ne!(sa, sb, "the second file has its own object");
        let want = format!("victim {i}");
        let copy = fs
            .ost(sb.ost_idx)
            .read(&sb.fid, 0, want.len())
            .expect("read copy");
        assert_eq!(copy, want.as_bytes());
        let (_, ff) = fs.ost(sb.ost_idx).probe(&sb.fid).expect("probe");
        assert_eq!(ff, Some(b.with_ver(0)));
        assert_eq!(fs.read(*a).await, want.as_bytes());
    }
    end(fs, &kept).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_objects_go_back_to_the_stripe_their_filter_fid_names() {
    let mut fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 10).await;
    let (_, v) = fs.victims("victims", N).await;
    // A clean run first: the objects it found referenced must not hide the orphans made
    // after it from the next runs.
    let clean = fs.lfsck_layout(0, LPF_DRYRUN).await;
    assert_eq!(layout_repaired(&clean), counts(&[]));
    assert_eq!(clean.checked_phase2, 0);
    let mut objs = Vec::new();
    for f in &v {
        objs.push(
            inject::stripe_object(fs.mdt(0), *f, 0)
                .await
                .expect("stripe"),
        );
        inject::detach_object(fs.mdt(0), *f, 0)
            .await
            .expect("inject");
    }
    assert_eq!(
        offline(&mut fs).await,
        BTreeMap::from([("dangling", N), ("orphan", N)])
    );
    // Put back even without -c or -o: nothing is created.
    roundtrip(&fs, 0, &[("orphan", N as u64)]).await;
    for (i, f) in v.iter().enumerate() {
        let so = inject::stripe_object(fs.mdt(0), *f, 0)
            .await
            .expect("stripe");
        assert_eq!(so, objs[i]);
        assert_eq!(fs.read(*f).await, format!("victim {i}").as_bytes());
    }
    end(fs, &kept).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_objects_of_lost_files_go_to_lost_and_found_with_orphan() {
    let mut fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 10).await;
    // Parents on MDT0 that no file has.
    let base = kept[0].fid;
    let mut made = Vec::new();
    for i in 0..N {
        let parent = Fid::new(base.seq, base.oid + 100_000 + i as u32, 0);
        let data = format!("lost data {i}");
        let ost = (i % 2) as u32;
        let hit = inject::orphan_ost_object(fs.mdt(0), fs.ost(ost), ost, parent, data.as_bytes())
            .await
            .expect("inject");
        made.push((parent, hit.fid, data));
    }
    assert_eq!(offline(&mut fs).await, BTreeMap::from([("orphan", N)]));
    // Without -o an orphan is reported, not moved.
    let plain = fs.lfsck_layout(0, 0).await;
    assert_eq!(layout_repaired(&plain), counts(&[]));
    roundtrip(&fs, LPF_OST_ORPHAN, &[("orphan", N as u64)]).await;
    let root = Cred::root();
    let lpf =
        fs.c.lookup(Fid::LOST_FOUND, b"MDT0000", &root)
            .await
            .expect("lost+found");
    for (parent, _, data) in &made {
        let name = format!("{parent}-R-0");
        let info =
            fs.c.lookup(lpf.attr.fid, name.as_bytes(), &root)
                .await
                .expect("in lost+found");
        assert_eq!(fs.read(info.attr.fid).await, data.as_bytes());
    }
    end(fs, &kept).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_last_id_behind_its_objects_is_put_back() {
    let fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 10).await;
    let mut highest = Vec::new();
    for ost in 0..2u32 {
        let seq = fs.mdt(0).lod().osp(ost).expect("osp").seq();
        let s = fs.ost(ost);
        let top = (0..nacre_osd::objstore::OBJ_SUBDIRS)
            .flat_map(|d| s.objects_in(seq, d).expect("list"))
            .max()
            .expect("objects");
        inject::rewind_last_id(s, seq, 1).expect("inject");
        highest.push((ost, seq, top));
    }
    roundtrip(&fs, 0, &[("others", 2)]).await;
    for (ost, seq, top) in highest {
        assert!(fs.ost(ost).last_id(seq).expect("last id") >= top);
    }
    // New files after the repair do not land on existing objects.
    let d = fs.mkdir(fs.c.root(), "after").await;
    for i in 0..4 {
        fs.write(d, &format!("n{i}"), b"new", 2).await;
    }
    end(fs, &kept).await;
}

/// Lustre's sanity-lfsck.sh 18b: files whose MDT objects are lost come back in
/// `.lustre/lost+found/MDT0000` as `[FID]-R-<stripe>`, their layouts rebuilt from what
/// their orphan objects keep beside the filter fid: every stripe in its place, the file
/// reading back as written, slots never written left holes that no read reaches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_whose_mdt_objects_are_lost_are_rebuilt_from_their_objects() {
    use nacre_core::layout::{Component, EOF, Layout};
    let mut fs = Fs::new(1, 4).await;
    let kept = fs.populate("keep", 10).await;
    let d = fs.mkdir(fs.c.root(), "lost").await;
    let pfl = Layout::composite(vec![
        Component::raid0(0, 128 << 10, 1, 65536, -1),
        Component::raid0(128 << 10, EOF, 2, 65536, -1),
    ]);
    // (name, data, layout, objects holding data)
    let cases = [
        (
            "full",
            common::cluster::pattern(300_000, 7),
            Layout::plain(4, 65536, -1),
            4,
        ),
        (
            "short",
            common::cluster::pattern(100_000, 8),
            Layout::plain(4, 65536, -1),
            2,
        ),
        ("pfl", common::cluster::pattern(400_000, 9), pfl, 3),
    ];
    let mut lost = Vec::new();
    for (name, data, layout, _) in &cases {
        let f = fs.write_layout(d, name, data, layout.clone()).await;
        settled(&fs, &[f]).await;
        lost.push(f);
    }
    for ((name, ..), f) in cases.iter().zip(&lost) {
        inject::remove_name(fs.mdt(0), d, name.as_bytes())
            .await
            .expect("inject");
        inject::remove_object(fs.mdt(0), *f).await.expect("inject");
    }
    let orphans: usize = cases.iter().map(|c| c.3).sum();
    assert_eq!(
        offline(&mut fs).await,
        BTreeMap::from([("orphan", orphans)])
    );
    roundtrip(&fs, LPF_OST_ORPHAN, &[("orphan", orphans as u64)]).await;
    let root = Cred::root();
    let lpf =
        fs.c.lookup(Fid::LOST_FOUND, b"MDT0000", &root)
            .await
            .expect("lost+found");
    for ((name, data, ..), f) in cases.iter().zip(&lost) {
        let info =
            fs.c.lookup(lpf.attr.fid, format!("{f}-R-0").as_bytes(), &root)
                .await
                .unwrap_or_else(|e| panic!("{name} not in lost+found: {e:?}"));
        assert_eq!(info.attr.fid, *f, "{name} keeps its FID");
        assert_eq!(info.attr.mode, libc::S_IFREG | 0o400, "{name}");
        assert_eq!(info.attr.size, data.len() as u64, "{name}");
        assert!(fs.read(*f).await == *data, "{name} reads back as written");
    }
    end(fs, &kept).await;
}

/// Lustre's sanity-lfsck.sh 20a: lost files whose orphans lack a stripe come back with
/// a hole in their layout (`LOV_PATTERN_F_HOLE`) where the lost object was: the stripe
/// count and size are kept, reading or writing the lost stripe fails with EIO (every
/// other block reads), an append fails (the tail is not known), and chown, touch and
/// unlink work. A file with all its objects comes back without a hole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuilt_layout_keeps_a_hole_where_an_object_was_lost() {
    use nacre_core::attr::SetTime;
    use nacre_core::{Errno, SetAttr};
    const BLOCK: u64 = 4096;
    // 256 blocks on stripe 0, 256 on stripe 1, one on stripe 2 (1 MiB stripes).
    const BLOCKS: u64 = 513;
    let mut fs = Fs::new(1, 3).await;
    let kept = fs.populate("keep", 10).await;
    let d = fs.mkdir(fs.c.root(), "a1").await;
    let data = common::cluster::pattern((BLOCK * BLOCKS) as usize, 20);
    let mut lost = Vec::new();
    for name in ["f0", "f1", "f2"] {
        let f = fs
            .write_layout(d, name, &data, nacre_core::Layout::plain(3, 1 << 20, 0))
            .await;
        settled(&fs, &[f]).await;
        lost.push(f);
    }
    // f1 loses its stripe 0 object, f2 its stripe 1 object; all three their MDT objects.
    for (f, stripe) in [(lost[1], 0), (lost[2], 1)] {
        let so = inject::stripe_object(fs.mdt(0), f, stripe)
            .await
            .expect("stripe");
        inject::remove_ost_object(fs.ost(so.ost_idx), so.fid).expect("inject");
    }
    for (name, f) in ["f0", "f1", "f2"].iter().zip(&lost) {
        inject::remove_name(fs.mdt(0), d, name.as_bytes())
            .await
            .expect("inject");
        inject::remove_object(fs.mdt(0), *f).await.expect("inject");
    }
    assert_eq!(offline(&mut fs).await, BTreeMap::from([("orphan", 7)]));
    roundtrip(&fs, LPF_OST_ORPHAN, &[("orphan", 7)]).await;
    let root = Cred::root();
    let lpf =
        fs.c.lookup(Fid::LOST_FOUND, b"MDT0000", &root)
            .await
            .expect("lost+found");
    let flags = |append| nacre_rpc::msg::OpenFlags {
        read: true,
        write: true,
        truncate: false,
        append,
    };
    for (i, f) in lost.iter().enumerate() {
        let name = format!("{f}-R-0");
        let info =
            fs.c.lookup(lpf.attr.fid, name.as_bytes(), &root)
                .await
                .unwrap_or_else(|e| panic!("f{i} not in lost+found: {e:?}"));
        let layout = info.layout.clone().expect("a layout");
        assert_eq!(layout.components[0].objects.len(), 3, "f{i}: stripe count");
        assert_eq!(info.attr.size, BLOCK * BLOCKS, "f{i}: size");
        let (f_, _) = fs.c.open(*f, flags(false), &root).await.expect("open");
        let whole = fs.c.read(&f_, 0, BLOCK * BLOCKS).await;
        // Block by block, as `dd conv=sync,noerror` reads it.
        let mut failed = Vec::new();
        for b in 0..BLOCKS {
            match fs.c.read(&f_, b * BLOCK, BLOCK).await {
                Ok(got) => assert!(
                    got[..] == data[(b * BLOCK) as usize..((b + 1) * BLOCK) as usize],
                    "f{i}: block {b} read back wrong"
                ),
                Err(Errno::EIO) => failed.push(b),
                Err(e) => panic!("f{i}: block {b}: {e:?}"),
            }
        }
        let at = |b: u64| b * BLOCK;
        match i {
            0 => {
                assert!(!layout.has_hole(), "f0 had every object");
                assert!(whole.expect("f0 reads")[..] == data[..]);
                assert!(failed.is_empty(), "f0: {failed:?}");
            }
            _ => {
                let hole = if i == 1 { 0 } else { 1 };
                assert!(layout.has_hole(), "f{i}: no hole flag");
                assert!(layout.components[0].objects[hole].is_dummy(), "f{i}");
                assert_eq!(whole.err(), Some(Errno::EIO), "f{i}: a whole read");
                let want: Vec<u64> = (hole as u64 * 256..(hole as u64 + 1) * 256).collect();
                assert_eq!(
                    failed, want,
                    "f{i}: the blocks of stripe {hole} and no other"
                );
                let (in_hole, in_stripe) = if i == 1 { (0, 300) } else { (300, 0) };
                let zeros = Bytes::from(vec![0u8; BLOCK as usize]);
                assert_eq!(
                    fs.c.write(&f_, at(in_hole), zeros.clone()).await.err(),
                    Some(Errno::EIO),
                    "f{i}: a write to the hole"
                );
                fs.c.write(&f_, at(in_stripe), zeros)
                    .await
                    .unwrap_or_else(|e| panic!("f{i}: a write to a stripe kept: {e:?}"));
            }
        }
        fs.c.release(&f_).await.expect("close");
        let (fa, _) = fs.c.open(*f, flags(true), &root).await.expect("open");
        let appended =
            fs.c.write(&fa, BLOCK * BLOCKS, Bytes::from_static(b"dummy\n"))
                .await;
        fs.c.release(&fa).await.expect("close");
        match i {
            0 => assert!(appended.is_ok(), "f0: append: {appended:?}"),
            _ => assert_eq!(appended.err(), Some(Errno::EIO), "f{i}: an append"),
        }
        let chown = SetAttr {
            uid: Some(500),
            gid: Some(500),
            ..SetAttr::default()
        };
        fs.c.setattr(*f, chown, &root, None)
            .await
            .unwrap_or_else(|e| panic!("f{i}: chown: {e:?}"));
        let touch = SetAttr {
            atime: Some(SetTime::Now),
            mtime: Some(SetTime::Now),
            ..SetAttr::default()
        };
        fs.c.setattr(*f, touch, &root, None)
            .await
            .unwrap_or_else(|e| panic!("f{i}: touch: {e:?}"));
        fs.c.unlink(lpf.attr.fid, name.as_bytes(), &root)
            .await
            .unwrap_or_else(|e| panic!("f{i}: unlink: {e:?}"));
    }
    end(fs, &kept).await;
}

/// A lost file with a Data-on-MDT part comes back from its OST objects with a hole where
/// that part was: its bytes went with the MDT object, so reading or writing them fails
/// with EIO rather than reading zeros, while the bytes on the OSTs read back as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuilt_file_whose_data_on_mdt_part_was_lost_has_a_hole_there() {
    use nacre_core::Errno;
    use nacre_core::layout::{Component, EOF, Layout};
    const DOM: u64 = 64 << 10;
    let mut fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 10).await;
    let d = fs.mkdir(fs.c.root(), "lost").await;
    let layout = Layout::composite(vec![
        Component::dom(DOM),
        Component::raid0(DOM, EOF, 2, 65536, -1),
    ]);
    // 64 KiB on the MDT, then both OST stripes hold data.
    let data = common::cluster::pattern(300_000, 11);
    let f = fs.write_layout(d, "dom", &data, layout).await;
    let (lpf, info) = lost_and_rebuilt(&mut fs, d, "dom", f, 2).await;
    let root = Cred::root();
    assert_eq!(info.attr.size, data.len() as u64);
    let rebuilt = info.layout.expect("a layout");
    assert!(rebuilt.has_hole(), "{rebuilt:?}");
    assert_eq!(
        (rebuilt.components[0].start, rebuilt.components[0].end),
        (0, DOM)
    );
    let (h, _) = fs.c.open(f, rw_flags(), &root).await.expect("open");
    assert_eq!(
        fs.c.read(&h, 0, 4096).await.err(),
        Some(Errno::EIO),
        "the lost Data-on-MDT bytes"
    );
    let rest =
        fs.c.read(&h, DOM, data.len() as u64)
            .await
            .expect("the OST part");
    assert!(
        rest[..] == data[DOM as usize..],
        "the OST part reads back as written"
    );
    assert_eq!(
        fs.c.write(&h, 0, Bytes::from_static(b"x")).await.err(),
        Some(Errno::EIO),
        "a write to the lost part"
    );
    fs.c.release(&h).await.expect("close");
    fs.c.unlink(lpf, format!("{f}-R-0").as_bytes(), &root)
        .await
        .expect("unlink");
    end(fs, &kept).await;
}

/// A lost mirrored (FLR) file comes back with both its mirrors from their objects: one
/// in sync, the other stale (which mirror held the newest data is not on the objects),
/// reading as written; `lfs mirror resync` makes the mirrors equal and `lfs mirror
/// verify` agrees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_mirrored_file_comes_back_with_its_mirrors() {
    use nacre_core::layout::EOF;
    let mut fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 10).await;
    let d = fs.mkdir(fs.c.root(), "lost").await;
    let data = common::cluster::pattern(300_000, 12);
    let m = common::integrity::write_file(&fs.c, d, "m", Some(two_mirrors([0, 1])), &data)
        .await
        .expect("mirrored file");
    let (lpf, info) = lost_and_rebuilt(&mut fs, d, "m", m, 2).await;
    let root = Cred::root();
    let name = format!("{m}-R-0");
    assert_eq!(info.attr.size, data.len() as u64);
    let layout = info.layout.expect("a layout");
    assert_eq!(layout.mirror_ids(), vec![1, 2], "{layout:?}");
    assert!(!layout.has_hole());
    assert_eq!(layout.read_mirrors(0, EOF), vec![1], "one mirror in sync");
    assert!(fs.read(m).await == data, "reads back as written");
    fs.c.mirror_resync(m, &[]).await.expect("resync");
    let synced =
        fs.c.getattr(m)
            .await
            .expect("getattr")
            .layout
            .expect("layout");
    assert!(!synced.has_stale(), "{synced:?}");
    let v = fs.c.mirror_verify(m, &[]).await.expect("verify");
    assert!(v.in_sync(), "{v:?}");
    fs.c.unlink(lpf, name.as_bytes(), &root)
        .await
        .expect("unlink");
    end(fs, &kept).await;
}

/// `f`, named `name` in `dir`, loses its name and MDT object; its `orphans` objects are
/// found by `nacre check` and LFSCK (dry run, repair, second run), and the file comes back
/// in lost+found as `[FID]-R-0`: lost+found and the file as found there.
async fn lost_and_rebuilt(
    fs: &mut Fs,
    dir: Fid,
    name: &str,
    f: Fid,
    orphans: usize,
) -> (Fid, nacre_rpc::msg::InodeInfo) {
    settled(fs, &[f]).await;
    inject::remove_name(fs.mdt(0), dir, name.as_bytes())
        .await
        .expect("inject");
    inject::remove_object(fs.mdt(0), f).await.expect("inject");
    assert_eq!(offline(fs).await, BTreeMap::from([("orphan", orphans)]));
    roundtrip(fs, LPF_OST_ORPHAN, &[("orphan", orphans as u64)]).await;
    let root = Cred::root();
    let lpf =
        fs.c.lookup(Fid::LOST_FOUND, b"MDT0000", &root)
            .await
            .expect("lost+found");
    let info =
        fs.c.lookup(lpf.attr.fid, format!("{f}-R-0").as_bytes(), &root)
            .await
            .expect("in lost+found");
    (lpf.attr.fid, info)
}

/// A layout of two one-stripe mirrors, on the OSTs `offsets` name (-1 for any).
fn two_mirrors(offsets: [i32; 2]) -> nacre_core::Layout {
    use nacre_core::layout::{Component, EOF};
    nacre_core::Layout {
        components: (1..=2u32)
            .zip(offsets)
            .map(|(m, at)| {
                let mut c = Component::raid0(0, EOF, 1, 1 << 20, at);
                c.id = nacre_core::layout::pflr_id(m, 0);
                c
            })
            .collect(),
        ..nacre_core::Layout::composite(Vec::new())
    }
}

/// An orphan found after its file's layout was rebuilt without it goes into the hole the
/// rebuild left (Lustre's `lfsck_layout_extend_recovered_lovea`), and the file reads
/// whole again. The object is hidden from the first run by moving its file aside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orphan_found_later_fills_the_hole_its_rebuild_left() {
    let fs = Fs::new(1, 3).await;
    let kept = fs.populate("keep", 10).await;
    let d = fs.mkdir(fs.c.root(), "late").await;
    let data = common::cluster::pattern(3 * 65536 + 100, 21);
    let f = fs.write(d, "f", &data, 3).await;
    settled(&fs, &[f]).await;
    let so = inject::stripe_object(fs.mdt(0), f, 1)
        .await
        .expect("stripe");
    let path = fs.ost(so.ost_idx).object_path(&so.fid);
    let aside = path.with_extension("aside");
    std::fs::rename(&path, &aside).expect("hide the object");
    inject::remove_name(fs.mdt(0), d, b"f")
        .await
        .expect("inject");
    inject::remove_object(fs.mdt(0), f).await.expect("inject");
    let first = fs.lfsck_layout(0, LPF_OST_ORPHAN).await;
    assert_eq!(layout_repaired(&first), counts(&[("orphan", 2)]));
    let root = Cred::root();
    let lpf =
        fs.c.lookup(Fid::LOST_FOUND, b"MDT0000", &root)
            .await
            .expect("lost+found");
    let name = format!("{f}-R-0");
    let info =
        fs.c.lookup(lpf.attr.fid, name.as_bytes(), &root)
            .await
            .expect("rebuilt");
    let layout = info.layout.expect("layout");
    assert!(layout.components[0].objects[1].is_dummy(), "{layout:?}");
    assert_eq!(fs.try_read(f).await.err(), Some(nacre_core::Errno::EIO));
    std::fs::rename(&aside, &path).expect("bring the object back");
    roundtrip(&fs, LPF_OST_ORPHAN, &[("orphan", 1)]).await;
    let info =
        fs.c.lookup(lpf.attr.fid, name.as_bytes(), &root)
            .await
            .expect("rebuilt");
    let layout = info.layout.expect("layout");
    assert!(!layout.has_hole(), "{layout:?}");
    assert_eq!(layout.components[0].objects[1], so);
    assert!(fs.read(f).await == data, "the file reads whole again");
    end(fs, &kept).await;
}

/// `m`, a file of two one-stripe mirrors (on the OSTs `offsets` name, -1 for any)
/// holding `data`, and `v`, an empty file: a `lfs mirror split -f v` to come.
async fn mirrored_and_empty(fs: &Fs, data: &[u8], offsets: [i32; 2]) -> (Fid, Fid) {
    let root = fs.c.root();
    let m = common::integrity::write_file(&fs.c, root, "m", Some(two_mirrors(offsets)), data)
        .await
        .expect("mirrored file");
    let v = common::integrity::write_file(&fs.c, root, "v", None, &[])
        .await
        .expect("empty file");
    (m, v)
}

/// `lfs mirror split -f` while the OST holding the mirror's object is stopped: the swap
/// cannot point the object at its new file, and the OST refuses the new file's writes
/// while the object names the old one (`lfsck_verify_pfid`). The MDT's owner log asks
/// again once the OST is back, so the object names its file within a few seconds, the
/// new file's writes go through, and LFSCK finds nothing to repair.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_a_swap_moved_while_their_ost_was_down_are_given_their_file_when_it_is_back() {
    let mut fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 4).await;
    let data = common::cluster::pattern(300_000, 7);
    // Mirror 1 on OST0, mirror 2 on OST1.
    let (m, v) = mirrored_and_empty(&fs, &data, [0, 1]).await;
    let moved =
        fs.c.getattr(m)
            .await
            .expect("stat")
            .layout
            .expect("layout")
            .components[1]
            .objects[0];
    assert_eq!(moved.ost_idx, 1);
    fs.cl.as_mut().expect("running").stop_ost(1).await;
    // The MDT's half of `lfs mirror split -d 2 -f v` (the client's glimpse of the mirror
    // would wait for OST1), sent as the client sends it, over TCP with the client key.
    let mdt = fs.c.config().mdts[0].addr.clone();
    let conn = nacre_rpc::conn::Conn::connect(
        &mdt,
        &nacre_rpc::conn::ConnConfig {
            fsname: fs.cl().fs.fsname.clone(),
            client: "split".into(),
            key: fs.cl().key.client_key(),
            max_in_flight: 4,
            timeout: std::time::Duration::from_secs(60),
        },
    )
    .await
    .expect("connect to MDT0");
    let split = nacre_rpc::msg::Request::Mirror {
        fid: m,
        op: nacre_rpc::msg::MirrorOp::Split {
            mirror_id: 2,
            victim: Some(v),
        },
        cred: Cred::root(),
    };
    conn.call(&split, Bytes::new()).await.expect("split");
    drop(conn);
    fs.cl
        .as_mut()
        .expect("running")
        .start_ost(1)
        .await
        .expect("start OST1");
    // The client's half of the split: the new file's size.
    let size = nacre_core::SetAttr {
        size: Some(data.len() as u64),
        ..nacre_core::SetAttr::default()
    };
    fs.c.setattr(v, size, &Cred::root(), None)
        .await
        .expect("size of v");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (_, ff) = fs.ost(1).probe(&moved.fid).expect("probe");
        if ff == Some(v) {
            break;
        }
        assert_eq!(ff, Some(m), "the object names neither file");
        assert!(
            std::time::Instant::now() < until,
            "the object still names {m}, not {v}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let more = common::cluster::pattern(100_000, 8);
    fs.try_read(v).await.expect("v reads");
    let (fi, _) = fs.c.open(v, rw_flags(), &Cred::root()).await.expect("open");
    fs.c.write(&fi, 0, Bytes::from(more.clone()))
        .await
        .expect("the new file writes its object");
    fs.c.release(&fi).await.expect("close");
    let mut want = data.clone();
    want[..more.len()].copy_from_slice(&more);
    assert!(fs.read(v).await == want, "v reads back as written");
    settled(&fs, &[m, v]).await;
    let st = fs.lfsck_layout(0, LPF_DRYRUN).await;
    assert_eq!(layout_repaired(&st), counts(&[]));
    end(fs, &kept).await;
}

fn rw_flags() -> nacre_rpc::msg::OpenFlags {
    nacre_rpc::msg::OpenFlags {
        read: true,
        write: true,
        truncate: false,
        append: false,
    }
}

/// `lfs migrate` copies a file into a volatile file's objects and swaps the layouts: the
/// objects then belong to the file, and their filter fids say so (Lustre rewrites them in
/// the swap, `lod_obj_stripe_replace_parent_fid`), before anything writes them again.
/// Otherwise every migrated file is an unmatched pair, and a rebuild after the loss of
/// its MDT object would give its objects to the volatile file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migrated_files_objects_name_the_file() {
    use nacre_core::layout::{Component, EOF};
    let fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 4).await;
    for k in &kept {
        let l = nacre_core::Layout::composite(vec![
            Component::raid0(0, 1 << 20, 1, 1 << 20, -1),
            Component::raid0(1 << 20, EOF, 2, 1 << 20, -1),
        ]);
        fs.c.migrate(k.fid, l, &Cred::root())
            .await
            .expect("migrate");
    }
    // `lfs mirror split -f`: a mirror's objects go to another file, under new ids.
    let data = common::cluster::pattern(300_000, 7);
    let (m, v) = mirrored_and_empty(&fs, &data, [-1, -1]).await;
    fs.c.mirror_split(m, 2, Some(v)).await.expect("split");
    let mut files: Vec<Fid> = kept.iter().map(|k| k.fid).collect();
    files.extend([m, v]);
    settled(&fs, &files).await;
    let st = fs.lfsck_layout(0, LPF_DRYRUN).await;
    assert_eq!(layout_repaired(&st), counts(&[]));
    for f in [m, v] {
        let got = common::integrity::read_file(&fs.c, f, data.len() as u64)
            .await
            .expect("read");
        assert!(got[..] == data[..], "{f} differs after the split");
    }
    end(fs, &kept).await;
}
