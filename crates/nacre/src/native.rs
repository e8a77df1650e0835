//! The benchmarks' native backend: nacre's client library behind the tools'
//! [`FileSystem`] trait, so `--native SPEC` measures the file system without FUSE.

use crate::cmd::mount::resolve_spec;
use bytes::Bytes;
use nacre_bench::backend::{
    DirEntry, Extent, FileHandle, FileKind as BKind, FileStat, FileSystem, FsStat, NativeConnector,
    OpenOptions,
};
use nacre_client::file::OpenFile;
use nacre_client::{Client, MountSpec};
use nacre_core::{Errno, Fid, FileKind};
use nacre_rpc::msg::{Cred, InodeInfo, LayoutRequest, OpenFlags};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io;
use std::ops::ControlFlow;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Directories whose FID is remembered, so deep trees are not walked on every call.
const DIR_CACHE: usize = 65536;

fn ioerr(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e.code())
}

/// A mounted client used directly.
pub struct NativeFs {
    client: Arc<Client>,
    rt: tokio::runtime::Runtime,
    spec: String,
    files: Mutex<HashMap<u64, Arc<OpenFile>>>,
    next: AtomicU64,
    dirs: Mutex<HashMap<PathBuf, Fid>>,
    cred: Cred,
}

impl Drop for NativeFs {
    /// A library client leaves like a mount does: its MDTs forget it, so their next
    /// restart does not wait for it to replay.
    fn drop(&mut self) {
        // Inside another runtime nothing can block: the MDTs then wait out the window.
        if tokio::runtime::Handle::try_current().is_err() {
            self.rt.block_on(self.client.disconnect());
        }
        self.client.unmount();
    }
}

impl NativeFs {
    pub fn connect(spec: &str) -> anyhow::Result<NativeFs> {
        let key = std::env::var_os("NACRE_KEY").map(PathBuf::from);
        let (spec, key) = resolve_spec(spec, key.as_deref())?;
        let rt = crate::cmd::runtime()?;
        let mspec = MountSpec::parse(&spec, key, &format!("bench-{}", std::process::id()))
            .map_err(anyhow::Error::msg)?;
        let client = rt.block_on(Client::mount(mspec))?;
        // SAFETY: these calls cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        // The MDT checks this process's permissions: its groups and capabilities too.
        let cred = nacre_fuse::caller_cred(std::process::id(), uid, gid);
        Ok(NativeFs {
            client,
            rt,
            spec,
            files: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            dirs: Mutex::new(HashMap::new()),
            cred,
        })
    }

    /// Sets directory `path`'s default layout (`lfs setstripe DIR` through the library).
    pub fn set_default_layout(&self, path: &Path, layout: nacre_core::Layout) -> io::Result<()> {
        self.rt.block_on(async {
            let dir = self.resolve(path).await.map_err(ioerr)?;
            if !dir.attr.is_dir() {
                return Err(ioerr(Errno::ENOTDIR));
            }
            self.client
                .set_default_layout(dir.attr.fid, Some(layout), &self.cred)
                .await
                .map_err(ioerr)
        })
    }

    /// The client this backend drives (to change its tunables).
    pub fn client(&self) -> &Arc<Client> {
        &self.client
    }

    fn clean(path: &Path) -> PathBuf {
        path.components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n),
                _ => None,
            })
            .collect()
    }

    async fn resolve(&self, path: &Path) -> Result<InodeInfo, Errno> {
        let p = Self::clean(path);
        let mut cur = Fid::ROOT;
        let mut walked = PathBuf::new();
        let comps: Vec<_> = p.components().collect();
        // Start from the deepest remembered directory.
        let mut start = 0;
        {
            let d = self.dirs.lock();
            for i in (1..=comps.len()).rev() {
                let pre: PathBuf = comps[..i].iter().collect();
                if let Some(f) = d.get(&pre) {
                    cur = *f;
                    start = i;
                    walked = pre;
                    break;
                }
            }
        }
        if start == comps.len() {
            return self.client.getattr(cur).await;
        }
        let mut info = None;
        for c in &comps[start..] {
            let i = self
                .client
                .lookup(cur, c.as_os_str().as_bytes(), &self.cred)
                .await?;
            walked.push(c);
            cur = i.attr.fid;
            if i.attr.is_dir() {
                let mut d = self.dirs.lock();
                if d.len() >= DIR_CACHE {
                    d.clear();
                }
                d.insert(walked.clone(), cur);
            }
            info = Some(i);
        }
        info.ok_or(Errno::ENOENT)
    }

    async fn parent_of<'a>(&self, path: &'a Path) -> Result<(Fid, &'a [u8]), Errno> {
        let name = path.file_name().ok_or(Errno::EINVAL)?;
        let parent = path.parent().unwrap_or(Path::new(""));
        // A remembered directory needs no round trip (a striped one would need one per
        // stripe to merge its attributes).
        if let Some(f) = self.dirs.lock().get(&Self::clean(parent)) {
            return Ok((*f, name.as_bytes()));
        }
        let p = self.resolve(parent).await?;
        if !p.attr.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        Ok((p.attr.fid, name.as_bytes()))
    }

    fn forget_dir(&self, path: &Path) {
        let p = Self::clean(path);
        self.dirs.lock().retain(|k, _| !k.starts_with(&p));
    }

    fn add(&self, f: OpenFile) -> FileHandle {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.files.lock().insert(id, Arc::new(f));
        FileHandle(id)
    }

    fn file(&self, fh: FileHandle) -> io::Result<Arc<OpenFile>> {
        self.files
            .lock()
            .get(&fh.0)
            .cloned()
            .ok_or_else(|| ioerr(Errno::EBADF))
    }
}

