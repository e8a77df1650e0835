//! PaF end to end on temporary directories: determinism, the file set against the plan,
//! several ranks sharing one run, interruption and resume, scrub, and error paths.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nacre_bench::backend::{FileSystem, PosixFs};
use nacre_bench::cancel::Cancel;
use nacre_bench::env::RunEnv;
use nacre_bench::paf::plan::{Plan, TreeShape};
use nacre_bench::paf::spec::PafSpec;
use nacre_bench::paf::{self, PafOptions, RunState};
use nacre_bench::progress::Progress;
use nacre_bench::rank::World;

/// Every file under DIR/paf: relative path → size.
fn tree(dir: &Path) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let root = dir.join("paf");
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let md = e.metadata().expect("metadata");
            if md.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).expect("prefix").display().to_string();
                out.insert(rel, md.len());
            }
        }
    }
    out
}

/// What the plan says should remain.
fn expected(plan: &Plan, dir: &Path) -> BTreeMap<String, u64> {
    let mut removed = std::collections::HashSet::new();
    for g in 0..plan.gens.len() {
        for t in 0..plan.threads_total {
            for s in plan.removal_seqs(g, t) {
                removed.insert((t, s));
            }
        }
    }
    plan.files()
        .filter(|f| !removed.contains(&(f.gtn, f.seq)))
        .map(|f| {
            let p = plan.path_of(dir, f.gtn, f.seq);
            (
                p.strip_prefix(dir).expect("prefix").display().to_string(),
                f.size,
            )
        })
        .collect()
}

fn opts(threads: usize) -> PafOptions {
    PafOptions {
        threads,
        xfer: 4096,
        shape: TreeShape { maxd: 16, maxb: 64 },
        ..PafOptions::default()
    }
}

fn run_once(dir: &Path, spec: &str, threads: usize) -> paf::PafSummary {
    let world = World::single();
    let env = RunEnv::quiet(Arc::new(PosixFs::new()), &world);
    let spec = PafSpec::parse(spec).expect("spec");
    paf::run(&env, dir, Some(&spec), &opts(threads)).expect("paf run")
}

const SPEC: &str = "PAF:50.30,20.40:67005@8K,4K<2048";

#[test]
fn same_spec_and_seed_give_the_same_files_and_removals() {
    let a = tempfile::tempdir().expect("tmp");
    let b = tempfile::tempdir().expect("tmp");
    let sa = run_once(a.path(), SPEC, 3);
    let sb = run_once(b.path(), SPEC, 3);
    let ta = tree(a.path());
    let tb = tree(b.path());
    assert!(!ta.is_empty());
    assert_eq!(ta, tb, "same names and sizes");

    // And exactly what the plan says: gen 1 writes 1 MiB in 8 KiB files, gen 2 0.4 MiB in 4 KiB.
    let spec = PafSpec::parse(SPEC).expect("spec");
    let plan = Plan::new(&spec, 2048, 67005, 3, TreeShape { maxd: 16, maxb: 64 }).expect("plan");
    assert_eq!(ta, expected(&plan, a.path()));
    assert_eq!(sa.files_written, 128 + 102);
    assert_eq!(sa.files_written - sa.files_removed, ta.len() as u64);
    assert_eq!(
        sa.bytes_written - sa.bytes_removed,
        ta.values().sum::<u64>()
    );
    assert_eq!(sa.seed, 67005);
    assert_eq!(sa.files_removed, sb.files_removed);
    // Names begin with the global thread number.
    assert!(
        ta.keys()
            .any(|k| k.ends_with("/AAAA00000000001") || k.contains("AAAA0000000000"))
    );
    assert!(ta.keys().all(|k| k.starts_with("paf/AAA")));

    // Another seed removes other files (same count).
    let c = tempfile::tempdir().expect("tmp");
    let sc = run_once(c.path(), "PAF:50.30,20.40:67006@8K,4K<2048", 3);
    let tc = tree(c.path());
    assert_eq!(sc.files_removed, sa.files_removed);
    assert_ne!(tc, ta, "a different seed, a different removal set");
}

#[test]
fn several_ranks_share_one_run() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().to_path_buf();
    let fs: Arc<dyn FileSystem> = Arc::new(PosixFs::new());
    let rdv = dir.join(".nacre-rdv").join("test");
    let handles: Vec<_> = (0..2)
        .map(|rank| {
            let (dir, fs, rdv) = (dir.clone(), fs.clone(), rdv.clone());
            std::thread::spawn(move || {
                let world = World::files(
                    rank,
                    2,
                    fs.clone(),
                    &rdv,
                    Duration::from_secs(30),
                    Cancel::new(),
                )
                .expect("world");
                let env = RunEnv::quiet(fs, &world);
                let spec = PafSpec::parse(SPEC).expect("spec");
                let s = paf::run(&env, &dir, Some(&spec), &opts(2)).expect("paf");
                world.finish().expect("finish");
                s
            })
        })
        .collect();
    let sums: Vec<_> = handles
        .into_iter()
        .map(|h| h.join().expect("rank"))
        .collect();
    let spec = PafSpec::parse(SPEC).expect("spec");
    let plan = Plan::new(&spec, 2048, 67005, 4, TreeShape { maxd: 16, maxb: 64 }).expect("plan");
    let t = tree(&dir);
    assert_eq!(
        t,
        expected(&plan, &dir),
        "2 ranks x 2 threads = 4 global threads"
    );
    assert!(
        t.keys().any(|k| k.starts_with("paf/AAAD/")),
        "rank 1's second thread is AAAD"
    );
    assert_eq!(sums[0].threads_total, 4);
    assert_eq!(sums[0].files_written, 128 + 102);
    assert!(!dir.join(".nacre-rdv").exists(), "rendezvous cleaned up");
}

