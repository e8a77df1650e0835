//! Checksums end to end and at rest, through the client library in the servers' own
//! process (the in-process delivery, which hands bulks over without copies): bit flips in
//! object files are EIO on read and found by scrub with the file's FID and path; bulks
//! damaged on the way are caught and sent again. `checksums_tcp.rs` runs the same over TCP.

use crate::common;

use common::cluster::{mount, pattern, start};
use common::integrity::*;
use nacre_core::layout::{Component, EOF};
use nacre_core::{Errno, Layout};
use rand::SeedableRng;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flipped_bits_are_eio_on_read_and_found_by_scrub() {
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "cksumfs", 1, 4).await;
    let c = mount(&cluster).await;
    assert!(nacre_rpc::lo::any_registered(), "not the in-process path");
    let files = populate(&c, "data", 40, 1).await;
    let flips = flip_osts(&cluster, &files, 6, 2);
    assert_eq!(flips.len(), 24);
    reads_fail_only_where_flipped(&c, &files, &flips).await;
    // A read stops at its first bad block: each file hit counts at least once.
    let hit: std::collections::HashSet<_> = flips.iter().map(|(_, file)| *file).collect();
    let found: u64 = (0..4)
        .map(|i| ost(&cluster, i).store().checksum_errors())
        .sum();
    assert!(
        found >= hit.len() as u64,
        "{found} bad blocks counted for {} files hit",
        hit.len()
    );
    let bad_reads: u64 = (0..4)
        .map(|i| {
            c.cksum_stats
                .get(nacre_core::TargetName::ost(i))
                .corrupt_reads
        })
        .sum();
    assert!(bad_reads >= 1);
    scrub_all(&cluster).await;
    scrub_found_every_flip(&cluster, &files, &flips);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damage_on_the_way_is_caught_and_resent() {
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "wirefs", 1, 2).await;
    let c = mount(&cluster).await;
    damaged_bulks_are_caught_and_resent(&cluster, &c).await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_on_mdt_is_checked_and_scrubbed_too() {
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "domfs", 1, 1).await;
    let c = mount(&cluster).await;
    let d = common::cluster::create(&c, c.root(), b"small", common::cluster::DIR)
        .await
        .expect("mkdir");
    let dom = || {
        Layout::composite(vec![
            Component::dom(1 << 20),
            Component::raid0(1 << 20, EOF, 1, 1 << 20, -1),
        ])
    };
    let mut files = Vec::new();
    for i in 0..12 {
        let data = pattern(1000 + i * 70_000, i as u8);
        let name = format!("f{i}");
        let fid = write_file(&c, d.attr.fid, &name, Some(dom()), &data)
            .await
            .expect("write");
        files.push((format!("/small/{name}"), fid, data));
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let flips = nacre_osd::inject::flip_random(&dir.path().join("mdt0").join("dom"), 5, &mut rng)
        .expect("flip");
    assert_eq!(flips.len(), 5);
    let mdt = cluster.mdts[0]
        .as_ref()
        .and_then(|s| s.mdt())
        .expect("MDT0")
        .clone();
    let mut hit = std::collections::HashMap::new();
    for f in &flips {
        let p = mdt
            .dom_store()
            .filter_fid(&f.obj)
            .expect("fid")
            .expect("written");
        hit.insert(p, f);
    }
    for (name, fid, data) in &files {
        let got = read_file(&c, *fid, data.len() as u64).await;
        if hit.contains_key(fid) {
            assert_eq!(got.err(), Some(Errno::EIO), "{name}");
        } else {
            assert!(got.expect("read") == *data, "{name}");
        }
    }
    assert!(mdt.dom_store().checksum_errors() >= 5);
    // The DoM scrub names the files by path.
    let before = mdt.dom_scrub().passes();
    mdt.set_dom_param("dom_scrub_rate_mb", "0").expect("rate");
    mdt.set_dom_param("dom_scrub_start", "1").expect("start");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while mdt.dom_scrub().passes() == before {
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            mdt.dom_scrub().status()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let report = mdt.dom_scrub().bad_blocks();
    for f in &flips {
        let file = hit
            .iter()
            .find(|(_, v)| v.obj == f.obj)
            .map(|(k, _)| *k)
            .expect("file");
        let (name, _, _) = files.iter().find(|(_, fid, _)| *fid == file).expect("name");
        let line = format!(
            "object {} file {file} path {name} offset {}:",
            f.obj,
            f.offset & !4095
        );
        assert!(report.contains(&line), "{line}\nnot in:\n{report}");
    }
    assert_eq!(mdt.dom_scrub().errors(), 5);
    cluster.stop().await;
}
