//! File data (Lustre's lov + osc): a byte range becomes per-object requests by the layout,
//! sent to the OSTs in parallel, each no larger than `max_pages_per_rpc`.
//!
//! The size of a file whose MDT size is not exact is the largest size its objects imply
//! (a glimpse), and its modification time is the objects' if data changed after the last
//! metadata change.
//!
//! Every bulk is checksummed both ways (see [`crate::cksum`]). A read whose target finds
//! its stored copy bad fails with [`ChunkReadError::Corrupt`] from
//! [`Client::read_chunk_checked`]. That is where redundancy hooks in: a reader of a layout
//! with another copy of the range (an FLR mirror, EC parity) catches `Corrupt`, reads the
//! range from the other copy, and rewrites this object's range with
//! [`Client::write_objects`] (whole blocks need nothing of the old data, so the rewrite
//! succeeds and stores fresh checksums). [`Client::read_objects`] has no other copy: it
//! logs, counts and returns EIO, in [`Client::no_good_copy`].

use crate::cksum::{ChunkReadError, damaged};
use crate::tunables::MirrorWriteMode;
use crate::{Client, rpc_errno};
use bytes::{Bytes, BytesMut};
use futures::future::join_all;
use nacre_core::cksum::{
    ChecksumType, ReadVerify, TornBlocks, bulk_sums, piece_count, verify_bulk,
};
use nacre_core::layout::Pattern;
use nacre_core::{Attr, Errno, Fid, Layout, OstLayout, StripeObject, TargetKind, TargetName};
use nacre_rpc::msg::{
    BulkCksum, Cred, InodeInfo, MirrorOp, ObjAttr, Reply, Request, WriteGrant, ost_obj_lists,
};
use nacre_rpc::{Import, RpcError};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The checksums of the pieces of `[buf_off, buf_off + len)` of a bulk at file offset
/// `off` (`total` bytes), taken from `sums` (those of the whole bulk's pieces, cut at every
/// 4 KiB of file offset) when the range is cut the same way in its object: it starts and
/// ends on piece boundaries, and its object offset sits as far into a block as its file
/// offset. Otherwise (or without `sums`) `None`: they are computed as it is sent.
fn reuse_sums(
    sums: Option<&[u32]>,
    off: u64,
    total: u64,
    buf_off: u64,
    len: u64,
    obj_off: u64,
) -> Option<Vec<u32>> {
    let sums = sums?;
    let block = nacre_core::cksum::BLOCK as u64;
    let start = off + buf_off;
    let end = start + len;
    let on_boundary = |at: u64, edge: bool| edge || at.is_multiple_of(block);
    if start % block != obj_off % block
        || !on_boundary(start, buf_off == 0)
        || !on_boundary(end, buf_off + len == total)
    {
        return None;
    }
    let first = piece_count(off, buf_off as usize);
    sums.get(first..first + piece_count(start, len as usize))
        .map(<[u32]>::to_vec)
}

/// One piece of an I/O: a contiguous range of one object and where it sits in the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub obj: StripeObject,
    /// Stripe index in its component (the filter fid's `ver`).
    pub stripe: u32,
    pub obj_off: u64,
    pub len: u64,
    pub buf_off: u64,
    /// The component's shape, for the object's filter fid (`None` where the object's file
    /// is not rebuilt from it: erasure-coded stripes).
    pub layout: Option<OstLayout>,
}

/// A planned I/O: object chunks, and ranges with no object (uninstantiated components).
#[derive(Debug, Default)]
pub struct Plan {
    pub chunks: Vec<Chunk>,
    /// Buffer ranges in components without objects (read as zeros).
    pub holes: Vec<(u64, u64)>,
    /// Buffer ranges in Data-on-MDT components.
    pub dom: Vec<(u64, u64)>,
}

/// Splits `[off, off + len)` by `layout` into object chunks of at most `max_rpc` bytes.
pub fn plan(layout: &Layout, off: u64, len: u64, max_rpc: u64) -> Plan {
    let mut p = Plan::default();
    let end = off.saturating_add(len);
    let mut pos = off;
    while pos < end {
        let Some(c) = layout.component_at(pos) else {
            break;
        };
        let comp_end = c.end.min(end);
        match c.pattern {
            Pattern::Mdt => {
                p.dom.push((pos - off, comp_end - pos));
                pos = comp_end;
            }
            // Parity is never read or written as file data (see `crate::ec`).
            Pattern::Parity { .. } => {
                p.holes.push((pos - off, comp_end - pos));
                pos = comp_end;
            }
            Pattern::Raid0 if c.objects.is_empty() => {
                p.holes.push((pos - off, comp_end - pos));
                pos = comp_end;
            }
            Pattern::Raid0 => {
                while pos < comp_end {
                    let s = u64::from(c.stripe_size.max(1));
                    let stripe_end = (pos / s + 1) * s;
                    let piece_end = stripe_end.min(comp_end);
                    let (idx, obj_off) = c.map(pos);
                    let n = piece_end - pos;
                    let chunk = Chunk {
                        obj: c.objects[idx],
                        stripe: idx as u32,
                        obj_off,
                        len: n,
                        buf_off: pos - off,
                        layout: c.ost_layout(),
                    };
                    // A one-stripe component maps a range to one contiguous object range.
                    match p.chunks.last_mut() {
                        Some(last)
                            if last.obj == chunk.obj
                                && last.obj_off + last.len == chunk.obj_off
                                && last.buf_off + last.len == chunk.buf_off
                                && last.len + chunk.len <= max_rpc =>
                        {
                            last.len += chunk.len;
                        }
                        _ => p.chunks.push(chunk),
                    }
                    pos = piece_end;
                }
            }
        }
    }
    // Split anything still larger than one RPC.
    let mut out = Vec::with_capacity(p.chunks.len());
    for c in p.chunks {
        let mut done = 0;
        while done < c.len {
            let n = (c.len - done).min(max_rpc.max(1));
            out.push(Chunk {
                obj_off: c.obj_off + done,
                len: n,
                buf_off: c.buf_off + done,
                ..c
            });
            done += n;
        }
    }
    p.chunks = out;
    p
}

/// How long a write the target answers EINPROGRESS is sent again (Lustre's client
/// resends such a bulk too): long enough for the MDT to move an object to its new file
/// (its owner log retries every few seconds), short enough not to hang the caller.
pub const INPROGRESS_WAIT: Duration = Duration::from_secs(20);
/// The pause before the first resend; it doubles up to [`INPROGRESS_BACKOFF_MAX`].
pub const INPROGRESS_BACKOFF_MIN: Duration = Duration::from_millis(50);
pub const INPROGRESS_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// The resends of one request its target answers EINPROGRESS.
struct InProgress {
    until: Option<Instant>,
    backoff: Duration,
}

impl InProgress {
    fn new() -> InProgress {
        InProgress {
            until: None,
            backoff: INPROGRESS_BACKOFF_MIN,
        }
    }

    /// Pauses before the next resend; false once [`INPROGRESS_WAIT`] is up.
    async fn wait(&mut self) -> bool {
        let until = *self
            .until
            .get_or_insert_with(|| Instant::now() + INPROGRESS_WAIT);
        if Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(self.backoff).await;
        self.backoff = (self.backoff * 2).min(INPROGRESS_BACKOFF_MAX);
        true
    }
}

/// Whether `[off, off + len)` reaches a stripe whose object is lost (a dummy slot of a
/// layout LFSCK rebuilt with a hole): those bytes can be neither read nor written.
pub fn reaches_lost_stripe(layout: &Layout, off: u64, len: u64) -> bool {
    layout.has_hole()
        && plan(layout, off, len, u64::MAX)
            .chunks
            .iter()
            .any(|c| c.obj.is_dummy())
}

