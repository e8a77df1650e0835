//! The MDC's replay list (Lustre's `imp_replay_list` in ptlrpc): every modifying request
//! an MDT answered with a transno above its `last_committed` is kept, with what its reply
//! decided (the FID and layout a create made), until a later reply's `last_committed`
//! covers it. When the MDT restarts (its instance changes at connect), the list is
//! replayed in transno order before the new connection carries anything else, so an
//! acknowledged change survives a crash of the MDT as long as this client lives.
//!
//! The list is bounded ([`REPLAY_LIST_MAX`]): when it is full, the client asks the MDT to
//! commit (a sync, which covers every reply received before it) instead of growing it.

use nacre_core::Errno;
use nacre_rpc::RpcError;
use nacre_rpc::import::{ConnectHook, NewLink};
use nacre_rpc::msg::{ClientUuid, ReplayOutcome, Reply, Request};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Uncommitted requests kept per MDT. An MDT commits every few seconds (its checkpoint),
/// so at nacre's create rate a list rarely holds more than a few thousand; past this the
/// client makes the MDT commit rather than hold more (each entry is a request, up to a
/// 64 KiB xattr value).
pub const REPLAY_LIST_MAX: usize = 8192;

struct Kept {
    req: Request,
    outcome: Option<ReplayOutcome>,
}

#[derive(Default)]
struct List {
    /// The MDT instance last connected to (0: none yet).
    instance: u64,
    last_committed: u64,
    /// The highest transno answered so far.
    last_transno: u64,
    kept: BTreeMap<u64, Kept>,
}

/// One MDC's recovery state: its client identity, request numbers and replay list.
pub struct MdcReplay {
    pub client: ClientUuid,
    xid: AtomicU64,
    list: Mutex<List>,
    /// How long a recovery request may wait (the MDT answers a replay when its turn comes
    /// and the end of replay when recovery ends).
    timeout: Duration,
    /// Requests replayed, for tests and `mdc.*.import`-style reports.
    pub replayed: AtomicU64,
}

/// Requests the MDC keeps for replay: the namespace changes a client makes.
pub fn is_replayable(req: &Request) -> bool {
    matches!(
        req,
        Request::Create { .. }
            | Request::Mkdir { .. }
            | Request::Unlink { .. }
            | Request::Rename { .. }
            | Request::Link { .. }
            | Request::Setattr { .. }
            | Request::SetXattr { .. }
            | Request::RemoveXattr { .. }
    )
}

impl MdcReplay {
    pub fn new(client: ClientUuid, timeout: Duration) -> MdcReplay {
        MdcReplay {
            client,
            xid: AtomicU64::new(1),
            list: Mutex::new(List::default()),
            timeout,
            replayed: AtomicU64::new(0),
        }
    }

    pub fn next_xid(&self) -> u64 {
        self.xid.fetch_add(1, Ordering::Relaxed)
    }

    /// Requests kept now.
    pub fn kept(&self) -> usize {
        self.list.lock().kept.len()
    }

    pub fn is_full(&self) -> bool {
        self.kept() >= REPLAY_LIST_MAX
    }

    /// The highest transno answered so far: a sync sent now commits up to it.
    pub fn last_transno(&self) -> u64 {
        self.list.lock().last_transno
    }

    /// Drops what is committed up to `last_committed`.
    pub fn committed(&self, last_committed: u64) {
        let mut l = self.list.lock();
        if last_committed > l.last_committed {
            l.last_committed = last_committed;
        }
        let lc = l.last_committed;
        l.kept = l.kept.split_off(&(lc + 1));
    }

    /// A tracked request's answer: kept when it is not committed yet.
    pub fn answered(&self, req: Request, transno: u64, last_committed: u64, reply: &Reply) {
        self.committed(last_committed);
        if transno == 0 || transno <= last_committed {
            return;
        }
        let outcome = match (&req, reply) {
            (Request::Create { .. }, Reply::Created { inode, .. }) => Some(ReplayOutcome {
                fid: inode.attr.fid,
                layout: inode.layout.clone(),
            }),
            // An existing file opened: nothing to make again.
            (Request::Create { .. }, _) => return,
            _ => None,
        };
        let mut l = self.list.lock();
        l.last_transno = l.last_transno.max(transno);
        l.kept.insert(transno, Kept { req, outcome });
    }

    async fn connect(&self, link: &NewLink<'_>) -> Result<(), RpcError> {
        let r = link
            .call(
                &Request::MdtConnect {
                    client: self.client,
                },
                self.timeout,
            )
            .await?;
        let Reply::MdtConnected {
            instance,
            last_committed,
        } = r
        else {
            return Err(RpcError::Errno(Errno::EPROTO));
        };
        self.committed(last_committed);
        let (restarted, todo) = {
            let mut l = self.list.lock();
            let restarted = l.instance != 0 && l.instance != instance;
            l.instance = instance;
            let todo: Vec<(u64, Request, Option<ReplayOutcome>)> = if restarted {
                l.kept
                    .iter()
                    .map(|(t, k)| (*t, k.req.clone(), k.outcome.clone()))
                    .collect()
            } else {
                Vec::new()
            };
            (restarted, todo)
        };
        if !restarted {
            return Ok(());
        }
        tracing::info!(target: "client", "MDT restarted: replaying {} uncommitted requests", todo.len());
        for (transno, req, outcome) in todo {
            let r = link
                .call(
                    &Request::Replay {
                        client: self.client,
                        transno,
                        req: Box::new(req),
                        outcome,
                    },
                    self.timeout,
                )
                .await;
            match r {
                Ok(_) => {
                    self.replayed.fetch_add(1, Ordering::Relaxed);
                }
                Err(RpcError::Errno(Errno::ESTALE)) => return self.evicted(),
                Err(RpcError::Errno(e)) => {
                    tracing::warn!(target: "client", "replay of transno {transno} failed: {e}");
                }
                Err(e) => return Err(e),
            }
        }
        match link
            .call(
                &Request::ReplayDone {
                    client: self.client,
                },
                self.timeout,
            )
            .await
        {
            Ok(Reply::Recovered { last_committed }) => {
                // Recovery ends with everything replayed committed.
                let mut l = self.list.lock();
                l.kept.clear();
                l.last_committed = last_committed;
                l.last_transno = l.last_transno.max(last_committed);
                Ok(())
            }
            Ok(_) => Err(RpcError::Errno(Errno::EPROTO)),
            Err(RpcError::Errno(Errno::ESTALE)) => self.evicted(),
            Err(e) => Err(e),
        }
    }

    fn evicted(&self) -> Result<(), RpcError> {
        let lost = {
            let mut l = self.list.lock();
            std::mem::take(&mut l.kept).len()
        };
        tracing::error!(target: "client", "evicted by the MDT (missed its recovery window): {lost} uncommitted requests lost");
        Ok(())
    }
}

impl ConnectHook for MdcReplay {
    fn connected<'a>(
        &'a self,
        link: NewLink<'a>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), RpcError>> + Send + 'a>>
    {
        Box::pin(async move { self.connect(&link).await })
    }
}
