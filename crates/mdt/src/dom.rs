//! Data-on-MDT: the first component's bytes of a file kept on the file's MDT.
//!
//! The bytes live in MDT-local objects (files under `<target>/dom/`, laid out like an OST's
//! `O/` tree) named by a FID of their own that the layout records, so a layout swap moves
//! them with the layout. Writes go straight to the object, as OST writes do: the same
//! durability as OST data (in the kernel at once, on disk at `fsync`). A file that fits in
//! its DoM component needs no OST request at all: its size and times come from the object.
//!
//! DoM data is checksummed as OST data is: the store keeps a crc32c per block and checks
//! every read; writes with checksums are checked before they land (EBADMSG if damaged on
//! the way), reads answer with checksums when asked, and a scrub walks the objects
//! (`mdt.*.dom_scrub_*`).
//!
//! Acknowledged DoM writes survive a power cut of the MDT as metadata changes do: a
//! tracked DoM write takes a transaction number once its bytes are written, and no commit
//! of the store (a journal sync, a checkpoint) moves `last_committed` past a DoM change
//! before the DoM objects are synced ([`DomCommit`]). So what the client dropped as
//! committed is on disk, and what it keeps it replays, in transno order with the
//! namespace changes around it.
//!
//! After a crash, a DoM block changed since the last such commit began can fail its
//! checksum only because the crash tore it (its bytes on disk and not its checksum, or the
//! reverse): it is taken as the disk kept it, counted in `mdt.*.dom_checksum_torn_retaken`,
//! as an OST takes its own ([`DomCommit::install`]). Older blocks that fail are corrupt.

use crate::Mdt;
use crate::mdd;
use bytes::Bytes;
use nacre_core::cksum::{ChecksumType, ReadVerify, TornBlocks};
use nacre_core::layout::Pattern;
use nacre_core::{Attr, Errno, Fid, Layout, Timespec};
use nacre_osd::ObjStore;
use nacre_osd::mdstore::{MdStore, Table};
use nacre_rpc::msg::{BulkCksum, Reply};
use parking_lot::Mutex;
use std::collections::HashSet;
use std::sync::Arc;

/// The store key a DoM write's own transaction puts (the last written object's FID): a
/// change, so the transaction takes a number.
const KEY_DOM_WRITTEN: &[u8] = b"dom_written";

/// DoM objects changed between two commits that the next one fsyncs one by one; past
/// it, one `syncfs` of the DoM store instead. The store shares its file system with the
/// journal (and under `nacre up` with the OSTs): a `syncfs` at every commit would flush
/// every target's dirty data behind each `fsync`.
pub const DOM_CHANGED_MAX: usize = 1024;

/// DoM objects changed since the last commit synced them.
#[derive(Debug, Default)]
struct Changed {
    objects: HashSet<Fid>,
    /// More than [`DOM_CHANGED_MAX`] changed: the commit syncs the whole store.
    overflow: bool,
}

/// Ties DoM data to the store's commits: a DoM change names its object, and the store's
/// next commit fsyncs those objects first (only when something changed).
#[derive(Debug, Default)]
pub struct DomCommit {
    changed: Mutex<Changed>,
}

impl DomCommit {
    /// Hooks a new one into `store`'s commits, and opens `dom`'s torn window: what DoM
    /// data changed after the last commit's sync of it began (less
    /// [`nacre_osd::objstore::TORN_MARGIN`]) was never promised, so a crash may have torn
    /// it (its bytes on disk and not its checksums, or the reverse); such a block is taken
    /// as it was kept rather than failing every read. A store with no such commit on
    /// record gets no window.
    pub fn install(store: &MdStore, dom: &Arc<ObjStore>) -> Result<Arc<DomCommit>, Errno> {
        if let Some(began) = store.before_commit_began()? {
            let from = began
                .checked_sub(nacre_osd::objstore::TORN_MARGIN)
                .unwrap_or(std::time::UNIX_EPOCH);
            dom.set_torn_window(from, std::time::SystemTime::now());
        }
        let me = Arc::new(DomCommit::default());
        let (hook, dom) = (me.clone(), dom.clone());
        store.set_before_commit(Box::new(move || {
            let todo = std::mem::take(&mut *hook.changed.lock());
            if !todo.overflow && todo.objects.is_empty() {
                return Ok(false);
            }
            let synced = if todo.overflow {
                dom.sync_all()
            } else {
                todo.objects.iter().try_for_each(|o| match dom.sync(o) {
                    Ok(()) | Err(Errno::ENOENT) => Ok(()),
                    Err(e) => Err(e),
                })
            };
            synced.map(|()| true).inspect_err(|_| {
                // Still unsynced: the next commit tries again, whole.
                hook.changed.lock().overflow = true;
            })
        }))?;
        Ok(me)
    }

    /// DoM object `obj` changed: after the change and before any transaction that
    /// vouches for it takes its number, so the commit that covers that number syncs it.
    pub fn changed(&self, obj: Fid) {
        let mut c = self.changed.lock();
        if c.overflow || c.objects.len() >= DOM_CHANGED_MAX {
            c.overflow = true;
            c.objects.clear();
        } else {
            c.objects.insert(obj);
        }
    }

