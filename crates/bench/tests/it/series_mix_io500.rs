//! Small end-to-end runs of the series, the job mix, IO500 and the side-by-side comparison.

use std::sync::Arc;

use nacre_bench::backend::{FileSystem, PosixFs};
use nacre_bench::compare::{self, CompareOptions, Target};
use nacre_bench::env::RunEnv;
use nacre_bench::io500::{self, Io500Options, Kind};
use nacre_bench::mix::{self, MixOptions};
use nacre_bench::paf::plan::TreeShape;
use nacre_bench::rank::World;
use nacre_bench::series::{self, SeriesOptions};
use nacre_bench::stats::geometric_mean;

fn series_opts() -> SeriesOptions {
    SeriesOptions {
        capacities: vec![10, 20],
        frags: vec![0, 50],
        file_size: 16 * 1024,
        xfers: vec![4096, 16 * 1024],
        block: 64 * 1024,
        iterations: 2,
        tasks: Some(2),
        paf_threads: 2,
        capacity_kb: Some(2048),
        seed: Some(5),
        direct: false,
        shape: TreeShape { maxd: 32, maxb: 64 },
        plot_capacity: None,
    }
}

#[test]
fn series_writes_csv_and_plots_and_resumes() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path();
    let out = dir.join("results");
    let world = World::single();
    let env = RunEnv::quiet(Arc::new(PosixFs::new()), &world);
    let opts = series_opts();
    let r = series::run(&env, dir, &out, &opts, false).expect("series");
    assert_eq!(r.cells_run, 4);
    assert_eq!(r.rows, 4 * 2 * 2, "cells x xfers x iterations");
    let rows = series::read_rows(&out.join(series::RESULTS_CSV)).expect("csv");
    assert_eq!(rows.len(), 16);
    assert!(rows.iter().all(|r| r.write_mib > 0.0 && r.read_mib > 0.0));
    // Capacity reached follows the level and fragmentation (10% of 2 MiB in 16 KiB files).
    let c10 = rows
        .iter()
        .find(|r| r.capacity_pct == 10 && r.frag_pct == 0)
        .expect("cell");
    assert!(
        (c10.capacity_reached_pct - 9.375).abs() < 1e-9,
        "{}",
        c10.capacity_reached_pct
    );
    let c20 = rows
        .iter()
        .find(|r| r.capacity_pct == 20 && r.frag_pct == 50)
        .expect("cell");
    assert!(c20.capacity_reached_pct < 11.0);
    // Aggregates are means over the iterations of the CSV rows.
    let mean = |c: u32, f: u32, x: u64| {
        let v: Vec<f64> = rows
            .iter()
            .filter(|r| r.capacity_pct == c && r.frag_pct == f && r.xfer == x)
            .map(|r| r.write_mib)
            .collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    let s = r
        .stats
        .iter()
        .find(|s| {
            s.capacity_pct == 20
                && s.frag_pct == 50
                && s.xfer == 4096
                && s.operation.name() == "write"
        })
        .expect("stat");
    assert!((s.mean_mib - mean(20, 50, 4096)).abs() < 1e-9);
    for name in [
        "write-vs-capacity",
        "read-vs-capacity",
        "write-vs-fragmentation",
        "read-vs-fragmentation",
        "write-cv-vs-capacity",
        "read-cv-vs-capacity",
        "write-capacity-fragmentation",
        "read-capacity-fragmentation",
    ] {
        let svg = std::fs::read_to_string(out.join(format!("{name}.svg"))).expect("svg");
        assert!(
            svg.len() > 5_000
                && svg.contains("<text")
                && (svg.contains("xfer") || svg.contains("fragmentation")),
            "{name}"
        );
        let png = std::fs::read(out.join(format!("{name}.png"))).expect("png");
        assert!(
            png.starts_with(b"\x89PNG") && png.len() > 10_000,
            "{name}: {} bytes",
            png.len()
        );
    }
    assert!(out.join(series::SUMMARY_CSV).exists());
    assert!(out.join(series::SUMMARY_JSON).exists());
    // The aged trees and IOR files are gone.
    assert!(!dir.join("paf").exists() && !dir.join(series::IOR_DIR).exists());

    // Resuming a finished series runs nothing and keeps the results.
    let r = series::run(&env, dir, &out, &opts, true).expect("resume");
    assert_eq!((r.cells_run, r.cells_skipped, r.rows), (0, 4, 16));
    // Starting over without --resume is refused.
    assert!(series::run(&env, dir, &out, &opts, false).is_err());
}

#[test]
fn the_seed_mix_runs_scaled_down() {
    let tmp = tempfile::tempdir().expect("tmp");
    let world = World::single();
    let env = RunEnv::quiet(Arc::new(PosixFs::new()), &world);
    let jobs = mix::scale(&mix::seed_mix(), 0.0005);
    let r = mix::run(
        &env,
        tmp.path(),
        &jobs,
        &MixOptions {
            keep: false,
            seed: 3,
        },
    )
    .expect("mix")
    .expect("report");
    assert_eq!(r.jobs.len(), 6);
    for (j, res) in jobs.iter().zip(&r.jobs) {
        // Every job moves its whole data set once (zipf reads the same amount, with repeats).
        assert_eq!(res.bytes, j.nrfiles * j.file_size, "{}", j.name);
        assert_eq!(
            res.ops,
            j.nrfiles * j.file_size.div_ceil(j.bs),
            "{}",
            j.name
        );
        assert!(
            res.secs > 0.0
                && (res.mib_per_sec - res.bytes as f64 / 1048576.0 / res.secs).abs() < 1e-6
        );
    }
    assert_eq!(r.total_bytes, r.jobs.iter().map(|j| j.bytes).sum::<u64>());
    assert!(!tmp.path().join("mix").exists(), "cleaned up");
}

