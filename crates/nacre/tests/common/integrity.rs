//! Checksum scenarios run over the in-process delivery and over TCP alike: files written
//! through the client library, bits flipped in the targets' object files, bulks damaged on
//! the way.

use super::cluster::{FILE, create, pattern, rw};
use bytes::Bytes;
use nacre::local::LocalCluster;
use nacre_client::Client;
use nacre_client::file::OpenFile;
use nacre_core::layout::{Component, EOF};
use nacre_core::{Errno, Fid, Layout, TargetName};
use nacre_osd::inject::{self, Flip};
use nacre_rpc::msg::{Cred, InodeInfo, LayoutRequest, OpenFlags};
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Creates `name` in `dir` with `layout` (or what it inherits), writes `data`, closes it.
pub async fn write_file(
    c: &Arc<Client>,
    dir: Fid,
    name: &str,
    layout: Option<Layout>,
    data: &[u8],
) -> Result<Fid, Errno> {
    let (info, f) = create_open(c, dir, name, layout).await?;
    c.write(&f, 0, Bytes::copy_from_slice(data)).await?;
    let synced = c.fsync(&f).await;
    c.release(&f).await?;
    synced.map(|_| info.attr.fid)
}

/// Creates `name` in `dir` as root, with `layout` (else what it inherits), open for
/// reading and writing.
pub async fn create_open(
    c: &Client,
    dir: Fid,
    name: &str,
    layout: Option<Layout>,
) -> Result<(InodeInfo, OpenFile), Errno> {
    let req = match layout {
        Some(l) => LayoutRequest::Explicit(l),
        None => LayoutRequest::Inherit,
    };
    let (info, h) = c
        .create(
            dir,
            name.as_bytes(),
            FILE,
            0,
            &Cred::root(),
            None,
            req,
            Some(rw()),
            true,
        )
        .await?;
    let f = OpenFile::new(
        info.attr.fid,
        h.ok_or(Errno::EIO)?,
        rw(),
        info.layout.clone(),
    );
    Ok((info, f))
}

/// Reads a whole file through a fresh handle (nothing cached from before).
pub async fn read_file(c: &Arc<Client>, fid: Fid, len: u64) -> Result<Vec<u8>, Errno> {
    let flags = OpenFlags {
        read: true,
        ..OpenFlags::default()
    };
    let (f, _) = c.open(fid, flags, &Cred::root()).await?;
    let mut out = Vec::with_capacity(len as usize);
    let r = async {
        while (out.len() as u64) < len {
            let b = c.read(&f, out.len() as u64, 1 << 20).await?;
            if b.is_empty() {
                break;
            }
            out.extend_from_slice(&b);
        }
        Ok(())
    }
    .await;
    c.release(&f).await?;
    r.map(|()| out)
}

pub fn ost(cluster: &LocalCluster, i: usize) -> &Arc<nacre_ost::Ost> {
    cluster.osts[i]
        .as_ref()
        .and_then(|s| s.ost())
        .expect("OST running")
}

/// Files of several shapes (one stripe, four 64 KiB stripes, sizes from a byte to a few
/// MiB) in directory `name` of the root: name, FID and contents.
/// Makes every object the first `osts` OSTs hold one their last crash may have torn, as
/// an OST start does for the objects written after its last commit's sync began (here
/// the window is the hour before and after now, so it also covers a flip made later).
pub fn open_torn_windows(cluster: &LocalCluster, osts: usize) {
    let now = std::time::SystemTime::now();
    let hour = std::time::Duration::from_secs(3600);
    for i in 0..osts {
        ost(cluster, i)
            .store()
            .set_torn_window(now - hour, now + hour);
    }
}

/// Blocks of the first `osts` OSTs reported torn to a reader with another copy, and
/// taken as kept.
pub fn torn_counts(cluster: &LocalCluster, osts: usize) -> (u64, u64) {
    (0..osts).fold((0, 0), |(r, t), i| {
        let s = ost(cluster, i).store();
        (r + s.torn_reported(), t + s.torn_retaken())
    })
}

