//! Two clients of one file system see each other's data: after a writer's `close` or
//! `fsync` returns, a read on the other mount returns the new bytes, whether it opens the
//! file afresh, holds it open, or has it mapped. The first mount is `nacre up`'s own
//! (in-process delivery), the second a `nacre mount` process (TCP).

use crate::common;

use common::{Second, UpFs, require_fuse};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

fn read_all(p: &Path) -> Vec<u8> {
    let mut v = Vec::new();
    File::open(p)
        .and_then(|mut f| f.read_to_end(&mut v))
        .expect("read");
    v
}

fn record(i: usize, len: usize, upper: bool) -> Vec<u8> {
    let base = if upper { b'A' } else { b'a' };
    vec![base + (i % 26) as u8; len]
}

#[test]
fn rewrites_of_the_same_size_reach_the_other_client() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    let m2 = Second::mount(&fs);
    std::fs::write(fs.path("f"), vec![b'A'; 5000]).expect("write");
    assert_eq!(read_all(&m2.path("f")), vec![b'A'; 5000]);
    // Stat in between, as `ls -l` would: newer attributes must not hide newer data.
    for c in [b'B', b'C', b'D'] {
        std::fs::write(fs.path("f"), vec![c; 5000]).expect("rewrite");
        let _ = std::fs::metadata(m2.path("f")).expect("stat");
        assert_eq!(read_all(&m2.path("f")), vec![c; 5000], "rewrite with {c}");
    }
    // And the other way round.
    std::fs::write(m2.path("f"), vec![b'E'; 5000]).expect("write on m2");
    assert_eq!(read_all(&fs.path("f")), vec![b'E'; 5000]);
}

#[test]
fn two_clients_filling_a_presized_file_read_each_others_records() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    let m2 = Second::mount(&fs);
    const R: usize = 4096 + 13;
    const N: usize = 200;
    let p1 = fs.path("shared");
    File::create(&p1)
        .and_then(|f| f.set_len((R * N * 2) as u64))
        .expect("presize");
    let a = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&p1)
        .expect("open m1");
    let b = OpenOptions::new()
        .read(true)
        .write(true)
        .open(m2.path("shared"))
        .expect("open m2");
    // Both have the (zero) pages cached before anyone writes.
    let mut buf = vec![0; R * N * 2];
    a.read_exact_at(&mut buf, 0).expect("read m1");
    b.read_exact_at(&mut buf, 0).expect("read m2");
    for i in 0..N {
        a.write_all_at(&record(i, R, true), (2 * i * R) as u64)
            .expect("write m1");
        b.write_all_at(&record(i, R, false), ((2 * i + 1) * R) as u64)
            .expect("write m2");
    }
    drop(a);
    drop(b);
    for p in [p1, m2.path("shared")] {
        // A stat first, as `ls -l` would: newer attributes must not hide newer data.
        let _ = std::fs::metadata(&p).expect("stat");
        let d = read_all(&p);
        let bad = (0..N)
            .filter(|&i| {
                d[2 * i * R..(2 * i + 1) * R] != record(i, R, true)[..]
                    || d[(2 * i + 1) * R..(2 * i + 2) * R] != record(i, R, false)[..]
            })
            .count();
        assert_eq!(bad, 0, "{}: {bad} of {N} record pairs wrong", p.display());
    }
}

#[test]
fn an_open_reader_sees_each_record_after_the_writers_fsync() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    let m2 = Second::mount(&fs);
    const R: usize = 4096 + 13;
    const N: usize = 200;
    // Writer on each side in turn: in-process to TCP client, then back.
    for (wdir, rdir) in [
        (fs.mnt.clone(), m2.0.clone()),
        (m2.0.clone(), fs.mnt.clone()),
    ] {
        let name = "records";
        File::create(wdir.join(name))
            .and_then(|f| f.set_len((R * N) as u64))
            .expect("presize");
        let reader = File::open(rdir.join(name)).expect("open reader");
        let mut buf = vec![0; R * N];
        reader.read_exact_at(&mut buf, 0).expect("cache the zeros");
        let writer = OpenOptions::new()
            .write(true)
            .open(wdir.join(name))
            .expect("open writer");
        let mut missed = 0;
        for i in 0..N {
            writer
                .write_all_at(&record(i, R, true), (i * R) as u64)
                .expect("write");
            writer.sync_all().expect("fsync");
            let mut got = vec![0; R];
            reader
                .read_exact_at(&mut got, (i * R) as u64)
                .expect("read");
            if got != record(i, R, true) {
                missed += 1;
            }
        }
        assert_eq!(
            missed,
            0,
            "writer {}: reader missed {missed} of {N}",
            wdir.display()
        );
    }
}

