//! Write-behind (Lustre's osc dirty cache): a write is acknowledged once its bytes are in
//! the client, and reaches the OSTs in the background.
//!
//! Per open file, contiguous writes gather into one extent until it holds
//! `max_pages_per_rpc`; the extent is then sent while the writer goes on. The client holds
//! at most `osc.*.max_dirty_mb` of unsent or in-flight data, gathered extents included: a
//! writer beyond it sends the extents of every open file and waits for room (as Lustre's
//! osc writes dirty pages back under cache pressure), so thousands of files each written a
//! little hold no more than the budget. An error of a background write is returned by the
//! next write, `fsync` or close of that file.
//!
//! A write is cached only against grant ([`crate::grant`]): the space every OST it
//! reaches promised. Without it, the caller sends the write at once and returns its
//! result, so ENOSPC on a full OST comes back from `write` itself.
//!
//! Anything that must see the data first waits for it: a read of the file, a truncate, a
//! `getattr` from this client (the size), `fsync`, close. So this client always sees its own
//! writes, and others see them after the close (close-to-open).

use crate::Client;
use bytes::{Bytes, BytesMut};
use nacre_core::{Errno, Fid, Layout};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use tokio::sync::Notify;

/// One open file's unsent data and background writes.
#[derive(Default)]
pub struct WriteBack {
    /// The extent being gathered: its file offset, bytes, and the layout to send it by.
    extent: Mutex<Option<Extent>>,
    /// Background writes not yet finished.
    inflight: AtomicU64,
    done: Notify,
    /// First error of a background write, not yet reported.
    error: Mutex<Option<Errno>>,
}

struct Extent {
    off: u64,
    /// `pad` bytes of nothing, then the data: the data starts on a page boundary.
    buf: BytesMut,
    pad: usize,
    layout: Layout,
    /// With checksums on: those of the pieces of the data (cut at every 4 KiB of file
    /// offset, see `nacre_core::cksum`), computed as the bytes are copied in, while they
    /// are in cache, and the crc32c of the piece not yet complete.
    sums: Option<(Vec<u32>, u32)>,
    /// The data's bytes, counted in the client's gathered bytes while the extent lives.
    charge: GatherCharge,
}

/// Bytes of one extent in [`DirtyCache::gathered`], counted out when the extent is sent
/// (frozen) or dropped, whatever the path.
struct GatherCharge {
    gathered: Arc<AtomicU64>,
    bytes: u64,
}

impl GatherCharge {
    fn add(&mut self, n: usize) {
        self.gathered.fetch_add(n as u64, Ordering::AcqRel);
        self.bytes += n as u64;
    }
}

impl Drop for GatherCharge {
    fn drop(&mut self) {
        let before = self.gathered.fetch_sub(self.bytes, Ordering::AcqRel);
        debug_assert!(before >= self.bytes, "gathered bytes counted out twice");
    }
}

/// An extent ready to go: file offset, bytes, layout, and the checksums of its pieces if
/// they were computed on the way in.
pub(crate) type ReadyExtent = (u64, Bytes, Layout, Option<Vec<u32>>);

/// Alignment of extent data in memory, so an OST in this process can hand a whole extent
/// to the disk with O_DIRECT instead of copying it into its page cache.
const EXTENT_ALIGN: usize = 4096;

/// Smallest capacity an extent starts with: a page, as the first write may be tiny.
const EXTENT_MIN_CAPACITY: usize = 4096;

/// An aligned buffer able to hold `cap` bytes of data after its padding.
fn aligned_buffer(cap: usize) -> (BytesMut, usize) {
    let mut buf = BytesMut::with_capacity(cap + EXTENT_ALIGN);
    let pad = buf.as_ptr().align_offset(EXTENT_ALIGN).min(EXTENT_ALIGN);
    buf.resize(pad, 0);
    (buf, pad)
}

