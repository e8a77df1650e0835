//! Whether a target's storage is still there and working (Lustre's `health_check`).
//!
//! A target serves from its directory, and nothing stops that directory from going away
//! under a running server: after `rm -rf`, files the store holds open still read and write
//! (and fsync) as if nothing happened, and whatever it writes from then on is lost at the
//! next restart. So a target checks its storage rather than assume it:
//!
//! - identity: the target directory and every path registered with [`Health::watch`] (the
//!   identity file, the store's own directories and files) keep the device and inode they
//!   had at start; a deleted path is gone, a recreated one is another file system object;
//! - probe: a small file in the target directory ([`PROBE_FILE`]) is written, fsynced and
//!   read back.
//!
//! Both run at start; identity every [`HEALTH_INTERVAL`] and before a sync is acknowledged,
//! the probe every [`PROBE_INTERVAL`] and after an I/O error. An I/O error from the
//! device itself (EIO on a read, write or fsync of the store's files) fails the target at
//! once. A failed target stays failed until it is restarted: its requests are answered with
//! EIO, the failure is logged once, and the reason stays readable in [`Health::failure`]
//! (and in the target's `health_check` parameter).
//!
//! A failure can also be injected ([`Health::inject_failure`], `nacre inject a-DevFail`): the
//! target answers EIO as if its device had failed, until [`Health::clear_injected`] puts it
//! back; the real checks are not run meanwhile, and nothing is written.

use nacre_core::Errno;
use parking_lot::Mutex;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// How often a target checks that its paths are still its own: a stat per path, cheap
/// enough to run every second on every target.
pub const HEALTH_INTERVAL: Duration = Duration::from_secs(1);
/// How often the probe file is written, fsynced and read back: an fsync each time, so less
/// often than the identity check (a failing device also shows in the targets' own I/O).
pub const PROBE_INTERVAL: Duration = Duration::from_secs(5);
/// Longest a client waits, once a target's directory is removed, before that target's
/// requests fail with EIO: one identity check interval, plus room for a check that queues
/// behind busy blocking threads.
pub const FAILURE_NOTICED_WITHIN: Duration = Duration::from_secs(3);
/// The probe file, in the target directory.
pub const PROBE_FILE: &str = "health_probe";

#[derive(Debug, thiserror::Error)]
#[error("{name}: the storage in {dir} is not usable: {reason}")]
pub struct HealthError {
    pub name: String,
    pub dir: String,
    pub reason: String,
}

/// Why and since when a target's storage is failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub reason: String,
    pub since: SystemTime,
}

/// A path that must keep its identity while the target runs.
#[derive(Debug)]
struct Watched {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

/// The health of one target's storage; shared by the target and its stores.
#[derive(Debug)]
pub struct Health {
    name: String,
    dir: PathBuf,
    watched: Mutex<Vec<Watched>>,
    failed: AtomicBool,
    failure: Mutex<Option<Failure>>,
    /// A device failure injected on purpose: reversible, unlike `failed`.
    injected: AtomicBool,
    injected_failure: Mutex<Option<Failure>>,
    /// What the next probe writes, so a read-back of an older probe is not taken for it.
    probe_seq: AtomicU64,
    /// One probe at a time: two side by side overwrite each other's number in the one
    /// probe file, and the first to read back would take the other's for a lost write.
    probing: Mutex<()>,
    last_probe: Mutex<Instant>,
}

/// Errors that say the device or the file system under the store is failing, as opposed
/// to a full disk or a missing object.
fn is_device_error(errno: i32) -> bool {
    matches!(
        errno,
        libc::EIO | libc::EROFS | libc::EUCLEAN | libc::ENODEV | libc::ENXIO | libc::ESTALE
    )
}

impl Health {
    /// Starts watching target `name` (as logs and parameters show it) served from `dir`,
    /// which must exist; checks it with a probe first.
    pub fn open(name: impl Into<String>, dir: &Path) -> Result<Arc<Health>, HealthError> {
        let h = Health {
            name: name.into(),
            dir: dir.to_path_buf(),
            watched: Mutex::new(Vec::new()),
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            injected: AtomicBool::new(false),
            injected_failure: Mutex::new(None),
            probe_seq: AtomicU64::new(0),
            probing: Mutex::new(()),
            last_probe: Mutex::new(Instant::now()),
        };
        h.watch(dir)?;
        h.probe().map_err(|reason| h.error(reason))?;
        Ok(Arc::new(h))
    }

