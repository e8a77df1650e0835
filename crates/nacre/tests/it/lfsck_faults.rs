//! LFSCK under the seed's fault models (the PFault table: a-DevFail, b-Inconsist,
//! c-Network, on the MGS, the MDS, one OSS, every OSS, the MDS and an OSS): whatever
//! fails, a run ends within a stated bound and says how it ended, and client reads and
//! writes end within a bound with the right data or an error; nothing hangs and nothing
//! reads back wrong. b-Inconsist on every target is the subject of `lfsck.rs`,
//! `lfsck_layout.rs` and `oi_scrub.rs`; here are the others, injected as `nacre inject`
//! does (`row_*`, one MDT and two OSTs, a dry run of namespace and layout), and targets
//! stopped or their storage deleted:
//!
//! | node(s) | a-DevFail (injected) | c-Network (injected) | stopped or deleted |
//! | --- | --- | --- | --- |
//! | MGS | `row_mgs_devfail`: completed; I/O fine | `row_mgs_network`: completed; I/O fine | `the_mgs_gone_changes_nothing` |
//! | MDS | `row_mds_devfail`: start refused (EIO); I/O EIO | `row_mds_network`: completed (it runs on the MDS); I/O EIO after the client's recovery | `an_mdt_gone_leaves_a_partial_namespace_run` (of two MDTs), `a_stop_of_every_target_ends_with_an_mdt_gone` |
//! | one OSS | `row_one_oss_devfail`: layout partial; its files EIO | `row_one_oss_network`: layout partial after one timeout; its files EIO; `a_stop_ends_a_run_held_up_by_a_silent_ost_at_once` | `an_ost_gone_leaves_a_partial_layout_run`, `an_osts_objects_gone_end_the_layout_run` |
//! | every OSS | `row_every_oss_devfail`: layout partial; I/O EIO | `row_every_oss_network`: layout partial; I/O EIO | |
//! | MDS + OSS | `row_mds_and_oss_devfail`: start refused (EIO) | `row_mds_and_oss_network`: layout partial; I/O EIO | |

use crate::common;

use common::lfsck::{Fs, Kept};
use nacre::inject_ctl::InjectOp;
use nacre_core::{Errno, Layout};
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

