//! `nacre mount` / `nacre umount`, and the mount step shared with `nacre up`.

use crate::ctl::{self, MountEntry};
use crate::ctl_server::CtlServer;
use crate::daemon;
use crate::inject_ctl::LocalTargets;
use crate::lfsck_ctl::LocalLfsck;
use crate::params::{ClientParams, NodeParams, ParamSource, apply_persistent};
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
    rt: tokio::runtime::Handle,
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
        // The MDTs forget this client, so their next restart does not wait for it (when
        // called from inside the runtime, which cannot block here, they wait the window).
        if tokio::runtime::Handle::try_current().is_err() {
            self.rt.block_on(self.client.disconnect());
        }
        self.client.unmount();
    }
}

/// The targets a process serves besides its mount, for its control socket: their
/// checkers (`lctl lfsck_*`) and the targets themselves (`nacre inject`).
#[derive(Default)]
pub struct LocalServed {
    pub lfsck: LocalLfsck,
    pub targets: LocalTargets,
}

/// Mounts `client` at `mountpoint` (already prepared) and serves its control socket.
pub fn mount_client(
    rt: &tokio::runtime::Handle,
    client: Arc<Client>,
    mountpoint: &Path,
    spec: &str,
    attr_timeout: Duration,
    servers: Vec<Arc<dyn ParamSource>>,
    served: LocalServed,
) -> Result<Mounted> {
    let opts = nacre_fuse::MountOptions {
        attr_timeout,
        fsname: spec.to_string(),
        ..nacre_fuse::MountOptions::default()
    };
    let mount =
        nacre_fuse::mount(client.clone(), rt.clone(), mountpoint, &opts).with_context(|| {
            format!(
                "cannot mount on {} (is fuse3 installed and /dev/fuse usable?)",
                mountpoint.display()
            )
        })?;
    let entry = MountEntry {
        mountpoint: mountpoint.to_path_buf(),
        spec: spec.to_string(),
        fsname: client.fsname.clone(),
        socket: ctl::socket_path(mountpoint)?,
        pid: std::process::id(),
        started: crate::daemon::process_started(std::process::id()),
    };
    let listener = {
        let _g = rt.enter();
        crate::ctl_server::bind(&entry)?
    };
    // The servers first: `lctl dl` lists devices in this order, and Lustre sets a node's
    // servers up before its client.
    let mut sources: Vec<Arc<dyn ParamSource>> = servers.to_vec();
    sources.extend([
        Arc::new(ClientParams::new(client.clone())) as Arc<dyn ParamSource>,
        Arc::new(crate::memory::MemoryParams),
        Arc::new(crate::params::TimeoutParams),
        Arc::new(crate::params::VersionParam),
    ]);
    let params = Arc::new(NodeParams { sources });
    let server = Arc::new(CtlServer {
        client: Some(client.clone()),
        entry,
        params,
        lfsck: served.lfsck,
        targets: served.targets,
    });
    let ctl = rt.spawn(server.run(listener));
    if !servers.is_empty() {
        // Servers in this process follow `set_param -P` records (clients do so themselves).
        let node = NodeParams { sources: servers };
        let mut cfg = client.config_watch();
        rt.spawn(async move {
            loop {
                let records = cfg.borrow_and_update().params.clone();
                apply_persistent(&node, &records);
                if cfg.changed().await.is_err() {
                    return;
                }
            }
        });
    }
    Ok(Mounted {
        mountpoint: mountpoint.to_path_buf(),
        mount: Some(mount),
        ctl,
        client,
        rt: rt.clone(),
    })
}

/// Turns `SPEC` into a mount spec and key: an `up` directory, or `HOST:PORT:/fsname`.
pub fn resolve_spec(spec: &str, key: Option<&Path>) -> Result<(String, Key)> {
    let p = Path::new(spec);
    if p.is_dir() {
        let fs = crate::local::LocalFs::load(p)?;
        let key = match key {
            Some(k) => Key::load(k)?,
            None => crate::local::client_key(p)?,
        };
        return Ok((fs.spec(), key));
    }
    // HOST:PORT:/fsname has a colon; anything else was meant as an `up` directory.
    if !spec.contains(":/") {
        bail!(
            "{spec} is neither a directory made by `nacre up` nor a mount spec HOST:PORT:/fsname"
        );
    }
    let Some(key) = key else {
        bail!(
            "mounting {spec} needs the file system's client key: --key FILE (the 'client.key' file of the MGS's directory)"
        );
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
        let log = ctl::run_dir()?.join(format!("mount-{}.log", std::process::id()));
        let m2 = mnt.clone();
        daemon::spawn_background(&log, |pid| {
            ctl::mounts().is_ok_and(|m| m.iter().any(|e| e.mountpoint == m2 && e.pid == pid))
        })?;
        println!("mounted {spec} on {}", mnt.display());
        return Ok(());
    }
    let rt = super::runtime()?;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let name = format!("{}-{}", host.trim(), std::process::id());
    let mspec = MountSpec::parse(&spec, key, &name).map_err(anyhow::Error::msg)?;
    let client = rt.block_on(Client::mount(mspec))?;
    let mounted = mount_client(
        rt.handle(),
        client,
        &mnt,
        &spec,
        a.attr_timeout,
        Vec::new(),
        LocalServed::default(),
    )?;
    if !a.child {
        super::say(format_args!(
            "mounted {spec} on {} (Ctrl-C to unmount)",
            mnt.display()
        ));
    }
    rt.block_on(daemon::wait_for_signal());
    mounted.unmount();
    Ok(())
}

pub fn run_umount(mountpoint: &Path) -> Result<()> {
    // A dead FUSE mount cannot be resolved (ENOTCONN): take the path as given.
    let abs = std::fs::canonicalize(mountpoint)
        .or_else(|_| std::path::absolute(mountpoint))
        .unwrap_or_else(|_| mountpoint.to_path_buf());
    let mut stopped = false;
    if let Some(e) = ctl::mounts()?.into_iter().find(|e| e.mountpoint == abs) {
        if !daemon::stop_pid(e.pid, daemon::STOP_TIMEOUT) {
            bail!(
                "the client serving {} (pid {}) did not stop",
                abs.display(),
                e.pid
            );
        }
        stopped = true;
    }
    // A client killed with -9, or one that died, leaves the kernel's mount behind (and a
    // client stopping on its own has unmounted by now).
    ctl::unregister(&abs);
    let unmounted = daemon::unmount(&abs)?;
    if daemon::is_mountpoint(&abs) {
        bail!("{} is still mounted", abs.display());
    }
    if stopped || unmounted {
        println!("unmounted {}", abs.display());
        Ok(())
    } else {
        bail!("{} is not mounted", abs.display())
    }
}
