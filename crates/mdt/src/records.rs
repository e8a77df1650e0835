//! How the MDT encodes its records in the store's tables.
//!
//! - Inodes: key = FID (16 bytes, big-endian), value = versioned [`InodeRecord`].
//! - Dirents: key = parent FID + name hash (8 bytes) + name, value = child FID + type. The
//!   hash orders a directory's entries and doubles as the readdir cookie, so cookies stay
//!   valid while entries come and go (as ldiskfs htree hashes do for Lustre).
//! - Xattrs: key = FID + name.

use nacre_core::lmv::{Lmv, LmvTemplate, fnv_1a_64};
use nacre_core::{Attr, Errno, Fid, FileKind, Layout};
use serde::{Deserialize, Serialize};

/// Everything the MDT keeps about one inode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inode {
    pub attr: Attr,
    pub layout: Option<Layout>,
    pub lmv: Option<Lmv>,
    /// Directory default file layout (`lfs setstripe DIR`).
    pub default_layout: Option<Layout>,
    /// Directory default directory layout (`lfs setdirstripe -D`).
    pub default_lmv: Option<LmvTemplate>,
    /// linkEA: (parent FID, name) of every hard link.
    pub links: Vec<(Fid, Vec<u8>)>,
    pub symlink: Option<Vec<u8>>,
    /// `attr.size` is exact (the last writer reported it at close); see Lazy Size-on-MDT.
    pub lsom_valid: bool,
}

/// Versioned so later formats can be read next to old ones.
#[derive(Serialize, Deserialize)]
enum InodeRecord {
    V1(Inode),
}

impl Inode {
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(&InodeRecordRef::V1(self)).unwrap_or_default()
    }

    pub fn decode(b: &[u8]) -> Result<Inode, Errno> {
        match postcard::from_bytes::<InodeRecord>(b) {
            Ok(InodeRecord::V1(i)) => Ok(i),
            Err(e) => {
                tracing::error!(target: "mdt", "corrupt inode record: {e}");
                Err(Errno::EIO)
            }
        }
    }

    pub fn fid(&self) -> Fid {
        self.attr.fid
    }

    pub fn kind(&self) -> Option<FileKind> {
        self.attr.kind()
    }
}

#[derive(Serialize)]
enum InodeRecordRef<'a> {
    V1(&'a Inode),
}

/// Hash of a name inside its directory: key order and readdir cookie. Never 0, 1 or 2,
/// which readdir reserves for the start, `.` and `..`.
pub fn name_hash(name: &[u8]) -> u64 {
    (fnv_1a_64(name) >> 2) + 3
}

pub fn dirent_key(parent: &Fid, name: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(24 + name.len());
    k.extend_from_slice(&parent.to_bytes());
    k.extend_from_slice(&name_hash(name).to_be_bytes());
    k.extend_from_slice(name);
    k
}

/// First key of a directory's entries after `cookie`.
pub fn dirent_start(parent: &Fid, cookie: u64) -> Vec<u8> {
    let mut k = parent.to_bytes().to_vec();
    k.extend_from_slice(&cookie.saturating_add(1).to_be_bytes());
    k
}

/// One past the last key of a directory.
pub fn dirent_end(parent: &Fid) -> Vec<u8> {
    let mut k = parent.to_bytes().to_vec();
    k.extend_from_slice(&[0xff; 9]);
    k
}

/// Splits a dirent key into (hash, name).
pub fn dirent_key_parts(k: &[u8]) -> Option<(u64, &[u8])> {
    if k.len() < 24 {
        return None;
    }
    let h = u64::from_be_bytes(k[16..24].try_into().ok()?);
    Some((h, &k[24..]))
}

pub fn dirent_value(child: &Fid, kind: FileKind) -> Vec<u8> {
    let mut v = child.to_bytes().to_vec();
    v.push(kind_code(kind));
    v
}

pub fn parse_dirent_value(v: &[u8]) -> Result<(Fid, FileKind), Errno> {
    let fid = Fid::from_bytes(v).ok_or(Errno::EIO)?;
    let kind = v
        .get(16)
        .and_then(|c| kind_from_code(*c))
        .ok_or(Errno::EIO)?;
    Ok((fid, kind))
}

fn kind_code(k: FileKind) -> u8 {
    k.dtype()
}

fn kind_from_code(c: u8) -> Option<FileKind> {
    [
        FileKind::Regular,
        FileKind::Directory,
        FileKind::Symlink,
        FileKind::CharDevice,
        FileKind::BlockDevice,
        FileKind::Fifo,
        FileKind::Socket,
    ]
    .into_iter()
    .find(|k| k.dtype() == c)
}

pub fn xattr_key(fid: &Fid, name: &[u8]) -> Vec<u8> {
    let mut k = fid.to_bytes().to_vec();
    k.extend_from_slice(name);
    k
}

pub fn xattr_prefix_end(fid: &Fid) -> Vec<u8> {
    // Names are never empty, so every key of `fid` sorts before fid + 0xff..0xff.
    let mut k = fid.to_bytes().to_vec();
    k.extend_from_slice(&[0xff; 256]);
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirent_keys_sort_within_their_directory() {
        let a = Fid::new(0x200000401, 1, 0);
        let b = Fid::new(0x200000401, 2, 0);
        let k = dirent_key(&a, b"name");
        assert!(k > dirent_start(&a, 0) && k < dirent_end(&a));
        assert!(k < dirent_start(&b, 0));
        let (h, n) = dirent_key_parts(&k).expect("parts");
        assert_eq!(n, b"name");
        assert!(h >= 3);
        // Resuming after an entry's cookie skips it.
        assert!(dirent_start(&a, h) > k);
    }

    #[test]
    fn inode_round_trip_and_corruption() {
        let i = Inode {
            attr: Attr {
                fid: Fid::ROOT,
                mode: libc::S_IFDIR | 0o755,
                nlink: 2,
                ..Attr::default()
            },
            layout: None,
            lmv: None,
            default_layout: Some(Layout::plain(1, 4 << 20, -1)),
            default_lmv: None,
            links: vec![],
            symlink: None,
            lsom_valid: true,
        };
        assert_eq!(Inode::decode(&i.encode()), Ok(i));
        assert_eq!(Inode::decode(&[9, 9, 9]), Err(Errno::EIO));
        for k in [FileKind::Regular, FileKind::Socket, FileKind::Directory] {
            let v = dirent_value(&Fid::ROOT, k);
            assert_eq!(parse_dirent_value(&v), Ok((Fid::ROOT, k)));
        }
    }
}