impl Extent {
    /// An empty extent at `off`. Its buffer grows with its data, up to an RPC: a client
    /// writing a little to each of thousands of open files must not hold an RPC's worth of
    /// memory per file (1,000 files of 2 MiB held 4 GiB of 4 MiB buffers).
    fn new(off: u64, layout: Layout, summed: bool, gathered: &Arc<AtomicU64>) -> Extent {
        let (buf, pad) = aligned_buffer(EXTENT_MIN_CAPACITY);
        Extent {
            off,
            buf,
            pad,
            layout,
            sums: summed.then(|| (Vec::new(), 0)),
            charge: GatherCharge {
                gathered: gathered.clone(),
                bytes: 0,
            },
        }
    }

    /// Copies `data` in (at most `max` bytes in all, an RPC), a piece at a time,
    /// checksumming each piece just copied.
    fn append(&mut self, data: &[u8], max: usize) {
        self.reserve(data.len(), max);
        self.charge.add(data.len());
        let Some((done, partial)) = self.sums.as_mut() else {
            self.buf.extend_from_slice(data);
            return;
        };
        let block = nacre_core::cksum::BLOCK;
        let mut pos = self.off + (self.buf.len() - self.pad) as u64;
        let mut rest = data;
        while !rest.is_empty() {
            let room = block - (pos % block as u64) as usize;
            let (now, later) = rest.split_at(room.min(rest.len()));
            self.buf.extend_from_slice(now);
            *partial = crc32c::crc32c_append(*partial, now);
            pos += now.len() as u64;
            if pos.is_multiple_of(block as u64) {
                done.push(std::mem::take(partial));
            }
            rest = later;
        }
    }

    /// Makes room for `more` bytes by doubling, keeping the data page-aligned (`BytesMut`
    /// growing itself would move it anywhere).
    fn reserve(&mut self, more: usize, max: usize) {
        if self.buf.capacity() - self.buf.len() >= more {
            return;
        }
        let len = self.len();
        debug_assert!(len + more <= max.max(more), "an extent past its RPC");
        let cap = (len * 2).max(len + more).min(max.max(len + more));
        let (mut grown, pad) = aligned_buffer(cap);
        grown.extend_from_slice(&self.buf[self.pad..]);
        self.buf = grown;
        self.pad = pad;
        debug_assert!((self.buf.as_ptr() as usize + self.pad).is_multiple_of(EXTENT_ALIGN));
    }

    fn len(&self) -> usize {
        self.buf.len() - self.pad
    }

    fn end(&self) -> u64 {
        self.off + self.len() as u64
    }

    fn freeze(self) -> ReadyExtent {
        let end = self.end();
        let sums = self.sums.map(|(mut done, partial)| {
            if !end.is_multiple_of(nacre_core::cksum::BLOCK as u64) {
                done.push(partial);
            }
            done
        });
        (
            self.off,
            self.buf.freeze().slice(self.pad..),
            self.layout,
            sums,
        )
    }
}

/// Extents ready to go to the OSTs.
pub struct Ready(Vec<ReadyExtent>);

impl WriteBack {
    pub(crate) fn take_error(&self) -> Option<Errno> {
        self.error.lock().take()
    }
}

/// One background write, counted in: its dirty bytes and its place in flight are counted
/// out when it is dropped, on every path (an error, a cancelled task, a panic), so a
/// failed write can never leave `close` or `fsync` waiting for it.
struct InflightWrite<'a> {
    dirty: &'a DirtyCache,
    wb: Arc<WriteBack>,
    bytes: u64,
}

impl Drop for InflightWrite<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // Whatever happened, the data may not have reached the OSTs.
            self.wb.error.lock().get_or_insert(Errno::EIO);
        }
        let before = self.dirty.bytes.fetch_sub(self.bytes, Ordering::AcqRel);
        debug_assert!(before >= self.bytes, "dirty bytes counted out twice");
        self.dirty.freed.notify_waiters();
        if self.wb.inflight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.wb.done.notify_waiters();
        }
    }
}

/// Client-wide state: dirty bytes and which files have data on the way.
#[derive(Default)]
pub struct DirtyCache {
    /// Bytes of background writes in flight.
    bytes: AtomicU64,
    /// Bytes in extents not yet sent (see [`GatherCharge`]).
    gathered: Arc<AtomicU64>,
    freed: Notify,
    by_fid: Mutex<HashMap<Fid, Vec<Weak<WriteBack>>>>,
}

