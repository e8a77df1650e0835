//! Erasure-coded files (`lfs setstripe --ec D+P`, see [`nacre_core::ec`] for the layout):
//! the client computes parity, and reconstructs what a lost or bad data object held.
//!
//! - Writes go to the data mirror only. The MDT marked the parity `stale` when the file was
//!   opened for write, so parity that no longer matches the data is never trusted.
//! - Parity is recomputed from the data by [`Client::ec_resync`]: at a writer's close when
//!   `llite.*.ec_parity_on_close` is 1 (the default, beyond Lustre), else only on request
//!   (Lustre's offline EC: `lfs mirror resync`). The MDT clears `stale` only if no other
//!   writer opened the file meanwhile.
//! - A read whose data object fails (its OST stopped answering, its copy failed its
//!   checksum, or the object is gone) reads the same object range of the other stripes of
//!   its RAID set and of the set's parity, and decodes the missing stripe; a bad copy is
//!   rewritten from the result. With parity stale that is EIO, never a guess. A range that
//!   comes back short inside the file's size is decoded too: the OST reads an object lost
//!   with its object tree as a hole, and only parity can tell a hole from lost bytes.
//! - A resync of a file whose parity is in sync rebuilds data objects holding less than
//!   the file's size puts in them from it, rather than code parity from their zeros.
//!
//! The codec is `reed-solomon-simd` (Reed-Solomon over GF(2^16), SIMD on x86-64 and
//! ARM): parity stripe `j` of a set holds, at every object offset, recovery shard `j` of
//! the set's data objects at that offset. A one-stripe set's parity is a copy.

use crate::cksum::ChunkReadError;
use crate::io::{Chunk, plan};
use crate::{Client, ec_shards, rpc_errno};
use bytes::{Bytes, BytesMut};
use futures::future::join_all;
use nacre_core::cksum::{BLOCK, ReadVerify, TornBlocks};
use nacre_core::ec::{RaidSet, data_layout, is_ec, parity_in_sync, parity_of, raid_sets};
use nacre_core::layout::{Component, LCME_FL_INIT};
use nacre_core::log_limit::held_note;
use nacre_core::{Errno, Fid, Layout, StripeObject, TargetName};
use nacre_rpc::msg::{Cred, Reply, Request, WriteGrant};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of each data object coded at once by a resync: it holds (D + P) such rows of a
/// RAID set in memory (at most 36 MiB for 32+4), and each is one RPC per object.
pub const EC_ROW_BYTES: u64 = 1 << 20;

const BLOCK_U64: u64 = BLOCK as u64;

/// The parity shards of `data`: `k` shards of one even length.
pub fn encode<S: AsRef<[u8]>>(data: &[S], parity: usize) -> Result<Vec<Vec<u8>>, Errno> {
    if data.len() == 1 {
        return Ok(vec![data[0].as_ref().to_vec(); parity]);
    }
    reed_solomon_simd::encode(data.len(), parity, data).map_err(|e| {
        tracing::error!(target: "client", "EC encode of {}+{parity} shards: {e}", data.len());
        Errno::EIO
    })
}

/// The data shards of a set of `k` data and `p` parity shards that are not among those
/// that could be read (by their index among the data and among the parity shards),
/// restored from them; EIO if too few.
pub fn reconstruct_all<S: AsRef<[u8]>>(
    k: usize,
    p: usize,
    data: &[(usize, S)],
    parity: &[(usize, S)],
) -> Result<Vec<(usize, Vec<u8>)>, Errno> {
    let missing: Vec<usize> = (0..k)
        .filter(|i| !data.iter().any(|(j, _)| j == i))
        .collect();
    if missing.is_empty() {
        return Ok(Vec::new());
    }
    if k == 1 {
        return parity
            .first()
            .map(|(_, s)| vec![(0, s.as_ref().to_vec())])
            .ok_or(Errno::EIO);
    }
    if data.len() + parity.len() < k {
        return Err(Errno::EIO);
    }
    let fail = |e: reed_solomon_simd::Error| {
        tracing::error!(target: "client", "EC decode of {k}+{p} shards: {e}");
        Errno::EIO
    };
    let len = data
        .iter()
        .chain(parity)
        .map(|(_, s)| s.as_ref().len())
        .next()
        .unwrap_or(0);
    let kept = DECODERS.lock().pop();
    let mut dec = match kept {
        Some(mut d) => {
            d.reset(k, p, len).map_err(fail)?;
            d
        }
        None => reed_solomon_simd::ReedSolomonDecoder::new(k, p, len).map_err(fail)?,
    };
    let restored: Result<Vec<(usize, Vec<u8>)>, Errno> = (|| {
        for (i, s) in data {
            dec.add_original_shard(*i, s).map_err(fail)?;
        }
        for (i, s) in parity {
            dec.add_recovery_shard(*i, s).map_err(fail)?;
        }
        let r = dec.decode().map_err(fail)?;
        missing
            .iter()
            .map(|&i| {
                r.restored_original(i)
                    .map(|s| (i, s.to_vec()))
                    .ok_or(Errno::EIO)
            })
            .collect()
    })();
    // The codec's work space for this geometry (high-rate decoding): kept only if small.
    let work = (p.next_power_of_two() + k).next_power_of_two() * len;
    if work <= EC_DECODER_KEEP_BYTES {
        let mut kept = DECODERS.lock();
        if kept.len() < EC_DECODERS_KEPT {
            kept.push(dec);
        }
    }
    restored
}

