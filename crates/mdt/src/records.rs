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
//! - Links: key = child FID + parent FID + name hash + name, value empty: the links of an
//!   inode beyond its first, which its record holds ([`Inode::link`]). Together they are the
//!   linkEA. A file's create writes no more than its inode and its name, a further link costs
//!   one key whatever the link count, and every link stays recorded (Lustre's linkEA is one
//!   xattr, bounded at 4 KiB, past which names go unrecorded and the inode is flagged
//!   overflowed). The first link is what `..`, fid2path and the ancestor walk follow; when
//!   it goes, the lowest key of the table takes its place.
//! - Xattrs: key = FID + name.
//!
//! Inode records are versioned. V1 held the whole linkEA in the inode, so each new link
//! rewrote all of them; V2 holds the first link only. An MDT converts V1 records when it
//! starts ([`crate::mdd::upgrade_records`]), moving their other links into the links table.

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
    /// The first link (parent FID, name); the others are in the links table. None only
    /// when there are none (the root, an open-unlinked file, a removed directory).
    pub link: Option<(Fid, Vec<u8>)>,
    pub symlink: Option<Vec<u8>>,
    /// `attr.size` is exact (the last writer reported it at close); see Lazy Size-on-MDT.
    /// Stored with the store's crash generation and read back as false in any other (see
    /// [`Inode::decode`]).
    pub lsom_valid: bool,
    /// The local inode number this record was read from (0: not stored yet). Not part of
    /// the record: it is the record's key.
    #[serde(skip)]
    pub ino: u64,
}

/// An inode as format V1 kept it: with its linkEA, (parent FID, name) of every link.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InodeV1 {
    pub attr: Attr,
    pub layout: Option<Layout>,
    pub lmv: Option<Lmv>,
    pub default_layout: Option<Layout>,
    pub default_lmv: Option<LmvTemplate>,
    pub links: Vec<(Fid, Vec<u8>)>,
    pub symlink: Option<Vec<u8>>,
    pub lsom_valid: bool,
}

impl InodeV1 {
    /// The inode with its first link, and its other links.
    pub fn split(self) -> (Inode, Vec<(Fid, Vec<u8>)>) {
        let mut links = self.links.into_iter();
        let ino = Inode {
            attr: self.attr,
            layout: self.layout,
            lmv: self.lmv,
            default_layout: self.default_layout,
            default_lmv: self.default_lmv,
            link: links.next(),
            symlink: self.symlink,
            lsom_valid: self.lsom_valid,
            ino: 0,
        };
        (ino, links.collect())
    }

    #[cfg(test)]
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(&InodeRecordRef::V1(self)).expect("encode")
    }
}

/// Versioned so later formats can be read next to old ones.
#[derive(Serialize, Deserialize)]
enum InodeRecord {
    V1(InodeV1),
    V2(Inode),
    /// V2 and the store's crash generation when it was written.
    V3(Inode, u64),
}

/// A stored inode record, either format.
pub enum Decoded {
    Current(Inode),
    /// Not yet converted: all its links are still inside.
    V1(InodeV1),
}

impl Decoded {
    /// The record in `b`, read in crash generation `crash_gen` (see [`Inode::decode`]).
    pub fn decode(b: &[u8], crash_gen: u64) -> Result<Decoded, Errno> {
        // Records older than V3 were written in generation 0.
        match postcard::from_bytes::<InodeRecord>(b) {
            Ok(InodeRecord::V3(mut i, written)) => {
                i.lsom_valid &= written == crash_gen;
                Ok(Decoded::Current(i))
            }
            Ok(InodeRecord::V2(mut i)) => {
                i.lsom_valid &= crash_gen == 0;
                Ok(Decoded::Current(i))
            }
            Ok(InodeRecord::V1(mut i)) => {
                i.lsom_valid &= crash_gen == 0;
                Ok(Decoded::V1(i))
            }
            Err(e) => {
                tracing::error!(target: "mdt", "corrupt inode record: {e}");
                Err(Errno::EIO)
            }
        }
    }
}

impl Inode {
    /// The stored record, written in the store's crash generation `crash_gen`
    /// ([`nacre_osd::KvRead::crash_gen`]). Failing to encode one is a defect; it fails the
    /// transaction (EIO, logged) rather than store an empty record.
    pub fn encode(&self, crash_gen: u64) -> Result<Vec<u8>, Errno> {
        postcard::to_allocvec(&InodeRecordRef::V3(self, crash_gen)).map_err(|e| {
            tracing::error!(target: "mdt", "cannot encode the inode record of {}: {e}", self.fid());
            Errno::EIO
        })
    }