pub async fn populate(
    c: &Arc<Client>,
    name: &str,
    files: usize,
    seed: u64,
) -> Vec<(String, Fid, Vec<u8>)> {
    let dir = create(c, c.root(), name.as_bytes(), super::cluster::DIR)
        .await
        .expect("mkdir");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    for i in 0..files {
        let size = match i % 4 {
            0 => rng.gen_range(1..8192),
            1 => rng.gen_range(8192..200_000),
            _ => rng.gen_range(200_000..3_000_000),
        };
        let layout = (i % 2 == 1).then(|| Layout::plain(4, 65536, -1));
        let data = pattern(size, i as u8);
        let fname = format!("f{i}");
        let fid = write_file(c, dir.attr.fid, &fname, layout, &data)
            .await
            .expect("write");
        out.push((format!("/{name}/{fname}"), fid, data));
    }
    out
}

/// Flips a bit at a random offset in `per_ost` objects of every OST, objects of `files`
/// only; returns each flip with the FID of the file it hit.
pub fn flip_osts(
    cluster: &LocalCluster,
    files: &[(String, Fid, Vec<u8>)],
    per_ost: usize,
    seed: u64,
) -> Vec<(Flip, Fid)> {
    let ours: std::collections::HashSet<Fid> = files.iter().map(|(_, f, _)| *f).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    for i in 0..cluster.osts.len() {
        let store = ost(cluster, i).store();
        let mut objs: Vec<_> = inject::objects_with_data(&cluster.dir.join(format!("ost{i}")))
            .expect("objects")
            .into_iter()
            .filter_map(|(obj, path, size)| {
                let p = store.filter_fid(&obj).ok().flatten()?;
                let file = Fid::new(p.seq, p.oid, 0);
                ours.contains(&file).then_some((obj, path, size, file))
            })
            .collect();
        for _ in 0..per_ost {
            if objs.is_empty() {
                break;
            }
            let (obj, path, size, file) = objs.swap_remove(rng.gen_range(0..objs.len()));
            let (offset, bit) = (rng.gen_range(0..size), rng.gen_range(0..8u8));
            inject::flip_bit(&path, offset, bit).expect("flip");
            out.push((
                Flip {
                    obj,
                    path,
                    offset,
                    bit,
                },
                file,
            ));
        }
    }
    out
}

/// Every file a flip hit reads as EIO, whole; every other file reads exactly as written.
pub async fn reads_fail_only_where_flipped(
    c: &Arc<Client>,
    files: &[(String, Fid, Vec<u8>)],
    flips: &[(Flip, Fid)],
) {
    let hit: HashMap<Fid, &Flip> = flips.iter().map(|(f, file)| (*file, f)).collect();
    for (name, fid, data) in files {
        let got = read_file(c, *fid, data.len() as u64).await;
        match hit.get(fid) {
            Some(f) => assert_eq!(
                got.as_ref().map(Vec::len).err().copied(),
                Some(Errno::EIO),
                "{name}: a flip at {} of {} went unnoticed",
                f.offset,
                f.obj
            ),
            None => {
                let got = got.unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(got == *data, "{name}: contents differ");
            }
        }
    }
}

