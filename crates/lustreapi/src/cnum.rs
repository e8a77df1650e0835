//! Numbers as the C library parses them on Lustre's command lines (`strtoul`/`strtol` with
//! base 0, `atoi`), so that `0x10`, `010` and `-1` mean what they mean to `lfs`.

/// Parses a whole argument as `strtol(s, &end, 0)` would, requiring `*end == '\0'` and at
/// least one digit. Leading blanks and a sign are accepted; `0x` selects hex and a leading
/// `0` octal. `None` on junk or on overflow of 64 bits (`ERANGE`).
pub(crate) fn parse_c_long(s: &str) -> Option<i64> {
    let (neg, mag, rest) = c_prefix(s, 0)?;
    if !rest.is_empty() {
        return None;
    }
    if neg {
        if mag > i64::MAX as u64 + 1 {
            return None;
        }
        Some((mag as i64).wrapping_neg())
    } else {
        i64::try_from(mag).ok()
    }
}

/// Like [`parse_c_long`] but with an explicit base (10 for `strtol(s, &end, 10)`).
pub(crate) fn parse_c_long_base(s: &str, base: u32) -> Option<i64> {
    let (neg, mag, rest) = c_prefix(s, base)?;
    if !rest.is_empty() {
        return None;
    }
    let v = i64::try_from(mag).ok()?;
    Some(if neg { -v } else { v })
}

/// `strtoul(s, &end, 0)` over the whole argument: a leading `-` negates modulo 2^64 as C
/// does, so `"-1"` is `u64::MAX`.
pub(crate) fn parse_c_ulong(s: &str) -> Option<u64> {
    let (neg, mag, rest) = c_prefix(s, 0)?;
    if !rest.is_empty() {
        return None;
    }
    Some(if neg { mag.wrapping_neg() } else { mag })
}

/// `atoi`: the leading decimal number, 0 when there is none; never fails.
pub(crate) fn atoi(s: &str) -> i64 {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let mut v: i64 = 0;
    for b in t.bytes().take_while(u8::is_ascii_digit) {
        v = v.saturating_mul(10).saturating_add(i64::from(b - b'0'));
    }
    if neg { -v } else { v }
}

/// The sign, magnitude and unparsed rest of a C integer prefix. `None` when no digit was
/// read or the magnitude overflows.
pub(crate) fn c_prefix(s: &str, base: u32) -> Option<(bool, u64, &str)> {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let b = t.as_bytes();
    let hex_prefix =
        b.len() > 2 && b[0] == b'0' && (b[1] == b'x' || b[1] == b'X') && b[2].is_ascii_hexdigit();
    let (radix, digits) = match base {
        0 if hex_prefix => (16, &t[2..]),
        0 if b.first() == Some(&b'0') => (8, t),
        0 => (10, t),
        16 if hex_prefix => (16, &t[2..]),
        r => (r, t),
    };
    let len = digits
        .bytes()
        .take_while(|c| char::from(*c).is_digit(radix))
        .count();
    if len == 0 {
        return None;
    }
    let mut v: u64 = 0;
    for c in digits[..len].chars() {
        let d = u64::from(c.to_digit(radix)?);
        v = v.checked_mul(u64::from(radix))?.checked_add(d)?;
    }
    Some((neg, v, &digits[len..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_strtol() {
        assert_eq!(parse_c_long("4"), Some(4));
        assert_eq!(parse_c_long(" -1"), Some(-1));
        assert_eq!(parse_c_long("0x10"), Some(16));
        assert_eq!(parse_c_long("010"), Some(8));
        assert_eq!(parse_c_long("0"), Some(0));
        assert_eq!(parse_c_long("+7"), Some(7));
        assert_eq!(parse_c_long(""), None);
        assert_eq!(parse_c_long("4x"), None);
        assert_eq!(parse_c_long("-"), None);
        assert_eq!(parse_c_long("08"), None);
        assert_eq!(parse_c_long("99999999999999999999"), None);
        assert_eq!(parse_c_long_base("010", 10), Some(10));
        assert_eq!(parse_c_ulong("-1"), Some(u64::MAX));
    }

    #[test]
    fn like_atoi() {
        assert_eq!(atoi("3abc"), 3);
        assert_eq!(atoi("crush"), 0);
        assert_eq!(atoi(" -2"), -2);
    }
}
