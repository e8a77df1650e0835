//! Target directories: what `nacre format` writes and `nacre serve` reads.
//!
//! Every target directory holds `target.json` (file system name, kind, index, MGS address)
//! and the data of its kind: `config.json` for the MGS, `mdstore/` for an MDT, `O/` for an
//! OST. The shared key lives in a separate file given by path.

use anyhow::{Context, Result, bail};
use nacre_core::target::validate_fsname;
use nacre_core::{TargetKind, TargetName};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Bumped when the layout of target directories changes incompatibly.
pub const FORMAT_VERSION: u32 = 1;
pub const TARGET_FILE: &str = "target.json";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetIdentity {
    pub fsname: String,
    pub kind: TargetKind,
    pub index: u32,
    /// Where the MGS listens (`host:port`); for the MGS itself, its own address.
    pub mgsnode: String,
    pub format_version: u32,
}

impl TargetIdentity {
    pub fn name(&self) -> TargetName {
        TargetName {
            kind: self.kind,
            index: self.index,
        }
    }

    pub fn load(dir: &Path) -> Result<TargetIdentity> {
        let p = dir.join(TARGET_FILE);
        let text = std::fs::read_to_string(&p).with_context(|| {
            format!(
                "{} is not a formatted nacre target (no {})",
                dir.display(),
                TARGET_FILE
            )
        })?;
        let id: TargetIdentity =
            serde_json::from_str(&text).with_context(|| format!("{} is malformed", p.display()))?;
        if id.format_version != FORMAT_VERSION {
            bail!(
                "{} was formatted with format version {}, this nacre reads version {}",
                dir.display(),
                id.format_version,
                FORMAT_VERSION
            );
        }
        Ok(id)
    }

    pub fn save(&self, dir: &Path) -> Result<()> {
        let p = dir.join(TARGET_FILE);
        let text = serde_json::to_string_pretty(self)?;
        write_atomic(&p, text.as_bytes())
    }
}

/// Writes a file by rename, so readers never see half of it; the file is its owner's only
/// (everything in a file system's directories is, see [`restrict_dir`]).
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    // A leftover from an interrupted write would keep its mode; start from a new file.
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("cannot remove {}", tmp.display()));
        }
        _ => {}
    }
    let mut f = nacre_osd::private_file()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    f.write_all(data)
        .and_then(|()| f.sync_all())
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Makes `dir` its owner's only. Target directories hold the file system's data, whose
/// permissions the servers enforce for clients; on this host they are the owner's alone.
/// Everything nacre creates inside is owner-only too, but a directory made by an older
/// version holds files and directories open to everyone: closing the directory itself
/// cuts access to all of them.
pub fn restrict_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir)
        .with_context(|| format!("cannot stat {}", dir.display()))?
        .permissions()
        .mode();
    if mode & 0o777 != nacre_osd::PRIVATE_DIR_MODE {
        std::fs::set_permissions(
            dir,
            std::fs::Permissions::from_mode(nacre_osd::PRIVATE_DIR_MODE),
        )
        .with_context(|| format!("cannot make {} private", dir.display()))?;
    }
    Ok(())
}

/// Checks that `dir` can hold a target: a directory we can write (created if missing),
/// made its owner's only.
pub fn prepare_dir(dir: &Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        bail!("{} exists and is not a directory", dir.display());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    nacre_osd::create_private_dir(dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    restrict_dir(dir)?;
    let probe = dir.join(".nacre-write-probe");
    nacre_osd::private_file()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&probe)
        .with_context(|| format!("{} is not writable", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Formats one target directory.
pub fn format_target(
    dir: &Path,
    fsname: &str,
    name: TargetName,
    mgsnode: &str,
) -> Result<TargetIdentity> {
    validate_fsname(fsname).map_err(anyhow::Error::msg)?;
    prepare_dir(dir)?;
    if dir.join(TARGET_FILE).exists() {
        bail!(
            "{} is already formatted (remove it to start over)",
            dir.display()
        );
    }
    match name.kind {
        TargetKind::Mgs => nacre_mgs::Mgs::format(dir, fsname)?,
        TargetKind::Ost => {
            nacre_osd::objstore::check_xattr_support(dir).map_err(anyhow::Error::msg)?;
            nacre_osd::create_private_dir(&dir.join("O"))?;
        }
        TargetKind::Mdt => nacre_osd::create_private_dir(&nacre_osd::mdstore::store_dir(dir))?,
    }
    let id = TargetIdentity {
        fsname: fsname.to_string(),
        kind: name.kind,
        index: name.index,
        mgsnode: mgsnode.to_string(),
        format_version: FORMAT_VERSION,
    };
    id.save(dir)?;
    Ok(id)
}
