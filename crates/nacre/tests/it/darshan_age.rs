//! `nacre darshan-age` on a real mount with a real Darshan log: the tree, every file's size
//! and the seed's stripe layout, checked on the mount.

use crate::common;

use common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python() -> String {
    std::env::var("NACRE_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Installs the darshan package the way a machine gets it, and fails if it cannot.
fn require_darshan() {
    let st = Command::new("bash")
        .arg(repo().join("scripts/install-deps.sh"))
        .arg("--darshan")
        .status()
        .expect("run scripts/install-deps.sh --darshan");
    assert!(st.success(), "scripts/install-deps.sh --darshan failed");
    let st = Command::new(python())
        .args(["-c", "import darshan"])
        .status()
        .expect("run python");
    assert!(
        st.success(),
        "the darshan package does not import after install-deps"
    );
}

/// The records of `log` as the shipped helper prints them, in order: (size at open, written).
fn records(log: &str) -> Vec<(u64, u64)> {
    let o = Command::new(python())
        .arg(repo().join("crates/bench/python/darshan_records.py"))
        .arg(log)
        .output()
        .expect("run the helper");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .skip(1)
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("json line");
            (
                v["size_at_open"].as_u64().expect("size_at_open"),
                v["bytes_written"].as_u64().expect("bytes_written"),
            )
        })
        .collect()
}

/// Every file below `root`: path below it -> size; and every directory holding files.
fn walk(root: &Path) -> (BTreeMap<PathBuf, u64>, BTreeMap<PathBuf, usize>) {
    let mut files = BTreeMap::new();
    let mut dirs = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let mut n = 0;
        for e in std::fs::read_dir(&d).expect("readdir") {
            let e = e.expect("entry");
            let md = e.metadata().expect("stat");
            if md.is_dir() {
                stack.push(e.path());
            } else {
                files.insert(
                    e.path().strip_prefix(root).expect("below").to_path_buf(),
                    md.len(),
                );
                n += 1;
            }
        }
        if n > 0 {
            dirs.insert(d.strip_prefix(root).expect("below").to_path_buf(), n);
        }
    }
    (files, dirs)
}

