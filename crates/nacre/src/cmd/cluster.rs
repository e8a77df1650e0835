//! `nacre format` and `nacre serve`: one target per process, for a cluster.

use crate::daemon;
use crate::node::{self, ServerTuning};
use crate::target::{self, TargetIdentity};
use anyhow::{Context, Result, bail};
use nacre_core::{TargetKind, TargetName};
use nacre_rpc::Key;
use nacre_rpc::conn::ConnConfig;
use nacre_rpc::mgc::Mgc;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub struct FormatArgs {
    pub dir: PathBuf,
    pub kind: TargetKind,
    pub index: u32,
    pub fsname: String,
    pub mgsnode: Option<String>,
    pub key: Option<PathBuf>,
}

pub fn run_format(a: FormatArgs) -> Result<()> {
    let name = TargetName {
        kind: a.kind,
        index: a.index,
    };
    match a.kind {
        TargetKind::Mgs => {
            let mgsnode = a
                .mgsnode
                .unwrap_or_else(|| format!("0.0.0.0:{}", crate::local::DEFAULT_MGS_PORT));
            let id = target::format_target(&a.dir, &a.fsname, name, &mgsnode)?;
            let key_path = a.dir.join(crate::local::KEY_FILE);
            let key = match &a.key {
                Some(k) => Key::load(k)?,
                None => Key::generate(),
            };
            key.save(&key_path)?;
            let client_path = crate::local::save_client_key(&a.dir, &key)?;
            println!(
                "formatted {} in {}",
                id.name().full(&id.fsname),
                a.dir.display()
            );
            println!(
                "  the file system key is {}; copy it to every server (MDT, OST) only",
                key_path.display()
            );
            println!(
                "  the client key is {}; copy it to every client (nacre mount --key)",
                client_path.display()
            );
        }
        TargetKind::Mdt | TargetKind::Ost => {
            let Some(mgsnode) = a.mgsnode else {
                bail!("formatting {} needs --mgsnode HOST:PORT", name);
            };
            let Some(k) = a.key else {
                bail!(
                    "formatting {} needs --key FILE (the key made when the MGS was formatted)",
                    name
                );
            };
            let key = Key::load(&k)?;
            let id = target::format_target(&a.dir, &a.fsname, name, &mgsnode)?;
            key.save(&a.dir.join("key"))?;
            println!(
                "formatted {} in {} (MGS at {mgsnode})",
                id.name().full(&id.fsname),
                a.dir.display()
            );
        }
    }
    Ok(())
}

pub struct ServeArgs {
    pub dir: PathBuf,
    pub listen: Option<String>,
    pub key: Option<PathBuf>,
    pub memory: u64,
}

fn key_for(dir: &Path, key: Option<&Path>) -> Result<Key> {
    let p = key
        .map(Path::to_path_buf)
        .unwrap_or_else(|| dir.join("key"));
    Key::load(&p).with_context(|| format!("{} needs the file system key", dir.display()))
}

pub fn run_serve(a: ServeArgs) -> Result<()> {
    let id = TargetIdentity::load(&a.dir)?;
    let key = key_for(&a.dir, a.key.as_deref())?;
    let rt = super::runtime()?;
    let name = id.name();
    let full = name.full(&id.fsname);
    let tuning: ServerTuning = super::up::tuning_for(a.memory, 1);
    rt.block_on(async {
        let served = match id.kind {
            TargetKind::Mgs => {
                let addr = a.listen.clone().unwrap_or_else(|| id.mgsnode.clone());
                let l = node::bind(&addr).await?;
                let (mgs, s) = node::serve_mgs(&a.dir, &id.fsname, &key, l, &tuning).await?;
                let ctl = ctl_or_warn(&a.dir, &id.fsname, &s, Some(mgs.clone()), &full);
                super::say(format_args!("{full} serving on {}", s.addr));
                (s, None, ctl)
            }
            TargetKind::Mdt | TargetKind::Ost => {
                let addr = a.listen.clone().unwrap_or_else(|| "0.0.0.0:0".to_string());
                let l = node::bind(&addr).await?;
                let cc = ConnConfig {
                    fsname: id.fsname.clone(),
                    client: full.clone(),
                    key: key.clone(),
                    max_in_flight: 8,
                    timeout: Duration::from_secs(30),
                };
                let mgc = Mgc::connect(&id.mgsnode, cc)
                    .await
                    .with_context(|| format!("cannot reach the MGS at {}", id.mgsnode))?;
                let s = if id.kind == TargetKind::Mdt {
                    node::serve_mdt(&a.dir, &id.fsname, id.index, &key, l, mgc.config(), &tuning)
                        .await?
                } else {
                    node::serve_ost(&a.dir, &id.fsname, id.index, &key, l, mgc.config(), &tuning)
                        .await?
                };
                // lctl reaches the target before any client can: a client that sees it
                // back (a restart's recovery) can read its parameters at once.
                let ctl = ctl_or_warn(&a.dir, &id.fsname, &s, None, &full);
                // Advertise an address peers can reach: the listener's, with the host
                // the MGS connection used when listening on every interface.
                let advertised = if s.addr.ip().is_unspecified() {
                    format!("{}:{}", local_ip_towards(&id.mgsnode), s.addr.port())
                } else {
                    s.addr.to_string()
                };
                mgc.register(name, &advertised)
                    .await
                    .context("cannot register with the MGS")?;
                super::say(format_args!("{full} serving on {advertised}"));
                follow_persistent(&id.fsname, &s, &mgc);
                (s, Some(mgc), ctl)
            }
        };
        let ctl = served.2;
        daemon::wait_for_signal().await;
        super::say(format_args!("{full} stopping"));
        if let Some(t) = ctl {
            t.abort();
        }
        crate::ctl::unregister_server(&a.dir);
        served.0.stop().await;
        Ok::<(), anyhow::Error>(())
    })
}

