//! The commands of the `nacre` binary.

pub mod bench_checks;
pub mod bench_checksums;
pub mod bench_cost;
pub mod bench_dne;
pub mod bench_dom;
pub mod bench_fs;
pub mod bench_lfsck;
pub mod bench_protection;
pub mod bench_recovery;
pub mod cluster;
pub mod darshan_age;
pub mod inject;
pub mod lctl;
pub mod lfs;
pub mod lfs_dne;
pub mod mount;
pub mod up;

use anyhow::Result;

/// A multi-threaded runtime for a command that runs servers or a client.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .max(2);
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("nacre")
        .enable_all()
        .build()?)
}

/// Prints a status line of a process that serves (a mount or targets). Nobody may be
/// reading by then (`nacre up ... | head -1`), which must not stop the service, so a
/// failed write is let go.
pub fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

/// Parses sizes like `1G`, `512M` for command-line options.
pub fn parse_size_arg(s: &str) -> Result<u64, String> {
    nacre_core::size::parse_size(s).map_err(|e| e.to_string())
}