/// Decoders kept for the next decode: a decoder's work space is as large as its shards
/// together, and a new one per row costs fresh pages every time (a 4+2 row of 1 MiB
/// stripes: 1.8 ms to decode with one kept, 2.2 ms with a new one).
static DECODERS: parking_lot::Mutex<Vec<reed_solomon_simd::ReedSolomonDecoder>> =
    parking_lot::Mutex::new(Vec::new());
/// Decoders kept at most (one per decode running at once on a small client).
pub const EC_DECODERS_KEPT: usize = 2;
/// Largest work space of a decoder kept: a 4+2 set's (8 shards) of 1 MiB stripes; wider
/// sets or stripes get a new decoder per row.
pub const EC_DECODER_KEEP_BYTES: usize = 8 << 20;

/// What degraded reads of erasure-coded files did (`llite.*.ec_degraded_reads`,
/// `llite.*.ec_rows_decoded`): object ranges read from their RAID set instead of their
/// object, and rows decoded for them (one per row however many of its stripes are lost).
#[derive(Default, Debug)]
pub struct EcStats {
    degraded_reads: AtomicU64,
    rows_decoded: AtomicU64,
}

impl EcStats {
    pub fn degraded_reads(&self) -> u64 {
        self.degraded_reads.load(Ordering::Relaxed)
    }

    pub fn rows_decoded(&self) -> u64 {
        self.rows_decoded.load(Ordering::Relaxed)
    }
}

/// One row of a RAID set, as a degraded read decodes it: object range `[start, start + n)`
/// of the set's data stripes (of component `comp`) and parity stripes (of `parity`), of
/// file `fid` at change count `changes`.
#[derive(Clone, Copy)]
struct RaidRow<'a> {
    fid: Fid,
    comp: &'a Component,
    parity: &'a Component,
    set: &'a RaidSet,
    start: u64,
    n: u64,
    changes: u64,
}

/// One shard as read: its bytes (zero-padded to the range), or why it could not be.
type Shard = Result<Bytes, ChunkReadError>;

impl Client {
    /// A read of an erasure-coded file: the data mirror, each object range reconstructed
    /// from its RAID set when its own read fails and parity is in sync.
    pub(crate) async fn read_ec(
        &self,
        fid: Fid,
        layout: &Layout,
        off: u64,
        len: u64,
    ) -> Result<(Bytes, u64), Errno> {
        let data = data_layout(layout);
        let in_sync = parity_in_sync(layout, off, off.saturating_add(len));
        let p = plan(&data, off, len, self.tunables.max_rpc_bytes());
        if !p.dom.is_empty() {
            // The rules keep Data-on-MDT out of EC files; nothing to reconstruct from.
            return self.read_copy(fid, &data, off, len, TornBlocks::Take).await;
        }
        // The file's size, asked once and only if a range comes back short.
        let size = tokio::sync::OnceCell::new();
        let changes = self.local_changes.of(&fid);
        // With parity in sync, a block an OST's crash tore is rebuilt from it (and
        // rewritten) like any bad block; without, it is read as the OST kept it.
        let torn = if in_sync {
            TornBlocks::Report
        } else {
            TornBlocks::Take
        };
        let calls = p.chunks.iter().map(|c| {
            let (data, size) = (&data, &size);
            async move {
                let read = self.ec_shared_read(fid, c, changes, torn).await;
                let r = match read {
                    Ok(b) if (b.len() as u64) < c.len && in_sync => {
                        let size = *size
                            .get_or_init(|| async { self.getattr(fid).await.map(|i| i.attr.size) })
                            .await;
                        self.ec_short(fid, layout, data, off, c, b, size).await
                    }
                    Ok(b) => Ok(b),
                    Err(e) => {
                        let corrupt = matches!(e, ChunkReadError::Corrupt { .. });
                        match self
                            .ec_degraded(fid, layout, data, off, c, e.clone(), in_sync)
                            .await
                        {
                            // Nothing to rebuild from: perhaps only a crash tore it.
                            Err(_) if corrupt && torn == TornBlocks::Report => {
                                self.read_as_kept(fid, c, e).await
                            }
                            r => r,
                        }
                    }
                };
                (c.buf_off, r)
            }
        });
        let mut buf = BytesMut::zeroed(len as usize);
        let mut found = 0u64;
        for (buf_off, r) in join_all(calls).await {
            let b = r?;
            let s = buf_off as usize;
            buf[s..s + b.len()].copy_from_slice(&b);
            if !b.is_empty() {
                found = found.max(buf_off + b.len() as u64);
            }
        }
        Ok((buf.freeze(), found))
    }

