//! The client library against a real one-process file system: namespace operations,
//! striped I/O, sizes, persistence across a restart.

use crate::common;

use bytes::Bytes;
use common::cluster::{DIR, FILE, create, create_open, mount, pattern, rw, start};
use nacre::local::LocalCluster;
use nacre::node::ServerTuning;
use nacre_client::{Client, MountSpec};
use nacre_core::attr::SetAttr;
use nacre_core::{Errno, Fid, Layout};
use nacre_rpc::msg::{Cred, LayoutRequest};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_io_and_restart() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("info")
        .with_test_writer()
        .try_init();
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "testfs", 1, 3).await;
    let c = mount(&cluster).await;
    let cred = Cred::root();
    let root = c.root();

    // Directories and a striped file.
    let (d, _) = c
        .create(
            root,
            b"dir",
            DIR,
            0,
            &cred,
            None,
            LayoutRequest::Inherit,
            None,
            false,
        )
        .await
        .expect("mkdir");
    assert_eq!(
        c.create(
            root,
            b"dir",
            DIR,
            0,
            &cred,
            None,
            LayoutRequest::Inherit,
            None,
            false
        )
        .await
        .err(),
        Some(Errno::EEXIST)
    );
    let (fi, f) = create_open(&c, d.attr.fid, b"striped", Layout::plain(3, 65536, -1)).await;
    let l = fi.layout.clone().expect("layout");
    assert_eq!(l.components[0].objects.len(), 3);
    let data = pattern(1_000_003, 7);
    c.write(&f, 0, Bytes::from(data.clone()))
        .await
        .expect("write");
    // Sparse write far away.
    c.write(&f, 5 << 30, Bytes::from_static(b"tail"))
        .await
        .expect("far write");
    let back = c.read(&f, 0, data.len() as u64).await.expect("read");
    assert!(back[..] == data[..], "contents differ");
    let hole = c.read(&f, 3 << 30, 16).await.expect("hole");
    assert_eq!(&hole[..], &[0u8; 16]);
    let st = c.getattr(fi.attr.fid).await.expect("stat");
    assert_eq!(st.attr.size, (5 << 30) + 4);
    let eof = c.read(&f, (5 << 30) + 2, 100).await.expect("eof read");
    assert_eq!(&eof[..], b"il");
    c.release(&f).await.expect("close");
    // Until the MDT has settled the size from the objects, clients glimpse; either way the
    // size is right, and the MDT's own becomes exact shortly after the last writer left.
    let mut st = c
        .lookup(d.attr.fid, b"striped", &Cred::root())
        .await
        .expect("lookup");
    assert_eq!(st.attr.size, (5 << 30) + 4);
    for _ in 0..100 {
        if st.size_authoritative {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        st = c
            .lookup(d.attr.fid, b"striped", &Cred::root())
            .await
            .expect("lookup");
    }
    assert!(
        st.size_authoritative,
        "the MDT settles the size after the last writer closed"
    );
    assert_eq!(st.attr.size, (5 << 30) + 4);

    // Truncate down and up.
    c.setattr(
        fi.attr.fid,
        SetAttr {
            size: Some(100),
            ..SetAttr::default()
        },
        &cred,
        None,
    )
    .await
    .expect("truncate");
    let (f2, info) = c
        .open(fi.attr.fid, rw(), &Cred::root())
        .await
        .expect("open");
    assert_eq!(info.attr.size, 100);
    assert!(
        c.read(&f2, 0, 1000).await.expect("read")[..] == data[..100],
        "contents differ"
    );
    c.release(&f2).await.expect("close");
    c.setattr(
        fi.attr.fid,
        SetAttr {
            size: Some(300_000),
            ..SetAttr::default()
        },
        &cred,
        None,
    )
    .await
    .expect("extend");
    assert_eq!(
        c.getattr(fi.attr.fid).await.expect("stat").attr.size,
        300_000
    );
    let (f3, _) = c
        .open(fi.attr.fid, rw(), &Cred::root())
        .await
        .expect("open");
    let ext = c.read(&f3, 0, 400_000).await.expect("read");
    assert_eq!(ext.len(), 300_000);
    assert!(ext[100..].iter().all(|b| *b == 0));
    c.release(&f3).await.expect("close");

    // Links, symlinks, rename, xattrs, readdir, fid2path.
    c.link(fi.attr.fid, root, b"hard", &cred)
        .await
        .expect("link");
    assert_eq!(c.getattr(fi.attr.fid).await.expect("stat").attr.nlink, 2);
    c.create(
        root,
        b"sym",
        libc::S_IFLNK | 0o777,
        0,
        &cred,
        Some(b"dir/striped"),
        LayoutRequest::Inherit,
        None,
        false,
    )
    .await
    .expect("symlink");
    let s = c.lookup(root, b"sym", &Cred::root()).await.expect("lookup");
    assert_eq!(
        c.readlink(s.attr.fid).await.expect("readlink"),
        b"dir/striped"
    );
    c.rename(root, b"hard", d.attr.fid, b"moved", 0, &cred)
        .await
        .expect("rename");
    c.setxattr(fi.attr.fid, b"user.colour", b"blue", 0, &cred)
        .await
        .expect("setxattr");
    assert_eq!(
        c.getxattr(fi.attr.fid, b"user.colour", &Cred::root())
            .await
            .expect("get"),
        b"blue"
    );
    assert_eq!(
        c.getxattr(fi.attr.fid, b"user.none", &Cred::root())
            .await
            .err(),
        Some(Errno::ENODATA)
    );
    let (ents, eof) = c
        .readdir(d.attr.fid, 0, 100, &Cred::root())
        .await
        .expect("readdir");
    assert!(eof);
    let mut names: Vec<_> = ents
        .iter()
        .map(|e| String::from_utf8_lossy(&e.name).to_string())
        .collect();
    names.sort();
    assert_eq!(names, vec!["moved", "striped"]);
    assert_eq!(
        c.fid2path(fi.attr.fid).await.expect("fid2path"),
        b"dir/striped"
    );
    assert_eq!(
        c.rmdir(root, b"dir", &cred).await.err(),
        Some(Errno::ENOTEMPTY)
    );
    // Renaming a directory under itself.
    assert_eq!(
        c.rename(root, b"dir", d.attr.fid, b"inside", 0, &cred)
            .await
            .err(),
        Some(Errno::EINVAL)
    );

    // Many files: readdir pages with stable cookies.
    for i in 0..300 {
        c.create(
            d.attr.fid,
            format!("f{i:04}").as_bytes(),
            FILE,
            0,
            &cred,
            None,
            LayoutRequest::Inherit,
            None,
            false,
        )
        .await
        .expect("create");
    }
    let mut cookie = 0;
    let mut seen = std::collections::HashSet::new();
    loop {
        let (ents, eof) = c
            .readdir(d.attr.fid, cookie, 64, &Cred::root())
            .await
            .expect("readdir");
        for e in &ents {
            assert!(seen.insert(e.name.clone()), "duplicate {:?}", e.name);
            cookie = e.cookie;
        }
        if eof {
            break;
        }
    }
    assert_eq!(seen.len(), 302);

    let fid: Fid = fi.attr.fid;
    cluster.stop().await;

    // Everything survives a clean restart.
    let cluster = LocalCluster::start(dir.path(), ServerTuning::default())
        .await
        .expect("restart");
    let c = mount(&cluster).await;
    let st = c.getattr(fid).await.expect("stat after restart");
    assert_eq!(st.attr.size, 300_000);
    assert_eq!(st.attr.nlink, 2);
    let (f4, _) = c.open(fid, rw(), &Cred::root()).await.expect("open");
    assert!(
        c.read(&f4, 0, 100).await.expect("read")[..] == data[..100],
        "contents differ"
    );
    c.release(&f4).await.expect("close");
    c.unlink(d.attr.fid, b"striped", &cred)
        .await
        .expect("unlink");
    c.unlink(d.attr.fid, b"moved", &cred).await.expect("unlink");
    assert_eq!(c.getattr(fid).await.err(), Some(Errno::ESTALE));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_key_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "testfs", 1, 1).await;
    let spec =
        MountSpec::parse(&cluster.spec(), nacre_rpc::Key::generate(), "intruder").expect("spec");
    let err = Client::mount(spec)
        .await
        .err()
        .expect("must be refused")
        .to_string();
    assert!(err.contains("does not hold the key"), "{err}");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_going_away_gives_eio_not_a_hang_and_recovers() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut cluster = start(dir.path(), "testfs", 1, 2).await;
    let c = mount(&cluster).await;
    c.tunables
        .set("llite", "recovery_timeout", 2)
        .expect("tunable");
    c.refresh_imports();
    let mut layout = Layout::plain(1, 65536, 0);
    layout.components[0].ost_list = vec![0];
    let (_, f) = create_open(&c, c.root(), b"f", layout).await;
    let data = pattern(300_000, 3);
    c.write(&f, 0, Bytes::from(data.clone()))
        .await
        .expect("write");
    // Written data may still be on its way (write-behind): make it land first.
    c.fsync(&f).await.expect("fsync");
    cluster.stop_ost(0).await;
    let t = std::time::Instant::now();
    let r = tokio::time::timeout(std::time::Duration::from_secs(20), c.read(&f, 0, 1000)).await;
    let r = r.expect("a read from a vanished OST must not hang");
    assert_eq!(r.err(), Some(Errno::EIO));
    assert!(
        t.elapsed() < std::time::Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );
    // The OST comes back (on a new port): the same open file reads again.
    cluster.start_ost(0).await.expect("restart OST");
    let back = c
        .read(&f, 0, data.len() as u64)
        .await
        .expect("read after restart");
    assert!(back[..] == data[..], "contents differ");
    c.release(&f).await.expect("close");
    cluster.stop().await;
}

