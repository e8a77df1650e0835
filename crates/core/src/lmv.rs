//! Directory stripe layouts (LMV) and the name hashes that place an entry on a stripe.
//!
//! A striped directory spreads its entries over several MDTs; the stripe for a name is a hash
//! of the name modulo the stripe count, computed bit-for-bit as Lustre does
//! (`lustre-reference.md` §4.2), so a client sends each request straight to the right MDT.

use crate::fid::Fid;
use serde::{Deserialize, Serialize};

pub const LMV_MAGIC_V1: u32 = 0x0CD2_0CD0;
pub const LMV_MAGIC_STRIPE: u32 = 0x0CD4_0CD0;
/// `LMV_MAX_STRIPE_COUNT`.
pub const LMV_MAX_STRIPE_COUNT: u32 = 2000;

/// Hash type flags kept in the high bits of `lmv_hash_type`.
pub const LMV_HASH_FLAG_OVERSTRIPED: u32 = 0x0100_0000;
pub const LMV_HASH_FLAG_FIXED: u32 = 0x0200_0000;
pub const LMV_HASH_FLAG_MIGRATION: u32 = 0x8000_0000;
pub const LMV_HASH_TYPE_MASK: u32 = 0xffff;

/// `lmv_hash_type` low 16 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HashType {
    None = 0,
    AllChar = 1,
    Fnv1a64 = 2,
    Crush = 3,
    Crush2 = 4,
}

impl HashType {
    pub fn name(self) -> &'static str {
        match self {
            HashType::None => "none",
            HashType::AllChar => "all_char",
            HashType::Fnv1a64 => "fnv_1a_64",
            HashType::Crush => "crush",
            HashType::Crush2 => "crush2",
        }
    }

    pub fn parse(s: &str) -> Option<HashType> {
        match s {
            "all_char" | "1" => Some(HashType::AllChar),
            "fnv_1a_64" | "2" => Some(HashType::Fnv1a64),
            "crush" | "3" => Some(HashType::Crush),
            "crush2" | "4" => Some(HashType::Crush2),
            _ => None,
        }
    }

    pub fn from_id(id: u32) -> Option<HashType> {
        match id & LMV_HASH_TYPE_MASK {
            0 => Some(HashType::None),
            1 => Some(HashType::AllChar),
            2 => Some(HashType::Fnv1a64),
            3 => Some(HashType::Crush),
            4 => Some(HashType::Crush2),
            _ => None,
        }
    }

    /// The stripe index for `name` in a directory of `count` stripes.
    pub fn stripe_index(self, name: &[u8], count: u32) -> u32 {
        if count <= 1 {
            return 0;
        }
        match self {
            HashType::None | HashType::Fnv1a64 => (fnv_1a_64(name) % u64::from(count)) as u32,
            HashType::AllChar => all_char(name) % count,
            HashType::Crush => crush::stripe_index(name, count, false),
            HashType::Crush2 => crush::stripe_index(name, count, true),
        }
    }
}

