//! LFSCK, `nacre inject` and `lctl set_param -P` on a file system of `nacre serve`
//! processes, one per target, mounted by a `nacre mount` process that holds the client
//! key: each reaches the process that serves its target through that process's control
//! socket, as on a cluster node.

use crate::common;

use common::procs::ServeCluster;
use common::*;
use std::time::{Duration, Instant};

/// Files broken per class.
const N: usize = 3;
/// How long sizes may take to settle on the MDT after the files are closed.
const SETTLE: Duration = Duration::from_secs(30);

/// A `nacre mount` process of the cluster, unmounted on drop.
struct Mount(std::path::PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = run(&["umount", self.0.to_str().unwrap_or_default()]);
    }
}

#[test]
fn inject_lfsck_and_set_param_reach_serve_processes() {
    if !require_fuse() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let p = |n: &str| tmp.path().join(n);
    let mut cl = ServeCluster::format("lsrv", &p("mgs"), &[p("mdt0")], &[p("ost0"), p("ost1")]);
    cl.start_all();
    let mnt = p("mnt");
    let client_key = p("mgs").join("client.key");
    ok(&[
        "mount",
        &cl.spec(),
        mnt.to_str().expect("utf8"),
        "--key",
        client_key.to_str().expect("utf8"),
        "--background",
    ]);
    let m = Mount(mnt.clone());

    // (class, component, dry-run counter, repair counter)
    let cases = [
        (
            "change-ost-owner",
            "layout",
            "inconsistent_inconsistent_owner",
            "repaired_inconsistent_owner",
        ),
        (
            "detach-ost-object",
            "layout",
            "inconsistent_orphan",
            "repaired_orphan",
        ),
        (
            "delete-dirent",
            "namespace",
            "lost_dirent_inconsistent",
            "lost_dirent_repaired",
        ),
    ];
    let mut untouched = Vec::new();
    for (class, ..) in &cases {
        let d = m.0.join(class);
        std::fs::create_dir(&d).expect("mkdir");
        for i in 0..8 {
            let f = d.join(format!("f{i}"));
            let data = format!("{class} {i} ").repeat(300 + i);
            std::fs::write(&f, &data).expect("write");
            untouched.push((f, data));
        }
    }
    for (class, kind, dry_key, fix_key) in cases {
        let dir = m.0.join(class);
        let dir = dir.to_str().expect("utf8");
        let case = ClassCase {
            class,
            kind,
            dry_key,
            fix_key,
            fix_args: &[],
        };
        let hit = inject_and_repair(&case, dir, N, &["-M", "lsrv-MDT0000"], SETTLE);
        untouched.retain(|(f, _)| !hit.iter().any(|h| h == f));
    }
    for (f, data) in &untouched {
        assert_eq!(
            std::fs::read_to_string(f).expect("read"),
            *data,
            "{}",
            f.display()
        );
    }

    // `set_param -P` is kept by the MGS's own process; the mount, which holds the client
    // key, follows it.
    ok(&["lctl", "set_param", "-P", "osc.*.max_dirty_mb=48"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = ok(&["lctl", "get_param", "-n", "osc.*.max_dirty_mb"]);
        if !v.is_empty() && v.lines().all(|l| l.trim() == "48") {
            break;
        }
        assert!(Instant::now() < deadline, "set_param -P not applied: {v}");
        std::thread::sleep(Duration::from_millis(100));
    }

    drop(m);
    cl.stop_all();
    let rep = cl.check();
    assert!(rep.is_clean(), "{}", rep.summary());
}
