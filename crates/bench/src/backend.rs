//! The file-system backend every tool does its I/O through: the [`FileSystem`] trait, the POSIX
//! implementation over libc (with `O_DIRECT` and FIEMAP), the [`NativeConnector`] hook that lets
//! the `nacre` binary plug in the native client, and small helpers built on the trait.
//!
//! The trait is shaped for a remote client: files are opened once and then addressed by an
//! opaque [`FileHandle`], reads and writes are positional over byte slices, and directory
//! listings are streamed through a callback, so nothing on the I/O path resolves a path or
//! buffers a whole directory.

use std::alloc::{self, Layout};
use std::ffi::{CString, OsString};
use std::io;
use std::ops::{ControlFlow, Deref, DerefMut};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{BenchError, Result};

/// An open file, as the backend numbers it. For [`PosixFs`] it is the file descriptor; a remote
/// client can use an index into its own open-file table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileHandle(pub u64);

/// How to open a file. `create` is implied by [`FileSystem::create`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenOptions {
    pub read: bool,
    pub write: bool,
    /// Truncate to zero length on open.
    pub truncate: bool,
    /// Fail if the file exists (only meaningful with create).
    pub exclusive: bool,
    /// Bypass the page cache (`O_DIRECT`): buffers, offsets and lengths must be aligned to
    /// [`FileSystem::io_alignment`].
    pub direct: bool,
    /// Permission bits for a created file.
    pub mode: u32,
}

impl OpenOptions {
    /// Read only.
    pub const fn read() -> Self {
        OpenOptions {
            read: true,
            write: false,
            truncate: false,
            exclusive: false,
            direct: false,
            mode: 0o644,
        }
    }
    /// Write only.
    pub const fn write() -> Self {
        OpenOptions {
            read: false,
            write: true,
            truncate: false,
            exclusive: false,
            direct: false,
            mode: 0o644,
        }
    }
    /// Read and write.
    pub const fn read_write() -> Self {
        OpenOptions {
            read: true,
            write: true,
            truncate: false,
            exclusive: false,
            direct: false,
            mode: 0o644,
        }
    }
    pub const fn truncate(mut self, on: bool) -> Self {
        self.truncate = on;
        self
    }
    pub const fn exclusive(mut self, on: bool) -> Self {
        self.exclusive = on;
        self
    }
    pub const fn direct(mut self, on: bool) -> Self {
        self.direct = on;
        self
    }
}

/// What kind of object a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    Other,
}

/// Attributes of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    pub kind: FileKind,
    pub size: u64,
    /// 512-byte blocks allocated.
    pub blocks: u64,
    pub ino: u64,
    pub dev: u64,
    pub nlink: u64,
    /// Modification time, seconds and nanoseconds since the epoch.
    pub mtime_sec: i64,
    pub mtime_nsec: i64,
}

/// Space and inode counts of a file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FsStat {
    /// Fragment size: the unit of `blocks`, `blocks_free` and `blocks_avail`.
    pub block_size: u64,
    pub blocks: u64,
    pub blocks_free: u64,
    /// Blocks available to unprivileged users.
    pub blocks_avail: u64,
    pub files: u64,
    pub files_free: u64,
}

impl FsStat {
    /// Free 1K-blocks available to users, the unit of PaF's `<N`.
    pub fn avail_kb(&self) -> u64 {
        self.blocks_avail.saturating_mul(self.block_size) / 1024
    }
    /// Percentage of blocks in use (as `df` and IOR compute it, from `blocks_free`).
    pub fn used_pct(&self) -> f64 {
        if self.blocks == 0 {
            return 0.0;
        }
        (1.0 - self.blocks_free as f64 / self.blocks as f64) * 100.0
    }
    /// Percentage of inodes in use.
    pub fn inodes_used_pct(&self) -> f64 {
        if self.files == 0 {
            return 0.0;
        }
        (1.0 - self.files_free as f64 / self.files as f64) * 100.0
    }
}

/// One directory entry. `kind` is `None` when the backend cannot tell without a stat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: OsString,
    pub kind: Option<FileKind>,
}

