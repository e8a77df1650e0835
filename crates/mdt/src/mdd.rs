//! Namespace logic (Lustre's mdd): each operation as one store transaction.
//!
//! Every function here runs inside [`nacre_osd::Tx`], so it either happens whole or not at
//! all, and checks everything it needs before it changes anything. It owns the namespace's
//! invariants: a dirent's FID names an existing inode (FID-in-dirent), every link of an inode
//! is in its linkEA (one key per link in the links table) and its nlink, a directory's nlink
//! is 2 plus its subdirectories, a directory never moves below itself.

use crate::perm;
use crate::records::{self, Decoded, Inode, dirent_key};
use nacre_core::acl::{self, Acl};
use nacre_core::attr::{SetAttr, SetTime};
use nacre_core::fid::{METADATA_SEQ_WIDTH, SUPER_SEQ_WIDTH, super_seq_start};
use nacre_core::{Attr, Errno, Fid, FileKind, Layout, StripeObject, Timespec};
use nacre_osd::{KvRead, Table, Tx};
use nacre_rpc::msg::{Cred, cap};

/// `NAME_MAX`.
pub const NAME_MAX: usize = 255;
/// `XATTR_NAME_MAX`.
pub const XATTR_NAME_MAX: usize = 255;
pub use nacre_core::attr::XATTR_SIZE_MAX;
/// Largest symlink target (`PATH_MAX`).
pub const SYMLINK_MAX: usize = 4096;
/// Hard links per inode (ldiskfs's limit with dir_nlink is 65000).
pub const LINK_MAX: u32 = 65000;
/// Directory depth walked when checking renames; deeper trees are refused (ELOOP).
pub const MAX_DEPTH: usize = 4096;

const KEY_SEQ: &[u8] = b"fid.seq";
const KEY_OID: &[u8] = b"fid.next_oid";
const KEY_SEQ_NEXT: &[u8] = b"seq.next";
const KEY_LLOG_NEXT: &[u8] = b"llog.next";
/// The inode record format every record of the store is in (see [`upgrade_records`]).
const KEY_RECORDS_VERSION: &[u8] = b"records.version";
/// Inode records have their links in the links table from this version on.
const RECORDS_VERSION: u64 = 2;
/// Inode records read and converted per transaction by [`upgrade_records`]: enough to
/// make few transactions of a large store, few enough to keep one batch's undo small.
const UPGRADE_BATCH: usize = 1024;

/// DNE: the name's inode (or a directory the operation walks through) lives on another
/// MDT; the caller runs the operation as a distributed one (Lustre's -EREMOTE).
pub const REMOTE: Errno = Errno::EREMOTE;
/// DNE: the directory is striped; its names live in its stripes, so the client must send
/// the request to the stripe the name hashes to.
pub const STRIPED: Errno = Errno::EREMCHG;

/// Refuses names in the master object of a striped directory (see [`STRIPED`]).
fn plain_dir(dir: &Inode) -> Result<(), Errno> {
    if dir.lmv.is_some() {
        return Err(STRIPED);
    }
    Ok(())
}

/// A directory here that names may be added to: a directory, not removed, not striped.
pub fn live_plain_dir<R: KvRead>(tx: &mut R, fid: &Fid) -> Result<Inode, Errno> {
    let d = get_inode(tx, fid)?;
    if !d.attr.is_dir() {
        return Err(Errno::ENOTDIR);
    }
    if d.attr.nlink == 0 {
        return Err(Errno::ENOENT);
    }
    plain_dir(&d)?;
    Ok(d)
}

/// An inode a local name points to; missing here means it lives on another MDT.
fn get_child(tx: &mut Tx, fid: &Fid) -> Result<Inode, Errno> {
    get_inode(tx, fid).map_err(|e| if e == Errno::ENOENT { REMOTE } else { e })
}

pub fn check_name(name: &[u8]) -> Result<(), Errno> {
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0)
    {
        return Err(Errno::EINVAL);
    }
    if name.len() > NAME_MAX {
        return Err(Errno::ENAMETOOLONG);
    }
    Ok(())
}

/// The local inode number of `fid`, from the object index.
pub fn oi_lookup<R: KvRead>(tx: &mut R, fid: &Fid) -> Result<Option<u64>, Errno> {
    match tx.get(Table::Oi, &fid.to_bytes())? {
        Some(v) => records::parse_oi_value(&v).map(Some),
        None => Ok(None),
    }
}

/// The inode stored under local inode number `ino`, if any.
pub fn inode_at<R: KvRead>(tx: &mut R, ino: u64) -> Result<Option<Inode>, Errno> {
    match tx.get(Table::Inodes, &records::inode_key(ino))? {
        Some(v) => {
            let mut i = Inode::decode(&v, tx.crash_gen())?;
            i.ino = ino;
            Ok(Some(i))
        }
        None => Ok(None),
    }
}

/// The inode of `fid`: the object index gives its inode number, and the inode's own FID
/// must agree (an index entry that points elsewhere is stale; the OI scrub repairs it).
pub fn get_inode<R: KvRead>(tx: &mut R, fid: &Fid) -> Result<Inode, Errno> {
    let Some(ino) = oi_lookup(tx, fid)? else {
        return Err(Errno::ENOENT);
    };
    match inode_at(tx, ino)? {
        Some(i) if i.fid() == *fid => Ok(i),
        _ => {
            tracing::debug!(target: "mdt", "object index: {fid} -> inode {ino}, which is not {fid}");
            Err(Errno::ENOENT)
        }
    }
}

/// [`get_inode`] starting from the inode number a name entry holds, which spares the
/// object index lookup when the entry is right.
pub fn get_inode_hint<R: KvRead>(tx: &mut R, fid: &Fid, ino: u64) -> Result<Inode, Errno> {
    if ino != 0
        && let Some(i) = inode_at(tx, ino)?
        && i.fid() == *fid
    {
        return Ok(i);
    }
    get_inode(tx, fid)
}

/// Inode numbers stay below this (keys of stores made before the object index, FIDs of
/// 16 bytes, sort above it).
const INO_LIMIT: u64 = 1 << 32;

/// A fresh local inode number: one past the highest in use, as an allocation bitmap's
/// next free bit would be (a number freed at the top may be used again; FIDs never are,
/// and every lookup checks the inode's own FID).
fn alloc_ino(tx: &mut Tx) -> Result<u64, Errno> {
    let last = tx.last_key_below(Table::Inodes, &records::inode_key(INO_LIMIT))?;
    let next = last
        .as_deref()
        .and_then(records::parse_inode_key)
        .map_or(1, |i| i + 1);
    if next >= INO_LIMIT {
        return Err(Errno::ENOSPC);
    }
    Ok(next)
}

/// Writes an inode; a new one gets a local inode number and an object index entry.
/// Returns its inode number.
pub fn put_inode(tx: &mut Tx, ino: &Inode) -> Result<u64, Errno> {
    if ino.ino != 0 {
        put_record(tx, ino.ino, ino)?;
        return Ok(ino.ino);
    }
    match oi_lookup(tx, &ino.fid())? {
        Some(id) => {
            put_record(tx, id, ino)?;
            Ok(id)
        }
        None => put_new_inode(tx, ino),
    }
}

/// Writes `ino`'s record under local inode number `id`, in the store's crash generation.
fn put_record(tx: &mut Tx, id: u64, ino: &Inode) -> Result<(), Errno> {
    let rec = ino.encode(tx.crash_gen())?;
    tx.put(Table::Inodes, &records::inode_key(id), &rec)
}

/// Writes an inode whose FID is new (just allocated): a local inode number and an object
/// index entry, without looking the FID up first.
pub fn put_new_inode(tx: &mut Tx, ino: &Inode) -> Result<u64, Errno> {
    let id = alloc_ino(tx)?;
    tx.put(Table::Oi, &ino.fid().to_bytes(), &records::oi_value(id))?;
    put_record(tx, id, ino)?;
    Ok(id)
}

/// Whether `fid` has an inode here (by the object index).
pub fn exists<R: KvRead>(tx: &mut R, fid: &Fid) -> Result<bool, Errno> {
    Ok(oi_lookup(tx, fid)?.is_some())
}

const KEY_OI_VERSION: &[u8] = b"oi.version";
/// Inodes are keyed by local inode number, with the object index beside them.
const OI_VERSION: u64 = 1;

/// Inode records converted per transaction by [`upgrade_oi`].
const OI_UPGRADE_BATCH: usize = 1024;

