//! The PaF nomenclature.
//!
//! ```text
//! PAF:70.30@264M<24253639848                   one generation: fill to 70 % of capacity with
//!                                              264 MiB files, then remove 30 % of them
//! PAF:70.30,20.40@264M<24253639848             generations run in order, each populating
//!                                              then fragmenting
//! PAF:70.30,20.40:67005@264M,40M<24253639848   seed 67005 makes the run repeatable; sizes
//!                                              pair with generations in order
//! ```
//!
//! Grammar: `PAF:` (any case, blanks allowed around the colon), one or more `CAP.FRAG`
//! generations separated by commas (whole percentages 0–100), an optional `:SEED`, an optional
//! `@SIZE[,SIZE…]` (binary suffixes K, M, G, T; fewer sizes than generations repeat the last)
//! and an optional `<N`, the free 1K-blocks the capacity refers to (statfs when omitted).
//! Short labels such as `PaF:10.00` parse too; running one needs a size.
//! Errors carry the byte offset of the offending character and render with a caret.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::units::{GIB, KIB, MIB, TIB};

/// One generation: populate to `capacity_pct` of the capacity, then remove `frag_pct` of the
/// files this generation wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generation {
    pub capacity_pct: u32,
    pub frag_pct: u32,
}

/// A parsed PaF specification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PafSpec {
    pub generations: Vec<Generation>,
    /// Seed for a deterministic run; `None` means a fresh random seed per run.
    pub seed: Option<u64>,
    /// File sizes in bytes, as written (may be shorter than `generations`).
    pub sizes: Vec<u64>,
    /// Capacity in free 1K-blocks; `None` means "read statfs".
    pub capacity_kb: Option<u64>,
}

/// A malformed specification, pointing at the offending character.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    pub spec: String,
    /// Byte offset of the offending character (may equal `spec.len()` for "ended early").
    pub pos: usize,
    pub msg: String,
}

impl SpecError {
    /// 1-based column of the offending character.
    pub fn column(&self) -> usize {
        self.spec[..self.pos.min(self.spec.len())].chars().count() + 1
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "invalid PaF spec at column {}: {}",
            self.column(),
            self.msg
        )?;
        writeln!(f, "  {}", self.spec)?;
        write!(f, "  {}^", " ".repeat(self.column() - 1))
    }
}

impl std::error::Error for SpecError {}

struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
}

impl<'a> Parser<'a> {
    fn err<T>(&self, pos: usize, msg: impl Into<String>) -> Result<T, SpecError> {
        Err(SpecError {
            spec: self.s.to_string(),
            pos,
            msg: msg.into(),
        })
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(b' ') | Some(b'\t')) {
            self.i += 1;
        }
    }

    fn describe_here(&self) -> String {
        match self.s[self.i..].chars().next() {
            Some(c) => format!("{c:?}"),
            None => "end of spec".to_string(),
        }
    }

    fn number(&mut self, what: &str) -> Result<(u64, usize), SpecError> {
        let start = self.i;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        if self.i == start {
            return self.err(
                start,
                format!("expected {what} (digits), found {}", self.describe_here()),
            );
        }
        match self.s[start..self.i].parse::<u64>() {
            Ok(v) => Ok((v, start)),
            Err(_) => self.err(start, format!("{what} is too large")),
        }
    }

    fn expect(&mut self, c: u8, what: &str) -> Result<(), SpecError> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            self.err(
                self.i,
                format!("expected {what}, found {}", self.describe_here()),
            )
        }
    }

    fn percent(&mut self, what: &str) -> Result<u32, SpecError> {
        let (v, at) = self.number(what)?;
        if v > 100 {
            return self.err(at, format!("{what} {v} is over 100%"));
        }
        Ok(v as u32)
    }

    fn size(&mut self) -> Result<u64, SpecError> {
        let (v, at) = self.number("a file size")?;
        let mult = match self.peek() {
            Some(b'k' | b'K') => KIB,
            Some(b'm' | b'M') => MIB,
            Some(b'g' | b'G') => GIB,
            Some(b't' | b'T') => TIB,
            _ => 1,
        };
        if mult != 1 {
            self.i += 1;
            // Accept "MiB" and "MB" spellings of the unit.
            if matches!(self.peek(), Some(b'i')) && matches!(self.b.get(self.i + 1), Some(b'B')) {
                self.i += 2;
            } else if matches!(self.peek(), Some(b'B' | b'b')) {
                self.i += 1;
            }
        }
        if v == 0 {
            return self.err(at, "file size must be greater than 0");
        }
        v.checked_mul(mult)
            .map_or_else(|| self.err(at, "file size is too large"), Ok)
    }
}

