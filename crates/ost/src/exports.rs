//! Which client each connection to an OST is (Lustre's exports on the OSS): a client
//! names itself by its uuid in [`Request::OstConnect`](nacre_rpc::msg::Request::OstConnect),
//! and every later request that names a uuid (tracked changes, their replays, the end of a
//! replay) must come over a connection bound to it. As in Lustre's `target_handle_connect`
//! and the MDT's exports, a uuid bound to a live connection from another node is refused
//! to a new connection (EALREADY), so a client that learned another's uuid cannot replay
//! or end a recovery in its name while it is connected; from the same node the uuid moves
//! to the new connection (a client reconnecting before the OST saw its old connection
//! end). Bounded by the live connections: a binding ends with its connection.

use nacre_core::Errno;
use nacre_core::log_limit::{LogLimit, held_note};
use nacre_rpc::msg::ClientUuid;
use nacre_rpc::server::RequestCtx;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::IpAddr;

#[derive(Default)]
struct Binds {
    /// Connection id to the uuid it named.
    by_conn: HashMap<u64, ClientUuid>,
    /// Uuid to its connection and the node it came from.
    by_client: HashMap<ClientUuid, (u64, IpAddr)>,
}

/// The bindings of one OST.
#[derive(Default)]
pub struct Exports {
    binds: Mutex<Binds>,
    refusals: LogLimit,
}

impl Exports {
    /// Binds `client` to the connection of `ctx` (its `OstConnect`).
    pub fn bind(&self, ctx: &RequestCtx, client: ClientUuid) -> Result<(), Errno> {
        let mut b = self.binds.lock();
        if let Some(&(conn, node)) = b.by_client.get(&client)
            && conn != ctx.conn_id
        {
            if node != ctx.peer.ip() && b.by_conn.contains_key(&conn) {
                if let Some(held) = self.refusals.allow() {
                    tracing::warn!(
                        target: "ost",
                        "refusing client {client:#x} from {}: already connected from {node}{}",
                        ctx.peer,
                        held_note(held)
                    );
                }
                return Err(Errno::EALREADY);
            }
            b.by_conn.remove(&conn);
        }
        // One uuid per connection: a connection that named another lets it go.
        if let Some(old) = b.by_conn.insert(ctx.conn_id, client)
            && old != client
        {
            b.by_client.remove(&old);
        }
        b.by_client.insert(client, (ctx.conn_id, ctx.peer.ip()));
        debug_assert_eq!(b.by_conn.len(), b.by_client.len());
        Ok(())
    }

    /// EPROTO unless the connection of `ctx` is bound to `client`.
    pub fn check(&self, ctx: &RequestCtx, client: ClientUuid) -> Result<(), Errno> {
        if self.binds.lock().by_conn.get(&ctx.conn_id) == Some(&client) {
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
        let mut b = self.binds.lock();
        if let Some(client) = b.by_conn.remove(&conn_id)
            && b.by_client.get(&client).is_some_and(|&(c, _)| c == conn_id)
        {
            b.by_client.remove(&client);
        }
        debug_assert_eq!(b.by_conn.len(), b.by_client.len());
    }

    /// Live bindings.
    pub fn len(&self) -> usize {
        self.binds.lock().by_conn.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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

    #[test]
    fn a_uuid_live_on_another_node_is_refused_and_moves_within_its_node() {
        let e = Exports::default();
        e.bind(&ctx(1, "10.0.0.1"), 7).expect("bind");
        e.check(&ctx(1, "10.0.0.1"), 7).expect("bound");
        // Another node claims it while the first connection lives.
        assert_eq!(e.bind(&ctx(2, "10.0.0.2"), 7), Err(Errno::EALREADY));
        assert_eq!(e.check(&ctx(2, "10.0.0.2"), 7), Err(Errno::EPROTO));
        // The same node reconnects before the old connection's end was seen: it moves.
        e.bind(&ctx(3, "10.0.0.1"), 7).expect("rebind");
        assert_eq!(e.check(&ctx(1, "10.0.0.1"), 7), Err(Errno::EPROTO));
        e.check(&ctx(3, "10.0.0.1"), 7).expect("moved");
        // The old connection's end does not drop the new binding.
        e.unbind(1);
        e.check(&ctx(3, "10.0.0.1"), 7).expect("still bound");
        // Once its connection ends, the uuid is free for any node.
        e.unbind(3);
        assert!(e.is_empty());
        e.bind(&ctx(4, "10.0.0.2"), 7).expect("bind after the end");
        // A connection naming another uuid lets its first go.
        e.bind(&ctx(4, "10.0.0.2"), 8).expect("rename");
        assert_eq!(e.len(), 1);
        e.bind(&ctx(5, "10.0.0.1"), 7).expect("7 is free again");
    }
}