#[test]
fn an_mmap_write_reaches_the_other_client_after_msync_and_close() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    let m2 = Second::mount(&fs);
    const LEN: usize = 8192;
    std::fs::write(fs.path("mm"), vec![b'x'; LEN]).expect("write");
    // The other client maps the file and keeps the mapping.
    let rf = File::open(m2.path("mm")).expect("open m2");
    let held = Map::new(&rf, LEN, false);
    assert_eq!(held.bytes()[0], b'x');
    {
        let wf = OpenOptions::new()
            .read(true)
            .write(true)
            .open(fs.path("mm"))
            .expect("open m1");
        let mut w = Map::new(&wf, LEN, true);
        w.bytes_mut()[..4].copy_from_slice(b"MMAP");
        w.sync();
    }
    assert_eq!(&held.bytes()[..4], b"MMAP", "a mapping held open");
    let _ = std::fs::metadata(m2.path("mm")).expect("stat");
    assert_eq!(&read_all(&m2.path("mm"))[..4], b"MMAP", "a fresh open");
}

/// A shared file mapping, unmapped on drop.
struct Map {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Map {
    fn new(f: &File, len: usize, write: bool) -> Map {
        use std::os::fd::AsRawFd;
        let prot = if write {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        // SAFETY: a fresh shared mapping of an open file; checked for failure below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        assert_ne!(
            ptr,
            libc::MAP_FAILED,
            "mmap: {}",
            std::io::Error::last_os_error()
        );
        Map { ptr, len }
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is `len` bytes and lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and mapped writable by whoever calls this.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut u8, self.len) }
    }

    fn sync(&self) {
        // SAFETY: the mapping is valid.
        let r = unsafe { libc::msync(self.ptr, self.len, libc::MS_SYNC) };
        assert_eq!(r, 0, "msync: {}", std::io::Error::last_os_error());
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: unmapping what `new` mapped.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

#[test]
fn two_clients_removing_one_tree_both_succeed() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    let m2 = Second::mount(&fs);
    for d in 0..8 {
        let dir = fs.path(&format!("t/d{d}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        for f in 0..60 {
            std::fs::write(dir.join(format!("f{f}")), b"x").expect("write");
        }
    }
    // The second client knows the whole tree before both remove it.
    assert_eq!(common::sh("find t | wc -l", &m2.0).trim(), "489");
    let rm = |root: PathBuf| {
        std::thread::spawn(move || {
            std::process::Command::new("rm")
                .arg("-rf")
                .arg(root.join("t"))
                .output()
                .expect("rm")
        })
    };
    let (a, b) = (rm(fs.mnt.clone()), rm(m2.0.clone()));
    for (who, o) in [
        ("m1", a.join().expect("rm m1")),
        ("m2", b.join().expect("rm m2")),
    ] {
        assert!(
            o.status.success(),
            "rm -rf on {who}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    assert!(!fs.path("t").exists() && !m2.path("t").exists());
}

/// A name another client renamed a new file over is found again at once, though this
/// client's cached name still leads to the file it replaced: the kernel asks that file's
/// attributes (a read dropped their access time), hears ESTALE and looks the name up
/// again. Answering ENOENT there, as for a walk from a descriptor of a removed directory
/// (below), made `stat` fail on a file that was there all along.
#[test]
fn a_name_another_client_renamed_a_file_over_is_found() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    let m2 = Second::mount(&fs);
    std::fs::write(fs.path("f"), b"0").expect("write");
    for i in 1..40u32 {
        let tmp = fs.path("f.tmp");
        std::fs::write(&tmp, i.to_string()).expect("write");
        std::fs::rename(&tmp, fs.path("f")).expect("rename over f");
        let st = std::fs::metadata(m2.path("f"));
        assert!(st.is_ok(), "pass {i}: stat on m2: {st:?}");
        assert_eq!(
            read_all(&m2.path("f")),
            i.to_string().as_bytes(),
            "pass {i}"
        );
    }
}

/// Close-to-open consistency for a name: an open by path on one mount after another
/// client renamed a new file over that name opens the new file, even while the replaced
/// one is still open (here held by a descriptor of this very mount; in the race this pins
/// down, by the kernel's RELEASE of the last read, which comes after `close` returned).
/// The name this mount caches still leads to the replaced inode, which the MDT keeps as an
/// open orphan; opening it read the replaced bytes. The held descriptor keeps reading
/// them, as POSIX wants.
#[test]
fn an_open_after_another_client_renamed_over_the_name_opens_the_new_file() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    let m2 = Second::mount(&fs);
    std::fs::write(fs.path("f"), b"old").expect("write");
    let mut held = File::open(m2.path("f")).expect("open on m2");
    for i in 1..6u32 {
        let tmp = fs.path("f.tmp");
        std::fs::write(&tmp, format!("new {i}")).expect("write");
        std::fs::rename(&tmp, fs.path("f")).expect("rename over f");
        assert_eq!(
            read_all(&m2.path("f")),
            format!("new {i}").as_bytes(),
            "pass {i}: an open by name on m2"
        );
    }
    let mut v = Vec::new();
    held.read_to_end(&mut v).expect("read the held descriptor");
    assert_eq!(
        v, b"old",
        "the descriptor held open reads the replaced file"
    );
}

/// A task that just heard a removed file is gone, then meets a directory another client
/// removed whose name this mount still caches, finds that name gone too, and removing it
/// is ENOENT (which `rm -rf` passes over). Answered ENOENT at once for the directory, as for
/// the kernel's retry after the file, `stat` failed while the kernel kept the cached
/// directory; `rm` then unlinked the name as a file and got EISDIR (two clients' `rm -rf`
/// of one tree).
#[test]
fn a_directory_another_client_removed_is_gone_after_a_file_that_was() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    let m2 = Second::mount(&fs);
    std::fs::create_dir_all(fs.path("t/d")).expect("mkdir");
    for n in ["t/a", "t/d/x", "t/d/y"] {
        std::fs::write(fs.path(n), b"x").expect("write");
    }
    // The second mount caches every name; its own changes leave the file's and the
    // directory's attributes for the kernel to ask again, while their names stay cached.
    assert_eq!(common::sh("find t | wc -l", &m2.0).trim(), "5");
    std::fs::write(m2.path("t/a"), b"changed on m2").expect("write on m2");
    std::fs::remove_file(m2.path("t/d/x")).expect("unlink on m2");
    std::fs::remove_dir_all(fs.path("t/d")).expect("rm -rf t/d on m1");
    std::fs::remove_file(fs.path("t/a")).expect("rm t/a on m1");
    // One thread, as one `rm` process: the file first, then the directory.
    let (a, d) = (m2.path("t/a"), m2.path("t/d"));
    let kind = |r: std::io::Result<std::fs::Metadata>| r.map(|_| ()).map_err(|e| e.kind());
    assert_eq!(
        kind(std::fs::symlink_metadata(&a)),
        Err(std::io::ErrorKind::NotFound),
        "stat of the removed file"
    );
    assert_eq!(
        kind(std::fs::symlink_metadata(&d)),
        Err(std::io::ErrorKind::NotFound),
        "stat of the removed directory"
    );
    let unlinked = std::fs::remove_file(&d).map_err(|e| e.raw_os_error());
    assert_eq!(
        unlinked,
        Err(Some(libc::ENOENT)),
        "unlink of the removed directory's name"
    );
}

