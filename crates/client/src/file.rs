//! Open files: the handle the MDT gave, the layout as last seen, whether this handle wrote
//! (which the close reports, so the MDT settles the size), and the bytes of a small
//! Data-on-MDT file that came with the open reply (read-on-open).

use crate::Client;
use bytes::Bytes;
use nacre_core::{Errno, Fid, Layout};
use nacre_rpc::msg::{Cred, InodeInfo, OpenFlags, Reply, Request};
use parking_lot::RwLock;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// `fallocate(2)` mode bits (linux/falloc.h), as the kernel passes them through FUSE.
pub const FALLOC_FL_KEEP_SIZE: i32 = 0x01;
pub const FALLOC_FL_PUNCH_HOLE: i32 = 0x02;
pub const FALLOC_FL_ZERO_RANGE: i32 = 0x10;

pub struct OpenFile {
    pub fid: Fid,
    /// The MDT's open handle.
    pub handle: u64,
    pub flags: OpenFlags,
    layout: RwLock<Option<Layout>>,
    wrote: AtomicBool,
    /// The whole file as it was at open (small DoM files), with the file's change count
    /// on this client then: valid until this client changes the file's data.
    content: RwLock<Option<(Bytes, u64)>>,
    readahead: parking_lot::Mutex<crate::readahead::Readahead>,
    pub(crate) writeback: Arc<crate::writeback::WriteBack>,
}

impl OpenFile {
    pub fn new(fid: Fid, handle: u64, flags: OpenFlags, layout: Option<Layout>) -> OpenFile {
        OpenFile {
            fid,
            handle,
            flags,
            layout: RwLock::new(layout),
            wrote: AtomicBool::new(false),
            content: RwLock::new(None),
            readahead: parking_lot::Mutex::new(Default::default()),
            writeback: Arc::new(Default::default()),
        }
    }

    /// The requested range from the open-time content, if it is still current.
    fn cached(&self, off: u64, len: u64, changes: u64) -> Option<Bytes> {
        let c = self.content.read();
        let (c, at) = c.as_ref()?;
        if *at != changes {
            return None;
        }
        let size = c.len() as u64;
        if off >= size {
            return Some(Bytes::new());
        }
        let end = off.saturating_add(len).min(size);
        Some(c.slice(off as usize..end as usize))
    }

    pub fn layout(&self) -> Option<Layout> {
        self.layout.read().clone()
    }

    pub(crate) fn set_layout(&self, layout: Layout) {
        *self.layout.write() = Some(layout);
    }

    pub fn wrote(&self) -> bool {
        self.wrote.load(Ordering::Acquire)
    }
}

/// What became of a write offered to write-behind.
enum Gathered {
    /// Cached; these extents are ready to go.
    Ready(crate::writeback::Ready),
    /// It reaches a component not yet instantiated: the MDT must be asked first.
    NeedLayout,
    /// An OST it reaches has not granted the space: nothing was cached.
    NoGrant,
}

impl Client {
    pub async fn open(
        &self,
        fid: Fid,
        flags: OpenFlags,
        cred: &Cred,
    ) -> Result<(OpenFile, InodeInfo), Errno> {
        let req = Request::Open {
            fid,
            flags,
            cred: cred.clone(),
        };
        let changes = self.local_changes.of(&fid);
        // Writes of this client still on their way are not in what the MDT sends back.
        let dirty = self.has_dirty(&fid);
        match self
            .md_call_bulk(self.mdt_of(&fid), req, Bytes::new())
            .await?
        {
            (
                Reply::Opened {
                    inode,
                    handle,
                    data_cksum,
                },
                data,
            ) => {
                self.keep_open(fid, handle, flags, cred);
                let f = OpenFile::new(fid, handle, flags, inode.layout.clone());
                let inode = self.complete(inode).await?;
                // Read-on-open: the MDT sent the whole (small, DoM-only) file. Damaged on
                // the way, it is dropped: reads then ask for it, and are checked.
                if !dirty
                    && !data.is_empty()
                    && data.len() as u64 == inode.attr.size
                    && self.read_on_open_intact(fid, &data, data_cksum.as_ref())
                {
                    *f.content.write() = Some((data, changes));
                }
                Ok((f, inode))
            }
            _ => Err(Errno::EPROTO),
        }
    }