impl Client {
    fn max_rpc(&self) -> u64 {
        self.tunables.max_rpc_bytes()
    }

    /// Writes `data` at `off` through `layout` (which must cover the range with objects).
    pub async fn write_objects(
        &self,
        fid: Fid,
        layout: &Layout,
        off: u64,
        data: Bytes,
    ) -> Result<(), Errno> {
        self.write_objects_summed(fid, layout, off, data, None, false)
            .await
    }

    /// [`write_objects`](Self::write_objects) with the checksums of the pieces of `data`
    /// (cut at every 4 KiB of file offset) when they were computed already, as the bytes
    /// were copied into the write-behind extent. `from_grant`: the bytes were cached
    /// against the OSTs' grant (see [`crate::grant`]).
    pub(crate) async fn write_objects_summed(
        &self,
        fid: Fid,
        layout: &Layout,
        off: u64,
        data: Bytes,
        sums: Option<Vec<u32>>,
        from_grant: bool,
    ) -> Result<(), Errno> {
        if nacre_core::ec::is_ec(layout) {
            // The data mirror only: the parity went stale at the open for write.
            let data_layout = nacre_core::ec::data_layout(layout);
            return self
                .write_copy(fid, &data_layout, off, data, sums, from_grant)
                .await;
        }
        if !layout.is_mirrored() {
            return self
                .write_copy(fid, layout, off, data, sums, from_grant)
                .await;
        }
        let end = off + data.len() as u64;
        match self.tunables.mirror_write_mode() {
            MirrorWriteMode::Delayed => {
                // A layout cached before the write intent (write-behind) asks now.
                let layout = if layout.needs_write_intent(off, end) {
                    self.mirror_write_intent(fid, layout, off, end).await?
                } else {
                    layout.clone()
                };
                let m = *layout.write_mirrors(off, end).first().ok_or(Errno::EIO)?;
                self.write_copy(fid, &layout.mirror(m), off, data, sums, from_grant)
                    .await
            }
            MirrorWriteMode::Immediate => {
                self.write_every_mirror(fid, layout, off, data, sums, from_grant)
                    .await
            }
        }
    }