#[test]
fn interrupted_run_resumes_and_scrub_cleans() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path();
    let world = World::single();
    let fs: Arc<dyn FileSystem> = Arc::new(PosixFs::new());
    let spec = PafSpec::parse(SPEC).expect("spec");
    // Cancelled before it starts: the journal records an interrupted run.
    let cancel = Cancel::new();
    cancel.cancel();
    let env = RunEnv {
        fs: fs.clone(),
        world: &world,
        progress: Progress::hidden(),
        cancel,
    };
    let e = paf::run(&env, dir, Some(&spec), &opts(2)).expect_err("interrupted");
    assert!(e.to_string().contains("--resume"), "{e}");
    let j = paf::read_journal(fs.as_ref(), dir)
        .expect("read")
        .expect("journal");
    assert_eq!(j.state, RunState::Interrupted);

    // A second start without --resume is refused.
    let env = RunEnv::quiet(fs.clone(), &world);
    let e = paf::run(&env, dir, Some(&spec), &opts(2)).expect_err("exists");
    assert!(e.to_string().contains("--resume"), "{e}");

    // Resume finishes it, and the result is the planned file set.
    let mut o = opts(2);
    o.resume = true;
    let s = paf::run(&env, dir, None, &o).expect("resume");
    assert!(s.resumed);
    let plan = Plan::new(&spec, 2048, 67005, 2, TreeShape { maxd: 16, maxb: 64 }).expect("plan");
    assert_eq!(tree(dir), expected(&plan, dir));
    assert_eq!(
        paf::read_journal(fs.as_ref(), dir)
            .expect("read")
            .expect("journal")
            .state,
        RunState::Complete
    );

    // Scrub removes what PaF made and leaves anything else.
    std::fs::write(dir.join("paf").join("notes.txt"), b"mine").expect("write");
    std::fs::write(dir.join("other.txt"), b"mine").expect("write");
    let r = paf::scrub(&env, dir, 2).expect("scrub");
    assert!(r.entries_removed > 0);
    assert_eq!(r.foreign_entries_kept, 1);
    assert!(dir.join("paf/notes.txt").exists());
    assert!(dir.join("other.txt").exists());
    assert!(tree(dir).keys().all(|k| k.ends_with("notes.txt")));
    assert!(!dir.join(".nacre-paf").exists());
}

#[test]
fn midway_interruption_resumes_to_the_same_files() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().to_path_buf();
    let world = World::single();
    let fs: Arc<dyn FileSystem> = Arc::new(PosixFs::new());
    let spec = PafSpec::parse("PAF:60.50:9@4K<4096").expect("spec");
    let cancel = Cancel::new();
    let c2 = cancel.clone();
    let watcher_dir = dir.clone();
    // Cancel once some files exist.
    let watcher = std::thread::spawn(move || {
        for _ in 0..2000 {
            if tree(&watcher_dir).len() > 50 {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        c2.cancel();
    });
    let env = RunEnv {
        fs: fs.clone(),
        world: &world,
        progress: Progress::hidden(),
        cancel,
    };
    let first = paf::run(&env, &dir, Some(&spec), &opts(2));
    watcher.join().expect("watcher");
    let env = RunEnv::quiet(fs.clone(), &world);
    if first.is_err() {
        let mut o = opts(2);
        o.resume = true;
        paf::run(&env, &dir, None, &o).expect("resume");
    }
    let plan = Plan::new(&spec, 4096, 9, 2, TreeShape { maxd: 16, maxb: 64 }).expect("plan");
    assert_eq!(tree(&dir), expected(&plan, &dir));
}

#[test]
fn errors_are_clear() {
    let tmp = tempfile::tempdir().expect("tmp");
    let world = World::single();
    let env = RunEnv::quiet(Arc::new(PosixFs::new()), &world);
    let spec = PafSpec::parse(SPEC).expect("spec");
    let missing = tmp.path().join("nope");
    let e = paf::run(&env, &missing, Some(&spec), &opts(1)).expect_err("missing");
    assert_eq!(
        e.to_string(),
        format!("directory {} does not exist", missing.display())
    );
    let nosize = PafSpec::parse("PAF:10.00").expect("label");
    let e = paf::run(&env, tmp.path(), Some(&nosize), &opts(1)).expect_err("no size");
    assert!(e.to_string().contains("@SIZE"), "{e}");
    assert!(!tmp.path().join("paf").exists());
}
