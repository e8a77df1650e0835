//! Grants, the client's side (Lustre's `osc_enter_cache` and `osc_reserve_grant`): a
//! write is acknowledged from the cache only when every OST its bytes go to has promised
//! the space (its grant); otherwise it is sent at once and its result (ENOSPC on a full
//! OST) is the write's. So the client never acknowledges a cached write an OST cannot
//! take.
//!
//! Grant comes in write replies: every write asks for what the client would like to hold
//! ([`Client::grant_want`]). Cached bytes take their grant as they are copied in; the OST
//! takes the same bytes off its books when the write arrives. A new connection to an OST
//! is a new export there, holding nothing: what was held on the old one is dropped here too.

use crate::Client;
use parking_lot::Mutex;
use std::collections::HashMap;

/// One OST's grant as this client sees it.
#[derive(Default, Clone, Copy)]
struct OstGrant {
    /// Grant not yet taken by cached bytes (Lustre's `cl_avail_grant`).
    avail: u64,
    /// The import's connection it was given on.
    generation: u64,
}

/// The client's grant at each OST (`osc.*.cur_grant_bytes`).
#[derive(Default)]
pub struct OscGrants {
    by_ost: Mutex<HashMap<u32, OstGrant>>,
}

impl OscGrants {
    /// Takes `need` bytes at each OST `(index, bytes, connection generation)`: all of them,
    /// or none and false.
    pub(crate) fn take(&self, need: &[(u32, u64, u64)]) -> bool {
        let mut m = self.by_ost.lock();
        let fits = need.iter().all(|&(ost, bytes, generation)| {
            m.get(&ost)
                .is_some_and(|g| g.generation == generation && g.avail >= bytes)
        });
        if fits {
            for &(ost, bytes, _) in need {
                if let Some(g) = m.get_mut(&ost) {
                    g.avail -= bytes;
                }
            }
        }
        fits
    }

    /// Grant `bytes` came from OST `ost` on connection `generation`; grant held on an
    /// earlier connection is gone.
    pub(crate) fn add(&self, ost: u32, generation: u64, bytes: u64) {
        let mut m = self.by_ost.lock();
        let g = m.entry(ost).or_default();
        if g.generation != generation {
            *g = OstGrant {
                avail: 0,
                generation,
            };
        }
        g.avail += bytes;
    }

    /// `osc.*.cur_grant_bytes` of OST `ost`.
    pub fn avail(&self, ost: u32) -> u64 {
        self.by_ost.lock().get(&ost).map_or(0, |g| g.avail)
    }
}

impl Client {
    /// The grant this client asks each OST for: its whole dirty budget and an RPC.
    pub(crate) fn grant_want(&self) -> u64 {
        self.tunables
            .max_dirty_bytes()
            .saturating_add(self.tunables.max_rpc_bytes())
    }

    /// Takes the grant a cached write of `len` bytes at `off` through `layout` needs, at
    /// every OST it reaches; false (and nothing taken) when one has not granted enough.
    pub(crate) fn take_grant(&self, layout: &nacre_core::Layout, off: u64, len: u64) -> bool {
        // A mirrored write reaches every mirror's OSTs.
        let copies = if layout.is_mirrored() {
            layout
                .mirror_ids()
                .into_iter()
                .map(|m| layout.mirror(m))
                .collect()
        } else {
            vec![layout.clone()]
        };
        let mut need: Vec<(u32, u64, u64)> = Vec::new();
        let chunks = copies
            .iter()
            .flat_map(|l| crate::io::plan(l, off, len, u64::MAX).chunks);
        for c in chunks {
            let ost = c.obj.ost_idx;
            match need.iter_mut().find(|n| n.0 == ost) {
                Some(n) => n.1 += c.len,
                None => {
                    let Ok(imp) = self.osc(ost) else {
                        return false;
                    };
                    need.push((ost, c.len, imp.generation()));
                }
            }
        }
        self.grants.take(&need)
    }

    /// `osc.*.cur_grant_bytes`: grant held at OST `ost`, not yet taken by cached data.
    pub fn cur_grant_bytes(&self, ost: u32) -> u64 {
        self.grants.avail(ost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_is_taken_all_or_nothing_and_a_new_connection_starts_empty() {
        let g = OscGrants::default();
        assert!(!g.take(&[(0, 1, 1)]), "no grant yet");
        assert!(g.take(&[]), "a write to no OST needs none");
        g.add(0, 1, 100);
        g.add(1, 1, 10);
        assert!(!g.take(&[(0, 50, 1), (1, 20, 1)]));
        assert_eq!((g.avail(0), g.avail(1)), (100, 10), "nothing taken");
        assert!(g.take(&[(0, 50, 1), (1, 10, 1)]));
        assert_eq!((g.avail(0), g.avail(1)), (50, 0));
        // Reconnected: the OST holds nothing for the new export.
        assert!(!g.take(&[(0, 10, 2)]));
        g.add(0, 2, 5);
        assert_eq!(g.avail(0), 5);
    }
}
