//! File identifiers: `[seq:oid:ver]`, the name of every object in the file system.
//!
//! A FID never changes and is never reused. Sequences are handed out in ranges (see
//! `lustre-reference.md` §1): MDT0 holds the sequence controller, every target gets a
//! super-sequence of [`SUPER_SEQ_WIDTH`] sequences from it, and the FID location database
//! (FLD) maps each super-sequence back to its target so any FID can be routed.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Sequence of the root directory (`[0x200000007:0x1:0x0]`), always on MDT0000.
pub const FID_SEQ_ROOT: u64 = 0x2_0000_0007;
/// Sequence of the `.lustre` directory and its children.
pub const FID_SEQ_DOT_LUSTRE: u64 = 0x2_0000_0002;
/// First sequence of normal, allocated FIDs.
pub const FID_SEQ_NORMAL: u64 = 0x2_0000_0400;
/// Number of sequences in one super-sequence granted to a target by the controller.
pub const SUPER_SEQ_WIDTH: u64 = 1 << 30;
/// Objects per metadata sequence (`LUSTRE_METADATA_SEQ_MAX_WIDTH`).
pub const METADATA_SEQ_WIDTH: u32 = 0x20000;
/// Objects per data (OST) sequence (`LUSTRE_DATA_SEQ_MAX_WIDTH`).
pub const DATA_SEQ_WIDTH: u32 = 0x1FF_FFFF;

/// First sequence of MDT `idx`'s super-sequence. Each MDT owns one super-sequence, so the
/// MDT of any metadata FID follows from its sequence (the FLD for metadata).
pub fn super_seq_start(mdt_idx: u32) -> u64 {
    FID_SEQ_NORMAL + u64::from(mdt_idx) * SUPER_SEQ_WIDTH
}

/// The MDT whose super-sequence holds metadata sequence `seq`.
pub fn mdt_of_seq(seq: u64) -> Option<u32> {
    if seq < FID_SEQ_NORMAL {
        return match seq {
            FID_SEQ_ROOT | FID_SEQ_DOT_LUSTRE => Some(0),
            _ => None,
        };
    }
    u32::try_from((seq - FID_SEQ_NORMAL) / SUPER_SEQ_WIDTH).ok()
}

/// A file identifier.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub struct Fid {
    pub seq: u64,
    pub oid: u32,
    pub ver: u32,
}

impl Fid {
    /// The root directory of every nacre (and Lustre) file system.
    pub const ROOT: Fid = Fid::new(FID_SEQ_ROOT, 1, 0);
    /// `.lustre`, the hidden directory under the root.
    pub const DOT_LUSTRE: Fid = Fid::new(FID_SEQ_DOT_LUSTRE, 1, 0);
    /// `.lustre/fid`, where objects can be opened by FID.
    pub const DOT_LUSTRE_FID: Fid = Fid::new(FID_SEQ_DOT_LUSTRE, 2, 0);
    /// `.lustre/lost+found`, where the checker puts orphans.
    pub const LOST_FOUND: Fid = Fid::new(FID_SEQ_DOT_LUSTRE, 3, 0);
    pub const ZERO: Fid = Fid::new(0, 0, 0);

    pub const fn new(seq: u64, oid: u32, ver: u32) -> Fid {
        Fid { seq, oid, ver }
    }

    pub fn is_zero(&self) -> bool {
        *self == Fid::ZERO
    }

    /// Big-endian bytes, so that byte order is FID order in a key-value store.
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.seq.to_be_bytes());
        b[8..12].copy_from_slice(&self.oid.to_be_bytes());
        b[12..].copy_from_slice(&self.ver.to_be_bytes());
        b
    }

    pub fn from_bytes(b: &[u8]) -> Option<Fid> {
        if b.len() < 16 {
            return None;
        }
        Some(Fid {
            seq: u64::from_be_bytes(b[..8].try_into().ok()?),
            oid: u32::from_be_bytes(b[8..12].try_into().ok()?),
            ver: u32::from_be_bytes(b[12..16].try_into().ok()?),
        })
    }

    /// The 64-bit inode number applications see, as Lustre's `cl_fid_build_ino`:
    /// `(seq << 24) + ((seq >> 24) & 0xffffff0000) + oid`.
    pub fn ino(&self) -> u64 {
        if self.seq < FID_SEQ_NORMAL && self.seq >= 12 && self.seq <= 0xFFFF_FFFF {
            // IGIF: the sequence is the old inode number.
            return self.seq;
        }
        (self.seq << 24)
            .wrapping_add((self.seq >> 24) & 0xff_ffff_0000)
            .wrapping_add(u64::from(self.oid))
    }

    /// The same FID with its version field replaced (OST objects keep the stripe index there
    /// in their filter fid).
    pub fn with_ver(self, ver: u32) -> Fid {
        Fid { ver, ..self }
    }

    /// Printed without brackets, as in YAML output.
    pub fn bare(&self) -> String {
        format!("{}:{:#x}:{:#x}", SeqHex(self.seq), self.oid, self.ver)
    }
}