impl DirtyCache {
    /// Unsent and in-flight bytes: what `max_dirty_mb` bounds.
    pub fn dirty_bytes(&self) -> u64 {
        self.bytes.load(Ordering::Acquire) + self.gathered.load(Ordering::Acquire)
    }

    /// Every handle with data gathered or on the way.
    fn all(&self) -> Vec<(Fid, Arc<WriteBack>)> {
        let m = self.by_fid.lock();
        m.iter()
            .flat_map(|(fid, v)| v.iter().filter_map(Weak::upgrade).map(|wb| (*fid, wb)))
            .collect()
    }

    pub(crate) fn register(&self, fid: Fid, wb: &Arc<WriteBack>) {
        let mut m = self.by_fid.lock();
        let v = m.entry(fid).or_default();
        if !v.iter().any(|w| w.as_ptr() == Arc::as_ptr(wb)) {
            v.retain(|w| w.strong_count() > 0);
            v.push(Arc::downgrade(wb));
        }
    }

    /// Drops a closed handle's entry, so the map holds only files with open writers.
    pub(crate) fn forget(&self, fid: &Fid, wb: &Arc<WriteBack>) {
        let mut m = self.by_fid.lock();
        if let Some(v) = m.get_mut(fid) {
            v.retain(|w| w.strong_count() > 0 && w.as_ptr() != Arc::as_ptr(wb));
            if v.is_empty() {
                m.remove(fid);
            }
        }
    }

    /// Has every open handle of `fid` that wrote report `e` at its next `fsync` or
    /// close (unless it holds an error already): what it wrote is lost. How many.
    pub(crate) fn fail(&self, fid: &Fid, e: Errno) -> usize {
        let wbs = self.of(fid);
        for wb in &wbs {
            wb.error.lock().get_or_insert(e);
        }
        wbs.len()
    }

    fn of(&self, fid: &Fid) -> Vec<Arc<WriteBack>> {
        let mut m = self.by_fid.lock();
        let Some(v) = m.get_mut(fid) else {
            return Vec::new();
        };
        v.retain(|w| w.strong_count() > 0);
        let out: Vec<_> = v.iter().filter_map(Weak::upgrade).collect();
        if v.is_empty() {
            m.remove(fid);
        }
        out
    }
}

impl Client {
    /// The part of a write that never waits: `data` joins the file's extent (one copy),
    /// and extents that are full or cannot grow come back to be sent. A write of at least
    /// an RPC given as `owned` goes as it is, without a copy. `None` when the OSTs have not
    /// granted the space: nothing is cached, and the write must go at once.
    pub(crate) fn gather(
        &self,
        wb: &Arc<WriteBack>,
        fid: Fid,
        layout: &Layout,
        off: u64,
        data: &[u8],
        owned: Option<&Bytes>,
    ) -> Result<Option<Ready>, Errno> {
        if let Some(e) = wb.take_error() {
            return Err(e);
        }
        if !self.take_grant(layout, off, data.len() as u64) {
            return Ok(None);
        }
        let max_rpc = self.tunables.max_rpc_bytes().max(4096) as usize;
        let mut ready = Vec::new();
        {
            let mut ext = wb.extent.lock();
            let summed = self.tunables.checksums().is_some();
            let appended = match ext.as_mut() {
                Some(e)
                    if e.end() == off
                        && e.len() + data.len() <= max_rpc
                        && e.sums.is_some() == summed =>
                {
                    e.append(data, max_rpc);
                    // This write may have instantiated components the extent now reaches.
                    e.layout = layout.clone();
                    true
                }
                _ => false,
            };
            if !appended {
                if let Some(old) = ext.take() {
                    ready.push(old.freeze());
                }
                match owned {
                    // Large writes go as they are, without a copy (their checksums are
                    // computed as they are sent).
                    Some(b) if data.len() >= max_rpc => {
                        ready.push((off, b.clone(), layout.clone(), None))
                    }
                    _ => {
                        let mut e = Extent::new(off, layout.clone(), summed, &self.dirty.gathered);
                        e.append(data, max_rpc);
                        *ext = Some(e);
                    }
                }
            }
            if ext.as_ref().is_some_and(|e| e.len() >= max_rpc)
                && let Some(full) = ext.take()
            {
                ready.push(full.freeze());
            }
        }
        self.dirty.register(fid, wb);
        Ok(Some(Ready(ready)))
    }

