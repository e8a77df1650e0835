//! The management service (MGS): the registry a file system is mounted from.
//!
//! It owns the file system's name, the list of its targets with their current addresses,
//! the parameters set with `lctl set_param -P` and the OST pools made with `lctl pool_new`.
//! Targets register their address each time they start; clients fetch the configuration at mount and then wait on it (a long poll), so a
//! restarted target or a new persistent parameter reaches every node at once, as Lustre's
//! config llog and lock revocation do. The state is one JSON file, replaced atomically, and
//! it holds only what outlives a run (see [`Stored`]): a restart that brings no new target
//! and no new parameter writes nothing, so a full disk does not stop a file system from
//! starting.

use bytes::Bytes;
use nacre_core::{Errno, TargetKind, TargetName};
use nacre_rpc::msg::{FsConfig, Reply, Request, TargetInfo};
use nacre_rpc::server::{RequestCtx, Service};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Longest a `MgsGetConfig { newer_than }` waits before answering with the current config.
pub const CONFIG_POLL: Duration = Duration::from_secs(20);
/// Parameters kept; `set_param -P` beyond this is refused.
pub const MAX_PARAMS: usize = 4096;
/// `config.json` is the MGS owner's alone, as the rest of a target's directory is.
const CONFIG_MODE: u32 = 0o600;

#[derive(Debug, thiserror::Error)]
pub enum MgsError {
    #[error("cannot read MGS configuration {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("cannot write MGS configuration {path}: {reason}")]
    Write { path: String, reason: String },
}

/// The MGS: configuration state and the watchers waiting on it.
pub struct Mgs {
    path: PathBuf,
    state: Mutex<State>,
    changed: watch::Sender<FsConfig>,
    /// The a-DevFail fault (`nacre inject a-DevFail --target MGS`): every request EIO.
    device_failed: std::sync::atomic::AtomicBool,
}

struct State {
    config: FsConfig,
    /// What `config.json` holds now.
    stored: Stored,
}

/// The part of the configuration `config.json` keeps: the file system's name, which targets
/// it has and the `set_param -P` records. Where a target serves and whether it is up are
/// renewed by its registration at every start, so they are kept in memory only.
#[derive(Debug, PartialEq, Eq)]
struct Stored {
    fsname: String,
    mdts: Vec<TargetName>,
    osts: Vec<TargetName>,
    params: Vec<(String, String)>,
    pools: Vec<nacre_core::pool::OstPool>,
}

impl Stored {
    fn of(c: &FsConfig) -> Stored {
        Stored {
            fsname: c.fsname.clone(),
            mdts: c.mdts.iter().map(|t| t.name).collect(),
            osts: c.osts.iter().map(|t| t.name).collect(),
            params: c.params.clone(),
            pools: c.pools.clone(),
        }
    }
}

/// The generation a change made now gets, after `prev`. Clients follow the configuration
/// by asking for one newer than theirs, so generations must keep growing across restarts
/// of the MGS, and a restart must not write a counter (that is what a full disk refuses).
/// So a generation is at least the time in microseconds: no earlier run can have reached
/// it unless the clock went back, and the stored generation covers the changes written.
fn next_generation(prev: u64) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    prev.saturating_add(1).max(now)
}

impl Mgs {
    /// Creates a new configuration for `fsname` in `dir`.
    pub fn format(dir: &Path, fsname: &str) -> Result<(), MgsError> {
        let cfg = FsConfig {
            fsname: fsname.to_string(),
            ..FsConfig::default()
        };
        save(&dir.join("config.json"), &cfg)
    }