    /// Gives the current request a transaction number for a DoM write of `fid`, whose
    /// object [`DomCommit::changed`] was told of before this call.
    pub async fn number(&self, store: &MdStore, fid: Fid) -> Result<(), Errno> {
        store
            .write(move |tx| tx.put(Table::Meta, KEY_DOM_WRITTEN, &fid.to_bytes()))
            .await
    }
}

use nacre_rpc::server::RequestCtx;

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

/// The reply to a read past the data: nothing, with no checksums to check.
fn empty_read(cksum: Option<ChecksumType>) -> (Reply, Bytes) {
    let reply = match cksum {
        Some(kind) => Reply::Checksummed(BulkCksum {
            kind,
            sums: Vec::new(),
        }),
        None => Reply::Ok,
    };
    (reply, Bytes::new())
}

/// Size, blocks and modification time of a DoM object (a missing one is empty). Any other
/// failure is the caller's error: a DoM store that cannot be read never reports size 0.
pub fn object_attr(store: &ObjStore, obj: &Fid) -> Result<(u64, u64, Timespec), Errno> {
    match store.getattr(obj) {
        Ok(a) => Ok(a),
        Err(Errno::ENOENT) => Ok(Default::default()),
        Err(e) => {
            tracing::error!(target: "mdt", "DoM object {obj}: cannot read its attributes: {e}");
            Err(Errno::EIO)
        }
    }
}

/// Folds the DoM object into attributes the MDT reports. Returns whether the size is then
/// complete without asking OSTs (the file has no OST objects).
pub fn merge_into(store: &ObjStore, layout: &Layout, attr: &mut Attr) -> Result<bool, Errno> {
    let Some(obj) = layout.dom_object() else {
        return Ok(false);
    };
    let (size, blocks, mtime) = object_attr(store, &obj)?;
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
    Ok(dom_only)
}

/// One DoM parameter: its name after `mdt.<target>.`, value, and whether `lctl set_param`
/// may change it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DomParam {
    pub name: String,
    pub value: String,
    pub writable: bool,
}

impl Mdt {
    /// The DoM store's checksum parameters (`mdt.<target>.dom_*`), as an OST's are.
    pub fn dom_params(&self) -> Vec<DomParam> {
        let p = |name: &str, value: String, writable: bool| DomParam {
            name: name.to_string(),
            value,
            writable,
        };
        let mut v = vec![
            p("dom_checksum_type", ChecksumType::Crc32c.list(), false),
            p(
                "dom_checksum_errors",
                self.dom_store().checksum_errors().to_string(),
                false,
            ),
            p(
                "dom_checksum_torn_retaken",
                self.dom_store().torn_retaken().to_string(),
                false,
            ),
            p(
                "dom_bulk_checksum_errors",
                self.dom_bulk_checksum_errors().to_string(),
                false,
            ),
            p("dom_scrub_status", self.dom_scrub().status(), false),
            p("dom_scrub_bad_blocks", self.dom_scrub().bad_blocks(), false),
        ];
        for (name, value) in self.dom_scrub().params() {
            v.push(p(&format!("dom_scrub_{name}"), value.to_string(), true));
        }
        v
    }

    /// Sets DoM parameter `name` (after `mdt.<target>.`).
    pub fn set_dom_param(&self, name: &str, value: &str) -> Result<(), String> {
        match name.strip_prefix("dom_scrub_") {
            Some(s) if nacre_osd::scrub::PARAMS.iter().any(|p| p.name == s) => {
                self.dom_scrub().set_param(s, value)
            }
            _ => Err(format!("{name}: read-only or unknown parameter")),
        }
    }

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