/// The sequence as C's `%#llx` prints it: `0` rather than `0x0` for zero.
struct SeqHex(u64);

impl fmt::Display for SeqHex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            f.write_str("0")
        } else {
            write!(f, "{:#x}", self.0)
        }
    }
}

impl fmt::Display for Fid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}:{:#x}:{:#x}]", SeqHex(self.seq), self.oid, self.ver)
    }
}

impl fmt::Debug for Fid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Why a FID string did not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid FID '{input}': {reason} (expected [0xSEQ:0xOID:0xVER])")]
pub struct ParseFidError {
    pub input: String,
    pub reason: &'static str,
}

impl FromStr for Fid {
    type Err = ParseFidError;

    /// Accepts `[0x200000401:0x1:0x0]` and the bare `0x200000401:0x1:0x0`.
    fn from_str(s: &str) -> Result<Fid, ParseFidError> {
        let err = |reason| ParseFidError {
            input: s.to_string(),
            reason,
        };
        let t = s.trim();
        let t = match (t.starts_with('['), t.ends_with(']')) {
            (true, true) => &t[1..t.len() - 1],
            (false, false) => t,
            _ => return Err(err("unbalanced brackets")),
        };
        let parts: Vec<&str> = t.split(':').collect();
        if parts.len() != 3 {
            return Err(err("need three fields separated by ':'"));
        }
        fn num(p: &str) -> Option<u64> {
            let p = p.trim();
            match p.strip_prefix("0x").or_else(|| p.strip_prefix("0X")) {
                Some(h) => u64::from_str_radix(h, 16).ok(),
                None => p.parse().ok(),
            }
        }
        let seq = num(parts[0]).ok_or_else(|| err("bad sequence"))?;
        let oid = num(parts[1])
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| err("bad object id"))?;
        let ver = num(parts[2])
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| err("bad version"))?;
        Ok(Fid { seq, oid, ver })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_like_lustre() {
        assert_eq!(Fid::ROOT.to_string(), "[0x200000007:0x1:0x0]");
        assert_eq!(
            Fid::new(0x200000401, 0x1, 0).to_string(),
            "[0x200000401:0x1:0x0]"
        );
        assert_eq!(
            Fid::new(0x200000401, 0x1a, 2).bare(),
            "0x200000401:0x1a:0x2"
        );
        // DFID is "[%#llx:0x%x:0x%x]": '#' prints a zero sequence as plain 0.
        assert_eq!(Fid::ZERO.to_string(), "[0:0x0:0x0]");
        assert_eq!(Fid::ZERO.bare(), "0:0x0:0x0");
    }

    #[test]
    fn parses_with_and_without_brackets() {
        let f = Fid::new(0x200000401, 0x1, 0);
        assert_eq!("[0x200000401:0x1:0x0]".parse::<Fid>(), Ok(f));
        assert_eq!("0x200000401:0x1:0x0".parse::<Fid>(), Ok(f));
        assert!("[0x200000401:0x1".parse::<Fid>().is_err());
        assert!("0x1:0x2".parse::<Fid>().is_err());
        assert!("0x1:0x100000000:0".parse::<Fid>().is_err());
        assert!("zz:1:0".parse::<Fid>().is_err());
    }

    #[test]
    fn bytes_round_trip_and_order() {
        let a = Fid::new(0x200000401, 2, 0);
        let b = Fid::new(0x200000401, 10, 0);
        assert_eq!(Fid::from_bytes(&a.to_bytes()), Some(a));
        assert!(a.to_bytes() < b.to_bytes());
        assert_eq!(Fid::from_bytes(&[0; 3]), None);
    }

    #[test]
    fn sequences_route_to_their_mdt() {
        assert_eq!(super_seq_start(0), 0x200000400);
        assert_eq!(super_seq_start(1), 0x240000400);
        assert_eq!(mdt_of_seq(0x240000401), Some(1));
        assert_eq!(mdt_of_seq(FID_SEQ_ROOT), Some(0));
        assert_eq!(mdt_of_seq(5), None);
    }

    #[test]
    fn inode_numbers_are_distinct_and_match_lustre() {
        // cl_fid_build_ino for [0x200000401:0x1:0x0]
        let f = Fid::new(0x200000401, 1, 0);
        assert_eq!(f.ino(), 0x0200_0004_0100_0001);
        // Sequence 2^40: its low bits shift out, its high bits fold back in.
        assert_eq!(Fid::new(0x0100_0000_0000, 5, 0).ino(), 0x1_0005);
        assert_ne!(Fid::new(0x200000401, 2, 0).ino(), f.ino());
        assert_ne!(Fid::ROOT.ino(), 1);
    }
}
