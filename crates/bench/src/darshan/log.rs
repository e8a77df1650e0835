//! Reading Darshan logs: the helper in `crates/bench/python/darshan_records.py`, built into
//! the binary, runs under Python with the `darshan` package (PyDarshan over libdarshan-util)
//! and streams one JSON line per file record; this side keeps two numbers per file.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde::Deserialize;

use super::population::FileRecord;
use crate::error::{BenchError, Result};

/// The helper's source, fed to the interpreter on stdin so the binary works from anywhere.
pub const HELPER: &str = include_str!("../../python/darshan_records.py");
/// The interpreter (default `python3`); a virtualenv's python works too.
pub const PYTHON_ENV: &str = "NACRE_PYTHON";
/// Prefix of a LOG argument naming a log shipped with the darshan package.
pub const SAMPLE_PREFIX: &str = "sample:";
/// File records kept from all logs together (16 bytes each, so 64 MiB): a job of Intrepid's
/// logs touches at most some hundred thousand files, and more is a population to scale, not
/// to hold.
pub const MAX_LOG_RECORDS: usize = 4 << 20;
/// Longest line the helper prints (a header carries the executable's command line, which
/// Darshan keeps under 4 KiB).
const MAX_LINE: u64 = 64 << 10;
/// Helper error output kept for the message.
const MAX_STDERR: u64 = 16 << 10;

/// One log's header line.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub struct LogInfo {
    pub log: PathBuf,
    pub version: String,
    pub exe: String,
    pub nprocs: u64,
    pub files: u64,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Line {
    Header(LogInfo),
    File {
        size_at_open: u64,
        bytes_written: u64,
    },
}

/// What the logs hold.
#[derive(Debug, Clone, Default)]
pub struct LogRecords {
    pub logs: Vec<LogInfo>,
    pub records: Vec<FileRecord>,
}

fn python() -> String {
    std::env::var(PYTHON_ENV).unwrap_or_else(|_| "python3".into())
}

fn missing_package_hint(code: Option<i32>) -> &'static str {
    // The helper exits 3 when `import darshan` fails.
    if code == Some(3) {
        "; install it with scripts/install-deps.sh (pip install darshan), or point NACRE_PYTHON \
         at a Python that has it"
    } else {
        ""
    }
}

fn helper(args: &[&std::ffi::OsStr]) -> Result<std::process::Child> {
    let py = python();
    let mut child = Command::new(&py)
        .arg("-")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            BenchError::DarshanLog(format!(
                "cannot run {py} ({e}): Python 3 with the darshan package reads the logs; set \
                 {PYTHON_ENV} to its interpreter"
            ))
        })?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| BenchError::DarshanLog("no stdin to the helper".into()))?;
    stdin
        .write_all(HELPER.as_bytes())
        .map_err(|e| BenchError::DarshanLog(format!("feeding the helper to {py}: {e}")))?;
    drop(stdin);
    Ok(child)
}

/// Collects the helper's error output on a thread, so a full pipe cannot stall it.
fn stderr_of(child: &mut std::process::Child) -> std::thread::JoinHandle<String> {
    let err = child.stderr.take();
    std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(e) = err {
            let _ = e.take(MAX_STDERR).read_to_string(&mut s);
        }
        s.trim().to_string()
    })
}

fn finish(mut child: std::process::Child, err: std::thread::JoinHandle<String>) -> Result<()> {
    let status = child
        .wait()
        .map_err(|e| BenchError::DarshanLog(format!("waiting for the helper: {e}")))?;
    let msg = err.join().unwrap_or_default();
    if status.success() {
        return Ok(());
    }
    Err(BenchError::DarshanLog(format!(
        "{}{}",
        if msg.is_empty() {
            format!("the helper failed ({status})")
        } else {
            msg
        },
        missing_package_hint(status.code())
    )))
}

/// The path of a log shipped with the darshan package (`sample:NAME`), or `arg` itself.
pub fn resolve(arg: &str) -> Result<PathBuf> {
    let Some(name) = arg.strip_prefix(SAMPLE_PREFIX) else {
        return Ok(PathBuf::from(arg));
    };
    let mut child = helper(&["--locate".as_ref(), name.as_ref()])?;
    let err = stderr_of(&mut child);
    let mut out = String::new();
    if let Some(o) = child.stdout.take() {
        o.take(MAX_LINE)
            .read_to_string(&mut out)
            .map_err(|e| BenchError::DarshanLog(format!("reading the helper: {e}")))?;
    }
    finish(child, err)?;
    Ok(PathBuf::from(out.trim()))
}

