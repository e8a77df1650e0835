//! Faults of a real network: every node of the file system (MGS, 2 MDTs, 3 OSTs, 2
//! clients) is its own process in its own network namespace, each link with netem latency
//! and a little loss ([`common::netns`]). Through the clients' mounts, with plain file I/O:
//! an OSS partitioned for less than the timeout costs the application nothing; for longer,
//! it gets EIO within a bound and never hangs, and the file system works after the heal; a
//! client node that dies with files open and written leaves nothing that blocks the other client;
//! mdtest run across an MDS restart completes and loses no file.
//!
//! The bounds follow the client's timeouts: a request waits `RPC_TIMEOUT` for its reply,
//! then the import tries to reconnect until `llite.*.recovery_timeout` runs out.

use crate::common;

use common::netns::{NetnsCluster, require_netns};
use std::io::{Read, Write};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Latency and loss on every link.
const NETEM: &str = "delay 25ms 5ms loss 0.5%";
/// The client's per-request timeout (`nacre_rpc::conn::DEFAULT_TIMEOUT`).
const RPC_TIMEOUT: Duration = Duration::from_secs(30);
/// `llite.*.recovery_timeout` the tests set, in seconds.
const RECOVERY_SECS: u64 = 5;
/// A failure must reach the application within the timeouts plus one connect attempt and
/// slack for a loaded machine.
const EIO_BOUND: Duration = Duration::from_secs(30 + RECOVERY_SECS + 5 + 15);

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i as u64).wrapping_mul(2654435761).wrapping_add(seed) >> 7) as u8)
        .collect()
}

/// Makes `path` striped over every OST, so a partitioned OSS holds part of it.
fn stripe_all(c: &NetnsCluster, node: &str, path: &Path) {
    let p = path.to_string_lossy();
    let o = c.nacre_on(node, &["lfs", "setstripe", "-c", "-1", "-S", "64K", &p]);
    assert!(
        o.status.success(),
        "setstripe: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Runs `f` in a thread; panics if it has not returned within `bound` (a hang).
fn bounded<T: Send + 'static>(
    bound: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(bound)
        .unwrap_or_else(|_| panic!("{what} did not finish within {bound:?}: a hang"))
}

#[test]
fn oss_partitioned_shorter_than_timeout_costs_nothing() {
    if !require_netns() {
        return;
    }
    let c = NetnsCluster::up(NETEM);
    let path = c.mnt("c0").join("stream");
    stripe_all(&c, "c0", &path);
    const CHUNK: usize = 256 << 10;
    const CHUNKS: u64 = 48;
    let p = path.clone();
    let (started_tx, started_rx) = mpsc::channel();
    let writer = std::thread::spawn(move || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new().write(true).open(&p)?;
        for i in 0..CHUNKS {
            f.write_all(&pattern(i, CHUNK))?;
            f.sync_data()?;
            if i == 4 {
                let _ = started_tx.send(());
            }
            // Read back what was just written, through the same mount.
            let mut r = std::fs::File::open(&p)?;
            let mut got = vec![0u8; CHUNK];
            std::io::Seek::seek(&mut r, std::io::SeekFrom::Start(i * CHUNK as u64))?;
            r.read_exact(&mut got)?;
            assert!(got == pattern(i, CHUNK), "chunk {i} read back wrong");
        }
        Ok(())
    });
    started_rx
        .recv_timeout(Duration::from_secs(120))
        .expect("writer started");
    let mut heal = c.partition_for("ost1", Duration::from_secs(8));
    std::thread::sleep(Duration::from_secs(7));
    // The partition must have reached the writer: it is still waiting on ost1.
    assert!(
        !writer.is_finished(),
        "the write ended before the heal: nothing tested"
    );
    let healed = bounded(Duration::from_secs(10), "the heal", move || heal.wait());
    assert!(healed.is_ok_and(|s| s.success()), "the heal failed");
    let r = bounded(RPC_TIMEOUT * 4, "streaming write", move || writer.join());
    r.expect("writer thread")
        .expect("the application saw an error from a short partition");
    // The other client sees every byte.
    let other = c.mnt("c1").join("stream");
    let data = std::fs::read(&other).expect("read on c1");
    assert_eq!(data.len(), CHUNK * CHUNKS as usize);
    for i in 0..CHUNKS as usize {
        assert!(
            data[i * CHUNK..(i + 1) * CHUNK] == pattern(i as u64, CHUNK),
            "chunk {i} differs on c1"
        );
    }
}

