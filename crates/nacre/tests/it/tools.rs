//! `nacre lfs` and `nacre lctl` against a real mount.

use crate::common;

use common::*;

#[test]
fn lfs_and_lctl_on_a_mount() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&["--osts", "3"]);
    let m = fs.mnt.to_str().expect("utf8").to_string();
    let p = |rel: &str| format!("{m}/{rel}");

    let df = ok(&["lfs", "df", &m]);
    assert!(df.starts_with("UUID"), "{df}");
    assert_eq!(
        df.lines().filter(|l| l.contains("_UUID")).count(),
        4,
        "{df}"
    );
    assert!(df.contains("filesystem_summary:"), "{df}");
    assert!(ok(&["lfs", "df", "-h", &m]).contains("bytes"));
    assert!(ok(&["lfs", "df", "-i", &m]).contains("Inodes"));

    // The mount's name and targets, as Lustre's `lfs getname`, `osts` and `mdts` print
    // them; the instance is the one in the client's parameter names.
    let fsname = ok(&["lfs", "getname", "-n", &m]).trim().to_string();
    let instance = ok(&["lfs", "getname", "-i", &m]).trim().to_string();
    assert!(
        instance.len() == 16 && instance.starts_with("ffff"),
        "{instance}"
    );
    assert_eq!(
        ok(&["lctl", "list_param", "llite.*"]).trim(),
        format!("llite.{fsname}-{instance}")
    );
    assert_eq!(
        ok(&["lfs", "getname", &m]).trim(),
        format!("{fsname}-{instance}")
    );
    assert_eq!(
        ok(&["lfs", "getname", &m, &m]),
        format!("{fsname}-{instance} {m}\n{fsname}-{instance} {m}\n")
    );
    assert_eq!(
        ok(&["lfs", "osts", &m]),
        format!(
            "OBDS:\n0: {fsname}-OST0000_UUID ACTIVE\n1: {fsname}-OST0001_UUID ACTIVE\n\
             2: {fsname}-OST0002_UUID ACTIVE\n"
        )
    );
    assert_eq!(
        ok(&["lfs", "mdts", &m]),
        format!("MDTS:\n0: {fsname}-MDT0000_UUID ACTIVE\n")
    );
    assert!(fail(&["lfs", "osts", &m, &m]).contains("one PATH at most"));
    // `lfs check`: every device answers its ping; OSCs, MDCs, then the MGC.
    let checked = ok(&["lfs", "check", "servers", &m]);
    let lines: Vec<&str> = checked.lines().collect();
    assert_eq!(lines.len(), 5, "{checked}");
    for (line, dev) in lines.iter().zip([
        format!("{fsname}-OST0000-osc-{instance}"),
        format!("{fsname}-OST0001-osc-{instance}"),
        format!("{fsname}-OST0002-osc-{instance}"),
        format!("{fsname}-MDT0000-mdc-{instance}"),
    ]) {
        assert_eq!(*line, format!("{dev} active."), "{checked}");
    }
    assert!(
        lines[4].starts_with("MGC127.0.0.1@tcp") && lines[4].ends_with(" active."),
        "{checked}"
    );
    assert_eq!(ok(&["lfs", "check", "mdts", &m]), format!("{}\n", lines[3]));
    assert!(fail(&["lfs", "check", "clients", &m]).contains("unrecognized option 'clients'"));
    // `lctl dl`, as sanity.sh 104d reads it: a client device per target, each server
    // device once, numbered from 0; `-t` adds each client device's NID, `-y` is YAML.
    let dl = ok(&["lctl", "dl"]);
    let rows: Vec<Vec<&str>> = dl.lines().map(|l| l.split_whitespace().collect()).collect();
    let count = |class: &str, prefix: &str| {
        rows.iter()
            .filter(|r| r[2] == class && r[3].starts_with(prefix))
            .count()
    };
    assert_eq!(count("osc", &format!("{fsname}-OST")), 3, "{dl}");
    assert_eq!(count("mdc", &format!("{fsname}-MDT")), 1, "{dl}");
    assert_eq!(count("obdfilter", &format!("{fsname}-OST")), 3, "{dl}");
    assert_eq!(count("mdt", &format!("{fsname}-MDT")), 1, "{dl}");
    assert_eq!(count("osp", &format!("{fsname}-OST")), 3, "{dl}");
    assert_eq!((count("mgs", "MGS"), count("ost", "OSS")), (1, 1), "{dl}");
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(
            (r.len(), r[0], r[1]),
            (6, i.to_string().as_str(), "UP"),
            "{dl}"
        );
        assert!(r[5].parse::<u32>().is_ok_and(|n| n > 0), "{dl}");
    }
    assert!(
        rows.iter()
            .any(|r| r[2] == "osc" && r[3] == format!("{fsname}-OST0002-osc-{instance}"))
    );
    let with_nids = ok(&["lctl", "dl", "-t"]);
    for line in with_nids.lines() {
        let client_dev = line.contains(" osc ") || line.contains(" mdc ");
        assert_eq!(line.ends_with(" 127.0.0.1@tcp"), client_dev, "{with_nids}");
    }
    let yaml = ok(&["lctl", "dl", "--yaml"]);
    assert!(
        yaml.starts_with("devices:\n  - index: 0\n    status: UP\n"),
        "{yaml}"
    );
    assert_eq!(yaml.matches("  - index: ").count(), rows.len(), "{yaml}");
    assert!(fail(&["lctl", "dl", "osc"]).contains("unexpected 'osc'"));
    assert_eq!(
        ok(&["lctl", "get_param", "-n", "version"]).trim(),
        env!("CARGO_PKG_VERSION")
    );
    // An OST whose replies are lost is inactive, within the ping's bound.
    ok(&["inject", "c-Network", "--target", "OST0001"]);
    let t0 = std::time::Instant::now();
    let osts = ok(&["lfs", "check", "osts", &m]);
    assert!(
        t0.elapsed() < nacre_client::md::TARGET_CHECK_BOUND + std::time::Duration::from_secs(5),
        "lfs check took {:?}",
        t0.elapsed()
    );
    assert_eq!(
        osts,
        format!(
            "{fsname}-OST0000-osc-{instance} active.\n{fsname}-OST0001-osc-{instance} inactive.\n\
             {fsname}-OST0002-osc-{instance} active.\n"
        )
    );
    ok(&["inject", "c-Network", "--target", "OST0001", "--clear"]);
    assert!(fail(&["lfs", "getname", "-x", &m]).contains("unrecognized option '-x'"));

    // A plain striped file, checked field by field.
    ok(&[
        "lfs",
        "setstripe",
        "-c",
        "2",
        "-S",
        "1M",
        "-i",
        "1",
        &p("f"),
    ]);
    std::fs::write(fs.path("f"), vec![1u8; 3 << 20]).expect("write");
    let gs = ok(&["lfs", "getstripe", &p("f")]);
    let field = |name: &str| {
        gs.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("no {name} in\n{gs}"))
    };
    assert_eq!(field("lmm_stripe_count:"), "2");
    assert_eq!(field("lmm_stripe_size:"), "1048576");
    assert_eq!(field("lmm_pattern:"), "raid0");
    assert_eq!(field("lmm_stripe_offset:"), "1");
    let objs: Vec<&str> = gs
        .lines()
        .filter(|l| l.starts_with('\t') && !l.contains("obdidx"))
        .collect();
    assert_eq!(objs.len(), 2, "{gs}");
    assert_eq!(objs[0].split_whitespace().next(), Some("1"));
    assert_eq!(objs[1].split_whitespace().next(), Some("2"));
    assert_eq!(ok(&["lfs", "getstripe", "-c", &p("f")]).trim(), "2");
    // A layout on an existing file is refused and changes nothing.
    let err = run(&["lfs", "setstripe", "-c", "3", &p("f")]);
    assert!(!err.status.success());
    assert_eq!(ok(&["lfs", "getstripe", "-c", &p("f")]).trim(), "2");
    // A stripe count over the OSTs gets every OST, as on Lustre's MDT.
    ok(&["lfs", "setstripe", "-c", "9", &p("wide")]);
    assert_eq!(ok(&["lfs", "getstripe", "-c", &p("wide")]).trim(), "3");
    // Invalid layouts are refused with a message.
    let bad = fail(&["lfs", "setstripe", "-c", "3000", &p("g")]);
    assert!(bad.contains("stripe count"), "{bad}");
    assert!(!fs.path("g").exists());
    let bad = fail(&["lfs", "setstripe", "-S", "100k", &p("g")]);
    assert!(bad.contains("stripe size"), "{bad}");

    // Directory defaults are inherited, and -d removes them.
    std::fs::create_dir(fs.path("d")).expect("mkdir");
    ok(&["lfs", "setstripe", "-c", "-1", &p("d")]);
    assert!(ok(&["lfs", "getstripe", "-d", &p("d")]).contains("stripe_count:  -1"));
    std::fs::write(fs.path("d/child"), b"x").expect("write");
    assert_eq!(ok(&["lfs", "getstripe", "-c", &p("d/child")]).trim(), "3");
    ok(&["lfs", "setstripe", "-d", &p("d")]);
    std::fs::write(fs.path("d/child2"), b"x").expect("write");
    assert_eq!(ok(&["lfs", "getstripe", "-c", &p("d/child2")]).trim(), "1");

    // FIDs both ways.
    let fid = ok(&["lfs", "path2fid", &p("d/child")]).trim().to_string();
    assert!(fid.starts_with("[0x2") && fid.ends_with(']'), "{fid}");
    assert_eq!(ok(&["lfs", "fid2path", &m, &fid]).trim(), p("d/child"));

    // Parameters: local, and persistent through the MGS.
    let v = ok(&["lctl", "get_param", "-n", "osc.*.max_rpcs_in_flight"]);
    assert_eq!(v.lines().count(), 3, "{v}");
    ok(&["lctl", "set_param", "osc.*.max_rpcs_in_flight=16"]);
    assert!(
        ok(&["lctl", "get_param", "-n", "osc.*.max_rpcs_in_flight"])
            .lines()
            .all(|l| l == "16")
    );
    assert!(
        !run(&["lctl", "set_param", "osc.*.max_rpcs_in_flight=0"])
            .status
            .success()
    );
    // The MDCs' bound is theirs alone.
    ok(&["lctl", "set_param", "mdc.*.max_rpcs_in_flight=4"]);
    assert_eq!(param("mdc.*.max_rpcs_in_flight"), "4");
    assert!(
        ok(&["lctl", "get_param", "-n", "osc.*.max_rpcs_in_flight"])
            .lines()
            .all(|l| l == "16")
    );
    // Request statistics on both ends count what was sent and handled.
    ok(&[
        "lctl",
        "set_param",
        "mdc.*.stats=clear",
        "mdt.*.md_stats=clear",
        "llite.*.stats=clear",
    ]);
    for i in 0..3 {
        std::fs::write(fs.path(&format!("counted{i}")), b"").expect("create");
    }
    let count = stat_count;
    assert_eq!(count("mdc.*.stats", "create"), 3);
    // The mount counts the kernel's calls: one create and one close per file.
    assert_eq!(count("llite.*.stats", "create"), 3);
    // (The kernel sends a file's last close after close(2) returns.)
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while count("llite.*.stats", "close") < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(count("llite.*.stats", "close"), 3);
    ok(&["lctl", "set_param", "llite.*.stats=clear"]);
    assert_eq!(count("llite.*.stats", "create"), 0);
    assert_eq!(count("mdt.*.md_stats", "create"), 3);
    assert!(count("mdt.*.md_stats", "close") >= 3);
    let md = ok(&["lctl", "get_param", "mdt.*.md_stats"]);
    assert!(
        md.contains("snapshot_time") && md.contains("samples [usecs]"),
        "{md}"
    );
    ok(&["lctl", "set_param", "mdt.*.md_stats=clear"]);
    assert_eq!(count("mdt.*.md_stats", "create"), 0);

    // Adaptive timeouts: the node's tunables under Lustre's names, defaults and bounds,
    // and the estimates of every import and target in Lustre's `timeouts` format.
    assert_eq!(param("at_max"), "600");
    assert_eq!(param("at_history"), "600");
    assert_eq!(param("timeout"), "30");
    ok(&["lctl", "set_param", "at_min=12"]);
    assert_eq!(param("at_min"), "12");
    assert!(!run(&["lctl", "set_param", "at_min=700"]).status.success());
    assert!(!run(&["lctl", "set_param", "at_max=5"]).status.success());
    assert!(!run(&["lctl", "set_param", "timeout=0"]).status.success());
    let mdc = ok(&["lctl", "get_param", "-n", "mdc.*.timeouts"]);
    assert!(mdc.starts_with("last reply : "), "{mdc}");
    assert!(mdc.contains("\nnetwork    : cur "), "{mdc}");
    // The estimate is at least at_min.
    assert!(mdc.contains("\nportal 12  : cur  12  worst "), "{mdc}");
    // The MGC's, under Lustre's device name (MGC and the MGS's NID, dots and all).
    let names = ok(&["lctl", "list_param", "mgc.*.timeouts"]);
    assert_eq!(names.trim(), "mgc.MGC127.0.0.1@tcp.timeouts", "{names}");
    let mgc = ok(&["lctl", "get_param", "-n", "mgc.MGC127.0.0.1@tcp.timeouts"]);
    assert!(mgc.contains("\nportal 26  : cur  12  worst "), "{mgc}");
    let osc = ok(&["lctl", "get_param", "-n", "osc.*.timeouts"]);
    assert_eq!(osc.matches("portal 6   : cur ").count(), 3, "{osc}");
    let svc = ok(&[
        "lctl",
        "get_param",
        "obdfilter.*.timeouts",
        "mdt.*.timeouts",
    ]);
    assert_eq!(
        svc.matches("   service : cur  12  worst ").count(),
        4,
        "{svc}"
    );
    ok(&["lctl", "set_param", "at_max=0"]);
    assert!(
        ok(&["lctl", "get_param", "-n", "mdt.*.timeouts"])
            .starts_with("adaptive timeouts off, using obd_timeout 30")
    );
    ok(&["lctl", "set_param", "at_max=600", "at_min=0"]);

    // OST recovery: status in Lustre's format, its window bounded, the client's kept
    // writes and the switch that turns tracking off.
    let st = ok(&["lctl", "get_param", "-n", "obdfilter.*.recovery_status"]);
    assert_eq!(st.matches("status: ").count(), 3, "{st}");
    ok(&["lctl", "set_param", "obdfilter.*.recovery_time_soft=20"]);
    assert_eq!(param("obdfilter.*-OST0000.recovery_time_soft"), "20");
    assert!(
        !run(&["lctl", "set_param", "obdfilter.*.recovery_time_soft=0"])
            .status
            .success()
    );
    let unstable = ok(&["lctl", "get_param", "-n", "osc.*.unstable_stats"]);
    assert_eq!(
        unstable.matches("unstable_pages: ").count(),
        3,
        "{unstable}"
    );
    assert_eq!(param("osc.*-OST0000-*.replay_tracking"), "1");

    ok(&["lctl", "set_param", "-P", "lod.*.stripecount=2"]);
    let mut applied = false;
    for _ in 0..50 {
        if param("lod.*.stripecount") == "2" {
            applied = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(applied, "set_param -P did not reach the MDT");
    std::fs::write(fs.path("two"), b"x").expect("write");
    assert_eq!(ok(&["lfs", "getstripe", "-c", &p("two")]).trim(), "2");
    // Persistent settings survive a restart.
    fs.down();
    fs.up_again();
    assert_eq!(param("lod.*.stripecount"), "2");
    fs.down();
}

/// The RPC counts of one OST from `osc.*.rpc_stats`: (read RPCs, write RPCs, largest
/// pages-per-RPC bucket used by reads).
fn rpc_stats(ost: u32) -> (u64, u64, u64) {
    let out = ok(&[
        "lctl",
        "get_param",
        "-n",
        &format!("osc.*-OST{ost:04x}-osc-*.rpc_stats"),
    ]);
    let field = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    let biggest_read = out
        .lines()
        .filter_map(|l| {
            let (pages, rest) = l.split_once(':')?;
            let pages: u64 = pages.trim().parse().ok()?;
            let reads: u64 = rest.split_whitespace().next()?.parse().ok()?;
            (reads > 0).then_some(pages)
        })
        .max()
        .unwrap_or(0);
    (field("read RPCs:"), field("write RPCs:"), biggest_read)
}

#[test]
fn client_tunables_change_behaviour() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&["--osts", "1"]);
    let f = fs.path("rpc");
    ok(&[
        "lfs",
        "setstripe",
        "-c",
        "1",
        "-S",
        "4M",
        f.to_str().expect("utf8"),
    ]);
    // Small RPCs: a 1 MiB write goes as 16 RPCs of 64 KiB.
    ok(&["lctl", "set_param", "osc.*.max_pages_per_rpc=16"]);
    ok(&["lctl", "set_param", "osc.*.rpc_stats=clear"]);
    std::fs::write(&f, vec![5u8; 1 << 20]).expect("write");
    let (_, writes, _) = rpc_stats(0);
    assert_eq!(writes, 16, "1 MiB in 64 KiB RPCs");
    // Large RPCs: one.
    ok(&["lctl", "set_param", "osc.*.max_pages_per_rpc=1024"]);
    ok(&["lctl", "set_param", "osc.*.rpc_stats=clear"]);
    std::fs::write(&f, vec![6u8; 1 << 20]).expect("write");
    let (_, writes, _) = rpc_stats(0);
    assert_eq!(writes, 1, "1 MiB in one RPC");

    // Readahead: sequential reads fetch ahead in large RPCs; with it off, RPCs are only as
    // large as the kernel's reads.
    let big = fs.path("seq");
    ok(&["lfs", "setstripe", "-c", "1", big.to_str().expect("utf8")]);
    std::fs::write(&big, vec![7u8; 16 << 20]).expect("write");
    ok(&["lctl", "set_param", "llite.*.max_read_ahead_mb=0"]);
    sh("echo 3 > /proc/sys/vm/drop_caches", &fs.mnt);
    ok(&["lctl", "set_param", "osc.*.rpc_stats=clear"]);
    assert_eq!(std::fs::read(&big).expect("read").len(), 16 << 20);
    let (_, _, biggest_off) = rpc_stats(0);
    ok(&["lctl", "set_param", "llite.*.max_read_ahead_mb=64"]);
    sh("echo 3 > /proc/sys/vm/drop_caches", &fs.mnt);
    ok(&["lctl", "set_param", "osc.*.rpc_stats=clear"]);
    assert_eq!(std::fs::read(&big).expect("read").len(), 16 << 20);
    let (_, _, biggest_on) = rpc_stats(0);
    assert!(
        biggest_on > biggest_off,
        "readahead reads larger pieces: {biggest_on} pages per RPC with it, {biggest_off} without"
    );
    // A small dirty budget still moves all the data, correctly.
    ok(&["lctl", "set_param", "osc.*.max_dirty_mb=1"]);
    let data: Vec<u8> = (0..(8 << 20)).map(|i: u32| (i % 253) as u8).collect();
    std::fs::write(fs.path("dirty"), &data).expect("write with a 1 MiB dirty budget");
    assert!(
        std::fs::read(fs.path("dirty")).expect("read") == data,
        "contents differ"
    );
    ok(&["lctl", "set_param", "osc.*.max_dirty_mb=64"]);
    // OST writes around the page cache: large writes go O_DIRECT and blocks are reserved
    // ahead of the stream; the file reads back the same, and holds no more blocks than
    // its data once closed.
    assert_eq!(param("obdfilter.*.writethrough_cache_enable"), "1");
    ok(&[
        "lctl",
        "set_param",
        "obdfilter.*.writethrough_cache_enable=0",
    ]);
    let streamed = fs.path("streamed");
    let data: Vec<u8> = (0..(40u32 << 20)).map(|i| (i % 251) as u8).collect();
    {
        use std::io::Write;
        let mut w = std::fs::File::create(&streamed).expect("create");
        for piece in data.chunks(1 << 20) {
            w.write_all(piece).expect("write");
        }
        w.sync_all().expect("fsync");
    }
    // Still on: the OST's file system took O_DIRECT (it turns itself off if refused).
    assert_eq!(param("obdfilter.*.writethrough_cache_enable"), "0");
    sh("echo 3 > /proc/sys/vm/drop_caches", &fs.mnt);
    assert!(
        std::fs::read(&streamed).expect("read") == data,
        "contents differ after direct writes"
    );
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(&streamed).expect("stat");
    assert!(
        m.blocks() * 512 <= m.len() + (1 << 20),
        "{} bytes allocated for {}",
        m.blocks() * 512,
        m.len()
    );
    ok(&[
        "lctl",
        "set_param",
        "obdfilter.*.writethrough_cache_enable=1",
    ]);
    fs.down();
}

