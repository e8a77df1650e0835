//! Erasure coding (`lfs setstripe --ec D+P`): 4+2 files read back identical with one and
//! two of their OSTs stopped and after an OST's directory is deleted; bit flips in data
//! objects are found, read around and rewritten; stale parity is never read from; bad
//! geometries get EINVAL from `lfs` and from the MDT; parity made at a close is synced
//! before the MDT hears it is in sync.

use crate::common;

use common::cluster::{FILE, mount, pattern, start};
use common::integrity::{open_torn_windows, ost, read_file, torn_counts, write_file};
use common::*;
use nacre_client::Client;
use nacre_core::ec::with_parity;
use nacre_core::layout::{Component, EOF, LCME_FL_PARITY, Pattern};
use nacre_core::{Errno, Fid, Layout, StripeObject, TargetName};
use nacre_rpc::msg::{Cred, LayoutRequest, Request};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `lfs setstripe -c 4 -S 64K --ec 4+2`, as lfs sends it.
fn ec42() -> Layout {
    Layout {
        components: with_parity(
            vec![Component::raid0(0, EOF, 4, 65536, -1)],
            &[Some((4, 2))],
        ),
        ..Layout::composite(Vec::new())
    }
}

/// The data and parity objects of `fid`, from its MDT.
async fn objects(c: &Client, fid: Fid) -> (Vec<StripeObject>, Vec<StripeObject>, Layout) {
    let l = c
        .getattr(fid)
        .await
        .expect("getattr")
        .layout
        .expect("layout");
    let data = l
        .components
        .iter()
        .filter(|c| !c.is_parity())
        .flat_map(|c| c.objects.clone())
        .collect();
    let parity = l
        .components
        .iter()
        .filter(|c| c.is_parity())
        .flat_map(|c| c.objects.clone())
        .collect();
    (data, parity, l)
}

/// Waits until the MDT's size of `fid` is exact (settled after the last close), so reads
/// with an OST stopped need no glimpse of it.
/// Whether every parity component of `l` is marked stale.
fn every_parity_stale(l: &Layout) -> bool {
    l.components
        .iter()
        .filter(|c| c.is_parity())
        .all(|c| c.is_stale())
}

