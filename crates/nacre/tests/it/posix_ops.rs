//! POSIX behaviour the external suites (pjdfstest, fsx) check, through the client library
//! against a one-process file system: name length limits on lookup and fallocate's modes
//! on a striped file.

use crate::common;

use bytes::Bytes;
use common::cluster::{DIR, FILE, create_open, mount, start};
use nacre_client::file::{FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE};
use nacre_core::{Errno, Layout};
use nacre_rpc::msg::{Cred, LayoutRequest, OpenFlags};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookup_of_an_overlong_name_is_enametoolong() {
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "testfs", 1, 1).await;
    let c = mount(&cluster).await;
    let cred = Cred::root();
    let (d, _) = c
        .create(
            c.root(),
            b"d",
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
    let long = vec![b'x'; 256];
    assert_eq!(
        c.lookup(d.attr.fid, &long, &Cred::root()).await.err(),
        Some(Errno::ENAMETOOLONG)
    );
    assert_eq!(
        c.lookup(d.attr.fid, &long[..255], &Cred::root())
            .await
            .err(),
        Some(Errno::ENOENT)
    );
    let made = c
        .create(
            d.attr.fid,
            &long,
            FILE,
            0,
            &cred,
            None,
            LayoutRequest::Inherit,
            None,
            false,
        )
        .await;
    assert_eq!(made.err(), Some(Errno::ENAMETOOLONG));
    assert_eq!(
        c.lookup(d.attr.fid, b"..", &Cred::root())
            .await
            .expect("dotdot")
            .attr
            .fid,
        c.root()
    );
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallocate_modes_on_a_striped_file() {
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "testfs", 1, 3).await;
    let c = mount(&cluster).await;
    let (fi, f) = create_open(&c, c.root(), b"f", Layout::plain(3, 65536, -1)).await;
    let fid = fi.attr.fid;

    // posix_fallocate: the size grows to the end of the range, across stripes.
    c.fallocate(&f, 1000, 150_000, 0).await.expect("allocate");
    assert_eq!(c.getattr(fid).await.expect("stat").attr.size, 151_000);
    assert_eq!(
        &c.read(&f, 0, 200_000).await.expect("read")[..],
        &vec![0u8; 151_000][..]
    );
    // Within the file: no change of size.
    c.fallocate(&f, 0, 10, 0).await.expect("allocate inside");
    assert_eq!(c.getattr(fid).await.expect("stat").attr.size, 151_000);
    // KEEP_SIZE past the end allocates without growing.
    c.fallocate(&f, 400_000, 100_000, FALLOC_FL_KEEP_SIZE)
        .await
        .expect("keep size");
    assert_eq!(c.getattr(fid).await.expect("stat").attr.size, 151_000);

    // A punched hole spanning three stripes reads as zeros; the size stays.
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8 + 1).collect();
    c.write(&f, 0, Bytes::from(data.clone()))
        .await
        .expect("write");
    c.fallocate(
        &f,
        60_000,
        80_000,
        FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
    )
    .await
    .expect("punch");
    let mut want = data.clone();
    want[60_000..140_000].fill(0);
    assert!(
        c.read(&f, 0, 300_000).await.expect("read")[..] == want[..],
        "contents differ"
    );
    assert_eq!(c.getattr(fid).await.expect("stat").attr.size, 300_000);

    // ZERO_RANGE past the end zeroes and grows.
    c.fallocate(&f, 290_000, 20_000, FALLOC_FL_ZERO_RANGE)
        .await
        .expect("zero range");
    want.truncate(290_000);
    want.resize(310_000, 0);
    assert!(
        c.read(&f, 0, 400_000).await.expect("read")[..] == want[..],
        "contents differ"
    );

    // What the kernel would also refuse, and what nacre does not do.
    assert_eq!(c.fallocate(&f, 0, 0, 0).await.err(), Some(Errno::EINVAL));
    assert_eq!(
        c.fallocate(&f, 0, 10, FALLOC_FL_PUNCH_HOLE).await.err(),
        Some(Errno::ENOTSUP)
    );
    // FALLOC_FL_COLLAPSE_RANGE
    assert_eq!(
        c.fallocate(&f, 0, 65536, 0x08).await.err(),
        Some(Errno::ENOTSUP)
    );
    assert_eq!(
        c.fallocate(&f, u64::MAX - 5, 10, 0).await.err(),
        Some(Errno::EFBIG)
    );
    c.release(&f).await.expect("close");

    // After the last writer's close the MDT settles the size from the objects.
    let mut st = c.getattr(fid).await.expect("stat");
    for _ in 0..100 {
        if st.size_authoritative {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        st = c.getattr(fid).await.expect("stat");
    }
    assert!(st.size_authoritative);
    assert_eq!(st.attr.size, 310_000);

    let ro = OpenFlags {
        read: true,
        ..OpenFlags::default()
    };
    let (fr, _) = c
        .open(fid, ro, &Cred::root())
        .await
        .expect("open read-only");
    assert_eq!(c.fallocate(&fr, 0, 10, 0).await.err(), Some(Errno::EBADF));
    c.release(&fr).await.expect("close");
    cluster.stop().await;
}
