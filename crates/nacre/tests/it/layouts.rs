//! Composite layouts, Data-on-MDT and the layout commands, through a real mount.

use crate::common;

use common::*;
use std::io::{Seek, SeekFrom, Write};

/// Compares file contents without printing megabytes on failure.
fn same(path: &std::path::Path, want: &[u8]) {
    let got = std::fs::read(path).expect("read");
    let first_diff = got.iter().zip(want).position(|(a, b)| a != b);
    assert!(
        got.len() == want.len() && first_diff.is_none(),
        "{}: {} bytes read, {} expected, first difference at {:?}",
        path.display(),
        got.len(),
        want.len(),
        first_diff
    );
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| ((i * 7 + i / 4096) as u8) ^ seed)
        .collect()
}

/// Component flags in order, from `getstripe` output.
fn comp_flags(gs: &str) -> Vec<String> {
    gs.lines()
        .filter_map(|l| l.trim().strip_prefix("lcme_flags:"))
        .map(|v| v.trim().to_string())
        .collect()
}

#[test]
fn components_instantiate_as_writes_reach_them_and_io_crosses_them() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&["--osts", "3"]);
    let f = fs.path("pfl");
    let fp = f.to_str().expect("utf8");
    lfs(&[
        "setstripe",
        "-E",
        "1M",
        "-c",
        "1",
        "-E",
        "8M",
        "-c",
        "2",
        "-E",
        "-1",
        "-c",
        "-1",
        fp,
    ]);
    assert_eq!(comp_flags(&lfs(&["getstripe", fp])), vec!["init", "0", "0"]);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(&f)
        .expect("open");
    file.write_all(&[1u8; 100]).expect("write");
    assert_eq!(comp_flags(&lfs(&["getstripe", fp])), vec!["init", "0", "0"]);
    file.seek(SeekFrom::Start(5 << 20)).expect("seek");
    file.write_all(&[2u8; 10]).expect("write");
    assert_eq!(
        comp_flags(&lfs(&["getstripe", fp])),
        vec!["init", "init", "0"]
    );
    drop(file);
    // One write spanning all three components.
    let data = pattern(20 << 20, 5);
    std::fs::write(&f, &data).expect("write across components");
    assert_eq!(
        comp_flags(&lfs(&["getstripe", fp])),
        vec!["init", "init", "init"]
    );
    same(&f, &data);
    let gs = lfs(&["getstripe", fp]);
    assert_eq!(gs.matches("l_ost_idx").count(), 1 + 2 + 3, "{gs}");
    // Truncate into the second component, then extend into the third.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&f)
        .expect("open");
    file.set_len(3 << 20).expect("truncate");
    drop(file);
    let back = std::fs::read(&f).expect("read");
    assert_eq!(back.len(), 3 << 20);
    assert!(back == data[..3 << 20], "contents after truncate");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&f)
        .expect("open");
    file.set_len(30 << 20).expect("extend");
    drop(file);
    let back = std::fs::read(&f).expect("read");
    assert_eq!(back.len(), 30 << 20);
    assert!(back[..3 << 20] == data[..3 << 20], "contents after extend");
    assert!(back[3 << 20..].iter().all(|b| *b == 0));

    // A file whose last component ends before EOF cannot grow past it.
    let g = fs.path("bounded");
    lfs(&[
        "setstripe",
        "-E",
        "1M",
        "-c",
        "1",
        "-E",
        "2M",
        "-c",
        "1",
        g.to_str().expect("utf8"),
    ]);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(&g)
        .expect("open");
    file.seek(SeekFrom::Start((2 << 20) - 1)).expect("seek");
    file.write_all(b"x").expect("last byte");
    let err = file.write_all(b"y").expect_err("past the last component");
    assert_eq!(err.raw_os_error(), Some(libc::EFBIG));
    drop(file);
    // --component-add makes room, --component-del takes it away again.
    lfs(&[
        "setstripe",
        "--component-add",
        "-E",
        "-1",
        "-c",
        "2",
        g.to_str().expect("utf8"),
    ]);
    assert_eq!(
        lfs(&["getstripe", "--component-count", g.to_str().expect("utf8")]).trim(),
        "3"
    );
    std::fs::OpenOptions::new()
        .append(true)
        .open(&g)
        .and_then(|mut f| f.write_all(b"grown"))
        .expect("write after component-add");
    let last_id = lfs(&["getstripe", "-I", g.to_str().expect("utf8")]);
    let err = run(&[
        "lfs",
        "setstripe",
        "--component-del",
        "-I",
        "1",
        g.to_str().expect("utf8"),
    ]);
    assert!(
        !err.status.success(),
        "only the last component may be deleted"
    );
    assert_eq!(
        last_id.trim(),
        "3",
        "the id of the last instantiated component"
    );
    // An added component without -S carries the stripe size before it (4 MiB), halved
    // until it divides the component's end, as a new file's components get it.
    let h = fs.path("carried");
    let h = h.to_str().expect("utf8");
    lfs(&["setstripe", "-E", "4M", "-c", "1", h]);
    lfs(&["setstripe", "--component-add", "-E", "6M", h]);
    assert_eq!(lfs(&["getstripe", "-I2", "-S", h]).trim(), "2097152");
    assert_eq!(lfs(&["getstripe", "-I2", "-c", h]).trim(), "1");
    fs.down();
}

