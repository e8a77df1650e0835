//! What `fsync`, `fdatasync`, `fsyncdir` and `O_SYNC` writes do on the targets: the
//! file's OST objects are synced and its MDT's journal is synced, with concurrent callers
//! sharing one journal sync. (Whether the bytes then survive a power cut is the power-cut
//! suite's to show; this checks that the syncs happen at all and are shared.)

use crate::common;

use common::{UpFs, ok, require_fuse};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;

/// `osd-nacre.*.journal_stats`' journal syncs, summed over MDTs.
fn journal_syncs() -> u64 {
    let out = ok(&["lctl", "get_param", "-n", "osd-nacre.*.journal_stats"]);
    out.lines()
        .filter_map(|l| l.strip_prefix("journal_syncs "))
        .map(|n| n.trim().parse::<u64>().expect("count"))
        .sum()
}

/// `ost_sync` requests the OSTs served, summed.
fn ost_syncs() -> u64 {
    let out = ok(&["lctl", "get_param", "-n", "obdfilter.*.stats"]);
    out.lines()
        .filter(|l| l.starts_with("ost_sync "))
        .map(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|n| n.parse::<u64>().ok())
                .expect("count")
        })
        .sum()
}

#[test]
fn fsync_syncs_the_objects_and_the_mdt_journal() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    let (j0, o0) = (journal_syncs(), ost_syncs());
    let mut f = std::fs::File::create(fs.path("f")).expect("create");
    f.write_all(&vec![7u8; 1 << 20]).expect("write");
    f.sync_all().expect("fsync");
    let (j1, o1) = (journal_syncs(), ost_syncs());
    assert!(j1 > j0, "fsync did not sync the MDT journal ({j0} -> {j1})");
    assert!(o1 > o0, "fsync did not sync the OST objects ({o0} -> {o1})");
    // fdatasync syncs the journal when the MDT journaled something since its last sync
    // (here the new mode; with nothing journaled there is nothing to sync).
    f.write_all(b"more").expect("write");
    f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    f.sync_data().expect("fdatasync");
    assert!(journal_syncs() > j1, "fdatasync");
    assert!(ost_syncs() > o1, "fdatasync");
    drop(f);

    // fsyncdir: the names of a directory.
    std::fs::create_dir(fs.path("d")).expect("mkdir");
    std::fs::write(fs.path("d/new"), b"x").expect("create in d");
    let j2 = journal_syncs();
    std::fs::File::open(fs.path("d"))
        .expect("open dir")
        .sync_all()
        .expect("fsyncdir");
    assert!(
        journal_syncs() > j2,
        "fsyncdir did not sync the MDT journal"
    );

    // O_SYNC writes are synced as they return.
    let (j3, o3) = (journal_syncs(), ost_syncs());
    let mut s = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_SYNC)
        .open(fs.path("osync"))
        .expect("open O_SYNC");
    s.write_all(b"synced").expect("write");
    assert!(journal_syncs() > j3 && ost_syncs() > o3, "O_SYNC write");
}

#[test]
fn concurrent_fsyncs_share_journal_syncs() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    const THREADS: usize = 8;
    const EACH: usize = 16;
    let before = journal_syncs();
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let dir = fs.mnt.clone();
            std::thread::spawn(move || {
                for i in 0..EACH {
                    let mut f =
                        std::fs::File::create(dir.join(format!("t{t}-{i}"))).expect("create");
                    f.write_all(b"small").expect("write");
                    f.sync_all().expect("fsync");
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    let syncs = journal_syncs() - before;
    let calls = (THREADS * EACH) as u64;
    assert!(syncs >= 1, "no journal sync at all");
    assert!(
        syncs < calls,
        "{calls} concurrent fsyncs took {syncs} journal syncs: none shared"
    );
}