/// Whether the store keeps inodes under their FIDs (made before the object index).
pub fn predates_oi(v: &nacre_osd::ReadView) -> Result<bool, Errno> {
    if v.get(Table::Meta, KEY_OI_VERSION)?.is_some() {
        return Ok(false);
    }
    Ok(v.range(Table::Inodes, &[0, 0, 0, 1], &[0xff; 17], 1)?
        .iter()
        .any(|(k, _)| k.len() == 16))
}

/// Moves the inodes of a store made before the object index under local inode numbers
/// and builds the index; returns how many it moved. Runs before an MDT serves; a store
/// already converted costs one read.
pub async fn upgrade_oi(store: &nacre_osd::MdStore) -> Result<u64, Errno> {
    if store.read()?.get(Table::Meta, KEY_OI_VERSION)?.is_some() {
        return Ok(0);
    }
    let mut moved = 0;
    loop {
        // FID keys are 16 bytes and sort after every inode number below 2^32.
        let rows =
            store
                .read()?
                .range(Table::Inodes, &[0, 0, 0, 1], &[0xff; 17], OI_UPGRADE_BATCH)?;
        let rows: Vec<_> = rows.into_iter().filter(|(k, _)| k.len() == 16).collect();
        if rows.is_empty() {
            break;
        }
        moved += store
            .write(move |tx| {
                let mut n = 0;
                for (k, v) in rows {
                    let ino = Inode::decode(&v, tx.crash_gen())?;
                    tx.delete(Table::Inodes, &k)?;
                    if oi_lookup(tx, &ino.fid())?.is_none() {
                        put_inode(tx, &ino)?;
                        n += 1;
                    }
                }
                Ok(n)
            })
            .await?;
    }
    store
        .write(|tx| put_u64(tx, KEY_OI_VERSION, OI_VERSION))
        .await?;
    Ok(moved)
}

/// Rebuilds an object index that is empty while the store has inodes (its table was
/// deleted, or the store came back from a file-level copy without it), from the FIDs the
/// inodes keep; returns how many entries it wrote. Runs before an MDT serves, as it must:
/// without the index nothing is found by FID, and the root would be made again. A store
/// with an index (however damaged) costs two reads; the online OI scrub checks the rest.
pub async fn rebuild_lost_oi(store: &nacre_osd::MdStore) -> Result<u64, Errno> {
    {
        let v = store.read()?;
        if v.count(Table::Oi)? != 0 || v.range(Table::Inodes, &[], &[0xff; 9], 1)?.is_empty() {
            return Ok(0);
        }
    }
    let mut start = records::inode_key(0).to_vec();
    let mut written = 0;
    loop {
        let rows = store
            .read()?
            .range(Table::Inodes, &start, &[0xff; 9], OI_UPGRADE_BATCH)?;
        let Some((last, _)) = rows.last() else {
            return Ok(written);
        };
        start = last.clone();
        start.push(0);
        written += store
            .write(move |tx| {
                let mut n = 0;
                for (k, v) in rows {
                    let Some(ino) = records::parse_inode_key(&k).filter(|_| k.len() == 8) else {
                        continue;
                    };
                    let fid = Inode::decode(&v, tx.crash_gen())?.fid();
                    if oi_lookup(tx, &fid)?.is_none() {
                        tx.put(Table::Oi, &fid.to_bytes(), &records::oi_value(ino))?;
                        n += 1;
                    }
                }
                Ok(n)
            })
            .await?;
    }
}

fn is_first(ino: &Inode, parent: &Fid, name: &[u8]) -> bool {
    ino.link
        .as_ref()
        .is_some_and(|(p, n)| p == parent && n == name)
}

/// Records link (`parent`, `name`) of `ino` in its linkEA: as its first link when it has
/// none (in the record, which the caller writes), else as a key of the links table.
pub fn add_link(tx: &mut Tx, ino: &mut Inode, parent: &Fid, name: &[u8]) -> Result<(), Errno> {
    if ino.link.is_none() {
        ino.link = Some((*parent, name.to_vec()));
        return Ok(());
    }
    tx.put(
        Table::Links,
        &records::link_key(&ino.fid(), parent, name),
        &[],
    )
}

/// Forgets link (`parent`, `name`) of `ino`; returns whether it was recorded. When the
/// first link goes, the table's lowest takes its place (in the record, which the caller
/// writes).
pub fn remove_link(tx: &mut Tx, ino: &mut Inode, parent: &Fid, name: &[u8]) -> Result<bool, Errno> {
    let fid = ino.fid();
    if is_first(ino, parent, name) {
        ino.link = table_links(tx, &fid, 1)?.into_iter().next();
        if let Some((p, n)) = &ino.link {
            tx.delete(Table::Links, &records::link_key(&fid, p, n))?;
        }
        return Ok(true);
    }
    tx.delete(Table::Links, &records::link_key(&fid, parent, name))
}

pub fn has_link<R: KvRead>(
    tx: &mut R,
    ino: &Inode,
    parent: &Fid,
    name: &[u8],
) -> Result<bool, Errno> {
    if is_first(ino, parent, name) {
        return Ok(true);
    }
    Ok(tx
        .get(Table::Links, &records::link_key(&ino.fid(), parent, name))?
        .is_some())
}

/// Up to `limit` links of `child` from the links table (its first link is not there).
fn table_links<R: KvRead>(
    tx: &mut R,
    child: &Fid,
    limit: usize,
) -> Result<Vec<(Fid, Vec<u8>)>, Errno> {
    let rows = tx.range(
        Table::Links,
        &records::links_start(child),
        &records::links_end(child),
        limit,
    )?;
    rows.iter()
        .map(|(k, _)| {
            let (_, parent, name) = records::link_key_parts(k).ok_or(Errno::EIO)?;
            Ok((parent, name.to_vec()))
        })
        .collect()
}

/// Up to `limit` links of `ino`, its first link first.
pub fn links_of<R: KvRead>(
    tx: &mut R,
    ino: &Inode,
    limit: usize,
) -> Result<Vec<(Fid, Vec<u8>)>, Errno> {
    let mut v: Vec<(Fid, Vec<u8>)> = ino.link.iter().take(limit).cloned().collect();
    if v.len() < limit {
        v.extend(table_links(tx, &ino.fid(), limit - v.len())?);
    }
    Ok(v)
}

/// Every link of `ino`, its first link first.
pub fn all_links<R: KvRead>(tx: &mut R, ino: &Inode) -> Result<Vec<(Fid, Vec<u8>)>, Errno> {
    links_of(tx, ino, usize::MAX)
}

/// Replaces the whole linkEA of `ino` by `links` (the first becomes the record's; the
/// caller writes the inode). LFSCK's repairs and fault injection set it this way.
pub fn set_links(tx: &mut Tx, ino: &mut Inode, links: Vec<(Fid, Vec<u8>)>) -> Result<(), Errno> {
    let fid = ino.fid();
    for (p, n) in table_links(tx, &fid, usize::MAX)? {
        tx.delete(Table::Links, &records::link_key(&fid, &p, &n))?;
    }
    ino.link = None;
    for (p, n) in links {
        add_link(tx, ino, &p, &n)?;
    }
    Ok(())
}

/// Converts the store's V1 inode records (each holding its whole linkEA) to the current
/// format, their links past the first moved to the links table; returns how many it
/// converted. Runs
/// before an MDT serves and on stores opened for checking; a store already converted
/// costs one read.
/// Whether a store holds records of an older format than this MDT writes (an MDT
/// converts them when it starts; [`upgrade_records`]).
pub fn records_outdated<R: KvRead>(v: &mut R) -> Result<bool, Errno> {
    let version = v
        .get(Table::Meta, KEY_RECORDS_VERSION)?
        .and_then(|v| v.try_into().ok())
        .map(u64::from_le_bytes);
    if version >= Some(RECORDS_VERSION) {
        return Ok(false);
    }
    Ok(!v.range(Table::Inodes, &[], &[0xff; 17], 1)?.is_empty())
}

pub async fn upgrade_records(store: &nacre_osd::MdStore) -> Result<u64, Errno> {
    let version = store
        .read()?
        .get(Table::Meta, KEY_RECORDS_VERSION)?
        .and_then(|v| v.try_into().ok())
        .map(u64::from_le_bytes);
    if version >= Some(RECORDS_VERSION) {
        return Ok(0);
    }
    let mut start = Vec::new();
    let mut converted = 0;
    loop {
        let rows = store
            .read()?
            .range(Table::Inodes, &start, &[0xff; 17], UPGRADE_BATCH)?;
        let Some((last, _)) = rows.last() else {
            break;
        };
        start = last.clone();
        start.push(0);
        converted += store
            .write(move |tx| {
                let mut n = 0;
                for (k, v) in rows {
                    if let Decoded::V1(old) = Decoded::decode(&v, tx.crash_gen())? {
                        let (mut ino, links) = old.split();
                        for (p, name) in links {
                            add_link(tx, &mut ino, &p, &name)?;
                        }
                        // Under the key it had (a FID before the object index, which
                        // upgrade_oi converts next; else its inode number).
                        tx.put(Table::Inodes, &k, &ino.encode(tx.crash_gen())?)?;
                        n += 1;
                    }
                }
                Ok(n)
            })
            .await?;
    }
    store
        .write(|tx| put_u64(tx, KEY_RECORDS_VERSION, RECORDS_VERSION))
        .await?;
    Ok(converted)
}

