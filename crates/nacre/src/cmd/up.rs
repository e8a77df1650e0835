//! `nacre up`, `nacre down`, `nacre status`: a whole file system on this machine.

use super::mount::mount_client;
use crate::daemon::{self, RunState};
use crate::lfsck_ctl::{LfsckParams, LocalLfsck};
use crate::local::{self, LocalCluster, LocalFs};
use crate::node::ServerTuning;
use crate::params::{ParamSource, ServerStats};
use crate::target::write_atomic;
use anyhow::{Context, Result, bail};
use nacre_client::{Client, MountSpec};
use nacre_core::size::human;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub struct UpArgs {
    pub dir: PathBuf,
    pub mount: PathBuf,
    pub mdts: Option<u32>,
    pub osts: Option<u32>,
    pub fsname: String,
    pub port: Option<u16>,
    pub background: bool,
    pub memory: u64,
    pub attr_timeout: Duration,
    pub child: bool,
}

/// Splits the memory budget: the MDT stores' caches take a quarter, requests and replies
/// being handled by the servers a half; the client's readahead is bounded on its own
/// (`llite.*.max_read_ahead_mb`).
pub fn tuning_for(memory: u64, mdts: u32) -> ServerTuning {
    let mut t = ServerTuning::default();
    t.store.cache_bytes = ((memory / 4) / u64::from(mdts.max(1))).clamp(8 << 20, 1 << 30) as usize;
    t.memory = nacre_rpc::memory::MemoryBudget::new(memory / 2);
    t
}

pub fn run_up(a: UpArgs) -> Result<()> {
    let dir = a.dir.clone();
    if dir.exists() && !dir.is_dir() {
        bail!("{} exists and is not a directory", dir.display());
    }
    if let Some(rs) = daemon::load_run(&dir)
        && daemon::pid_alive(rs.pid)
        && rs.pid != std::process::id()
    {
        bail!(
            "{} is already up (pid {}), mounted on {}; `nacre down {}` stops it",
            dir.display(),
            rs.pid,
            rs.mount.display(),
            dir.display()
        );
    }
    let fs = if dir.join(local::LOCAL_FILE).exists() {
        let fs = LocalFs::load(&dir)?;
        if a.mdts.is_some_and(|n| n != fs.mdts) || a.osts.is_some_and(|n| n != fs.osts) {
            eprintln!(
                "note: {} already holds '{}' with {} MDT(s) and {} OST(s); --mdts/--osts apply only to a new directory",
                dir.display(),
                fs.fsname,
                fs.mdts,
                fs.osts
            );
        }
        fs
    } else {
        let port = match a.port {
            Some(p) => p,
            None if std::net::TcpListener::bind(("127.0.0.1", local::DEFAULT_MGS_PORT)).is_ok() => {
                local::DEFAULT_MGS_PORT
            }
            None => local::free_port()?,
        };
        let fs = local::format(
            &dir,
            &a.fsname,
            a.mdts.unwrap_or(1),
            a.osts.unwrap_or(4),
            port,
        )?;
        if !a.child {
            super::say(format_args!(
                "formatted '{}' in {}: {} MDT(s), {} OST(s)",
                fs.fsname,
                dir.display(),
                fs.mdts,
                fs.osts
            ));
        }
        fs
    };
    let mnt = daemon::prepare_mountpoint(&a.mount)?;
    if a.background && !a.child {
        let log = dir.join("nacre.log");
        daemon::spawn_background(&log, |pid| {
            daemon::load_run(&dir).is_some_and(|r| r.pid == pid)
        })?;
        print_ready(&fs, &dir, &mnt);
        return Ok(());
    }
    let rt = super::runtime()?;
    let tuning = tuning_for(a.memory, fs.mdts);
    let cluster = rt.block_on(LocalCluster::start(&dir, tuning))?;
    // The mount is a client like any other: it holds the client key, not the servers'.
    let mspec = MountSpec::parse(&cluster.spec(), cluster.key.client_key(), "local")
        .map_err(anyhow::Error::msg)?;
    let client = match rt.block_on(Client::mount(mspec)) {
        Ok(c) => c,
        Err(e) => {
            rt.block_on(cluster.stop());
            return Err(e.into());
        }
    };
    let mut servers: Vec<Arc<dyn ParamSource>> = cluster
        .mdts
        .iter()
        .chain(cluster.osts.iter())
        .flatten()
        .filter_map(|s| s.params(&fs.fsname))
        .collect();
    servers.push(Arc::new(ServerStats::of(
        &fs.fsname,
        cluster
            .mdts
            .iter()
            .flatten()
            .chain(cluster.osts.iter().flatten()),
    )));
    let lfsck = LocalLfsck {
        mdts: cluster
            .mdts
            .iter()
            .flatten()
            .filter_map(|s| s.lfsck.clone())
            .collect(),
    };
    servers.push(Arc::new(LfsckParams {
        lfsck: lfsck.clone(),
    }));
    let mounted = match mount_client(
        rt.handle(),
        client,
        &mnt,
        &cluster.spec(),
        a.attr_timeout,
        servers,
        super::mount::LocalServed {
            lfsck,
            targets: cluster.inject_targets(),
        },
    ) {
        Ok(m) => m,
        Err(e) => {
            rt.block_on(cluster.stop());
            return Err(e);
        }
    };
    let state = RunState {
        pid: std::process::id(),
        mount: mnt.clone(),
        spec: fs.spec(),
    };
    // `down` finds this process through run.json: if it cannot be written, stop rather
    // than serve with nothing able to stop it.
    if let Err(e) = serde_json::to_string_pretty(&state)
        .map_err(anyhow::Error::from)
        .and_then(|text| write_atomic(&daemon::run_file(&dir), text.as_bytes()))
    {
        mounted.unmount();
        rt.block_on(cluster.stop());
        return Err(e);
    }
    if !a.child {
        print_ready(&fs, &dir, &mnt);
        super::say(format_args!(
            "running in the foreground; Ctrl-C (or `nacre down {}`) stops it",
            dir.display()
        ));
    }
    tracing::info!("up: {} mounted on {}", fs.spec(), mnt.display());
    rt.block_on(daemon::wait_for_signal());
    tracing::info!("stopping");
    mounted.unmount();
    rt.block_on(cluster.stop());
    let _ = std::fs::remove_file(daemon::run_file(&dir));
    Ok(())
}