/// The parameters of a served MDT or OST that `set_param -P` may set: its own, and the
/// process's timeouts.
fn target_params(
    fsname: &str,
    s: &node::Served,
) -> Vec<std::sync::Arc<dyn crate::params::ParamSource>> {
    let mut sources: Vec<_> = s.params(fsname).into_iter().collect();
    sources.push(std::sync::Arc::new(crate::params::TimeoutParams));
    sources.push(std::sync::Arc::new(crate::params::VersionParam));
    sources
}

/// A served target follows the `set_param -P` records of its file system, as it fetches
/// them from the MGS at start and as they change (Lustre's MGC applies them to the
/// target's parameters).
fn follow_persistent(fsname: &str, s: &node::Served, mgc: &Mgc) {
    let node = crate::params::NodeParams {
        sources: target_params(fsname, s),
    };
    let mut cfg = mgc.config();
    // It holds the target: it ends when the target stops, so the stop is not kept waiting.
    let mut stopping = s.stopping();
    tokio::spawn(async move {
        loop {
            let records = cfg.borrow_and_update().params.clone();
            crate::params::apply_persistent(&node, &records);
            tokio::select! {
                r = cfg.changed() => if r.is_err() { return },
                _ = stopping.changed() => return,
            }
        }
    });
}

/// [`serve_ctl`], or a warning that `lctl` cannot reach the target (it serves anyway).
fn ctl_or_warn(
    dir: &Path,
    fsname: &str,
    s: &node::Served,
    mgs: Option<std::sync::Arc<nacre_mgs::Mgs>>,
    full: &str,
) -> Option<tokio::task::JoinHandle<()>> {
    match serve_ctl(dir, fsname, s, mgs) {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::warn!("{full}: no control socket for lctl: {e:#}");
            None
        }
    }
}

/// The control socket of a served target, so `lctl` on this node reaches its parameters
/// and its checker (and the MGS's `set_param -P`).
fn serve_ctl(
    dir: &Path,
    fsname: &str,
    s: &node::Served,
    mgs: Option<std::sync::Arc<nacre_mgs::Mgs>>,
) -> Result<tokio::task::JoinHandle<()>> {
    use crate::ctl::MountEntry;
    use crate::ctl_server::CtlServer;
    use crate::lfsck_ctl::{LfsckParams, LocalLfsck};
    use crate::params::{NodeParams, ParamSource, ServerStats};
    use std::sync::Arc;
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let entry = MountEntry {
        socket: crate::ctl::socket_path(&dir)?,
        mountpoint: dir,
        spec: s.name.full(fsname),
        fsname: fsname.to_string(),
        pid: std::process::id(),
        started: crate::daemon::process_started(std::process::id()),
    };
    let lfsck = LocalLfsck {
        mdts: s.lfsck.iter().cloned().collect(),
    };
    let mut sources: Vec<Arc<dyn ParamSource>> = target_params(fsname, s);
    sources.push(Arc::new(ServerStats::of(fsname, [s])));
    sources.push(Arc::new(LfsckParams {
        lfsck: lfsck.clone(),
    }));
    let listener = crate::ctl_server::bind_server(&entry)?;
    let targets = crate::inject_ctl::LocalTargets {
        mgs: mgs.map(|m| (m, s.net.clone())),
        mdts: s
            .mdt()
            .map(|m| (m.clone(), s.net.clone()))
            .into_iter()
            .collect(),
        osts: s
            .ost()
            .map(|o| (o.clone(), s.net.clone()))
            .into_iter()
            .collect(),
    };
    let server = Arc::new(CtlServer {
        client: None,
        entry,
        params: Arc::new(NodeParams { sources }),
        lfsck,
        targets,
    });
    Ok(tokio::spawn(server.run(listener)))
}

/// The address of the interface this node uses to reach `peer` (no packet is sent).
fn local_ip_towards(peer: &str) -> String {
    let probe = std::net::UdpSocket::bind("0.0.0.0:0").and_then(|s| {
        s.connect(peer)?;
        s.local_addr()
    });
    match probe {
        Ok(a) if !a.ip().is_unspecified() => a.ip().to_string(),
        _ => "127.0.0.1".to_string(),
    }
}
