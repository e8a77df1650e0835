//! The file system a benchmark brings up for itself: formatted in a work directory (a
//! new temporary one unless given), served by this process and mounted with FUSE, and
//! taken down again by [`BenchFs::down`], also after Ctrl-C or SIGTERM (which stop the runs at a
//! clean point) or a failed run.

use super::mount::Mounted;
use crate::local::{self, LocalCluster};
use anyhow::Result;
use nacre_client::{Client, MountSpec};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Name and attribute cache time of a bench's mount, as `nacre up`'s default.
pub const DEFAULT_ATTR_TIMEOUT: Duration = Duration::from_secs(1);

pub struct BenchFs {
    pub rt: tokio::runtime::Runtime,
    pub cluster: LocalCluster,
    pub client: Arc<Client>,
    /// The targets' directory (an `up` directory: `NativeFs::connect` takes it).
    pub dir: PathBuf,
    /// Where it is mounted.
    pub mnt: PathBuf,
    mounted: Mounted,
    /// The work directory made here, removed by `down`.
    tmp: Option<PathBuf>,
}

impl BenchFs {
    /// The local directory a bench compares the file system with: `given`, or one beside
    /// the targets' directory, so on the same disk.
    pub fn local_dir(&self, given: Option<&Path>) -> Result<PathBuf> {
        match given {
            Some(l) => Ok(l.to_path_buf()),
            None => Ok(self
                .dir
                .parent()
                .ok_or_else(|| anyhow::anyhow!("the file system's directory has no parent"))?
                .join("local")),
        }
    }

    /// Formats `fsname` (1 MDT, `osts` OSTs) under `workdir` (or a new temporary
    /// directory named after `bench`), starts it and mounts it.
    pub fn up(bench: &str, fsname: &str, osts: u32, workdir: Option<&Path>) -> Result<BenchFs> {
        Self::up_with(bench, fsname, osts, workdir, DEFAULT_ATTR_TIMEOUT)
    }

    /// As [`BenchFs::up`], with the kernel caching names and attributes `attr_timeout`
    /// (zero: every lookup and stat reaches the MDT).
    pub fn up_with(
        bench: &str,
        fsname: &str,
        osts: u32,
        workdir: Option<&Path>,
        attr_timeout: Duration,
    ) -> Result<BenchFs> {
        let (work, tmp) = match workdir {
            Some(w) => (w.to_path_buf(), None),
            None => {
                let t = super::bench_dne::tempfile_dir(bench)?;
                (t.clone(), Some(t))
            }
        };
        let dir = work.join("fs");
        let mnt = work.join("mnt");
        std::fs::create_dir_all(&mnt)?;
        nacre_bench::cancel::install_stop_handler();
        local::format(&dir, fsname, 1, osts, 0)?;
        let rt = super::runtime()?;
        let cluster = rt.block_on(LocalCluster::start(&dir, super::up::tuning_for(1 << 30, 1)))?;
        let key = local::client_key(&dir)?;
        let spec = MountSpec::parse(&cluster.spec(), key, &format!("bench-{bench}"))
            .map_err(anyhow::Error::msg)?;
        let client = rt.block_on(Client::mount(spec))?;
        let mounted = super::mount::mount_client(
            rt.handle(),
            client.clone(),
            &mnt,
            &cluster.spec(),
            attr_timeout,
            Vec::new(),
            super::mount::LocalServed::default(),
        )?;
        Ok(BenchFs {
            rt,
            cluster,
            client,
            dir,
            mnt,
            mounted,
            tmp,
        })
    }

    /// Unmounts, stops the servers and removes a work directory it made.
    pub fn down(self) {
        self.mounted.unmount();
        self.rt.block_on(self.cluster.stop());
        if let Some(t) = self.tmp {
            let _ = std::fs::remove_dir_all(t);
        }
    }
}
