//! The FUSE mount used by real programs, persistence across restarts and `kill -9`, two
//! clients at once, and the errors a user meets.

use crate::common;

use common::*;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Duration;

#[test]
fn real_programs_work_on_the_mount() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&["--osts", "3"]);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let m = &fs.mnt;
    sh(
        &format!(
            "cp -a {} {}/copy && diff -r {} {}/copy",
            src.display(),
            m.display(),
            src.display(),
            m.display()
        ),
        m,
    );
    sh(
        &format!(
            "tar cf {0}/src.tar -C {1} . && mkdir x && tar xf src.tar -C x && diff -r {1} x",
            m.display(),
            src.display()
        ),
        m,
    );
    sh(
        "mkdir repo && cd repo && git init -q . && cp -r ../copy . && git add . && \
        git -c user.email=t@e -c user.name=t commit -qm first && git log --oneline | grep -q first && \
        git status --porcelain | wc -l | grep -qx 0",
        m,
    );
    sh(
        "fio --name=verify --directory=. --rw=randwrite --bs=4k --size=4m --numjobs=2 --verify=crc32c \
        --do_verify=1 --verify_fatal=1 --group_reporting",
        m,
    );
    // Sparse files larger than 4 GiB.
    let mut f = std::fs::File::create(fs.path("sparse")).expect("create");
    f.seek(SeekFrom::Start(6 << 30)).expect("seek");
    f.write_all(b"end").expect("write");
    drop(f);
    assert_eq!(
        std::fs::metadata(fs.path("sparse")).expect("stat").len(),
        (6 << 30) + 3
    );
    let mut f = std::fs::File::open(fs.path("sparse")).expect("open");
    f.seek(SeekFrom::Start((6 << 30) - 2)).expect("seek");
    let mut b = Vec::new();
    f.read_to_end(&mut b).expect("read");
    assert_eq!(b, b"\0\0end");
    // O_APPEND and O_TRUNC.
    std::fs::write(fs.path("a"), b"one").expect("write");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(fs.path("a"))
        .expect("open");
    f.write_all(b"two").expect("append");
    drop(f);
    assert_eq!(std::fs::read(fs.path("a")).expect("read"), b"onetwo");
    std::fs::write(fs.path("a"), b"3").expect("truncate+write");
    assert_eq!(std::fs::read(fs.path("a")).expect("read"), b"3");
    fs.down();
}

#[test]
fn sizes_stay_exact_when_closes_arrive_late() {
    if !require_fuse() {
        return;
    }
    // The kernel sends RELEASE after close(2) returns, so a handle's close often reaches the
    // MDT after the next open, truncate and write of the same file.
    let fs = UpFs::new(&["--osts", "2"]);
    for i in 0..300 {
        let p = fs.path(&format!("f{}", i % 7));
        std::fs::write(&p, b"one").expect("write");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .expect("open");
        f.write_all(b"two").expect("append");
        drop(f);
        assert_eq!(std::fs::read(&p).expect("read"), b"onetwo", "iteration {i}");
        std::fs::write(&p, b"3").expect("truncate and write");
        assert_eq!(std::fs::read(&p).expect("read"), b"3", "iteration {i}");
        assert_eq!(
            std::fs::metadata(&p).expect("stat").len(),
            1,
            "iteration {i}"
        );
    }
    fs.down();
}

/// `dbench`'s office-file sequence (its `client.txt`): a new file written and closed, then
/// opened for writing again and again, some opens writing nothing. A writer's last close
/// settles the size in the background; a settle abandoned because the next writer had
/// opened once counted as done, so a later close that wrote nothing called the size from
/// the create (0) exact, and reads of the file came back short (`dbench`: "read failed on
/// handle"). Four processes at once, as `dbench 4`; before the fix about one pass in a
/// hundred read short.
#[test]
fn sizes_stay_exact_through_opens_that_write_nothing() {
    if !require_fuse() {
        return;
    }
    use std::os::unix::fs::FileExt;
    let fs = UpFs::new(&[]);
    let block = vec![b'x'; 65536];
    let rounds = 300;
    std::thread::scope(|s| {
        for t in 0..4 {
            let (fs, block) = (&fs, &block);
            s.spawn(move || {
                let dir = fs.path(&format!("client{t}"));
                std::fs::create_dir(&dir).expect("mkdir");
                let (f, old) = (dir.join("NEWTIPS.PPT"), dir.join("PPTC241.TMP"));
                let open = || {
                    std::fs::OpenOptions::new()
                        .read(true)
                        .write(true)
                        .open(&f)
                        .expect("open")
                };
                let mut head = [0u8; 4096];
                for i in 0..rounds {
                    if i > 0 {
                        std::fs::rename(&f, &old).expect("rename");
                    }
                    let w = std::fs::File::create_new(&f).expect("create");
                    w.write_all_at(b"y", 4607).expect("write");
                    w.write_all_at(block, 0).expect("write");
                    w.write_all_at(&block[..9298], 65536).expect("write");
                    drop(w);
                    let w = open();
                    w.read_exact_at(&mut head, 0).expect("read");
                    w.write_all_at(&block[..4096], 0).expect("write");
                    w.sync_all().expect("fsync");
                    drop(w);
                    // Opened for writing, nothing written.
                    let w = open();
                    w.set_modified(std::time::SystemTime::now())
                        .expect("utimes");
                    drop(w);
                    drop(open());
                    if i > 0 {
                        std::fs::remove_file(&old).expect("unlink");
                    }
                    for _ in 0..3 {
                        let n = open().read_at(&mut head, 0).expect("read");
                        assert_eq!(n, head.len(), "client{t}, pass {i}: a short read");
                    }
                    assert_eq!(
                        std::fs::metadata(&f).expect("stat").len(),
                        65536 + 9298,
                        "client{t}, pass {i}"
                    );
                }
            });
        }
    });
    fs.down();
}

