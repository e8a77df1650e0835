//! Shell wildcard matching as `fnmatch(3)` and `glob(7)` define it: `*`, `?`, bracket
//! expressions with ranges, negation (`[!..]`, `[^..]`) and classes (`[[:digit:]]`), and
//! backslash escapes. Used for `lfs find -name` and `lctl` parameter names.

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Byte(u8),
    Any,
    Star,
    Set { negated: bool, items: Vec<SetItem> },
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum SetItem {
    Byte(u8),
    Range(u8, u8),
    Class(CharClass),
}

/// The `[:name:]` classes of the C locale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CharClass {
    Alnum,
    Alpha,
    Blank,
    Cntrl,
    Digit,
    Graph,
    Lower,
    Print,
    Punct,
    Space,
    Upper,
    Xdigit,
}

impl CharClass {
    fn parse(name: &[u8]) -> Option<CharClass> {
        Some(match name {
            b"alnum" => CharClass::Alnum,
            b"alpha" => CharClass::Alpha,
            b"blank" => CharClass::Blank,
            b"cntrl" => CharClass::Cntrl,
            b"digit" => CharClass::Digit,
            b"graph" => CharClass::Graph,
            b"lower" => CharClass::Lower,
            b"print" => CharClass::Print,
            b"punct" => CharClass::Punct,
            b"space" => CharClass::Space,
            b"upper" => CharClass::Upper,
            b"xdigit" => CharClass::Xdigit,
            _ => return None,
        })
    }

    fn contains(self, c: u8) -> bool {
        match self {
            CharClass::Alnum => c.is_ascii_alphanumeric(),
            CharClass::Alpha => c.is_ascii_alphabetic(),
            CharClass::Blank => c == b' ' || c == b'\t',
            CharClass::Cntrl => c.is_ascii_control(),
            CharClass::Digit => c.is_ascii_digit(),
            CharClass::Graph => c.is_ascii_graphic(),
            CharClass::Lower => c.is_ascii_lowercase(),
            CharClass::Print => c.is_ascii_graphic() || c == b' ',
            CharClass::Punct => c.is_ascii_punctuation(),
            CharClass::Space => c.is_ascii_whitespace() || c == 0x0b,
            CharClass::Upper => c.is_ascii_uppercase(),
            CharClass::Xdigit => c.is_ascii_hexdigit(),
        }
    }
}

/// Parses a bracket expression starting after `[`; `None` when it is not closed, in
/// which case the `[` is an ordinary character.
fn parse_set(p: &[u8]) -> Option<(Token, usize)> {
    let mut i = 0;
    let negated = matches!(p.first(), Some(b'!') | Some(b'^'));
    if negated {
        i += 1;
    }
    let mut items = Vec::new();
    let mut first = true;
    loop {
        let c = *p.get(i)?;
        if c == b']' && !first {
            return Some((Token::Set { negated, items }, i + 1));
        }
        first = false;
        if c == b'['
            && p.get(i + 1) == Some(&b':')
            && let Some(end) = p[i + 2..].windows(2).position(|w| w == b":]")
            && let Some(f) = CharClass::parse(&p[i + 2..i + 2 + end])
        {
            items.push(SetItem::Class(f));
            i += end + 4;
            continue;
        }
        let (lo, next) = if c == b'\\' {
            (*p.get(i + 1)?, i + 2)
        } else {
            (c, i + 1)
        };
        if p.get(next) == Some(&b'-') && p.get(next + 1).is_some_and(|&c| c != b']') {
            let (hi, after) = if p[next + 1] == b'\\' {
                (*p.get(next + 2)?, next + 3)
            } else {
                (p[next + 1], next + 2)
            };
            items.push(SetItem::Range(lo, hi));
            i = after;
        } else {
            items.push(SetItem::Byte(lo));
            i = next;
        }
    }
}