/// `nacre frag --native`: each file's OST objects are mapped on their OSTs and the report
/// counts them per OST.
#[test]
fn frag_reports_extents_per_ost() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&["--osts", "2"]);
    let d = fs.path("d");
    std::fs::create_dir(&d).expect("mkdir");
    ok(&[
        "lfs",
        "setstripe",
        "-c",
        "2",
        "-S",
        "64K",
        d.to_str().expect("utf8"),
    ]);
    let mut total = 0u64;
    for (i, kib) in [(1, 128u64), (2, 512), (3, 1024)] {
        let data: Vec<u8> = (0..kib * 1024).map(|b| (b % 251) as u8 ^ i).collect();
        std::fs::write(d.join(format!("f{i}")), &data).expect("write");
        total += kib * 1024;
    }
    // An empty file: its objects hold nothing.
    std::fs::write(d.join("empty"), b"").expect("write");
    let out = ok(&[
        "frag",
        "--native",
        fs.dir.to_str().expect("utf8"),
        "/d",
        "--json",
        "--no-free-space",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["files"], 4, "{v}");
    assert_eq!(v["unmapped_files"], 0, "{v}");
    let per_ost = v["per_ost"].as_array().expect("per_ost");
    assert_eq!(per_ost.len(), 2, "both OSTs hold stripes: {v}");
    let bytes: u64 = per_ost
        .iter()
        .map(|o| o["bytes"].as_u64().unwrap_or(0))
        .sum();
    // Extents cover whole blocks, so at least the data written.
    assert!(bytes >= total, "{bytes} < {total}: {v}");
    for o in per_ost {
        assert_eq!(o["objects"], 3, "three files with data on each OST: {v}");
        assert!(o["extents"].as_u64().unwrap_or(0) >= 3, "{v}");
    }
    // Through the mount FIEMAP is not offered: the report says so instead of inventing maps.
    let out = ok(&[
        "frag",
        d.to_str().expect("utf8"),
        "--json",
        "--no-free-space",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["unmapped_files"], 4, "{v}");
    assert!(v["per_ost"].as_array().is_some_and(|a| a.is_empty()), "{v}");
}

/// How long sizes may take to settle on the MDT after the files are closed.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(30);

/// `nacre inject` on a `nacre up` file system, a class at a time: it breaks N files and
/// names each, a dry run counts exactly N, a repair fixes N, a second run counts 0, and
/// the files it did not touch keep their contents.
#[test]
fn inject_makes_what_a_dry_run_counts_and_a_repair_fixes() {
    const N: usize = 3;
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&["--osts", "2"]);
    // (class, component, dry-run counter, repair counter, repair options)
    let cases: [(&str, &str, &str, &str, &[&str]); 7] = [
        (
            "detach-ost-object",
            "layout",
            "inconsistent_orphan",
            "repaired_orphan",
            &[],
        ),
        (
            "corrupt-linkea",
            "namespace",
            "linkea_inconsistent",
            "linkea_repaired",
            &[],
        ),
        (
            "corrupt-filter-fid",
            "layout",
            "inconsistent_unmatched_pair",
            "repaired_unmatched_pair",
            &[],
        ),
        (
            "change-ost-owner",
            "layout",
            "inconsistent_inconsistent_owner",
            "repaired_inconsistent_owner",
            &[],
        ),
        (
            "delete-dirent",
            "namespace",
            "lost_dirent_inconsistent",
            "lost_dirent_repaired",
            &[],
        ),
        (
            "change-nlink",
            "namespace",
            "nlinks_inconsistent",
            "nlinks_repaired",
            &[],
        ),
        (
            "flip-dirent-type",
            "namespace",
            "bad_file_type_inconsistent",
            "bad_file_type_repaired",
            &[],
        ),
    ];
    let mut untouched = Vec::new();
    for (class, ..) in &cases {
        let d = fs.path(class);
        std::fs::create_dir(&d).expect("mkdir");
        for i in 0..10 {
            let p = d.join(format!("f{i}"));
            let data = format!("{class} {i} ").repeat(100 + i);
            std::fs::write(&p, &data).expect("write");
            untouched.push((p, data));
        }
    }
    for (class, kind, dry_key, fix_key, fix_args) in cases {
        let dir = fs.path(class);
        let dir = dir.to_str().expect("utf8");
        let case = ClassCase {
            class,
            kind,
            dry_key,
            fix_key,
            fix_args,
        };
        let hit = inject_and_repair(&case, dir, N, &[], SETTLE);
        untouched.retain(|(p, _)| !hit.iter().any(|h| h == p));
    }
    for (p, data) in &untouched {
        assert_eq!(
            std::fs::read_to_string(p).expect("read"),
            *data,
            "{}",
            p.display()
        );
    }
    // The fault models: the OST's storage fails, reads of its files fail, and come back.
    let out = ok(&["inject", "a-DevFail", "--target", "OST0000,OST0001"]);
    assert_eq!(out.matches("(injected)").count(), 2, "{out}");
    let health = ok(&["lctl", "get_param", "-n", "obdfilter.*.health_check"]);
    assert!(health.contains("NOT HEALTHY"), "{health}");
    ok(&[
        "inject",
        "a-DevFail",
        "--target",
        "OST0000,OST0001",
        "--clear",
    ]);
    let health = ok(&["lctl", "get_param", "-n", "obdfilter.*.health_check"]);
    assert!(!health.contains("NOT HEALTHY"), "{health}");
    let (p, data) = &untouched[0];
    assert_eq!(std::fs::read_to_string(p).expect("read"), *data);
    fs.down();
}