/// Starts a scrub pass on every OST, at full speed, and waits for each to complete.
pub async fn scrub_all(cluster: &LocalCluster) {
    let before: Vec<u64> = (0..cluster.osts.len())
        .map(|i| ost(cluster, i).scrub().passes())
        .collect();
    for i in 0..cluster.osts.len() {
        let o = ost(cluster, i);
        o.set_param("scrub_rate_mb", "0").expect("rate");
        o.set_param("scrub_start", "1").expect("start");
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for (i, b) in before.iter().enumerate() {
        while ost(cluster, i).scrub().passes() <= *b {
            assert!(
                Instant::now() < deadline,
                "OST{i}: no scrub pass completed:\n{}",
                ost(cluster, i).scrub().status()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Each flip is in its OST's scrub report, with the file's FID and path.
pub fn scrub_found_every_flip(
    cluster: &LocalCluster,
    files: &[(String, Fid, Vec<u8>)],
    flips: &[(Flip, Fid)],
) {
    let path: HashMap<Fid, &str> = files.iter().map(|(n, f, _)| (*f, n.as_str())).collect();
    let reports: String = (0..cluster.osts.len())
        .map(|i| ost(cluster, i).scrub().bad_blocks())
        .collect();
    for (f, file) in flips {
        let line = format!(
            "object {} file {file} path {} offset {}:",
            f.obj,
            path.get(file).copied().unwrap_or("?"),
            f.offset & !4095
        );
        assert!(reports.contains(&line), "{line}\nnot in:\n{reports}");
    }
    let failed: u64 = (0..cluster.osts.len())
        .map(|i| ost(cluster, i).scrub().errors())
        .sum();
    assert_eq!(failed, flips.len() as u64, "{reports}");
}

fn osts(c: &Client) -> Vec<TargetName> {
    (0..c.ost_count() as u32).map(TargetName::ost).collect()
}

/// Damage on the way (injected after the checksums are computed, or before they are
/// checked) is caught at the other end and the bulk sent again: the data arrives whole,
/// and both ends count it. With no resends allowed, the write fails instead.
pub async fn damaged_bulks_are_caught_and_resent(cluster: &LocalCluster, c: &Arc<Client>) {
    let errors = |c: &Client| -> u64 {
        osts(c)
            .into_iter()
            .map(|t| c.cksum_stats.get(t).checksum_errors)
            .sum()
    };
    let refused = || -> u64 {
        (0..cluster.osts.len())
            .map(|i| ost(cluster, i).bulk_checksum_errors())
            .sum()
    };
    let dir = create(c, c.root(), b"wire", super::cluster::DIR)
        .await
        .expect("mkdir");
    let data = pattern(3 << 20, 9);
    c.checksum_faults.damage_sends(3);
    let fid = write_file(
        c,
        dir.attr.fid,
        "sent",
        Some(Layout::plain(2, 1 << 20, -1)),
        &data,
    )
    .await
    .expect("a damaged write is sent again");
    assert_eq!(refused(), 3, "the OSTs did not refuse the damaged bulks");
    assert_eq!(errors(c), 3);
    c.checksum_faults.damage_receives(2);
    let got = read_file(c, fid, data.len() as u64).await.expect("read");
    assert!(got == data, "a damaged read came through");
    assert_eq!(errors(c), 5);
    assert_eq!(refused(), 3);

    // Data-on-MDT takes the same path.
    let mdt = cluster.mdts[0]
        .as_ref()
        .and_then(|s| s.mdt())
        .expect("MDT0");
    let dom = Layout::composite(vec![
        Component::dom(1 << 20),
        Component::raid0(1 << 20, EOF, 1, 1 << 20, -1),
    ]);
    let small = pattern(300_000, 4);
    c.checksum_faults.damage_sends(1);
    let dfid = write_file(c, dir.attr.fid, "dom", Some(dom), &small)
        .await
        .expect("a damaged DoM write is sent again");
    assert_eq!(mdt.dom_bulk_checksum_errors(), 1);
    assert_eq!(c.cksum_stats.get(TargetName::mdt(0)).checksum_errors, 1);
    c.checksum_faults.damage_receives(1);
    assert!(read_file(c, dfid, small.len() as u64).await.expect("read") == small);
    assert_eq!(c.cksum_stats.get(TargetName::mdt(0)).checksum_errors, 2);

    // Out of resends: the write fails rather than store damaged data.
    c.tunables
        .set("osc", "resend_count", 0)
        .expect("resend_count");
    c.checksum_faults.damage_sends(1);
    let r = write_file(c, dir.attr.fid, "lost", None, &data[..1 << 20]).await;
    assert_eq!(r.err(), Some(Errno::EIO));
    c.tunables
        .set("osc", "resend_count", 10)
        .expect("resend_count");
    // Nothing damaged was ever stored.
    assert!(read_file(c, fid, data.len() as u64).await.expect("read") == data);
    for i in 0..cluster.osts.len() {
        assert_eq!(ost(cluster, i).store().checksum_errors(), 0);
    }
    assert_eq!(mdt.dom_store().checksum_errors(), 0);
}
