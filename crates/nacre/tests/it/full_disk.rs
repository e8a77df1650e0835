//! A file system whose disk fills up: the writer gets ENOSPC within a bound, `close`
//! returns, nothing hangs, the process lives on, and removing files makes room again —
//! also when not even a log line can be written any more.

use crate::common;

use common::{Second, Tmpfs, UpFs, require_fuse, require_root};
use std::io::Write;
use std::os::unix::io::IntoRawFd;
use std::time::{Duration, Instant};

/// How long `close` may take on a full disk.
const CLOSE_BOUND: Duration = Duration::from_secs(5);

/// Writes 1 MiB pieces to `p` until a write fails; returns that error and how long the
/// close after it took, with its result.
/// On a disk too full for the file's name, the create's error and no close.
fn write_until_full(p: &std::path::Path, most_mib: usize) -> (std::io::Error, Duration, i32) {
    let mut f = match std::fs::File::create(p) {
        Ok(f) => f,
        Err(e) => return (e, Duration::ZERO, 0),
    };
    let chunk = vec![0x5au8; 1 << 20];
    let mut err = None;
    for _ in 0..most_mib {
        if let Err(e) = f.write_all(&chunk) {
            err = Some(e);
            break;
        }
    }
    let err = err.expect("the disk never filled");
    let fd = f.into_raw_fd();
    let t = Instant::now();
    // SAFETY: closing the descriptor we own, once.
    let rc = unsafe { libc::close(fd) };
    (err, t.elapsed(), rc)
}

fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid as i32, 0) == 0 }
}

#[test]
fn a_full_disk_gives_enospc_and_close_returns() {
    if !require_fuse() || !require_root() {
        return;
    }
    let disk = Tmpfs::mount("150m");
    let fs = UpFs::with_dir(disk.path().join("fs"), &[]);
    let pid = fs.pid();

    let (err, took, _) = write_until_full(&fs.path("one"), 300);
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "write: {err}");
    assert!(took < CLOSE_BOUND, "close took {took:?}");
    // More writers on the full disk get ENOSPC too, at create or write.
    for i in 0..5 {
        match std::fs::File::create(fs.path(&format!("two{i}"))) {
            Ok(mut f) => {
                let e = f
                    .write_all(&vec![1u8; 5 << 20])
                    .and_then(|_| f.sync_all())
                    .expect_err("a write on a full disk");
                assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "write {i}: {e}");
            }
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "create {i}: {e}"),
        }
    }
    // The files can be looked at and removed, and that makes room for new data.
    let t = Instant::now();
    std::fs::metadata(fs.path("one")).expect("stat of the file that filled the disk");
    std::fs::remove_file(fs.path("one")).expect("rm on a full disk");
    for i in 0..5 {
        let p = fs.path(&format!("two{i}"));
        if p.exists() {
            std::fs::remove_file(&p).expect("rm on a full disk");
        }
    }
    assert!(
        t.elapsed() < CLOSE_BOUND,
        "stat and rm took {:?}",
        t.elapsed()
    );
    std::thread::sleep(Duration::from_secs(1));
    std::fs::write(fs.path("small"), b"room again").expect("write after rm");
    assert_eq!(
        std::fs::read(fs.path("small")).expect("read"),
        b"room again"
    );
    assert!(alive(pid), "the server process died");
}

#[test]
fn a_disk_too_full_for_the_log_leaves_the_server_running() {
    if !require_fuse() || !require_root() {
        return;
    }
    let disk = Tmpfs::mount("150m");
    let fs = UpFs::with_dir(disk.path().join("fs"), &[]);
    let pid = fs.pid();
    std::fs::write(fs.path("keep"), b"kept").expect("write keep");
    // Nothing more fits anywhere, not even a line in nacre.log.
    disk.fill(&[&fs.dir.join("nacre.log")]);
    for i in 0..3 {
        // Each failure makes the client log a warning it cannot write.
        let (err, took, _) = write_until_full(&fs.path(&format!("more{i}")), 64);
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "write: {err}");
        assert!(took < CLOSE_BOUND, "close took {took:?}");
    }
    assert!(
        alive(pid),
        "the server process died when its log could not be written"
    );
    assert_eq!(std::fs::read(fs.path("keep")).expect("read"), b"kept");
    // Removing files works on the full disk (the MDT keeps room for it).
    for i in 0..3 {
        let p = fs.path(&format!("more{i}"));
        if p.exists() {
            std::fs::remove_file(&p).expect("rm on a full disk");
        }
    }
    std::fs::remove_file(fs.path("keep")).expect("rm on a full disk");
    disk.empty();
    // The MDT trusts a free-space reading for a tenth of a second.
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(fs.path("after"), b"room again").expect("write after the disk emptied");
    assert!(alive(pid));
}

/// One writer's stream: bytes its `write` calls accepted, the error that stopped it, and
/// the result of its close.
struct Stream {
    accepted: u64,
    err: std::io::Error,
    close: i32,
}

