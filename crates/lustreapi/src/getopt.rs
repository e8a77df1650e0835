//! GNU `getopt_long` as Lustre's tools use it: short options with attached or separate
//! values (`-c4`, `-c 4`), optional values that must be attached (`-I2`, `--comp-id=2`),
//! long options with `=` or a separate value and unique-prefix abbreviation, operands
//! permuted after options (or kept in place when the option string starts with `-`), and
//! `getopt_long_only` (`lfs find -type f -name '*.c'`).

use crate::error::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HasArg {
    No,
    Required,
    /// Only an attached value counts: `-I2`, `--component-id=2`.
    Optional,
}

/// One entry of a `struct option` table.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LongOpt {
    pub name: &'static str,
    pub has_arg: HasArg,
    /// The short letter it stands for, or a private code (>= 256) for long-only options.
    pub val: u32,
}

pub(crate) const fn lo(name: &'static str, has_arg: HasArg, val: u32) -> LongOpt {
    LongOpt { name, has_arg, val }
}

/// What `getopt` is asked to accept.
pub(crate) struct OptSpec<'a> {
    /// The short option string without a leading `-`: `"c:dE:I::"`.
    pub short: &'a str,
    pub long: &'a [LongOpt],
    /// Operands are returned where they stand (a leading `-` in C's option string);
    /// otherwise they are collected after all options, as GNU permutation does.
    pub in_order: bool,
    /// `getopt_long_only`: `-name` is a long option.
    pub long_only: bool,
}

/// One parsed element of the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Parsed {
    Opt {
        val: u32,
        arg: Option<String>,
        /// The option as written (`-c`, `--stripe-count`), for messages.
        text: String,
    },
    Operand(String),
}

impl OptSpec<'_> {
    fn short_has_arg(&self, c: char) -> Option<HasArg> {
        if c == ':' || c == '-' {
            return None;
        }
        let it = self.short.char_indices();
        for (i, ch) in it {
            if ch == ':' {
                continue;
            }
            if ch == c {
                let rest = &self.short[i + ch.len_utf8()..];
                return Some(if rest.starts_with("::") {
                    HasArg::Optional
                } else if rest.starts_with(':') {
                    HasArg::Required
                } else {
                    HasArg::No
                });
            }
        }
        None
    }

    /// Exact match, else a unique prefix (candidates that differ only by name count as
    /// one, as in glibc).
    fn find_long(&self, cmd: &'static str, name: &str, text: &str) -> Result<Option<&LongOpt>> {
        if let Some(o) = self.long.iter().find(|o| o.name == name) {
            return Ok(Some(o));
        }
        let mut cands = self.long.iter().filter(|o| o.name.starts_with(name));
        let Some(first) = cands.next() else {
            return Ok(None);
        };
        for o in cands {
            if o.val != first.val || o.has_arg != first.has_arg {
                return Err(Error::usage(cmd, format!("option '{text}' is ambiguous")));
            }
        }
        Ok(Some(first))
    }
}

/// Parses `args` (without the command name) against `spec`.
pub(crate) fn getopt(cmd: &'static str, spec: &OptSpec, args: &[String]) -> Result<Vec<Parsed>> {
    let mut out = Vec::new();
    let mut operands = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if arg == "--" {
            operands.extend(args[i..].iter().cloned());
            break;
        }
        if let Some(body) = arg.strip_prefix("--") {
            let (name, value) = split_eq(body);
            let text = format!("--{name}");
            let Some(o) = spec.find_long(cmd, name, &text)? else {
                return Err(unrecognized(cmd, arg));
            };
            out.push(long_value(cmd, o, value, &text, args, &mut i)?);
            continue;
        }
        let Some(body) = arg.strip_prefix('-').filter(|b| !b.is_empty()) else {
            if spec.in_order {
                out.push(Parsed::Operand(arg.clone()));
            } else {
                operands.push(arg.clone());
            }
            continue;
        };
        let first = body.chars().next().unwrap_or('-');
        if spec.long_only && (body.chars().count() > 1 || spec.short_has_arg(first).is_none()) {
            let (name, value) = split_eq(body);
            let text = format!("-{name}");
            if let Some(o) = spec.find_long(cmd, name, &text)? {
                out.push(long_value(cmd, o, value, &text, args, &mut i)?);
                continue;
            }
            if spec.short_has_arg(first).is_none() {
                return Err(unrecognized(cmd, arg));
            }
        }
        // A cluster of short options: "-vy", "-c4", "-I2".
        for (pos, c) in body.char_indices() {
            let text = format!("-{c}");
            let Some(has_arg) = spec.short_has_arg(c) else {
                return Err(unrecognized(cmd, &text));
            };
            let rest = &body[pos + c.len_utf8()..];
            match has_arg {
                HasArg::No => out.push(Parsed::Opt {
                    val: u32::from(c),
                    arg: None,
                    text,
                }),
                HasArg::Required => {
                    let value = if !rest.is_empty() {
                        rest.to_string()
                    } else if i < args.len() {
                        i += 1;
                        args[i - 1].clone()
                    } else {
                        return Err(Error::usage(
                            cmd,
                            format!("option '{text}' requires an argument"),
                        ));
                    };
                    out.push(Parsed::Opt {
                        val: u32::from(c),
                        arg: Some(value),
                        text,
                    });
                    break;
                }
                HasArg::Optional => {
                    out.push(Parsed::Opt {
                        val: u32::from(c),
                        arg: (!rest.is_empty()).then(|| rest.to_string()),
                        text,
                    });
                    break;
                }
            }
        }
    }
    out.extend(operands.into_iter().map(Parsed::Operand));
    Ok(out)
}