#[test]
fn data_and_metadata_survive_down_up_and_kill_9() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&["--osts", "2"]);
    let m = &fs.mnt;
    sh(
        "dd if=/dev/urandom of=big bs=1M count=24 conv=fsync status=none && mkdir -p d/e && \
        for i in $(seq 1 200); do echo $i > d/e/f$i; done && ln d/e/f1 hard && ln -s d/e/f2 soft && \
        setfattr -n user.k -v v d/e/f3 && mv d/e/f4 d/moved && rm d/e/f5",
        m,
    );
    let sum = md5(&fs.path("big"));
    let listing = sh(
        "find . -path ./lost+found -prune -o -print | sort && getfattr -n user.k --only-values d/e/f3",
        m,
    );
    fs.down();
    fs.up_again();
    assert_eq!(md5(&fs.path("big")), sum);
    assert_eq!(
        sh(
            "find . -path ./lost+found -prune -o -print | sort && getfattr -n user.k --only-values d/e/f3",
            m
        ),
        listing
    );
    // Every completed operation survives a kill -9 of the whole process.
    sh(
        "dd if=/dev/urandom of=big2 bs=1M count=8 conv=fsync status=none && mkdir late && touch late/x && rm d/e/f6",
        m,
    );
    let sum2 = md5(&fs.path("big2"));
    let listing2 = sh("find . | sort", m);
    let pid = fs.pid();
    // SAFETY: killing the test's own child.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    std::thread::sleep(Duration::from_millis(300));
    fs.up_again();
    assert_eq!(md5(&fs.path("big")), sum);
    assert_eq!(md5(&fs.path("big2")), sum2);
    assert_eq!(sh("find . | sort", m), listing2);
    assert_eq!(
        std::fs::read_to_string(fs.path("soft")).expect("symlink"),
        "2\n"
    );
    fs.down();
}

#[test]
fn two_clients_see_each_others_changes_on_open() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&["--osts", "2"]);
    let mnt2 = fs.tmp.path().join("mnt2");
    ok(&[
        "mount",
        fs.dir.to_str().expect("utf8"),
        mnt2.to_str().expect("utf8"),
        "--background",
    ]);
    let b = |rel: &str| mnt2.join(rel);
    std::fs::write(fs.path("shared"), b"from A").expect("write A");
    assert_eq!(std::fs::read(b("shared")).expect("read B"), b"from A");
    std::fs::write(b("shared"), b"B rewrote this, longer").expect("write B");
    assert_eq!(
        std::fs::read(fs.path("shared")).expect("read A"),
        b"B rewrote this, longer"
    );
    std::fs::create_dir(b("dirB")).expect("mkdir B");
    assert!(fs.path("dirB").is_dir());
    std::fs::remove_file(fs.path("shared")).expect("rm A");
    assert!(
        std::fs::File::open(b("shared")).is_err(),
        "B still opens a file A removed"
    );
    ok(&["umount", mnt2.to_str().expect("utf8")]);
    fs.down();
}

