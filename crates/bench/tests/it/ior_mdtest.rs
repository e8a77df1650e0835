//! Tiny IOR and mdtest runs on a temporary directory: the summaries must agree with the
//! numbers each run measured.

use std::sync::Arc;

use nacre_bench::backend::PosixFs;
use nacre_bench::env::RunEnv;
use nacre_bench::ior::{self, IorConfig};
use nacre_bench::mdtest::{self, MdtestConfig};
use nacre_bench::rank::World;
use nacre_bench::stats::{Deviation, Summary};
use serde_json::Value;

const MIB: f64 = 1048576.0;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn ior_summary_is_computed_from_the_measured_iterations() {
    let tmp = tempfile::tempdir().expect("tmp");
    let world = World::single();
    let env = RunEnv::quiet(Arc::new(PosixFs::new()), &world);
    let cfg = IorConfig {
        test_file: tmp.path().join("ior"),
        file_per_proc: true,
        xfer: 64 * 1024,
        block: 1 << 20,
        segments: 2,
        reps: 3,
        fsync: true,
        tasks: Some(2),
        ..IorConfig::default()
    };
    let report = ior::run(&env, &cfg).expect("run").expect("rank 0 report");
    let json: Value =
        serde_json::from_str(&serde_json::to_string(&report).expect("json")).expect("parse");

    let results = json["Results"].as_array().expect("Results");
    assert_eq!(results.len(), 6, "write and read for 3 iterations");
    let mut bw = std::collections::HashMap::<String, Vec<f64>>::new();
    for r in results {
        let bytes = r["bytes"].as_f64().expect("bytes");
        let total = r["totalTime"].as_f64().expect("totalTime");
        let bwmib = r["bwMiB"].as_f64().expect("bwMiB");
        assert_eq!(bytes, 2.0 * 2.0 * MIB, "2 tasks x 2 segments x 1 MiB");
        assert!(total > 0.0);
        assert!(close(bwmib, bytes / total / MIB), "bw = bytes / time");
        assert!(r["openTime"].as_f64().expect("open") <= total);
        assert!(r["wrRdTime"].as_f64().expect("wrrd") <= total);
        bw.entry(r["access"].as_str().expect("access").to_string())
            .or_default()
            .push(bwmib);
    }
    let summary = json["summary"].as_array().expect("summary");
    assert_eq!(summary.len(), 2);
    for s in summary {
        let op = s["operation"].as_str().expect("op");
        let vals = &bw[op];
        let expect = Summary::of(vals, Deviation::Population);
        assert!(close(s["bwMaxMIB"].as_f64().expect("max"), expect.max));
        assert!(close(s["bwMinMIB"].as_f64().expect("min"), expect.min));
        assert!(close(s["bwMeanMIB"].as_f64().expect("mean"), expect.mean));
        assert!(close(s["bwStdMIB"].as_f64().expect("sd"), expect.stddev));
        // OPs = bandwidth / transfer size.
        assert!(close(
            s["OPsMax"].as_f64().expect("ops"),
            expect.max * MIB / (64.0 * 1024.0)
        ));
        assert_eq!(s["numTasks"].as_u64(), Some(2));
        assert_eq!(s["filePerProc"].as_bool(), Some(true));
    }

    // The text report carries the same numbers in IOR's columns.
    let mut text = Vec::new();
    ior::print_text(&report, &mut text).expect("print");
    let text = String::from_utf8(text).expect("utf8");
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("nacre bench ior ")
            && first.ends_with(": IOR-4.0.0 options and report format (not IOR itself)"),
        "{first}"
    );
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == "Summary of all tests:")
        .expect("summary");
    assert_eq!(lines[at + 1], ior::summary_header());
    let write_row = lines[at + 2];
    assert!(write_row.starts_with("write "));
    let cols: Vec<&str> = write_row.split_whitespace().collect();
    assert_eq!(cols.len(), 27, "{write_row}");
    let max: f64 = cols[1].parse().expect("max");
    assert!((max - report.summary[0].bw_max_mib).abs() < 0.006);
    assert_eq!(cols[13], "2", "#Tasks");
    assert_eq!(cols[16], "1", "fPP");
    assert_eq!(cols[21], "2", "segcnt");
    assert_eq!(cols[22], "1048576", "blksiz");
    assert_eq!(cols[23], "65536", "xsize");
    assert_eq!(cols[24], "4.0", "aggs(MiB)");
    assert!(text.contains("Max Write: "));
    // Files are removed without -k.
    assert_eq!(std::fs::read_dir(tmp.path()).expect("ls").count(), 0);
}

#[test]
fn ior_shared_file_random_and_reordered_reads() {
    let tmp = tempfile::tempdir().expect("tmp");
    let world = World::single();
    let env = RunEnv::quiet(Arc::new(PosixFs::new()), &world);
    let cfg = IorConfig {
        test_file: tmp.path().join("shared"),
        xfer: 16 * 1024,
        block: 64 * 1024,
        segments: 3,
        random_offset: 1,
        keep: true,
        tasks: Some(3),
        ..IorConfig::default()
    };
    let r = ior::run(&env, &cfg).expect("run").expect("report");
    assert_eq!(r.results.len(), 2);
    let len = std::fs::metadata(tmp.path().join("shared"))
        .expect("kept")
        .len();
    assert_eq!(len, 3 * 3 * 64 * 1024, "segments x tasks x block");
    // Reading with -C and -E on the kept file.
    let cfg = IorConfig {
        write: false,
        reorder: true,
        use_existing: true,
        random_offset: 0,
        ..cfg
    };
    let r = ior::run(&env, &cfg).expect("run").expect("report");
    assert_eq!(r.results[0].bytes, 9 * 64 * 1024);
}

