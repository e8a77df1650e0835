//! FLR mirrors: `lfs setstripe -N` / `lfs mirror create` layouts as Lustre stores and
//! prints them, immediate writes to every mirror, and reads that survive a bad copy (read
//! from another mirror and rewritten) or a stopped OST.

use crate::common;

use common::cluster::{mount, pattern, start};
use common::integrity::{open_torn_windows, ost, read_file, torn_counts, write_file};
use common::*;
use nacre_core::layout::{Component, EOF, pflr_id};
use nacre_core::{Fid, Layout, StripeObject};
use std::time::Duration;

/// Two mirrors of `stripes` stripes of 64 KiB each, as `lfs mirror create -N2 -c N -S 64K`
/// sends it.
fn two_mirrors(stripes: i32) -> Layout {
    let mut comps = Vec::new();
    for m in 1..=2 {
        let mut c = Component::raid0(0, EOF, stripes, 65536, -1);
        c.id = pflr_id(m, 0);
        comps.push(c);
    }
    Layout {
        components: comps,
        ..Layout::composite(Vec::new())
    }
}

/// The objects of mirror `m` of `fid`, from its MDT.
async fn mirror_objects(c: &nacre_client::Client, fid: Fid, m: u32) -> Vec<StripeObject> {
    let info = c.getattr(fid).await.expect("getattr");
    let l = info.layout.expect("layout");
    l.mirror(m).objects().copied().collect()
}

/// The path of object `obj` in OST `i`'s directory.
fn object_path(dir: &std::path::Path, o: &StripeObject) -> std::path::PathBuf {
    nacre_osd::inject::objects_with_data(&dir.join(format!("ost{}", o.ost_idx)))
        .expect("objects")
        .into_iter()
        .find(|(f, _, _)| *f == o.fid)
        .map(|(_, p, _)| p)
        .expect("object file with data")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_copy_is_read_from_the_other_mirror_and_rewritten() {
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "flrfs", 1, 4).await;
    let c = mount(&cluster).await;
    let data = pattern(300_000, 9);
    let fid = write_file(&c, c.root(), "m", Some(two_mirrors(2)), &data)
        .await
        .expect("write");
    let m1 = mirror_objects(&c, fid, 1).await;
    let m2 = mirror_objects(&c, fid, 2).await;
    assert_eq!((m1.len(), m2.len()), (2, 2));
    // Four OSTs: the mirrors share none.
    assert!(
        m1.iter().all(|a| m2.iter().all(|b| a.ost_idx != b.ost_idx)),
        "{m1:?} {m2:?}"
    );
    // Both mirrors hold every byte (immediate mode).
    let info = c.getattr(fid).await.expect("getattr");
    let l = info.layout.expect("layout");
    for m in [1, 2] {
        let (got, n) = c
            .read_objects(fid, &l.mirror(m), 0, data.len() as u64)
            .await
            .expect("read one mirror");
        assert_eq!(n, data.len() as u64, "mirror {m}");
        assert!(got[..] == data[..], "mirror {m} differs");
    }
    // Damage mirror 1 (the one reads use first) in both of its objects, in the middle
    // and in the partial last block.
    for (o, at) in m1.iter().zip([70_000u64, 150_000 - 65536 - 5]) {
        nacre_osd::inject::flip_bit(&object_path(dir.path(), o), at, 3).expect("flip");
    }
    let got = read_file(&c, fid, data.len() as u64)
        .await
        .expect("read survives a bad copy");
    assert!(got[..] == data[..], "contents differ");
    let repaired: u64 = (0..4)
        .map(|i| c.cksum_stats.get(nacre_core::TargetName::ost(i)).repaired)
        .sum();
    assert!(repaired >= 1, "no repair counted");
    // Mirror 1 alone reads right again: the bad blocks were rewritten.
    let (got, n) = c
        .read_objects(fid, &l.mirror(1), 0, data.len() as u64)
        .await
        .expect("mirror 1 repaired");
    assert_eq!(n, data.len() as u64);
    assert!(got[..] == data[..], "mirror 1 still differs");
    // Scrub finds nothing bad left.
    let before: u64 = (0..4)
        .map(|i| ost(&cluster, i).store().checksum_errors())
        .sum();
    let _ = read_file(&c, fid, data.len() as u64).await.expect("read");
    let after: u64 = (0..4)
        .map(|i| ost(&cluster, i).store().checksum_errors())
        .sum();
    assert_eq!(before, after, "a bad block is still read");
    cluster.stop().await;
}