async fn settled(c: &Client, fid: Fid) {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if c.getattr(fid).await.expect("getattr").size_authoritative {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("size of {fid} never settled");
}

/// The path of object `o` in OST `o.ost_idx`'s directory.
fn object_path(dir: &std::path::Path, o: &StripeObject) -> Option<std::path::PathBuf> {
    nacre_osd::inject::objects_with_data(&dir.join(format!("ost{}", o.ost_idx)))
        .expect("objects")
        .into_iter()
        .find(|(f, _, _)| *f == o.fid)
        .map(|(_, p, _)| p)
}

async fn read_within(c: &Arc<Client>, fid: Fid, len: usize) -> Result<Vec<u8>, Errno> {
    tokio::time::timeout(Duration::from_secs(20), read_file(c, fid, len as u64))
        .await
        .expect("a read must not wait out the stopped OST")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_4_2_file_reads_back_with_one_and_two_osts_stopped() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut cluster = start(dir.path(), "ecdown", 1, 6).await;
    let c = mount(&cluster).await;
    // Several rows of stripes and a partial last one.
    let data = pattern(1_300_000, 5);
    let fid = write_file(&c, c.root(), "f", Some(ec42()), &data)
        .await
        .expect("write");
    let (dobj, pobj, l) = objects(&c, fid).await;
    assert_eq!((dobj.len(), pobj.len()), (4, 2), "{l:?}");
    // Parity on OSTs apart from the data of its RAID set.
    for p in &pobj {
        assert!(dobj.iter().all(|d| d.ost_idx != p.ost_idx), "{l:?}");
    }
    let parity = l.components.iter().find(|c| c.is_parity()).expect("parity");
    assert_eq!(parity.flags & LCME_FL_PARITY, LCME_FL_PARITY);
    assert!(!parity.is_stale(), "parity stale after the close: {l:?}");
    assert_eq!(
        parity.pattern,
        Pattern::Parity {
            dstripe_count: 4,
            cstripe_count: 2
        }
    );
    settled(&c, fid).await;
    cluster.stop_ost(dobj[1].ost_idx).await;
    let got = read_within(&c, fid, data.len())
        .await
        .expect("read, 1 OST down");
    assert!(got == data, "contents differ with one OST stopped");
    cluster.stop_ost(dobj[3].ost_idx).await;
    // Another client, whose reads cannot be answered from what the first one's decoded.
    let c = mount(&cluster).await;
    let got = read_within(&c, fid, data.len())
        .await
        .expect("read, 2 OSTs down");
    // A row is decoded once for the degraded chunks that ask for it together (reads of
    // the same ranges running side by side), not once per chunk. How
    // many chunks join a decode, rather than find its result kept, depends on timing: a
    // loaded machine saw 11 chunks for the 8 rows, an idle one 15 or 16. Decoded apart,
    // there would be one row per chunk.
    let (chunks, rows) = (c.ec_stats.degraded_reads(), c.ec_stats.rows_decoded());
    assert!(
        chunks >= 4 && rows < chunks,
        "{rows} rows decoded for {chunks} degraded chunks"
    );
    let first = got.iter().zip(&data).position(|(a, b)| a != b);
    assert!(
        got == data,
        "contents differ with two OSTs stopped: {} vs {} bytes, first at {first:?}",
        got.len(),
        data.len()
    );
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_4_2_file_reads_back_after_an_ost_directory_is_deleted() {
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "ecrm", 1, 6).await;
    let c = mount(&cluster).await;
    let data = pattern(900_000, 8);
    let fid = write_file(&c, c.root(), "f", Some(ec42()), &data)
        .await
        .expect("write");
    let (dobj, _, _) = objects(&c, fid).await;
    settled(&c, fid).await;
    common::rm_rf_live(&dir.path().join(format!("ost{}", dobj[0].ost_idx)));
    let got = read_within(&c, fid, data.len()).await.expect("read");
    assert!(
        got == data,
        "contents differ after the OST's directory went"
    );
    cluster.stop().await;
}

/// A data block an OST's crash tore (written after its last commit) is rebuilt from
/// parity in sync and rewritten, not taken as the disk kept it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_block_a_crash_tore_is_rebuilt_from_parity() {
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "ectorn", 1, 6).await;
    let c = mount(&cluster).await;
    let data = pattern(1_000_000, 21);
    let fid = write_file(&c, c.root(), "f", Some(ec42()), &data)
        .await
        .expect("write");
    let (dobj, _, l) = objects(&c, fid).await;
    assert!(nacre_core::ec::parity_in_sync(&l, 0, EOF), "{l:?}");
    open_torn_windows(&cluster, 6);
    let path = object_path(dir.path(), &dobj[1]).expect("an object with data");
    nacre_osd::inject::flip_bit(&path, 1000, 2).expect("flip");
    let got = read_file(&c, fid, data.len() as u64).await.expect("read");
    assert!(got == data, "contents differ");
    let (reported, retaken) = torn_counts(&cluster, 6);
    assert!(reported >= 1, "the torn block was not reported");
    assert_eq!(
        retaken, 0,
        "a torn block parity could rebuild was taken as kept"
    );
    let repaired: u64 = (0..6)
        .map(|i| c.cksum_stats.get(TargetName::ost(i)).repaired)
        .sum();
    assert!(repaired >= 1, "the torn block was not rewritten");
    // The object itself holds the right bytes again: its OST reads it without a report.
    let got = read_file(&c, fid, data.len() as u64).await.expect("read");
    assert!(got == data);
    assert_eq!(torn_counts(&cluster, 6), (reported, 0), "still torn");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bit_flips_in_4_2_data_objects_are_read_around_and_rewritten() {
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "ecflip", 1, 6).await;
    let c = mount(&cluster).await;
    let mut files = Vec::new();
    for i in 0..12usize {
        let data = pattern(5000 + i * 97_000, i as u8);
        let fid = write_file(&c, c.root(), &format!("f{i}"), Some(ec42()), &data)
            .await
            .expect("write");
        files.push((fid, data));
    }
    // One bit in one data object of every file, at an offset its object holds.
    let mut flips = 0u64;
    for (n, (fid, _)) in files.iter().enumerate() {
        let (dobj, _, _) = objects(&c, *fid).await;
        let o = dobj[n % dobj.len()];
        let path = object_path(dir.path(), &o).or_else(|| object_path(dir.path(), &dobj[0]));
        let path = path.expect("an object with data");
        let len = std::fs::metadata(&path).expect("stat").len();
        let at = (n as u64 * 7919 + 13) % len;
        nacre_osd::inject::flip_bit(&path, at, (n % 8) as u8).expect("flip");
        flips += 1;
    }
    let bad_before: u64 = (0..6)
        .map(|i| ost(&cluster, i).store().checksum_errors())
        .sum();
    for (fid, data) in &files {
        let got = read_file(&c, *fid, data.len() as u64)
            .await
            .expect("read around a bad block");
        assert!(got == *data, "contents of {fid} differ");
    }
    let detected: u64 = (0..6)
        .map(|i| ost(&cluster, i).store().checksum_errors())
        .sum::<u64>()
        - bad_before;
    assert!(detected >= flips, "{detected} of {flips} flips detected");
    let repaired: u64 = (0..6)
        .map(|i| c.cksum_stats.get(TargetName::ost(i)).repaired)
        .sum();
    assert!(
        repaired >= flips,
        "{repaired} of {flips} bad blocks rewritten"
    );
    // Read again: no bad block is left to find.
    let before: u64 = (0..6)
        .map(|i| ost(&cluster, i).store().checksum_errors())
        .sum();
    for (fid, data) in &files {
        let got = read_file(&c, *fid, data.len() as u64).await.expect("read");
        assert!(got == *data);
    }
    let after: u64 = (0..6)
        .map(|i| ost(&cluster, i).store().checksum_errors())
        .sum();
    assert_eq!(before, after, "a bad block is still there");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_parity_is_never_read_from_and_a_resync_makes_it_current() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut cluster = start(dir.path(), "ecstale", 1, 6).await;
    let c = mount(&cluster).await;
    // Lustre's offline EC: the close leaves parity stale.
    c.tunables
        .set("llite", "ec_parity_on_close", 0)
        .expect("tunable");
    let first = pattern(700_000, 1);
    let fid = write_file(&c, c.root(), "f", Some(ec42()), &first)
        .await
        .expect("write");
    // Parity computed for these bytes, then a write that makes it stale.
    c.ec_resync(fid, None).await.expect("resync");
    let data = pattern(700_000, 2);
    let flags = common::cluster::rw();
    let (f, _) = c.open(fid, flags, &Cred::root()).await.expect("open");
    c.write(&f, 0, bytes::Bytes::from(data.clone()))
        .await
        .expect("write");
    c.release(&f).await.expect("close");
    let (dobj, _, l) = objects(&c, fid).await;
    assert!(
        every_parity_stale(&l),
        "parity must be stale after a write: {l:?}"
    );
    // Only a writer says parity is in sync: a user who may not write the file (0644,
    // root's) holding no handle is refused, and parity stays stale.
    let claim = Request::EcParitySynced {
        fid,
        handle: None,
        layout_gen: l.layout_gen,
        cred: Cred::user(1000, 1000, Vec::new(), 0),
    };
    assert_eq!(
        c.mdcs()[0].call(&claim, bytes::Bytes::new()).await.err(),
        Some(nacre_rpc::RpcError::Errno(Errno::EACCES)),
        "parity declared in sync by a user without write permission"
    );
    let (_, _, l) = objects(&c, fid).await;
    assert!(
        every_parity_stale(&l),
        "a refused claim cleared stale: {l:?}"
    );
    settled(&c, fid).await;
    cluster.stop_ost(dobj[0].ost_idx).await;
    // Old parity would decode into the old bytes: EIO instead.
    assert_eq!(
        read_within(&c, fid, data.len()).await,
        Err(Errno::EIO),
        "a read with stale parity and an OST down"
    );
    cluster.start_ost(dobj[0].ost_idx).await.expect("restart");
    // The resync (`lfs mirror resync`) recomputes parity and clears stale.
    let mut synced = Err(Errno::EIO);
    let end = Instant::now() + Duration::from_secs(20);
    while Instant::now() < end {
        synced = c.ec_resync(fid, None).await;
        if synced.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let l = synced.expect("resync");
    assert!(
        l.components
            .iter()
            .filter(|c| c.is_parity())
            .all(|c| !c.is_stale())
    );
    cluster.stop_ost(dobj[2].ost_idx).await;
    let got = read_within(&c, fid, data.len()).await.expect("read");
    assert!(got == data, "contents differ after the resync");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mdt_refuses_bad_ec_layouts_with_einval() {
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "ecbad", 1, 6).await;
    let c = mount(&cluster).await;
    let create = |name: &'static str, l: Layout| {
        let c = c.clone();
        async move {
            c.create(
                c.root(),
                name.as_bytes(),
                FILE,
                0,
                &Cred::root(),
                None,
                LayoutRequest::Explicit(l),
                None,
                true,
            )
            .await
            .map(|_| ())
        }
    };
    let geometry = |d: u8, p: u8| {
        let mut l = ec42();
        l.components[1].pattern = Pattern::Parity {
            dstripe_count: d,
            cstripe_count: p,
        };
        l
    };
    for (name, l) in [
        ("d1", geometry(1, 1)),
        ("d33", geometry(33, 1)),
        ("p5", geometry(8, 5)),
        ("p3of2", geometry(2, 3)),
        ("p0", geometry(4, 0)),
    ] {
        assert_eq!(create(name, l).await, Err(Errno::EINVAL), "{name}");
    }
    let mut unflagged = ec42();
    unflagged.components[1].flags = 0;
    assert_eq!(create("noflag", unflagged).await, Err(Errno::EINVAL));
    let mut orphan = ec42();
    orphan.components[1].end = 1 << 20;
    assert_eq!(create("orphan", orphan).await, Err(Errno::EINVAL));
    assert_eq!(create("good", ec42()).await, Ok(()));
    cluster.stop().await;
}