#[test]
fn data_on_mdt_files_and_their_limits() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&["--osts", "2"]);
    let d = fs.path("dom");
    let dp = d.to_str().expect("utf8");
    std::fs::create_dir(&d).expect("mkdir");
    lfs(&[
        "setstripe",
        "-E",
        "1M",
        "-L",
        "mdt",
        "-E",
        "-1",
        "-c",
        "-1",
        dp,
    ]);
    // Small files live on the MDT only: no OST component gets objects.
    for (i, size) in [0usize, 1, 4096, 65536, 1 << 20].iter().enumerate() {
        let p = d.join(format!("small{i}"));
        let data = pattern(*size, i as u8);
        std::fs::write(&p, &data).expect("write");
        same(&p, &data);
        assert_eq!(std::fs::metadata(&p).expect("stat").len(), *size as u64);
        let gs = lfs(&["getstripe", p.to_str().expect("utf8")]);
        assert_eq!(comp_flags(&gs), vec!["init", "0"], "{gs}");
        assert!(gs.contains("lmm_pattern:       mdt"), "{gs}");
        assert!(!gs.contains("l_ost_idx"), "{gs}");
    }
    // Past the DoM component, writes continue on OSTs.
    let big = d.join("big");
    let data = pattern(3 << 20, 9);
    std::fs::write(&big, &data).expect("write");
    same(&big, &data);
    assert_eq!(
        comp_flags(&lfs(&["getstripe", big.to_str().expect("utf8")])),
        vec!["init", "init"]
    );
    // Truncate down into the DoM part, and up again.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&big)
        .expect("open");
    file.set_len(1000).expect("truncate");
    drop(file);
    same(&big, &data[..1000]);
    // Removing DoM files removes their data.
    for i in 0..5 {
        std::fs::remove_file(d.join(format!("small{i}"))).expect("rm");
    }
    // A DoM-only file cannot grow past its component: EFBIG, as in Lustre.
    let only = fs.path("domonly");
    lfs(&[
        "setstripe",
        "-E",
        "128K",
        "-L",
        "mdt",
        only.to_str().expect("utf8"),
    ]);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(&only)
        .expect("open");
    file.write_all(&vec![3u8; 128 << 10]).expect("fill");
    assert_eq!(
        file.write_all(b"z").expect_err("full").raw_os_error(),
        Some(libc::EFBIG)
    );
    drop(file);

    // dom_stripesize cuts larger DoM requests, 0 drops DoM, and DoM-only then fails.
    ok(&["lctl", "set_param", "lod.*.dom_stripesize=256K"]);
    assert_eq!(
        ok(&["lctl", "get_param", "-n", "lod.*.dom_stripesize"]).trim(),
        "262144"
    );
    let cut = fs.path("cut");
    lfs(&[
        "setstripe",
        "-E",
        "1M",
        "-L",
        "mdt",
        "-E",
        "-1",
        cut.to_str().expect("utf8"),
    ]);
    let gs = lfs(&["getstripe", cut.to_str().expect("utf8")]);
    assert!(gs.contains("lcme_extent.e_end:   262144"), "{gs}");
    ok(&["lctl", "set_param", "lod.*.dom_stripesize=0"]);
    let dropped = fs.path("dropped");
    lfs(&[
        "setstripe",
        "-E",
        "1M",
        "-L",
        "mdt",
        "-E",
        "-1",
        dropped.to_str().expect("utf8"),
    ]);
    let gs = lfs(&["getstripe", dropped.to_str().expect("utf8")]);
    assert!(!gs.contains("mdt"), "{gs}");
    let o = run(&[
        "lfs",
        "setstripe",
        "-E",
        "1M",
        "-L",
        "mdt",
        fs.path("nope").to_str().expect("utf8"),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("File too large"));
    assert!(!fs.path("nope").exists());
    ok(&["lctl", "set_param", "lod.*.dom_stripesize=1M"]);
    fs.down();
}

