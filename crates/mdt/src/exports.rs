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
//! A client's open handles belong to its export, not to one connection: when a bound
//! connection ends, its handles are *parked* for [`EXPORT_GRACE`], and the client's next
//! `MdtConnect` takes them over (Lustre keeps the export, and its open handles, across a
//! reconnect). A client that does not come back within the grace has them closed, as one
//! whose connection was never bound has at once. The grace is `mdt.*.export_grace`
//! (seconds, [`EXPORT_GRACE_MIN`]..=[`EXPORT_GRACE_MAX`]): Lustre keeps a silent client's
//! export for its ping evictor's timeout, 1.5 times `obd_timeout`, and a site with slow
//! clients or long network outages wants more than the default.
//!
//! Bounded by the live connections and [`PARKED_MAX`]: a binding ends with its connection,
//! a parked export with its grace. Refusals are logged at a bounded rate, so a client
//! sending in another's name cannot fill the log.

use nacre_core::Errno;
use nacre_core::log_limit::{LogLimit, held_note};
use nacre_rpc::auth::PeerRole;
use nacre_rpc::exports::{Bindings, Unbound};
use nacre_rpc::msg::ClientUuid;
use nacre_rpc::server::RequestCtx;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long the open handles of a client whose connection ended wait for it to reconnect
/// before they are closed, by default: longer than a client takes to notice a lost
/// connection and reconnect (its next callback poll, within a second or two), as Lustre
/// waits for a silent client before evicting it.
pub const EXPORT_GRACE: Duration = Duration::from_secs(30);
/// Shortest `export_grace`: a client must have time to see its connection end.
pub const EXPORT_GRACE_MIN: Duration = Duration::from_secs(1);
/// Longest `export_grace`: handles of a client that is gone are not held for longer.
pub const EXPORT_GRACE_MAX: Duration = Duration::from_secs(3600);
/// Exports parked at once; past it a connection's handles are closed when it ends.
pub const PARKED_MAX: usize = 1 << 16;

#[derive(Default)]
struct Binds {
    /// The live bindings (the rule every target shares).
    live: Bindings,
    /// Clients whose connection ended, with that connection (whose handles wait for them)
    /// and its node.
    parked: HashMap<ClientUuid, (u64, IpAddr)>,
}

/// What becomes of an ended connection's open handles ([`Exports::unbind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Close them now: the connection named no client, or too many are parked.
    Close,
    /// Kept for this client until it reconnects or [`Exports::expire`] says otherwise;
    /// `dropped`: the connection parked for it before (its client connected from another
    /// node meanwhile), whose handles are to be closed now.
    Parked {
        client: ClientUuid,
        dropped: Option<u64>,
    },
}

/// The bindings of one MDT.
pub struct Exports {
    binds: Mutex<Binds>,
    refusals: LogLimit,
    /// `export_grace`, in seconds.
    grace_secs: AtomicU64,
}

impl Default for Exports {
    fn default() -> Exports {
        Exports {
            binds: Mutex::default(),
            refusals: LogLimit::default(),
            grace_secs: AtomicU64::new(EXPORT_GRACE.as_secs()),
        }
    }
}

impl Exports {
    /// How long an ended connection's handles wait for their client (`export_grace`).
    pub fn grace(&self) -> Duration {
        Duration::from_secs(self.grace_secs.load(Ordering::Acquire))
    }

    /// Sets `export_grace` from its value in seconds; outside its bounds it is refused.
    /// A grace already running keeps the length it started with.
    pub fn set_grace(&self, value: &str) -> Result<(), String> {
        let (min, max) = (EXPORT_GRACE_MIN.as_secs(), EXPORT_GRACE_MAX.as_secs());
        let secs: u64 = value
            .trim()
            .parse()
            .map_err(|_| format!("'{value}' is not a number of seconds"))?;
        if !(min..=max).contains(&secs) {
            return Err(format!("{secs} is out of range [{min}, {max}] seconds"));
        }
        self.grace_secs.store(secs, Ordering::Release);
        Ok(())
    }