fn split_eq(body: &str) -> (&str, Option<&str>) {
    match body.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (body, None),
    }
}

fn unrecognized(cmd: &'static str, arg: &str) -> Error {
    Error::usage(cmd, format!("unrecognized option '{arg}'"))
}

fn long_value(
    cmd: &'static str,
    o: &LongOpt,
    value: Option<&str>,
    text: &str,
    args: &[String],
    i: &mut usize,
) -> Result<Parsed> {
    let arg = match (o.has_arg, value) {
        (HasArg::No, Some(_)) => {
            return Err(Error::usage(
                cmd,
                format!("option '{text}' doesn't allow an argument"),
            ));
        }
        (HasArg::No, None) | (HasArg::Optional, None) => None,
        (_, Some(v)) => Some(v.to_string()),
        (HasArg::Required, None) => {
            if *i < args.len() {
                *i += 1;
                Some(args[*i - 1].clone())
            } else {
                return Err(Error::usage(
                    cmd,
                    format!("option '{text}' requires an argument"),
                ));
            }
        }
    };
    Ok(Parsed::Opt {
        val: o.val,
        arg,
        text: text.to_string(),
    })
}

/// Turns `&["-c", "4"]` into owned strings for the parsers.
pub(crate) fn owned<S: AsRef<str>>(args: &[S]) -> Vec<String> {
    args.iter().map(|s| s.as_ref().to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: &[LongOpt] = &[
        lo("stripe-count", HasArg::Required, 'c' as u32),
        lo("stripe_count", HasArg::Required, 'c' as u32),
        lo("component-id", HasArg::Optional, 'I' as u32),
        lo("component-add", HasArg::No, 300),
        lo("component-del", HasArg::No, 301),
        lo("name", HasArg::Required, 'n' as u32),
        lo("type", HasArg::Required, 't' as u32),
    ];

    fn run(short: &str, in_order: bool, long_only: bool, args: &[&str]) -> Result<Vec<Parsed>> {
        let spec = OptSpec {
            short,
            long: LONG,
            in_order,
            long_only,
        };
        getopt("lfs test", &spec, &owned(args))
    }

    fn opt(c: char, arg: Option<&str>, text: &str) -> Parsed {
        Parsed::Opt {
            val: c as u32,
            arg: arg.map(str::to_string),
            text: text.to_string(),
        }
    }

    #[test]
    fn short_forms() {
        let r = run(
            "c:vyI::",
            false,
            false,
            &["-c4", "f", "-vy", "-c", "5", "-I2", "-I"],
        );
        assert_eq!(
            r,
            Ok(vec![
                opt('c', Some("4"), "-c"),
                opt('v', None, "-v"),
                opt('y', None, "-y"),
                opt('c', Some("5"), "-c"),
                opt('I', Some("2"), "-I"),
                opt('I', None, "-I"),
                Parsed::Operand("f".into()),
            ])
        );
    }

    #[test]
    fn long_forms_and_prefixes() {
        let r = run(
            "c:",
            false,
            false,
            &[
                "--stripe-count=3",
                "--stripe-c",
                "2",
                "--component-a",
                "--",
                "-x",
            ],
        );
        assert_eq!(
            r,
            Ok(vec![
                Parsed::Opt {
                    val: 'c' as u32,
                    arg: Some("3".into()),
                    text: "--stripe-count".into()
                },
                Parsed::Opt {
                    val: 'c' as u32,
                    arg: Some("2".into()),
                    text: "--stripe-c".into()
                },
                Parsed::Opt {
                    val: 300,
                    arg: None,
                    text: "--component-a".into()
                },
                Parsed::Operand("-x".into()),
            ])
        );
        assert!(
            run("c:", false, false, &["--component"])
                .is_err_and(|e| e.to_string().contains("ambiguous"))
        );
        assert!(run("c:", false, false, &["--component-add=1"]).is_err());
        assert!(run("c:", false, false, &["--stripe-count"]).is_err());
        assert!(run("c:", false, false, &["-c"]).is_err());
        assert!(
            run("c:", false, false, &["-z"])
                .is_err_and(|e| e.to_string() == "lfs test: unrecognized option '-z'")
        );
        // The optional argument must be attached.
        let r = run("I::", true, false, &["--component-id", "2"]);
        assert_eq!(
            r,
            Ok(vec![
                Parsed::Opt {
                    val: 'I' as u32,
                    arg: None,
                    text: "--component-id".into()
                },
                Parsed::Operand("2".into()),
            ])
        );
    }

    #[test]
    fn long_only_and_in_order() {
        let r = run(
            "n:t:c:",
            true,
            true,
            &["dir", "-type", "f", "!", "-name", "*.c", "-c4", "-t", "d"],
        );
        assert_eq!(
            r,
            Ok(vec![
                Parsed::Operand("dir".into()),
                Parsed::Opt {
                    val: 't' as u32,
                    arg: Some("f".into()),
                    text: "-type".into()
                },
                Parsed::Operand("!".into()),
                Parsed::Opt {
                    val: 'n' as u32,
                    arg: Some("*.c".into()),
                    text: "-name".into()
                },
                opt('c', Some("4"), "-c"),
                opt('t', Some("d"), "-t"),
            ])
        );
    }
}