/// A small tmpfs mounted over one OST's directory: that OST runs out of space.
fn mount_tmpfs(path: &std::path::Path, size: &str) -> bool {
    std::fs::create_dir_all(path).expect("mkdir");
    let st = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(path)
        .status();
    matches!(st, Ok(s) if s.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_ost_gives_enospc_and_loses_nothing() {
    if std::env::var_os("NACRE_SKIP_ROOT").is_some() {
        eprintln!("NACRE_SKIP_ROOT is set: skipping a test that mounts a small tmpfs");
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let small = dir.path().join("ost1");
    assert!(
        mount_tmpfs(&small, "6m"),
        "cannot mount a tmpfs (needs root; set NACRE_SKIP_ROOT=1 to skip)"
    );
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(&self.0)
                .status();
        }
    }
    let _guard = Unmount(small.clone());
    let cluster = start(dir.path(), "testfs", 1, 2).await;
    let c = mount(&cluster).await;
    let cred = Cred::root();
    let on = |ost: u32| {
        let mut l = Layout::plain(1, 1 << 20, ost as i32);
        l.components[0].ost_list = vec![ost];
        LayoutRequest::Explicit(l)
    };
    // A file on the healthy OST.
    let (ki, kh) = c
        .create(
            c.root(),
            b"keep",
            FILE,
            0,
            &cred,
            None,
            on(0),
            Some(rw()),
            true,
        )
        .await
        .expect("create keep");
    let keep =
        nacre_client::file::OpenFile::new(ki.attr.fid, kh.expect("h"), rw(), ki.layout.clone());
    let kdata = pattern(2 << 20, 9);
    c.write(&keep, 0, Bytes::from(kdata.clone()))
        .await
        .expect("write keep");
    c.release(&keep).await.expect("close");
    // Fill the small OST.
    let (fi, fh) = c
        .create(
            c.root(),
            b"fill",
            FILE,
            0,
            &cred,
            None,
            on(1),
            Some(rw()),
            true,
        )
        .await
        .expect("create fill");
    let fill =
        nacre_client::file::OpenFile::new(fi.attr.fid, fh.expect("h"), rw(), fi.layout.clone());
    let chunk = Bytes::from(vec![7u8; 1 << 20]);
    let mut err = None;
    for i in 0..64u64 {
        if let Err(e) = c.write(&fill, i << 20, chunk.clone()).await {
            err = Some(e);
            break;
        }
    }
    assert_eq!(err, Some(Errno::ENOSPC), "the writer must see ENOSPC");
    // Writes still in flight when the first failed may report ENOSPC again at close.
    let closed = c.release(&fill).await;
    assert!(matches!(closed, Ok(()) | Err(Errno::ENOSPC)), "{closed:?}");
    // The other file is intact, and new files still go to the OST with space.
    let (k2, _) = c
        .open(ki.attr.fid, rw(), &Cred::root())
        .await
        .expect("reopen");
    assert!(
        c.read(&k2, 0, kdata.len() as u64).await.expect("read")[..] == kdata[..],
        "contents differ"
    );
    c.release(&k2).await.expect("close");
    let ni = create(&c, c.root(), b"new", FILE)
        .await
        .expect("create after ENOSPC");
    assert!(ni.layout.is_some());
    // Once the MDT's view of the OSTs' space is refreshed (qos_maxage), new files go only
    // to the OST with space: two in a row, where round robin alone would alternate.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut n = 0;
    loop {
        let mut on_ost0 = 0;
        for _ in 0..2 {
            n += 1;
            let i = create(&c, c.root(), format!("new{n}").as_bytes(), FILE)
                .await
                .expect("create after ENOSPC");
            if i.layout
                .is_some_and(|l| l.objects().all(|o| o.ost_idx == 0))
            {
                on_ost0 += 1;
            }
        }
        if on_ost0 == 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "new files still go to the full OST"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    // Removing the big file frees the space again.
    c.unlink(c.root(), b"fill", &cred).await.expect("unlink");
    cluster.stop().await;
}

/// `mdc.*.max_rpcs_in_flight` bounds the MDC imports and only them; `osc.*` the OSCs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mdc_and_osc_rpc_bounds_are_separate() {
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "testfs", 1, 2).await;
    let c = mount(&cluster).await;
    let osc = c
        .tunables
        .get("osc", "max_rpcs_in_flight")
        .expect("osc tunable");
    let bounds = |imps: Vec<std::sync::Arc<nacre_rpc::import::Import>>| -> Vec<usize> {
        imps.iter().map(|i| i.max_in_flight()).collect()
    };
    c.tunables
        .set("mdc", "max_rpcs_in_flight", 3)
        .expect("set mdc");
    c.refresh_imports();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while bounds(c.mdcs()) != vec![3] && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(bounds(c.mdcs()), vec![3]);
    assert_eq!(bounds(c.oscs()), vec![osc as usize; 2]);
    cluster.stop().await;
}

