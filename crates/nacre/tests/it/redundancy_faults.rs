//! Mirrored (`-N2`) and 4+2 files under faults in the middle of streaming I/O through a
//! FUSE mount: an OST stopped while IOR-style readers and writers are in flight, and an
//! OST's object directory deleted under them. Readers see no error and the bytes written;
//! writers complete; once the OST is back, a resync brings every copy up to date and
//! verify agrees.

use crate::common;

use common::faults::*;
use common::require_fuse;
use nacre_core::layout::LCM_FL_RDONLY;
use nacre_core::{Fid, Layout};
use std::path::PathBuf;

/// Bytes of each stream's file: several stripes, many RPCs.
const LEN: usize = 16 << 20;
/// Streams (files) run at once.
const STREAMS: usize = 3;
/// OSTs: a 4+2 file, or two mirrors of three stripes, on every one of them.
const OSTS: u32 = 6;
/// How long a data OST stays down under a 4+2 write: well inside the recovery timeout
/// the write waits for it.
const OUTAGE: std::time::Duration = std::time::Duration::from_secs(2);

fn files(dir: &std::path::Path) -> Vec<PathBuf> {
    (0..STREAMS)
        .map(|i| dir.join(format!("ior.{i:08}")))
        .collect()
}

fn rel(fs: &MountedFs, p: &std::path::Path) -> String {
    p.strip_prefix(fs.path(""))
        .expect("under the mount")
        .to_string_lossy()
        .into_owned()
}

/// The OSTs of mirror `m` of `l` (the data mirror of a 4+2 file is 1).
fn mirror_osts(l: &Layout, m: u32) -> Vec<u32> {
    l.mirror(m).objects().map(|o| o.ost_idx).collect()
}

/// Every mirror of `fid` in sync and agreeing, as `lfs mirror verify` checks it.
fn verify_agrees(fs: &MountedFs, fid: Fid, what: &str) {
    let c = fs.client();
    let v = fs.block_on(c.mirror_verify(fid, &[])).expect("verify");
    assert!(v.in_sync(), "{what}: mirrors of {fid} disagree: {v:?}");
}

/// Each mirror of `fid`, read alone, holds `want`.
fn every_mirror_holds(fs: &MountedFs, fid: Fid, want: &[u8], what: &str) {
    let c = fs.client();
    for m in [1, 2] {
        let (got, n) = fs
            .block_on(c.mirror_read(fid, m, 0, want.len() as u64))
            .expect("read one mirror");
        assert_eq!(n, want.len() as u64, "{what}: mirror {m} of {fid}");
        assert!(got[..] == want[..], "{what}: mirror {m} of {fid} differs");
    }
}

#[test]
fn mirrored_reads_go_on_when_an_ost_stops_mid_stream() {
    if !require_fuse() {
        return;
    }
    let mut fs = MountedFs::up("flrrd", OSTS);
    let dir = fs.layout_dir("m", mirrored(3));
    let paths = files(&dir);
    let data = write_files(&paths, LEN, 1);
    let fids: Vec<Fid> = paths.iter().map(|p| fs.fid(&rel(&fs, p))).collect();
    for f in &fids {
        fs.settled(*f);
    }
    // The OST of the first stripe of mirror 1, the copy reads use first.
    let victim = mirror_osts(&fs.layout(fids[0]), 1)[0];
    let r = faulted_streams(&paths, None, LEN, || fs.stop_ost(victim));
    streams_ok(&r, Some(&data), "read with an OST stopped mid-stream");
    fs.start_ost(victim);
    for (f, d) in fids.iter().zip(&data) {
        verify_agrees(&fs, *f, "after the OST came back");
        every_mirror_holds(&fs, *f, d, "after the OST came back");
    }
    files_read_back(&paths, &data, "after the OST came back");
}

#[test]
fn mirrored_writes_complete_when_an_ost_stops_mid_stream_and_resync_repairs() {
    if !require_fuse() {
        return;
    }
    let mut fs = MountedFs::up("flrwr", OSTS);
    let dir = fs.layout_dir("m", mirrored(3));
    let paths = files(&dir);
    for p in &paths {
        std::fs::File::create(p).expect("create");
    }
    let fids: Vec<Fid> = paths.iter().map(|p| fs.fid(&rel(&fs, p))).collect();
    let victim = mirror_osts(&fs.layout(fids[0]), 1)[0];
    let data: Vec<Vec<u8>> = (0..STREAMS)
        .map(|i| common::cluster::pattern(LEN, 10 + i as u8))
        .collect();
    let r = faulted_streams(&paths, Some(&data), LEN, || fs.stop_ost(victim));
    streams_ok(&r, None, "write with an OST stopped mid-stream");
    // Every copy on the stopped OST is stale; the others hold the bytes.
    for f in &fids {
        let l = fs.layout(*f);
        for m in [1, 2] {
            let on_victim = mirror_osts(&l, m).contains(&victim);
            assert_eq!(
                l.mirror_stale_in(m, 0, 1),
                on_victim,
                "mirror {m} of {f} (OST{victim} stopped): {l:?}"
            );
        }
    }
    files_read_back(&paths, &data, "with the OST still stopped");
    fs.start_ost(victim);
    let c = fs.client();
    for (f, d) in fids.iter().zip(&data) {
        fs.block_on(c.mirror_resync(*f, &[])).expect("resync");
        let l = fs.layout(*f);
        assert_eq!(l.flr_state(), LCM_FL_RDONLY, "{l:?}");
        verify_agrees(&fs, *f, "after the resync");
        every_mirror_holds(&fs, *f, d, "after the resync");
    }
    files_read_back(&paths, &data, "after the resync");
}