#[test]
fn oss_partitioned_longer_than_timeout_gives_eio_then_recovers() {
    if !require_netns() {
        return;
    }
    let c = NetnsCluster::up(NETEM);
    c.set_param("c0", &format!("llite.*.recovery_timeout={RECOVERY_SECS}"));
    let path = c.mnt("c0").join("cut");
    stripe_all(&c, "c0", &path);
    std::fs::write(&path, pattern(1, 1 << 20)).expect("first write");
    c.partition("ost1");
    let cut = Instant::now();
    let p = path.clone();
    let r = bounded(EIO_BOUND, "write + fsync to a partitioned OSS", move || {
        let mut f = std::fs::OpenOptions::new().write(true).open(&p)?;
        loop {
            f.write_all(&pattern(2, 1 << 20))?;
            f.sync_data()?;
            if cut.elapsed() > EIO_BOUND {
                return Ok::<(), std::io::Error>(());
            }
        }
    });
    let took = cut.elapsed();
    let e = r.expect_err("writes to a partitioned OSS kept succeeding");
    eprintln!("partition -> {e} after {took:?}");
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    c.heal("ost1");
    // After the heal the file system works again, on the same mount.
    let again = c.mnt("c0").join("after");
    stripe_all(&c, "c0", &again);
    let data = pattern(3, 1 << 20);
    let a = again.clone();
    let d = data.clone();
    bounded(EIO_BOUND, "write after heal", move || {
        let start = Instant::now();
        loop {
            match std::fs::write(&a, &d).and_then(|_| std::fs::File::open(&a)?.sync_all()) {
                Ok(()) => return,
                Err(e) if start.elapsed() < RPC_TIMEOUT => {
                    eprintln!("after heal: {e} at {:?}, retrying", start.elapsed());
                    std::thread::sleep(Duration::from_secs(1));
                }
                Err(e) => panic!("write after heal: {e}"),
            }
        }
    });
    // A write the application was told had failed (the first try) must not land after
    // the one that succeeded: the bytes and the size are those of the last write.
    let got = std::fs::read(&again).expect("read after heal");
    if got != data {
        let first = got.iter().zip(&data).position(|(a, b)| a != b);
        panic!(
            "read after heal: {} bytes of {}, first difference at {first:?}\n{}",
            got.len(),
            data.len(),
            ["c0", "mdt0", "ost1"]
                .iter()
                .map(|n| format!("== {n}\n{}", c.log_text(n)))
                .collect::<String>()
        );
    }
    assert!(std::fs::read(c.mnt("c1").join("after")).expect("read on c1") == data);
}

#[test]
fn killed_client_leaves_nothing_that_blocks_others() {
    if !require_netns() {
        return;
    }
    let mut c = NetnsCluster::up(NETEM);
    const FILES: usize = 4;
    let mut open = Vec::new();
    for i in 0..FILES {
        let p = c.mnt("c0").join(format!("held{i}"));
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&p)
            .expect("create on c0");
        f.write_all(&pattern(i as u64, 300 << 10))
            .expect("write on c0");
        f.sync_data().expect("fsync on c0");
        // Dirty data in c0's cache too: its write locks are held when it dies.
        f.write_all(&pattern(99, 64 << 10)).expect("write on c0");
        open.push(f);
    }
    // The node dies without a word: no FIN or RST reaches the servers, which must find
    // out by themselves (a lock callback that times out) before c1 can go on.
    c.partition("c0");
    let killed = Instant::now();
    c.kill("c0");
    drop(open);
    let dir = c.mnt("c1");
    let took = bounded(Duration::from_secs(120), "c1 using c0's files", move || {
        for i in 0..FILES {
            let p = dir.join(format!("held{i}"));
            let data = pattern(1000 + i as u64, 200 << 10);
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&p)
                .expect("open on c1");
            f.write_all(&data).expect("write on c1");
            f.sync_all().expect("fsync on c1");
            drop(f);
            assert!(std::fs::read(&p).expect("read on c1") == data);
            std::fs::remove_file(&p).expect("unlink on c1");
            assert!(!p.exists());
        }
        killed.elapsed()
    });
    eprintln!("c1 reclaimed c0's files in {took:?}");
}