/// Thousands of open files each written a little (fio's nrfiles with small writes) hold
/// no more memory than `osc.*.max_dirty_mb`: extents that are gathered but not sent count
/// in the budget, and a writer over it sends every file's extent instead of waiting on
/// memory that nothing would free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_open_files_written_a_little_stay_within_max_dirty() {
    const FILES: usize = 64;
    const EACH: usize = 256 << 10;
    const MAX_DIRTY_MB: u64 = 4;
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "testfs", 1, 2).await;
    let c = mount(&cluster).await;
    c.tunables
        .set("osc", "max_dirty_mb", MAX_DIRTY_MB)
        .expect("max_dirty_mb");
    let root = c.root();
    let mut open = Vec::new();
    for i in 0..FILES {
        let f = create(&c, root, format!("f{i}").as_bytes(), FILE)
            .await
            .expect("create");
        let (h, _) = c.open(f.attr.fid, rw(), &Cred::root()).await.expect("open");
        open.push(h);
    }
    let before = nacre::memory::MemoryStats::read().allocated;
    let mut peak_dirty = 0;
    let mut peak_alloc = 0;
    for (i, h) in open.iter().enumerate() {
        let data = Bytes::from(pattern(EACH, i as u8));
        assert_eq!(c.write(h, 0, data).await.expect("write"), EACH);
        peak_dirty = peak_dirty.max(c.dirty_bytes());
        peak_alloc = peak_alloc.max(nacre::memory::MemoryStats::read().allocated);
    }
    // Over the budget by at most one writer's own bytes.
    assert!(
        peak_dirty <= (MAX_DIRTY_MB << 20) + EACH as u64,
        "dirty {peak_dirty}"
    );
    // 16 MiB written to 64 files: before, each held a 4 MiB extent buffer (256 MiB).
    let grown = peak_alloc.saturating_sub(before);
    assert!(
        grown < 48 << 20,
        "{} MiB allocated while writing",
        grown >> 20
    );
    for (i, h) in open.iter().enumerate() {
        c.release(h).await.expect("close");
        let (r, _) = c.open(h.fid, rw(), &Cred::root()).await.expect("reopen");
        let back = c.read(&r, 0, EACH as u64).await.expect("read");
        assert!(back[..] == pattern(EACH, i as u8)[..], "file {i}");
        c.release(&r).await.expect("close");
    }
    assert_eq!(c.dirty_bytes(), 0);
    cluster.stop().await;
}

