//! Running targets: bind a listener, open the target's store, serve its requests.
//!
//! The same functions run a target in `nacre up` (all in one process) and in `nacre serve`
//! (one target per process); only how the target registers with the MGS differs.

use anyhow::{Context, Result, anyhow};
use nacre_core::TargetName;
use nacre_lfsck::MdtLfsck;
use nacre_mdt::{Mdt, MdtConfig};
use nacre_mgs::Mgs;
use nacre_osd::{Health, MdStoreConfig, ObjStore, ObjStoreConfig};
use nacre_ost::Ost;
use nacre_rpc::Key;
use nacre_rpc::conn::ConnConfig;
use nacre_rpc::msg::FsConfig;
use nacre_rpc::server::{ServerConfig, serve};
use nacre_rpc::stats::OpStats;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Longest a stopping MDT waits for its background tasks to let go of it (a settle syncs
/// the objects of one file; the loops end at the shutdown signal).
pub const MDT_STOP_DRAIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Binds `addr`, saying clearly when the port is taken.
pub async fn bind(addr: &str) -> Result<TcpListener> {
    TcpListener::bind(addr).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            anyhow!("cannot listen on {addr}: the port is already in use (is another nacre or service running there?)")
        } else {
            anyhow!("cannot listen on {addr}: {e}")
        }
    })
}

enum Kind {
    Mgs,
    Mdt(Arc<Mdt>),
    Ost(Arc<Ost>),
}

impl Kind {
    /// The target's own parameters (`mdt.<target>.*`, `obdfilter.<target>.*`), those
    /// `set_param -P` sets on it; the MGS has none.
    fn params(&self, fsname: &str) -> Option<Arc<dyn crate::params::ParamSource>> {
        let fsname = fsname.to_string();
        match self {
            Kind::Mdt(m) => Some(Arc::new(crate::params::MdtParams {
                fsname,
                mdt: m.clone(),
            })),
            Kind::Ost(o) => Some(Arc::new(crate::params::OstParams {
                fsname,
                ost: o.clone(),
            })),
            Kind::Mgs => None,
        }
    }
}

/// A target being served.
pub struct Served {
    pub name: TargetName,
    pub addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
    kind: Kind,
    /// Requests handled, by opcode.
    pub stats: Arc<OpStats>,
    /// The checker of an MDT.
    pub lfsck: Option<Arc<MdtLfsck>>,
    /// The c-Network fault switch of its request handling.
    pub net: Arc<nacre_rpc::fault::NetFault>,
    /// Its service time estimate (`*.*.timeouts`).
    pub service_at: Arc<nacre_rpc::at::AdaptiveTimeout>,
}

