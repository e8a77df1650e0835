//! Replay recovery of the MDT (Lustre's `tgt_lastrcvd.c` and `ldlm_lib.c` target recovery).
//!
//! Every modifying client request the MDT answers carries its transno and the MDT's
//! `last_committed` ([`nacre_osd::mdstore::track_transno`]); the client keeps what is not
//! committed. The MDT keeps one record per client in its store (`last_rcvd`, written
//! synchronously when a client first connects), so after a restart it knows whom to wait
//! for. Recovery then:
//!
//! Recovery itself (the window, the transno order, evictions, `recovery_status`) is
//! shared with the OSTs: [`nacre_rpc::target`]. It:
//!
//! - lets the known clients reconnect ([`Request::MdtConnect`]) within the window
//!   (`recovery_time_soft` after the last sign of life, never past `recovery_time_hard`);
//! - applies their [`Request::Replay`]s in global transno order: the lowest queued one
//!   goes when it is the next transno, or when every client still expected is waiting on
//!   a replay of its own (a gap: the transno belonged to a request nobody replays);
//! - holds every other request until it ends;
//! - evicts clients that miss the window, with a log line, and forgets their records;
//! - ends with one journal sync, so everything replayed is committed before new requests
//!   run, and numbers later transactions above every replayed one.

use crate::records::prefix_end;
use nacre_core::Errno;
use nacre_osd::{MdStore, ReadView, Table};
use nacre_rpc::msg::{ClientUuid, Reply};
use parking_lot::Mutex;
use std::collections::{BTreeSet, HashMap};

pub use nacre_rpc::target::{
    DeferredReopen, OBD_TIMEOUT, RECOVERY_TIME_HARD, RECOVERY_TIME_SOFT, REPLAY_QUEUE_MAX,
    Recovery, Standing, Status, Step,
};

/// Answers kept per client for resends (Lustre's reply data slots): at least the
/// client's requests in flight (`mdc.*.max_rpcs_in_flight`, at most 256), so the answer to
/// any request it may resend after a lost connection is still here.
pub const REPLY_SLOTS: usize = 256;

/// The last answers to each client's tracked requests, by request number: a resent request
/// gets its first answer back instead of running twice. The answers to requests that
/// changed something are also kept in the store (Lustre's `reply_data` file beside
/// `last_rcvd`), one slot per answer in a ring of [`REPLY_SLOTS`] per client, and loaded
/// at start: a request whose answer was lost and whose MDT then restarted is not run twice
/// either, as long as its change was committed. A change the restart lost is run again,
/// as it must be.
#[derive(Default)]
pub struct ReplyData {
    by_client: Mutex<HashMap<ClientUuid, Slots>>,
}

/// One client's answers, oldest first, and the sequence number of the next one (its slot
/// in the store is that number modulo [`REPLY_SLOTS`]).
#[derive(Default)]
struct Slots {
    answers: std::collections::VecDeque<(u64, Reply)>,
    next_seq: u64,
}

/// The store key prefix of the saved answers: then the client's UUID and the slot, both
/// big-endian.
const REPLY_DATA: &[u8] = b"reply_data.";

fn reply_key(c: ClientUuid, slot: u16) -> Vec<u8> {
    let mut k = client_prefix(REPLY_DATA, c);
    k.extend_from_slice(&slot.to_be_bytes());
    k
}

fn client_prefix(prefix: &[u8], c: ClientUuid) -> Vec<u8> {
    let mut k = prefix.to_vec();
    k.extend_from_slice(&c.to_be_bytes());
    k
}

/// A saved answer as stored: its sequence number, the request number, the answer.
type SavedReply = (u64, u64, Reply);