    pub(crate) async fn dom_blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&ObjStore) -> Result<T, Errno> + Send + 'static,
    ) -> Result<T, Errno> {
        let s = self.dom_store().clone();
        tokio::task::spawn_blocking(move || f(&s))
            .await
            .map_err(|_| Errno::EIO)?
    }

    /// Writes `data` at `offset` of `fid`'s DoM part. `replayed`: a replay after a power
    /// cut, which takes a partly written block's other bytes as the cut left them
    /// ([`ObjStore::write_replayed`]).
    pub(crate) async fn dom_write(
        &self,
        ctx: &RequestCtx,
        fid: Fid,
        offset: u64,
        data: Bytes,
        cksum: Option<BulkCksum>,
        replayed: bool,
    ) -> Result<u64, Errno> {
        let (obj, end) = self.dom_of(&fid)?;
        let stop = offset.checked_add(data.len() as u64).ok_or(Errno::EFBIG)?;
        if stop > end {
            // The client splits writes at component ends; beyond is an OST's business.
            return Err(Errno::EINVAL);
        }
        let len = data.len();
        let r = self
            .dom_blocking(move |s| {
                s.ensure(&obj)?;
                let sums = cksum.as_ref().map(|c| c.sums.as_slice());
                Ok(if replayed {
                    s.write_replayed(&obj, &fid, None, offset, &data, sums, sums.is_some())
                } else {
                    s.write_summed(&obj, &fid, offset, &data, sums, sums.is_some())
                })
            })
            .await?;
        // Even a failed write may have changed part of the object.
        self.dom_commit.changed(obj);
        match r {
            Ok(n) => Ok(n),
            Err(e @ nacre_osd::ObjError::Damaged { .. }) => {
                self.dom_bulk_checksum_errors
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::error!(
                    target: "mdt",
                    "MDT{:04x}: BAD WRITE CHECKSUM from {} ({}): file {fid} (DoM) extent [{offset}-{}] of {len} bytes: {e}",
                    self.index,
                    ctx.client,
                    ctx.peer,
                    stop.saturating_sub(1),
                );
                Err(Errno::EBADMSG)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// A read of the DoM component: its bytes (checked against the stored checksums) and,
    /// with `cksum`, the checksums of what the reply carries.
    pub(crate) async fn dom_read(
        &self,
        fid: Fid,
        offset: u64,
        len: u32,
        cksum: Option<ChecksumType>,
    ) -> Result<(Reply, Bytes), Errno> {
        check_read(len)?;
        let (obj, end) = self.dom_of(&fid)?;
        if offset >= end {
            return Ok(empty_read(cksum));
        }
        let len = u64::from(len).min(end - offset) as usize;
        self.dom_blocking(move |s| {
            let sums = cksum.map(|_| ReadVerify::Target);
            match s.read_checked(&obj, offset, len, sums, TornBlocks::Take) {
                Ok(out) => {
                    let (start, n) = (out.start, out.len);
                    let reply = match cksum {
                        Some(kind) => Reply::Checksummed(BulkCksum {
                            kind,
                            sums: out.sums.unwrap_or_default(),
                        }),
                        None => Reply::Ok,
                    };
                    Ok((reply, Bytes::from(out.buf).slice(start..start + n)))
                }
                Err(nacre_osd::ObjError::Errno(Errno::ENOENT)) => Ok(empty_read(cksum)),
                Err(e) => Err(e.into()),
            }
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
        let r = self
            .dom_blocking(move |s| {
                s.ensure(&obj)?;
                Ok(s.fallocate(&obj, &fid, offset, len, mode)?)
            })
            .await;
        self.dom_commit.changed(obj);
        r
    }

    /// Makes the DoM object hold exactly the DoM part of a file of `size` bytes.
    pub(crate) async fn dom_truncate(&self, layout: &Layout, size: u64) -> Result<(), Errno> {
        let Some(obj) = layout.dom_object() else {
            return Ok(());
        };
        let part = size.min(layout.dom_size());
        let r = self
            .dom_blocking(move |s| {
                s.ensure(&obj)?;
                Ok(s.punch(&obj, part)?)
            })
            .await;
        // Before the setattr's transaction: the commit covering it syncs the punch.
        self.dom_commit.changed(obj);
        r
    }

    /// Small DoM files' bytes, sent with the open reply, with their checksums (a file
    /// whose data fails its stored checksums sends none: the client's read then gets the
    /// error).
    pub(crate) async fn dom_read_on_open(&self, layout: &Layout) -> (Bytes, Option<BulkCksum>) {
        let none = (Bytes::new(), None);
        if !self
            .dom_read_open
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return none;
        }
        let Some(obj) = layout.dom_object() else {
            return none;
        };
        if layout.has_ost_objects() {
            return none;
        }
        let r = self
            .dom_blocking(move |s| {
                let (size, _, _) = object_attr(s, &obj)?;
                if size == 0 || size > DOM_READ_ON_OPEN {
                    return Ok((Bytes::new(), None));
                }
                match s.read_checked(
                    &obj,
                    0,
                    size as usize,
                    Some(ReadVerify::Target),
                    TornBlocks::Take,
                ) {
                    Ok(out) => {
                        let sums = out.sums.clone().map(|sums| BulkCksum {
                            kind: ChecksumType::Crc32c,
                            sums,
                        });
                        Ok((Bytes::from(out.into_vec()), sums))
                    }
                    Err(_) => Ok((Bytes::new(), None)),
                }
            })
            .await;
        // Data on open is only a shortcut: without it the client reads the DoM object
        // itself, and that read reports the error.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Changed objects are named one by one up to the bound, then the next commit syncs
    /// the whole store instead; a commit takes what it syncs.
    #[test]
    fn changed_objects_are_bounded() {
        let c = DomCommit::default();
        let obj = |i: u32| Fid::new(0x200000400, i, 0);
        c.changed(obj(1));
        c.changed(obj(1));
        assert_eq!(c.changed.lock().objects.len(), 1);
        for i in 0..DOM_CHANGED_MAX as u32 {
            c.changed(obj(i + 2));
        }
        let ch = std::mem::take(&mut *c.changed.lock());
        assert!(ch.overflow && ch.objects.is_empty());
        let after = c.changed.lock();
        assert!(!after.overflow && after.objects.is_empty());
    }
}