    /// Sends what [`gather`](Self::gather) returned, waiting while the client is over its
    /// dirty budget; a write that only gathered waits too when gathered extents fill it.
    pub(crate) async fn send_ready(&self, wb: &Arc<WriteBack>, fid: Fid, ready: Ready) {
        if ready.0.is_empty() {
            self.wait_for_room(0).await;
        }
        for (start, bytes, l, sums) in ready.0 {
            self.submit(wb, fid, l, start, bytes, sums).await;
        }
    }

    /// Waits until `n` more bytes fit in the dirty budget. While they do not, every open
    /// file's gathered extent is sent, so memory held by idle extents becomes writes that
    /// finish and free it. Never waits with nothing in flight: then waiting could not
    /// help, and the writer goes on (over the budget by at most its own bytes).
    async fn wait_for_room(&self, n: u64) {
        let limit = self.tunables.max_dirty_bytes().max(n);
        loop {
            let waiter = self.dirty.freed.notified();
            if self.dirty.dirty_bytes() + n <= limit {
                return;
            }
            if self.dirty.gathered.load(Ordering::Acquire) > 0 {
                self.send_gathered().await;
            }
            if self.dirty.bytes.load(Ordering::Acquire) == 0 {
                return;
            }
            waiter.await;
        }
    }

    /// Sends the gathered extent of every open file (cache pressure).
    async fn send_gathered(&self) {
        for (fid, wb) in self.dirty.all() {
            let pending = wb.extent.lock().take();
            if let Some(e) = pending {
                let (off, data, layout, sums) = e.freeze();
                self.launch(&wb, fid, layout, off, data, sums).await;
            }
        }
    }

    /// Sends an extent in the background, waiting first while the client is over its
    /// dirty budget.
    async fn submit(
        &self,
        wb: &Arc<WriteBack>,
        fid: Fid,
        layout: Layout,
        off: u64,
        data: Bytes,
        sums: Option<Vec<u32>>,
    ) {
        self.wait_for_room(data.len() as u64).await;
        self.launch(wb, fid, layout, off, data, sums).await;
    }

    /// Sends an extent in the background without waiting for room: its bytes are counted
    /// in flight until the write ends.
    async fn launch(
        &self,
        wb: &Arc<WriteBack>,
        fid: Fid,
        layout: Layout,
        off: u64,
        data: Bytes,
        sums: Option<Vec<u32>>,
    ) {
        let n = data.len() as u64;
        self.dirty.bytes.fetch_add(n, Ordering::AcqRel);
        wb.inflight.fetch_add(1, Ordering::AcqRel);
        let Some(c) = self.arc() else {
            // Not mounted in an Arc (cannot happen once mounted): send it now.
            let _done = InflightWrite {
                dirty: &self.dirty,
                wb: wb.clone(),
                bytes: n,
            };
            if let Err(e) = self
                .write_objects_summed(fid, &layout, off, data, sums, true)
                .await
            {
                wb.error.lock().get_or_insert(e);
            }
            return;
        };
        let wb = wb.clone();
        tokio::spawn(async move {
            let _done = InflightWrite {
                dirty: &c.dirty,
                wb: wb.clone(),
                bytes: n,
            };
            let len = data.len();
            if let Err(e) = c
                .write_objects_summed(fid, &layout, off, data, sums, true)
                .await
            {
                tracing::warn!(target: "client", "background write of {len} bytes at {off} of {fid}: {e}");
                wb.error.lock().get_or_insert(e);
            }
        });
    }

    /// Sends the gathered extent of a handle and waits for all its background writes.
    async fn drain(&self, wb: &Arc<WriteBack>, fid: Fid) {
        let pending = wb.extent.lock().take();
        if let Some(e) = pending {
            let (off, data, layout, sums) = e.freeze();
            self.submit(wb, fid, layout, off, data, sums).await;
        }
        loop {
            let waiter = wb.done.notified();
            if wb.inflight.load(Ordering::Acquire) == 0 {
                break;
            }
            waiter.await;
        }
    }

