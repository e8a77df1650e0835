//! The OST's object store: one file per object in ldiskfs's `O/` tree.
//!
//! Object `[seq:oid:0]` lives at `O/<seq hex>/d<oid % 32>/<oid>`; its filter fid (the file's
//! FID with the stripe index in `ver`) is kept in the `user.nacre.fid` xattr, and the highest
//! object id created in each sequence in `O/<seq hex>/LAST_ID`. Data is written in place, so
//! sparse objects stay sparse and the kernel's page cache serves reads. Every path is built
//! from numbers, never from names that came off the wire, so nothing escapes the target.
//!
//! Precreation makes each object's file, empty, as Lustre's OST creates an inode per
//! object: the new files' directory entries are synced before LAST_ID moves past them, and
//! LAST_ID before the MDT is told, so an object the MDT hands out exists through a power
//! cut. A missing file at or below LAST_ID is then an object lost or destroyed, never one
//! not written yet: a read of it is an error, not zeros, LFSCK's layout check calls it
//! dangling, and a write that reaches it after its destroy is refused (ENOENT, as Lustre's
//! OST answers) instead of leaving an orphan holding space. An empty file costs the OST
//! about 10 µs to make and 7 µs to remove, paid in precreate batches off the create path.
//!
//! Stores made before this kept objects lazily (precreation moved only LAST_ID and a file
//! came with the first write): `O/<seq>/LAZY_LAST` records the LAST_ID a sequence had then,
//! and an object at or below it without a file still reads as empty.
//!
//! Every 4 KiB block of an object has a crc32c entry kept beside it ([`crate::cksum`]):
//! written with the block (from the checksums the client sent, when it sent them), checked
//! on every read and by scrub ([`ObjStore::verify_range`]). A block that fails is a typed
//! [`ObjError::Corrupt`] naming it: a reader with another copy (a mirror, parity) reads
//! that instead and rewrites this one; without one the caller turns it into EIO
//! ([`Errno::ECKSUM`] on the wire). A write of part of a block checks the rest of the
//! block before it computes the block's new entry, so a bad block is never given a
//! checksum that makes it look good. A write that a crash cuts between its data and its
//! entries reads back as a checksum error, not as old or new data: entries are updated in
//! place, without a journal; `fsync` makes both durable.

use crate::cksum::{self, SIDECAR_SUFFIX, Table};
use crate::dirat::Dir;
use crate::health::Health;
use crate::rangelock::RangeLocks;
use nacre_core::cksum::{
    BLOCK, BLOCK_SHIFT, ReadVerify, TornBlocks, ZERO_BLOCK_CRC, block_entry, entry_of,
    piece_sum_of_entry, pieces,
};
use nacre_core::{Errno, Fid, OstLayout};
use parking_lot::{Mutex, RwLock};
use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Subdirectories per sequence (ldiskfs uses 32).
pub const OBJ_SUBDIRS: u32 = 32;
/// How far before the start of the last sync a torn window opens
/// ([`ObjStore::set_torn_window`]): a write whose data reaches the store as the sync
/// begins may be outside it, and its object's mtime (set as the write starts) is earlier
/// than the sync by its own duration at most.
pub const TORN_MARGIN: Duration = Duration::from_secs(1);
/// Open object files kept cached; beyond this the least recently used are closed.
pub const DEFAULT_FD_CACHE: usize = 1024;
const FILTER_FID_XATTR: &str = "user.nacre.fid";
const FILTER_FID_XATTR_C: &std::ffi::CStr = c"user.nacre.fid";
/// Bytes of the longest filter fid xattr: the parent FID and an [`OstLayout`].
const FILTER_FID_MAX: usize = 16 + OstLayout::BYTES;
/// Objects whose filter fid is remembered (a few dozen bytes each); past it the memory
/// starts over.
const TAGGED_MAX: usize = 65536;
/// The owner an object was given by a chown of its file (uid and gid, little-endian), as
/// an ldiskfs OST object's inode owner: what quotas on the OST would count, and what the
/// layout LFSCK compares with the file's owner. An object that never had one has none.
const OWNER_XATTR: &str = "user.nacre.owner";
const OWNER_XATTR_C: &std::ffi::CStr = c"user.nacre.owner";
/// Bytes of xattr names one probe lists: an object has a handful of names.
const XATTR_LIST_MAX: usize = 512;

#[derive(Clone, Debug)]
pub struct ObjStoreConfig {
    pub fd_cache: usize,
    /// Write large aligned pieces with O_DIRECT (see [`DIRECT_MIN`]); off by default,
    /// as Lustre's `writethrough_cache_enable=1`.
    pub direct_io: bool,
    /// Keep and check a checksum per block (on by default). Off, objects that change
    /// lose their entries and read unchecked, as ZFS's `checksum=off`; measurements of
    /// what checksums cost compare against it.
    pub checksums: bool,
}

impl Default for ObjStoreConfig {
    fn default() -> Self {
        ObjStoreConfig {
            fd_cache: DEFAULT_FD_CACHE,
            direct_io: false,
            checksums: true,
        }
    }
}

/// Bytes a legacy object's entries are computed from at a time, and the most a scrub
/// reads in one step.
pub const VERIFY_CHUNK: usize = 1 << 20;
/// Bytes checked next to each kernel copy: a write's bulk is checked a piece at a time
/// just before the piece is written, a read's blocks just after they are read, so the
/// checksum reads bytes that are in the CPU's cache (which holds 1–2 MiB per core here)
/// rather than from memory once more. Streaming 4 MiB writes and reads through the store
/// cost the same with checksums as without this way.
pub const CHECK_CHUNK: usize = 256 << 10;
/// Bad blocks one check of a range lists (all are counted): a lost checksum file could
/// otherwise list every block of an object.
pub const MAX_BAD_LISTED: usize = 64;

/// A block whose data does not match its stored entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadBlock {
    /// Object offset of the block.
    pub offset: u64,
    pub stored: u32,
    pub computed: u32,
}

/// What is wrong with an object's data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Corruption {
    Block(BadBlock),
    /// The object's checksums cannot be read (a damaged header, a missing checksum file):
    /// none of its data can be trusted.
    Table(String),
}

impl std::fmt::Display for Corruption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Corruption::Block(b) => write!(
                f,
                "block at offset {} fails its checksum (stored {:#010x}, data gives {:#010x})",
                b.offset, b.stored, b.computed
            ),
            Corruption::Table(why) => write!(f, "{why}"),
        }
    }
}

/// An object operation's failure: an errno, or data that failed its checksum.
///
/// `Corrupt` is the hook for redundancy: a reader that has another copy of the range (a
/// mirror, parity) catches it, reads the copy and rewrites this object's range with it
/// (a write of whole blocks needs no old data, so it always succeeds). Everyone else
/// turns it into an errno: [`Errno::ECKSUM`] on the wire, EIO for the application.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ObjError {
    #[error("{0}")]
    Errno(Errno),
    #[error("object {obj}: {what}")]
    Corrupt { obj: Fid, what: Corruption },
    /// A write's bulk did not match the checksums it came with: it was damaged on its way
    /// here. Nothing from the damaged piece on was written; the sender sends it again.
    #[error("the piece at offset {at} gives {actual:#010x}, its checksum says {expected:#010x}")]
    Damaged { at: u64, expected: u32, actual: u32 },
}

impl From<Errno> for ObjError {
    fn from(e: Errno) -> Self {
        ObjError::Errno(e)
    }
}

impl From<std::io::Error> for ObjError {
    fn from(e: std::io::Error) -> Self {
        ObjError::Errno(e.into())
    }
}

impl From<ObjError> for Errno {
    fn from(e: ObjError) -> Self {
        match e {
            ObjError::Errno(e) => e,
            ObjError::Corrupt { .. } => Errno::ECKSUM,
            ObjError::Damaged { .. } => Errno::EBADMSG,
        }
    }
}

/// The result of a checked read: whole blocks around the range asked for.
#[derive(Debug, Default)]
pub struct ReadOut {
    /// Blocks read; the data asked for is `buf[start..start + len]`.
    pub buf: Vec<u8>,
    pub start: usize,
    pub len: usize,
    /// Checksums of the pieces of the data ([`nacre_core::cksum::pieces`]), if asked for.
    pub sums: Option<Vec<u32>>,
}

impl ReadOut {
    pub fn data(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }

    pub fn into_vec(mut self) -> Vec<u8> {
        self.buf.truncate(self.start + self.len);
        if self.start > 0 {
            self.buf.drain(..self.start);
        }
        self.buf
    }
}

/// What a check of part of an object found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeCheck {
    /// The object's size when checked.
    pub size: u64,
    /// Bytes checked (0 past the end).
    pub checked: u64,
    /// Bad blocks found (at most [`MAX_BAD_LISTED`]), and how many in all.
    pub bad: Vec<BadBlock>,
    pub bad_count: u64,
    /// The object's checksums are unreadable.
    pub bad_table: Option<String>,
    /// The object has no checksums (written before they were kept).
    pub unprotected: bool,
}

/// Table locks: a fixed array, however many objects; objects sharing a stripe only wait
/// for each other's xattr update.
const TABLE_LOCK_STRIPES: usize = 64;

fn table_stripe(fid: &Fid) -> usize {
    ((fid.seq ^ u64::from(fid.oid).wrapping_mul(0x9e37_79b9)) % TABLE_LOCK_STRIPES as u64) as usize
}

/// An object's entries, as its xattr says.
enum Entries {
    Missing,
    Inline(Vec<u32>),
    Sidecar(Arc<File>),
}

/// Alignment of O_DIRECT writes: offset, length and memory (the largest logical block
/// size in common use).
pub const DIRECT_ALIGN: usize = 4096;
/// Smallest write that goes around the page cache when direct I/O is on
/// (`obdfilter.*.writethrough_cache_enable=0`). A large streaming write costs the page
/// cache a copy on the way in and writeback CPU on the way out, on the cores that also
/// serve FUSE and the MDT; with O_DIRECT the disk takes it from the request's own buffer.
/// On the 2-core machine the README measures, that doubles streaming writes through the
/// mount, but data written so reads back about a third slower there, so it is not the
/// default. Smaller writes are always buffered.
pub const DIRECT_MIN: usize = 256 << 10;
/// A streamed object (written with O_DIRECT) gets its blocks reserved ahead once it holds
/// this much, in chunks that double up to [`RESERVE_MAX`]: O_DIRECT allocates exactly
/// what each write needs, so concurrent streams would otherwise interleave their extents
/// on disk (two 1 GiB streams here: 45–121 extents each and reads back at 704–946
/// MiB/s through the mount, against 29–31 extents and 889–1332 MiB/s with reservations).
pub const RESERVE_START: u64 = 8 << 20;
pub const RESERVE_MAX: u64 = 64 << 20;
/// Objects holding reserved blocks at once; further streams go without until one gives
/// its reservation back.
const RESERVE_OBJECTS: usize = 16;
/// An object not written for this long gives back what it has not used.
pub const RESERVE_IDLE: Duration = Duration::from_secs(2);
/// Free space, in chunks, below which nothing is reserved (16 objects' worth, 4 times).
const RESERVE_ROOM: u64 = 4 * RESERVE_OBJECTS as u64;

/// Blocks reserved past an object's data: up to `end`, last written at `last`.
struct Reserved {
    end: u64,
    last: Instant,
}

struct FdCache {
    map: HashMap<Fid, (Arc<File>, u64)>,
    tick: u64,
    cap: usize,
}

impl FdCache {
    fn get(&mut self, fid: &Fid) -> Option<Arc<File>> {
        self.tick += 1;
        let tick = self.tick;
        self.map.get_mut(fid).map(|(f, t)| {
            *t = tick;
            f.clone()
        })
    }

    fn insert(&mut self, fid: Fid, f: Arc<File>) {
        if self.map.len() >= self.cap {
            // Evict the oldest eighth in one pass, so eviction is amortised.
            let mut ages: Vec<(u64, Fid)> = self.map.iter().map(|(k, (_, t))| (*t, *k)).collect();
            ages.sort_unstable();
            for (_, k) in ages.into_iter().take((self.cap / 8).max(1)) {
                self.map.remove(&k);
            }
        }
        self.tick += 1;
        self.map.insert(fid, (f, self.tick));
    }

    fn remove(&mut self, fid: &Fid) {
        self.map.remove(fid);
    }
}

/// Handle to one OST's objects.
pub struct ObjStore {
    root: PathBuf,
    /// The target's storage health: device errors fail it, and what looks like missing
    /// storage is checked before it is believed.
    health: Arc<Health>,
    fds: Mutex<FdCache>,
    /// Objects known to carry their filter fid (and the layout kept with it, if any), so
    /// writes skip the xattr check.
    tagged: Mutex<HashMap<Fid, (Fid, Option<OstLayout>)>>,
    /// Serialises precreation per sequence.
    create_lock: Mutex<()>,
    /// LAST_ID and LAZY_LAST per sequence, as on disk.
    last_ids: Mutex<HashMap<u64, SeqIds>>,
    /// Large aligned writes use O_DIRECT; off if configured so or the file system refuses it.
    direct: AtomicBool,
    /// Objects with blocks reserved past their data (see [`RESERVE_START`]).
    reserved: Mutex<HashMap<Fid, Reserved>>,
    /// Told when a reservation is made, so the OST's release timer sleeps while there is none.
    reserved_made: tokio::sync::Notify,
    /// Writes and size changes share it; giving back reserved blocks takes it alone, so no
    /// write lands in the range being given back.
    extend: RwLock<()>,
    /// Checksum files open, as `fds` for objects.
    sidecars: Mutex<FdCache>,
    /// Blocks being changed (see [`crate::rangelock`]).
    ranges: RangeLocks,
    /// Serialise changes to an object's table, by FID hash (an inline table is one xattr
    /// for all its blocks).
    table_locks: [Mutex<()>; TABLE_LOCK_STRIPES],
    checksums: AtomicBool,
    /// Writes naming another file than the object's filter fid are refused
    /// (`obdfilter.*.lfsck_verify_pfid`, see [`ObjStore::set_verify_pfid`]).
    verify_pfid: AtomicBool,
    /// Writes refused so, and their log lines' limit.
    pfid_refused: AtomicU64,
    pfid_log: nacre_core::log_limit::LogLimit,
    /// Bad blocks (and unreadable tables) found by reads and changes.
    checksum_errors: AtomicU64,
    /// Data-change times (mtime, ns since the epoch) of objects a crash may have torn:
    /// `[lo, hi)`, none when `lo >= hi` ([`ObjStore::set_torn_window`]).
    torn_lo: AtomicI64,
    torn_hi: AtomicI64,
    /// Blocks of such objects whose entries were taken from their data.
    torn_retaken: AtomicU64,
    /// Blocks of such objects reported bad to a reader with another copy.
    torn_reported: AtomicU64,
    /// The target's name, for log lines.
    name: OnceLock<String>,
    /// Object subdirectories (`O/<seq>/d<n>`) whose own entry a sync has made durable:
    /// a later sync of an object in one needs to sync only the subdirectory, not its parent.
    durable_subdirs: Mutex<HashSet<(u64, u32)>>,
    /// Opened only to be looked at ([`ObjStore::open_read_only`]).
    read_only: bool,
    /// The target is stopping: a precreate under way ends early ([`ObjStore::close`]).
    closing: AtomicBool,
}

/// Objects a precreate makes between two looks at [`ObjStore::close`].
const PRECREATE_CHECK_EVERY: u32 = 256;

/// Subdirectories [`ObjStore::sync`] remembers as durable; past it, it starts over (and
/// syncs each parent once more). 32 per sequence, a handful of sequences per MDT.
const DURABLE_SUBDIRS_MAX: usize = 65536;

/// Directories synced above an object made at its first write whose subdirectory is not
/// known durable yet: the subdirectory, the sequence's directory, the store's root.
const FIRST_WRITE_DIR_LEVELS: usize = 3;

/// What LFSCK learns of one object ([`ObjStore::probe_batch`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObjProbe {
    /// Its file's size; `None`: no file (empty at or below LAST_ID, not created above).
    pub size: Option<u64>,
    pub ff: Option<Fid>,
    /// The layout of its file's component, kept with the filter fid by the writer.
    pub layout: Option<OstLayout>,
    pub owner: Option<(u32, u32)>,
}

impl ObjProbe {
    /// An empty file without a filter fid: precreated and never written (not handed out
    /// yet, or a stripe its file never wrote), so nothing an orphan check could re-attach.
    pub fn never_written(&self) -> bool {
        self.size == Some(0) && self.ff.is_none()
    }
}

/// A sequence's object ids as on disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct SeqIds {
    /// LAST_ID: the highest object created.
    last: u32,
    /// LAZY_LAST: the highest object created without a file (see the module docs).
    lazy: u32,
}

/// Why an object has no file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Absent {
    /// Above LAST_ID: never created.
    NotCreated,
    /// Created lazily by an older store and never written: empty.
    Empty,
    /// Created with its file, which is gone: lost, or destroyed.
    Lost,
}

/// File naming LAZY_LAST in a sequence directory.
const LAZY_LAST: &str = "LAZY_LAST";

/// An object as stored: its file, or nothing (a lazily created object never written).
enum Obj {
    File(Arc<File>),
    Empty,
}

impl ObjStore {
    /// Opens the store under `dir` (the target directory, which must exist), creating
    /// `O/` if needed, and watches `O/` with `health` from then on.
    pub fn open(dir: &Path, cfg: ObjStoreConfig, health: Arc<Health>) -> std::io::Result<ObjStore> {
        let root = dir.join("O");
        match crate::private_dir_builder().create(&root) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        health.watch(&root).map_err(std::io::Error::other)?;
        Ok(Self::with_root(root, cfg, health, false))
    }

    /// Opens the store under `dir` to look at, not to change (`nacre check` on a stopped
    /// file system): nothing is created or written, not even the LAZY_LAST a sequence of
    /// an older store would be given. A target without `O/` is an error.
    pub fn open_read_only(dir: &Path, health: Arc<Health>) -> std::io::Result<ObjStore> {
        let root = dir.join("O");
        health.watch(&root).map_err(std::io::Error::other)?;
        Ok(Self::with_root(
            root,
            ObjStoreConfig::default(),
            health,
            true,
        ))
    }