#[test]
fn bad_input_gets_clear_errors() {
    let tmp = tempfile::tempdir().expect("tmp");
    // DIR is a file.
    let file = tmp.path().join("plainfile");
    std::fs::write(&file, b"x").expect("write");
    let err = fail(&[
        "up",
        file.to_str().expect("utf8"),
        "--mount",
        tmp.path().join("m").to_str().expect("utf8"),
    ]);
    assert!(err.contains("is not a directory"), "{err}");
    // A port in use.
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port().to_string();
    let err = fail(&[
        "up",
        tmp.path().join("fs").to_str().expect("utf8"),
        "--mount",
        tmp.path().join("m2").to_str().expect("utf8"),
        "--port",
        &port,
    ]);
    assert!(err.contains("already in use"), "{err}");
    // A mount with the wrong key.
    if require_fuse() {
        let fs = UpFs::new(&["--osts", "1"]);
        let bad = tmp.path().join("badkey");
        std::fs::write(&bad, "00".repeat(32)).expect("key");
        let mount_with_bad_key = || {
            fail(&[
                "mount",
                &fs.spec(),
                tmp.path().join("m3").to_str().expect("utf8"),
                "--key",
                bad.to_str().expect("utf8"),
            ])
        };
        // Written with the umask's 0644: refused before any connection, as ssh refuses a
        // private key others can read.
        let err = mount_with_bad_key();
        assert!(
            err.contains("mode 0644") && err.contains("chmod 600"),
            "{err}"
        );
        let private = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o600);
        std::fs::set_permissions(&bad, private).expect("chmod");
        let err = mount_with_bad_key();
        assert!(err.contains("does not hold the key"), "{err}");
        // Unmounting something that is not mounted.
        let err = fail(&["umount", tmp.path().join("m3").to_str().expect("utf8")]);
        assert!(err.contains("not mounted"), "{err}");
        fs.down();
    }
    // Not a file system.
    let err = fail(&["down", tmp.path().to_str().expect("utf8")]);
    assert!(err.contains("holds no nacre file system"), "{err}");
    let err = fail(&[
        "format",
        "--mdt",
        "--fsname",
        "toolongname",
        tmp.path().join("t").to_str().expect("utf8"),
    ]);
    assert!(
        err.contains("--mgsnode") || err.contains("8 characters"),
        "{err}"
    );
}

/// File capabilities (`security.capability`, CAP_NET_RAW permitted and effective, in the
/// kernel's revision-2 format) as `setfattr` takes them.
const CAPS: &str = "0x0100000200200000000000000000000000000000";

/// The kernel asks for a file's capabilities before every write, to drop them as a write
/// must. The mount answers from what it knows (a file it made, or the MDT's answer within
/// the attribute timeout): a stream of writes costs the MDT no getxattr. Capabilities set
/// through this mount, or by another client once the timeout passes, are still dropped by
/// the next write.
/// An `O_APPEND` descriptor bypasses the kernel's cache, whose writes clear set-id bits
/// themselves: the mount clears them for it, as `file_remove_privs` would. A writer without
/// CAP_FSETID clears set-user-ID, and set-group-ID where group execute is set; root keeps
/// them.
#[test]
fn appends_clear_set_id_bits_as_cached_writes_do() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    let m = &fs.mnt;
    sh(
        "touch both sgid root && chmod 6777 both && chmod 2767 sgid && chmod 4777 root",
        m,
    );
    sh(
        "setpriv --reuid=65534 --regid=65534 --clear-groups sh -c 'echo x >> both && echo y >> sgid'",
        m,
    );
    sh("echo z >> root", m);
    let mode = |f: &str| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(fs.path(f))
            .expect("stat")
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode("both"), 0o777, "set-id bits kept by an append");
    assert_eq!(
        mode("sgid"),
        0o2767,
        "set-group-ID without group execute is not a privilege"
    );
    assert_eq!(mode("root"), 0o4777, "root's append cleared set-user-ID");
    assert_eq!(std::fs::read(fs.path("both")).expect("read"), b"x\n");
}

#[test]
fn writes_drop_file_capabilities_without_asking_the_mdt_each_time() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    let m2 = Second::mount(&fs);
    ok(&["lctl", "set_param", "mdt.*.md_stats=clear"]);
    let mut f = std::fs::File::create(fs.path("f")).expect("create");
    for _ in 0..200 {
        f.write_all(&[7u8; 512]).expect("write");
    }
    drop(f);
    assert_eq!(
        stat_count("mdt.*.md_stats", "getxattr"),
        0,
        "a new file's writes asked the MDT for its capabilities"
    );
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(fs.path("f"))
        .expect("open");
    for _ in 0..200 {
        f.write_all(&[8u8; 512]).expect("write");
    }
    drop(f);
    assert!(
        stat_count("mdt.*.md_stats", "getxattr") <= 2,
        "writes asked the MDT for capabilities more than once per attribute timeout"
    );
    let has_caps = |p: &Path| {
        std::process::Command::new("getfattr")
            .args(["-n", "security.capability"])
            .arg(p)
            .output()
            .expect("getfattr")
            .status
            .success()
    };
    // Set through this mount: the next write drops them.
    let m = &fs.mnt;
    sh(&format!("setfattr -n security.capability -v {CAPS} f"), m);
    assert!(has_caps(&fs.path("f")), "setfattr did not set capabilities");
    sh("echo more >> f", m);
    assert!(
        !has_caps(&fs.path("f")),
        "a write kept the file's capabilities"
    );
    // Set by another client: seen once the attribute timeout has passed.
    sh(
        &format!("setfattr -n security.capability -v {CAPS} f"),
        &m2.0,
    );
    assert!(has_caps(&m2.path("f")));
    std::thread::sleep(Duration::from_millis(1500));
    sh("echo again >> f", m);
    assert!(
        !has_caps(&m2.path("f")),
        "a write past the attribute timeout kept capabilities another client set"
    );
    assert_eq!(
        std::fs::read(fs.path("f")).expect("read").len(),
        400 * 512 + "more\nagain\n".len()
    );
}
