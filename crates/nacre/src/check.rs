//! `nacre check`: the namespace checker across MDTs, and the layout checker across MDTs
//! and OSTs, on a file system that is not running.
//! Its stores are read as they are, without writing to them (a journal left by a killed
//! server is replayed in memory), so a full disk does not stop a check. See
//! [`nacre_lfsck::offline`] and [`nacre_osd::StoreSnapshot`].

use crate::local::{self, LocalFs};
use anyhow::{Context, Result, bail};
use nacre_core::TargetName;
use nacre_lfsck::offline::{CheckReport, check};
use nacre_lfsck::offline_layout::check_layout;
use nacre_osd::mdstore::store_dir;
use nacre_osd::{ObjStore, StoreSnapshot};
use std::path::{Path, PathBuf};

/// Checks the namespace held by the MDT target directories `mdt_dirs` (in index order).
pub fn check_mdts(mdt_dirs: &[PathBuf]) -> Result<CheckReport> {
    check_targets(mdt_dirs, &[])
}

/// Checks the namespace held by the MDT target directories `mdt_dirs` (in index order)
/// and, when `ost_dirs` (the OST target directories, in index order) are given, the
/// files' layouts against the OSTs' objects.
pub fn check_targets(mdt_dirs: &[PathBuf], ost_dirs: &[PathBuf]) -> Result<CheckReport> {
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
    let mut rep = check(&mut views).map_err(|e| anyhow::anyhow!("check failed: {e}"))?;
    if !ost_dirs.is_empty() {
        let mut osts = Vec::new();
        for (i, d) in ost_dirs.iter().enumerate() {
            let name = TargetName::ost(i as u32).short();
            let store = nacre_osd::Health::open(name, d)
                .map_err(|e| anyhow::anyhow!("{e}"))
                .and_then(|h| ObjStore::open_read_only(d, h).map_err(anyhow::Error::from));
            match store {
                Ok(s) => osts.push(Some(s)),
                Err(e) => {
                    tracing::warn!("OST{i:04x} in {}: not checked: {e:#}", d.display());
                    osts.push(None);
                }
            }
        }
        rep.layout = Some(
            check_layout(&mut views, &osts)
                .map_err(|e| anyhow::anyhow!("layout check failed: {e}"))?,
        );
    }
    Ok(rep)
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
    let osts: Vec<PathBuf> = (0..fs.osts)
        .map(|i| local::target_dir(dir, TargetName::ost(i)))
        .collect();
    check_targets(&dirs, &osts)
}