/// A directory another client removed holds no names, as on a local file system: a name
/// looked up or removed through a descriptor of it is ENOENT (which `rm -rf` passes over),
/// and so is reading it, not ESTALE. The kernel asks for the directory's attributes first (to check search
/// permission once its cached ones expired), and cannot look the directory up again from
/// a descriptor; Lustre answers ENOENT for an inode unlinked elsewhere
/// (`ll_inode_revalidate_fini`).
#[test]
fn names_in_a_directory_another_client_removed_are_enoent() {
    if !require_fuse() {
        return;
    }
    use std::os::fd::AsRawFd;
    let fs = UpFs::new(&[]);
    let m2 = Second::mount(&fs);
    std::fs::create_dir_all(fs.path("t/d")).expect("mkdir");
    std::fs::write(fs.path("t/d/f"), b"x").expect("write");
    let d = File::open(m2.path("t/d")).expect("open the directory on m2");
    assert!(m2.path("t/d/f").exists());
    std::fs::remove_dir_all(fs.path("t")).expect("rm -rf on m1");
    // Past the mount's attribute timeout (1 s): the kernel asks again.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let name = c"f";
    // SAFETY: a valid descriptor and a NUL-terminated name.
    let r = unsafe { libc::unlinkat(d.as_raw_fd(), name.as_ptr(), 0) };
    let err = std::io::Error::last_os_error();
    assert_eq!(
        (r, err.raw_os_error()),
        (-1, Some(libc::ENOENT)),
        "unlinkat: {err}"
    );
    // SAFETY: as above, and `st` is written by fstatat.
    let r = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstatat(
            d.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    let err = std::io::Error::last_os_error();
    assert_eq!(
        (r, err.raw_os_error()),
        (-1, Some(libc::ENOENT)),
        "fstatat: {err}"
    );
    // Reading it: no names, or ENOENT, never ESTALE.
    let mut buf = [0u8; 4096];
    // SAFETY: a valid descriptor and a buffer of the length given.
    let n = unsafe {
        libc::syscall(
            libc::SYS_getdents64,
            d.as_raw_fd(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    let err = std::io::Error::last_os_error();
    assert!(
        n == 0 || (n == -1 && err.raw_os_error() == Some(libc::ENOENT)),
        "getdents64: {n}, {err}"
    );
}

#[test]
fn a_writer_is_not_held_up_by_a_reader_that_stopped() {
    if !require_fuse() {
        return;
    }
    // The second client holds the file open, then its process is stopped (SIGSTOP): it
    // cannot answer callbacks. The writer's close must still return within the bound.
    let fs = UpFs::new(&[]);
    let m2 = Second::mount(&fs);
    std::fs::write(fs.path("f"), b"one").expect("write");
    let reader = File::open(m2.path("f")).expect("open on m2");
    let pid = mount_pid(&m2.0);
    // SAFETY: signalling a child process of this test by pid.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let t = std::time::Instant::now();
    let w = std::fs::write(fs.path("f"), b"two");
    let took = t.elapsed();
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    w.expect("write while the reader is stopped");
    assert!(
        took < std::time::Duration::from_secs(10),
        "close waited {took:?} for a stopped client"
    );
    let mut got = Vec::new();
    File::open(m2.path("f"))
        .and_then(|mut f| f.read_to_end(&mut got))
        .expect("read after resume");
    assert_eq!(got, b"two");
    drop(reader);
    let mut f = File::create(fs.path("g")).expect("create");
    f.write_all(b"still works").expect("write");
}

/// `O_APPEND` writers on two clients (a shared log): every record is kept, whole, once,
/// in each writer's order. Before the MDT's append locks, each kernel appended at the end
/// it cached and half the records were written over.
#[test]
fn appends_from_two_clients_keep_every_record() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    let m2 = Second::mount(&fs);
    const R: usize = 100;
    const N: usize = 1000;
    let writer = |p: PathBuf, tag: u8| {
        std::thread::spawn(move || {
            let mut f = OpenOptions::new()
                .append(true)
                .create(true)
                .open(&p)
                .expect("open for append");
            for i in 0..N {
                let mut rec = format!("{}{i:06}", tag as char).into_bytes();
                rec.resize(R - 1, b'.');
                rec.push(b'\n');
                f.write_all(&rec).expect("append");
            }
        })
    };
    let a = writer(fs.path("log"), b'A');
    let b = writer(m2.path("log"), b'B');
    a.join().expect("writer on the first mount");
    b.join().expect("writer on the second mount");
    for p in [fs.path("log"), m2.path("log")] {
        let data = read_all(&p);
        assert_eq!(data.len(), 2 * N * R, "{}: bytes", p.display());
        let mut next = [0usize; 2];
        for rec in data.chunks(R) {
            assert_eq!(rec[R - 1], b'\n', "a record cut short: {rec:?}");
            let w = match rec[0] {
                b'A' => 0,
                b'B' => 1,
                _ => panic!("not a record: {rec:?}"),
            };
            let i: usize = std::str::from_utf8(&rec[1..7])
                .ok()
                .and_then(|s| s.parse().ok())
                .expect("record number");
            assert_eq!(i, next[w], "writer {w}'s records out of order or lost");
            next[w] += 1;
        }
        assert_eq!(next, [N, N]);
    }
}

/// A client keeps its append lock between appends, and with it the end of file; another
/// client's truncate calls it back, so the next append lands at the new end, not past a
/// hole. And the other way round: an append on the truncating client follows.
#[test]
fn an_append_after_another_clients_truncate_goes_at_the_new_end() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    let m2 = Second::mount(&fs);
    let mut log = OpenOptions::new()
        .append(true)
        .create(true)
        .open(fs.path("log"))
        .expect("open for append");
    log.write_all(b"one\n").expect("append");
    log.write_all(b"two\n").expect("append");
    // Other clients see a writer's bytes once its fsync or close returns.
    log.sync_all().expect("fsync");
    assert_eq!(read_all(&m2.path("log")), b"one\ntwo\n");
    OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(m2.path("log"))
        .expect("truncate on the second mount");
    log.write_all(b"three\n")
        .expect("append after the truncate");
    let mut other = OpenOptions::new()
        .append(true)
        .open(m2.path("log"))
        .expect("open for append on the second mount");
    other
        .write_all(b"four\n")
        .expect("append on the second mount");
    log.write_all(b"five\n").expect("append");
    drop(log);
    drop(other);
    assert_eq!(read_all(&fs.path("log")), b"three\nfour\nfive\n");
    assert_eq!(read_all(&m2.path("log")), b"three\nfour\nfive\n");
}

/// The pid of the `nacre mount` process serving `mnt`.
fn mount_pid(mnt: &Path) -> i32 {
    let want = mnt.to_str().expect("utf8");
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
        if args.contains(&b"mount".as_slice()) && args.contains(&want.as_bytes()) {
            return pid;
        }
    }
    panic!("no nacre mount process for {want}");
}