    /// Chunk `c` of data layout `data` (of a read at `off`) came back short (`got`): past
    /// the end of the file (`size`), that is all there is; below it, a hole or an object
    /// lost with its OST's objects, which reads as one. The range is then decoded from
    /// the rest of its RAID set and the parity (in sync), which says which: zeros for a
    /// hole, the bytes for a lost object.
    #[allow(clippy::too_many_arguments)]
    async fn ec_short(
        &self,
        fid: Fid,
        layout: &Layout,
        data: &Layout,
        off: u64,
        c: &Chunk,
        got: Bytes,
        size: Result<u64, Errno>,
    ) -> Result<Bytes, Errno> {
        let at = off + c.buf_off + got.len() as u64;
        match size {
            Ok(size) if at < size => {}
            Ok(_) => return Ok(got),
            // The file is gone (a readahead that outlived it): nothing to check.
            Err(e @ (Errno::ESTALE | Errno::ENOENT)) => {
                tracing::debug!(target: "client", "file {fid}: no size to check a short read against: {e}");
                return Ok(got);
            }
            Err(e) => {
                tracing::warn!(target: "client", "file {fid}: no size to check a short read against: {e}");
                return Ok(got);
            }
        }
        let decoded = self
            .ec_degraded(
                fid,
                layout,
                data,
                off,
                c,
                ChunkReadError::Failed(Errno::ENODATA),
                true,
            )
            .await?;
        if decoded.len() <= got.len() {
            return Ok(got);
        }
        tracing::warn!(target: "client", "file {fid}: object {} on OST{:04x} holds {} of {} bytes at {} that parity says it had (a lost object?)", c.obj.fid, c.obj.ost_idx, got.len(), decoded.len(), c.obj_off);
        let mut v = BytesMut::with_capacity(decoded.len());
        v.extend_from_slice(&got);
        v.extend_from_slice(&decoded[got.len()..]);
        Ok(v.freeze())
    }

    /// Reads one object range, checked end to end; unlike a plain read, a missing object
    /// is an error (ENOENT), since an object lost with its OST's directory is not a hole.
    async fn ec_read_chunk(&self, c: &Chunk, torn: TornBlocks) -> Result<Bytes, ChunkReadError> {
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
        self.fetch_checked(TargetName::ost(c.obj.ost_idx), &imp, req, c.obj_off, kind)
            .await
    }

    /// Chunk `c` of file `fid` at change count `changes`, read once for every read that
    /// wants it at about the same time (see [`crate::ec_shards`]).
    async fn ec_shared_read(
        &self,
        fid: Fid,
        c: &Chunk,
        changes: u64,
        torn: TornBlocks,
    ) -> ec_shards::Read {
        let key = ec_shards::Key {
            file: fid,
            obj: c.obj.fid,
            off: c.obj_off,
            len: c.len,
            changes,
            torn,
        };
        let slot = self.ec_shards.slot(key);
        let read = slot
            .get_or_init(|| async {
                self.unless_failing(c.obj.ost_idx, self.ec_read_chunk(c, torn))
                    .await
                    .unwrap_or(Err(ChunkReadError::Failed(Errno::ENOTCONN)))
            })
            .await
            .clone();
        if read.is_err() {
            self.ec_shards.forget(key);
        }
        read
    }

