//! A whole file system in one process: what `nacre up` runs and what tests start.
//!
//! Layout of the directory:
//! ```text
//! DIR/nacre.json   file system name, target counts, MGS port
//! DIR/key          the shared key
//! DIR/mgs/         the MGS
//! DIR/mdt0 ...     MDTs
//! DIR/ost0 ...     OSTs
//! DIR/nacre.log    the log of `up --background`; DIR/run.json its process
//! ```
//! All of it is its owner's only (directories 0700, files 0600): the data's permissions
//! are the servers' to enforce, not the local host's to bypass.
//! The MGS listens on a port fixed at format time (so the mount spec printed once stays
//! valid); MDTs and OSTs take any free port and register it with the MGS.

use crate::node::{self, Served, ServerTuning};
use crate::target::{self, TargetIdentity, write_atomic};
use anyhow::{Context, Result, bail};
use nacre_core::{TargetKind, TargetName};
use nacre_mgs::Mgs;
use nacre_rpc::Key;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub const LOCAL_FILE: &str = "nacre.json";
/// The file system key: the servers' (see [`nacre_rpc::auth::PeerRole`]).
pub const KEY_FILE: &str = "key";
/// The key a client node is given: derived from [`KEY_FILE`], it mounts the file system
/// but is refused the servers' own requests.
pub const CLIENT_KEY_FILE: &str = "client.key";

/// Writes `dir`'s client key beside its file system key, unless it is there already.
pub fn save_client_key(dir: &Path, key: &Key) -> Result<PathBuf> {
    let p = dir.join(CLIENT_KEY_FILE);
    if !p.exists() {
        key.client_key().save(&p)?;
    }
    Ok(p)
}

/// The client key of the file system in `dir`: its client key file, or the one derived
/// from its file system key (a directory made before client keys existed).
pub fn client_key(dir: &Path) -> Result<Key> {
    let p = dir.join(CLIENT_KEY_FILE);
    if p.exists() {
        return Ok(Key::load(&p)?);
    }
    Ok(Key::load(&dir.join(KEY_FILE))?.client_key())
}
/// Lustre's port (988) is privileged; nacre's default MGS port sits above.
pub const DEFAULT_MGS_PORT: u16 = 9880;

/// `DIR/nacre.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalFs {
    pub fsname: String,
    pub mdts: u32,
    pub osts: u32,
    pub host: String,
    pub mgs_port: u16,
}

impl LocalFs {
    pub fn load(dir: &Path) -> Result<LocalFs> {
        let p = dir.join(LOCAL_FILE);
        let text = std::fs::read_to_string(&p).with_context(|| {
            format!(
                "{} holds no nacre file system (no {LOCAL_FILE})",
                dir.display()
            )
        })?;
        serde_json::from_str(&text).with_context(|| format!("{} is malformed", p.display()))
    }

    pub fn spec(&self) -> String {
        format!("{}:{}:/{}", self.host, self.mgs_port, self.fsname)
    }

    pub fn mgs_addr(&self) -> String {
        format!("{}:{}", self.host, self.mgs_port)
    }
}

pub fn target_dir(dir: &Path, name: TargetName) -> PathBuf {
    match name.kind {
        TargetKind::Mgs => dir.join("mgs"),
        TargetKind::Mdt => dir.join(format!("mdt{}", name.index)),
        TargetKind::Ost => dir.join(format!("ost{}", name.index)),
    }
}

/// Picks a free port on the loopback interface.
pub fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// Formats a new file system in `dir`. `mgs_port` 0 picks a free port.
pub fn format(dir: &Path, fsname: &str, mdts: u32, osts: u32, mgs_port: u16) -> Result<LocalFs> {
    if mdts == 0 {
        bail!("a file system needs at least one MDT");
    }
    if mdts > 256 || osts > 1024 {
        bail!("at most 256 MDTs and 1024 OSTs in one process");
    }
    target::prepare_dir(dir)?;
    if dir.join(LOCAL_FILE).exists() {
        bail!("{} already holds a file system", dir.display());
    }
    let port = if mgs_port == 0 {
        free_port()?
    } else {
        mgs_port
    };
    let fs = LocalFs {
        fsname: fsname.to_string(),
        mdts,
        osts,
        host: "127.0.0.1".to_string(),
        mgs_port: port,
    };
    let key_path = dir.join(KEY_FILE);
    if !key_path.exists() {
        Key::generate().save(&key_path)?;
    }
    save_client_key(dir, &Key::load(&key_path)?)?;
    let mgsnode = fs.mgs_addr();
    target::format_target(
        &target_dir(dir, TargetName::mgs()),
        fsname,
        TargetName::mgs(),
        &mgsnode,
    )?;
    for i in 0..mdts {
        let n = TargetName::mdt(i);
        target::format_target(&target_dir(dir, n), fsname, n, &mgsnode)?;
    }
    for i in 0..osts {
        let n = TargetName::ost(i);
        target::format_target(&target_dir(dir, n), fsname, n, &mgsnode)?;
    }
    // Written last: its presence means the format finished.
    write_atomic(
        &dir.join(LOCAL_FILE),
        serde_json::to_string_pretty(&fs)?.as_bytes(),
    )?;
    Ok(fs)
}

/// A running file system.
pub struct LocalCluster {
    pub dir: PathBuf,
    pub fs: LocalFs,
    pub key: Key,
    pub mgs: Arc<Mgs>,
    mgs_served: Option<Served>,
    pub mdts: Vec<Option<Served>>,
    pub osts: Vec<Option<Served>>,
    tuning: ServerTuning,
}

