//! The OST's object store: one file per object in ldiskfs's `O/` tree.
//!
//! Object `[seq:oid:0]` lives at `O/<seq hex>/d<oid % 32>/<oid>`; its filter fid (the file's
//! FID with the stripe index in `ver`) is kept in the `user.nacre.fid` xattr, and the highest
//! object id created in each sequence in `O/<seq hex>/LAST_ID`. Data is written in place, so
//! sparse objects stay sparse and the kernel's page cache serves reads. Every path is built
//! from numbers, never from names that came off the wire, so nothing escapes the target.
//!
//! Precreation only moves LAST_ID: an object at or below it exists from then on, and its
//! file appears with its first write, punch or fallocate. Until then it reads as empty. A
//! metadata benchmark's empty files therefore cost the OST nothing but a LAST_ID update per
//! precreate batch, where creating a file per object cost ~40 µs of CPU each (and as much
//! again to destroy it), on the same cores the MDT and clients need. The price: a destroyed
//! object reads as empty too, and a write that reaches it after its destroy (from a client
//! that lost its open handle) gives it a file again, an orphan object holding space.

use crate::health::Health;
use nacre_core::{Errno, Fid};
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Subdirectories per sequence (ldiskfs uses 32).
pub const OBJ_SUBDIRS: u32 = 32;
/// Open object files kept cached; beyond this the least recently used are closed.
pub const DEFAULT_FD_CACHE: usize = 1024;
const FILTER_FID_XATTR: &str = "user.nacre.fid";

#[derive(Clone, Debug)]
pub struct ObjStoreConfig {
    pub fd_cache: usize,
    /// Write large aligned pieces with O_DIRECT (see [`DIRECT_MIN`]); off by default,
    /// as Lustre's `writethrough_cache_enable=1`.
    pub direct_io: bool,
}

impl Default for ObjStoreConfig {
    fn default() -> Self {
        ObjStoreConfig {
            fd_cache: DEFAULT_FD_CACHE,
            direct_io: false,
        }
    }
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
    /// Objects known to carry their filter fid, so writes skip the xattr check.
    tagged: Mutex<HashMap<Fid, Fid>>,
    /// Serialises precreation per sequence.
    create_lock: Mutex<()>,
    /// LAST_ID per sequence, as on disk.
    last_ids: Mutex<HashMap<u64, u32>>,
    /// Large aligned writes use O_DIRECT; off if configured so or the file system refuses it.
    direct: AtomicBool,
    /// Objects with blocks reserved past their data (see [`RESERVE_START`]).
    reserved: Mutex<HashMap<Fid, Reserved>>,
    /// Writes and size changes share it; giving back reserved blocks takes it alone, so no
    /// write lands in the range being given back.
    extend: RwLock<()>,
}