/// FNV-1a, 64 bits, over the raw name bytes.
pub fn fnv_1a_64(name: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in name {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Sum of the unsigned bytes in a 32-bit accumulator (Lustre's test hash).
pub fn all_char(name: &[u8]) -> u32 {
    name.iter()
        .fold(0u32, |acc, &b| acc.wrapping_add(u32::from(b)))
}

/// A directory's stripe layout (`lmv_mds_md_v1`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lmv {
    /// `lmv_master_mdt_index`: the MDT of stripe 0.
    pub master_mdt: u32,
    /// Type in the low 16 bits, `LMV_HASH_FLAG_*` above.
    pub hash_type: u32,
    pub layout_version: u32,
    /// Stripe FIDs in stripe order, each with the MDT holding it.
    pub stripes: Vec<(u32, Fid)>,
}

impl Lmv {
    pub fn stripe_count(&self) -> u32 {
        self.stripes.len() as u32
    }

    pub fn hash(&self) -> HashType {
        HashType::from_id(self.hash_type).unwrap_or(HashType::Fnv1a64)
    }

    /// The stripe (MDT, FID) that holds `name`.
    pub fn stripe_for(&self, name: &[u8]) -> Option<(u32, Fid)> {
        let idx = self.hash().stripe_index(name, self.stripe_count());
        self.stripes.get(idx as usize).copied()
    }
}

/// A default directory layout (`lfs setdirstripe -D`): what new subdirectories get.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LmvTemplate {
    /// 0 or 1: a plain directory; -1: every MDT.
    pub stripe_count: i32,
    /// -1: the file system chooses.
    pub stripe_offset: i32,
    pub hash_type: u32,
    /// Levels this default is copied down; -1 unlimited.
    pub max_inherit: i32,
    pub max_inherit_rr: i32,
}

/// Lustre's CRUSH placement for directory stripes (`lmv_hash_crush`).
pub mod crush {
    use super::fnv_1a_64;

    /// Placement groups the name hash is reduced to.
    pub const CRUSH_PG_COUNT: u64 = 4096;

    /// Bob Jenkins' 96-bit mix, as in `crush_hashmix`.
    fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
        *a = a.wrapping_sub(*b).wrapping_sub(*c);
        *a ^= *c >> 13;
        *b = b.wrapping_sub(*c).wrapping_sub(*a);
        *b ^= *a << 8;
        *c = c.wrapping_sub(*a).wrapping_sub(*b);
        *c ^= *b >> 13;
        *a = a.wrapping_sub(*b).wrapping_sub(*c);
        *a ^= *c >> 12;
        *b = b.wrapping_sub(*c).wrapping_sub(*a);
        *b ^= *a << 16;
        *c = c.wrapping_sub(*a).wrapping_sub(*b);
        *c ^= *b >> 5;
        *a = a.wrapping_sub(*b).wrapping_sub(*c);
        *a ^= *c >> 3;
        *b = b.wrapping_sub(*c).wrapping_sub(*a);
        *b ^= *a << 10;
        *c = c.wrapping_sub(*a).wrapping_sub(*b);
        *c ^= *b >> 15;
    }

    /// `crush_hash32_rjenkins1_2(a, b)`.
    pub fn hash32_2(a: u32, b: u32) -> u32 {
        let mut a = a;
        let mut b = b;
        let mut hash = 1_315_423_911u32 ^ a ^ b;
        let mut x = 231_232u32;
        let mut y = 1_232u32;
        mix(&mut a, &mut b, &mut hash);
        mix(&mut x, &mut a, &mut hash);
        mix(&mut b, &mut y, &mut hash);
        hash
    }

    /// Character classes of the Linux kernel's `<linux/ctype.h>`, which the hash runs under.
    /// Unlike the C locale, the kernel table treats Latin-1 letters (0xC0-0xFF, except 0xD7
    /// and 0xF7) as upper or lower case, so UTF-8 bytes of a name count as letters.
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum KClass {
        Upper,
        Lower,
        Digit,
        Other,
    }

    fn kclass(c: u8) -> KClass {
        match c {
            b'A'..=b'Z' => KClass::Upper,
            b'a'..=b'z' => KClass::Lower,
            b'0'..=b'9' => KClass::Digit,
            0xd7 | 0xf7 => KClass::Other,
            0xc0..=0xde => KClass::Upper,
            0xdf..=0xff => KClass::Lower,
            _ => KClass::Other,
        }
    }

    /// `lu_name_is_temp_file`: whether `name` ends in a `suffix_len`-character random
    /// suffix after a '.', as mkstemp-style tools (rsync, dcp, vi) name temporary files,
    /// optionally also requiring a leading '.'.
    fn is_temp_name(name: &[u8], dot_prefix: bool, suffix_len: usize, crush2: bool) -> bool {
        let n = name.len();
        if dot_prefix && name.first() != Some(&b'.') {
            return false;
        }
        if n < usize::from(dot_prefix) + suffix_len + 2 || name[n - suffix_len - 1] != b'.' {
            return false;
        }
        let suffix = &name[n - suffix_len..];
        let (mut upper, mut lower, mut digit) = (0, 0, 0);
        for &c in suffix {
            match kclass(c) {
                KClass::Lower => lower += 1,
                KClass::Upper => upper += 1,
                KClass::Digit => digit += 1,
                // The original CRUSH ignores other characters, which wrongly matched names
                // such as "output.6334.log"; CRUSH2 treats them as "not temporary".
                KClass::Other if crush2 => return false,
                KClass::Other => {}
            }
        }
        // mktemp suffixes mix cases and digits; single-case words are real extensions.
        if upper == suffix_len || lower == suffix_len {
            return false;
        }
        if digit + 1 >= suffix_len {
            let first_is_digit = kclass(suffix[0]) == KClass::Digit;
            // Mostly-digit suffixes are versions, dates or ranks. The old CRUSH got the
            // test backwards, and must stay so: the hash is part of the protocol.
            if first_is_digit == crush2 {
                return false;
            }
        }
        true
    }

    /// `lu_name_is_backup_file`: the length of a `~`, `.bak`, `.sav` or `.orig` suffix.
    fn backup_suffix_len(name: &[u8]) -> Option<usize> {
        let n = name.len();
        if n > 1 && name[n - 2] != b'.' && name[n - 1] == b'~' {
            return Some(1);
        }
        if n > 4 && name[n - 4] == b'.' {
            let ext = &name[n - 3..];
            if ext.eq_ignore_ascii_case(b"bak") || ext.eq_ignore_ascii_case(b"sav") {
                return Some(4);
            }
        }
        if n > 5 && name[n - 5] == b'.' && name[n - 4..].eq_ignore_ascii_case(b"orig") {
            return Some(5);
        }
        None
    }

    /// The part of `name` that CRUSH hashes: temporary and backup suffixes removed, so a
    /// temporary file and its final name land on the same MDT.
    pub fn normalise(name: &[u8], crush2: bool) -> &[u8] {
        let n = name.len();
        if is_temp_name(name, true, 6, crush2) {
            // ".base.XXXXXX" (rsync): drop the leading '.' and ".XXXXXX".
            return &name[1..n - 7];
        }
        if is_temp_name(name, false, 8, crush2) {
            // "base.XXXXXXXX" (dstripe), whether or not it starts with '.'.
            return &name[..n - 9];
        }
        match backup_suffix_len(name) {
            Some(len) => &name[..n - len],
            None => name,
        }
    }

    /// The stripe index CRUSH picks for `name` among `count` stripes.
    pub fn stripe_index(name: &[u8], count: u32, crush2: bool) -> u32 {
        let pg = (fnv_1a_64(normalise(name, crush2)) % CRUSH_PG_COUNT) as u32;
        let mut best = 0u32;
        let mut best_straw = 0u32;
        for i in 0..count {
            let straw = hash32_2(pg, i);
            if straw > best_straw {
                best_straw = straw;
                best = i;
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_known_values() {
        // Standard FNV-1a 64 test vectors.
        assert_eq!(fnv_1a_64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv_1a_64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv_1a_64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn all_char_sums_bytes() {
        assert_eq!(all_char(b"ab"), 97 + 98);
        assert_eq!(HashType::AllChar.stripe_index(b"ab", 4), (97 + 98) % 4);
    }

    #[test]
    fn single_stripe_is_always_zero() {
        for h in [
            HashType::AllChar,
            HashType::Fnv1a64,
            HashType::Crush,
            HashType::Crush2,
        ] {
            assert_eq!(h.stripe_index(b"anything", 1), 0);
        }
    }

    #[test]
    fn crush_keeps_temporary_names_together() {
        assert_eq!(crush::normalise(b"file.txt~", false), b"file.txt");
        assert_eq!(crush::normalise(b"data.BAK", false), b"data");
        assert_eq!(crush::normalise(b".report.pdf.aB3xYz", true), b"report.pdf");
        // A leading '.' does not stop the 8-character (dstripe) rule.
        assert_eq!(crush::normalise(b".dot.aB3xYz12", true), b".dot");
        // Kernel ctype: Latin-1 bytes are letters, not punctuation, for CRUSH2.
        assert_eq!(crush::normalise(b".s.\xc4b1cde", true), b"s");
        // ...but 0x80-0xBF are not, so this UTF-8 suffix is temporary only for old CRUSH.
        assert_eq!(crush::normalise(".s.\u{c4}b1cd".as_bytes(), false), b"s");
        assert_eq!(
            crush::normalise(".s.\u{c4}b1cd".as_bytes(), true),
            ".s.\u{c4}b1cd".as_bytes()
        );
        for count in 2..8 {
            assert_eq!(
                HashType::Crush2.stripe_index(b".report.pdf.aB3xYz", count),
                HashType::Crush2.stripe_index(b"report.pdf", count)
            );
        }
    }
}