/// A namespace run with `flags` slowed to 10 objects/s (Lustre delays its runs with a
/// fail_loc instead), so that a stop finds it in its first phase.
fn slowed_namespace_run(flags: u16) -> StartArgs {
    StartArgs {
        valid: nacre_lustreapi::lfsck::LSV_SPEED_LIMIT,
        speed_limit: 10,
        active: TYPE_NAMESPACE,
        flags,
        ..StartArgs::default()
    }
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

/// Longest `lfsck_stop` may take while the run waits on a silent OST: well under the
/// checker's request timeout, which the stop must not sit out.
const STOP_BOUND: Duration = Duration::from_secs(3);

/// `lfsck_stop` under a network fault (Lustre's `sanity-lfsck` stops a run held up by an
/// OST, `OBD_FAIL_LFSCK_DELAY*`): the run waiting on the OST that does not answer ends
/// at once, stopped, not after the OST's timeout; once the fault clears, a new run
/// completes and finds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_ends_a_run_held_up_by_a_silent_ost_at_once() {
    let fs = Fs::new(1, 2).await;
    let kept = fs.populate("keep", 20).await;
    let items = fs
        .inject("OST0001", InjectOp::Network { clear: false })
        .await;
    assert_eq!(items[0].detail, "injected", "{items:?}");
    let l = fs.checker(0);
    l.start(layout_dry_run()).await.expect("start");
    // The OST is silent for a request timeout: the run is waiting on it now.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        l.running(),
        "the run ended before the stop:\n{}",
        l.layout_text()
    );
    let t0 = Instant::now();
    l.stop(false).await.expect("stop");
    let took = t0.elapsed();
    let st = l.state.lock().lo.clone();
    assert!(
        took < STOP_BOUND,
        "lfsck_stop took {took:?} with an OST silent:\n{}",
        l.layout_text()
    );
    assert!(!l.running(), "still running after the stop");
    assert_eq!(st.status, LfsckStatus::Stopped, "{}", l.layout_text());
    let items = fs
        .inject("OST0001", InjectOp::Network { clear: true })
        .await;
    assert_eq!(items[0].detail, "cleared", "{items:?}");
    let again = fs.lfsck_layout(0, 0).await;
    assert_eq!(again.status, LfsckStatus::Completed);
    assert_eq!(again.repaired_total(), 0);
    fs.verify(&kept).await;
    fs.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_osts_objects_gone_end_the_layout_run() {
    let fs = Fs::new(1, 2).await;
    let _kept = fs.populate("keep", 20).await;
    // The OST keeps running, its object tree deleted under it (a failed device).
    common::rm_rf_live(&fs.dir().join("ost1").join("O"));
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

/// sanity-lfsck.sh 32b: `lfsck_stop -A` while an MDT taking part has failed. The stop
/// ends the run here at once and gives up on the gone MDT within one request timeout;
/// the run is stopped, and the MDT back, the names read as they did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_of_every_target_ends_with_an_mdt_gone() {
    let mut fs = Fs::new(2, 1).await;
    let kept = fs.populate("keep", 40).await;
    let l = fs.checker(0).clone();
    // Slowed down (Lustre delays it with a fail_loc) so that it is in its first phase.
    l.start(slowed_namespace_run(
        LPF_DRYRUN | LPF_ALL_TGT | LPF_BROADCAST,
    ))
    .await
    .expect("start");
    fs.cl.as_mut().expect("running").stop_mdt(1).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        l.running(),
        "the run ended before the stop:\n{}",
        l.namespace_text()
    );
    let t0 = Instant::now();
    l.stop(true).await.expect("stop");
    let took = t0.elapsed();
    assert!(
        took < RPC_TIMEOUT + STOP_BOUND,
        "lfsck_stop -A took {took:?} with an MDT gone"
    );
    assert!(!l.running(), "still running after the stop");
    let st = l.state.lock().ns.clone();
    assert_eq!(st.status, LfsckStatus::Stopped, "{}", l.namespace_text());
    fs.cl
        .as_mut()
        .expect("running")
        .start_mdt(1)
        .await
        .expect("start MDT1");
    fs.verify(&kept).await;
    fs.stop().await;
}

/// sanity-lfsck.sh 44: the MDT stops while `lfsck_stop` is under way. The run is
/// stopped, not paused: it does not start again with the MDT, and says `stopped`.
///
/// One thread: the stop's first poll asks the run to end, and the run cannot end
/// before the MDT's stop has begun. On two threads it sometimes did, and the case
/// under test never came about.
#[tokio::test(flavor = "current_thread")]
async fn an_mdt_stopped_while_lfsck_stops_keeps_it_stopped() {
    let mut fs = Fs::new(1, 1).await;
    let kept = fs.populate("keep", 40).await;
    let l = fs.checker(0).clone();
    l.start(slowed_namespace_run(LPF_DRYRUN))
        .await
        .expect("start");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(l.running(), "the run ended early:\n{}", l.namespace_text());
    // The stop goes first, as in Lustre's test: its first step asks the run to end,
    // then it waits for the run while the MDT stops.
    let mut stopping = Box::pin(l.stop(false));
    assert!(
        futures::poll!(&mut stopping).is_pending(),
        "the stop did not wait"
    );
    let mdt_stop = fs.cl.as_mut().expect("running").stop_mdt(0);
    let (stopped, ()) =
        tokio::time::timeout(STOP_BOUND, async { tokio::join!(stopping, mdt_stop) })
            .await
            .expect("lfsck_stop hung while its MDT stopped");
    eprintln!("lfsck_stop: {stopped:?}");
    fs.cl
        .as_mut()
        .expect("running")
        .start_mdt(0)
        .await
        .expect("start MDT0");
    let l = fs.checker(0);
    // Give a wrongly resumed run the time to show.
    tokio::time::sleep(Duration::from_secs(1)).await;
    stopped.expect("lfsck_stop");
    assert!(
        !l.running(),
        "the stopped run started again with its MDT:\n{}",
        l.namespace_text()
    );
    let st = l.state.lock().ns.clone();
    assert_eq!(st.status, LfsckStatus::Stopped, "{}", l.namespace_text());
    fs.verify(&kept).await;
    fs.stop().await;
}