fn flags(o: &OpenOptions) -> OpenFlags {
    OpenFlags {
        read: o.read,
        write: o.write,
        truncate: o.truncate,
        append: false,
    }
}

fn stat_of(i: &InodeInfo) -> FileStat {
    let kind = match i.attr.kind() {
        Some(FileKind::Directory) => BKind::Dir,
        Some(FileKind::Symlink) => BKind::Symlink,
        Some(FileKind::Regular) => BKind::File,
        _ => BKind::Other,
    };
    FileStat {
        kind,
        size: i.attr.size,
        blocks: i.attr.blocks,
        ino: i.attr.fid.ino(),
        dev: 0,
        nlink: u64::from(i.attr.nlink),
        mtime_sec: i.attr.mtime.sec,
        mtime_nsec: i64::from(i.attr.mtime.nsec),
    }
}

impl FileSystem for NativeFs {
    fn describe(&self) -> String {
        format!("nacre:{}", self.spec)
    }

    fn create(&self, path: &Path, opts: OpenOptions) -> io::Result<FileHandle> {
        self.rt
            .block_on(async {
                let (parent, name) = self.parent_of(path).await?;
                let (info, h) = self
                    .client
                    .create(
                        parent,
                        name,
                        libc::S_IFREG | (opts.mode & 0o7777),
                        0,
                        &self.cred,
                        None,
                        LayoutRequest::Inherit,
                        Some(flags(&opts)),
                        opts.exclusive,
                    )
                    .await?;
                let h = h.ok_or(Errno::EIO)?;
                if opts.truncate && info.attr.size > 0 {
                    let attr = nacre_core::attr::SetAttr {
                        size: Some(0),
                        ..Default::default()
                    };
                    self.client
                        .setattr(info.attr.fid, attr, &self.cred, Some(h))
                        .await?;
                }
                Ok(self.add(OpenFile::new(info.attr.fid, h, flags(&opts), info.layout)))
            })
            .map_err(ioerr)
    }

    fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<FileHandle> {
        self.rt
            .block_on(async {
                let i = self.resolve(path).await?;
                let (f, _) = self
                    .client
                    .open(i.attr.fid, flags(&opts), &self.cred)
                    .await?;
                if opts.truncate {
                    let attr = nacre_core::attr::SetAttr {
                        size: Some(0),
                        ..Default::default()
                    };
                    self.client
                        .setattr(i.attr.fid, attr, &self.cred, Some(f.handle))
                        .await?;
                }
                Ok(self.add(f))
            })
            .map_err(ioerr)
    }

    fn pwrite(&self, fh: FileHandle, buf: &[u8], offset: u64) -> io::Result<usize> {
        let f = self.file(fh)?;
        self.rt
            .block_on(self.client.write(&f, offset, Bytes::copy_from_slice(buf)))
            .map_err(ioerr)
    }

    fn pread(&self, fh: FileHandle, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let f = self.file(fh)?;
        let d = self
            .rt
            .block_on(self.client.read(&f, offset, buf.len() as u64))
            .map_err(ioerr)?;
        buf[..d.len()].copy_from_slice(&d);
        Ok(d.len())
    }

    fn fsync(&self, fh: FileHandle) -> io::Result<()> {
        let f = self.file(fh)?;
        self.rt.block_on(self.client.fsync(&f)).map_err(ioerr)
    }