pub fn lookup<R: KvRead>(
    tx: &mut R,
    parent: &Fid,
    name: &[u8],
) -> Result<Option<(Fid, FileKind)>, Errno> {
    Ok(lookup_rec(tx, parent, name)?.map(|d| (d.fid, d.kind)))
}

/// A name entry with the inode number it holds.
pub fn lookup_rec<R: KvRead>(
    tx: &mut R,
    parent: &Fid,
    name: &[u8],
) -> Result<Option<records::DirentRec>, Errno> {
    match tx.get(Table::Dirents, &dirent_key(parent, name))? {
        Some(v) => records::parse_dirent(&v).map(Some),
        None => Ok(None),
    }
}

/// Writes the name entry `parent/name -> child`, with the child's inode number when it
/// lives here (`ino` 0: looked up in the object index).
pub fn put_dirent(
    tx: &mut Tx,
    parent: &Fid,
    name: &[u8],
    child: &Fid,
    kind: FileKind,
    ino: u64,
) -> Result<(), Errno> {
    let ino = match ino {
        0 => oi_lookup(tx, child)?.unwrap_or(0),
        i => i,
    };
    tx.put(
        Table::Dirents,
        &dirent_key(parent, name),
        &records::dirent_value(child, kind, ino),
    )
}

/// A name as a client resolves it (the Lookup request): the namespace rules apply before
/// the store is asked, so an over-long component is ENAMETOOLONG rather than "not found";
/// `.` and `..` resolve to the directory and its parent (the first link, as Lustre does).
pub fn lookup_name<R: KvRead>(tx: &mut R, parent: &Fid, name: &[u8]) -> Result<Fid, Errno> {
    lookup_name_rec(tx, parent, name).map(|(f, _)| f)
}

/// [`lookup_name`] with the inode number the entry holds (0 when it has none).
pub fn lookup_name_rec<R: KvRead>(
    tx: &mut R,
    parent: &Fid,
    name: &[u8],
) -> Result<(Fid, u64), Errno> {
    if name.len() > NAME_MAX {
        return Err(Errno::ENAMETOOLONG);
    }
    if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
        return Err(Errno::EINVAL);
    }
    let found = match name {
        b"." | b".." => {
            let dir = get_inode(tx, parent)?;
            if !dir.attr.is_dir() {
                return Err(Errno::ENOTDIR);
            }
            match (name, &dir.link) {
                (b"..", Some((p, _))) => Some((*p, 0)),
                // The root (and `.`) is its own parent.
                _ => Some((*parent, dir.ino)),
            }
        }
        _ => lookup_rec(tx, parent, name)?.map(|d| (d.fid, d.ino)),
    };
    match found {
        Some(f) => Ok(f),
        // A directory that is gone (another client removed it) has no names: ENOENT, as
        // Lustre answers and as a local file system does for a name in a removed
        // directory, so `rm -rf` of one tree from two clients ends without errors. (A
        // getattr of the directory's FID itself says ESTALE.)
        None => Err(match get_inode(tx, parent) {
            Ok(dir) if !dir.attr.is_dir() => Errno::ENOTDIR,
            Ok(dir) if dir.lmv.is_some() => STRIPED,
            Ok(_) => Errno::ENOENT,
            Err(e) => e,
        }),
    }
}

fn get_u64(tx: &mut Tx, key: &[u8]) -> Result<Option<u64>, Errno> {
    Ok(tx
        .get(Table::Meta, key)?
        .and_then(|v| v.try_into().ok())
        .map(u64::from_le_bytes))
}

fn put_u64(tx: &mut Tx, key: &[u8], v: u64) -> Result<(), Errno> {
    tx.put(Table::Meta, key, &v.to_le_bytes())
}

/// Takes a fresh sequence from this MDT's super-sequence.
pub fn alloc_seq(tx: &mut Tx, mdt_idx: u32) -> Result<u64, Errno> {
    let start = super_seq_start(mdt_idx);
    let next = get_u64(tx, KEY_SEQ_NEXT)?.unwrap_or(start + 1);
    if next >= start + SUPER_SEQ_WIDTH {
        return Err(Errno::ENOSPC);
    }
    put_u64(tx, KEY_SEQ_NEXT, next + 1)?;
    Ok(next)
}

/// Allocates a new metadata FID.
pub fn alloc_fid(tx: &mut Tx, mdt_idx: u32) -> Result<Fid, Errno> {
    let mut seq = match get_u64(tx, KEY_SEQ)? {
        Some(s) => s,
        None => {
            // The first sequence of the super-sequence, reserved for metadata at format.
            let s = super_seq_start(mdt_idx);
            put_u64(tx, KEY_SEQ, s)?;
            s
        }
    };
    let mut oid = get_u64(tx, KEY_OID)?.unwrap_or(1);
    if oid >= u64::from(METADATA_SEQ_WIDTH) {
        seq = alloc_seq(tx, mdt_idx)?;
        put_u64(tx, KEY_SEQ, seq)?;
        oid = 1;
    }
    put_u64(tx, KEY_OID, oid + 1)?;
    Ok(Fid::new(seq, oid as u32, 0))
}

/// After a replayed create: the allocator hands out FIDs above `fid` (the crash may have
/// taken its allocation back), when `fid` is of this MDT's current or a later sequence.
pub fn note_fid_used(tx: &mut Tx, mdt_idx: u32, fid: &Fid) -> Result<(), Errno> {
    let start = super_seq_start(mdt_idx);
    if fid.seq < start || fid.seq >= start + SUPER_SEQ_WIDTH {
        return Ok(());
    }
    let seq = get_u64(tx, KEY_SEQ)?.unwrap_or(start);
    let oid = get_u64(tx, KEY_OID)?.unwrap_or(1);
    if fid.seq > seq {
        put_u64(tx, KEY_SEQ, fid.seq)?;
        put_u64(tx, KEY_OID, u64::from(fid.oid) + 1)?;
        if get_u64(tx, KEY_SEQ_NEXT)?.unwrap_or(start + 1) <= fid.seq {
            put_u64(tx, KEY_SEQ_NEXT, fid.seq + 1)?;
        }
    } else if fid.seq == seq && u64::from(fid.oid) >= oid {
        put_u64(tx, KEY_OID, u64::from(fid.oid) + 1)?;
    }
    Ok(())
}

/// Creates the root directory and `.lustre` at format time.
pub fn format_root(tx: &mut Tx, now: Timespec) -> Result<(), Errno> {
    if exists(tx, &Fid::ROOT)? {
        return Ok(());
    }
    let root = Inode {
        attr: Attr {
            fid: Fid::ROOT,
            mode: libc::S_IFDIR | 0o755,
            nlink: 2,
            atime: now,
            mtime: now,
            ctime: now,
            btime: now,
            ..Attr::default()
        },
        layout: None,
        lmv: None,
        default_layout: None,
        default_lmv: None,
        link: None,
        symlink: None,
        lsom_valid: true,
        ino: 0,
    };
    put_inode(tx, &root)?;
    tx.put(Table::Meta, KEY_OI_VERSION, &OI_VERSION.to_le_bytes())
}

/// What a create asks for.
pub struct CreateArgs {
    pub parent: Fid,
    pub name: Vec<u8>,
    pub mode: u32,
    pub rdev: u32,
    /// The creator: the new inode's owner, and whose permissions are checked.
    pub cred: Cred,
    pub symlink: Option<Vec<u8>>,
    /// Instantiated layout for regular files.
    pub layout: Option<Layout>,
    /// The new FID (allocated by the caller when it needs it early) or None.
    pub fid: Option<Fid>,
    pub now: Timespec,
    /// Writer opens the new file: its MDT size is not exact until close.
    pub open_for_write: bool,
}

/// The result of a create: the new inode, or the existing one when `open` found it.
pub enum Created {
    New(Inode),
    Existing(Inode),
}

/// An extended attribute's name and value.
pub type NamedXattr = (Vec<u8>, Vec<u8>);