/// An object as stored: its file, or nothing yet (precreated, never written).
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
        Ok(ObjStore {
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
            extend: RwLock::new(()),
        })
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

    fn check(fid: &Fid) -> Result<(), Errno> {
        if fid.oid == 0 || fid.ver != 0 {
            return Err(Errno::EINVAL);
        }
        Ok(())
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
                // A precreated object without a file reads as empty; first make sure the
                // store itself is still there, so a removed target never reads as zeros.
                self.health.verify()?;
                if fid.oid > self.last_id(fid.seq)? {
                    return Err(Errno::ENOENT);
                }
                if !create {
                    return Ok(Obj::Empty);
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
        if let Some(id) = self.last_ids.lock().get(&seq) {
            return Ok(*id);
        }
        let id = match std::fs::read_to_string(self.seq_dir(seq).join("LAST_ID")) {
            Ok(s) => s.trim().parse().map_err(|_| Errno::EIO)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e.into()),
        };
        self.last_ids.lock().insert(seq, id);
        Ok(id)
    }

    /// Creates objects in `seq` up to `last` (inclusive); returns the new last id. Only
    /// LAST_ID is written (atomically, by rename): the objects' files come with their data.
    pub fn precreate(&self, seq: u64, last: u32) -> Result<u32, Errno> {
        let _g = self.create_lock.lock();
        let cur = self.last_id(seq)?;
        if last <= cur {
            return Ok(cur);
        }
        let sd = self.seq_dir(seq);
        for i in 0..OBJ_SUBDIRS {
            let d = sd.join(format!("d{i}"));
            if !d.exists() {
                self.make_dirs(&d)?;
            }
        }
        let tmp = sd.join("LAST_ID.tmp");
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = crate::private_file()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)?;
            f.write_all(format!("{last}\n").as_bytes())?;
            std::fs::rename(&tmp, sd.join("LAST_ID"))
        };
        write().map_err(|e| self.health.io_error(sd.join("LAST_ID").display(), e))?;
        self.last_ids.lock().insert(seq, last);
        Ok(last)
    }

    /// Writes `data` at `offset`; records the filter fid on the first write.
    pub fn write(&self, fid: &Fid, parent: &Fid, offset: u64, data: &[u8]) -> Result<u64, Errno> {
        self.release_idle();
        let f = self.open_obj(fid)?;
        self.tag(fid, parent)?;
        let _w = self.extend.read();
        if let Some(r) = self.reserved.lock().get_mut(fid) {
            r.last = Instant::now();
        }
        let done = if self.direct_fits(offset, data) {
            self.reserve_ahead(fid, &f, offset);
            self.write_direct(fid, offset, data)?
        } else {
            0
        };
        f.write_all_at(&data[done..], offset + done as u64)
            .map_err(|e| self.health.io_error(format_args!("object {fid}"), e))?;
        Ok(data.len() as u64)
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
        self.reserved.lock().insert(
            *fid,
            Reserved {
                end: offset + chunk,
                last: Instant::now(),
            },
        );
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

    /// Gives back what objects not written for [`RESERVE_IDLE`] have not used; the OST
    /// calls it every second too, so a stream that stopped
    /// gives back even when nothing else is written.
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

    /// Records the filter fid unless the object is known to carry it.
    fn tag(&self, fid: &Fid, parent: &Fid) -> Result<(), Errno> {
        if !parent.is_zero() && self.tagged.lock().get(fid) != Some(parent) {
            set_filter_fid(&self.object_path(fid), parent)?;
            let mut t = self.tagged.lock();
            if t.len() > 65536 {
                t.clear();
            }
            t.insert(*fid, *parent);
        }
        Ok(())
    }

    /// Reads up to `len` bytes at `offset` (short at end of object; holes read as zeros).
    pub fn read(&self, fid: &Fid, offset: u64, len: usize) -> Result<Vec<u8>, Errno> {
        let Obj::File(f) = self.lookup_obj(fid, false)? else {
            return Ok(Vec::new());
        };
        let size = f.metadata()?.len();
        if offset >= size {
            return Ok(Vec::new());
        }
        let n = (size - offset).min(len as u64) as usize;
        read_uninit_at(&f, n, offset)
            .map_err(|e| self.health.io_error(format_args!("object {fid}"), e))
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

    pub fn punch(&self, fid: &Fid, size: u64) -> Result<(), Errno> {
        let _w = self.extend.read();
        // The size change frees whatever lies past it.
        self.forget_reservation(fid);
        let f = match self.lookup_obj(fid, size > 0)? {
            Obj::File(f) => f,
            Obj::Empty => return Ok(()),
        };
        f.set_len(size)
            .map_err(|e| self.health.io_error(format_args!("object {fid}"), e))?;
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
    ) -> Result<(), Errno> {
        use std::os::fd::AsRawFd;
        if len == 0
            || offset
                .checked_add(len)
                .is_none_or(|end| end > i64::MAX as u64)
        {
            return Err(Errno::EINVAL);
        }
        let allowed =
            libc::FALLOC_FL_KEEP_SIZE | libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE;
        if mode & !allowed != 0 {
            return Err(Errno(libc::EOPNOTSUPP));
        }
        let _w = self.extend.read();
        // The client's own allocation past the data must not be given back as ours.
        self.forget_reservation(fid);
        let f = self.open_obj(fid)?;
        if mode & libc::FALLOC_FL_PUNCH_HOLE == 0 {
            // Allocating makes the object part of the file, as a write does.
            self.tag(fid, parent)?;
        }
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
        if mode != libc::FALLOC_FL_KEEP_SIZE {
            // Clients take a file's data-change time from its objects and compare it with
            // the MDT's ctime, which has full clock resolution; the backing file system may
            // stamp with a coarser clock, so a change right after a create could go unseen.
            stamp_mtime(&f)?;
        }
        Ok(())
    }

    pub fn destroy(&self, fid: &Fid) -> Result<(), Errno> {
        Self::check(fid)?;
        self.forget_reservation(fid);
        self.fds.lock().remove(fid);
        self.tagged.lock().remove(fid);
        match std::fs::remove_file(self.object_path(fid)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Makes an object durable: its data, its size and filter fid, and the directory
    /// entries that name it (objects get their files lazily, at first write, so a synced
    /// object may be a new name in `d<n>`, itself possibly new in `O/<seq>`). Syncing a
    /// directory with nothing new costs the file system almost nothing. A sync is
    /// acknowledged only for a store that is still the target's: an open file keeps
    /// syncing after its directory was removed.
    pub fn sync(&self, fid: &Fid) -> Result<(), Errno> {
        self.release(fid);
        let Obj::File(f) = self.lookup_obj(fid, false)? else {
            return self.health.verify();
        };
        let path = self.object_path(fid);
        let synced = f.sync_all().and_then(|()| {
            let mut dir = path.parent();
            for _ in 0..2 {
                let Some(d) = dir else { break };
                File::open(d)?.sync_all()?;
                dir = d.parent();
            }
            Ok(())
        });
        if let Err(e) = synced {
            // A directory gone under an open object is the store failing, not a missing
            // object: the identity check says so first.
            self.health.verify()?;
            return Err(self.health.io_error(format_args!("object {fid}"), e));
        }
        self.health.verify()
    }

    /// The filter fid of an object, if it has been written.
    pub fn filter_fid(&self, fid: &Fid) -> Result<Option<Fid>, Errno> {
        if let Obj::Empty = self.lookup_obj(fid, false)? {
            return Ok(None);
        }
        get_filter_fid(&self.object_path(fid))
    }

    /// Space of the backing file system.
    pub fn statfs(&self) -> Result<libc::statvfs, Errno> {
        statvfs(&self.root)
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
    use std::os::fd::AsRawFd;
    let mut buf: Vec<u8> = Vec::with_capacity(n);
    let mut done = 0usize;
    while done < n {
        let spare = buf.spare_capacity_mut();
        let off = i64::try_from(offset + done as u64)
            .map_err(|_| std::io::Error::from_raw_os_error(libc::EFBIG))?;
        // SAFETY: the pointer and length describe the vector's unused capacity, which the
        // kernel writes; only the bytes it reports written are then marked initialised.
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
    Ok(buf)
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

fn set_filter_fid(p: &Path, parent: &Fid) -> Result<(), Errno> {
    let c = xattr_call(p)?;
    let name = std::ffi::CString::new(FILTER_FID_XATTR).map_err(|_| Errno::EINVAL)?;
    let v = parent.to_bytes();
    // SAFETY: valid C strings and a buffer of the given length.
    let r = unsafe { libc::setxattr(c.as_ptr(), name.as_ptr(), v.as_ptr().cast(), v.len(), 0) };
    if r != 0 {
        return Err(Errno::from(std::io::Error::last_os_error()));
    }
    Ok(())
}

fn get_filter_fid(p: &Path) -> Result<Option<Fid>, Errno> {
    let c = xattr_call(p)?;
    let name = std::ffi::CString::new(FILTER_FID_XATTR).map_err(|_| Errno::EINVAL)?;
    let mut v = [0u8; 16];
    // SAFETY: valid C strings and a buffer of the given length.
    let r = unsafe { libc::getxattr(c.as_ptr(), name.as_ptr(), v.as_mut_ptr().cast(), v.len()) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENODATA) => Ok(None),
            _ => Err(Errno::from(e)),
        };
    }
    Ok(Fid::from_bytes(&v[..r as usize]))
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
        // Below the root, directories are the store's own to make.
        std::fs::remove_dir(s.seq_dir(seq).join("d5")).expect("rmdir");
        s.write(&Fid::new(seq, 5, 0), &parent, 0, b"x")
            .expect("write");
        assert!(!s.health().is_failed());
        // The root itself is not.
        std::fs::remove_dir_all(&s.root).expect("rm O");
        assert_eq!(
            s.write(&Fid::new(seq, 6, 0), &parent, 0, b"x"),
            Err(Errno::EIO)
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
        // Below LAST_ID and without a file: an empty object, as one never written.
        assert_eq!(s.read(&o, 0, 1), Ok(Vec::new()));
        let fresh = Fid::new(seq, 8, 0);
        assert_eq!(s.getattr(&fresh).expect("attr").0, 0);
        assert!(!s.object_path(&fresh).exists(), "reads do not create files");
        s.punch(&fresh, 0).expect("punch to 0");
        assert!(!s.object_path(&fresh).exists());
        s.punch(&fresh, 4096).expect("extend");
        assert_eq!(s.getattr(&fresh).expect("attr").0, 4096);
        assert_eq!(
            s.write(&Fid::new(seq, 99, 0), &parent, 0, b"x"),
            Err(Errno::ENOENT)
        );
        assert_eq!(s.read(&Fid::new(seq, 0, 0), 0, 1), Err(Errno::EINVAL));
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
        assert_eq!(s.fallocate(&o, &parent, 0, 0, 0), Err(Errno::EINVAL));
        assert_eq!(
            s.fallocate(&o, &parent, 0, 1, 0x40),
            Err(Errno(libc::EOPNOTSUPP))
        );
        assert_eq!(
            s.fallocate(&Fid::new(seq, 99, 0), &parent, 0, 1, 0),
            Err(Errno::ENOENT)
        );
    }
}
