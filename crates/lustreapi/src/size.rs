//! Sizes as `llapi_parse_size` reads them: `4M`, `64k`, `1.5G`, `0x100000`, `8b`
//! (512-byte blocks), `12c` (bytes), an optional `i`/`B` after the unit letter.
//!
//! Unlike `nacre_core::size::parse_size`, a bare number keeps the caller's default unit
//! (`lfs find -size 10` counts 512-byte blocks) and the unit actually used is returned,
//! because `lfs find` compares with a margin of one unit.

use crate::cnum::c_prefix;

/// A parsed size: the value in bytes and the unit it was written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParsedSize {
    pub bytes: u64,
    pub units: u64,
}

/// Why a size did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid size '{input}': {reason}")]
pub struct SizeError {
    pub input: String,
    pub reason: &'static str,
}

/// `llapi_parse_size(arg, &size, &units, bytes_spec)`: `default_units` applies to a bare
/// number; with `bytes_spec` a `b` suffix means bytes rather than 512-byte blocks.
pub fn parse_size(
    arg: &str,
    default_units: u64,
    bytes_spec: bool,
) -> Result<ParsedSize, SizeError> {
    let err = |reason| SizeError {
        input: arg.to_string(),
        reason,
    };
    if arg.starts_with('-') {
        return Err(err("negative sizes are not allowed"));
    }
    let mut units = if default_units == 0 { 1 } else { default_units };
    // strtoull with base 0: when no digit is read the value is 0 and parsing resumes at
    // the start of the argument, as in C (so "" is 0 and "k" is 0 KiB).
    let (whole, mut rest) = match c_prefix(arg, 0) {
        Some((false, v, rest)) => (v, rest),
        Some((true, ..)) => return Err(err("negative sizes are not allowed")),
        None if arg.trim_start().starts_with(|c: char| c.is_ascii_digit()) => {
            return Err(err("number too large"));
        }
        None => (0, arg),
    };
    let (mut frac, mut frac_div) = (0u64, 1u64);
    if let Some(f) = rest.strip_prefix('.') {
        let digits = f.bytes().take_while(u8::is_ascii_digit).count();
        for b in f[..digits].bytes() {
            // Extra decimal places beyond what fits only lose precision, as in C.
            if frac_div <= u64::MAX / 10 && frac <= (u64::MAX - 9) / 10 {
                frac = frac * 10 + u64::from(b - b'0');
                frac_div *= 10;
            }
        }
        rest = &f[digits..];
    }
    let mut chars = rest.chars();
    if let Some(unit) = chars.next() {
        let shift = match unit.to_ascii_lowercase() {
            'b' if bytes_spec => 0,
            'b' => 9,
            'c' => 0,
            'k' => 10,
            'm' => 20,
            'g' => 30,
            't' => 40,
            'p' => 50,
            'e' => 60,
            _ => return Err(err("unknown unit (use K, M, G, T, P or E)")),
        };
        if shift > 0 && whole >> (64 - shift) != 0 {
            return Err(err("too large"));
        }
        units = 1u64 << shift;
        // One more letter is tolerated when it is 'i' or 'B' ("MiB", "MB").
        if let Some(next) = chars.next()
            && !matches!(next.to_ascii_lowercase(), 'i' | 'b')
        {
            return Err(err("unknown unit (use K, M, G, T, P or E)"));
        }
    }
    let bytes = whole
        .checked_mul(units)
        .and_then(|v| {
            let f = u128::from(frac) * u128::from(units) / u128::from(frac_div);
            v.checked_add(u64::try_from(f).ok()?)
        })
        .ok_or_else(|| err("too large"))?;
    Ok(ParsedSize { bytes, units })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(s: &str) -> u64 {
        parse_size(s, 1, false).map(|p| p.bytes).unwrap_or(u64::MAX)
    }

    #[test]
    fn units_and_suffixes() {
        assert_eq!(bytes("4M"), 4 << 20);
        assert_eq!(bytes("4m"), 4 << 20);
        assert_eq!(bytes("4MB"), 4 << 20);
        assert_eq!(bytes("4MiB"), 4 << 20);
        assert_eq!(bytes("64k"), 65536);
        assert_eq!(bytes("1.5G"), 3 << 29);
        assert_eq!(bytes("0x100000"), 1 << 20);
        assert_eq!(bytes("8b"), 4096);
        assert_eq!(bytes("12c"), 12);
        assert_eq!(bytes("123"), 123);
        assert_eq!(bytes(""), 0);
        assert_eq!(
            parse_size("10", 512, false),
            Ok(ParsedSize {
                bytes: 5120,
                units: 512
            })
        );
        assert_eq!(
            parse_size("1M", 512, false),
            Ok(ParsedSize {
                bytes: 1 << 20,
                units: 1 << 20
            })
        );
        assert_eq!(parse_size("8b", 1, true).map(|p| p.bytes), Ok(8));
    }

    #[test]
    fn refusals() {
        assert!(parse_size("-1", 1, false).is_err());
        assert!(parse_size("4X", 1, false).is_err());
        assert!(parse_size("4Mx", 1, false).is_err());
        assert!(parse_size("17E", 1, false).is_err());
        assert!(parse_size("99999999999999999999", 1, false).is_err());
    }
}
