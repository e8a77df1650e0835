//! The process's memory: the allocator every nacre process runs on, and its figures as
//! parameters (`lctl get_param memused memory_stats`).
//!
//! jemalloc, not glibc's malloc: a file system server frees bursts of large bulk buffers
//! from many threads, and glibc's per-thread arenas kept those pages resident (a six-job
//! fio mix left a fresh `nacre up` at 4.4 GiB resident, 78 MiB of it live: `malloc_trim`
//! gave the rest back). jemalloc's background threads return freed pages to the system
//! within [`DIRTY_DECAY_MS`], so the resident size follows what is in use and the
//! `--memory` budget can be held as resident size.

use crate::params::{ParamSource, ParamValue};

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// How long freed pages may stay resident before a background thread returns them: long
/// enough that a steady stream of bulk buffers reuses its pages, short enough that a burst
/// is given back within a second or two.
pub const DIRTY_DECAY_MS: u32 = 1000;

/// jemalloc reads its options from this symbol (the crate prefixes jemalloc's names with
/// `_rjem_`): background purging threads, the decay above, and no second (muzzy) stage,
/// whose pages still count as resident in some kernels' accounting.
#[allow(non_upper_case_globals)]
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static malloc_conf: &[u8] = b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

/// What the allocator and the kernel say about this process's memory, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes the program holds (Lustre's `memused`).
    pub allocated: u64,
    /// Bytes in pages the allocator has handed out, fragmentation included.
    pub active: u64,
    /// Bytes the allocator keeps resident, its metadata and not yet purged pages included.
    pub resident: u64,
    /// Address space the allocator keeps mapped but has returned to the system.
    pub retained: u64,
    /// The process's resident set, as the kernel counts it (`VmRSS`).
    pub rss: u64,
}

impl MemoryStats {
    /// Reads the current figures (the allocator's are refreshed first).
    pub fn read() -> MemoryStats {
        // The statistics are a snapshot taken when the epoch advances.
        let _ = tikv_jemalloc_ctl::epoch::advance();
        let get = |r: tikv_jemalloc_ctl::Result<usize>| r.map(|v| v as u64).unwrap_or(0);
        MemoryStats {
            allocated: get(tikv_jemalloc_ctl::stats::allocated::read()),
            active: get(tikv_jemalloc_ctl::stats::active::read()),
            resident: get(tikv_jemalloc_ctl::stats::resident::read()),
            retained: get(tikv_jemalloc_ctl::stats::retained::read()),
            rss: rss_bytes().unwrap_or(0),
        }
    }

    fn render(&self) -> String {
        format!(
            "allocated: {}\nactive: {}\nresident: {}\nretained: {}\nrss: {}",
            self.allocated, self.active, self.resident, self.retained, self.rss
        )
    }
}

/// The process's resident set size from `/proc/self/statm`.
pub fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

/// `memused` (Lustre's name: bytes allocated) and `memory_stats` (where they are).
pub struct MemoryParams;

impl ParamSource for MemoryParams {
    fn list(&self) -> Vec<ParamValue> {
        let s = MemoryStats::read();
        vec![
            ParamValue {
                name: "memused".into(),
                value: s.allocated.to_string(),
                writable: false,
            },
            ParamValue {
                name: "memory_stats".into(),
                value: s.render(),
                writable: false,
            },
        ]
    }

    fn set(&self, name: &str, _value: &str) -> Result<(), String> {
        Err(format!("{name}: read-only parameter"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_bulk_buffers_leave_the_resident_set() {
        // A burst like a streaming write's: many 1 MiB buffers from several threads, each
        // followed by a small allocation that lives on (a cache entry, a reply), so the
        // freed buffers are holes between live data, not a heap top to trim.
        const THREADS: usize = 4;
        const BUFFERS: usize = 128;
        // One freed buffer of the size first, as a server has freed many before.
        drop(std::hint::black_box(vec![1u8; 1 << 20]));
        let before = MemoryStats::read();
        let per_thread = || {
            let mut bulk = Vec::with_capacity(BUFFERS);
            let mut kept = Vec::with_capacity(BUFFERS);
            for i in 0..BUFFERS {
                bulk.push(vec![i as u8; 1 << 20]);
                kept.push(vec![i as u8; 64]);
            }
            (bulk, kept)
        };
        let (held, kept): (Vec<_>, Vec<_>) = std::thread::scope(|s| {
            let hs: Vec<_> = (0..THREADS).map(|_| s.spawn(per_thread)).collect();
            hs.into_iter().map(|h| h.join().expect("thread")).unzip()
        });
        let during = MemoryStats::read();
        let burst = ((THREADS * BUFFERS) as u64) << 20;
        // Other tests of this binary run beside this one and free what they held, so
        // the burst is looked for with some slack.
        assert!(
            during.allocated + burst / 8 >= before.allocated + burst,
            "{during:?}"
        );
        assert!(during.rss >= burst, "{during:?}");
        drop(held);
        let deadline = std::time::Instant::now()
            + std::time::Duration::from_millis(u64::from(DIRTY_DECAY_MS) * 10);
        loop {
            let after = MemoryStats::read();
            if after.rss < before.rss + burst / 8 {
                assert!(after.allocated < before.allocated + burst / 8, "{after:?}");
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "512 MiB freed, still resident: {after:?} (before {before:?})"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        drop(kept);
    }

    #[test]
    fn parameters_render_every_figure() {
        let p = MemoryParams.list();
        assert_eq!(p[0].name, "memused");
        assert!(p[0].value.parse::<u64>().expect("a number") > 0);
        for k in ["allocated", "active", "resident", "retained", "rss"] {
            assert!(p[1].value.contains(&format!("{k}: ")), "{}", p[1].value);
        }
        assert!(MemoryParams.set("memused", "0").is_err());
    }
}
