//! `nacre bench checks` and `nacre bench recovery` end to end with tiny sizes: every case
//! runs and the tables have a rate and a ratio for each. Correctness tests of the
//! programs; their figures mean nothing at this size.

use crate::common;

/// The fields of the table line for `case` and `op`: on, off, ratio (and the verdict).
fn row<'a>(out: &'a str, case: &str, op: &str) -> Vec<&'a str> {
    let line = out
        .lines()
        .find(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() >= 5 && f[0] == case && f[1] == op
        })
        .unwrap_or_else(|| panic!("no row for {case} {op}:\n{out}"));
    line.split_whitespace().skip(2).collect()
}

fn positive(v: &str, what: &str) -> f64 {
    let x: f64 = v
        .trim_end_matches('x')
        .parse()
        .unwrap_or_else(|_| panic!("{what}: {v:?} is not a number"));
    assert!(x > 0.0, "{what}: {x}");
    x
}

/// Runs `nacre bench NAME ARGS... --reps 1 --workdir W --json J` with tiny sizes in `tmp`;
/// returns its table and its JSON cells. Fails the test if the bench fails.
fn bench(tmp: &std::path::Path, name: &str, args: &[&str]) -> (String, Vec<serde_json::Value>) {
    let json = tmp.join(format!("{name}.json"));
    let work = tmp.join("w").to_string_lossy().into_owned();
    let json_arg = json.to_string_lossy().into_owned();
    let mut all = vec![
        "bench",
        name,
        "--reps",
        "1",
        "--workdir",
        &work,
        "--json",
        &json_arg,
    ];
    all.extend_from_slice(args);
    let out = common::run(&all);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parse");
    (stdout, v.as_array().cloned().expect("an array"))
}

#[test]
fn permission_checks_are_measured_for_root_and_nobody() {
    if !common::require_fuse() || !common::require_root() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let (stdout, cells) = bench(
        tmp.path(),
        "checks",
        &["--files", "60", "--tasks", "2", "--warmup", "20"],
    );
    for user in ["root", "nobody"] {
        for op in ["create", "stat", "remove"] {
            let r = row(&stdout, user, op);
            positive(r[0], &format!("{user} {op} checks on"));
            positive(r[1], &format!("{user} {op} checks off"));
            positive(r[2], &format!("{user} {op} ratio"));
        }
    }
    // 2 users x 2 settings x 3 phases.
    assert_eq!(cells.len(), 12);
}

#[test]
fn recovery_costs_are_measured() {
    if !common::require_fuse() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let (stdout, c) = bench(
        tmp.path(),
        "recovery",
        &[
            "--files",
            "60",
            "--tasks",
            "2",
            "--warmup",
            "20",
            "--ior-size",
            "4m",
            "--sync-files",
            "20",
        ],
    );
    for (case, op) in [
        ("mdtest", "create"),
        ("mdtest", "stat"),
        ("mdtest", "remove"),
        ("ior", "write"),
        ("ior", "read"),
        ("fsync", "files"),
        ("fsync", "dom"),
    ] {
        let r = row(&stdout, case, op);
        positive(r[0], &format!("{case} {op} on"));
        positive(r[1], &format!("{case} {op} off"));
        positive(r[2], &format!("{case} {op} ratio"));
    }
    // mdtest 3 + IOR 2, tracking on and off; the fsync workload on nacre (plain and
    // DoM) and locally (standing against both).
    assert_eq!(c.len(), 14, "{c:?}");
    // The local side of the fsync comparison ran beside the targets, and is gone.
    assert!(!tmp.path().join("w").join("local").exists());
}

/// `mdc.*.replay_tracking`, the switch `bench recovery` compares: on (the default), an
/// acknowledged create stays in the client's replay list until committed; off, nothing is
/// kept; out of bounds, refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_tracking_off_keeps_nothing_for_replay() {
    use common::cluster::{FILE, create, mount, start};
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "rtrack", 1, 1).await;
    let c = mount(&cluster).await;
    assert_eq!(c.tunables.get("mdc", "replay_tracking"), Some(1));
    let rep = c.mdc_replay(0).expect("mdc 0");
    create(&c, c.root(), b"tracked", FILE)
        .await
        .expect("create");
    assert!(rep.kept() > 0, "a tracked create is kept for replay");
    c.tunables
        .set("mdc", "replay_tracking", 0)
        .expect("replay_tracking=0");
    let kept = rep.kept();
    for i in 0..5 {
        create(&c, c.root(), format!("untracked{i}").as_bytes(), FILE)
            .await
            .expect("create");
    }
    assert!(
        rep.kept() <= kept,
        "untracked creates were kept: {} > {kept}",
        rep.kept()
    );
    assert!(c.tunables.set("mdc", "replay_tracking", 2).is_err());
    cluster.stop().await;
}
