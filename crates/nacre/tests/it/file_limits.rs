//! The largest file a layout allows, through a real mount: a write that would take an OST
//! object past its limit fails with EFBIG at that write, not at a later call, and the
//! size the writer sees stays true.

use crate::common;

use common::{UpFs, require_fuse};
use nacre_core::layout::OST_OBJECT_MAX_BYTES;
use std::os::unix::fs::FileExt;

#[test]
fn a_write_past_the_largest_object_is_efbig_at_once() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    // Lustre's default layout: one stripe, so the object is the file.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(fs.path("big"))
        .expect("create");
    let block = vec![b'x'; 4096];
    for off in [OST_OBJECT_MAX_BYTES, 1 << 44, (1 << 44) + 4096, 1 << 50] {
        let e = f
            .write_at(&block, off)
            .expect_err("a write past the largest object");
        assert_eq!(e.raw_os_error(), Some(libc::EFBIG), "at {off}: {e}");
        assert_eq!(
            f.metadata().expect("fstat").len(),
            0,
            "size after a refused write at {off}"
        );
    }
    // A write across the limit stops at it, as on a local file system.
    match f.write_at(&block, OST_OBJECT_MAX_BYTES - 1) {
        Ok(n) => assert_eq!(n, 1, "a write across the limit"),
        Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EFBIG), "{e}"),
    }
    // The last block below the limit is fine, and the size says so.
    let last = OST_OBJECT_MAX_BYTES - 4096;
    f.write_all_at(&block, last).expect("the last block");
    assert_eq!(f.metadata().expect("fstat").len(), OST_OBJECT_MAX_BYTES);
    f.sync_all().expect("fsync");
    let mut back = vec![0; 4096];
    f.read_exact_at(&mut back, last).expect("read back");
    assert_eq!(back, block);
    // Truncating past the limit is EFBIG too.
    let e = f
        .set_len(OST_OBJECT_MAX_BYTES + 1)
        .expect_err("truncate past the limit");
    assert_eq!(e.raw_os_error(), Some(libc::EFBIG));
    drop(f);
    std::fs::remove_file(fs.path("big")).expect("rm");
}