    /// `[obj_off, obj_off + len)` of object `obj`, zero-padded to `len` (bytes past the
    /// object's end are zeros to the codec), in RPCs of at most `max_pages_per_rpc`; with
    /// `shared` (the file and its change count), shared with other reads of the same
    /// ranges.
    async fn ec_read_range(
        &self,
        shared: Option<(Fid, u64)>,
        obj: StripeObject,
        obj_off: u64,
        len: u64,
    ) -> Shard {
        let max = self.tunables.max_rpc_bytes().max(BLOCK_U64);
        let mut out: Option<BytesMut> = None;
        let mut at = 0u64;
        while at < len {
            let n = (len - at).min(max);
            let c = Chunk {
                obj,
                stripe: 0,
                obj_off: obj_off + at,
                len: n,
                buf_off: 0,
                layout: None,
            };
            let b = match shared {
                // Rebuilding a range (parity in sync): a torn shard is no input.
                Some((fid, changes)) => {
                    self.ec_shared_read(fid, &c, changes, TornBlocks::Report)
                        .await
                }
                None => self
                    .unless_failing(obj.ost_idx, self.ec_read_chunk(&c, TornBlocks::Take))
                    .await
                    .unwrap_or(Err(ChunkReadError::Failed(Errno::ENOTCONN))),
            }?;
            if n == len && b.len() as u64 == len {
                // The whole range in one piece: no copy.
                return Ok(b);
            }
            let o = out.get_or_insert_with(|| BytesMut::zeroed(len as usize));
            o[at as usize..at as usize + b.len()].copy_from_slice(&b);
            at += n;
        }
        Ok(out
            .map(BytesMut::freeze)
            .unwrap_or_else(|| Bytes::from(vec![0u8; len as usize])))
    }

    /// Chunk `c` of data layout `data` (of a read at `off`) failed with `e`: its bytes
    /// decoded from the rest of its RAID set, and a copy that failed its checksum
    /// rewritten with them.
    #[allow(clippy::too_many_arguments)]
    async fn ec_degraded(
        &self,
        fid: Fid,
        layout: &Layout,
        data: &Layout,
        off: u64,
        c: &Chunk,
        e: ChunkReadError,
        in_sync: bool,
    ) -> Result<Bytes, Errno> {
        let corrupt = matches!(e, ChunkReadError::Corrupt { .. });
        // A missing object, or one holding less than asked (see `ec_short`).
        let missing = matches!(e, ChunkReadError::Failed(Errno::ENOENT | Errno::ENODATA));
        if let ChunkReadError::Corrupt { target, .. } = &e {
            self.cksum_stats.corrupt(*target);
        }
        if !in_sync {
            tracing::error!(target: "client", "file {fid}: {e}: parity is stale, nothing to rebuild from: EIO");
            return Err(Errno::EIO);
        }
        self.ec_stats.degraded_reads.fetch_add(1, Ordering::Relaxed);
        if let Some(held) = self.degraded_log.allow() {
            tracing::warn!(target: "client", "file {fid}: {e}: rebuilding from parity{}", held_note(held));
        }
        let file_off = off + c.buf_off;
        let comp = data.component_at(file_off).ok_or(Errno::EIO)?;
        let Some(parity) = parity_of(layout, comp).filter(|p| p.is_init()) else {
            tracing::error!(target: "client", "file {fid}: {e}: no parity for [{}, {}): EIO", comp.start, comp.end);
            return Err(Errno::EIO);
        };
        let (d, p) = parity.ec_counts().ok_or(Errno::EIO)?;
        let stripe = c.stripe as usize;
        let set = raid_sets(comp.objects.len(), d, p)
            .into_iter()
            .find(|s| s.data.contains(&stripe))
            .ok_or(Errno::EIO)?;
        if parity.objects.len() < set.parity.end {
            return Err(Errno::EIO);
        }
        // Whole blocks, so a repair needs nothing of the bad copy.
        let start = c.obj_off - c.obj_off % BLOCK_U64;
        let end = (c.obj_off + c.len).div_ceil(BLOCK_U64) * BLOCK_U64;
        let n = end - start;
        let changes = self.local_changes.of(&fid);
        let row = RaidRow {
            fid,
            comp,
            parity,
            set: &set,
            start,
            n,
            changes,
        };
        // The row's other lost stripes, read beside this one, join this decode.
        let key = ec_shards::RowKey {
            first: ec_shards::Key {
                file: fid,
                obj: comp.objects[set.data.start].fid,
                off: start,
                len: n,
                changes,
                torn: TornBlocks::Report,
            },
            data_stripes: set.data.len() as u32,
        };
        let slot = self.ec_rows.slot(key);
        let decoded = slot
            .get_or_init(|| self.ec_decode_row(&row, stripe))
            .await
            .clone();
        if decoded.is_err() {
            self.ec_rows.forget(key);
        }
        let want = stripe - set.data.start;
        let shard = match decoded.and_then(|r| r.get(want).cloned().ok_or(Errno::EIO)) {
            Ok(s) => s,
            // An object that does not exist where no other shard can say otherwise: a hole.
            Err(_) if missing => return Ok(Bytes::new()),
            Err(e2) => {
                tracing::error!(target: "client", "file {fid}: {e}: too few stripes of the RAID set left: EIO");
                return Err(e2);
            }
        };
        if corrupt {
            self.ec_repair(fid, data, comp, c, start, shard.clone())
                .await;
        }
        let lead = (c.obj_off - start) as usize;
        let piece = shard.slice(lead..lead + c.len as usize);
        // The decoded stripe runs on in zeros past its object's end: trailing zeros are not
        // reported as data found, so the file size, not the codec, decides where it ends.
        let found = piece.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        Ok(piece.slice(..found))
    }

