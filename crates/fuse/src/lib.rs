//! The FUSE mount, Lustre's llite: POSIX calls from the kernel become client-library calls.
//!
//! Each request is polled once on the thread that read it from `/dev/fuse` and, if it has
//! to wait, continues as a task on the client's runtime, so a slow target never blocks
//! those threads and a request that need not wait costs no thread switch. The kernel checks
//! permissions (`default_permissions`, POSIX ACLs included) and so does the MDT, with the
//! caller's credentials from [`cred`]; the kernel caches entries and attributes for a short, tunable time;
//! opening a file fetches fresh attributes and, when the file changed since the kernel last
//! saw it, drops its cached pages and attributes: close-to-open coherence between clients.

use bytes::Bytes;
use fuser::{
    AccessFlags, Errno as FErrno, FileAttr, FileHandle, FileType, FopenFlags, Generation, INodeNo,
    InitFlags, KernelConfig, LockOwner, MountOption, OpenFlags as FOpenFlags, RenameFlags,
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyLock,
    ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use nacre_client::Client;
use nacre_client::file::OpenFile;
use nacre_client::md::CreateOutcome;
use nacre_client::stats::VfsOp;
use nacre_core::attr::{SetAttr, SetTime};
use nacre_core::{Attr, Errno, Fid, FileKind, Timespec};
use nacre_rpc::msg::{Cred, FileLock, FlockMode, InodeInfo, LayoutRequest, OpenFlags};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

mod cred;
pub use cred::caller_cred;

/// The kernel's inode number of the root.
const ROOT_INO: u64 = 1;
/// Largest write the kernel sends in one request.
pub const MAX_WRITE: u32 = 1 << 20;
/// Directory entries fetched per readdir request.
const READDIR_BATCH: u32 = 256;
/// Slots of the inode table below which it is not shrunk (see [`forget_inode`]).
const INODES_MIN_CAPACITY: usize = 1024;

/// Mount options.
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// How long the kernel may trust attributes and names without asking.
    pub attr_timeout: Duration,
    /// Threads reading `/dev/fuse`. Work that need not wait runs on them (an in-process
    /// MDT's commit included), so there are more than the two a 2-CPU node needs, and one
    /// slow request does not hold the others up.
    pub threads: usize,
    /// Let users other than the mounter use the mount (needs root or `user_allow_other`).
    pub allow_other: bool,
    pub fsname: String,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            attr_timeout: Duration::from_secs(1),
            threads: 4,
            allow_other: true,
            fsname: "nacre".to_string(),
        }
    }
}

/// What the kernel was last told about an inode: to decide on open whether its cached
/// pages are still good.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Seen {
    size: u64,
    mtime: Timespec,
    ctime: Timespec,
}

struct InodeEntry {
    fid: Fid,
    lookups: u64,
    seen: Option<Seen>,
    /// Until when the inode is known to have no [`XATTR_CAPS`] (see [`Llite::no_caps`]).
    no_caps_until: Option<Instant>,
}

/// The file capabilities a write must drop: the kernel asks for them before every write
/// (`file_remove_privs`), and FUSE caches no xattrs, so each write would cost a getxattr
/// round trip to the MDT, as many requests as the writes themselves.
const XATTR_CAPS: &[u8] = b"security.capability";

struct Llite {
    client: Arc<Client>,
    rt: tokio::runtime::Handle,
    ttl: Duration,
    inodes: Mutex<HashMap<u64, InodeEntry>>,
    files: Mutex<HashMap<u64, Arc<OpenFile>>>,
    next_fh: AtomicU64,
    notifier: Mutex<Option<fuser::Notifier>>,
    creds: cred::Creds,
    /// Tasks last answered ESTALE: for which inode, and when (see [`Llite::removed`]).
    stale_tasks: Mutex<HashMap<u32, (u64, Instant)>>,
}

/// Tasks remembered as last answered ESTALE, at most; beyond, those older than
/// [`STALE_RETRY_WINDOW`] are dropped, or all.
const STALE_TASKS_MAX: usize = 1024;

/// How soon after a task's ESTALE its next one counts as the kernel's retry: it walks
/// the path again at once.
const STALE_RETRY_WINDOW: Duration = Duration::from_secs(1);

/// Takes `nlookup` of the kernel's references to inode `ino` away, and the inode out of
/// the table with its last one. A table left at a quarter of its slots or less is shrunk
/// to twice its entries: a hash table never gives back the slots it grew to, and one
/// grown by 100k files (`mdtest`, a `tar x`) kept 10 MiB resident after they were gone.
fn forget_inode(m: &mut HashMap<u64, InodeEntry>, ino: u64, nlookup: u64) {
    let Some(e) = m.get_mut(&ino) else {
        return;
    };
    e.lookups = e.lookups.saturating_sub(nlookup);
    if e.lookups > 0 {
        return;
    }
    m.remove(&ino);
    if m.capacity() > INODES_MIN_CAPACITY && m.len() <= m.capacity() / 4 {
        m.shrink_to(m.len() * 2);
    }
}

fn errno(e: Errno) -> FErrno {
    FErrno::from_i32(e.code())
}