impl PafSpec {
    /// Parses a specification.
    pub fn parse(spec: &str) -> Result<PafSpec, SpecError> {
        let mut p = Parser {
            s: spec,
            b: spec.as_bytes(),
            i: 0,
        };
        p.skip_blanks();
        let head = p.i;
        if !spec
            .get(head..head + 3)
            .is_some_and(|h| h.eq_ignore_ascii_case("paf"))
        {
            return p.err(head, "a PaF spec starts with \"PAF:\"");
        }
        p.i += 3;
        p.skip_blanks();
        p.expect(b':', "':' after \"PAF\"")?;
        p.skip_blanks();

        let mut generations = Vec::new();
        let mut starts = Vec::new();
        loop {
            starts.push(p.i);
            let capacity_pct = p.percent("a capacity percentage")?;
            p.expect(b'.', "'.' between capacity and fragmentation (as in 70.30)")?;
            let frag_pct = p.percent("a fragmentation percentage")?;
            generations.push(Generation {
                capacity_pct,
                frag_pct,
            });
            if p.peek() == Some(b',') {
                p.i += 1;
                continue;
            }
            break;
        }
        // The generations share the capacity: together they cannot fill more than all of it.
        let mut total = 0u32;
        for (g, at) in generations.iter().zip(&starts) {
            total += g.capacity_pct;
            if total > 100 {
                return p.err(
                    *at,
                    format!("generations fill {total}% of the capacity, more than 100%"),
                );
            }
        }

        let mut seed = None;
        if p.peek() == Some(b':') {
            p.i += 1;
            let (v, _) = p.number("a seed")?;
            seed = Some(v);
        }

        let mut sizes = Vec::new();
        if p.peek() == Some(b'@') {
            p.i += 1;
            loop {
                let at = p.i;
                sizes.push(p.size()?);
                if sizes.len() > generations.len() {
                    return p.err(
                        at,
                        format!(
                            "{} sizes for {} generation(s): sizes pair with generations",
                            sizes.len(),
                            generations.len()
                        ),
                    );
                }
                if p.peek() == Some(b',') {
                    p.i += 1;
                    continue;
                }
                break;
            }
        }

        let mut capacity_kb = None;
        if p.peek() == Some(b'<') {
            p.i += 1;
            let (v, at) = p.number("the capacity in free 1K-blocks")?;
            if v == 0 {
                return p.err(at, "the capacity must be greater than 0");
            }
            capacity_kb = Some(v);
        }
        p.skip_blanks();
        if p.i < spec.len() {
            let expected = if sizes.is_empty() && capacity_kb.is_none() {
                "',' (next generation), ':SEED', '@SIZE' or '<N'"
            } else if capacity_kb.is_none() {
                "',' (next size) or '<N'"
            } else {
                "the end of the spec"
            };
            return p.err(
                p.i,
                format!("unexpected {}; expected {expected}", p.describe_here()),
            );
        }
        Ok(PafSpec {
            generations,
            seed,
            sizes,
            capacity_kb,
        })
    }

