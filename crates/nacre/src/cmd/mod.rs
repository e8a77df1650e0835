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

/// How long a thread of the blocking pool (object I/O, health checks) waits for work
/// before it ends. Tokio's default is 10 s, but a new task wakes the idle thread that has
/// waited longest, which then waits 10 s again: the targets' once-a-second health checks
/// and block releases (nine a second for `nacre up`'s five targets) kept every thread a
/// busy moment started, and after scripts/memory-budget.sh `nacre up` rested at 99
/// threads and 90 MiB resident, 15 MiB of it the threads' allocator caches and much of
/// the rest small allocations spread over their arenas. The pool now shrinks to about as
/// many threads as tasks start in this time (18 threads and 48 MiB after the same run).
pub const BLOCKING_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(1);

/// A multi-threaded runtime for a command that runs servers or a client.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(runtime_builder().thread_name("nacre").build()?)
}

fn runtime_builder() -> tokio::runtime::Builder {
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .max(2);
    let mut b = tokio::runtime::Builder::new_multi_thread();
    b.worker_threads(threads)
        .thread_keep_alive(BLOCKING_KEEP_ALIVE)
        .enable_all();
    b
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Threads of this process named `name`.
    fn threads_named(name: &str) -> usize {
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return 0;
        };
        tasks
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|comm| comm.trim_end() == name)
            .count()
    }

    #[test]
    fn idle_blocking_threads_end_under_a_trickle_of_tasks() {
        let name = "rt-keep-alive";
        let rt = runtime_builder()
            .thread_name(name)
            .build()
            .expect("runtime");
        // A busy moment: 32 blocking tasks at once take 32 threads.
        rt.block_on(async {
            let tasks: Vec<_> = (0..32)
                .map(|_| {
                    tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(200)))
                })
                .collect();
            for t in tasks {
                t.await.expect("task");
            }
        });
        let busy = threads_named(name);
        assert!(busy >= 32, "{busy} threads");
        // Then ten short tasks a second, as the targets' housekeeping starts them: each
        // wakes the thread idle longest, and with tokio's 10 s all 32 would stay.
        rt.block_on(async {
            for _ in 0..40 {
                tokio::task::spawn_blocking(|| ()).await.expect("task");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        let workers = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
        let idle = threads_named(name);
        assert!(
            idle <= workers + 20,
            "{idle} threads after 4 s of a trickle ({busy} when busy)"
        );
    }
}