/// One mapped extent of a file, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub logical: u64,
    pub physical: u64,
    pub length: u64,
    /// FIEMAP extent flags (`FIEMAP_EXTENT_*`).
    pub flags: u32,
    /// The storage target holding the extent (a nacre OST index); `None` for a local file,
    /// whose extents all lie on its one device.
    pub device: Option<u32>,
}

/// A file system the tools can age and measure. Errors are `io::Error`s so a remote backend can
/// carry errno values (`io::Error::from_raw_os_error`) and the tools can tell ENOSPC, ENOENT
/// and EEXIST apart.
pub trait FileSystem: Send + Sync {
    /// A short description for reports ("posix", "nacre:HOST:/fs").
    fn describe(&self) -> String;
    /// Creates (or opens, unless `opts.exclusive`) a file and returns a handle.
    fn create(&self, path: &Path, opts: OpenOptions) -> io::Result<FileHandle>;
    /// Opens an existing file.
    fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<FileHandle>;
    /// Writes `buf` at `offset`; may write less than asked.
    fn pwrite(&self, fh: FileHandle, buf: &[u8], offset: u64) -> io::Result<usize>;
    /// Reads into `buf` from `offset`; returns 0 at end of file.
    fn pread(&self, fh: FileHandle, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    fn fsync(&self, fh: FileHandle) -> io::Result<()>;
    fn close(&self, fh: FileHandle) -> io::Result<()>;
    fn fstat(&self, fh: FileHandle) -> io::Result<FileStat>;
    /// Attributes of a path, not following a final symlink.
    fn stat(&self, path: &Path) -> io::Result<FileStat>;
    fn unlink(&self, path: &Path) -> io::Result<()>;
    fn mkdir(&self, path: &Path, mode: u32) -> io::Result<()>;
    fn rmdir(&self, path: &Path) -> io::Result<()>;
    /// Streams the entries of a directory (without `.` and `..`) to `visit`, which may stop
    /// the listing early by returning `Break`.
    fn readdir(
        &self,
        path: &Path,
        visit: &mut dyn FnMut(DirEntry) -> ControlFlow<()>,
    ) -> io::Result<()>;
    fn statfs(&self, path: &Path) -> io::Result<FsStat>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Streams the extent map of an open file to `visit`. Returns `Ok(false)` when the backend
    /// has no extent maps (the default), so fragmentation reports can say so. A native client
    /// reports per-OST object extents through this hook.
    fn extents(&self, fh: FileHandle, visit: &mut dyn FnMut(Extent)) -> io::Result<bool> {
        let _ = (fh, visit);
        Ok(false)
    }
    /// The host path behind `path`, for tools that must look past the backend (dropping the
    /// page cache, finding the block device). `None` for remote backends.
    fn local_path(&self, path: &Path) -> Option<PathBuf> {
        let _ = path;
        None
    }
    /// Alignment of buffers, offsets and lengths for `direct` I/O.
    fn io_alignment(&self) -> usize {
        DIRECT_IO_ALIGN
    }
}

/// Connects to a native nacre file system. The `nacre` binary implements this with its client
/// library; `spec` is what the user passed to `--native`.
pub trait NativeConnector: Send + Sync {
    fn connect(&self, spec: &str) -> anyhow::Result<Arc<dyn FileSystem>>;
}

/// Alignment used for `O_DIRECT`: the page size covers every common logical block size.
pub const DIRECT_IO_ALIGN: usize = 4096;

/// POSIX backend over libc; paths are host paths and handles are file descriptors.
#[derive(Debug, Default, Clone, Copy)]
pub struct PosixFs;

impl PosixFs {
    pub fn new() -> Self {
        PosixFs
    }
}

fn cpath(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn fd_of(fh: FileHandle) -> io::Result<libc::c_int> {
    libc::c_int::try_from(fh.0)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "not a POSIX file handle"))
}

