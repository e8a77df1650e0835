//! The memory budget of a process's servers: the request and reply bytes that all requests
//! being handled may hold at once, shared by every target the process serves (MGS, MDTs,
//! OSTs), over TCP and in process alike.
//!
//! Bytes are counted in KiB permits of one FIFO semaphore, so a burst of large requests
//! waits its turn instead of exhausting memory. FIFO also means a waiter that can never be
//! served blocks everyone behind it, so three rules keep one request from stalling the rest:
//! - a request's sizes are checked against their maxima before it reserves anything
//!   (the frame's in [`crate::frame`], its reply's by the server and the target's
//!   [`Service::admit`](crate::server::Service::admit));
//! - no reservation may exceed the budget: [`MemoryBudget::reserve`] refuses one at once
//!   rather than wait for permits that can never all be free;
//! - a request never holds part of its bytes while it waits for more (the server gives a
//!   read's own bytes back before reserving its reply's).
//!
//! What is reserved is given back by a drop guard ([`Reservation`]).

use crate::frame::{MAX_BODY, MAX_BULK};
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The most one request reserves at once: a whole incoming frame, or the bulk of its
/// reply (at most [`MAX_BULK`]), whichever is larger.
pub const MAX_RESERVATION: u64 = MAX_BODY as u64 + MAX_BULK as u64;

/// The smallest budget: two largest requests, so any one can run beside another.
pub const MIN_BUDGET: u64 = 2 * MAX_RESERVATION;

/// Request and reply bytes a process's servers may hold.
#[derive(Debug)]
pub struct MemoryBudget {
    permits: Arc<Semaphore>,
    /// Permits the budget was made with: no reservation may ask for more.
    total: u32,
}

/// Why a reservation was not made.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum BudgetError {
    #[error("{bytes} bytes exceed the whole memory budget of {total} bytes")]
    TooLarge { bytes: u64, total: u64 },
    #[error("the memory budget is closed")]
    Closed,
}

/// Bytes held against a [`MemoryBudget`], given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    _permits: Option<OwnedSemaphorePermit>,
}

impl Reservation {
    /// Holds nothing (a request with no bytes to count).
    pub fn none() -> Reservation {
        Reservation { _permits: None }
    }
}

impl MemoryBudget {
    /// A budget of `bytes`, never less than [`MIN_BUDGET`].
    pub fn new(bytes: u64) -> Arc<MemoryBudget> {
        let total = kib(bytes.max(MIN_BUDGET)).min(u64::from(u32::MAX)) as u32;
        Arc::new(MemoryBudget {
            permits: Arc::new(Semaphore::new(total as usize)),
            total,
        })
    }

    /// The whole budget, in bytes (whole KiB).
    pub fn total_bytes(&self) -> u64 {
        u64::from(self.total) * 1024
    }

    /// Bytes not reserved right now.
    pub fn available_bytes(&self) -> u64 {
        self.permits.available_permits() as u64 * 1024
    }

    /// Reserves `bytes`, waiting behind earlier reservations. More than the whole budget
    /// is refused at once: it could never be granted, and every later request would wait
    /// behind it.
    pub async fn reserve(&self, bytes: u64) -> Result<Reservation, BudgetError> {
        let want = kib(bytes);
        if want > u64::from(self.total) {
            return Err(BudgetError::TooLarge {
                bytes,
                total: self.total_bytes(),
            });
        }
        if want == 0 {
            return Ok(Reservation::none());
        }
        // `want` fits in u32: it is at most `total`.
        let p = self
            .permits
            .clone()
            .acquire_many_owned(want as u32)
            .await
            .map_err(|_| BudgetError::Closed)?;
        Ok(Reservation { _permits: Some(p) })
    }
}

/// Bytes in whole KiB, rounded up: the unit of permits.
fn kib(bytes: u64) -> u64 {
    bytes.div_ceil(1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_reservation_over_the_budget_is_refused_at_once() {
        let b = MemoryBudget::new(0);
        assert_eq!(b.total_bytes(), MIN_BUDGET);
        let all = b.total_bytes();
        let r = tokio::time::timeout(Duration::from_millis(100), b.reserve(all + 1))
            .await
            .expect("an impossible reservation waited");
        assert_eq!(
            r.err(),
            Some(BudgetError::TooLarge {
                bytes: all + 1,
                total: all
            })
        );
        let r = b.reserve(u64::MAX).await;
        assert!(matches!(r, Err(BudgetError::TooLarge { .. })));
        // The whole budget is one possible reservation, and comes back when dropped.
        let whole = b.reserve(all).await.expect("the whole budget");
        assert_eq!(b.available_bytes(), 0);
        drop(whole);
        assert_eq!(b.available_bytes(), all);
        // Nothing to count takes nothing.
        let _none = b.reserve(0).await.expect("nothing");
        assert_eq!(b.available_bytes(), all);
    }

    #[test]
    fn a_huge_budget_stays_within_one_reservation_count() {
        let b = MemoryBudget::new(u64::MAX);
        assert_eq!(b.total_bytes(), u64::from(u32::MAX) * 1024);
    }
}
