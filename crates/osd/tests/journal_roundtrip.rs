//! The redo journal's records: what is appended replays as written, and a journal cut or
//! damaged anywhere replays an intact prefix of it, never more.

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

fn records() -> impl Strategy<Value = Vec<(u64, Vec<Mutation>)>> {
    prop::collection::vec(
        (any::<u64>(), prop::collection::vec(mutation(), 0..5)),
        0..6,
    )
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