#[test]
fn defaults_are_inherited_and_migrate_keeps_fid_and_bytes() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&["--osts", "3"]);
    let top = fs.path("top");
    std::fs::create_dir(&top).expect("mkdir");
    lfs(&[
        "setstripe",
        "-E",
        "64K",
        "-L",
        "mdt",
        "-E",
        "-1",
        "-c",
        "2",
        top.to_str().expect("utf8"),
    ]);
    std::fs::create_dir(top.join("sub")).expect("mkdir sub");
    std::fs::write(top.join("sub/f"), b"x").expect("write");
    let gs = lfs(&["getstripe", top.join("sub/f").to_str().expect("utf8")]);
    assert!(
        gs.contains("lmm_pattern:       mdt"),
        "subdirectories inherit the default:\n{gs}"
    );
    // The root's default applies to every directory without its own.
    lfs(&["setstripe", "-c", "3", fs.mnt.to_str().expect("utf8")]);
    std::fs::create_dir(fs.path("plain")).expect("mkdir");
    std::fs::write(fs.path("plain/g"), b"y").expect("write");
    assert_eq!(
        lfs(&[
            "getstripe",
            "-c",
            fs.path("plain/g").to_str().expect("utf8")
        ])
        .trim(),
        "3"
    );
    lfs(&["setstripe", "-d", fs.mnt.to_str().expect("utf8")]);

    // Migrate into DoM and back: same FID, same bytes, same attributes.
    let f = fs.path("m");
    let fp = f.to_str().expect("utf8");
    let data = pattern((2 << 20) + 12345, 4);
    std::fs::write(&f, &data).expect("write");
    sh(
        &format!("chmod 640 {fp} && touch -d '2020-01-02 03:04:05' {fp}"),
        &fs.mnt,
    );
    let fid = lfs(&["path2fid", fp]);
    let before = std::fs::metadata(&f).expect("stat");
    lfs(&[
        "migrate", "-E", "1M", "-L", "mdt", "-E", "-1", "-c", "2", fp,
    ]);
    assert!(lfs(&["getstripe", fp]).contains("lmm_pattern:       mdt"));
    assert_eq!(lfs(&["path2fid", fp]), fid);
    same(&f, &data);
    let after = std::fs::metadata(&f).expect("stat");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        (after.mode(), after.mtime(), after.len()),
        (before.mode(), before.mtime(), before.len())
    );
    lfs(&["migrate", "-c", "1", fp]);
    let gs = lfs(&["getstripe", fp]);
    assert!(!gs.contains("mdt"), "{gs}");
    assert_eq!(lfs(&["path2fid", fp]), fid);
    same(&f, &data);
    // A migration refused (invalid layout) leaves the file as it was.
    let o = run(&["lfs", "migrate", "-i", "99", fp]);
    assert!(!o.status.success());
    assert_eq!(lfs(&["getstripe", fp]), gs);
    // A file open for writing is not migrated under the writer.
    let mut w = std::fs::OpenOptions::new()
        .write(true)
        .open(&f)
        .expect("open");
    let o = run(&["lfs", "migrate", "-c", "2", fp]);
    assert!(
        !o.status.success(),
        "migrate must refuse while a writer holds the file"
    );
    w.write_all(b"still mine").expect("write");
    drop(w);
    assert_eq!(lfs(&["getstripe", fp]), gs);

    // lfs find over layouts.
    let found = lfs(&["find", fs.mnt.to_str().expect("utf8"), "-L", "mdt"]);
    assert!(found.lines().any(|l| l.ends_with("/top/sub/f")), "{found}");
    assert!(!found.lines().any(|l| l.ends_with("/m")), "{found}");
    let found = lfs(&[
        "find",
        fs.mnt.to_str().expect("utf8"),
        "-type",
        "f",
        "--size",
        "+1M",
    ]);
    assert_eq!(
        found.lines().filter(|l| l.ends_with("/m")).count(),
        1,
        "{found}"
    );
    fs.down();
}