    fn with_root(
        root: PathBuf,
        cfg: ObjStoreConfig,
        health: Arc<Health>,
        read_only: bool,
    ) -> ObjStore {
        ObjStore {
            root,
            health,
            fds: Mutex::new(FdCache {
                map: HashMap::new(),
                tick: 0,
                cap: cfg.fd_cache.max(16),
            }),
            tagged: Mutex::new(HashMap::new()),
            create_lock: Mutex::new(()),
            last_ids: Mutex::new(HashMap::new()),
            direct: AtomicBool::new(cfg.direct_io),
            reserved: Mutex::new(HashMap::new()),
            reserved_made: tokio::sync::Notify::new(),
            extend: RwLock::new(()),
            sidecars: Mutex::new(FdCache {
                map: HashMap::new(),
                tick: 0,
                cap: cfg.fd_cache.max(16),
            }),
            ranges: RangeLocks::default(),
            table_locks: std::array::from_fn(|_| Mutex::new(())),
            checksums: AtomicBool::new(cfg.checksums),
            verify_pfid: AtomicBool::new(true),
            pfid_refused: AtomicU64::new(0),
            pfid_log: nacre_core::log_limit::LogLimit::default(),
            checksum_errors: AtomicU64::new(0),
            torn_lo: AtomicI64::new(0),
            torn_hi: AtomicI64::new(0),
            torn_retaken: AtomicU64::new(0),
            torn_reported: AtomicU64::new(0),
            name: OnceLock::new(),
            durable_subdirs: Mutex::new(HashSet::new()),
            read_only,
            closing: AtomicBool::new(false),
        }
    }

    /// The target is stopping: a precreate under way stops making files (ESHUTDOWN,
    /// LAST_ID unmoved; the files it made are kept by the next one), and this returns once
    /// it has, so nothing adds to the store's directories after its target stopped.
    pub fn close(&self) {
        self.closing.store(true, Ordering::Release);
        drop(self.create_lock.lock());
    }

    /// Names the store in its log lines (`testfs-OST0000`).
    pub fn set_name(&self, name: &str) {
        let _ = self.name.set(name.to_string());
    }

    fn name(&self) -> String {
        self.name
            .get()
            .cloned()
            .unwrap_or_else(|| self.root.display().to_string())
    }

    /// Whether blocks get and are checked against checksums.
    pub fn checksums(&self) -> bool {
        self.checksums.load(Ordering::Relaxed)
    }

    /// Turns checksums on or off; off, an object that changes loses its entries.
    pub fn set_checksums(&self, on: bool) {
        self.checksums.store(on, Ordering::Relaxed);
    }

    /// Whether a write that names another file (or another layout) than the object's
    /// filter fid is refused (Lustre's `lfsck_verify_pfid`, here on by default): only the
    /// MDT changes whose stripe an object is, by a layout swap or an LFSCK repair; a
    /// client, which may be wrong or lying, only gives a new object its first one.
    pub fn verify_pfid(&self) -> bool {
        self.verify_pfid.load(Ordering::Relaxed)
    }

    pub fn set_verify_pfid(&self, on: bool) {
        self.verify_pfid.store(on, Ordering::Relaxed);
    }

    /// Writes refused for naming another file than the object's filter fid.
    pub fn pfid_refused(&self) -> u64 {
        self.pfid_refused.load(Ordering::Relaxed)
    }

    /// Bad blocks and unreadable tables found by reads and changes (not by scrub).
    pub fn checksum_errors(&self) -> u64 {
        self.checksum_errors.load(Ordering::Relaxed)
    }

    /// Objects whose data last changed in `[lo, hi)` may have blocks a crash tore: their
    /// data written after the store's last sync began (`lo`) and before this start (`hi`)
    /// was never promised durable, and a power cut can keep a block's new bytes but not
    /// its entry, or its entry but not its bytes (two writes no sync ordered). Such a
    /// block that fails its entry is taken as it is, its entry rewritten from its data,
    /// counted and logged, rather than failing every read of it forever. Outside the
    /// window a mismatch is corruption, as always. An overwrite whose bytes reached the
    /// disk while its mtime did not falls outside; on ext4 the OST's commits (a `syncfs`
    /// every few seconds) leave that to a crash in the middle of one.
    pub fn set_torn_window(&self, lo: std::time::SystemTime, hi: std::time::SystemTime) {
        let ns = |t: std::time::SystemTime| {
            t.duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        };
        self.torn_lo.store(ns(lo), Ordering::Release);
        self.torn_hi.store(ns(hi), Ordering::Release);
    }

    /// Blocks whose entries were taken from their data after a crash tore them.
    pub fn torn_retaken(&self) -> u64 {
        self.torn_retaken.load(Ordering::Relaxed)
    }

    /// Blocks a crash may have torn that reads reported as bad instead of taking them
    /// ([`TornBlocks::Report`]: the reader had another copy to repair them from).
    pub fn torn_reported(&self) -> u64 {
        self.torn_reported.load(Ordering::Relaxed)
    }

    /// Whether `f`'s data last changed within the torn window.
    fn maybe_torn(&self, f: &File) -> bool {
        use std::os::unix::fs::MetadataExt;
        let (lo, hi) = (
            self.torn_lo.load(Ordering::Acquire),
            self.torn_hi.load(Ordering::Acquire),
        );
        if lo >= hi {
            return false;
        }
        let Ok(m) = f.metadata() else {
            return false;
        };
        let t = m
            .mtime()
            .saturating_mul(1_000_000_000)
            .saturating_add(m.mtime_nsec());
        (lo..hi).contains(&t)
    }

    /// Takes the bad blocks of an object the crash may have tore as they are: their
    /// entries from their data. The caller holds the blocks. False when the object is not
    /// in the torn window (the blocks are corrupt) or an entry could not be written.
    fn retake_torn(&self, fid: &Fid, f: &File, bad: &[BadBlock]) -> bool {
        if bad.is_empty() || !self.maybe_torn(f) {
            return false;
        }
        for b in bad {
            if let Err(e) = self.put_entries(fid, f, b.offset >> BLOCK_SHIFT, &[b.computed], None) {
                tracing::warn!(target: "osd", "{}: object {fid}: block at offset {} written just before the crash: its entry cannot be rewritten: {e}", self.name(), b.offset);
                return false;
            }
        }
        self.torn_retaken
            .fetch_add(bad.len() as u64, Ordering::Relaxed);
        tracing::warn!(target: "osd", "{}: object {fid}: {} block(s) written after the last commit before the crash did not match their checksums (writes the crash tore, never synced): their checksums now follow their data", self.name(), bad.len());
        true
    }

    fn seq_dir(&self, seq: u64) -> PathBuf {
        self.root.join(format!("{seq:x}"))
    }

    pub fn health(&self) -> &Arc<Health> {
        &self.health
    }

