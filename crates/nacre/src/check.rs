//! `nacre check`: the namespace checker across MDTs, on a file system that is not running
//! (its stores are opened directly). See [`nacre_mdt::dne::check`].

use crate::local::{self, LocalFs};
use anyhow::{Context, Result, bail};
use nacre_core::TargetName;
use nacre_mdt::dne::check::{CheckReport, check};
use nacre_osd::mdstore::store_dir;
use nacre_osd::{Health, MdStore, MdStoreConfig};
use std::path::{Path, PathBuf};

/// Checks the namespace held by the MDT target directories `mdt_dirs` (in index order).
pub async fn check_mdts(mdt_dirs: &[PathBuf]) -> Result<CheckReport> {
    let mut stores = Vec::new();
    for d in mdt_dirs {
        let health = Health::open(format!("{} (check)", d.display()), d)?;
        let s = MdStore::open(&store_dir(d), MdStoreConfig::default(), health)
            .with_context(|| format!("cannot open the MDT store in {}", d.display()))?;
        // A store of an older format is read as the MDT would serve it.
        nacre_mdt::mdd::upgrade_records(&s)
            .await
            .map_err(|e| anyhow::anyhow!("cannot convert the records in {}: {e}", d.display()))?;
        stores.push(s);
    }
    let views = stores
        .iter()
        .map(|s| s.read())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("cannot read an MDT store: {e}"))?;
    let rep = check(&views).map_err(|e| anyhow::anyhow!("check failed: {e}"));
    drop(views);
    for s in &stores {
        s.close().await;
    }
    rep
}

/// Checks a file system made by `nacre up` / `local::format` in `dir`.
pub async fn check_local(dir: &Path) -> Result<CheckReport> {
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
    check_mdts(&dirs).await
}