/// A writer's last close settles the file's size (Lazy Size-on-MDT) from its objects. One
/// that cannot, because an OST is away, leaves the size to glimpses; once the OST is back,
/// the next stat queues the file to be settled again and its size becomes exact. Before,
/// such a file stayed "being settled" for good: never exact, never queued again.
///
/// A writer that then opens and closes without writing must not make the stored size (0,
/// from the create) count as exact: a close that wrote nothing keeps a size only if it
/// was exact before. (Once, a settle that gave up said the file was no longer written,
/// as one that committed does, and that close then called the size exact; `dbench`'s
/// open, close, open sequences read short files after a settle gave up that way.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_size_the_last_close_could_not_settle_is_settled_after_the_ost_is_back() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut cluster = start(dir.path(), "settlefs", 1, 2).await;
    let c = mount(&cluster).await;
    let (fi, f) = create_open(&c, c.root(), b"f", Layout::plain(2, 65536, 0)).await;
    let l = fi.layout.clone().expect("layout");
    assert_eq!(l.components[0].objects.len(), 2);
    let data = pattern(300_001, 3);
    c.write(&f, 0, Bytes::from(data.clone()))
        .await
        .expect("write");
    c.fsync(&f).await.expect("fsync");
    cluster.stop_ost(1).await;
    c.release(&f).await.expect("close");
    // The settle waits out its request to the stopped OST (the MDT's request timeout),
    // then gives up.
    tokio::time::sleep(nacre_rpc::conn::DEFAULT_TIMEOUT + std::time::Duration::from_secs(5)).await;
    cluster.start_ost(1).await.expect("start OST1");
    let (w, _) = c
        .open(fi.attr.fid, rw(), &Cred::root())
        .await
        .expect("open");
    c.release(&w).await.expect("close without writing");
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let st = c.getattr(fi.attr.fid).await;
        if let Ok(st) = &st
            && st.size_authoritative
        {
            assert_eq!(st.attr.size, data.len() as u64);
            break;
        }
        assert!(
            std::time::Instant::now() < end,
            "the size never became exact again: {st:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    drop(c);
    cluster.stop().await;
}

