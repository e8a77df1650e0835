//! A target whose storage is removed under it (`rm -rf DIR/ost1` while it runs): its
//! syncs are not acknowledged, every request fails with EIO within
//! [`FAILURE_NOTICED_WITHIN`], its log says once which target failed and why, its
//! `health_check` parameter says so too, and nothing recreates its directories.

mod common;

use bytes::Bytes;
use common::cluster::{DIR, FILE, create, create_open, mount, pattern, start};
use nacre::params::{MdtParams, OstParams, ParamSource};
use nacre_core::{Errno, Layout};
use nacre_osd::health::FAILURE_NOTICED_WITHIN;
use nacre_rpc::msg::Cred;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What the targets logged, for every test of this file.
static LOG: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct LogWriter;

impl std::io::Write for LogWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        LOG.lock().expect("log").extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn capture_logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("warn")
        .with_ansi(false)
        .with_writer(|| LogWriter)
        .try_init();
}

/// Log lines holding every one of `words`.
fn logged(words: &[&str]) -> Vec<String> {
    let text = String::from_utf8_lossy(&LOG.lock().expect("log")).into_owned();
    text.lines()
        .filter(|l| words.iter().all(|w| l.contains(w)))
        .map(str::to_string)
        .collect()
}

/// Calls `f` until it fails with EIO; how long that took (it must be within the bound).
async fn eio_within<F, Fut, T>(what: &str, mut f: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Errno>>,
{
    let t0 = Instant::now();
    loop {
        match f().await {
            Err(Errno::EIO) => return t0.elapsed(),
            Err(e) => panic!("{what}: {e} where EIO was expected"),
            Ok(_) => {}
        }
        assert!(
            t0.elapsed() < FAILURE_NOTICED_WITHIN,
            "{what} still succeeds {:?} after the target's storage was removed",
            t0.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_ost_acknowledges_no_fsync_and_answers_eio() {
    capture_logs();
    let tmp = tempfile::tempdir().expect("tmp");
    let cluster = start(tmp.path(), "hcost", 1, 3).await;
    let c = mount(&cluster).await;
    let open = |name: &'static [u8], layout: Layout| {
        let c = c.clone();
        async move { create_open(&c, c.root(), name, layout).await.1 }
    };
    // Striped over both OSTs; its data made durable while the storage is there.
    let f = open(b"striped", Layout::plain(2, 65536, 0)).await;
    let data = pattern(4 * 65536, 3);
    c.write(&f, 0, Bytes::from(data.clone()))
        .await
        .expect("write");
    c.fsync(&f).await.expect("fsync before");
    // And one on OST0002 only, which nothing but reads will touch.
    let r = open(b"on-ost2", Layout::plain(1, 65536, 2)).await;
    c.write(&r, 0, Bytes::from(data.clone()))
        .await
        .expect("write");
    c.fsync(&r).await.expect("fsync before");
    let ost1 = tmp.path().join("ost1");
    common::rm_rf_live(&ost1);
    let ost2 = tmp.path().join("ost2");
    common::rm_rf_live(&ost2);

    // A write made "durable" on a removed OST is not: the fsync fails.
    c.write(&f, 0, Bytes::from(pattern(4 * 65536, 4)))
        .await
        .expect("write (write-behind)");
    assert_eq!(c.fsync(&f).await, Err(Errno::EIO), "fsync after rm -rf");
    // Every request to that OST fails from then on, reads included.
    let t = eio_within("a read of OST0001's stripe", || c.read(&f, 65536, 65536)).await;
    eprintln!("OST0001's reads failed {t:?} after the removal");
    // A new object on the removed OST: no directory comes back for it.
    let g = open(b"on-ost1", Layout::plain(1, 65536, 1)).await;
    c.write(&g, 0, Bytes::from_static(b"lost")).await.ok();
    assert_eq!(c.fsync(&g).await, Err(Errno::EIO), "fsync of a new object");
    assert!(!ost1.exists(), "the removed OST directory was recreated");
    // Reads from open files of a removed OST stop at its next check.
    let t = eio_within("a read of OST0002's object", || c.read(&r, 0, 65536)).await;
    eprintln!("OST0002's reads failed {t:?} after the removal");
    assert!(!ost2.exists(), "the removed OST directory was recreated");

    // Said once, naming the target and the reason; the parameter says it too.
    for ost in ["hcost-OST0001", "hcost-OST0002"] {
        let lines = logged(&[ost, "storage failed", "is gone"]);
        assert_eq!(lines.len(), 1, "log lines: {lines:?}");
    }
    let ost = cluster.osts[1]
        .as_ref()
        .and_then(|s| s.ost())
        .expect("OST1");
    let params = OstParams {
        fsname: "hcost".into(),
        ost: ost.clone(),
    };
    let hc = params
        .list()
        .into_iter()
        .find(|p| p.name == "obdfilter.hcost-OST0001.health_check")
        .expect("health_check parameter");
    assert!(hc.value.starts_with("NOT HEALTHY"), "{}", hc.value);
    assert!(ost.health().failure().is_some());

    // The other OST serves on.
    let h = open(b"on-ost0", Layout::plain(1, 65536, 0)).await;
    c.write(&h, 0, Bytes::from(data.clone()))
        .await
        .expect("write");
    c.fsync(&h).await.expect("fsync on OST0000");
    assert_eq!(c.read(&h, 0, 65536).await.expect("read")[..], data[..65536]);
    let ost0 = cluster.osts[0]
        .as_ref()
        .and_then(|s| s.ost())
        .expect("OST0");
    assert_eq!(ost0.health().status(), "healthy");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_mdt_answers_eio() {
    capture_logs();
    let tmp = tempfile::tempdir().expect("tmp");
    let cluster = start(tmp.path(), "hcmdt", 1, 1).await;
    let c = mount(&cluster).await;
    create(&c, c.root(), b"d", DIR).await.expect("mkdir");
    let mdt0 = tmp.path().join("mdt0");
    std::fs::remove_dir_all(&mdt0).expect("rm -rf mdt0");

    let mut i = 0u32;
    let t = eio_within("a create on MDT0000", || {
        i += 1;
        let c = c.clone();
        async move { create(&c, c.root(), format!("f{i}").as_bytes(), FILE).await }
    })
    .await;
    eprintln!("MDT0000's creates failed {t:?} after the removal");
    assert_eq!(c.getattr(c.root()).await.err(), Some(Errno::EIO));
    assert_eq!(
        c.lookup(c.root(), b"d", &Cred::root()).await.err(),
        Some(Errno::EIO)
    );
    assert!(!mdt0.exists(), "the removed MDT directory was recreated");

    let lines = logged(&["hcmdt-MDT0000", "storage failed", "is gone"]);
    assert_eq!(lines.len(), 1, "log lines: {lines:?}");
    let mdt = cluster.mdts[0]
        .as_ref()
        .and_then(|s| s.mdt())
        .expect("MDT0");
    let params = MdtParams {
        fsname: "hcmdt".into(),
        mdt: mdt.clone(),
    };
    let hc = params
        .list()
        .into_iter()
        .find(|p| p.name == "mdt.hcmdt-MDT0000.health_check")
        .expect("health_check parameter");
    assert!(hc.value.starts_with("NOT HEALTHY"), "{}", hc.value);
    cluster.stop().await;
    assert!(
        !mdt0.exists(),
        "stopping recreated the removed MDT directory"
    );
}

/// A Data-on-MDT file whose DoM object cannot be read is an error, not an empty file: the
/// MDT used to report size 0 when its DoM object could not be opened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dom_file_whose_object_cannot_be_read_is_eio_not_empty() {
    let tmp = tempfile::tempdir().expect("tmp");
    let cluster = start(tmp.path(), "hcdom", 1, 1).await;
    let c = mount(&cluster).await;
    // DoM only: the size is the DoM object's, read at every stat.
    let dom = Layout::composite(vec![nacre_core::layout::Component::dom(1 << 20)]);
    let data = pattern(5000, 7);
    let fid = common::integrity::write_file(&c, c.root(), "small", Some(dom), &data)
        .await
        .expect("write");
    let info = c.getattr(fid).await.expect("stat");
    assert_eq!(info.attr.size, 5000);
    let obj = info
        .layout
        .as_ref()
        .and_then(|l| l.dom_object())
        .expect("a DoM object");
    let path = cluster.mdts[0]
        .as_ref()
        .and_then(|s| s.mdt())
        .expect("MDT0")
        .dom_store()
        .object_path(&obj);
    cluster.stop().await;
    // The object file becomes something no open can read as data; the restart leaves no
    // descriptor of the old one cached.
    std::fs::remove_file(&path).expect("rm object");
    std::fs::create_dir(&path).expect("mkdir in its place");
    let cluster = nacre::local::LocalCluster::start(tmp.path(), Default::default())
        .await
        .expect("restart");
    let c = mount(&cluster).await;
    let got = c.getattr(fid).await.map(|i| i.attr.size);
    assert_eq!(
        got,
        Err(Errno::EIO),
        "a stat of a DoM file whose data is unreadable"
    );
    cluster.stop().await;
}