#[test]
fn lfs_makes_and_prints_4_2_files_and_refuses_bad_geometries() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&["--osts", "6"]);
    let f = fs.path("ec");
    let fp = f.to_str().expect("utf8");
    lfs(&["setstripe", "-c", "4", "--ec", "4+2", fp]);
    let data = pattern(3 << 20, 4);
    std::fs::write(&f, &data).expect("write through the mount");
    // The close's parity recomputation ends after close(2) returns (FUSE release).
    let end = Instant::now() + Duration::from_secs(10);
    let mut gs = lfs(&["getstripe", fp]);
    while gs.contains("stale") && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
        gs = lfs(&["getstripe", fp]);
    }
    assert!(gs.contains("  lcm_mirror_count:  2\n"), "{gs}");
    assert!(
        gs.contains("    lcme_flags:          init,parity\n"),
        "{gs}"
    );
    assert!(gs.contains("    lcme_dstripe_count:  4\n"), "{gs}");
    assert!(gs.contains("    lcme_cstripe_count:  2\n"), "{gs}");
    assert!(gs.contains("      lmm_stripe_count:  2\n"), "{gs}");
    assert!(std::fs::read(&f).expect("read") == data);
    // Per component, with D:P.
    let g = fs.path("pfl");
    let gp = g.to_str().expect("utf8");
    lfs(&[
        "setstripe",
        "-E",
        "1M",
        "-c",
        "2",
        "--ec",
        "2:1",
        "-E",
        "eof",
        "-c",
        "4",
        "--ec",
        "4+2",
        gp,
    ]);
    std::fs::write(&g, &data).expect("write");
    let gs = lfs(&["getstripe", gp]);
    assert_eq!(gs.matches("lcme_dstripe_count").count(), 2, "{gs}");
    assert!(std::fs::read(&g).expect("read") == data);
    // Lustre's limits: EINVAL from lfs's parser (the command fails), and no file.
    for bad in ["1+1", "33+2", "4+5", "2+3", "4+0", "4x2"] {
        let target = format!("{fp}-{bad}");
        let e = nacre_lustreapi::setstripe::parse_setstripe(&["-c", "4", "--ec", bad, &target])
            .err()
            .unwrap_or_else(|| panic!("--ec {bad} parsed"));
        assert_eq!(e.errno(), Errno::EINVAL, "--ec {bad}: {e}");
        let o = run(&["lfs", "setstripe", "-c", "4", "--ec", bad, &target]);
        assert!(!o.status.success(), "--ec {bad}: {o:?}");
    }
    assert!(!fs.path("ec-4+5").exists());
    // Lustre's offline EC: parity stale after the close until `lfs mirror resync`.
    ok(&["lctl", "set_param", "llite.*.ec_parity_on_close=0"]);
    let h = fs.path("offline");
    let hp = h.to_str().expect("utf8");
    lfs(&["setstripe", "-c", "4", "--ec", "4+2", hp]);
    std::fs::write(&h, &data).expect("write");
    let gs = lfs(&["getstripe", hp]);
    assert!(
        gs.contains("    lcme_flags:          init,stale,parity\n"),
        "{gs}"
    );
    lfs(&["mirror", "resync", hp]);
    let gs = lfs(&["getstripe", hp]);
    assert!(!gs.contains("stale"), "{gs}");
    assert!(std::fs::read(&h).expect("read") == data);
    // Neither mirrored nor erasure-coded: EINVAL, as Lustre's resync.
    let o = run(&["lfs", "mirror", "resync", gp]);
    assert!(o.status.success(), "{o:?}");
    let plain = fs.path("plain");
    std::fs::write(&plain, b"x").expect("write");
    let o = run(&["lfs", "mirror", "resync", plain.to_str().expect("utf8")]);
    assert!(!o.status.success(), "{o:?}");
}

