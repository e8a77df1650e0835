//! FLR tools on the client (what liblustreapi's `llapi_mirror_*` do for `lfs mirror`):
//! resync, verify, reading and writing one mirror, extend and split.
//!
//! A resync holds the file as Lustre's resync lease does (the MDT refuses it while a writer
//! has the file open, and refuses its end if one opened meanwhile), copies the in-sync data
//! over each stale component in [`RESYNC_CHUNK`] steps (reads fail over and repair as any
//! mirrored read does), cuts the stale copy's objects to the file's size, and then asks the
//! MDT to clear the stale flags. Verify reads every mirror in sync over each chunk (the
//! extents between component boundaries) and compares their checksums; a copy that fails
//! its stored checksum is an error of that mirror.

use crate::Client;
use bytes::Bytes;
use nacre_core::cksum::TornBlocks;
use nacre_core::{Component, Errno, Fid, Layout};
use nacre_rpc::msg::{InodeInfo, MirrorOp, Request};
use serde::{Deserialize, Serialize};

/// Bytes copied (resync) or compared (verify) per step: one default RPC of each mirror in
/// memory at a time, per file.
pub const RESYNC_CHUNK: u64 = 4 << 20;

/// What `lfs mirror resync` did to a file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResyncOutcome {
    /// The components made in sync again (`lcme_id`s).
    pub synced: Vec<u32>,
    /// Bytes copied (none for an erasure-coded file: its parity is recomputed).
    pub bytes: u64,
}

/// One chunk of `lfs mirror verify`: an extent and, for each mirror in sync over it, the
/// crc32c of its bytes up to the file size or the errno its read failed with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyChunk {
    pub start: u64,
    pub end: u64,
    pub mirrors: Vec<(u32, Result<u32, Errno>)>,
    /// For each mirror read, the bytes its objects hold in the extent (holes inside an
    /// object count, what lies past an object's end does not): a copy whose object was
    /// lost reads as zeros, and holds less than the copies that kept theirs.
    #[serde(default)]
    pub held: Vec<(u32, u64)>,
}

impl VerifyChunk {
    /// Whether every mirror read and all agree.
    pub fn agrees(&self) -> bool {
        let mut sums = self.mirrors.iter().map(|(_, r)| r);
        match sums.next() {
            Some(Ok(first)) => sums.all(|r| r.as_ref() == Ok(first)),
            Some(Err(_)) => false,
            None => true,
        }
    }
}

/// What `lfs mirror verify` found in a file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorVerify {
    pub size: u64,
    /// Mirrors with a stale component below the size (ids).
    pub stale: Vec<u32>,
    pub chunks: Vec<VerifyChunk>,
}

impl MirrorVerify {
    /// No mirror is stale below the size, and every mirror read the same bytes.
    pub fn in_sync(&self) -> bool {
        self.stale.is_empty() && self.chunks.iter().all(VerifyChunk::agrees)
    }
}

impl Client {
    /// The file's layout and size as its in-sync copies say (stale components' objects
    /// left out: they may be longer or shorter).
    async fn in_sync_size(&self, fid: Fid, layout: &Layout) -> Result<u64, Errno> {
        let fresh = Layout {
            components: layout
                .components
                .iter()
                .filter(|c| !c.is_stale())
                .cloned()
                .collect(),
            ..layout.clone()
        };
        let mut attr = self.getattr(fid).await?.attr;
        self.glimpse(&fresh, &mut attr).await?;
        Ok(attr.size)
    }

