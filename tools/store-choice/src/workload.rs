//! The MDT's records and operations, reduced to what reaches the store.
//!
//! Keys and values have the shapes of crates/mdt/src/records.rs: inodes keyed by a 16-byte
//! big-endian FID with a ~200-byte value, dirents keyed by parent FID + 8-byte name hash +
//! name with a 17-byte value (child FID + type). File `i` is named `f{i:09}` and lives in
//! directory `i % dirs`, so concurrent creates spread over all directories.

use crate::stores::{ReadTx, Store, Table, WriteTx};
use anyhow::{Result, bail};
use rand::Rng;
use rand::rngs::StdRng;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Sequence of the directories' FIDs.
const DIR_SEQ: u64 = 0x2_0000_0007;
/// First sequence of the files' FIDs; each sequence holds `SEQ_WIDTH` objects (as Lustre's).
const FILE_SEQ: u64 = 0x2_0000_0400;
const SEQ_WIDTH: u64 = 0x2_0000;
const CHECKPOINT_KEY: &[u8] = b"journal.checkpoint_transno";
/// Offset of mtime in an inode value (see [`inode_value`]).
const MTIME_OFFSET: usize = 1 + 16 + 32 + 12;
const DT_REG: u8 = 8;
const DT_DIR: u8 = 4;

pub fn fid_bytes(seq: u64, oid: u32) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&seq.to_be_bytes());
    b[8..12].copy_from_slice(&oid.to_be_bytes());
    b
}

pub fn dir_fid(d: u64) -> [u8; 16] {
    fid_bytes(DIR_SEQ, d as u32 + 1)
}

pub fn file_fid(i: u64) -> [u8; 16] {
    fid_bytes(FILE_SEQ + i / SEQ_WIDTH, (i % SEQ_WIDTH) as u32 + 1)
}

/// The MDT's name hash: FNV-1a 64, shifted clear of readdir's reserved cookies.
fn name_hash(name: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in name {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h >> 2) + 3
}

pub fn file_name(i: u64) -> Vec<u8> {
    format!("f{i:09}").into_bytes()
}

pub fn dirent_key(parent: &[u8; 16], name: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(24 + name.len());
    k.extend_from_slice(parent);
    k.extend_from_slice(&name_hash(name).to_be_bytes());
    k.extend_from_slice(name);
    k
}

fn dirent_value(child: &[u8; 16], dtype: u8) -> [u8; 17] {
    let mut v = [0u8; 17];
    v[..16].copy_from_slice(child);
    v[16] = dtype;
    v
}

/// An inode record of about 200 bytes laid out like the MDT's: FID, attributes, four
/// timestamps, a two-stripe layout, and one link (parent FID + name).
pub fn inode_value(
    fid: &[u8; 16],
    parent: &[u8; 16],
    name: &[u8],
    now_ns: u64,
    dir: bool,
) -> Vec<u8> {
    let mut v = Vec::with_capacity(200);
    v.push(0); // record version
    v.extend_from_slice(fid);
    let mode: u32 = if dir { 0o040_755 } else { 0o100_644 };
    v.extend_from_slice(&mode.to_le_bytes());
    v.extend_from_slice(&(if dir { 2u32 } else { 1 }).to_le_bytes()); // nlink
    v.extend_from_slice(&1000u32.to_le_bytes()); // uid
    v.extend_from_slice(&1000u32.to_le_bytes()); // gid
    v.extend_from_slice(&0u64.to_le_bytes()); // size
    v.extend_from_slice(&0u64.to_le_bytes()); // blocks
    for _ in 0..4 {
        v.extend_from_slice(&(now_ns / 1_000_000_000).to_le_bytes());
        v.extend_from_slice(&((now_ns % 1_000_000_000) as u32).to_le_bytes());
    }
    v.extend_from_slice(&0u32.to_le_bytes()); // rdev
    // Layout: pattern, stripe size, count, pool, then one object per stripe.
    v.extend_from_slice(&1u32.to_le_bytes());
    v.extend_from_slice(&(1u32 << 20).to_le_bytes());
    v.extend_from_slice(&2u16.to_le_bytes());
    let mut pool = [0u8; 16];
    pool[..5].copy_from_slice(b"flash");
    v.extend_from_slice(&pool);
    let oid = u32::from_be_bytes([fid[8], fid[9], fid[10], fid[11]]);
    for ost in 0..2u32 {
        v.extend_from_slice(&(oid % 8 + ost).to_le_bytes());
        v.extend_from_slice(&fid_bytes(0x1_0000_0000 + u64::from(ost), oid));
    }
    // linkEA.
    v.push(1);
    v.extend_from_slice(parent);
    v.push(name.len() as u8);
    v.extend_from_slice(name);
    v.push(1); // lsom_valid
    v
}