/// A chown (a setattr that changes no size) of a file whose size the MDT does not know,
/// with one of the file's OSTs stopped, is made and says so, without waiting out the
/// recovery timeout: the reply's size is what the MDT and the OSTs that answer can tell,
/// as Lustre's client keeps its own size there. The size lookup that ends the reply used
/// to wait 30 s for the stopped OST and then turn the chown it had made into EIO.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chown_with_an_ost_down_is_made_and_says_so() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut cluster = start(dir.path(), "chowndn", 1, 2).await;
    let c = mount(&cluster).await;
    let (fi, f) = create_open(&c, c.root(), b"f", Layout::plain(2, 1 << 20, 0)).await;
    let fid = fi.attr.fid;
    let data = pattern(3 << 20, 5);
    c.write(&f, 0, Bytes::from(data)).await.expect("write");
    c.fsync(&f).await.expect("fsync");
    // Held open for writing: the MDT's size is not exact, and a reply asks the OSTs.
    cluster.stop_ost(1).await;
    let a = SetAttr {
        uid: Some(7),
        gid: Some(8),
        ..SetAttr::default()
    };
    let info = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        c.setattr(fid, a, &Cred::root(), None),
    )
    .await
    .expect("the chown waited for the stopped OST")
    .expect("the chown was made, and must say so");
    assert_eq!((info.attr.uid, info.attr.gid), (7, 8));
    cluster.start_ost(1).await.expect("restart OST1");
    let i = c.getattr(fid).await.expect("getattr");
    assert_eq!((i.attr.uid, i.attr.gid, i.attr.size), (7, 8, 3 << 20));
    c.release(&f).await.expect("close");
    cluster.stop().await;
}

