//! A console rate limit for lines a fault or a peer repeats once per request (as Lustre's
//! console messages are rate-limited): a read of a file with a stopped OST decodes every
//! chunk from parity, and a line per chunk would be thousands for one large read; a
//! client sending requests in another's name would write a line per request. One line
//! per [`LOG_LIMIT_INTERVAL`] is written, saying how many were held back since the last.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// At most one line per this, per limiter.
pub const LOG_LIMIT_INTERVAL: Duration = Duration::from_secs(10);

pub struct LogLimit {
    start: Instant,
    interval_ms: u64,
    /// Milliseconds since `start` from which the next line may be written.
    next_ms: AtomicU64,
    held: AtomicU64,
}

impl Default for LogLimit {
    fn default() -> Self {
        LogLimit::new(LOG_LIMIT_INTERVAL)
    }
}

impl LogLimit {
    pub fn new(interval: Duration) -> LogLimit {
        LogLimit {
            start: Instant::now(),
            interval_ms: interval.as_millis() as u64,
            next_ms: AtomicU64::new(0),
            held: AtomicU64::new(0),
        }
    }

    /// `Some(held)` when a line may be written now (`held` lines were held back since
    /// the last one); `None` when this one is held back.
    pub fn allow(&self) -> Option<u64> {
        let now = self.start.elapsed().as_millis() as u64;
        let next = self.next_ms.load(Ordering::Acquire);
        if now >= next
            && self
                .next_ms
                .compare_exchange(
                    next,
                    now + self.interval_ms,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
        {
            return Some(self.held.swap(0, Ordering::AcqRel));
        }
        self.held.fetch_add(1, Ordering::Relaxed);
        None
    }
}

/// " (N similar lines held back)" when N > 0, for the end of a line.
pub fn held_note(held: u64) -> String {
    if held == 0 {
        String::new()
    } else {
        format!(" ({held} similar lines held back)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_and_a_count_of_the_rest() {
        let l = LogLimit::new(Duration::from_millis(200));
        assert_eq!(l.allow(), Some(0));
        for _ in 0..5 {
            assert_eq!(l.allow(), None);
        }
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(l.allow(), Some(5));
        assert_eq!(l.allow(), None);
        assert_eq!(held_note(0), "");
        assert_eq!(held_note(3), " (3 similar lines held back)");
    }

    #[test]
    fn threads_at_once_write_one_line() {
        let l = std::sync::Arc::new(LogLimit::new(Duration::from_secs(60)));
        let allowed: u64 = (0..8)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || (0..100).filter(|_| l.allow().is_some()).count() as u64)
            })
            .map(|t| t.join().expect("thread"))
            .sum();
        assert_eq!(allowed, 1);
    }
}