/// Sets mtime and ctime of an encoded inode.
fn touch(inode: &mut [u8], now_ns: u64) -> Result<()> {
    let mut stamp = [0u8; 12];
    stamp[..8].copy_from_slice(&(now_ns / 1_000_000_000).to_le_bytes());
    stamp[8..].copy_from_slice(&((now_ns % 1_000_000_000) as u32).to_le_bytes());
    let Some(slot) = inode.get_mut(MTIME_OFFSET..MTIME_OFFSET + 24) else {
        bail!("inode record too short: {} bytes", inode.len());
    };
    slot[..12].copy_from_slice(&stamp);
    slot[12..].copy_from_slice(&stamp);
    Ok(())
}

fn now_ns(op: u64) -> u64 {
    1_790_000_000_000_000_000 + op * 1_000
}

/// The shape of one data set.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub entries: u64,
    pub dirs: u64,
}

impl Shape {
    pub fn dir_size(&self, d: u64) -> u64 {
        self.entries / self.dirs + u64::from(d < self.entries % self.dirs)
    }
}

/// The checkpoint: a durable commit that records a transaction number, as mdstore.rs does.
pub fn checkpoint(store: &dyn Store, transno: u64) -> Result<Duration> {
    let t = Instant::now();
    store.write(true, &mut |tx| {
        tx.put(Table::Meta, CHECKPOINT_KEY, &transno.to_le_bytes())
    })?;
    Ok(t.elapsed())
}

/// Creates the directories, durably.
pub fn make_dirs(store: &dyn Store, shape: Shape) -> Result<()> {
    let root = fid_bytes(DIR_SEQ, 0);
    store.write(false, &mut |tx| {
        for d in 0..shape.dirs {
            let fid = dir_fid(d);
            let name = format!("d{d:05}");
            tx.put(
                Table::Inodes,
                &fid,
                &inode_value(&fid, &root, name.as_bytes(), now_ns(0), true),
            )?;
        }
        Ok(())
    })?;
    checkpoint(store, 0)?;
    Ok(())
}

/// Result of a batched write phase.
pub struct WritePhase {
    pub elapsed: Duration,
    pub checkpoints: Vec<Duration>,
}

/// One create as mdd.rs does it: the name must be absent; insert the inode and the dirent;
/// read, update and write back the parent inode.
fn create_one(tx: &mut dyn WriteTx, shape: Shape, i: u64, buf: &mut Vec<u8>) -> Result<()> {
    let parent = dir_fid(i % shape.dirs);
    let name = file_name(i);
    let key = dirent_key(&parent, &name);
    if tx.get(Table::Dirents, &key, buf)? {
        bail!("create: {} exists", String::from_utf8_lossy(&name));
    }
    if !tx.get(Table::Inodes, &parent, buf)? {
        bail!("create: parent of file {i} missing");
    }
    let now = now_ns(i);
    touch(buf, now)?;
    let fid = file_fid(i);
    tx.put(
        Table::Inodes,
        &fid,
        &inode_value(&fid, &parent, &name, now, false),
    )?;
    tx.put(Table::Dirents, &key, &dirent_value(&fid, DT_REG))?;
    tx.put(Table::Inodes, &parent, buf)
}

/// One unlink: look the name up, read the child, delete dirent and inode, update the parent.
fn unlink_one(tx: &mut dyn WriteTx, shape: Shape, i: u64, buf: &mut Vec<u8>) -> Result<()> {
    let parent = dir_fid(i % shape.dirs);
    let key = dirent_key(&parent, &file_name(i));
    if !tx.get(Table::Dirents, &key, buf)? || buf.len() != 17 || buf[16] == DT_DIR {
        bail!("unlink: file {i} missing");
    }
    let child: [u8; 16] = buf[..16].try_into()?;
    if !tx.get(Table::Inodes, &child, buf)? {
        bail!("unlink: inode of file {i} missing");
    }
    tx.delete(Table::Dirents, &key)?;
    tx.delete(Table::Inodes, &child)?;
    if !tx.get(Table::Inodes, &parent, buf)? {
        bail!("unlink: parent of file {i} missing");
    }
    touch(buf, now_ns(i))?;
    tx.put(Table::Inodes, &parent, buf)
}