    /// Whether read-on-open bytes match the checksums the MDT sent (with
    /// `osc.*.checksums` on; a reply without them is not used then).
    fn read_on_open_intact(
        &self,
        fid: Fid,
        data: &Bytes,
        cksum: Option<&nacre_rpc::msg::BulkCksum>,
    ) -> bool {
        let Some(kind) = self.tunables.checksums() else {
            return true;
        };
        let Some(c) = cksum.filter(|c| c.kind == kind) else {
            return false;
        };
        let got = if self.checksum_faults.take_receive() {
            crate::cksum::damaged(data)
        } else {
            data.clone()
        };
        match nacre_core::cksum::verify_bulk(0, &got, &c.sums) {
            Ok(()) => true,
            Err(e) => {
                let mdt = nacre_core::TargetName::mdt(self.mdt_of(&fid));
                self.cksum_stats.damaged(mdt);
                tracing::warn!(target: "client", "{mdt}: file {fid}'s data in the open reply arrived damaged ({e}): reading it again");
                false
            }
        }
    }

    /// Reads up to `len` bytes at `off`; short only at end of file.
    pub async fn read(self: &Arc<Self>, f: &OpenFile, off: u64, len: u64) -> Result<Bytes, Errno> {
        let Some(layout) = f.layout() else {
            return Ok(Bytes::new());
        };
        let max = layout.max_size();
        if off >= max || len == 0 {
            return Ok(Bytes::new());
        }
        let len = len.min(max - off);
        if self.has_dirty(&f.fid) {
            // This client's own writes first.
            self.flush_fid(&f.fid).await;
        }
        if let Some(d) = f.cached(off, len, self.local_changes.of(&f.fid)) {
            return Ok(d);
        }
        let (data, found) =
            match crate::readahead::read(self, &f.readahead, f.fid, &layout, off, len).await {
                Some(r) => r?,
                None => self.read_objects(f.fid, &layout, off, len).await?,
            };
        if found == len {
            return Ok(data);
        }
        // Short: a hole or the end of the file. The file size decides.
        let info = self.getattr(f.fid).await?;
        let size = info.attr.size;
        if off >= size {
            return Ok(Bytes::new());
        }
        let n = (size - off).min(len) as usize;
        if data.len() >= n {
            Ok(data.slice(..n))
        } else {
            let mut v = data.to_vec();
            v.resize(n, 0);
            Ok(Bytes::from(v))
        }
    }

    /// The half of a write that never waits, for a caller whose bytes are borrowed (the
    /// FUSE request's buffer): they are copied once, into the file's write-behind extent.
    /// `None` when the write reaches a component not yet instantiated (the MDT must be
    /// asked first): use [`write`](Self::write). Otherwise finish with
    /// [`write_send`](Self::write_send), which waits while the client is over its dirty
    /// budget.
    pub fn write_gather(
        &self,
        f: &OpenFile,
        off: u64,
        data: &[u8],
    ) -> Result<Option<crate::writeback::Ready>, Errno> {
        if data.is_empty() {
            return Ok(None);
        }
        Ok(match self.gather_write(f, off, data, None)? {
            Gathered::Ready(r) => Some(r),
            Gathered::NeedLayout | Gathered::NoGrant => None,
        })
    }

    /// Checks a write against the layout and, if its components are instantiated and the
    /// OSTs granted the space, takes it into write-behind (`owned`: the same bytes, sent
    /// without a copy when an RPC's worth).
    fn gather_write(
        &self,
        f: &OpenFile,
        off: u64,
        data: &[u8],
        owned: Option<&Bytes>,
    ) -> Result<Gathered, Errno> {
        let end = off.checked_add(data.len() as u64).ok_or(Errno::EFBIG)?;
        let layout = f.layout().ok_or(Errno::EBADF)?;
        if end > layout.max_file_size() {
            return Err(Errno::EFBIG);
        }
        // Lustre's lov_io_rw_iter_init: with a stripe lost, the file's tail is not known
        // for an append; and a lost stripe takes no bytes.
        if layout.has_hole()
            && (f.flags.append || crate::io::reaches_lost_stripe(&layout, off, data.len() as u64))
        {
            tracing::error!(target: "client", "file {}: write at {off} of a file with a lost stripe: EIO", f.fid);
            return Err(Errno::EIO);
        }
        if !layout.instantiated_to(end) || self.needs_mirror_intent(&layout, off, end) {
            return Ok(Gathered::NeedLayout);
        }
        f.wrote.store(true, Ordering::Release);
        self.local_changes.bump(&f.fid);
        Ok(
            match self.gather(&f.writeback, f.fid, &layout, off, data, owned)? {
                Some(r) => Gathered::Ready(r),
                None => Gathered::NoGrant,
            },
        )
    }

