//! The DNE update log's pending and committed records: decoded records encode and decode
//! back to themselves.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nacre_mdt::dne::log::{decode_committed, decode_pending, encode_committed, encode_pending};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = decode_pending(data) {
        let enc = encode_pending(&p).expect("re-encode");
        assert_eq!(decode_pending(&enc), Ok(p));
    }
    if let Ok(c) = decode_committed(data) {
        let enc = encode_committed(&c).expect("re-encode");
        assert_eq!(decode_committed(&enc), Ok(c));
    }
});