/// A lock the kernel asks for: `typ` is `F_RDLCK`, `F_WRLCK` or `F_UNLCK`.
fn file_lock(typ: i32, start: u64, end: u64, pid: u32) -> Result<FileLock, Errno> {
    let mode = match typ {
        libc::F_RDLCK => FlockMode::Read,
        libc::F_WRLCK => FlockMode::Write,
        libc::F_UNLCK => FlockMode::Unlock,
        _ => return Err(Errno::EINVAL),
    };
    if start > end {
        return Err(Errno::EINVAL);
    }
    Ok(FileLock {
        mode,
        start,
        end,
        pid,
    })
}

fn lock_type(mode: FlockMode) -> i32 {
    match mode {
        FlockMode::Read => libc::F_RDLCK,
        FlockMode::Write => libc::F_WRLCK,
        FlockMode::Unlock => libc::F_UNLCK,
    }
}

/// Whether thread `tid` has a signal pending that it does not block, or is gone: the
/// kernel holds a task in a FUSE request until it is answered, with the signal pending.
fn signal_pending(tid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{tid}/status")) else {
        return true;
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    let pending = field("SigPnd:") | field("ShdPnd:");
    pending & !field("SigBlk:") != 0
}

fn ino_of(fid: &Fid) -> u64 {
    if *fid == Fid::ROOT {
        ROOT_INO
    } else {
        fid.ino()
    }
}

fn file_type(mode: u32) -> FileType {
    match FileKind::from_mode(mode) {
        Some(FileKind::Directory) => FileType::Directory,
        Some(FileKind::Symlink) => FileType::Symlink,
        Some(FileKind::CharDevice) => FileType::CharDevice,
        Some(FileKind::BlockDevice) => FileType::BlockDevice,
        Some(FileKind::Fifo) => FileType::NamedPipe,
        Some(FileKind::Socket) => FileType::Socket,
        _ => FileType::RegularFile,
    }
}

fn kind_type(k: FileKind) -> FileType {
    file_type(k.mode_bits())
}

fn to_file_attr(info: &InodeInfo) -> FileAttr {
    let a = &info.attr;
    let blksize = info
        .layout
        .as_ref()
        .and_then(|l| l.components.first())
        .map_or(4096, |c| c.stripe_size.clamp(4096, 4 << 20));
    FileAttr {
        ino: INodeNo(ino_of(&a.fid)),
        size: a.size,
        blocks: a.blocks,
        atime: a.atime.to_system_time(),
        mtime: a.mtime.to_system_time(),
        ctime: a.ctime.to_system_time(),
        crtime: a.btime.to_system_time(),
        kind: file_type(a.mode),
        perm: (a.mode & 0o7777) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize,
        flags: 0,
    }
}

fn seen(a: &Attr) -> Seen {
    Seen {
        size: a.size,
        mtime: a.mtime,
        ctime: a.ctime,
    }
}

fn set_time(t: TimeOrNow) -> SetTime {
    match t {
        TimeOrNow::Now => SetTime::Now,
        TimeOrNow::SpecificTime(st) => SetTime::At(Timespec::from_system_time(st)),
    }
}

fn open_flags(flags: i32) -> OpenFlags {
    let acc = flags & libc::O_ACCMODE;
    OpenFlags {
        read: acc == libc::O_RDONLY || acc == libc::O_RDWR,
        write: acc == libc::O_WRONLY || acc == libc::O_RDWR,
        truncate: flags & libc::O_TRUNC != 0,
        append: flags & libc::O_APPEND != 0,
    }
}

impl Fs {
    /// `file_remove_privs` for a write that bypasses the kernel's cache: capabilities go
    /// unless known absent, set-id bits when the kernel says the writer lacks CAP_FSETID.
    async fn remove_privs(
        &self,
        ino: u64,
        fid: Fid,
        kill_setid: bool,
        caps_absent: bool,
        cred: &Cred,
    ) -> Result<(), Errno> {
        if !caps_absent {
            match self.0.client.removexattr(fid, XATTR_CAPS, cred).await {
                Ok(()) | Err(Errno::ENODATA) => self.0.set_no_caps(ino, true),
                Err(e) => return Err(e),
            }
        }
        if kill_setid {
            self.0.client.kill_setid(fid, cred).await?;
        }
        Ok(())
    }
}

/// An `O_APPEND` handle open for writing bypasses the kernel's page cache: its appends
/// land where the MDT's append lock says (see [`Client::append`]), not always at the
/// offset the kernel chose, so pages the kernel filled at that offset would be wrong; and
/// the cache sends a write that crosses a page it does not hold as two requests, which
/// would be two appends, with room for another client's between them.
fn append_open_flags(flags: OpenFlags) -> FopenFlags {
    if flags.append && flags.write {
        FopenFlags::FOPEN_DIRECT_IO
    } else {
        FopenFlags::empty()
    }
}

impl Llite {
    /// The caller's credentials, for the MDT to check.
    fn cred(&self, req: &Request) -> Cred {
        self.creds.of(req.pid(), req.uid(), req.gid())
    }