    /// Every data stripe of `row`, read or decoded from the rest of the set and its parity
    /// (`lost`, whose read failed, is not read again). A stripe the codec restored is kept
    /// for the reads that follow (see [`crate::ec_shards`]).
    async fn ec_decode_row(&self, row: &RaidRow<'_>, lost: usize) -> ec_shards::Row {
        let RaidRow {
            fid,
            comp,
            parity,
            set,
            start,
            n,
            changes,
        } = *row;
        let others: Vec<(bool, usize, StripeObject)> = set
            .data
            .clone()
            .filter(|&i| i != lost)
            .map(|i| (true, i - set.data.start, comp.objects[i]))
            .chain(
                set.parity
                    .clone()
                    .map(|j| (false, j - set.parity.start, parity.objects[j])),
            )
            .collect();
        let reads = others.iter().map(|&(is_data, i, o)| async move {
            (
                is_data,
                i,
                self.ec_read_range(Some((fid, changes)), o, start, n).await,
            )
        });
        let mut have_data = Vec::new();
        let mut have_parity = Vec::new();
        for (is_data, i, r) in join_all(reads).await {
            match (is_data, r) {
                (true, Ok(s)) => have_data.push((i, s)),
                (false, Ok(s)) => have_parity.push((i, s)),
                // A missing object too is unreadable: lost, not a hole (OSTs make every
                // object's file when they precreate it).
                (_, Err(e2)) => {
                    if let Some(held) = self.degraded_log.allow() {
                        tracing::warn!(target: "client", "file {fid}: RAID set stripe unreadable too: {e2}{}", held_note(held));
                    }
                }
            }
        }
        let (k, pk) = (set.data.len(), set.parity.len());
        self.ec_stats.rows_decoded.fetch_add(1, Ordering::Relaxed);
        let restored = reconstruct_all(k, pk, &have_data, &have_parity)?;
        let mut stripes: Vec<Option<Bytes>> = vec![None; k];
        for (i, s) in have_data {
            stripes[i] = Some(s);
        }
        for (i, s) in restored {
            let shard = Bytes::from(s);
            // The next read of this range takes it from here; trailing zeros may be past
            // the object's end, so they are left out, as a read would.
            let shard_end = shard.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
            let key = ec_shards::Key {
                file: fid,
                obj: comp.objects[set.data.start + i].fid,
                off: start,
                len: n,
                changes,
                torn: TornBlocks::Report,
            };
            self.ec_shards.put(key, Ok(shard.slice(..shard_end)));
            if let Some(slot) = stripes.get_mut(i) {
                *slot = Some(shard);
            }
        }
        stripes
            .into_iter()
            .collect::<Option<Vec<Bytes>>>()
            .map(Arc::from)
            .ok_or(Errno::EIO)
    }