#[test]
fn mirrored_reads_go_on_when_an_osts_object_directory_is_deleted_mid_stream() {
    if !require_fuse() {
        return;
    }
    let mut fs = MountedFs::up("flrrm", OSTS);
    let dir = fs.layout_dir("m", mirrored(3));
    let paths = files(&dir);
    let data = write_files(&paths, LEN, 20);
    let fids: Vec<Fid> = paths.iter().map(|p| fs.fid(&rel(&fs, p))).collect();
    for f in &fids {
        fs.settled(*f);
    }
    let victim = mirror_osts(&fs.layout(fids[0]), 1)[0];
    let objects = fs.ost_dir(victim).join("O");
    let r = faulted_streams(&paths, None, LEN, || common::rm_rf_live(&objects));
    streams_ok(
        &r,
        Some(&data),
        "read with the OST's objects deleted mid-stream",
    );
    // The OST back, its objects gone: reads still see the data, verify finds the lost
    // copies, and `verify --stale` then resync rewrites them.
    fs.stop_ost(victim);
    fs.start_ost(victim);
    files_read_back(&paths, &data, "after the OST came back empty");
    let c = fs.client();
    for (f, d) in fids.iter().zip(&data) {
        let v = fs.block_on(c.mirror_verify(*f, &[])).expect("verify");
        if mirror_osts(&fs.layout(*f), 1).contains(&victim)
            || mirror_osts(&fs.layout(*f), 2).contains(&victim)
        {
            assert!(
                v.chunks.iter().any(|c| !c.agrees()),
                "verify missed the lost copy of {f}: {v:?}"
            );
        }
        fs.block_on(c.mark_disagreeing_stale(*f, &v))
            .expect("verify --stale");
        until_ok("resync", || fs.block_on(c.mirror_resync(*f, &[])));
        verify_agrees(&fs, *f, "after the resync");
        every_mirror_holds(&fs, *f, d, "after the resync");
    }
    files_read_back(&paths, &data, "after the resync");
}

#[test]
fn ec_reads_go_on_when_an_ost_stops_mid_stream() {
    if !require_fuse() {
        return;
    }
    let mut fs = MountedFs::up("ecrd", OSTS);
    let dir = fs.layout_dir("e", ec42());
    let paths = files(&dir);
    let data = write_files(&paths, LEN, 30);
    let fids: Vec<Fid> = paths.iter().map(|p| fs.fid(&rel(&fs, p))).collect();
    for f in &fids {
        fs.settled(*f);
        parity_current(&fs, *f);
    }
    let victim = mirror_osts(&fs.layout(fids[0]), 1)[1];
    let r = faulted_streams(&paths, None, LEN, || fs.stop_ost(victim));
    streams_ok(&r, Some(&data), "4+2 read with an OST stopped mid-stream");
    fs.start_ost(victim);
    files_read_back(&paths, &data, "after the OST came back");
}

#[test]
fn ec_reads_go_on_when_an_osts_object_directory_is_deleted_mid_stream() {
    if !require_fuse() {
        return;
    }
    let mut fs = MountedFs::up("ecrm", OSTS);
    let dir = fs.layout_dir("e", ec42());
    let paths = files(&dir);
    let data = write_files(&paths, LEN, 40);
    let fids: Vec<Fid> = paths.iter().map(|p| fs.fid(&rel(&fs, p))).collect();
    for f in &fids {
        fs.settled(*f);
        parity_current(&fs, *f);
    }
    let victim = mirror_osts(&fs.layout(fids[0]), 1)[0];
    let objects = fs.ost_dir(victim).join("O");
    let r = faulted_streams(&paths, None, LEN, || common::rm_rf_live(&objects));
    streams_ok(&r, Some(&data), "4+2 read with the OST's objects deleted");
    // Back, empty: reads rebuild what it lost, and a resync rebuilds the lost objects
    // rather than take them for zeros.
    fs.stop_ost(victim);
    fs.start_ost(victim);
    files_read_back(&paths, &data, "after the OST came back empty");
    let c = fs.client();
    for f in &fids {
        until_ok("EC resync", || fs.block_on(c.ec_resync(*f, None)));
    }
    files_read_back(&paths, &data, "after the resync");
    // Every stripe holds its data again: with another data OST stopped, a read decodes
    // from the rebuilt one.
    let other = mirror_osts(&fs.layout(fids[0]), 1)
        .into_iter()
        .find(|&o| o != victim)
        .expect("another data OST");
    fs.stop_ost(other);
    files_read_back(&paths, &data, "with another OST stopped after the resync");
}