    fn fid(&self, ino: INodeNo) -> Result<Fid, Errno> {
        if ino.0 == ROOT_INO {
            return Ok(Fid::ROOT);
        }
        self.inodes
            .lock()
            .get(&ino.0)
            .map(|e| e.fid)
            .ok_or(Errno::ESTALE)
    }

    /// What a getattr or open by task `pid` of inode `ino`, which another client removed,
    /// answers: ESTALE, unless that task heard ESTALE last for this same inode and has had
    /// no success since; then ENOENT.
    ///
    /// On ESTALE the kernel walks the path once more (once), looking each name up again:
    /// a name this mount still maps to the removed inode (renamed over, or removed and
    /// made again, by another client) then finds the file it names now. A retry that meets
    /// the same removed inode again hears ENOENT: a walk from a descriptor of the removed
    /// inode (a lookup or unlink through a directory's descriptor, as `rm -rf` makes), as
    /// Lustre's llite answers (`ll_inode_revalidate_fini`) and `rm -rf` passes over.
    ///
    /// Keyed by inode, not by task alone: a task that heard ESTALE for one inode and then
    /// meets another removed one (two clients' `rm -rf` of one tree: a file, then a
    /// directory another client removed) must hear ESTALE for the second, so the kernel
    /// looks its name up again and drops its cached entry. Answered ENOENT, `rm` took the
    /// name for one it could not stat, unlinked it as a file, and the kernel, still caching
    /// a directory there, failed that with EISDIR.
    fn removed(&self, pid: u32, ino: u64) -> Errno {
        let now = Instant::now();
        let mut m = self.stale_tasks.lock();
        if m.get(&pid)
            .is_some_and(|&(i, t)| i == ino && now.duration_since(t) < STALE_RETRY_WINDOW)
        {
            m.remove(&pid);
            return Errno::ENOENT;
        }
        if m.len() >= STALE_TASKS_MAX {
            m.retain(|_, (_, t)| now.duration_since(*t) < STALE_RETRY_WINDOW);
            if m.len() >= STALE_TASKS_MAX {
                m.clear();
            }
        }
        m.insert(pid, (ino, now));
        Errno::ESTALE
    }

    /// Task `pid`'s getattr or open succeeded: a retry after its last ESTALE, if any,
    /// found a live file.
    fn found(&self, pid: u32) {
        let mut m = self.stale_tasks.lock();
        if !m.is_empty() {
            m.remove(&pid);
        }
    }

    /// Records an inode the kernel now knows (one more lookup reference).
    ///
    /// `seen` is what the kernel's cached pages reflect, so only an inode new to the
    /// kernel (no pages yet) takes these attributes as its `seen`; for a known one, newer
    /// attributes from a lookup or getattr say nothing about its pages, and the next open
    /// compares against the last open's view.
    fn remember(&self, info: &InodeInfo) {
        let ino = ino_of(&info.attr.fid);
        let mut m = self.inodes.lock();
        let e = m.entry(ino).or_insert(InodeEntry {
            fid: info.attr.fid,
            lookups: 0,
            seen: Some(seen(&info.attr)),
            no_caps_until: None,
        });
        e.fid = info.attr.fid;
        e.lookups += 1;
    }

    /// Whether `ino` is known to have no file capabilities ([`XATTR_CAPS`]): this mount
    /// made it, or the MDT said so, within the attribute timeout. As the kernel trusts the
    /// mode bits a write must clear (set-user-ID, set-group-ID) for that long, so the
    /// capabilities another client sets meanwhile are seen as late as those bits (Lustre's
    /// client caches xattrs too, `llite.*.xattr_cache`).
    fn no_caps(&self, ino: u64) -> bool {
        self.inodes
            .lock()
            .get(&ino)
            .and_then(|e| e.no_caps_until)
            .is_some_and(|t| Instant::now() < t)
    }

    /// Records that `ino` has no file capabilities as of now, or forgets what was known
    /// (`known == false`: they may have changed through this mount).
    fn set_no_caps(&self, ino: u64, known: bool) {
        if let Some(e) = self.inodes.lock().get_mut(&ino) {
            e.no_caps_until = known.then(|| Instant::now() + self.ttl);
        }
    }

    /// Drops the kernel's pages and attributes of files another client changed (an MDT's
    /// callback; runs on a blocking thread, since the kernel waits for reads in flight).
    fn drop_cached(&self, fids: Option<&[Fid]>) {
        let inos: Vec<u64> = {
            let mut m = self.inodes.lock();
            let inos: Vec<u64> = match fids {
                Some(fids) => fids
                    .iter()
                    .map(ino_of)
                    .filter(|i| m.contains_key(i))
                    .collect(),
                None => m.keys().copied().collect(),
            };
            // Whatever else changed, their xattrs may have too.
            for i in &inos {
                if let Some(e) = m.get_mut(i) {
                    e.no_caps_until = None;
                }
            }
            inos
        };
        // A copy: the invalidations may block, and nobody else should wait on the lock.
        let notifier = self.notifier.lock().clone();
        if let Some(n) = notifier {
            for ino in inos {
                let _ = n.inval_inode(INodeNo(ino), 0, 0);
            }
        }
    }