impl ReplyData {
    /// The answers the store kept for the `recorded` clients (those of any other client
    /// were dropped with its record). One that does not decode is left out with a
    /// warning: without it, a resend of that request runs again, as before a restart.
    pub fn load(v: &ReadView, recorded: &BTreeSet<ClientUuid>) -> Result<ReplyData, Errno> {
        let end = prefix_end(REPLY_DATA);
        let mut saved: HashMap<ClientUuid, Vec<SavedReply>> = HashMap::new();
        for (k, val) in v.range(Table::Meta, REPLY_DATA, &end, usize::MAX)? {
            let Some(client) = k
                .get(REPLY_DATA.len()..REPLY_DATA.len() + 8)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map(u64::from_be_bytes)
            else {
                continue;
            };
            if !recorded.contains(&client) {
                continue;
            }
            match nacre_rpc::msg::decode::<SavedReply>(&val) {
                Ok(r) => saved.entry(client).or_default().push(r),
                Err(e) => tracing::warn!(
                    target: "mdt",
                    "a saved answer of client {client:016x} does not decode ({e}): a resend of its request runs again"
                ),
            }
        }
        let mut by_client = HashMap::with_capacity(saved.len());
        for (client, mut v) in saved {
            v.sort_unstable_by_key(|(seq, _, _)| *seq);
            let next_seq = v.last().map_or(0, |(seq, _, _)| seq + 1);
            let answers = v
                .into_iter()
                .rev()
                .take(REPLY_SLOTS)
                .rev()
                .map(|(_, xid, r)| (xid, r))
                .collect();
            by_client.insert(client, Slots { answers, next_seq });
        }
        Ok(ReplyData {
            by_client: Mutex::new(by_client),
        })
    }

    pub fn lookup(&self, client: ClientUuid, xid: u64) -> Option<Reply> {
        let m = self.by_client.lock();
        m.get(&client)?
            .answers
            .iter()
            .find(|(x, _)| *x == xid)
            .map(|(_, r)| r.clone())
    }

    /// Keeps `reply` for resends of `xid`; its sequence number (for [`persist_reply`]).
    pub fn save(&self, client: ClientUuid, xid: u64, reply: &Reply) -> u64 {
        let mut m = self.by_client.lock();
        let slots = m.entry(client).or_default();
        if slots.answers.len() >= REPLY_SLOTS {
            slots.answers.pop_front();
        }
        slots.answers.push_back((xid, reply.clone()));
        debug_assert!(slots.answers.len() <= REPLY_SLOTS);
        let seq = slots.next_seq;
        slots.next_seq += 1;
        seq
    }

    /// An evicted client's answers go with it.
    pub fn forget(&self, client: ClientUuid) {
        self.by_client.lock().remove(&client);
    }
}

/// Keeps answer number `seq` of `client` (to request `xid`) in the store, in the slot of
/// the answer [`REPLY_SLOTS`] before it. It rides in the next batch the store commits
/// (at the latest the next checkpoint's), after the request's own: never on disk without
/// the change it answers, and costing no transaction of its own.
pub async fn persist_reply(
    store: &MdStore,
    client: ClientUuid,
    seq: u64,
    xid: u64,
    reply: &Reply,
) -> Result<(), Errno> {
    let slot = (seq % REPLY_SLOTS as u64) as u16;
    let v = nacre_rpc::msg::encode(&(seq, xid, reply))?;
    store
        .put_with_next_commit(Table::Meta, reply_key(client, slot), v)
        .await
}

/// The store key of a client's record (`last_rcvd`): prefix, then the UUID big-endian.
const LAST_RCVD: &[u8] = b"last_rcvd.";

fn client_key(c: ClientUuid) -> Vec<u8> {
    client_prefix(LAST_RCVD, c)
}

/// The clients recorded in `last_rcvd`.
pub fn recorded_clients(v: &ReadView) -> Result<BTreeSet<ClientUuid>, Errno> {
    let end = prefix_end(LAST_RCVD);
    let mut out = BTreeSet::new();
    for (k, _) in v.range(Table::Meta, LAST_RCVD, &end, usize::MAX)? {
        if let Some(b) = k
            .get(LAST_RCVD.len()..)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
        {
            out.insert(u64::from_be_bytes(b));
        }
    }
    Ok(out)
}