    /// Decodes an inode record. A V1 record reads with its first link only: the MDT
    /// converts every V1 record, links included, before it serves (see the module comment).
    ///
    /// An exact size (`lsom_valid`) holds only in the crash generation it was written in:
    /// a store that lost its unsynced tail may have lost the open that made a size
    /// inexact, while the writes that followed it reached the OSTs. After such a restart
    /// sizes are glimpsed until the file's next settle records them again.
    pub fn decode(b: &[u8], crash_gen: u64) -> Result<Inode, Errno> {
        match Decoded::decode(b, crash_gen)? {
            Decoded::Current(i) => Ok(i),
            Decoded::V1(i) => Ok(i.split().0),
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
    // Only tests write V1 and V2 records; the variants keep V3's tag.
    #[allow(dead_code)]
    V1(&'a InodeV1),
    #[allow(dead_code)]
    V2(&'a Inode),
    V3(&'a Inode, u64),
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

/// The links-table key of link (`parent`, `name`) of `child` (not its first link).
pub fn link_key(child: &Fid, parent: &Fid, name: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(40 + name.len());
    k.extend_from_slice(&child.to_bytes());
    k.extend_from_slice(&parent.to_bytes());
    k.extend_from_slice(&name_hash(name).to_be_bytes());
    k.extend_from_slice(name);
    k
}

/// First key of `child`'s links in the table.
pub fn links_start(child: &Fid) -> Vec<u8> {
    child.to_bytes().to_vec()
}

/// One past the last key of `child`'s links (no parent FID is all ones, and name hashes
/// stay below 2^63).
pub fn links_end(child: &Fid) -> Vec<u8> {
    let mut k = child.to_bytes().to_vec();
    k.extend_from_slice(&[0xff; 25]);
    k
}

/// Splits a links-table key into (child, parent, name).
pub fn link_key_parts(k: &[u8]) -> Option<(Fid, Fid, &[u8])> {
    if k.len() <= 40 {
        return None;
    }
    let child = Fid::from_bytes(&k[..16])?;
    let parent = Fid::from_bytes(&k[16..32])?;
    Some((child, parent, &k[40..]))
}

/// The first key past every key starting with `prefix`: not `prefix` + 0xff, which a key
/// whose next byte is 0xff sorts after (one client in 256 has a UUID starting so).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            break;
        }
    }
    // Every prefix used starts with an ASCII name.
    debug_assert!(!end.is_empty());
    end
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
    fn link_keys_group_by_child_and_split_back() {
        let (a, b) = (Fid::new(0x200000401, 1, 0), Fid::new(0x200000401, 2, 0));
        let p = Fid::new(0x200000401, 9, 0);
        let k = link_key(&a, &p, b"name");
        assert!(k > links_start(&a) && k < links_end(&a));
        assert!(k < links_start(&b));
        assert!(
            link_key(&a, &Fid::new(u64::MAX, u32::MAX, u32::MAX), &[0xff; 255]) < links_end(&a)
        );
        assert_eq!(link_key_parts(&k), Some((a, p, &b"name"[..])));
        assert_eq!(link_key_parts(&k[..40]), None);
    }

    #[test]
    fn a_v1_record_reads_with_its_links_apart() {
        let attr = Attr {
            fid: Fid::new(0x200000401, 5, 0),
            mode: libc::S_IFREG | 0o644,
            nlink: 2,
            ..Attr::default()
        };
        let links = vec![(Fid::ROOT, b"a".to_vec()), (Fid::ROOT, b"b".to_vec())];
        let v1 = InodeV1 {
            attr: attr.clone(),
            layout: None,
            lmv: None,
            default_layout: None,
            default_lmv: None,
            links: links.clone(),
            symlink: Some(b"t".to_vec()),
            lsom_valid: true,
        };
        let b = v1.encode();
        let Ok(Decoded::V1(back)) = Decoded::decode(&b, 0) else {
            panic!("not read as V1");
        };
        let (ino, got) = back.split();
        assert_eq!(ino.link.as_ref(), Some(&links[0]));
        assert_eq!(got, links[1..]);
        assert_eq!(ino.attr, attr);
        assert_eq!(ino.symlink.as_deref(), Some(&b"t"[..]));
        assert_eq!(Inode::decode(&b, 0), Ok(ino.clone()));
        assert!(matches!(
            Decoded::decode(&ino.encode(0).expect("encode"), 0),
            Ok(Decoded::Current(_))
        ));
    }

    #[test]
    fn an_exact_size_holds_only_in_the_crash_generation_it_was_written_in() {
        let i = Inode {
            attr: Attr {
                fid: Fid::ROOT,
                mode: libc::S_IFREG | 0o644,
                nlink: 1,
                size: 4096,
                ..Attr::default()
            },
            layout: Some(Layout::plain(1, 1 << 20, -1)),
            lmv: None,
            default_layout: None,
            default_lmv: None,
            link: None,
            symlink: None,
            lsom_valid: true,
            ino: 0,
        };
        let b = i.encode(3).expect("encode");
        assert_eq!(Inode::decode(&b, 3), Ok(i.clone()));
        let later = Inode::decode(&b, 4).expect("decode");
        assert!(!later.lsom_valid, "a size from before a crash is trusted");
        assert_eq!(later.attr, i.attr);
        // A record rewritten after the crash without a new settle stays inexact.
        assert!(
            !Inode::decode(&later.encode(4).expect("encode"), 4)
                .expect("decode")
                .lsom_valid
        );
        // Records written before generations existed belong to generation 0.
        let v2 = postcard::to_allocvec(&InodeRecordRef::V2(&i)).expect("encode");
        assert!(Inode::decode(&v2, 0).expect("decode").lsom_valid);
        assert!(!Inode::decode(&v2, 1).expect("decode").lsom_valid);
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
            link: None,
            symlink: None,
            lsom_valid: true,
            ino: 0,
        };
        assert_eq!(
            Inode::decode(&i.encode(0).expect("encode"), 0),
            Ok(i.clone())
        );
        // The inode number is the record's key, not part of it.
        let numbered = Inode {
            ino: 7,
            ..i.clone()
        };
        assert_eq!(numbered.encode(0).ok(), i.encode(0).ok());
        assert_eq!(Inode::decode(&[9, 9, 9], 0), Err(Errno::EIO));
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
