//! `nacre bench lfsck` end to end with tiny numbers: every case it was asked for is in its
//! table and its JSON, every run checked every object of the aged file system, and every
//! rate is a rate. A correctness test, not a timed one.

use crate::common;

use common::*;
use std::path::Path;
use std::process::Command;

const FILES: u64 = 2000;

/// Installs the darshan package the way a machine gets it (the bench ages from a Darshan
/// log), and fails if it cannot.
fn require_darshan() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let st = Command::new("bash")
        .arg(repo.join("scripts/install-deps.sh"))
        .arg("--darshan")
        .status()
        .expect("run scripts/install-deps.sh --darshan");
    assert!(st.success(), "scripts/install-deps.sh --darshan failed");
}

#[test]
fn bench_lfsck_reports_every_case_with_rates() {
    require_darshan();
    let tmp = tempfile::tempdir().expect("tmp");
    let json = tmp.path().join("lfsck.json");
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).expect("workdir");
    let out = ok(&[
        "bench",
        "lfsck",
        "--files",
        &FILES.to_string(),
        "--osts",
        "1,2",
        "--max-size",
        "4k",
        "--workdir",
        &work.to_string_lossy(),
        "--json",
        &json.to_string_lossy(),
    ]);
    let rep: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parse");
    let aging = rep["aging"].as_array().expect("aging");
    assert_eq!(aging.len(), 2, "{rep}");
    for g in aging {
        assert_eq!(g["files"], FILES, "{g}");
    }
    let runs = rep["runs"].as_array().expect("runs");
    assert_eq!(
        runs.len(),
        2 * 3 * 2,
        "2 OST counts x 3 components x 2 modes"
    );
    for osts in [1u64, 2] {
        let dirs = aging
            .iter()
            .find(|g| g["osts"] == osts)
            .and_then(|g| g["dirs"].as_u64())
            .expect("dirs");
        for comp in ["namespace", "layout", "both"] {
            for mode in ["decoupled", "coupled"] {
                let r = runs
                    .iter()
                    .find(|r| r["osts"] == osts && r["component"] == comp && r["mode"] == mode)
                    .unwrap_or_else(|| panic!("no run {osts} {comp} {mode}"));
                // Every file, its directories (and their parents), the root: at least
                // files + directories holding files.
                let objects = r["objects"].as_u64().expect("objects");
                assert!(objects >= FILES + dirs, "{r}");
                assert!(r["objects_per_sec"].as_f64().expect("rate") > 0.0, "{r}");
                for (c, on) in [
                    ("namespace", comp != "layout"),
                    ("layout", comp != "namespace"),
                ] {
                    assert_eq!(r[c].is_object(), on, "{c} in {r}");
                    if on {
                        assert!(r[c]["rate_phase1"].as_f64().expect("p1") > 0.0, "{r}");
                    }
                }
                let targets = r["targets"].as_array().expect("targets");
                assert_eq!(targets.len() as u64, 1 + osts, "{r}");
                // The layout check asks every OST about its objects.
                if comp != "namespace" {
                    for t in targets
                        .iter()
                        .filter(|t| t["target"].as_str().is_some_and(|n| n.starts_with("OST")))
                    {
                        assert!(t["requests"].as_u64().expect("requests") > 0, "{t}");
                    }
                }
                // The table has the row.
                assert!(
                    out.lines().any(|l| {
                        let w: Vec<&str> = l.split_whitespace().collect();
                        w.len() >= 6
                            && w[0] == osts.to_string()
                            && w[1] == comp
                            && w[2] == mode
                            && w[5].parse::<f64>().is_ok_and(|x| x > 0.0)
                    }),
                    "no table row {osts} {comp} {mode}:\n{out}"
                );
            }
        }
    }
    // The file systems it made are gone.
    assert_eq!(std::fs::read_dir(&work).expect("workdir").count(), 0);
}