#[test]
fn getstripe_prints_lustres_composite_format() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&["--osts", "2"]);
    let f = fs.path("fmt");
    let fp = f.to_str().expect("utf8");
    lfs(&[
        "setstripe",
        "-E",
        "1M",
        "-L",
        "mdt",
        "-E",
        "-1",
        "-S",
        "4M",
        "-c",
        "2",
        fp,
    ]);
    std::fs::write(&f, vec![1u8; 2 << 20]).expect("write");
    let gs = lfs(&["getstripe", fp]);
    let objs: Vec<&str> = gs.lines().filter(|l| l.contains("l_ost_idx")).collect();
    assert_eq!(objs.len(), 2, "{gs}");
    let expected_head = format!(
        "{fp}\n  lcm_layout_gen:    1\n  lcm_mirror_count:  1\n  lcm_entry_count:   2\n    lcme_id:             1\n    lcme_mirror_id:      0\n    lcme_flags:          init\n    lcme_extent.e_start: 0\n    lcme_extent.e_end:   1048576\n      lmm_stripe_count:  0\n      lmm_stripe_size:   1048576\n      lmm_pattern:       mdt\n      lmm_layout_gen:    0\n      lmm_mdt_index:     0\n\n    lcme_id:             2\n    lcme_mirror_id:      0\n    lcme_flags:          init\n    lcme_extent.e_start: 1048576\n    lcme_extent.e_end:   EOF\n      lmm_stripe_count:  2\n      lmm_stripe_size:   4194304\n      lmm_pattern:       raid0\n      lmm_layout_gen:    0\n"
    );
    assert!(
        gs.starts_with(&expected_head),
        "got:\n{gs}\nexpected to start with:\n{expected_head}"
    );
    for o in objs {
        let t = o.trim();
        assert!(
            t.starts_with("- ") && t.contains(": { l_ost_idx: ") && t.contains(", l_fid: [0x"),
            "{o}"
        );
    }
    fs.down();
}

#[test]
fn a_stripe_count_over_the_osts_gets_every_ost() {
    if !require_fuse() {
        return;
    }
    // Lustre's MDT adjusts the count rather than refusing it, and `lfs` lets it through.
    let fs = UpFs::new(&["--osts", "4"]);
    let f = fs.path("wide");
    let fp = f.to_str().expect("utf8");
    lfs(&["setstripe", "-c", "16", fp]);
    assert_eq!(lfs(&["getstripe", "-c", fp]).trim(), "4");
    let d = fs.path("widedir");
    std::fs::create_dir(&d).expect("mkdir");
    let dp = d.to_str().expect("utf8");
    lfs(&["setstripe", "-c", "16", dp]);
    let g = d.join("child");
    std::fs::write(&g, b"x").expect("write");
    assert_eq!(
        lfs(&["getstripe", "-c", g.to_str().expect("utf8")]).trim(),
        "4"
    );
}

/// The OSTs of the objects `lfs getstripe -y` lists.
fn ost_indices(yaml: &str) -> Vec<u32> {
    yaml.lines()
        .filter_map(|l| l.trim().strip_prefix("- l_ost_idx: "))
        .map(|n| n.trim().parse().expect("an OST index"))
        .collect()
}