/// Writes a client's record (synchronously: a client the MDT acknowledged anything for
/// must be waited for after a crash).
pub async fn record_client(store: &MdStore, client: ClientUuid) -> Result<(), Errno> {
    let k = client_key(client);
    store
        .write_sync(move |tx| tx.put(Table::Meta, &k, &[]))
        .await
}

/// Forgets the records of evicted clients, and the answers saved for them.
pub async fn forget_clients(store: &MdStore, clients: Vec<ClientUuid>) -> Result<(), Errno> {
    if clients.is_empty() {
        return Ok(());
    }
    store
        .write_sync(move |tx| {
            for c in &clients {
                tx.delete(Table::Meta, &client_key(*c))?;
                let from = client_prefix(REPLY_DATA, *c);
                let to = prefix_end(&from);
                let saved = tx.range(Table::Meta, &from, &to, REPLY_SLOTS)?;
                for (k, _) in saved {
                    tx.delete(Table::Meta, &k)?;
                }
            }
            Ok(())
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_at(at: &std::path::Path) -> MdStore {
        let health = nacre_osd::Health::open("test-MDT0000", at).expect("health");
        MdStore::open(at, nacre_osd::MdStoreConfig::default(), health).expect("store")
    }

    /// Saved answers outlive a restart, the newest [`REPLY_SLOTS`] of each client, also
    /// for a client whose UUID starts with 0xff (a key range ending in `prefix` + 0xff
    /// missed those); a forgotten client's go with its record.
    #[tokio::test]
    async fn saved_answers_outlive_a_restart_and_go_with_their_client() {
        let d = tempfile::tempdir().expect("tmp");
        let (a, high) = (0x0123_4567_89ab_cdef_u64, 0xff00_0000_0000_0001_u64);
        let answer = |n: u64| Reply::Tracked {
            transno: n,
            last_committed: 0,
            reply: Box::new(Reply::Ok),
        };
        {
            let store = store_at(d.path());
            let replies = ReplyData::default();
            for c in [a, high] {
                record_client(&store, c).await.expect("record");
                for xid in 100..100 + REPLY_SLOTS as u64 + 10 {
                    let seq = replies.save(c, xid, &answer(xid));
                    persist_reply(&store, c, seq, xid, &answer(xid))
                        .await
                        .expect("persist");
                }
            }
            store.sync().await.expect("sync");
            store.close().await;
        }
        let store = store_at(d.path());
        let v = store.read().expect("read");
        let recorded = recorded_clients(&v).expect("clients");
        assert_eq!(recorded, [a, high].into_iter().collect(), "last_rcvd");
        let loaded = ReplyData::load(&v, &recorded).expect("load");
        let last = 100 + REPLY_SLOTS as u64 + 9;
        for c in [a, high] {
            assert_eq!(loaded.lookup(c, last), Some(answer(last)), "{c:x}");
            assert_eq!(
                loaded.lookup(c, last + 1 - REPLY_SLOTS as u64),
                Some(answer(last + 1 - REPLY_SLOTS as u64))
            );
            assert_eq!(
                loaded.lookup(c, last - REPLY_SLOTS as u64),
                None,
                "older than the ring"
            );
        }
        // The next answer goes after the newest, in the oldest's slot.
        let seq = loaded.save(a, 7, &answer(7));
        assert_eq!(seq, REPLY_SLOTS as u64 + 10);
        drop(v);
        forget_clients(&store, vec![high]).await.expect("forget");
        let v = store.read().expect("read");
        let recorded = recorded_clients(&v).expect("clients");
        assert_eq!(recorded, [a].into_iter().collect());
        let loaded = ReplyData::load(&v, &[a, high].into_iter().collect()).expect("load");
        assert_eq!(loaded.lookup(high, last), None, "forgotten with its client");
        assert_eq!(loaded.lookup(a, last), Some(answer(last)));
        drop(v);
        store.close().await;
    }
}
