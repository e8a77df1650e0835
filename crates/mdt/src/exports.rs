//! Which client each connection is (Lustre's exports): a client names itself by its uuid
//! in [`Request::MdtConnect`](nacre_rpc::msg::Request::MdtConnect), first on every
//! connection, and every later request that names a client uuid (tracked requests, their
//! replays, the end of a replay, a disconnect) must come over a connection bound to that
//! uuid. Without this, any client that learned another's uuid could read or overwrite its
//! saved replies, replay into its name, or drop its record.
//!
//! As in Lustre's `target_handle_connect`, a uuid bound to a live connection from another
//! node is refused to a new connection (EALREADY); from the same node it moves to the new
//! connection (a client reconnecting before the server saw its old connection end).
//! Servers (the MDTs of a DNE file system) prove the server key and are not bound.
//!
//! Bounded by the live connections: a binding ends with its connection. Refusals are
//! logged at a bounded rate, so a client sending in another's name cannot fill the log.

use nacre_core::Errno;
use nacre_core::log_limit::{LogLimit, held_note};
use nacre_rpc::auth::PeerRole;
use nacre_rpc::msg::ClientUuid;
use nacre_rpc::server::RequestCtx;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::IpAddr;

#[derive(Default)]
struct Binds {
    /// Connection id to the uuid it proved.
    by_conn: HashMap<u64, ClientUuid>,
    /// Uuid to its connection and the node it came from.
    by_client: HashMap<ClientUuid, (u64, IpAddr)>,
}

/// The bindings of one MDT.
#[derive(Default)]
pub struct Exports {
    binds: Mutex<Binds>,
    refusals: LogLimit,
}

impl Exports {
    /// Binds `client` to the connection of `ctx` (its `MdtConnect`).
    pub fn bind(&self, ctx: &RequestCtx, client: ClientUuid) -> Result<(), Errno> {
        if ctx.role == PeerRole::Server {
            return Ok(());
        }
        let mut b = self.binds.lock();
        if let Some(&(conn, node)) = b.by_client.get(&client)
            && conn != ctx.conn_id
        {
            if node != ctx.peer.ip() && b.by_conn.contains_key(&conn) {
                if let Some(held) = self.refusals.allow() {
                    tracing::warn!(
                        target: "mdt",
                        "refusing client {client:#x} from {}: already connected from {node}{}",
                        ctx.peer,
                        held_note(held)
                    );
                }
                return Err(Errno::EALREADY);
            }
            b.by_conn.remove(&conn);
        }
        // One uuid per connection: a connection that named another before lets it go.
        if let Some(old) = b.by_conn.insert(ctx.conn_id, client)
            && old != client
        {
            b.by_client.remove(&old);
        }
        b.by_client.insert(client, (ctx.conn_id, ctx.peer.ip()));
        debug_assert_eq!(b.by_conn.len(), b.by_client.len());
        Ok(())
    }

    /// EPERM unless the connection of `ctx` is bound to `client` (or is a server's).
    pub fn check(&self, ctx: &RequestCtx, client: ClientUuid) -> Result<(), Errno> {
        if ctx.role == PeerRole::Server
            || self.binds.lock().by_conn.get(&ctx.conn_id) == Some(&client)
        {
            return Ok(());
        }
        if let Some(held) = self.refusals.allow() {
            tracing::warn!(
                target: "mdt",
                "{} ({}) named client {client:#x}, which is not the client of its connection{}",
                ctx.client,
                ctx.peer,
                held_note(held)
            );
        }
        Err(Errno::EPERM)
    }

    /// The connection ended: its binding with it.
    pub fn unbind(&self, conn_id: u64) {
        let mut b = self.binds.lock();
        if let Some(client) = b.by_conn.remove(&conn_id)
            && b.by_client.get(&client).is_some_and(|&(c, _)| c == conn_id)
        {
            b.by_client.remove(&client);
        }
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

    fn ctx(conn_id: u64, ip: &str, role: PeerRole) -> RequestCtx {
        RequestCtx {
            peer: format!("{ip}:1234").parse().expect("addr"),
            client: "test".into(),
            role,
            conn_id,
        }
    }

    #[test]
    fn a_connection_may_name_only_the_client_it_connected_as() {
        let e = Exports::default();
        let a = ctx(1, "10.0.0.1", PeerRole::Client);
        let b = ctx(2, "10.0.0.2", PeerRole::Client);
        assert_eq!(e.check(&a, 7), Err(Errno::EPERM), "before any connect");
        e.bind(&a, 7).expect("bind");
        e.bind(&b, 8).expect("bind");
        assert_eq!(e.check(&a, 7), Ok(()));
        assert_eq!(e.check(&b, 7), Err(Errno::EPERM), "another's uuid");
        // Another node may not take a uuid whose connection is live...
        assert_eq!(
            e.bind(&ctx(3, "10.0.0.2", PeerRole::Client), 7),
            Err(Errno::EALREADY)
        );
        assert_eq!(e.check(&a, 7), Ok(()));
        // ...the same node may (a reconnect), and the old connection loses it.
        let a2 = ctx(4, "10.0.0.1", PeerRole::Client);
        e.bind(&a2, 7).expect("reconnect");
        assert_eq!(e.check(&a2, 7), Ok(()));
        assert_eq!(e.check(&a, 7), Err(Errno::EPERM));
        // Once its connection ended, any node may.
        e.unbind(4);
        e.bind(&ctx(5, "10.0.0.3", PeerRole::Client), 7)
            .expect("after the end");
        // The old connection ending later does not undo the new binding.
        e.unbind(1);
        assert_eq!(e.check(&ctx(5, "10.0.0.3", PeerRole::Client), 7), Ok(()));
        assert_eq!(e.len(), 2);
    }

    #[test]
    fn a_connection_renaming_itself_lets_the_old_uuid_go_and_servers_are_not_bound() {
        let e = Exports::default();
        let a = ctx(1, "10.0.0.1", PeerRole::Client);
        e.bind(&a, 7).expect("bind");
        e.bind(&a, 9).expect("rebind");
        assert_eq!(e.check(&a, 7), Err(Errno::EPERM));
        e.bind(&ctx(2, "10.0.0.2", PeerRole::Client), 7)
            .expect("free again");
        let s = ctx(3, "10.0.0.4", PeerRole::Server);
        assert_eq!(e.check(&s, 7), Ok(()));
        e.unbind(1);
        e.unbind(2);
        assert!(e.is_empty());
    }
}
