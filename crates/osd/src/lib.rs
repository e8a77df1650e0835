//! Object storage devices (Lustre's osd layer): where targets keep their bytes.
//!
//! - [`mdstore`]: the MDT's store. A redb B-tree holds the tables; a journal of physical
//!   changes makes every committed transaction survive a killed process, and group commit
//!   lets concurrent requests share one journal write.
//! - [`objstore`]: the OST's store. Each object is a file under `O/<seq>/d<oid % 32>/<oid>`
//!   (ldiskfs's O/ tree), with its filter fid (parent FID and stripe index) in an xattr and
//!   a crc32c per 4 KiB block beside it ([`cksum`]), checked on every read.
//! - [`inject`]: damage on purpose (bit flips in object files), for tests and fault drills.
//! - [`health`]: whether a target's storage is still there and working, checked at start,
//!   periodically and after errors; both stores report to it.
//!
//! Nothing here knows about the namespace or the wire: the MDT and OST crates give meaning to
//! keys and objects.

pub mod cksum;
pub mod dirat;
pub mod health;
pub mod inject;
pub mod journal;
pub mod mdstore;
pub mod objstore;
pub mod rangelock;
pub mod scrub;
pub mod snapshot;

pub use health::Health;
pub use mdstore::{KvRead, MdStore, MdStoreConfig, ReadView, Table, Tx};
pub use objstore::{
    BadBlock, Corruption, ObjError, ObjProbe, ObjStore, ObjStoreConfig, RangeCheck, ReadOut,
};
pub use snapshot::StoreSnapshot;

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

/// Mode of every file a target writes. Its bytes are the file system's files and names,
/// whose owners and permissions the servers enforce for clients; to the local host they are
/// the server owner's alone, as the shared key already is.
pub const PRIVATE_FILE_MODE: u32 = 0o600;
/// Mode of every directory a target makes (see [`PRIVATE_FILE_MODE`]).
pub const PRIVATE_DIR_MODE: u32 = 0o700;

/// Creates `dir` and any missing parents with [`PRIVATE_DIR_MODE`].
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR_MODE)
        .create(dir)
}

/// A builder that makes one directory (not its parents) with [`PRIVATE_DIR_MODE`]: for
/// stores that must not recreate what vanished above them.
pub fn private_dir_builder() -> std::fs::DirBuilder {
    let mut b = std::fs::DirBuilder::new();
    b.mode(PRIVATE_DIR_MODE);
    b
}

/// Options that create a file with [`PRIVATE_FILE_MODE`].
pub fn private_file() -> std::fs::OpenOptions {
    let mut o = std::fs::OpenOptions::new();
    o.mode(PRIVATE_FILE_MODE);
    o
}

/// Every file and directory under `dir` (and `dir` itself) that is not owner-only.
#[cfg(test)]
pub(crate) fn not_private(dir: &Path) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let mut bad = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(p) = todo.pop() {
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        let mode = m.permissions().mode() & 0o777;
        let want = if m.is_dir() {
            PRIVATE_DIR_MODE
        } else {
            PRIVATE_FILE_MODE
        };
        if mode != want {
            bad.push(format!("{} {mode:o}", p.display()));
        }
        if m.is_dir() {
            for e in std::fs::read_dir(&p).into_iter().flatten().flatten() {
                todo.push(e.path());
            }
        }
    }
    bad
}
