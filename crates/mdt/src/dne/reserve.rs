//! Names held for prepared distributed operations.
//!
//! A participant's `DeleteName` takes the name away at prepare; if the operation then
//! aborts, the name must come back. Until the operation is decided nobody else may take
//! that name, or the undo would find it taken and the inode would lose its only name. So
//! the name stays reserved here, and creates, links, renames and inserts of it wait
//! ([`RESERVED`]) until the operation commits or aborts. The set is changed only inside
//! store transactions (which run one at a time), so it always agrees with the store; at
//! start it is rebuilt from the pending records.

use nacre_core::{Errno, Fid};
use parking_lot::Mutex;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// "That name is held by a distributed operation being decided": retry shortly. Never
/// reaches a client (it becomes EBUSY if the hold lasts).
pub const RESERVED: Errno = Errno::EALREADY;
/// Attempts of an operation that meets a held name or a conflict.
pub const MAX_ATTEMPTS: u32 = 60;

/// The pause before attempt `n` (growing to 50 ms: about 2.5 s in all).
pub fn pause(n: u32) -> Duration {
    Duration::from_millis(u64::from(n.min(25)) * 2)
}

/// A held name: directory object and name.
type Held = (Fid, Vec<u8>);

#[derive(Clone, Default)]
pub struct Reservations(Arc<Mutex<HashSet<Held>>>);

impl Reservations {
    pub fn holds(&self, parent: &Fid, name: &[u8]) -> bool {
        self.0.lock().contains(&(*parent, name.to_vec()))
    }

    pub fn take(&self, parent: &Fid, name: &[u8]) {
        self.0.lock().insert((*parent, name.to_vec()));
    }

    pub fn release(&self, parent: &Fid, name: &[u8]) {
        self.0.lock().remove(&(*parent, name.to_vec()));
    }

    /// Fails with [`RESERVED`] while `parent/name` is held.
    pub fn check(&self, parent: &Fid, name: &[u8]) -> Result<(), Errno> {
        if self.holds(parent, name) {
            return Err(RESERVED);
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.0.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Runs `f` again while it meets a held name, then gives up with EBUSY.
pub async fn retry_held<T, F, Fut>(mut f: F) -> Result<T, Errno>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Errno>>,
{
    for attempt in 0..MAX_ATTEMPTS {
        match f().await {
            Err(RESERVED) => tokio::time::sleep(pause(attempt + 1)).await,
            r => return r,
        }
    }
    Err(Errno::EBUSY)
}