/// After an OST's crash, a block of an object written after its last commit may fail its
/// checksum only because the crash tore it. With another mirror, that block is read from
/// the mirror and rewritten (not taken as the disk kept it, which may be neither the old
/// bytes nor the new); with every copy torn there, it reads as the first copy kept it
/// rather than EIO, and so does the only copy left when the other's OST is stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_a_crash_tore_is_rewritten_from_the_other_mirror() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut cluster = start(dir.path(), "flrtorn", 1, 4).await;
    let c = mount(&cluster).await;
    let data = pattern(300_000, 5);
    let fid = write_file(&c, c.root(), "m", Some(two_mirrors(2)), &data)
        .await
        .expect("write");
    let l = c
        .getattr(fid)
        .await
        .expect("getattr")
        .layout
        .expect("layout");
    let m1 = mirror_objects(&c, fid, 1).await;
    let m2 = mirror_objects(&c, fid, 2).await;
    open_torn_windows(&cluster, 4);
    // Mirror 1 (read first) torn in its first object.
    nacre_osd::inject::flip_bit(&object_path(dir.path(), &m1[0]), 70_000, 3).expect("flip");
    let got = read_file(&c, fid, data.len() as u64).await.expect("read");
    assert!(got[..] == data[..], "contents differ");
    let (reported, retaken) = torn_counts(&cluster, 4);
    assert!(reported >= 1, "the torn block was not reported");
    assert_eq!(
        retaken, 0,
        "a torn block with a good copy elsewhere was taken as kept"
    );
    // Mirror 1 alone reads the right bytes: rewritten from mirror 2 (taken as kept, it
    // would read with the flipped bit).
    let (got, n) = c
        .read_objects(fid, &l.mirror(1), 0, data.len() as u64)
        .await
        .expect("mirror 1 alone");
    assert_eq!(n, data.len() as u64);
    assert!(got[..] == data[..], "mirror 1 was not rewritten");
    // The same block torn in both mirrors: no good copy, so it reads as mirror 1 kept
    // it, flipped bit and all, and is not an error.
    nacre_osd::inject::flip_bit(&object_path(dir.path(), &m1[0]), 70_000, 3).expect("flip");
    nacre_osd::inject::flip_bit(&object_path(dir.path(), &m2[0]), 70_000, 5).expect("flip");
    let got = read_file(&c, fid, data.len() as u64)
        .await
        .expect("a block torn in every copy reads as kept");
    // Object offset 70,000 of stripe 0 (64 KiB stripes, two of them) is file offset
    // 2 * 64 KiB + (70,000 - 64 KiB).
    let at = 2 * 65536 + (70_000 - 65536);
    // Exactly byte `at` differs from the data written, by bit `bit`.
    let only_flipped = |got: &[u8], bit: u8, who: &str| {
        let differ: Vec<usize> = (0..data.len()).filter(|&i| got[i] != data[i]).collect();
        assert_eq!(differ, vec![at], "only the torn byte differs ({who})");
        assert_eq!(got[at], data[at] ^ (1 << bit), "as {who} kept it");
    };
    only_flipped(&got, 3, "mirror 1");
    let (_, retaken) = torn_counts(&cluster, 4);
    assert!(retaken >= 1, "the block was not taken as kept");
    // Mirror 1's OST stopped, mirror 2's block still torn: read as mirror 2 kept it.
    cluster.stop_ost(m1[0].ost_idx).await;
    let got = tokio::time::timeout(
        Duration::from_secs(20),
        read_file(&c, fid, data.len() as u64),
    )
    .await
    .expect("no wait for the stopped OST")
    .expect("the only copy left, torn, reads as kept");
    only_flipped(&got, 5, "mirror 2");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_survive_a_stopped_ost() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut cluster = start(dir.path(), "flrdown", 1, 2).await;
    let c = mount(&cluster).await;
    let data = pattern(500_000, 4);
    let fid = write_file(&c, c.root(), "m", Some(two_mirrors(1)), &data)
        .await
        .expect("write");
    let m1 = mirror_objects(&c, fid, 1).await;
    let m2 = mirror_objects(&c, fid, 2).await;
    assert_ne!(m1[0].ost_idx, m2[0].ost_idx);
    // The OST of the mirror reads use first goes away: the read goes to the other mirror
    // without waiting out the recovery timeout (30 s), for its size as for its data.
    cluster.stop_ost(m1[0].ost_idx).await;
    let got = tokio::time::timeout(
        Duration::from_secs(10),
        read_file(&c, fid, data.len() as u64),
    )
    .await
    .expect("a read must not wait for the stopped OST")
    .expect("read with an OST stopped");
    assert!(got[..] == data[..], "contents differ");
    cluster.stop().await;
}