fn stat_from(st: &libc::stat) -> FileStat {
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => FileKind::File,
        libc::S_IFDIR => FileKind::Dir,
        libc::S_IFLNK => FileKind::Symlink,
        _ => FileKind::Other,
    };
    FileStat {
        kind,
        size: st.st_size as u64,
        blocks: st.st_blocks as u64,
        ino: st.st_ino,
        dev: st.st_dev,
        nlink: st.st_nlink,
        mtime_sec: st.st_mtime,
        mtime_nsec: st.st_mtime_nsec,
    }
}

impl PosixFs {
    fn open_flags(opts: OpenOptions) -> libc::c_int {
        let mut flags = match (opts.read, opts.write) {
            (true, true) => libc::O_RDWR,
            (false, true) => libc::O_WRONLY,
            _ => libc::O_RDONLY,
        };
        flags |= libc::O_CLOEXEC;
        if opts.truncate {
            flags |= libc::O_TRUNC;
        }
        if opts.direct {
            flags |= libc::O_DIRECT;
        }
        flags
    }

    fn do_open(path: &Path, flags: libc::c_int, mode: u32) -> io::Result<FileHandle> {
        let c = cpath(path)?;
        // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
        let fd = cvt(unsafe { libc::open(c.as_ptr(), flags, mode as libc::c_uint) })?;
        Ok(FileHandle(fd as u64))
    }
}

/// `struct fiemap` from linux/fiemap.h.
#[repr(C)]
#[derive(Default)]
struct FiemapHeader {
    fm_start: u64,
    fm_length: u64,
    fm_flags: u32,
    fm_mapped_extents: u32,
    fm_extent_count: u32,
    fm_reserved: u32,
}

/// `struct fiemap_extent` from linux/fiemap.h.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct FiemapExtent {
    fe_logical: u64,
    fe_physical: u64,
    fe_length: u64,
    fe_reserved64: [u64; 2],
    fe_flags: u32,
    fe_reserved: [u32; 3],
}

/// Extents fetched per FIEMAP call: bounds the buffer for files with many extents.
const FIEMAP_BATCH: usize = 256;

#[repr(C)]
struct FiemapBuf {
    hdr: FiemapHeader,
    ext: [FiemapExtent; FIEMAP_BATCH],
}

/// `_IOWR('f', 11, struct fiemap)`.
const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
const FIEMAP_FLAG_SYNC: u32 = 0x1;
/// Last extent of the file.
pub const FIEMAP_EXTENT_LAST: u32 = 0x1;

impl FileSystem for PosixFs {
    fn describe(&self) -> String {
        "posix".to_string()
    }

    fn create(&self, path: &Path, opts: OpenOptions) -> io::Result<FileHandle> {
        let mut flags = Self::open_flags(opts) | libc::O_CREAT;
        if opts.exclusive {
            flags |= libc::O_EXCL;
        }
        Self::do_open(path, flags, opts.mode)
    }

    fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<FileHandle> {
        Self::do_open(path, Self::open_flags(opts), 0)
    }