    /// The file size of generation `g` (0-based): sizes pair with generations, and the last
    /// size repeats. `None` when the spec has no size.
    pub fn size_of(&self, g: usize) -> Option<u64> {
        self.sizes.get(g).or(self.sizes.last()).copied()
    }

    /// Deterministic when a seed is given.
    pub fn is_deterministic(&self) -> bool {
        self.seed.is_some()
    }

    /// Homogeneous when every generation uses the same file size.
    pub fn is_homogeneous(&self) -> bool {
        self.sizes.windows(2).all(|w| w[0] == w[1])
    }

    /// The seed's own words for this kind of spec ("Gen-N, Deterministic Heterogeneous").
    pub fn kind(&self) -> String {
        format!(
            "Gen-{}, {} {}",
            if self.generations.len() == 1 {
                "1".to_string()
            } else {
                "N".to_string()
            },
            if self.is_deterministic() {
                "Deterministic"
            } else {
                "Non-Deterministic"
            },
            if self.is_homogeneous() {
                "Homogenous"
            } else {
                "Heterogeneous"
            }
        )
    }
}

impl fmt::Display for PafSpec {
    /// The canonical spelling: `PAF:70.30,20.40:67005@264M,40M<24253639848`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PAF:")?;
        for (i, g) in self.generations.iter().enumerate() {
            if i > 0 {
                write!(f, ",")?;
            }
            write!(f, "{:02}.{:02}", g.capacity_pct, g.frag_pct)?;
        }
        if let Some(s) = self.seed {
            write!(f, ":{s}")?;
        }
        for (i, s) in self.sizes.iter().enumerate() {
            write!(
                f,
                "{}{}",
                if i == 0 { "@" } else { "," },
                crate::units::exact_size(*s)
            )?;
        }
        if let Some(n) = self.capacity_kb {
            write!(f, "<{n}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_canonical_spelling_parses_back_to_the_same_spec() {
        // Found by fuzzing: a size that is no whole number of KiB printed as "624.9K".
        for text in [
            "PAF:70.32,20.40:67005@639849",
            "PAF:70.30,20.40:67005@264M,40M<24253639848",
            "PAF:10.10,20.20@1K,1025",
        ] {
            let spec = PafSpec::parse(text).expect(text);
            let printed = spec.to_string();
            assert_eq!(
                PafSpec::parse(&printed),
                Ok(spec),
                "{text} printed as {printed}"
            );
        }
    }

    fn gens(v: &[(u32, u32)]) -> Vec<Generation> {
        v.iter()
            .map(|&(c, f)| Generation {
                capacity_pct: c,
                frag_pct: f,
            })
            .collect()
    }

    /// Every complete spec in the PaF seed (000_c11a0f18d0eb0111.txt).
    #[test]
    fn seed_examples_parse() {
        let s = PafSpec::parse("PAF: 70.30@264M<24253639848").expect("with blank");
        assert_eq!(s.generations, gens(&[(70, 30)]));
        assert_eq!(s.sizes, vec![264 * MIB]);
        assert_eq!(s.capacity_kb, Some(24_253_639_848));
        assert_eq!(s.seed, None);
        assert_eq!(s.kind(), "Gen-1, Non-Deterministic Homogenous");

        let s = PafSpec::parse("PAF:70.30@264M<24253639848").expect("gen-1");
        assert_eq!(s.generations, gens(&[(70, 30)]));

        let s = PafSpec::parse("PAF:70.30,20.40@264M<24253639848").expect("gen-n");
        assert_eq!(s.generations, gens(&[(70, 30), (20, 40)]));
        assert_eq!(s.size_of(1), Some(264 * MIB));
        assert_eq!(s.kind(), "Gen-N, Non-Deterministic Homogenous");

        let s = PafSpec::parse("PAF:70.30,20.40:67005@264M,40M<24253639848").expect("complex");
        assert_eq!(s.generations, gens(&[(70, 30), (20, 40)]));
        assert_eq!(s.seed, Some(67005));
        assert_eq!(s.sizes, vec![264 * MIB, 40 * MIB]);
        assert_eq!(s.size_of(0), Some(264 * MIB));
        assert_eq!(s.size_of(1), Some(40 * MIB));
        assert_eq!(s.kind(), "Gen-N, Deterministic Heterogeneous");
        assert_eq!(s.to_string(), "PAF:70.30,20.40:67005@264M,40M<24253639848");

        // Series 2's concrete levels and the table labels.
        let s = PafSpec::parse("PAF: 20.10@33M<24253639848").expect("series 2");
        assert_eq!(s.sizes, vec![33 * MIB]);
        for label in ["PAF:10.00", "PAF:80.00", "PaF:00.00", "PaF:10.10"] {
            let s = PafSpec::parse(label).expect(label);
            assert!(s.sizes.is_empty() && s.capacity_kb.is_none(), "{label}");
        }
    }

    /// The seed's templates (`AA.BB`, `20.AA`, `XX.00`) are not specs: the error points at the
    /// placeholder.
    #[test]
    fn seed_templates_point_at_placeholder() {
        for (spec, col) in [
            ("PAF:AA.BB@264M<24253639848", 5),
            ("PAF: AA.BB@264M<24253639848", 6),
            ("PAF: 20.AA@33M<24253639848", 9),
            ("PAF:20.AA@264M<24253639848", 8),
            ("PaF:XX.00", 5),
            ("PaF:AA.BB (AA:10->80, BB:00->70)", 5),
        ] {
            let e = PafSpec::parse(spec).expect_err(spec);
            assert_eq!(e.column(), col, "{spec}: {e}");
            let text = e.to_string();
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), 3, "{text}");
            assert_eq!(lines[1], format!("  {spec}"));
            assert_eq!(lines[2].find('^'), Some(col + 1), "{text}");
        }
        let e = PafSpec::parse("PAF: Populate and Fragment 24253639848 K blocks free")
            .expect_err("prose");
        assert_eq!(e.column(), 6);
    }

    #[test]
    fn bad_specs_point_at_the_character() {
        let cases = [
            ("PAF70.30@264M", 4, "':'"),
            ("XAF:70.30@264M", 1, "starts with"),
            ("PAF:70.3x@264M", 9, "unexpected 'x'"),
            ("PAF:70-30@264M", 7, "'.'"),
            ("PAF:170.30@264M", 5, "over 100%"),
            ("PAF:70.130@264M", 8, "over 100%"),
            ("PAF:70.30,40.10@264M", 11, "more than 100%"),
            ("PAF:70.30@264Q", 14, "unexpected 'Q'"),
            ("PAF:70.30@0M", 11, "greater than 0"),
            ("PAF:70.30@264M,40M", 16, "2 sizes for 1 generation"),
            ("PAF:70.30:@264M", 11, "a seed"),
            ("PAF:70.30@264M<", 16, "capacity"),
            ("PAF:70.30@264M<12x", 18, "end of the spec"),
            ("PAF:", 5, "capacity percentage"),
        ];
        for (spec, col, needle) in cases {
            let e = PafSpec::parse(spec).expect_err(spec);
            assert_eq!(e.column(), col, "{spec}: {e}");
            assert!(e.to_string().contains(needle), "{spec}: {e}");
        }
    }

    #[test]
    fn sizes_and_units() {
        let s = PafSpec::parse("paf:10.00,10.00,10.00@4K,1MiB,2GB<1000").expect("units");
        assert_eq!(s.sizes, vec![4096, MIB, 2 * GIB]);
        let s = PafSpec::parse("PAF:50.00:7@123<1000").expect("bytes");
        assert_eq!(s.sizes, vec![123]);
        assert_eq!(s.seed, Some(7));
        assert_eq!(PafSpec::parse("PAF:50.00").expect("label").size_of(0), None);
    }
}