    /// Binds `client` to the connection of `ctx` (its `MdtConnect`). `take_over(old, new)`
    /// runs under the bindings' lock when the client's handles are held by an earlier
    /// connection (one it is moving from, or a parked one): it moves them to this one.
    pub fn bind(
        &self,
        ctx: &RequestCtx,
        client: ClientUuid,
        take_over: impl FnOnce(u64, u64),
    ) -> Result<(), Errno> {
        if ctx.role == PeerRole::Server {
            return Ok(());
        }
        let mut b = self.binds.lock();
        let mut from = match b.live.bind(ctx.conn_id, ctx.peer.ip(), client) {
            Ok(from) => from,
            Err(e) => {
                if let Some(held) = self.refusals.allow() {
                    tracing::warn!(
                        target: "mdt",
                        "refusing client {client:#x} from {}: already connected from {}{}",
                        ctx.peer,
                        e.node,
                        held_note(held)
                    );
                }
                return Err(e.into());
            }
        };
        // A parked export goes back to its own node only: another node naming the uuid
        // gets a binding, not the handles.
        match b.parked.get(&client) {
            Some(&(conn, node)) if node == ctx.peer.ip() => {
                b.parked.remove(&client);
                from = Some(conn);
            }
            _ => {}
        }
        if let Some(old) = from {
            take_over(old, ctx.conn_id);
        }
        Ok(())
    }