    fn close(&self, fh: FileHandle) -> io::Result<()> {
        let f = self
            .files
            .lock()
            .remove(&fh.0)
            .ok_or_else(|| ioerr(Errno::EBADF))?;
        self.rt.block_on(self.client.release(&f)).map_err(ioerr)
    }

    fn fstat(&self, fh: FileHandle) -> io::Result<FileStat> {
        let f = self.file(fh)?;
        let i = self
            .rt
            .block_on(self.client.getattr(f.fid))
            .map_err(ioerr)?;
        Ok(stat_of(&i))
    }

    /// The extents of each OST object on its OST's device, tagged with the OST index.
    fn extents(&self, fh: FileHandle, visit: &mut dyn FnMut(Extent)) -> io::Result<bool> {
        let f = self.file(fh)?;
        let objs = self
            .rt
            .block_on(self.client.object_extents(&f))
            .map_err(ioerr)?;
        let mut mapped = false;
        for (o, ext) in objs {
            let Some(ext) = ext else { continue };
            mapped = true;
            for e in ext {
                visit(Extent {
                    logical: e.logical,
                    physical: e.physical,
                    length: e.length,
                    flags: e.flags,
                    device: Some(o.ost_idx),
                });
            }
        }
        Ok(mapped)
    }

    fn stat(&self, path: &Path) -> io::Result<FileStat> {
        let i = self.rt.block_on(self.resolve(path)).map_err(ioerr)?;
        Ok(stat_of(&i))
    }

    fn unlink(&self, path: &Path) -> io::Result<()> {
        self.rt
            .block_on(async {
                let (p, n) = self.parent_of(path).await?;
                self.client.unlink(p, n, &self.cred).await
            })
            .map_err(ioerr)
    }

    fn mkdir(&self, path: &Path, mode: u32) -> io::Result<()> {
        self.rt
            .block_on(async {
                let (p, n) = self.parent_of(path).await?;
                self.client
                    .create(
                        p,
                        n,
                        libc::S_IFDIR | (mode & 0o7777),
                        0,
                        &self.cred,
                        None,
                        LayoutRequest::Inherit,
                        None,
                        true,
                    )
                    .await
                    .map(|_| ())
            })
            .map_err(ioerr)
    }

    fn rmdir(&self, path: &Path) -> io::Result<()> {
        self.forget_dir(path);
        self.rt
            .block_on(async {
                let (p, n) = self.parent_of(path).await?;
                self.client.rmdir(p, n, &self.cred).await
            })
            .map_err(ioerr)
    }

    fn readdir(
        &self,
        path: &Path,
        visit: &mut dyn FnMut(DirEntry) -> ControlFlow<()>,
    ) -> io::Result<()> {
        let dir = self.rt.block_on(self.resolve(path)).map_err(ioerr)?;
        let mut cookie = 0;
        loop {
            let (ents, eof) = self
                .rt
                .block_on(self.client.readdir(dir.attr.fid, cookie, 1024, &self.cred))
                .map_err(ioerr)?;
            for e in ents {
                cookie = e.cookie;
                let kind = match e.kind {
                    FileKind::Directory => BKind::Dir,
                    FileKind::Regular => BKind::File,
                    FileKind::Symlink => BKind::Symlink,
                    _ => BKind::Other,
                };
                let de = DirEntry {
                    name: std::ffi::OsStr::from_bytes(&e.name).to_os_string(),
                    kind: Some(kind),
                };
                if visit(de).is_break() {
                    return Ok(());
                }
            }
            if eof {
                return Ok(());
            }
        }
    }

    fn statfs(&self, _path: &Path) -> io::Result<FsStat> {
        let s = self.rt.block_on(self.client.statfs()).map_err(ioerr)?;
        Ok(FsStat {
            block_size: u64::from(s.bsize),
            blocks: s.blocks,
            blocks_free: s.bfree,
            blocks_avail: s.bavail,
            files: s.files,
            files_free: s.ffree,
        })
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.forget_dir(from);
        self.rt
            .block_on(async {
                let (sp, sn) = self.parent_of(from).await?;
                let (dp, dn) = self.parent_of(to).await?;
                self.client.rename(sp, sn, dp, dn, 0, &self.cred).await
            })
            .map_err(ioerr)
    }
}

/// Connects `--native SPEC`: an `up` directory, or `HOST:PORT:/fsname` with the key in
/// the `NACRE_KEY` environment variable.
pub struct Connector;

impl NativeConnector for Connector {
    fn connect(&self, spec: &str) -> anyhow::Result<Arc<dyn FileSystem>> {
        Ok(Arc::new(NativeFs::connect(spec)?))
    }
}