    pub fn open(dir: &Path) -> Result<Arc<Mgs>, MgsError> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|e| MgsError::Read {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        let mut config: FsConfig = serde_json::from_str(&text).map_err(|e| MgsError::Read {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        // A target is active once it registers in this run (files written before the
        // addresses were kept in memory only still hold the last run's).
        for t in config.mdts.iter_mut().chain(config.osts.iter_mut()) {
            t.active = false;
            t.addr.clear();
        }
        config.generation = next_generation(config.generation);
        let (changed, _) = watch::channel(config.clone());
        Ok(Arc::new(Mgs {
            path,
            state: Mutex::new(State {
                stored: Stored::of(&config),
                config,
            }),
            changed,
            device_failed: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    /// Injects (or clears) a device failure: while on, every request is answered EIO, as
    /// a target whose storage failed answers. Returns whether it was on before.
    pub fn set_device_failed(&self, on: bool) -> bool {
        let was = self
            .device_failed
            .swap(on, std::sync::atomic::Ordering::AcqRel);
        if was != on {
            tracing::warn!(
                target: "mgs",
                "device failure {}",
                if on { "injected: answering every request with EIO" } else { "cleared" }
            );
        }
        was
    }

    pub fn config(&self) -> FsConfig {
        self.state.lock().config.clone()
    }

    /// Applies `f` to the configuration, persists what outlives a run if that changed, and
    /// wakes watchers.
    fn update(
        &self,
        f: impl FnOnce(&mut FsConfig) -> Result<(), Errno>,
    ) -> Result<FsConfig, Errno> {
        let mut st = self.state.lock();
        let mut next = st.config.clone();
        f(&mut next)?;
        if next == st.config {
            return Ok(next);
        }
        next.generation = next_generation(st.config.generation);
        let stored = Stored::of(&next);
        if stored != st.stored {
            save(&self.path, &next).map_err(|e| {
                tracing::error!(target: "mgs", "{e}");
                Errno::EIO
            })?;
            st.stored = stored;
        }
        st.config = next.clone();
        drop(st);
        self.changed.send_replace(next.clone());
        Ok(next)
    }

    /// Records where a target serves (called at target start-up, also in-process by `up`).
    pub fn register(&self, target: TargetName, addr: &str) -> Result<(), Errno> {
        self.update(|c| {
            let list = match target.kind {
                TargetKind::Mdt => &mut c.mdts,
                TargetKind::Ost => &mut c.osts,
                TargetKind::Mgs => return Err(Errno::EINVAL),
            };
            let info = TargetInfo {
                name: target,
                addr: addr.to_string(),
                active: true,
            };
            match list.iter_mut().find(|t| t.name == target) {
                Some(t) => *t = info,
                None => {
                    list.push(info);
                    list.sort_by_key(|t| t.name.index);
                }
            }
            Ok(())
        })
        .map(|_| ())
    }

    /// Marks a target down (its server stopped cleanly).
    pub fn deregister(&self, target: TargetName) {
        let _ = self.update(|c| {
            for t in c.mdts.iter_mut().chain(c.osts.iter_mut()) {
                if t.name == target {
                    t.active = false;
                }
            }
            Ok(())
        });
    }

    /// `set_param -P name=value`, or delete with `None`.
    pub fn set_param(&self, name: &str, value: Option<&str>) -> Result<(), Errno> {
        if name.is_empty() || name.len() > 256 || name.contains(char::is_whitespace) {
            return Err(Errno::EINVAL);
        }
        self.update(|c| {
            c.params.retain(|(n, _)| n != name);
            if let Some(v) = value {
                if c.params.len() >= MAX_PARAMS {
                    return Err(Errno::ENOSPC);
                }
                c.params.push((name.to_string(), v.to_string()));
            }
            Ok(())
        })
        .map(|_| ())
    }

    /// `lctl pool_new/pool_destroy/pool_add/pool_remove` on pool `pool` (the name without
    /// the file system's): an OST joins a pool only if the file system has it.
    pub fn pool(&self, pool: &str, op: &nacre_core::pool::PoolOp) -> Result<(), Errno> {
        let c = self.update(|c| {
            let osts: Vec<u32> = c.osts.iter().map(|t| t.name.index).collect();
            nacre_core::pool::apply(&mut c.pools, pool, op, &osts)
        })?;
        tracing::info!(target: "mgs", "pool {}.{pool}: {op:?}", c.fsname);
        Ok(())
    }

    async fn wait_newer(&self, generation: u64) -> FsConfig {
        let mut rx = self.changed.subscribe();
        let _ = tokio::time::timeout(CONFIG_POLL, rx.wait_for(|c| c.generation > generation)).await;
        self.config()
    }

    /// The configuration as it changes, for targets running in this process.
    pub fn subscribe(&self) -> watch::Receiver<FsConfig> {
        self.changed.subscribe()
    }
}

/// Writes the part of `cfg` that outlives a run (see [`Stored`]), readable by the MGS's
/// owner only, by rename.
fn save(path: &Path, cfg: &FsConfig) -> Result<(), MgsError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let err = |e: std::io::Error| MgsError::Write {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    let mut kept = cfg.clone();
    for t in kept.mdts.iter_mut().chain(kept.osts.iter_mut()) {
        t.active = false;
        t.addr.clear();
    }
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(&kept).map_err(|e| err(std::io::Error::other(e)))?;
    // A leftover from an interrupted save would keep its mode; start from a new file.
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(err(e)),
        _ => {}
    }
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(CONFIG_MODE)
            .open(&tmp)
            .map_err(err)?;
        f.write_all(text.as_bytes()).map_err(err)?;
        f.sync_all().map_err(err)?;
    }
    std::fs::rename(&tmp, path).map_err(err)
}

impl Service for Mgs {
    async fn handle(
        self: Arc<Self>,
        _ctx: RequestCtx,
        req: Request,
        _bulk: Bytes,
    ) -> Result<(Reply, Bytes), Errno> {
        if self
            .device_failed
            .load(std::sync::atomic::Ordering::Acquire)
        {
            return Err(Errno::EIO);
        }
        let reply = match req {
            Request::Ping => Reply::Pong {
                target: "MGS".to_string(),
            },
            Request::MgsRegister { target, addr } => {
                self.register(target, &addr)?;
                tracing::info!(target: "mgs", "{} registered at {addr}", target);
                Reply::Ok
            }
            Request::MgsGetConfig { newer_than } => match newer_than {
                Some(g) if g >= self.state.lock().config.generation => {
                    Reply::Config(self.wait_newer(g).await)
                }
                _ => Reply::Config(self.config()),
            },
            Request::MgsSetParam { name, value } => {
                self.set_param(&name, value.as_deref())?;
                Reply::Ok
            }
            Request::MgsPool { pool, op } => {
                self.pool(&pool, &op)?;
                Reply::Ok
            }
            // A request meant for another kind of target.
            _ => return Err(Errno::EPROTO),
        };
        Ok((reply, Bytes::new()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn register_persist_and_watch() {
        let d = tempfile::tempdir().expect("tmp");
        Mgs::format(d.path(), "testfs").expect("format");
        let m = Mgs::open(d.path()).expect("open");
        m.register(TargetName::ost(1), "127.0.0.1:9").expect("reg");
        m.register(TargetName::ost(0), "127.0.0.1:8").expect("reg");
        m.set_param("lod.*.dom_stripesize", Some("65536"))
            .expect("param");
        let c = m.config();
        assert_eq!(
            c.osts.iter().map(|t| t.name.index).collect::<Vec<_>>(),
            vec![0, 1]
        );
        let generation = c.generation;
        let m2 = m.clone();
        let waiter = tokio::spawn(async move { m2.wait_newer(generation).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        m.set_param("osc.*.max_dirty_mb", Some("64"))
            .expect("param");
        let seen = tokio::time::timeout(Duration::from_secs(2), waiter)
            .await
            .expect("woken")
            .expect("join");
        assert_eq!(seen.params.len(), 2);
        drop(m);
        let m = Mgs::open(d.path()).expect("reopen");
        let c = m.config();
        assert_eq!(c.params.len(), 2);
        assert!(
            c.osts.iter().all(|t| !t.active),
            "addresses must be re-registered after restart"
        );
        assert!(m.set_param("bad name", Some("1")).is_err());
    }

    #[test]
    fn pools_are_kept_across_restarts_and_checked_against_the_osts() {
        use nacre_core::pool::PoolOp;
        let d = tempfile::tempdir().expect("tmp");
        Mgs::format(d.path(), "testfs").expect("format");
        let m = Mgs::open(d.path()).expect("open");
        m.register(TargetName::ost(0), "127.0.0.1:8").expect("reg");
        m.register(TargetName::ost(1), "127.0.0.1:9").expect("reg");
        m.pool("flash", &PoolOp::New).expect("new");
        let before = m.config().generation;
        m.pool("flash", &PoolOp::Add(1)).expect("add");
        assert!(
            m.config().generation > before,
            "a pool change is a new generation"
        );
        assert_eq!(m.pool("flash", &PoolOp::Add(5)), Err(Errno::ENODEV));
        assert_eq!(m.pool("flash", &PoolOp::Destroy), Err(Errno::ENOTEMPTY));
        drop(m);
        let m = Mgs::open(d.path()).expect("reopen");
        let c = m.config();
        assert_eq!(c.pools.len(), 1);
        assert_eq!(
            (c.pools[0].name.as_str(), c.pools[0].osts.clone()),
            ("flash", vec![1])
        );
    }

    #[test]
    fn a_configuration_written_before_pools_opens() {
        let d = tempfile::tempdir().expect("tmp");
        std::fs::write(
            d.path().join("config.json"),
            r#"{"fsname":"old","mdts":[],"osts":[],"params":[],"generation":3}"#,
        )
        .expect("write");
        let m = Mgs::open(d.path()).expect("open");
        assert!(m.config().pools.is_empty());
    }

    /// The identity of config.json's current version: inode (it is replaced by rename),
    /// modification time and content.
    fn stored_version(dir: &Path) -> (u64, i64, i64, String) {
        use std::os::unix::fs::MetadataExt;
        let p = dir.join("config.json");
        let m = std::fs::metadata(&p).expect("stat");
        (
            m.ino(),
            m.mtime(),
            m.mtime_nsec(),
            std::fs::read_to_string(&p).expect("read"),
        )
    }

    #[test]
    fn a_restart_with_nothing_new_writes_nothing() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().expect("tmp");
        Mgs::format(d.path(), "testfs").expect("format");
        let m = Mgs::open(d.path()).expect("open");
        m.register(TargetName::mdt(0), "127.0.0.1:7").expect("reg");
        m.register(TargetName::ost(0), "127.0.0.1:8").expect("reg");
        m.set_param("osc.*.max_dirty_mb", Some("64"))
            .expect("param");
        let first_run = m.config().generation;
        m.deregister(TargetName::ost(0));
        m.deregister(TargetName::mdt(0));
        drop(m);
        let written = stored_version(d.path());
        let mode = std::fs::metadata(d.path().join("config.json"))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "config.json is readable by others");

        // The same targets come back on new ports, and go down again.
        let m = Mgs::open(d.path()).expect("reopen");
        assert!(m.config().generation > first_run);
        m.register(TargetName::mdt(0), "127.0.0.1:17").expect("reg");
        m.register(TargetName::ost(0), "127.0.0.1:18").expect("reg");
        m.set_param("osc.*.max_dirty_mb", Some("64"))
            .expect("same param");
        let c = m.config();
        assert!(
            c.generation > first_run,
            "generations go back after a restart"
        );
        assert_eq!(c.osts[0].addr, "127.0.0.1:18");
        assert!(c.osts[0].active);
        m.deregister(TargetName::ost(0));
        assert_eq!(
            stored_version(d.path()),
            written,
            "config.json was rewritten with nothing new"
        );

        // A new target and a new parameter are written.
        m.register(TargetName::ost(1), "127.0.0.1:19").expect("reg");
        assert_ne!(stored_version(d.path()), written);
        drop(m);
        let m = Mgs::open(d.path()).expect("reopen");
        let c = m.config();
        assert_eq!(
            c.osts.iter().map(|t| t.name.index).collect::<Vec<_>>(),
            vec![0, 1]
        );
        assert!(c.osts.iter().all(|t| !t.active && t.addr.is_empty()));
        assert_eq!(c.params.len(), 1);
    }
}
