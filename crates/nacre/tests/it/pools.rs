//! OST pools through a real mount: `lctl pool_*`, `lfs pool_list`, and files confined to
//! their pool's OSTs. The scenarios are Lustre's `ost-pools.sh` (numbers in the comments).

use crate::common;

use common::*;

/// The OST indexes of a file's objects, from `lfs getstripe`.
fn obd_indexes(path: &str) -> Vec<u32> {
    lfs(&["getstripe", path])
        .lines()
        .filter(|l| l.starts_with('\t') && !l.contains("obdidx"))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

/// `nacre ARGS`: exit code and standard error.
fn rc_err(args: &[&str]) -> (i32, String) {
    let o = run(args);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// 1a–1m, 2a–2e, 3a–3d, 4a–4c, 5a–5b: what each pool command accepts, refuses and prints.
#[test]
fn pool_commands_accept_refuse_and_print_as_lctl() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&["--osts", "4"]);
    let (rc, err) = rc_err(&["lctl", "pool_new", "nacre.flash"]);
    assert_eq!((rc, err.as_str()), (0, "Pool nacre.flash created\n"));
    for (name, want) in [
        ("nacre.a", "Pool nacre.a created"),
        (
            "nacre.a23456789012345",
            "Pool nacre.a23456789012345 created",
        ),
    ] {
        let (rc, err) = rc_err(&["lctl", "pool_new", name]);
        assert_eq!(rc, 0, "{name}: {err}");
        assert!(err.contains(want), "{name}: {err}");
    }
    // 1d–1m: too long, no fsname or pool, bad characters, a pool that exists.
    for (args, errno, words) in [
        (
            vec!["pool_new", "nacre.a234567890123456"],
            libc::ENAMETOOLONG,
            "poolname is too long",
        ),
        (vec!["pool_new", ".flash"], libc::EINVAL, "Invalid argument"),
        (vec!["pool_new", "nacre"], libc::EINVAL, "Invalid argument"),
        (vec!["pool_new", "nacre."], libc::EINVAL, "Invalid argument"),
        (
            vec!["pool_new", "nacre.ignore"],
            libc::EINVAL,
            "poolname cannot be 'ignore'",
        ),
        (
            vec!["pool_new", "nacre.a:b"],
            libc::EINVAL,
            "can contain only alphanumeric",
        ),
        (
            vec!["pool_new", "nacre.flash"],
            libc::EEXIST,
            "pool nacre.flash already exists",
        ),
        (
            vec!["pool_new", "other.flash"],
            libc::ENODEV,
            "'other' not found",
        ),
        // 2a–2e: a pool that does not exist, OSTs the file system lacks, bad names.
        (
            vec!["pool_add", "nacre.none0", "OST0000"],
            libc::ENOMEDIUM,
            "pool nacre.none0 not found",
        ),
        (
            vec!["pool_add", "nacre.flash", "OST0009"],
            libc::ENODEV,
            "nacre-OST0009_UUID is not part of the 'nacre' fs.",
        ),
        (
            vec!["pool_add", "nacre.flash", "OST1"],
            libc::EINVAL,
            "Wrong format for OST list",
        ),
        (
            vec!["pool_add", "nacre.flash", "lustre-OST0001"],
            libc::EINVAL,
            "Wrong format for OST list",
        ),
        // 3a, 4a: remove from or destroy what does not exist.
        (
            vec!["pool_remove", "nacre.none0", "OST0000"],
            libc::ENOMEDIUM,
            "pool nacre.none0 not found",
        ),
        (
            vec!["pool_destroy", "nacre.none0"],
            libc::ENOENT,
            "pool nacre.none0 not found",
        ),
    ] {
        let mut a = vec!["lctl"];
        a.extend(&args);
        let (rc, err) = rc_err(&a);
        assert_eq!(rc, errno, "{args:?}: {err}");
        assert!(err.contains(words), "{args:?}: {err}");
    }
    // 2c: index combinations, and the full name.
    let (rc, err) = rc_err(&["lctl", "pool_add", "nacre.flash", "OST[1,3]"]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(
        err,
        "OST nacre-OST0001_UUID added to pool nacre.flash\n\
         OST nacre-OST0003_UUID added to pool nacre.flash\n"
    );
    let (rc, err) = rc_err(&[
        "lctl",
        "pool_add",
        "nacre.a",
        "nacre-OST0000_UUID",
        "OST[1-3/2]",
    ]);
    assert_eq!(rc, 0, "{err}");
    // 2e: an OST already in the pool.
    let (rc, err) = rc_err(&["lctl", "pool_add", "nacre.flash", "OST0003"]);
    assert_eq!(rc, libc::EEXIST, "{err}");
    assert!(
        err.contains("pool_add: nacre-OST0003_UUID is already in pool nacre.flash"),
        "{err}"
    );
    // 5a, 5b: the lists, from lctl and lfs, by name and by path.
    assert_eq!(
        ok(&["lctl", "pool_list", "nacre"]),
        "Pools from nacre:\nnacre.a\nnacre.a23456789012345\nnacre.flash\n"
    );
    let mnt = fs.mnt.to_str().expect("utf8");
    assert_eq!(
        ok(&["lfs", "pool_list", mnt]),
        ok(&["lctl", "pool_list", "nacre"])
    );
    assert_eq!(
        ok(&["lfs", "pool_list", "nacre.flash"]),
        "Pool: nacre.flash\nnacre-OST0001_UUID\nnacre-OST0003_UUID\n"
    );
    assert_eq!(
        ok(&["lctl", "pool_list", "nacre.a"]),
        "Pool: nacre.a\nnacre-OST0000_UUID\nnacre-OST0001_UUID\nnacre-OST0003_UUID\n"
    );
    let (rc, _) = rc_err(&["lfs", "pool_list", "nacre.none0"]);
    assert_eq!(rc, libc::ENOENT);
    // 3d, 4c: a pool with members is not destroyed; members come out one by one.
    let (rc, err) = rc_err(&["lctl", "pool_destroy", "nacre.a"]);
    assert_eq!(rc, libc::ENOTEMPTY, "{err}");
    assert!(
        err.contains("pool nacre.a not empty, please remove all members"),
        "{err}"
    );
    let (rc, err) = rc_err(&["lctl", "pool_remove", "nacre.a", "OST0002"]);
    assert_eq!(rc, libc::ENOENT, "{err}");
    assert!(
        err.contains("nacre-OST0002_UUID not found in pool nacre.a"),
        "{err}"
    );
    let (rc, err) = rc_err(&["lctl", "pool_remove", "nacre.a", "OST[0-1]", "OST0003"]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        err.contains("OST nacre-OST0000_UUID removed from pool nacre.a\n"),
        "{err}"
    );
    let (rc, err) = rc_err(&["lctl", "pool_destroy", "nacre.a"]);
    assert_eq!((rc, err.as_str()), (0, "Pool nacre.a destroyed\n"));
    // 2f: --nowait says nothing.
    let (rc, err) = rc_err(&["lctl", "pool_destroy", "-n", "nacre.a23456789012345"]);
    assert_eq!((rc, err.as_str()), (0, ""));
    assert_eq!(
        ok(&["lctl", "pool_list", "nacre"]),
        "Pools from nacre:\nnacre.flash\n"
    );
    // A usage error teaches the syntax.
    let (rc, err) = rc_err(&["lctl", "pool_add", "nacre.flash"]);
    assert_eq!(rc, libc::EINVAL);
    assert!(err.contains("usage: pool_add"), "{err}");
}

/// 6, 13, 16, 17, 19, 21, 24, 25, 32: a pool confines every file that names it, or inherits
/// it, to its OSTs; other files use every OST; the pools outlive a restart; a directory
/// whose pool was destroyed still takes files.
#[test]
fn files_in_a_pool_use_only_its_osts() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&["--osts", "4"]);
    let p = |rel: &str| fs.path(rel).to_str().expect("utf8").to_string();
    ok(&["lctl", "pool_new", "nacre.flash"]);
    ok(&["lctl", "pool_add", "nacre.flash", "OST[1,3]"]);
    // The MDT's lod and the client's lov show the members, as Lustre's pools files do.
    for param in ["lod.*.pools.flash", "lov.*.pools.flash"] {
        assert_eq!(
            ok(&["lctl", "get_param", "-n", param]),
            "nacre-OST0001_UUID\nnacre-OST0003_UUID\n",
            "{param}"
        );
    }
    let in_pool = |path: &str, stripes: usize| {
        let osts = obd_indexes(path);
        assert_eq!(osts.len(), stripes, "{path}: {osts:?}");
        assert!(
            osts.iter().all(|o| *o == 1 || *o == 3),
            "{path} outside the pool: {osts:?}"
        );
        assert_eq!(
            lfs(&["getstripe", "--pool", path]).trim(),
            "flash",
            "{path}"
        );
    };

    // 6, 16, 21: a directory default with the pool; files below it, many levels down,
    // are in the pool, with no more stripes than it has OSTs.
    std::fs::create_dir(fs.path("pooled")).expect("mkdir");
    lfs(&["setstripe", "-c", "-1", "-p", "flash", &p("pooled")]);
    assert_eq!(lfs(&["getstripe", "--pool", &p("pooled")]).trim(), "flash");
    let deep = fs.path("pooled/d1/d2/d3");
    std::fs::create_dir_all(&deep).expect("mkdir -p");
    for rel in ["pooled/f0", "pooled/f1", "pooled/d1/d2/d3/f2"] {
        std::fs::write(fs.path(rel), vec![7u8; 3 << 20]).expect("write");
        in_pool(&p(rel), 2);
        assert_eq!(
            std::fs::read(fs.path(rel)).expect("read"),
            vec![7u8; 3 << 20]
        );
    }
    // 13, 21: an explicit layout naming the pool, wider than the pool.
    lfs(&["setstripe", "-c", "4", "-p", "flash", &p("wide")]);
    in_pool(&p("wide"), 2);
    lfs(&[
        "setstripe",
        "-c",
        "1",
        "-p",
        "nacre.flash",
        "-i",
        "3",
        &p("at3"),
    ]);
    assert_eq!(obd_indexes(&p("at3")), vec![3]);
    // 7c: a first OST outside the pool is refused, and nothing is made.
    let err = fail(&[
        "lfs",
        "setstripe",
        "-c",
        "1",
        "-p",
        "flash",
        "-i",
        "0",
        &p("at0"),
    ]);
    assert!(err.contains("Invalid argument"), "{err}");
    assert!(!fs.path("at0").exists());
    // 24, 32: in the pool directory, a layout without a pool takes the directory's;
    // `-p ignore` keeps the file out, with any first OST.
    lfs(&["setstripe", "-c", "1", &p("pooled/explicit")]);
    in_pool(&p("pooled/explicit"), 1);
    lfs(&["setstripe", "-p", "ignore", "-i", "0", &p("pooled/ignored")]);
    assert_eq!(
        lfs(&["getstripe", "--pool", &p("pooled/ignored")]).trim(),
        ""
    );
    assert_eq!(obd_indexes(&p("pooled/ignored")), vec![0]);
    // 19: files elsewhere use every OST.
    std::fs::create_dir(fs.path("plain")).expect("mkdir");
    let mut used = std::collections::BTreeSet::new();
    for i in 0..8 {
        let f = p(&format!("plain/f{i}"));
        std::fs::write(&f, b"x").expect("write");
        assert_eq!(lfs(&["getstripe", "--pool", &f]).trim(), "");
        used.extend(obd_indexes(&f));
    }
    assert!(
        used.contains(&0) && used.contains(&2),
        "no plain file on OST0000 or OST0002: {used:?}"
    );
    // lfs df --pool and lfs find --pool.
    let df = lfs(&["df", "--pool", "flash", &p("")]);
    let osts: Vec<&str> = df.lines().filter(|l| l.contains("OST")).collect();
    assert!(
        osts.len() == 2 && osts[0].contains("OST0001") && osts[1].contains("OST0003"),
        "{df}"
    );
    let found = lfs(&["find", &p("pooled"), "--pool", "flash", "-type", "f"]);
    assert_eq!(found.lines().count(), 4, "{found}");

    // 25: the pools and the directory's pool outlive a restart of every server.
    fs.down();
    fs.up_again();
    assert_eq!(
        ok(&["lctl", "pool_list", "nacre.flash"]),
        "Pool: nacre.flash\nnacre-OST0001_UUID\nnacre-OST0003_UUID\n"
    );
    std::fs::write(fs.path("pooled/after"), b"y").expect("write");
    in_pool(&p("pooled/after"), 2);

    // 12: a pool's membership changes what new files get, not what old ones have.
    ok(&["lctl", "pool_remove", "nacre.flash", "OST0001"]);
    std::fs::write(fs.path("pooled/one"), b"z").expect("write");
    assert_eq!(obd_indexes(&p("pooled/one")), vec![3]);
    in_pool(&p("pooled/f0"), 2);

    // 17, 18: with the pool destroyed, the directory that names it still takes files,
    // anywhere; a new layout naming it is refused.
    ok(&["lctl", "pool_remove", "nacre.flash", "OST0003"]);
    let err = fail(&["lfs", "setstripe", "-p", "flash", &p("empty")]);
    assert!(err.contains("pool 'nacre.flash' has no OSTs"), "{err}");
    ok(&["lctl", "pool_destroy", "nacre.flash"]);
    for i in 0..4 {
        let f = fs.path(&format!("pooled/gone{i}"));
        std::fs::write(&f, b"w").expect("create in a directory whose pool is gone");
    }
    let err = fail(&["lfs", "setstripe", "-p", "flash", &p("late")]);
    assert!(err.contains("pool 'nacre.flash' does not exist"), "{err}");
    fs.down();
    ok(&["check", fs.dir.to_str().expect("utf8")]);
}