/// A new entry's mode and ACLs from its directory (`posix_acl_create`): with a default
/// ACL, the entry's access ACL is the default masked by the requested mode (stored only
/// when it says more than the mode), a directory inherits the default itself, and the
/// umask does not apply; without one, the umask does. Symlinks have neither.
pub fn inherit_acls<R: KvRead>(
    r: &mut R,
    dir: &Fid,
    mode: u32,
    umask: u32,
) -> Result<(u32, Vec<NamedXattr>), Errno> {
    if mode & libc::S_IFMT == libc::S_IFLNK {
        return Ok((mode, Vec::new()));
    }
    let Some(default) = perm::stored_acl(r, dir, acl::XATTR_DEFAULT)? else {
        return Ok((mode & !(umask & 0o777), Vec::new()));
    };
    let mut xattrs = Vec::new();
    if mode & libc::S_IFMT == libc::S_IFDIR {
        xattrs.push((acl::XATTR_DEFAULT.to_vec(), default.encode()));
    }
    let mut access = default;
    let (mode, extended) = access.create_masq(mode);
    if extended {
        xattrs.push((acl::XATTR_ACCESS.to_vec(), access.encode()));
    }
    Ok((mode, xattrs))
}

/// Creates a name and its inode. With `open_existing`, an existing regular file under that
/// name is returned instead of EEXIST (open without O_EXCL).
pub fn create(
    tx: &mut Tx,
    mdt_idx: u32,
    a: CreateArgs,
    open_existing: bool,
) -> Result<Created, Errno> {
    check_name(&a.name)?;
    let kind = FileKind::from_mode(a.mode).ok_or(Errno::EINVAL)?;
    let mut parent = get_inode(tx, &a.parent)?;
    if !parent.attr.is_dir() {
        return Err(Errno::ENOTDIR);
    }
    if parent.attr.nlink == 0 {
        // Removed while we looked at it.
        return Err(Errno::ENOENT);
    }
    plain_dir(&parent)?;
    perm::may_lookup(tx, &a.cred, &parent.attr)?;
    if let Some((fid, _)) = lookup(tx, &a.parent, &a.name)? {
        if !open_existing {
            return Err(Errno::EEXIST);
        }
        let existing = get_child(tx, &fid)?;
        if existing.attr.is_dir() {
            return Err(Errno::EISDIR);
        }
        return Ok(Created::Existing(existing));
    }
    perm::may_create(tx, &a.cred, &parent.attr)?;
    if matches!(kind, FileKind::CharDevice | FileKind::BlockDevice) && !a.cred.capable(cap::MKNOD) {
        return Err(Errno::EPERM);
    }
    if let Some(t) = &a.symlink {
        if t.is_empty() {
            return Err(Errno::ENOENT);
        }
        if t.len() > SYMLINK_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
    }
    let fid = match a.fid {
        // A FID the caller chose (a replayed create, a repair) must not name another
        // object: writing over it would replace that object's inode.
        Some(f) if exists(tx, &f)? => return Err(Errno::EEXIST),
        Some(f) => f,
        None => alloc_fid(tx, mdt_idx)?,
    };
    let (mode, xattrs) = inherit_acls(tx, &a.parent, a.mode, a.cred.umask)?;
    let mut mode = perm::strip_sgid_on_create(&a.cred, &parent.attr, mode);
    let mut gid = a.cred.gid;
    if parent.attr.mode & libc::S_ISGID != 0 {
        // BSD group semantics on set-group-ID directories.
        gid = parent.attr.gid;
        if kind == FileKind::Directory {
            mode |= libc::S_ISGID;
        }
    }
    let is_dir = kind == FileKind::Directory;
    let size = a.symlink.as_ref().map_or(0, |t| t.len() as u64);
    let ino = Inode {
        attr: Attr {
            fid,
            mode,
            nlink: if is_dir { 2 } else { 1 },
            uid: a.cred.uid,
            gid,
            size,
            blocks: 0,
            atime: a.now,
            mtime: a.now,
            ctime: a.now,
            btime: a.now,
            rdev: if matches!(kind, FileKind::CharDevice | FileKind::BlockDevice) {
                a.rdev
            } else {
                0
            },
        },
        layout: if kind == FileKind::Regular {
            match a.layout {
                Some(mut l) => {
                    assign_dom_object(tx, mdt_idx, &mut l)?;
                    Some(l)
                }
                None => None,
            }
        } else {
            None
        },
        lmv: None,
        // A directory default (not the root's) is copied into new subdirectories.
        default_layout: if is_dir && a.parent != Fid::ROOT {
            parent.default_layout.clone()
        } else {
            None
        },
        default_lmv: None,
        link: Some((a.parent, a.name.clone())),
        symlink: a.symlink,
        lsom_valid: !a.open_for_write,
        ino: 0,
    };
    // The FID is new either way (checked above, or just allocated).
    let ino_nr = put_new_inode(tx, &ino)?;
    for (name, value) in &xattrs {
        tx.put(Table::Xattrs, &records::xattr_key(&fid, name), value)?;
    }
    put_dirent(tx, &a.parent, &a.name, &fid, kind, ino_nr)?;
    let ino = Inode { ino: ino_nr, ..ino };
    if is_dir {
        parent.attr.nlink += 1;
    }
    parent.attr.mtime = a.now;
    parent.attr.ctime = a.now;
    put_inode(tx, &parent)?;
    Ok(Created::New(ino))
}

/// What became of an unlinked inode.
#[derive(Debug, Default)]
pub struct Removed {
    pub fid: Option<Fid>,
    /// Objects to destroy now (last link gone, not open).
    pub destroy: Vec<StripeObject>,
    /// Last link gone while open: kept as an orphan until the last close.
    pub orphaned: bool,
}

/// Drops one link of `child`; removes the inode when it was the last and it is not open.
pub(crate) fn drop_link(
    tx: &mut Tx,
    child: &mut Inode,
    parent: &Fid,
    name: &[u8],
    now: Timespec,
    is_open: &dyn Fn(&Fid) -> bool,
) -> Result<Removed, Errno> {
    let fid = child.fid();
    remove_link(tx, child, parent, name)?;
    let mut out = Removed {
        fid: Some(fid),
        ..Removed::default()
    };
    if child.attr.is_dir() {
        child.attr.nlink = 0;
    } else {
        child.attr.nlink = child.attr.nlink.saturating_sub(1);
    }
    child.attr.ctime = now;
    if child.attr.nlink > 0 {
        put_inode(tx, child)?;
        return Ok(out);
    }
    if is_open(&fid) {
        put_inode(tx, child)?;
        tx.put(Table::Orphans, &fid.to_bytes(), &[])?;
        out.orphaned = true;
        return Ok(out);
    }
    out.destroy = destroy_inode(tx, child)?;
    Ok(out)
}

/// Gives an instantiated Data-on-MDT component its MDT-local object, if it has none.
pub fn assign_dom_object(tx: &mut Tx, mdt_idx: u32, l: &mut Layout) -> Result<(), Errno> {
    let needs = l.components.first().is_some_and(|c| {
        c.pattern == nacre_core::Pattern::Mdt && c.is_init() && c.dom_object.is_none()
    });
    if needs {
        let f = alloc_fid(tx, mdt_idx)?;
        if let Some(c) = l.components.first_mut() {
            c.dom_object = Some(f);
        }
    }
    Ok(())
}

/// Records that precreated objects were handed out, so no restart hands them out again
/// (each OST pool's next id only moves forward).
pub fn note_objects_used(tx: &mut Tx, objs: &[StripeObject]) -> Result<(), Errno> {
    for o in objs {
        let k = format!("osp.{}.next", o.ost_idx).into_bytes();
        let cur = tx
            .get(Table::Meta, &k)?
            .and_then(|v| v.try_into().ok())
            .map(u32::from_le_bytes)
            .unwrap_or(1);
        if o.fid.oid + 1 > cur {
            tx.put(Table::Meta, &k, &(o.fid.oid + 1).to_le_bytes())?;
        }
    }
    Ok(())
}

/// The unlink log marks an MDT-local (Data-on-MDT) object with this "OST" index.
pub const LLOG_DOM_OBJECT: u32 = u32::MAX;

/// Every object a layout owns, Data-on-MDT objects marked with [`LLOG_DOM_OBJECT`].
pub fn layout_objects(l: &Layout) -> Vec<StripeObject> {
    let mut objs: Vec<StripeObject> = l.objects().copied().collect();
    if let Some(f) = l.dom_object() {
        objs.push(StripeObject {
            ost_idx: LLOG_DOM_OBJECT,
            fid: f,
        });
    }
    objs
}

