//! Sizes as Lustre's tools write them: `1M`, `64k`, `4G`, `-1`/`eof`, plain bytes.

/// Why a size did not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid size '{input}': {reason}")]
pub struct ParseSizeError {
    pub input: String,
    pub reason: &'static str,
}

/// Parses `N[KMGTPE]` (binary multiples, either case, optional trailing `B`/`iB`).
pub fn parse_size(s: &str) -> Result<u64, ParseSizeError> {
    let err = |reason| ParseSizeError {
        input: s.to_string(),
        reason,
    };
    let t = s.trim();
    if t.is_empty() {
        return Err(err("empty"));
    }
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    if digits_end == 0 {
        return Err(err("must start with a number"));
    }
    let n: u64 = t[..digits_end]
        .parse()
        .map_err(|_| err("number too large"))?;
    let suffix = t[digits_end..].to_ascii_lowercase();
    let suffix = suffix
        .strip_suffix("ib")
        .or_else(|| suffix.strip_suffix('b'))
        .unwrap_or(&suffix);
    let shift = match suffix {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        "p" => 50,
        "e" => 60,
        _ => return Err(err("unknown unit (use K, M, G, T, P or E)")),
    };
    n.checked_mul(1u64 << shift).ok_or_else(|| err("too large"))
}

/// Parses a component end: a size, or `-1`/`eof`/`EOF` for end of file (`u64::MAX`).
pub fn parse_extent_end(s: &str) -> Result<u64, ParseSizeError> {
    match s.trim() {
        "-1" | "eof" | "EOF" => Ok(u64::MAX),
        other => parse_size(other),
    }
}

/// Formats bytes as `lfs df -h` does: base 2, one decimal, unit letter.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 7] = ["", "K", "M", "G", "T", "P", "E"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes}")
    } else {
        format!("{v:.1}{}", UNITS[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("64k"), Ok(65536));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("4MiB"), Ok(4 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert!(parse_size("").is_err());
        assert!(parse_size("M").is_err());
        assert!(parse_size("3X").is_err());
        assert!(parse_size("99999999999E").is_err());
    }

    #[test]
    fn extent_ends() {
        assert_eq!(parse_extent_end("-1"), Ok(u64::MAX));
        assert_eq!(parse_extent_end("eof"), Ok(u64::MAX));
        assert_eq!(parse_extent_end("1M"), Ok(1 << 20));
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(512), "512");
        assert_eq!(human(1536), "1.5K");
        assert_eq!(human(13 << 30), "13.0G");
    }
}