/// `lctl` on server nodes with no mount, one `nacre serve` process per target: `lctl dl`
/// lists every process's devices, the node-wide `OSS` once; the pool commands and
/// `pool_list` find the MGS's process among the others (ost-pools.sh run on the MGS).
#[test]
fn lctl_on_server_processes_without_a_mount() {
    let tmp = tempfile::tempdir().expect("tmp");
    let p = |n: &str| tmp.path().join(n);
    let mut cl = common::procs::ServeCluster::format(
        "srvonly",
        &p("mgs"),
        &[p("mdt0")],
        &[p("ost0"), p("ost1")],
    );
    cl.start_all();
    let dl = ok(&["lctl", "dl"]);
    let classes: Vec<&str> = dl
        .lines()
        .map(|l| l.split_whitespace().nth(2).unwrap_or_default())
        .collect();
    let n = |c: &str| classes.iter().filter(|x| **x == c).count();
    assert_eq!(
        [
            n("mgs"),
            n("mdt"),
            n("mds"),
            n("osp"),
            n("ost"),
            n("obdfilter")
        ],
        [1, 1, 1, 2, 1, 2],
        "{dl}"
    );
    assert_eq!((n("osc"), n("mdc")), (0, 0), "{dl}");
    assert!(
        dl.contains(" obdfilter srvonly-OST0001 srvonly-OST0001_UUID "),
        "{dl}"
    );
    // Numbered across the processes, from 0.
    for (i, l) in dl.lines().enumerate() {
        assert_eq!(
            l.split_whitespace().next(),
            Some(i.to_string().as_str()),
            "{dl}"
        );
    }

    ok(&["lctl", "pool_new", "srvonly.fast"]);
    ok(&["lctl", "pool_add", "srvonly.fast", "OST0001"]);
    assert_eq!(
        ok(&["lctl", "pool_list", "srvonly"]),
        "Pools from srvonly:\nsrvonly.fast\n"
    );
    assert_eq!(
        ok(&["lctl", "pool_list", "srvonly.fast"]),
        "Pool: srvonly.fast\nsrvonly-OST0001_UUID\n"
    );
    cl.stop_all();
}
