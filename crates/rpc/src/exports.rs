//! Which client each connection to a target is (Lustre's exports): the binding rule every
//! target shares. A client names itself by its uuid first on every connection (its
//! `MdtConnect` or `OstConnect`); every later request that names a uuid must come over a
//! connection bound to it. As in Lustre's `target_handle_connect`, a uuid bound to a live
//! connection from another node is refused to a new connection (EALREADY), so a client
//! that learned another's uuid cannot act in its name while it is connected; from the
//! same node the uuid moves to the new connection (a client reconnecting before the
//! target saw its old connection end). Bounded by the live connections: a binding ends
//! with its connection. What a target keeps beyond the binding (an MDT's parked open
//! handles) is its own.

use crate::msg::ClientUuid;
use nacre_core::Errno;
use std::collections::HashMap;
use std::net::IpAddr;

/// The live bindings of one target.
#[derive(Debug, Default)]
pub struct Bindings {
    /// Connection id to the uuid it named.
    by_conn: HashMap<u64, ClientUuid>,
    /// Uuid to its connection and the node it came from.
    by_client: HashMap<ClientUuid, (u64, IpAddr)>,
}

/// Why a bind was refused: the uuid is live on another node's connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoundElsewhere {
    pub node: IpAddr,
}

impl From<BoundElsewhere> for Errno {
    fn from(_: BoundElsewhere) -> Errno {
        Errno::EALREADY
    }
}

/// What [`Bindings::unbind`] found of an ended connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unbound {
    pub client: ClientUuid,
    /// The node, when this connection was still the client's binding (not one it had
    /// moved from).
    pub current: Option<IpAddr>,
}

impl Bindings {
    /// Binds `client` to connection `conn` from `node`. `Ok(Some(old))`: the client moved
    /// from connection `old` of the same node, which is no longer bound.
    pub fn bind(
        &mut self,
        conn: u64,
        node: IpAddr,
        client: ClientUuid,
    ) -> Result<Option<u64>, BoundElsewhere> {
        let mut from = None;
        if let Some(&(old, old_node)) = self.by_client.get(&client)
            && old != conn
        {
            if old_node != node && self.by_conn.contains_key(&old) {
                return Err(BoundElsewhere { node: old_node });
            }
            self.by_conn.remove(&old);
            from = Some(old);
        }
        // One uuid per connection: a connection that named another lets it go.
        if let Some(prev) = self.by_conn.insert(conn, client)
            && prev != client
        {
            self.by_client.remove(&prev);
        }
        self.by_client.insert(client, (conn, node));
        debug_assert_eq!(self.by_conn.len(), self.by_client.len());
        Ok(from)
    }

    /// The client connection `conn` is bound to.
    pub fn client_of(&self, conn: u64) -> Option<ClientUuid> {
        self.by_conn.get(&conn).copied()
    }

    /// The connection `client` is bound to now.
    pub fn conn_of(&self, client: ClientUuid) -> Option<u64> {
        self.by_client.get(&client).map(|&(c, _)| c)
    }

    /// Connection `conn` ended (or its client left): its binding goes.
    pub fn unbind(&mut self, conn: u64) -> Option<Unbound> {
        let client = self.by_conn.remove(&conn)?;
        let current = match self.by_client.get(&client) {
            Some(&(c, node)) if c == conn => {
                self.by_client.remove(&client);
                Some(node)
            }
            _ => None,
        };
        debug_assert_eq!(self.by_conn.len(), self.by_client.len());
        Some(Unbound { client, current })
    }

    /// Live bindings.
    pub fn len(&self) -> usize {
        self.by_conn.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_conn.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn a_uuid_live_on_another_node_is_refused_and_moves_within_its_node() {
        let mut b = Bindings::default();
        assert_eq!(b.bind(1, ip("10.0.0.1"), 7), Ok(None));
        assert_eq!(b.client_of(1), Some(7));
        // Another node claims it while the first connection lives.
        assert_eq!(
            b.bind(2, ip("10.0.0.2"), 7),
            Err(BoundElsewhere {
                node: ip("10.0.0.1")
            })
        );
        assert_eq!(b.client_of(2), None);
        // The same node reconnects before the old connection's end was seen: it moves.
        assert_eq!(b.bind(3, ip("10.0.0.1"), 7), Ok(Some(1)));
        assert_eq!((b.client_of(1), b.conn_of(7)), (None, Some(3)));
        // The old connection's end finds nothing bound.
        assert_eq!(b.unbind(1), None);
        assert_eq!(b.client_of(3), Some(7));
        // Once its connection ends, the uuid is free for any node.
        assert_eq!(
            b.unbind(3),
            Some(Unbound {
                client: 7,
                current: Some(ip("10.0.0.1"))
            })
        );
        assert!(b.is_empty());
        assert_eq!(b.bind(4, ip("10.0.0.2"), 7), Ok(None));
        // A connection naming another uuid lets its first go.
        assert_eq!(b.bind(4, ip("10.0.0.2"), 8), Ok(None));
        assert_eq!(b.len(), 1);
        assert_eq!(b.bind(5, ip("10.0.0.1"), 7), Ok(None));
    }
}