/// A run its MDT paused (the MDT stopping) that `lfsck_stop` reaches before the MDT is
/// gone is stopped, not paused: the stop says so, and the run does not resume when the
/// MDT starts again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_after_the_mdt_paused_the_run_keeps_it_stopped() {
    use nacre_rpc::lfsck::LfsckService;
    let mut fs = Fs::new(1, 1).await;
    let kept = fs.populate("keep", 40).await;
    let l = fs.checker(0).clone();
    l.start(slowed_namespace_run(LPF_DRYRUN))
        .await
        .expect("start");
    tokio::time::sleep(Duration::from_millis(500)).await;
    // What the MDT's stop does first: the run pauses and saves its place.
    l.clone().stopping().await;
    assert_eq!(l.state.lock().ns.status, LfsckStatus::Paused);
    l.stop(false).await.expect("lfsck_stop of a paused run");
    assert_eq!(l.state.lock().ns.status, LfsckStatus::Stopped);
    let cl = fs.cl.as_mut().expect("running");
    cl.stop_mdt(0).await;
    cl.start_mdt(0).await.expect("start MDT0");
    let l = fs.checker(0);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !l.running(),
        "the stopped run resumed:\n{}",
        l.namespace_text()
    );
    assert_eq!(
        l.state.lock().ns.status,
        LfsckStatus::Stopped,
        "{}",
        l.namespace_text()
    );
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

/// The seed's table, row by row: where the fault is injected (one MDS, two OSSes).
#[derive(Clone, Copy, Debug)]
enum Row {
    Mgs,
    Mds,
    OneOss,
    EveryOss,
    MdsOss,
}

impl Row {
    /// Whether a client's I/O on a file striped over `osts` needs a faulted target.
    fn touches(self, osts: &[u32]) -> bool {
        match self {
            Row::Mgs => false,
            Row::Mds | Row::MdsOss | Row::EveryOss => true,
            Row::OneOss => osts.contains(&1),
        }
    }