/// Deletes an inode with its xattrs; returns its OST objects for the unlink log.
pub fn destroy_inode(tx: &mut Tx, ino: &Inode) -> Result<Vec<StripeObject>, Errno> {
    let fid = ino.fid();
    let nr = match ino.ino {
        0 => oi_lookup(tx, &fid)?,
        n => Some(n),
    };
    if let Some(nr) = nr {
        tx.delete(Table::Inodes, &records::inode_key(nr))?;
    }
    tx.delete(Table::Oi, &fid.to_bytes())?;
    tx.delete(Table::Orphans, &fid.to_bytes())?;
    let ranges = [
        (
            Table::Xattrs,
            fid.to_bytes().to_vec(),
            records::xattr_prefix_end(&fid),
        ),
        // Links left when the last one went (a removed directory, an open-unlinked file
        // has none) or never named (an aborted distributed create).
        (
            Table::Links,
            records::links_start(&fid),
            records::links_end(&fid),
        ),
    ];
    for (table, start, end) in ranges {
        loop {
            let batch = tx.range(table, &start, &end, 256)?;
            if batch.is_empty() {
                break;
            }
            for (k, _) in batch {
                tx.delete(table, &k)?;
            }
        }
    }
    let objs: Vec<StripeObject> = ino.layout.iter().flat_map(layout_objects).collect();
    if !objs.is_empty() {
        log_destroy(tx, &fid, &objs)?;
    }
    Ok(objs)
}

/// Records objects to destroy once this transaction commits (the unlink llog).
pub fn log_destroy(tx: &mut Tx, owner: &Fid, objs: &[StripeObject]) -> Result<(), Errno> {
    let id = get_u64(tx, KEY_LLOG_NEXT)?.unwrap_or(1);
    put_u64(tx, KEY_LLOG_NEXT, id + 1)?;
    let rec = postcard::to_allocvec(&(owner, objs)).map_err(|_| Errno::EIO)?;
    tx.put(Table::Llog, &id.to_be_bytes(), &rec)
}

pub fn decode_llog(v: &[u8]) -> Option<(Fid, Vec<StripeObject>)> {
    postcard::from_bytes(v).ok()
}

/// Whether directory `dir` has entries.
pub fn dir_has_entries(tx: &mut Tx, dir: &Fid) -> Result<bool, Errno> {
    tx.any_in(
        Table::Dirents,
        &records::dirent_start(dir, 0),
        &records::dirent_end(dir),
    )
}

#[allow(clippy::too_many_arguments)]
pub fn unlink(
    tx: &mut Tx,
    parent_fid: &Fid,
    name: &[u8],
    want_dir: bool,
    now: Timespec,
    is_open: &dyn Fn(&Fid) -> bool,
    cred: &Cred,
) -> Result<Removed, Errno> {
    if name == b"." {
        return Err(Errno::EINVAL);
    }
    if name == b".." {
        return Err(Errno::ENOTEMPTY);
    }
    check_name(name)?;
    let mut parent = get_inode(tx, parent_fid)?;
    if !parent.attr.is_dir() {
        return Err(Errno::ENOTDIR);
    }
    plain_dir(&parent)?;
    perm::may_lookup(tx, cred, &parent.attr)?;
    let (child_fid, _) = lookup(tx, parent_fid, name)?.ok_or(Errno::ENOENT)?;
    perm::may_create(tx, cred, &parent.attr)?;
    let mut child = get_child(tx, &child_fid)?;
    if perm::sticky_denies(cred, &parent.attr, child.attr.uid) {
        return Err(Errno::EPERM);
    }
    let is_dir = child.attr.is_dir();
    if want_dir && !is_dir {
        return Err(Errno::ENOTDIR);
    }
    if !want_dir && is_dir {
        return Err(Errno::EISDIR);
    }
    if is_dir && child.lmv.is_some() {
        // A striped directory: its stripes are on other MDTs.
        return Err(REMOTE);
    }
    if is_dir && dir_has_entries(tx, &child_fid)? {
        return Err(Errno::ENOTEMPTY);
    }
    tx.delete(Table::Dirents, &dirent_key(parent_fid, name))?;
    if is_dir {
        parent.attr.nlink = parent.attr.nlink.saturating_sub(1).max(2);
    }
    parent.attr.mtime = now;
    parent.attr.ctime = now;
    put_inode(tx, &parent)?;
    drop_link(tx, &mut child, parent_fid, name, now, is_open)
}

pub fn link(
    tx: &mut Tx,
    fid: &Fid,
    parent_fid: &Fid,
    name: &[u8],
    now: Timespec,
    cred: &Cred,
) -> Result<Inode, Errno> {
    check_name(name)?;
    {
        // The directory's permissions first, as the VFS checks them (EEXIST before
        // EACCES for write, which creating needs).
        let parent = get_inode(tx, parent_fid)?;
        if parent.attr.is_dir() {
            perm::may_lookup(tx, cred, &parent.attr)?;
            if lookup(tx, parent_fid, name)?.is_some() {
                return Err(Errno::EEXIST);
            }
            perm::may_create(tx, cred, &parent.attr)?;
        }
    }
    let mut ino = get_child(tx, fid)?;
    if ino.attr.is_dir() {
        return Err(Errno::EPERM);
    }
    if ino.attr.nlink == 0 {
        return Err(Errno::ENOENT);
    }
    if ino.attr.nlink >= LINK_MAX {
        return Err(Errno::EMLINK);
    }
    let mut parent = get_inode(tx, parent_fid)?;
    if !parent.attr.is_dir() {
        return Err(Errno::ENOTDIR);
    }
    if parent.attr.nlink == 0 {
        return Err(Errno::ENOENT);
    }
    plain_dir(&parent)?;
    if lookup(tx, parent_fid, name)?.is_some() {
        return Err(Errno::EEXIST);
    }
    let kind = ino.kind().ok_or(Errno::EIO)?;
    put_dirent(tx, parent_fid, name, fid, kind, ino.ino)?;
    ino.attr.nlink += 1;
    ino.attr.ctime = now;
    add_link(tx, &mut ino, parent_fid, name)?;
    put_inode(tx, &ino)?;
    parent.attr.mtime = now;
    parent.attr.ctime = now;
    put_inode(tx, &parent)?;
    Ok(ino)
}

/// Whether `ancestor` is `fid` or one of its ancestors (walking linkEA parents).
fn is_ancestor(tx: &mut Tx, ancestor: &Fid, fid: &Fid) -> Result<bool, Errno> {
    let mut cur = *fid;
    for _ in 0..MAX_DEPTH {
        if cur == *ancestor {
            return Ok(true);
        }
        if cur == Fid::ROOT {
            return Ok(false);
        }
        // The path to the root leaves this MDT: only a distributed walk can tell.
        let ino = get_child(tx, &cur)?;
        match ino.link {
            Some((p, _)) => cur = p,
            None => return Ok(false),
        }
    }
    Err(Errno::ELOOP)
}

pub const RENAME_NOREPLACE: u32 = 1;
pub const RENAME_EXCHANGE: u32 = 2;

/// Moves link `from` of `ino` to `to` (recording `to` even if `from` was not); the caller
/// writes the inode.
fn relink(
    tx: &mut Tx,
    ino: &mut Inode,
    from: (&Fid, &[u8]),
    to: (&Fid, &[u8]),
) -> Result<(), Errno> {
    if is_first(ino, from.0, from.1) {
        // The first link keeps its place under its new name.
        ino.link = Some((*to.0, to.1.to_vec()));
        return Ok(());
    }
    remove_link(tx, ino, from.0, from.1)?;
    add_link(tx, ino, to.0, to.1)
}