    /// `lfs mirror resync [--only IDS]`: copies in-sync data over the stale components of
    /// the mirrors in `only` (every mirror if empty) and clears their stale flags. For an
    /// erasure-coded file (Lustre's EC resync), recomputes stale parity instead
    /// ([`Client::ec_resync`]); it has no mirrors to name, so `only` must be empty.
    pub async fn mirror_resync(&self, fid: Fid, only: &[u32]) -> Result<ResyncOutcome, Errno> {
        let info = match self.mirror_request(fid, MirrorOp::ResyncStart).await {
            // Not mirrored: perhaps erasure-coded.
            Err(Errno::EINVAL) => return self.parity_resync(fid, only).await,
            r => r?,
        };
        let layout = info.layout.ok_or(Errno::EINVAL)?;
        if !layout.has_stale() {
            // Nothing to do: the MDT began no resync.
            return Ok(ResyncOutcome::default());
        }
        match self.resync_copy(fid, layout, only).await {
            Ok((gen_, out)) => {
                let done = MirrorOp::ResyncDone {
                    layout_gen: gen_,
                    ids: out.synced.clone(),
                };
                self.mirror_request(fid, done).await?;
                Ok(out)
            }
            Err(e) => {
                let abort = MirrorOp::ResyncDone {
                    layout_gen: 0,
                    ids: Vec::new(),
                };
                if let Err(e2) = self.mirror_request(fid, abort).await
                    && e2 != Errno::EBUSY
                {
                    tracing::warn!(target: "client", "file {fid}: ending a failed resync: {e2}");
                }
                Err(e)
            }
        }
    }

    /// The copy of a resync; returns the layout generation it finished with.
    async fn resync_copy(
        &self,
        fid: Fid,
        mut layout: Layout,
        only: &[u32],
    ) -> Result<(u32, ResyncOutcome), Errno> {
        let size = self.in_sync_size(fid, &layout).await?;
        if size > 0 && !layout.instantiated_to(size) {
            layout = self.layout_intent(fid, size).await?;
        }
        let mut out = ResyncOutcome::default();
        let targets: Vec<Component> = layout
            .components
            .iter()
            .filter(|c| c.is_stale() && (only.is_empty() || only.contains(&c.mirror_id())))
            .cloned()
            .collect();
        for c in targets {
            let copy = Layout {
                components: vec![c.clone()],
                ..layout.mirror(c.mirror_id())
            };
            let end = c.end.min(size);
            let mut pos = c.start;
            while pos < end {
                let n = (end - pos).min(RESYNC_CHUNK);
                // Bytes past what the in-sync copy holds are holes: zeros, written so the
                // stale copy keeps nothing of its old bytes there.
                let (good, _) = self.read_objects(fid, &layout, pos, n).await?;
                self.write_copy_plain(fid, &copy, pos, good).await?;
                out.bytes += n;
                pos += n;
            }
            self.cut_objects(&c, size).await?;
            out.synced.push(c.id);
        }
        Ok((layout.layout_gen, out))
    }

    /// Cuts the objects of component `c` to what a file of `size` bytes holds in them.
    async fn cut_objects(&self, c: &Component, size: u64) -> Result<(), Errno> {
        for (idx, o) in c.objects.iter().enumerate() {
            if o.is_dummy() {
                continue;
            }
            let imp = self.osc(o.ost_idx)?;
            let req = Request::OstPunch {
                obj: o.fid,
                size: c.object_size_for_file_size(idx, size),
            };
            self.ost_call(o.ost_idx, &imp, &req, Bytes::new())
                .await
                .map_err(crate::rpc_errno)?;
        }
        Ok(())
    }

    /// `lfs mirror resync` of an erasure-coded file: its stale parity components are
    /// recomputed and in sync again. EINVAL for a file that is neither mirrored nor
    /// erasure-coded, as Lustre's resync gives.
    async fn parity_resync(&self, fid: Fid, only: &[u32]) -> Result<ResyncOutcome, Errno> {
        if !only.is_empty() {
            return Err(Errno::EINVAL);
        }
        let before = self.getattr(fid).await?.layout.ok_or(Errno::EINVAL)?;
        // EINVAL there too for a file that is not erasure-coded.
        let after = self.ec_resync_layout(fid, before.clone(), None).await?;
        let synced = before
            .components
            .iter()
            .filter(|c| c.is_parity() && c.is_stale())
            .filter(|c| {
                after
                    .components
                    .iter()
                    .any(|a| a.id == c.id && !a.is_stale())
            })
            .map(|c| c.id)
            .collect();
        Ok(ResyncOutcome { synced, bytes: 0 })
    }