/// Applies `op` to `items` in batches of `batch` (one non-durable commit each), with a
/// checkpoint after every `checkpoint_every` operations and at the end.
fn batched(
    store: &dyn Store,
    items: &[u64],
    batch: usize,
    checkpoint_every: u64,
    op: fn(&mut dyn WriteTx, Shape, u64, &mut Vec<u8>) -> Result<()>,
    shape: Shape,
) -> Result<WritePhase> {
    let mut checkpoints = Vec::new();
    let mut buf = Vec::with_capacity(256);
    let mut since_checkpoint = 0u64;
    let mut transno = 0u64;
    let start = Instant::now();
    for chunk in items.chunks(batch.max(1)) {
        store.write(false, &mut |tx| {
            for &i in chunk {
                op(tx, shape, i, &mut buf)?;
            }
            Ok(())
        })?;
        transno += 1;
        since_checkpoint += chunk.len() as u64;
        if since_checkpoint >= checkpoint_every {
            checkpoints.push(checkpoint(store, transno)?);
            since_checkpoint = 0;
        }
    }
    if since_checkpoint > 0 {
        checkpoints.push(checkpoint(store, transno)?);
    }
    Ok(WritePhase {
        elapsed: start.elapsed(),
        checkpoints,
    })
}

pub fn create_all(
    store: &dyn Store,
    shape: Shape,
    batch: usize,
    checkpoint_every: u64,
) -> Result<WritePhase> {
    let items: Vec<u64> = (0..shape.entries).collect();
    batched(store, &items, batch, checkpoint_every, create_one, shape)
}

pub fn unlink(
    store: &dyn Store,
    shape: Shape,
    victims: &[u64],
    batch: usize,
    checkpoint_every: u64,
) -> Result<WritePhase> {
    batched(store, victims, batch, checkpoint_every, unlink_one, shape)
}

/// One lookup as the MDT serves it: one read view, the dirent, then the child's inode.
fn lookup_one(r: &dyn ReadTx, shape: Shape, i: u64, buf: &mut Vec<u8>) -> Result<()> {
    let key = dirent_key(&dir_fid(i % shape.dirs), &file_name(i));
    if !r.get(Table::Dirents, &key, buf)? || buf.len() != 17 {
        bail!("lookup: file {i} missing");
    }
    let child: [u8; 16] = buf[..16].try_into()?;
    if !r.get(Table::Inodes, &child, buf)? {
        bail!("lookup: inode of file {i} missing");
    }
    black_box(&buf);
    Ok(())
}

/// One lookup of a random existing file.
pub fn lookup_random(
    store: &dyn Store,
    shape: Shape,
    rng: &mut StdRng,
    buf: &mut Vec<u8>,
) -> Result<()> {
    let i = rng.gen_range(0..shape.entries);
    store.read(&mut |r| lookup_one(r, shape, i, buf))
}

/// Random lookups on `threads` threads, `per_thread` each; returns lookups per second.
pub fn lookups(
    store: &dyn Store,
    shape: Shape,
    threads: usize,
    per_thread: u64,
    seed: u64,
) -> Result<f64> {
    let start = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || -> Result<()> {
                    let mut rng: StdRng =
                        rand::SeedableRng::seed_from_u64(seed ^ ((t as u64) << 32));
                    let mut buf = Vec::with_capacity(256);
                    for _ in 0..per_thread {
                        lookup_random(store, shape, &mut rng, &mut buf)?;
                    }
                    Ok(())
                })
            })
            .collect();
        for w in workers {
            match w.join() {
                Ok(r) => r?,
                Err(_) => bail!("lookup thread panicked"),
            }
        }
        Ok(())
    })?;
    Ok((threads as u64 * per_thread) as f64 / start.elapsed().as_secs_f64())
}

/// Full ordered scans of the given directories, each in one read view; returns entries per
/// second. Every entry's key and value are read.
pub fn readdir(store: &dyn Store, shape: Shape, dirs: &[u64]) -> Result<f64> {
    let mut total = 0u64;
    let start = Instant::now();
    for &d in dirs {
        let fid = dir_fid(d);
        let mut lo = fid.to_vec();
        lo.extend_from_slice(&[0; 8]);
        let mut hi = fid.to_vec();
        hi.extend_from_slice(&[0xff; 9]);
        let mut n = 0;
        let mut sum = 0u64;
        store.read(&mut |r| {
            n = r.scan(Table::Dirents, &lo, &hi, &mut |k, v| {
                sum = sum.wrapping_add(k.len() as u64 + u64::from(v[16]));
            })?;
            Ok(())
        })?;
        black_box(sum);
        if n != shape.dir_size(d) {
            bail!(
                "readdir: directory {d} has {n} entries, expected {}",
                shape.dir_size(d)
            );
        }
        total += n;
    }
    Ok(total as f64 / start.elapsed().as_secs_f64())
}