/// (lcme_id, lcme_mirror_id, lcme_flags) of each component, from `getstripe` output.
fn entries(gs: &str) -> Vec<(String, String, String)> {
    let field = |p: &str| -> Vec<String> {
        gs.lines()
            .filter_map(|l| l.trim().strip_prefix(p))
            .map(|v| v.trim().to_string())
            .collect()
    };
    let (ids, mids, flags) = (
        field("lcme_id:"),
        field("lcme_mirror_id:"),
        field("lcme_flags:"),
    );
    ids.into_iter()
        .zip(mids)
        .zip(flags)
        .map(|((a, b), c)| (a, b, c))
        .collect()
}

#[test]
fn mirrored_files_are_created_and_printed_as_lustre_does() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&["--osts", "4"]);
    let f = fs.path("m2");
    let fp = f.to_str().expect("utf8");
    lfs(&["setstripe", "-N2", fp]);
    let gs = lfs(&["getstripe", fp]);
    assert!(gs.contains("  lcm_mirror_count:  2\n"), "{gs}");
    assert!(gs.contains("  lcm_entry_count:   2\n"), "{gs}");
    let e = |id: &str, m: &str, fl: &str| (id.to_string(), m.to_string(), fl.to_string());
    assert_eq!(
        entries(&gs),
        vec![e("65537", "1", "init"), e("131074", "2", "init")],
        "{gs}"
    );
    assert_eq!(lfs(&["getstripe", "-N", fp]).trim(), "2");
    let v = lfs(&["getstripe", "-v", fp]);
    assert!(v.contains("  lcm_flags:         ro\n"), "{v}");
    // Each mirror's object on its own OST.
    let ost_of = |m: &str| {
        lfs(&["getstripe", "--mirror-id", m, "-i", fp])
            .trim()
            .to_string()
    };
    assert_ne!(ost_of("1"), ost_of("2"), "{gs}");

    // lfs mirror create with options per mirror and --flags=prefer; data through the mount.
    let g = fs.path("m3");
    let gp = g.to_str().expect("utf8");
    lfs(&[
        "mirror",
        "create",
        "-N",
        "-E",
        "1M",
        "-c",
        "1",
        "-E",
        "eof",
        "-c",
        "2",
        "-N",
        "-c",
        "1",
        "--flags=prefer",
        gp,
    ]);
    let gs = lfs(&["getstripe", gp]);
    assert!(gs.contains("  lcm_mirror_count:  2\n"), "{gs}");
    assert_eq!(
        entries(&gs),
        vec![
            e("65537", "1", "init"),
            e("65538", "1", "0"),
            e("131075", "2", "init,prefer"),
        ],
        "{gs}"
    );
    let data = pattern(3 << 20, 1);
    std::fs::write(&g, &data).expect("write");
    let gs = lfs(&["getstripe", gp]);
    assert_eq!(
        entries(&gs)
            .into_iter()
            .map(|(_, _, f)| f)
            .collect::<Vec<_>>(),
        vec!["init", "init", "init,prefer"],
        "{gs}"
    );
    assert!(std::fs::read(&g).expect("read") == data, "contents differ");
    // Lustre's refusals.
    let err = fail(&[
        "lfs",
        "setstripe",
        "-N17",
        fs.path("x").to_str().expect("utf8"),
    ]);
    assert!(err.contains("bad mirror count: 17"), "{err}");
}