#[allow(clippy::too_many_arguments)]
pub fn rename(
    tx: &mut Tx,
    sp: &Fid,
    sn: &[u8],
    dp: &Fid,
    dn: &[u8],
    flags: u32,
    now: Timespec,
    is_open: &dyn Fn(&Fid) -> bool,
    cred: &Cred,
) -> Result<Removed, Errno> {
    if flags & !(RENAME_NOREPLACE | RENAME_EXCHANGE) != 0
        || flags == RENAME_NOREPLACE | RENAME_EXCHANGE
    {
        return Err(Errno::EINVAL);
    }
    for n in [sn, dn] {
        if n == b"." || n == b".." {
            return Err(Errno::EBUSY);
        }
    }
    check_name(sn)?;
    check_name(dn)?;
    let mut sparent = get_inode(tx, sp)?;
    let mut dparent = if sp == dp {
        sparent.clone()
    } else {
        get_inode(tx, dp)?
    };
    if !sparent.attr.is_dir() || !dparent.attr.is_dir() {
        return Err(Errno::ENOTDIR);
    }
    plain_dir(&sparent)?;
    plain_dir(&dparent)?;
    if dparent.attr.nlink == 0 {
        return Err(Errno::ENOENT);
    }
    perm::may_lookup(tx, cred, &sparent.attr)?;
    perm::may_lookup(tx, cred, &dparent.attr)?;
    let src = lookup_rec(tx, sp, sn)?.ok_or(Errno::ENOENT)?;
    let (sfid, skind) = (src.fid, src.kind);
    let target_rec = lookup_rec(tx, dp, dn)?;
    let target = target_rec.map(|t| (t.fid, t.kind));
    if target.map(|t| t.0) == Some(sfid) {
        // Both names are links to the same inode: nothing to do (POSIX).
        return Ok(Removed::default());
    }
    let s_is_dir = skind == FileKind::Directory;
    if s_is_dir && sp != dp && is_ancestor(tx, &sfid, dp)? {
        return Err(Errno::EINVAL);
    }
    let mut sino = get_child(tx, &sfid)?;
    rename_permission(tx, cred, (&sparent, &sino), &dparent, target, flags)?;
    let mut removed = Removed::default();
    // nlink changes of the two parents, applied at the end (they may be one directory).
    let mut s_delta: i64 = 0;
    let mut d_delta: i64 = 0;

    if flags & RENAME_EXCHANGE != 0 {
        let (tfid, tkind) = target.ok_or(Errno::ENOENT)?;
        let t_is_dir = tkind == FileKind::Directory;
        if t_is_dir && sp != dp && is_ancestor(tx, &tfid, sp)? {
            return Err(Errno::EINVAL);
        }
        let mut tino = get_child(tx, &tfid)?;
        let tnr = target_rec.map_or(0, |t| t.ino);
        put_dirent(tx, sp, sn, &tfid, tkind, tnr)?;
        put_dirent(tx, dp, dn, &sfid, skind, src.ino)?;
        relink(tx, &mut sino, (sp, sn), (dp, dn))?;
        relink(tx, &mut tino, (dp, dn), (sp, sn))?;
        sino.attr.ctime = now;
        tino.attr.ctime = now;
        if sp != dp && s_is_dir != t_is_dir {
            let moved = if s_is_dir { 1 } else { -1 };
            s_delta -= moved;
            d_delta += moved;
        }
        put_inode(tx, &sino)?;
        put_inode(tx, &tino)?;
    } else {
        if let Some((tfid, tkind)) = target {
            if flags & RENAME_NOREPLACE != 0 {
                return Err(Errno::EEXIST);
            }
            let t_is_dir = tkind == FileKind::Directory;
            if s_is_dir && !t_is_dir {
                return Err(Errno::ENOTDIR);
            }
            if !s_is_dir && t_is_dir {
                return Err(Errno::EISDIR);
            }
            let mut tino = get_child(tx, &tfid)?;
            if t_is_dir && tino.lmv.is_some() {
                return Err(REMOTE);
            }
            if t_is_dir && dir_has_entries(tx, &tfid)? {
                return Err(Errno::ENOTEMPTY);
            }
            if t_is_dir {
                d_delta -= 1;
            }
            removed = drop_link(tx, &mut tino, dp, dn, now, is_open)?;
        }
        tx.delete(Table::Dirents, &dirent_key(sp, sn))?;
        put_dirent(tx, dp, dn, &sfid, skind, src.ino)?;
        relink(tx, &mut sino, (sp, sn), (dp, dn))?;
        sino.attr.ctime = now;
        if s_is_dir && sp != dp {
            s_delta -= 1;
            d_delta += 1;
        }
        put_inode(tx, &sino)?;
    }
    let adjust = |n: u32, d: i64| (i64::from(n) + d).max(2) as u32;
    sparent.attr.mtime = now;
    sparent.attr.ctime = now;
    if sp == dp {
        sparent.attr.nlink = adjust(sparent.attr.nlink, s_delta + d_delta);
        put_inode(tx, &sparent)?;
    } else {
        sparent.attr.nlink = adjust(sparent.attr.nlink, s_delta);
        dparent.attr.nlink = adjust(dparent.attr.nlink, d_delta);
        dparent.attr.mtime = now;
        dparent.attr.ctime = now;
        put_inode(tx, &sparent)?;
        put_inode(tx, &dparent)?;
    }
    Ok(removed)
}

/// `vfs_rename`'s checks: the source may be deleted from its directory, the target
/// deleted from (or a name created in) the other, and a directory that changes parent
/// must be writable (its `..` changes).
fn rename_permission(
    tx: &mut Tx,
    cred: &Cred,
    (sparent, sino): (&Inode, &Inode),
    dparent: &Inode,
    target: Option<(Fid, FileKind)>,
    flags: u32,
) -> Result<(), Errno> {
    perm::may_delete(tx, cred, &sparent.attr, sino.attr.uid)?;
    let moves = sparent.fid() != dparent.fid();
    match target {
        None => perm::may_create(tx, cred, &dparent.attr)?,
        Some((tfid, _)) => {
            let t = get_child(tx, &tfid)?;
            perm::may_delete(tx, cred, &dparent.attr, t.attr.uid)?;
            if moves && flags & RENAME_EXCHANGE != 0 && t.attr.is_dir() {
                perm::check(tx, cred, &t.attr, perm::MAY_WRITE)?;
            }
        }
    }
    if moves && sino.attr.is_dir() {
        perm::check(tx, cred, &sino.attr, perm::MAY_WRITE)?;
    }
    Ok(())
}

fn resolve_time(t: SetTime, now: Timespec) -> Timespec {
    match t {
        SetTime::Now => now,
        SetTime::At(ts) => ts,
    }
}

/// Applies attribute changes. Size changes of OST objects are the client's job (it punches
/// them); here the MDT records the new size, which is then exact.
/// Applies attribute changes. A size change records the new size, exact unless
/// `writers_open` says a writer still holds the file (its writes bypass the MDT).
/// `cred` is checked (and the change adjusted) by [`perm::fix_setattr`]; with
/// `writable_handle` the caller truncates through a handle open for writing.
pub fn setattr(
    tx: &mut Tx,
    fid: &Fid,
    a: &SetAttr,
    now: Timespec,
    writers_open: &dyn Fn(&Fid) -> bool,
    cred: &Cred,
    writable_handle: bool,
) -> Result<Inode, Errno> {
    let mut ino = get_inode(tx, fid)?;
    let mut a = a.clone();
    perm::fix_setattr(tx, cred, &ino.attr, &mut a, writable_handle)?;
    let a = &a;
    if let Some(mode) = a.mode {
        ino.attr.mode = (ino.attr.mode & libc::S_IFMT) | (mode & 0o7777);
        // An access ACL follows the mode (its mask or owning group is the group bits).
        if let Some(mut access) = perm::stored_acl(tx, fid, acl::XATTR_ACCESS)? {
            access.chmod(ino.attr.mode);
            tx.put(
                Table::Xattrs,
                &records::xattr_key(fid, acl::XATTR_ACCESS),
                &access.encode(),
            )?;
        }
    }
    if let Some(uid) = a.uid {
        ino.attr.uid = uid;
    }
    if let Some(gid) = a.gid {
        ino.attr.gid = gid;
    }
    if let Some(size) = a.size {
        if ino.attr.is_dir() {
            return Err(Errno::EISDIR);
        }
        if !ino.attr.is_reg() {
            return Err(Errno::EINVAL);
        }
        if let Some(l) = &ino.layout
            && size > l.max_file_size()
        {
            return Err(Errno::EFBIG);
        }
        if size != ino.attr.size || a.mtime.is_none() {
            ino.attr.mtime = now;
        }
        ino.attr.size = size;
        ino.lsom_valid = !writers_open(fid);
        // A row cut short or grown no longer matches its parity (the client goes
        // through a write handle, whose open marked it already; this holds whatever
        // path the size change took).
        if let Some(l) = ino.layout.as_mut() {
            crate::ec::stale_on_data_change(l);
        }
    }
    if let Some(t) = a.atime {
        ino.attr.atime = resolve_time(t, now);
    }
    if let Some(t) = a.mtime {
        ino.attr.mtime = resolve_time(t, now);
    }
    ino.attr.ctime = a.ctime.unwrap_or(now);
    put_inode(tx, &ino)?;
    Ok(ino)
}