/// Whether the MDT holds `fid`'s exact size (settled after its last writer's close).
fn size_settled(cluster: &LocalCluster, fid: Fid) -> bool {
    let mdt = cluster.mdts[0]
        .as_ref()
        .and_then(|s| s.mdt())
        .expect("MDT0 runs");
    let mut v = mdt.store().read().expect("read the MDT's store");
    nacre_mdt::mdd::get_inode(&mut v, &fid).is_ok_and(|i| i.lsom_valid)
}

/// Sizes are settled in batches after the last close (`nacre_mdt::settle`). A file whose
/// OST stopped cannot be settled; another file closed with it, in the same batch, is
/// settled within the batch's wait for an OST (5 s), not held for the stopped OST's
/// recovery timeout (30 s). The first is settled once its OST is back and a stat asks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_ost_holds_back_only_its_own_files_sizes() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut cluster = start(dir.path(), "settle", 1, 2).await;
    let c = mount(&cluster).await;
    let (ai, a) = create_open(&c, c.root(), b"on-ost1", Layout::plain(1, 1 << 20, 1)).await;
    let (bi, b) = create_open(&c, c.root(), b"on-ost0", Layout::plain(1, 1 << 20, 0)).await;
    for (f, n) in [(&a, 5u8), (&b, 6)] {
        c.write(f, 0, Bytes::from(pattern(100_000, n)))
            .await
            .expect("write");
        c.fsync(f).await.expect("fsync");
    }
    cluster.stop_ost(1).await;
    // Closed together: one batch holds both.
    let (ra, rb) = futures::join!(c.release(&a), c.release(&b));
    ra.expect("close a");
    rb.expect("close b");
    let t0 = std::time::Instant::now();
    while !size_settled(&cluster, bi.attr.fid) {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(15),
            "the size of the file on the running OST waited for the stopped one"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        !size_settled(&cluster, ai.attr.fid),
        "a size settled while its OST was stopped"
    );
    cluster.start_ost(1).await.expect("restart OST1");
    let t0 = std::time::Instant::now();
    loop {
        // A stat of a file whose size is not exact queues it to be settled again.
        let i = c.getattr(ai.attr.fid).await;
        if size_settled(&cluster, ai.attr.fid) {
            assert_eq!(i.expect("getattr").attr.size, 100_000);
            break;
        }
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "the size never settled after its OST came back"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(
        c.getattr(bi.attr.fid).await.expect("getattr").attr.size,
        100_000
    );
    cluster.stop().await;
}