#[test]
fn mdtest_rates_and_summary_match_the_measurements() {
    let tmp = tempfile::tempdir().expect("tmp");
    let world = World::single();
    let env = RunEnv::quiet(Arc::new(PosixFs::new()), &world);
    let cfg = MdtestConfig {
        dir: tmp.path().to_path_buf(),
        items: Some(40),
        iterations: 3,
        depth: 1,
        branch: 3,
        unique_dir: true,
        write_bytes: 100,
        read_bytes: 100,
        tasks: Some(2),
        ..MdtestConfig::default()
    };
    let r = mdtest::run(&env, &cfg).expect("run").expect("report");
    assert_eq!(r.dirs_in_tree, 4);
    assert_eq!(r.items_per_task, 40);
    for it in &r.iterations {
        for p in it {
            match p.operation.as_str() {
                "Directory read" => assert_eq!(p.items, 0),
                "Tree creation" | "Tree removal" => {
                    assert_eq!(p.items, 8, "each task's own tree of 4");
                    assert!(close(p.rate, 8.0 / p.time));
                }
                _ => {
                    assert_eq!(p.items, 80, "{}", p.operation);
                    // Both tasks see the same phase time: the slowest rate x 2 = items / time.
                    assert!(
                        close(p.rate, 80.0 / p.time),
                        "{} {} {}",
                        p.operation,
                        p.rate,
                        p.time
                    );
                }
            }
        }
    }
    let names: Vec<&str> = r
        .summary_rate
        .iter()
        .map(|s| s.operation.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "Directory creation",
            "Directory stat",
            "Directory rename",
            "Directory removal",
            "File creation",
            "File stat",
            "File read",
            "File removal",
            "Tree creation",
            "Tree removal"
        ]
    );
    for (i, row) in r.summary_rate.iter().enumerate() {
        let phase = r.iterations[0]
            .iter()
            .position(|p| p.operation == row.operation)
            .expect("phase");
        let vals: Vec<f64> = r.iterations.iter().map(|it| it[phase].rate).collect();
        let s = Summary::of(&vals, Deviation::Sample);
        assert!(close(row.max, s.max) && close(row.min, s.min), "row {i}");
        assert!(
            close(row.mean, s.mean) && close(row.stddev, s.stddev),
            "row {i}"
        );
    }
    let mut text = Vec::new();
    mdtest::print_text(&r, &mut text).expect("print");
    let text = String::from_utf8(text).expect("utf8");
    assert!(text.contains("SUMMARY rate (in ops/sec): (of 3 iterations)"));
    assert!(text.contains("2 tasks, 80 files/directories"));
    assert!(!text.contains("Directory read"));
    // Everything was removed.
    assert_eq!(std::fs::read_dir(tmp.path()).expect("ls").count(), 0);
}

#[test]
fn mdtest_files_only_prints_file_rows() {
    let tmp = tempfile::tempdir().expect("tmp");
    let world = World::single();
    let env = RunEnv::quiet(Arc::new(PosixFs::new()), &world);
    let cfg = MdtestConfig {
        dir: tmp.path().to_path_buf(),
        items_per_dir: Some(5),
        files_only: true,
        ..MdtestConfig::default()
    };
    let r = mdtest::run(&env, &cfg).expect("run").expect("report");
    let names: Vec<&str> = r
        .summary_rate
        .iter()
        .map(|s| s.operation.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "File creation",
            "File stat",
            "File read",
            "File removal",
            "Tree creation",
            "Tree removal"
        ]
    );
    assert!(
        r.summary_rate.iter().all(|s| s.stddev == 0.0),
        "one iteration"
    );
}

#[test]
fn missing_directories_are_reported() {
    let tmp = tempfile::tempdir().expect("tmp");
    let world = World::single();
    let env = RunEnv::quiet(Arc::new(PosixFs::new()), &world);
    let missing = tmp.path().join("absent");
    let e = ior::run(
        &env,
        &IorConfig {
            test_file: missing.join("ior"),
            ..IorConfig::default()
        },
    )
    .expect_err("missing");
    assert_eq!(
        e.to_string(),
        format!("directory {} does not exist", missing.display())
    );
    let e = mdtest::run(
        &env,
        &MdtestConfig {
            dir: missing.clone(),
            items: Some(1),
            ..MdtestConfig::default()
        },
    )
    .expect_err("missing");
    assert_eq!(
        e.to_string(),
        format!("directory {} does not exist", missing.display())
    );
    assert!(!missing.exists());
}

#[test]
fn interrupted_runs_leave_nothing_behind() {
    use nacre_bench::cancel::Cancel;
    use nacre_bench::progress::Progress;
    let tmp = tempfile::tempdir().expect("tmp");
    let world = World::single();
    let cancel = Cancel::new();
    cancel.cancel();
    let env = RunEnv {
        fs: Arc::new(PosixFs::new()),
        world: &world,
        progress: Progress::hidden(),
        cancel,
    };
    let e = ior::run(
        &env,
        &IorConfig {
            test_file: tmp.path().join("ior"),
            file_per_proc: true,
            tasks: Some(2),
            ..IorConfig::default()
        },
    )
    .expect_err("interrupted");
    assert!(e.to_string().starts_with("interrupted"), "{e}");
    let e = mdtest::run(
        &env,
        &MdtestConfig {
            dir: tmp.path().to_path_buf(),
            items: Some(10),
            ..MdtestConfig::default()
        },
    )
    .expect_err("interrupted");
    assert!(e.to_string().starts_with("interrupted"), "{e}");
    assert_eq!(
        std::fs::read_dir(tmp.path()).expect("ls").count(),
        0,
        "nothing left"
    );
}
