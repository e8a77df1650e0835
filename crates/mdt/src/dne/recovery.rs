//! Finishing distributed operations a crash (or an unreachable MDT) left open.
//!
//! At start and then periodically:
//! - as coordinator: re-send the commit of every `DneCommitted` record to the
//!   participants that have not confirmed it, and drop the record once all have;
//! - as participant: for every `DnePending` record (prepared more than [`PENDING_AGE`]
//!   ago, or left by a previous run), ask its coordinator and commit or abort.
//!
//! Both directions are idempotent, so a record found twice (or by both sides at once) is
//! finished once. Nothing here blocks request handling: unreachable peers are retried on
//! the next pass.

use super::log::{self, Pending};
use crate::Mdt;
use nacre_core::Errno;
use nacre_osd::Table;
use nacre_rpc::msg::{DneOpState, Reply, Request};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// A pending record younger than this belongs to an operation probably still running.
pub const PENDING_AGE: Duration = Duration::from_secs(3);
/// Pause between passes while work is left.
pub const RETRY_INTERVAL: Duration = Duration::from_secs(1);
/// Pause between passes with nothing to do.
pub const IDLE_INTERVAL: Duration = Duration::from_secs(5);
/// Records handled per pass.
const PASS_LIMIT: usize = 1024;
/// How often an MDT other than MDT0 re-reads the root's default file layout.
const ROOT_LAYOUT_MAXAGE: Duration = Duration::from_secs(5);

impl Mdt {
    pub(crate) async fn dne_recovery_loop(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let started = log::now_ms();
        let mut wait = Duration::ZERO;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.changed() => return,
            }
            let left = match self.dne_recover_once(started).await {
                Ok(left) => left,
                Err(e) => {
                    tracing::warn!(target: "mdt::dne", "MDT{:04x}: recovery pass: {e}", self.index);
                    true
                }
            };
            wait = if left { RETRY_INTERVAL } else { IDLE_INTERVAL };
        }
    }

    /// One pass; returns whether work is left. An MDT that does not answer is skipped for
    /// the rest of the pass, so one dead peer costs one timeout, not one per record.
    async fn dne_recover_once(self: &Arc<Self>, started_ms: u64) -> Result<bool, Errno> {
        let mut left = false;
        let mut dead: HashSet<u32> = HashSet::new();
        let committed = log::all(&mut self.view()?, Table::DneCommitted, PASS_LIMIT)?;
        for (k, v) in committed {
            let Some(op) = k.try_into().ok().map(u64::from_be_bytes) else {
                continue;
            };
            let rec = log::decode_committed(&v)?;
            let (skip, ask): (Vec<u32>, Vec<u32>) =
                rec.participants.iter().partition(|m| dead.contains(m));
            let mut remaining = self.dne_commit_remote(op, &ask).await;
            dead.extend(remaining.iter().copied());
            remaining.extend(skip);
            if !remaining.is_empty() {
                left = true;
            }
            let mut before = rec.participants.clone();
            before.sort_unstable();
            remaining.sort_unstable();
            if remaining == before {
                // Nobody confirmed since the last pass: nothing to write, nothing new to say.
                tracing::debug!(target: "mdt::dne", "MDT{:04x}: op {op:#x}: {} participant(s) still to confirm", self.index, before.len());
                continue;
            }
            let n = remaining.len();
            self.dne_forget_or_keep(op, remaining).await;
            tracing::info!(target: "mdt::dne", "MDT{:04x}: op {op:#x}: commit re-sent, {n} participant(s) still to confirm", self.index);
        }
        let pending = log::all(&mut self.view()?, Table::DnePending, PASS_LIMIT)?;
        let now = log::now_ms();
        for (_, v) in pending {
            let p: Pending = log::decode_pending(&v)?;
            let from_before = p.since_ms < started_ms;
            if dead.contains(&p.coord)
                || (!from_before && now.saturating_sub(p.since_ms) < PENDING_AGE.as_millis() as u64)
            {
                left = true;
                continue;
            }
            match self.dne_ask(p.coord, p.op).await {
                Some(DneOpState::Committed) => {
                    tracing::info!(target: "mdt::dne", "MDT{:04x}: op {:#x} of MDT{:04x} committed: finishing it", self.index, p.op, p.coord);
                    self.dne_participant_commit(p.coord, p.op).await?;
                }
                Some(DneOpState::Aborted) => {
                    tracing::info!(target: "mdt::dne", "MDT{:04x}: op {:#x} of MDT{:04x} did not commit: undoing it", self.index, p.op, p.coord);
                    self.dne_participant_abort(p.coord, p.op).await?;
                }
                Some(DneOpState::InProgress) => left = true,
                None => {
                    dead.insert(p.coord);
                    left = true;
                }
            }
        }
        Ok(left)
    }

    async fn dne_ask(&self, coord: u32, op: u64) -> Option<DneOpState> {
        if coord == self.index {
            return self.dne_resolve(op).await.ok();
        }
        let px = self.dne_proxy(coord).ok()?;
        match px.call(&Request::DneResolve { op }).await {
            Ok(Reply::DneState(s)) => Some(s),
            _ => None,
        }
    }

    /// Keeps the root's default file layout at hand on MDTs other than MDT0, so files
    /// created there inherit it like files on MDT0.
    pub(crate) async fn dne_root_layout_loop(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        if self.index == 0 {
            return;
        }
        let root = nacre_core::Fid::ROOT;
        loop {
            if let Ok(px) = self.dne_proxy(0)
                && let Ok(Reply::Layout(l)) =
                    px.call(&Request::GetDefaultLayout { fid: root }).await
            {
                *self.dne.root_layout.lock() = Some((Instant::now(), l));
            }
            tokio::select! {
                _ = tokio::time::sleep(ROOT_LAYOUT_MAXAGE) => {}
                _ = shutdown.changed() => return,
            }
        }
    }
}