    /// Whether a write of `[off, end)` through `layout` must first send the MDT a write
    /// intent: a mirrored file in delayed mode with more than one mirror in sync there.
    fn needs_mirror_intent(&self, layout: &Layout, off: u64, end: u64) -> bool {
        self.tunables.mirror_write_mode() == crate::tunables::MirrorWriteMode::Delayed
            && layout.needs_write_intent(off, end)
    }

    /// Sends what [`write_gather`](Self::write_gather) made ready.
    pub async fn write_send(&self, f: &OpenFile, ready: crate::writeback::Ready) {
        self.send_ready(&f.writeback, f.fid, ready).await;
    }

    /// Writes `data` at `off`, instantiating components the write reaches.
    pub async fn write(&self, f: &OpenFile, off: u64, data: Bytes) -> Result<usize, Errno> {
        if data.is_empty() {
            return Ok(0);
        }
        let mut gathered = self.gather_write(f, off, &data, Some(&data))?;
        if let Gathered::NeedLayout = gathered {
            // gather_write checked that the end fits.
            let end = off + data.len() as u64;
            let mut layout = f.layout().ok_or(Errno::EBADF)?;
            if !layout.instantiated_to(end) {
                layout = self.layout_intent(f.fid, end).await?;
            }
            if self.needs_mirror_intent(&layout, off, end) {
                layout = self.mirror_write_intent(f.fid, &layout, off, end).await?;
            }
            *f.layout.write() = Some(layout);
            gathered = self.gather_write(f, off, &data, Some(&data))?;
        }
        if let Gathered::NoGrant = gathered {
            // Lustre's osc_enter_cache: the writes in flight bring grant back; wait for
            // them (they must land before this write anyway, which may overlap them).
            self.flush_fid(&f.fid).await;
            self.flush_handle(&f.writeback, f.fid).await?;
            gathered = self.gather_write(f, off, &data, Some(&data))?;
        }
        match gathered {
            Gathered::Ready(ready) => self.write_send(f, ready).await,
            Gathered::NeedLayout => return Err(Errno::EIO),
            Gathered::NoGrant => {
                // Still no grant: the write goes now, and its result is the caller's. The
                // handle is a writer of the file all the same (an eviction tells it).
                self.dirty.register(f.fid, &f.writeback);
                let layout = f.layout().ok_or(Errno::EBADF)?;
                self.write_objects_summed(f.fid, &layout, off, data.clone(), None, false)
                    .await?;
            }
        }
        Ok(data.len())
    }

    /// `fallocate(2)`: mode 0 (`posix_fallocate`) makes `[off, off + len)` allocated and the
    /// file at least `off + len` long; `KEEP_SIZE` allocates without growing the file;
    /// `PUNCH_HOLE | KEEP_SIZE` and `ZERO_RANGE` zero the range. Collapse, insert and
    /// unshare are not supported (EOPNOTSUPP), as on many local file systems.
    pub async fn fallocate(
        &self,
        f: &OpenFile,
        off: u64,
        len: u64,
        mode: i32,
    ) -> Result<(), Errno> {
        let (keep, punch, zero) = (
            FALLOC_FL_KEEP_SIZE,
            FALLOC_FL_PUNCH_HOLE,
            FALLOC_FL_ZERO_RANGE,
        );
        if mode & !(keep | punch | zero) != 0 || mode & (punch | zero) == punch | zero {
            return Err(Errno::ENOTSUP);
        }
        if mode & punch != 0 && mode & keep == 0 {
            // vfs_fallocate's rule: a punch never changes the size.
            return Err(Errno::ENOTSUP);
        }
        if !f.flags.write {
            return Err(Errno::EBADF);
        }
        if len == 0 {
            return Err(Errno::EINVAL);
        }
        self.flush_handle(&f.writeback, f.fid).await?;
        let mut layout = f.layout().ok_or(Errno::EBADF)?;
        let mut end = off.checked_add(len).ok_or(Errno::EFBIG)?;
        if mode & punch == 0 && end > layout.max_file_size() {
            return Err(Errno::EFBIG);
        }
        if end > layout.max_size() {
            // Nothing can exist past the layout's end to punch.
            end = layout.max_size();
            if off >= end {
                return Ok(());
            }
        }
        if mode & punch == 0 && !layout.instantiated_to(end) {
            layout = self.layout_intent(f.fid, end).await?;
            *f.layout.write() = Some(layout.clone());
        }
        // The size and data changed behind the MDT: the close must report them.
        f.wrote.store(true, Ordering::Release);
        self.local_changes.bump(&f.fid);
        self.fallocate_objects(f.fid, &layout, off, end - off, mode)
            .await
    }

