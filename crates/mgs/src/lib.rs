//! The management service (MGS): the registry a file system is mounted from.
//!
//! It owns the file system's name, the list of its targets with their current addresses, and
//! the parameters set with `lctl set_param -P`. Targets register their address each time they
//! start; clients fetch the configuration at mount and then wait on it (a long poll), so a
//! restarted target or a new persistent parameter reaches every node at once, as Lustre's
//! config llog and lock revocation do. The state is one JSON file, replaced atomically.

use bytes::Bytes;
use nacre_core::{Errno, TargetKind};
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
    config: Mutex<FsConfig>,
    changed: watch::Sender<FsConfig>,
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
        // Addresses are those of the last run; a target is active once it registers again.
        for t in config.mdts.iter_mut().chain(config.osts.iter_mut()) {
            t.active = false;
        }
        let (changed, _) = watch::channel(config.clone());
        Ok(Arc::new(Mgs {
            path,
            config: Mutex::new(config),
            changed,
        }))
    }

    pub fn config(&self) -> FsConfig {
        self.config.lock().clone()
    }

    /// Applies `f` to the configuration, persists it and wakes watchers.
    fn update(
        &self,
        f: impl FnOnce(&mut FsConfig) -> Result<(), Errno>,
    ) -> Result<FsConfig, Errno> {
        let mut c = self.config.lock();
        let mut next = c.clone();
        f(&mut next)?;
        next.generation += 1;
        save(&self.path, &next).map_err(|e| {
            tracing::error!(target: "mgs", "{e}");
            Errno::EIO
        })?;
        *c = next.clone();
        drop(c);
        self.changed.send_replace(next.clone());
        Ok(next)
    }

    /// Records where a target serves (called at target start-up, also in-process by `up`).
    pub fn register(&self, target: nacre_core::TargetName, addr: &str) -> Result<(), Errno> {
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
    pub fn deregister(&self, target: nacre_core::TargetName) {
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

fn save(path: &Path, cfg: &FsConfig) -> Result<(), MgsError> {
    let err = |e: std::io::Error| MgsError::Write {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(cfg).map_err(|e| err(std::io::Error::other(e)))?;
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp).map_err(err)?;
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
                Some(g) if g >= self.config.lock().generation => {
                    Reply::Config(self.wait_newer(g).await)
                }
                _ => Reply::Config(self.config()),
            },
            Request::MgsSetParam { name, value } => {
                self.set_param(&name, value.as_deref())?;
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
    use nacre_core::TargetName;

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
}