/// Reads every POSIX file record of `logs`.
pub fn read(logs: &[PathBuf]) -> Result<LogRecords> {
    if logs.is_empty() {
        return Err(BenchError::Usage("give at least one Darshan log".into()));
    }
    let args: Vec<&std::ffi::OsStr> = logs.iter().map(|p| p.as_os_str()).collect();
    let mut child = helper(&args)?;
    let err = stderr_of(&mut child);
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| BenchError::DarshanLog("no stdout from the helper".into()))?;
    let parsed = parse(BufReader::new(stdout));
    if parsed.is_err() {
        // Stop a helper still printing; its exit status is no longer the story.
        let _ = child.kill();
    }
    let done = finish(child, err);
    let out = parsed?;
    done?;
    Ok(out)
}

/// Parses the helper's JSON lines.
pub fn parse(mut r: impl BufRead) -> Result<LogRecords> {
    let mut out = LogRecords::default();
    let mut buf = Vec::new();
    let mut line_no = 0u64;
    loop {
        buf.clear();
        let n = (&mut r)
            .take(MAX_LINE)
            .read_until(b'\n', &mut buf)
            .map_err(|e| BenchError::DarshanLog(format!("reading the helper: {e}")))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if buf.last() != Some(&b'\n') && n as u64 == MAX_LINE {
            return Err(BenchError::Parse {
                path: "darshan helper".into(),
                line: line_no,
                msg: format!("line longer than {MAX_LINE} bytes"),
            });
        }
        let line: Line = serde_json::from_slice(&buf).map_err(|e| BenchError::Parse {
            path: "darshan helper".into(),
            line: line_no,
            msg: e.to_string(),
        })?;
        match line {
            Line::Header(h) => out.logs.push(h),
            Line::File {
                size_at_open,
                bytes_written,
            } => {
                if out.logs.is_empty() {
                    return Err(BenchError::Parse {
                        path: "darshan helper".into(),
                        line: line_no,
                        msg: "a file record before any log header".into(),
                    });
                }
                if out.records.len() >= MAX_LOG_RECORDS {
                    return Err(BenchError::DarshanLog(format!(
                        "the logs hold more than {MAX_LOG_RECORDS} file records; age with fewer \
                         logs and --scale"
                    )));
                }
                out.records.push(FileRecord {
                    size_at_open,
                    bytes_written,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helper_lines_parse_into_records() {
        let text = concat!(
            "{\"log\": \"/x/a.darshan\", \"version\": \"3.21\", \"exe\": \"ior\", \"nprocs\": 4, \"files\": 2}\n",
            "{\"size_at_open\": 0, \"bytes_written\": 4096}\n",
            "{\"size_at_open\": 10, \"bytes_written\": 0}\n",
        );
        let r = parse(text.as_bytes()).unwrap();
        assert_eq!(r.logs.len(), 1);
        assert_eq!(r.logs[0].nprocs, 4);
        assert_eq!(
            r.records,
            vec![
                FileRecord {
                    size_at_open: 0,
                    bytes_written: 4096
                },
                FileRecord {
                    size_at_open: 10,
                    bytes_written: 0
                }
            ]
        );
    }

    #[test]
    fn malformed_helper_output_is_an_error_with_its_line() {
        let e = parse("{\"size_at_open\": 1, \"bytes_written\": 2}\n".as_bytes()).unwrap_err();
        assert!(e.to_string().contains(":1:"), "{e}");
        let e = parse(
            "{\"log\": \"a\", \"version\": \"3\", \"exe\": \"\", \"nprocs\": 1, \"files\": 1}\nnot json\n"
                .as_bytes(),
        )
        .unwrap_err();
        assert!(e.to_string().contains(":2:"), "{e}");
        let long = vec![b'x'; MAX_LINE as usize + 10];
        assert!(parse(&long[..]).is_err());
    }
}