#[allow(clippy::too_many_arguments)]
pub fn set_xattr(
    tx: &mut Tx,
    fid: &Fid,
    name: &[u8],
    value: &[u8],
    flags: i32,
    now: Timespec,
    cred: &Cred,
) -> Result<(), Errno> {
    check_xattr_name(name)?;
    if value.len() > XATTR_SIZE_MAX {
        return Err(Errno::E2BIG);
    }
    let mut ino = get_inode(tx, fid)?;
    perm::may_xattr(tx, cred, &ino.attr, name, true)?;
    let key = records::xattr_key(fid, name);
    let exists = tx.exists(Table::Xattrs, &key)?;
    if flags & libc::XATTR_CREATE != 0 && exists {
        return Err(Errno::EEXIST);
    }
    if flags & libc::XATTR_REPLACE != 0 && !exists {
        return Err(Errno::ENODATA);
    }
    let mut value = Some(value.to_vec());
    if name == acl::XATTR_ACCESS || name == acl::XATTR_DEFAULT {
        value = set_acl(cred, &mut ino, name, value.as_deref().unwrap_or_default())?;
    }
    match value {
        Some(v) => tx.put(Table::Xattrs, &key, &v)?,
        None => {
            tx.delete(Table::Xattrs, &key)?;
        }
    }
    ino.attr.ctime = now;
    put_inode(tx, &ino).map(|_| ())
}

/// Setting an ACL (`set_posix_acl`, `posix_acl_update_mode`): a default ACL on
/// directories only, none on symlinks; an access ACL sets the mode's permission bits
/// (and loses set-group-ID for a non-member without CAP_FSETID) and is stored only when
/// it says more than the mode. Returns the value to store (`None`: none).
fn set_acl(
    cred: &Cred,
    ino: &mut Inode,
    name: &[u8],
    value: &[u8],
) -> Result<Option<Vec<u8>>, Errno> {
    if ino.attr.mode & libc::S_IFMT == libc::S_IFLNK {
        return Err(Errno::ENOTSUP);
    }
    let a = Acl::decode(value)?;
    if name == acl::XATTR_DEFAULT {
        if !ino.attr.is_dir() {
            return Err(if a.entries.is_empty() {
                Errno::ENODATA
            } else {
                Errno::EACCES
            });
        }
        return Ok((!a.entries.is_empty()).then(|| a.encode()));
    }
    if a.entries.is_empty() {
        return Err(Errno::EINVAL);
    }
    let (mut mode, extended) = a.equiv_mode(ino.attr.mode);
    if !cred.in_group(ino.attr.gid) && !cred.capable(cap::FSETID) {
        mode &= !libc::S_ISGID;
    }
    ino.attr.mode = mode;
    Ok(extended.then(|| a.encode()))
}

pub fn remove_xattr(
    tx: &mut Tx,
    fid: &Fid,
    name: &[u8],
    now: Timespec,
    cred: &Cred,
) -> Result<(), Errno> {
    check_xattr_name(name)?;
    let mut ino = get_inode(tx, fid)?;
    perm::may_xattr(tx, cred, &ino.attr, name, true)?;
    if !tx.delete(Table::Xattrs, &records::xattr_key(fid, name))? {
        return Err(Errno::ENODATA);
    }
    ino.attr.ctime = now;
    put_inode(tx, &ino).map(|_| ())
}