/// Files of each mdtest task in [`mdtest_under_an_mds_restart_completes_and_loses_nothing`].
const MDTEST_ITEMS: usize = 1500;
/// Its tasks (threads of one `nacre bench mdtest`).
const MDTEST_TASKS: usize = 4;

/// `nacre bench mdtest ARGS -d DIR` through the mount, as a child process.
fn mdtest(dir: &Path, args: &[&str]) -> std::process::Child {
    std::process::Command::new(common::nacre())
        .args(["bench", "mdtest", "--quiet", "-F", "-w", "64", "-e", "64"])
        .args(["-n", &MDTEST_ITEMS.to_string()])
        .args(["--tasks", &MDTEST_TASKS.to_string()])
        .args(args)
        .arg("-d")
        .arg(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("nacre bench mdtest")
}

/// Regular files under `dir`, at any depth.
fn count_files(dir: &Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir)
        .expect("readdir")
        .map(|e| e.expect("entry"))
    {
        let t = e.file_type().expect("type");
        if t.is_dir() {
            n += count_files(&e.path());
        } else if t.is_file() {
            n += 1;
        }
    }
    n
}

/// Issue 12's case: mdtest (creates of 64-byte files from 4 tasks) runs while the MDS
/// holding its directory is killed and started again; the run completes with no error,
/// and a stat-and-read pass from the other client finds every file.
#[test]
fn mdtest_under_an_mds_restart_completes_and_loses_nothing() {
    if !require_netns() {
        return;
    }
    let mut c = NetnsCluster::up(NETEM);
    let dir = c.mnt("c0").join("mdtest");
    let o = c.nacre_on("c0", &["lfs", "mkdir", "-i", "0", &dir.to_string_lossy()]);
    assert!(
        o.status.success(),
        "lfs mkdir: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut create = mdtest(&dir, &["-C"]);
    // Restart MDT0 (which holds the directory) once the creates are under way.
    let start = Instant::now();
    while count_files(&dir) < 200 {
        assert!(
            create.try_wait().expect("try_wait").is_none(),
            "mdtest ended before the restart: nothing tested"
        );
        assert!(start.elapsed() < Duration::from_secs(120), "no creates");
        std::thread::sleep(Duration::from_millis(100));
    }
    c.kill("mdt0");
    c.start("mdt0");
    let out = bounded(
        Duration::from_secs(240),
        "mdtest across an MDS restart",
        move || create.wait_with_output(),
    )
    .expect("mdtest");
    assert!(
        out.status.success(),
        "mdtest failed across the MDS restart:\n{}\n{}\nc0's log:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        c.log_text("c0")
    );
    assert_eq!(
        count_files(&dir),
        MDTEST_ITEMS * MDTEST_TASKS,
        "files lost across the MDS restart"
    );
    // Every file, stated and read back through the other client.
    let other = c.mnt("c1").join("mdtest");
    assert_eq!(count_files(&other), MDTEST_ITEMS * MDTEST_TASKS);
    let check = bounded(
        Duration::from_secs(240),
        "mdtest stat and read",
        move || mdtest(&other, &["-T", "-E"]).wait_with_output(),
    )
    .expect("mdtest");
    assert!(
        check.status.success(),
        "stat and read after the restart:\n{}\n{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
}