    fn targets(self) -> &'static [&'static str] {
        match self {
            Row::Mgs => &["MGS"],
            Row::Mds => &["MDT0000"],
            Row::OneOss => &["OST0001"],
            Row::EveryOss => &["OST0000", "OST0001"],
            Row::MdsOss => &["MDT0000", "OST0001"],
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Model {
    DevFail,
    Network,
}

impl Model {
    fn op(self, clear: bool) -> InjectOp {
        match self {
            Model::DevFail => InjectOp::DevFail { clear },
            Model::Network => InjectOp::Network { clear },
        }
    }
}

/// How long a client keeps retrying a target that does not answer, here: short, so
/// that the bounds below stay short too.
const CLIENT_RECOVERY: Duration = Duration::from_secs(5);
/// Longest the checker may take under a fault: one silent peer, and a request timeout
/// per OST with room for a loaded machine.
const LFSCK_BOUND: Duration = Duration::from_secs(90);
/// Longest client reads and a write may take under a fault: a request timeout, the
/// client's recovery, and room for a loaded machine.
const IO_BOUND: Duration = Duration::from_secs(
    nacre_rpc::conn::DEFAULT_TIMEOUT.as_secs() + CLIENT_RECOVERY.as_secs() + 60,
);
/// Longest the file system may take to serve again once the fault is cleared.
const RECOVERED_BOUND: Duration = Duration::from_secs(120);
/// Files written before the fault and read under it.
const FILES: usize = 8;

/// What one cell of the table came to.
#[derive(Debug)]
struct Cell {
    /// The run's end: `(namespace, layout)`, or the error its start gave.
    lfsck: Result<(LfsckStatus, LfsckStatus), Errno>,
    took: Duration,
    /// Each read under the fault: its error, or `None` for the right data.
    reads: Vec<Option<Errno>>,
    write: Option<Errno>,
    io_took: Duration,
}

/// Reads every file of `kept` and writes a new one, all at once, within [`IO_BOUND`];
/// a read that returns data must return the right data.
async fn io_under_fault(
    fs: &Fs,
    kept: &[Kept],
    dir: nacre_core::Fid,
) -> (Vec<Option<Errno>>, Option<Errno>, Duration) {
    let t0 = Instant::now();
    let reads = futures::future::join_all(kept.iter().map(|k| async move {
        match fs.try_read(k.fid).await {
            Ok(d) => {
                assert!(
                    d == k.data,
                    "{} read back wrong data under the fault",
                    k.name
                );
                None
            }
            Err(e) => Some(e),
        }
    }));
    let write = fs.try_write(dir, "written-under-fault", b"under the fault");
    let (reads, write) = tokio::time::timeout(IO_BOUND, async { tokio::join!(reads, write) })
        .await
        .unwrap_or_else(|_| panic!("client I/O still waiting after {IO_BOUND:?}"));
    (reads, write.err(), t0.elapsed())
}

/// The directory of the population.
async fn dir_of(fs: &Fs) -> nacre_core::Fid {
    fs.c.lookup(fs.c.root(), b"keep", &nacre_rpc::msg::Cred::root())
        .await
        .expect("keep")
        .attr
        .fid
}

/// One cell of the seed's table: a file system of one MDT and two OSTs, `model` on
/// `row`'s targets, then a dry run of namespace and layout within [`LFSCK_BOUND`],
/// client I/O within [`IO_BOUND`]; then the fault cleared and every file as written.
async fn cell(row: Row, model: Model) -> Cell {
    let fs = Fs::new(1, 2).await;
    for i in fs.c.mdcs().iter().chain(fs.c.oscs().iter()) {
        i.set_recovery_timeout(CLIENT_RECOVERY);
    }
    let mut kept = fs.populate("keep", FILES).await;
    let dir = dir_of(&fs).await;
    // One file on OST0 alone, whatever the allocator picked for the others.
    let data = b"on OST0 alone".to_vec();
    let name = "ost0".to_string();
    let fid = fs
        .write_layout(dir, &name, &data, Layout::plain(1, 65536, 0))
        .await;
    kept.push(Kept { fid, name, data });
    // The OSTs each file is striped over.
    let mut osts = Vec::new();
    for k in &kept {
        let info = fs.c.getattr(k.fid).await.expect("getattr");
        let l = info.layout.expect("layout");
        osts.push(
            l.components
                .iter()
                .flat_map(|c| c.objects.iter().map(|o| o.ost_idx))
                .collect::<Vec<u32>>(),
        );
    }
    for t in row.targets() {
        let items = fs.inject(t, model.op(false)).await;
        assert_eq!(items.len(), 1, "{items:?}");
        assert_eq!(items[0].detail, "injected", "{items:?}");
    }
    let l = fs.checker(0);
    let t0 = Instant::now();
    let started = l
        .start(StartArgs {
            active: TYPE_NAMESPACE | TYPE_LAYOUT,
            flags: LPF_DRYRUN,
            ..StartArgs::default()
        })
        .await;
    let lfsck = match started {
        Ok(_) => {
            while l.running() {
                assert!(
                    t0.elapsed() < LFSCK_BOUND,
                    "{row:?} {model:?}: LFSCK still running after {LFSCK_BOUND:?}:\n{}\n{}",
                    l.namespace_text(),
                    l.layout_text()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let st = l.state.lock();
            Ok((st.ns.status, st.lo.status))
        }
        Err(e) => Err(e),
    };
    let took = t0.elapsed();
    let (reads, write, io_took) = io_under_fault(&fs, &kept, dir).await;
    // Exactly the files that need a faulted target fail; the others read as written.
    for (i, r) in reads.iter().enumerate() {
        assert_eq!(
            r.is_some(),
            row.touches(&osts[i]),
            "{row:?} {model:?}: {} on OSTs {:?}: {r:?}",
            kept[i].name,
            osts[i]
        );
    }
    for t in row.targets() {
        let items = fs.inject(t, model.op(true)).await;
        assert_eq!(items[0].detail, "cleared", "{items:?}");
    }
    // Back: every file reads as written (the client may still be reconnecting).
    let end = Instant::now() + RECOVERED_BOUND;
    for k in &kept {
        loop {
            match fs.try_read(k.fid).await {
                Ok(d) => {
                    assert!(d == k.data, "{} changed", k.name);
                    break;
                }
                Err(e) => assert!(
                    Instant::now() < end,
                    "{row:?} {model:?}: {} unreadable {RECOVERED_BOUND:?} after the fault cleared: {e:?}",
                    k.name
                ),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    loop {
        match fs.try_write(dir, "written-after", b"after the fault").await {
            Ok(_) => break,
            Err(e) => assert!(
                Instant::now() < end,
                "{row:?} {model:?}: no write {RECOVERED_BOUND:?} after the fault cleared: {e:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let c = Cell {
        lfsck,
        took,
        reads,
        write,
        io_took,
    };
    eprintln!("{row:?} {model:?}: {c:?}");
    assert!(c.took < LFSCK_BOUND && c.io_took < IO_BOUND, "{c:?}");
    fs.stop().await;
    c
}

use LfsckStatus::{Completed, Partial};

/// Nothing in the run depends on the MGS, nor do reads and writes of a mounted client.
fn mgs_is_not_needed(c: &Cell) {
    assert_eq!(c.lfsck, Ok((Completed, Completed)), "{c:?}");
    assert!(c.reads.iter().all(Option::is_none), "{c:?}");
    assert_eq!(c.write, None, "{c:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_mgs_devfail() {
    mgs_is_not_needed(&cell(Row::Mgs, Model::DevFail).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_mgs_network() {
    mgs_is_not_needed(&cell(Row::Mgs, Model::Network).await);
}

/// Every read met an error (none returned data), and so did the write.
fn all_io_failed(c: &Cell) {
    assert!(c.reads.iter().all(Option::is_some), "{c:?}");
    assert!(c.write.is_some(), "{c:?}");
}

/// Some reads returned their data and some met an error (which ones, `cell` checks:
/// the file on OST0 alone reads).
fn some_io_failed(c: &Cell) {
    assert!(c.reads.iter().any(Option::is_some), "{c:?}");
    assert!(c.reads.iter().any(Option::is_none), "{c:?}");
}

/// The MDS's own storage failed: the checker cannot read what it checks, and says so
/// (its start refused with EIO, or the run failed).
fn checker_failed_on_its_device(c: &Cell) {
    assert!(
        matches!(c.lfsck, Err(Errno::EIO) | Ok((LfsckStatus::Failed, _))),
        "{c:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_mds_devfail() {
    let c = cell(Row::Mds, Model::DevFail).await;
    checker_failed_on_its_device(&c);
    all_io_failed(&c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_mds_network() {
    let c = cell(Row::Mds, Model::Network).await;
    // The checker runs on the MDS and reaches the OSTs: only clients lose the MDS.
    assert_eq!(c.lfsck, Ok((Completed, Completed)), "{c:?}");
    all_io_failed(&c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_one_oss_devfail() {
    let c = cell(Row::OneOss, Model::DevFail).await;
    assert_eq!(c.lfsck, Ok((Completed, Partial)), "{c:?}");
    some_io_failed(&c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_one_oss_network() {
    let c = cell(Row::OneOss, Model::Network).await;
    assert_eq!(c.lfsck, Ok((Completed, Partial)), "{c:?}");
    some_io_failed(&c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_every_oss_devfail() {
    let c = cell(Row::EveryOss, Model::DevFail).await;
    assert_eq!(c.lfsck, Ok((Completed, Partial)), "{c:?}");
    all_io_failed(&c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_every_oss_network() {
    let c = cell(Row::EveryOss, Model::Network).await;
    assert_eq!(c.lfsck, Ok((Completed, Partial)), "{c:?}");
    all_io_failed(&c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_mds_and_oss_devfail() {
    let c = cell(Row::MdsOss, Model::DevFail).await;
    checker_failed_on_its_device(&c);
    all_io_failed(&c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_mds_and_oss_network() {
    let c = cell(Row::MdsOss, Model::Network).await;
    assert_eq!(c.lfsck, Ok((Completed, Partial)), "{c:?}");
    all_io_failed(&c);
}