/// Names the MDT keeps: user, trusted, security and Lustre's namespaces, and the two POSIX
/// ACLs of `system.*` (checked by [`crate::perm`]); other `system.*` names are refused
/// rather than stored and ignored.
pub fn check_xattr_name(name: &[u8]) -> Result<(), Errno> {
    if name.is_empty() || name.len() > XATTR_NAME_MAX {
        return Err(if name.is_empty() {
            Errno::EINVAL
        } else {
            Errno::ERANGE
        });
    }
    let ok = [&b"user."[..], b"trusted.", b"security.", b"lustre."]
        .iter()
        .any(|p| name.starts_with(p) && name.len() > p.len())
        || name == acl::XATTR_ACCESS
        || name == acl::XATTR_DEFAULT;
    if !ok {
        return Err(Errno::ENOTSUP);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nacre_osd::{MdStore, MdStoreConfig};

    /// A formatted store holding `/d` and `/d/f`: the store, d's FID and f's FID.
    async fn store_with_dir_and_file(at: &std::path::Path) -> (MdStore, Fid, Fid) {
        let health = nacre_osd::Health::open("test-MDT0000", at).expect("health");
        let store = MdStore::open(at, MdStoreConfig::default(), health).expect("store");
        let (dir, file) = store
            .write(|tx| {
                format_root(tx, Timespec::default())?;
                let Created::New(dir) =
                    create(tx, 0, args(Fid::ROOT, b"d", libc::S_IFDIR | 0o755), false)?
                else {
                    return Err(Errno::EIO);
                };
                let Created::New(file) =
                    create(tx, 0, args(dir.fid(), b"f", libc::S_IFREG | 0o644), false)?
                else {
                    return Err(Errno::EIO);
                };
                Ok((dir.fid(), file.fid()))
            })
            .await
            .expect("create");
        (store, dir, file)
    }

    fn args(parent: Fid, name: &[u8], mode: u32) -> CreateArgs {
        CreateArgs {
            parent,
            name: name.to_vec(),
            mode,
            rdev: 0,
            cred: Cred::root(),
            symlink: None,
            layout: None,
            fid: None,
            now: Timespec::default(),
            open_for_write: false,
        }
    }

    /// A create with a FID the caller chose (a replay) never writes over the object that
    /// has that FID.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_create_with_a_fid_in_use_is_refused() {
        let d = tempfile::tempdir().expect("tmp");
        let (store, dir, file) = store_with_dir_and_file(d.path()).await;
        let r = store
            .write(move |tx| {
                let a = CreateArgs {
                    fid: Some(file),
                    ..args(dir, b"g", libc::S_IFREG | 0o600)
                };
                create(tx, 0, a, false).map(|_| ())
            })
            .await;
        assert_eq!(r, Err(Errno::EEXIST));
        let mut v = store.read().expect("read");
        let f = get_inode(&mut v, &file).expect("f");
        assert_eq!(f.attr.mode & 0o777, 0o644, "the object was written over");
        assert!(lookup(&mut v, &dir, b"g").expect("lookup").is_none());
    }

    #[test]
    fn names_are_checked_before_use() {
        assert_eq!(check_name(b"a"), Ok(()));
        assert_eq!(check_name(&[b'x'; NAME_MAX]), Ok(()));
        assert_eq!(check_name(&[b'x'; NAME_MAX + 1]), Err(Errno::ENAMETOOLONG));
        for bad in [&b""[..], b".", b"..", b"a/b", b"a\0b"] {
            assert_eq!(check_name(bad), Err(Errno::EINVAL), "{bad:?}");
        }
    }

    /// Journal bytes one transaction costs.
    async fn journaled<R: Send + 'static>(
        store: &MdStore,
        f: impl FnOnce(&mut Tx<'_, '_>) -> Result<R, Errno> + Send + 'static,
    ) -> u64 {
        let bytes = || {
            store
                .stats()
                .journal_bytes
                .load(std::sync::atomic::Ordering::Relaxed)
        };
        let before = bytes();
        store.write(f).await.expect("write");
        bytes() - before
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_link_costs_the_same_however_many_links_the_file_has() {
        let d = tempfile::tempdir().expect("tmp");
        let (store, dir, file) = store_with_dir_and_file(d.path()).await;
        let name = |i: u32| format!("link{i:06}").into_bytes();
        let first = journaled(&store, move |tx| {
            link(
                tx,
                &file,
                &dir,
                &name(0),
                Timespec::default(),
                &Cred::root(),
            )
        })
        .await;
        const MANY: u32 = 3000;
        for batch in 0..MANY / 500 {
            store
                .write(move |tx| {
                    for i in 1 + batch * 500..=(batch + 1) * 500 {
                        link(
                            tx,
                            &file,
                            &dir,
                            &name(i),
                            Timespec::default(),
                            &Cred::root(),
                        )?;
                    }
                    Ok(())
                })
                .await
                .expect("links");
        }
        let later = journaled(&store, move |tx| {
            link(
                tx,
                &file,
                &dir,
                &name(MANY + 1),
                Timespec::default(),
                &Cred::root(),
            )
        })
        .await;
        assert!(
            later <= first + 16,
            "link #1 journals {first} bytes, link #{} {later}",
            MANY + 2
        );
        let v = store.read().expect("view");
        assert_eq!(
            get_inode(&mut { v }, &file).expect("inode").attr.nlink,
            MANY + 3
        );
        store.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn v1_records_are_converted_with_their_links() {
        const V1_INO: u64 = 1000;
        let d = tempfile::tempdir().expect("tmp");
        let health = nacre_osd::Health::open("test-MDT0000", d.path()).expect("health");
        let store = MdStore::open(d.path(), MdStoreConfig::default(), health).expect("store");
        let fid = Fid::new(0x200000401, 7, 0);
        let links = vec![(Fid::ROOT, b"a".to_vec()), (Fid::ROOT, b"b".to_vec())];
        let old = records::InodeV1 {
            attr: Attr {
                fid,
                mode: libc::S_IFREG | 0o644,
                nlink: 2,
                ..Attr::default()
            },
            layout: None,
            lmv: None,
            default_layout: None,
            default_lmv: None,
            links: links.clone(),
            symlink: None,
            lsom_valid: true,
        };
        // A store as format V1 left it: the root and a file with two names.
        store
            .write(move |tx| {
                format_root(tx, Timespec::default())?;
                // Under an inode number, with its index entry, as the store keeps it.
                tx.put(Table::Inodes, &records::inode_key(V1_INO), &old.encode())?;
                tx.put(Table::Oi, &fid.to_bytes(), &records::oi_value(V1_INO))?;
                for n in [&b"a"[..], b"b"] {
                    tx.put(
                        Table::Dirents,
                        &dirent_key(&Fid::ROOT, n),
                        &records::dirent_value(&fid, FileKind::Regular, 0),
                    )?;
                }
                Ok(())
            })
            .await
            .expect("v1 store");
        assert_eq!(upgrade_records(&store).await, Ok(1));
        // Converted under the key it had.
        let raw = store
            .read()
            .expect("view")
            .get(Table::Inodes, &records::inode_key(V1_INO))
            .expect("get")
            .expect("inode");
        assert!(matches!(Decoded::decode(&raw, 0), Ok(Decoded::Current(_))));
        let mut v = store.read().expect("view");
        let ino = get_inode(&mut v, &fid).expect("inode");
        assert_eq!(links_of(&mut v, &ino, 10), Ok(links));
        drop(v);
        // Converted once: the next start only reads the version.
        assert_eq!(upgrade_records(&store).await, Ok(0));
        let t = Timespec::default();
        store
            .write(move |tx| {
                unlink(
                    tx,
                    &Fid::ROOT,
                    b"a",
                    false,
                    t,
                    &|_: &Fid| false,
                    &Cred::root(),
                )
            })
            .await
            .expect("unlink");
        // The next link took the first one's place.
        let mut v = store.read().expect("view");
        let ino = get_inode(&mut v, &fid).expect("inode");
        assert_eq!(ino.link, Some((Fid::ROOT, b"b".to_vec())));
        assert_eq!(links_of(&mut v, &ino, 10).expect("links").len(), 1);
        assert_eq!(ino.attr.nlink, 1);
        drop(v);
        store.close().await;
    }

    #[tokio::test]
    async fn a_store_made_before_the_object_index_is_converted() {
        let d = tempfile::tempdir().expect("tmp");
        let health = nacre_osd::Health::open("test-MDT0000", d.path()).expect("health");
        let store = MdStore::open(d.path(), MdStoreConfig::default(), health).expect("store");
        // As older versions wrote them: inodes under their FIDs, no index, no inode
        // numbers in the name entries.
        let file = Fid::new(0x200000401, 7, 0);
        let mk = |fid: Fid, mode: u32, link: Option<(Fid, Vec<u8>)>| Inode {
            attr: Attr {
                fid,
                mode,
                nlink: 1,
                ..Attr::default()
            },
            layout: None,
            lmv: None,
            default_layout: None,
            default_lmv: None,
            link,
            symlink: None,
            lsom_valid: true,
            ino: 0,
        };
        let root = mk(Fid::ROOT, libc::S_IFDIR | 0o755, None);
        let f = mk(
            file,
            libc::S_IFREG | 0o644,
            Some((Fid::ROOT, b"f".to_vec())),
        );
        store
            .write(move |tx| {
                for i in [&root, &f] {
                    tx.put(
                        Table::Inodes,
                        &i.fid().to_bytes(),
                        &i.encode(tx.crash_gen())?,
                    )?;
                }
                tx.put(
                    Table::Dirents,
                    &dirent_key(&Fid::ROOT, b"f"),
                    &records::dirent_value(&file, FileKind::Regular, 0),
                )
            })
            .await
            .expect("legacy");
        assert!(predates_oi(&store.read().expect("view")).expect("probe"));
        assert_eq!(upgrade_oi(&store).await, Ok(2));
        let mut v = store.read().expect("view");
        assert!(!predates_oi(&v).expect("probe"));
        let got = get_inode(&mut v, &file).expect("by FID");
        assert_ne!(got.ino, 0);
        assert_eq!(lookup_name(&mut v, &Fid::ROOT, b"f"), Ok(file));
        assert_eq!(v.count(Table::Oi), Ok(2));
        assert_eq!(v.count(Table::Inodes), Ok(2));
        drop(v);
        // Converted once: nothing more to do.
        assert_eq!(upgrade_oi(&store).await, Ok(0));
        store.close().await;
    }

    #[tokio::test]
    async fn the_object_index_maps_fids_to_inode_numbers_checked_by_their_own_fid() {
        let d = tempfile::tempdir().expect("tmp");
        let health = nacre_osd::Health::open("test-MDT0000", d.path()).expect("health");
        let store = MdStore::open(d.path(), MdStoreConfig::default(), health).expect("store");
        let (a, b) = store
            .write(|tx| {
                format_root(tx, Timespec::default())?;
                let mut out = Vec::new();
                for n in [&b"a"[..], b"b"] {
                    let Created::New(i) =
                        create(tx, 0, args(Fid::ROOT, n, libc::S_IFREG | 0o644), false)?
                    else {
                        return Err(Errno::EIO);
                    };
                    out.push(i);
                }
                Ok((out[0].clone(), out[1].clone()))
            })
            .await
            .expect("create");
        assert!(a.ino != 0 && b.ino != 0 && a.ino != b.ino);
        let mut v = store.read().expect("view");
        let rec = lookup_rec(&mut v, &Fid::ROOT, b"a")
            .expect("lookup")
            .expect("entry");
        assert_eq!((rec.fid, rec.ino), (a.fid(), a.ino));
        // A stale hint falls back to the index.
        assert_eq!(
            get_inode_hint(&mut v, &a.fid(), b.ino).map(|i| i.ino),
            Ok(a.ino)
        );
        drop(v);
        // An index entry pointing at another inode is not followed.
        let (af, bino) = (a.fid(), b.ino);
        store
            .write(move |tx| tx.put(Table::Oi, &af.to_bytes(), &records::oi_value(bino)))
            .await
            .expect("corrupt");
        let mut v = store.read().expect("view");
        assert_eq!(get_inode(&mut v, &a.fid()).err(), Some(Errno::ENOENT));
        drop(v);
        store.close().await;
    }

    #[tokio::test]
    async fn lookup_checks_names_and_resolves_dots() {
        let d = tempfile::tempdir().expect("tmp");
        let (store, dir, file) = store_with_dir_and_file(d.path()).await;
        let mut v = store.read().expect("view");
        assert_eq!(lookup_name(&mut v, &dir, b"f"), Ok(file));
        assert_eq!(lookup_name(&mut v, &dir, b"."), Ok(dir));
        assert_eq!(lookup_name(&mut v, &dir, b".."), Ok(Fid::ROOT));
        assert_eq!(lookup_name(&mut v, &Fid::ROOT, b".."), Ok(Fid::ROOT));
        assert_eq!(lookup_name(&mut v, &dir, b"g"), Err(Errno::ENOENT));
        // An over-long component is refused whether or not such a name could exist.
        assert_eq!(
            lookup_name(&mut v, &dir, &[b'x'; NAME_MAX + 1]),
            Err(Errno::ENAMETOOLONG)
        );
        assert_eq!(
            lookup_name(&mut v, &dir, &[b'x'; NAME_MAX]),
            Err(Errno::ENOENT)
        );
        assert_eq!(lookup_name(&mut v, &dir, b""), Err(Errno::EINVAL));
        assert_eq!(lookup_name(&mut v, &dir, b"a/b"), Err(Errno::EINVAL));
        assert_eq!(lookup_name(&mut v, &file, b"x"), Err(Errno::ENOTDIR));
        assert_eq!(
            lookup_name(&mut v, &Fid::new(0x200000401, 999, 0), b"x"),
            Err(Errno::ENOENT)
        );
        drop(v);
        store.close().await;
    }
}
