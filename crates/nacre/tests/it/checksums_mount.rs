//! Checksums through a real FUSE mount of `nacre up`: Lustre's `osc.*.checksums` and
//! `checksum_type`, bit flips in object files read as EIO (never as wrong bytes) after a
//! restart, scrub found through `lctl`, and fsx's operation mix leaving no checksum that
//! disagrees with its data.

use crate::common;

use common::{UpFs, lfs, lfsck_run, ok, require_fuse, run, sh};
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// Every value `lctl get_param -n PATTERN` prints, one per matching parameter.
fn values(pattern: &str) -> Vec<String> {
    ok(&["lctl", "get_param", "-n", pattern])
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

fn sum(pattern: &str) -> u64 {
    values(pattern)
        .iter()
        .map(|v| v.parse::<u64>().expect("a count"))
        .sum()
}

/// Starts a scrub pass on every OST at full speed and waits for all of them.
fn scrub_now() {
    let passes = || -> Vec<u64> {
        ok(&["lctl", "get_param", "-n", "obdfilter.*.scrub_status"])
            .lines()
            .filter_map(|l| l.strip_prefix("success_count: "))
            .map(|v| v.trim().parse().expect("count"))
            .collect()
    };
    let before = passes();
    ok(&["lctl", "set_param", "obdfilter.*.scrub_rate_mb=0"]);
    ok(&["lctl", "set_param", "obdfilter.*.scrub_start=1"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = passes();
        if now.len() == before.len() && now.iter().zip(&before).all(|(a, b)| a > b) {
            return;
        }
        assert!(Instant::now() < deadline, "scrub did not finish: {now:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn flipped_bits_read_as_eio_through_the_mount_and_lctl_shows_them() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    // Lustre's client tunables, on by default.
    assert!(values("osc.*.checksums").iter().all(|v| v == "1"));
    assert!(!values("osc.*.checksums").is_empty());
    assert!(
        values("osc.*.checksum_type")
            .iter()
            .all(|v| v == "[crc32c]")
    );
    assert!(
        values("obdfilter.*.checksum_type")
            .iter()
            .all(|v| v == "[crc32c]")
    );
    ok(&["lctl", "set_param", "osc.*.checksum_type=crc32c"]);

    std::fs::create_dir(fs.path("wide")).expect("mkdir");
    lfs(&[
        "setstripe",
        "-c",
        "-1",
        "-S",
        "64K",
        fs.path("wide").to_str().expect("utf8"),
    ]);
    let mut rng = rand::rngs::StdRng::seed_from_u64(21);
    let mut files = HashMap::new();
    for i in 0..24 {
        let name = if i % 2 == 0 {
            format!("f{i}")
        } else {
            format!("wide/f{i}")
        };
        let len = rng.gen_range(1..2_000_000);
        let data: Vec<u8> = (0..len).map(|_| rng.r#gen()).collect();
        std::fs::write(fs.path(&name), &data).expect("write");
        files.insert(name, data);
    }
    // Flip bits with the file system down, in a few objects of every OST.
    fs.down();
    let mut hit: HashMap<String, String> = HashMap::new();
    let mut flips = Vec::new();
    for i in 0..4 {
        let dir = fs.dir.join(format!("ost{i}"));
        let health = nacre_osd::Health::open(format!("ost{i}"), &dir).expect("health");
        let store = nacre_osd::ObjStore::open(&dir, nacre_osd::ObjStoreConfig::default(), health)
            .expect("store");
        for f in nacre_osd::inject::flip_random(&dir, 3, &mut rng).expect("flip") {
            let p = store.filter_fid(&f.obj).expect("fid").expect("written");
            let file = nacre_core::Fid::new(p.seq, p.oid, 0);
            hit.insert(file.to_string(), f.obj.to_string());
            flips.push((f, file));
        }
    }
    fs.up_again();
    assert_eq!(sum("obdfilter.*.checksum_errors"), 0);
    // Every file a flip hit is EIO; every other reads back exactly.
    let mut eio = 0;
    for (name, data) in &files {
        let fid = lfs(&["path2fid", fs.path(name).to_str().expect("utf8")]);
        match std::fs::read(fs.path(name)) {
            Ok(got) => {
                assert!(
                    !hit.contains_key(fid.trim()),
                    "{name}: read back despite a flipped bit"
                );
                assert!(got == *data, "{name}: contents differ");
            }
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EIO), "{name}: {e}");
                assert!(
                    hit.contains_key(fid.trim()),
                    "{name}: EIO with nothing flipped"
                );
                eio += 1;
            }
        }
    }
    assert_eq!(eio, hit.len());
    assert!(sum("obdfilter.*.checksum_errors") >= hit.len() as u64);
    assert!(sum("osc.*.corrupt_reads") >= hit.len() as u64);
    assert_eq!(sum("osc.*.checksum_errors"), 0, "no transfer was damaged");

    // Scrub finds every flip and names the file by path.
    scrub_now();
    let status = ok(&["lctl", "get_param", "obdfilter.*.scrub_status"]);
    let failed: u64 = status
        .lines()
        .filter_map(|l| l.trim().strip_prefix("failed: "))
        .map(|v| v.parse::<u64>().expect("count"))
        .sum();
    assert_eq!(failed, flips.len() as u64, "{status}");
    let report = ok(&["lctl", "get_param", "-n", "obdfilter.*.scrub_bad_blocks"]);
    for (f, file) in &flips {
        let path = ok(&[
            "lfs",
            "fid2path",
            fs.mnt.to_str().expect("utf8"),
            &file.to_string(),
        ]);
        let rel = path
            .trim()
            .strip_prefix(fs.mnt.to_str().expect("utf8"))
            .expect("a path under the mount")
            .to_string();
        let line = format!(
            "object {} file {file} path {rel} offset {}:",
            f.obj,
            f.offset & !4095
        );
        assert!(report.contains(&line), "{line}\nnot in:\n{report}");
    }

    // Off, as in Lustre; nothing else changes for the files that were good.
    ok(&["lctl", "set_param", "osc.*.checksums=0"]);
    assert!(values("osc.*.checksums").iter().all(|v| v == "0"));
    fs.down();
}

/// fsx's mix (writes, mapped writes, truncates both ways, hole punches, zero ranges,
/// fallocate, copy_file_range) on a striped composite layout and on Data-on-MDT, with
/// checksums on: no operation ever reads back EIO, and scrub then finds every stored
/// checksum in agreement with its data.
#[test]
fn fsx_leaves_every_checksum_consistent() {
    if !require_fuse() {
        return;
    }
    let fsx = "fsx";
    let found = std::process::Command::new("sh")
        .args(["-c", "command -v fsx"])
        .output()
        .expect("sh");
    assert!(
        found.status.success(),
        "fsx is missing: `cargo install fsx` (scripts/test.sh does) or set NACRE_SKIP_FUSE=1"
    );
    let fs = UpFs::new(&[]);
    let work = tempfile::tempdir().expect("tmp");
    let config = work.path().join("fsx.toml");
    std::fs::write(
        &config,
        "flen = 1048576\n[opsize]\nmin = 1\nmax = 65536\n[weights]\nclose_open = 1\nread = 10\n\
         write = 10\nmapread = 5\nmapwrite = 5\ninvalidate = 1\ntruncate = 5\nfsync = 1\n\
         fdatasync = 1\nposix_fallocate = 2\npunch_hole = 3\nsendfile = 1\n\
         copy_file_range = 2\n",
    )
    .expect("config");
    let layouts: [(&str, &[&str]); 2] = [
        (
            "pfl",
            &[
                "-E", "128K", "-c", "1", "-S", "64K", "-E", "-1", "-c", "-1", "-S", "64K",
            ],
        ),
        (
            "dom",
            &["-E", "64K", "-L", "mdt", "-E", "-1", "-c", "2", "-S", "64K"],
        ),
    ];
    for (i, (name, opts)) in layouts.iter().enumerate() {
        let dir = fs.path(name);
        std::fs::create_dir(&dir).expect("mkdir");
        let mut args = vec!["setstripe"];
        args.extend_from_slice(opts);
        args.push(dir.to_str().expect("utf8"));
        lfs(&args);
        let out = sh(
            &format!(
                "{fsx} -f {} -N 8000 -S {} -P {} {}/fsx.{name} 2>&1",
                config.display(),
                20240601 + i,
                work.path().display(),
                dir.display()
            ),
            Path::new("/"),
        );
        assert!(
            out.contains("All operations completed A-OK"),
            "fsx on {name}:\n{out}"
        );
    }
    assert_eq!(sum("obdfilter.*.checksum_errors"), 0);
    assert_eq!(sum("mdt.*.dom_checksum_errors"), 0);
    scrub_now();
    let status = ok(&["lctl", "get_param", "obdfilter.*.scrub_status"]);
    assert!(
        status
            .lines()
            .filter_map(|l| l.trim().strip_prefix("failed: "))
            .all(|v| v == "0"),
        "{status}"
    );
    assert!(
        status
            .lines()
            .filter_map(|l| l.trim().strip_prefix("checked_bytes: "))
            .any(|v| v != "0"),
        "scrub checked nothing:\n{status}"
    );
    fs.down();
}

/// The OST objects of a file, from `lfs getstripe -y`: (OST index, object FID).
fn objects(path: &Path) -> Vec<(u32, nacre_core::Fid)> {
    let y = lfs(&["getstripe", "-y", path.to_str().expect("utf8")]);
    let mut out = Vec::new();
    let mut idx = None;
    for l in y.lines().map(str::trim) {
        if let Some(v) = l.strip_prefix("- l_ost_idx: ") {
            idx = Some(v.parse().expect("index"));
        } else if let Some(v) = l.strip_prefix("l_fid:") {
            let fid: nacre_core::Fid = format!("[{}]", v.trim()).parse().expect("fid");
            out.push((idx.take().expect("an index first"), fid));
        }
    }
    out
}

/// OSTs make each object's file when they precreate it, so an object whose file is gone
/// is lost, never a hole: reading the data it held is EIO, not zeros; a mirrored file is
/// read from its other copy; the layout LFSCK counts each lost object as dangling, even
/// one never written, and recreates it with `-c`.
#[test]
fn a_lost_object_is_eio_not_zeros_and_lfsck_finds_it() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    std::fs::create_dir(fs.path("two")).expect("mkdir");
    lfs(&[
        "setstripe",
        "-c",
        "2",
        "-S",
        "64K",
        fs.path("two").to_str().expect("utf8"),
    ]);
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(fs.path("two/big"), &big).expect("write big");
    // Its second stripe is never written.
    std::fs::write(fs.path("two/small"), b"a small file").expect("write small");
    let mirrored = fs.path("mirrored");
    lfs(&[
        "setstripe",
        "-N2",
        "-c",
        "1",
        mirrored.to_str().expect("utf8"),
    ]);
    std::fs::write(&mirrored, &big).expect("write mirrored");
    let lost_big = objects(&fs.path("two/big"))[1];
    let lost_small = objects(&fs.path("two/small"))[1];
    let lost_copy = objects(&mirrored)[0];
    fs.down();
    for (ost, fid) in [lost_big, lost_small, lost_copy] {
        let p = fs
            .dir
            .join(format!("ost{ost}"))
            .join("O")
            .join(format!("{:x}", fid.seq))
            .join(format!("d{}", fid.oid % 32))
            .join(fid.oid.to_string());
        std::fs::remove_file(&p).unwrap_or_else(|e| panic!("rm {}: {e}", p.display()));
    }
    fs.up_again();
    let e = std::fs::read(fs.path("two/big")).expect_err("read of a lost object");
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    assert_eq!(
        std::fs::read(fs.path("two/small")).expect("the small file's data is all there"),
        b"a small file"
    );
    assert!(
        std::fs::read(&mirrored).expect("the other copy") == big,
        "the mirrored file differs"
    );
    let dry = lfsck_run(&["-t", "layout", "-n", "-c"], "layout");
    assert!(dry.contains("inconsistent_dangling: 3\n"), "{dry}");
    lfsck_run(&["-t", "layout", "-c"], "layout");
    let again = lfsck_run(&["-t", "layout", "-c"], "layout");
    assert!(again.contains("repaired_dangling: 0\n"), "{again}");
    // Recreated empty: the lost data reads as the hole it now is; the mirrored file's
    // copy, short against its size, is read from the other mirror, and `verify --stale`
    // then a resync rewrite it.
    let got = std::fs::read(fs.path("two/big")).expect("read after -c");
    assert_eq!(got.len(), big.len());
    assert_eq!(got[..65536], big[..65536]);
    assert!(got[65536..131072].iter().all(|b| *b == 0));
    assert!(
        std::fs::read(&mirrored).expect("read after -c") == big,
        "the mirrored file differs after -c"
    );
    let m = mirrored.to_str().expect("utf8");
    let stale = run(&["lfs", "mirror", "verify", "--stale", m]);
    assert!(!stale.status.success(), "verify found the copies alike");
    lfs(&["mirror", "resync", m]);
    lfs(&["mirror", "verify", m]);
    assert!(std::fs::read(&mirrored).expect("read after the resync") == big);
    fs.down();
}