    /// Runs a request's work: polled once on this `/dev/fuse` thread, and handed to the
    /// runtime only if it has to wait. Most requests never wait (an attribute or name the
    /// client holds, an in-process target's handler, an uncontended commit, a write that
    /// fits in write-behind), and a thread switch costs more than their work.
    fn spawn<F>(&self, op: VfsOp, f: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let client = self.client.clone();
        let start = Instant::now();
        let mut f = Box::pin(async move {
            f.await;
            client.llite_stats.record(op as u16, start.elapsed());
        });
        let _rt = self.rt.enter();
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        // A panic stays with this request (its reply, dropped unsent, answers EIO), as it
        // would in a task: it must not take a `/dev/fuse` thread down.
        let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            f.as_mut().poll(&mut cx).is_pending()
        }));
        match first {
            // The runtime polls it again at once, with a waker that counts.
            Ok(true) => drop(self.rt.spawn(f)),
            Ok(false) => {}
            Err(_) => tracing::error!(target: "llite", "{} request failed (panicked)", op.name()),
        }
    }

    fn file(&self, fh: FileHandle) -> Result<Arc<OpenFile>, Errno> {
        self.files.lock().get(&fh.0).cloned().ok_or(Errno::EBADF)
    }

    fn add_file(&self, f: OpenFile) -> u64 {
        let id = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.files.lock().insert(id, Arc::new(f));
        id
    }
}

/// Shares the FUSE state with spawned tasks.
#[derive(Clone)]
struct Fs(Arc<Llite>);

impl Fs {
    fn entry_reply(&self, info: &InodeInfo, reply: ReplyEntry) {
        self.0.remember(info);
        reply.entry(&self.0.ttl, &to_file_attr(info), Generation(0));
    }
}

macro_rules! try_reply {
    ($reply:expr, $e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => {
                $reply.error(errno(e));
                return;
            }
        }
    };
}