#[test]
fn io500_scores_are_geometric_means() {
    let tmp = tempfile::tempdir().expect("tmp");
    let world = World::single();
    let env = RunEnv::quiet(Arc::new(PosixFs::new()), &world);
    let opts = Io500Options {
        tasks: Some(2),
        easy_block: 1 << 20,
        easy_xfer: 256 * 1024,
        hard_segments: 20,
        md_easy_files: 30,
        md_hard_files: 30,
        ..Io500Options::default()
    };
    let r = io500::run(&env, tmp.path(), &opts)
        .expect("io500")
        .expect("report");
    let names: Vec<&str> = r.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "ior-easy-write",
            "mdtest-easy-write",
            "ior-hard-write",
            "mdtest-hard-write",
            "find",
            "ior-easy-read",
            "mdtest-easy-stat",
            "ior-hard-read",
            "mdtest-hard-stat",
            "mdtest-easy-delete",
            "mdtest-hard-read",
            "mdtest-hard-delete"
        ]
    );
    assert!(r.phases.iter().all(|p| p.score > 0.0), "{:?}", r.phases);
    let bw: Vec<f64> = r
        .phases
        .iter()
        .filter(|p| p.kind == Kind::Bandwidth)
        .map(|p| p.score)
        .collect();
    let md: Vec<f64> = r
        .phases
        .iter()
        .filter(|p| p.kind == Kind::Metadata)
        .map(|p| p.score)
        .collect();
    assert_eq!((bw.len(), md.len()), (4, 8));
    assert!((r.bandwidth - geometric_mean(&bw)).abs() < 1e-12);
    assert!((r.iops - geometric_mean(&md)).abs() < 1e-12);
    assert!((r.total - (r.bandwidth * r.iops).sqrt()).abs() < 1e-12);
    // find matched the mdtest-hard files whose names contain "01" (file.mdtest.T.I).
    let find = r.phases.iter().find(|p| p.name == "find").expect("find");
    let expected: usize = (0..2)
        .map(|t| {
            (0..30)
                .filter(|i| format!("file.mdtest.{t}.{i}").contains("01"))
                .count()
        })
        .sum();
    assert_eq!(
        find.detail.as_deref(),
        Some(format!("{expected} of {} files matched", 2 + 2 * 30 + 2 * 30 + 1).as_str())
    );
    assert!(!tmp.path().join("io500").exists(), "cleaned up");
}

#[test]
fn compare_two_directories_with_memory_watch() {
    let a = tempfile::tempdir().expect("tmp");
    let b = tempfile::tempdir().expect("tmp");
    let world = World::single();
    let fs: Arc<dyn FileSystem> = Arc::new(PosixFs::new());
    let env = RunEnv::quiet(fs.clone(), &world);
    let targets = vec![
        Target {
            dir: a.path().to_path_buf(),
            fs: fs.clone(),
        },
        Target {
            dir: b.path().to_path_buf(),
            fs: fs.clone(),
        },
    ];
    let opts = CompareOptions {
        size: 2 << 20,
        tasks: 2,
        files: 50,
        xfer: 1 << 20,
        drop_caches: true,
    };
    let r = compare::run(&env, &targets, &opts, Some(std::process::id()))
        .expect("compare")
        .expect("report");
    assert_eq!(r.dirs.len(), 2);
    for d in &r.dirs {
        assert!(d.write_mib_per_sec > 0.0 && d.read_mib_per_sec > 0.0);
        assert!(d.create_per_sec > 0.0 && d.stat_per_sec > 0.0 && d.remove_per_sec > 0.0);
        // Either the cache was dropped, or the report says the read may be warm.
        assert!(d.read_cold || d.note.as_deref().is_some_and(|n| n.contains("may be warm")));
    }
    let rss = r.rss.as_ref().expect("rss");
    assert!(rss.peak_rss_kib > 0 && rss.samples > 0);
    let mut text = Vec::new();
    compare::print_text(&r, &mut text).expect("print");
    let text = String::from_utf8(text).expect("utf8");
    assert!(text.contains("x)"), "ratios: {text}");
    assert!(text.contains(&format!("peak RSS of pid {}", std::process::id())));
    assert_eq!(
        std::fs::read_dir(a.path()).expect("ls").count(),
        0,
        "cleaned up"
    );
    let missing = a.path().join("missing");
    let e = compare::run(
        &env,
        &[Target {
            dir: missing.clone(),
            fs,
        }],
        &opts,
        None,
    )
    .expect_err("missing");
    assert_eq!(
        e.to_string(),
        format!("directory {} does not exist", missing.display())
    );
}