    /// Sends what this handle holds to the OSTs and reports a background write's error
    /// (the FUSE flush at each close).
    pub async fn flush(&self, f: &OpenFile) -> Result<(), Errno> {
        self.flush_handle(&f.writeback, f.fid).await
    }

    /// `fsync(2)`: the file's data on its OSTs and everything its MDT acknowledged (its
    /// name, size and attributes) on stable storage; and if this handle wrote, other
    /// clients holding the file open have dropped what they cached of it.
    /// The OSTs and the MDT sync at once: neither needs the other's result (the data is
    /// on the OSTs once flushed, the names and attributes in the MDT's journal once
    /// acknowledged), and on one disk their syncs can share a journal commit. The MDT's
    /// sync makes the file's Data-on-MDT bytes durable too: every commit of its store
    /// first syncs the DoM objects written before it (`nacre_mdt::dom::DomCommit`), so
    /// the DoM object is not synced a second time on its own.
    pub async fn fsync(&self, f: &OpenFile) -> Result<(), Errno> {
        self.flush_handle(&f.writeback, f.fid).await?;
        let objects = async {
            match f.layout() {
                Some(l) => self.sync_ost_objects(f.fid, &l).await,
                None => Ok(()),
            }
        };
        let req = Request::Sync {
            fid: Some(f.fid),
            changed: f.flags.write && f.wrote(),
        };
        let mdt = async {
            match self.md_call(self.mdt_of(&f.fid), req).await? {
                Reply::Ok => Ok(()),
                _ => Err(Errno::EPROTO),
            }
        };
        let (objects, mdt) = futures::join!(objects, mdt);
        objects.and(mdt)?;
        // A reconnect while it synced may have found this client evicted, and what the
        // handle wrote lost (`Client::lost_with_eviction`).
        match f.writeback.take_error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Keeps an open handle for its replay after a restart of its MDT (until its close).
    pub(crate) fn keep_open(&self, fid: Fid, handle: u64, flags: OpenFlags, cred: &Cred) {
        if let Ok(r) = self.mdc_replay(self.mdt_of(&fid)) {
            r.opened(handle, fid, flags, cred);
        }
    }

    /// Closes the handle, telling the MDT whether this handle wrote.
    pub async fn release(&self, f: &OpenFile) -> Result<(), Errno> {
        let flushed = self.flush_handle(&f.writeback, f.fid).await;
        let wrote = f.flags.write && f.wrote();
        // A handle that wrote nothing leaves parity to its MDT (see `ec_untouched_close`).
        if flushed.is_ok() && wrote {
            self.ec_parity_at_close(f).await;
        }
        self.dirty.forget(&f.fid, &f.writeback);
        self.append_closing(f.fid, f.handle).await;
        // Fetched readahead goes back to the client's budget.
        f.readahead.lock().clear(self);
        if let Ok(r) = self.mdc_replay(self.mdt_of(&f.fid)) {
            r.closed(f.handle);
        }
        let closed = self
            .md_call(
                self.mdt_of(&f.fid),
                Request::Close {
                    handle: f.handle,
                    wrote,
                },
            )
            .await?;
        if flushed.is_ok() && f.flags.write && !wrote {
            self.ec_untouched_close(f, closed).await;
        }
        flushed
    }
}