    fn pwrite(&self, fh: FileHandle, buf: &[u8], offset: u64) -> io::Result<usize> {
        let fd = fd_of(fh)?;
        let off = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
        // SAFETY: the pointer and length describe `buf`, which is valid for reads.
        let n = unsafe { libc::pwrite(fd, buf.as_ptr().cast(), buf.len(), off) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    fn pread(&self, fh: FileHandle, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let fd = fd_of(fh)?;
        let off = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
        // SAFETY: the pointer and length describe `buf`, which is valid for writes.
        let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), off) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    fn fsync(&self, fh: FileHandle) -> io::Result<()> {
        let fd = fd_of(fh)?;
        // SAFETY: plain syscall on a descriptor.
        cvt(unsafe { libc::fsync(fd) }).map(drop)
    }

    fn close(&self, fh: FileHandle) -> io::Result<()> {
        let fd = fd_of(fh)?;
        // SAFETY: the handle came from `open`/`create` and is closed once by the caller.
        cvt(unsafe { libc::close(fd) }).map(drop)
    }

    fn fstat(&self, fh: FileHandle) -> io::Result<FileStat> {
        let fd = fd_of(fh)?;
        // SAFETY: `st` is plain old data; fstat fills it on success.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `st` is a valid out pointer.
        cvt(unsafe { libc::fstat(fd, &mut st) })?;
        Ok(stat_from(&st))
    }

    fn stat(&self, path: &Path) -> io::Result<FileStat> {
        let c = cpath(path)?;
        // SAFETY: `st` is plain old data; lstat fills it on success.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid C string and out pointer.
        cvt(unsafe { libc::lstat(c.as_ptr(), &mut st) })?;
        Ok(stat_from(&st))
    }

    fn unlink(&self, path: &Path) -> io::Result<()> {
        let c = cpath(path)?;
        // SAFETY: valid C string.
        cvt(unsafe { libc::unlink(c.as_ptr()) }).map(drop)
    }

    fn mkdir(&self, path: &Path, mode: u32) -> io::Result<()> {
        let c = cpath(path)?;
        // SAFETY: valid C string.
        cvt(unsafe { libc::mkdir(c.as_ptr(), mode as libc::mode_t) }).map(drop)
    }

    fn rmdir(&self, path: &Path) -> io::Result<()> {
        let c = cpath(path)?;
        // SAFETY: valid C string.
        cvt(unsafe { libc::rmdir(c.as_ptr()) }).map(drop)
    }

    fn readdir(
        &self,
        path: &Path,
        visit: &mut dyn FnMut(DirEntry) -> ControlFlow<()>,
    ) -> io::Result<()> {
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            let kind = entry.file_type().ok().map(|t| {
                if t.is_dir() {
                    FileKind::Dir
                } else if t.is_file() {
                    FileKind::File
                } else if t.is_symlink() {
                    FileKind::Symlink
                } else {
                    FileKind::Other
                }
            });
            let de = DirEntry {
                name: entry.file_name(),
                kind,
            };
            if visit(de).is_break() {
                break;
            }
        }
        Ok(())
    }

    fn statfs(&self, path: &Path) -> io::Result<FsStat> {
        let c = cpath(path)?;
        // SAFETY: `st` is plain old data; statvfs fills it on success.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: valid C string and out pointer.
        cvt(unsafe { libc::statvfs(c.as_ptr(), &mut st) })?;
        Ok(FsStat {
            block_size: if st.f_frsize > 0 {
                st.f_frsize
            } else {
                st.f_bsize
            },
            blocks: st.f_blocks,
            blocks_free: st.f_bfree,
            blocks_avail: st.f_bavail,
            files: st.f_files,
            files_free: st.f_ffree,
        })
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let a = cpath(from)?;
        let b = cpath(to)?;
        // SAFETY: valid C strings.
        cvt(unsafe { libc::rename(a.as_ptr(), b.as_ptr()) }).map(drop)
    }

    fn extents(&self, fh: FileHandle, visit: &mut dyn FnMut(Extent)) -> io::Result<bool> {
        let fd = fd_of(fh)?;
        let mut buf = Box::new(FiemapBuf {
            hdr: FiemapHeader::default(),
            ext: [FiemapExtent::default(); FIEMAP_BATCH],
        });
        let mut start = 0u64;
        loop {
            buf.hdr = FiemapHeader {
                fm_start: start,
                fm_length: u64::MAX - start,
                fm_flags: FIEMAP_FLAG_SYNC,
                fm_mapped_extents: 0,
                fm_extent_count: FIEMAP_BATCH as u32,
                fm_reserved: 0,
            };
            let p: *mut FiemapBuf = &mut *buf;
            // SAFETY: `buf` is a properly laid-out `struct fiemap` followed by room for
            // `fm_extent_count` extents, as FS_IOC_FIEMAP expects.
            let ret = unsafe { libc::ioctl(fd, FS_IOC_FIEMAP as _, p) };
            if ret < 0 {
                let e = io::Error::last_os_error();
                return match e.raw_os_error() {
                    Some(libc::EOPNOTSUPP) | Some(libc::ENOTTY) | Some(libc::EINVAL) => Ok(false),
                    _ => Err(e),
                };
            }
            let n = (buf.hdr.fm_mapped_extents as usize).min(FIEMAP_BATCH);
            if n == 0 {
                return Ok(true);
            }
            let mut last = false;
            for fe in &buf.ext[..n] {
                visit(Extent {
                    logical: fe.fe_logical,
                    physical: fe.fe_physical,
                    length: fe.fe_length,
                    flags: fe.fe_flags,
                    device: None,
                });
                last |= fe.fe_flags & FIEMAP_EXTENT_LAST != 0;
            }
            let tail = &buf.ext[n - 1];
            let next = tail.fe_logical.saturating_add(tail.fe_length);
            if last || next <= start {
                return Ok(true);
            }
            start = next;
        }
    }

