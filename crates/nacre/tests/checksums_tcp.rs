//! The checksum scenarios of `it/checksums.rs` over TCP: this binary turns the in-process
//! delivery off (`NACRE_LO=0`) before anything reads it, so every request, bulk included,
//! goes through the kernel's loopback as it would between nodes.

mod common;

use common::cluster::{mount, start};
use common::integrity::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checksums_hold_over_tcp() {
    // SAFETY: the only test of this binary sets it first, before any thread reads the
    // environment.
    unsafe { std::env::set_var("NACRE_LO", "0") };
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "tcpfs", 1, 2).await;
    let c = mount(&cluster).await;
    assert!(
        !nacre_rpc::lo::any_registered(),
        "the in-process path is still on"
    );
    damaged_bulks_are_caught_and_resent(&cluster, &c).await;
    let files = populate(&c, "data", 12, 3).await;
    let flips = flip_osts(&cluster, &files, 3, 4);
    reads_fail_only_where_flipped(&c, &files, &flips).await;
    scrub_all(&cluster).await;
    scrub_found_every_flip(&cluster, &files, &flips);
    cluster.stop().await;
}