/// How long an OST just restarted may refuse writes: until its MDT has connected again
/// and made the objects it lost again (a second or two), with room for a loaded machine.
const BACK_WITHIN: std::time::Duration = std::time::Duration::from_secs(20);

/// Runs `op` until it succeeds, at most [`BACK_WITHIN`].
fn until_ok<T, E: std::fmt::Display>(what: &str, mut op: impl FnMut() -> Result<T, E>) -> T {
    let end = std::time::Instant::now() + BACK_WITHIN;
    loop {
        match op() {
            Ok(v) => return v,
            Err(e) => assert!(
                std::time::Instant::now() < end,
                "{what}: still failing after {BACK_WITHIN:?}: {e}"
            ),
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// The parity of 4+2 file `fid` is in sync (the writer's close recomputed it).
fn parity_current(fs: &MountedFs, fid: Fid) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let l = fs.layout(fid);
        if l.components
            .iter()
            .filter(|c| c.is_parity())
            .all(|c| !c.is_stale())
        {
            return;
        }
        assert!(
            std::time::Instant::now() < end,
            "parity of {fid} still stale: {l:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Creates `paths` empty (their objects allocated), so a test knows their OSTs before
/// the streams write them.
fn created(fs: &MountedFs, paths: &[PathBuf]) -> Vec<Fid> {
    paths
        .iter()
        .map(|p| {
            std::fs::File::create(p).expect("create");
            fs.fid(&rel(fs, p))
        })
        .collect()
}

/// The OSTs of the parity components of `l`.
fn parity_osts(l: &Layout) -> Vec<u32> {
    l.components
        .iter()
        .filter(|c| c.is_parity())
        .flat_map(|c| c.objects.iter().map(|o| o.ost_idx))
        .collect()
}

/// A 4+2 write with a data OST stopped waits for it, as a Lustre client does (up to the
/// recovery timeout): the OST back within it, every write completes, the close makes
/// parity current, and a read with another data OST stopped decodes the new bytes.
#[test]
fn ec_writes_complete_across_a_data_ost_outage_mid_stream() {
    if !require_fuse() {
        return;
    }
    let mut fs = MountedFs::up("ecwr", OSTS);
    let dir = fs.layout_dir("e", ec42());
    let paths = files(&dir);
    let fids = created(&fs, &paths);
    let data_osts = mirror_osts(&fs.layout(fids[0]), 1);
    let victim = data_osts[1];
    for f in &fids {
        assert_eq!(mirror_osts(&fs.layout(*f), 1), data_osts, "{f}");
    }
    let data: Vec<Vec<u8>> = (0..STREAMS)
        .map(|i| common::cluster::pattern(LEN, 50 + i as u8))
        .collect();
    let r = faulted_streams(&paths, Some(&data), LEN, || {
        fs.stop_ost(victim);
        std::thread::sleep(OUTAGE);
        fs.start_ost(victim);
    });
    streams_ok(&r, None, "4+2 write across a data OST's outage");
    for f in &fids {
        fs.settled(*f);
        parity_current(&fs, *f);
    }
    files_read_back(&paths, &data, "after the write");
    fs.stop_ost(data_osts[2]);
    files_read_back(&paths, &data, "decoded with another data OST stopped");
}

/// A 4+2 write with a parity OST stopped: the data goes on to its own OSTs and every
/// write completes; the parity cannot be current until the OST is back and a resync
/// recomputes it, and then a read with a data OST stopped decodes the new bytes.
#[test]
fn ec_writes_complete_with_a_parity_ost_stopped_mid_stream() {
    if !require_fuse() {
        return;
    }
    let mut fs = MountedFs::up("ecpw", OSTS);
    let dir = fs.layout_dir("e", ec42());
    let paths = files(&dir);
    let fids = created(&fs, &paths);
    let l = fs.layout(fids[0]);
    let victim = parity_osts(&l)[0];
    for f in &fids {
        let l = fs.layout(*f);
        assert!(
            parity_osts(&l).contains(&victim) && !mirror_osts(&l, 1).contains(&victim),
            "OST{victim} holds a data stripe of {f}: {l:?}"
        );
    }
    let data: Vec<Vec<u8>> = (0..STREAMS)
        .map(|i| common::cluster::pattern(LEN, 60 + i as u8))
        .collect();
    let r = faulted_streams(&paths, Some(&data), LEN, || fs.stop_ost(victim));
    streams_ok(&r, None, "4+2 write with a parity OST stopped");
    files_read_back(&paths, &data, "with the parity OST stopped");
    fs.start_ost(victim);
    let c = fs.client();
    for f in &fids {
        // The close's own recomputation may still hold the file.
        until_ok("EC resync", || fs.block_on(c.ec_resync(*f, None)));
        parity_current(&fs, *f);
    }
    fs.stop_ost(mirror_osts(&l, 1)[0]);
    files_read_back(&paths, &data, "decoded with a data OST stopped");
}
