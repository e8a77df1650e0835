//! Bulk checksums on the client (Lustre's osc checksums: `osc.*.checksums`,
//! `osc.*.checksum_type`, `osc.*.resend_count`).
//!
//! With checksums on (the default), every write bulk to an OST or a Data-on-MDT component
//! carries the crc32c of each of its pieces ([`nacre_core::cksum`]); the target checks them
//! before writing and refuses a damaged bulk with EBADMSG, and the client sends it again,
//! at most `resend_count` times, then fails the write with EIO. Every read asks for the
//! checksums of what comes back and checks them; a mismatch is sent for again the same
//! way. Both count as `checksum_errors` of the target's osc (or mdc).
//!
//! A read the target refuses with ECKSUM is different: its stored copy failed its own
//! checksum, and asking again gives the same answer. That is a [`ChunkReadError::Corrupt`],
//! counted as `corrupt_reads`; see [`crate::io`] for what a reader does with it.

use bytes::{Bytes, BytesMut};
use nacre_core::TargetName;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};

/// Counts of one target, as this client saw them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CksumCounts {
    /// Bulks that failed their checksums on the way (found by the target on a write, by
    /// this client on a read), each sent again.
    pub checksum_errors: u64,
    /// Reads refused because the target's stored data failed its checksum.
    pub corrupt_reads: u64,
    /// Bad copies on this target rewritten from another mirror.
    pub repaired: u64,
}

/// Counts by target (bounded by the file system's targets).
#[derive(Default)]
pub struct CksumStats {
    by_target: Mutex<HashMap<TargetName, CksumCounts>>,
}

impl CksumStats {
    pub fn get(&self, t: TargetName) -> CksumCounts {
        self.by_target.lock().get(&t).copied().unwrap_or_default()
    }

    pub(crate) fn damaged(&self, t: TargetName) {
        self.by_target.lock().entry(t).or_default().checksum_errors += 1;
    }

    pub(crate) fn corrupt(&self, t: TargetName) {
        self.by_target.lock().entry(t).or_default().corrupt_reads += 1;
    }

    pub(crate) fn repaired(&self, t: TargetName) {
        self.by_target.lock().entry(t).or_default().repaired += 1;
    }
}

/// Fault injection, as Lustre's `OBD_FAIL_OSC_CHECKSUM_SEND` and `_RECEIVE`: the next
/// `n` write bulks are damaged after their checksums are computed, or the next `n` read
/// bulks before they are checked, as a bad link would damage them. Only a copy is
/// damaged: a resend carries the right bytes.
#[derive(Default)]
pub struct ChecksumFaults {
    send: AtomicU32,
    receive: AtomicU32,
}

impl ChecksumFaults {
    pub fn damage_sends(&self, n: u32) {
        self.send.store(n, Ordering::SeqCst);
    }

    pub fn damage_receives(&self, n: u32) {
        self.receive.store(n, Ordering::SeqCst);
    }

    fn take(a: &AtomicU32) -> bool {
        a.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    pub(crate) fn take_send(&self) -> bool {
        Self::take(&self.send)
    }

    pub(crate) fn take_receive(&self) -> bool {
        Self::take(&self.receive)
    }
}

/// A copy of `b` with one bit flipped in its middle.
pub(crate) fn damaged(b: &Bytes) -> Bytes {
    let mut c = BytesMut::from(&b[..]);
    if !c.is_empty() {
        let mid = c.len() / 2;
        c[mid] ^= 0x20;
    }
    c.freeze()
}

/// Why a read of one object range failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChunkReadError {
    /// The target's stored copy of `[offset, offset + len)` of object `obj` failed its
    /// checksum (ECKSUM). Another copy of the range, if the layout has one, is good to
    /// read instead; this one is to be rewritten.
    #[error("{target}: object {obj} [{offset}, +{len}) failed its stored checksum")]
    Corrupt {
        target: TargetName,
        obj: nacre_core::Fid,
        offset: u64,
        len: u64,
    },
    #[error("{0}")]
    Failed(nacre_core::Errno),
}

impl From<nacre_core::Errno> for ChunkReadError {
    fn from(e: nacre_core::Errno) -> Self {
        ChunkReadError::Failed(e)
    }
}