fn print_ready(fs: &LocalFs, dir: &Path, mnt: &Path) {
    super::say(format_args!(
        "nacre file system '{}' is up and mounted on {}",
        fs.fsname,
        mnt.display()
    ));
    super::say(format_args!(
        "  other clients mount it with:  nacre mount {} MNT --key {}",
        fs.spec(),
        dir.join(local::CLIENT_KEY_FILE).display()
    ));
    super::say(format_args!("  spec: {}", fs.spec()));
}

pub fn run_down(dir: &Path, force: bool) -> Result<()> {
    let Some(rs) = daemon::load_run(dir) else {
        if !dir.join(local::LOCAL_FILE).exists() {
            bail!("{} holds no nacre file system", dir.display());
        }
        println!("{} is not up", dir.display());
        return Ok(());
    };
    if daemon::pid_alive(rs.pid) && !daemon::stop_pid(rs.pid, daemon::STOP_TIMEOUT) {
        if !force {
            bail!(
                "nacre (pid {}) did not stop within {}s; `nacre down --force {}` kills it",
                rs.pid,
                daemon::STOP_TIMEOUT.as_secs(),
                dir.display()
            );
        }
        // SAFETY: plain signal.
        unsafe { libc::kill(rs.pid as i32, libc::SIGKILL) };
        std::thread::sleep(Duration::from_millis(200));
    }
    // Whatever a killed process left behind.
    daemon::unmount(&rs.mount)?;
    crate::ctl::unregister(&rs.mount);
    let _ = std::fs::remove_file(daemon::run_file(dir));
    println!(
        "stopped {} (was mounted on {})",
        dir.display(),
        rs.mount.display()
    );
    Ok(())
}

pub fn run_status(dir: &Path) -> Result<()> {
    let fs = LocalFs::load(dir)?;
    println!("file system:  {} ({})", fs.fsname, dir.display());
    println!("mount spec:   {}", fs.spec());
    println!(
        "keys:         {} (servers), {} (clients)",
        dir.join(local::KEY_FILE).display(),
        dir.join(local::CLIENT_KEY_FILE).display()
    );
    let running = daemon::load_run(dir).filter(|r| daemon::pid_alive(r.pid));
    match &running {
        Some(r) => println!(
            "state:        up (pid {}), mounted on {}",
            r.pid,
            r.mount.display()
        ),
        None => println!(
            "state:        down (`nacre up {} --mount MNT` starts it)",
            dir.display()
        ),
    }
    if running.is_none() {
        println!(
            "targets:      MGS, {} MDT(s), {} OST(s) (not running)",
            fs.mdts, fs.osts
        );
        return Ok(());
    }
    let key = local::client_key(dir)?;
    let rt = super::runtime()?;
    rt.block_on(async {
        let spec = MountSpec::parse(&fs.spec(), key, "status").map_err(anyhow::Error::msg)?;
        let c = Client::mount(spec).await.context("cannot reach the MGS")?;
        for t in c.mdcs().iter().chain(c.oscs().iter()) {
            t.set_recovery_timeout(Duration::from_secs(3));
        }
        let cfg = c.config();
        println!("targets:");
        println!(
            "  {:<16} {:<22} {:<8} {:>10} {:>10} {:>12}",
            "TARGET", "ADDRESS", "STATE", "USED", "SIZE", "INODES"
        );
        println!(
            "  {:<16} {:<22} {:<8}",
            format!("{}-MGS", fs.fsname),
            fs.mgs_addr(),
            "up"
        );
        let stats = c.target_statfs().await;
        for t in cfg.mdts.iter().chain(cfg.osts.iter()) {
            let st = stats
                .iter()
                .find(|(n, _)| *n == t.name)
                .and_then(|(_, r)| r.as_ref().ok().copied());
            let state = if !t.active {
                "down"
            } else if st.is_some() {
                "up"
            } else {
                "no reply"
            };
            let (used, size, inodes) = match st {
                Some(s) => (
                    human((s.blocks - s.bfree) * u64::from(s.bsize)),
                    human(s.blocks * u64::from(s.bsize)),
                    format!("{}", s.files.saturating_sub(s.ffree)),
                ),
                None => ("-".into(), "-".into(), "-".into()),
            };
            println!(
                "  {:<16} {:<22} {:<8} {:>10} {:>10} {:>12}",
                t.name.full(&fs.fsname),
                t.addr,
                state,
                used,
                size,
                inodes
            );
        }
        c.disconnect().await;
        c.unmount();
        Ok::<(), anyhow::Error>(())
    })
}