/// `df` with an OST stopped answers at once with the space of the OSTs still up, as
/// Lustre's lov_statfs leaves inactive OSTs out, instead of waiting out the recovery
/// timeout (30 s); with the OST back, its space counts again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statfs_leaves_a_stopped_ost_out() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut cluster = start(dir.path(), "dfdown", 1, 2).await;
    let c = mount(&cluster).await;
    let both = c.statfs().await.expect("statfs");
    cluster.stop_ost(1).await;
    let t = std::time::Instant::now();
    let one = tokio::time::timeout(Duration::from_secs(10), c.statfs())
        .await
        .expect("statfs must not wait out the recovery timeout")
        .expect("statfs with an OST stopped");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(
        one.blocks > 0 && one.blocks < both.blocks,
        "{} of {} blocks",
        one.blocks,
        both.blocks
    );
    let per = c.target_statfs().await;
    assert!(
        per.iter()
            .any(|(t, r)| *t == nacre_core::TargetName::ost(1)
                && *r == Err(nacre_core::Errno::ENOTCONN)),
        "{per:?}"
    );
    cluster.start_ost(1).await.expect("restart");
    let end = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let s = c.statfs().await.expect("statfs");
        if s.blocks == both.blocks {
            break;
        }
        assert!(
            std::time::Instant::now() < end,
            "the OST's space did not come back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cluster.stop().await;
}

/// The layout of `fid` as its MDT has it.
async fn layout_of(c: &nacre_client::Client, fid: Fid) -> Layout {
    c.getattr(fid)
        .await
        .expect("getattr")
        .layout
        .expect("layout")
}

/// Writes `data` at 0 of the existing file `fid` through a handle, as an application does.
async fn overwrite(c: &std::sync::Arc<nacre_client::Client>, fid: Fid, data: &[u8]) {
    let (f, _) = c
        .open(fid, common::cluster::rw(), &nacre_rpc::msg::Cred::root())
        .await
        .expect("open");
    c.write(&f, 0, bytes::Bytes::copy_from_slice(data))
        .await
        .expect("write");
    c.fsync(&f).await.expect("fsync");
    c.release(&f).await.expect("close");
}

