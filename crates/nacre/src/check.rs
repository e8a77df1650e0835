//! `nacre check`: the namespace checker across MDTs, on a file system that is not running.
//! Its stores are read as they are, without writing to them (a journal left by a killed
//! server is replayed in memory), so a full disk does not stop a check. See
//! [`nacre_lfsck::offline`] and [`nacre_osd::StoreSnapshot`].

use crate::local::{self, LocalFs};
use anyhow::{Context, Result, bail};
use nacre_core::TargetName;
use nacre_lfsck::offline::{CheckReport, check};
use nacre_osd::StoreSnapshot;
use nacre_osd::mdstore::store_dir;
use std::path::{Path, PathBuf};

/// Checks the namespace held by the MDT target directories `mdt_dirs` (in index order).
pub fn check_mdts(mdt_dirs: &[PathBuf]) -> Result<CheckReport> {
    let mut stores = Vec::new();
    for d in mdt_dirs {
        let s = StoreSnapshot::open(&store_dir(d))
            .with_context(|| format!("cannot read the MDT store in {}", d.display()))?;
        if s.replayed() {
            tracing::info!(
                "{}: not stopped cleanly; its journal was replayed in memory",
                d.display()
            );
        }
        let outdated = s
            .read()
            .and_then(|mut v| nacre_mdt::mdd::records_outdated(&mut v))
            .map_err(|e| anyhow::anyhow!("cannot read the MDT store in {}: {e}", d.display()))?;
        if outdated {
            bail!(
                "{} holds records of an older nacre: start the file system once (it converts them), then check",
                d.display()
            );
        }
        stores.push(s);
    }
    let mut views = stores
        .iter()
        .map(|s| s.read())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("cannot read an MDT store: {e}"))?;
    for (v, d) in views.iter().zip(mdt_dirs) {
        if nacre_mdt::mdd::predates_oi(v).map_err(|e| anyhow::anyhow!("{e}"))? {
            bail!(
                "the MDT store in {} predates the object index: start the file system once to convert it",
                d.display()
            );
        }
    }
    check(&mut views).map_err(|e| anyhow::anyhow!("check failed: {e}"))
}

/// Checks a file system made by `nacre up` / `local::format` in `dir`.
pub fn check_local(dir: &Path) -> Result<CheckReport> {
    let fs = LocalFs::load(dir)?;
    if crate::daemon::load_run(dir).is_some_and(|r| crate::daemon::pid_alive(r.pid)) {
        bail!(
            "{} is running: stop it first (`nacre down {}`)",
            dir.display(),
            dir.display()
        );
    }
    let dirs: Vec<PathBuf> = (0..fs.mdts)
        .map(|i| local::target_dir(dir, TargetName::mdt(i)))
        .collect();
    check_mdts(&dirs)
}
