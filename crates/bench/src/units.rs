//! Sizes as the tools spell them: `1m`, `264M`, `10g`, `47008` (binary multiples, as IOR and
//! the PaF nomenclature use them), and the human-readable forms reports print.

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;
pub const TIB: u64 = 1 << 40;

/// Parses a size with an optional binary suffix (`k`, `m`, `g`, `t`, `p`, any case, optionally
/// followed by `b` or `ib`). A bare number is bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    if digits_end == 0 {
        return Err(format!("invalid size {s:?}: expected a number"));
    }
    let n: u64 = t[..digits_end]
        .parse()
        .map_err(|_| format!("invalid size {s:?}: number too large"))?;
    let suffix = t[digits_end..].to_ascii_lowercase();
    let mult = match suffix.as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => KIB,
        "m" | "mb" | "mib" => MIB,
        "g" | "gb" | "gib" => GIB,
        "t" | "tb" | "tib" => TIB,
        "p" | "pb" | "pib" => TIB * KIB,
        _ => return Err(format!("invalid size {s:?}: unknown suffix {suffix:?}")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("invalid size {s:?}: too large"))
}

/// A clap value parser for sizes.
pub fn size_arg(s: &str) -> Result<u64, String> {
    parse_size(s)
}

/// Parses a comma-separated list of sizes (`1m,2m,4m`).
pub fn parse_size_list(s: &str) -> Result<Vec<u64>, String> {
    s.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(parse_size)
        .collect()
}

/// IOR's HumanReadable(…, BASE_TWO): whole units print without decimals (`1 MiB`), others
/// with two (`1.50 MiB`).
pub fn ior_human(v: u64) -> String {
    for (unit, name) in [(TIB, "TiB"), (GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")] {
        if v >= unit {
            return if v.is_multiple_of(unit) {
                format!("{} {name}", v / unit)
            } else {
                format!("{:.2} {name}", v as f64 / unit as f64)
            };
        }
    }
    format!("{v} bytes")
}

/// A size that parses back to itself: with the largest binary unit it is a whole multiple
/// of (`264M`), else in bytes (`639849`); [`short_size`] would round that to `624.9K`.
pub fn exact_size(v: u64) -> String {
    for (unit, name) in [(TIB, "T"), (GIB, "G"), (MIB, "M"), (KIB, "K")] {
        if v >= unit && v.is_multiple_of(unit) {
            return format!("{}{name}", v / unit);
        }
    }
    v.to_string()
}

/// A compact size for tables: `264M`, `1.5G`, `47008`.
pub fn short_size(v: u64) -> String {
    for (unit, name) in [(TIB, "T"), (GIB, "G"), (MIB, "M"), (KIB, "K")] {
        if v >= unit {
            return if v.is_multiple_of(unit) {
                format!("{}{name}", v / unit)
            } else {
                format!("{:.1}{name}", v as f64 / unit as f64)
            };
        }
    }
    v.to_string()
}

/// A size with one decimal and a binary unit: `22.6 TiB`.
pub fn human_bytes(v: f64) -> String {
    let mut x = v;
    for name in ["B", "KiB", "MiB", "GiB", "TiB", "PiB"] {
        if x.abs() < 1024.0 || name == "PiB" {
            return if name == "B" {
                format!("{x:.0} {name}")
            } else {
                format!("{x:.1} {name}")
            };
        }
        x /= 1024.0;
    }
    format!("{v:.0} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1m"), Ok(MIB));
        assert_eq!(parse_size("264M"), Ok(264 * MIB));
        assert_eq!(parse_size("10g"), Ok(10 * GIB));
        assert_eq!(parse_size("47008"), Ok(47008));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert!(parse_size("m").is_err());
        assert!(parse_size("1x").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        assert_eq!(
            parse_size_list("1m,2m,64m"),
            Ok(vec![MIB, 2 * MIB, 64 * MIB])
        );
    }

    #[test]
    fn human() {
        assert_eq!(ior_human(MIB), "1 MiB");
        assert_eq!(ior_human(16 * MIB), "16 MiB");
        assert_eq!(ior_human(3 * MIB / 2), "1.50 MiB");
        assert_eq!(ior_human(47008), "45.91 KiB");
        assert_eq!(short_size(264 * MIB), "264M");
        assert_eq!(human_bytes(1536.0), "1.5 KiB");
    }

    #[test]
    fn exact_sizes_parse_back() {
        for v in [1, 1023, 1024, 639_849, 264 * MIB, 3 * GIB + 1, 5 * TIB] {
            assert_eq!(parse_size(&exact_size(v)), Ok(v), "{}", exact_size(v));
        }
        assert_eq!(exact_size(264 * MIB), "264M");
    }
}