/// Parity computed at a writer's close is on stable storage, with the data it was coded
/// from, before the MDT is told it is in sync (which it keeps as soon as it is told): a
/// power cut after the close must never leave "in sync" parity that decodes into bytes
/// nobody wrote. Seen as a sync of every object of the file, on its OST, by the close
/// of a handle that never called fsync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parity_is_synced_before_the_mdt_is_told_it_is_in_sync() {
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "ecsync", 1, 6).await;
    let c = mount(&cluster).await;
    let (info, f) = common::integrity::create_open(&c, c.root(), "f", Some(ec42()))
        .await
        .expect("create");
    let data = pattern(1_000_000, 3);
    c.write(&f, 0, bytes::Bytes::from(data.clone()))
        .await
        .expect("write");
    let oscs = c.oscs();
    let ost_sync = Request::OstSync { objs: Vec::new() }.opcode();
    // What syncs each OST saw before the close: none expected, but counted anyway.
    let syncs = |i: u32| {
        oscs[i as usize]
            .stats()
            .samples()
            .iter()
            .find(|s| s.opcode == ost_sync)
            .map_or(0, |s| s.count)
    };
    let (dobj, pobj, _) = objects(&c, info.attr.fid).await;
    let before: Vec<u64> = dobj.iter().chain(&pobj).map(|o| syncs(o.ost_idx)).collect();
    c.release(&f).await.expect("close");
    let (_, _, l) = objects(&c, info.attr.fid).await;
    assert!(
        l.components
            .iter()
            .filter(|p| p.is_parity())
            .all(|p| !p.is_stale()),
        "parity stale after the close: {l:?}"
    );
    for (o, b) in dobj.iter().chain(&pobj).zip(before) {
        assert!(
            syncs(o.ost_idx) > b,
            "object {} on OST{:04x} was not synced by the close that made its parity",
            o.fid,
            o.ost_idx
        );
    }
    let got = read_within(&c, info.attr.fid, data.len())
        .await
        .expect("read");
    assert!(got == data, "contents differ");
    cluster.stop().await;
}