/// How long a start waits for its MDTs to reach their OSTs.
pub const OSP_READY_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl LocalCluster {
    /// Starts every target of the file system in `dir`.
    pub async fn start(dir: &Path, tuning: ServerTuning) -> Result<LocalCluster> {
        let fs = LocalFs::load(dir)?;
        // The directory holds the logs and run state beside the targets (each of which
        // its server closes too).
        target::restrict_dir(dir)?;
        let key = Key::load(&dir.join(KEY_FILE))?;
        save_client_key(dir, &key)?;
        let listener = node::bind(&fs.mgs_addr()).await?;
        let mgs_dir = target_dir(dir, TargetName::mgs());
        TargetIdentity::load(&mgs_dir)?;
        let (mgs, mgs_served) =
            node::serve_mgs(&mgs_dir, &fs.fsname, &key, listener, &tuning).await?;
        let mut c = LocalCluster {
            dir: dir.to_path_buf(),
            fs: fs.clone(),
            key,
            mgs,
            mgs_served: Some(mgs_served),
            mdts: (0..fs.mdts).map(|_| None).collect(),
            osts: (0..fs.osts).map(|_| None).collect(),
            tuning,
        };
        // OSTs first: MDTs set up their object pools from the OST list at start.
        for i in 0..fs.osts {
            c.start_ost(i).await?;
        }
        for i in 0..fs.mdts {
            c.start_mdt(i).await?;
        }
        c.wait_osps_reachable().await;
        Ok(c)
    }

    /// Waits (within [`OSP_READY_WAIT`]) until every MDT has reached every OST, so the
    /// first files get their full stripe counts and their mirrors different OSTs: an OST
    /// an MDT has not reached yet takes no objects.
    async fn wait_osps_reachable(&self) {
        let end = std::time::Instant::now() + OSP_READY_WAIT;
        for s in self.mdts.iter().flatten() {
            let Some(m) = s.mdt() else { continue };
            loop {
                let osps = m.lod().osps();
                if osps.len() >= self.fs.osts as usize && osps.iter().all(|o| o.is_reachable()) {
                    break;
                }
                if std::time::Instant::now() >= end {
                    tracing::warn!(
                        "MDT{:04x} has not reached every OST after {} s; new files use the \
                         OSTs it has",
                        m.index,
                        OSP_READY_WAIT.as_secs()
                    );
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }

    pub fn spec(&self) -> String {
        self.fs.spec()
    }

    /// The directory of target `name`, which must hold that target of this file system.
    fn checked_target_dir(&self, name: TargetName) -> Result<PathBuf> {
        let d = target_dir(&self.dir, name);
        let id = TargetIdentity::load(&d)?;
        if id.name() != name || id.fsname != self.fs.fsname {
            bail!(
                "{} holds {} of '{}', expected {}",
                d.display(),
                id.name(),
                id.fsname,
                name
            );
        }
        Ok(d)
    }

    pub async fn start_ost(&mut self, i: u32) -> Result<()> {
        let name = TargetName::ost(i);
        let d = self.checked_target_dir(name)?;
        let listener = node::bind("127.0.0.1:0").await?;
        let s = node::serve_ost(
            &d,
            &self.fs.fsname,
            i,
            &self.key,
            listener,
            self.mgs.subscribe(),
            &self.tuning,
        )
        .await?;
        self.mgs
            .register(name, &s.addr.to_string())
            .map_err(|e| anyhow::anyhow!("cannot register {name}: {e}"))?;
        self.osts[i as usize] = Some(s);
        Ok(())
    }

    pub async fn start_mdt(&mut self, i: u32) -> Result<()> {
        let name = TargetName::mdt(i);
        let d = self.checked_target_dir(name)?;
        let listener = node::bind("127.0.0.1:0").await?;
        let s = node::serve_mdt(
            &d,
            &self.fs.fsname,
            i,
            &self.key,
            listener,
            self.mgs.subscribe(),
            &self.tuning,
        )
        .await?;
        self.mgs
            .register(name, &s.addr.to_string())
            .map_err(|e| anyhow::anyhow!("cannot register {name}: {e}"))?;
        self.mdts[i as usize] = Some(s);
        Ok(())
    }

    /// Stops one OST (its port closes; clients see it go away).
    pub async fn stop_ost(&mut self, i: u32) {
        if let Some(s) = self.osts.get_mut(i as usize).and_then(Option::take) {
            self.mgs.deregister(s.name);
            s.stop().await;
        }
    }

    pub async fn stop_mdt(&mut self, i: u32) {
        if let Some(s) = self.mdts.get_mut(i as usize).and_then(Option::take) {
            self.mgs.deregister(s.name);
            s.stop().await;
        }
    }

    /// Stops the MGS alone (the targets keep serving what they were told).
    /// The c-Network fault switch of the MGS, while it runs.
    pub fn mgs_net(&self) -> Option<Arc<nacre_rpc::fault::NetFault>> {
        self.mgs_served.as_ref().map(|s| s.net.clone())
    }

    pub async fn stop_mgs(&mut self) {
        if let Some(s) = self.mgs_served.take() {
            s.stop().await;
        }
    }

    /// Stops everything cleanly: MDTs (checkpointing their stores), OSTs, then the MGS.
    pub async fn stop(mut self) {
        for i in 0..self.mdts.len() {
            self.stop_mdt(i as u32).await;
        }
        for i in 0..self.osts.len() {
            self.stop_ost(i as u32).await;
        }
        self.stop_mgs().await;
    }
}