#[test]
fn darshan_age_builds_the_logs_tree_with_the_seeds_layout() {
    if !require_fuse() {
        return;
    }
    require_darshan();
    // dxt.darshan: a real job's log with 214 files, most small, some of hundreds of KiB.
    let log = ok(&["darshan-age", "sample:dxt.darshan", "--plan", "--json"]);
    let plan: serde_json::Value = serde_json::from_str(&log).expect("plan json");
    let log_path = plan["logs"][0]["log"]
        .as_str()
        .expect("log path")
        .to_string();
    let recs = records(&log_path);
    assert_eq!(recs.len(), 214, "dxt.darshan's POSIX files");
    // A cap of 256 KiB so that this small log has files above it.
    let cap: u64 = 256 << 10;
    let scale = 2u64;
    assert!(recs.iter().any(|&(a, w)| a + w > cap));

    let fs = UpFs::new(&["--osts", "2"]);
    let m = fs.mnt.to_str().expect("utf8").to_string();
    std::fs::create_dir(fs.path("a")).expect("mkdir");
    std::fs::create_dir(fs.path("b")).expect("mkdir");
    let age = |target: &str| {
        ok(&[
            "darshan-age",
            &log_path,
            "--target",
            &format!("{m}/{target}"),
            "--scale",
            &scale.to_string(),
            "--max-size",
            "256k",
            "--seed",
            "7",
            "--json",
        ])
    };
    let out: serde_json::Value = serde_json::from_str(&age("a")).expect("report json");
    let files_want = recs.len() as u64 * scale;
    assert_eq!(out["files_made"], files_want, "{out}");
    assert_eq!(out["layout"], "-c -1 -S 1M", "{out}");

    // Every file is there, with its record's size at open plus bytes written, capped.
    let root = fs.path("a/darshan");
    let (files, dirs) = walk(&root);
    assert_eq!(files.len() as u64, files_want);
    let mut capped = 0;
    let mut bytes = 0;
    for (path, size) in &files {
        let name = path.file_name().and_then(|n| n.to_str()).expect("name");
        let i: usize = name
            .strip_prefix('f')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("file name {name}"));
        let (at_open, written) = recs[i % recs.len()];
        assert_eq!(*size, (at_open + written).min(cap), "{}", path.display());
        capped += u64::from(at_open + written > cap);
        bytes += size;
    }
    assert!(capped > 0, "files above the cap were made the cap");
    assert_eq!(out["bytes_made"], bytes);
    assert_eq!(out["population"]["capped_files"], capped);

    // Directories: depth 1-10 below the tree root, 1-100 files each, each its own leaf.
    assert_eq!(out["dirs_made"], dirs.len() as u64);
    for (d, n) in &dirs {
        let depth = d.components().count();
        assert!(
            (1..=10).contains(&depth),
            "{} at depth {depth}",
            d.display()
        );
        assert!((1..=100).contains(n), "{} holds {n}", d.display());
        let leaf = d.file_name().and_then(|n| n.to_str()).expect("leaf");
        assert!(leaf.starts_with('d'), "{}", d.display());
    }

    // The seed's layout: the tree's default is every OST in 1 MiB stripes, and the files
    // deep below it have it.
    let root_s = root.to_str().expect("utf8");
    let d = ok(&["lfs", "getstripe", "-d", root_s]);
    assert!(d.contains("stripe_count:  -1"), "{d}");
    assert!(d.contains("stripe_size:   1048576"), "{d}");
    let (deepest, _) = files
        .iter()
        .max_by_key(|(p, _)| p.components().count())
        .expect("a file");
    let f = root.join(deepest);
    let f = f.to_str().expect("utf8");
    assert_eq!(ok(&["lfs", "getstripe", "-c", f]).trim(), "2", "{f}");
    assert_eq!(ok(&["lfs", "getstripe", "-S", f]).trim(), "1048576", "{f}");

    // The same seed makes the same tree.
    age("b");
    let (again, _) = walk(&fs.path("b/darshan"));
    assert_eq!(again, files);
    // A second run into the same directory is refused and changes nothing.
    let err = fail(&[
        "darshan-age",
        &log_path,
        "--target",
        &format!("{m}/a"),
        "--seed",
        "7",
    ]);
    assert!(err.contains("already exists"), "{err}");
    fs.down();
}

#[test]
fn darshan_age_other_layouts_and_a_missing_log() {
    if !require_fuse() {
        return;
    }
    require_darshan();
    let fs = UpFs::new(&["--osts", "2"]);
    let m = fs.mnt.to_str().expect("utf8").to_string();
    let run_age = |target: &str, extra: &[&str]| {
        std::fs::create_dir(fs.path(target)).expect("mkdir");
        let t = format!("{m}/{target}");
        let mut args = vec![
            "darshan-age",
            "sample:sample-dxt-simple.darshan",
            "--target",
            &t,
        ];
        args.extend_from_slice(extra);
        ok(&args);
        fs.path(target).join("darshan")
    };
    let one = run_age("one", &["--stripe-count", "1", "--stripe-size", "4M"]);
    let d = ok(&["lfs", "getstripe", "-d", one.to_str().expect("utf8")]);
    assert!(d.contains("stripe_count:  1"), "{d}");
    assert!(d.contains("stripe_size:   4194304"), "{d}");
    let own = run_age("own", &["--layout", "none"]);
    let d = ok(&["lfs", "getstripe", "-d", own.to_str().expect("utf8")]);
    assert!(!d.contains("stripe_count:  -1"), "{d}");
    let (files, _) = walk(&own);
    assert_eq!(files.len(), 18, "sample-dxt-simple.darshan's POSIX files");

    let err = fail(&["darshan-age", "/nonexistent.darshan", "--plan"]);
    assert!(err.contains("no such file"), "{err}");
    fs.down();
}
