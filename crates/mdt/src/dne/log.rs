//! The DNE update log: the two tables that make a distributed operation recoverable.
//!
//! - `DnePending` (participant side), key = coordinator MDT (4 bytes) + operation id
//!   (8 bytes): the updates this MDT prepared for that operation and what undoes them.
//! - `DneCommitted` (coordinator side), key = operation id: an operation that committed
//!   here, with the participants that have not confirmed their commit yet.
//!
//! Operation ids carry the coordinator's boot epoch in their high 24 bits, so an id is
//! never reused, even across restarts, without a write per operation.

use nacre_core::{Errno, Fid};
use nacre_osd::{KvRead, Table, Tx};
use nacre_rpc::msg::DneUpdate;
use serde::{Deserialize, Serialize};

/// Bits of an operation id below the epoch.
pub const OP_SEQ_BITS: u32 = 40;

pub fn op_id(epoch: u64, seq: u64) -> u64 {
    (epoch << OP_SEQ_BITS) | (seq & ((1 << OP_SEQ_BITS) - 1))
}

pub fn op_epoch(op: u64) -> u64 {
    op >> OP_SEQ_BITS
}

/// Updates prepared here for another MDT's operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    pub coord: u32,
    pub op: u64,
    pub updates: Vec<DneUpdate>,
    /// What the undo of each update needs, by its object (see `exec::prepare`): the nlink
    /// a `KillDir` takes away, or that an `AddLink`/`Relink` added its link.
    pub killed: Vec<(Fid, u32)>,
    /// Wall-clock milliseconds when prepared (for the resolver's age test).
    pub since_ms: u64,
}

/// An operation that committed here and still has participants to tell.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Committed {
    pub participants: Vec<u32>,
    pub since_ms: u64,
}

#[derive(Serialize, Deserialize)]
enum PendingRecord {
    V1(Pending),
}

#[derive(Serialize, Deserialize)]
enum CommittedRecord {
    V1(Committed),
}

pub fn pending_key(coord: u32, op: u64) -> [u8; 12] {
    let mut k = [0u8; 12];
    k[..4].copy_from_slice(&coord.to_be_bytes());
    k[4..].copy_from_slice(&op.to_be_bytes());
    k
}

pub fn committed_key(op: u64) -> [u8; 8] {
    op.to_be_bytes()
}

fn corrupt(what: &str) -> Errno {
    tracing::error!(target: "mdt::dne", "corrupt {what} record in the DNE update log");
    Errno::EIO
}

pub fn encode_pending(p: &Pending) -> Result<Vec<u8>, Errno> {
    postcard::to_allocvec(&PendingRecord::V1(p.clone())).map_err(|_| Errno::EIO)
}

pub fn decode_pending(v: &[u8]) -> Result<Pending, Errno> {
    match postcard::from_bytes::<PendingRecord>(v) {
        Ok(PendingRecord::V1(p)) => Ok(p),
        Err(_) => Err(corrupt("pending")),
    }
}

pub fn encode_committed(c: &Committed) -> Result<Vec<u8>, Errno> {
    postcard::to_allocvec(&CommittedRecord::V1(c.clone())).map_err(|_| Errno::EIO)
}

pub fn decode_committed(v: &[u8]) -> Result<Committed, Errno> {
    match postcard::from_bytes::<CommittedRecord>(v) {
        Ok(CommittedRecord::V1(c)) => Ok(c),
        Err(_) => Err(corrupt("committed")),
    }
}

pub fn get_pending<R: KvRead>(r: &mut R, coord: u32, op: u64) -> Result<Option<Pending>, Errno> {
    r.get(Table::DnePending, &pending_key(coord, op))?
        .map(|v| decode_pending(&v))
        .transpose()
}

pub fn put_pending(tx: &mut Tx, p: &Pending) -> Result<(), Errno> {
    tx.put(
        Table::DnePending,
        &pending_key(p.coord, p.op),
        &encode_pending(p)?,
    )
}

/// Every record of a table, in key order (bounded: the log is short in normal running).
pub fn all<R: KvRead>(
    r: &mut R,
    t: Table,
    limit: usize,
) -> Result<nacre_osd::mdstore::KvPairs, Errno> {
    r.range(t, &[], &[0xff; 13], limit)
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_ids_carry_the_epoch() {
        let a = op_id(3, 7);
        assert_eq!(op_epoch(a), 3);
        assert_ne!(op_id(4, 7), a);
        assert!(op_id(4, 0) > op_id(3, (1 << OP_SEQ_BITS) - 1));
    }

    #[test]
    fn records_round_trip() {
        let p = Pending {
            coord: 2,
            op: op_id(1, 9),
            updates: vec![DneUpdate::KillDir {
                fid: Fid::ROOT,
                now: Default::default(),
            }],
            killed: vec![(Fid::ROOT, 3)],
            since_ms: 5,
        };
        assert_eq!(decode_pending(&encode_pending(&p).expect("enc")), Ok(p));
        let c = Committed {
            participants: vec![1, 3],
            since_ms: 1,
        };
        assert_eq!(decode_committed(&encode_committed(&c).expect("enc")), Ok(c));
        assert!(decode_pending(&[1, 2, 3]).is_err());
        assert!(pending_key(1, 2) < pending_key(2, 1));
    }
}
