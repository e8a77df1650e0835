//! Which client each connection to an OST is (Lustre's exports on the OSS): a client
//! names itself by its uuid in [`Request::OstConnect`](nacre_rpc::msg::Request::OstConnect),
//! and every later request that names a uuid (tracked changes, their replays, the end of a
//! replay) must come over a connection bound to it. The binding rule is every target's
//! ([`nacre_rpc::exports`]): a uuid live on another node's connection is refused, so
//! nobody replays or ends a recovery in another client's name. Refusals are logged at a
//! bounded rate.

use nacre_core::Errno;
use nacre_core::log_limit::{LogLimit, held_note};
use nacre_rpc::exports::Bindings;
use nacre_rpc::msg::ClientUuid;
use nacre_rpc::server::RequestCtx;
use parking_lot::Mutex;

/// The bindings of one OST.
#[derive(Default)]
pub struct Exports {
    live: Mutex<Bindings>,
    refusals: LogLimit,
}

impl Exports {
    /// Binds `client` to the connection of `ctx` (its `OstConnect`); EALREADY when it is
    /// connected from another node.
    pub fn bind(&self, ctx: &RequestCtx, client: ClientUuid) -> Result<(), Errno> {
        let r = self.live.lock().bind(ctx.conn_id, ctx.peer.ip(), client);
        r.map(drop).map_err(|e| {
            if let Some(held) = self.refusals.allow() {
                tracing::warn!(
                    target: "ost",
                    "refusing client {client:#x} from {}: already connected from {}{}",
                    ctx.peer,
                    e.node,
                    held_note(held)
                );
            }
            e.into()
        })
    }

    /// EPROTO unless the connection of `ctx` is bound to `client`.
    pub fn check(&self, ctx: &RequestCtx, client: ClientUuid) -> Result<(), Errno> {
        if self.live.lock().client_of(ctx.conn_id) == Some(client) {
            return Ok(());
        }
        if let Some(held) = self.refusals.allow() {
            tracing::warn!(
                target: "ost",
                "{} ({}) named client {client:#x}, which is not the client of its connection{}",
                ctx.client,
                ctx.peer,
                held_note(held)
            );
        }
        Err(Errno::EPROTO)
    }

    /// The connection ended, and its binding with it.
    pub fn unbind(&self, conn_id: u64) {
        let _ = self.live.lock().unbind(conn_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nacre_rpc::auth::PeerRole;

    fn ctx(conn_id: u64, ip: &str) -> RequestCtx {
        RequestCtx {
            peer: format!("{ip}:1234").parse().expect("addr"),
            client: "test".into(),
            role: PeerRole::Client,
            conn_id,
        }
    }

    /// A second node naming a connected client's uuid is refused, and its requests in
    /// that name too; once the first connection ends, the uuid is free.
    #[test]
    fn another_node_cannot_take_a_connected_clients_uuid() {
        let e = Exports::default();
        e.bind(&ctx(1, "10.0.0.1"), 7).expect("bind");
        assert_eq!(e.bind(&ctx(2, "10.0.0.2"), 7), Err(Errno::EALREADY));
        assert_eq!(e.check(&ctx(2, "10.0.0.2"), 7), Err(Errno::EPROTO));
        e.check(&ctx(1, "10.0.0.1"), 7).expect("bound");
        e.unbind(1);
        e.bind(&ctx(2, "10.0.0.2"), 7).expect("free after the end");
        e.check(&ctx(2, "10.0.0.2"), 7).expect("bound");
    }
}