    /// `lfs mirror verify [--only IDS]`: each chunk's in-sync mirrors (those in `only` if
    /// given), read and compared.
    pub async fn mirror_verify(&self, fid: Fid, only: &[u32]) -> Result<MirrorVerify, Errno> {
        let info = self.getattr(fid).await?;
        let layout = info.layout.ok_or(Errno::EINVAL)?;
        if !layout.is_mirrored() {
            return Err(Errno::EINVAL);
        }
        let size = self.in_sync_size(fid, &layout).await?;
        let mut stale: Vec<u32> = layout
            .components
            .iter()
            .filter(|c| c.is_stale() && c.start < size)
            .map(Component::mirror_id)
            .collect();
        stale.dedup();
        let mut bounds: Vec<u64> = layout
            .components
            .iter()
            .flat_map(|c| [c.start, c.end])
            .collect();
        bounds.sort_unstable();
        bounds.dedup();
        let mut chunks = Vec::new();
        for w in bounds.windows(2) {
            let (start, end) = (w[0], w[1]);
            if start >= size {
                break;
            }
            let covering: Vec<u32> = layout
                .read_mirrors(start, end)
                .into_iter()
                .filter(|m| only.is_empty() || only.contains(m))
                .filter(|&m| {
                    layout
                        .components
                        .iter()
                        .any(|c| c.mirror_id() == m && c.contains(start))
                })
                .collect();
            let mut mirrors = Vec::new();
            let mut held = Vec::new();
            for m in covering {
                let copy = layout.mirror(m);
                let r = self.copy_crc(fid, &copy, start, end.min(size)).await;
                if let Ok((_, h)) = r {
                    held.push((m, h));
                }
                mirrors.push((m, r.map(|(crc, _)| crc)));
            }
            chunks.push(VerifyChunk {
                start,
                end,
                mirrors,
                held,
            });
        }
        Ok(MirrorVerify {
            size,
            stale,
            chunks,
        })
    }

    /// `lfs mirror verify --stale`: in each chunk where mirrors disagree, those that could
    /// not be read (a copy failing its checksum, an OST down) or differ from the largest
    /// group of agreeing mirrors are marked stale there, for a resync to rewrite. On a
    /// tie, the group holding the most bytes wins (a copy that lost an object reads as
    /// zeros where the others hold data), then the first, best mirror first.
    pub async fn mark_disagreeing_stale(&self, fid: Fid, v: &MirrorVerify) -> Result<(), Errno> {
        for chunk in v.chunks.iter().filter(|c| !c.agrees()) {
            let held = |m: u32| {
                chunk
                    .held
                    .iter()
                    .find(|(h, _)| *h == m)
                    .map_or(0, |(_, n)| *n)
            };
            let mut best: Option<(u32, (usize, u64))> = None;
            for (m, r) in &chunk.mirrors {
                if let Ok(sum) = r {
                    let n = chunk.mirrors.iter().filter(|(_, x)| x == &Ok(*sum)).count();
                    let rank = (n, held(*m));
                    if best.is_none_or(|(_, b)| rank > b) {
                        best = Some((*sum, rank));
                    }
                }
            }
            let Some((sum, _)) = best else {
                tracing::error!(target: "client", "file {fid}: no mirror of [{}, {}) can be read", chunk.start, chunk.end);
                continue;
            };
            let keep: Vec<u32> = chunk
                .mirrors
                .iter()
                .filter(|(_, r)| r == &Ok(sum))
                .map(|(m, _)| *m)
                .collect();
            tracing::warn!(target: "client", "file {fid}: [{}, {}): mirrors other than {keep:?} disagree: marked stale", chunk.start, chunk.end);
            let op = MirrorOp::Write {
                start: chunk.start,
                end: chunk.end,
                keep,
            };
            self.mirror_request(fid, op).await?;
        }
        Ok(())
    }