/// Every chunk's mirrors agree and none is stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_with_a_mirrors_ost_stopped_succeeds_and_resync_brings_it_back() {
    use nacre_core::layout::{LCM_FL_RDONLY, LCM_FL_WRITE_PENDING};
    let dir = tempfile::tempdir().expect("tmp");
    let mut cluster = start(dir.path(), "flrwr", 1, 2).await;
    let c = mount(&cluster).await;
    let old = pattern(600_000, 1);
    let fid = write_file(&c, c.root(), "m", Some(two_mirrors(1)), &old)
        .await
        .expect("write");
    let m2 = mirror_objects(&c, fid, 2).await;
    // Immediate mode (the default): the OST of mirror 2 goes away, and a write still
    // succeeds, without waiting out the recovery timeout, on mirror 1.
    cluster.stop_ost(m2[0].ost_idx).await;
    let new = pattern(700_000, 2);
    tokio::time::timeout(Duration::from_secs(10), overwrite(&c, fid, &new))
        .await
        .expect("the write must not wait for the stopped OST");
    let l = layout_of(&c, fid).await;
    assert_eq!(l.flr_state(), LCM_FL_WRITE_PENDING, "{l:?}");
    assert!(
        l.mirror_stale_in(2, 0, 1) && !l.mirror_stale_in(1, 0, 1),
        "{l:?}"
    );
    let got = read_file(&c, fid, new.len() as u64).await.expect("read");
    assert!(got[..] == new[..], "contents differ");
    // The OST returns: a resync copies mirror 1 over mirror 2, and verify agrees.
    cluster.start_ost(m2[0].ost_idx).await.expect("restart");
    let before = c.mirror_verify(fid, &[]).await.expect("verify");
    assert_eq!(before.stale, vec![2], "{before:?}");
    let out = c.mirror_resync(fid, &[]).await.expect("resync");
    assert_eq!(out.synced.len(), 1, "{out:?}");
    let l = layout_of(&c, fid).await;
    assert_eq!(l.flr_state(), LCM_FL_RDONLY, "{l:?}");
    assert!(!l.has_stale(), "{l:?}");
    let v = c.mirror_verify(fid, &[]).await.expect("verify");
    assert!(v.in_sync(), "{v:?}");
    let (got, n) = c
        .mirror_read(fid, 2, 0, new.len() as u64 + 4096)
        .await
        .expect("read mirror 2");
    assert_eq!(n, new.len() as u64);
    assert!(got[..new.len()] == new[..], "mirror 2 differs after resync");
    cluster.stop().await;
}

/// `lfs mirror split -d --mirror-id 2` on a file whose mirror 2 sits on a dead OST: what
/// an administrator does to drop a copy that is gone. It must not wait out the recovery
/// timeout for that OST, and the file then reads from the mirror that is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_on_a_dead_ost_is_split_off() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut cluster = start(dir.path(), "flrsplit", 1, 2).await;
    let c = mount(&cluster).await;
    let data = pattern(400_000, 5);
    let fid = write_file(&c, c.root(), "m", Some(two_mirrors(1)), &data)
        .await
        .expect("write");
    let m1 = mirror_objects(&c, fid, 1).await;
    let m2 = mirror_objects(&c, fid, 2).await;
    assert_ne!(m1[0].ost_idx, m2[0].ost_idx);
    cluster.stop_ost(m2[0].ost_idx).await;
    tokio::time::timeout(Duration::from_secs(10), c.mirror_split(fid, 2, None))
        .await
        .expect("the split must not wait for the stopped OST")
        .expect("split");
    let l = layout_of(&c, fid).await;
    assert!(!l.is_mirrored(), "{l:?}");
    assert_eq!(l.mirror_ids(), vec![1], "{l:?}");
    let got = read_file(&c, fid, data.len() as u64).await.expect("read");
    assert!(got[..] == data[..], "contents differ");
    cluster.stop().await;
}

