//! A disk that can lose power: a directory on ext4 in an image recorded by `outagefs`
//! through a loop device (`scripts/power-cut.sh`). [`PowerCutDisk::cut`] kills the given
//! processes at once and keeps only what was synced before; the disk is then mounted
//! again as the cut left it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The harness script, in the repository.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/power-cut.sh")
}

/// Power-cut tests need root, loop devices and FUSE; `power-cut.sh install` installs
/// `outagefs` and `xfs_io` when they are missing, and a test fails when it cannot, unless
/// the environment says to skip power-cut tests.
pub fn require_power_cut() -> bool {
    if std::env::var_os("NACRE_SKIP_POWER_CUT").is_some() {
        eprintln!("NACRE_SKIP_POWER_CUT is set: skipping a power-cut test");
        return false;
    }
    if !super::require_root() || !super::require_fuse() {
        return false;
    }
    let o = Command::new("bash")
        .arg(script())
        .arg("install")
        .output()
        .expect("power-cut.sh");
    assert!(
        o.status.success(),
        "cannot install outagefs and xfs_io (or set NACRE_SKIP_POWER_CUT=1):\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    true
}

fn run(args: &[&str]) -> String {
    let o = Command::new("bash")
        .arg(script())
        .args(args)
        .output()
        .expect("power-cut.sh");
    assert!(
        o.status.success(),
        "power-cut.sh {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// One recorded disk, mounted at [`PowerCutDisk::path`]; removed on drop.
pub struct PowerCutDisk {
    _tmp: tempfile::TempDir,
    state: PathBuf,
    mnt: PathBuf,
}

impl PowerCutDisk {
    /// A new ext4 disk of `size` (`256M`), recording.
    pub fn new(size: &str) -> PowerCutDisk {
        let tmp = tempfile::tempdir().expect("tmp");
        let state = tmp.path().join("state");
        let mnt = tmp.path().join("mnt");
        run(&["start", s(&state), s(&mnt), size]);
        PowerCutDisk {
            _tmp: tmp,
            state,
            mnt,
        }
    }

    /// Where the disk is mounted.
    pub fn path(&self) -> &Path {
        &self.mnt
    }

    /// The power goes: `pids` are killed at once and the disk keeps only what was synced.
    /// The disk is unmounted until [`PowerCutDisk::power_on`].
    pub fn cut(&self, pids: &[u32]) {
        let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
        let mut args = vec!["cut", s(&self.state), s(&self.mnt)];
        args.extend(pids.iter().map(String::as_str));
        run(&args);
    }

    /// Mounts the disk as the last cut left it, recording again.
    pub fn power_on(&self) {
        run(&["start", s(&self.state), s(&self.mnt)]);
    }

    /// After a cut: up to `n` other outcomes of it (filters keeping different subsets of
    /// the writes after the last sync).
    pub fn cases(&self, n: usize) -> Vec<String> {
        run(&["cases", s(&self.state), &n.to_string()])
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Unmounts the disk and forgets every write since [`PowerCutDisk::power_on`]; the
    /// last cut's recording stays for [`PowerCutDisk::replay`].
    pub fn discard(&self) {
        run(&["discard", s(&self.state), s(&self.mnt)]);
    }

    /// After a cut (and a [`PowerCutDisk::discard`] of what came after it): the disk as
    /// outcome `filter` of that cut (see [`PowerCutDisk::cases`]).
    pub fn replay(&self, filter: &str) {
        run(&["replay", s(&self.state), filter]);
    }
}

impl Drop for PowerCutDisk {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .args(["remove", s(&self.state), s(&self.mnt)])
            .output();
    }
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf8 path")
}

/// MGS, MDT0 and OST0 as `nacre serve` processes, with one of the two targets (`mdt0` or
/// `ost0`) on a disk that can lose power and the others on plain directories: the rig of
/// the replay tests.
pub struct ReplayRig {
    pub cl: super::procs::ServeCluster,
    pub disk: PowerCutDisk,
    /// The target on the disk.
    target: &'static str,
    _tmp: tempfile::TempDir,
}

impl ReplayRig {
    pub fn new(fsname: &str, target: &'static str) -> ReplayRig {
        assert!(matches!(target, "mdt0" | "ost0"), "{target}");
        let tmp = tempfile::tempdir().expect("tmp");
        let disk = PowerCutDisk::new("192M");
        let dir = |t: &str| {
            if t == target {
                disk.path().join(t)
            } else {
                tmp.path().join(t)
            }
        };
        let mut cl = super::procs::ServeCluster::format(
            fsname,
            &tmp.path().join("mgs"),
            &[dir("mdt0")],
            &[dir("ost0")],
        );
        cl.start_all();
        ReplayRig {
            cl,
            disk,
            target,
            _tmp: tmp,
        }
    }

    /// The target's power goes, comes back, and the target restarts.
    pub fn cut(&mut self) {
        self.cl.kill(self.target);
        self.disk.cut(&[]);
        self.disk.power_on();
        self.cl.start(self.target);
    }

    /// The target's `recovery_status`.
    pub fn recovery_status(&self) -> String {
        let fs = &self.cl.fsname;
        super::param(&match self.target {
            "mdt0" => format!("mdt.{fs}-MDT0000.recovery_status"),
            _ => format!("obdfilter.{fs}-OST0000.recovery_status"),
        })
    }

    /// Stops everything; the stopped file system must pass `nacre check`.
    pub fn stop_and_check(&mut self) {
        self.cl.stop_all();
        let rep = self.cl.check();
        assert!(rep.is_clean(), "nacre check: {}", rep.summary());
    }
}

/// One field of a `recovery_status`.
pub fn status_field(status: &str, field: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}: ")))
        .unwrap_or_else(|| panic!("no {field} in recovery_status:\n{status}"))
        .trim()
        .to_string()
}

/// Writes `data` at `off` of `fid` through a handle of its own, synced or not, and closes.
#[allow(dead_code)]
pub async fn write_at(
    c: &std::sync::Arc<nacre_client::Client>,
    fid: nacre_core::Fid,
    off: u64,
    data: &[u8],
    sync: bool,
) {
    let cred = nacre_rpc::msg::Cred::root();
    let (h, _) = c
        .open(fid, super::cluster::rw(), &cred)
        .await
        .expect("open");
    c.write(&h, off, bytes::Bytes::copy_from_slice(data))
        .await
        .expect("write");
    if sync {
        c.fsync(&h).await.expect("fsync");
    }
    c.release(&h).await.expect("close");
}

/// The whole content of `fid` as `c` reads it, and never a byte past its size.
#[allow(dead_code)]
pub async fn content(
    c: &std::sync::Arc<nacre_client::Client>,
    fid: nacre_core::Fid,
) -> Result<Vec<u8>, nacre_core::Errno> {
    let size = c.getattr(fid).await?.attr.size;
    super::integrity::read_file(c, fid, size + 1).await
}

/// Sets `name` to `value` with `lctl set_param -P` through `c` and waits until the target
/// that owns it shows the value (its server follows the MGS's records).
#[allow(dead_code)]
pub async fn set_param_p_and_wait(c: &nacre_client::Client, name: &str, value: &str) {
    c.set_param_persistent(name, Some(value))
        .await
        .expect("set_param -P");
    for _ in 0..100 {
        if tokio::task::block_in_place(|| super::param(name)) == value {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("{name} never became {value}");
}

/// Each named file reads back through `c` exactly as wanted (size, then bytes).
#[allow(dead_code)]
pub async fn assert_contents(
    c: &std::sync::Arc<nacre_client::Client>,
    files: &[(&str, &(nacre_core::Fid, Vec<u8>))],
    what: &str,
) {
    for (name, (fid, want)) in files {
        let got = content(c, *fid)
            .await
            .unwrap_or_else(|e| panic!("{what}: {name}: {e}"));
        assert_eq!(got.len(), want.len(), "{what}: {name}: size");
        let first_bad = got.iter().zip(want.iter()).position(|(a, b)| a != b);
        assert_eq!(first_bad, None, "{what}: {name}: bytes differ");
    }
}

impl ReplayRig {
    /// Recovery is COMPLETE with every one of `clients` clients back and at least
    /// `replayed` requests replayed; the status, for more checks.
    #[allow(dead_code)]
    pub fn assert_recovered(&self, clients: u32, replayed: u64) -> String {
        let st = self.recovery_status();
        assert_eq!(status_field(&st, "status"), "COMPLETE", "{st}");
        assert_eq!(
            status_field(&st, "completed_clients"),
            format!("{clients}/{clients}"),
            "{st}"
        );
        let n: u64 = status_field(&st, "replayed_requests")
            .parse()
            .expect("count");
        assert!(n >= replayed, "replayed_requests {n}:\n{st}");
        st
    }
}
