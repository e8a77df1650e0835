//! Where log lines go: standard error, which a background process has redirected to its
//! `nacre.log`. A line that cannot be written (the disk under the log is full, the pipe is
//! gone) is dropped and counted, and the count is reported with the next line that gets
//! through. Logging must never fail the caller: tracing's own fallback for a failed write
//! is `eprintln!`, which panics on the same error, and a panic in a background task once
//! leaked the client's write accounting and hung `close` on a full disk.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// Log lines dropped since the last one written.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Standard error that never reports a failure.
pub struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        let mut err = std::io::stderr().lock();
        let lost = DROPPED.swap(0, Ordering::AcqRel);
        if lost > 0 {
            let note = format!("({lost} log lines could not be written)\n");
            if err.write_all(note.as_bytes()).is_err() {
                DROPPED.fetch_add(lost, Ordering::AcqRel);
            }
        }
        if err.write_all(line).is_err() {
            DROPPED.fetch_add(1, Ordering::AcqRel);
        }
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

/// Log lines dropped and not yet reported.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Acquire)
}

/// Sets up logging to [`LogWriter`] at `default` level unless `NACRE_LOG` says otherwise.
pub fn init(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("NACRE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| LogWriter)
        // Colour only for a terminal, not in `nacre.log`.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .log_internal_errors(false)
        .try_init();
}