/// Once a stopped OST is back, mirrored writes reach it again without anything else
/// calling it first: every request of a mirrored write skips an OST that stopped
/// answering, so without the client's own reconnect (Lustre's pinger) the copy on it
/// would be marked stale for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirrored_writes_return_to_an_ost_that_came_back() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut cluster = start(dir.path(), "flrbk", 1, 2).await;
    let c = mount(&cluster).await;
    let fid = write_file(
        &c,
        c.root(),
        "a",
        Some(two_mirrors(1)),
        &pattern(100_000, 1),
    )
    .await
    .expect("write");
    let down = mirror_objects(&c, fid, 2).await[0].ost_idx;
    cluster.stop_ost(down).await;
    overwrite(&c, fid, &pattern(200_000, 2)).await;
    assert!(layout_of(&c, fid).await.mirror_stale_in(2, 0, 1));
    cluster.start_ost(down).await.expect("restart");
    // Within a reconnect attempt or two of the client (its backoff is at most a
    // second), the OST is in use again: of files written 0.5 s apart, the third at the
    // latest has both copies. Without the reconnect it took 11 here.
    let mut n = 0;
    loop {
        n += 1;
        let data = pattern(150_000, 10 + n);
        let name = format!("b{n}");
        let fid = write_file(&c, c.root(), &name, Some(two_mirrors(1)), &data)
            .await
            .expect("write");
        let l = layout_of(&c, fid).await;
        if !l.has_stale() {
            let (got, len) = c
                .mirror_read(fid, 2, 0, data.len() as u64)
                .await
                .expect("read mirror 2");
            assert_eq!(len, data.len() as u64);
            assert!(got[..] == data[..], "mirror 2 differs");
            break;
        }
        assert!(
            n < 3,
            "{n} files written after the OST came back, every one with a stale mirror: {l:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_writes_go_to_one_mirror_and_mark_the_others_stale() {
    use nacre_core::layout::{LCM_FL_RDONLY, LCM_FL_WRITE_PENDING};
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "flrdl", 1, 2).await;
    let c = mount(&cluster).await;
    c.tunables
        .set_str("llite", "mirror_write_mode", "delayed")
        .expect("delayed");
    let data = pattern(300_000, 5);
    let fid = write_file(&c, c.root(), "m", Some(two_mirrors(1)), &data)
        .await
        .expect("write");
    let l = layout_of(&c, fid).await;
    assert_eq!(l.flr_state(), LCM_FL_WRITE_PENDING, "{l:?}");
    let stale: Vec<u32> = l
        .mirror_ids()
        .into_iter()
        .filter(|&m| l.mirror_stale_in(m, 0, 1))
        .collect();
    assert_eq!(stale, vec![2], "{l:?}");
    // Only mirror 1 was written.
    let (_, n) = c
        .mirror_read(fid, 2, 0, data.len() as u64)
        .await
        .expect("read mirror 2");
    assert_eq!(n, 0, "mirror 2 holds data");
    let got = read_file(&c, fid, data.len() as u64).await.expect("read");
    assert!(got[..] == data[..], "contents differ");
    let v = c.mirror_verify(fid, &[]).await.expect("verify");
    assert_eq!(v.stale, vec![2]);
    c.mirror_resync(fid, &[]).await.expect("resync");
    let l = layout_of(&c, fid).await;
    assert_eq!(l.flr_state(), LCM_FL_RDONLY, "{l:?}");
    let v = c.mirror_verify(fid, &[]).await.expect("verify");
    assert!(v.in_sync(), "{v:?}");
    // A second write goes to one mirror again.
    overwrite(&c, fid, &pattern(1000, 6)).await;
    assert!(layout_of(&c, fid).await.has_stale());
    cluster.stop().await;
}

