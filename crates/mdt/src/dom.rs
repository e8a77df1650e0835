//! Data-on-MDT: the first component's bytes of a file kept on the file's MDT.
//!
//! The bytes live in MDT-local objects (files under `<target>/dom/`, laid out like an OST's
//! `O/` tree) named by a FID of their own that the layout records, so a layout swap moves
//! them with the layout. Writes go straight to the object, as OST writes do: the same
//! durability as OST data (in the kernel at once, on disk at `fsync`). A file that fits in
//! its DoM component needs no OST request at all: its size and times come from the object.

use crate::Mdt;
use crate::mdd;
use bytes::Bytes;
use nacre_core::layout::Pattern;
use nacre_core::{Attr, Errno, Fid, Layout, Timespec};
use nacre_osd::ObjStore;

/// DoM-only files up to this size travel in the reply to a read-only open (Lustre's
/// read-on-open, `mdt.*.dom_read_open`): a small file is then read with one request.
pub const DOM_READ_ON_OPEN: u64 = 1 << 20;

/// Largest DoM read one request may ask for: an OST's largest (`nacre_ost::MAX_READ`),
/// since a client reads DoM and OST data in the same RPC sizes. The server checks it
/// before reserving memory for the reply.
pub const MAX_DOM_READ: u32 = 32 << 20;

/// A DoM read's length within [`MAX_DOM_READ`].
pub fn check_read(len: u32) -> Result<(), Errno> {
    if len > MAX_DOM_READ {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// Size, blocks and modification time of a DoM object (a missing one is empty).
pub fn object_attr(store: &ObjStore, obj: &Fid) -> (u64, u64, Timespec) {
    store.getattr(obj).unwrap_or_default()
}

/// Folds the DoM object into attributes the MDT reports. Returns whether the size is then
/// complete without asking OSTs (the file has no OST objects).
pub fn merge_into(store: &ObjStore, layout: &Layout, attr: &mut Attr) -> bool {
    let Some(obj) = layout.dom_object() else {
        return false;
    };
    let (size, blocks, mtime) = object_attr(store, &obj);
    let dom_only = !layout.has_ost_objects();
    if dom_only {
        attr.size = size;
        attr.blocks = blocks;
    } else {
        // The OST part is glimpsed by the client; the DoM part is this.
        attr.size = size.min(layout.dom_size());
    }
    if mtime > attr.ctime {
        attr.mtime = mtime;
        attr.ctime = mtime;
    }
    dom_only
}

impl Mdt {
    /// The DoM component and object of `fid`, if its layout has an instantiated one.
    fn dom_of(&self, fid: &Fid) -> Result<(Fid, u64), Errno> {
        let mut v = self.store().read()?;
        let ino = mdd::get_inode(&mut v, fid)
            .map_err(|e| if e == Errno::ENOENT { Errno::ESTALE } else { e })?;
        let layout = ino.layout.ok_or(Errno::EINVAL)?;
        let c = layout.components.first().ok_or(Errno::EINVAL)?;
        if c.pattern != Pattern::Mdt {
            return Err(Errno::EINVAL);
        }
        let obj = c.dom_object.ok_or(Errno::EINVAL)?;
        Ok((obj, c.end))
    }

    async fn dom_blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&ObjStore) -> Result<T, Errno> + Send + 'static,
    ) -> Result<T, Errno> {
        let s = self.dom_store().clone();
        tokio::task::spawn_blocking(move || f(&s))
            .await
            .map_err(|_| Errno::EIO)?
    }

    pub(crate) async fn dom_write(&self, fid: Fid, offset: u64, data: Bytes) -> Result<u64, Errno> {
        let (obj, end) = self.dom_of(&fid)?;
        let stop = offset.checked_add(data.len() as u64).ok_or(Errno::EFBIG)?;
        if stop > end {
            // The client splits writes at component ends; beyond is an OST's business.
            return Err(Errno::EINVAL);
        }
        self.dom_blocking(move |s| {
            s.ensure(&obj)?;
            s.write(&obj, &fid, offset, &data)
        })
        .await
    }

    pub(crate) async fn dom_read(&self, fid: Fid, offset: u64, len: u32) -> Result<Bytes, Errno> {
        check_read(len)?;
        let (obj, end) = self.dom_of(&fid)?;
        if offset >= end {
            return Ok(Bytes::new());
        }
        let len = u64::from(len).min(end - offset) as usize;
        self.dom_blocking(move |s| match s.read(&obj, offset, len) {
            Ok(d) => Ok(Bytes::from(d)),
            Err(Errno::ENOENT) => Ok(Bytes::new()),
            Err(e) => Err(e),
        })
        .await
    }

    pub(crate) async fn dom_sync(&self, fid: Fid) -> Result<(), Errno> {
        let (obj, _) = self.dom_of(&fid)?;
        self.dom_blocking(move |s| match s.sync(&obj) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(e),
        })
        .await
    }

    pub(crate) async fn dom_fallocate(
        &self,
        fid: Fid,
        offset: u64,
        len: u64,
        mode: i32,
    ) -> Result<(), Errno> {
        let (obj, end) = self.dom_of(&fid)?;
        if offset.checked_add(len).ok_or(Errno::EFBIG)? > end {
            return Err(Errno::EINVAL);
        }
        self.dom_blocking(move |s| {
            s.ensure(&obj)?;
            s.fallocate(&obj, &fid, offset, len, mode)
        })
        .await
    }

    /// Makes the DoM object hold exactly the DoM part of a file of `size` bytes.
    pub(crate) async fn dom_truncate(&self, layout: &Layout, size: u64) -> Result<(), Errno> {
        let Some(obj) = layout.dom_object() else {
            return Ok(());
        };
        let part = size.min(layout.dom_size());
        self.dom_blocking(move |s| {
            s.ensure(&obj)?;
            s.punch(&obj, part)
        })
        .await
    }

    /// Small DoM files' bytes, sent with the open reply.
    pub(crate) async fn dom_read_on_open(&self, layout: &Layout) -> Bytes {
        if !self
            .dom_read_open
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return Bytes::new();
        }
        let Some(obj) = layout.dom_object() else {
            return Bytes::new();
        };
        if layout.has_ost_objects() {
            return Bytes::new();
        }
        let r = self
            .dom_blocking(move |s| {
                let (size, _, _) = object_attr(s, &obj);
                if size == 0 || size > DOM_READ_ON_OPEN {
                    return Ok(Bytes::new());
                }
                match s.read(&obj, 0, size as usize) {
                    Ok(d) => Ok(Bytes::from(d)),
                    Err(_) => Ok(Bytes::new()),
                }
            })
            .await;
        r.unwrap_or_default()
    }

    /// Removes DoM objects of destroyed files.
    pub(crate) async fn dom_destroy(&self, objs: Vec<Fid>) -> Result<(), Errno> {
        self.dom_blocking(move |s| {
            for o in &objs {
                s.destroy(o)?;
            }
            Ok(())
        })
        .await
    }
}