impl Served {
    /// Changes to `true` when the target stops: work that holds the target ends then.
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Stops accepting, stops background work and closes the store cleanly.
    pub async fn stop(self) {
        let _ = self.shutdown.send(true);
        match &self.kind {
            Kind::Mdt(m) => m.stop().await,
            Kind::Ost(o) => o.stop().await,
            Kind::Mgs => {}
        }
        let _ = self.task.await;
        if let Kind::Mdt(m) = &self.kind {
            let started = std::time::Instant::now();
            // The MDT's background work (size settles, its loops) holds it until it sees
            // the shutdown, and with it the store's database, which a restart in this
            // process or `nacre check` can open only once the last holder lets go.
            while Arc::strong_count(m) > 1 && started.elapsed() < MDT_STOP_DRAIN {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            if Arc::strong_count(m) > 1 {
                tracing::warn!(
                    "MDT{:04x}: background work still holds it {} s after the stop",
                    m.index,
                    MDT_STOP_DRAIN.as_secs()
                );
            }
        }
    }

    /// Its own parameters, as `set_param` names them (none for the MGS).
    pub fn params(&self, fsname: &str) -> Option<Arc<dyn crate::params::ParamSource>> {
        self.kind.params(fsname)
    }

    pub fn mdt(&self) -> Option<&Arc<Mdt>> {
        match &self.kind {
            Kind::Mdt(m) => Some(m),
            _ => None,
        }
    }

    pub fn ost(&self) -> Option<&Arc<Ost>> {
        match &self.kind {
            Kind::Ost(o) => Some(o),
            _ => None,
        }
    }

    pub fn is_mgs(&self) -> bool {
        matches!(self.kind, Kind::Mgs)
    }

    pub fn is_ost(&self) -> bool {
        matches!(self.kind, Kind::Ost(_))
    }
}

fn server_config(
    fsname: &str,
    name: TargetName,
    key: &Key,
    tuning: &ServerTuning,
) -> Arc<ServerConfig> {
    Arc::new(ServerConfig {
        fsname: fsname.to_string(),
        target: name.full(fsname),
        key: key.clone(),
        memory: tuning.memory.clone(),
        stats: Default::default(),
        net: Default::default(),
        service_at: Default::default(),
    })
}

/// Serves the MGS in `dir`; its requests count against the process's memory budget
/// (`tuning.memory`) as every target's do.
pub async fn serve_mgs(
    dir: &Path,
    fsname: &str,
    key: &Key,
    listener: TcpListener,
    tuning: &ServerTuning,
) -> Result<(Arc<Mgs>, Served)> {
    crate::target::restrict_dir(dir)?;
    let mgs = Mgs::open(dir)?;
    let addr = listener.local_addr()?;
    let (shutdown, rx) = watch::channel(false);
    let scfg = server_config(fsname, TargetName::mgs(), key, tuning);
    let stats = scfg.stats.clone();
    let net = scfg.net.clone();
    let service_at = scfg.service_at.clone();
    let task = tokio::spawn(serve(listener, scfg, mgs.clone(), rx));
    Ok((
        mgs,
        Served {
            name: TargetName::mgs(),
            addr,
            shutdown,
            task,
            kind: Kind::Mgs,
            stats,
            lfsck: None,
            net,
            service_at,
        },
    ))
}

/// Starts watching the storage of target `name` in `dir`: the directory, its identity
/// file, and (registered by the stores) what the stores keep there.
fn target_health(dir: &Path, fsname: &str, name: TargetName) -> Result<Arc<Health>> {
    let health = Health::open(name.full(fsname), dir)?;
    health.watch(&dir.join(crate::target::TARGET_FILE))?;
    Ok(health)
}

/// Tunables of a server process.
#[derive(Clone, Debug)]
pub struct ServerTuning {
    pub store: MdStoreConfig,
    pub obj: ObjStoreConfig,
    /// Bytes of requests and replies all targets of the process may hold at once.
    pub memory: Arc<nacre_rpc::memory::MemoryBudget>,
}

/// Server request memory when no budget is given.
pub const DEFAULT_SERVER_MEMORY: u64 = 512 << 20;

impl Default for ServerTuning {
    fn default() -> Self {
        ServerTuning {
            store: MdStoreConfig::default(),
            obj: ObjStoreConfig::default(),
            memory: nacre_rpc::memory::MemoryBudget::new(DEFAULT_SERVER_MEMORY),
        }
    }
}

/// Applies the file system's `set_param -P` records (fetched from the MGS) to a target's
/// own parameters before it serves its first request, as Lustre's target applies its
/// config log at setup: a restarted MDT squashes root from its first replay on, not from
/// whenever the MGC's follower catches up. Process-wide ones (timeouts) stay with the
/// follower of a `nacre serve` process: an in-process file system's targets share theirs.
fn apply_before_serving(fsname: &str, kind: &Kind, config: &watch::Receiver<FsConfig>) {
    let Some(own) = kind.params(fsname) else {
        return;
    };
    let records = config.borrow().params.clone();
    let node = crate::params::NodeParams { sources: vec![own] };
    crate::params::apply_persistent(&node, &records);
}

pub async fn serve_mdt(
    dir: &Path,
    fsname: &str,
    index: u32,
    key: &Key,
    listener: TcpListener,
    config: watch::Receiver<FsConfig>,
    tuning: &ServerTuning,
) -> Result<Served> {
    let name = TargetName::mdt(index);
    crate::target::restrict_dir(dir)?;
    let cfg = MdtConfig {
        fsname: fsname.to_string(),
        index,
        dir: dir.to_path_buf(),
        store: tuning.store.clone(),
        conn: ConnConfig {
            fsname: fsname.to_string(),
            client: name.full(fsname),
            key: key.clone(),
            max_in_flight: 64,
            timeout: nacre_rpc::conn::DEFAULT_TIMEOUT,
        },
        health: target_health(dir, fsname, name)?,
    };
    let mgs_config = config.clone();
    let mdt = Mdt::start(cfg, config)
        .await
        .with_context(|| format!("cannot start {}", name.full(fsname)))?;
    let kind = Kind::Mdt(mdt.clone());
    apply_before_serving(fsname, &kind, &mgs_config);
    let lfsck = MdtLfsck::attach(&mdt);
    let addr = listener.local_addr()?;
    let (shutdown, rx) = watch::channel(false);
    let scfg = server_config(fsname, name, key, tuning);
    let stats = scfg.stats.clone();
    let net = scfg.net.clone();
    let service_at = scfg.service_at.clone();
    let task = tokio::spawn(serve(listener, scfg, mdt.clone(), rx));
    Ok(Served {
        name,
        addr,
        shutdown,
        task,
        kind,
        stats,
        lfsck: Some(lfsck),
        net,
        service_at,
    })
}

/// Serves OST `index` in `dir`; `config` (the file system's, from the MGS) lets it name
/// the files of bad blocks its scrub finds by path, asking their MDTs.
pub async fn serve_ost(
    dir: &Path,
    fsname: &str,
    index: u32,
    key: &Key,
    listener: TcpListener,
    config: watch::Receiver<FsConfig>,
    tuning: &ServerTuning,
) -> Result<Served> {
    let name = TargetName::ost(index);
    crate::target::restrict_dir(dir)?;
    let health = target_health(dir, fsname, name)?;
    let store = ObjStore::open(dir, tuning.obj.clone(), health).with_context(|| {
        format!(
            "cannot open the objects of {} in {}",
            name.full(fsname),
            dir.display()
        )
    })?;
    let ost = Arc::new(Ost::new(index, store).with_context(|| {
        format!(
            "cannot read the recovery records of {} in {}",
            name.full(fsname),
            dir.display()
        )
    })?);
    ost.store().set_name(&name.full(fsname));
    ost.set_lfsck(nacre_lfsck::OstLfsck::new(index, ost.store().clone()));
    let kind = Kind::Ost(ost.clone());
    apply_before_serving(fsname, &kind, &config);
    ost.scrub().set_resolver(nacre_ost::fid2path::resolver(
        config,
        ConnConfig {
            fsname: fsname.to_string(),
            client: name.full(fsname),
            key: key.clone(),
            max_in_flight: 4,
            timeout: nacre_rpc::conn::DEFAULT_TIMEOUT,
        },
    ));
    let addr = listener.local_addr()?;
    let (shutdown, rx) = watch::channel(false);
    let scfg = server_config(fsname, name, key, tuning);
    let stats = scfg.stats.clone();
    let net = scfg.net.clone();
    let service_at = scfg.service_at.clone();
    tokio::spawn(ost.clone().housekeeping(rx.clone()));
    let task = tokio::spawn(serve(listener, scfg, ost.clone(), rx));
    Ok(Served {
        name,
        addr,
        shutdown,
        task,
        kind,
        stats,
        lfsck: None,
        net,
        service_at,
    })
}