/// `lfs mirror` through a mount in delayed mode: a write leaves one mirror stale as
/// getstripe shows, verify says so, resync clears it; read/write of one mirror, verify's
/// difference report and `--stale`, extend and split.
#[test]
fn lfs_mirror_resync_verify_read_write_extend_split() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&["--osts", "2"]);
    let tmp = tempfile::tempdir().expect("tmp");
    ok(&["lctl", "set_param", "llite.*.mirror_write_mode=delayed"]);
    assert_eq!(param("llite.*.mirror_write_mode"), "delayed");
    let f = fs.path("m");
    let fp = f.to_str().expect("utf8");
    lfs(&["mirror", "create", "-N2", fp]);
    let data = pattern(200_000, 3);
    std::fs::write(&f, &data).expect("write");
    let flags = |gs: &str| -> Vec<String> { entries(gs).into_iter().map(|(_, _, f)| f).collect() };
    let gs = lfs(&["getstripe", "-v", fp]);
    assert!(gs.contains("  lcm_flags:         wp\n"), "{gs}");
    let gs = lfs(&["getstripe", fp]);
    assert_eq!(flags(&gs), vec!["init", "init,stale"], "{gs}");
    let o = run(&["lfs", "mirror", "verify", fp]);
    assert_eq!(o.status.code(), Some(libc::ESTALE), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("Mirror 2:\t(stale)"),
        "{o:?}"
    );
    lfs(&["mirror", "resync", fp]);
    let gs = lfs(&["getstripe", "-v", fp]);
    assert!(gs.contains("  lcm_flags:         ro\n"), "{gs}");
    let gs = lfs(&["getstripe", fp]);
    assert_eq!(flags(&gs), vec!["init", "init"], "{gs}");
    lfs(&["mirror", "verify", fp]);
    // One mirror alone, out and in.
    let out = tmp.path().join("m2");
    lfs(&[
        "mirror",
        "read",
        "-N",
        "2",
        "-o",
        out.to_str().expect("utf8"),
        fp,
    ]);
    assert!(
        std::fs::read(&out).expect("read") == data,
        "mirror 2 differs"
    );
    let other = tmp.path().join("other");
    std::fs::write(&other, pattern(200_000, 9)).expect("write");
    lfs(&[
        "mirror",
        "write",
        "-N",
        "2",
        "-i",
        other.to_str().expect("utf8"),
        fp,
    ]);
    let err = fail(&["lfs", "mirror", "verify", fp]);
    assert!(
        err.contains("lfs mirror verify: chunk [0, 0xffffffffffffffff) has different checksum value on mirror 1:"),
        "{err}"
    );
    // --stale marks the differing mirror stale; resync repairs it.
    let _ = run(&["lfs", "mirror", "verify", "--stale", fp]);
    assert_eq!(flags(&lfs(&["getstripe", fp])), vec!["init", "init,stale"]);
    // A split the MDT refuses (mirror 1 is the only one in sync) and one of a mirror the
    // file does not have fail and leave no new file behind.
    for id in ["1", "9"] {
        let err = fail(&["lfs", "mirror", "split", "--mirror-id", id, fp]);
        let victim = format!("{fp}.mirror~{id}");
        assert!(
            !std::path::Path::new(&victim).exists(),
            "a failed split left {victim}: {err}"
        );
        if id == "9" {
            assert!(err.contains("does not contain mirror with id 9"), "{err}");
        }
    }
    assert_eq!(flags(&lfs(&["getstripe", fp])), vec!["init", "init,stale"]);
    // Mirror ids the file does not have are refused, never taken for nothing to do.
    for (args, msg) in [
        (
            vec!["resync", "--only", "2,7"],
            "invalid specified mirror id: 7",
        ),
        (
            vec!["verify", "--only", "1,7"],
            "invalid specified mirror id: 7",
        ),
        (vec!["read", "-N", "7"], "cannot find mirror with ID 7"),
    ] {
        let cmd: Vec<&str> = ["lfs", "mirror"]
            .into_iter()
            .chain(args)
            .chain([fp])
            .collect();
        let err = fail(&cmd);
        assert!(err.contains(msg), "{cmd:?}: {err}");
    }
    assert_eq!(flags(&lfs(&["getstripe", fp])), vec!["init", "init,stale"]);
    lfs(&["mirror", "resync", fp]);
    lfs(&["mirror", "verify", fp]);
    assert!(std::fs::read(&f).expect("read") == data, "contents differ");
    // extend: a third mirror, filled.
    lfs(&["mirror", "extend", "-N", fp]);
    assert_eq!(lfs(&["getstripe", "-N", fp]).trim(), "3");
    lfs(&["mirror", "verify", fp]);
    lfs(&[
        "mirror",
        "read",
        "-N",
        "3",
        "-o",
        out.to_str().expect("utf8"),
        fp,
    ]);
    assert!(
        std::fs::read(&out).expect("read") == data,
        "mirror 3 differs"
    );
    // split: mirror 3 into its own file, mirror 2 destroyed.
    let nf = fs.path("split3");
    lfs(&[
        "mirror",
        "split",
        "--mirror-id",
        "3",
        "-f",
        nf.to_str().expect("utf8"),
        fp,
    ]);
    assert!(
        std::fs::read(&nf).expect("read") == data,
        "split file differs"
    );
    lfs(&["mirror", "split", "--mirror-id", "2", "-d", fp]);
    assert_eq!(lfs(&["getstripe", "-N", fp]).trim(), "1");
    assert!(std::fs::read(&f).expect("read") == data, "contents differ");
    assert!(lfs(&["mirror", "--help"]).contains("resync [--only MIRROR_ID[,...]]"));
    // A file whose layout ends before EOF cannot gain a mirror: every mirror must reach
    // EOF (`LSE_INCOMPLETE_MIRROR`), and lfs says so rather than a bare EINVAL.
    let short = fs.path("short");
    let sp = short.to_str().expect("utf8");
    lfs(&["setstripe", "-E", "1M", "-c", "1", sp]);
    std::fs::write(&short, b"first megabyte").expect("write");
    let err = fail(&["lfs", "mirror", "extend", "-N", sp]);
    assert!(
        err.contains(
            "Invalid layout: component 1: mirror 1 ends at 1048576; every mirror must extend to EOF"
        ),
        "{err}"
    );
    assert_eq!(lfs(&["getstripe", "-N", sp]).trim(), "1");
}