    fn local_path(&self, path: &Path) -> Option<PathBuf> {
        Some(path.to_path_buf())
    }
}

/// A heap buffer aligned for direct I/O.
pub struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
    layout: Layout,
}

// SAFETY: the buffer owns its allocation and has no interior mutability.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only reads.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes aligned to `align` (a power of two).
    pub fn new(len: usize, align: usize) -> io::Result<Self> {
        let layout = Layout::from_size_align(len.max(1), align.max(1))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = std::ptr::NonNull::new(raw)
            .ok_or_else(|| io::Error::new(io::ErrorKind::OutOfMemory, "buffer allocation"))?;
        Ok(AlignedBuf { ptr, len, layout })
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `len` initialised (zeroed) bytes for our lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// Writes all of `buf` at `offset`, retrying short writes.
pub fn write_all_at(
    fs: &dyn FileSystem,
    fh: FileHandle,
    mut buf: &[u8],
    mut offset: u64,
) -> io::Result<()> {
    while !buf.is_empty() {
        match fs.pwrite(fh, buf, offset) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "wrote 0 bytes")),
            Ok(n) => {
                buf = &buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads until `buf` is full or end of file; returns the bytes read.
pub fn read_full_at(
    fs: &dyn FileSystem,
    fh: FileHandle,
    buf: &mut [u8],
    offset: u64,
) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match fs.pread(fh, &mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Creates `path` and any missing parents; an existing directory is fine.
pub fn mkdir_all(fs: &dyn FileSystem, path: &Path) -> io::Result<()> {
    match fs.mkdir(path, 0o755) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let parent = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .ok_or(e)?;
            mkdir_all(fs, parent)?;
            match fs.mkdir(path, 0o755) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
                r => r,
            }
        }
        Err(e) => Err(e),
    }
}

/// Names removed per directory pass: deleting in batches keeps memory bounded however large
/// the directory is.
const REMOVE_BATCH: usize = 1024;

