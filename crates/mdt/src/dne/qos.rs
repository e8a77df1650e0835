//! MDT space balancing for `lfs mkdir -i -1` and defaults with `-i -1` (Lustre's MDT QoS,
//! `lustre-reference.md` §4.4): round-robin while the MDTs' free space and inodes are
//! within `qos_threshold_rr` of each other, otherwise a random choice weighted by what
//! each MDT has free, so the emptier MDTs fill first.

/// `lmv.*.qos_threshold_rr` / `lod.*.mdt_qos_threshold_rr` default, percent.
pub const QOS_THRESHOLD_RR: u64 = 5;
/// `qos_prio_free` default, percent: the weight of free space against free inodes.
pub const QOS_PRIO_FREE: u64 = 90;
/// `qos_maxage`: statfs results older than this are refreshed, seconds.
pub const QOS_MAXAGE_SECS: u64 = 5;

/// What one MDT has free.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MdtSpace {
    pub index: u32,
    /// Free bytes.
    pub bavail: u64,
    /// Free inodes.
    pub ffree: u64,
}

/// Round-robin position of one chooser.
#[derive(Debug, Default)]
pub struct QosState {
    pub rr_next: u32,
}

/// How far apart the most and least free MDTs are, in percent of the most free, taking
/// the larger of the space and inode spreads.
pub fn spread_pct(mdts: &[MdtSpace]) -> u64 {
    let pct = |f: &dyn Fn(&MdtSpace) -> u64| {
        let max = mdts.iter().map(f).max().unwrap_or(0);
        let min = mdts.iter().map(f).min().unwrap_or(0);
        if max == 0 {
            0
        } else {
            ((u128::from(max - min) * 100) / u128::from(max)) as u64
        }
    };
    pct(&|m| m.bavail).max(pct(&|m| m.ffree))
}

/// The weight of an MDT: free space and free inodes, mixed by `prio_free`, each as a
/// share of the total so neither unit dominates.
fn weights(mdts: &[MdtSpace], prio_free: u64) -> Vec<u128> {
    let tb: u128 = mdts
        .iter()
        .map(|m| u128::from(m.bavail))
        .sum::<u128>()
        .max(1);
    let ti: u128 = mdts
        .iter()
        .map(|m| u128::from(m.ffree))
        .sum::<u128>()
        .max(1);
    const SCALE: u128 = 1 << 32;
    mdts.iter()
        .map(|m| {
            let s = u128::from(m.bavail) * SCALE / tb;
            let i = u128::from(m.ffree) * SCALE / ti;
            (s * u128::from(prio_free) + i * u128::from(100 - prio_free.min(100))) / 100
        })
        .collect()
}

/// Picks an MDT among `mdts` (those that answered statfs). `random` is a uniform value
/// supplied by the caller, so the choice is testable.
pub fn choose(mdts: &[MdtSpace], threshold_rr: u64, st: &mut QosState, random: u64) -> Option<u32> {
    if mdts.is_empty() {
        return None;
    }
    if spread_pct(mdts) < threshold_rr {
        let pick = mdts[(st.rr_next as usize) % mdts.len()].index;
        st.rr_next = st.rr_next.wrapping_add(1);
        return Some(pick);
    }
    let w = weights(mdts, QOS_PRIO_FREE);
    let total: u128 = w.iter().sum();
    if total == 0 {
        return Some(mdts[0].index);
    }
    let mut r = u128::from(random) % total;
    for (m, w) in mdts.iter().zip(&w) {
        if r < *w {
            return Some(m.index);
        }
        r -= w;
    }
    mdts.last().map(|m| m.index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(index: u32, bavail: u64, ffree: u64) -> MdtSpace {
        MdtSpace {
            index,
            bavail,
            ffree,
        }
    }

    #[test]
    fn balanced_mdts_take_turns() {
        let mdts = [m(0, 1000, 1000), m(1, 990, 1000), m(2, 1000, 995)];
        let mut st = QosState::default();
        let picks: Vec<u32> = (0..6)
            .map(|r| choose(&mdts, QOS_THRESHOLD_RR, &mut st, r).expect("pick"))
            .collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn unbalanced_mdts_favour_the_emptier() {
        let mdts = [m(0, 100, 100), m(1, 1000, 1000)];
        assert!(spread_pct(&mdts) >= QOS_THRESHOLD_RR);
        let mut st = QosState::default();
        let mut hits = [0u32; 2];
        let mut x: u64 = 88172645463325252;
        for _ in 0..10_000 {
            // xorshift64
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            hits[choose(&mdts, QOS_THRESHOLD_RR, &mut st, x).expect("pick") as usize] += 1;
        }
        // Weights 1:10, so MDT1 gets about 91%.
        assert!(hits[1] > 8500 && hits[1] < 9600, "{hits:?}");
    }

    #[test]
    fn nothing_to_choose_from() {
        assert_eq!(choose(&[], 5, &mut QosState::default(), 1), None);
        assert_eq!(spread_pct(&[]), 0);
    }
}