    /// Sends everything a handle holds and waits for it; returns (and clears) the first
    /// error of its background writes.
    pub(crate) async fn flush_handle(&self, wb: &Arc<WriteBack>, fid: Fid) -> Result<(), Errno> {
        self.drain(wb, fid).await;
        match wb.take_error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// What [`Client::flush`] would return, when it would not have to wait: the handle has
    /// nothing gathered or in flight. Lets a close of a clean handle answer at once.
    pub fn flush_ready(&self, f: &crate::file::OpenFile) -> Option<Result<(), Errno>> {
        let wb = &f.writeback;
        if wb.inflight.load(Ordering::Acquire) > 0 || wb.extent.lock().is_some() {
            return None;
        }
        Some(match wb.take_error() {
            Some(e) => Err(e),
            None => Ok(()),
        })
    }

    /// Waits until every open handle of `fid` on this client has its data on the OSTs
    /// (before a size is asked for, a truncate, a layout change). Errors stay with the
    /// handles, for their writers.
    pub(crate) async fn flush_fid(&self, fid: &Fid) {
        for wb in self.dirty.of(fid) {
            self.drain(&wb, *fid).await;
        }
    }

    /// Whether this client holds unsent or in-flight data of `fid`.
    pub fn has_dirty(&self, fid: &Fid) -> bool {
        self.dirty
            .of(fid)
            .iter()
            .any(|wb| wb.inflight.load(Ordering::Acquire) > 0 || wb.extent.lock().is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn checksums_computed_while_copying_in_are_those_of_the_extent() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for _ in 0..200 {
            let off = rng.gen_range(0..20_000u64);
            let gathered = Arc::default();
            let mut e = Extent::new(off, Layout::plain(1, 1 << 20, 0), true, &gathered);
            let mut all = Vec::new();
            for _ in 0..rng.gen_range(1..10) {
                let piece: Vec<u8> = (0..rng.gen_range(1..20_000)).map(|_| rng.r#gen()).collect();
                e.append(&piece, 1 << 20);
                all.extend_from_slice(&piece);
            }
            assert_eq!(gathered.load(Ordering::Acquire), all.len() as u64);
            let (at, bytes, _, sums) = e.freeze();
            assert_eq!(gathered.load(Ordering::Acquire), 0);
            assert_eq!((at, &bytes[..]), (off, &all[..]));
            assert_eq!(sums, Some(nacre_core::cksum::bulk_sums(off, &all)));
        }
    }

    fn aligned(e: &Extent) -> bool {
        (e.buf.as_ptr() as usize + e.pad).is_multiple_of(EXTENT_ALIGN)
    }

    #[test]
    fn an_extent_holds_memory_for_its_data_not_for_a_whole_rpc() {
        const MAX_RPC: usize = 4 << 20;
        let gathered = Arc::default();
        let layout = Layout::plain(1, 1 << 20, 0);
        let mut e = Extent::new(0, layout.clone(), false, &gathered);
        e.append(&[7u8; 8192], MAX_RPC);
        assert!(
            e.buf.capacity() < 8192 + 2 * EXTENT_ALIGN,
            "{}",
            e.buf.capacity()
        );
        assert!(aligned(&e));
        drop(e);
        assert_eq!(
            gathered.load(Ordering::Acquire),
            0,
            "a dropped extent counts out"
        );
        // Sequential 4 KiB writes up to a whole RPC: the buffer doubles, stays aligned, keeps
        // every byte, and never holds more than twice its data plus the alignment.
        let mut e = Extent::new(0, layout, false, &gathered);
        for i in 0..MAX_RPC / 4096 {
            e.append(&[i as u8; 4096], MAX_RPC);
            assert!(aligned(&e));
            assert!(e.buf.capacity() <= 2 * e.len() + 2 * EXTENT_ALIGN);
        }
        assert_eq!(e.len(), MAX_RPC);
        assert!(e.buf.capacity() <= MAX_RPC + EXTENT_ALIGN);
        let (off, bytes, _, _) = e.freeze();
        assert_eq!((off, bytes.len()), (0, MAX_RPC));
        assert!(
            bytes
                .chunks(4096)
                .enumerate()
                .all(|(i, c)| c.iter().all(|&b| b == i as u8))
        );
    }
}
