//! How the MDT encodes its records in the store's tables.
//!
//! - Inodes: key = local inode number (8 bytes, big-endian), value = versioned
//!   [`InodeRecord`], which holds the inode's own FID (ldiskfs's LMA).
//! - Oi (the object index): key = FID (16 bytes, big-endian), value = local inode number.
//!   Every FID lookup goes through it; the OI scrub rebuilds it from the inodes' own FIDs.
//! - Dirents: key = parent FID + name hash (8 bytes) + name, value = child FID + type +
//!   the child's local inode number when it lives on this MDT (as an ldiskfs dirent holds
//!   both the inode number and the FID). The hash orders a directory's entries and doubles
//!   as the readdir cookie, so cookies stay valid while entries come and go (as ldiskfs
//!   htree hashes do for Lustre).
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
    /// The local inode number this record was read from (0: not stored yet). Not part of
    /// the record: it is the record's key.
    #[serde(skip)]
    pub ino: u64,
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

/// The key of local inode `ino` in the inode table.
pub fn inode_key(ino: u64) -> [u8; 8] {
    ino.to_be_bytes()
}

pub fn parse_inode_key(k: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(k.get(..8)?.try_into().ok()?))
}

/// An object index value: the local inode number.
pub fn oi_value(ino: u64) -> [u8; 8] {
    ino.to_be_bytes()
}

pub fn parse_oi_value(v: &[u8]) -> Result<u64, Errno> {
    parse_inode_key(v).filter(|i| *i != 0).ok_or(Errno::EIO)
}

/// A name entry as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirentRec {
    pub fid: Fid,
    pub kind: FileKind,
    /// The child's local inode number; 0 when it lives on another MDT (or the entry
    /// predates inode numbers).
    pub ino: u64,
}

/// A name entry's value; `ino` 0 for a child on another MDT.
pub fn dirent_value(child: &Fid, kind: FileKind, ino: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(25);
    v.extend_from_slice(&child.to_bytes());
    v.push(kind_code(kind));
    if ino != 0 {
        v.extend_from_slice(&ino.to_be_bytes());
    }
    v
}

pub fn parse_dirent(v: &[u8]) -> Result<DirentRec, Errno> {
    let fid = Fid::from_bytes(v).ok_or(Errno::EIO)?;
    let kind = v
        .get(16)
        .and_then(|c| kind_from_code(*c))
        .ok_or(Errno::EIO)?;
    let ino = v.get(17..25).and_then(parse_inode_key).unwrap_or(0);
    Ok(DirentRec { fid, kind, ino })
}

pub fn parse_dirent_value(v: &[u8]) -> Result<(Fid, FileKind), Errno> {
    parse_dirent(v).map(|d| (d.fid, d.kind))
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
            ino: 0,
        };
        assert_eq!(Inode::decode(&i.encode()), Ok(i.clone()));
        // The inode number is the record's key, not part of it.
        let numbered = Inode {
            ino: 7,
            ..i.clone()
        };
        assert_eq!(numbered.encode(), i.encode());
        assert_eq!(Inode::decode(&[9, 9, 9]), Err(Errno::EIO));
        for k in [FileKind::Regular, FileKind::Socket, FileKind::Directory] {
            for ino in [0, 42] {
                let v = dirent_value(&Fid::ROOT, k, ino);
                assert_eq!(
                    parse_dirent(&v),
                    Ok(DirentRec {
                        fid: Fid::ROOT,
                        kind: k,
                        ino
                    })
                );
                assert_eq!(parse_dirent_value(&v), Ok((Fid::ROOT, k)));
            }
        }
        assert_eq!(parse_oi_value(&oi_value(5)), Ok(5));
        assert_eq!(parse_oi_value(&oi_value(0)), Err(Errno::EIO));
        assert_eq!(parse_oi_value(b"x"), Err(Errno::EIO));
    }
}
