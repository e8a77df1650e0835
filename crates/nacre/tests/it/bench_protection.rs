//! `nacre bench protection` end to end with tiny sizes: every case runs (plain, mirrored
//! and 4+2, checksums on and off, a mirrored read with an OST stopped, 4+2 reads with one
//! and two OSTs stopped, the mix, the disk's own writes) and the table has a rate for each. A correctness test of the program; its figures mean nothing
//! at this size.

use crate::common;

/// The rate columns of the table row for `layout` and `checksums`.
fn row<'a>(out: &'a str, layout: &str, checksums: &str) -> Vec<&'a str> {
    let line = out
        .lines()
        .find(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() == 7 && f[0] == layout && f[1] == checksums
        })
        .unwrap_or_else(|| panic!("no row for {layout} {checksums}:\n{out}"));
    line.split_whitespace().skip(2).collect()
}

fn positive(v: &str, what: &str) {
    let x: f64 = v
        .parse()
        .unwrap_or_else(|_| panic!("{what}: {v:?} is not a rate"));
    assert!(x > 0.0, "{what}: {x}");
}

#[test]
fn every_protection_case_is_measured() {
    let tmp = tempfile::tempdir().expect("tmp");
    let json = tmp.path().join("p.json");
    // A --local directory that holds something of its own, which must stay.
    let local = tmp.path().join("local");
    std::fs::create_dir(&local).expect("mkdir local");
    std::fs::write(local.join("keep"), b"mine").expect("write keep");
    let out = common::run(&[
        "bench",
        "protection",
        "--size",
        "8m",
        "--tasks",
        "2",
        "--reps",
        "1",
        "--mix-scale",
        "0.0005",
        "--workdir",
        &tmp.path().join("w").to_string_lossy(),
        "--json",
        &json.to_string_lossy(),
        "--local",
        &local.to_string_lossy(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for cs in ["on", "off"] {
        let p = row(&stdout, "plain", cs);
        let m = row(&stdout, "mirror", cs);
        let e = row(&stdout, "ec", cs);
        for (i, what) in [(0, "write"), (1, "read"), (4, "mix")] {
            positive(p[i], &format!("plain {what} checksums {cs}"));
            positive(m[i], &format!("mirror {what} checksums {cs}"));
            positive(e[i], &format!("4+2 {what} checksums {cs}"));
        }
        assert_eq!(
            (p[2], p[3]),
            ("-", "-"),
            "a plain file has no degraded read"
        );
        positive(m[2], &format!("mirror degraded read checksums {cs}"));
        assert_eq!(m[3], "-", "a mirror has no second OST to lose");
        positive(e[2], &format!("4+2 read, 1 OST down, checksums {cs}"));
        positive(e[3], &format!("4+2 read, 2 OSTs down, checksums {cs}"));
    }
    assert!(
        stdout.contains("mirrored/plain write, checksums on: ")
            && stdout.contains("mirrored degraded/healthy read, checksums off: ")
            && stdout.contains("degraded 4+2 read / healthy, 2 OSTs stopped, checksums on: ")
            && stdout.contains("the disk itself, every byte twice / once: "),
        "{stdout}"
    );
    let cells: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parse");
    // 2 settings x (plain: write, read, mix + mirror: write, read, degraded, mix + 4+2:
    // write, read, 2 degraded, mix), and the disk's own writes, once and twice the bytes.
    assert_eq!(cells.as_array().map(Vec::len), Some(26), "{cells}");
    let disk = cells
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["layout"] == "disk" && c["mib_s"].as_f64().is_some_and(|r| r > 0.0))
        .count();
    assert_eq!(disk, 2, "{cells}");
    let left: Vec<String> = std::fs::read_dir(&local)
        .expect("local")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["keep"], "the disk runs leave --local as it was");
    assert_eq!(std::fs::read(local.join("keep")).expect("keep"), b"mine");
}

/// SIGTERM (a `kill`, a batch system's time limit) in the middle of a run stops it at a
/// clean point: the FUSE mount, the servers and the work directory it made are gone
/// when the process exits, as after Ctrl-C. (It used to go on to the end of the run.)
#[test]
fn sigterm_takes_down_what_the_bench_brought_up() {
    use std::time::{Duration, Instant};
    if !common::require_fuse() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let mut child = std::process::Command::new(common::nacre())
        .args(["bench", "protection", "--size", "2g", "--reps", "3"])
        .env("TMPDIR", tmp.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn nacre bench protection");
    // Wait until its file system is mounted under the work directory.
    let start = Instant::now();
    let mnt = loop {
        let made = std::fs::read_dir(tmp.path())
            .expect("tmp")
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("mnt"))
            .find(|m| common::is_mounted(m));
        if let Some(m) = made {
            break m;
        }
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "the bench ended before it mounted"
        );
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no mount after 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    // Should the bench leave its mount behind, the test still takes it down.
    let _unmount = LazyUnmount(mnt.clone());
    // Let it get into its first write phase.
    std::thread::sleep(Duration::from_secs(2));
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "still running 120 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    eprintln!("exit {status:?} after SIGTERM:\n{err}");
    assert!(
        !common::is_mounted(&mnt),
        "{} is still mounted",
        mnt.display()
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .expect("tmp")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Detaches a FUSE mount left behind, so a failing test leaves nothing mounted.
struct LazyUnmount(std::path::PathBuf);

impl Drop for LazyUnmount {
    fn drop(&mut self) {
        if common::is_mounted(&self.0) {
            let _ = std::process::Command::new("fusermount3")
                .arg("-uz")
                .arg(&self.0)
                .status();
        }
    }
}
