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

use nacre_core::{Errno, Fid};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Subdirectories per sequence (ldiskfs uses 32).
pub const OBJ_SUBDIRS: u32 = 32;
/// Open object files kept cached; beyond this the least recently used are closed.
pub const DEFAULT_FD_CACHE: usize = 1024;
const FILTER_FID_XATTR: &str = "user.nacre.fid";

#[derive(Clone, Debug)]
pub struct ObjStoreConfig {
    pub fd_cache: usize,
}

impl Default for ObjStoreConfig {
    fn default() -> Self {
        ObjStoreConfig {
            fd_cache: DEFAULT_FD_CACHE,
        }
    }
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
    fds: Mutex<FdCache>,
    /// Objects known to carry their filter fid, so writes skip the xattr check.
    tagged: Mutex<HashMap<Fid, Fid>>,
    /// Serialises precreation per sequence.
    create_lock: Mutex<()>,
    /// LAST_ID per sequence, as on disk.
    last_ids: Mutex<HashMap<u64, u32>>,
}

/// An object as stored: its file, or nothing yet (precreated, never written).
enum Obj {
    File(Arc<File>),
    Empty,
}

impl ObjStore {
    /// Opens the store under `dir` (the target directory), creating `O/` if needed.
    pub fn open(dir: &Path, cfg: ObjStoreConfig) -> std::io::Result<ObjStore> {
        let root = dir.join("O");
        std::fs::create_dir_all(&root)?;
        Ok(ObjStore {
            root,
            fds: Mutex::new(FdCache {
                map: HashMap::new(),
                tick: 0,
                cap: cfg.fd_cache.max(16),
            }),
            tagged: Mutex::new(HashMap::new()),
            create_lock: Mutex::new(()),
            last_ids: Mutex::new(HashMap::new()),
        })
    }

    fn seq_dir(&self, seq: u64) -> PathBuf {
        self.root.join(format!("{seq:x}"))
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
                if fid.oid > self.last_id(fid.seq)? {
                    return Err(Errno::ENOENT);
                }
                if !create {
                    return Ok(Obj::Empty);
                }
                if let Some(d) = path.parent() {
                    std::fs::create_dir_all(d)?;
                }
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(&path)?
            }
            Err(e) => return Err(e.into()),
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
            std::fs::create_dir_all(d)?;
        }
        match OpenOptions::new().write(true).create_new(true).open(&p) {
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
                std::fs::create_dir_all(&d)?;
            }
        }
        let tmp = sd.join("LAST_ID.tmp");
        std::fs::write(&tmp, format!("{last}\n"))?;
        std::fs::rename(&tmp, sd.join("LAST_ID"))?;
        self.last_ids.lock().insert(seq, last);
        Ok(last)
    }

    /// Writes `data` at `offset`; records the filter fid on the first write.
    pub fn write(&self, fid: &Fid, parent: &Fid, offset: u64, data: &[u8]) -> Result<u64, Errno> {
        let f = self.open_obj(fid)?;
        self.tag(fid, parent)?;
        f.write_all_at(data, offset)?;
        Ok(data.len() as u64)
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
        let f = match self.lookup_obj(fid, size > 0)? {
            Obj::File(f) => f,
            Obj::Empty => return Ok(()),
        };
        f.set_len(size)?;
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
                Err(Errno::from(std::io::Error::last_os_error()))
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
        self.fds.lock().remove(fid);
        self.tagged.lock().remove(fid);
        match std::fs::remove_file(self.object_path(fid)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    pub fn sync(&self, fid: &Fid) -> Result<(), Errno> {
        let Obj::File(f) = self.lookup_obj(fid, false)? else {
            return Ok(());
        };
        f.sync_data()?;
        Ok(())
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
    use std::os::fd::AsRawFd;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let times = [
        libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        libc::timespec {
            tv_sec: now.as_secs() as libc::time_t,
            tv_nsec: libc::c_long::from(now.subsec_nanos() as i32),
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
fn read_uninit_at(f: &File, n: usize, offset: u64) -> Result<Vec<u8>, Errno> {
    use std::os::fd::AsRawFd;
    let mut buf: Vec<u8> = Vec::with_capacity(n);
    let mut done = 0usize;
    while done < n {
        let spare = buf.spare_capacity_mut();
        let off = i64::try_from(offset + done as u64).map_err(|_| Errno::EFBIG)?;
        // SAFETY: the pointer and length describe the vector's unused capacity, which the
        // kernel writes; only the bytes it reports written are then marked initialised.
        let r = unsafe { libc::pread(f.as_raw_fd(), spare.as_mut_ptr().cast(), spare.len(), off) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e.into());
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
    std::fs::write(&probe, b"").map_err(|e| format!("cannot write in {}: {e}", dir.display()))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precreate_write_read_punch_destroy() {
        let d = tempfile::tempdir().expect("tmp");
        check_xattr_support(d.path()).expect("xattrs");
        let s = ObjStore::open(d.path(), ObjStoreConfig::default()).expect("open");
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
        let s = ObjStore::open(d.path(), ObjStoreConfig::default()).expect("open");
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