    /// Rewrites the blocks of chunk `c` from `[start, ...)` of its object with `shard`, cut
    /// to the object's length (the decoded shard runs on in zeros past it).
    async fn ec_repair(
        &self,
        fid: Fid,
        data: &Layout,
        comp: &Component,
        c: &Chunk,
        start: u64,
        shard: Bytes,
    ) {
        let size = match self.object_size(c.obj).await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(target: "client", "file {fid}: repair of object {}: {e}", c.obj.fid);
                return;
            }
        };
        let keep = size.saturating_sub(start).min(shard.len() as u64) as usize;
        let file_off = comp.unmap(c.stripe as usize, start);
        match self
            .repair_chunk(fid, data, c, file_off, shard.slice(..keep))
            .await
        {
            Ok(()) => {
                self.cksum_stats.repaired(TargetName::ost(c.obj.ost_idx));
                tracing::warn!(target: "client", "file {fid}: object {} on OST{:04x} rewritten from parity", c.obj.fid, c.obj.ost_idx);
            }
            Err(e) => {
                tracing::error!(target: "client", "file {fid}: repair of object {} failed: {e}", c.obj.fid)
            }
        }
    }

    /// An object's size (0 if it does not exist).
    async fn object_size(&self, o: StripeObject) -> Result<u64, Errno> {
        let imp = self.osc(o.ost_idx)?;
        let req = Request::OstGetattr { objs: vec![o.fid] };
        match imp.call(&req, Bytes::new()).await.map_err(rpc_errno)? {
            (Reply::ObjAttrs(a), _) => Ok(a.first().copied().flatten().map_or(0, |a| a.size)),
            _ => Err(Errno::EPROTO),
        }
    }

    /// At the close of write handle `f` of an erasure-coded file, with
    /// `llite.*.ec_parity_on_close`: parity recomputed while the handle still counts as
    /// the only writer. On failure it stays stale (reads then never reconstruct from it).
    pub(crate) async fn ec_parity_at_close(&self, f: &crate::file::OpenFile) {
        if !self.tunables.ec_parity_on_close() || !f.layout().is_some_and(|l| is_ec(&l)) {
            return;
        }
        if let Err(e) = self.ec_resync(f.fid, Some(f.handle)).await {
            tracing::warn!(target: "client", "file {}: parity left stale at close: {e}", f.fid);
        }
    }

    /// After the close of write handle `f` that wrote nothing (`closed`: the MDT's answer).
    /// Its MDT put parity back in sync itself when nothing changed the file while the
    /// handle was open; if parity is still stale (a size change through the handle, a
    /// writer that came and went meanwhile, a restarted MDT) and no other writer holds the
    /// file, it is coded now, as at a writer's close.
    pub(crate) async fn ec_untouched_close(&self, f: &crate::file::OpenFile, closed: Reply) {
        if !self.tunables.ec_parity_on_close() || !f.layout().is_some_and(|l| is_ec(&l)) {
            return;
        }
        let layout = match closed {
            Reply::Layout(Some(l)) => Ok(l),
            // Other writers hold the file: the last one's close codes the parity.
            Reply::Layout(None) => return,
            // A restarted MDT forgot the handle, or parity was stale at the open: ask.
            _ => self
                .getattr(f.fid)
                .await
                .and_then(|i| i.layout.ok_or(Errno::EINVAL)),
        };
        let r = match layout {
            Ok(l) if !parity_in_sync(&l, 0, u64::MAX) => {
                self.ec_resync_layout(f.fid, l, None).await.map(|_| ())
            }
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        };
        match r {
            Ok(()) => {}
            // Another writer holds the file: its close codes the parity.
            Err(Errno::EBUSY) => {}
            Err(e) => {
                tracing::warn!(target: "client", "file {}: parity left stale at close: {e}", f.fid)
            }
        }
    }

    /// Recomputes the parity of erasure-coded `fid` from its data and tells its MDT, which
    /// clears `stale` (`handle`: the caller's own write handle, which does not count as
    /// another writer). Returns the layout as it is now.
    pub async fn ec_resync(&self, fid: Fid, handle: Option<u64>) -> Result<Layout, Errno> {
        let layout = match self
            .md_call(self.mdt_of(&fid), Request::Getattr { fid })
            .await?
        {
            Reply::Inode(i) => i.layout.ok_or(Errno::EINVAL)?,
            _ => return Err(Errno::EPROTO),
        };
        self.ec_resync_layout(fid, layout, handle).await
    }

    /// [`Client::ec_resync`] of `fid` as its MDT gave `layout` just now.
    pub(crate) async fn ec_resync_layout(
        &self,
        fid: Fid,
        layout: Layout,
        handle: Option<u64>,
    ) -> Result<Layout, Errno> {
        if !is_ec(&layout) {
            return Err(Errno::EINVAL);
        }
        let mut sets = Vec::new();
        let mut size = None;
        let mut rebuilt = 0u64;
        for comp in layout.components.iter().filter(|c| !c.is_parity()) {
            let Some(parity) = parity_of(&layout, comp) else {
                continue;
            };
            if comp.flags & LCME_FL_INIT == 0 || parity.flags & LCME_FL_INIT == 0 {
                continue;
            }
            if !parity.is_stale() {
                // Parity in sync says what the data is: coding it again from data objects
                // that lost bytes would make the loss permanent. Rebuild them instead.
                let size = match size {
                    Some(s) => s,
                    None => *size.insert(self.getattr(fid).await?.attr.size),
                };
                rebuilt += self.ec_rebuild_lost(fid, &layout, comp, size).await?;
                continue;
            }
            let (d, p) = parity.ec_counts().ok_or(Errno::EINVAL)?;
            for set in raid_sets(comp.objects.len(), d, p) {
                let objs = comp.objects.get(set.data.clone()).ok_or(Errno::EINVAL)?;
                let pobjs = parity
                    .objects
                    .get(set.parity.clone())
                    .ok_or(Errno::EINVAL)?;
                sets.push((objs.to_vec(), pobjs.to_vec(), set.parity.start));
            }
        }
        let calls = sets
            .iter()
            .map(|(objs, pobjs, first)| self.ec_code_set(fid, objs, pobjs, *first));
        for r in join_all(calls).await {
            r?;
        }
        // The MDT's word that parity is in sync is kept as soon as it is given: the
        // parity and the data it was coded from must be on stable storage first, or a
        // power cut leaves parity that decodes into bytes nobody wrote.
        if !sets.is_empty() || rebuilt > 0 {
            self.sync_objects(fid, &layout).await?;
        }
        let req = Request::EcParitySynced {
            fid,
            handle,
            layout_gen: layout.layout_gen,
            // Without a handle it is a resync, which the mirror requests make as root
            // (`lfs` runs as root); a squashed root needs write permission.
            cred: Cred::root(),
        };
        match self.md_call(self.mdt_of(&fid), req).await? {
            Reply::Layout(Some(l)) => Ok(l),
            _ => Err(Errno::EPROTO),
        }
    }

    /// Rebuilds from parity (in sync) what the data objects of `comp` lost: an object
    /// holding less than a file of `size` bytes puts in it (its OST's objects deleted, the
    /// OST back empty) gets the rest decoded from its RAID set and written back. A hole at
    /// an object's end decodes to zeros and is written as such. Returns the bytes written.
    async fn ec_rebuild_lost(
        &self,
        fid: Fid,
        layout: &Layout,
        comp: &Component,
        size: u64,
    ) -> Result<u64, Errno> {
        let data = data_layout(layout);
        let mut rebuilt = 0u64;
        for (i, o) in comp.objects.iter().enumerate() {
            let want = comp.object_size_for_file_size(i, size);
            let have = self.object_size(*o).await?;
            if have >= want {
                continue;
            }
            let mut at = have - have % BLOCK_U64;
            while at < want {
                let n = (want - at).min(EC_ROW_BYTES);
                let c = Chunk {
                    obj: *o,
                    stripe: i as u32,
                    obj_off: at,
                    len: n,
                    buf_off: 0,
                    layout: None,
                };
                // Not `missing`: a range that cannot be decoded is an error, not zeros.
                let piece = self
                    .ec_degraded(
                        fid,
                        layout,
                        &data,
                        comp.unmap(i, at),
                        &c,
                        ChunkReadError::Failed(Errno::EIO),
                        true,
                    )
                    .await?;
                let mut bytes = piece.to_vec();
                bytes.resize(n as usize, 0);
                self.ec_write_object(fid, *o, i as u32, at, bytes).await?;
                rebuilt += n;
                at += n;
            }
            self.cksum_stats.repaired(TargetName::ost(o.ost_idx));
            tracing::warn!(target: "client", "file {fid}: object {} on OST{:04x} held {have} of its {want} bytes: the rest rebuilt from parity", o.fid, o.ost_idx);
        }
        Ok(rebuilt)
    }

    /// Codes one RAID set: its data objects `objs` a row at a time into parity objects
    /// `pobjs` (stripes `first..` of the parity component), which are then cut to the
    /// data's length.
    async fn ec_code_set(
        &self,
        fid: Fid,
        objs: &[StripeObject],
        pobjs: &[StripeObject],
        first: usize,
    ) -> Result<(), Errno> {
        let sizes = join_all(objs.iter().map(|o| self.object_size(*o))).await;
        let mut top = 0u64;
        for s in sizes {
            top = top.max(s?);
        }
        let top = top.div_ceil(BLOCK_U64) * BLOCK_U64;
        let mut at = 0u64;
        while at < top {
            let n = (top - at).min(EC_ROW_BYTES);
            let reads = objs.iter().map(|o| self.ec_read_range(None, *o, at, n));
            let mut shards = Vec::with_capacity(objs.len());
            for r in join_all(reads).await {
                match r {
                    Ok(s) => shards.push(s),
                    // A missing object is lost, not a hole: OSTs make every object's file
                    // when they precreate it.
                    Err(e) => {
                        tracing::error!(target: "client", "file {fid}: parity not recomputed: {e}");
                        return Err(Errno::EIO);
                    }
                }
            }
            let parity = encode(&shards, pobjs.len())?;
            let writes = pobjs
                .iter()
                .zip(parity)
                .enumerate()
                .map(|(j, (o, s))| self.ec_write_object(fid, *o, (first + j) as u32, at, s));
            for r in join_all(writes).await {
                r?;
            }
            at += n;
        }
        // Parity of data since cut away would decode into stale bytes.
        let punches = pobjs.iter().map(|o| async move {
            let imp = self.osc(o.ost_idx)?;
            let req = Request::OstPunch {
                obj: o.fid,
                size: top,
            };
            self.ost_call(o.ost_idx, &imp, &req, Bytes::new())
                .await
                .map(drop)
                .map_err(rpc_errno)
        });
        for r in join_all(punches).await {
            r?;
        }
        Ok(())
    }

    /// Writes `bytes` at `obj_off` of parity object `o` (stripe `stripe` of its component).
    async fn ec_write_object(
        &self,
        fid: Fid,
        o: StripeObject,
        stripe: u32,
        obj_off: u64,
        bytes: Vec<u8>,
    ) -> Result<(), Errno> {
        let imp = self.osc(o.ost_idx)?;
        let bulk = Bytes::from(bytes);
        self.rpc_stats.record(o.ost_idx, true, bulk.len() as u64);
        let grant = WriteGrant {
            from_grant: false,
            want: self.grant_want(),
        };
        let reply = self
            .send_checked(
                TargetName::ost(o.ost_idx),
                &imp,
                obj_off,
                bulk,
                None,
                |cksum| Request::OstWrite {
                    obj: o.fid,
                    parent: fid.with_ver(stripe),
                    offset: obj_off,
                    cksum,
                    grant,
                    layout: None,
                },
            )
            .await?;
        if let Reply::OstWritten { grant, .. } = reply {
            self.grants.add(o.ost_idx, imp.generation(), grant);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_p_lost_shards_come_back() {
        let k = 4;
        let data: Vec<Vec<u8>> = (0..k)
            .map(|i| (0..8192).map(|b| (b * 7 + i * 13) as u8).collect())
            .collect();
        let parity = encode(&data, 2).expect("encode");
        assert_eq!(parity.len(), 2);
        // Lose two data shards: both come back, in one decode, from the other two and
        // the parity.
        let have: Vec<(usize, Vec<u8>)> = vec![(1, data[1].clone()), (3, data[3].clone())];
        let par: Vec<(usize, Vec<u8>)> = parity.iter().cloned().enumerate().collect();
        assert_eq!(
            reconstruct_all(k, 2, &have, &par).expect("decode"),
            vec![(0, data[0].clone()), (2, data[2].clone())]
        );
        // Nothing lost, nothing to decode.
        let all: Vec<(usize, Vec<u8>)> = data.iter().cloned().enumerate().collect();
        assert_eq!(reconstruct_all(k, 2, &all, &[]), Ok(vec![]));
        // Three lost is too many.
        let one: Vec<(usize, Vec<u8>)> = vec![(3, data[3].clone())];
        assert_eq!(reconstruct_all(k, 2, &one, &par), Err(Errno::EIO));
        // A one-stripe set's parity is its copy.
        let single = encode(&data[..1], 1).expect("copy");
        let p1: Vec<(usize, Vec<u8>)> = vec![(0, single[0].clone())];
        assert_eq!(
            reconstruct_all(1, 1, &[], &p1).expect("copy"),
            vec![(0, data[0].clone())]
        );
    }
}