/// Bit flips at random offsets in the objects of 50 mirrored files: verify finds every
/// one, reads return the right bytes, and `verify --stale` then resync repairs the copies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bit_flips_in_many_mirrored_files_are_found_and_repaired() {
    use rand::{Rng, SeedableRng};
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "flrflip", 1, 4).await;
    let c = mount(&cluster).await;
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut files = Vec::new();
    for i in 0..50 {
        let len = rng.gen_range(70_000..400_000);
        let data = pattern(len, i as u8);
        let fid = write_file(&c, c.root(), &format!("f{i}"), Some(two_mirrors(2)), &data)
            .await
            .expect("write");
        files.push((fid, data));
    }
    for (fid, _) in &files {
        let m = rng.gen_range(1..=2);
        let objs = mirror_objects(&c, *fid, m).await;
        let o = objs[rng.gen_range(0..objs.len())];
        let p = object_path(dir.path(), &o);
        let size = std::fs::metadata(&p).expect("stat").len();
        nacre_osd::inject::flip_bit(&p, rng.gen_range(0..size), rng.gen_range(0..8)).expect("flip");
    }
    for (i, (fid, data)) in files.iter().enumerate() {
        let v = c.mirror_verify(*fid, &[]).await.expect("verify");
        assert!(!v.in_sync(), "file {i}: flip not found: {v:?}");
        let got = read_file(&c, *fid, data.len() as u64).await.expect("read");
        assert!(got[..] == data[..], "file {i}: wrong bytes");
        let v = c.mirror_verify(*fid, &[]).await.expect("verify");
        c.mark_disagreeing_stale(*fid, &v)
            .await
            .expect("mark stale");
        c.mirror_resync(*fid, &[]).await.expect("resync");
        let v = c.mirror_verify(*fid, &[]).await.expect("verify");
        assert!(v.in_sync(), "file {i}: not repaired: {v:?}");
        for m in [1, 2] {
            let (got, n) = c
                .mirror_read(*fid, m, 0, data.len() as u64)
                .await
                .expect("read one mirror");
            assert_eq!(n, data.len() as u64);
            assert!(got[..] == data[..], "file {i}: mirror {m} differs");
        }
    }
    cluster.stop().await;
}
