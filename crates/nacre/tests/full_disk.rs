//! A file system whose disk fills up: the writer gets ENOSPC within a bound, `close`
//! returns, nothing hangs, the process lives on, and removing files makes room again —
//! also when not even a log line can be written any more.

mod common;

use common::{Tmpfs, UpFs, require_fuse, require_root};
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