/// The bytes of stream `seed` at `pos`: different everywhere, so a lost or misplaced
/// piece shows.
fn stream_byte(seed: u8, pos: u64) -> u8 {
    ((pos / 4096) as u8).wrapping_mul(31) ^ (pos as u8) ^ seed
}

/// Writes 1 MiB pieces to `p` until a write fails, counting what each write accepted.
fn stream_until_full(p: &std::path::Path, seed: u8, most_mib: u64) -> Stream {
    let mut f = std::fs::File::create(p).expect("create");
    let mut pos = 0u64;
    let mut err = None;
    while pos < most_mib << 20 {
        let piece: Vec<u8> = (pos..pos + (1 << 20))
            .map(|i| stream_byte(seed, i))
            .collect();
        let mut at = 0;
        while at < piece.len() {
            match f.write(&piece[at..]) {
                Ok(0) => {
                    err = Some(std::io::Error::from_raw_os_error(libc::ENOSPC));
                    break;
                }
                Ok(n) => {
                    at += n;
                    pos += n as u64;
                }
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        if err.is_some() {
            break;
        }
    }
    let fd = f.into_raw_fd();
    // SAFETY: closing the descriptor we own, once.
    let close = unsafe { libc::close(fd) };
    Stream {
        accepted: pos,
        err: err.expect("the disk never filled"),
        close,
    }
}

/// Free bytes of the file system holding `p`.
fn free_bytes(p: &std::path::Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).expect("path");
    // SAFETY: a valid path and a zeroed struct for statvfs to fill.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    assert_eq!(rc, 0, "statvfs {}", p.display());
    st.f_bavail as u64 * st.f_frsize as u64
}

/// Two clients stream into one small OST until it is full (Lustre's grants): every byte
/// a `write` accepted reads back intact, the write that stopped each got ENOSPC, the
/// close after it succeeds, and together they took most of the free space.
#[test]
fn two_clients_filling_an_ost_keep_every_byte_write_accepted() {
    if !require_fuse() || !require_root() {
        return;
    }
    let disk = Tmpfs::mount("150m");
    let fs = UpFs::with_dir(disk.path().join("fs"), &[]);
    let m2 = Second::mount(&fs);
    let free = free_bytes(disk.path());
    let (a, b) = (fs.path("a"), m2.path("b"));
    let (sa, sb) = std::thread::scope(|s| {
        let ta = s.spawn(|| stream_until_full(&a, 1, 300));
        let tb = s.spawn(|| stream_until_full(&b, 2, 300));
        (ta.join().expect("writer a"), tb.join().expect("writer b"))
    });
    for (name, st) in [("a", &sa), ("b", &sb)] {
        assert_eq!(
            st.err.raw_os_error(),
            Some(libc::ENOSPC),
            "{name}: write after {} bytes: {}",
            st.accepted,
            st.err
        );
        assert_eq!(
            st.close,
            0,
            "{name}: close after the writes: {}",
            std::io::Error::last_os_error()
        );
    }
    // Read back through the client that did not write it.
    for (path, seed, st) in [(m2.path("a"), 1u8, &sa), (fs.path("b"), 2, &sb)] {
        let got = std::fs::read(&path).expect("read back");
        assert!(
            got.len() as u64 >= st.accepted,
            "{}: {} bytes accepted, {} readable (size {:?} on the writer's mount)",
            path.display(),
            st.accepted,
            got.len(),
            [fs.path("a"), m2.path("b")].map(|p| std::fs::metadata(p).map(|m| m.len()).ok())
        );
        if let Some(bad) = (0..st.accepted).find(|&i| got[i as usize] != stream_byte(seed, i)) {
            panic!(
                "{}: byte {bad} of {} accepted differs",
                path.display(),
                st.accepted
            );
        }
    }
    let total = sa.accepted + sb.accepted;
    assert!(
        total * 10 >= free * 7,
        "the writers took {total} bytes of {free} free"
    );
    // The grants are shown, and never more than the disk has free.
    // Lines of `name` and their largest value (OSTs on one disk share their books, and
    // each shows the total).
    let most = |name: &str| -> (usize, u64) {
        let out = common::ok(&["lctl", "get_param", "-n", name]);
        let v: Vec<u64> = out
            .lines()
            .map(|l| l.trim().parse().unwrap_or_else(|_| panic!("{name}: {l}")))
            .collect();
        (v.len(), v.iter().copied().max().unwrap_or(0))
    };
    let (osts, granted) = most("obdfilter.*.tot_granted");
    assert!(osts > 0, "no obdfilter.*.tot_granted");
    assert!(
        granted <= free_bytes(disk.path()),
        "{granted} granted on a full disk"
    );
    let (oscs, _) = most("osc.*.cur_grant_bytes");
    assert!(oscs > 0, "no osc.*.cur_grant_bytes");
    let (oscs, _) = most("osc.*.cur_dirty_bytes");
    assert!(oscs > 0, "no osc.*.cur_dirty_bytes");
}