/// A truncate by path (no open handle, as `truncate -s` sends it) of a 4+2 file cuts a row
/// of stripes short, so the parity coded from the bytes cut no longer matches. The client
/// truncates through a write handle, whose close codes the parity again: with a data OST
/// stopped, the file reads back as truncated, never with bytes decoded from the old
/// parity. The MDT marks parity stale at any size change, whatever path it took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_4_2_file_truncated_by_path_reads_back_right_with_an_ost_stopped() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut cluster = start(dir.path(), "ectrunc", 1, 6).await;
    let c = mount(&cluster).await;
    // Rows of 4 x 64 KiB; the cut falls in stripe 1 of row 2 and empties its stripes 2, 3.
    let data = pattern(1_000_000, 11);
    let fid = write_file(&c, c.root(), "f", Some(ec42()), &data)
        .await
        .expect("write");
    let stale = |l: &Layout| !nacre_core::ec::parity_in_sync(l, 0, EOF);
    let (dobj, _, l) = objects(&c, fid).await;
    assert!(!stale(&l), "{l:?}");
    let cut = 600_000usize;
    let size = |n: usize| nacre_core::SetAttr {
        size: Some(n as u64),
        ..Default::default()
    };
    let info = c
        .setattr(fid, size(cut), &Cred::root(), None)
        .await
        .expect("truncate");
    assert_eq!(info.attr.size, cut as u64);
    let (_, _, l) = objects(&c, fid).await;
    assert!(
        !stale(&l),
        "parity not coded again after the truncate: {l:?}"
    );
    settled(&c, fid).await;
    cluster.stop_ost(dobj[0].ost_idx).await;
    // Another client, with nothing of the file cached.
    let c2 = mount(&cluster).await;
    let got = read_within(&c2, fid, cut).await.expect("read");
    let first = got.iter().zip(&data).position(|(a, b)| a != b);
    assert!(
        got == data[..cut],
        "contents differ after the truncate: {} vs {cut} bytes, first at {first:?}",
        got.len()
    );
    cluster.start_ost(dobj[0].ost_idx).await.expect("restart");
    // A size change sent straight to the MDT, with no handle: parity is stale after it.
    let req = Request::Setattr {
        fid,
        attr: size(cut / 2),
        cred: Cred::root(),
        handle: None,
    };
    c.mdcs()[0]
        .call(&req, bytes::Bytes::new())
        .await
        .expect("setattr");
    let (_, _, l) = objects(&c, fid).await;
    assert!(stale(&l), "a size change left parity in sync: {l:?}");
    cluster.stop().await;
}

