//! FIDs for objects this MDT creates on other MDTs (and for its own objects of a
//! distributed operation, which must be named before anything is created).
//!
//! As Lustre's OSP does for remote objects, the coordinator allocates the FIDs itself from
//! a sequence the target MDT granted it, so it knows every FID of a striped directory
//! before it sends the first create, and a create resent after a lost reply names the
//! same object. The sequence lies in the target's super-sequence, so the FID routes to
//! the target like any other (the FLD for metadata is the super-sequence arithmetic).
//!
//! Persistence: `Meta["dne.pool.<mdt>"]` = sequence (8 bytes LE) + reserved oid limit
//! (4 bytes LE). FIDs are handed out only below a limit already committed, [`POOL_BATCH`]
//! at a time, so a restart never hands out a FID twice (it skips the unused rest).

use crate::Mdt;
use crate::mdd;
use nacre_core::fid::METADATA_SEQ_WIDTH;
use nacre_core::{Errno, Fid};
use nacre_osd::Table;
use nacre_rpc::msg::{Reply, Request};

/// Oids reserved per store transaction.
pub const POOL_BATCH: u32 = 1024;

/// The FIDs this MDT may allocate on one target MDT.
#[derive(Clone, Copy, Debug, Default)]
pub struct FidPool {
    pub seq: u64,
    pub next: u32,
    /// Committed bound: oids below it may be used.
    pub limit: u32,
}

fn key(mdt: u32) -> Vec<u8> {
    format!("dne.pool.{mdt}").into_bytes()
}

fn encode(seq: u64, limit: u32) -> [u8; 12] {
    let mut v = [0u8; 12];
    v[..8].copy_from_slice(&seq.to_le_bytes());
    v[8..].copy_from_slice(&limit.to_le_bytes());
    v
}

fn decode(v: &[u8]) -> Option<(u64, u32)> {
    if v.len() != 12 {
        return None;
    }
    Some((
        u64::from_le_bytes(v[..8].try_into().ok()?),
        u32::from_le_bytes(v[8..].try_into().ok()?),
    ))
}

impl Mdt {
    /// `n` new FIDs on MDT `target`.
    pub(crate) async fn dne_alloc_fids(&self, target: u32, n: usize) -> Result<Vec<Fid>, Errno> {
        let mut pools = self.dne.pools.lock().await;
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let mut p = match pools.get(&target) {
                Some(p) => *p,
                None => {
                    let stored = self
                        .store
                        .read()?
                        .get(Table::Meta, &key(target))?
                        .and_then(|v| decode(&v));
                    match stored {
                        // Resume past everything reserved before the restart.
                        Some((seq, limit)) => FidPool {
                            seq,
                            next: limit,
                            limit,
                        },
                        None => FidPool::default(),
                    }
                }
            };
            if p.seq == 0 || p.next >= METADATA_SEQ_WIDTH {
                p = FidPool {
                    seq: self.dne_new_seq(target).await?,
                    next: 1,
                    limit: 1,
                };
            }
            if p.next >= p.limit {
                let limit = p.next.saturating_add(POOL_BATCH).min(METADATA_SEQ_WIDTH);
                let (k, v) = (key(target), encode(p.seq, limit));
                self.store
                    .write(move |tx| tx.put(Table::Meta, &k, &v))
                    .await?;
                p.limit = limit;
            }
            while out.len() < n && p.next < p.limit {
                out.push(Fid::new(p.seq, p.next, 0));
                p.next += 1;
            }
            pools.insert(target, p);
        }
        Ok(out)
    }

    /// A fresh sequence of MDT `target` for this MDT to allocate from.
    async fn dne_new_seq(&self, target: u32) -> Result<u64, Errno> {
        if target == self.index {
            let me = self.index;
            return self.store.write(move |tx| grant_seq(tx, me, me)).await;
        }
        match self
            .dne_proxy(target)?
            .call(&Request::DneSeqGrant { to: self.index })
            .await
        {
            Ok(Reply::Seq(s)) => Ok(s),
            Ok(_) => Err(Errno::EPROTO),
            Err(e) => Err(e.errno()),
        }
    }
}

/// Takes a sequence of MDT `me`'s super-sequence for MDT `to`, recorded in the FLD.
pub fn grant_seq(tx: &mut nacre_osd::Tx, me: u32, to: u32) -> Result<u64, Errno> {
    let s = mdd::alloc_seq(tx, me)?;
    tx.put(
        Table::Fld,
        &s.to_be_bytes(),
        format!("MDT{me:04x} for MDT{to:04x}").as_bytes(),
    )?;
    Ok(s)
}
