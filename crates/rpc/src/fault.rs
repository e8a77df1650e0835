//! The c-Network fault model on a target's side: a switch that makes the target's replies
//! go missing, as a partitioned network or a lossy link would (`nacre inject c-Network`).
//! Requests still arrive and are handled; only their answers are lost, so a client sees
//! what it sees of an unreachable server: its calls time out and its reconnects fail.

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a target's replies are dropped now.
#[derive(Debug, Default)]
pub struct NetFault {
    dropping: AtomicBool,
}

impl NetFault {
    /// Starts or stops dropping replies; whether they were dropped before.
    pub fn set_dropping(&self, on: bool) -> bool {
        let was = self.dropping.swap(on, Ordering::AcqRel);
        if was != on {
            tracing::warn!(
                target: "rpc",
                "network fault {}: replies {}",
                if on { "injected" } else { "cleared" },
                if on { "dropped" } else { "sent again" }
            );
        }
        was
    }

    pub fn dropping(&self) -> bool {
        self.dropping.load(Ordering::Acquire)
    }
}