/// A write handle that writes nothing (an `O_RDWR` open and close, a `touch`) leaves the
/// parity of a 4+2 file in sync without coding it again: its MDT puts it back itself,
/// and no data is read. A size change through the handle, or another writer while it is
/// open, still gets the parity coded again at the close, and a degraded read then returns
/// what is in the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_handle_that_wrote_nothing_leaves_parity_in_sync_uncoded() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut cluster = start(dir.path(), "ecidle", 1, 6).await;
    let c = mount(&cluster).await;
    let data = pattern(1_000_000, 13);
    let fid = write_file(&c, c.root(), "f", Some(ec42()), &data)
        .await
        .expect("write");
    let stale = |l: &Layout| !nacre_core::ec::parity_in_sync(l, 0, EOF);
    let (dobj, _, l) = objects(&c, fid).await;
    assert!(!stale(&l), "{l:?}");
    let rw = nacre_rpc::msg::OpenFlags {
        read: true,
        write: true,
        ..Default::default()
    };
    let ost_read = Request::OstRead {
        obj: fid,
        offset: 0,
        len: 0,
        cksum: None,
        torn: nacre_core::cksum::TornBlocks::Take,
        verify: nacre_core::cksum::ReadVerify::Target,
    }
    .opcode();
    let reads = || -> u64 {
        c.oscs()
            .iter()
            .flat_map(|o| o.stats().samples())
            .filter(|s| s.opcode == ost_read)
            .map(|s| s.count)
            .sum()
    };
    // Opened for write and closed untouched: in sync, nothing read.
    let before = reads();
    let (f, _) = c.open(fid, rw, &Cred::root()).await.expect("open");
    let (_, _, l) = objects(&c, fid).await;
    assert!(
        stale(&l),
        "parity in sync while a writer holds the file: {l:?}"
    );
    c.release(&f).await.expect("close");
    let (_, _, l) = objects(&c, fid).await;
    assert!(!stale(&l), "parity stale after an untouched close: {l:?}");
    assert_eq!(
        reads(),
        before,
        "the untouched close read data to code parity"
    );
    // A size change through the handle: coded again at the close.
    let cut = 700_000usize;
    let (f, _) = c.open(fid, rw, &Cred::root()).await.expect("open");
    let attr = nacre_core::SetAttr {
        size: Some(cut as u64),
        ..Default::default()
    };
    c.setattr(fid, attr, &Cred::root(), Some(f.handle))
        .await
        .expect("ftruncate");
    c.release(&f).await.expect("close");
    let (_, _, l) = objects(&c, fid).await;
    assert!(
        !stale(&l),
        "parity stale after an ftruncate and close: {l:?}"
    );
    // Another writer, on a client that leaves parity to `lfs mirror resync`, comes and goes
    // while an untouched handle is open: the data changed under the parity, so the
    // untouched close cannot put it back in sync, and codes it.
    let w_client = mount(&cluster).await;
    w_client
        .tunables
        .set("llite", "ec_parity_on_close", 0)
        .expect("set");
    let (idle, _) = c.open(fid, rw, &Cred::root()).await.expect("open");
    let (w, _) = w_client.open(fid, rw, &Cred::root()).await.expect("open");
    let new = pattern(cut, 17);
    w_client
        .write(&w, 0, bytes::Bytes::from(new.clone()))
        .await
        .expect("write");
    w_client.release(&w).await.expect("close");
    let (_, _, l) = objects(&c, fid).await;
    assert!(
        stale(&l),
        "parity in sync while a writer holds the file: {l:?}"
    );
    c.release(&idle).await.expect("close");
    let (_, _, l) = objects(&c, fid).await;
    assert!(
        !stale(&l),
        "parity stale after the last writer closed: {l:?}"
    );
    settled(&c, fid).await;
    cluster.stop_ost(dobj[0].ost_idx).await;
    let c2 = mount(&cluster).await;
    let got = read_within(&c2, fid, cut).await.expect("read");
    assert!(got == new, "contents differ after the writers closed");
    cluster.stop().await;
}