    /// EPERM unless the connection of `ctx` is bound to `client` (or is a server's).
    pub fn check(&self, ctx: &RequestCtx, client: ClientUuid) -> Result<(), Errno> {
        if ctx.role == PeerRole::Server
            || self.binds.lock().live.client_of(ctx.conn_id) == Some(client)
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

    /// The connection ended: its binding with it, and its handles parked for the client it
    /// was bound to.
    pub fn unbind(&self, conn_id: u64) -> Ended {
        let mut b = self.binds.lock();
        let Some(Unbound {
            client,
            current: Some(node),
        }) = b.live.unbind(conn_id)
        else {
            return Ended::Close;
        };
        if b.parked.len() >= PARKED_MAX && !b.parked.contains_key(&client) {
            return Ended::Close;
        }
        let dropped = b.parked.insert(client, (conn_id, node)).map(|(c, _)| c);
        Ended::Parked { client, dropped }
    }

    /// The client said goodbye (`MdtDisconnect`): its binding ends now, and what its
    /// connection still holds is closed when it ends, not parked.
    pub fn leave(&self, conn_id: u64) {
        let mut b = self.binds.lock();
        if let Some(u) = b.live.unbind(conn_id) {
            b.parked.remove(&u.client);
        }
    }

    /// The grace of `client`'s export parked with connection `conn_id` is over: whether
    /// its handles are to be closed now (the client did not come back for them).
    pub fn expire(&self, client: ClientUuid, conn_id: u64) -> bool {
        let mut b = self.binds.lock();
        if b.parked.get(&client).is_some_and(|&(c, _)| c == conn_id) {
            b.parked.remove(&client);
            return true;
        }
        false
    }

    /// The connection `client` is bound to now.
    pub fn conn_of(&self, client: ClientUuid) -> Option<u64> {
        self.binds.lock().live.conn_of(client)
    }

    /// Exports parked now.
    pub fn parked(&self) -> usize {
        self.binds.lock().parked.len()
    }

    /// Live bindings.
    pub fn len(&self) -> usize {
        self.binds.lock().live.len()
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

    /// Binds and returns the connection whose handles moved to this one.
    fn bind(e: &Exports, c: &RequestCtx, client: ClientUuid) -> Result<Option<u64>, Errno> {
        let mut moved = None;
        e.bind(c, client, |old, new| {
            assert_eq!(new, c.conn_id);
            moved = Some(old);
        })?;
        Ok(moved)
    }

    #[test]
    fn export_grace_keeps_its_bounds() {
        let e = Exports::default();
        assert_eq!(e.grace(), EXPORT_GRACE);
        e.set_grace("5").expect("in range");
        assert_eq!(e.grace(), Duration::from_secs(5));
        for bad in ["0", "3601", "-1", "5s", ""] {
            assert!(e.set_grace(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(
            e.grace(),
            Duration::from_secs(5),
            "a refused value changed it"
        );
        e.set_grace(&EXPORT_GRACE_MAX.as_secs().to_string())
            .expect("the maximum");
    }

    #[test]
    fn a_connection_may_name_only_the_client_it_connected_as() {
        let e = Exports::default();
        let a = ctx(1, "10.0.0.1", PeerRole::Client);
        let b = ctx(2, "10.0.0.2", PeerRole::Client);
        assert_eq!(e.check(&a, 7), Err(Errno::EPERM), "before any connect");
        bind(&e, &a, 7).expect("bind");
        bind(&e, &b, 8).expect("bind");
        assert_eq!(e.check(&a, 7), Ok(()));
        assert_eq!(e.check(&b, 7), Err(Errno::EPERM), "another's uuid");
        // Another node may not take a uuid whose connection is live...
        assert_eq!(
            bind(&e, &ctx(3, "10.0.0.2", PeerRole::Client), 7),
            Err(Errno::EALREADY)
        );
        assert_eq!(e.check(&a, 7), Ok(()));
        // ...the same node may (a reconnect), and the old connection loses it.
        let a2 = ctx(4, "10.0.0.1", PeerRole::Client);
        bind(&e, &a2, 7).expect("reconnect");
        assert_eq!(e.check(&a2, 7), Ok(()));
        assert_eq!(e.check(&a, 7), Err(Errno::EPERM));
        // Once its connection ended, any node may.
        e.unbind(4);
        bind(&e, &ctx(5, "10.0.0.3", PeerRole::Client), 7).expect("after the end");
        // The old connection ending later does not undo the new binding.
        e.unbind(1);
        assert_eq!(e.check(&ctx(5, "10.0.0.3", PeerRole::Client), 7), Ok(()));
        assert_eq!(e.len(), 2);
    }

    #[test]
    fn a_connection_renaming_itself_lets_the_old_uuid_go_and_servers_are_not_bound() {
        let e = Exports::default();
        let a = ctx(1, "10.0.0.1", PeerRole::Client);
        bind(&e, &a, 7).expect("bind");
        bind(&e, &a, 9).expect("rebind");
        assert_eq!(e.check(&a, 7), Err(Errno::EPERM));
        bind(&e, &ctx(2, "10.0.0.2", PeerRole::Client), 7).expect("free again");
        let s = ctx(3, "10.0.0.4", PeerRole::Server);
        assert_eq!(e.check(&s, 7), Ok(()));
        e.unbind(1);
        e.unbind(2);
        assert!(e.is_empty());
    }

    /// The handles of a client whose connection ended wait for it: its reconnect from the
    /// same node takes them over, another node's does not, and once the grace is over
    /// (`expire`) they are closed unless taken.
    #[test]
    fn an_ended_connections_handles_wait_for_its_client_to_reconnect() {
        let e = Exports::default();
        let a = ctx(1, "10.0.0.1", PeerRole::Client);
        assert_eq!(bind(&e, &a, 7), Ok(None));
        assert_eq!(
            e.unbind(1),
            Ended::Parked {
                client: 7,
                dropped: None
            }
        );
        assert_eq!(e.parked(), 1);
        // Another node naming the uuid is bound but does not get the handles; when its
        // connection ends, its handles wait instead and the first ones are closed.
        assert_eq!(bind(&e, &ctx(2, "10.0.0.2", PeerRole::Client), 7), Ok(None));
        assert_eq!(
            e.unbind(2),
            Ended::Parked {
                client: 7,
                dropped: Some(1)
            }
        );
        assert!(!e.expire(7, 1), "replaced by the later connection's");
        assert!(e.expire(7, 2));
        assert_eq!(e.parked(), 0);
        // A reconnect from the same node takes the parked handles over...
        assert_eq!(bind(&e, &ctx(3, "10.0.0.1", PeerRole::Client), 8), Ok(None));
        assert_eq!(
            e.unbind(3),
            Ended::Parked {
                client: 8,
                dropped: None
            }
        );
        assert_eq!(
            bind(&e, &ctx(4, "10.0.0.1", PeerRole::Client), 8),
            Ok(Some(3))
        );
        assert_eq!(e.parked(), 0);
        assert!(!e.expire(8, 3), "taken: nothing to close");
        // ...as one before the old connection was seen to end does from the live one.
        assert_eq!(
            bind(&e, &ctx(5, "10.0.0.1", PeerRole::Client), 8),
            Ok(Some(4))
        );
        assert_eq!(
            e.unbind(4),
            Ended::Close,
            "no longer bound: nothing left on it"
        );
        // A connection that named no client has its handles closed at once, as has one
        // whose client said goodbye.
        assert_eq!(e.unbind(6), Ended::Close);
        e.leave(5);
        assert_eq!(
            e.check(&ctx(5, "10.0.0.1", PeerRole::Client), 8),
            Err(Errno::EPERM)
        );
        assert_eq!(e.unbind(5), Ended::Close);
        assert_eq!((e.len(), e.parked()), (0, 0));
    }
}
