//! Striped-directory layouts (LMVs) and their default templates as stored: decoded ones
//! encode and decode back to themselves, and every name maps to one of the stripes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nacre_core::lmv::{HashType, Lmv, LmvTemplate};

fuzz_target!(|data: &[u8]| {
    if let Ok((lmv, name)) = postcard::take_from_bytes::<Lmv>(data) {
        let enc = postcard::to_allocvec(&lmv).expect("re-encode");
        assert_eq!(postcard::from_bytes::<Lmv>(&enc).ok().as_ref(), Some(&lmv));
        match lmv.stripe_for(name) {
            Some(s) => assert!(lmv.stripes.contains(&s)),
            None => assert!(lmv.stripes.is_empty()),
        }
    }
    if let Ok(t) = postcard::from_bytes::<LmvTemplate>(data) {
        let enc = postcard::to_allocvec(&t).expect("re-encode");
        assert_eq!(postcard::from_bytes::<LmvTemplate>(&enc).ok(), Some(t));
    }
    if let Some((&count, name)) = data.split_first() {
        let count = u32::from(count);
        for h in [
            HashType::None,
            HashType::Fnv1a64,
            HashType::AllChar,
            HashType::Crush,
            HashType::Crush2,
        ] {
            let i = h.stripe_index(name, count);
            assert!(
                i < count.max(1),
                "{h:?} put {name:?} in stripe {i} of {count}"
            );
        }
    }
});
