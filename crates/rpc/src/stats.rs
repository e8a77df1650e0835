//! Per-opcode request counts and latencies: what Lustre shows as `mdc.*.stats`,
//! `osc.*.stats` (client side, time from send to reply) and `mdt.*.md_stats`,
//! `obdfilter.*.stats` (server side, time to handle). Lock-free counters, so recording
//! costs a few atomic adds on every request.

use crate::msg::Request;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Opcodes are below this (see [`Request::opcode`]); larger ones are counted as the last.
pub const MAX_OPCODE: usize = 128;

struct Counter {
    count: AtomicU64,
    sum_us: AtomicU64,
    min_us: AtomicU64,
    max_us: AtomicU64,
}

impl Default for Counter {
    fn default() -> Self {
        Counter {
            count: AtomicU64::new(0),
            sum_us: AtomicU64::new(0),
            min_us: AtomicU64::new(u64::MAX),
            max_us: AtomicU64::new(0),
        }
    }
}

/// One opcode's figures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpSample {
    pub opcode: u16,
    pub count: u64,
    pub min_us: u64,
    pub max_us: u64,
    pub sum_us: u64,
}

pub struct OpStats {
    ops: Box<[Counter]>,
}

impl std::fmt::Debug for OpStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.samples()).finish()
    }
}

impl Default for OpStats {
    fn default() -> Self {
        OpStats {
            ops: (0..MAX_OPCODE).map(|_| Counter::default()).collect(),
        }
    }
}

impl OpStats {
    pub fn record(&self, opcode: u16, took: Duration) {
        let c = &self.ops[usize::from(opcode).min(MAX_OPCODE - 1)];
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        c.count.fetch_add(1, Ordering::Relaxed);
        c.sum_us.fetch_add(us, Ordering::Relaxed);
        c.min_us.fetch_min(us, Ordering::Relaxed);
        c.max_us.fetch_max(us, Ordering::Relaxed);
    }

    /// Opcodes seen since the last clear, in opcode order.
    pub fn samples(&self) -> Vec<OpSample> {
        self.ops
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let count = c.count.load(Ordering::Relaxed);
                (count > 0).then(|| OpSample {
                    opcode: i as u16,
                    count,
                    min_us: c.min_us.load(Ordering::Relaxed),
                    max_us: c.max_us.load(Ordering::Relaxed),
                    sum_us: c.sum_us.load(Ordering::Relaxed),
                })
            })
            .collect()
    }

    pub fn clear(&self) {
        for c in self.ops.iter() {
            c.count.store(0, Ordering::Relaxed);
            c.sum_us.store(0, Ordering::Relaxed);
            c.min_us.store(u64::MAX, Ordering::Relaxed);
            c.max_us.store(0, Ordering::Relaxed);
        }
    }

    /// Lustre's stats file format:
    /// `name  N samples [usecs] min max sum`, after a `snapshot_time` line.
    pub fn render(&self) -> String {
        self.render_with(Request::op_name)
    }

    /// As [`render`](Self::render), with the caller's names for the counters.
    pub fn render_with(&self, op_name: impl Fn(u16) -> &'static str) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let mut out = format!(
            "{:<25} {}.{:06} secs.usecs\n",
            "snapshot_time",
            now.as_secs(),
            now.subsec_micros()
        );
        for s in self.samples() {
            let _ = writeln!(
                out,
                "{:<25} {} samples [usecs] {} {} {}",
                op_name(s.opcode),
                s.count,
                s.min_us,
                s.max_us,
                s.sum_us
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_clears() {
        let s = OpStats::default();
        s.record(12, Duration::from_micros(40));
        s.record(12, Duration::from_micros(10));
        s.record(9999, Duration::from_micros(1));
        let v = s.samples();
        assert_eq!(
            v[0],
            OpSample {
                opcode: 12,
                count: 2,
                min_us: 10,
                max_us: 40,
                sum_us: 50
            }
        );
        assert_eq!(v[1].opcode as usize, MAX_OPCODE - 1);
        assert!(
            s.render()
                .contains("getattr                   2 samples [usecs] 10 40 50")
        );
        s.clear();
        assert!(s.samples().is_empty());
    }
}