#[test]
fn a_drained_ost_gets_no_new_objects_and_its_pool_follows_demand() {
    if !require_fuse() {
        return;
    }
    // Lustre's way to stop new files landing on an OST (before retiring it) is
    // `lctl set_param osp.<fs>-OSTxxxx-*.max_create_count=0`.
    let fs = UpFs::new(&["--osts", "2"]);
    let max = ok(&["lctl", "get_param", "-n", "osp.*.max_create_count"]);
    assert_eq!(
        max.split_whitespace().collect::<Vec<_>>(),
        ["20000", "20000"]
    );
    // A file system that has made no files keeps the smallest pool.
    let count = ok(&["lctl", "get_param", "-n", "osp.*.create_count"]);
    assert_eq!(count.split_whitespace().collect::<Vec<_>>(), ["32", "32"]);

    // Lustre's ranges: 0, or 32 to 20000; create_count rounds down to a power of two.
    fail(&["lctl", "set_param", "osp.*OST0001*.max_create_count=5"]);
    fail(&["lctl", "set_param", "osp.*OST0001*.max_create_count=20001"]);
    fail(&["lctl", "set_param", "osp.*OST0001*.create_count=0"]);
    ok(&["lctl", "set_param", "osp.*OST0001*.create_count=100"]);
    let count = ok(&["lctl", "get_param", "-n", "osp.*OST0001*.create_count"]);
    assert_eq!(count.trim(), "64");

    ok(&["lctl", "set_param", "osp.*OST0001*.max_create_count=0"]);
    let d = fs.path("wide");
    std::fs::create_dir(&d).expect("mkdir");
    let dp = d.to_str().expect("utf8");
    lfs(&["setstripe", "-c", "2", dp]);
    for i in 0..8 {
        let f = d.join(format!("f{i}"));
        std::fs::write(&f, pattern(4096, i)).expect("write");
        let fp = f.to_str().expect("utf8");
        let objs = lfs(&["getstripe", "-y", fp]);
        assert_eq!(
            ost_indices(&objs),
            [0],
            "a drained OST got an object:\n{objs}"
        );
        same(&f, &pattern(4096, i));
    }

    // Back in service: new files get both OSTs again.
    ok(&["lctl", "set_param", "osp.*OST0001*.max_create_count=20000"]);
    let f = d.join("again");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        std::fs::write(&f, b"x").expect("write");
        let objs = lfs(&["getstripe", "-y", f.to_str().expect("utf8")]);
        if ost_indices(&objs) == [0, 1] {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "OST0001 took no new objects after max_create_count went back up:\n{objs}"
        );
        std::fs::remove_file(&f).expect("rm");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    fs.down();
}

/// A layout that names a pool the file system does not have is refused, as Lustre's lfs
/// refuses it, by setstripe (a new file, a directory default, an added component),
/// migrate and mirror extend, and nothing is made; `-p ''` and `-p inherit` name no pool
/// and work. (Pools that exist: `pools::`.)
#[test]
fn a_layout_naming_a_pool_that_does_not_exist_is_refused_and_makes_nothing() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&["--osts", "2"]);
    let (f, d) = (fs.path("pooled"), fs.path("dir"));
    std::fs::create_dir(&d).expect("mkdir");
    let (fp, dp) = (f.to_str().expect("utf8"), d.to_str().expect("utf8"));
    let plain = fs.path("plain");
    let pp = plain.to_str().expect("utf8");
    lfs(&["setstripe", "-c", "1", pp]);
    std::fs::write(&plain, b"kept").expect("write");
    let before = lfs(&["getstripe", pp]);
    for (what, args) in [
        (
            "a new file",
            vec!["setstripe", "-p", "flash", "-c", "1", fp],
        ),
        ("a full name", vec!["setstripe", "-p", "nacre.flash", fp]),
        ("a directory default", vec!["setstripe", "-p", "flash", dp]),
        (
            "an added component",
            vec![
                "setstripe",
                "--component-add",
                "-E",
                "-1",
                "-p",
                "flash",
                pp,
            ],
        ),
        ("migrate", vec!["migrate", "-c", "1", "-p", "flash", pp]),
        (
            "mirror extend",
            vec!["mirror", "extend", "-N", "-c", "1", "-p", "flash", pp],
        ),
    ] {
        let cmd: Vec<&str> = ["lfs"].into_iter().chain(args).collect();
        let err = fail(&cmd);
        assert!(
            err.contains("pool 'nacre.flash' does not exist"),
            "{what}: {err}"
        );
    }
    assert!(!f.exists(), "a refused setstripe made the file");
    assert_eq!(
        lfs(&["getstripe", pp]),
        before,
        "a refused change moved the file"
    );
    assert_eq!(std::fs::read(&plain).expect("read"), b"kept");
    assert!(
        !lfs(&["getstripe", "-d", dp]).contains("pool"),
        "a refused default was set"
    );
    for (name, p) in [("no-pool", ""), ("inherit", "inherit")] {
        let g = fs.path(name);
        lfs(&["setstripe", "-p", p, "-c", "1", g.to_str().expect("utf8")]);
        assert!(g.exists(), "-p '{p}' made no file");
    }
}