fn tokenize(p: &[u8]) -> Vec<Token> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            b'*' => {
                if out.last() != Some(&Token::Star) {
                    out.push(Token::Star);
                }
                i += 1;
            }
            b'?' => {
                out.push(Token::Any);
                i += 1;
            }
            b'[' => match parse_set(&p[i + 1..]) {
                Some((t, used)) => {
                    out.push(t);
                    i += 1 + used;
                }
                None => {
                    out.push(Token::Byte(b'['));
                    i += 1;
                }
            },
            b'\\' if i + 1 < p.len() => {
                out.push(Token::Byte(p[i + 1]));
                i += 2;
            }
            c => {
                out.push(Token::Byte(c));
                i += 1;
            }
        }
    }
    out
}

fn single(t: &Token, c: u8) -> bool {
    match t {
        Token::Byte(b) => *b == c,
        Token::Any => true,
        Token::Star => false,
        Token::Set { negated, items } => {
            let hit = items.iter().any(|it| match it {
                SetItem::Byte(b) => *b == c,
                SetItem::Range(lo, hi) => *lo <= c && c <= *hi,
                SetItem::Class(f) => f.contains(c),
            });
            hit != *negated
        }
    }
}

/// A compiled wildcard pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wildcard {
    tokens: Vec<Token>,
    source: String,
}

impl Wildcard {
    pub fn new(pattern: &str) -> Wildcard {
        Wildcard {
            tokens: tokenize(pattern.as_bytes()),
            source: pattern.to_string(),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether the pattern has any wildcard, i.e. can match more than one name.
    pub fn has_wildcards(&self) -> bool {
        self.tokens.iter().any(|t| !matches!(t, Token::Byte(_)))
    }

    /// `fnmatch(pattern, name, 0)`.
    pub fn matches(&self, name: &str) -> bool {
        self.matches_bytes(name.as_bytes(), false)
    }

    /// With `period`, a leading `.` must be matched literally (`glob` without
    /// `GLOB_PERIOD`, `FNM_PERIOD`).
    pub fn matches_bytes(&self, s: &[u8], period: bool) -> bool {
        if period && s.first() == Some(&b'.') && self.tokens.first() != Some(&Token::Byte(b'.')) {
            return false;
        }
        let t = &self.tokens;
        let (mut ti, mut si) = (0, 0);
        let mut backtrack: Option<(usize, usize)> = None;
        while si < s.len() {
            if ti < t.len() && t[ti] == Token::Star {
                backtrack = Some((ti, si));
                ti += 1;
            } else if ti < t.len() && single(&t[ti], s[si]) {
                ti += 1;
                si += 1;
            } else if let Some((bt, bs)) = backtrack {
                // Let the last '*' swallow one more byte and retry.
                ti = bt + 1;
                si = bs + 1;
                backtrack = Some((bt, bs + 1));
            } else {
                return false;
            }
        }
        t[ti..].iter().all(|t| *t == Token::Star)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, s: &str) -> bool {
        Wildcard::new(p).matches(s)
    }

    #[test]
    fn fnmatch_semantics() {
        assert!(m("*.c", "foo.c"));
        assert!(m("*.c", ".c"));
        assert!(!m("*.c", "foo.h"));
        assert!(m("f?o", "foo"));
        assert!(!m("f?o", "fo"));
        assert!(m("OST000?", "OST0003"));
        assert!(m("OST000[0-3]", "OST0002"));
        assert!(!m("OST000[0-3]", "OST0004"));
        assert!(m("[!a]*", "bcd"));
        assert!(m("[^a]*", "bcd"));
        assert!(!m("[!a]*", "abc"));
        assert!(m("[[:digit:]]x", "5x"));
        assert!(m("[]]", "]"));
        assert!(m("a\\*", "a*"));
        assert!(!m("a\\*", "ab"));
        assert!(m("[", "["));
        assert!(m("a*b*c", "aXbYbZc"));
        assert!(!m("a*b*c", "aXbYbZ"));
        assert!(m("*", ""));
        assert!(!m("?", ""));
        assert!(m("dom_*", "dom_stripesize"));
        assert!(!Wildcard::new("*").matches_bytes(b".hidden", true));
        assert!(Wildcard::new(".h*").matches_bytes(b".hidden", true));
    }
}