/// Removes `path` and everything below it that `keep` does not protect. Returns the number of
/// entries removed; a directory holding a protected entry is left in place.
pub fn remove_tree(
    fs: &dyn FileSystem,
    path: &Path,
    keep: &dyn Fn(&Path, FileKind) -> bool,
) -> io::Result<u64> {
    let st = match fs.stat(path) {
        Ok(st) => st,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    if st.kind != FileKind::Dir {
        if keep(path, st.kind) {
            return Ok(0);
        }
        return match fs.unlink(path) {
            Ok(()) => Ok(1),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(0),
            Err(e) => Err(e),
        };
    }
    let mut removed = 0u64;
    let mut kept = std::collections::HashSet::new();
    loop {
        let mut batch: Vec<(OsString, Option<FileKind>)> = Vec::new();
        fs.readdir(path, &mut |de| {
            if !kept.contains(&de.name) {
                batch.push((de.name, de.kind));
            }
            if batch.len() >= REMOVE_BATCH {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })?;
        if batch.is_empty() {
            break;
        }
        for (name, kind) in batch {
            let child = path.join(&name);
            let kind = match kind {
                Some(k) => k,
                None => match fs.stat(&child) {
                    Ok(st) => st.kind,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(e),
                },
            };
            if kind == FileKind::Dir {
                removed += remove_tree(fs, &child, keep)?;
                if fs.stat(&child).is_ok() {
                    kept.insert(name);
                }
            } else if keep(&child, kind) {
                kept.insert(name);
            } else {
                match fs.unlink(&child) {
                    Ok(()) => removed += 1,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    if kept.is_empty() && !keep(path, FileKind::Dir) {
        match fs.rmdir(path) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(removed)
}

/// Checks that `path` exists and is a directory, with the messages every command uses.
pub fn check_dir(fs: &dyn FileSystem, path: &Path) -> Result<()> {
    match fs.stat(path) {
        Ok(st) if st.kind == FileKind::Dir => Ok(()),
        Ok(_) => Err(BenchError::NotADirectory(path.to_path_buf())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            Err(BenchError::MissingDir(path.to_path_buf()))
        }
        Err(e) => Err(BenchError::io("stat", path, e)),
    }
}

/// True when `e` is "no such file or directory".
pub fn is_not_found(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posix_roundtrip_and_tree_removal() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let fs = PosixFs::new();
        let dir = tmp.path().join("a/b/c");
        mkdir_all(&fs, &dir).expect("mkdir_all");
        let f = dir.join("x");
        let fh = fs
            .create(&f, OpenOptions::read_write().truncate(true))
            .expect("create");
        write_all_at(&fs, fh, b"hello world", 5).expect("write");
        let mut buf = [0u8; 32];
        let n = read_full_at(&fs, fh, &mut buf, 0).expect("read");
        assert_eq!(n, 16);
        assert_eq!(&buf[5..16], b"hello world");
        assert_eq!(fs.fstat(fh).expect("fstat").size, 16);
        fs.close(fh).expect("close");
        let mut names = Vec::new();
        fs.readdir(&dir, &mut |de| {
            names.push(de.name);
            ControlFlow::Continue(())
        })
        .expect("readdir");
        assert_eq!(names, vec![OsString::from("x")]);
        let removed = remove_tree(&fs, &tmp.path().join("a"), &|_, _| false).expect("rm");
        assert_eq!(removed, 4);
        assert!(fs.stat(&tmp.path().join("a")).is_err());
    }

    #[test]
    fn remove_tree_keeps_protected_entries() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let fs = PosixFs::new();
        let d = tmp.path().join("t");
        mkdir_all(&fs, &d.join("sub")).expect("mkdir");
        for name in ["keep.me", "sub/drop", "drop"] {
            let fh = fs
                .create(&d.join(name), OpenOptions::write())
                .expect("create");
            fs.close(fh).expect("close");
        }
        let keep = |p: &Path, _k: FileKind| p.file_name() == Some(std::ffi::OsStr::new("keep.me"));
        let removed = remove_tree(&fs, &d, &keep).expect("rm");
        assert_eq!(removed, 3, "sub/drop, sub, drop");
        assert!(fs.stat(&d.join("keep.me")).is_ok());
    }

    #[test]
    fn aligned_buffer_is_aligned() {
        let b = AlignedBuf::new(8192, 4096).expect("alloc");
        assert_eq!(b.as_ptr() as usize % 4096, 0);
        assert_eq!(b.len(), 8192);
        assert!(b.iter().all(|&x| x == 0));
    }

    #[test]
    fn check_dir_messages() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let fs = PosixFs::new();
        let missing = tmp.path().join("nope");
        let e = check_dir(&fs, &missing).expect_err("missing");
        assert_eq!(
            e.to_string(),
            format!("directory {} does not exist", missing.display())
        );
        let f = tmp.path().join("f");
        std::fs::write(&f, b"x").expect("write");
        let e = check_dir(&fs, &f).expect_err("file");
        assert!(e.to_string().contains("is not a directory"));
    }

    #[test]
    fn enospc_becomes_no_space() {
        let e = BenchError::io(
            "writing",
            Path::new("/x"),
            io::Error::from_raw_os_error(libc::ENOSPC),
        );
        assert!(e.is_no_space());
        let e = e.with_space_hint("run --scrub");
        assert!(e.to_string().contains("file system is full"));
        assert!(e.to_string().ends_with("run --scrub"));
    }
}
