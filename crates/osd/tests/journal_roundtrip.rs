//! The redo journal's records: what is appended replays as written, a journal cut or
//! damaged anywhere replays an intact prefix of it, never more, and older records behind
//! the newest (what a checkpoint leaves when the journal starts over) are never replayed.

use nacre_osd::journal::{Mutation, encode_record, parse};
use proptest::prelude::*;

fn mutation() -> impl Strategy<Value = Mutation> {
    let bytes = || prop::collection::vec(any::<u8>(), 0..64);
    prop_oneof![
        (any::<u8>(), bytes(), bytes()).prop_map(|(table, key, val)| Mutation::Put {
            table,
            key,
            val
        }),
        (any::<u8>(), bytes()).prop_map(|(table, key)| Mutation::Del { table, key }),
    ]
}

/// Records as the store writes them: transaction numbers only grow.
fn records() -> impl Strategy<Value = Vec<(u64, Vec<Mutation>)>> {
    (
        0u64..u64::MAX / 2,
        prop::collection::vec(
            (1u64..1 << 20, prop::collection::vec(mutation(), 0..5)),
            0..6,
        ),
    )
        .prop_map(|(start, recs)| {
            let mut t = start;
            recs.into_iter()
                .map(|(step, m)| {
                    t += step;
                    (t, m)
                })
                .collect()
        })
}

fn journal(recs: &[(u64, Vec<Mutation>)]) -> Vec<u8> {
    recs.iter()
        .flat_map(|(t, m)| encode_record(*t, m).expect("encode"))
        .collect()
}

proptest! {
    #[test]
    fn records_replay_as_written(recs in records()) {
        let data = journal(&recs);
        let (back, intact) = parse(&data);
        prop_assert_eq!(intact, data.len() as u64);
        prop_assert_eq!(back, recs);
    }

    /// What a checkpoint left behind the new records (older numbers) is never replayed.
    #[test]
    fn older_records_behind_newer_ones_end_the_replay(
        recs in records(),
        old in records(),
    ) {
        prop_assume!(!recs.is_empty() && !old.is_empty());
        let last = recs.last().map_or(0, |r| r.0);
        let stale: Vec<(u64, Vec<Mutation>)> = old
            .into_iter()
            .map(|(t, m)| (t % last.max(1), m))
            .collect();
        let mut data = journal(&recs);
        let end = data.len() as u64;
        data.extend(journal(&stale));
        let (back, intact) = parse(&data);
        prop_assert_eq!(intact, end);
        prop_assert_eq!(back, recs);
    }

    #[test]
    fn a_cut_journal_replays_a_prefix(recs in records(), cut in any::<prop::sample::Index>()) {
        let data = journal(&recs);
        let n = cut.index(data.len() + 1);
        let (back, intact) = parse(&data[..n]);
        prop_assert!(intact <= n as u64);
        prop_assert_eq!(&back[..], &recs[..back.len()]);
        prop_assert_eq!(journal(&back).len() as u64, intact);
    }

    #[test]
    fn a_damaged_journal_replays_a_prefix(
        recs in records(),
        at in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let mut data = journal(&recs);
        prop_assume!(!data.is_empty());
        let i = at.index(data.len());
        data[i] ^= 1 << bit;
        let (back, intact) = parse(&data);
        prop_assert!(intact <= i as u64);
        prop_assert_eq!(&back[..], &recs[..back.len()]);
    }
}