    /// Makes the directories between the store's root and `d` (a sequence directory or one
    /// of its subdirectories), never the root or anything above it: a root that vanished
    /// under the running target is a failed target, not something to recreate.
    fn make_dirs(&self, d: &Path) -> Result<(), Errno> {
        let rel = d.strip_prefix(&self.root).map_err(|_| Errno::EINVAL)?;
        let mut cur = self.root.clone();
        for c in rel.components() {
            cur.push(c);
            match crate::private_dir_builder().create(&cur) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    // Something above went away: find out what, and fail the target.
                    self.health.verify()?;
                    return Err(Errno::from(e));
                }
                Err(e) => return Err(self.health.io_error(cur.display(), e)),
            }
        }
        Ok(())
    }

    /// Path of an object file; only numbers go into it.
    pub fn object_path(&self, fid: &Fid) -> PathBuf {
        self.seq_dir(fid.seq)
            .join(format!("d{}", fid.oid % OBJ_SUBDIRS))
            .join(fid.oid.to_string())
    }

    /// Path of an object's checksum file (used once it outgrows its xattr).
    pub fn sidecar_path(&self, fid: &Fid) -> PathBuf {
        self.seq_dir(fid.seq)
            .join(format!("d{}", fid.oid % OBJ_SUBDIRS))
            .join(format!("{}{SIDECAR_SUFFIX}", fid.oid))
    }

    fn check(fid: &Fid) -> Result<(), Errno> {
        if !Self::valid_object(fid) {
            return Err(Errno::EINVAL);
        }
        Ok(())
    }

    /// Whether `fid` can name an object of a store (anything else is EINVAL).
    pub fn valid_object(fid: &Fid) -> bool {
        fid.oid != 0 && fid.ver == 0
    }

    /// The object's file; a precreated object that has none yet is `Empty`, or gets its
    /// file when `create`.
    fn lookup_obj(&self, fid: &Fid, create: bool) -> Result<Obj, Errno> {
        Self::check(fid)?;
        if let Some(f) = self.fds.lock().get(fid) {
            return Ok(Obj::File(f));
        }
        let path = self.object_path(fid);
        let f = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // First make sure the store itself is still there, so a removed target
                // never reads as zeros or as lost objects.
                self.health.verify()?;
                match self.absent(fid)? {
                    Absent::NotCreated | Absent::Lost => return Err(Errno::ENOENT),
                    Absent::Empty if !create => return Ok(Obj::Empty),
                    Absent::Empty => {}
                }
                if let Some(d) = path.parent() {
                    self.make_dirs(d)?;
                }
                crate::private_file()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(&path)
                    .map_err(|e| self.health.io_error(path.display(), e))?
            }
            Err(e) => return Err(self.health.io_error(path.display(), e)),
        };
        let f = Arc::new(f);
        self.fds.lock().insert(*fid, f.clone());
        Ok(Obj::File(f))
    }

    /// The object's file, created if the object has none yet.
    fn open_obj(&self, fid: &Fid) -> Result<Arc<File>, Errno> {
        match self.lookup_obj(fid, true)? {
            Obj::File(f) => Ok(f),
            Obj::Empty => Err(Errno::EIO),
        }
    }

    /// Creates the object if it does not exist (objects created on first write, as
    /// Data-on-MDT objects are, rather than precreated).
    pub fn ensure(&self, fid: &Fid) -> Result<(), Errno> {
        Self::check(fid)?;
        if self.fds.lock().get(fid).is_some() {
            return Ok(());
        }
        let p = self.object_path(fid);
        if p.exists() {
            return Ok(());
        }
        if let Some(d) = p.parent() {
            self.make_dirs(d)?;
        }
        match crate::private_file().write(true).create_new(true).open(&p) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The highest object id created in `seq` (0 when none).
    pub fn last_id(&self, seq: u64) -> Result<u32, Errno> {
        Ok(self.seq_ids(seq)?.last)
    }

    /// Why `fid`, which has no file, has none (the caller saw it missing).
    pub fn absent(&self, fid: &Fid) -> Result<Absent, Errno> {
        let ids = self.seq_ids(fid.seq)?;
        Ok(if fid.oid > ids.last {
            Absent::NotCreated
        } else if fid.oid <= ids.lazy {
            Absent::Empty
        } else {
            Absent::Lost
        })
    }

    /// LAST_ID and LAZY_LAST of `seq`, read once. A sequence with a LAST_ID but no
    /// LAZY_LAST was made by a store that created objects lazily: all of it up to its
    /// LAST_ID is lazy, and LAZY_LAST is written so that stays so.
    fn seq_ids(&self, seq: u64) -> Result<SeqIds, Errno> {
        if let Some(ids) = self.last_ids.lock().get(&seq) {
            return Ok(*ids);
        }
        let sd = self.seq_dir(seq);
        let read = |name: &str| -> Result<Option<u32>, Errno> {
            match std::fs::read_to_string(sd.join(name)) {
                Ok(s) => s.trim().parse().map(Some).map_err(|_| {
                    tracing::error!(target: "osd", "{}: {} of sequence {seq:#x} is not a number", self.name(), name);
                    Errno::EIO
                }),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(self.health.io_error(sd.join(name).display(), e)),
            }
        };
        let last = read("LAST_ID")?;
        if last.is_none() {
            // A new sequence, or a store whose `O/` is gone: the latter must not read as
            // an empty sequence (LFSCK would take LAST_ID 0 for a crashed one).
            self.health.verify()?;
        }
        let lazy = match read(LAZY_LAST)? {
            Some(l) => l,
            None => {
                let l = last.unwrap_or(0);
                if l > 0 && !self.read_only {
                    self.write_id(seq, LAZY_LAST, l)?;
                }
                l
            }
        };
        let ids = SeqIds {
            last: last.unwrap_or(0),
            lazy,
        };
        self.last_ids.lock().insert(seq, ids);
        Ok(ids)
    }

    /// Writes `name` (LAST_ID or LAZY_LAST) of `seq` as `value`, durably: the new value
    /// is synced before it replaces the old one by rename, and the rename after.
    fn write_id(&self, seq: u64, name: &str, value: u32) -> Result<(), Errno> {
        let sd = self.seq_dir(seq);
        self.make_dirs(&sd)?;
        let tmp = sd.join(format!("{name}.tmp"));
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = crate::private_file()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)?;
            f.write_all(format!("{value}\n").as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, sd.join(name))?;
            File::open(&sd)?.sync_all()
        };
        write().map_err(|e| self.health.io_error(sd.join(name).display(), e))
    }

    /// Creates objects in `seq` up to `last` (inclusive), each with its empty file;
    /// returns the new last id. The files are durable before LAST_ID says they exist,
    /// and LAST_ID before this returns.
    pub fn precreate(&self, seq: u64, last: u32) -> Result<u32, Errno> {
        let _g = self.create_lock.lock();
        let ids = self.seq_ids(seq)?;
        if last <= ids.last {
            return Ok(ids.last);
        }
        let sd = self.seq_dir(seq);
        for i in 0..OBJ_SUBDIRS {
            let d = sd.join(format!("d{i}"));
            if !d.exists() {
                self.make_dirs(&d)?;
            }
        }
        self.mark_new_sequence(seq, ids)?;
        self.make_object_files(seq, ids.last + 1, last)?;
        self.write_id(seq, "LAST_ID", last)?;
        self.last_ids.lock().insert(seq, SeqIds { last, ..ids });
        Ok(last)
    }

    /// Gives a sequence that has no LAST_ID yet its LAZY_LAST (0) before its first
    /// LAST_ID, which alone would read as a lazy store's, and makes the sequence
    /// directory's own entry durable.
    fn mark_new_sequence(&self, seq: u64, ids: SeqIds) -> Result<(), Errno> {
        if ids.last != 0 || self.seq_dir(seq).join(LAZY_LAST).exists() {
            return Ok(());
        }
        self.write_id(seq, LAZY_LAST, 0)?;
        File::open(&self.root)
            .and_then(|d| d.sync_all())
            .map_err(|e| self.health.io_error(self.root.display(), e))
    }

    /// Makes the empty files of objects `first..=last` of `seq` (one that exists is
    /// kept), then syncs the subdirectories that got them.
    fn make_object_files(&self, seq: u64, first: u32, last: u32) -> Result<(), Errno> {
        use std::os::fd::AsRawFd;
        let sd = self.seq_dir(seq);
        let subdirs = (0..OBJ_SUBDIRS)
            .map(|i| {
                let d = sd.join(format!("d{i}"));
                File::open(&d).map_err(|e| self.health.io_error(d.display(), e))
            })
            .collect::<Result<Vec<File>, Errno>>()?;
        let mode = libc::S_IFREG | crate::PRIVATE_FILE_MODE as libc::mode_t;
        for oid in first..=last {
            if (oid - first).is_multiple_of(PRECREATE_CHECK_EVERY)
                && self.closing.load(Ordering::Acquire)
            {
                return Err(Errno::ESHUTDOWN);
            }
            let dir = &subdirs[(oid % OBJ_SUBDIRS) as usize];
            let name = std::ffi::CString::new(oid.to_string()).map_err(|_| Errno::EINVAL)?;
            // SAFETY: a valid directory descriptor and a NUL-terminated name.
            let r = unsafe { libc::mknodat(dir.as_raw_fd(), name.as_ptr(), mode, 0) };
            if r != 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::AlreadyExists {
                    return Err(self
                        .health
                        .io_error(format_args!("object {oid} of sequence {seq:#x}"), e));
                }
            }
        }
        let touched = (last - first + 1).min(OBJ_SUBDIRS) as usize;
        for k in 0..touched {
            let dir = &subdirs[((first as usize) + k) % OBJ_SUBDIRS as usize];
            dir.sync_all()
                .map_err(|e| self.health.io_error(format_args!("sequence {seq:#x}"), e))?;
        }
        Ok(())
    }

    /// Objects `from..=LAST_ID` of `seq` belong to no file their MDT kept (Lustre's
    /// `ofd_orphans_destroy`, asked by the MDT once its recovery is over): a power cut of
    /// the MDT took back the creates that got them, while clients had written them. Each
    /// one written (data, a filter fid or an owner) goes back, durably, to what precreation made: an
    /// empty file, or none for an object of a lazy store. The MDT hands these ids out
    /// again, so a new file never shows a lost file's bytes nor is refused for its filter
    /// fid. Returns how many were reset. LAST_ID stays.
    pub fn clean_orphans(&self, seq: u64, from: u32) -> Result<u32, Errno> {
        /// Objects probed at a time.
        const PROBE_BATCH: usize = 1024;
        let _g = self.create_lock.lock();
        let ids = self.seq_ids(seq)?;
        let fids: Vec<Fid> = (from.max(1)..=ids.last)
            .map(|oid| Fid::new(seq, oid, 0))
            .collect();
        let mut written = Vec::new();
        for batch in fids.chunks(PROBE_BATCH) {
            for (fid, p) in batch.iter().zip(self.probe_batch(batch)?) {
                if p.size.is_some_and(|s| s > 0) || p.ff.is_some() || p.owner.is_some() {
                    written.push(*fid);
                }
            }
        }
        if written.is_empty() {
            return Ok(0);
        }
        self.destroy_durably(&written)?;
        for fid in written.iter().filter(|f| f.oid > ids.lazy) {
            self.make_object_files(seq, fid.oid, fid.oid)?;
        }
        tracing::info!(target: "osd", "{}: reset {} orphan objects of sequence {seq:#x} from {from}", self.name(), written.len());
        Ok(written.len() as u32)
    }

    /// Writes `data` at `offset`; records the filter fid on the first write.
    pub fn write(
        &self,
        fid: &Fid,
        parent: &Fid,
        offset: u64,
        data: &[u8],
    ) -> Result<u64, ObjError> {
        self.write_summed(fid, parent, offset, data, None, false)
    }

    /// Writes `data` at `offset` with `sums`, the checksums of its pieces
    /// ([`nacre_core::cksum::pieces`]; computed here when `None`): a whole block's piece
    /// checksum becomes its entry as it is. `from_wire`: the sums came with the bytes from
    /// another node, and each piece is checked against its sum just before it is written
    /// (see [`CHECK_CHUNK`]); at the first damaged one the write stops with
    /// [`ObjError::Damaged`], having written (with their entries) only the pieces before.
    pub fn write_summed(
        &self,
        fid: &Fid,
        parent: &Fid,
        offset: u64,
        data: &[u8],
        sums: Option<&[u32]>,
        from_wire: bool,
    ) -> Result<u64, ObjError> {
        self.write_placed(fid, parent, None, offset, data, sums, from_wire)
    }

    /// [`write_summed`](Self::write_summed) that also keeps `layout`, the shape of the
    /// component the object is a stripe of, beside the filter fid (Lustre's `ff_layout`):
    /// what the layout LFSCK rebuilds a lost file's layout from. `None` keeps what the
    /// object holds for the same parent.
    #[allow(clippy::too_many_arguments)]
    pub fn write_placed(
        &self,
        fid: &Fid,
        parent: &Fid,
        layout: Option<OstLayout>,
        offset: u64,
        data: &[u8],
        sums: Option<&[u32]>,
        from_wire: bool,
    ) -> Result<u64, ObjError> {
        self.write_with(fid, parent, layout, offset, data, sums, from_wire, false)
    }

    /// [`write_placed`](Self::write_placed) of a write replayed after a power cut: the
    /// other bytes of a block it writes in part are taken as they are, not checked against
    /// the block's entry. The cut may have kept an entry without the data it was computed
    /// from (or the reverse); every uncommitted write to the block is replayed, in order,
    /// so what the block holds once they are is what was acknowledged.
    #[allow(clippy::too_many_arguments)]
    pub fn write_replayed(
        &self,
        fid: &Fid,
        parent: &Fid,
        layout: Option<OstLayout>,
        offset: u64,
        data: &[u8],
        sums: Option<&[u32]>,
        from_wire: bool,
    ) -> Result<u64, ObjError> {
        self.write_with(fid, parent, layout, offset, data, sums, from_wire, true)
    }

    #[allow(clippy::too_many_arguments)]
    fn write_with(
        &self,
        fid: &Fid,
        parent: &Fid,
        layout: Option<OstLayout>,
        offset: u64,
        data: &[u8],
        sums: Option<&[u32]>,
        from_wire: bool,
        replayed: bool,
    ) -> Result<u64, ObjError> {
        let end = offset.checked_add(data.len() as u64).ok_or(Errno::EFBIG)?;
        let owned;
        let sums = match sums {
            Some(s) => s,
            None if from_wire => return Err(Errno::EPROTO.into()),
            None => {
                owned = nacre_core::cksum::bulk_sums(offset, data);
                &owned
            }
        };
        if sums.len() != nacre_core::cksum::piece_count(offset, data.len()) {
            return Err(Errno::EPROTO.into());
        }
        self.release_idle();
        let f = self.open_obj(fid)?;
        self.tag(fid, parent, layout)?;
        let _w = self.extend.read();
        if let Some(r) = self.reserved.lock().get_mut(fid) {
            r.last = Instant::now();
        }
        let update = if self.checksums() {
            self.ensure_table(fid, &f)?;
            let g = self
                .ranges
                .lock(*fid, offset >> BLOCK_SHIFT, end.div_ceil(BLOCK as u64));
            let table = self.entries(fid, &f)?;
            // A replay trusts the block's other bytes (see `write_replayed`).
            let checked_against = if replayed { &Entries::Missing } else { &table };
            let entries = self.new_entries(fid, &f, checked_against, offset, data, sums)?;
            Some((g, entries))
        } else {
            self.drop_table(fid, &f)?;
            None
        };
        let check = |from: usize, to: usize| -> Result<(), ObjError> {
            if !from_wire {
                return Ok(());
            }
            let first = nacre_core::cksum::piece_count(offset, from);
            let at = offset + from as u64;
            for (r, &want) in pieces(at, to - from).zip(&sums[first..]) {
                let got = crc32c::crc32c(&data[from + r.start..from + r.end]);
                if got != want {
                    return Err(ObjError::Damaged {
                        at: at + r.start as u64,
                        expected: want,
                        actual: got,
                    });
                }
            }
            Ok(())
        };
        let mut done = 0;
        let mut failed = None;
        if self.direct_fits(offset, data) {
            // The disk takes these bytes by DMA: checking first costs the one pass it is.
            check(0, data.len())?;
            self.reserve_ahead(fid, &f, offset);
            done = self.write_direct(fid, offset, data)?;
            f.write_all_at(&data[done..], offset + done as u64)
                .map_err(|e| self.health.io_error(format_args!("object {fid}"), e))?;
            done = data.len();
        } else {
            while done < data.len() {
                let at = offset + done as u64;
                let next = ((at / CHECK_CHUNK as u64 + 1) * CHECK_CHUNK as u64 - offset)
                    .min(data.len() as u64) as usize;
                if let Err(e) = check(done, next) {
                    failed = Some(e);
                    break;
                }
                f.write_all_at(&data[done..next], at)
                    .map_err(|e| self.health.io_error(format_args!("object {fid}"), e))?;
                done = next;
            }
        }
        if let Some((_g, entries)) = update {
            let written = nacre_core::cksum::piece_count(offset, done);
            self.put_entries(fid, &f, offset >> BLOCK_SHIFT, &entries[..written], None)?;
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(data.len() as u64),
        }
    }

    /// At a chunk boundary of a streamed object, reserves the next chunk's blocks (best
    /// effort: a full disk just means no reservation).
    fn reserve_ahead(&self, fid: &Fid, f: &File, offset: u64) {
        if offset < RESERVE_START {
            return;
        }
        let chunk = (1u64 << offset.ilog2()).min(RESERVE_MAX);
        if !offset.is_multiple_of(chunk) {
            return;
        }
        // At most RESERVE_OBJECTS streams hold reservations; a stream that finds the table
        // full does without until one is given back.
        {
            let r = self.reserved.lock();
            if r.len() >= RESERVE_OBJECTS && !r.contains_key(fid) {
                return;
            }
        }
        // Reserved blocks must never be what makes another writer's write fail: only
        // with room for every reservation many times over.
        if self.room() < RESERVE_ROOM * chunk {
            return;
        }
        // SAFETY: a valid open descriptor; no memory is passed.
        let r = unsafe {
            libc::fallocate(
                std::os::fd::AsRawFd::as_raw_fd(f),
                libc::FALLOC_FL_KEEP_SIZE,
                offset as libc::off_t,
                chunk as libc::off_t,
            )
        };
        if r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EOPNOTSUPP) {
            return;
        }
        // Recorded even if it failed otherwise: a failed fallocate may have reserved part.
        // Writes in flight together land in any order: an earlier chunk's reservation
        // arriving late must not hide a later one's (the give-back trims to `end`).
        let end = offset + chunk;
        let mut r = self.reserved.lock();
        let e = r.entry(*fid).or_insert(Reserved {
            end,
            last: Instant::now(),
        });
        e.end = e.end.max(end);
        e.last = Instant::now();
        drop(r);
        self.reserved_made.notify_one();
    }

    /// Bytes writers may still use on the store's file system (0 if unknown).
    // statvfs's field types differ between targets (u32 or u64): the casts are needed there.
    #[allow(clippy::unnecessary_cast)]
    fn room(&self) -> u64 {
        self.statfs()
            .map(|st| (st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
            .unwrap_or(0)
    }

    /// Gives back the blocks reserved past `fid`'s data.
    pub fn release(&self, fid: &Fid) {
        let r = self.reserved.lock().remove(fid);
        if let Some(r) = r {
            self.give_back(&[(*fid, r.end)]);
        }
    }

    /// Forgets a reservation without giving it back (the object's blocks past its data
    /// are now the client's own, or gone).
    fn forget_reservation(&self, fid: &Fid) {
        self.reserved.lock().remove(fid);
    }

    /// When the oldest reservation goes idle; with none, waits for one to be made. The
    /// OST's timer sleeps on it, so an OST with no stream never wakes for this.
    pub async fn next_idle_release(&self) -> Instant {
        loop {
            let made = self.reserved_made.notified();
            let due = self
                .reserved
                .lock()
                .values()
                .map(|r| r.last + RESERVE_IDLE)
                .min();
            if let Some(due) = due {
                return due;
            }
            made.await;
        }
    }

    /// Gives back what objects not written for [`RESERVE_IDLE`] have not used; the OST
    /// calls it when the oldest goes idle too (see [`ObjStore::next_idle_release`]), so a
    /// stream that stopped gives back even when nothing else is written.
    pub fn release_idle(&self) {
        let mut out = Vec::new();
        {
            let mut r = self.reserved.lock();
            if r.is_empty() {
                return;
            }
            r.retain(|fid, v| {
                let keep = v.last.elapsed() < RESERVE_IDLE;
                if !keep {
                    out.push((*fid, v.end));
                }
                keep
            });
        }
        if !out.is_empty() {
            self.give_back(&out);
        }
    }

    fn give_back(&self, objs: &[(Fid, u64)]) {
        let _alone = self.extend.write();
        for (fid, end) in objs {
            let Ok(Obj::File(f)) = self.lookup_obj(fid, false) else {
                continue;
            };
            let Ok(m) = f.metadata() else {
                continue;
            };
            if *end > m.len() {
                // A hole cannot be punched past the end of a file (ext4 ignores it), but a
                // truncate to its own size frees what lies past it. It stamps the mtime,
                // which is the file's data-change time: the old one is put back.
                use std::os::unix::fs::MetadataExt;
                if f.set_len(m.len()).is_ok() {
                    let _ = set_mtime(&f, m.mtime(), m.mtime_nsec());
                }
            }
        }
    }

    fn direct_fits(&self, offset: u64, data: &[u8]) -> bool {
        self.direct.load(Ordering::Relaxed)
            && data.len() >= DIRECT_MIN
            && data.len().is_multiple_of(DIRECT_ALIGN)
            && offset.is_multiple_of(DIRECT_ALIGN as u64)
            && (data.as_ptr() as usize).is_multiple_of(DIRECT_ALIGN)
    }

    /// Writes what it can of `data` with O_DIRECT; returns how many bytes it wrote, the
    /// rest to be written through the page cache. A file system that refuses O_DIRECT
    /// (tmpfs, some FUSE or network file systems) turns it off for this store.
    fn write_direct(&self, fid: &Fid, offset: u64, data: &[u8]) -> Result<usize, Errno> {
        use std::os::unix::fs::OpenOptionsExt;
        let f = match OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(self.object_path(fid))
        {
            Ok(f) => f,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                self.no_direct(&e);
                return Ok(0);
            }
            Err(e) => return Err(self.health.io_error(format_args!("object {fid}"), e)),
        };
        let mut done = 0;
        while done < data.len() {
            match f.write_at(&data[done..], offset + done as u64) {
                Ok(0) => return Err(Errno::EIO),
                // A short write leaves the rest unaligned: the page cache takes it.
                Ok(n) if !n.is_multiple_of(DIRECT_ALIGN) => return Ok(done + n),
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) && done == 0 => {
                    self.no_direct(&e);
                    return Ok(0);
                }
                Err(e) => return Err(self.health.io_error(format_args!("object {fid}"), e)),
            }
        }
        Ok(done)
    }

    /// Whether large aligned writes bypass the page cache (`writethrough_cache_enable=0`).
    /// The directory holding the objects.
    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn direct_io(&self) -> bool {
        self.direct.load(Ordering::Relaxed)
    }

    pub fn set_direct_io(&self, on: bool) {
        self.direct.store(on, Ordering::Relaxed);
    }

    fn no_direct(&self, e: &std::io::Error) {
        if self.direct.swap(false, Ordering::Relaxed) {
            tracing::info!(target: "osd", "{}: O_DIRECT refused ({e}): writes go through the page cache", self.root.display());
        }
    }

    /// Records the filter fid (and `layout`) unless the object carries them already; a
    /// writer that gives no layout leaves the one kept for the same parent. With
    /// [`verify_pfid`](Self::verify_pfid), a writer naming another parent or layout than
    /// the object keeps is refused with EINPROGRESS, as Lustre's `ofd_verify_ff` does
    /// while the pair is unverified: the client tries again, and the MDT's swap (or
    /// LFSCK) that moves the object to its new file settles it meanwhile.
    fn tag(&self, fid: &Fid, parent: &Fid, layout: Option<OstLayout>) -> Result<(), Errno> {
        if parent.is_zero() {
            return Ok(());
        }
        let mut cached = self.tagged.lock().get(fid).copied();
        let mut stored = match cached {
            Some(c) => Some(c),
            None => get_filter(&self.object_path(fid))?,
        }
        .filter(|(p, _)| !p.is_zero());
        let differs = |(p, l): (Fid, Option<OstLayout>)| {
            p != *parent || !(layout.is_none() || l.is_none() || layout == l)
        };
        if cached.is_some() && stored.is_some_and(differs) {
            // The cache may be behind the MDT's repair that just moved the object: the
            // xattr says.
            self.tagged.lock().remove(fid);
            cached = None;
            stored = get_filter(&self.object_path(fid))?.filter(|(p, _)| !p.is_zero());
        }
        if let Some((p, l)) = stored {
            if differs((p, l)) && self.verify_pfid() {
                self.pfid_refused.fetch_add(1, Ordering::Relaxed);
                if let Some(held) = self.pfid_log.allow() {
                    tracing::warn!(target: "osd", "{}: object {fid} is stripe {} of file {} ({l:?}): a write naming stripe {} of file {} ({layout:?}) is refused{}", self.name(), p.ver, p.with_ver(0), parent.ver, parent.with_ver(0), nacre_core::log_limit::held_note(held));
                }
                return Err(Errno::EINPROGRESS);
            }
            if p == *parent && (layout.is_none() || layout == l) {
                if cached.is_none() {
                    self.remember_tag(fid, p, l);
                }
                return Ok(());
            }
        }
        let kept = match layout {
            Some(l) => Some(l),
            None => stored.filter(|(p, _)| p == parent).and_then(|(_, l)| l),
        };
        set_filter(&self.object_path(fid), parent, kept.as_ref())?;
        self.remember_tag(fid, *parent, kept);
        Ok(())
    }

    fn remember_tag(&self, fid: &Fid, parent: Fid, layout: Option<OstLayout>) {
        let mut t = self.tagged.lock();
        if t.len() >= TAGGED_MAX {
            t.clear();
        }
        t.insert(*fid, (parent, layout));
    }

    /// Reads up to `len` bytes at `offset` (short at end of object; holes read as zeros),
    /// checked against the stored checksums.
    pub fn read(&self, fid: &Fid, offset: u64, len: usize) -> Result<Vec<u8>, ObjError> {
        Ok(self
            .read_checked(fid, offset, len, None, TornBlocks::Take)?
            .into_vec())
    }

    /// Reads up to `len` bytes at `offset`, every block checked, and with `sums` the
    /// checksums of the pieces read, for the reply: with [`ReadVerify::Target`] as
    /// computed to check them; with [`ReadVerify::Reader`] a whole block's is its stored
    /// one and the block is left for the reader to check (one crc pass per read instead
    /// of two), a partial piece's still computed and checked here. `torn` says what
    /// becomes of a bad block the last crash may have torn.
    pub fn read_checked(
        &self,
        fid: &Fid,
        offset: u64,
        len: usize,
        sums: Option<ReadVerify>,
        torn: TornBlocks,
    ) -> Result<ReadOut, ObjError> {
        let Obj::File(f) = self.lookup_obj(fid, false)? else {
            return Ok(ReadOut::default());
        };
        let (out, bad) = self.load_checked(fid, &f, offset, len, sums)?;
        if bad.is_empty() {
            return Ok(out);
        }
        // Perhaps a change was under way: again, holding the blocks.
        let end = offset.saturating_add(len as u64);
        let _g = self
            .ranges
            .lock(*fid, offset >> BLOCK_SHIFT, end.div_ceil(BLOCK as u64));
        let (out, bad) = self.load_checked(fid, &f, offset, len, sums)?;
        match torn {
            TornBlocks::Take if self.retake_torn(fid, &f, &bad) => return Ok(out),
            TornBlocks::Report if !bad.is_empty() && self.maybe_torn(&f) => {
                // Not corruption (yet): the reader repairs it from its other copy, or asks
                // again to take it when it has none that is good.
                self.torn_reported
                    .fetch_add(bad.len() as u64, Ordering::Relaxed);
                tracing::warn!(target: "osd", "{}: object {fid}: {} block(s) written after the last commit before the crash fail their checksums (torn by the crash?): reported to a reader with another copy", self.name(), bad.len());
                return Err(ObjError::Corrupt {
                    obj: *fid,
                    what: Corruption::Block(bad[0]),
                });
            }
            _ => {}
        }
        match bad.first() {
            None => Ok(out),
            Some(b) => {
                for b in &bad {
                    self.report(fid, &Corruption::Block(*b));
                }
                Err(ObjError::Corrupt {
                    obj: *fid,
                    what: Corruption::Block(*b),
                })
            }
        }
    }

    /// Checks `[offset, offset + len)` of an object against its entries (scrub's question
    /// "is this range good?"). Errors only when the object cannot be read; what is bad is
    /// in the answer, and bad blocks are not logged or counted here (an unreadable table
    /// is, as on any access).
    pub fn verify_range(&self, fid: &Fid, offset: u64, len: usize) -> Result<RangeCheck, Errno> {
        let Obj::File(f) = self.lookup_obj(fid, false)? else {
            return Ok(RangeCheck::default());
        };
        let size = f.metadata()?.len();
        let mut check = RangeCheck {
            size,
            ..RangeCheck::default()
        };
        if size == 0 {
            // Never written (precreated), or emptied: nothing to protect.
            return Ok(check);
        }
        match self.entries(fid, &f) {
            Ok(Entries::Missing) => {
                check.unprotected = true;
                return Ok(check);
            }
            Ok(_) => {}
            Err(ObjError::Corrupt { what, .. }) => {
                check.bad_table = Some(what.to_string());
                return Ok(check);
            }
            Err(e) => return Err(e.into()),
        }
        let mut pass = |locked: bool| -> Result<(u64, Vec<BadBlock>), Errno> {
            let _g = locked.then(|| {
                self.ranges.lock(
                    *fid,
                    offset >> BLOCK_SHIFT,
                    offset.saturating_add(len as u64).div_ceil(BLOCK as u64),
                )
            });
            match self.load_checked(fid, &f, offset, len, None) {
                // Holding the blocks, a crash's torn ones are taken as they are, but for
                // a mirrored or erasure-coded file's object: reported bad, they are
                // rewritten from a good copy by the next read, rather than taken as
                // neither the old bytes nor the new.
                Ok((out, bad))
                    if locked
                        && !bad.is_empty()
                        && !self.has_other_copies(fid)
                        && self.retake_torn(fid, &f, &bad) =>
                {
                    Ok((out.buf.len() as u64, Vec::new()))
                }
                Ok((out, bad)) => Ok((out.buf.len() as u64, bad)),
                Err(ObjError::Corrupt { what, .. }) => {
                    check.bad_table = Some(what.to_string());
                    Ok((0, Vec::new()))
                }
                Err(e) => Err(e.into()),
            }
        };
        let (mut checked, mut bad) = pass(false)?;
        if !bad.is_empty() {
            (checked, bad) = pass(true)?;
        }
        check.checked = checked;
        check.bad_count = bad.len() as u64;
        bad.truncate(MAX_BAD_LISTED);
        check.bad = bad;
        Ok(check)
    }

    /// Whether the object's filter fid places it in a mirror (Lustre's mirror id in its
    /// component id; an erasure-coded file is a data and a parity mirror): its file then
    /// has another copy of its bytes.
    fn has_other_copies(&self, fid: &Fid) -> bool {
        matches!(
            get_filter(&self.object_path(fid)),
            Ok(Some((_, Some(l)))) if l.mirror_id() != 0
        )
    }

    /// Reads the blocks around `[offset, offset + len)` and checks each (but see
    /// [`read_checked`](Self::read_checked) for `sums`); returns what was read and the
    /// blocks that failed.
    fn load_checked(
        &self,
        fid: &Fid,
        f: &File,
        offset: u64,
        len: usize,
        want: Option<ReadVerify>,
    ) -> Result<(ReadOut, Vec<BadBlock>), ObjError> {
        let want_sums = want.is_some();
        let size = f.metadata()?.len();
        if offset >= size || len == 0 {
            return Ok((ReadOut::default(), Vec::new()));
        }
        let n = (size - offset).min(len as u64);
        let table = if self.checksums() {
            self.entries(fid, f)?
        } else {
            Entries::Missing
        };
        if let Entries::Missing = table {
            let buf = read_uninit_at(f, n as usize, offset)
                .map_err(|e| self.health.io_error(format_args!("object {fid}"), e))?;
            let sums = want_sums.then(|| nacre_core::cksum::bulk_sums(offset, &buf));
            let len = buf.len();
            return Ok((
                ReadOut {
                    buf,
                    start: 0,
                    len,
                    sums,
                },
                Vec::new(),
            ));
        }
        let block = BLOCK as u64;
        let a = offset & !(block - 1);
        let e = (offset + n).div_ceil(block).saturating_mul(block).min(size);
        let stored_sums = want == Some(ReadVerify::Reader);
        let want = (e - a) as usize;
        let first = a >> BLOCK_SHIFT;
        let stored = self.get_entries(&table, first, want.div_ceil(BLOCK))?;
        let start = (offset - a) as usize;
        let dend = start + n as usize;
        let mut sums = want_sums
            .then(|| Vec::with_capacity(nacre_core::cksum::piece_count(offset, n as usize)));
        let mut bad = Vec::new();
        // A piece at a time, each block checked right after the kernel copied it in,
        // while it is in cache.
        let mut buf = Vec::with_capacity(want);
        while buf.len() < want {
            let from = buf.len();
            read_append(f, &mut buf, (from + CHECK_CHUNK).min(want), a + from as u64)
                .map_err(|e| self.health.io_error(format_args!("object {fid}"), e))?;
            if buf.len() == from {
                break;
            }
            // `from` is a multiple of the chunk, so of a block.
            for (j, chunk) in buf[from..].chunks(BLOCK).enumerate() {
                let i = from / BLOCK + j;
                if let Some(s) = sums.as_mut().filter(|_| stored_sums) {
                    let bs = i * BLOCK;
                    if chunk.len() == BLOCK && bs >= start && bs + BLOCK <= dend {
                        // The reader checks it against what was stored.
                        s.push(piece_sum_of_entry(stored[i]));
                        continue;
                    }
                }
                let crc = crc32c::crc32c(chunk);
                let entry = block_entry(crc, chunk.len());
                if entry != stored[i] {
                    bad.push(BadBlock {
                        offset: a + (i * BLOCK) as u64,
                        stored: stored[i],
                        computed: entry,
                    });
                }
                if let Some(s) = sums.as_mut() {
                    let (bs, be) = (i * BLOCK, i * BLOCK + chunk.len());
                    let (ps, pe) = (bs.max(start), be.min(dend));
                    if ps < pe {
                        s.push(if (ps, pe) == (bs, be) {
                            crc
                        } else {
                            crc32c::crc32c(&chunk[ps - bs..pe - bs])
                        });
                    }
                }
            }
            if buf.len() < (from + CHECK_CHUNK).min(want) {
                break;
            }
        }
        // The object may have shrunk since the stat: what came is what is checked.
        let dlen = (n as usize).min(buf.len().saturating_sub(start));
        Ok((
            ReadOut {
                buf,
                start,
                len: dlen,
                sums,
            },
            bad,
        ))
    }

    /// The object's extent map on the OST's device (at most
    /// [`MAX_OBJECT_EXTENTS`](nacre_core::fiemap::MAX_OBJECT_EXTENTS) extents; none for an
    /// object with no data yet); `None` when the backing file system has no extent maps.
    pub fn extents(&self, fid: &Fid) -> Result<Option<Vec<nacre_core::fiemap::ObjExtent>>, Errno> {
        let Obj::File(f) = self.lookup_obj(fid, false)? else {
            return Ok(Some(Vec::new()));
        };
        Ok(nacre_core::fiemap::file_extents(
            &f,
            nacre_core::fiemap::MAX_OBJECT_EXTENTS,
        )?)
    }

    /// Size, 512-byte blocks and modification time of an object.
    pub fn getattr(&self, fid: &Fid) -> Result<(u64, u64, nacre_core::Timespec), Errno> {
        // Asked when the last writer closes, or by a stat: the blocks count only data.
        self.release(fid);
        use std::os::unix::fs::MetadataExt;
        let Obj::File(f) = self.lookup_obj(fid, false)? else {
            return Ok((0, 0, nacre_core::Timespec::default()));
        };
        let m = f.metadata()?;
        let mtime = nacre_core::Timespec {
            sec: m.mtime(),
            nsec: m.mtime_nsec() as u32,
        };
        Ok((m.len(), m.blocks(), mtime))
    }

    /// Truncates (or extends) an object to `size`.
    pub fn punch(&self, fid: &Fid, size: u64) -> Result<(), ObjError> {
        let _w = self.extend.read();
        // The size change frees whatever lies past it.
        self.forget_reservation(fid);
        let f = match self.lookup_obj(fid, size > 0)? {
            Obj::File(f) => f,
            Obj::Empty => return Ok(()),
        };
        if !self.checksums() {
            self.drop_table(fid, &f)?;
            f.set_len(size)
                .map_err(|e| self.health.io_error(format_args!("object {fid}"), e))?;
            return Ok(());
        }
        self.ensure_table(fid, &f)?;
        let last = size >> BLOCK_SHIFT;
        let _g = self.ranges.lock(*fid, last, u64::MAX);
        let table = self.entries(fid, &f)?;
        let old = f.metadata()?.len();
        // A block cut in two keeps its head: its entry is recomputed from what stays
        // (checked first). Extending changes no entry: past the end was zeros already.
        let tail = if size < old && !size.is_multiple_of(BLOCK as u64) {
            let mut b = self.checked_block(fid, &f, &table, last, old)?;
            b[(size % BLOCK as u64) as usize..].fill(0);
            Some(entry_of(&b))
        } else {
            None
        };
        f.set_len(size)
            .map_err(|e| self.health.io_error(format_args!("object {fid}"), e))?;
        if size < old {
            self.put_entries(
                fid,
                &f,
                last,
                tail.as_slice(),
                Some(size.div_ceil(BLOCK as u64)),
            )?;
        }
        Ok(())
    }

    /// `fallocate(2)` on the object file with the client's mode: allocate (growing the
    /// object unless `KEEP_SIZE`), punch a hole or zero a range. The backing file system
    /// decides what it supports; a zero range it lacks is done as punch then allocate.
    pub fn fallocate(
        &self,
        fid: &Fid,
        parent: &Fid,
        offset: u64,
        len: u64,
        mode: i32,
    ) -> Result<(), ObjError> {
        use std::os::fd::AsRawFd;
        if len == 0
            || offset
                .checked_add(len)
                .is_none_or(|end| end > i64::MAX as u64)
        {
            return Err(Errno::EINVAL.into());
        }
        let allowed =
            libc::FALLOC_FL_KEEP_SIZE | libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE;
        if mode & !allowed != 0 {
            return Err(Errno(libc::EOPNOTSUPP).into());
        }
        if mode & libc::FALLOC_FL_PUNCH_HOLE == 0 && len > self.room() {
            // More than the disk has: refused whole. The backing file system would
            // allocate what it could before failing and keep it, filling the OST for
            // nothing.
            return Err(Errno::ENOSPC.into());
        }
        let _w = self.extend.read();
        // The client's own allocation past the data must not be given back as ours.
        self.forget_reservation(fid);
        let f = self.open_obj(fid)?;
        if mode & libc::FALLOC_FL_PUNCH_HOLE == 0 {
            // Allocating makes the object part of the file, as a write does.
            self.tag(fid, parent, None)?;
        }
        // Allocating changes no byte; punching and zeroing turn a range into zeros, and
        // the blocks it cuts into keep the rest of their bytes (checked first).
        let zeroing = mode & (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE) != 0;
        let end = offset + len;
        let (first, stop) = (offset >> BLOCK_SHIFT, end.div_ceil(BLOCK as u64));
        let update = if !self.checksums() {
            self.drop_table(fid, &f)?;
            None
        } else if zeroing {
            self.ensure_table(fid, &f)?;
            let g = self.ranges.lock(*fid, first, stop);
            let table = self.entries(fid, &f)?;
            let size = f.metadata()?.len();
            for b in [first, stop - 1] {
                let edge = (b << BLOCK_SHIFT) < offset || ((b + 1) << BLOCK_SHIFT) > end;
                if edge && (b << BLOCK_SHIFT) < size {
                    self.checked_block(fid, &f, &table, b, size)?;
                }
            }
            Some((g, table))
        } else {
            None
        };
        let call = |m: i32| {
            // SAFETY: a valid open descriptor; the kernel checks the range.
            let r = unsafe {
                libc::fallocate(f.as_raw_fd(), m, offset as libc::off_t, len as libc::off_t)
            };
            if r != 0 {
                let e = std::io::Error::last_os_error();
                Err(self.health.io_error(format_args!("object {fid}"), e))
            } else {
                Ok(())
            }
        };
        match call(mode) {
            Err(e) if e.0 == libc::EOPNOTSUPP && mode & libc::FALLOC_FL_ZERO_RANGE != 0 => {
                let keep = mode & libc::FALLOC_FL_KEEP_SIZE;
                call(libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE)?;
                call(keep)?;
            }
            r => r?,
        }
        if let Some((_g, _table)) = update {
            // Entries of blocks the object now has: zero for the whole ones, recomputed
            // from the disk for the edges.
            let size = f.metadata()?.len();
            let stop = stop.min(size.div_ceil(BLOCK as u64));
            if first < stop {
                let mut entries = vec![0u32; (stop - first) as usize];
                for b in [first, stop - 1] {
                    let edge = (b << BLOCK_SHIFT) < offset || ((b + 1) << BLOCK_SHIFT) > end;
                    if edge {
                        let data = read_uninit_at(&f, BLOCK, b << BLOCK_SHIFT)?;
                        entries[(b - first) as usize] = entry_of(&data);
                    }
                }
                self.put_entries(fid, &f, first, &entries, None)?;
            }
        }
        if mode != libc::FALLOC_FL_KEEP_SIZE {
            // Clients take a file's data-change time from its objects and compare it with
            // the MDT's ctime, which has full clock resolution; the backing file system may
            // stamp with a coarser clock, so a change right after a create could go unseen.
            stamp_mtime(&f)?;
        }
        Ok(())
    }

    pub fn destroy(&self, fid: &Fid) -> Result<(), Errno> {
        self.destroy_one(fid).map(|_| ())
    }

    /// Destroys `fid`; whether a file went.
    fn destroy_one(&self, fid: &Fid) -> Result<bool, Errno> {
        Self::check(fid)?;
        self.forget_reservation(fid);
        self.fds.lock().remove(fid);
        self.sidecars.lock().remove(fid);
        self.tagged.lock().remove(fid);
        let mut removed = false;
        for p in [self.object_path(fid), self.sidecar_path(fid)] {
            match std::fs::remove_file(p) {
                Ok(()) => removed = true,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(removed)
    }

    /// Destroys `fids` durably: once this returns, a power cut does not bring any of them
    /// back. The MDT drops its record of a destroy on the answer (its unlink llog), so an
    /// object a cut brought back would be an orphan nothing destroys again. Each directory
    /// that lost an entry is synced once.
    pub fn destroy_durably(&self, fids: &[Fid]) -> Result<(), Errno> {
        let mut dirs = std::collections::BTreeSet::new();
        for fid in fids {
            if self.destroy_one(fid)?
                && let Some(d) = self.object_path(fid).parent()
            {
                dirs.insert(d.to_path_buf());
            }
        }
        for d in dirs {
            File::open(&d)
                .and_then(|d| d.sync_all())
                .map_err(|e| self.health.io_error("an object directory", e))?;
        }
        self.health.verify()
    }

    /// Makes every change to this store's file system durable (`syncfs`): one call for a
    /// batch of metadata changes to many objects (owners), where one `fsync` each would
    /// cost a journal commit each.
    pub fn sync_all(&self) -> Result<(), Errno> {
        use std::os::fd::AsRawFd;
        let dir = File::open(&self.root).map_err(Errno::from)?;
        // SAFETY: syncfs takes any descriptor of the file system; this one is open.
        if unsafe { libc::syncfs(dir.as_raw_fd()) } != 0 {
            return Err(Errno::from(std::io::Error::last_os_error()));
        }
        self.health.verify()
    }

    /// Makes an object durable: its data, its size and filter fid, and, for an object
    /// that got its file at its first write (a lazy store's, or one made by
    /// [`ObjStore::ensure`] as Data-on-MDT objects are), the directory entries that name
    /// it: a new name in `d<n>`, itself possibly new in its sequence's directory, itself
    /// possibly new in the store's root. An object precreated with its file was named
    /// durably then. A sync is acknowledged only for a store that is still the target's:
    /// an open file keeps syncing after its directory was removed.
    pub fn sync(&self, fid: &Fid) -> Result<(), Errno> {
        self.release(fid);
        let Obj::File(f) = self.lookup_obj(fid, false)? else {
            return self.health.verify();
        };
        // The whole inode (inline checksums are an xattr, which fdatasync may leave) and
        // the checksum file, if any.
        let sidecar = self.open_sidecar(fid, false)?;
        let path = self.object_path(fid);
        let subdir = (fid.seq, fid.oid % OBJ_SUBDIRS);
        // An object created at its first write has its entry in its subdirectory, the
        // subdirectory its entry in the sequence's directory and that its entry in the
        // root (both change only when a directory is made, so once known durable they
        // are skipped); an object precreated with its file needs only its checksum
        // file's entry, if it has one (made when its table outgrew the xattr). Objects
        // above LAST_ID were never precreated: `ensure` made them.
        let ids = self.seq_ids(fid.seq)?;
        let precreated = fid.oid > ids.lazy && fid.oid <= ids.last;
        let levels = if precreated {
            usize::from(sidecar.is_some())
        } else if self.durable_subdirs.lock().contains(&subdir) {
            1
        } else {
            FIRST_WRITE_DIR_LEVELS
        };
        let synced = f.sync_all().and_then(|()| {
            if let Some(sf) = &sidecar {
                sf.sync_data()?;
            }
            let mut dir = path.parent();
            for _ in 0..levels {
                let Some(d) = dir else { break };
                File::open(d)?.sync_all()?;
                dir = d.parent();
            }
            Ok(())
        });
        if synced.is_ok() && levels == FIRST_WRITE_DIR_LEVELS {
            let mut d = self.durable_subdirs.lock();
            if d.len() >= DURABLE_SUBDIRS_MAX {
                d.clear();
            }
            d.insert(subdir);
        }
        if let Err(e) = synced {
            // A directory gone under an open object is the store failing, not a missing
            // object: the identity check says so first.
            self.health.verify()?;
            return Err(self.health.io_error(format_args!("object {fid}"), e));
        }
        self.health.verify()
    }

    // --- checksums at rest ---

    /// Logs and counts a bad block or table found by a read or a change.
    fn report(&self, fid: &Fid, what: &Corruption) {
        self.checksum_errors.fetch_add(1, Ordering::Relaxed);
        let file = match get_filter_fid(&self.object_path(fid)) {
            Ok(Some(p)) => p.to_string(),
            _ => "unknown".to_string(),
        };
        tracing::error!(target: "osd", "{}: checksum error: object {fid} of file {file}: {what}", self.name());
    }

    fn corrupt(&self, fid: &Fid, what: Corruption) -> ObjError {
        self.report(fid, &what);
        ObjError::Corrupt { obj: *fid, what }
    }

    /// The object's checksum file, opened (and created with `create`).
    fn open_sidecar(&self, fid: &Fid, create: bool) -> Result<Option<Arc<File>>, Errno> {
        if let Some(f) = self.sidecars.lock().get(fid) {
            return Ok(Some(f));
        }
        let p = self.sidecar_path(fid);
        let f = match OpenOptions::new().read(true).write(true).open(&p) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => crate::private_file()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&p)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let f = Arc::new(f);
        self.sidecars.lock().insert(*fid, f.clone());
        Ok(Some(f))
    }

    /// The object's entries as stored.
    fn entries(&self, fid: &Fid, f: &File) -> Result<Entries, ObjError> {
        match cksum::read_table(f)? {
            Ok(Table::Missing) => Ok(Entries::Missing),
            Ok(Table::Inline(v)) => Ok(Entries::Inline(v)),
            Ok(Table::Sidecar) => match self.open_sidecar(fid, false)? {
                Some(sf) => Ok(Entries::Sidecar(sf)),
                None => Err(self.corrupt(
                    fid,
                    Corruption::Table("its checksum file is missing".into()),
                )),
            },
            Err(e) => Err(self.corrupt(fid, Corruption::Table(e.to_string()))),
        }
    }

    /// Entries of blocks `first..first + n` (0 where none is stored).
    fn get_entries(&self, table: &Entries, first: u64, n: usize) -> Result<Vec<u32>, ObjError> {
        Ok(match table {
            Entries::Missing => vec![0; n],
            Entries::Inline(v) => (first..first + n as u64)
                .map(|b| {
                    usize::try_from(b)
                        .ok()
                        .and_then(|b| v.get(b))
                        .copied()
                        .unwrap_or(0)
                })
                .collect(),
            Entries::Sidecar(sf) => cksum::read_entries(sf, first, n)?,
        })
    }

    /// Sets the entries of blocks `first..first + new.len()`, after cutting the table to
    /// `keep` blocks if given; an inline table that would outgrow its xattr moves to a
    /// checksum file. The caller holds those blocks; the table itself is read again here
    /// under its object's table lock, since an inline table is one value for all blocks.
    fn put_entries(
        &self,
        fid: &Fid,
        f: &File,
        first: u64,
        new: &[u32],
        keep: Option<u64>,
    ) -> Result<(), ObjError> {
        if new.is_empty() && keep.is_none() {
            return Ok(());
        }
        let _t = self.table_locks[table_stripe(fid)].lock();
        let mut v = match cksum::read_table(f)? {
            Ok(Table::Sidecar) => {
                let Some(sf) = self.open_sidecar(fid, false)? else {
                    return Err(self.corrupt(
                        fid,
                        Corruption::Table("its checksum file is missing".into()),
                    ));
                };
                if let Some(k) = keep {
                    sf.set_len(k.saturating_mul(4))?;
                }
                cksum::write_entries(&sf, first, new)?;
                return Ok(());
            }
            Ok(Table::Missing) => Vec::new(),
            Ok(Table::Inline(v)) => v,
            Err(e) => return Err(self.corrupt(fid, Corruption::Table(e.to_string()))),
        };
        if let Some(k) = keep {
            v.truncate(usize::try_from(k).unwrap_or(usize::MAX));
        }
        let need = first + new.len() as u64;
        if need > cksum::INLINE_BLOCKS {
            let sf = self.open_sidecar(fid, true)?.ok_or(Errno::EIO)?;
            sf.set_len(0)?;
            cksum::write_entries(&sf, 0, &v)?;
            cksum::write_entries(&sf, first, new)?;
            cksum::mark_sidecar(f)?;
            return Ok(());
        }
        let need = need as usize;
        if v.len() < need {
            v.resize(need, 0);
        }
        v[first as usize..need].copy_from_slice(new);
        // Trailing zero entries need no room.
        while v.last() == Some(&0) {
            v.pop();
        }
        cksum::write_inline(f, &v)?;
        Ok(())
    }

    /// Block `b` of an object of `size` bytes, zero-padded to a whole block and checked
    /// against its entry.
    fn checked_block(
        &self,
        fid: &Fid,
        f: &File,
        table: &Entries,
        b: u64,
        size: u64,
    ) -> Result<Vec<u8>, ObjError> {
        let at = b << BLOCK_SHIFT;
        let n = size.saturating_sub(at).min(BLOCK as u64) as usize;
        let mut data = read_uninit_at(f, n, at)?;
        if !matches!(table, Entries::Missing) {
            let stored = self.get_entries(table, b, 1)?[0];
            let computed = entry_of(&data);
            let bad = BadBlock {
                offset: at,
                stored,
                computed,
            };
            if computed != stored && !self.retake_torn(fid, f, &[bad]) {
                return Err(self.corrupt(fid, Corruption::Block(bad)));
            }
        }
        data.resize(BLOCK, 0);
        Ok(data)
    }

    /// The entries a write of `data` at `offset` gives its blocks: a whole block's from
    /// its piece checksum, a partial block's from its other bytes (checked) and the new.
    fn new_entries(
        &self,
        fid: &Fid,
        f: &File,
        table: &Entries,
        offset: u64,
        data: &[u8],
        sums: &[u32],
    ) -> Result<Vec<u32>, ObjError> {
        let mut size = None;
        let mut out = Vec::with_capacity(sums.len());
        for (r, &sum) in pieces(offset, data.len()).zip(sums) {
            if r.len() == BLOCK {
                out.push(sum ^ ZERO_BLOCK_CRC);
                continue;
            }
            let at = offset + r.start as u64;
            let size = match size {
                Some(s) => s,
                None => *size.insert(f.metadata()?.len()),
            };
            let mut b = self.checked_block(fid, f, table, at >> BLOCK_SHIFT, size)?;
            let pos = (at % BLOCK as u64) as usize;
            b[pos..pos + r.len()].copy_from_slice(&data[r]);
            out.push(entry_of(&b));
        }
        Ok(out)
    }

    /// Gives entries to an object that has data and none yet (written while the store
    /// kept no checksums, or before it did), from the data as it is.
    fn ensure_table(&self, fid: &Fid, f: &File) -> Result<(), ObjError> {
        if !matches!(cksum::read_table(f)?, Ok(Table::Missing)) || f.metadata()?.len() == 0 {
            return Ok(());
        }
        let _all = self.ranges.lock(*fid, 0, u64::MAX);
        if !matches!(cksum::read_table(f)?, Ok(Table::Missing)) {
            return Ok(());
        }
        let size = f.metadata()?.len();
        let mut entries = Vec::with_capacity(size.div_ceil(BLOCK as u64) as usize);
        let mut at = 0;
        while at < size {
            let chunk = read_uninit_at(f, VERIFY_CHUNK, at)?;
            if chunk.is_empty() {
                break;
            }
            entries.extend(chunk.chunks(BLOCK).map(entry_of));
            at += chunk.len() as u64;
        }
        self.put_entries(fid, f, 0, &entries, None)?;
        // Expected of every object written while checksums were off: one line each
        // filled 2.5 MB of log in a small-file mix, so not at the default level.
        tracing::debug!(target: "osd", "{}: object {fid} had no checksums: computed from its data", self.name());
        Ok(())
    }

    /// Forgets an object's checksums (the store keeps none now).
    fn drop_table(&self, fid: &Fid, f: &File) -> Result<(), ObjError> {
        match cksum::read_table(f)? {
            Ok(Table::Missing) => return Ok(()),
            Ok(Table::Sidecar) | Err(_) => {
                self.sidecars.lock().remove(fid);
                match std::fs::remove_file(self.sidecar_path(fid)) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(Table::Inline(_)) => {}
        }
        cksum::remove_table(f)?;
        Ok(())
    }

    /// Sequences that have objects here, in order.
    pub fn sequences(&self) -> Result<Vec<u64>, Errno> {
        let mut v = Vec::new();
        let rd = match std::fs::read_dir(&self.root) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(v),
            Err(e) => return Err(e.into()),
        };
        for e in rd.flatten() {
            if let Some(seq) = e
                .file_name()
                .to_str()
                .and_then(|n| u64::from_str_radix(n, 16).ok())
            {
                v.push(seq);
            }
        }
        v.sort_unstable();
        Ok(v)
    }

    /// Ids of the objects with files in subdirectory `subdir` of `seq`, in order (a
    /// directory holds at most a 32nd of a sequence's objects).
    pub fn objects_in(&self, seq: u64, subdir: u32) -> Result<Vec<u32>, Errno> {
        let mut v = Vec::new();
        let rd = match std::fs::read_dir(self.seq_dir(seq).join(format!("d{subdir}"))) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(v),
            Err(e) => return Err(e.into()),
        };
        for e in rd.flatten() {
            if let Some(oid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) {
                v.push(oid);
            }
        }
        v.sort_unstable();
        Ok(v)
    }

    /// The target directory this store lives in.
    pub fn target_dir(&self) -> &Path {
        self.root.parent().unwrap_or(&self.root)
    }

    /// The filter fid of an object, if it has been written.
    pub fn filter_fid(&self, fid: &Fid) -> Result<Option<Fid>, Errno> {
        if let Obj::Empty = self.lookup_obj(fid, false)? {
            return Ok(None);
        }
        get_filter_fid(&self.object_path(fid))
    }

    /// What LFSCK's layout check needs of an object: its size if it has a file (`None`:
    /// no file, so empty if at or below LAST_ID, not created above it), and its filter fid.
    pub fn probe(&self, fid: &Fid) -> Result<(Option<u64>, Option<Fid>), Errno> {
        let p = self.probe_batch(std::slice::from_ref(fid))?;
        let p = p.first().ok_or(Errno::EIO)?;
        Ok((p.size, p.ff))
    }

    /// [`probe`](Self::probe) of many objects, with each one's owner: what LFSCK's layout
    /// check asks an OST in one batch. A missing object file is told from a lost object
    /// tree by checking the store's health, once for the whole batch.
    pub fn probe_batch(&self, fids: &[Fid]) -> Result<Vec<ObjProbe>, Errno> {
        let mut out = Vec::with_capacity(fids.len());
        let mut missing = false;
        // Each subdirectory opened once per batch: a probe then looks up only the
        // object's name. Not kept past the batch, so a tree replaced meanwhile is seen.
        let mut dirs: HashMap<(u64, u32), Option<Dir>> = HashMap::new();
        for fid in fids {
            Self::check(fid)?;
            let sub = fid.oid % OBJ_SUBDIRS;
            let dir = match dirs.entry((fid.seq, sub)) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    let path = self.seq_dir(fid.seq).join(format!("d{sub}"));
                    match Dir::open(&path) {
                        Ok(d) => e.insert(Some(d)),
                        Err(err) if err.kind() == std::io::ErrorKind::NotFound => e.insert(None),
                        Err(err) => return Err(self.health.io_error(path.display(), err)),
                    }
                }
            };
            let Some(dir) = dir.as_ref() else {
                missing = true;
                out.push(ObjProbe::default());
                continue;
            };
            let name = std::ffi::CString::new(fid.oid.to_string()).map_err(|_| Errno::EINVAL)?;
            match dir.size(&name) {
                Ok(size) => {
                    let io =
                        |e: std::io::Error| self.health.io_error(dir.path_of(&name).display(), e);
                    // One listing tells which of the two it has: most probed objects
                    // (stripes never written) have neither, and cost two calls, not four.
                    let mut names = [0u8; XATTR_LIST_MAX];
                    let listed = match dir.list_xattrs(&name, &mut names) {
                        Ok(n) => Some(n),
                        // Too many to list here: read both.
                        Err(e) if e.raw_os_error() == Some(libc::ERANGE) => None,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                            missing = true;
                            out.push(ObjProbe::default());
                            continue;
                        }
                        Err(e) => return Err(io(e)),
                    };
                    let has = |attr: &str| {
                        listed.is_none_or(|n| {
                            names[..n].split(|b| *b == 0).any(|x| x == attr.as_bytes())
                        })
                    };
                    let read =
                        |attr: &std::ffi::CStr, buf: &mut [u8]| -> Result<Option<usize>, Errno> {
                            match dir.get_xattr(&name, attr, buf) {
                                Ok(n) => Ok(Some(n)),
                                Err(e)
                                    if matches!(
                                        e.raw_os_error(),
                                        Some(libc::ENODATA | libc::ERANGE | libc::ENOENT)
                                    ) =>
                                {
                                    Ok(None)
                                }
                                Err(e) => Err(io(e)),
                            }
                        };
                    let (mut ff, mut layout, mut owner) = (None, None, None);
                    if has(FILTER_FID_XATTR) {
                        let mut v = [0u8; FILTER_FID_MAX];
                        if let Some(n) = read(FILTER_FID_XATTR_C, &mut v)?
                            && let Some((p, l)) = parse_filter(&v[..n])
                        {
                            (ff, layout) = (Some(p), l);
                        }
                    }
                    if has(OWNER_XATTR) {
                        let mut v = [0u8; 8];
                        if let Some(n) = read(OWNER_XATTR_C, &mut v)? {
                            owner = parse_owner(&v[..n]);
                        }
                    }
                    out.push(ObjProbe {
                        size: Some(size),
                        ff,
                        layout,
                        owner,
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    missing = true;
                    out.push(ObjProbe::default());
                }
                Err(e) => return Err(self.health.io_error(dir.path_of(&name).display(), e)),
            }
        }
        if missing {
            self.health.verify()?;
        }
        Ok(out)
    }

    /// The owner of an object (`None`: never given one, or no file).
    pub fn owner(&self, fid: &Fid) -> Result<Option<(u32, u32)>, Errno> {
        Self::check(fid)?;
        match get_owner(&self.object_path(fid)) {
            Err(Errno::ENOENT) => Ok(None),
            r => r,
        }
    }

    /// Gives an object the owner of its file (a chown the MDT passes on, or LFSCK's repair
    /// of an inconsistent owner). An object without a file holds no data for a quota to
    /// count: it is left alone, and `false` says so.
    pub fn set_owner(&self, fid: &Fid, uid: u32, gid: u32) -> Result<bool, Errno> {
        Self::check(fid)?;
        match set_owner(&self.object_path(fid), uid, gid) {
            Ok(()) => Ok(true),
            Err(Errno::ENOENT) => {
                self.health.verify()?;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Sets the filter fid of an object that has a file (LFSCK's repair of an unmatched
    /// pair, or a damaged one made on purpose).
    pub fn set_filter_fid(&self, fid: &Fid, parent: &Fid) -> Result<(), Errno> {
        self.set_placed_filter_fid(fid, parent, None)
    }

    /// [`set_filter_fid`](Self::set_filter_fid) with the layout of the stripe's component
    /// (`None`: none kept).
    pub fn set_placed_filter_fid(
        &self,
        fid: &Fid,
        parent: &Fid,
        layout: Option<&OstLayout>,
    ) -> Result<(), Errno> {
        Self::check(fid)?;
        set_filter(&self.object_path(fid), parent, layout)?;
        self.tagged.lock().remove(fid);
        Ok(())
    }

    /// The layout an object keeps with its filter fid, if any.
    pub fn filter_layout(&self, fid: &Fid) -> Result<Option<OstLayout>, Errno> {
        Self::check(fid)?;
        match get_filter(&self.object_path(fid)) {
            Ok(f) => Ok(f.and_then(|(_, l)| l)),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Gives a lost object its file again, empty, with its filter fid (LFSCK's `-c`),
    /// moving LAST_ID up to it if it was above.
    pub fn recreate(&self, fid: &Fid, parent: &Fid) -> Result<(), Errno> {
        Self::check(fid)?;
        if fid.oid > self.last_id(fid.seq)? {
            self.precreate(fid.seq, fid.oid)?;
        }
        self.ensure(fid)?;
        self.set_filter_fid(fid, parent)
    }

    /// Writes LAST_ID of `seq` as `last` whatever it was: LFSCK puts back a LAST_ID that
    /// fell behind the objects; fault injection makes one fall behind.
    pub fn set_last_id(&self, seq: u64, last: u32) -> Result<(), Errno> {
        let _g = self.create_lock.lock();
        let ids = self.seq_ids(seq)?;
        self.mark_new_sequence(seq, ids)?;
        self.write_id(seq, "LAST_ID", last)?;
        self.last_ids.lock().insert(seq, SeqIds { last, ..ids });
        Ok(())
    }

    /// Space of the backing file system. A store whose directory is gone is a failed
    /// target (EIO), not a missing file.
    pub fn statfs(&self) -> Result<libc::statvfs, Errno> {
        self.health.ensure()?;
        match statvfs(&self.root) {
            Ok(st) => Ok(st),
            Err(e) => {
                self.health.verify()?;
                Err(e)
            }
        }
    }
}

/// Sets an object's mtime to the current time at full resolution.
fn stamp_mtime(f: &File) -> Result<(), Errno> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    set_mtime(f, now.as_secs() as i64, i64::from(now.subsec_nanos()))
}

fn set_mtime(f: &File, sec: i64, nsec: i64) -> Result<(), Errno> {
    use std::os::fd::AsRawFd;
    let times = [
        libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        libc::timespec {
            tv_sec: sec as libc::time_t,
            tv_nsec: nsec as libc::c_long,
        },
    ];
    // SAFETY: a valid open descriptor and an array of two timespecs.
    if unsafe { libc::futimens(f.as_raw_fd(), times.as_ptr()) } != 0 {
        return Err(Errno::from(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Reads up to `n` bytes at `offset` into a fresh buffer without zeroing it first (the
/// buffers are megabytes; zeroing them showed up as a tenth of a read's cost).
fn read_uninit_at(f: &File, n: usize, offset: u64) -> std::io::Result<Vec<u8>> {
    let mut buf: Vec<u8> = Vec::with_capacity(n);
    read_append(f, &mut buf, n, offset)?;
    Ok(buf)
}

/// Reads the file's bytes from `offset` on into `buf` until it holds `upto` bytes (less at
/// the end of the file), without zeroing its spare capacity first.
fn read_append(f: &File, buf: &mut Vec<u8>, upto: usize, offset: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    buf.reserve(upto.saturating_sub(buf.len()));
    let start = buf.len();
    let mut done = start;
    while done < upto {
        let spare = &mut buf.spare_capacity_mut()[..upto - done];
        let off = i64::try_from(offset + (done - start) as u64)
            .map_err(|_| std::io::Error::from_raw_os_error(libc::EFBIG))?;
        // SAFETY: the pointer and length describe part of the vector's unused capacity,
        // which the kernel writes; only the bytes it reports written are then marked
        // initialised.
        let r = unsafe { libc::pread(f.as_raw_fd(), spare.as_mut_ptr().cast(), spare.len(), off) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if r == 0 {
            break;
        }
        done += r as usize;
        // SAFETY: `r` more bytes were just written by pread.
        unsafe { buf.set_len(done) };
    }
    Ok(())
}

/// `statvfs(3)` of a path.
pub fn statvfs(p: &Path) -> Result<libc::statvfs, Errno> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid NUL-terminated path and st a valid out-pointer.
    let r = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    if r != 0 {
        return Err(Errno::from(std::io::Error::last_os_error()));
    }
    Ok(st)
}

fn xattr_call(p: &Path) -> Result<std::ffi::CString, Errno> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)
}

/// Sets xattr `name` of `p` to `v`.
fn set_xattr(p: &Path, name: &str, v: &[u8]) -> Result<(), Errno> {
    let c = xattr_call(p)?;
    let name = std::ffi::CString::new(name).map_err(|_| Errno::EINVAL)?;
    // SAFETY: valid C strings and a buffer of the given length.
    let r = unsafe { libc::setxattr(c.as_ptr(), name.as_ptr(), v.as_ptr().cast(), v.len(), 0) };
    if r != 0 {
        return Err(Errno::from(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Xattr `name` of `p` into `buf`: its length, or `None` if `p` has none.
fn get_xattr(p: &Path, name: &str, buf: &mut [u8]) -> Result<Option<usize>, Errno> {
    let c = xattr_call(p)?;
    let name = std::ffi::CString::new(name).map_err(|_| Errno::EINVAL)?;
    // SAFETY: valid C strings and a buffer of the given length.
    let r = unsafe {
        libc::getxattr(
            c.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENODATA) => Ok(None),
            _ => Err(Errno::from(e)),
        };
    }
    Ok(Some(r as usize))
}

fn set_filter_fid(p: &Path, parent: &Fid) -> Result<(), Errno> {
    set_filter(p, parent, None)
}

/// The filter fid xattr: the parent FID, then the layout if there is one.
fn set_filter(p: &Path, parent: &Fid, layout: Option<&OstLayout>) -> Result<(), Errno> {
    let mut v = [0u8; FILTER_FID_MAX];
    v[..16].copy_from_slice(&parent.to_bytes());
    let n = match layout {
        Some(l) => {
            v[16..].copy_from_slice(&l.to_bytes());
            FILTER_FID_MAX
        }
        None => 16,
    };
    set_xattr(p, FILTER_FID_XATTR, &v[..n])
}

fn get_filter_fid(p: &Path) -> Result<Option<Fid>, Errno> {
    Ok(get_filter(p)?.map(|(f, _)| f))
}

/// The parent FID and layout of a filter fid xattr; one this store did not write (too
/// long, or not a FID) is none, as a missing one is.
fn get_filter(p: &Path) -> Result<Option<(Fid, Option<OstLayout>)>, Errno> {
    let mut v = [0u8; FILTER_FID_MAX];
    match get_xattr(p, FILTER_FID_XATTR, &mut v) {
        Ok(Some(n)) => Ok(parse_filter(&v[..n])),
        Ok(None) | Err(Errno::ERANGE) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A filter fid xattr's value, as [`get_filter`] reads it.
fn parse_filter(v: &[u8]) -> Option<(Fid, Option<OstLayout>)> {
    let parent = v.get(..v.len().min(16)).and_then(Fid::from_bytes)?;
    let layout = match v.len() {
        16 => None,
        FILTER_FID_MAX => OstLayout::from_bytes(&v[16..]),
        _ => return None,
    };
    Some((parent, layout))
}

fn set_owner(p: &Path, uid: u32, gid: u32) -> Result<(), Errno> {
    let mut v = [0u8; 8];
    v[..4].copy_from_slice(&uid.to_le_bytes());
    v[4..].copy_from_slice(&gid.to_le_bytes());
    set_xattr(p, OWNER_XATTR, &v)
}

fn get_owner(p: &Path) -> Result<Option<(u32, u32)>, Errno> {
    let mut v = [0u8; 8];
    Ok(get_xattr(p, OWNER_XATTR, &mut v)?.and_then(|n| parse_owner(&v[..n])))
}

/// An owner xattr's value; any other length is not one this store wrote: no owner it
/// can vouch for.
fn parse_owner(v: &[u8]) -> Option<(u32, u32)> {
    let v: &[u8; 8] = v.try_into().ok()?;
    let uid = u32::from_le_bytes([v[0], v[1], v[2], v[3]]);
    let gid = u32::from_le_bytes([v[4], v[5], v[6], v[7]]);
    Some((uid, gid))
}

/// Checks that the backing file system keeps user xattrs (filter fids need them).
pub fn check_xattr_support(dir: &Path) -> Result<(), String> {
    let probe = dir.join(".xattr-probe");
    crate::private_file()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&probe)
        .map_err(|e| format!("cannot write in {}: {e}", dir.display()))?;
    let res = set_filter_fid(&probe, &Fid::ROOT).and_then(|_| get_filter_fid(&probe));
    let _ = std::fs::remove_file(&probe);
    match res {
        Ok(Some(f)) if f == Fid::ROOT => Ok(()),
        Ok(_) => Err(format!("{}: user xattrs do not round-trip", dir.display())),
        Err(e) => Err(format!(
            "the file system holding {} does not support user xattrs ({e}); OSTs need them",
            dir.display()
        )),
    }
}

impl Drop for ObjStore {
    /// A stopping OST gives back every reservation.
    fn drop(&mut self) {
        let all: Vec<(Fid, u64)> = self
            .reserved
            .lock()
            .drain()
            .map(|(f, r)| (f, r.end))
            .collect();
        self.give_back(&all);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_store(dir: &Path, cfg: ObjStoreConfig) -> ObjStore {
        let health = Health::open("test-OST0000", dir).expect("health");
        ObjStore::open(dir, cfg, health).expect("open")
    }

    #[test]
    fn a_removed_target_is_an_error_and_is_not_recreated() {
        let d = tempfile::tempdir().expect("tmp");
        let dir = d.path().join("ost0");
        std::fs::create_dir(&dir).expect("mkdir");
        let s = open_store(&dir, ObjStoreConfig::default());
        let seq = 0x240000400;
        s.precreate(seq, 40).expect("precreate");
        let (cached, fresh) = (Fid::new(seq, 1, 0), Fid::new(seq, 2, 0));
        let parent = Fid::new(0x200000401, 3, 0);
        s.write(&cached, &parent, 0, b"before").expect("write");
        s.sync(&cached).expect("sync");
        std::fs::remove_dir_all(&dir).expect("rm -rf");
        // The open file still takes writes, but its sync is not acknowledged.
        assert_eq!(s.sync(&cached), Err(Errno::EIO));
        assert!(s.health().is_failed());
        // A write to an object without a file makes no directories anywhere.
        assert!(s.write(&fresh, &parent, 0, b"after").is_err());
        assert!(s.read(&fresh, 0, 10).is_err());
        assert!(!dir.exists(), "the target directory was recreated");
        assert!(
            s.health().status().contains("is gone"),
            "{}",
            s.health().status()
        );
    }

    #[test]
    fn a_missing_object_directory_is_made_but_a_missing_root_is_not() {
        let d = tempfile::tempdir().expect("tmp");
        let s = open_store(d.path(), ObjStoreConfig::default());
        let seq = 0x240000400;
        s.precreate(seq, 40).expect("precreate");
        let parent = Fid::new(0x200000401, 3, 0);
        // Below the root, directories are the store's own to make again; the objects
        // that were in one are lost.
        std::fs::remove_dir_all(s.seq_dir(seq).join("d5")).expect("rm -r");
        assert_eq!(
            s.write(&Fid::new(seq, 5, 0), &parent, 0, b"x"),
            Err(Errno::ENOENT.into())
        );
        assert_eq!(s.absent(&Fid::new(seq, 5, 0)), Ok(Absent::Lost));
        s.precreate(seq, 80).expect("precreate");
        s.write(&Fid::new(seq, 69, 0), &parent, 0, b"x")
            .expect("write");
        assert!(!s.health().is_failed());
        // The root itself is not.
        std::fs::remove_dir_all(&s.root).expect("rm O");
        assert_eq!(
            s.write(&Fid::new(seq, 6, 0), &parent, 0, b"x"),
            Err(Errno::EIO.into())
        );
        assert!(!s.root.exists());
        assert!(s.health().is_failed());
    }

    fn direct() -> ObjStoreConfig {
        ObjStoreConfig {
            direct_io: true,
            ..ObjStoreConfig::default()
        }
    }

    /// `len` bytes of a pattern in page-aligned memory (`Vec` and the aligned start).
    fn aligned(len: usize, seed: u8) -> (Vec<u8>, usize) {
        let mut v = vec![0u8; len + DIRECT_ALIGN];
        let pad = v.as_ptr().align_offset(DIRECT_ALIGN);
        for (i, b) in v[pad..pad + len].iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(7) ^ seed;
        }
        (v, pad)
    }

    #[test]
    fn objects_and_their_directories_are_owner_only() {
        let d = tempfile::tempdir().expect("tmp");
        let target = d.path().join("ost0");
        crate::create_private_dir(&target).expect("mkdir");
        let health = crate::Health::open("fs-OST0000", &target).expect("health");
        let s = ObjStore::open(&target, ObjStoreConfig::default(), health).expect("open");
        let seq = 0x100010000;
        s.precreate(seq, 40).expect("precreate");
        let parent = Fid::new(0x200000401, 3, 0);
        for oid in [1, 2, 33] {
            s.write(&Fid::new(seq, oid, 0), &parent, 0, b"data")
                .expect("write");
        }
        s.ensure(&Fid::new(0x200000401, 7, 0)).expect("ensure");
        let bad = crate::not_private(&target.join("O"));
        assert!(bad.is_empty(), "readable by others: {bad:?}");
    }

    #[test]
    fn direct_and_buffered_writes_agree_and_reserved_blocks_come_back() {
        let d = tempfile::tempdir().expect("tmp");
        check_xattr_support(d.path()).expect("xattrs");
        let s = open_store(d.path(), direct());
        let seq = 0x240000400;
        s.precreate(seq, 10).expect("precreate");
        let o = Fid::new(seq, 1, 0);
        let parent = Fid::new(0x200000401, 3, 0);
        let chunk = 4 << 20;
        // A stream of aligned 4 MiB writes to 24 MiB: direct where the file system allows.
        let mut want = Vec::new();
        for i in 0..6u8 {
            let (v, pad) = aligned(chunk, i);
            let piece = &v[pad..pad + chunk];
            // (Unless the file system refused O_DIRECT, which turns it off.)
            assert_eq!(
                s.direct_fits(u64::from(i) * chunk as u64, piece),
                s.direct_io()
            );
            s.write(&o, &parent, u64::from(i) * chunk as u64, piece)
                .expect("write");
            want.extend_from_slice(piece);
        }
        // Buffered writes over direct ones and the other way round read back as written.
        s.write(&o, &parent, 100, b"buffered").expect("small write");
        want[100..108].copy_from_slice(b"buffered");
        let (v, pad) = aligned(chunk, 99);
        s.write(&o, &parent, 0, &v[pad..pad + chunk])
            .expect("direct over");
        want[..chunk].copy_from_slice(&v[pad..pad + chunk]);
        // Unaligned memory or offset goes through the page cache.
        assert!(!s.direct_fits(1, &v[pad..pad + chunk]));
        assert!(!s.direct_fits(0, &v[pad + 1..pad + 1 + DIRECT_MIN]));
        let got = s.read(&o, 0, want.len()).expect("read");
        assert!(got == want, "contents differ");
        if s.direct_io() {
            // Past 8 MiB the stream reserved blocks ahead; a getattr (the last close
            // asks one) gives back what lies past the data.
            use std::os::unix::fs::MetadataExt;
            let before = std::fs::metadata(s.object_path(&o)).expect("stat");
            let (size, blocks, mtime) = s.getattr(&o).expect("attr");
            assert_eq!(size, want.len() as u64);
            // The data-change time is the last write's, not the give-back's.
            assert_eq!(
                (mtime.sec, i64::from(mtime.nsec)),
                (before.mtime(), before.mtime_nsec())
            );
            assert!(
                blocks * 512 < size + (1 << 20),
                "{blocks} blocks for {size} bytes"
            );
            assert!(s.reserved.lock().is_empty());
        }
        // Turned off, the same writes go through the page cache.
        s.set_direct_io(false);
        assert!(!s.direct_fits(0, &v[pad..pad + chunk]));
    }

    #[test]
    fn writes_landing_out_of_order_give_back_every_reserved_block() {
        let d = tempfile::tempdir().expect("tmp");
        check_xattr_support(d.path()).expect("xattrs");
        let s = open_store(d.path(), direct());
        if !s.direct_io() {
            return;
        }
        let seq = 0x240000400;
        s.precreate(seq, 10).expect("precreate");
        let o = Fid::new(seq, 1, 0);
        let parent = Fid::new(0x200000401, 3, 0);
        let mib = 1usize << 20;
        let (v, pad) = aligned(mib, 3);
        let piece = &v[pad..pad + mib];
        // The 32 MiB chunk's write lands before the 16 MiB chunk's, as two RPCs in flight
        // together may: the later reservation (to 64 MiB) must still be given back.
        for at in [0u64, 32, 16, 8, 33] {
            s.write(&o, &parent, at << 20, piece).expect("write");
        }
        assert_eq!(s.reserved.lock().get(&o).map(|r| r.end), Some(64 << 20));
        s.sync(&o).expect("sync");
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(s.object_path(&o)).expect("stat");
        assert_eq!(m.len(), 34 << 20);
        assert!(
            m.blocks() * 512 <= m.len() + (1 << 20),
            "{} bytes allocated for {}",
            m.blocks() * 512,
            m.len()
        );
    }

    #[test]
    fn a_reservation_is_given_back_when_the_stream_goes_idle() {
        let d = tempfile::tempdir().expect("tmp");
        check_xattr_support(d.path()).expect("xattrs");
        let s = open_store(d.path(), direct());
        if !s.direct_io() {
            return;
        }
        let seq = 0x240000400;
        s.precreate(seq, 10).expect("precreate");
        let (o, other) = (Fid::new(seq, 1, 0), Fid::new(seq, 2, 0));
        let parent = Fid::new(0x200000401, 3, 0);
        let chunk = 4 << 20;
        let (v, pad) = aligned(chunk, 1);
        for i in 0..3u64 {
            s.write(&o, &parent, i * chunk as u64, &v[pad..pad + chunk])
                .expect("write");
        }
        use std::os::unix::fs::MetadataExt;
        let blocks = || std::fs::metadata(s.object_path(&o)).expect("stat").blocks() * 512;
        let size = 3 * chunk as u64;
        if blocks() <= size + (1 << 20) {
            // The file system did not reserve (fallocate unsupported): nothing to give back.
            return;
        }
        std::thread::sleep(RESERVE_IDLE + Duration::from_millis(100));
        // Any later write gives back what idle streams did not use.
        s.write(&other, &parent, 0, b"x").expect("write");
        assert!(blocks() < size + (1 << 20), "{} bytes allocated", blocks());
        let got = s.read(&o, 0, size as usize).expect("read");
        assert!(got.chunks(chunk).all(|c| c == &v[pad..pad + chunk]));
    }

    /// The OST's release timer sleeps while nothing is reserved and wakes when the
    /// first reservation made goes idle.
    #[tokio::test]
    async fn the_release_timer_waits_for_a_reservation_and_then_its_idle_time() {
        let d = tempfile::tempdir().expect("tmp");
        check_xattr_support(d.path()).expect("xattrs");
        let s = Arc::new(open_store(d.path(), ObjStoreConfig::default()));
        let waiting = tokio::spawn({
            let s = s.clone();
            async move { s.next_idle_release().await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!waiting.is_finished(), "due with nothing reserved");
        let made = Instant::now();
        s.reserved.lock().insert(
            Fid::new(0x240000400, 1, 0),
            Reserved {
                end: 1 << 20,
                last: made,
            },
        );
        s.reserved_made.notify_one();
        let due = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the timer did not wake")
            .expect("join");
        assert_eq!(due, made + RESERVE_IDLE);
    }

    /// Lustre's `lfsck_verify_pfid`: the first write gives an object its file and layout;
    /// a later write naming another file, stripe or layout changes nothing and is
    /// refused with EINPROGRESS; the MDT's repair moves the object, and its file's writes
    /// go on. Turned off, a write names the object's file as it likes.
    #[test]
    fn a_write_naming_another_file_than_the_objects_is_refused() {
        let d = tempfile::tempdir().expect("tmp");
        check_xattr_support(d.path()).expect("xattrs");
        let s = open_store(d.path(), ObjStoreConfig::default());
        let seq = 0x240000400;
        s.precreate(seq, 10).expect("precreate");
        let o = Fid::new(seq, 3, 0);
        let file = Fid::new(0x200000401, 3, 1);
        let other = Fid::new(0x200000401, 9, 1);
        let shape = |count| OstLayout {
            stripe_size: 1 << 20,
            stripe_count: count,
            comp_start: 0,
            comp_end: nacre_core::layout::EOF,
            comp_id: 0,
        };
        let write = |parent: &Fid, layout, data: &[u8]| {
            s.write_placed(&o, parent, layout, 0, data, None, false)
        };
        assert_eq!(write(&file, Some(shape(2)), b"mine"), Ok(4));
        assert_eq!(
            write(&file, None, b"more"),
            Ok(4),
            "no layout: the kept one"
        );
        let refused = Err(ObjError::Errno(Errno::EINPROGRESS));
        assert_eq!(write(&other, Some(shape(2)), b"evil"), refused);
        assert_eq!(write(&other, None, b"evil"), refused);
        assert_eq!(
            write(&file.with_ver(0), None, b"evil"),
            refused,
            "another stripe"
        );
        assert_eq!(
            write(&file, Some(shape(4)), b"evil"),
            refused,
            "another layout"
        );
        assert_eq!(s.pfid_refused(), 4);
        assert_eq!(s.read(&o, 0, 16).expect("read"), b"more");
        assert_eq!(s.filter_fid(&o), Ok(Some(file)));
        assert_eq!(s.filter_layout(&o), Ok(Some(shape(2))));
        // The MDT moves it (a layout swap): the new file writes, the old one is refused.
        s.set_placed_filter_fid(&o, &other, Some(&shape(2)))
            .expect("moved");
        assert_eq!(write(&other, Some(shape(2)), b"theirs"), Ok(6));
        assert_eq!(write(&file, Some(shape(2)), b"old"), refused);
        s.set_verify_pfid(false);
        assert_eq!(write(&file, Some(shape(2)), b"old"), Ok(3));
        assert_eq!(s.filter_fid(&o), Ok(Some(file)));
    }

    #[test]
    fn precreate_write_read_punch_destroy() {
        let d = tempfile::tempdir().expect("tmp");
        check_xattr_support(d.path()).expect("xattrs");
        let s = open_store(d.path(), ObjStoreConfig::default());
        let seq = 0x240000400;
        assert_eq!(s.last_id(seq), Ok(0));
        assert_eq!(s.precreate(seq, 40), Ok(40));
        assert_eq!(s.precreate(seq, 10), Ok(40));
        let o = Fid::new(seq, 7, 0);
        let parent = Fid::new(0x200000401, 3, 1);
        s.write(&o, &parent, 1 << 20, b"hello").expect("write");
        assert_eq!(s.filter_fid(&o), Ok(Some(parent)));
        assert_eq!(s.read(&o, 1 << 20, 100).expect("read"), b"hello");
        assert_eq!(s.read(&o, 0, 4).expect("hole"), vec![0; 4]);
        assert_eq!(s.getattr(&o).expect("attr").0, (1 << 20) + 5);
        s.punch(&o, 3).expect("punch");
        assert_eq!(s.read(&o, 0, 100).expect("read"), vec![0; 3]);
        s.destroy(&o).expect("destroy");
        assert!(!s.object_path(&o).exists());
        // Below LAST_ID and without a file: destroyed (or lost), not a hole; a write
        // that comes after the destroy is refused, not turned into an orphan.
        assert_eq!(s.read(&o, 0, 1), Err(Errno::ENOENT.into()));
        assert_eq!(s.write(&o, &parent, 0, b"late"), Err(Errno::ENOENT.into()));
        assert!(!s.object_path(&o).exists());
        assert_eq!(s.absent(&o), Ok(Absent::Lost));
        // Every precreated object has its empty file.
        let fresh = Fid::new(seq, 8, 0);
        assert!(s.object_path(&fresh).exists());
        assert_eq!(s.getattr(&fresh).expect("attr").0, 0);
        assert_eq!(s.read(&fresh, 0, 10), Ok(Vec::new()));
        assert_eq!(s.filter_fid(&fresh), Ok(None));
        s.punch(&fresh, 4096).expect("extend");
        assert_eq!(s.getattr(&fresh).expect("attr").0, 4096);
        assert_eq!(
            s.write(&Fid::new(seq, 99, 0), &parent, 0, b"x"),
            Err(Errno::ENOENT.into())
        );
        assert_eq!(
            s.read(&Fid::new(seq, 0, 0), 0, 1),
            Err(Errno::EINVAL.into())
        );
    }

    /// An MDT's orphan cleanup: objects from its next id up to LAST_ID that clients wrote
    /// (for files a power cut took back) are fresh precreated objects again; the ones
    /// below, which files the MDT kept own, are untouched, and LAST_ID stays.
    #[test]
    fn orphans_above_the_mdts_next_id_are_reset_to_fresh_objects() {
        let d = tempfile::tempdir().expect("tmp");
        check_xattr_support(d.path()).expect("xattrs");
        let s = open_store(d.path(), ObjStoreConfig::default());
        let seq = 0x240000400;
        s.precreate(seq, 40).expect("precreate");
        let parent = Fid::new(0x200000401, 3, 0);
        let kept = Fid::new(seq, 9, 0);
        let orphan = Fid::new(seq, 12, 0);
        let owned = Fid::new(seq, 30, 0);
        s.write(&kept, &parent, 0, b"kept").expect("write");
        s.write(&orphan, &parent, 4096, b"lost file")
            .expect("write");
        assert!(s.set_owner(&owned, 500, 500).expect("owner"));
        assert_eq!(s.clean_orphans(seq, 10), Ok(2));
        assert_eq!(s.read(&kept, 0, 10), Ok(b"kept".to_vec()));
        for o in [orphan, owned] {
            assert_eq!(s.probe(&o), Ok((Some(0), None)), "{o}");
            assert!(
                s.probe_batch(&[o]).expect("probe")[0].never_written(),
                "{o}"
            );
            assert_eq!(s.read(&o, 0, 10), Ok(Vec::new()));
        }
        assert_eq!(s.last_id(seq), Ok(40));
        // The next file that gets it writes it as its own.
        let other = Fid::new(0x200000401, 4, 0);
        s.write(&orphan, &other, 0, b"new").expect("write");
        assert_eq!(s.filter_fid(&orphan), Ok(Some(other)));
        // A second cleanup finds nothing more above its start.
        assert_eq!(s.clean_orphans(seq, 13), Ok(0));
        assert_eq!(s.clean_orphans(seq, 41), Ok(0));
    }

    #[test]
    fn a_sequence_made_by_a_lazy_store_keeps_its_objects_empty() {
        let d = tempfile::tempdir().expect("tmp");
        let seq = 0x240000400;
        {
            let s = open_store(d.path(), ObjStoreConfig::default());
            s.precreate(seq, 8).expect("precreate");
        }
        // As a store that made files lazily left it: LAST_ID 20, no LAZY_LAST, and
        // object files only for what was written.
        let sd = d.path().join("O").join(format!("{seq:x}"));
        std::fs::write(sd.join("LAST_ID"), "20\n").expect("LAST_ID");
        std::fs::remove_file(sd.join(LAZY_LAST)).expect("rm LAZY_LAST");
        for oid in 1..=8u32 {
            let _ = std::fs::remove_file(
                sd.join(format!("d{}", oid % OBJ_SUBDIRS))
                    .join(oid.to_string()),
            );
        }
        let s = open_store(d.path(), ObjStoreConfig::default());
        let lazy = Fid::new(seq, 3, 0);
        assert_eq!(s.absent(&lazy), Ok(Absent::Empty));
        assert_eq!(s.read(&lazy, 0, 10), Ok(Vec::new()));
        assert_eq!(
            std::fs::read_to_string(sd.join(LAZY_LAST)).expect("LAZY_LAST"),
            "20\n"
        );
        let parent = Fid::new(0x200000401, 3, 0);
        s.write(&lazy, &parent, 0, b"first").expect("write");
        // New objects get their files, and only they can be lost.
        assert_eq!(s.precreate(seq, 40), Ok(40));
        let eager = Fid::new(seq, 30, 0);
        assert!(s.object_path(&eager).exists());
        std::fs::remove_file(s.object_path(&eager)).expect("rm");
        assert_eq!(s.absent(&eager), Ok(Absent::Lost));
        drop(s);
        let s = open_store(d.path(), ObjStoreConfig::default());
        assert_eq!(s.absent(&Fid::new(seq, 12, 0)), Ok(Absent::Empty));
        assert_eq!(s.absent(&eager), Ok(Absent::Lost));
        assert_eq!(s.absent(&Fid::new(seq, 41, 0)), Ok(Absent::NotCreated));
        assert_eq!(s.read(&lazy, 0, 10), Ok(b"first".to_vec()));
    }

    /// LFSCK putting back the LAST_ID of a sequence whose directory was lost must not
    /// make it read as a lazy store's, where lost objects would be empty.
    #[test]
    fn a_last_id_put_back_on_a_new_sequence_keeps_lost_objects_lost() {
        let d = tempfile::tempdir().expect("tmp");
        let seq = 0x240000400;
        {
            let s = open_store(d.path(), ObjStoreConfig::default());
            s.set_last_id(seq, 30).expect("set LAST_ID");
        }
        let s = open_store(d.path(), ObjStoreConfig::default());
        assert_eq!(s.absent(&Fid::new(seq, 12, 0)), Ok(Absent::Lost));
        assert_eq!(
            s.read(&Fid::new(seq, 12, 0), 0, 1),
            Err(Errno::ENOENT.into())
        );
    }

    #[test]
    fn fallocate_allocates_punches_and_zeroes() {
        let d = tempfile::tempdir().expect("tmp");
        let s = open_store(d.path(), ObjStoreConfig::default());
        let seq = 0x240000400;
        s.precreate(seq, 4).expect("precreate");
        let o = Fid::new(seq, 1, 0);
        let parent = Fid::new(0x200000401, 3, 0);
        s.fallocate(&o, &parent, 0, 100_000, 0).expect("allocate");
        assert_eq!(s.getattr(&o).expect("attr").0, 100_000);
        assert_eq!(s.filter_fid(&o), Ok(Some(parent)));
        s.fallocate(&o, &parent, 200_000, 4096, libc::FALLOC_FL_KEEP_SIZE)
            .expect("keep size");
        assert_eq!(s.getattr(&o).expect("attr").0, 100_000);
        s.write(&o, &parent, 0, &[7u8; 100_000]).expect("write");
        let punch = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        s.fallocate(&o, &parent, 10, 20, punch).expect("punch");
        let data = s.read(&o, 0, 40).expect("read");
        assert_eq!(&data[..10], &[7; 10]);
        assert_eq!(&data[10..30], &[0; 20]);
        assert_eq!(&data[30..], &[7; 10]);
        s.fallocate(&o, &parent, 99_990, 20, libc::FALLOC_FL_ZERO_RANGE)
            .expect("zero");
        assert_eq!(s.getattr(&o).expect("attr").0, 100_010);
        assert_eq!(
            s.read(&o, 99_980, 100).expect("read"),
            [&[7u8; 10][..], &[0; 20]].concat()
        );
        assert_eq!(s.fallocate(&o, &parent, 0, 0, 0), Err(Errno::EINVAL.into()));
        // More than the disk holds is refused before anything is allocated.
        let before = s.getattr(&o).expect("attr");
        assert_eq!(
            s.fallocate(&o, &parent, 0, 1 << 60, 0),
            Err(Errno::ENOSPC.into())
        );
        assert_eq!(s.getattr(&o).expect("attr"), before);
        assert_eq!(
            s.fallocate(&o, &parent, 0, 1, 0x40),
            Err(Errno(libc::EOPNOTSUPP).into())
        );
        assert_eq!(
            s.fallocate(&Fid::new(seq, 99, 0), &parent, 0, 1, 0),
            Err(Errno::ENOENT.into())
        );
    }

    fn cksum_store(d: &Path) -> ObjStore {
        check_xattr_support(d).expect("xattrs");
        open_store(d, direct())
    }

    /// A checksummed store in `d` with objects 1 to `n` of a sequence precreated: the
    /// store, the sequence, and a file FID to write its objects for.
    fn precreated_cksum_store(d: &Path, n: u32) -> (ObjStore, u64, Fid) {
        let s = cksum_store(d);
        let seq = 0x240000400;
        s.precreate(seq, n).expect("precreate");
        (s, seq, Fid::new(0x200000401, 3, 0))
    }

    fn bytes(len: usize, seed: u64) -> Vec<u8> {
        use rand::{Rng, SeedableRng};
        let mut r = rand::rngs::StdRng::seed_from_u64(seed);
        (0..len).map(|_| r.r#gen()).collect()
    }

    fn corrupt_at(r: Result<impl std::fmt::Debug, ObjError>) -> u64 {
        match r {
            Err(ObjError::Corrupt {
                what: Corruption::Block(b),
                ..
            }) => b.offset,
            other => panic!("expected a bad block, got {other:?}"),
        }
    }

    #[test]
    fn a_flipped_bit_fails_the_read_and_the_check_and_names_its_block() {
        use rand::SeedableRng;
        let d = tempfile::tempdir().expect("tmp");
        let (s, seq, parent) = precreated_cksum_store(d.path(), 100);
        // Inline (small) and checksum-file (past 1 MiB) objects, unaligned ends.
        let sizes = [1usize, 100, 4096, 5000, 70_000, (1 << 20) + 1, 3 << 20];
        let mut want = HashMap::new();
        for (i, n) in sizes.iter().enumerate() {
            let o = Fid::new(seq, i as u32 + 1, 0);
            let data = bytes(*n, i as u64);
            s.write(&o, &parent, 0, &data).expect("write");
            want.insert(o, data);
        }
        assert!(s.sidecar_path(&Fid::new(seq, 7, 0)).exists());
        assert!(!s.sidecar_path(&Fid::new(seq, 5, 0)).exists());
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let flips = crate::inject::flip_random(d.path(), sizes.len(), &mut rng).expect("flip");
        assert_eq!(flips.len(), sizes.len());
        for f in &flips {
            let data = &want[&f.obj];
            let block = f.offset & !(BLOCK as u64 - 1);
            // Reading the whole object, or just the flipped byte, fails at its block.
            assert_eq!(corrupt_at(s.read(&f.obj, 0, data.len())), block, "{f:?}");
            assert_eq!(corrupt_at(s.read(&f.obj, f.offset, 1)), block, "{f:?}");
            let c = s.verify_range(&f.obj, 0, data.len()).expect("verify");
            assert_eq!(c.bad_count, 1, "{f:?}");
            assert_eq!(c.bad[0].offset, block);
            assert_eq!(c.checked, data.len() as u64);
            // The blocks around it still read.
            if block >= BLOCK as u64 {
                let got = s.read(&f.obj, 0, block as usize).expect("before");
                assert!(got == data[..block as usize]);
            }
        }
        assert_eq!(s.checksum_errors(), 2 * sizes.len() as u64);
    }

    /// With [`ReadVerify::Reader`] sums, whole blocks go out with their stored checksums
    /// unchecked (one crc pass per read, the reader's), so a flipped bit in one is the
    /// reader's to find, against those checksums; a partial piece is still computed and
    /// checked here.
    #[test]
    fn stored_sums_leave_whole_blocks_to_the_reader_and_check_partial_ones() {
        use nacre_core::cksum::verify_bulk;
        let d = tempfile::tempdir().expect("tmp");
        let (s, seq, parent) = precreated_cksum_store(d.path(), 10);
        let o = Fid::new(seq, 1, 0);
        let n = (1 << 20) + 3 * BLOCK + 100;
        let data = bytes(n, 1);
        s.write(&o, &parent, 0, &data).expect("write");
        // Good data: the stored sums are the computed ones.
        for (off, len) in [(0, n), (100, 3 * BLOCK), (BLOCK, 2 * BLOCK), (n - 50, 50)] {
            let stored = s
                .read_checked(
                    &o,
                    off as u64,
                    len,
                    Some(ReadVerify::Reader),
                    TornBlocks::Take,
                )
                .expect("read");
            let computed = s
                .read_checked(
                    &o,
                    off as u64,
                    len,
                    Some(ReadVerify::Target),
                    TornBlocks::Take,
                )
                .expect("read");
            assert_eq!(stored.data(), &data[off..off + len]);
            assert_eq!(stored.sums, computed.sums, "at {off} for {len}");
            verify_bulk(
                off as u64,
                stored.data(),
                stored.sums.as_deref().expect("sums"),
            )
            .expect("good data checks");
        }
        // A flipped bit in block 2.
        let at = 2 * BLOCK as u64 + 17;
        crate::inject::flip_bit(&s.object_path(&o), at, 4).expect("flip");
        // Whole in the read: out unchecked, and the reader's check finds it.
        let out = s
            .read_checked(&o, 0, 4 * BLOCK, Some(ReadVerify::Reader), TornBlocks::Take)
            .expect("unchecked here");
        let sums = out.sums.as_deref().expect("sums");
        match verify_bulk(0, out.data(), sums) {
            Err(nacre_core::cksum::BulkMismatch::Piece { at: bad, .. }) => {
                assert_eq!(bad, 2 * BLOCK as u64)
            }
            other => panic!("expected a bad piece, got {other:?}"),
        }
        assert_eq!(s.checksum_errors(), 0);
        // Asked to check (the reader's second question), the OST finds it.
        assert_eq!(
            corrupt_at(s.read_checked(
                &o,
                0,
                4 * BLOCK,
                Some(ReadVerify::Target),
                TornBlocks::Take
            )),
            2 * BLOCK as u64
        );
        // Partial in the read: checked here even with stored sums.
        assert_eq!(
            corrupt_at(s.read_checked(&o, at, 10, Some(ReadVerify::Reader), TornBlocks::Take)),
            2 * BLOCK as u64
        );
        assert_eq!(s.checksum_errors(), 2);
    }

    /// How far an object's mtime may lag `SystemTime::now()` read before its write: file
    /// times come from the kernel's coarse clock, up to a tick (4 ms at 250 Hz) behind. A
    /// window opened at `now()` missed a write made just after, one run in ~15.
    const FILE_CLOCK_LAG: std::time::Duration = std::time::Duration::from_millis(10);

    /// After a crash, a block of an object whose data changed after the last commit's
    /// sync began may not match its entry (the crash kept one of two unsynced writes):
    /// it reads as the disk has it, and its entry follows its data, for reads, scrub's
    /// check and a partial write alike. An older object's mismatch stays corruption, and
    /// with no window (a clean start) so does every mismatch.
    #[test]
    fn a_block_a_crash_tore_reads_as_it_is_and_older_mismatches_stay_corrupt() {
        use std::time::{Duration, SystemTime, UNIX_EPOCH};
        let d = tempfile::tempdir().expect("tmp");
        let (s, seq, parent) = precreated_cksum_store(d.path(), 10);
        let (old, torn, big) = (
            Fid::new(seq, 1, 0),
            Fid::new(seq, 2, 0),
            Fid::new(seq, 3, 0),
        );
        let data = bytes(3 * BLOCK + 10, 1);
        s.write(&old, &parent, 0, &data).expect("write");
        std::thread::sleep(Duration::from_millis(20));
        let synced_from = SystemTime::now() - FILE_CLOCK_LAG;
        s.write(&torn, &parent, 0, &data).expect("write");
        // Past the inline entries: a checksum file.
        let big_data = bytes((cksum::INLINE_BLOCKS as usize + 3) * BLOCK, 2);
        s.write(&big, &parent, 0, &big_data).expect("write");
        assert!(s.sidecar_path(&big).exists());
        // Bytes that changed without their entries (the flip keeps the mtime).
        for o in [&old, &torn, &big] {
            crate::inject::flip_bit(&s.object_path(o), BLOCK as u64 + 7, 3).expect("flip");
        }
        s.set_torn_window(synced_from, SystemTime::now() + Duration::from_secs(1));
        assert_eq!(corrupt_at(s.read(&old, 0, data.len())), BLOCK as u64);
        // A reader with another copy has it reported instead, not counted as corruption
        // and not taken.
        let errors = s.checksum_errors();
        let report = s.read_checked(&torn, 0, data.len(), None, TornBlocks::Report);
        assert_eq!(corrupt_at(report.map(|_| ())), BLOCK as u64);
        assert_eq!((s.torn_reported(), s.torn_retaken()), (1, 0));
        assert_eq!(s.checksum_errors(), errors);
        let mut want = data.clone();
        want[BLOCK + 7] ^= 1 << 3;
        assert!(s.read(&torn, 0, data.len()).expect("torn") == want);
        assert_eq!(s.torn_retaken(), 1);
        assert!(s.read(&torn, 0, data.len()).expect("again") == want);
        assert_eq!(s.torn_retaken(), 1, "taken once");
        let c = s.verify_range(&big, 0, big_data.len()).expect("verify");
        assert_eq!((c.bad_count, s.torn_retaken()), (0, 2));
        crate::inject::flip_bit(&s.object_path(&torn), 2 * BLOCK as u64 + 5, 1).expect("flip");
        s.write(&torn, &parent, 2 * BLOCK as u64 + 100, b"x")
            .expect("a partial write of a torn block");
        assert_eq!(s.torn_retaken(), 3);
        // No window: corruption again.
        s.set_torn_window(UNIX_EPOCH, UNIX_EPOCH);
        crate::inject::flip_bit(&s.object_path(&torn), 7, 0).expect("flip");
        assert_eq!(corrupt_at(s.read(&torn, 0, 10)), 0);
    }

    /// Scrub, like a reader with another copy, leaves a torn block of a mirrored file's
    /// object bad for a read to rewrite from that copy; a plain file's is taken as kept.
    #[test]
    fn scrub_reports_a_torn_block_of_a_mirrored_file_and_takes_a_plain_files() {
        use std::time::{Duration, SystemTime};
        let d = tempfile::tempdir().expect("tmp");
        let (s, seq, parent) = precreated_cksum_store(d.path(), 10);
        let (plain, mirrored) = (Fid::new(seq, 1, 0), Fid::new(seq, 2, 0));
        let layout = |mirror: u32| OstLayout {
            stripe_size: 1 << 20,
            stripe_count: 1,
            comp_start: 0,
            comp_end: u64::MAX,
            comp_id: nacre_core::layout::pflr_id(mirror, 1),
        };
        let data = bytes(3 * BLOCK + 10, 1);
        let synced_from = SystemTime::now() - FILE_CLOCK_LAG;
        for (o, mirror) in [(&plain, 0), (&mirrored, 2)] {
            s.write_placed(o, &parent, Some(layout(mirror)), 0, &data, None, false)
                .expect("write");
            crate::inject::flip_bit(&s.object_path(o), BLOCK as u64 + 7, 3).expect("flip");
        }
        s.set_torn_window(synced_from, SystemTime::now() + Duration::from_secs(1));
        let c = s.verify_range(&mirrored, 0, data.len()).expect("verify");
        assert_eq!((c.bad_count, s.torn_retaken()), (1, 0), "{c:?}");
        assert_eq!(c.bad[0].offset, BLOCK as u64);
        let c = s.verify_range(&plain, 0, data.len()).expect("verify");
        assert_eq!((c.bad_count, s.torn_retaken()), (0, 1), "{c:?}");
    }

    #[test]
    fn a_change_to_a_bad_block_fails_and_a_whole_block_rewrite_repairs_it() {
        let d = tempfile::tempdir().expect("tmp");
        let s = cksum_store(d.path());
        let seq = 0x240000400;
        s.precreate(seq, 10).expect("precreate");
        let (o, parent) = (Fid::new(seq, 1, 0), Fid::new(0x200000401, 3, 0));
        let data = bytes(3 * BLOCK + 10, 1);
        s.write(&o, &parent, 0, &data).expect("write");
        crate::inject::flip_bit(&s.object_path(&o), BLOCK as u64 + 7, 3).expect("flip");
        // Anything that must keep part of the block checks it first.
        corrupt_at(s.write(&o, &parent, BLOCK as u64 + 100, b"x"));
        corrupt_at(s.punch(&o, BLOCK as u64 + 50));
        let punch = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        corrupt_at(s.fallocate(&o, &parent, BLOCK as u64 + 1, 10, punch));
        // Rewriting the whole block (what a mirror's repair does) needs none of it.
        s.write(&o, &parent, BLOCK as u64, &data[BLOCK..2 * BLOCK])
            .expect("repair");
        assert!(s.read(&o, 0, data.len()).expect("read") == data);
        let c = s.verify_range(&o, 0, data.len()).expect("verify");
        assert_eq!((c.bad_count, c.checked), (0, data.len() as u64));
    }

    /// A power cut that kept a block's entry but not its data: a write to part of it is
    /// refused, the same write replayed is taken (the replays rewrite what the cut lost),
    /// and the block reads back with an entry that matches.
    #[test]
    fn a_replayed_write_to_part_of_a_block_the_cut_left_inconsistent_is_taken() {
        let d = tempfile::tempdir().expect("tmp");
        let s = cksum_store(d.path());
        let seq = 0x240000400;
        s.precreate(seq, 10).expect("precreate");
        let (o, parent) = (Fid::new(seq, 1, 0), Fid::new(0x200000401, 3, 0));
        let data = bytes(2 * BLOCK + 10, 1);
        s.write(&o, &parent, 0, &data).expect("write");
        // The block's bytes as the cut left them: not those its entry was computed from.
        crate::inject::flip_bit(&s.object_path(&o), BLOCK as u64 + 7, 3).expect("flip");
        corrupt_at(s.write(&o, &parent, BLOCK as u64 + 100, b"x"));
        let n = s
            .write_replayed(&o, &parent, None, BLOCK as u64 + 100, b"x", None, false)
            .expect("replayed");
        assert_eq!(n, 1);
        let got = s.read(&o, 0, data.len()).expect("the block reads again");
        assert_eq!(got[BLOCK + 100], b'x');
        let c = s.verify_range(&o, 0, data.len()).expect("verify");
        assert_eq!(c.bad_count, 0);
    }

    #[test]
    fn damaged_or_missing_checksums_are_errors_not_passes() {
        let d = tempfile::tempdir().expect("tmp");
        let (s, seq, parent) = precreated_cksum_store(d.path(), 10);
        let (small, big) = (Fid::new(seq, 1, 0), Fid::new(seq, 2, 0));
        s.write(&small, &parent, 0, &bytes(9000, 1)).expect("write");
        s.write(&big, &parent, 0, &bytes(2 << 20, 2))
            .expect("write");
        let table = |r: Result<Vec<u8>, ObjError>| {
            assert!(
                matches!(
                    r,
                    Err(ObjError::Corrupt {
                        what: Corruption::Table(_),
                        ..
                    })
                ),
                "{:?}",
                r.map(|v| v.len())
            )
        };
        // A checksum file gone: the object cannot be trusted.
        std::fs::remove_file(s.sidecar_path(&big)).expect("rm");
        s.sidecars.lock().remove(&big);
        table(s.read(&big, 0, 10));
        assert!(
            s.verify_range(&big, 0, 10)
                .expect("verify")
                .bad_table
                .is_some()
        );
        // A damaged header.
        let f = File::open(s.object_path(&small)).expect("open");
        let mut v = [0u8; 64];
        let name = std::ffi::CString::new(cksum::CKSUM_XATTR).expect("name");
        // SAFETY: valid descriptor, C string and buffer.
        let n = unsafe {
            libc::fgetxattr(
                std::os::fd::AsRawFd::as_raw_fd(&f),
                name.as_ptr(),
                v.as_mut_ptr().cast(),
                v.len(),
            )
        };
        assert!(n > 8, "no inline table");
        v[0] ^= 1;
        set_xattr_raw(&f, &v[..n as usize]);
        table(s.read(&small, 0, 10));
        // Destroy takes the checksum file too.
        s.write(&Fid::new(seq, 3, 0), &parent, 2 << 20, b"far")
            .expect("write");
        assert!(s.sidecar_path(&Fid::new(seq, 3, 0)).exists());
        s.destroy(&Fid::new(seq, 3, 0)).expect("destroy");
        assert!(!s.sidecar_path(&Fid::new(seq, 3, 0)).exists());
    }

    fn set_xattr_raw(f: &File, v: &[u8]) {
        let name = std::ffi::CString::new(cksum::CKSUM_XATTR).expect("name");
        // SAFETY: valid descriptor, C string and buffer.
        let r = unsafe {
            libc::fsetxattr(
                std::os::fd::AsRawFd::as_raw_fd(f),
                name.as_ptr(),
                v.as_ptr().cast(),
                v.len(),
                0,
            )
        };
        assert_eq!(r, 0);
    }

    #[test]
    fn objects_written_without_checksums_get_them_at_their_next_change() {
        let d = tempfile::tempdir().expect("tmp");
        let s = cksum_store(d.path());
        s.set_checksums(false);
        let seq = 0x240000400;
        s.precreate(seq, 10).expect("precreate");
        let (o, parent) = (Fid::new(seq, 1, 0), Fid::new(0x200000401, 3, 0));
        let mut data = bytes(1 << 21, 3);
        s.write(&o, &parent, 0, &data).expect("write");
        assert!(!s.sidecar_path(&o).exists());
        s.set_checksums(true);
        assert!(s.verify_range(&o, 0, 100).expect("verify").unprotected);
        assert!(s.read(&o, 0, data.len()).expect("read") == data);
        s.write(&o, &parent, 12345, b"change").expect("write");
        data[12345..12351].copy_from_slice(b"change");
        let c = s.verify_range(&o, 0, data.len()).expect("verify");
        assert!(!c.unprotected);
        assert_eq!((c.bad_count, c.checked), (0, data.len() as u64));
        crate::inject::flip_bit(&s.object_path(&o), 1 << 20, 0).expect("flip");
        assert_eq!(corrupt_at(s.read(&o, 1 << 20, 1)), 1 << 20);
        // Turned off again, a change drops them: nothing stale is left to fail later.
        s.set_checksums(false);
        s.write(&o, &parent, 0, b"x").expect("write");
        assert!(!s.sidecar_path(&o).exists());
        s.set_checksums(true);
        assert!(s.verify_range(&o, 0, 100).expect("verify").unprotected);
    }

    /// fsx's operations on one object against a model of its bytes: writes of every
    /// shape (partial blocks, whole aligned pieces that go O_DIRECT, far past the end),
    /// truncates both ways, hole punches, zero ranges and allocations. After each, the
    /// object reads as the model and every block passes its check.
    #[test]
    fn every_change_keeps_checksums_consistent() {
        use rand::{Rng, SeedableRng};
        let d = tempfile::tempdir().expect("tmp");
        let s = cksum_store(d.path());
        let seq = 0x240000400;
        s.precreate(seq, 10).expect("precreate");
        let (o, parent) = (Fid::new(seq, 1, 0), Fid::new(0x200000401, 3, 0));
        let mut model: Vec<u8> = Vec::new();
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        const MAX: u64 = 3 << 20;
        let (buf, pad) = aligned(1 << 20, 5);
        for op in 0..1500 {
            let size = model.len() as u64;
            match rng.gen_range(0..10) {
                0..=3 => {
                    let off = rng.gen_range(0..MAX);
                    let len = rng.gen_range(1..=70_000u64).min(MAX - off) as usize;
                    let data = bytes(len, op);
                    s.write(&o, &parent, off, &data).expect("write");
                    let end = off as usize + len;
                    if model.len() < end {
                        model.resize(end, 0);
                    }
                    model[off as usize..end].copy_from_slice(&data);
                }
                4 => {
                    // Aligned memory, offset and length: the O_DIRECT path.
                    let off =
                        rng.gen_range(0..MAX / DIRECT_ALIGN as u64 - 256) * DIRECT_ALIGN as u64;
                    let data = &buf[pad..pad + DIRECT_MIN * 2];
                    s.write(&o, &parent, off, data).expect("direct write");
                    let end = off as usize + data.len();
                    if model.len() < end {
                        model.resize(end, 0);
                    }
                    model[off as usize..end].copy_from_slice(data);
                }
                5 | 6 => {
                    let to = if rng.gen_bool(0.5) {
                        rng.gen_range(0..=size)
                    } else {
                        rng.gen_range(0..MAX)
                    };
                    s.punch(&o, to).expect("truncate");
                    model.resize(to as usize, 0);
                }
                7 | 8 => {
                    let off = rng.gen_range(0..MAX);
                    let len = rng.gen_range(1..=100_000u64);
                    let mode = [
                        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                        libc::FALLOC_FL_ZERO_RANGE,
                        libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE,
                    ][rng.gen_range(0..3)];
                    s.fallocate(&o, &parent, off, len, mode).expect("zero");
                    let end = (off + len) as usize;
                    if mode & libc::FALLOC_FL_KEEP_SIZE == 0 && model.len() < end {
                        model.resize(end, 0);
                    }
                    let stop = end.min(model.len());
                    if (off as usize) < stop {
                        model[off as usize..stop].fill(0);
                    }
                }
                _ => {
                    let off = rng.gen_range(0..MAX);
                    let len = rng.gen_range(1..=100_000u64);
                    let mode = if rng.gen_bool(0.5) {
                        0
                    } else {
                        libc::FALLOC_FL_KEEP_SIZE
                    };
                    s.fallocate(&o, &parent, off, len, mode).expect("allocate");
                    if mode == 0 && model.len() < (off + len) as usize {
                        model.resize((off + len) as usize, 0);
                    }
                }
            }
            let off = rng.gen_range(0..=model.len());
            let got = s
                .read(&o, off as u64, 200_000)
                .unwrap_or_else(|e| panic!("op {op}: {e}"));
            assert!(
                got == model[off..(off + 200_000).min(model.len())],
                "op {op}: contents"
            );
            if op % 50 == 0 {
                let c = s.verify_range(&o, 0, model.len()).expect("verify");
                assert_eq!((c.bad_count, c.checked), (0, model.len() as u64), "op {op}");
            }
        }
        let c = s.verify_range(&o, 0, model.len()).expect("verify");
        assert_eq!(c.bad_count, 0);
        assert!(s.read(&o, 0, model.len()).expect("read") == model);
        assert_eq!(s.checksum_errors(), 0);
    }

    #[test]
    fn concurrent_writers_and_readers_of_one_block_see_no_false_mismatch() {
        use rand::{Rng, SeedableRng};
        let d = tempfile::tempdir().expect("tmp");
        let s = Arc::new(cksum_store(d.path()));
        let seq = 0x240000400;
        s.precreate(seq, 10).expect("precreate");
        let (o, parent) = (Fid::new(seq, 1, 0), Fid::new(0x200000401, 3, 0));
        s.write(&o, &parent, 0, &bytes(4 * BLOCK, 1))
            .expect("write");
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let s = s.clone();
                std::thread::spawn(move || {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(t);
                    for i in 0..2000 {
                        let off = rng.gen_range(0..4 * BLOCK as u64 - 100);
                        if t < 2 {
                            s.write(&o, &parent, off, &bytes(rng.gen_range(1..100), i))
                                .expect("write");
                        } else {
                            s.read(&o, off, 300).expect("a read saw a mismatch");
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("join");
        }
        assert_eq!(
            s.verify_range(&o, 0, 4 * BLOCK).expect("verify").bad_count,
            0
        );
        assert_eq!(s.checksum_errors(), 0);
    }

    #[test]
    fn a_bulk_damaged_on_the_way_is_written_only_up_to_the_damage() {
        let d = tempfile::tempdir().expect("tmp");
        let s = cksum_store(d.path());
        s.set_direct_io(false);
        let seq = 0x240000400;
        s.precreate(seq, 10).expect("precreate");
        let (o, parent) = (Fid::new(seq, 1, 0), Fid::new(0x200000401, 3, 0));
        let old = bytes(3 << 20, 1);
        s.write(&o, &parent, 0, &old).expect("write");
        let off = 1000u64;
        let new = bytes(2 << 20, 2);
        let sums = nacre_core::cksum::bulk_sums(off, &new);
        let mut damaged = new.clone();
        let at = CHECK_CHUNK + 5000;
        damaged[at] ^= 1;
        match s.write_summed(&o, &parent, off, &damaged, Some(&sums), true) {
            Err(ObjError::Damaged { at: a, .. }) => {
                assert_eq!(a, (off + at as u64) & !(BLOCK as u64 - 1))
            }
            other => panic!("{other:?}"),
        }
        // Written up to the chunk with the damage, nothing of it or after; and every
        // block still matches its entry.
        let got = s.read(&o, 0, old.len()).expect("read");
        let cut = CHECK_CHUNK;
        assert!(got[..off as usize] == old[..off as usize]);
        assert!(got[off as usize..cut] == new[..cut - off as usize]);
        assert!(got[cut..] == old[cut..]);
        assert_eq!(
            s.verify_range(&o, 0, old.len()).expect("verify").bad_count,
            0
        );
        // Without sums from the wire there is nothing to check against.
        assert_eq!(
            s.write_summed(&o, &parent, 0, b"x", None, true),
            Err(Errno::EPROTO.into())
        );
        // Sent again, whole.
        s.write_summed(&o, &parent, off, &new, Some(&sums), true)
            .expect("resend");
        let got = s.read(&o, 0, old.len()).expect("read");
        assert!(got[off as usize..off as usize + new.len()] == new[..]);
        assert_eq!(s.checksum_errors(), 0);
    }
}
