//! Faults of a real network: every node of the file system (MGS, 2 MDTs, 3 OSTs, 2
//! clients) is its own process in its own network namespace, each link with netem latency
//! and a little loss ([`common::netns`]). Through the clients' mounts, with plain file I/O:
//! an OSS partitioned for less than the timeout costs the application nothing; for longer,
//! it gets EIO within a bound and never hangs, and the file system works after the heal; a
//! client node that dies with files open and written leaves nothing that blocks the other client.
//!
//! The bounds follow the client's timeouts: a request waits `RPC_TIMEOUT` for its reply,
//! then the import tries to reconnect until `llite.*.recovery_timeout` runs out.

mod common;

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
                    eprintln!("after heal: {e}, retrying");
                    std::thread::sleep(Duration::from_secs(1));
                }
                Err(e) => panic!("write after heal: {e}"),
            }
        }
    });
    assert!(std::fs::read(&again).expect("read after heal") == data);
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

#[test]
fn mds_restarted_under_create_load_loses_nothing() {
    if !require_netns() {
        return;
    }
    let mut c = NetnsCluster::up(NETEM);
    const FILES: usize = 2000;
    let dir = c.mnt("c0").join("mdtest");
    let o = c.nacre_on("c0", &["lfs", "mkdir", "-i", "0", &dir.to_string_lossy()]);
    assert!(
        o.status.success(),
        "lfs mkdir: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (progress_tx, progress_rx) = mpsc::channel();
    let d = dir.clone();
    let creator = std::thread::spawn(move || -> std::io::Result<()> {
        for i in 0..FILES {
            std::fs::write(d.join(format!("f{i}")), i.to_string())
                .map_err(|e| std::io::Error::new(e.kind(), format!("create f{i}: {e}")))?;
            let _ = progress_tx.send(i);
        }
        Ok(())
    });
    // Restart MDT0 (which holds the directory) a little way into the run.
    while progress_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("creates go on")
        < 50
    {}
    c.kill("mdt0");
    assert!(
        !creator.is_finished(),
        "the creates ended before the restart: nothing tested"
    );
    c.start("mdt0");
    let r = bounded(
        Duration::from_secs(120),
        "creates across an MDS restart",
        move || creator.join(),
    );
    r.expect("creator thread")
        .expect("a create failed across the MDS restart");
    let names = std::fs::read_dir(c.mnt("c1").join("mdtest"))
        .expect("readdir on c1")
        .count();
    assert_eq!(names, FILES, "files lost across the MDS restart");
    for i in 0..FILES {
        let p = dir.join(format!("f{i}"));
        assert_eq!(std::fs::read_to_string(&p).expect("read"), i.to_string());
    }
}