    fn error(&self, reason: String) -> HealthError {
        HealthError {
            name: self.name.clone(),
            dir: self.dir.display().to_string(),
            reason,
        }
    }

    /// The target's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The target directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Records `path` as it is now: from here on it must stay this very file or directory.
    pub fn watch(&self, path: &Path) -> Result<(), HealthError> {
        let m = std::fs::symlink_metadata(path)
            .map_err(|e| self.error(format!("cannot stat {}: {e}", path.display())))?;
        let mut w = self.watched.lock();
        w.retain(|x| x.path != path);
        w.push(Watched {
            path: path.to_path_buf(),
            dev: m.dev(),
            ino: m.ino(),
        });
        Ok(())
    }

    /// EIO once the storage has failed (or a failure is injected).
    pub fn ensure(&self) -> Result<(), Errno> {
        if self.is_failed() {
            return Err(Errno::EIO);
        }
        Ok(())
    }

    pub fn is_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire) || self.injected.load(Ordering::Acquire)
    }

    /// Why the storage failed, if it did: a real failure first, else an injected one.
    pub fn failure(&self) -> Option<Failure> {
        self.failure
            .lock()
            .clone()
            .or_else(|| self.injected_failure.lock().clone())
    }

    /// Makes the storage answer as a failed device does (every request EIO) until
    /// [`clear_injected`](Self::clear_injected); `reason` is what `health_check` shows.
    pub fn inject_failure(&self, reason: impl Into<String>) {
        let reason = reason.into();
        tracing::warn!(
            target: "osd",
            "{}: device failure injected, answering every request with EIO: {reason}",
            self.name
        );
        *self.injected_failure.lock() = Some(Failure {
            reason,
            since: SystemTime::now(),
        });
        self.injected.store(true, Ordering::Release);
    }

    /// Ends an injected failure; whether one was injected. A real failure stays.
    pub fn clear_injected(&self) -> bool {
        let was = self.injected.swap(false, Ordering::AcqRel);
        *self.injected_failure.lock() = None;
        if was {
            tracing::warn!(target: "osd", "{}: injected device failure cleared", self.name);
        }
        was
    }

    /// Whether a failure is injected now.
    pub fn is_injected(&self) -> bool {
        self.injected.load(Ordering::Acquire)
    }

    /// `healthy`, or `NOT HEALTHY: reason` (the `health_check` parameter).
    pub fn status(&self) -> String {
        match self.failure() {
            None => "healthy".to_string(),
            Some(f) => format!("NOT HEALTHY: {}", f.reason),
        }
    }

    /// Marks the storage failed (the first reason stays) and says so in the log, once.
    pub fn fail(&self, reason: impl Into<String>) {
        let mut f = self.failure.lock();
        if f.is_some() {
            return;
        }
        let reason = reason.into();
        tracing::error!(
            target: "osd",
            "{}: storage failed, answering every request with EIO until restarted: {reason}",
            self.name
        );
        *f = Some(Failure {
            reason,
            since: SystemTime::now(),
        });
        self.failed.store(true, Ordering::Release);
    }

    /// An error from the store's own I/O (`what` says on what): a device error fails the
    /// target; the errno goes back to the caller either way.
    pub fn io_error(&self, what: impl std::fmt::Display, e: std::io::Error) -> Errno {
        if e.raw_os_error().is_some_and(is_device_error) {
            self.fail(format!("I/O error on {what}: {e}"));
        }
        Errno::from(e)
    }

    /// Checks that every watched path is still the one it was; EIO (and failed) if not.
    pub fn verify(&self) -> Result<(), Errno> {
        self.ensure()?;
        let problem = {
            let w = self.watched.lock();
            w.iter()
                .find_map(|x| match std::fs::symlink_metadata(&x.path) {
                    Err(e) => Some(format!("{} is gone ({e})", x.path.display())),
                    Ok(m) if (m.dev(), m.ino()) != (x.dev, x.ino) => Some(format!(
                        "{} was replaced (device:inode {}:{}, was {}:{})",
                        x.path.display(),
                        m.dev(),
                        m.ino(),
                        x.dev,
                        x.ino
                    )),
                    Ok(_) => None,
                })
        };
        if let Some(p) = problem {
            self.fail(p);
            return Err(Errno::EIO);
        }
        Ok(())
    }

    /// [`verify`](Self::verify), then the probe.
    pub fn check(&self) -> Result<(), Errno> {
        self.verify()?;
        if let Err(reason) = self.probe() {
            self.fail(reason);
            return Err(Errno::EIO);
        }
        Ok(())
    }

    /// One periodic check: identity, and the probe when it is due.
    pub fn tick(&self) -> Result<(), Errno> {
        if self.last_probe.lock().elapsed() >= PROBE_INTERVAL {
            self.check()
        } else {
            self.verify()
        }
    }

    /// Whether a request that failed with `e` is worth [`after_error`](Self::after_error):
    /// only errors of the device. Most failed requests are answers (no such name, no
    /// permission), and a check's thread switch would cost them more than their work.
    fn worth_checking(e: Errno) -> bool {
        is_device_error(e.0)
    }

    /// A target's request failed with `e`: a device error is checked now, on a blocking
    /// thread ([`after_error`](Self::after_error) may probe, an fsync), rather than at the
    /// next periodic check; any other failure is an answer, and costs nothing here.
    pub async fn after_failed_request(self: &Arc<Self>, e: Errno) {
        if !Self::worth_checking(e) {
            return;
        }
        let h = self.clone();
        let _ = tokio::task::spawn_blocking(move || h.after_error(e)).await;
    }

    /// After a request failed with `e`: a storage error is worth a check, so a target
    /// whose storage went away stops answering from it at once. The probe (an fsync) runs
    /// at most once per [`HEALTH_INTERVAL`], however many requests fail.
    pub fn after_error(&self, e: Errno) -> Result<(), Errno> {
        if !Self::worth_checking(e) {
            return Ok(());
        }
        if self.last_probe.lock().elapsed() >= HEALTH_INTERVAL {
            self.check()
        } else {
            self.verify()
        }
    }

    /// Writes, fsyncs and reads back the probe file. A full disk is not a failure (the
    /// probe overwrites its own block in place, and ENOSPC is the caller's to report).
    fn probe(&self) -> Result<(), String> {
        let _one = self.probing.lock();
        *self.last_probe.lock() = Instant::now();
        let path = self.dir.join(PROBE_FILE);
        let n = self.probe_seq.fetch_add(1, Ordering::Relaxed);
        let want = format!("{n:020}\n");
        let res = (|| -> std::io::Result<Vec<u8>> {
            // Never O_CREAT above the target directory: a missing directory is an error.
            let f = crate::private_file()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)?;
            f.write_all_at(want.as_bytes(), 0)?;
            f.sync_all()?;
            let mut got = vec![0u8; want.len()];
            f.read_exact_at(&mut got, 0)?;
            Ok(got)
        })();
        match res {
            Ok(got) if got == want.as_bytes() => Ok(()),
            Ok(got) => Err(format!(
                "probe {} read back {:?}, wrote {want:?}",
                path.display(),
                String::from_utf8_lossy(&got)
            )),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) => Ok(()),
            Err(e) => Err(format!("probe {} failed: {e}", path.display())),
        }
    }

    /// Checks every [`HEALTH_INTERVAL`] until `shutdown` or the storage fails.
    pub async fn monitor(self: Arc<Self>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(HEALTH_INTERVAL) => {}
                _ = shutdown.changed() => return,
            }
            if self.is_injected() {
                // Nothing to check on a device that only pretends to have failed.
                continue;
            }
            let h = self.clone();
            let r = tokio::task::spawn_blocking(move || h.tick()).await;
            // Only a real failure ends the watch: an injected one is cleared again.
            if !matches!(r, Ok(Ok(()))) && self.failed.load(Ordering::Acquire) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only device errors send a failed request to the health check; the answers most
    /// failed requests are (no such name, no permission, exists) do not.
    #[test]
    fn only_device_errors_are_worth_a_check() {
        for e in [Errno::EIO, Errno::EROFS, Errno::ENODEV, Errno::ENXIO] {
            assert!(Health::worth_checking(e), "{e:?}");
        }
        for e in [
            Errno::ENOENT,
            Errno::EACCES,
            Errno::EPERM,
            Errno::EEXIST,
            Errno::ENOTEMPTY,
            Errno::ENOSPC,
            Errno::EINVAL,
        ] {
            assert!(!Health::worth_checking(e), "{e:?}");
        }
    }

    /// The periodic check and the checks after errors run side by side; a healthy store
    /// passes every one (they once raced on the probe file and failed the target).
    #[test]
    fn probes_side_by_side_never_fail_a_healthy_target() {
        let d = tempfile::tempdir().expect("tmp");
        let h = Arc::new(Health::open("fs-MDT0000", d.path()).expect("open"));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let h = h.clone();
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        h.probe()?;
                    }
                    Ok::<(), String>(())
                })
            })
            .collect();
        for t in threads {
            assert_eq!(t.join().expect("join"), Ok(()));
        }
    }

    #[test]
    fn a_removed_or_replaced_path_fails_the_target_once() {
        let d = tempfile::tempdir().expect("tmp");
        let dir = d.path().join("ost0");
        std::fs::create_dir(&dir).expect("mkdir");
        std::fs::write(dir.join("target.json"), b"{}").expect("identity");
        let h = Health::open("fs-OST0000", &dir).expect("open");
        h.watch(&dir.join("target.json")).expect("watch");
        assert_eq!(h.check(), Ok(()));
        assert_eq!(h.status(), "healthy");
        // Replaced by another file of the same name: not the same target any more.
        std::fs::remove_file(dir.join("target.json")).expect("rm");
        std::fs::write(dir.join("target.json"), b"{}").expect("again");
        // (Unless the file system handed the same inode back.)
        let same = std::fs::metadata(dir.join("target.json"))
            .expect("stat")
            .ino()
            == h.watched.lock()[1].ino;
        if !same {
            assert_eq!(h.verify(), Err(Errno::EIO));
            assert!(h.status().contains("was replaced"), "{}", h.status());
        }
        std::fs::remove_dir_all(&dir).expect("rm -rf");
        assert_eq!(h.check(), Err(Errno::EIO));
        assert_eq!(h.ensure(), Err(Errno::EIO));
        let f = h.failure().expect("failure kept");
        assert!(f.reason.contains("ost0"), "{}", f.reason);
        // The first reason stays.
        h.fail("later");
        assert_eq!(h.failure(), Some(f));
        assert!(!dir.exists(), "nothing recreated the target directory");
    }

    #[test]
    fn an_injected_failure_answers_eio_until_cleared() {
        let d = tempfile::tempdir().expect("tmp");
        let h = Health::open("fs-OST0001", d.path()).expect("open");
        h.inject_failure("injected");
        assert_eq!(h.ensure(), Err(Errno::EIO));
        assert_eq!(h.check(), Err(Errno::EIO));
        assert_eq!(h.status(), "NOT HEALTHY: injected");
        assert!(h.clear_injected());
        assert_eq!(h.ensure(), Ok(()));
        assert_eq!(h.check(), Ok(()));
        assert_eq!(h.status(), "healthy");
        assert!(!h.clear_injected());
    }

    #[test]
    fn a_missing_directory_cannot_be_opened_and_the_probe_needs_no_watch() {
        let d = tempfile::tempdir().expect("tmp");
        assert!(Health::open("x", &d.path().join("none")).is_err());
        let h = Health::open("x", d.path()).expect("open");
        std::fs::remove_file(d.path().join(PROBE_FILE)).expect("rm probe");
        // The probe makes its file again: only the directory matters.
        assert_eq!(h.check(), Ok(()));
        assert_eq!(
            h.io_error("x", std::io::Error::from_raw_os_error(libc::ENOSPC)),
            Errno(libc::ENOSPC)
        );
        assert!(!h.is_failed());
        h.io_error("object 1", std::io::Error::from_raw_os_error(libc::EIO));
        assert!(h.status().starts_with("NOT HEALTHY: I/O error on object 1"));
    }
}