    /// The crc32c of `[start, end)` of one copy, and the bytes its objects hold there.
    async fn copy_crc(
        &self,
        fid: Fid,
        copy: &Layout,
        start: u64,
        end: u64,
    ) -> Result<(u32, u64), Errno> {
        let mut crc = 0u32;
        let mut held = 0u64;
        let mut pos = start;
        while pos < end {
            let n = (end - pos).min(RESYNC_CHUNK);
            let p = crate::io::plan(copy, pos, n, self.tunables.max_rpc_bytes());
            if !p.dom.is_empty() {
                // No Data-on-MDT in a mirrored file; read it as any copy.
                let (data, found) = self.read_objects(fid, copy, pos, n).await?;
                crc = crc32c::crc32c_append(crc, &data);
                held += found;
            } else {
                let reads = p.chunks.iter().map(|c| async move {
                    (c.buf_off, self.read_chunk(fid, c, TornBlocks::Take).await)
                });
                let mut buf = vec![0u8; n as usize];
                for (at, r) in futures::future::join_all(reads).await {
                    let b = r?;
                    buf[at as usize..at as usize + b.len()].copy_from_slice(&b);
                    held += b.len() as u64;
                }
                crc = crc32c::crc32c_append(crc, &buf);
            }
            pos += n;
        }
        Ok((crc, held))
    }

    /// `lfs mirror read -N ID`: `[off, off + len)` of mirror `id` alone (no fail-over).
    pub async fn mirror_read(
        &self,
        fid: Fid,
        id: u32,
        off: u64,
        len: u64,
    ) -> Result<(Bytes, u64), Errno> {
        let layout = self.getattr(fid).await?.layout.ok_or(Errno::EINVAL)?;
        if !layout.mirror_ids().contains(&id) {
            return Err(Errno::EINVAL);
        }
        self.read_objects(fid, &layout.mirror(id), off, len).await
    }

    /// `lfs mirror write -N ID`: `data` at `off` into mirror `id` alone. The other mirrors
    /// are left as they are (a tool for repairing or testing one copy, as in Lustre).
    pub async fn mirror_write(
        &self,
        fid: Fid,
        id: u32,
        off: u64,
        data: Bytes,
    ) -> Result<(), Errno> {
        let mut layout = self.getattr(fid).await?.layout.ok_or(Errno::EINVAL)?;
        if !layout.mirror_ids().contains(&id) {
            return Err(Errno::EINVAL);
        }
        let end = off + data.len() as u64;
        if !layout.instantiated_to(end) {
            layout = self.layout_intent(fid, end).await?;
        }
        self.write_copy_plain(fid, &layout.mirror(id), off, data)
            .await
    }

    /// `lfs mirror extend`: `components` (mirror ids 1, 2, ... among themselves) become
    /// new mirrors of the file, filled by a resync.
    pub async fn mirror_extend(
        &self,
        fid: Fid,
        components: Vec<Component>,
    ) -> Result<InodeInfo, Errno> {
        self.mirror_request(fid, MirrorOp::Extend { components })
            .await?;
        self.mirror_resync(fid, &[]).await?;
        self.getattr(fid).await
    }

    /// `lfs mirror split --mirror-id ID`: the mirror leaves the file; with `victim` (an
    /// empty file) it becomes that file's layout, the file then sized as `fid`.
    pub async fn mirror_split(
        &self,
        fid: Fid,
        id: u32,
        victim: Option<Fid>,
    ) -> Result<InodeInfo, Errno> {
        let layout = self.getattr(fid).await?.layout.ok_or(Errno::EINVAL)?;
        let size = self.in_sync_size(fid, &layout).await?;
        let info = self
            .mirror_request(
                fid,
                MirrorOp::Split {
                    mirror_id: id,
                    victim,
                },
            )
            .await?;
        if let Some(v) = victim {
            let attr = nacre_core::attr::SetAttr {
                size: Some(size),
                ..Default::default()
            };
            self.setattr(v, attr, &nacre_rpc::msg::Cred::root(), None)
                .await?;
        }
        Ok(info)
    }

    /// A write of one copy (a layout of one mirror) that asks no grant: not cached data.
    async fn write_copy_plain(
        &self,
        fid: Fid,
        copy: &Layout,
        off: u64,
        data: Bytes,
    ) -> Result<(), Errno> {
        debug_assert!(!copy.is_mirrored());
        self.write_objects_summed(fid, copy, off, data, None, false)
            .await
    }
}