impl fuser::Filesystem for Fs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(MAX_WRITE);
        let _ = config.set_max_readahead(MAX_WRITE);
        let _ = config.set_max_background(64);
        // POSIX ACLs: the kernel checks with them too and leaves the umask to the MDT,
        // which applies it only where no default ACL replaces it.
        let want = InitFlags::FUSE_PARALLEL_DIROPS
            | InitFlags::FUSE_ASYNC_READ
            | InitFlags::FUSE_BIG_WRITES
            | InitFlags::FUSE_POSIX_ACL
            | InitFlags::FUSE_DONT_MASK
            // An O_APPEND descriptor bypasses the page cache (`FOPEN_DIRECT_IO`); a
            // shared mapping of it still goes through the cache, as on a local file.
            | InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP
            // `fcntl` and `flock` locks go to the MDT, so every client sees them (the
            // kernel sends a `flock` as a whole-file lock owned by the open file).
            | InitFlags::FUSE_POSIX_LOCKS
            | InitFlags::FUSE_FLOCK_LOCKS;
        let _ = config.add_capabilities(want & config.capabilities());
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let pfid = try_reply!(reply, self.0.fid(parent));
        let name = name.as_bytes().to_vec();
        let cred = self.0.cred(req);
        let me = self.clone();
        self.0.spawn(VfsOp::Lookup, async move {
            match me.0.client.lookup(pfid, &name, &cred).await {
                Ok(info) => me.entry_reply(&info, reply),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        if ino.0 == ROOT_INO {
            return;
        }
        forget_inode(&mut self.0.inodes.lock(), ino.0, nlookup);
    }

    fn getattr(&self, req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let fid = try_reply!(reply, self.0.fid(ino));
        let pid = req.pid();
        let me = self.clone();
        self.0.spawn(VfsOp::Getattr, async move {
            match me.0.client.getattr(fid).await {
                Ok(info) => {
                    me.0.found(pid);
                    reply.attr(&me.0.ttl, &to_file_attr(&info))
                }
                Err(Errno::ESTALE) => reply.error(errno(me.0.removed(pid, ino.0))),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let fid = try_reply!(reply, self.0.fid(ino));
        let attr = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: atime.map(set_time),
            mtime: mtime.map(set_time),
            ctime: ctime.map(Timespec::from_system_time),
        };
        let cred = self.0.cred(req);
        // ftruncate: the handle's MDT handle, which is enough to truncate if writable.
        let handle = fh.and_then(|h| self.0.files.lock().get(&h.0).map(|f| f.handle));
        let me = self.clone();
        self.0.spawn(VfsOp::Setattr, async move {
            match me.0.client.setattr(fid, attr, &cred, handle).await {
                Ok(info) => reply.attr(&me.0.ttl, &to_file_attr(&info)),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let fid = try_reply!(reply, self.0.fid(ino));
        let me = self.clone();
        self.0.spawn(VfsOp::Readlink, async move {
            match me.0.client.readlink(fid).await {
                Ok(t) => reply.data(&t),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        self.make(req, parent, name, (mode, umask), rdev, None, reply);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        self.make(
            req,
            parent,
            name,
            (libc::S_IFDIR | (mode & 0o7777), umask),
            0,
            None,
            reply,
        );
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let t = target.as_os_str().as_bytes().to_vec();
        self.make(
            req,
            parent,
            link_name,
            (libc::S_IFLNK | 0o777, 0),
            0,
            Some(t),
            reply,
        );
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(req, parent, name, false, reply);
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(req, parent, name, true, reply);
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let sp = try_reply!(reply, self.0.fid(parent));
        let dp = try_reply!(reply, self.0.fid(newparent));
        if flags.contains(RenameFlags::RENAME_WHITEOUT) {
            reply.error(FErrno::EINVAL);
            return;
        }
        let (sn, dn) = (name.as_bytes().to_vec(), newname.as_bytes().to_vec());
        let cred = self.0.cred(req);
        let me = self.clone();
        self.0.spawn(VfsOp::Rename, async move {
            match me
                .0
                .client
                .rename(sp, &sn, dp, &dn, flags.bits(), &cred)
                .await
            {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let fid = try_reply!(reply, self.0.fid(ino));
        let pfid = try_reply!(reply, self.0.fid(newparent));
        let name = newname.as_bytes().to_vec();
        let cred = self.0.cred(req);
        let me = self.clone();
        self.0.spawn(VfsOp::Link, async move {
            match me.0.client.link(fid, pfid, &name, &cred).await {
                Ok(info) => me.entry_reply(&info, reply),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: FOpenFlags, reply: ReplyOpen) {
        let fid = try_reply!(reply, self.0.fid(ino));
        let flags = open_flags(flags.0);
        let cred = self.0.cred(req);
        let pid = req.pid();
        let me = self.clone();
        self.0.spawn(VfsOp::Open, async move {
            match me.0.client.open(fid, flags, &cred).await {
                // An open orphan (unlinked, still open somewhere): the kernel came to it
                // through a name this mount caches, which another client has since
                // renamed over or removed. Lustre's open resolves the name on the MDT
                // (the open intent) and so opens what the name is now; here ESTALE makes
                // the kernel look the name up again (close-to-open, as on NFS). A
                // descriptor already open keeps the orphan.
                Ok((f, info)) if info.attr.nlink == 0 && !info.attr.is_dir() => {
                    let _ = me.0.client.release(&f).await;
                    reply.error(errno(me.0.removed(pid, ino.0)));
                }
                Ok((f, info)) => {
                    me.0.found(pid);
                    let keep = me.refresh_kernel_view(&info).await;
                    let fh = me.0.add_file(f);
                    // A read-only handle has nothing to flush at close: no FLUSH request.
                    let mut fl = if flags.write {
                        FopenFlags::empty()
                    } else {
                        FopenFlags::FOPEN_NOFLUSH
                    };
                    fl |= append_open_flags(flags);
                    if keep {
                        fl |= FopenFlags::FOPEN_KEEP_CACHE;
                    }
                    reply.opened(FileHandle(fh), fl);
                }
                Err(Errno::ESTALE) => reply.error(errno(me.0.removed(pid, ino.0))),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let pfid = try_reply!(reply, self.0.fid(parent));
        let name = name.as_bytes().to_vec();
        let mut cred = self.0.cred(req);
        cred.umask = umask;
        let of = open_flags(flags);
        let excl = flags & libc::O_EXCL != 0;
        let me = self.clone();
        self.0.spawn(VfsOp::Create, async move {
            let r =
                me.0.client
                    .create_or_open(
                        pfid,
                        &name,
                        libc::S_IFREG | (mode & 0o7777),
                        0,
                        &cred,
                        None,
                        LayoutRequest::Inherit,
                        Some(of),
                        excl,
                    )
                    .await;
            match r {
                Ok(CreateOutcome {
                    inode: info,
                    handle: Some(handle),
                    created,
                }) => {
                    me.0.remember(&info);
                    // A new file has no xattrs but the ACLs its directory gave it.
                    if created {
                        me.0.set_no_caps(ino_of(&info.attr.fid), true);
                    }
                    let f = OpenFile::new(info.attr.fid, handle, of, info.layout.clone());
                    let fh = me.0.add_file(f);
                    reply.created(
                        &me.0.ttl,
                        &to_file_attr(&info),
                        Generation(0),
                        FileHandle(fh),
                        if of.write {
                            append_open_flags(of)
                        } else {
                            FopenFlags::FOPEN_NOFLUSH
                        },
                    );
                }
                Ok(CreateOutcome { handle: None, .. }) => reply.error(FErrno::EIO),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: FOpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let f = try_reply!(reply, self.0.file(fh));
        let me = self.clone();
        self.0.spawn(VfsOp::Read, async move {
            match me.0.client.read(&f, offset, u64::from(size)).await {
                Ok(d) => reply.data(&d),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        flags: FOpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let f = try_reply!(reply, self.0.file(fh));
        let me = self.clone();
        if flags.0 & libc::O_APPEND != 0 {
            // The kernel put it at the end it cached; it goes at the end every client
            // sees (another client may have appended since).
            let data = Bytes::copy_from_slice(data);
            let n = data.len();
            // The kernel drops privileges only for writes through its cache.
            let kill_setid = write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID);
            let caps_absent = self.0.no_caps(ino.0);
            let cred = self.0.cred(req);
            self.0.spawn(VfsOp::Write, async move {
                if let Err(e) = me
                    .remove_privs(ino.0, f.fid, kill_setid, caps_absent, &cred)
                    .await
                {
                    return reply.error(errno(e));
                }
                match me.0.client.append(&f, data).await {
                    Ok(at) => {
                        reply.written(n as u32);
                        if at != offset {
                            // What the kernel cached of the file's end is not the file's.
                            let fid = f.fid;
                            tokio::task::spawn_blocking(move || me.0.drop_cached(Some(&[fid])));
                        }
                    }
                    Err(e) => reply.error(errno(e)),
                }
            });
            return;
        }
        // Usually the kernel's bytes are copied once, straight into write-behind; a write
        // that needs a component instantiated first takes a copy and asks the MDT.
        match try_reply!(reply, self.0.client.write_gather(&f, offset, data)) {
            Some(ready) => {
                let n = data.len() as u32;
                self.0.spawn(VfsOp::Write, async move {
                    me.0.client.write_send(&f, ready).await;
                    reply.written(n);
                });
            }
            None => {
                let data = Bytes::copy_from_slice(data);
                self.0.spawn(VfsOp::Write, async move {
                    match me.0.client.write(&f, offset, data).await {
                        Ok(n) => reply.written(n as u32),
                        Err(e) => reply.error(errno(e)),
                    }
                });
            }
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let f = try_reply!(reply, self.0.file(fh));
        let me = self.clone();
        self.0.spawn(VfsOp::Fallocate, async move {
            // The kernel sets the new size and drops punched pages itself on success.
            match me.0.client.fallocate(&f, offset, length, mode).await {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close(2): written data goes to the OSTs now, and a background write's error is
        // reported here.
        let f = try_reply!(reply, self.0.file(fh));
        if self.0.client.flock_taken(&f.fid, lock_owner.0) {
            // POSIX: a close of any descriptor of the file gives back the process's locks.
            let me = self.clone();
            self.0.spawn(VfsOp::Flush, async move {
                let flushed = me.0.client.flush(&f).await;
                let released = me.0.client.flock_release_owner(&f, lock_owner.0).await;
                match flushed.and(released) {
                    Ok(()) => reply.ok(),
                    Err(e) => reply.error(errno(e)),
                }
            });
            return;
        }
        match self.0.client.flush_ready(&f) {
            Some(Ok(())) => return reply.ok(),
            Some(Err(e)) => return reply.error(errno(e)),
            None => {}
        }
        let me = self.clone();
        self.0.spawn(VfsOp::Flush, async move {
            match me.0.client.flush(&f).await {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: FOpenFlags,
        lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let Some(f) = self.0.files.lock().remove(&fh.0) else {
            reply.ok();
            return;
        };
        let me = self.clone();
        self.0.spawn(VfsOp::Close, async move {
            // The last close of an open file description: the MDT's close of the handle
            // gives back its `flock` locks.
            if let Some(o) = lock_owner {
                me.0.client.flock_forget_owner(&f, o.0);
            }
            if let Err(e) = me.0.client.release(&f).await {
                tracing::debug!(target: "llite", "close of {}: {e}", f.fid);
            }
            reply.ok();
        });
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let f = try_reply!(reply, self.0.file(fh));
        let me = self.clone();
        self.0.spawn(VfsOp::Fsync, async move {
            match me.0.client.fsync(&f).await {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn getlk(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        reply: ReplyLock,
    ) {
        let f = try_reply!(reply, self.0.file(fh));
        let lock = try_reply!(reply, file_lock(typ, start, end, pid));
        let me = self.clone();
        self.0.spawn(VfsOp::Flock, async move {
            match me.0.client.flock_test(&f, lock_owner.0, lock).await {
                Ok(Some(c)) => reply.locked(c.start, c.end, lock_type(c.mode), c.pid),
                Ok(None) => reply.locked(start, end, libc::F_UNLCK, 0),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn setlk(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        let f = try_reply!(reply, self.0.file(fh));
        let lock = try_reply!(reply, file_lock(typ, start, end, pid));
        // The thread that asked: a signal to it ends a wait.
        let caller = req.pid();
        let me = self.clone();
        self.0.spawn(VfsOp::Flock, async move {
            let interrupted = || signal_pending(caller);
            match me
                .0
                .client
                .flock_set(&f, lock_owner.0, lock, sleep, interrupted)
                .await
            {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: FOpenFlags, reply: ReplyOpen) {
        let _ = try_reply!(reply, self.0.fid(ino));
        self.0
            .client
            .llite_stats
            .record(VfsOp::Opendir as u16, Duration::ZERO);
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let fid = try_reply!(reply, self.0.fid(ino));
        let cred = self.0.cred(req);
        let me = self.clone();
        self.0.spawn(VfsOp::Readdir, async move {
            let mut cookie = offset;
            if cookie == 0 {
                if reply.add(INodeNo(ino_of(&fid)), 1, FileType::Directory, ".") {
                    reply.ok();
                    return;
                }
                cookie = 1;
            }
            if cookie == 1 {
                if reply.add(INodeNo(ino_of(&fid)), 2, FileType::Directory, "..") {
                    reply.ok();
                    return;
                }
                cookie = 2;
            }
            let start = if cookie <= 2 { 0 } else { cookie };
            match me.0.client.readdir(fid, start, READDIR_BATCH, &cred).await {
                Ok((entries, _eof)) => {
                    for e in entries {
                        if reply.add(
                            INodeNo(ino_of(&e.fid)),
                            e.cookie,
                            kind_type(e.kind),
                            OsStr::from_bytes(&e.name),
                        ) {
                            break;
                        }
                    }
                    reply.ok();
                }
                // Removed by another client since this mount looked it up (an open of a
                // directory asks the MDT nothing): as reading a directory removed on a
                // local file system finds nothing, ENOENT, not ESTALE, which no reader
                // can retry.
                Err(Errno::ESTALE) => reply.error(errno(Errno::ENOENT)),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: FOpenFlags,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // Every namespace change is in its MDT's journal before it is acknowledged; this
        // makes that journal durable.
        let fid = try_reply!(reply, self.0.fid(ino));
        let me = self.clone();
        self.0.spawn(VfsOp::Fsync, async move {
            match me.0.client.sync_dir(fid).await {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let me = self.clone();
        self.0.spawn(VfsOp::Statfs, async move {
            match me.0.client.statfs().await {
                Ok(s) => reply.statfs(
                    s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.bsize,
                ),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let fid = try_reply!(reply, self.0.fid(ino));
        let (name, value) = (name.as_bytes().to_vec(), value.to_vec());
        if name == XATTR_CAPS {
            self.0.set_no_caps(ino.0, false);
        }
        let cred = self.0.cred(req);
        let me = self.clone();
        self.0.spawn(VfsOp::Setxattr, async move {
            match me.0.client.setxattr(fid, &name, &value, flags, &cred).await {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let fid = try_reply!(reply, self.0.fid(ino));
        let name = name.as_bytes().to_vec();
        let caps = name == XATTR_CAPS;
        if caps && self.0.no_caps(ino.0) {
            self.0
                .client
                .llite_stats
                .record(VfsOp::Getxattr as u16, Duration::ZERO);
            reply.error(errno(Errno::ENODATA));
            return;
        }
        let cred = self.0.cred(req);
        let me = self.clone();
        self.0.spawn(VfsOp::Getxattr, async move {
            match me.0.client.getxattr(fid, &name, &cred).await {
                Ok(v) => xattr_reply(reply, size, &v),
                Err(Errno::ENODATA) if caps => {
                    me.0.set_no_caps(ino.0, true);
                    reply.error(errno(Errno::ENODATA));
                }
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let fid = try_reply!(reply, self.0.fid(ino));
        let cred = self.0.cred(req);
        let me = self.clone();
        self.0.spawn(VfsOp::Listxattr, async move {
            match me.0.client.listxattr(fid, &cred).await {
                Ok(names) => {
                    let mut buf = Vec::new();
                    for n in names {
                        buf.extend_from_slice(&n);
                        buf.push(0);
                    }
                    xattr_reply(reply, size, &buf);
                }
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let fid = try_reply!(reply, self.0.fid(ino));
        let name = name.as_bytes().to_vec();
        if name == XATTR_CAPS {
            self.0.set_no_caps(ino.0, false);
        }
        let cred = self.0.cred(req);
        let me = self.clone();
        self.0.spawn(VfsOp::Removexattr, async move {
            match me.0.client.removexattr(fid, &name, &cred).await {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        // The kernel checks permissions (default_permissions) before asking.
        reply.ok();
    }
}

fn xattr_reply(reply: ReplyXattr, size: u32, v: &[u8]) {
    if size == 0 {
        reply.size(v.len() as u32);
    } else if v.len() > size as usize {
        reply.error(FErrno::ERANGE);
    } else {
        reply.data(v);
    }
}

impl Fs {
    #[allow(clippy::too_many_arguments)]
    fn make(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        (mode, umask): (u32, u32),
        rdev: u32,
        symlink: Option<Vec<u8>>,
        reply: ReplyEntry,
    ) {
        let pfid = try_reply!(reply, self.0.fid(parent));
        let name = name.as_bytes().to_vec();
        let mut cred = self.0.cred(req);
        cred.umask = umask;
        let me = self.clone();
        let op = if symlink.is_some() {
            VfsOp::Symlink
        } else if mode & libc::S_IFMT == libc::S_IFDIR {
            VfsOp::Mkdir
        } else {
            VfsOp::Mknod
        };
        self.0.spawn(op, async move {
            let r =
                me.0.client
                    .create(
                        pfid,
                        &name,
                        mode,
                        rdev,
                        &cred,
                        symlink.as_deref(),
                        LayoutRequest::Inherit,
                        None,
                        true,
                    )
                    .await;
            match r {
                Ok((info, _)) => me.entry_reply(&info, reply),
                Err(e) => reply.error(errno(e)),
            }
        });
    }

    fn remove(&self, req: &Request, parent: INodeNo, name: &OsStr, dir: bool, reply: ReplyEmpty) {
        // A directory another client removed (and this one forgot) holds no names: its
        // entries are ENOENT, as in a directory removed on a local file system, so two
        // `rm -rf` of one tree both succeed.
        let pfid = match self.0.fid(parent) {
            Ok(f) => f,
            Err(Errno::ESTALE) => return reply.error(errno(Errno::ENOENT)),
            Err(e) => return reply.error(errno(e)),
        };
        let name = name.as_bytes().to_vec();
        let cred = self.0.cred(req);
        let me = self.clone();
        self.0
            .spawn(if dir { VfsOp::Rmdir } else { VfsOp::Unlink }, async move {
                let r = if dir {
                    me.0.client.rmdir(pfid, &name, &cred).await
                } else {
                    me.0.client.unlink(pfid, &name, &cred).await
                };
                match r {
                    Ok(()) => reply.ok(),
                    Err(Errno::ESTALE) => reply.error(errno(Errno::ENOENT)),
                    Err(e) => reply.error(errno(e)),
                }
            });
    }

    /// After an open: if the file changed since the kernel last saw it, drop the kernel's
    /// attributes and pages. Returns whether cached pages may be kept.
    async fn refresh_kernel_view(&self, info: &InodeInfo) -> bool {
        let ino = ino_of(&info.attr.fid);
        let now = seen(&info.attr);
        let before = {
            let mut m = self.0.inodes.lock();
            match m.get_mut(&ino) {
                Some(e) => e.seen.replace(now),
                None => None,
            }
        };
        if before == Some(now) {
            return true;
        }
        // The invalidation may wait for pages that READs in flight hold, and those need a
        // free `/dev/fuse` thread: it runs on the blocking pool, not on one.
        let me = self.clone();
        let _ = tokio::task::spawn_blocking(move || {
            let notifier = me.0.notifier.lock().clone();
            if let Some(n) = notifier {
                let _ = n.inval_inode(INodeNo(ino), 0, 0);
            }
        })
        .await;
        false
    }
}

/// A mounted file system; unmounts when dropped.
pub struct Mount {
    session: Option<fuser::BackgroundSession>,
}

impl Mount {
    /// Unmounts and waits for the session to end.
    pub fn unmount(mut self) -> std::io::Result<()> {
        match self.session.take() {
            Some(s) => s.umount_and_join(),
            None => Ok(()),
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Some(s) = self.session.take() {
            let _ = s.umount_and_join();
        }
    }
}

/// Mounts `client` at `mountpoint`; requests run on `rt`.
pub fn mount(
    client: Arc<Client>,
    rt: tokio::runtime::Handle,
    mountpoint: &Path,
    opts: &MountOptions,
) -> std::io::Result<Mount> {
    let llite = Arc::new(Llite {
        client,
        rt,
        ttl: opts.attr_timeout,
        inodes: Mutex::new(HashMap::new()),
        files: Mutex::new(HashMap::new()),
        next_fh: AtomicU64::new(1),
        notifier: Mutex::new(None),
        creds: cred::Creds::default(),
        stale_tasks: Mutex::new(HashMap::new()),
    });
    let mut cfg = fuser::Config::default();
    cfg.mount_options = vec![
        MountOption::FSName(opts.fsname.clone()),
        MountOption::Subtype("nacre".to_string()),
        MountOption::DefaultPermissions,
        MountOption::Dev,
        MountOption::Suid,
    ];
    if opts.allow_other {
        cfg.acl = fuser::SessionACL::All;
    }
    cfg.n_threads = Some(opts.threads.max(1));
    cfg.clone_fd = true;
    let session = fuser::Session::new(Fs(llite.clone()), mountpoint, &cfg)?;
    *llite.notifier.lock() = Some(session.notifier());
    let weak = Arc::downgrade(&llite);
    llite
        .client
        .set_cache_hook(Arc::new(move |fids: Option<&[Fid]>| {
            if let Some(l) = weak.upgrade() {
                l.drop_cached(fids);
            }
        }));
    let bg = session.spawn()?;
    Ok(Mount { session: Some(bg) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(n: u64) -> InodeEntry {
        InodeEntry {
            fid: Fid::new(0x200000400, n as u32, 0),
            lookups: 2,
            seen: None,
            no_caps_until: None,
        }
    }

    #[test]
    fn forgotten_inodes_give_their_table_back() {
        let mut m = HashMap::new();
        for i in 2..100_002 {
            m.insert(i, entry(i));
        }
        let grown = m.capacity();
        // One reference of two taken away: every inode stays.
        for i in 2..100_002 {
            forget_inode(&mut m, i, 1);
        }
        assert_eq!((m.len(), m.capacity()), (100_000, grown));
        for i in 2..99_002 {
            forget_inode(&mut m, i, 1);
        }
        assert_eq!(m.len(), 1000);
        assert!(
            m.capacity() < grown / 16,
            "{} of {grown} slots kept",
            m.capacity()
        );
        for i in 99_002..100_002 {
            assert_eq!(m.get(&i).map(|e| e.lookups), Some(1));
            forget_inode(&mut m, i, 5);
        }
        assert!(m.is_empty());
        assert!(m.capacity() <= INODES_MIN_CAPACITY, "{}", m.capacity());
        // Unknown inodes are ignored.
        forget_inode(&mut m, 7, 1);
    }
}
