//! LFSCK under the seed's fault models (the PFault table: a-DevFail, b-Inconsist,
//! c-Network, on the MGS, an MDS and an OSS): whatever fails, a run ends within a stated
//! bound and says how it ended; it never hangs. b-Inconsist on every target is the
//! subject of `lfsck.rs`, `lfsck_layout.rs` and `oi_scrub.rs`; here are the others.
//!
//! | target | a-DevFail | c-Network |
//! | --- | --- | --- |
//! | MGS | (holds no file system data) | `the_mgs_gone_changes_nothing` |
//! | MDS | `an_mdt_gone_leaves_a_partial_namespace_run` (its process stops) | the same |
//! | OSS | `an_osts_objects_gone_end_the_layout_run` | `an_ost_gone_leaves_a_partial_layout_run` |

mod common;

use common::lfsck::Fs;
use nacre_lfsck::control::{PEER_SILENCE, RPC_TIMEOUT};
use nacre_lustreapi::lfsck::{
    LPF_ALL_TGT, LPF_BROADCAST, LPF_DRYRUN, LfsckStatus, TYPE_LAYOUT, TYPE_NAMESPACE,
};
use nacre_rpc::lfsck::StartArgs;
use std::time::{Duration, Instant};

/// Starts `args` on MDT `i` and waits for the run to end, at most `bound`; returns how
/// long it took.
async fn run_within(fs: &Fs, i: u32, args: StartArgs, bound: Duration) -> Duration {
    let l = fs.checker(i);
    let t0 = Instant::now();
    l.start(args).await.expect("start");
    while l.running() {
        assert!(
            t0.elapsed() < bound,
            "LFSCK still running after {bound:?}:\n{}\n{}",
            l.namespace_text(),
            l.layout_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = t0.elapsed();
    eprintln!("run ended in {took:?}");
    took
}

fn layout_dry_run() -> StartArgs {
    StartArgs {
        active: TYPE_LAYOUT,
        flags: LPF_DRYRUN,
        ..StartArgs::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ost_gone_leaves_a_partial_layout_run() {
    let mut fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 20).await;
    fs.cl.as_mut().expect("running").stop_ost(1).await;
    // One timeout for the gone OST, then the run goes on without it.
    run_within(&fs, 0, layout_dry_run(), 3 * RPC_TIMEOUT).await;
    let st = fs.checker(0).state.lock().lo.clone();
    assert_eq!(
        st.status,
        LfsckStatus::Partial,
        "{}",
        fs.checker(0).layout_text()
    );
    // Nothing was taken for an inconsistency because an OST did not answer.
    assert_eq!(st.repaired_total(), 0, "{}", fs.checker(0).layout_text());
    fs.cl
        .as_mut()
        .expect("running")
        .start_ost(1)
        .await
        .expect("start OST1");
    let again = fs.lfsck_layout(0, 0).await;
    assert_eq!(again.repaired_total(), 0);
    fs.verify(&kept).await;
    fs.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_osts_objects_gone_end_the_layout_run() {
    let fs = Fs::new(1, 2).await;
    let _kept = fs.populate("keep", 20).await;
    // The OST keeps running, its object tree deleted under it (a failed device).
    std::fs::remove_dir_all(fs.dir().join("ost1").join("O")).expect("remove the objects");
    run_within(&fs, 0, layout_dry_run(), 3 * RPC_TIMEOUT).await;
    let l = fs.checker(0);
    let st = l.state.lock().lo.clone();
    // A target whose device failed is left out of the run, as one that does not
    // answer: its objects are not taken for missing ones.
    assert_eq!(st.status, LfsckStatus::Partial, "{}", l.layout_text());
    assert_eq!(st.repaired_total(), 0, "{}", l.layout_text());
    fs.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mdt_gone_leaves_a_partial_namespace_run() {
    let mut fs = Fs::new(2, 1).await;
    let kept = fs.populate("keep", 20).await;
    fs.cl.as_mut().expect("running").stop_mdt(1).await;
    // MDT0 waits for the gone MDT's first phase at most PEER_SILENCE, and each of its
    // questions to it at most RPC_TIMEOUT.
    run_within(
        &fs,
        0,
        StartArgs {
            active: TYPE_NAMESPACE,
            flags: LPF_DRYRUN | LPF_ALL_TGT | LPF_BROADCAST,
            ..StartArgs::default()
        },
        PEER_SILENCE + 4 * RPC_TIMEOUT,
    )
    .await;
    let l = fs.checker(0);
    let st = l.state.lock().ns.clone();
    assert_eq!(st.status, LfsckStatus::Partial, "{}", l.namespace_text());
    fs.verify(&kept).await;
    fs.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mgs_gone_changes_nothing() {
    let mut fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 20).await;
    fs.cl.as_mut().expect("running").stop_mgs().await;
    let t = run_within(
        &fs,
        0,
        StartArgs {
            active: TYPE_NAMESPACE | TYPE_LAYOUT,
            flags: LPF_DRYRUN,
            ..StartArgs::default()
        },
        2 * RPC_TIMEOUT,
    )
    .await;
    let l = fs.checker(0);
    let (ns, lo) = {
        let st = l.state.lock();
        (st.ns.clone(), st.lo.clone())
    };
    assert_eq!(ns.status, LfsckStatus::Completed, "{}", l.namespace_text());
    assert_eq!(lo.status, LfsckStatus::Completed, "{}", l.layout_text());
    assert!(t < RPC_TIMEOUT, "the MGS was waited for: {t:?}");
    fs.verify(&kept).await;
    fs.stop().await;
}
