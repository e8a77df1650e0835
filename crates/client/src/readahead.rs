//! Client readahead (Lustre's llite readahead): sequential reads of a file are served from
//! windows fetched ahead, in RPCs of `max_pages_per_rpc`, so the OSTs see large reads and the
//! reader rarely waits for a round trip.
//!
//! Per open file, a window starts at 1 MiB once two reads are sequential and doubles up to
//! `llite.*.max_read_ahead_per_file_mb`; the client as a whole holds at most
//! `llite.*.max_read_ahead_mb` of fetched data. Fetched windows are dropped when the reader
//! moves past them, when it seeks elsewhere, or when this client changes any file's data.

use crate::Client;
use bytes::Bytes;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use nacre_core::{Errno, Fid, Layout};
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// The first readahead window.
pub const RA_START: u64 = 1 << 20;
/// Fetched pieces kept per file, whatever the window (bounds the map).
pub const RA_MAX_PIECES: usize = 64;
/// The smallest piece fetched.
pub const RA_MIN_PIECE: u64 = 256 << 10;
/// Fetched data kept behind the reader, for requests the kernel sent earlier but that
/// arrive late.
pub const RA_KEEP_BEHIND: u64 = 2 << 20;

/// A fetched (or in-flight) piece: its data and how much of it is real data (the rest are
/// zeros past the end of the objects).
type Piece = Shared<BoxFuture<'static, Result<(Bytes, u64), Errno>>>;

#[derive(Default)]
pub struct Readahead {
    /// End of the last read: a read starting here is sequential (none before the first).
    last_end: Option<u64>,
    /// Reads in a row that were sequential.
    streak: u32,
    window: u64,
    /// Fetched up to here.
    fetched_to: u64,
    /// (start, len, piece), in file order.
    pieces: Vec<(u64, u64, Piece)>,
    /// The client's change count the pieces were fetched at.
    changes: u64,
}

impl Readahead {
    /// Drops the fetched pieces and returns their bytes to the client's budget.
    pub(crate) fn clear(&mut self, client: &Client) {
        for (_, len, _) in self.pieces.drain(..) {
            client.ra_bytes.fetch_sub(len, Ordering::AcqRel);
        }
        self.fetched_to = 0;
    }
}

/// Reads `[off, off + len)` through the file's readahead state, if the access is sequential;
/// `None` means: read directly.
pub async fn read(
    client: &Arc<Client>,
    ra: &Mutex<Readahead>,
    fid: Fid,
    layout: &Layout,
    off: u64,
    len: u64,
) -> Option<Result<(Bytes, u64), Errno>> {
    let per_file = client.tunables.read_ahead_per_file_bytes();
    let total = client.tunables.read_ahead_bytes();
    if per_file == 0 || total == 0 {
        return None;
    }
    let max_rpc = client.tunables.max_rpc_bytes().max(1 << 16);
    let changes = client.local_changes.of(&fid);
    let wanted: Vec<(u64, u64, Piece)>;
    {
        let mut st = ra.lock();
        if st.changes != changes {
            st.clear(client);
            st.changes = changes;
        }
        // Sequential: right after the last read, or inside what was fetched (the kernel
        // sends its own readahead requests in parallel, so they arrive out of order).
        let in_window = st
            .pieces
            .first()
            .is_some_and(|(s, _, _)| off >= *s && off <= st.fetched_to);
        if st.last_end == Some(off) || in_window {
            st.streak = st.streak.saturating_add(1);
        } else {
            st.streak = 0;
            st.window = 0;
            st.clear(client);
        }
        st.last_end = Some(st.last_end.map_or(off + len, |e| e.max(off + len)));
        if st.streak == 0 {
            return None;
        }
        st.window = if st.window == 0 {
            RA_START
        } else {
            (st.window * 2).min(per_file.max(RA_START))
        };
        // Forget what the reader has left well behind.
        let behind = off.saturating_sub(RA_KEEP_BEHIND);
        let mut freed = 0;
        st.pieces.retain(|(s, l, _)| {
            let keep = s + l > behind;
            if !keep {
                freed += l;
            }
            keep
        });
        client.ra_bytes.fetch_sub(freed, Ordering::AcqRel);
        if st.fetched_to < off || st.pieces.is_empty() {
            st.fetched_to = off;
        }
        let limit = (off + len.max(st.window)).min(layout.max_size());
        // Pieces grow with the window, up to one RPC each.
        let piece = (st.window / 4).clamp(RA_MIN_PIECE, max_rpc);
        while st.fetched_to < limit && st.pieces.len() < RA_MAX_PIECES {
            let n = piece.min(limit - st.fetched_to);
            if client.ra_bytes.load(Ordering::Acquire) + n > total {
                break;
            }
            client.ra_bytes.fetch_add(n, Ordering::AcqRel);
            let start = st.fetched_to;
            let c = client.clone();
            let l = layout.clone();
            let fut: BoxFuture<'static, Result<(Bytes, u64), Errno>> =
                async move { c.read_objects(fid, &l, start, n).await }.boxed();
            let shared = fut.shared();
            // Drive the fetch even if nobody waits for it yet.
            tokio::spawn(shared.clone().map(|_| ()));
            st.pieces.push((start, n, shared));
            st.fetched_to += n;
        }
        wanted = st
            .pieces
            .iter()
            .filter(|(s, l, _)| *s < off + len && s + l > off)
            .cloned()
            .collect();
    }
    // The pieces must cover the whole request, or it is read directly.
    let covered = wanted.first().is_some_and(|(s, _, _)| *s <= off)
        && wanted.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0)
        && wanted.last().is_some_and(|(s, l, _)| s + l >= off + len);
    if !covered {
        return None;
    }
    let mut parts = Vec::with_capacity(wanted.len());
    for (s, l, p) in wanted {
        match p.await {
            Ok((data, found)) => parts.push((s, l, data, found)),
            Err(_) => {
                // A failed fetch is not kept: forget the window and read directly, which
                // retries and reports what happens now.
                ra.lock().clear(client);
                return None;
            }
        }
    }
    if parts.len() == 1 {
        let (s, _, data, found) = &parts[0];
        let from = (off - s) as usize;
        let to = ((off + len - s) as usize).min(data.len());
        let got = found.saturating_sub(off - s).min(len);
        return Some(Ok((data.slice(from.min(to)..to), got)));
    }
    let mut buf = Vec::with_capacity(len as usize);
    let mut got = 0u64;
    for (s, _, data, found) in parts {
        let from = off.max(s) - s;
        let to = (off + len).min(s + data.len() as u64) - s;
        if from < to {
            buf.extend_from_slice(&data[from as usize..to as usize]);
        }
        let real_end = s + found;
        if real_end > off {
            got = got.max(real_end.min(off + len) - off);
        }
    }
    buf.resize(len as usize, 0);
    Some(Ok((Bytes::from(buf), got)))
}