    /// Immediate mirroring: every mirror in sync over the range gets the write, which
    /// returns when all have it. A mirror that fails (its OST down: given up as soon as
    /// the OST's import fails) is marked stale on the MDT instead of failing the
    /// application, as long as one mirror has the bytes.
    async fn write_every_mirror(
        &self,
        fid: Fid,
        layout: &Layout,
        off: u64,
        data: Bytes,
        sums: Option<Vec<u32>>,
        from_grant: bool,
    ) -> Result<(), Errno> {
        let end = off + data.len() as u64;
        let mirrors = layout.write_mirrors(off, end);
        if mirrors.is_empty() {
            tracing::error!(target: "client", "file {fid}: no mirror in sync for [{off}, {end})");
            return Err(Errno::EIO);
        }
        let alone = mirrors.len() == 1;
        let calls = mirrors.iter().map(|&m| {
            let (data, sums) = (data.clone(), sums.clone());
            async move {
                let copy = layout.mirror(m);
                let write = self.write_copy(fid, &copy, off, data, sums, from_grant);
                let r = if alone {
                    write.await
                } else {
                    self.unless_copy_failing(&copy, write)
                        .await
                        .unwrap_or(Err(Errno::ENOTCONN))
                };
                (m, r.inspect_err(|e| {
                    tracing::warn!(target: "client", "file {fid}: write of mirror {m} at {off} failed: {e}");
                }))
            }
        });
        let results = join_all(calls).await;
        let written: Vec<u32> = results
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(m, _)| *m)
            .collect();
        if written.is_empty() {
            return results.into_iter().try_for_each(|(_, r)| r);
        }
        if written.len() < results.len() {
            self.mirror_request(fid, MirrorOp::Write {
                start: off,
                end,
                keep: written.clone(),
            })
            .await
            .inspect_err(|e| {
                tracing::error!(target: "client", "file {fid}: cannot mark the mirrors not written stale: {e}");
            })?;
            tracing::warn!(target: "client", "file {fid}: [{off}, {end}) written to mirror(s) {written:?} only; the others are stale until resync");
        }
        Ok(())
    }

    /// Lustre's write intent on a mirrored file (delayed mode): the MDT marks every mirror
    /// but the one this write goes to stale over `[off, end)`. The mirror is the best in
    /// sync ([`Layout::write_mirrors`]), one whose OSTs answer before one whose do not.
    pub(crate) async fn mirror_write_intent(
        &self,
        fid: Fid,
        layout: &Layout,
        off: u64,
        end: u64,
    ) -> Result<Layout, Errno> {
        let mut order = layout.write_mirrors(off, end);
        order.sort_by_key(|&m| self.mirror_failing(layout, m));
        let primary = *order.first().ok_or(Errno::EIO)?;
        let info = self
            .mirror_request(
                fid,
                MirrorOp::Write {
                    start: off,
                    end,
                    keep: vec![primary],
                },
            )
            .await?;
        info.layout.ok_or(Errno::EPROTO)
    }

    /// Sends an FLR request about `fid` to its MDT (as root: the control tools and the
    /// write path have checked the caller already).
    pub(crate) async fn mirror_request(&self, fid: Fid, op: MirrorOp) -> Result<InodeInfo, Errno> {
        let req = Request::Mirror {
            fid,
            op,
            cred: Cred::root(),
        };
        match self.md_call(self.mdt_of(&fid), req).await? {
            Reply::Inode(i) => Ok(i),
            _ => Err(Errno::EPROTO),
        }
    }

    /// Waits for `fut`, a request to the OSTs of `copy`, but gives up (`None`) as soon as
    /// one of them stops answering, when another copy can take its place.
    async fn unless_copy_failing<T>(
        &self,
        copy: &Layout,
        fut: impl std::future::Future<Output = T>,
    ) -> Option<T> {
        let imps: Vec<_> = copy
            .objects()
            .filter_map(|o| self.osc(o.ost_idx).ok())
            .collect();
        if imps.is_empty() {
            return Some(fut.await);
        }
        let any_failing = futures::future::select_all(imps.iter().map(|i| Box::pin(i.failing())));
        let r = tokio::select! {
            r = fut => Some(r),
            _ = any_failing => None,
        };
        if r.is_none() {
            imps.iter().for_each(|i| i.reconnect_in_background());
        }
        r
    }

    /// Writes one copy of the data: through a layout without mirrors (or one mirror).
    pub(crate) async fn write_copy(
        &self,
        fid: Fid,
        layout: &Layout,
        off: u64,
        data: Bytes,
        sums: Option<Vec<u32>>,
        from_grant: bool,
    ) -> Result<(), Errno> {
        let grant = WriteGrant {
            from_grant,
            want: self.grant_want(),
        };
        let p = plan(layout, off, data.len() as u64, self.max_rpc());
        let file_sums = sums.filter(|s| s.len() == piece_count(off, data.len()));
        let sums_of = |buf_off: u64, len: u64, obj_off: u64| {
            reuse_sums(
                file_sums.as_deref(),
                off,
                data.len() as u64,
                buf_off,
                len,
                obj_off,
            )
        };
        if !p.holes.is_empty() {
            return Err(Errno::EIO);
        }
        let dom_calls = self
            .dom_pieces(&p, off)
            .into_iter()
            .map(|(buf_off, file_off, len)| {
                let bulk = data.slice(buf_off as usize..(buf_off + len) as usize);
                let mdt = self.mdt_of(&fid);
                // A DoM object's offsets are the file's.
                let sums = sums_of(buf_off, len, file_off);
                async move {
                    let imp = self.mdc(mdt)?;
                    self.send_checked(TargetName::mdt(mdt), &imp, file_off, bulk, sums, |cksum| {
                        Request::DomWrite {
                            fid,
                            offset: file_off,
                            cksum,
                        }
                    })
                    .await
                    .map(drop)
                }
            });
        if p.chunks.iter().any(|c| c.obj.is_dummy()) {
            tracing::error!(target: "client", "file {fid}: write at {off} reaches a stripe that was lost (a hole in the layout): EIO");
            return Err(Errno::EIO);
        }
        let calls = p.chunks.iter().map(|c| {
            let bulk = data.slice(c.buf_off as usize..(c.buf_off + c.len) as usize);
            let (obj, parent, offset) = (c.obj.fid, fid.with_ver(c.stripe), c.obj_off);
            let layout = c.layout;
            let ost = c.obj.ost_idx;
            let sums = sums_of(c.buf_off, c.len, c.obj_off);
            async move {
                let imp = self.osc(ost)?;
                self.rpc_stats.record(ost, true, bulk.len() as u64);
                let reply = self
                    .send_checked(TargetName::ost(ost), &imp, offset, bulk, sums, |cksum| {
                        Request::OstWrite {
                            obj,
                            parent,
                            offset,
                            cksum,
                            grant,
                            layout,
                        }
                    })
                    .await?;
                if let Reply::OstWritten { grant, .. } = reply {
                    // The connection that carried the reply (the first write also makes
                    // the first connection).
                    self.grants.add(ost, imp.generation(), grant);
                }
                Ok(())
            }
        });
        let (a, b) = futures::join!(join_all(dom_calls), join_all(calls));
        for r in a.into_iter().chain(b) {
            r?;
        }
        Ok(())
    }

    /// Sends `req` to OST `ost`. A change ([`Request::is_ost_replayable`]) goes tracked
    /// (`osc.*.replay_tracking`) and is kept, with its data, until the OST commits it; when
    /// the kept data of all OSCs reached [`crate::replay::KEPT_WRITE_BYTES_MAX`] (or this
    /// list its length bound), the OSTs commit first.
    pub(crate) async fn ost_call(
        &self,
        ost: u32,
        imp: &Import,
        req: &Request,
        bulk: Bytes,
    ) -> Result<(Reply, Bytes), RpcError> {
        if !req.is_ost_replayable() || !self.tunables.osc_replay_tracking() {
            return imp.call(req, bulk).await;
        }
        let rep = self.osc_replay(ost).map_err(RpcError::Errno)?;
        if self.kept_over_bound() {
            self.commit_kept().await;
        }
        rep.call_tracked(imp, req.clone(), bulk).await
    }

    /// Whether the OSCs keep more than they may: [`crate::replay::KEPT_WRITE_BYTES_MAX`]
    /// of data together, or a full list.
    fn kept_over_bound(&self) -> bool {
        let lists = self.osc_replays.read();
        lists.iter().any(|r| r.is_full())
            || lists.iter().map(|r| r.kept_bytes()).sum::<u64>()
                >= crate::replay::KEPT_WRITE_BYTES_MAX
    }

    /// The OSCs that keep anything for replay, with their imports.
    pub(crate) fn osc_kept(&self) -> Vec<(u32, std::sync::Arc<Import>)> {
        (0..self.ost_count() as u32)
            .filter(|i| self.osc_replay(*i).is_ok_and(|r| r.kept() > 0))
            .filter_map(|i| self.osc(i).ok().map(|imp| (i, imp)))
            .collect()
    }

    /// Has OST `ost` commit; its list drops what that covers.
    pub(crate) async fn commit_ost(&self, ost: u32, imp: &Import) -> Result<(), Errno> {
        let rep = self.osc_replay(ost)?;
        match imp.call(&Request::OstCommit, Bytes::new()).await {
            Ok((Reply::Committed { last_committed }, _)) => {
                rep.committed(last_committed);
                Ok(())
            }
            Ok(_) => Err(Errno::EPROTO),
            Err(e) => Err(rpc_errno(e)),
        }
    }

    /// Every OST this client keeps writes for commits them (one round at a time: a writer
    /// that finds a round under way waits for it instead of starting another). An OST
    /// that cannot is logged; its writes stay kept, for a replay.
    async fn commit_kept(&self) {
        let _one = self.commit_round.lock().await;
        // A round that ended while this writer waited may have made room.
        if !self.kept_over_bound() {
            return;
        }
        let calls = self.osc_kept().into_iter().map(|(ost, imp)| async move {
            if let Err(e) = self.commit_ost(ost, &imp).await {
                tracing::warn!(target: "client", "{}: commit of kept writes failed: {e}", imp.target());
            }
        });
        join_all(calls).await;
    }

    /// Sends a write bulk at object offset `obj_off` with its checksums (when
    /// `osc.*.checksums` is on: `sums` if computed already, else computed here); a bulk
    /// the target finds damaged (EBADMSG) goes again, at most `osc.*.resend_count` times,
    /// then the write fails with EIO.
    pub(crate) async fn send_checked(
        &self,
        target: TargetName,
        imp: &Import,
        obj_off: u64,
        bulk: Bytes,
        sums: Option<Vec<u32>>,
        req: impl FnOnce(Option<BulkCksum>) -> Request,
    ) -> Result<Reply, Errno> {
        let cksum = self.tunables.checksums().map(|kind| BulkCksum {
            kind,
            sums: sums.unwrap_or_else(|| bulk_sums(obj_off, &bulk)),
        });
        let checked = cksum.is_some();
        let req = req(cksum);
        let mut resends = 0;
        let mut busy = InProgress::new();
        loop {
            let sent = if checked && self.checksum_faults.take_send() {
                damaged(&bulk)
            } else {
                bulk.clone()
            };
            let r = match target.kind {
                TargetKind::Ost => self.ost_call(target.index, imp, &req, sent).await,
                TargetKind::Mdt if matches!(req, Request::DomWrite { .. }) => {
                    self.dom_write_call(target.index, imp, &req, sent).await
                }
                _ => imp.call(&req, sent).await,
            };
            match r {
                Ok((reply, _)) => return Ok(reply),
                Err(RpcError::Errno(Errno::EBADMSG)) if checked => {
                    self.cksum_stats.damaged(target);
                    resends += 1;
                    if resends > self.tunables.resend_count() {
                        tracing::error!(target: "client", "{target}: write of {} bytes at {obj_off}: damaged on the way {resends} times, giving up", bulk.len());
                        return Err(Errno::EIO);
                    }
                    tracing::warn!(target: "client", "{target}: write of {} bytes at {obj_off} arrived damaged: sending it again ({resends})", bulk.len());
                }
                // The target cannot take it yet (an object whose file the MDT is changing):
                // again after a pause, for at most INPROGRESS_WAIT.
                Err(RpcError::Errno(Errno::EINPROGRESS)) => {
                    if !busy.wait().await {
                        tracing::error!(target: "client", "{target}: write of {} bytes at {obj_off} still refused as in progress after {INPROGRESS_WAIT:?}: EIO", bulk.len());
                        return Err(Errno::EIO);
                    }
                }
                Err(e) => return Err(rpc_errno(e)),
            }
        }
    }

    /// Sends a read and checks what comes back against the checksums the target sent
    /// with it (when `osc.*.checksums` is on); a reply damaged on the way is asked for
    /// again, at most `osc.*.resend_count` times. `obj_off` is where the read starts in
    /// the object. ECKSUM (the target's copy is bad) is [`ChunkReadError::Corrupt`].
    ///
    /// An OST read asked with [`ReadVerify::Reader`] brings whole blocks' stored
    /// checksums, unchecked by the OST: a mismatch may be the copy at rest as well as the
    /// transfer, so it is asked again with [`ReadVerify::Target`], which tells them apart
    /// (ECKSUM, or a reply that checks).
    pub(crate) async fn fetch_checked(
        &self,
        target: TargetName,
        imp: &Import,
        mut req: Request,
        obj_off: u64,
        kind: Option<ChecksumType>,
    ) -> Result<Bytes, ChunkReadError> {
        let mut resends = 0;
        // The mismatch that made a reader-checked read ask the OST to check.
        let mut unchecked_mismatch = None;
        loop {
            let (reply, bulk) = match imp.call(&req, Bytes::new()).await {
                Ok(r) => r,
                Err(RpcError::Errno(Errno::ECKSUM)) => {
                    let (obj, len) = match &req {
                        Request::OstRead { obj, len, .. } => (*obj, u64::from(*len)),
                        Request::DomRead { fid, len, .. } => (*fid, u64::from(*len)),
                        _ => (Fid::default(), 0),
                    };
                    return Err(ChunkReadError::Corrupt {
                        target,
                        obj,
                        offset: obj_off,
                        len,
                    });
                }
                Err(e) => return Err(ChunkReadError::Failed(rpc_errno(e))),
            };
            let Some(kind) = kind else {
                return Ok(bulk);
            };
            let sums = match reply {
                Reply::Checksummed(c) if c.kind == kind => c.sums,
                _ => return Err(ChunkReadError::Failed(Errno::EPROTO)),
            };
            let got = if self.checksum_faults.take_receive() {
                damaged(&bulk)
            } else {
                bulk
            };
            match verify_bulk(obj_off, &got, &sums) {
                Ok(()) => {
                    if let Some(e) = unchecked_mismatch {
                        // The OST found its copy good: the first reply was damaged on
                        // the way (or held a block a crash tore, which the OST took).
                        self.cksum_stats.damaged(target);
                        tracing::warn!(target: "client", "{target}: read at {obj_off} arrived damaged ({e}); the OST's copy checks good");
                    }
                    return Ok(got);
                }
                Err(e) => {
                    if let Request::OstRead {
                        verify: verify @ ReadVerify::Reader,
                        ..
                    } = &mut req
                    {
                        *verify = ReadVerify::Target;
                        unchecked_mismatch = Some(e);
                        continue;
                    }
                    self.cksum_stats.damaged(target);
                    resends += 1;
                    if resends > self.tunables.resend_count() {
                        tracing::error!(target: "client", "{target}: read at {obj_off}: damaged on the way {resends} times, giving up: {e}");
                        return Err(ChunkReadError::Failed(Errno::EIO));
                    }
                    tracing::warn!(target: "client", "{target}: read at {obj_off} arrived damaged ({e}): asking again ({resends})");
                }
            }
        }
    }

    /// A range whose only copy failed its checksum: logged, counted, and EIO for the
    /// application. (A layout with redundancy reads another copy instead; see the module
    /// documentation.)
    pub(crate) fn no_good_copy(&self, fid: Fid, e: ChunkReadError) -> Errno {
        match e {
            ChunkReadError::Corrupt { target, .. } => {
                self.cksum_stats.corrupt(target);
                tracing::error!(target: "client", "file {fid}: {e}: no other copy, EIO");
                Errno::EIO
            }
            ChunkReadError::Failed(e) => e,
        }
    }

    /// Data-on-MDT parts of a plan as (buffer offset, file offset, length), each no larger
    /// than one RPC.
    fn dom_pieces(&self, p: &Plan, off: u64) -> Vec<(u64, u64, u64)> {
        let max = self.max_rpc().max(4096);
        let mut v = Vec::new();
        for &(buf_off, len) in &p.dom {
            let mut done = 0;
            while done < len {
                let n = (len - done).min(max);
                v.push((buf_off + done, off + buf_off + done, n));
                done += n;
            }
        }
        v
    }

    /// `fallocate(2)` of `[off, off + len)` through `layout`: one request per object, since
    /// a contiguous file range is a contiguous range of each object it touches. Ranges
    /// without objects are already holes, so only a punch may meet them.
    pub async fn fallocate_objects(
        &self,
        fid: Fid,
        layout: &Layout,
        off: u64,
        len: u64,
        mode: i32,
    ) -> Result<(), Errno> {
        let p = plan(layout, off, len, u64::MAX);
        for &(buf_off, dlen) in &p.dom {
            let req = Request::DomFallocate {
                fid,
                offset: off + buf_off,
                len: dlen,
                mode,
            };
            self.md_call(self.mdt_of(&fid), req).await?;
        }
        if !p.holes.is_empty() && mode & crate::file::FALLOC_FL_PUNCH_HOLE == 0 {
            return Err(Errno::EIO);
        }
        let mut per_obj: BTreeMap<Fid, (StripeObject, u32, u64, u64)> = BTreeMap::new();
        for c in &p.chunks {
            let e =
                per_obj
                    .entry(c.obj.fid)
                    .or_insert((c.obj, c.stripe, c.obj_off, c.obj_off + c.len));
            e.2 = e.2.min(c.obj_off);
            e.3 = e.3.max(c.obj_off + c.len);
        }
        if per_obj.values().any(|(o, ..)| o.is_dummy()) {
            return Err(Errno::EIO);
        }
        let calls = per_obj
            .into_values()
            .map(|(obj, stripe, start, end)| async move {
                let imp = self.osc(obj.ost_idx)?;
                let req = Request::OstFallocate {
                    obj: obj.fid,
                    parent: fid.with_ver(stripe),
                    offset: start,
                    len: end - start,
                    mode,
                };
                let mut busy = InProgress::new();
                loop {
                    match self.ost_call(obj.ost_idx, &imp, &req, Bytes::new()).await {
                        Err(RpcError::Errno(Errno::EINPROGRESS)) if busy.wait().await => {}
                        Err(RpcError::Errno(Errno::EINPROGRESS)) => return Err(Errno::EIO),
                        r => return r.map(|_| ()).map_err(rpc_errno),
                    }
                }
            });
        for r in join_all(calls).await {
            r?;
        }
        Ok(())
    }

    /// Reads `[off, off + len)` of the objects. Returns the buffer and the end (relative to
    /// `off`) of the data actually found; bytes past it are zeros, and the caller decides
    /// with the file size whether they are holes or beyond EOF.
    pub async fn read_objects(
        &self,
        fid: Fid,
        layout: &Layout,
        off: u64,
        len: u64,
    ) -> Result<(Bytes, u64), Errno> {
        if nacre_core::ec::is_ec(layout) {
            return self.read_ec(fid, layout, off, len).await;
        }
        if layout.is_mirrored() {
            return self.read_mirrored(fid, layout, off, len).await;
        }
        self.read_copy(fid, layout, off, len, TornBlocks::Take)
            .await
    }

    /// Whether an OST of mirror `m` of `layout` stopped answering.
    fn mirror_failing(&self, layout: &Layout, m: u32) -> bool {
        layout
            .components
            .iter()
            .filter(|c| c.mirror_id() == m)
            .flat_map(|c| c.objects.iter())
            .filter(|o| !o.is_dummy())
            .filter_map(|o| self.osc(o.ost_idx).ok())
            .any(|i| {
                // Read last, the OST is never asked by a read: a ping finds it back.
                i.reconnect_in_background();
                i.is_failing()
            })
    }

    /// [`Layout::read_mirrors`], mirrors with an OST that stopped answering last.
    fn mirror_order(&self, layout: &Layout, start: u64, end: u64) -> Vec<u32> {
        let mut order = layout.read_mirrors(start, end);
        order.sort_by_key(|&m| self.mirror_failing(layout, m));
        order
    }

    /// Waits for `fut`, a request to OST `ost`, but gives up (`None`) as soon as that OST
    /// has stopped answering, when another copy can be read instead.
    pub(crate) async fn unless_failing<T>(
        &self,
        ost: u32,
        fut: impl std::future::Future<Output = T>,
    ) -> Option<T> {
        let Ok(imp) = self.osc(ost) else {
            return Some(fut.await);
        };
        let r = tokio::select! {
            r = fut => Some(r),
            () = imp.failing() => None,
        };
        if r.is_none() {
            imp.reconnect_in_background();
        }
        r
    }

    /// A read of a mirrored file: each object range from the best mirror in sync (see
    /// [`Layout::read_mirrors`]); a range that fails there (its OST down, or its copy
    /// failing its checksum) is read from the next mirror, and a copy that failed its
    /// checksum is rewritten from the good one.
    async fn read_mirrored(
        &self,
        fid: Fid,
        layout: &Layout,
        off: u64,
        len: u64,
    ) -> Result<(Bytes, u64), Errno> {
        let order = self.mirror_order(layout, off, off.saturating_add(len));
        let Some((&first, others)) = order.split_first() else {
            tracing::error!(target: "client", "file {fid}: no mirror in sync for [{off}, {})", off + len);
            return Err(Errno::EIO);
        };
        let primary = layout.mirror(first);
        let p = plan(&primary, off, len, self.max_rpc());
        // The file's size, asked once and only if a range comes back short.
        let size = tokio::sync::OnceCell::new();
        let calls = p.chunks.iter().map(|c| {
            let (primary, size) = (&primary, &size);
            async move {
                // With no other copy to read, the request waits out the recovery and takes
                // a block the OST's crash tore as it was kept; with one, such a block is
                // read from the other copy and rewritten.
                let read = if others.is_empty() {
                    Some(self.read_chunk_checked(c, TornBlocks::Take).await)
                } else {
                    self.unless_failing(
                        c.obj.ost_idx,
                        self.read_chunk_checked(c, TornBlocks::Report),
                    )
                    .await
                };
                let r = match read.unwrap_or(Err(ChunkReadError::Failed(Errno::ENOTCONN))) {
                    Ok(data) if (data.len() as u64) < c.len && !others.is_empty() => {
                        let size = *size
                            .get_or_init(|| async {
                                self.getattr(fid).await.map(|i| i.attr.size)
                            })
                            .await;
                        match size {
                            Ok(size) => {
                                let at = off + c.buf_off;
                                Ok(self
                                    .read_short_elsewhere(fid, layout, first, others, at, c.len, data, size)
                                    .await)
                            }
                            // The file is gone (a readahead that outlived it).
                            Err(e @ (Errno::ESTALE | Errno::ENOENT)) => {
                                tracing::debug!(target: "client", "file {fid}: no size to check a short read of mirror {first} against: {e}");
                                Ok(data)
                            }
                            Err(e) => {
                                tracing::warn!(target: "client", "file {fid}: no size to check a short read of mirror {first} against: {e}");
                                Ok(data)
                            }
                        }
                    }
                    Ok(data) => Ok(data),
                    Err(e) => {
                        self.read_other_mirror(fid, layout, primary, first, others, off, c, e)
                            .await
                    }
                };
                (c.buf_off, r)
            }
        });
        let mut buf = BytesMut::zeroed(len as usize);
        let mut found = 0u64;
        for (buf_off, r) in join_all(calls).await {
            let data = r?;
            let s = buf_off as usize;
            buf[s..s + data.len()].copy_from_slice(&data);
            if !data.is_empty() {
                found = found.max(buf_off + data.len() as u64);
            }
        }
        Ok((buf.freeze(), found))
    }

    /// A range of mirror `first` at file offset `at` (`len` bytes) came back short (`got`)
    /// inside a file of `size` bytes: a hole, or an object lost with its OST's objects
    /// (which reads as one). The rest is asked of the other mirrors in order, and the
    /// first that holds bytes there answers; no copy holding any, it is a hole. Not
    /// rewritten here (a writer may be extending the file): `lfs mirror verify --stale`
    /// and resync repair a copy that lost data.
    #[allow(clippy::too_many_arguments)]
    async fn read_short_elsewhere(
        &self,
        fid: Fid,
        layout: &Layout,
        first: u32,
        others: &[u32],
        at: u64,
        len: u64,
        got: Bytes,
        size: u64,
    ) -> Bytes {
        let from = at + got.len() as u64;
        let to = (at + len).min(size);
        if from >= to {
            return got;
        }
        for &m in others {
            let copy = layout.mirror(m);
            let read = self
                .unless_copy_failing(
                    &copy,
                    self.read_copy(fid, &copy, from, to - from, TornBlocks::Take),
                )
                .await;
            match read {
                Some(Ok((rest, found))) if found > 0 => {
                    tracing::warn!(target: "client", "file {fid}: mirror {first} holds nothing at [{from}, {to}) but mirror {m} does (a lost object?): read from mirror {m}");
                    let mut v = BytesMut::with_capacity(got.len() + found as usize);
                    v.extend_from_slice(&got);
                    v.extend_from_slice(&rest[..found as usize]);
                    return v.freeze();
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    tracing::warn!(target: "client", "file {fid}: mirror {m} at [{from}, {to}): {e}")
                }
                None => {}
            }
        }
        got
    }

    /// Chunk `c` of mirror `first` (of a read at `off`) failed with `e`: its bytes from
    /// the other mirrors, in order; a copy that failed its checksum is repaired from them.
    #[allow(clippy::too_many_arguments)]
    async fn read_other_mirror(
        &self,
        fid: Fid,
        layout: &Layout,
        primary: &Layout,
        first: u32,
        others: &[u32],
        off: u64,
        c: &Chunk,
        e: ChunkReadError,
    ) -> Result<Bytes, Errno> {
        let corrupt = matches!(e, ChunkReadError::Corrupt { .. });
        if let ChunkReadError::Corrupt { target, .. } = &e {
            self.cksum_stats.corrupt(*target);
        }
        if let Some(held) = self.degraded_log.allow() {
            tracing::warn!(target: "client", "file {fid}: mirror {first}: {e}: reading another mirror{}", nacre_core::log_limit::held_note(held));
        }
        // Whole blocks around the range, so a repair needs nothing of the bad copy.
        let block = nacre_core::cksum::BLOCK as u64;
        let lead = c.obj_off % block;
        let span = (c.obj_off + c.len).div_ceil(block) * block - (c.obj_off - lead);
        let file_off = off + c.buf_off - lead;
        // First only copies that are good; then, none being, copies a crash tore as their
        // OSTs kept them (this one's first: it needs no repair), among those that failed
        // their checksums (EIO) rather than did not answer.
        let mut candidates = others.to_vec();
        for torn in [TornBlocks::Report, TornBlocks::Take] {
            if torn == TornBlocks::Take
                && corrupt
                && let Ok(b) = self.read_as_kept(fid, c, e.clone()).await
            {
                return Ok(b);
            }
            let mut bad = Vec::new();
            for &m in &candidates {
                let copy = layout.mirror(m);
                let read = self.read_copy(fid, &copy, file_off, span, torn);
                let (good, found) = match read.await {
                    Ok(r) => r,
                    Err(e2) => {
                        if let Some(held) = self.degraded_log.allow() {
                            tracing::warn!(target: "client", "file {fid}: mirror {m} failed too: {e2}{}", nacre_core::log_limit::held_note(held));
                        }
                        if e2 == Errno::EIO {
                            bad.push(m);
                        }
                        continue;
                    }
                };
                let good = good.slice(..found as usize);
                if corrupt {
                    self.repair_from_mirror(fid, primary, (first, m), c, file_off, &good)
                        .await;
                }
                let start = (lead as usize).min(good.len());
                let end = (lead + c.len).min(good.len() as u64) as usize;
                return Ok(good.slice(start..end));
            }
            candidates = bad;
        }
        Err(self.no_good_copy(fid, e))
    }

    /// Rewrites chunk `c` of mirror `from.0` (its layout `primary`), which failed its
    /// checksum, with `good`, read at file offset `file_off` from mirror `from.1`.
    async fn repair_from_mirror(
        &self,
        fid: Fid,
        primary: &Layout,
        (first, m): (u32, u32),
        c: &Chunk,
        file_off: u64,
        good: &Bytes,
    ) {
        match self
            .repair_chunk(fid, primary, c, file_off, good.clone())
            .await
        {
            Ok(()) => {
                self.cksum_stats.repaired(TargetName::ost(c.obj.ost_idx));
                tracing::warn!(target: "client", "file {fid}: mirror {first}: object {} on OST{:04x} rewritten from mirror {m}", c.obj.fid, c.obj.ost_idx);
            }
            Err(e) => {
                tracing::error!(target: "client", "file {fid}: mirror {first}: repair of object {} failed: {e}", c.obj.fid)
            }
        }
    }

    /// Chunk `c` of file `fid`, whose read failed with `e` (its checksum) while no other
    /// copy could stand in, read again taking a block its OST's last crash tore as the
    /// disk kept it: a write never synced may come back old, new or in between, but not
    /// unreadable. Still failing, the block is corrupt: EIO.
    pub(crate) async fn read_as_kept(
        &self,
        fid: Fid,
        c: &Chunk,
        e: ChunkReadError,
    ) -> Result<Bytes, Errno> {
        match self.read_chunk_checked(c, TornBlocks::Take).await {
            Ok(b) => {
                tracing::warn!(target: "client", "file {fid}: object {} on OST{:04x} at {}: no good copy elsewhere; read as its OST kept it after a crash", c.obj.fid, c.obj.ost_idx, c.obj_off);
                Ok(b)
            }
            Err(_) => Err(self.no_good_copy(fid, e)),
        }
    }

    /// Rewrites a bad copy's range (`good`, at file offset `file_off`, from a block
    /// boundary) in the object of chunk `c`. A last partial block is written after the
    /// object is cut to that block's start, so no byte of the bad block is needed.
    pub(crate) async fn repair_chunk(
        &self,
        fid: Fid,
        primary: &Layout,
        c: &Chunk,
        file_off: u64,
        good: Bytes,
    ) -> Result<(), Errno> {
        if good.is_empty() {
            return Ok(());
        }
        let block = nacre_core::cksum::BLOCK as u64;
        let obj_start = c.obj_off - c.obj_off % block;
        let obj_end = obj_start + good.len() as u64;
        let mut good = good;
        if !obj_end.is_multiple_of(block) {
            let imp = self.osc(c.obj.ost_idx)?;
            let req = Request::OstGetattr {
                objs: vec![c.obj.fid],
            };
            let size = match imp.call(&req, Bytes::new()).await.map_err(rpc_errno)? {
                (Reply::ObjAttrs(a), _) => a.first().copied().flatten().map_or(0, |a| a.size),
                _ => return Err(Errno::EPROTO),
            };
            let block_end = obj_end.div_ceil(block) * block;
            if size >= block_end {
                // The good copy ends in a hole inside the object: zeros to the block's end.
                let mut whole = BytesMut::zeroed((block_end - obj_start) as usize);
                whole[..good.len()].copy_from_slice(&good);
                good = whole.freeze();
            } else {
                // The object ends in this block: cut it to the block's start first.
                let req = Request::OstPunch {
                    obj: c.obj.fid,
                    size: obj_end - obj_end % block,
                };
                self.ost_call(c.obj.ost_idx, &imp, &req, Bytes::new())
                    .await
                    .map_err(rpc_errno)?;
            }
        }
        // A repair is not cached data: it asks no grant of its own.
        self.write_copy(fid, primary, file_off, good, None, false)
            .await
    }

    /// Reads one copy: through a layout without mirrors (or one mirror); `torn` says what
    /// its OSTs do with a block a crash tore.
    pub(crate) async fn read_copy(
        &self,
        fid: Fid,
        layout: &Layout,
        off: u64,
        len: u64,
        torn: TornBlocks,
    ) -> Result<(Bytes, u64), Errno> {
        let p = plan(layout, off, len, self.max_rpc());
        let kind = self.tunables.checksums();
        let dom_calls = self
            .dom_pieces(&p, off)
            .into_iter()
            .map(|(buf_off, file_off, n)| {
                let req = Request::DomRead {
                    fid,
                    offset: file_off,
                    len: n as u32,
                    cksum: kind,
                };
                let mdt = self.mdt_of(&fid);
                async move {
                    let r = match self.mdc(mdt) {
                        Ok(imp) => self
                            .fetch_checked(TargetName::mdt(mdt), &imp, req, file_off, kind)
                            .await
                            .map_err(|e| self.no_good_copy(fid, e)),
                        Err(e) => Err(e),
                    };
                    (buf_off, r)
                }
            });
        if p.chunks.len() == 1 && p.holes.is_empty() && p.dom.is_empty() {
            let c = p.chunks[0];
            let data = self.read_chunk(fid, &c, torn).await?;
            let n = data.len() as u64;
            return Ok((data, n));
        }
        let calls = p
            .chunks
            .iter()
            .map(|c| async move { (c.buf_off, self.read_chunk(fid, c, torn).await) });
        let (dom, ost) = futures::join!(join_all(dom_calls), join_all(calls));
        if dom.len() == 1 && ost.is_empty() && p.holes.is_empty() {
            // A read inside the DoM component: no copy.
            let (buf_off, r) = dom.into_iter().next().ok_or(Errno::EIO)?;
            let data = r?;
            if buf_off == 0 {
                let n = data.len() as u64;
                return Ok((data, n));
            }
            let mut buf = BytesMut::zeroed(len as usize);
            buf[buf_off as usize..buf_off as usize + data.len()].copy_from_slice(&data);
            let found = if data.is_empty() {
                0
            } else {
                buf_off + data.len() as u64
            };
            return Ok((buf.freeze(), found));
        }
        let mut buf = BytesMut::zeroed(len as usize);
        let mut found = 0u64;
        for (buf_off, r) in dom.into_iter().chain(ost) {
            let data = r?;
            let s = buf_off as usize;
            buf[s..s + data.len()].copy_from_slice(&data);
            if !data.is_empty() {
                found = found.max(buf_off + data.len() as u64);
            }
        }
        Ok((buf.freeze(), found))
    }

    /// One object range of file `fid`; its only copy failing its checksum is EIO.
    pub(crate) async fn read_chunk(
        &self,
        fid: Fid,
        c: &Chunk,
        torn: TornBlocks,
    ) -> Result<Bytes, Errno> {
        self.read_chunk_checked(c, torn)
            .await
            .map_err(|e| self.no_good_copy(fid, e))
    }

    /// Reads one object range, checked end to end. [`ChunkReadError::Corrupt`] means the
    /// OST's copy failed its stored checksum: the place for a redundant layout to read
    /// another copy and rewrite this one (asking with [`TornBlocks::Report`], so a block
    /// the OST's crash tore is one of those too).
    pub async fn read_chunk_checked(
        &self,
        c: &Chunk,
        torn: TornBlocks,
    ) -> Result<Bytes, ChunkReadError> {
        if c.obj.is_dummy() {
            if let Some(held) = self.missing_log.allow() {
                tracing::error!(target: "client", "stripe {} was lost (a hole in the layout): EIO{}", c.stripe, nacre_core::log_limit::held_note(held));
            }
            return Err(ChunkReadError::Failed(Errno::EIO));
        }
        let imp = self.osc(c.obj.ost_idx)?;
        self.rpc_stats.record(c.obj.ost_idx, false, c.len);
        let kind = self.tunables.checksums();
        let req = Request::OstRead {
            obj: c.obj.fid,
            offset: c.obj_off,
            len: c.len as u32,
            cksum: kind,
            torn,
            verify: ReadVerify::Reader,
        };
        match self
            .fetch_checked(TargetName::ost(c.obj.ost_idx), &imp, req, c.obj_off, kind)
            .await
        {
            // OSTs make an object's file when they precreate it, so a missing one is lost
            // (or destroyed under a reader without an open handle), never a hole.
            Err(ChunkReadError::Failed(Errno::ENOENT)) => {
                if let Some(held) = self.missing_log.allow() {
                    tracing::error!(target: "client", "object {} on OST{:04x} is missing: EIO{}", c.obj.fid, c.obj.ost_idx, nacre_core::log_limit::held_note(held));
                }
                Err(ChunkReadError::Failed(Errno::EIO))
            }
            r => r,
        }
    }

    /// Attributes of every object of `layout`, by object; with `fail_fast`, ENOTCONN as
    /// soon as an OST stops answering (a mirrored file has other copies to ask).
    async fn object_attrs(
        &self,
        layout: &Layout,
        fail_fast: bool,
    ) -> Result<Vec<(StripeObject, Option<ObjAttr>)>, Errno> {
        let calls = ost_obj_lists(layout.objects().map(|o| (o.ost_idx, *o)))
            .into_iter()
            .map(|(ost, objs)| async move {
                let imp = self.osc(ost)?;
                let req = Request::OstGetattr {
                    objs: objs.iter().map(|o| o.fid).collect(),
                };
                let call = imp.call(&req, Bytes::new());
                let r = if fail_fast {
                    self.unless_failing(ost, call)
                        .await
                        .ok_or(Errno::ENOTCONN)?
                } else {
                    call.await
                };
                match r.map_err(rpc_errno)? {
                    (Reply::ObjAttrs(a), _) if a.len() == objs.len() => {
                        Ok(objs.into_iter().zip(a).collect::<Vec<_>>())
                    }
                    _ => Err(Errno::EPROTO),
                }
            });
        let mut out = Vec::new();
        for r in join_all(calls).await {
            out.extend(r?);
        }
        Ok(out)
    }

    /// The extent map of each OST object of file `fid` on its OST's device (`nacre frag`,
    /// as `filefrag` on Lustre): by object, `None` where the OST's file system has no maps.
    #[allow(clippy::type_complexity)]
    pub async fn object_extents(
        &self,
        f: &crate::file::OpenFile,
    ) -> Result<Vec<(StripeObject, Option<Vec<nacre_core::fiemap::ObjExtent>>)>, Errno> {
        // Our own pending writes land first, so the maps show them.
        self.flush_fid(&f.fid).await;
        let Some(layout) = f.layout() else {
            return Ok(Vec::new());
        };
        let calls = layout.objects().map(|o| {
            let o = *o;
            async move {
                let imp = self.osc(o.ost_idx)?;
                let req = Request::OstFiemap { obj: o.fid };
                match imp.call(&req, Bytes::new()).await {
                    Ok((Reply::ObjExtents(e), _)) => Ok((o, e)),
                    Ok(_) => Err(Errno::EPROTO),
                    // An object not created yet holds no data.
                    Err(nacre_rpc::RpcError::Errno(Errno::ENOENT)) => Ok((o, Some(Vec::new()))),
                    Err(e) => Err(rpc_errno(e)),
                }
            }
        });
        join_all(calls).await.into_iter().collect()
    }

    /// Sets `attr`'s size, blocks and (if data changed since) times from the objects.
    pub async fn glimpse(&self, layout: &Layout, attr: &mut Attr) -> Result<(), Errno> {
        self.glimpse_as(layout, attr, false).await
    }

    /// [`Client::glimpse`]; with `fail_fast`, an OST that has stopped answering fails it at
    /// once (ENOTCONN) instead of being waited for through its recovery.
    pub(crate) async fn glimpse_as(
        &self,
        layout: &Layout,
        attr: &mut Attr,
        fail_fast: bool,
    ) -> Result<(), Errno> {
        // An erasure-coded file is sized by its data objects alone.
        let data_layout;
        let layout = if nacre_core::ec::is_ec(layout) {
            data_layout = nacre_core::ec::data_layout(layout);
            &data_layout
        } else {
            layout
        };
        // A mirrored file with an OST that stopped answering (or stops while asked) goes
        // to the per-mirror sizing below.
        let mirrored = layout.is_mirrored();
        let whole = if mirrored
            && layout
                .mirror_ids()
                .into_iter()
                .any(|m| self.mirror_failing(layout, m))
        {
            Err(Errno::ENOTCONN)
        } else {
            self.object_attrs(layout, mirrored || fail_fast).await
        };
        let attrs = match whole {
            Ok(a) => a,
            // A mirrored file is sized by any one mirror whose OSTs all answer.
            Err(e) if layout.is_mirrored() => {
                let mut one = Err(e);
                for m in self.mirror_order(layout, 0, nacre_core::layout::EOF) {
                    one = self.object_attrs(&layout.mirror(m), fail_fast).await;
                    if one.is_ok() {
                        break;
                    }
                }
                one?
            }
            Err(e) => return Err(e),
        };
        let (size, blocks, mtime) = layout.merge_object_attrs(|o| {
            attrs
                .iter()
                .find(|(so, _)| so == o)
                .and_then(|(_, a)| a.map(|a| (a.size, a.blocks, a.mtime)))
        });
        // The MDT's size still counts for a Data-on-MDT part.
        attr.size = if layout.dom_size() > 0 {
            size.max(attr.size.min(layout.dom_size()))
        } else {
            size
        };
        attr.blocks = blocks;
        if mtime > attr.ctime {
            attr.mtime = mtime;
            attr.ctime = mtime;
        }
        Ok(())
    }

    /// Makes the objects describe a file of exactly `size` bytes (truncate or extend).
    pub async fn truncate_objects(
        &self,
        fid: Fid,
        layout: &Layout,
        size: u64,
    ) -> Result<(), Errno> {
        let layout = if size > 0
            && !layout.instantiated_to(size)
            && layout
                .component_at(size - 1)
                .is_some_and(|c| c.pattern == Pattern::Raid0)
        {
            self.layout_intent(fid, size).await?
        } else {
            layout.clone()
        };
        let mut punches = Vec::new();
        // Parity objects keep their length: their parity is stale now (the truncate goes
        // through a handle open for write) and is recomputed whole.
        for c in layout.components.iter().filter(|c| !c.is_parity()) {
            for (idx, o) in c.objects.iter().enumerate() {
                if o.is_dummy() {
                    continue;
                }
                punches.push((*o, c.object_size_for_file_size(idx, size)));
            }
        }
        let calls = punches.into_iter().map(|(o, s)| async move {
            let imp = self.osc(o.ost_idx)?;
            let req = Request::OstPunch {
                obj: o.fid,
                size: s,
            };
            self.ost_call(o.ost_idx, &imp, &req, Bytes::new())
                .await
                .map(|_| ())
                .map_err(rpc_errno)
        });
        for r in join_all(calls).await {
            r?;
        }
        Ok(())
    }

    /// Flushes every object of `layout` to stable storage, its DoM object too.
    pub async fn sync_objects(&self, fid: Fid, layout: &Layout) -> Result<(), Errno> {
        if layout.dom_object().is_some() {
            self.md_call(self.mdt_of(&fid), Request::DomSync { fid })
                .await?;
        }
        self.sync_ost_objects(fid, layout).await
    }

    /// Flushes the OST objects of `layout` to stable storage. For a mirrored file, an OST
    /// that stopped answering is not waited for: the mirrors on it are marked stale
    /// instead (their copy may not be durable), as long as another mirror is synced.
    pub async fn sync_ost_objects(&self, fid: Fid, layout: &Layout) -> Result<(), Errno> {
        let mirrored = layout.is_mirrored();
        let calls = ost_obj_lists(layout.objects().map(|o| (o.ost_idx, o.fid)))
            .into_iter()
            .map(|(ost, objs)| async move {
                let imp = self.osc(ost).map_err(|e| (ost, e))?;
                let req = Request::OstSync { objs };
                let call = imp.call(&req, Bytes::new());
                let r = if mirrored {
                    self.unless_failing(ost, call)
                        .await
                        .unwrap_or(Err(RpcError::Errno(Errno::ENOTCONN)))
                } else {
                    call.await
                };
                r.map(|_| ()).map_err(|e| (ost, rpc_errno(e)))
            });
        let failed: Vec<(u32, Errno)> = join_all(calls)
            .await
            .into_iter()
            .filter_map(Result::err)
            .collect();
        let Some(&(_, first)) = failed.first() else {
            return Ok(());
        };
        if !mirrored {
            return Err(first);
        }
        let on_failed = |m: u32| {
            layout
                .mirror(m)
                .objects()
                .any(|o| failed.iter().any(|(ost, _)| *ost == o.ost_idx))
        };
        let keep: Vec<u32> = layout
            .write_mirrors(0, nacre_core::layout::EOF)
            .into_iter()
            .filter(|&m| !on_failed(m))
            .collect();
        if keep.is_empty() {
            return Err(first);
        }
        tracing::warn!(target: "client", "file {fid}: sync failed on OST(s) {failed:?}: only mirror(s) {keep:?} stay in sync");
        let op = MirrorOp::Write {
            start: 0,
            end: nacre_core::layout::EOF,
            keep,
        };
        self.mirror_request(fid, op).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nacre_core::layout::{Component, EOF, LCME_FL_INIT};

    fn layout(count: usize, size: u32) -> Layout {
        let mut l = Layout::plain(count as i32, size, 0);
        l.components[0].objects = (0..count)
            .map(|i| StripeObject {
                ost_idx: i as u32,
                fid: Fid::new(0x240000400, i as u32 + 1, 0),
            })
            .collect();
        l.components[0].flags = LCME_FL_INIT;
        l
    }

    #[test]
    fn plan_covers_the_range_exactly_once() {
        let l = layout(3, 65536);
        for (off, len) in [(0u64, 1u64), (65535, 2), (10, 500_000), (1 << 20, 4 << 20)] {
            let p = plan(&l, off, len, 1 << 20);
            let mut covered: Vec<(u64, u64)> =
                p.chunks.iter().map(|c| (c.buf_off, c.len)).collect();
            covered.sort();
            let mut pos = 0;
            for (b, n) in covered {
                assert_eq!(b, pos);
                pos += n;
            }
            assert_eq!(pos, len);
            for c in &p.chunks {
                let (idx, obj_off) = l.components[0].map(off + c.buf_off);
                assert_eq!((idx as u32, obj_off), (c.stripe, c.obj_off));
            }
        }
    }

    #[test]
    fn one_stripe_merges_and_respects_rpc_size() {
        let l = layout(1, 65536);
        let p = plan(&l, 0, 4 << 20, 1 << 20);
        assert_eq!(p.chunks.len(), 4);
        assert!(p.chunks.iter().all(|c| c.len == 1 << 20));
    }

    #[test]
    fn a_range_is_contiguous_in_each_object() {
        // What fallocate_objects relies on to send one request per object.
        let l = layout(4, 65536);
        for (off, len) in [
            (1000u64, 1u64),
            (65000, 70000),
            (3, 1 << 20),
            (100_000, 3 << 20),
        ] {
            let p = plan(&l, off, len, u64::MAX);
            let mut by_obj: BTreeMap<Fid, Vec<(u64, u64)>> = BTreeMap::new();
            for c in &p.chunks {
                by_obj
                    .entry(c.obj.fid)
                    .or_default()
                    .push((c.obj_off, c.obj_off + c.len));
            }
            for ranges in by_obj.values_mut() {
                ranges.sort();
                assert!(ranges.windows(2).all(|w| w[0].1 == w[1].0), "{ranges:?}");
            }
        }
    }

    #[test]
    fn checksums_computed_on_the_way_in_match_those_of_each_rpc() {
        // Every shape of chunk (striped, unaligned start and end, split by the RPC size)
        // gets the checksums it would have had if computed from its own bytes.
        for (count, stripe, off, len, rpc) in [
            (3usize, 65536u32, 1000u64, 500_000u64, 1u64 << 20),
            (1, 1 << 20, 4095, 5 << 20, 1 << 20),
            (4, 65536, 0, 1 << 20, 65536),
            (2, 65536, 123, 50, 1 << 20),
        ] {
            let l = layout(count, stripe);
            let data: Vec<u8> = (0..len).map(|i| (i * 13 % 251) as u8).collect();
            let sums = bulk_sums(off, &data);
            let p = plan(&l, off, len, rpc);
            let mut reused = 0;
            for c in &p.chunks {
                let bytes = &data[c.buf_off as usize..(c.buf_off + c.len) as usize];
                if let Some(s) = reuse_sums(Some(&sums), off, len, c.buf_off, c.len, c.obj_off) {
                    assert_eq!(s, bulk_sums(c.obj_off, bytes), "{c:?}");
                    reused += 1;
                }
            }
            assert!(
                reused > 0,
                "nothing reused for {count}x{stripe} at {off}+{len}"
            );
        }
    }

    #[test]
    fn uninstantiated_components_are_holes() {
        let mut l = Layout::composite(vec![
            Component::raid0(0, 1 << 20, 1, 65536, 0),
            Component::raid0(1 << 20, EOF, 1, 65536, 0),
        ]);
        l.components[0].objects = vec![StripeObject {
            ost_idx: 0,
            fid: Fid::new(0x240000400, 1, 0),
        }];
        l.components[0].flags = LCME_FL_INIT;
        let p = plan(&l, (1 << 20) - 10, 20, 1 << 20);
        assert_eq!(p.chunks.len(), 1);
        assert_eq!(p.holes, vec![(10, 10)]);
    }
}
