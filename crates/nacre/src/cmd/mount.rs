//! `nacre mount` / `nacre umount`, and the mount step shared with `nacre up`.

use crate::ctl::{self, MountEntry};
use crate::ctl_server::{CtlServer, ParamSource};
use crate::daemon;
use anyhow::{Context, Result, bail};
use nacre_client::{Client, MountSpec};
use nacre_rpc::Key;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A live FUSE mount with its control socket.
pub struct Mounted {
    pub mountpoint: PathBuf,
    mount: Option<nacre_fuse::Mount>,
    ctl: tokio::task::JoinHandle<()>,
    pub client: Arc<Client>,
}

impl Mounted {
    /// Unmounts (lazily if busy) and removes the registry entry.
    pub fn unmount(mut self) {
        self.ctl.abort();
        ctl::unregister(&self.mountpoint);
        if let Err(e) = daemon::unmount(&self.mountpoint) {
            tracing::warn!("{e}");
        }
        if let Some(m) = self.mount.take() {
            // The kernel side is gone; this only joins the session threads.
            drop(m);
        }
        self.client.unmount();
    }
}

/// Client tunables under Lustre's parameter names.
pub struct ClientParams {
    client: Arc<Client>,
    /// Stands for Lustre's superblock address in device names.
    sb: String,
}

impl ClientParams {
    pub fn new(client: Arc<Client>) -> ClientParams {
        let sb = format!("ffff{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff);
        ClientParams { client, sb }
    }

    fn names(&self) -> Vec<(String, &'static str)> {
        let fs = &self.client.fsname;
        let mut v = Vec::new();
        for i in 0..self.client.ost_count() {
            for p in ["max_rpcs_in_flight", "max_dirty_mb", "max_pages_per_rpc"] {
                v.push((format!("osc.{fs}-OST{i:04x}-osc-{}.{p}", self.sb), p));
            }
        }
        for p in ["max_read_ahead_mb", "max_read_ahead_per_file_mb", "recovery_timeout"] {
            v.push((format!("llite.{fs}-{}.{p}", self.sb), p));
        }
        v
    }
}

impl ParamSource for ClientParams {
    fn list(&self) -> Vec<(String, String)> {
        self.names()
            .into_iter()
            .map(|(n, t)| {
                let v = self.client.tunables.get(t).map(|v| v.to_string()).unwrap_or_default();
                (n, v)
            })
            .collect()
    }

    fn set(&self, name: &str, value: &str) -> Result<(), String> {
        let Some((_, t)) = self.names().into_iter().find(|(n, _)| n == name) else {
            return Err(format!("{name}: no such parameter on this client"));
        };
        let v: u64 = value.trim().parse().map_err(|_| format!("{name}: '{value}' is not a number"))?;
        self.client.tunables.set(t, v)?;
        self.client.refresh_imports();
        Ok(())
    }
}

/// Mounts `client` at `mountpoint` (already prepared) and serves its control socket.
pub fn mount_client(
    rt: &tokio::runtime::Handle,
    client: Arc<Client>,
    mountpoint: &Path,
    spec: &str,
    attr_timeout: Duration,
) -> Result<Mounted> {
    let opts = nacre_fuse::MountOptions {
        attr_timeout,
        fsname: spec.to_string(),
        ..nacre_fuse::MountOptions::default()
    };
    let mount = nacre_fuse::mount(client.clone(), rt.clone(), mountpoint, &opts)
        .with_context(|| format!("cannot mount on {} (is fuse3 installed and /dev/fuse usable?)", mountpoint.display()))?;
    let entry = MountEntry {
        mountpoint: mountpoint.to_path_buf(),
        spec: spec.to_string(),
        fsname: client.fsname.clone(),
        socket: ctl::socket_path(mountpoint),
        pid: std::process::id(),
    };
    let listener = {
        let _g = rt.enter();
        crate::ctl_server::bind(&entry)?
    };
    let server = Arc::new(CtlServer {
        client: client.clone(),
        entry,
        params: Arc::new(ClientParams::new(client.clone())),
    });
    let ctl = rt.spawn(server.run(listener));
    Ok(Mounted {
        mountpoint: mountpoint.to_path_buf(),
        mount: Some(mount),
        ctl,
        client,
    })
}

/// Turns `SPEC` into a mount spec and key: an `up` directory, or `HOST:PORT:/fsname`.
pub fn resolve_spec(spec: &str, key: Option<&Path>) -> Result<(String, Key)> {
    let p = Path::new(spec);
    if p.is_dir() {
        let fs = crate::local::LocalFs::load(p)?;
        let key_path = key.map(Path::to_path_buf).unwrap_or_else(|| p.join(crate::local::KEY_FILE));
        return Ok((fs.spec(), Key::load(&key_path)?));
    }
    let Some(key) = key else {
        bail!("mounting {spec} needs the file system's key: --key FILE (the 'key' file of the MGS's directory)");
    };
    Ok((spec.to_string(), Key::load(key)?))
}

pub struct MountArgs {
    pub spec: String,
    pub mountpoint: PathBuf,
    pub key: Option<PathBuf>,
    pub background: bool,
    pub attr_timeout: Duration,
    pub child: bool,
}

pub fn run_mount(a: MountArgs) -> Result<()> {
    let (spec, key) = resolve_spec(&a.spec, a.key.as_deref())?;
    let mnt = daemon::prepare_mountpoint(&a.mountpoint)?;
    if a.background && !a.child {
        let log = ctl::run_dir().join(format!("mount-{}.log", std::process::id()));
        std::fs::create_dir_all(ctl::run_dir())?;
        let m2 = mnt.clone();
        daemon::spawn_background(&log, |pid| ctl::mounts().iter().any(|e| e.mountpoint == m2 && e.pid == pid))?;
        println!("mounted {spec} on {}", mnt.display());
        return Ok(());
    }
    let rt = super::runtime()?;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let name = format!("{}-{}", host.trim(), std::process::id());
    let mspec = MountSpec::parse(&spec, key, &name).map_err(anyhow::Error::msg)?;
    let client = rt.block_on(Client::mount(mspec))?;
    let mounted = mount_client(rt.handle(), client, &mnt, &spec, a.attr_timeout)?;
    if !a.child {
        println!("mounted {spec} on {} (Ctrl-C to unmount)", mnt.display());
    }
    rt.block_on(daemon::wait_for_signal());
    mounted.unmount();
    Ok(())
}

pub fn run_umount(mountpoint: &Path) -> Result<()> {
    let abs = std::fs::canonicalize(mountpoint).unwrap_or_else(|_| mountpoint.to_path_buf());
    if let Some(e) = ctl::mounts().into_iter().find(|e| e.mountpoint == abs) {
        if daemon::stop_pid(e.pid, daemon::STOP_TIMEOUT) {
            println!("unmounted {}", abs.display());
            return Ok(());
        }
        bail!("the client serving {} (pid {}) did not stop", abs.display(), e.pid);
    }
    if daemon::unmount(&abs)? {
        println!("unmounted {}", abs.display());
        Ok(())
    } else {
        bail!("{} is not mounted", abs.display())
    }
}
